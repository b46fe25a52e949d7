"""Rows of the store's `rpm_results` from a `protolab-net rpm` result (schema `protolab.rpm`),
the run's parameters and the emulator's counters (docs/rpm.md). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protolab.scenarios.base import Condition
from protolab.scenarios.rpm import expected_loaded_rtt_ms

# The bottleneck direction that carries a direction's data (client on the left).
DATA_LINK = {"download": "p0.reverse", "upload": "p0.forward"}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _condition(params: Mapping[str, Any]) -> Condition | None:
    try:
        return Condition.from_axes({**params, "buffer": params.get("buffer", "default")})
    except (KeyError, TypeError, ValueError):
        return None


def rpm_rows(result: Mapping[str, Any], params: Mapping[str, Any], counters: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per direction of the result."""
    idle = result.get("idle") or {}
    idle_rpm = _number(idle.get("rpm"))
    directions = result.get("directions") or {}
    queue = str(params.get("queue", "droptail"))
    condition = _condition(params)
    expected = expected_loaded_rtt_ms(condition, queue) if condition is not None else None
    links = counters.get("links") or {}
    payload = sum(_number(d.get("bytes")) or 0.0 for d in directions.values() if isinstance(d, dict))
    rows = []
    for name, d in sorted(directions.items()):
        if not isinstance(d, dict):
            continue
        r = d.get("responsiveness") or {}
        rpm = _number(d.get("rpm"))
        foreign = _number(r.get("foreign_rpm"))
        probes = [p for p in d.get("probes") or [] if isinstance(p, dict)]
        confidence = d.get("confidence") or {}
        capacity = _number(d.get("capacity_bps"))
        wire = None
        if len(directions) == 1:
            delivered = (links.get(DATA_LINK.get(name, "")) or {}).get("delivered_bytes")
            wire = int(delivered) if isinstance(delivered, int) else None
        rows.append({
            "direction": name,
            "protocol": result.get("protocol"),
            "status": result.get("status"),
            "capacity_mbps": capacity / 1e6 if capacity is not None else None,
            "rpm": rpm,
            "loaded_latency_ms": _number(d.get("loaded_latency_ms")),
            "foreign_latency_ms": 60_000 / foreign if foreign else None,
            "self_latency_ms": _number(r.get("tm_http_self_ms")),
            "idle_latency_ms": _number(idle.get("latency_ms")),
            "idle_rpm": idle_rpm,
            "factor_of_increase": idle_rpm / rpm if idle_rpm and rpm else None,
            "expected_loaded_rtt_ms": expected,
            "queue": queue,
            "confidence_capacity": confidence.get("capacity"),
            "confidence_rpm": confidence.get("rpm"),
            "load_connections": d.get("load_connections"),
            "intervals": len(d.get("intervals") or []),
            "saturated_at": d.get("saturated_at"),
            "probes": sum(1 for p in probes if p.get("error") is None),
            "probe_errors": sum(1 for p in probes if p.get("error") is not None),
            "bytes": d.get("bytes"),
            "duration_s": _number(d.get("duration_s")),
            "wire_bytes": wire,
            "overhead_factor": wire / payload if wire and payload else None,
        })
    return rows
