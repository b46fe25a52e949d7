"""A responsiveness test's result (`schemas/rpm-result.json`, docs/rpm.md) in the store:
one rpm_results row per direction tested.

The rows also carry what the run knows around the result (`RpmContext`): the bottleneck queue,
the loaded RTT a full buffer implies, and the bytes the bottleneck delivered in the data
direction (003's overhead factor).
"""

from __future__ import annotations

from dataclasses import dataclass

from protolab.results.generated.rpm_result import DirectionResult, RpmResult
from protolab.results.placement import Column, Placement

# The bottleneck direction that carries a direction's data (client on the left).
DATA_LINK = {"download": "p0.reverse", "upload": "p0.forward"}

RPM_COLUMNS: list[Column] = [
    ("direction", "VARCHAR NOT NULL", "download or upload"),
    ("protocol", "VARCHAR", "h1, h2 or h3"),
    ("status", "VARCHAR", "ok or error (the test's status)"),
    ("error", "VARCHAR", "what failed (discovery, every connection, ...)"),
    ("started_unix_ns", "BIGINT", "when the test started (Unix ns)"),
    ("capacity_mbps", "DOUBLE", "the last moving-average goodput of the load-generating connections, Mbit/s"),
    ("rpm", "DOUBLE", "responsiveness, round trips per minute (the draft's formula: the mean of the foreign and self RPMs)"),
    ("loaded_latency_ms", "DOUBLE", "60000 / rpm, ms"),
    ("rpm_latency_mean", "DOUBLE",
     "the same probes by goresponsiveness's and Apple's formula (the foreign and self latencies averaged, converted once)"),
    ("rpm_p90", "DOUBLE", "the draft's formula over the 90th percentile of each probe term"),
    ("rpm_latency_mean_p90", "DOUBLE", "goresponsiveness's formula over the 90th percentiles (its 'P90 RPM')"),
    ("foreign_latency_ms", "DOUBLE", "60000 / the foreign probes' RPM (new connections: handshakes and a GET), ms"),
    ("self_latency_ms", "DOUBLE", "TM of the self probes (GETs on loaded connections; h1: the TCP RTT estimate), ms"),
    ("idle_latency_ms", "DOUBLE", "60000 / the idle RPM (probes on the unloaded path), ms"),
    ("idle_rpm", "DOUBLE", "RPM of the idle probes"),
    ("factor_of_increase", "DOUBLE", "idle_rpm / rpm (003 ch. 7)"),
    ("expected_loaded_rtt_ms", "DOUBLE", "base RTT + a full drop-tail buffer's delay (an AQM: + its target, CoDel and FQ-CoDel 5 ms, PIE 15 ms)"),
    ("queue", "VARCHAR", "the bottleneck queue: droptail, codel, pie or fq_codel"),
    ("confidence_capacity", "VARCHAR", "low, medium or high (the draft's confidence)"),
    ("confidence_rpm", "VARCHAR",
     "low, medium or high; speculative: goodput never saturated, the RPM is from the last MAD intervals' probes"),
    ("load_connections", "INTEGER", "load-generating connections at the end"),
    ("load_connections_max", "INTEGER", "most load-generating connections open at an interval's end (cap: MNP)"),
    ("intervals", "INTEGER", "intervals the direction ran"),
    ("saturated_at", "INTEGER", "interval at which goodput was stable; NULL if never"),
    ("probes", "INTEGER", "probes completed without error"),
    ("probe_errors", "INTEGER", "probes that failed"),
    ("errors", "JSON", "errors of load-generating connections (the test went on with a new one)"),
    ("responsiveness", "JSON", "the trimmed means and partial RPMs behind rpm"),
    ("bytes", "BIGINT", "payload bytes the load-generating connections moved"),
    ("duration_s", "DOUBLE", "the direction's duration, s"),
    ("wire_bytes", "BIGINT", "IP bytes the bottleneck delivered in the data direction during the run (one direction tested only)"),
    ("overhead_factor", "DOUBLE", "wire_bytes / all payload bytes of the run (load, probes, idle): 003's overhead compensation factor"),
    ("config", "JSON", "config object of the result (the draft's parameters, URLs, controllers)"),
]

