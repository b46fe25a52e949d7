"""The registry of seed figures and tables that the lab reproduces (`protolab reproduce`).

Each entry (`base.Figure`) names its spec in `specs/`, a `--quick` variant (overrides merged into
the spec: fewer pages, repetitions or sweep points), the rows it is judged on (`source`: runs,
fairness pairs, overhead factors...), the paper's numbers as printed, and the claims with the
interval each is expected in. The claims are the seed's own statements; where a seed gives only
a direction, so does the claim. protolab's own expectations judged beside them (what our model or
setup implies, never the seed's) are claims with `whose = "protolab"`, shown so in `--list`, the
verdict tables and the atlas. One module per seed (or group of seeds); the registry is their
union, in this order.
"""

from __future__ import annotations

from protolab.reproduce.figures import (
    seed000_nat,
    seed000_passive,
    seed000_wifi,
    seed001,
    seed002,
    seed002_cellular,
    seed003,
    seed004,
    transport,
)
from protolab.reproduce.figures.base import PAGES_QUICK, Explanation, Figure, merged, plt_ratio

FIGURES: tuple[Figure, ...] = (*seed001.FIGURES, *seed002.FIGURES, *seed002_cellular.FIGURES, *transport.FIGURES,
                               *seed000_passive.FIGURES, *seed000_nat.FIGURES,
                               *seed000_wifi.FIGURES, *seed003.FIGURES, *seed004.FIGURES)

REGISTRY: dict[str, Figure] = {figure.id: figure for figure in FIGURES}
if len(REGISTRY) != len(FIGURES):
    raise RuntimeError("two registry entries share an id")

__all__ = ["FIGURES", "PAGES_QUICK", "REGISTRY", "Explanation", "Figure", "merged", "plt_ratio"]
