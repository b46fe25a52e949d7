"""`QUIC_info` (003 §3.1) and its `TCP_info` equivalent (003 annex B) per connection end
(docs/analysis.md).

QUIC fields come from the connection's qlog (quinn 0.11: packets sent, received and lost with
their numbers and lengths; RTT, window and pacing metrics) and from its samples (UDP byte and
datagram counters); TCP fields from the last `TCP_INFO` sample. A field the data does not
support is None, never estimated: quinn's qlog logs no frames, no ACK delay and no PTO, so the
frame counts, ATO, RTO and the data/ACK split of the "last sent" times are None for QUIC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from protolab.measure.qlog import QlogTrace, header_of

# Every field of the table, in 003's order: (column, DuckDB type, meaning).
FIELDS: list[tuple[str, str, str]] = [
    ("rto_ms", "DOUBLE", "retransmission timeout (TCP: tcpi_rto); QUIC: None (quinn logs no PTO)"),
    ("ato_ms", "DOUBLE", "delayed-ACK timeout (TCP: tcpi_ato); QUIC: None"),
    ("snd_mss", "BIGINT", "largest packet sent (QUIC: 1-RTT packet length; TCP: tcpi_snd_mss)"),
    ("rcv_mss", "BIGINT", "TCP: tcpi_rcv_mss; QUIC: None (received lengths are not logged)"),
    ("last_data_sent_ms", "DOUBLE", "last data sent, ms after the connection's start (TCP; QUIC: None, frames not logged)"),
    ("last_ack_sent_ms", "DOUBLE", "last ACK sent (TCP: None, Linux does not fill it; QUIC: None)"),
    ("last_data_recv_ms", "DOUBLE", "last data received (TCP; QUIC: None)"),
    ("last_ack_recv_ms", "DOUBLE", "last ACK received (TCP; QUIC: None)"),
    ("last_sent_ms", "DOUBLE", "last packet sent, ms after the start (protolab; QUIC from the qlog)"),
    ("last_recv_ms", "DOUBLE", "last packet received (protolab; QUIC from the qlog)"),
    ("min_rtt_ms", "DOUBLE", "minimum RTT"),
    ("smooth_rtt_ms", "DOUBLE", "smoothed RTT at the end"),
    ("var_rtt_ms", "DOUBLE", "RTT variation at the end (RFC 6298 rttvar)"),
    ("max_rtt_ms", "DOUBLE", "largest RTT sample (QUIC: latest_rtt of the qlog; TCP: None, TCP_INFO has no sample)"),
    ("bytes_sent", "BIGINT", "bytes sent over UDP (QUIC, UDP payload) or by TCP (tcpi_bytes_sent), retransmissions included"),
    ("bytes_recv", "BIGINT", "bytes received (QUIC: UDP payload; TCP: tcpi_bytes_received)"),
    ("frames_sent", "BIGINT", "QUIC frames sent: None (quinn's qlog does not log frames)"),
    ("frames_recv", "BIGINT", "QUIC frames received: None"),
    ("data_frames_sent", "BIGINT", "QUIC STREAM frames sent: None"),
    ("data_frames_recv", "BIGINT", "QUIC STREAM frames received: None"),
    ("dgrams_sent", "BIGINT", "datagrams sent (QUIC: UDP datagrams; TCP: tcpi_segs_out)"),
    ("dgrams_recv", "BIGINT", "datagrams received (QUIC; TCP: tcpi_segs_in)"),
    ("data_dgrams_sent", "BIGINT", "datagrams carrying data (TCP: tcpi_data_segs_out; QUIC: None)"),
    ("data_dgrams_recv", "BIGINT", "TCP: tcpi_data_segs_in; QUIC: None"),
    ("data_sent", "BIGINT", "data bytes sent without retransmissions (TCP: bytes_sent - bytes_retrans; QUIC: None)"),
    ("data_recv", "BIGINT", "data bytes received (TCP: tcpi_bytes_received; QUIC: None)"),
    ("lost", "BIGINT", "losses (QUIC: packets declared lost; TCP: tcpi_lost, segments lost now)"),
    ("retrans", "BIGINT", "retransmissions (TCP: tcpi_total_retrans segments; QUIC: None, frames not logged)"),
    ("pacing_rate_bps", "DOUBLE", "pacing rate at the end, bit/s"),
    ("max_pacing_rate_bps", "DOUBLE", "largest pacing rate (QUIC: over the qlog; TCP: tcpi_max_pacing_rate, None when unlimited)"),
    ("delivery_rate_bps", "DOUBLE", "delivery-rate estimate (TCP: tcpi_delivery_rate; QUIC: None, quinn has none)"),
    ("cwnd_bytes", "BIGINT", "congestion window at the end, bytes"),
    ("next_send_pkt_nbr", "BIGINT", "QUIC: next 1-RTT packet number to send; TCP: None"),
    ("next_recv_pkt_nbr", "BIGINT", "QUIC: next 1-RTT packet number expected; TCP: None"),
    ("duration_ms", "DOUBLE", "first to last event or sample, ms"),
    ("spurious", "BIGINT", ("spurious retransmissions (TCP: DSACKs received, tcpi_dsack_dups; QUIC: None without "
                            "the emulator's ground truth, else lost packets that were delivered)")),
]
FIELD_NAMES = [name for name, _, _ in FIELDS]

_SECONDS = 1e3  # quinn's qlog writes RTTs in seconds


def _empty() -> dict[str, Any]:
    return dict.fromkeys(FIELD_NAMES)


def _last(rows: Sequence[Mapping[str, Any]], key: str) -> Any:
    for row in reversed(rows):
        value = row.get(key)
        if value is not None:
            return value
    return None


def quic_info(trace: QlogTrace | None, samples: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """QUIC_info of one connection end from its qlog and/or its samples (rows in time order)."""
    info = _empty()
    periodic = [r for r in samples if r.get("event", "sample") == "sample"]
    if trace is not None:
        metrics = [e.data for e in trace.named("recovery:metrics_updated")]
        sent = [(e.time_ms, header_of(e)) for e in trace.named("transport:packet_sent")]
        received = [(e.time_ms, header_of(e)) for e in trace.named("transport:packet_received")]
        one_rtt_sent = [h for _, h in sent if h.get("packet_type") == "1RTT"]
        one_rtt_recv = [h for _, h in received if h.get("packet_type") == "1RTT"]
        lengths = [h["length"] for h in one_rtt_sent if isinstance(h.get("length"), int)]
        info["snd_mss"] = max(lengths) if lengths else None
        info["last_sent_ms"] = sent[-1][0] if sent else None
        info["last_recv_ms"] = received[-1][0] if received else None
        for key, column in (("min_rtt", "min_rtt_ms"), ("smoothed_rtt", "smooth_rtt_ms"), ("rtt_variance", "var_rtt_ms")):
            value = _last(metrics, key)
            info[column] = value * _SECONDS if isinstance(value, int | float) else None
        # Before the first packet is received quinn reports its initial estimate (333 ms), no sample.
        first_received = received[0][0] if received else float("inf")
        latest = [e.data["latest_rtt"] for e in trace.named("recovery:metrics_updated")
                  if e.time_ms >= first_received and isinstance(e.data.get("latest_rtt"), int | float)]
        info["max_rtt_ms"] = max(latest) * _SECONDS if latest else None
        info["bytes_sent"] = sum(h["length"] for _, h in sent if isinstance(h.get("length"), int)) or None
        info["lost"] = sum(1 for _ in trace.named("recovery:packet_lost"))
        pacing = [m["pacing_rate"] for m in metrics if isinstance(m.get("pacing_rate"), int | float)]
        info["pacing_rate_bps"] = float(pacing[-1]) if pacing else None
        info["max_pacing_rate_bps"] = float(max(pacing)) if pacing else None
        info["cwnd_bytes"] = _last(metrics, "congestion_window")
        numbers = [h["packet_number"] for h in one_rtt_sent if isinstance(h.get("packet_number"), int)]
        info["next_send_pkt_nbr"] = max(numbers) + 1 if numbers else None
        numbers = [h["packet_number"] for h in one_rtt_recv if isinstance(h.get("packet_number"), int)]
        info["next_recv_pkt_nbr"] = max(numbers) + 1 if numbers else None
        if trace.events:
            info["duration_ms"] = trace.events[-1].time_ms - trace.events[0].time_ms
    if periodic:
        last = periodic[-1]
        # The UDP counters of the samples are exact (the qlog's lengths leave out nothing, but
        # only the samples count what was received).
        for key, column in (("udp_tx_bytes", "bytes_sent"), ("udp_rx_bytes", "bytes_recv"),
                            ("udp_tx_datagrams", "dgrams_sent"), ("udp_rx_datagrams", "dgrams_recv")):
            if isinstance(last.get(key), int):
                info[column] = last[key]
        if info["cwnd_bytes"] is None:
            info["cwnd_bytes"] = last.get("cwnd")
        if info["smooth_rtt_ms"] is None and isinstance(last.get("rtt_us"), int | float):
            info["smooth_rtt_ms"] = last["rtt_us"] / 1e3
        if info["min_rtt_ms"] is None and isinstance(last.get("min_rtt_us"), int | float):
            info["min_rtt_ms"] = last["min_rtt_us"] / 1e3
        if info["lost"] is None:
            info["lost"] = last.get("lost_packets")
        if info["duration_ms"] is None:
            info["duration_ms"] = (periodic[-1]["t_unix_ns"] - periodic[0]["t_unix_ns"]) / 1e6
    return info


def _ms_before(row: Mapping[str, Any], key: str, t0: int) -> float | None:
    """TCP_INFO's "ms since" fields as ms after the connection's first sample."""
    value = row.get(key)
    if not isinstance(value, int):
        return None
    return (row["t_unix_ns"] - t0) / 1e6 - value


def tcp_info(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The TCP_info equivalent of QUIC_info (003 annex B) from one connection end's samples."""
    info = _empty()
    rows = [r for r in samples if r.get("event", "sample") == "sample"]
    if not rows:
        return info
    first, last = rows[0], rows[-1]
    t0 = first["t_unix_ns"]

    def us_ms(key: str) -> float | None:
        value = last.get(key)
        return value / 1e3 if isinstance(value, int | float) else None

    mss = last.get("snd_mss")
    info.update({
        "rto_ms": us_ms("rto_us"), "ato_ms": us_ms("ato_us"), "snd_mss": mss, "rcv_mss": last.get("rcv_mss"),
        "last_data_sent_ms": _ms_before(last, "last_data_sent_ms", t0),
        "last_data_recv_ms": _ms_before(last, "last_data_recv_ms", t0),
        "last_ack_recv_ms": _ms_before(last, "last_ack_recv_ms", t0),
        "min_rtt_ms": us_ms("min_rtt_us"), "smooth_rtt_ms": us_ms("rtt_us"), "var_rtt_ms": us_ms("rttvar_us"),
        "bytes_sent": last.get("bytes_sent"), "bytes_recv": last.get("bytes_received"),
        "dgrams_sent": last.get("segs_out"), "dgrams_recv": last.get("segs_in"),
        "data_dgrams_sent": last.get("data_segs_out"), "data_dgrams_recv": last.get("data_segs_in"),
        "data_recv": last.get("bytes_received"),
        "lost": last.get("lost"), "retrans": last.get("retransmits", last.get("retrans")),
        "pacing_rate_bps": last.get("pacing_rate_bps"), "max_pacing_rate_bps": last.get("max_pacing_rate_bps"),
        "delivery_rate_bps": last.get("delivery_rate_bps"),
        "cwnd_bytes": last["cwnd"] * mss if isinstance(last.get("cwnd"), int) and isinstance(mss, int) else None,
        "duration_ms": (last["t_unix_ns"] - t0) / 1e6,
        "spurious": last.get("dsack_dups"),
    })
    if isinstance(last.get("bytes_sent"), int) and isinstance(last.get("bytes_retrans"), int):
        info["data_sent"] = last["bytes_sent"] - last["bytes_retrans"]
    return info