# What of the result is where: one row per direction, the result's own fields repeated on each.
_DERIVED = {"direction", "rpm_p90", "rpm_latency_mean_p90", "foreign_latency_ms", "self_latency_ms", "idle_latency_ms", "idle_rpm", "factor_of_increase",
            "expected_loaded_rtt_ms", "queue", "confidence_capacity", "confidence_rpm", "intervals", "probes",
            "probe_errors", "wire_bytes", "overhead_factor"}
RPM_RESULTS = Placement(
    table="rpm_results",
    model=RpmResult,
    derived=tuple(column for column in RPM_COLUMNS if column[0] in _DERIVED),
    elsewhere={"directions": "one row per direction", "idle": "columns idle_latency_ms, idle_rpm"},
    not_stored={
        "schema_": "always protolab.rpm",
        "schema_version": "of the result file, which is kept in the run's directory",
        "tool": "the protolab-net version: the experiment's provenance",
        "client": "the machine the client ran on: the lab host (the experiment's provenance)",
    },
)
RPM_DIRECTIONS = Placement(
    table="rpm_results",
    model=DirectionResult,
    renamed={"capacity_bps": "capacity_mbps"},
    elsewhere={"confidence": "columns confidence_capacity, confidence_rpm",
               "intervals": "column intervals (their count)", "probes": "columns probes, probe_errors (counts)"},
)


@dataclass(frozen=True)
class RpmContext:
    """What the run knows around an RPM result: the bottleneck queue, the loaded RTT its full
    buffer implies (None: unknown), and the IP bytes each bottleneck direction delivered."""

    queue: str = "droptail"
    expected_loaded_rtt_ms: float | None = None
    delivered_bytes: dict[str, int | None] | None = None


def _direction_row(name: str, d: DirectionResult, result: RpmResult, context: RpmContext,
                   wire: int | None, payload: float) -> dict[str, object]:
    idle_rpm = result.idle.rpm if result.idle else None
    r = d.responsiveness
    p90 = r.p90 if r else None
    return {
        "direction": name, "protocol": result.protocol, "status": result.status, "error": result.error,
        "started_unix_ns": result.started_unix_ns,
        "capacity_mbps": d.capacity_bps / 1e6 if d.capacity_bps is not None else None,
        "rpm": d.rpm, "loaded_latency_ms": d.loaded_latency_ms, "rpm_latency_mean": d.rpm_latency_mean,
        "rpm_p90": p90.rpm if p90 else None, "rpm_latency_mean_p90": p90.rpm_latency_mean if p90 else None,
        "foreign_latency_ms": 60_000 / r.foreign_rpm if r and r.foreign_rpm else None,
        "self_latency_ms": r.tm_http_self_ms if r else None,
        "idle_latency_ms": result.idle.latency_ms if result.idle else None, "idle_rpm": idle_rpm,
        "factor_of_increase": idle_rpm / d.rpm if idle_rpm and d.rpm else None,
        "expected_loaded_rtt_ms": context.expected_loaded_rtt_ms, "queue": context.queue,
        "confidence_capacity": d.confidence.capacity, "confidence_rpm": d.confidence.rpm,
        "load_connections": d.load_connections, "load_connections_max": d.load_connections_max, "intervals": len(d.intervals), "saturated_at": d.saturated_at,
        "probes": sum(1 for p in d.probes if p.error is None), "probe_errors": sum(1 for p in d.probes if p.error),
        "errors": list(d.errors), "responsiveness": r.model_dump(mode="json") if r else None,
        "bytes": d.bytes, "duration_s": d.duration_s,
        "wire_bytes": wire, "overhead_factor": wire / payload if wire and payload else None,
        "config": result.config.model_dump(mode="json"),
    }


def rpm_rows(result: RpmResult, context: RpmContext) -> list[dict[str, object]]:
    """One rpm_results row per direction of the result."""
    payload = float(sum(d.bytes for d in result.directions.values()))
    delivered = context.delivered_bytes or {}
    rows = []
    for name, d in sorted(result.directions.items()):
        # The bottleneck's bytes belong to one direction only when one was tested.
        wire = delivered.get(DATA_LINK[name]) if len(result.directions) == 1 else None
        rows.append(_direction_row(name, d, result, context, wire, payload))
    return rows


PLACEMENTS = (RPM_RESULTS, RPM_DIRECTIONS)
