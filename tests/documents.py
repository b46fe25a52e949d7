"""Contract documents for tests: complete, valid models built from a few numbers.

Every builder returns the generated model (protolab.results.generated), so a test's document is
checked against the schema like a real one; the real outputs the builders start from are the
contract crate's fixtures (crates/contract/tests/fixtures, made by real `protolab-net` runs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from protolab.results.generated.bulk_result import BulkResult
from protolab.results.generated.control_reply import Counters
from protolab.results.generated.link_params import LinkParams
from protolab.results.generated.load_result import LoadResult
from protolab.results.generated.rpm_result import RpmResult

FIXTURES = Path(__file__).resolve().parents[1] / "crates" / "contract" / "tests" / "fixtures"
START_NS = 1_760_000_000_000_000_000


def fixture(name: str) -> dict[str, Any]:
    """A real document of the contract crate's fixtures, as JSON."""
    return json.loads((FIXTURES / name).read_text())


def load_config(page: str = "page", mode: str = "h2", **overrides: Any) -> dict[str, Any]:
    config = fixture("load-h3.json")["config"]
    return {**config, "manifest": f"{page}.json", "page": page, "mode": mode, "quic_cc": "cubic",
            "quic_cc_canonical": "cubic", "samples_dir": None, "qlog_dir": None, "warm": False, **overrides}


def page_object(origin: str, path: str, size: int, *, parent: str | None = None, connection: int | None = 0,
                finished_ms: float | None = 10.0, status: int | None = 200, **overrides: Any) -> dict[str, Any]:
    return {"origin": origin, "path": path, "parent": parent, "delay_ms": 0, "queue_position": 0,
            "connection": connection, "status": status, "expected_bytes": size,
            "bytes": size if status == 200 else 0, "discovered_ms": 0.0, "queued_ms": 0.0, "started_ms": 1.0,
            "first_byte_ms": 5.0, "finished_ms": finished_ms, "error": None, **overrides}


def page_connection(index: int, origin: str, *, protocol: str = "h2", transport: str = "tcp", requests: int = 1,
                    bytes: int = 0, **overrides: Any) -> dict[str, Any]:
    return {"id": index, "origin": origin, "protocol": protocol, "transport": transport,
            "local": f"10.77.0.1:{40000 + index}", "remote": "10.77.1.1:443", "connect_start_ms": 0.0,
            "tcp_connect_ms": None if transport == "quic" else 10.0, "handshake_ms": 30.9, "requests": requests,
            "bytes": bytes, "subflows": None, "subflow_details": None, "error": None,
            "conn_id": f"{transport}-10.77.0.1:{40000 + index}-10.77.1.1:443", "samples_file": None, "qlog_file": None,
            "resumed": None if protocol == "h1c" else False, "zero_rtt": None, **overrides}


def load_result(*, page: str = "page", mode: str = "h2", status: str = "ok", plt_ms: float | None = 100.0,
                objects: list[dict[str, Any]] | None = None, connections: list[dict[str, Any]] | None = None,
                error: str | None = None, start_unix_ns: int = START_NS, **config: Any) -> LoadResult:
    objects = objects if objects is not None else [page_object("www.page.test", "/", 1000)]
    connections = connections if connections is not None else [
        page_connection(0, "www.page.test", requests=len(objects), bytes=sum(o["bytes"] for o in objects))]
    return LoadResult.model_validate({
        "schema_version": 1, "kind": "page_load", "config": load_config(page, mode, **config), "status": status,
        "error": error, "start_unix_ns": start_unix_ns, "plt_ms": plt_ms if status == "ok" else None,
        "bytes": sum(o["bytes"] for o in objects), "objects": objects, "connections": connections})


def bulk_result(*, goodput_bps: float | None = 5e6, status: str = "ok", **overrides: Any) -> BulkResult:
    document = fixture("bulk-tcp.json")
    return BulkResult.model_validate({**document, "goodput_bps": goodput_bps, "status": status, **overrides})


def rpm_result(**overrides: Any) -> RpmResult:
    return RpmResult.model_validate({**fixture("rpm-h2.json"), **overrides})


def link_counters(*, enqueued: int = 0, delivered: int | None = None, size: int = 1400, queue_full: int = 0,
                  random_loss: int = 0, aqm: int = 0, max_queue_packets: int = 0) -> dict[str, Any]:
    delivered = enqueued - queue_full if delivered is None else delivered
    return {"enqueued_packets": enqueued, "enqueued_bytes": enqueued * size, "delivered_packets": delivered,
            "delivered_bytes": delivered * size,
            "dropped_packets": {"queue_full": queue_full, "random_loss": random_loss, "aqm": aqm},
            "dropped_bytes": {"queue_full": queue_full * size, "random_loss": random_loss * size, "aqm": aqm * size},
            "queue_packets": 0, "queue_bytes": 0, "max_queue_packets": max_queue_packets,
            "max_queue_bytes": max_queue_packets * size}


def emulator_counters(**overrides: Any) -> dict[str, Any]:
    return {"rx_packets": 0, "tx_packets": 0, "unroutable": 0, "non_ipv4": 0, "tx_errors": 0, "timer_late_ns_max": 0,
            "timer_late_ns_mean": 0, "pcap_dropped": 0, "events_dropped": 0, "rt_switches": 0,
            "delivery_late": {"packets": 0, "mean_ns": 0, "max_ns": 0, "p99_ns_at_most": None,
                              "p999_ns_at_most": None, "buckets": []},
            "delay_compensation_ns": 0, **overrides}


def counters(links: dict[str, dict[str, Any]] | None = None, *, now_ns: int = START_NS,
             emulator: dict[str, Any] | None = None) -> Counters:
    return Counters.model_validate({"now_ns": now_ns, "links": links or {}, "paths": {},
                                    "emulator": emulator or emulator_counters()})


def link(*, rate_bps: int | None = None, delay_ns: int = 0, loss: dict[str, Any] | None = None,
         queue: dict[str, Any] | None = None, **overrides: Any) -> LinkParams:
    return LinkParams.model_validate({"rate_bps": rate_bps, "trace": None,
                                      "queue": queue or {"kind": "droptail", "packets": 1000}, "delay_ns": delay_ns,
                                      "jitter": None, "loss": loss, **overrides})
