"""The TCP segments of a capture, as tshark's field output gives them (pure: the text in, the
segments out), for the test cases over TCP (HTTP/1.1 and HTTP/2 over TLS: caddy, nginx,
Chromium; docs/interop.md): connections, the span of the server's response data.

TLS 1.3 encrypts the server's handshake messages in records that look like application data,
so the response is told by the flights instead: the server's first payload (its handshake
flight), the client's next payload (its Finished and request), and the server's payload from
then on is the response. tshark is run by the caller (`protolab.run.interop`) with
`TSHARK_FIELDS`, one segment a line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protolab.interop.trace import TraceError

TSHARK_FIELDS = ("frame.time_epoch", "ip.src", "ip.dst", "tcp.srcport", "tcp.dstport", "tcp.len",
                 "tcp.flags.syn", "tcp.flags.ack")


@dataclass(frozen=True)
class Segment:
    time_s: float
    src: str
    dst: str
    src_port: int
    dst_port: int
    length: int  # TCP payload bytes
    syn: bool
    ack: bool


def _number(text: str, what: str, source: str, line: int) -> float:
    try:
        return float(text)
    except ValueError:
        raise TraceError(f"{source}: line {line}: {what} {text!r} is not a number") from None


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true")


def parse_fields(text: str, source: str = "tshark output") -> list[Segment]:
    """The segments of tshark's `-T fields` output with `TSHARK_FIELDS`."""
    segments = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = line.split("\t")
        cells += [""] * (len(TSHARK_FIELDS) - len(cells))
        time_s, src, dst, sport, dport, length, syn, ack = cells[:len(TSHARK_FIELDS)]
        segments.append(Segment(_number(time_s, "frame.time_epoch", source, number), src, dst,
                                int(_number(sport or "0", "tcp.srcport", source, number)),
                                int(_number(dport or "0", "tcp.dstport", source, number)),
                                int(_number(length or "0", "tcp.len", source, number)), _flag(syn), _flag(ack)))
    return segments


def connections(segments: Sequence[Segment], server: str) -> int:
    """TCP connections the server accepted: its SYN-ACKs, one per client port (retransmitted
    SYN-ACKs count once)."""
    return len({(s.dst, s.dst_port) for s in segments if s.src == server and s.syn and s.ack})


def response_span(segments: Sequence[Segment], server: str) -> tuple[float, float] | None:
    """From the server's first payload after the client's second flight (see the module doc) to
    its last payload; None when the capture has no response."""
    ordered = sorted(segments, key=lambda s: s.time_s)
    server_flight = next((s.time_s for s in ordered if s.src == server and s.length > 0), None)
    if server_flight is None:
        return None
    request = next((s.time_s for s in ordered if s.dst == server and s.length > 0 and s.time_s > server_flight), None)
    if request is None:
        return None
    response = [s.time_s for s in ordered if s.src == server and s.length > 0 and s.time_s > request]
    return (response[0], response[-1]) if response else None


def handshake_s(segments: Sequence[Segment], client: str, server: str) -> float | None:
    """From the client's first SYN to the server's first response data (TCP and TLS handshakes
    and the request, as the QUIC cases' first Initial to the first 1-RTT packet). None when
    either is missing."""
    syns = [s.time_s for s in segments if s.src == client and s.dst == server and s.syn and not s.ack]
    span = response_span(segments, server)
    if not syns or span is None:
        return None
    return max(0.0, span[0] - min(syns))
