"""The report's responsiveness sections (docs/rpm.md): RPM, capacity and loaded latency per
condition and protocol with the loaded RTT the emulator's queue implies, and RPM against the
buffer size per queue discipline. Reads only the results store."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from protolab.report import section as h
from protolab.report.section import Builder, Experiment


def _rows(b: Builder, exp: Experiment) -> list[dict[str, Any]]:
    return b.store.query("SELECT * FROM rpm_results WHERE experiment_id = ?", [exp.id])


def _median(values: list[float | None]) -> float | None:
    good = [v for v in values if v is not None]
    return float(np.median(good)) if good else None


def responsiveness(b: Builder, exp: Experiment, name: str) -> str:
    rows = _rows(b, exp)
    runs = {r.run_key: r for r in exp.runs}
    rows = [r for r in rows if r["run_key"] in runs]
    if not rows:
        return h.note("No responsiveness results.")
    cells: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        run = runs[r["run_key"]]
        cells[(run.condition, run.mode, r["direction"])].append(r)
    order = {c: i for i, c in enumerate(exp.conditions)}
    table = []
    for key in sorted(cells, key=lambda k: (order.get(k[0], 0), h.mode_sort_key(k[1]), k[2])):
        cond, mode, direction = key
        items = cells[key]
        loaded = _median([r["loaded_latency_ms"] for r in items])
        foreign = _median([r["foreign_latency_ms"] for r in items])
        expected = _median([r["expected_loaded_rtt_ms"] for r in items])
        confidence = ",".join(sorted({str(r["confidence_rpm"]) for r in items}))
        table.append([
            h.esc(h.condition_label(exp, cond)), h.esc(mode), h.esc(direction), str(len(items)),
            h.num(_median([r["capacity_mbps"] for r in items]), 2),
            h.num(_median([r["idle_latency_ms"] for r in items]), 1),
            h.num(_median([r["rpm"] for r in items]), 0),
            h.num(_median([r["rpm_latency_mean"] for r in items]), 0),
            h.num(loaded, 1), h.num(foreign, 1), h.num(_median([r["self_latency_ms"] for r in items]), 1),
            h.num(expected, 1),
            h.num(foreign / expected if foreign and expected else None, 2),
            h.num(_median([r["factor_of_increase"] for r in items]), 2),
            h.num(_median([r["overhead_factor"] for r in items]), 3),
            h.esc(confidence),
        ])
    caption = ("Responsiveness under working conditions (draft-ietf-ippm-responsiveness, protolab-net rpm), medians "
               "over repetitions. Loaded = 60000 / RPM: the mean of the foreign probes' round trip (new connections: "
               "handshakes and a GET) and the self probes' (a GET on a loaded connection, which waits behind whatever "
               "the server already committed to that connection). RPM is the draft's formula (the mean of the foreign "
               "and self RPMs); RPM (latency mean) is goresponsiveness's and Apple's (the two latencies averaged, "
               "converted once), lower whenever self probes wait longer than foreign ones. Confidence speculative: "
               "goodput never saturated, the RPM is from the last intervals' probes. Expected = base RTT + the delay of a full drop-tail "
               "buffer (an AQM: + its target), known from the emulator's configuration; foreign / expected "
               "compares the network's queueing delay with it. Factor of increase = idle RPM / loaded RPM (003 ch. 7). "
               "Overhead = IP bytes at the bottleneck / payload bytes (003's overhead compensation factor).")
    html = (f'<p class="caption">{h.esc(caption)}</p>' +
            h.table(["condition", "mode", "direction", "n", "capacity Mbit/s", "idle ms", "RPM", "RPM (latency mean)", "loaded ms",
                     "foreign ms", "self ms", "expected ms", "foreign / expected", "factor of increase", "overhead",
                     "confidence"], table, numeric_from=3, css="data"))
    return html + _rpm_by_buffer(b, exp, name, rows, runs)


def _rpm_by_buffer(b: Builder, exp: Experiment, name: str, rows: list[dict[str, Any]], runs: dict[str, Any]) -> str:
    import matplotlib.pyplot as plt

    series: dict[tuple[str, str], dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        run = runs[r["run_key"]]
        buffer = run.params.get("buffer_bytes")
        bdp = None
        bandwidth, rtt = run.params.get("bandwidth_mbps"), run.params.get("rtt_ms")
        if isinstance(buffer, int | float) and isinstance(bandwidth, int | float) and isinstance(rtt, int | float) and bandwidth and rtt:
            bdp = buffer / (bandwidth * 1e6 * rtt / 1e3 / 8)
        if bdp is None or r["rpm"] is None:
            continue
        series[(run.mode, str(r["queue"]))][round(bdp, 2)].append(r["rpm"])
    if not series or all(len(points) < 2 for points in series.values()):
        return ""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for (mode, queue), points in sorted(series.items()):
        xs = sorted(points)
        ax.plot(xs, [float(np.median(points[x])) for x in xs], marker="o", linestyle="-" if queue == "droptail" else "--",
                label=f"{mode}, {queue}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("buffer (BDP)")
    ax.set_ylabel("RPM (median)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return b.figure(fig, f"{name}-rpm-buffer", "RPM against the bottleneck buffer, per protocol and queue discipline "
                                                 "(all other axes pooled; medians).")
