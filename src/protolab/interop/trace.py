"""The QUIC packets of a capture, as tshark's field output gives them (pure: the text in, the
datagrams out), and what the test cases read from them: handshakes, versions, Retry packets,
the span of the server's 1-RTT data.

tshark is run by the caller (`protolab.run.interop`) with `TSHARK_FIELDS`, one datagram a line,
coalesced packets' values joined by commas. Long-header packets come first in a datagram (a
short-header packet can only be the last), so the long-header fields line up with the
`header_form` values that are 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from protolab.errors import ProtolabError

# Field order of one tshark output line (tab-separated).
TSHARK_FIELDS = ("frame.time_epoch", "ip.src", "ip.dst", "udp.length", "quic.header_form",
                 "quic.long.packet_type", "quic.version", "quic.scid", "tls.handshake.ciphersuite",
                 "quic.key_phase", "quic.crypto.offset", "quic.crypto.length")
# RFC 9000 §17.2 long packet types (version 1; QUIC v2 renumbers them, tshark maps them back).
LONG_TYPES = {0: "initial", 1: "0rtt", 2: "handshake", 3: "retry"}


class TraceError(ProtolabError):
    """tshark's output could not be read as QUIC datagrams."""


@dataclass(frozen=True)
class QuicPacket:
    long_header: bool
    kind: str  # initial, 0rtt, handshake, retry, version_negotiation or 1rtt
    version: int | None  # long headers only
    scid: str | None  # long headers only (hex)


@dataclass(frozen=True)
class Datagram:
    time_s: float
    src: str
    dst: str
    udp_length: int
    packets: tuple[QuicPacket, ...]
    cipher_suites: tuple[int, ...] = ()  # a ClientHello's offer (tshark decrypts Initial packets itself)
    key_phases: tuple[int, ...] = ()  # of its 1-RTT packet; tshark gives it only with the keys (a key log)
    crypto_end: int = 0  # the highest offset + length of its CRYPTO frames (Handshake packets: with the keys only)


def _split(value: str) -> list[str]:
    return [v for v in value.split(",") if v != ""]


def _int(text: str, what: str, source: str, line: int) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise TraceError(f"{source}: line {line}: {what} {text!r} is not a number") from None


def parse_fields(text: str, source: str = "tshark output") -> list[Datagram]:
    """The datagrams of tshark's `-T fields` output with `TSHARK_FIELDS` (see the module doc)."""
    datagrams: list[Datagram] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) < len(TSHARK_FIELDS):
            cells += [""] * (len(TSHARK_FIELDS) - len(cells))
        time_s, src, dst, length, forms, types, versions, scids, suites, phases, offsets, lengths = \
            cells[:len(TSHARK_FIELDS)]
        try:
            time_value = float(time_s)
        except ValueError:
            raise TraceError(f"{source}: line {number}: frame.time_epoch {time_s!r} is not a number") from None
        long_types, long_versions, long_scids = _split(types), _split(versions), _split(scids)
        packets: list[QuicPacket] = []
        long_index = 0
        for form in _split(forms):
            if _int(form, "quic.header_form", source, number) == 0:
                packets.append(QuicPacket(False, "1rtt", None, None))
                continue
            version = (_int(long_versions[long_index], "quic.version", source, number)
                       if long_index < len(long_versions) else None)
            if version == 0:
                kind = "version_negotiation"
            elif long_index < len(long_types):
                kind = LONG_TYPES.get(_int(long_types[long_index], "quic.long.packet_type", source, number), "unknown")
            else:
                kind = "unknown"
            scid = long_scids[long_index] if long_index < len(long_scids) else None
            packets.append(QuicPacket(True, kind, version, scid))
            long_index += 1
        datagrams.append(Datagram(time_value, src, dst, _int(length or "0", "udp.length", source, number),
                                  tuple(packets),
                                  tuple(_int(v, "tls.handshake.ciphersuite", source, number) for v in _split(suites)),
                                  tuple(_key_phase(v, source, number) for v in _split(phases)),
                                  _crypto_end(offsets, lengths, source, number)))
    return datagrams


def _crypto_end(offsets: str, lengths: str, source: str, line: int) -> int:
    """Each CRYPTO frame prints both fields, so the two lists pair up."""
    ends = [_int(o, "quic.crypto.offset", source, line) + _int(n, "quic.crypto.length", source, line)
            for o, n in zip(_split(offsets), _split(lengths), strict=False)]
    return max(ends, default=0)


