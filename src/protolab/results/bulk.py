"""A bulk transfer's result (`schemas/bulk-result.json`) in the store: bulk_transfers, bulk_intervals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protolab.results.generated.bulk_result import BulkResult, IntervalRow
from protolab.results.placement import Placement

SIDE_AND_FLOW = (
    ("side", "VARCHAR", "pairs: the client (a or b); NULL for single-client runs"),
    ("flow", "INTEGER", "index of the transfer within its side, from 0"),
)

BULK_TRANSFERS = Placement(
    table="bulk_transfers",
    model=BulkResult,
    renamed={"schema_version": "result_schema_version"},
    elsewhere={"intervals": "table bulk_intervals", "goodput_bps": "column goodput_mbps (Mbit/s)"},
    not_stored={"kind": "always bulk (the table says it)"},
    derived=(
        *SIDE_AND_FLOW,
        ("protocol", "VARCHAR", "tcp, h1c, h1, h2 or h3 (config.protocol)"),
        ("direction", "VARCHAR", "download or upload (config.direction)"),
        ("goodput_mbps", "DOUBLE", "goodput_bps of the result, Mbit/s"),
        ("transport", "VARCHAR", "tcp, mptcp or quic (connection.transport)"),
        ("quic_cc", "VARCHAR", "the client's QUIC controller (config.quic_cc)"),
        ("conn_id", "VARCHAR", "the connection's id in sample and qlog file names (connection.conn_id)"),
    ),
)

BULK_INTERVALS = Placement(
    table="bulk_intervals",
    model=IntervalRow,
    elsewhere={"rate_bps": "column rate_mbps (Mbit/s)"},
    derived=(
        *SIDE_AND_FLOW,
        ("rate_mbps", "DOUBLE", "bytes x 8 / the interval's length, Mbit/s (rate_bps of the row)"),
    ),
)


@dataclass(frozen=True)
class BulkTransfer:
    """One transfer of a run: its result, and where it stands (`side` of a pair, `flow` index)."""

    result: BulkResult
    side: str | None = None
    flow: int = 0


def _mbps(bps: float | None) -> float | None:
    return bps / 1e6 if bps is not None else None


def bulk_rows(transfer: BulkTransfer) -> dict[str, list[dict[str, Any]]]:
    """The rows of one transfer: one in bulk_transfers, one per interval in bulk_intervals."""
    result = transfer.result
    where = {"side": transfer.side, "flow": transfer.flow}
    connection = result.connection
    row = {
        **where,
        **BULK_TRANSFERS.row(result),
        "protocol": result.config.protocol,
        "direction": result.config.direction,
        "goodput_mbps": _mbps(result.goodput_bps),
        "transport": connection.transport if connection else None,
        "quic_cc": result.config.quic_cc,
        "conn_id": connection.conn_id if connection else None,
    }
    intervals = [{**where, **BULK_INTERVALS.row(i), "rate_mbps": _mbps(i.rate_bps)} for i in result.intervals]
    return {"bulk_transfers": [row], "bulk_intervals": intervals}


def bulk_status(results: list[BulkResult | None], errors: list[str]) -> tuple[str, str | None]:
    """A run's status and error from its transfers (None: a transfer that wrote no result)."""
    if any(r is None for r in results):
        return "failed", "; ".join(errors) or "a transfer wrote no result"
    done = [r for r in results if r is not None]
    bad = [r for r in done if r.status != "ok"]
    if not bad:
        return "ok", None
    status = "timeout" if all(r.status == "timeout" for r in bad) else "failed"
    return status, "; ".join(r.error or f"status {r.status}" for r in bad)


def artifact_files(result: BulkResult, kind: str) -> list[str]:
    """The client's samples (`kind` = "samples") or qlog ("qlog") file of the transfer."""
    name = {"samples": result.samples, "qlog": result.qlog}[kind]
    return [name] if name else []


PLACEMENTS = (BULK_TRANSFERS, BULK_INTERVALS)
