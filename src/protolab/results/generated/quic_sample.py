# Generated from schemas/quic-sample.json by scripts/generate_models.py: do not edit.

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


class QuicSample(BaseModel):
    """
    One sample of quinn's path statistics and, for protolab's controllers, the controller.
    Windows and ssthresh are in bytes.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes_in_flight: Annotated[int | None, Field(ge=0)] = None
    """
    Bytes in flight at the last acknowledgements (null for quinn's own controllers).
    """
    cc_feedback_rate_bps: Annotated[int | None, Field(ge=0)] = None
    """
    `sprout-ewma`: the receiving rate of the peer's report the window was last set from, bit/s
    (absent before the first report and for other controllers).
    """
    cc_feedback_reports: Annotated[int | None, Field(ge=0)] = None
    """
    `sprout-ewma`: the peer's feedback reports the controller accepted so far (absent for
    other controllers).
    """
    cc_state: CcState | None = None
    """
    The controller's state (null for quinn's own controllers).
    """
    congestion_events: Annotated[int, Field(ge=0)]
    """
    Congestion events so far.
    """
    current_mtu: Annotated[int, Field(ge=0, le=65535)]
    """
    Path MTU in use.
    """
    cwnd: Annotated[int, Field(ge=0)]
    """
    Congestion window, bytes.
    """
    event: SampleEvent
    """
    Always `sample`.
    """
    lost_bytes: Annotated[int, Field(ge=0)]
    """
    Bytes lost so far.
    """
    lost_packets: Annotated[int, Field(ge=0)]
    """
    Packets lost so far.
    """
    min_rtt_us: Annotated[int, Field(ge=0)]
    """
    Minimum RTT, µs.
    """
    pacing_rate_bps: Annotated[int | None, Field(ge=0)] = None
    """
    Pacing rate, bit/s: quinn paces at 1.25 windows per smoothed RTT (BBR reports its own).
    """
    rtt_us: Annotated[int, Field(ge=0)]
    """
    Smoothed RTT, µs.
    """
    sent_packets: Annotated[int, Field(ge=0)]
    """
    Packets sent so far.
    """
    ssthresh: Annotated[int | None, Field(ge=0)] = None
    """
    Slow-start threshold, bytes (null until set or unknown).
    """
    t_unix_ns: Annotated[int, Field(ge=0)]
    """
    Sample time, Unix ns.
    """
    udp_rx_bytes: Annotated[int, Field(ge=0)]
    """
    UDP bytes received.
    """
    udp_rx_datagrams: Annotated[int, Field(ge=0)]
    """
    UDP datagrams received.
    """
    udp_tx_bytes: Annotated[int, Field(ge=0)]
    """
    UDP bytes sent.
    """
    udp_tx_datagrams: Annotated[int, Field(ge=0)]
    """
    UDP datagrams sent.
    """
