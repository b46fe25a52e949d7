"""Where irtt's delay goes (docs/validation.md, "The emulator or the tool?"): every probe's
one-way delays split at the emulator's own timestamps.

irtt stamps each probe four times on the machine's wall clock (client send, server receive,
server send, client receive). The emulator's captures of the two hosts stamp the same datagrams
on its clock (Unix ns = its start time + CLOCK_MONOTONIC since): when the loop read the datagram
from the sender's TUN, and when it handed it to the receiver's TUN (the loop's time at the
delivery, not the model's due time: that is what the event log has). So each direction splits
into

- before: sender's tool and kernel, the TUN, until the loop reads it,
- inside: the emulator, read -> delivery (the model's delay, minus the delay compensation, plus
  the loop's lateness),
- after: the write to the receiver's TUN, its kernel, until the receiving tool's timestamp.

The two clocks are related by one offset (emulator - wall) measured with paired readings; it
moves time between `before` and `after` only. The client's share (its before upstream plus its
after downstream) and the server's share are free of it, as is `inside`.

Pure: bytes and documents in, numbers out; the lab side is in `timing`.
"""

from __future__ import annotations

import math
import statistics
import struct
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from ipaddress import IPv4Address
from typing import Any, NamedTuple

from pydantic import BaseModel

from protolab.errors import ToolError

NS_PER_MS = 1e6
UDP = 17
# pcap magic numbers (as read little-endian): microsecond and nanosecond timestamps.
PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
# Link types of IPv4 packets without a link-layer header: RAW (what the emulator writes), IPV4.
RAW_IP_LINKTYPES = (101, 228)
PCAP_HEADER = struct.Struct("IHHiIII")
RECORD_HEADER = struct.Struct("IIII")


class Datagram(NamedTuple):
    """A UDP datagram of a capture, stamped on the emulator's clock (Unix ns)."""

    t_ns: int
    src: str
    sport: int
    dst: str
    dport: int
    payload: bytes


class Probe(NamedTuple):
    """One answered irtt probe: its four wall-clock timestamps (Unix ns)."""

    seqno: int
    client_send: int
    server_receive: int
    server_send: int
    client_receive: int


def read_udp_capture(data: bytes, source: str) -> list[Datagram]:
    """The UDP datagrams of a pcap file of raw IPv4 packets (the emulator's captures)."""
    if len(data) < PCAP_HEADER.size:
        raise ToolError(f"{source}: not a pcap file (only {len(data)} bytes)")
    endian = next((e for e in "<>" if struct.unpack(e + "I", data[:4])[0] in (PCAP_MAGIC_US, PCAP_MAGIC_NS)), None)
    if endian is None:
        raise ToolError(f"{source}: not a pcap file (magic {data[:4].hex()})")
    magic, _, _, _, _, _, linktype = struct.unpack(endian + PCAP_HEADER.format, data[:PCAP_HEADER.size])
    if linktype not in RAW_IP_LINKTYPES:
        raise ToolError(f"{source}: link type {linktype}, expected raw IPv4 (101 or 228)")
    fraction_ns = 1 if magic == PCAP_MAGIC_NS else 1000
    record = struct.Struct(endian + RECORD_HEADER.format)
    datagrams: list[Datagram] = []
    offset = PCAP_HEADER.size
    while offset + record.size <= len(data):
        seconds, fraction, captured, _ = record.unpack_from(data, offset)
        offset += record.size
        if offset + captured > len(data):
            raise ToolError(f"{source}: record at byte {offset - record.size} is cut short")
        datagram = _udp_datagram(seconds * 1_000_000_000 + fraction * fraction_ns, data[offset:offset + captured])
        offset += captured
        if datagram is not None:
            datagrams.append(datagram)
    return datagrams


def _udp_datagram(t_ns: int, packet: bytes) -> Datagram | None:
    """The UDP datagram in an IPv4 packet; None for anything else (or a truncated one)."""
    if len(packet) < 20 or packet[0] >> 4 != 4 or packet[9] != UDP:
        return None
    header_bytes = (packet[0] & 0x0F) * 4
    if len(packet) < header_bytes + 8:
        return None
    sport, dport = struct.unpack_from("!HH", packet, header_bytes)
    return Datagram(t_ns, str(IPv4Address(packet[12:16])), sport, str(IPv4Address(packet[16:20])), dport,
                    packet[header_bytes + 8:])


