"""A run's link conditions in the store: one link_counters row per link direction, from the
parameters the emulator put in force (`schemas/link-params.json`, numbers: `rate_bps`,
`delay_ns`, ...) and its counters after the run (the `counters` reply, `schemas/control-reply.json`).
"""

from __future__ import annotations

from typing import Any

from protolab.results.documents import plain
from protolab.results.generated.control_reply import Counters, LinkCounters
from protolab.results.generated.link_params import LinkParams
from protolab.results.placement import Column, Placement

LINK_COLUMNS: list[Column] = [
    ("link", "VARCHAR NOT NULL", "link direction name (<host>.up, <path>.forward, ...)"),
    ("link_group", "VARCHAR", "host or path the direction belongs to"),
    ("direction", "VARCHAR", "up, down, forward or reverse"),
    ("configured_rate_mbps", "DOUBLE", "configured rate, Mbit/s (NULL: unlimited, trace or WiFi)"),
    ("configured_delay_ms", "DOUBLE", "configured propagation delay, ms"),
    ("configured_loss_pct", "DOUBLE", "configured random loss, % (stationary rate for Gilbert-Elliott)"),
    ("configured_queue", "JSON", "configured queue"),
    ("config", "JSON", "the link parameters in force (schemas/link-params.json: numbers, e.g. rate_bps, delay_ns)"),
    ("now_ns", "BIGINT", "now_ns of the counters reply"),
    ("interval_s", "DOUBLE", "interval the counters cover (the run's duration), s"),
    ("arrived_packets", "BIGINT", "packets that arrived at the link (see docs/store.md)"),
    ("enqueued_packets", "BIGINT", "packets enqueued"),
    ("enqueued_bytes", "BIGINT", "bytes enqueued"),
    ("delivered_packets", "BIGINT", "packets delivered"),
    ("delivered_bytes", "BIGINT", "bytes delivered (IP bytes)"),
    ("dropped_queue_full_packets", "BIGINT", "packets dropped because the queue was full"),
    ("dropped_random_loss_packets", "BIGINT", "packets dropped by random loss"),
    ("dropped_aqm_packets", "BIGINT", "packets dropped by the AQM (CoDel)"),
    ("dropped_queue_full_bytes", "BIGINT", "bytes dropped because the queue was full"),
    ("dropped_random_loss_bytes", "BIGINT", "bytes dropped by random loss"),
    ("dropped_aqm_bytes", "BIGINT", "bytes dropped by the AQM"),
    ("max_queue_packets", "BIGINT", "largest queue occupancy, packets"),
    ("max_queue_bytes", "BIGINT", "largest queue occupancy, bytes"),
    ("achieved_loss_pct", "DOUBLE", "100 * random-loss drops / arrived packets"),
    ("drop_pct", "DOUBLE", "100 * drops of every cause / arrived packets"),
    ("achieved_rate_mbps", "DOUBLE", "delivered bytes * 8 / interval_s, Mbit/s (mean over the run)"),
    ("counters", "JSON", "the raw counters of the link direction"),
]
_DERIVED = {"link", "link_group", "direction", "configured_rate_mbps", "configured_delay_ms", "configured_loss_pct",
            "configured_queue", "config", "now_ns", "interval_s", "arrived_packets", "achieved_loss_pct", "drop_pct",
            "achieved_rate_mbps", "counters", *(f"dropped_{cause}_{unit}" for cause in ("queue_full", "random_loss", "aqm")
                                                for unit in ("packets", "bytes"))}

