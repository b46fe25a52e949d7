"""How the atlas draws our side of a figure: a registry of drawings, keyed by `Figure.drawing`
or, when a figure names none, by its row source (`Figure.source`).

A drawing maps the rows a figure is judged on (reproduce.data) to a matplotlib figure drawn the
way the seed drew it: box plots of PLT per mode and condition for page-load runs, the shares of
each side for fairness pairs, the speed-up per page over H2, the summed congestion window over
a load. A helper whose figures need their own drawing registers it with `register`; a source
with no drawing gets none (the atlas still shows the verdicts and their intervals, drawn by
`claims_figure`). Drawings reuse the report's plotting helpers (protolab.report.figures).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure

from protolab.measure.flows import jain_index
from protolab.reproduce.estimators import configuration_improvements, ranked_sites
from protolab.reproduce.figures import Figure
from protolab.reproduce.state_graph import draw_state_graph, state_graph
from protolab.reproduce.wifi_trees import TREE_DEPTH
from protolab.report.decision_tree import FEATURES_000, fit_tree
from protolab.report.figures import RC, connections_figure, mode_colors, plt_boxplots, speedup_figure

Row = dict[str, Any]
# Columns that tell one condition from another in page-load runs; the panel title names those
# that vary.
CONDITION_KEYS = ("bandwidth_mbps", "rtt_ms", "loss_pct", "buffer_bytes", "congested", "quic_cc", "tcp_cc")
CONDITION_UNITS = {"bandwidth_mbps": " Mbit/s", "rtt_ms": " ms RTT", "loss_pct": "% loss", "buffer_bytes": " kB buffer"}
CONDITION_SCALE = {"buffer_bytes": 1e-3}


@dataclass(frozen=True)
class DrawingInput:
    """What a drawing may use: the judged rows, and per run the server's window timeline
    (run_key -> (seconds since the load's start, summed window in bytes)) when the source has one."""

    figure: Figure
    rows: Sequence[Row]
    timelines: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


Drawing = Callable[[DrawingInput], MplFigure | None]
DRAWINGS: dict[str, Drawing] = {}


def register(name: str) -> Callable[[Drawing], Drawing]:
    """Register a drawing under `name` (a `Figure.drawing` value or a row source)."""

    def add(drawing: Drawing) -> Drawing:
        DRAWINGS[name] = drawing
        return drawing

    return add


def drawing_for(figure: Figure) -> Drawing | None:
    return DRAWINGS.get(figure.drawing or figure.source) or DRAWINGS.get(figure.source)


@contextmanager
def _panels(count: int, panel_size: tuple[float, float], columns: int | None = None,
            extra_height: float = 0.0) -> Iterator[tuple[MplFigure, list[Axes]]]:
    """A figure of `count` (>= 1) panels, each `panel_size` (width, height) inches, `columns` to a row
    (default: one row), grid cells past `count` hidden; yields it with its panels in reading
    order. The body draws inside the report's style (RC): matplotlib applies it as artists are
    made, so the drawing belongs inside the `with`. `extra_height` inches are added for what
    spans the panels (titles)."""
    columns = count if columns is None else min(columns, count)
    rows = math.ceil(count / columns)
    with rc_context(RC):
        fig = MplFigure(figsize=(panel_size[0] * columns, panel_size[1] * rows + extra_height), layout="constrained")
        axes = list(fig.subplots(rows, columns, squeeze=False).ravel())
        for ax in axes[count:]:
            ax.set_visible(False)
        yield fig, axes[:count]


def _ordered(values: Sequence[Any]) -> list[Any]:
    """Distinct values in first-seen order."""
    return list(dict.fromkeys(v for v in values if v is not None))


# The seeds' order of the modes (001's figures: H1, H2, H2-Parallel, H2-MP, QUIC).
MODE_ORDER = ("h1c", "h1", "h2", "h2-parallel", "h2-mptcp", "h3", "h3-parallel")


def _modes(rows: Sequence[Row]) -> list[str]:
    """The modes of the rows, in the seeds' order (by family; unknown ones last, as seen)."""
    seen = _ordered([r.get("mode") for r in rows])
    family = {mode: str(mode).split(":")[0].split("@")[0] for mode in seen}
    return sorted(seen, key=lambda m: MODE_ORDER.index(family[m]) if family[m] in MODE_ORDER else len(MODE_ORDER))


def _condition_title(row: Row, varying: Sequence[str]) -> str:
    parts = []
    for key in varying:
        value = row.get(key)
        if key == "congested":
            parts.append("congested" if value else "not congested")
        else:
            parts.append(f"{value * CONDITION_SCALE.get(key, 1):g}{CONDITION_UNITS[key]}"
                         if isinstance(value, int | float) and key in CONDITION_UNITS
                         else f"{key} {value}")
    return ", ".join(parts) or "all runs"


def conditions(rows: Sequence[Row]) -> tuple[list[str], dict[str, list[Row]]]:
    """The condition keys that vary across the rows, and the rows per condition title."""
    varying = [k for k in CONDITION_KEYS if len({str(r.get(k)) for r in rows}) > 1]
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(_condition_title(row, varying), []).append(row)
    return varying, grouped


@register("runs")
def plt_boxes(data: DrawingInput) -> MplFigure | None:
    """001 Figs. 5a-b, 6a-b: box plots of PLT over all pages, one box per mode, a panel per
    condition; bulk runs (no PLT): the same of their goodput."""
    metric, scale, label = "plt_ms", 1 / 1000, None
    rows = [r for r in data.rows if isinstance(r.get(metric), int | float)]
    if not rows:
        metric, scale, label = "goodput_mbps", 1.0, "goodput (Mbit/s)"
        rows = [r for r in data.rows if isinstance(r.get(metric), int | float)]
    if not rows:
        return None
    modes = _modes(rows)
    _, grouped = conditions(rows)
    panels = []
    for title, group in grouped.items():
        cells: dict[tuple[str, str], list[float]] = {}
        for row in group:
            cells.setdefault(("all pages", row["mode"]), []).append(row[metric] * scale)  # the pooled box's key
        panels.append((title, cells))
    fig = plt_boxplots(panels, ["all pages"], modes, pooled=True)
    if label is not None:
        for ax in fig.axes:
            ax.set_ylabel(label)
            ax.set_xticks([0], ["all runs"])
    return fig


@register("overhead")
def overhead_boxes(data: DrawingInput) -> MplFigure | None:
    """003 ch. 7: the overhead factor (bytes on the wire per byte of goodput) per protocol."""
    rows = [r for r in data.rows if isinstance(r.get("factor"), int | float)]
    protocols = _ordered([r.get("protocol") for r in rows])
    if not protocols:
        return None
    with _panels(1, (4.5, 3.2)) as (fig, [ax]):
        ax.boxplot([[r["factor"] for r in rows if r.get("protocol") == p] for p in protocols], showmeans=True)
        ax.set_xticks(range(1, len(protocols) + 1), protocols)
        ax.set_ylabel("overhead factor")
    return fig


@register("rate_vs_goodput")
def rate_vs_goodput(data: DrawingInput) -> MplFigure | None:
    """003 Figs. 6.7/6.8: the measured goodput against the configured rate, per mode, with the
    line where they are equal and the one 003's factor (1.051) puts the goodput on."""
    rows = [r for r in data.rows if isinstance(r.get("capacity_mbps"), int | float) and r.get("bandwidth_mbps")]
    modes = _ordered([r.get("mode") for r in rows])
    if not modes:
        return None
    colors = mode_colors(modes)
    with _panels(1, (4.8, 3.6)) as (fig, [ax]):
        top = max(r["bandwidth_mbps"] for r in rows)
        ax.plot([0, top], [0, top], color="#b31d28", lw=1, label="expected (goodput = rate)")
        ax.plot([0, top], [0, top / 1.051], color="#777", lw=1, ls="--", label="rate / 1.051 (003)")
        for mode in modes:
            mine = [r for r in rows if r.get("mode") == mode]
            ax.scatter([r["bandwidth_mbps"] for r in mine], [r["capacity_mbps"] for r in mine], s=14,
                       color=colors[mode], label=mode)
        ax.set_xlabel("configured rate (Mbit/s)")
        ax.set_ylabel("measured goodput (Mbit/s)")
        ax.legend(fontsize="small")
    return fig


register("runs_by_size")(plt_boxes)


@register("speedup")
def speedups(data: DrawingInput) -> MplFigure | None:
    """001 Figs. 5c, 6c: per page (smallest first) the speed-up of each mode over H2, median PLT
    ratio and difference in seconds, a panel per condition."""
    rows = [r for r in data.rows if isinstance(r.get("plt_ms"), int | float)]
    if not any(r.get("mode") == "h2" for r in rows):
        return None
    pages = sorted(_ordered([r.get("page") for r in rows]),
                   key=lambda p: next((r.get("size_kb") or 0 for r in rows if r.get("page") == p), 0))
    modes = [m for m in _modes(rows) if m != "h2"]
    _, grouped = conditions(rows)
    panels = []
    for title, group in grouped.items():
        medians: dict[tuple[str, str], float] = {}
        for page in pages:
            for mode in ("h2", *modes):
                values = [r["plt_ms"] / 1000 for r in group if r.get("page") == page and r.get("mode") == mode]
                if values:
                    medians[(page, mode)] = float(np.median(values))
        cells = {(page, mode): (medians[(page, "h2")] / medians[(page, mode)], medians[(page, "h2")] - medians[(page, mode)])
                 for page in pages for mode in modes if (page, mode) in medians and (page, "h2") in medians}
        panels.append((title, cells))
    return speedup_figure(panels, pages, modes, "h2", ["h2", *modes])


@register("cwnd")
def windows(data: DrawingInput) -> MplFigure | None:
    """001 Fig. 3a: the server's window summed over a load's connections against time, the first
    repetition of each mode on one axis; beside it the time average of every run per mode."""
    rows = [r for r in data.rows if r.get("mode")]
    modes = _modes(rows)
    if not modes:
        return None
    colors = mode_colors(modes)
    with rc_context(RC):
        fig = MplFigure(figsize=(11, 3.6), layout="constrained")
        timeline_ax, mean_ax = fig.subplots(1, 2, width_ratios=[3, 1])
        for mode in modes:
            first = min((r for r in rows if r["mode"] == mode), key=lambda r: r.get("repetition") or 0)
            times, total = data.timelines.get(first["run_key"], (np.empty(0), np.empty(0)))
            if len(times):
                timeline_ax.step(times, total / 1000, where="post", color=colors[mode], label=mode, linewidth=1)
        timeline_ax.set_xlabel("time since the load's start (s)")
        timeline_ax.set_ylabel("cwnd, summed over connections (kB)")
        timeline_ax.set_title("first repetition of each mode")
        timeline_ax.legend(frameon=False, fontsize=8)
        for i, mode in enumerate(modes):
            values = [r["cwnd_kb"] for r in rows if r["mode"] == mode and isinstance(r.get("cwnd_kb"), int | float)]
            mean_ax.scatter([i] * len(values), values, color=colors[mode], s=12)
            if values:
                mean_ax.hlines(float(np.median(values)), i - 0.3, i + 0.3, color="black")
        mean_ax.set_xticks(range(len(modes)), modes, rotation=45, ha="right")
        mean_ax.set_ylabel("time-averaged cwnd (kB)")
        mean_ax.set_title("every run (line: median)")
    return fig


@register("pairs")
def shares(data: DrawingInput) -> MplFigure | None:
    """001 Fig. 7: per pair, the median bandwidth share of each side (stacked to 1)."""
    rows = [r for r in data.rows if isinstance(r.get("share_a"), int | float)]
    pairs = _ordered([r.get("pair") for r in rows])
    if not pairs:
        return None
    with _panels(1, (max(5.0, 1.4 * len(pairs)), 3.6)) as (fig, [ax]):
        for i, pair in enumerate(pairs):
            a = float(np.median([r["share_a"] for r in rows if r.get("pair") == pair]))
            left, _, right = pair.partition(" vs ")
            ax.bar(i, a, color="#1f77b4", width=0.6)
            ax.bar(i, 1 - a, bottom=a, color="#d62728", width=0.6)
            ax.text(i, a / 2, f"{left}\n{a:.2f}", ha="center", va="center", fontsize=7, color="white")
            ax.text(i, a + (1 - a) / 2, f"{right}\n{1 - a:.2f}", ha="center", va="center", fontsize=7, color="white")
        ax.axhline(0.5, color="black", linewidth=0.8, linestyle=":")
        ax.set_xticks(range(len(pairs)), pairs, rotation=20, ha="right")
        ax.set_ylabel("share of the bottleneck (median)")
        ax.set_ylim(0, 1)
    return fig


@register("connection_shares")
def connection_shares(data: DrawingInput) -> MplFigure | None:
    """001 Fig. 4c: per page and mode the connections opened (median) and the mean share of the
    page's bytes of each connection, largest first."""
    rows = [r for r in data.rows if r.get("byte_shares")]
    if not rows:
        return None
    pages, modes = _ordered([r.get("page") for r in rows]), _modes(rows)
    counts: dict[tuple[str, str], float] = {}
    shares: dict[tuple[str, str], list[float]] = {}
    for page in pages:
        for mode in modes:
            cell = [r for r in rows if r.get("page") == page and r.get("mode") == mode]
            if cell:
                counts[(page, mode)] = float(np.median([r["connections"] for r in cell]))
                ranks = max(len(r["byte_shares"]) for r in cell)
                shares[(page, mode)] = [float(np.mean([r["byte_shares"][k] if k < len(r["byte_shares"]) else 0.0
                                                       for r in cell])) for k in range(ranks)]
    return connections_figure(pages, modes, counts, shares)


def claims_figure(claims: Sequence[dict[str, Any]]) -> MplFigure | None:
    """Every claim of a reproduce.json: our estimate with its CI (points and bars) against the
    interval the claim expects (shaded), one row per claim, each on its own scale."""
    drawn = [c for c in claims if c.get("estimate")]
    if not drawn:
        return None
    with _panels(len(drawn), (7.5, 0.55), columns=1, extra_height=0.5) as (fig, axes):
        for ax, claim in zip(axes, drawn):
            e, expected = claim["estimate"], claim.get("expected") or {}
            points = [v for v in (e["value"], e["ci_low"], e["ci_high"], expected.get("low"), expected.get("high"))
                      if isinstance(v, int | float) and math.isfinite(v)]
            span = (max(points) - min(points)) or abs(points[0]) or 1.0
            lo, hi = min(points) - 0.3 * span, max(points) + 0.3 * span
            ax.axvspan(expected.get("low") if expected.get("low") is not None else lo,
                       expected.get("high") if expected.get("high") is not None else hi, color="#2ca02c", alpha=0.15)
            if e["ci_low"] is not None and e["ci_high"] is not None:
                ax.errorbar([e["value"]], [0], xerr=[[e["value"] - e["ci_low"]], [e["ci_high"] - e["value"]]],
                            fmt="o", color="black", capsize=3)
            else:  # too few values for an interval: the point alone
                ax.plot([e["value"]], [0], "o", color="black", fillstyle="none")
            ax.set_xlim(lo, hi)
            ax.set_yticks([])
            ax.set_title(f"{claim['statement']}: {claim['verdict']}", fontsize=8, loc="left")
            ax.grid(True, axis="x", alpha=0.3)
    return fig


@register("cdf")
def plt_cdfs(data: DrawingInput) -> MplFigure | None:
    """002 Figs. 4-2 and 5-1: the CDF of PLT per mode (over pages and loads), a panel per
    condition."""
    rows = [r for r in data.rows if isinstance(r.get("plt_ms"), int | float)]
    if not rows:
        return None
    modes = _modes(rows)
    colors = mode_colors(modes)
    _, grouped = conditions(rows)
    with _panels(len(grouped), (3.2, 2.6), columns=3) as (fig, axes):
        for ax, (title, group) in zip(axes, grouped.items(), strict=True):
            for mode in modes:
                values = np.sort([r["plt_ms"] / 1000 for r in group if r.get("mode") == mode])
                if len(values):
                    ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=mode,
                            color=colors[mode])
            ax.set_title(title)
            ax.set_xlabel("PLT (s)")
            ax.set_ylabel("CDF")
        axes[0].legend(fontsize=7)
    return fig


# 002 Fig. 5-2's three maps: (numerator mode, denominator mode) of the % improvement.
HEATMAP_PAIRS = (("h2", "h1c", "SPDY (h2) over HTTP/1.1 (h1c)"), ("h3", "h1c", "QUIC over HTTP/1.1 (h1c)"),
                 ("h3", "h2", "QUIC over SPDY (h2)"))


@register("heatmap")
def improvement_maps(data: DrawingInput) -> MplFigure | None:
    """002 Fig. 5-2: % improvement of the median PLT over the pages per configuration, one map per
    protocol pair; a grid's cells and a space-filling design's points alike, as coloured markers
    over bandwidth (log) and RTT, green where the first protocol is faster."""
    maps = [(title, configuration_improvements(data.rows, "plt_ms", {"mode": num}, {"mode": den}))
            for num, den, title in HEATMAP_PAIRS]
    maps = [(title, cells) for title, cells in maps if cells]
    if not maps:
        return None
    with _panels(len(maps), (3.6, 3.2)) as (fig, axes):
        for ax, (title, cells) in zip(axes, maps, strict=True):
            configs = sorted(cells)
            x = [c[1] for c in configs]
            y = [c[0] for c in configs]
            values = [cells[c] for c in configs]
            points = ax.scatter(x, y, c=values, cmap="RdYlGn", vmin=-60, vmax=60, s=160, marker="s")
            for xi, yi, v in zip(x, y, values, strict=True):
                ax.annotate(f"{v:.0f}", (xi, yi), ha="center", va="center", fontsize=6)
            ax.set_yscale("log")
            ax.set_xlabel("minimum RTT (ms)")
            ax.set_ylabel("bandwidth (Mbit/s)")
            ax.set_title(title)
        fig.colorbar(points, ax=axes, label="% improvement of the median PLT")
    return fig


@register("page_runs")
def site_scores_figure(data: DrawingInput) -> MplFigure | None:
    """002 Table 5.1: each page's score (mean % improvement of QUIC over HTTP/1.1 across the
    configurations) against its total size and its mean object size; the 10 pages QUIC hurts
    most and helps most named."""
    worst, best = ranked_sites(data.rows, "plt_ms", {"mode": "h3"}, {"mode": "h1c"})
    lower, upper = ranked_sites(data.rows, "plt_ms", {"mode": "h3"}, {"mode": "h1c"}, count=len(data.rows))
    pages = [p for p in lower + upper if p.get("page_bytes") and p.get("page_mean_object_bytes")]  # every page
    if not pages:
        return None
    named = {p["page"] for p in worst + best}
    with _panels(2, (4.0, 3.4)) as (fig, axes):
        for ax, attribute, label in zip(axes, ("page_bytes", "page_mean_object_bytes"),
                                        ("total size (kB)", "mean object size (kB)"), strict=True):
            ax.scatter([p[attribute] / 1e3 for p in pages], [p["score"] for p in pages], s=14)
            for p in pages:
                if p["page"] in named:
                    ax.annotate(str(p["page"]), (p[attribute] / 1e3, p["score"]), fontsize=6)
            ax.set_xscale("log")
            ax.axhline(0, color="grey", linewidth=0.8)
            ax.set_xlabel(label)
            ax.set_ylabel("score: QUIC over HTTP/1.1 (%)")
    return fig


@register("intervals")
def rate_over_time(data: DrawingInput) -> MplFigure | None:
    """002 Fig. 6-2: the delivered rate of each bulk transfer per logged interval over time, one
    step line per run (a cellular trace's variability)."""
    runs: dict[str, list[Row]] = {}
    for row in data.rows:
        if isinstance(row.get("t_ms"), int | float) and isinstance(row.get("rate_mbps"), int | float):
            runs.setdefault(str(row.get("run_key")), []).append(row)
    if not runs:
        return None
    with _panels(1, (11, 3.6)) as (fig, [ax]):
        for rows in runs.values():
            rows.sort(key=lambda r: r["t_ms"])
            label = f"{rows[0].get('trace') or rows[0].get('mode')}, repetition {rows[0].get('repetition')}"
            ax.step([r["t_ms"] / 1000 for r in rows], [r["rate_mbps"] for r in rows], where="pre", linewidth=1,
                    label=label)
        ax.set_xlabel("time since the transfer's start (s)")
        ax.set_ylabel("delivered rate per interval (Mbit/s)")
        ax.legend(frameon=False, fontsize=8)
    return fig


@register("learning_curve")
def learning_curve(data: DrawingInput) -> MplFigure | None:
    """000 §3.2.4: accuracy on held-out flows against the share of the training flows (median
    over the draws, their range shaded)."""
    rows = [r for r in data.rows if isinstance(r.get("accuracy"), int | float)]
    shares = sorted({r["train_pct"] for r in rows})
    if not shares:
        return None
    values = [[r["accuracy"] for r in rows if r["train_pct"] == s] for s in shares]
    with _panels(1, (5.0, 3.4)) as (fig, [ax]):
        ax.fill_between(shares, [min(v) for v in values], [max(v) for v in values], alpha=0.2, color="#1f77b4")
        ax.plot(shares, [float(np.median(v)) for v in values], marker="o", color="#1f77b4")
        ax.set_xscale("log")
        ax.set_xticks(shares, [f"{s}%" for s in shares])
        ax.set_xlabel("share of the training flows")
        ax.set_ylabel("accuracy on held-out flows")
    return fig


@register("cv_folds")
def cv_accuracies(data: DrawingInput) -> MplFigure | None:
    """000 Fig. 3.4: each algorithm's accuracy over the folds of the cross-validation."""
    algorithms = _ordered([r.get("algorithm") for r in data.rows])
    if not algorithms:
        return None
    with _panels(1, (5.0, 3.4)) as (fig, [ax]):
        ax.boxplot([[r["accuracy"] for r in data.rows if r.get("algorithm") == a] for a in algorithms])
        ax.set_xticks(range(1, len(algorithms) + 1), algorithms)
        ax.set_ylabel("accuracy per fold")
    return fig


@register("state_graph")
def state_graphs(data: DrawingInput) -> MplFigure | None:
    """000 Fig. 6.4: the controller's states and transitions as a directed graph, one panel per
    QUIC controller (reproduce.state_graph), with the share of time per state and the
    transitions' counts on the arrows."""
    controllers = _ordered([r.get("quic_cc") for r in data.rows if r.get("transitions")])
    if not controllers:
        return None
    with _panels(len(controllers), (4.6, 4.4)) as (fig, axes):
        for ax, controller in zip(axes, controllers, strict=True):
            draw_state_graph(ax, state_graph([r for r in data.rows if r.get("quic_cc") == controller]),
                             f"QUIC controller {controller}")
    return fig


@register("decision_trees")
def decision_trees(data: DrawingInput) -> MplFigure | None:
    """000 Figs. 6.6/6.7: per protocol, the tree fitted on all its transfers (report.decision_tree),
    drawn by scikit-learn; the bootstrap trees' roots are in the verdicts."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from sklearn.tree import plot_tree

    transfers = [r for r in data.rows if r.get("kind") == "transfer"]
    fitted = {}
    for protocol in _ordered([r.get("protocol") for r in transfers]):
        mine = [r for r in transfers if r.get("protocol") == protocol]
        if len({r["class"] for r in mine}) >= 2:
            fitted[protocol] = fit_tree([r["features"] for r in mine], [r["class"] for r in mine], FEATURES_000,
                                        depth=TREE_DEPTH)
    if not fitted:
        return None
    with _panels(len(fitted), (9.0, 4.2), columns=1) as (fig, axes):
        FigureCanvasAgg(fig)  # plot_tree sizes its boxes with the canvas' renderer
        for ax, (protocol, tree) in zip(axes, fitted.items(), strict=True):
            plot_tree(tree.tree, feature_names=list(tree.feature_names), class_names=list(tree.classes), ax=ax,
                      filled=True, impurity=False, fontsize=6, rounded=True)
            ax.set_title(f"{'TCP' if protocol == 'tcp' else f'QUIC ({protocol})'}: "
                         f"{len([r for r in transfers if r.get('protocol') == protocol])} transfers, "
                         f"training accuracy {tree.training_accuracy:.2f}", fontsize=9)
    return fig


def side_rates_over_time(rows: Sequence[Row], pair: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per side of `pair`: the bins' times (s) and the median over the runs of the side's rate
    in each bin (Mbit/s; a run without a delivery in a bin counts 0 there)."""
    bins = [r for r in rows if r.get("kind") == "bin" and r.get("pair") == pair]
    runs = {r["run_key"] for r in bins}
    out = {}
    for side in _ordered([r.get("side") for r in bins]):
        per_time: dict[float, dict[str, float]] = {}
        for r in bins:
            if r.get("side") == side:
                per_time.setdefault(float(r["t_ms"]), {})[r["run_key"]] = float(r["mbps"])
        times = sorted(per_time)
        medians = [float(np.median([per_time[t].get(run, 0.0) for run in runs])) for t in times]
        out[str(side)] = (np.asarray(times) / 1000, np.asarray(medians))
    return out


@register("pairs_over_time")
def shares_over_time(data: DrawingInput) -> MplFigure | None:
    """000 Fig. 6.12: per pair, each side's delivered rate over time (median over the runs) and
    the two sides' Jain's index per bin."""
    pairs = _ordered([r.get("pair") for r in data.rows if r.get("kind") == "bin"])
    if not pairs:
        return None
    with _panels(len(pairs), (5.2, 3.6)) as (fig, axes):
        for ax, pair in zip(axes, pairs, strict=True):
            sides = side_rates_over_time(data.rows, pair)
            labels = dict(zip(("a", "b"), str(pair).split(" vs "), strict=False))
            for side, (times, rates) in sides.items():
                ax.step(times, rates, where="post", linewidth=1.2, label=labels.get(side, side))
            if len(sides) == 2:
                (times, a), (_, b) = sides.values()
                fairness = [jain_index([x, y]) for x, y in zip(a, b, strict=False)]
                jain = ax.twinx()
                jain.plot(times[:len(fairness)], [np.nan if f is None else f for f in fairness], color="grey",
                          linewidth=0.8, linestyle=":")
                jain.set_ylim(0.4, 1.02)
                jain.set_ylabel("Jain's index (dotted)")
            ax.set_title(str(pair), fontsize=9)
            ax.set_xlabel("time since the first delivery (s)")
            ax.set_ylabel("delivered rate, median over runs (Mbit/s)")
            ax.legend(frameon=False, fontsize=8)
    return fig
