"""What a registry entry is: a seed figure or table, the spec that reproduces it, the claims it
is judged by, and what the seed printed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from protolab.reproduce.claims import PROTOLAB, Claim, Ratio

PAGES_QUICK = ["vk", "instagram", "amazon"]


@dataclass(frozen=True)
class Explanation:
    """Why a claim does not hold (or stays undecided) here, found by a run that varied the suspected
    factor."""

    claim: str  # the claim's statement ("" : the figure as a whole)
    cause: str
    evidence: str  # the measured figures that show it
    command: str = ""  # how to rerun the measurement


@dataclass(frozen=True)
class Figure:
    """One result figure or table of a seed.

    `spec` names a file in `specs/`; `quick` is merged into it for `--quick`. `source` names the
    rows the claims are judged on (reproduce.data.SOURCES). `budget` is the most repetitions per
    cell an adaptive run may spend before a claim is "inconclusive at budget" (0: the spec's
    repetitions, no adaptation). `not_runnable` says why the figure cannot run on this machine
    (empty: it can); `substitute` names the registry entry that answers the same question here.
    `explanations` record why claims that do not hold fail, each with its measurement.
    `companions` name further specs whose runs go into the same store and whose rows join the
    figure's, every row tagged with its spec's name (`experiment`), so that a claim can compare
    what one spec cannot hold (004 Fig. 15 vs 13: one server host against two is a different
    lab topology); they run with the figure's quick overrides and repetitions.
    `after_run` names a step between the runs and the judging: "corpus" turns the runs'
    captures into labelled flows in the store (`traffic.corpus`), which the passive sources
    (000 ch. 3-4, reproduce.passive) analyse; "nat-corpus" makes the NAT corpus instead of
    running the spec (000 §4.2.3: the spec gives its pages, modes, link, seed and rounds).
    """

    id: str
    title: str
    seed: str
    spec: str
    source: str  # "runs", "pairs", "overhead", "rpm", ...
    claims: tuple[Claim, ...]
    quick: dict[str, Any] = field(default_factory=dict)
    paper: tuple[tuple[str, str], ...] = ()
    note: str = ""
    budget: int = 0
    quick_budget: int = 0
    not_runnable: str = ""
    substitute: str = ""
    explanations: tuple[Explanation, ...] = ()
    drawing: str = ""  # how the atlas draws ours (a name in its drawing registry; "": the source's default)
    companions: tuple[str, ...] = ()  # further specs in `specs/` whose rows join the figure's
    after_run: str = ""  # "corpus": build the labelled flow corpus from the captures before judging;
    # "nat-corpus": instead of the spec's runs, make the NAT corpus the spec describes (traffic.nat_corpus)


def claims_label(figure: Figure) -> str:
    """How many claims a figure has, and how many of them are protolab's ("5 (3 protolab's)")."""
    ours = sum(c.whose == PROTOLAB for c in figure.claims)
    return f"{len(figure.claims)} ({ours} protolab's)" if ours else str(len(figure.claims))


def plt_ratio(num: dict[str, Any], den: dict[str, Any], statistic: str = "median") -> Ratio:
    """median (or mean, `statistic`) PLT of `num` over `den`, per page."""
    return Ratio("plt_ms", num, den, by="page", statistic=statistic)


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with `override` merged in: tables merge key by key, anything else replaces."""
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result
