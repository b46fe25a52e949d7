"""The `traffic-corpus` scenario (issue 11, 000 ch. 3): page loads in every protocol mode over
several link conditions, meant to run with the client's capture on (`[artifacts] pcap = true`),
so that `protolab traffic corpus` turns the captures into flows labelled with the lab's exact
truth (docs/traffic.md, "Lab corpus")."""

from __future__ import annotations

from typing import Any, ClassVar

from protolab.scenarios.builtin import FIVE_PAGES, Bottleneck


class TrafficCorpus(Bottleneck):
    """One bottleneck; every page-load mode, several rates, RTTs and loss rates."""

    name = "traffic-corpus"
    source = "000 ch. 3 (labelled flows for the HTTP-version classifier)"
    description = "page loads in every mode over several links, captured: labelled flow datasets"
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [2, 10, 50],
        "rtt_ms": [20, 100],
        "loss_pct": [0, 1],
        "buffer": ["1bdp"],
        "mode": ["h1c", "h1", "h2", "h2-parallel:2", "h2-mptcp", "h3", "h3-parallel:2"],
        "page": FIVE_PAGES,
    }
