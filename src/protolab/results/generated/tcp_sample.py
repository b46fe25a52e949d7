# Generated from schemas/tcp-sample.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class CcState(StrEnum):
    """
    A congestion controller's state (docs/congestion.md): for TCP derived from `TCP_INFO`, for
    QUIC reported by protolab's controllers.
    """

    slow_start = 'slow_start'
    """
    Exponential growth (RFC 9002 slow start).
    """
    conservative_slow_start = 'conservative_slow_start'
    """
    HyStart++'s conservative slow start (RFC 9406 §4.2).
    """
    congestion_avoidance = 'congestion_avoidance'
    """
    Congestion avoidance (or, for rate and delay based controllers, their steady state).
    """
    recovery = 'recovery'
    """
    Recovery: from a congestion event until a packet sent after it is acknowledged.
    """
    application_limited = 'application_limited'
    """
    The application did not fill the window (the controller was not the limit).
    """


class SampleEvent(StrEnum):
    """
    `event` of a periodic row.
    """

    sample = 'sample'
    """
    The only value.
    """


class TcpSample(BaseModel):
    """
    One sample of `TCP_INFO` (for MPTCP, of one subflow: `subflow`, `local` and `remote` are
    added). Windows are in segments; rates in bit/s, null when the kernel says unlimited.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    app_limited: bool
    """
    `tcpi_delivery_rate_app_limited`.
    """
    ato_us: Annotated[int, Field(ge=0)]
    """
    Delayed-ACK timeout, µs.
    """
    bytes_acked: Annotated[int, Field(ge=0)]
    """
    Bytes acknowledged (counts the SYN).
    """
    bytes_in_flight: Annotated[int, Field(ge=0)]
    """
    `unacked` x `snd_mss`, bytes.
    """
    bytes_received: Annotated[int, Field(ge=0)]
    """
    Bytes received.
    """
    bytes_retrans: Annotated[int, Field(ge=0)]
    """
    Bytes retransmitted.
    """
    bytes_sent: Annotated[int, Field(ge=0)]
    """
    Bytes sent.
    """
    ca_state: Annotated[int, Field(ge=0, le=255)]
    """
    `tcpi_ca_state` (0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss).
    """
    cc_state: CcState
    """
    From `TCP_INFO`: `recovery` when `ca_state` is CWR, Recovery or Loss; otherwise
    `application_limited` when the last delivery-rate sample was, `slow_start` while
    `cwnd < ssthresh` (or ssthresh unset), else `congestion_avoidance`.
    """
    cwnd: Annotated[int, Field(ge=0)]
    """
    Congestion window, segments.
    """
    data_segs_in: Annotated[int, Field(ge=0)]
    """
    Segments received with data.
    """
    data_segs_out: Annotated[int, Field(ge=0)]
    """
    Segments sent with data.
    """
    delivery_rate_bps: Annotated[int | None, Field(ge=0)] = None
    """
    The kernel's delivery-rate estimate, bit/s.
    """
    dsack_dups: Annotated[int, Field(ge=0)]
    """
    DSACK blocks received: spurious retransmissions as the peer reports them.
    """
    event: SampleEvent
    """
    Always `sample` (the kernel's state changes are seen at the sampling interval only).
    """
    last_ack_recv_ms: Annotated[int, Field(ge=0)]
    """
    ms since the last ACK received.
    """
    last_data_recv_ms: Annotated[int, Field(ge=0)]
    """
    ms since the last data received.
    """
    last_data_sent_ms: Annotated[int, Field(ge=0)]
    """
    ms since the last data sent.
    """
    local: str | None = None
    """
    Its local address.
    """
    lost: Annotated[int, Field(ge=0)]
    """
    `tcpi_lost`.
    """
    max_pacing_rate_bps: Annotated[int | None, Field(ge=0)] = None
    """
    `tcpi_max_pacing_rate`, bit/s (null = unlimited).
    """
    min_rtt_us: Annotated[int, Field(ge=0)]
    """
    Minimum RTT, µs.
    """
    notsent_bytes: Annotated[int, Field(ge=0)]
    """
    Bytes written by the application, not yet sent.
    """
    pacing_rate_bps: Annotated[int | None, Field(ge=0)] = None
    """
    Pacing rate, bit/s (null = unlimited).
    """
    rcv_mss: Annotated[int, Field(ge=0)]
    """
    Receiver-side MSS estimate, bytes.
    """
    remote: str | None = None
    """
    Its remote address.
    """
    retrans: Annotated[int, Field(ge=0)]
    """
    `tcpi_total_retrans`: segments retransmitted so far.
    """
    rto_us: Annotated[int, Field(ge=0)]
    """
    Retransmission timeout, µs.
    """
    rtt_us: Annotated[int, Field(ge=0)]
    """
    Smoothed RTT, µs.
    """
    rttvar_us: Annotated[int, Field(ge=0)]
    """
    RTT variation, µs.
    """
    segs_in: Annotated[int, Field(ge=0)]
    """
    Segments received.
    """
    segs_out: Annotated[int, Field(ge=0)]
    """
    Segments sent.
    """
    snd_mss: Annotated[int, Field(ge=0)]
    """
    Sender MSS, bytes.
    """
    ssthresh: Annotated[int | None, Field(ge=0)] = None
    """
    Slow-start threshold, segments (null until set).
    """
    state: Annotated[int, Field(ge=0, le=255)]
    """
    `tcpi_state` (1 ESTABLISHED ...).
    """
    subflow: Annotated[int | None, Field(ge=0)] = None
    """
    Subflow index (0 = the initial one).
    """
    t_unix_ns: Annotated[int, Field(ge=0)]
    """
    Sample time, Unix ns.
    """
    unacked: Annotated[int, Field(ge=0)]
    """
    `tcpi_unacked`: segments in flight.
    """