def probes_from_irtt(document: Mapping[str, Any], source: str) -> list[Probe]:
    """The answered probes of `irtt client -o FILE`'s JSON, with all four wall timestamps."""
    probes: list[Probe] = []
    try:
        for trip in document["round_trips"]:
            if trip.get("lost") != "false":
                continue
            stamps = trip["timestamps"]
            probes.append(Probe(int(trip["seqno"]), int(stamps["client"]["send"]["wall"]),
                                int(stamps["server"]["receive"]["wall"]), int(stamps["server"]["send"]["wall"]),
                                int(stamps["client"]["receive"]["wall"])))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ToolError(f"{source}: round_trips without the four wall timestamps "
                        f"(irtt run with --tstamp=both --clock=both?): {exc!r}") from exc
    return probes


class Direction(BaseModel):
    """One direction's split, means over the matched probes (ms)."""

    before_ms: float
    inside_ms: float
    after_ms: float
    # The emulator's time beyond the model's delay (its lateness): inside - configured.
    inside_excess_ms: float
    inside_excess_p999_ms: float


class Decomposition(BaseModel):
    """irtt's delay split at the emulator (means over the probes matched in both directions, ms).

    rtt = client_host + server_host + up.inside + down.inside, exactly (wall clock, without the
    server's processing time, as irtt's RTT)."""

    probes: int
    matched: int
    clock_offset_ns: int
    clock_uncertainty_ns: int
    configured_one_way_ms: float
    up: Direction
    down: Direction
    client_host_ms: float
    server_host_ms: float
    server_processing_ms: float
    rtt_ms: float
    # The emulator's share of the RTT beyond the model's delays, and the hosts' (tools, kernels,
    # TUNs): together rtt - the model's round trip.
    emulator_excess_ms: float
    hosts_ms: float
    # The tail: the RTT's 99.9th percentile and, over the probes at or above it (the slowest
    # 0.1%), the mean of each share: what made those probes slow.
    rtt_p999_ms: float
    tail_probes: int
    tail_emulator_excess_ms: float
    tail_hosts_ms: float
    tail_client_host_ms: float
    tail_server_host_ms: float


def _match_in_order(sent: Sequence[int], read: Sequence[int], slack_ns: int) -> list[int | None]:
    """For each send (sorted, on the emulator's clock), the index of the first read at or after it
    (less `slack_ns`, the clock offset's error) that no earlier send took: a socket's datagrams
    reach the TUN in the order they were sent, however long each took."""
    matches: list[int | None] = []
    next_free = 0
    for moment in sent:
        next_free = max(next_free, bisect_left(read, moment - slack_ns))
        matches.append(next_free if next_free < len(read) else None)
        next_free += 1
    return matches


def _direction_times(
    sent: Sequence[int], received: Sequence[int], reads: Sequence[Datagram], deliveries: Iterable[Datagram],
    offset_ns: int, slack_ns: int,
) -> list[tuple[int, int] | None]:
    """Per send (wall clock, sorted; `received`: when the other end's tool got it), the
    emulator's (read, delivery) times of its datagram: the read in send order, the delivery of
    the same bytes. None when there is none, or when the delivery came after the receiving tool's
    timestamp (a datagram missing before it shifted the order: the match is wrong)."""
    delivered = {d.payload: d.t_ns for d in deliveries}
    found: list[tuple[int, int] | None] = []
    matches = _match_in_order([t + offset_ns for t in sent], [d.t_ns for d in reads], slack_ns)
    for index, receive in zip(matches, received, strict=True):
        delivery = None if index is None else delivered.get(reads[index].payload)
        if index is None or delivery is None or delivery - offset_ns > receive + slack_ns:
            found.append(None)
        else:
            found.append((reads[index].t_ns, delivery))
    return found


def _p999(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.999 * len(ordered)) - 1)] if ordered else math.nan


