# Generated from schemas/control-request.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel


class Request1(BaseModel):
    """
    The lab, its process, its clock and its normalized topology ([`Info`]).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cmd: Literal['info']


class Request2(BaseModel):
    """
    Counters of every link direction, path and of the emulator ([`Counters`]).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cmd: Literal['counters']


class Request3(BaseModel):
    """
    Zero every counter.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cmd: Literal['reset_counters']


class Request6(BaseModel):
    """
    Start capturing a host's interface ([`Started`]).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cmd: Literal['pcap_start']
    host: str
    """
    Host whose interface is captured.
    """
    path: str
    """
    The capture file to create.
    """


class Request7(BaseModel):
    """
    Close a host's capture ([`CaptureStopped`]).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cmd: Literal['pcap_stop']
    host: str
    """
    Host whose capture is closed.
    """


class Request8(BaseModel):
    """
    Start the ground-truth event log ([`Started`]).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cmd: Literal['events_start']
    path: str
    """
    The event log file to create.
    """


class Request9(BaseModel):
    """
    Close the event log ([`LogStopped`]).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cmd: Literal['events_stop']


class Request10(BaseModel):
    """
    Deduct the lab's own path latency ([`DelayCompensation`]).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cmd: Literal['set_delay_compensation']
    ns: Annotated[int, Field(ge=0, le=10000000)]
    """
    Packets sent from now on cross the network this many ns faster than configured.
    """


class Request11(BaseModel):
    """
    Reply, then clean up and exit.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cmd: Literal['shutdown']


class JitterDistribution(StrEnum):
    """
    Shape of the delay variation (every one zero-mean with the given standard deviation).
    """

    uniform = 'uniform'
    """
    Uniform over `±std·√3`.
    """
    normal = 'normal'
    """
    Normal.
    """
    pareto = 'pareto'
    """
    Pareto with shape 3 shifted to zero mean: a heavy tail of late packets.
    """


class JitterParams(BaseModel):
    """
    Random delay variation added to the propagation delay.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    dist: JitterDistribution | None = 'normal'
    """
    Distribution (default normal).
    """
    preserve_order: bool | None = False
    """
    Never deliver a packet before one that entered the link earlier.
    """
    std_ns: Annotated[int, Field(ge=0)]
    """
    Standard deviation, ns. Input also takes `std` and strings such as `"1ms"`.
    """


class LossParams1(BaseModel):
    """
    Each packet lost independently.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    kind: Literal['bernoulli']
    p: Annotated[float, Field(ge=0.0, le=1.0)]
    """
    Loss probability (0..=1).
    """


class LossParams2(BaseModel):
    """
    A two-state Markov chain evaluated per packet.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    kind: Literal['gilbert-elliott']
    loss_bad: Annotated[float | None, Field(ge=0.0, le=1.0)] = 1.0
    """
    Loss probability in the bad state (default 1).
    """
    loss_good: Annotated[float | None, Field(ge=0.0, le=1.0)] = 0.0
    """
    Loss probability in the good state (default 0).
    """
    p: Annotated[float, Field(ge=0.0, le=1.0)]
    """
    P(good -> bad) per packet.
    """
    r: Annotated[float, Field(ge=0.0, le=1.0)]
    """
    P(bad -> good) per packet.
    """


class Pin(BaseModel):
    """
    A left host and a right host whose packets (both directions) take one path.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    left: str
    """
    Left host.
    """
    path: str
    """
    Path.
    """
    right: str
    """
    Right host.
    """


class QueueParams1(BaseModel):
    """
    Drop-tail.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int | None, Field(ge=0)] = None
    """
    Byte limit.
    """
    kind: Literal['droptail']
    packets: Annotated[int | None, Field(ge=1)] = None
    """
    Packet limit.
    """


class QueueParams2(BaseModel):
    """
    Drop-head.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int | None, Field(ge=0)] = None
    """
    Byte limit.
    """
    kind: Literal['drophead']
    packets: Annotated[int | None, Field(ge=1)] = None
    """
    Packet limit.
    """


class QueueParams3(BaseModel):
    """
    CoDel.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int | None, Field(ge=0)] = None
    """
    Byte limit.
    """
    interval_ns: Annotated[int | None, Field(ge=0)] = 100000000
    """
    Interval, ns (default 100 ms). Input also takes `interval` and strings.
    """
    kind: Literal['codel']
    packets: Annotated[int | None, Field(ge=1)] = None
    """
    Packet limit.
    """
    target_ns: Annotated[int | None, Field(ge=0)] = 5000000
    """
    Target, ns (default 5 ms). Input also takes `target` and strings such as `"5ms"`.
    """


class RoutingMode(StrEnum):
    """
    Path selection between the sides (docs/topology.md).
    """

    ecmp_xor = 'ecmp-xor'
    """
    Per flow: `(SA ^ DA ^ SP ^ DP ^ PT) mod N`, the hash of 001 §IV-C1.
    """
    ecmp_hash = 'ecmp-hash'
    """
    Per flow: a keyed SipHash of the direction-independent 5-tuple.
    """
    round_robin = 'round-robin'
    """
    Per packet.
    """