def _key_phase(text: str, source: str, line: int) -> int:
    """tshark prints the bit as 0/1 or False/True depending on its version."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return int(lowered == "true")
    return _int(text, "quic.key_phase", source, line)


def _packets(datagrams: Iterable[Datagram], sender: str, kind: str) -> list[tuple[Datagram, QuicPacket]]:
    return [(d, p) for d in datagrams if d.src == sender for p in d.packets if p.kind == kind]


def handshakes(datagrams: Sequence[Datagram], server: str) -> int:
    """QUIC handshakes: the distinct source connection IDs of the server's Initial packets (a
    server keeps its SCID through a handshake, the client may change its DCID after a Retry)."""
    return len({p.scid for _, p in _packets(datagrams, server, "initial")})


def versions(datagrams: Sequence[Datagram], server: str) -> set[int]:
    """The versions of the server's Initial packets."""
    return {p.version for _, p in _packets(datagrams, server, "initial") if p.version is not None}


def retries(datagrams: Sequence[Datagram], server: str) -> int:
    return len(_packets(datagrams, server, "retry"))


def offered_cipher_suites(datagrams: Sequence[Datagram], server: str) -> set[int]:
    """The TLS cipher suites the ClientHellos sent to `server` offer."""
    return {suite for d in datagrams if d.dst == server for suite in d.cipher_suites}


def zero_rtt_packets(datagrams: Sequence[Datagram], server: str) -> int:
    """0-RTT packets sent to the server."""
    return sum(1 for d in datagrams if d.dst == server for p in d.packets if p.kind == "0rtt")


def one_rtt_span(datagrams: Sequence[Datagram], sender: str) -> tuple[float, float] | None:
    """First and last time a datagram from `sender` carried a 1-RTT packet; None without any."""
    times = [d.time_s for d, _ in _packets(datagrams, sender, "1rtt")]
    return (min(times), max(times)) if times else None


def handshake_s(datagrams: Sequence[Datagram], client: str, server: str) -> float | None:
    """From the client's first Initial to the server's first 1-RTT packet (the server sends
    1-RTT data once it has the client's Finished, or 0.5-RTT data right after its own flight:
    then this is the time to the server's first flight). None when either is missing."""
    initials = [d.time_s for d, _ in _packets(datagrams, client, "initial")]
    span = one_rtt_span(datagrams, server)
    if not initials or span is None:
        return None
    return max(0.0, span[0] - min(initials))


def key_phases(datagrams: Sequence[Datagram], *, src: str | None = None, dst: str | None = None) -> dict[int, int]:
    """How many 1-RTT packets from `src` (or to `dst`) carried key phase 0 and 1 (decrypted
    captures only)."""
    counts = {0: 0, 1: 0}
    for d in datagrams:
        if (src is None or d.src == src) and (dst is None or d.dst == dst):
            for phase in d.key_phases:
                counts[phase & 1] += 1
    return counts


def crypto_flight(datagrams: Sequence[Datagram], server: str) -> int:
    """The server's largest CRYPTO end: the size of its TLS flight as far as it shows (its
    Handshake packets' only when the capture was decrypted with the key log)."""
    return max((d.crypto_end for d in datagrams if d.src == server), default=0)


@dataclass(frozen=True)
class Amplification:
    """The server's sending before the client's address was validated, as the runner counts it:
    UDP payload bytes, in the server's capture, until the first datagram from the client that
    carries a Handshake (or 1-RTT) packet."""

    client_bytes: int  # the client's Initial datagrams the server received
    server_bytes: int  # what the server sent meanwhile
    max_ratio: float  # the highest server_bytes / client_bytes after any of the server's datagrams
    validated: bool  # a Handshake packet from the client arrived


UDP_HEADER = 8


def amplification(datagrams: Sequence[Datagram], server: str) -> Amplification:
    client_bytes = server_bytes = 0
    max_ratio = 0.0
    for d in datagrams:
        size = max(0, d.udp_length - UDP_HEADER)
        if d.dst == server:
            if any(p.kind in ("handshake", "1rtt") for p in d.packets):
                return Amplification(client_bytes, server_bytes, max_ratio, True)
            if any(p.kind == "initial" for p in d.packets):
                client_bytes += size
        elif d.src == server:
            server_bytes += size
            max_ratio = max(max_ratio, server_bytes / client_bytes if client_bytes else float("inf"))
    return Amplification(client_bytes, server_bytes, max_ratio, False)