def decompose(
    probes: Sequence[Probe],
    client_capture: Sequence[Datagram],
    server_capture: Sequence[Datagram],
    *,
    server: tuple[str, int],
    clock_offset_ns: int,
    clock_uncertainty_ns: int,
    configured_one_way_ns: int,
    tolerance_ns: int = 200_000,
) -> Decomposition:
    """Split each probe's delays at the emulator (see the module's docstring). `server` is irtt's
    server address and port; `clock_offset_ns` is emulator clock - wall clock, known to within
    `clock_uncertainty_ns`; `tolerance_ns` more is allowed for timestamps taken in another order
    than the events (a datagram read "before" its send). Probes whose datagrams cannot be found
    in both captures are left out (`matched` counts the rest)."""
    slack_ns = tolerance_ns + 2 * clock_uncertainty_ns
    by_send = sorted(probes, key=lambda p: p.client_send)
    by_reply = sorted(probes, key=lambda p: p.server_send)
    upstream = sorted((d for d in client_capture if (d.dst, d.dport) == server), key=lambda d: d.t_ns)
    downstream = sorted((d for d in server_capture if (d.src, d.sport) == server), key=lambda d: d.t_ns)
    up = _direction_times([p.client_send for p in by_send], [p.server_receive for p in by_send], upstream,
                          (d for d in server_capture if (d.dst, d.dport) == server), clock_offset_ns, slack_ns)
    down = _direction_times([p.server_send for p in by_reply], [p.client_receive for p in by_reply], downstream,
                            (d for d in client_capture if (d.src, d.sport) == server), clock_offset_ns, slack_ns)
    down_of = dict(zip(by_reply, down, strict=True))
    rows = [(p, u, d) for p, u in zip(by_send, up, strict=True) if u is not None and (d := down_of[p]) is not None]
    if not rows:
        raise ToolError(f"no irtt probe matched to the captures ({len(probes)} probes, {len(upstream)} upstream and "
                        f"{len(downstream)} downstream datagrams)")
    return _summarize(rows, len(probes), clock_offset_ns, clock_uncertainty_ns, configured_one_way_ns)


def _summarize(
    rows: list[tuple[Probe, tuple[int, int], tuple[int, int]]], probes: int, offset: int, uncertainty: int,
    configured_ns: int,
) -> Decomposition:
    def ms(values: Iterable[float]) -> float:
        return statistics.fmean(values) / NS_PER_MS

    def direction(sent: list[int], times: list[tuple[int, int]], received: list[int]) -> Direction:
        excess = [(delivery - read - configured_ns) / NS_PER_MS for read, delivery in times]
        return Direction(before_ms=ms(read - offset - s for s, (read, _) in zip(sent, times, strict=True)),
                         inside_ms=ms(delivery - read for read, delivery in times),
                         after_ms=ms(r - (delivery - offset) for r, (_, delivery) in zip(received, times, strict=True)),
                         inside_excess_ms=statistics.fmean(excess), inside_excess_p999_ms=_p999(excess))

    def per_probe(probe: Probe, up: tuple[int, int], down: tuple[int, int]) -> tuple[float, float, float, float]:
        """RTT, the emulator's excess, the client's and the server's share (the offset cancels)."""
        inside = (up[1] - up[0]) + (down[1] - down[0])
        rtt = probe.client_receive - probe.client_send - (probe.server_send - probe.server_receive)
        client = (up[0] - probe.client_send) + (probe.client_receive - down[1])
        return rtt / NS_PER_MS, (inside - 2 * configured_ns) / NS_PER_MS, client / NS_PER_MS, \
            (rtt - inside - client) / NS_PER_MS

    probe_shares = sorted(per_probe(*row) for row in rows)
    rtt_p999 = _p999([shares[0] for shares in probe_shares])
    tail = [shares for shares in probe_shares if shares[0] >= rtt_p999]
    up = direction([p.client_send for p, _, _ in rows], [u for _, u, _ in rows], [p.server_receive for p, _, _ in rows])
    down = direction([p.server_send for p, _, _ in rows], [d for _, _, d in rows], [p.client_receive for p, _, _ in rows])
    client_host = up.before_ms + down.after_ms
    server_host = up.after_ms + down.before_ms
    return Decomposition(
        probes=probes, matched=len(rows), clock_offset_ns=offset, clock_uncertainty_ns=uncertainty,
        configured_one_way_ms=configured_ns / NS_PER_MS, up=up, down=down, client_host_ms=client_host,
        server_host_ms=server_host, server_processing_ms=ms(p.server_send - p.server_receive for p, _, _ in rows),
        rtt_ms=ms(p.client_receive - p.client_send - (p.server_send - p.server_receive) for p, _, _ in rows),
        emulator_excess_ms=up.inside_excess_ms + down.inside_excess_ms, hosts_ms=client_host + server_host,
        rtt_p999_ms=rtt_p999, tail_probes=len(tail), tail_emulator_excess_ms=statistics.fmean(t[1] for t in tail),
        tail_hosts_ms=statistics.fmean(t[2] + t[3] for t in tail), tail_client_host_ms=statistics.fmean(t[2] for t in tail),
        tail_server_host_ms=statistics.fmean(t[3] for t in tail),
    )


def clock_offset(readings: Iterable[tuple[int, int, int]]) -> tuple[int, int]:
    """Emulator clock - wall clock from paired readings (wall before, emulator, wall after), and
    its uncertainty: from the reading with the shortest round trip, half of it."""
    before, emulator, after = min(readings, key=lambda r: r[2] - r[0])
    return emulator - (before + after) // 2, (after - before + 1) // 2
