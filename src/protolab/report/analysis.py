"""Report sections of the transport analysis (docs/analysis.md): losses against the emulator's
ground truth, the overhead factor, the throughput determinants (a decision tree, 000 §6.2), and
the per-connection QUIC_info/TCP_info page. They read only the results store."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from protolab.measure.conninfo import FIELDS
from protolab.report import section as h
from protolab.report.decision_tree import fit_tree
from protolab.report.section import Builder, Experiment
from protolab.report.stats import CI_LEVEL, summarize

QUIC_OVERHEAD_003 = 1.051  # 003 §6.3.2: median configured rate / LibreSpeed's goodput over HTTP/3
MAX_CONNECTION_ROWS = 2000
TREE_DEPTH = 3
THROUGHPUT_CLASSES = ((0.5, "below 50% of the link"), (0.8, "50-80%"), (float("inf"), "above 80%"))


def ground_truth(b: Builder, exp: Experiment, name: str) -> str:
    rows = b.store.query("SELECT * FROM loss_analysis WHERE experiment_id = ?", [exp.id])
    runs = {r.run_key: r for r in exp.runs}
    rows = [r for r in rows if r["run_key"] in runs]
    if not rows:
        return h.note("No loss analysis: it needs the senders' samples or qlogs ([artifacts] samples, qlog) and, for "
                      "the truth, the event log (events = true) and for TCP the captures (pcap = true).")
    cells: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        run = runs[row["run_key"]]
        cells[(run.condition, run.mode, row["transport"])].append(row)
    order = {c: i for i, c in enumerate(exp.conditions)}
    table = []
    for key in sorted(cells, key=lambda k: (order[k[0]], h.mode_sort_key(k[1]), k[2])):
        items = cells[key]
        truth = [r for r in items if r["ground_truth"]]

        def total(field: str, group: list[dict[str, Any]]) -> int:
            return sum(r[field] or 0 for r in group)

        detected, true, hits = total("detected", truth), total("true_losses", truth), total("true_positives", truth)

        def mean(field: str, group: list[dict[str, Any]]) -> float | None:
            values = [r[field] for r in group if r[field] is not None]
            return float(np.mean(values)) if values else None

        table.append([
            h.esc(h.condition_label(exp, key[0])), h.esc(key[1]), h.esc(key[2]), str(len(items)),
            f"{total('detected', items):,}", f"{true:,}" if truth else "-",
            h.num(hits / detected if truth and detected else None, 4), h.num(hits / true if truth and true else None, 4),
            f"{total('spurious', truth):,}" if truth else "-",
            h.num(mean("detected_mean_burst", items), 2), h.num(mean("true_mean_burst", truth), 2),
            h.num(mean("detected_mean_burst_003", items), 2),
        ])
    caption = ("Losses the senders detected (QUIC: packets declared lost, from the qlog; TCP: retransmitted segments, "
               "from the sender's capture) against the emulator's event log, which knows every datagram it dropped; "
               "pooled over the cell's connections. Precision = detected and dropped / detected; recall = detected "
               "and dropped / dropped; spurious = detected but delivered. Bursts (003 annex C): losses closer than "
               "sRTT + RTT variance, dated when the lost packet was sent; the last column dates them when declared "
               "lost, as 003's listing does.")
    html = (f'<p class="caption">{h.esc(caption)}</p>' +
            h.table(["condition", "mode", "transport", "connections", "detected", "true losses", "precision",
                     "recall", "spurious", "mean burst (detected)", "mean burst (true)", "mean burst (003 dating)"],
                    table, numeric_from=3, css="data"))
    notes = b.store.query("SELECT run_key, file, note FROM analysis_notes WHERE experiment_id = ?", [exp.id])
    if notes:
        html += '<p class="caption">What the analysis could not do:</p>' + h.table(
            ["run", "artifact", "note"], [[f"<code>{h.esc(n['run_key'][:8])}</code>", h.esc(n["file"]),
                                          h.esc(n["note"])] for n in notes[:200]], css="data")
    return html


def overhead(b: Builder, exp: Experiment, name: str) -> str:
    rows = b.store.query("SELECT run_key, protocol, factor FROM overhead WHERE experiment_id = ?", [exp.id])
    if not rows:
        return h.note("No overhead factor: it needs successful single-client downloads or page loads.")
    by_protocol: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by_protocol[str(row["protocol"])].append(row["factor"])
    table = []
    for protocol in sorted(by_protocol, key=h.mode_sort_key):
        s = summarize(by_protocol[protocol])
        ci = (f"{h.num(s.mean_ci_low, 4)} – {h.num(s.mean_ci_high, 4)}" if s.mean_ci_low is not None else "n/a")
        reference = f"{QUIC_OVERHEAD_003}" if protocol.startswith("h3") else "-"
        table.append([h.esc(protocol), str(s.n), h.num(s.median, 4), h.num(s.mean, 4), ci, reference])
    caption = ("Overhead factor = IP bytes the emulator delivered to the client during the run / application bytes "
               f"received (transfer or page body). {CI_LEVEL:.0%} t-CI of the mean. 003's 1.051 for QUIC (§6.3.2) is "
               "another quotient: the configured rate over LibreSpeed's measured goodput (protolab reproduce "
               "003-overhead computes both).")
    return (f'<p class="caption">{h.esc(caption)}</p>' +
            h.table(["protocol", "runs", "median", "mean", f"{CI_LEVEL:.0%} CI of mean", "003"], table,
                    numeric_from=1, css="data"))


FEATURES = ("frac_slow_start", "frac_congestion_avoidance", "frac_recovery", "frac_application_limited",
            "mean_rtt_ms", "p90_rtt_ms", "min_rtt_ms", "loss_rate", "mean_burst", "bursts_per_s")


def _throughput_class(ratio: float) -> str:
    return next(label for bound, label in THROUGHPUT_CLASSES if ratio < bound)


def determinants(b: Builder, exp: Experiment, name: str) -> str:
    """000 §6.2: a decision tree over trace features predicting the throughput class."""
    rows = b.store.query(
        "SELECT c.run_key, c.conn, c.frac_slow_start, c.frac_congestion_avoidance, c.frac_recovery, "
        "c.frac_application_limited, c.mean_rtt_ms, c.p90_rtt_ms, c.min_rtt_ms, c.duration_ms, c.controller, "
        "c.transport, i.lost, i.dgrams_sent, l.detected_mean_burst, l.detected_bursts "
        "FROM connection_states c LEFT JOIN connection_info i ON i.experiment_id = c.experiment_id AND "
        "i.run_key = c.run_key AND i.conn = c.conn AND i.role = c.role "
        "LEFT JOIN loss_analysis l ON l.experiment_id = c.experiment_id AND l.run_key = c.run_key AND "
        "l.conn = c.conn AND l.role = c.role WHERE c.experiment_id = ? AND c.sender AND c.subflow IS NULL", [exp.id])
    runs = {r.run_key: r for r in exp.runs if r.status == "ok" and r.goodput_mbps is not None}
    samples: list[dict[str, float]] = []
    labels: list[str] = []
    for row in rows:
        run = runs.get(row["run_key"])
        bandwidth = run.params.get("bandwidth_mbps") if run else None
        if run is None or not isinstance(bandwidth, int | float) or not bandwidth:
            continue
        sent = row["dgrams_sent"] or 0
        seconds = (row["duration_ms"] or 0) / 1e3
        values = {
            **{f: row[f] for f in FEATURES[:7]},
            "loss_rate": (row["lost"] or 0) / sent if sent else 0.0,
            "mean_burst": row["detected_mean_burst"] or 0.0,
            "bursts_per_s": (row["detected_bursts"] or 0) / seconds if seconds else 0.0,
        }
        sample = {f: float(values[f] or 0.0) for f in FEATURES}
        sample[f"is {row['transport']} {row['controller']}"] = 1.0
        samples.append(sample)
        labels.append(_throughput_class(run.goodput_mbps / bandwidth))  # type: ignore[operator]
    if len(samples) < 10 or len(set(labels)) < 2:
        return h.note("Too few bulk transfers with samples (10 needed, of at least two throughput classes) for a "
                      "decision tree.")
    kinds = sorted({k for s in samples for k in s if k.startswith("is ")})
    names = [*FEATURES, *kinds]
    fitted = fit_tree([{k: s.get(k, 0.0) for k in names} for s in samples], labels, names, depth=TREE_DEPTH)
    from protolab.report import transport_figures as tf

    fig = tf.tree_figure(fitted.tree, names, list(fitted.classes))
    table = [[h.esc(n), h.num(v, 3)] for n, v in fitted.importances]
    accuracy = f"training accuracy {fitted.training_accuracy:.2f}" + (
        f", {fitted.folds}-fold cross-validated accuracy {fitted.cv_accuracy:.2f}" if fitted.cv_accuracy is not None else "")
    caption = (f"Decision tree (depth {TREE_DEPTH}, scikit-learn, information gain as 000's C4.5) predicting the "
               f"throughput class of {len(samples)} senders (goodput / configured bandwidth: "
               f"{', '.join(label for _, label in THROUGHPUT_CLASSES)}) from their trace features: state fractions, "
               f"RTT statistics, loss rate and bursts, controller. {accuracy}.")
    return (b.figure(fig, name, caption) + '<p class="caption">Feature importances (information gain).</p>' +
            h.table(["feature", "importance"], table, numeric_from=1, css="data"))


def connections_page(store: Any, experiments: list[Experiment], out_dir: Path) -> Path | None:
    """`connections.html`: every connection end's QUIC_info / TCP_info row, per experiment."""
    parts = []
    for exp in experiments:
        rows = store.query("SELECT * FROM connection_info WHERE experiment_id = ? ORDER BY run_key, conn, role", [exp.id])
        if not rows:
            continue
        runs = {r.run_key: r for r in exp.runs}
        columns = ["run", "mode", "condition", "conn", "role", "transport", *[f for f, _, _ in FIELDS]]
        body = []
        for row in rows[:MAX_CONNECTION_ROWS]:
            run = runs.get(row["run_key"])
            cells = [f"<code>{h.esc(row['run_key'][:8])}</code>", h.esc(run.mode if run else "?"),
                     h.esc(h.condition_label(exp, run.condition) if run else "?"), h.esc(row["conn"]),
                     h.esc(row["role"]), h.esc(row["transport"])]
            for field, _, _ in FIELDS:
                value = row[field]
                cells.append("-" if value is None else h.num(value, 2) if isinstance(value, float) else f"{value:,}")
            body.append(cells)
        more = h.note(f"{len(rows)} connection ends: the first {MAX_CONNECTION_ROWS} are shown; `protolab export` "
                      "has all.") if len(rows) > MAX_CONNECTION_ROWS else ""
        parts.append(f"<h2>{h.esc(exp.name)}</h2>{more}" + h.table(columns, body, numeric_from=6, css="data"))
    if not parts:
        return None
    legend = "".join(f"<li><code>{h.esc(f)}</code>: {h.esc(doc)}</li>" for f, _, doc in FIELDS)
    document = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>protolab: connections</title>'
                f"<style>{h.CSS}</style></head><body><h1>QUIC_info and TCP_info per connection</h1>"
                '<p><a href="index.html">back to the report</a>. One row per connection end (003 §3.1, annex B); '
                f"a dash is a field the data does not give (docs/analysis.md).</p><details><summary>Fields</summary>"
                f"<ul>{legend}</ul></details>{''.join(parts)}</body></html>")
    page = out_dir / "connections.html"
    page.write_text(document, encoding="utf-8")
    return page


