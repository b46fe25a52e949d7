"""Figures of the report (matplotlib, no pyplot state): each is saved as SVG and PNG and inlined."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import rc_context
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from protolab.report.stats import ecdf

RC: Any = {  # typed loosely: matplotlib's stubs want literal keys
    "svg.fonttype": "none",      # text stays text: small files, selectable, no external fonts needed
    "svg.hashsalt": "protolab",  # stable ids: the same data gives the same SVG
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf"]
MAX_PANELS = 12


def mode_colors(modes: Sequence[str]) -> dict[str, str]:
    return {mode: PALETTE[i % len(PALETTE)] for i, mode in enumerate(modes)}


def _grid(n: int, max_cols: int = 2) -> tuple[int, int]:
    cols = min(max_cols, n)
    return math.ceil(n / cols), cols


def save_figure(fig: Figure, name: str, figures_dir: Path, index: int) -> str:
    """Write `<name>.svg` and `<name>.png`; return the SVG for inlining, its ids made unique."""
    figures_dir.mkdir(parents=True, exist_ok=True)
    svg_path = figures_dir / f"{name}.svg"
    with rc_context(RC):
        fig.savefig(svg_path, format="svg", metadata={"Date": None})
        fig.savefig(figures_dir / f"{name}.png", format="png", dpi=100)
    text = svg_path.read_text()
    start = text.find("<svg")
    text = text[start:]
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    prefix = f"f{index}-"
    for ident in sorted(ids, key=len, reverse=True):
        text = text.replace(f'id="{ident}"', f'id="{prefix}{ident}"')
        text = text.replace(f"#{ident})", f"#{prefix}{ident})")
        text = text.replace(f'href="#{ident}"', f'href="#{prefix}{ident}"')
    return text


def _new_figure(width: float, height: float) -> Figure:
    with rc_context(RC):
        return Figure(figsize=(width, height), layout="constrained")


def _mode_legend(fig: Figure, modes: Sequence[str], colors: dict[str, str], mean: bool = False) -> None:
    handles: list[object] = [Patch(facecolor=colors[m], edgecolor="black", alpha=0.7, label=m) for m in modes]
    if mean:
        handles.append(Line2D([], [], marker="D", color="white", markeredgecolor="black", linestyle="none",
                              label="mean"))
    fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 8), frameon=False)


def plt_boxplots(panels: Sequence[tuple[str, dict[tuple[str, str], list[float]]]], pages: Sequence[str],
                 modes: Sequence[str], pooled: bool) -> Figure:
    """One panel per condition; boxes of PLT (s) per page (or pooled) and mode, mean marked."""
    colors = mode_colors(modes)
    groups = ["all pages"] if pooled else list(pages)
    boxes = len(groups) * len(modes)
    rows, cols = _grid(len(panels), 1 if boxes > 12 else (2 if boxes > 4 else 3))
    fig = _new_figure(11 if cols > 1 or boxes > 4 else 7, 0.6 + 2.6 * rows)
    with rc_context(RC):
        axes = fig.subplots(rows, cols, squeeze=False)
        step = 0.8 / max(len(modes), 1)
        for ax, (title, cells) in zip(axes.flat, panels):
            for g, group in enumerate(groups):
                for m, mode in enumerate(modes):
                    values = cells.get((group, mode), [])
                    if not values:
                        continue
                    pos = g - 0.4 + step * (m + 0.5)
                    box = ax.boxplot([values], positions=[pos], widths=step * 0.85, patch_artist=True,
                                     showmeans=True, whis=1.5,
                                     meanprops={"marker": "D", "markerfacecolor": "white",
                                                "markeredgecolor": "black", "markersize": 4},
                                     medianprops={"color": "black"}, flierprops={"markersize": 3})
                    for patch in box["boxes"]:
                        patch.set_facecolor(colors[mode])
                        patch.set_alpha(0.7)
            ax.set_xticks(range(len(groups)), groups, rotation=30 if len(groups) > 6 else 0, ha="right"
                          if len(groups) > 6 else "center")
            ax.set_xlim(-0.6, len(groups) - 0.4)
            ax.set_ylabel("PLT (s)")
            ax.set_title(title)
            ax.set_ylim(bottom=0)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        _mode_legend(fig, modes, colors, mean=True)
    return fig


def speedup_figure(panels: Sequence[tuple[str, dict[tuple[str, str], tuple[float, float]]]],
                   pages: Sequence[str], modes: Sequence[str], baseline: str, all_modes: Sequence[str]) -> Figure:
    """Top row: median PLT ratio baseline/mode per page; bottom row: baseline - mode in seconds."""
    colors = mode_colors(all_modes)
    cols = len(panels)
    fig = _new_figure(max(5.5, 3.6 * cols), 6.0)
    with rc_context(RC):
        axes = fig.subplots(2, cols, squeeze=False, sharey="row")
        x = np.arange(len(pages))
        for c, (title, cells) in enumerate(panels):
            for mode in modes:
                ratio = [cells.get((page, mode), (math.nan, math.nan))[0] for page in pages]
                diff = [cells.get((page, mode), (math.nan, math.nan))[1] for page in pages]
                axes[0][c].plot(x, ratio, marker="o", color=colors[mode], label=mode)
                axes[1][c].plot(x, diff, marker="s", color=colors[mode], label=mode)
            axes[0][c].axhline(1.0, color="black", linewidth=0.8)
            axes[1][c].axhline(0.0, color="black", linewidth=0.8)
            axes[0][c].set_title(title)
            for ax in (axes[0][c], axes[1][c]):
                ax.set_xticks(x, pages, rotation=45, ha="right")
        axes[0][0].set_ylabel(f"speed-up vs {baseline}\n(median PLT ratio)")
        axes[1][0].set_ylabel(f"speed-up vs {baseline}\n(median PLT difference, s)")
        handles = [Line2D([], [], color=colors[m], marker="o", label=m) for m in modes]
        fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 8), frameon=False)
    return fig


def heatmap_figure(panels: Sequence[tuple[str, np.ndarray]], bandwidths: Sequence[float],
                   rtts: Sequence[float]) -> Figure:
    """% improvement of median PLT on the bandwidth x RTT grid; red = worse, green = better."""
    rows, cols = _grid(len(panels), 2)
    fig = _new_figure(5.2 * cols, 0.5 + 3.9 * rows)
    finite = [abs(v) for _, grid in panels for v in grid.flat if math.isfinite(v)]
    limit = max(max(finite, default=1.0), 1.0)
    norm = TwoSlopeNorm(vcenter=0.0, vmin=-limit, vmax=limit)
    with rc_context(RC):
        axes = fig.subplots(rows, cols, squeeze=False)
        image = None
        for ax, (title, grid) in zip(axes.flat, panels):
            masked = np.ma.masked_invalid(grid)
            cmap = _cmap()
            image = ax.imshow(masked, cmap=cmap, norm=norm, origin="lower", aspect="auto")
            ax.set_xticks(range(len(bandwidths)), [f"{b:g}" for b in bandwidths])
            ax.set_yticks(range(len(rtts)), [f"{r:g}" for r in rtts])
            ax.set_xlabel("bandwidth (Mbit/s)")
            ax.set_ylabel("min RTT (ms)")
            ax.set_title(title)
            ax.grid(False)
            for (i, j), value in np.ndenumerate(grid):
                label = "n/a" if not math.isfinite(value) else f"{value:+.0f}"
                ax.text(j, i, label, ha="center", va="center", fontsize=7,
                        color="black" if not math.isfinite(value) or abs(value) < 0.6 * limit else "white")
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        if image is not None:
            fig.colorbar(image, ax=axes, label="% improvement of median PLT", shrink=0.8)
    return fig


def _cmap():  # type: ignore[no-untyped-def]
    from matplotlib import colormaps

    return colormaps["RdYlGn"].with_extremes(bad="#d0d0d0")


def cdf_figure(panels: Sequence[tuple[str, dict[str, list[float]]]], modes: Sequence[str]) -> Figure:
    colors = mode_colors(modes)
    rows, cols = _grid(len(panels), 3)
    fig = _new_figure(11, 0.6 + 2.8 * rows)
    with rc_context(RC):
        axes = fig.subplots(rows, cols, squeeze=False)
        for ax, (title, by_mode) in zip(axes.flat, panels):
            for mode in modes:
                xs, ys = ecdf(by_mode.get(mode, []))
                if xs.size:
                    ax.step(np.concatenate([[0.0], xs]), np.concatenate([[0.0], ys]), where="post",
                            color=colors[mode], label=mode)
            ax.set_xlabel("PLT (s)")
            ax.set_ylabel("CDF")
            ax.set_ylim(0, 1.02)
            ax.set_xlim(left=0)
            ax.set_title(title)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        handles = [Line2D([], [], color=colors[m], label=m) for m in modes]
        fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 8), frameon=False)
    return fig


def connections_figure(pages: Sequence[str], modes: Sequence[str], counts: dict[tuple[str, str], float],
                       shares: dict[tuple[str, str], list[float]]) -> Figure:
    """Left: median connections per page and mode; right: mean share of the page's bytes carried
    by each connection (ranked by bytes), one stacked bar per page and mode."""
    colors = mode_colors(modes)
    fig = _new_figure(11, 4.4)
    with rc_context(RC):
        left, right = fig.subplots(1, 2)
        x = np.arange(len(pages))
        step = 0.8 / max(len(modes), 1)
        for m, mode in enumerate(modes):
            offsets = x - 0.4 + step * (m + 0.5)
            left.bar(offsets, [counts.get((p, mode), math.nan) for p in pages], width=step * 0.9,
                     color=colors[mode], label=mode)
        left.set_xticks(x, pages, rotation=45, ha="right")
        left.set_ylabel("connections per page load (median)")
        left.set_title("connections per page")
        ranks = max((len(v) for v in shares.values()), default=0)
        shade = [0.95 - 0.7 * r / max(ranks - 1, 1) for r in range(ranks)]
        for m, mode in enumerate(modes):
            offsets = x - 0.4 + step * (m + 0.5)
            bottom = np.zeros(len(pages))
            for r in range(ranks):
                heights = np.array([_at(shares.get((p, mode), []), r) for p in pages]) * 100
                right.bar(offsets, heights, width=step * 0.9, bottom=bottom, color=colors[mode],
                          alpha=shade[r], edgecolor="white", linewidth=0.5)
                bottom += heights
        right.set_xticks(x, pages, rotation=45, ha="right")
        right.set_ylabel("% of page bytes per connection\n(stacked, largest first)")
        right.set_ylim(0, 105)
        right.set_title("share of bytes per connection")
        handles = [Patch(facecolor=colors[m], label=m) for m in modes]
        fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 8), frameon=False)
    return fig


def _at(values: Sequence[float], index: int) -> float:
    return values[index] if index < len(values) else 0.0