class WifiParams(BaseModel):
    """
    A WiFi link direction: one 802.11n/ac station sending A-MPDUs to one receiver. Every field
    has a default (an 802.11n link at 5 GHz, 2 spatial streams, 20 MHz; sources in
    docs/emulator.md). Durations are ns; input also takes strings such as `"9us"`, and the rate
    strings such as `"130mbit"`.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    block_ack_ns: Annotated[int | None, Field(ge=0)] = 32000
    """
    The block ACK, preamble included, ns (default 32 us: 32 bytes at 24 Mbit/s). Input also
    takes `block_ack`.
    """
    contention_probability: Annotated[float | None, Field(ge=0.0, le=1.0)] = 0.0
    """
    Probability that another station takes the channel before each TXOP, again after each of
    its TXOPs (default 0: the station is alone).
    """
    contention_txop_ns: Annotated[int | None, Field(ge=0)] = 2000000
    """
    How long another station's TXOP holds the channel, ns (default 2 ms). Input also takes
    `contention_txop`.
    """
    cw_max: Annotated[int | None, Field(ge=0, le=65535)] = 1023
    """
    Largest contention window, slots (default 1023).
    """
    cw_min: Annotated[int | None, Field(ge=0)] = 15
    """
    Smallest contention window, slots (default 15): the backoff is uniform over 0..=cw.
    """
    difs_ns: Annotated[int | None, Field(ge=1)] = 34000
    """
    DCF interframe space, ns (default 34 us = SIFS + 2 slots). Input also takes `difs`.
    """
    frame_error_rate: Annotated[float | None, Field(ge=0.0, le=1.0)] = 0.05
    """
    Probability that one MPDU attempt is received in error (default 0.05, an assumption).
    """
    max_ampdu_bytes: Annotated[int | None, Field(ge=1)] = 65535
    """
    Most bytes in one A-MPDU (default 65 535, 802.11n's maximum A-MPDU length).
    """
    max_ampdu_duration_ns: Annotated[int | None, Field(ge=1)] = 4000000
    """
    Most airtime of one A-MPDU's data, ns (default 4 ms). Input also takes
    `max_ampdu_duration` and strings.
    """
    max_ampdu_frames: Annotated[int | None, Field(ge=1, le=1024)] = 64
    """
    Most MPDUs in one A-MPDU (default 64, the block-ACK window; 1: no aggregation).
    """
    phy_rate_bps: Annotated[int | None, Field(ge=1)] = 130000000
    """
    PHY rate of the data, bit/s (default 130 Mbit/s: HT MCS 15, 800 ns guard interval).
    Input also takes `phy_rate` and strings such as `"130mbit"`.
    """
    preamble_ns: Annotated[int | None, Field(ge=0)] = 40000
    """
    PHY preamble and headers, ns (default 40 us: HT-mixed with 2 HT-LTFs). Input also takes
    `preamble`.
    """
    retry_limit: Annotated[int | None, Field(ge=0, le=255)] = 7
    """
    Retransmissions after a frame's first attempt (default 7); residual loss
    `frame_error_rate ^ (retry_limit + 1)`.
    """
    sifs_ns: Annotated[int | None, Field(ge=0)] = 16000
    """
    Short interframe space, ns (default 16 us). Input also takes `sifs`.
    """
    slot_ns: Annotated[int | None, Field(ge=0)] = 9000
    """
    Backoff slot, ns (default 9 us). Input also takes `slot`.
    """


class Request5(BaseModel):
    """
    Change path selection.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cmd: Literal['set_routing']
    mode: RoutingMode | None = None
    """
    Path selection.
    """
    pins: list[Pin] | None = None
    """
    Host pairs pinned to a path.
    """


class LinkPatch(BaseModel):
    """
    A `set_link` change (docs/control.md): each field absent keeps the current value, `null`
    removes it (back to the ideal link's: unlimited, no trace, the default queue, no delay, no
    jitter, no loss, not WiFi), a value replaces it. The transmitter is one of a rate, a trace
    and WiFi: setting one drops the others the patch does not name. Takes the same input forms as
    [`LinkParams`].
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    delay_ns: Annotated[int | None, Field(ge=0)] = None
    """
    New propagation delay, ns.
    """
    jitter: JitterParams | None = None
    """
    New delay variation.
    """
    loss: LossParams1 | LossParams2 | None = None
    """
    New loss model.
    """
    queue: QueueParams1 | QueueParams2 | QueueParams3 | None = None
    """
    New queue.
    """
    rate_bps: Annotated[int | None, Field(ge=1)] = None
    """
    New rate, bit/s (`null` or `"unlimited"`: unlimited).
    """
    trace: str | None = None
    """
    New trace file.
    """
    trace_start_ns: Annotated[int | None, Field(ge=0)] = None
    """
    New start of the trace's replay, ns into the trace (`null`: its beginning). A patch that
    sets a trace without naming this starts the trace at its beginning.
    """
    wifi: WifiParams | None = None
    """
    New WiFi parameters (`null`: not WiFi).
    """


class Request4(BaseModel):
    """
    Change link directions live ([`LinksSet`]).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cmd: Literal['set_link']
    link: str | list[str]
    """
    Link direction names (`client.up`, `p0.forward`): one name or a list.
    """
    params: Annotated[LinkPatch | None, Field(validate_default=True)] = {}
    """
    The change.
    """
    seed: Annotated[int | None, Field(ge=0)] = None
    """
    Restart the links' random streams from this seed (reproducible loss and jitter).
    """


class Request(
    RootModel[
        Request1
        | Request2
        | Request3
        | Request4
        | Request5
        | Request6
        | Request7
        | Request8
        | Request9
        | Request10
        | Request11
    ]
):
    root: Annotated[
        Request1 | Request2 | Request3 | Request4 | Request5 | Request6 | Request7 | Request8 | Request9 | Request10 | Request11,
        Field(title='Request'),
    ]
    """
    One control request. The wire form is flat: `{"cmd": "<name>", ...the command's fields}`.
    """
