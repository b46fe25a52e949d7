"""Throughput per client over time from the emulator's ground-truth event log (docs/control.md),
and the fairness of two clients sharing a bottleneck (001 §V-D, 004 ch. 8).

The log is read by DuckDB (no per-packet Python loop): deliveries on one link direction, grouped
by destination address (the client a download goes to), in bins of fixed length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_COLUMNS = ("{'t': 'BIGINT', 'ev': 'VARCHAR', 'link': 'VARCHAR', 'src': 'VARCHAR', 'dst': 'VARCHAR', "
            "'sport': 'INTEGER', 'dport': 'INTEGER', 'proto': 'INTEGER', 'size': 'BIGINT'}")


class EventLogError(ValueError):
    """The event log cannot be read."""


def jain_index(throughputs: Sequence[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 for equal shares, 1/n when one takes all."""
    values = [float(x) for x in throughputs]
    square_sum = sum(x * x for x in values)
    if not values or square_sum == 0:
        return None
    return sum(values) ** 2 / (len(values) * square_sum)


@dataclass
class SideTraffic:
    """What one client received through the link."""

    side: str
    address: str
    packets: int
    bytes: int
    first_ns: int | None
    last_ns: int | None


_FROM = (f"FROM read_json($path, format='newline_delimited', columns={_COLUMNS}) "
         "WHERE ev = 'deliver' AND link = $link AND dst IN (SELECT unnest($dsts::VARCHAR[]))")


def _query(events: Path, sql: str, link: str, sides: Mapping[str, str], **params: Any) -> list[tuple[Any, ...]]:
    """Runs `sql` (which uses `_FROM`) over the deliveries on `link` to the sides' addresses."""
    import duckdb

    con = duckdb.connect()
    try:
        return con.execute(sql, {"path": str(events), "link": link, "dsts": list(sides), **params}).fetchall()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EventLogError(f"{events}: cannot read the event log ({first})") from exc
    finally:
        con.close()


def side_traffic(events: Path, link: str, sides: Mapping[str, str]) -> dict[str, SideTraffic]:
    """Per side (client address -> side name): packets and bytes delivered on `link`, first and
    last delivery."""
    rows = _query(events, f"SELECT dst, count(*), sum(size), min(t), max(t) {_FROM} GROUP BY dst", link, sides)
    found = {row[0]: row for row in rows}
    out = {}
    for address, side in sides.items():
        row = found.get(address)
        out[side] = SideTraffic(side, address, int(row[1]) if row else 0, int(row[2] or 0) if row else 0,
                                int(row[3]) if row else None, int(row[4]) if row else None)
    return out


def side_bins(events: Path, link: str, sides: Mapping[str, str], origin_ns: int, bin_ms: float) -> list[dict[str, Any]]:
    """Rows `{side, flow, bin, t_ms, bytes, packets, mbps}` per side and bin of `bin_ms` from
    `origin_ns` (bins without a delivery are omitted): the side's total (`flow` None), and each
    flow of the side (`flow` = "proto src:sport>dst:dport", a connection or a QUIC flow)."""
    rows = _query(events, f"SELECT dst, src || ':' || sport || '>' || dst || ':' || dport AS f, proto, "
                          f"(t - $origin) // $bin AS b, sum(size), count(*) {_FROM} AND t >= $origin "
                          "GROUP BY GROUPING SETS ((dst, b), (dst, f, proto, b)) ORDER BY dst, f NULLS FIRST, b",
                  link, sides, origin=origin_ns, bin=int(bin_ms * 1e6))
    protocols = {6: "tcp", 17: "udp"}
    return [{"side": sides[dst], "flow": None if f is None else f"{protocols.get(proto, proto)} {f}", "bin": int(b),
             "t_ms": int(b) * bin_ms, "bytes": int(size), "packets": int(packets),
             "mbps": int(size) * 8 / (bin_ms / 1e3) / 1e6} for dst, f, proto, b, size, packets in rows]


def bytes_between(events: Path, link: str, sides: Mapping[str, str], start_ns: int, end_ns: int) -> dict[str, int]:
    """Bytes delivered to each side on `link` with start <= t <= end."""
    rows = _query(events, f"SELECT dst, sum(size) {_FROM} AND t BETWEEN $start AND $end GROUP BY dst",
                  link, sides, start=start_ns, end=end_ns)
    found = {dst: int(total or 0) for dst, total in rows}
    return {side: found.get(address, 0) for address, side in sides.items()}


def fairness(events: Path, link: str, sides: Mapping[str, str], bin_ms: float) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Bins per side, and per side: bytes and throughput while both sides were receiving (from
    the later first delivery to the earlier last one), its share of the two, and Jain's index.
    Outside that interval only one side competes, so it says nothing about sharing."""
    traffic = side_traffic(events, link, sides)
    firsts = [t.first_ns for t in traffic.values() if t.first_ns is not None]
    summary: dict[str, dict[str, Any]] = {}
    if not firsts:
        return [], {side: {"bytes": 0, "common_bytes": 0, "common_s": None, "common_mbps": None, "share": None,
                           "jain": None, "first_ms": None, "last_ms": None} for side in traffic}
    origin = min(firsts)
    bins = side_bins(events, link, sides, origin, bin_ms)
    complete = all(t.first_ns is not None for t in traffic.values())
    start = max(firsts) if complete else None
    end = min(t.last_ns for t in traffic.values() if t.last_ns is not None) if complete else None
    common = bytes_between(events, link, sides, start, end) if start is not None and end is not None and end > start else {}
    seconds = (end - start) / 1e9 if common and start is not None and end is not None else None
    rates = {side: common[side] * 8 / seconds / 1e6 for side in common} if seconds else {}
    total = sum(rates.values())
    jain = jain_index(list(rates.values())) if len(rates) == len(traffic) else None
    for side, t in traffic.items():
        summary[side] = {
            "bytes": t.bytes,
            "packets": t.packets,
            "first_ms": (t.first_ns - origin) / 1e6 if t.first_ns is not None else None,
            "last_ms": (t.last_ns - origin) / 1e6 if t.last_ns is not None else None,
            "common_bytes": common.get(side),
            "common_s": seconds,
            "common_mbps": rates.get(side),
            "share": rates[side] / total if side in rates and total > 0 else None,
            "jain": jain,
        }
    return bins, summary
