"""000 Fig. 6.4 as a directed graph: the controller's states (nodes, with the share of time in
each) and the transitions between them (edges, with how often each was taken), summed over the
runs of one controller. 000 printed only the time shares; the counts are protolab's addition.

`state_graph` is pure (rows in, numbers out); `draw_state_graph` draws it with matplotlib (no
graphviz on the machine): the states on a circle, one curved arrow per transition so that the
two directions between a pair of states stay apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes

from protolab.measure.transport import STATES

SHORT_NAMES = {"slow_start": "slow start", "conservative_slow_start": "conservative\nslow start",
               "congestion_avoidance": "congestion\navoidance", "recovery": "recovery",
               "application_limited": "application-\nlimited"}


@dataclass(frozen=True)
class StateGraph:
    """The states and transitions of a set of runs: per state its median share of the time over
    the runs; per (from, to) the transitions over all runs and their mean per run."""

    runs: int
    time_shares: dict[str, float]
    transitions: dict[tuple[str, str], int]

    def per_run(self, edge: tuple[str, str]) -> float:
        return self.transitions.get(edge, 0) / self.runs if self.runs else 0.0

    def states(self) -> list[str]:
        """The states that were visited or held time, in the controller's order."""
        seen = {s for edge in self.transitions for s in edge} | {s for s, v in self.time_shares.items() if v > 0}
        return [s for s in STATES if s in seen] + sorted(seen - set(STATES))


def state_graph(rows: Sequence[Mapping[str, Any]]) -> StateGraph:
    """The graph of the rows (each a run with `transitions` {"from->to": count} and
    `frac_<state>` shares, as the `controller_states` source gives them)."""
    transitions: dict[tuple[str, str], int] = {}
    runs = [r for r in rows if isinstance(r.get("transitions"), Mapping)]
    for row in runs:
        for key, count in row["transitions"].items():
            source, _, target = str(key).partition("->")
            if target and isinstance(count, int):
                transitions[(source, target)] = transitions.get((source, target), 0) + count
    shares = {}
    for state in STATES:
        values = [float(r[f"frac_{state}"]) for r in runs if isinstance(r.get(f"frac_{state}"), int | float)]
        if values:
            shares[state] = float(np.median(values))
    return StateGraph(runs=len(runs), time_shares=shares, transitions=transitions)


def node_positions(states: Sequence[str]) -> dict[str, tuple[float, float]]:
    """The states on the unit circle, the first at the top, clockwise."""
    n = max(len(states), 1)
    return {s: (math.sin(2 * math.pi * i / n), math.cos(2 * math.pi * i / n)) for i, s in enumerate(states)}


def draw_state_graph(ax: Axes, graph: StateGraph, title: str) -> None:
    """The graph on `ax`: nodes labelled with their state and median share of time, arrows
    labelled with the transitions' total over the runs and their mean per run."""
    positions = node_positions(graph.states())
    for state, (x, y) in positions.items():
        share = graph.time_shares.get(state)
        label = SHORT_NAMES.get(state, state) + (f"\n{100 * share:.1f}%" if share is not None else "")
        ax.text(x, y, label, ha="center", va="center", fontsize=7, zorder=3,
                bbox={"boxstyle": "round,pad=0.4", "facecolor": "#e8f0fa", "edgecolor": "#1f77b4"})
    heaviest = max(graph.transitions.values(), default=1)
    for (source, target), count in sorted(graph.transitions.items()):
        if source not in positions or target not in positions:
            continue
        (x0, y0), (x1, y1) = positions[source], positions[target]
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), zorder=2,
                    arrowprops={"arrowstyle": "-|>", "color": "#444444", "shrinkA": 22, "shrinkB": 22,
                                "linewidth": 0.6 + 2.4 * count / heaviest, "connectionstyle": "arc3,rad=0.18"})
        # The label sits off the chord on the arc's side (arc3 bends to the right of the direction).
        mx, my = (x0 + x1) / 2, (y0 + y1) / 2
        nx, ny = (y1 - y0) * 0.12, -(x1 - x0) * 0.12
        ax.text(mx + nx, my + ny, f"{count} ({graph.per_run((source, target)):.1f}/run)", ha="center",
                va="center", fontsize=6, color="#222222", zorder=4,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.8})
    ax.set_xlim(-1.5, 1.5)
    ax.set_ylim(-1.4, 1.4)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"{title} ({graph.runs} runs)", fontsize=9)