LINK_PARAMS = Placement(
    table="link_counters",
    model=LinkParams,
    elsewhere={"rate_bps": "column configured_rate_mbps", "delay_ns": "column configured_delay_ms",
               "loss": "column configured_loss_pct", "queue": "column configured_queue",
               "trace": "column config (JSON)", "trace_start_ns": "column config (JSON)",
               "jitter": "column config (JSON)", "wifi": "column config (JSON)"},
)
LINK_COUNTERS = Placement(
    table="link_counters",
    model=LinkCounters,
    elsewhere={"dropped_packets": "columns dropped_<cause>_packets", "dropped_bytes": "columns dropped_<cause>_bytes",
               "queue_packets": "column counters (JSON): the occupancy when read, after the run",
               "queue_bytes": "column counters (JSON): the occupancy when read, after the run",
               "in_flight_packets": "column counters (JSON): the packets propagating when read, after the run"},
    derived=tuple(column for column in LINK_COLUMNS if column[0] in _DERIVED),
)


def configured_loss_pct(params: LinkParams) -> float:
    """The link's random loss, %: Bernoulli's p, or Gilbert-Elliott's stationary loss rate."""
    loss = plain(params.loss)
    if not loss:
        return 0.0
    if loss.get("kind") == "gilbert-elliott":
        p, r = float(loss["p"]), float(loss["r"])
        good, bad = float(loss.get("loss_good", 0.0)), float(loss.get("loss_bad", 1.0))
        return 100 * (r * good + p * bad) / (p + r) if p + r > 0 else 100 * good
    return 100 * float(loss["p"])


def _configured(params: LinkParams | None) -> dict[str, Any]:
    if params is None:
        return {"configured_rate_mbps": None, "configured_delay_ms": None, "configured_loss_pct": None,
                "configured_queue": None, "config": None}
    return {
        "configured_rate_mbps": params.rate_bps / 1e6 if params.rate_bps is not None else None,
        "configured_delay_ms": params.delay_ns / 1e6,
        "configured_loss_pct": configured_loss_pct(params),
        "configured_queue": plain(params.queue),
        "config": plain(params),
    }


def _achieved(counters: LinkCounters, drophead: bool, duration_s: float) -> dict[str, Any]:
    row: dict[str, Any] = {name: getattr(counters, name) for name in (
        "enqueued_packets", "enqueued_bytes", "delivered_packets", "delivered_bytes", "max_queue_packets",
        "max_queue_bytes")}
    for unit in ("packets", "bytes"):
        for cause in ("queue_full", "random_loss", "aqm"):
            row[f"dropped_{cause}_{unit}"] = getattr(getattr(counters, f"dropped_{unit}"), cause)
    drops = counters.dropped_packets
    # docs/control.md: arrived = enqueued + random_loss + queue_full at arrival; a drop-head
    # queue drops packets that were enqueued first, so they are already counted.
    arrived = counters.enqueued_packets + drops.random_loss + (0 if drophead else drops.queue_full)
    row["arrived_packets"] = arrived
    if arrived > 0:
        row["achieved_loss_pct"] = 100.0 * drops.random_loss / arrived
        row["drop_pct"] = 100.0 * (drops.random_loss + drops.queue_full + drops.aqm) / arrived
    if duration_s > 0:
        row["achieved_rate_mbps"] = counters.delivered_bytes * 8 / duration_s / 1e6
    row["counters"] = plain(counters)
    return row


def link_rows(config: dict[str, LinkParams], counters: Counters | None, duration_s: float) -> list[dict[str, Any]]:
    """One link_counters row per link direction that was configured or counted."""
    links = counters.links if counters is not None else {}
    rows = []
    for name in sorted(set(config) | set(links)):
        group, _, direction = name.rpartition(".")
        params = config.get(name)
        queue = plain(params.queue) if params is not None else None
        row: dict[str, Any] = {"link": name, "link_group": group or None, "direction": direction if group else None,
                               **_configured(params), "interval_s": duration_s,
                               "now_ns": counters.now_ns if counters is not None else None}
        if name in links:
            row.update(_achieved(links[name], isinstance(queue, dict) and queue.get("kind") == "drophead", duration_s))
        rows.append(row)
    return rows


PLACEMENTS = (LINK_PARAMS, LINK_COUNTERS)
