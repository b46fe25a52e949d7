"""Transport sections of the report (docs/report.md): bulk throughput, congestion windows over
time, controller states per connection, and the fairness of two competing clients. Like the rest
of the report they read only the results store."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from protolab.report import section as h
from protolab.report import transport_figures as tf
from protolab.report.section import Builder, Experiment, Run
from protolab.report.stats import CI_LEVEL, summarize

STATES = ("slow_start", "conservative_slow_start", "congestion_avoidance", "recovery", "application_limited", "unknown")
NUMERIC_SWEEPS = {"bandwidth_mbps": "bandwidth (Mbit/s)", "rtt_ms": "RTT (ms)", "loss_pct": "loss (%)",
                  "cpu_pct": "client CPU (% of a core)"}
GRID_MS = 10.0
MAX_TIMELINES = 6
MAX_STATE_BARS = 40
# 001 §V-D, Fig. 7: what the seed found for each pair (QUIC = gQUIC 39, our gquic39 profile).
SEED_FIG7 = {
    ("h3@gquic39", "h2"): "QUIC about 2x H2's share (Fig. 7a)",
    ("h3@gquic39", "h2-parallel:2"): "about equal (Fig. 7b)",
    ("h3@gquic39", "h1"): "H1 (4 connections) more than QUIC (Fig. 7c)",
    ("h2", "h1"): "H1 (4 connections) more than H2 (Fig. 7c)",
}


def _ok(exp: Experiment) -> list[Run]:
    return [r for r in exp.runs if r.status == "ok"]


def _titled(what: str, exp: Experiment, condition: tuple[Any, ...]) -> str:
    """`what | condition`, or `what` alone when nothing varies."""
    cond = h.condition_label(exp, condition)
    return f"{what} | {cond}" if cond != "all runs" else what


def _first_runs(exp: Experiment) -> dict[tuple[Any, ...], dict[str, Run]]:
    """Per condition and mode, the ok run of the lowest repetition and largest page (the one
    plotted over time)."""
    chosen: dict[tuple[Any, ...], dict[str, Run]] = defaultdict(dict)
    # The largest page first: its transfer shows the most of the window's dynamics.
    for run in sorted(_ok(exp), key=lambda r: (r.repetition or 0, -exp.page_size.get(r.page, 0), r.run_key)):
        chosen[run.condition].setdefault(run.mode, run)
    return chosen


def _sender_states(b: Builder, exp: Experiment) -> list[dict[str, Any]]:
    return b.store.query("SELECT * FROM connection_states WHERE experiment_id = ? AND sender", [exp.id])


# ---------------------------------------------------------------------- bulk throughput


def throughput(b: Builder, exp: Experiment, name: str) -> str:
    ok = [r for r in _ok(exp) if r.goodput_mbps is not None]
    if not ok:
        return h.note("No successful bulk transfers.")
    states = _sender_states(b, exp)
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in states:
        by_run[s["run_key"]].append(s)
    cells: dict[tuple[tuple[Any, ...], str], list[Run]] = defaultdict(list)
    for run in exp.runs:
        cells[(run.condition, run.mode)].append(run)
    order = {c: i for i, c in enumerate(exp.conditions)}
    rows = []
    for (cond, mode) in sorted(cells, key=lambda k: (order[k[0]], h.mode_sort_key(k[1]))):
        runs = cells[(cond, mode)]
        good = [r.goodput_mbps for r in runs if r.status == "ok" and r.goodput_mbps is not None]
        s = summarize(good)
        bandwidth = runs[0].params.get("bandwidth_mbps")
        util = f"{100 * s.median / bandwidth:.0f}%" if good and isinstance(bandwidth, int | float) and bandwidth else "-"
        senders = [x for r in runs for x in by_run.get(r.run_key, [])]
        lost = [x["lost_packets"] if x["lost_packets"] is not None else x["retransmits"] for x in senders]
        lost = [v for v in lost if v is not None]
        rtts = [x["mean_rtt_ms"] for x in senders if x["mean_rtt_ms"] is not None]
        p90 = [x["p90_rtt_ms"] for x in senders if x["p90_rtt_ms"] is not None]
        mean_ci = (f"{h.num(s.mean_ci_low, 2)} – {h.num(s.mean_ci_high, 2)}"
                   if s.mean_ci_low is not None and s.mean_ci_high is not None else "n/a")
        rows.append([h.esc(h.condition_label(exp, cond)), h.esc(mode), str(s.n), str(len(runs) - s.n),
                     h.num(s.median if good else None, 2), h.num(s.mean if good else None, 2), mean_ci, util,
                     h.num(float(np.median(lost)) if lost else None, 0),
                     h.num(float(np.median(rtts)) if rtts else None, 1), h.num(float(np.median(p90)) if p90 else None, 1)])
    caption = (f"Goodput of the bulk transfers (application bytes x 8 / duration) per condition and protocol; "
               f"{CI_LEVEL:.0%} Student-t CI of the mean; utilisation = median / configured bandwidth. Lost: the "
               "sender's packets declared lost (QUIC) or segments retransmitted (TCP), median over runs. RTT: the "
               "sender's smoothed RTT during the transfer (latency under load), median over runs of the run's mean "
               "and 90th percentile.")
    html = (f'<p class="caption">{h.esc(caption)}</p>' +
            h.table(["condition", "mode", "n ok", "n failed", "median Mbit/s", "mean Mbit/s",
                     f"{CI_LEVEL:.0%} CI of mean", "utilisation", "lost/retrans", "RTT mean ms", "RTT p90 ms"],
                    rows, numeric_from=2, css="data"))
    return html + _sweeps(b, exp, name, ok) + _pivot(exp, ok)


def _series_label(exp: Experiment, run: Run, fields: Sequence[str]) -> str:
    extra = [h.fmt_param(f, run.params.get(f)) for f in exp.varying if f not in fields]
    return " ".join([run.mode, *extra])


def _sweeps(b: Builder, exp: Experiment, name: str, ok: Sequence[Run]) -> str:
    """Goodput against each swept numeric parameter, the others at their most common value
    (004's one-factor-at-a-time figures)."""
    numeric = [f for f in exp.varying if f in NUMERIC_SWEEPS]
    panels = []
    for field in numeric:
        others = [f for f in numeric if f != field]
        base = {f: max({r.params.get(f) for r in ok}, key=lambda v: sum(1 for r in ok if r.params.get(f) == v))
                for f in others}
        subset = [r for r in ok if all(r.params.get(f) == v for f, v in base.items())]
        values: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
        for run in subset:
            x = run.params.get(field)
            if isinstance(x, int | float):
                values[_series_label(exp, run, numeric)][float(x)].append(run.goodput_mbps)  # type: ignore[arg-type]
        if len({x for series in values.values() for x in series}) < 2:
            continue
        series = {label: [(x, float(np.median(v)), min(v), max(v)) for x, v in points.items()]
                  for label, points in values.items()}
        fixed = ", ".join(h.fmt_param(f, v) for f, v in base.items())
        panels.append((f"goodput vs {NUMERIC_SWEEPS[field].split(' ')[0]}" + (f" ({fixed})" if fixed else ""),
                       NUMERIC_SWEEPS[field], series))
    if not panels:
        return ""
    fig = tf.sweep_figure(panels)
    return b.figure(fig, f"{name}-sweeps", "Median goodput (whiskers: min and max over repetitions) against each "
                    "swept parameter, the other swept parameters at their most common value.")


def _pivot(exp: Experiment, ok: Sequence[Run]) -> str:
    """When exactly two parameters vary over a full grid (004's C x beta): median goodput as a table."""
    fields = [f for f in exp.varying if len({h.hashable(r.params.get(f)) for r in ok}) > 1]
    # A field that follows from the others (cubic-tuning's quic_cc from c and beta) is no dimension.
    for f in sorted(fields, key=lambda f: f not in ("quic_cc", "tcp_cc")):
        if len(fields) > 2 and h.determined(ok, f, [g for g in fields if g != f]):
            fields.remove(f)
    if len(fields) != 2:
        return ""
    rows_f, cols_f = fields
    row_values = sorted({r.params.get(rows_f) for r in ok}, key=h.sort_key)
    col_values = sorted({r.params.get(cols_f) for r in ok}, key=h.sort_key)
    html = ""
    for mode in sorted({r.mode for r in ok}, key=h.mode_sort_key):
        grid: dict[tuple[Any, Any], list[float]] = defaultdict(list)
        for run in ok:
            if run.mode == mode:
                grid[(run.params.get(rows_f), run.params.get(cols_f))].append(run.goodput_mbps)  # type: ignore[arg-type]
        if len(grid) != len(row_values) * len(col_values):
            continue
        table_rows = []
        for rv in row_values:
            medians = [float(np.median(grid[(rv, cv)])) for cv in col_values]
            # The change from the last column (e.g. an unlimited CPU share) to the first (000 Table 6.2).
            change = 100 * (medians[0] - medians[-1]) / medians[-1] if medians[-1] else None
            table_rows.append([h.esc(h.fmt_param(rows_f, rv)), *[h.num(m, 2) for m in medians],
                               h.num(change, 1) + "%" if change is not None else "-"])
        caption = f"{mode}: median goodput (Mbit/s) over the {rows_f} x {cols_f} grid."
        html += (f'<p class="caption">{h.esc(caption)}</p>' +
                 h.table([f"{rows_f} \\ {cols_f}", *[h.fmt_param(cols_f, cv) for cv in col_values],
                          f"first vs last {cols_f}"], table_rows, numeric_from=1, css="data"))
    return html


def throughput_timeline(b: Builder, exp: Experiment, name: str) -> str:
    first = _first_runs(exp)
    keys = [run.run_key for runs in first.values() for run in runs.values()]
    if not keys:
        return h.note("No successful transfers.")
    rows = b.store.query(
        "SELECT run_key, side, flow, t_ms, rate_mbps FROM bulk_intervals WHERE experiment_id = ? "
        "AND run_key IN (SELECT unnest(?::VARCHAR[])) ORDER BY run_key, side, flow, t_ms", [exp.id, keys])
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_run[row["run_key"]].append(row)
    panels = []
    for cond in [c for c in exp.conditions if c in first][:MAX_TIMELINES]:
        series = {}
        for mode, run in sorted(first[cond].items(), key=lambda kv: h.mode_sort_key(kv[0])):
            points = [r for r in by_run.get(run.run_key, []) if r["rate_mbps"] is not None]
            if points and all(p["side"] is None for p in points):
                series[mode] = (np.array([0.0] + [p["t_ms"] / 1e3 for p in points]),
                                np.array([points[0]["rate_mbps"]] + [p["rate_mbps"] for p in points]))
        if series:
            panels.append((h.condition_label(exp, cond), series))
    if not panels:
        return h.note("No interval logs of single transfers.")
    fig = tf.timeline_figure(panels, "goodput (Mbit/s)")
    return b.figure(fig, name, "Goodput over time of one transfer per protocol (the first repetition), from the "
                    "transfer's own interval log.")


# ---------------------------------------------------------------------- cwnd over time


def _summed_cwnd(rows: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """The sum of several connections' windows on a common grid (each a step function, zero
    before its first and after its last row), from the first row; seconds and kB."""
    by_conn: dict[tuple[Any, Any], list[tuple[int, int]]] = defaultdict(list)
    for row in rows:
        if row["cwnd_bytes"] is not None:
            by_conn[(row["conn"], row["subflow"])].append((row["t_unix_ns"], row["cwnd_bytes"]))
    if not by_conn:
        return np.array([]), np.array([])
    t0 = min(points[0][0] for points in by_conn.values())
    t1 = max(points[-1][0] for points in by_conn.values())
    grid = np.arange(0.0, (t1 - t0) / 1e6 + GRID_MS, GRID_MS)
    total = np.zeros_like(grid)
    for points in by_conn.values():
        times = (np.array([p[0] for p in points]) - t0) / 1e6
        values = np.array([p[1] for p in points], dtype=float)
        index = np.searchsorted(times, grid, side="right") - 1
        alive = (index >= 0) & (grid <= times[-1])
        total[alive] += values[index[alive]]
    return grid / 1e3, total / 1e3


def _sender_rows(b: Builder, exp: Experiment, keys: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    rows = b.store.query(
        "SELECT s.run_key, s.conn, s.subflow, s.t_unix_ns, s.cwnd_bytes FROM transport_samples s "
        "JOIN connection_states c ON c.experiment_id = s.experiment_id AND c.run_key = s.run_key "
        "AND c.conn = s.conn AND c.role = s.role AND coalesce(c.subflow, -1) = coalesce(s.subflow, -1) "
        "WHERE s.experiment_id = ? AND c.sender AND s.run_key IN (SELECT unnest(?::VARCHAR[])) "
        "ORDER BY s.t_unix_ns", [exp.id, list(keys)])
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        out[row["run_key"]].append(row)
    return out


def cwnd_timeline(b: Builder, exp: Experiment, name: str) -> str:
    first = _first_runs(exp)
    keys = [run.run_key for runs in first.values() for run in runs.values()]
    samples = _sender_rows(b, exp, keys) if keys else {}
    if not samples:
        return h.note("No transport samples of the senders (set [artifacts] samples = true).")
    pairs = b.store.query("SELECT run_key, side, label, address FROM pair_sides WHERE experiment_id = ?", [exp.id])
    sides: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in pairs:
        sides[row["run_key"]].append(row)
    panels = []
    for cond in [c for c in exp.conditions if c in first]:
        for mode, run in sorted(first[cond].items(), key=lambda kv: h.mode_sort_key(kv[0])):
            if run.run_key not in sides:
                continue
            # One pair: both sides on the run's own clock.
            series = {}
            for side in sorted(sides[run.run_key], key=lambda s: s["side"]):
                mine = [r for r in samples.get(run.run_key, []) if side["address"] and f"-{side['address']}:" in str(r["conn"])]
                t, kb = _summed_cwnd(mine)
                if t.size:
                    series[f"{side['side']}: {side['label']}"] = (t, kb)
            if series:
                panels.append((_titled(mode, exp, cond), series))
        if any(run.run_key in sides for run in first[cond].values()):
            continue
        series = {}
        for mode, run in sorted(first[cond].items(), key=lambda kv: h.mode_sort_key(kv[0])):
            t, kb = _summed_cwnd(samples.get(run.run_key, []))
            if t.size:
                series[mode + (f" {run.page}" if run.page != h.NO_PAGE and len(exp.pages) > 1 else "")] = (t, kb)
        if series:
            panels.append((h.condition_label(exp, cond), series))
    if not panels:
        return h.note("No sender samples in the plotted runs.")
    shown = panels[:MAX_TIMELINES]
    note = h.note(f"{len(panels)} panels: showing the first {MAX_TIMELINES}.") if len(panels) > MAX_TIMELINES else ""
    fig = tf.timeline_figure(shown, "cwnd (kB)")
    caption = ("Congestion window of the sending end over time (the server of a download), one run per protocol "
               "(the first repetition) on one time axis from its first sample; a protocol's connections are "
               "summed (H1's six, H2-Parallel's two, every MPTCP subflow), as 001 Fig. 3 does. TCP windows are "
               "segments x MSS. In a pair, the two sides share the run's clock.")
    return note + b.figure(fig, name, caption)


# ---------------------------------------------------------------------- controller states


def controller_states(b: Builder, exp: Experiment, name: str) -> str:
    states = _sender_states(b, exp)
    runs = {r.run_key: r for r in exp.runs}
    states = [s for s in states if s["run_key"] in runs]
    if not states:
        return h.note("No per-connection controller states (set [artifacts] samples = true).")
    cells: dict[tuple[tuple[Any, ...], str, str], list[dict[str, Any]]] = defaultdict(list)
    for s in states:
        run = runs[s["run_key"]]
        cells[(run.condition, run.mode, s["transport"] or "?")].append(s)
    order = {c: i for i, c in enumerate(exp.conditions)}
    keys = sorted(cells, key=lambda k: (order[k[0]], h.mode_sort_key(k[1]), k[2]))
    bars = []
    table = []
    for key in keys:
        items = cells[key]
        cond, mode, transport = key
        label = _titled(f"{mode} ({transport})", exp, cond)
        fractions = {st: float(np.mean([x[f"frac_{st}"] or 0.0 for x in items])) for st in STATES}
        bars.append((label, fractions))
        exits = [x["slow_start_exit_ms"] for x in items if x["slow_start_exit_ms"] is not None]
        cwnd_exit = [x["cwnd_at_exit_bytes"] / 1e3 for x in items if x["cwnd_at_exit_bytes"] is not None]
        mean_cwnd = [x["mean_cwnd_bytes"] / 1e3 for x in items if x["mean_cwnd_bytes"] is not None]
        controllers = ", ".join(sorted({str(x["controller"]) for x in items}))
        table.append([h.esc(label), h.esc(controllers), str(len(items)),
                      *[h.num(100 * fractions[st], 1) for st in STATES],
                      f"{len(exits)}/{len(items)}", h.num(float(np.median(exits)) if exits else None, 0),
                      h.num(float(np.median(cwnd_exit)) if cwnd_exit else None, 1),
                      h.num(float(np.median(mean_cwnd)) if mean_cwnd else None, 1)])
    note = ""
    if len(bars) > MAX_STATE_BARS:
        note = h.note(f"{len(bars)} cells: the figure shows the first {MAX_STATE_BARS}; the table lists all.")
    fig = tf.state_fractions_figure(bars[:MAX_STATE_BARS], STATES)
    caption = ("Share of time the sending end of each connection spent in each controller state (000 Fig. 6.4), "
               "mean over the cell's connections. QUIC states come from protolab's controllers (quinn's own, such "
               "as bbr, report none: unknown); TCP's from TCP_INFO (CWR, Recovery and Loss are recovery; "
               "application-limited when the kernel's delivery-rate sample was).")
    header = ["cell", "controller", "connections", *[f"% {st.replace('_', ' ')}" for st in STATES],
              "left slow start", "exit ms (median)", "cwnd at exit kB", "mean cwnd kB"]
    table_caption = ("Per cell: the same shares in %, how many connections left slow start, when (ms after the "
                     "connection's first sample) and with what window (medians).")
    return (note + b.figure(fig, name, caption) + f'<p class="caption">{h.esc(table_caption)}</p>' +
            h.table(header, table, numeric_from=2, css="data"))


# ---------------------------------------------------------------------- fairness


def fairness(b: Builder, exp: Experiment, name: str) -> str:
    rows = b.store.query("SELECT * FROM pair_sides WHERE experiment_id = ? ORDER BY run_key, side", [exp.id])
    runs = {r.run_key: r for r in exp.runs}
    per_run: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        if row["run_key"] in runs:
            per_run[row["run_key"]][row["side"]] = row
    if not per_run:
        return h.note("No pairs recorded.")
    cells: dict[tuple[tuple[Any, ...], str], list[dict[str, dict[str, Any]]]] = defaultdict(list)
    for key, sides in per_run.items():
        if runs[key].status == "ok" and {"a", "b"} <= set(sides):
            cells[(runs[key].condition, runs[key].mode)].append(sides)
    order = {c: i for i, c in enumerate(exp.conditions)}
    table, bars = [], []
    for (cond, pair) in sorted(cells, key=lambda k: (order[k[0]], k[1])):
        reps = cells[(cond, pair)]
        a_label, b_label = reps[0]["a"]["label"], reps[0]["b"]["label"]
        share_a = [s["a"]["share"] for s in reps if s["a"]["share"] is not None]
        share_b = [s["b"]["share"] for s in reps if s["b"]["share"] is not None]
        jain = [s["a"]["jain"] for s in reps if s["a"]["jain"] is not None]
        rate_a = [s["a"]["common_mbps"] for s in reps if s["a"]["common_mbps"] is not None]
        rate_b = [s["b"]["common_mbps"] for s in reps if s["b"]["common_mbps"] is not None]
        common = [s["a"]["common_s"] for s in reps if s["a"]["common_s"] is not None]
        sa, sb = summarize(share_a), summarize(share_b)
        ratio = (float(np.mean(rate_a)) / float(np.mean(rate_b))) if rate_a and rate_b and np.mean(rate_b) > 0 else None

        def ci(s: Any) -> str:
            return (f"{h.num(s.mean, 3)} <small>[{h.num(s.mean_ci_low, 3)}, {h.num(s.mean_ci_high, 3)}]</small>"
                    if s.mean_ci_low is not None else h.num(s.mean if s.n else None, 3))

        reference = SEED_FIG7.get((a_label, b_label)) or SEED_FIG7.get((b_label, a_label)) or "-"
        table.append([h.esc(h.condition_label(exp, cond)), h.esc(a_label), h.esc(b_label), str(len(reps)),
                      ci(sa), ci(sb), h.num(ratio, 2), h.num(float(np.mean(jain)) if jain else None, 3),
                      h.num(float(np.mean(rate_a)) if rate_a else None, 2),
                      h.num(float(np.mean(rate_b)) if rate_b else None, 2),
                      h.num(float(np.mean(common)) if common else None, 1), h.esc(reference)])
        if share_a and share_b:
            bars.append((_titled(pair, exp, cond), a_label, b_label, sa.mean, sb.mean))
    if not table:
        return h.note("No pair with both sides measured.")
    caption = ("Two clients start together behind the shared bottleneck. Throughput per side is measured at the "
               "bottleneck (the emulator's deliveries to each client) over the interval where both receive; "
               f"share = its part of the two; mean over repetitions with the {CI_LEVEL:.0%} Student-t CI; ratio = "
               "mean throughput a / b; Jain's index (1 = equal). Last column: what 001 Fig. 7 found (gQUIC 39 "
               "there, the gquic39 profile here).")
    html = (f'<p class="caption">{h.esc(caption)}</p>' +
            h.table(["condition", "side a", "side b", "n", "share a", "share b", "ratio a/b", "Jain",
                     "a Mbit/s", "b Mbit/s", "both active s", "001 Fig. 7"], table, numeric_from=3, css="data"))
    if bars:
        html += b.figure(tf.shares_figure(bars), name, "Mean share of each side per pair (dashed: an equal share).")
    return html


def share_timeline(b: Builder, exp: Experiment, name: str) -> str:
    first = _first_runs(exp)
    keys = [run.run_key for runs in first.values() for run in runs.values()]
    rows = b.store.query("SELECT f.run_key, f.side, f.t_ms, f.mbps, p.label FROM flow_bins f JOIN pair_sides p "
                         "ON p.experiment_id = f.experiment_id AND p.run_key = f.run_key AND p.side = f.side "
                         "WHERE f.experiment_id = ? AND f.flow IS NULL AND f.run_key IN (SELECT unnest(?::VARCHAR[])) "
                         "ORDER BY f.run_key, f.side, f.t_ms", [exp.id, keys]) if keys else []
    if not rows:
        return h.note("No throughput bins (pairs only).")
    by_run: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_run[row["run_key"]][f"{row['side']}: {row['label']}"].append((row["t_ms"] / 1e3, row["mbps"]))
    panels = []
    for cond in [c for c in exp.conditions if c in first]:
        for mode, run in sorted(first[cond].items()):
            series = {label: (np.array([p[0] for p in points]), np.array([p[1] for p in points]))
                      for label, points in by_run.get(run.run_key, {}).items()}
            if series:
                panels.append((_titled(mode, exp, cond), series))
    shown = panels[:8]
    fig = tf.timeline_figure(shown, "throughput (Mbit/s)")
    bin_note = "bins of the scenario's bin_ms (100 ms by default)"
    return b.figure(fig, name, f"Throughput per side over time at the bottleneck (emulator event log, {bin_note}), "
                    "first repetition of each pair" + (f"; first 8 of {len(panels)} pairs." if len(panels) > 8 else "."))


def workload_of(exp: Experiment) -> str:
    kinds = {run.params.get("workload") or "page" for run in exp.runs}
    return kinds.pop() if len(kinds) == 1 else "page"

