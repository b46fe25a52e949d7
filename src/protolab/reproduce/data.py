"""The rows a figure's claims are checked on, read from a results store."""

from __future__ import annotations

import json
from typing import Any

from protolab.errors import ProtolabError
from protolab.plan.spec import CONDITION_COLUMNS
from protolab.run.runner import PlannedRun
from protolab.store import ResultsStore

RUN_COLUMNS = ("run_key", "mode", "page", *CONDITION_COLUMNS, "quic_cc", "tcp_cc",
               "repetition", "plt_ms", "goodput_mbps")


def queue_fill(counters: dict[str, Any]) -> float | None:
    """The largest queue occupancy of a link direction over its limit (1.0: it was full)."""
    queue = counters.get("configured_queue")
    queue = json.loads(queue) if isinstance(queue, str) else queue
    if not isinstance(queue, dict):
        return None
    for unit, used in (("bytes", counters.get("max_queue_bytes")), ("packets", counters.get("max_queue_packets"))):
        limit = queue.get(unit)
        if isinstance(limit, int | float) and limit > 0 and used is not None:
            return float(used) / float(limit)
    return None


def _link_metrics(store: ResultsStore, experiment: str) -> dict[str, dict[str, Any]]:
    """Per run: `queue_fill.<link>` and `queue_drops.<link>` (packets dropped at a full queue)."""
    metrics: dict[str, dict[str, Any]] = {}
    for c in store.query("SELECT run_key, link, configured_queue, max_queue_bytes, max_queue_packets, "
                         "dropped_queue_full_packets FROM link_counters WHERE experiment_id = ?", [experiment]):
        run = metrics.setdefault(c["run_key"], {})
        run[f"queue_fill.{c['link']}"] = queue_fill(c)
        run[f"queue_drops.{c['link']}"] = c["dropped_queue_full_packets"]
    return metrics


def _runs(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """Successful runs, each with its scenario parameters and extra axes (`params`) merged in,
    and the queue metrics of every link direction."""
    rows = store.query(f"SELECT {', '.join(RUN_COLUMNS)}, params FROM runs WHERE experiment_id = ? AND status = 'ok'",
                       [experiment])
    links = _link_metrics(store, experiment)
    out = []
    for row in rows:
        params = row.pop("params")
        extra = json.loads(params) if isinstance(params, str) else (params or {})
        out.append({**extra, **links.get(row["run_key"], {}), **row})
    return out


def _pairs(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    return store.query(
        "SELECT a.run_key, a.label || ' vs ' || b.label AS pair, a.share AS share_a, b.share AS share_b, a.jain AS jain "
        "FROM pair_sides a JOIN pair_sides b USING (experiment_id, run_key) JOIN runs r USING (experiment_id, run_key) "
        "WHERE a.side = 'a' AND b.side = 'b' AND a.experiment_id = ? AND r.status = 'ok'", [experiment])


def _overhead(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    return store.query(
        "SELECT o.run_key, o.protocol, o.link, o.factor FROM overhead o JOIN runs r USING (experiment_id, run_key) "
        "WHERE o.experiment_id = ? AND r.status = 'ok'", [experiment])


def _rpm(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """Per responsiveness result: the run's mode and condition, the buffer in BDPs, and the
    measured loaded latencies over the expected loaded RTT."""
    rows = store.query(
        "SELECT x.run_key, r.mode, r.bandwidth_mbps, r.rtt_ms, r.buffer_bytes, x.direction, x.queue, x.rpm, "
        "x.loaded_latency_ms, x.foreign_latency_ms, x.expected_loaded_rtt_ms, x.factor_of_increase, x.overhead_factor "
        "FROM rpm_results x JOIN runs r USING (experiment_id, run_key) WHERE x.experiment_id = ? AND r.status = 'ok'",
        [experiment])
    for row in rows:
        bandwidth, rtt, buffer = row["bandwidth_mbps"], row["rtt_ms"], row["buffer_bytes"]
        row["buffer_bdp"] = round(buffer / (bandwidth * 1e6 * rtt / 1e3 / 8), 2) if bandwidth and rtt and buffer else None
        expected = row["expected_loaded_rtt_ms"]
        for name in ("loaded", "foreign"):
            value = row[f"{name}_latency_ms"]
            row[f"{name}_over_expected"] = value / expected if value is not None and expected else None
    return rows


def recorded_repetitions(store: ResultsStore, experiment: str) -> int | None:
    """The repetitions of the spec last run into the store (an adaptive run's last round)."""
    for row in store.query("SELECT spec FROM experiments WHERE id = ?", [experiment]):
        spec = json.loads(row["spec"]) if isinstance(row["spec"], str) else row["spec"]
        repetitions = spec.get("repetitions") if isinstance(spec, dict) else None
        return repetitions if isinstance(repetitions, int) else None
    return None


def planned_row(run: PlannedRun) -> dict[str, Any]:
    """What a claim's filters can select of a run before it ran: its mode, page, condition and
    scenario parameters, as the row sources name them (for pairs the mode is the pair, for
    overhead the protocol; the rpm source's buffer in BDPs)."""
    c = run.condition
    row = {**run.params, **dict(c.extras), "mode": run.mode, "page": run.page.name if run.page else None,
           "bandwidth_mbps": c.bandwidth_mbps, "rtt_ms": c.rtt_ms, "loss_pct": c.loss_pct,
           "pair": run.mode, "protocol": run.mode}
    if c.bandwidth_mbps and c.rtt_ms and c.buffer_bytes:
        row["buffer_bdp"] = round(c.buffer_bytes / (c.bandwidth_mbps * 1e6 * c.rtt_ms / 1e3 / 8), 2)
    return row


SOURCES = {"runs": _runs, "pairs": _pairs, "overhead": _overhead, "rpm": _rpm}


def _page_attributes(store: ResultsStore, experiment: str) -> dict[str, dict[str, Any]]:
    """Per page, 002 Table 5.1's attributes from its most complete successful load: objects,
    bytes (the manifest's sizes), origins (server addresses) and the mean object size."""
    attributes: dict[str, dict[str, Any]] = {}
    for row in store.query(
            "SELECT r.page, o.run_key, count(*) AS objects, sum(o.expected_bytes) AS bytes, "
            "count(DISTINCT o.origin) AS origins FROM objects o JOIN runs r USING (experiment_id, run_key) "
            "WHERE o.experiment_id = ? AND r.status = 'ok' GROUP BY r.page, o.run_key ORDER BY o.run_key",
            [experiment]):
        known = attributes.get(row["page"])
        if known is None or row["objects"] > known["page_objects"]:
            bytes_ = float(row["bytes"] or 0)
            attributes[row["page"]] = {"page_objects": row["objects"], "page_bytes": bytes_,
                                       "page_origins": row["origins"],
                                       "page_mean_object_bytes": bytes_ / row["objects"]}
    return attributes


def _page_runs(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """The runs, each with its page's attributes (`page_objects`, `page_bytes`, `page_origins`,
    `page_mean_object_bytes`): 002 Table 5.1 relates a page's score to them."""
    attributes = _page_attributes(store, experiment)
    return [{**row, **attributes.get(row["page"], {})} for row in _runs(store, experiment)]


SOURCES["page_runs"] = _page_runs


def rows_of(store: ResultsStore, source: str, experiment: str) -> list[dict[str, Any]]:
    """The rows of one kind (`runs`, `pairs`, `overhead`) for an experiment."""
    try:
        reader = SOURCES[source]
    except KeyError:
        raise ProtolabError(f"unknown row source {source!r} (known: {', '.join(SOURCES)})") from None
    return reader(store, experiment)
