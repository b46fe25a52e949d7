"""Summary and figures of the parallel-connection detection (000 Figs. 4.3-4.7), from its output
files; CDFs exact at their grid points (histograms counted by DuckDB), whatever the number of
sessions."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protolab.traffic.duck import TrafficError, sql_path

# 000 Fig. 4.5/4.6: sessions by the duration of their longest flow; Fig. 4.7: by the size of
# their largest flow (kB of 1000 bytes). (label, low, high): low <= x < high.
DURATION_BUCKETS: list[tuple[str, float, float]] = [
    ("< 10 s", 0.0, 10.0), ("10-60 s", 10.0, 60.0), ("60-600 s", 60.0, 600.0), ("> 600 s", 600.0, math.inf)]
SIZE_BUCKETS: list[tuple[str, float, float]] = [
    ("< 5 kB", 0.0, 5e3), ("5-10 kB", 5e3, 1e4), ("10-50 kB", 1e4, 5e4), ("50-500 kB", 5e4, 5e5),
    ("> 500 kB", 5e5, math.inf)]


def _frac(a: float | None, b: float | None) -> float | None:
    return None if not b or a is None else a / b


def summarize(con: Any, sessions: Path, flows: Path) -> dict[str, Any]:
    """Per protocol: flows, sessions, isolated and parallel flows, overlap statistics."""
    rows = con.execute(f"""
        SELECT protocol, count(*) AS sessions, sum(flows) AS flows,
               count(*) FILTER (WHERE parallel) AS parallel_sessions,
               coalesce(sum(flows) FILTER (WHERE parallel), 0) AS parallel_flows,
               sum(overlapping_flows) AS overlapping_flows,
               max(flows) AS max_flows,
               median(time_overlap_pct) FILTER (WHERE parallel) AS median_p,
               avg(time_overlap_pct) FILTER (WHERE parallel) AS mean_p,
               avg(overlap_s) FILTER (WHERE parallel) AS mean_overlap_s,
               median(data_overlap_pct) FILTER (WHERE parallel) AS median_r,
               count(*) FILTER (WHERE parallel AND data_overlap_pct >= 100) AS r_ge_100,
               count(data_overlap_pct) FILTER (WHERE parallel) AS r_known,
               count(*) FILTER (WHERE parallel AND time_overlap_pct >= 95) AS p_ge_95,
               count(time_overlap_pct) FILTER (WHERE parallel) AS p_known
        FROM read_parquet('{sql_path(sessions)}')
        GROUP BY ALL ORDER BY flows DESC, protocol NULLS LAST
    """).fetchall()
    cols = ["protocol", "sessions", "flows", "parallel_sessions", "parallel_flows", "overlapping_flows", "max_flows",
            "median_p", "mean_p", "mean_overlap_s", "median_r", "r_ge_100", "r_known", "p_ge_95", "p_known"]
    by_protocol: dict[str, Any] = {}
    for r in rows:
        d = dict(zip(cols, r, strict=True))
        name = d["protocol"] if d["protocol"] is not None else "(none)"
        flows_n = int(d["flows"])
        by_protocol[name] = {
            "flows": flows_n, "sessions": int(d["sessions"]),
            "parallel_sessions": int(d["parallel_sessions"]), "parallel_flows": int(d["parallel_flows"]),
            "isolated_flows": flows_n - int(d["parallel_flows"]),
            "parallel_flow_share": _frac(d["parallel_flows"], flows_n),
            "isolated_flow_share": _frac(flows_n - d["parallel_flows"], flows_n),
            "overlapping_flows": int(d["overlapping_flows"]),
            "overlapping_flow_share": _frac(d["overlapping_flows"], flows_n),
            "mean_flows_per_parallel_session": _frac(d["parallel_flows"], d["parallel_sessions"]),
            "max_flows_per_session": int(d["max_flows"]),
            "median_time_overlap_pct": d["median_p"], "mean_time_overlap_pct": d["mean_p"],
            "share_time_overlap_ge_95pct": _frac(d["p_ge_95"], d["p_known"]),
            "mean_overlap_s": d["mean_overlap_s"],
            "median_data_overlap_pct": d["median_r"],
            "share_data_overlap_ge_100pct": _frac(d["r_ge_100"], d["r_known"]),
        }
    total_flows = sum(v["flows"] for v in by_protocol.values())
    total_parallel = sum(v["parallel_flows"] for v in by_protocol.values())
    n_results = con.execute(f"SELECT count(*) FROM read_parquet('{sql_path(flows)}')").fetchone()[0]
    if n_results != total_flows:
        raise TrafficError(f"internal error: {n_results} flow results for {total_flows} flows in sessions")
    return {"flows": total_flows, "sessions": sum(v["sessions"] for v in by_protocol.values()),
            "parallel_flow_share": _frac(total_parallel, total_flows),
            "by_protocol": by_protocol}


def _bin_sql(value: str, edges: Sequence[float]) -> str:
    """Index of the first edge >= value (len(edges) above the last)."""
    n = len(edges)
    steps = {round(b - a, 9) for a, b in itertools.pairwise(edges)}
    if len(steps) == 1 and edges[0] == 0:
        w = steps.pop()
        return f"least({n}, greatest(0, ceil({value} / {w!r})))::BIGINT"
    parts = " ".join(f"WHEN {value} <= {e!r} THEN {k}" for k, e in enumerate(edges))
    return f"(CASE {parts} ELSE {n} END)"


def _cdf_from_histogram(con: Any, sessions: Path, value: str, group: str, where: str, edges: Sequence[float]
                        ) -> dict[str, tuple[list[float], list[float]]]:
    """Exact CDF at `edges` (share of sessions with value <= edge) per group, in bounded memory."""
    import numpy as np

    rows = con.execute(f"""
        SELECT {group} AS g, {_bin_sql(value, edges)} AS bin, count(*)
        FROM read_parquet('{sql_path(sessions)}') WHERE ({where}) AND {value} IS NOT NULL
        GROUP BY ALL
    """).fetchall()
    out: dict[str, tuple[list[float], list[float]]] = {}
    for g in sorted({r[0] for r in rows if r[0] is not None}):
        counts = np.zeros(len(edges) + 1)
        for gg, b, c in rows:
            if gg == g:
                counts[int(b)] += c
        cdf = np.cumsum(counts)[: len(edges)] / counts.sum()
        out[str(g)] = (list(edges), cdf.tolist())
    return out


def _bucket_case(column: str, buckets: list[tuple[str, float, float]]) -> str:
    parts = [f"WHEN {column} < {high!r} THEN '{label}'" for label, _, high in buckets[:-1]]
    return f"(CASE {' '.join(parts)} ELSE '{buckets[-1][0]}' END)"


def draw_figures(con: Any, sessions: Path, out_dir: Path, focus: str | None = None) -> list[str]:
    """000 Figs. 4.3-4.7 as PNG and SVG in OUT_DIR; returns the paths written."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    from protolab.report.figures import PALETTE, RC

    src = f"read_parquet('{sql_path(sessions)}')"
    protocols = [r[0] for r in con.execute(
        f"SELECT protocol FROM {src} WHERE protocol IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC").fetchall()]
    if focus is None:
        focus = "h2" if "h2" in protocols else None
    focus_where = f"protocol = '{focus}'" if focus else "true"
    focus_label = focus or "all protocols"
    written: list[str] = []

    def save(fig: Figure, name: str) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        with rc_context(RC):
            fig.savefig(out_dir / f"{name}.svg", format="svg", metadata={"Date": None})
            fig.savefig(out_dir / f"{name}.png", format="png", dpi=110)
        written.extend([str(out_dir / f"{name}.svg"), str(out_dir / f"{name}.png")])

    def cdf_plot(name: str, title: str, xlabel: str, curves: dict[str, tuple[list[float], list[float]]],
                 log_x: bool = False, order: Sequence[str] | None = None) -> None:
        with rc_context(RC):
            fig = Figure(figsize=(5.2, 3.4))
            ax = fig.add_subplot()
            for i, key in enumerate(order or sorted(curves)):
                if key not in curves:
                    continue
                x, y = curves[key]
                ax.step(x, y, where="post", color=PALETTE[i % len(PALETTE)], label=key)
            if log_x:
                ax.set_xscale("log")
            # Up to the first edge where every curve has reached 1 (long empty tails say nothing).
            last = max((next((i for i, v in enumerate(y) if v >= 1.0 - 1e-12), len(y) - 1)
                        for _, y in curves.values()), default=None)
            if last is not None:
                xs = next(iter(curves.values()))[0]
                ax.set_xlim(xs[0], xs[min(len(xs) - 1, last + 1)])
            ax.set_ylim(0, 1.01)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("CDF")
            ax.set_title(title)
            if curves:
                ax.legend(fontsize=7)
            else:
                ax.text(0.5, 0.5, "no sessions with parallel flows", ha="center", transform=ax.transAxes)
            fig.tight_layout()
        save(fig, name)

    pct_edges = [float(x) for x in range(101)]
    flows_edges = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 50, 100, 200, 500, 1000]
    cdf_plot("fig4_3_flows_per_session", "Flows per session (000 Fig. 4.3)", "flows in the session",
             _cdf_from_histogram(con, sessions, "flows", "protocol", "true", flows_edges), log_x=True,
             order=protocols)
    cdf_plot("fig4_4_time_overlap", "Degree of time overlap, sessions with parallel flows (000 Fig. 4.4)",
             "time overlap p (%)",
             _cdf_from_histogram(con, sessions, "time_overlap_pct", "protocol", "parallel", pct_edges),
             order=protocols)
    # Fig. 4.5: share of parallel sessions by the duration of their longest flow.
    labels = [b[0] for b in DURATION_BUCKETS]
    dur_case = _bucket_case("longest_s", DURATION_BUCKETS)
    counts = dict(con.execute(f"SELECT {dur_case}, count(*) FROM {src} WHERE parallel AND {focus_where} "
                              "GROUP BY 1").fetchall())
    total = sum(counts.values())
    with rc_context(RC):
        fig = Figure(figsize=(5.2, 3.4))
        ax = fig.add_subplot()
        shares = [counts.get(lab, 0) / total * 100 if total else 0.0 for lab in labels]
        ax.bar(labels, shares, color=PALETTE[0])
        for i, v in enumerate(shares):
            ax.text(i, v, f"{v:.1f}%", ha="center", va="bottom", fontsize=7)
        ax.set_ylabel("share of sessions (%)")
        ax.set_xlabel("duration of the longest flow")
        ax.set_title(f"Sessions with parallel flows by longest flow, {focus_label} (000 Fig. 4.5)")
        fig.tight_layout()
    save(fig, "fig4_5_longest_flow_duration")
    cdf_plot("fig4_6_time_overlap_by_duration",
             f"Time overlap by longest-flow duration, {focus_label} (000 Fig. 4.6)", "time overlap p (%)",
             _cdf_from_histogram(con, sessions, "time_overlap_pct", dur_case, f"parallel AND {focus_where}",
                                 pct_edges), order=labels)
    r_edges = [float(x) for x in range(0, 1001, 10)]
    size_case = _bucket_case("largest_bytes", SIZE_BUCKETS)
    cdf_plot("fig4_7_data_overlap_by_size",
             f"Data overlap by largest-flow size, {focus_label} (000 Fig. 4.7)", "data overlap r (%)",
             _cdf_from_histogram(con, sessions, "data_overlap_pct", size_case, f"parallel AND {focus_where}",
                                 r_edges), order=[b[0] for b in SIZE_BUCKETS])
    return written


