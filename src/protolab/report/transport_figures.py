"""Figures of the transport sections of the report: throughput against a swept parameter,
throughput over time, congestion windows of several senders on one time axis, controller-state
fractions, and the shares of two competing clients."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from protolab.report.figures import PALETTE, RC, _grid, _new_figure

STATE_COLORS = {
    "slow_start": "#2ca02c",
    "conservative_slow_start": "#98df8a",
    "congestion_avoidance": "#1f77b4",
    "recovery": "#d62728",
    "application_limited": "#bbbbbb",
    "unknown": "#eeeeee",
}


def series_colors(names: Sequence[str]) -> dict[str, str]:
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def sweep_figure(panels: Sequence[tuple[str, str, dict[str, list[tuple[float, float, float, float]]]]]) -> Figure:
    """One panel per swept parameter: median goodput (with min-max whiskers) against the
    parameter, a line per series. Points are (x, median, low, high)."""
    names = sorted({s for _, _, series in panels for s in series})
    colors = series_colors(names)
    rows, cols = _grid(len(panels), 3)
    fig = _new_figure(4.0 * cols, 0.8 + 2.8 * rows)
    with rc_context(RC):
        axes = fig.subplots(rows, cols, squeeze=False)
        for ax, (title, xlabel, series) in zip(axes.flat, panels):
            for name, points in series.items():
                points = sorted(points)
                x = [p[0] for p in points]
                y = [p[1] for p in points]
                err = [[p[1] - p[2] for p in points], [p[3] - p[1] for p in points]]
                ax.errorbar(x, y, yerr=err, marker="o", color=colors[name], label=name, capsize=2)
            ax.set_title(title)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("goodput (Mbit/s)")
            ax.set_ylim(bottom=0)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        handles = [Line2D([], [], color=colors[n], marker="o", label=n) for n in names]
        fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 6), frameon=False)
    return fig


def timeline_figure(panels: Sequence[tuple[str, dict[str, tuple[np.ndarray, np.ndarray]]]], ylabel: str) -> Figure:
    """Lines over time (s), one panel per title; every panel shares its series' colors."""
    names = sorted({s for _, series in panels for s in series})
    colors = series_colors(names)
    rows, cols = _grid(len(panels), 2)
    fig = _new_figure(5.5 * cols, 0.8 + 2.6 * rows)
    with rc_context(RC):
        axes = fig.subplots(rows, cols, squeeze=False)
        for ax, (title, series) in zip(axes.flat, panels):
            for name, (t, y) in series.items():
                ax.plot(t, y, color=colors[name], linewidth=1.0, label=name, drawstyle="steps-post")
            ax.set_title(title)
            ax.set_xlabel("time (s)")
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        handles = [Line2D([], [], color=colors[n], label=n) for n in names]
        fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 6), frameon=False)
    return fig


def state_fractions_figure(rows: Sequence[tuple[str, dict[str, float]]], states: Sequence[str]) -> Figure:
    """Horizontal stacked bars: the share of time in each controller state, one bar per label."""
    fig = _new_figure(9.0, 0.9 + 0.28 * max(len(rows), 1))
    with rc_context(RC):
        ax = fig.subplots()
        y = np.arange(len(rows))
        left = np.zeros(len(rows))
        for state in states:
            widths = np.array([fractions.get(state, 0.0) for _, fractions in rows])
            ax.barh(y, widths, left=left, color=STATE_COLORS.get(state, "#999999"), edgecolor="white", label=state)
            left += widths
        ax.set_yticks(y, [label for label, _ in rows])
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of the connection's time")
        fig.legend(loc="outside upper center", ncols=3, frameon=False)
    return fig


def shares_figure(rows: Sequence[tuple[str, str, str, float, float]]) -> Figure:
    """Per pair: the mean throughput share of side a and side b (bars summing to 1)."""
    fig = _new_figure(9.0, 0.9 + 0.32 * max(len(rows), 1))
    with rc_context(RC):
        ax = fig.subplots()
        y = np.arange(len(rows))
        share_a = np.array([r[3] for r in rows])
        share_b = np.array([r[4] for r in rows])
        ax.barh(y, share_a, color=PALETTE[0], edgecolor="white", label="side a")
        ax.barh(y, share_b, left=share_a, color=PALETTE[1], edgecolor="white", label="side b")
        for i, (_, a, b, sa, sb) in enumerate(rows):
            if math.isfinite(sa) and sa > 0.08:
                ax.text(sa / 2, i, f"{a} {sa:.0%}", ha="center", va="center", color="white", fontsize=8)
            if math.isfinite(sb) and sb > 0.08:
                ax.text(sa + sb / 2, i, f"{b} {sb:.0%}", ha="center", va="center", color="white", fontsize=8)
        ax.axvline(0.5, color="black", linewidth=0.8, linestyle="--")
        ax.set_yticks(y, [r[0] for r in rows])
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of the bottleneck while both received (mean over repetitions)")
    return fig


def tree_figure(tree: object, feature_names: Sequence[str], class_names: Sequence[str]) -> Figure:
    """A fitted scikit-learn decision tree, drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from sklearn.tree import plot_tree

    fig = _new_figure(11.0, 5.5)
    FigureCanvasAgg(fig)  # plot_tree measures its text boxes with a renderer
    with rc_context(RC):
        ax = fig.subplots()
        plot_tree(tree, feature_names=list(feature_names), class_names=list(class_names), filled=True, rounded=True,
                  impurity=False, proportion=False, fontsize=7, ax=ax)
    return fig
