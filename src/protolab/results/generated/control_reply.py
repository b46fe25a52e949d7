# Generated from schemas/control-reply.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel


class DelayCompensation(BaseModel):
    """
    The reply to `set_delay_compensation`.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    delay_compensation_ns: Annotated[int, Field(ge=0)]
    """
    The compensation now in force, ns.
    """


class BucketItem(RootModel[int | None]):
    root: Annotated[int | None, Field(ge=0)]


class BucketItem1(RootModel[int]):
    root: Annotated[int, Field(ge=0)]


class Bucket(RootModel[tuple[BucketItem | None, BucketItem1]]):
    root: Annotated[
        tuple[BucketItem | None, BucketItem1], Field(max_length=2, min_length=2)
    ]


class DeliveryLateness(BaseModel):
    """
    How late delivered packets left the emulator: a 1-2-5 histogram from 1 µs to 100 ms.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    buckets: list[Bucket]
    """
    `[upper edge ns (null: above the last edge), packets]` of every non-empty bucket.
    """
    max_ns: Annotated[int, Field(ge=0)]
    """
    Largest lateness, ns.
    """
    mean_ns: Annotated[int, Field(ge=0)]
    """
    Mean lateness, ns.
    """
    p999_ns_at_most: Annotated[int | None, Field(ge=0)] = None
    """
    Upper edge of the bucket holding the 99.9th percentile, ns (null: no packets).
    """
    p99_ns_at_most: Annotated[int | None, Field(ge=0)] = None
    """
    Upper edge of the bucket holding the 99th percentile, ns (null: no packets).
    """
    packets: Annotated[int, Field(ge=0)]
    """
    Packets counted.
    """


class DropCounts(BaseModel):
    """
    Drops per cause.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    aqm: Annotated[int, Field(ge=0)]
    """
    The AQM (CoDel) dropped at dequeue.
    """
    queue_full: Annotated[int, Field(ge=0)]
    """
    The queue was full (at arrival, or drop-head making room).
    """
    random_loss: Annotated[int, Field(ge=0)]
    """
    Random loss at arrival.
    """


class Info(BaseModel):
    """
    The reply to `info`.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    cpu_latency_us: Annotated[int | None, Field(ge=0)] = None
    """
    The CPU wake-up latency bound the emulator holds while it runs (PM QoS,
    `/dev/cpu_dma_latency`), µs; null: none held (`--cpu-latency-us off`, or refused).
    """
    delay_compensation_ns: Annotated[int, Field(ge=0)]
    """
    The delay compensation in force, ns.
    """
    lab: str
    """
    Lab name.
    """
    now_ns: Annotated[int, Field(ge=0)]
    """
    Unix ns now.
    """
    pid: Annotated[int, Field(ge=0)]
    """
    The emulator's process id.
    """
    rt_priority: int
    """
    The loop's SCHED_FIFO priority in force (0: normal scheduling).
    """
    spin_ns: Annotated[int, Field(ge=0)]
    """
    How long the packet loop busy-polls before a due packet, ns.
    """
    start_unix_ns: Annotated[int, Field(ge=0)]
    """
    Unix ns at the emulator's time zero.
    """
    topology: Any
    """
    The normalized topology (docs/topology.md), link parameters as now in force.
    """
    whole_spread_ns: Annotated[int | None, Field(ge=0)] = 0
    """
    How far apart the wire segments of a GSO super-packet may leave a rated link that carries
    it whole, ns (`emu run --whole-spread-us`; 0: rated links split every super-packet).
    """


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


class LatePass(BaseModel):
    """
    A pass of the emulator's loop that delivered packets more than [`LATE_PASS_NS`] late.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    at_unix_ns: Annotated[int, Field(ge=0)]
    """
    When the loop delivered them, Unix time, ns.
    """
    cpu: Annotated[int | None, Field(ge=0)] = None
    """
    The CPU the loop ran on.
    """
    late_ns: Annotated[int, Field(ge=0)]
    """
    How late the latest of them was, ns.
    """
    packets: Annotated[int | None, Field(ge=0)] = 0
    """
    The wire segments it delivered more than [`LATE_PASS_NS`] late (0 from emulators
    before this field).
    """


class LinkCounters(BaseModel):
    """
    Counters of one link direction (docs/control.md): `arrived = enqueued + dropped.random_loss
    + dropped.queue_full(at arrival)`; bytes are IP bytes.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    delivered_bytes: Annotated[int, Field(ge=0)]
    """
    Bytes that left the link.
    """
    delivered_packets: Annotated[int, Field(ge=0)]
    """
    Packets that left the link.
    """
    dropped_bytes: DropCounts
    """
    Dropped bytes per cause.
    """
    dropped_packets: DropCounts
    """
    Dropped packets per cause.
    """
    enqueued_bytes: Annotated[int, Field(ge=0)]
    """
    Bytes that entered the queue.
    """
    enqueued_packets: Annotated[int, Field(ge=0)]
    """
    Packets that entered the queue.
    """
    in_flight_packets: Annotated[int | None, Field(ge=0)] = 0
    """
    Packets that left the queue and are still propagating now (with `queue_packets`: every
    packet inside the link). Absent in the replies of emulators before it was added.
    """
    max_queue_bytes: Annotated[int, Field(ge=0)]
    """
    Most bytes waiting since the last reset.
    """
    max_queue_packets: Annotated[int, Field(ge=0)]
    """
    Most packets waiting since the last reset.
    """
    queue_bytes: Annotated[int, Field(ge=0)]
    """
    Bytes waiting now.
    """
    queue_packets: Annotated[int, Field(ge=0)]
    """
    Packets waiting now.
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


class Nothing(BaseModel):
    """
    No fields.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )


class PathCounters(BaseModel):
    """
    Both directions of a path.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    forward: LinkCounters
    """
    Left to right.
    """
    reverse: LinkCounters
    """
    Right to left.
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


class QueueParams4(BaseModel):
    """
    PIE.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int | None, Field(ge=0)] = None
    """
    Byte limit.
    """
    kind: Literal['pie']
    max_burst_ns: Annotated[int | None, Field(ge=0)] = 150000000
    """
    Burst allowance, ns (default 150 ms). Input also takes `max_burst` and strings.
    """
    packets: Annotated[int | None, Field(ge=1)] = None
    """
    Packet limit.
    """
    target_ns: Annotated[int | None, Field(ge=0)] = 15000000
    """
    Target queue delay, ns (default 15 ms). Input also takes `target` and strings.
    """


class QueueParams5(BaseModel):
    """
    FQ-CoDel.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int | None, Field(ge=0)] = None
    """
    Byte limit.
    """
    flows: Annotated[int | None, Field(ge=1, le=65536)] = 1024
    """
    Flow queues (default 1024).
    """
    interval_ns: Annotated[int | None, Field(ge=0)] = 100000000
    """
    CoDel's interval per flow, ns (default 100 ms). Input also takes `interval`.
    """
    kind: Literal['fq_codel']
    packets: Annotated[int | None, Field(ge=1)] = None
    """
    Packet limit.
    """
    quantum: Annotated[int | None, Field(ge=1)] = 1514
    """
    DRR quantum, bytes (default 1514).
    """
    target_ns: Annotated[int | None, Field(ge=0)] = 5000000
    """
    CoDel's target per flow, ns (default 5 ms). Input also takes `target` and strings.
    """


class ShaperParams(BaseModel):
    """
    A token-bucket shaper like Linux's `tbf` (docs/topology.md): tokens accrue at `rate_bps` up
    to `burst_bytes`; up to `burst_bytes` leave back to back at the link's own rate, then
    `rate_bps` holds; at most `limit_bytes` wait for tokens.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    burst_bytes: Annotated[int, Field(ge=0)]
    """
    Bucket size, bytes (at least one 1500-byte packet). Input also takes `burst`.
    """
    limit_bytes: Annotated[int, Field(ge=0)]
    """
    Bytes that may wait for tokens (tbf's `limit`; 003 used 50 kB). Input also takes `limit`.
    """
    rate_bps: Annotated[int, Field(ge=1)]
    """
    Token rate, bit/s. Input also takes `rate` and strings such as `"10mbit"`.
    """


class Started(BaseModel):
    """
    The reply to `pcap_start` and `events_start`.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    path: str
    """
    The file being written.
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


class WriterSummary(BaseModel):
    """
    What a capture or event-log writer did.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    dropped: Annotated[int, Field(ge=0)]
    """
    Records dropped because the writer was behind.
    """
    error: str | None = None
    """
    A write error that ended the writer early.
    """
    written: Annotated[int, Field(ge=0)]
    """
    Records written.
    """


class Reply1(Info):
    """
    Every reply: `ok`, the reason when refused, the command's fields when done.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    error: str | None = None
    """
    Why it was refused (only when `ok` is false).
    """
    ok: bool
    """
    Whether the request was carried out.
    """


class Reply6(DelayCompensation):
    """
    Every reply: `ok`, the reason when refused, the command's fields when done.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    error: str | None = None
    """
    Why it was refused (only when `ok` is false).
    """
    ok: bool
    """
    Whether the request was carried out.
    """


class Reply7(Started):
    """
    Every reply: `ok`, the reason when refused, the command's fields when done.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    error: str | None = None
    """
    Why it was refused (only when `ok` is false).
    """
    ok: bool
    """
    Whether the request was carried out.
    """


class Reply8(Nothing):
    """
    Every reply: `ok`, the reason when refused, the command's fields when done.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    error: str | None = None
    """
    Why it was refused (only when `ok` is false).
    """
    ok: bool
    """
    Whether the request was carried out.
    """


class CaptureStopped(BaseModel):
    """
    The reply to `pcap_stop` (sent once every queued packet is written).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    capture: WriterSummary
    """
    The capture writer's summary.
    """


class EmulatorCounters(BaseModel):
    """
    The emulator's own counters (docs/control.md).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    delay_compensation_ns: Annotated[int, Field(ge=0)]
    """
    The delay compensation in force, ns.
    """
    delivery_late: DeliveryLateness
    """
    How late packets left the emulator compared with the model's delivery time.
    """
    events_dropped: Annotated[int, Field(ge=0)]
    """
    Event-log records dropped because the writer was behind.
    """
    late_passes: Annotated[list[LatePass] | None, Field(validate_default=True)] = []
    """
    The loop's passes that delivered a packet more than 1 ms late, the first
    [`LATE_PASSES_KEPT`] since the counters were reset (the validation matches them with the
    host's stalls: docs/validation.md).
    """
    non_ipv4: Annotated[int, Field(ge=0)]
    """
    IPv6 and other packets, dropped.
    """
    pcap_dropped: Annotated[int, Field(ge=0)]
    """
    Capture records dropped because a writer was behind.
    """
    rt_switches: Annotated[int, Field(ge=0)]
    """
    Changes between real-time and normal scheduling of the loop.
    """
    rx_malformed: Annotated[int | None, Field(ge=0)] = 0
    """
    TUN reads that could not be split into wire segments (a malformed virtio-net header or
    super-packet), dropped.
    """
    rx_packets: Annotated[int, Field(ge=0)]
    """
    Packets read from the hosts' TUN devices (wire segments: a GSO super-packet counts as
    the segments it is split into).
    """
    rx_super_packet_pieces: Annotated[int | None, Field(ge=0)] = 0
    """
    The pieces the other super-packets were cut into at the read where their route carried
    only that many of their segments whole (a rate's spread, a queue's room; docs/emulator.md,
    "Rated links"); a piece of one segment counts too.
    """
    rx_super_packets: Annotated[int | None, Field(ge=0)] = 0
    """
    TUN reads that carried a GSO super-packet (offloads on; docs/emulator.md).
    """
    rx_whole_super_packets: Annotated[int | None, Field(ge=0)] = 0
    """
    Of those, the super-packets that crossed the model whole, not split into wire segments
    at the read (their route took them whole; docs/emulator.md).
    """
    timer_late_ns_max: Annotated[int, Field(ge=0)]
    """
    Latest the loop woke after a packet was due, ns.
    """
    timer_late_ns_mean: Annotated[int, Field(ge=0)]
    """
    Mean of how late the loop woke after a packet was due, ns.
    """
    tx_errors: Annotated[int, Field(ge=0)]
    """
    Packets whose TUN write failed (with offloads: every segment of a failed super-packet write).
    """
    tx_packets: Annotated[int, Field(ge=0)]
    """
    Packets written to them.
    """
    unroutable: Annotated[int, Field(ge=0)]
    """
    Packets to an address no host has.
    """


class LinkParams(BaseModel):
    """
    One link direction (docs/topology.md). The default is the ideal link: unlimited, no delay,
    no loss, a drop-tail queue of 1000 packets.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    delay_ns: Annotated[int | None, Field(ge=0, le=3600000000000)] = 0
    """
    Propagation delay, ns. Input also takes `delay` and strings such as `"25ms"`.
    """
    jitter: JitterParams | None = None
    """
    Random delay variation; `null`: none.
    """
    loss: LossParams1 | LossParams2 | None = None
    """
    Random loss at arrival; `null`: none.
    """
    queue: Annotated[QueueParams1 | QueueParams2 | QueueParams3 | QueueParams4 | QueueParams5 | None, Field(validate_default=True)] = {
        'kind': 'droptail',
        'packets': 1000,
    }
    """
    The queue in front of the link.
    """
    rate_bps: Annotated[int | None, Field(ge=1)] = None
    """
    Serialization rate in bit/s; `null`: unlimited, or paced by `trace`. Input also takes
    `rate` and strings such as `"10mbit"` or `"unlimited"`.
    """
    shaper: ShaperParams | None = None
    """
    A tbf-like token-bucket shaper between the queue and the transmitter; `null`: none.
    """
    trace: str | None = None
    """
    A Mahimahi trace file of delivery opportunities, instead of `rate_bps` (relative paths are
    relative to the topology file).
    """
    trace_start_ns: Annotated[int | None, Field(ge=0, le=3600000000000)] = 0
    """
    Where the link's replay of `trace` starts, ns into the trace (wrapped by its period; 0:
    its beginning). The replay restarts there whenever the trace or this start changes.
    Input also takes `trace_start` and durations such as `"37s"`.
    """
    wifi: WifiParams | None = None
    """
    A WiFi link (docs/emulator.md, "WiFi links"): the transmitter is an 802.11 station that
    sends aggregated frames, instead of `rate_bps` or `trace`; `null`: not WiFi. Fields left
    out take the 802.11n defaults (`{}` is a default 802.11n link).
    """


class LinksSet(BaseModel):
    """
    The reply to `set_link`.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    link: list[str]
    """
    The link directions changed.
    """
    params: dict[str, LinkParams]
    """
    Each one's parameters now in force (complete numeric form).
    """


class LogStopped(BaseModel):
    """
    The reply to `events_stop` (sent once every queued event is written).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    log: WriterSummary
    """
    The event writer's summary.
    """


class Reply3(LinksSet):
    """
    Every reply: `ok`, the reason when refused, the command's fields when done.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    error: str | None = None
    """
    Why it was refused (only when `ok` is false).
    """
    ok: bool
    """
    Whether the request was carried out.
    """


class Reply4(CaptureStopped):
    """
    Every reply: `ok`, the reason when refused, the command's fields when done.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    error: str | None = None
    """
    Why it was refused (only when `ok` is false).
    """
    ok: bool
    """
    Whether the request was carried out.
    """


class Reply5(LogStopped):
    """
    Every reply: `ok`, the reason when refused, the command's fields when done.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    error: str | None = None
    """
    Why it was refused (only when `ok` is false).
    """
    ok: bool
    """
    Whether the request was carried out.
    """


class Counters(BaseModel):
    """
    The reply to `counters`.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    emulator: EmulatorCounters
    """
    The emulator's own counters.
    """
    links: dict[str, LinkCounters]
    """
    Every link direction (access and path) by name.
    """
    now_ns: Annotated[int, Field(ge=0)]
    """
    Unix ns when they were read.
    """
    paths: dict[str, PathCounters]
    """
    The same counters again, grouped by path.
    """


class Reply2(Counters):
    """
    Every reply: `ok`, the reason when refused, the command's fields when done.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    error: str | None = None
    """
    Why it was refused (only when `ok` is false).
    """
    ok: bool
    """
    Whether the request was carried out.
    """


class Reply(
    RootModel[Reply1 | Reply2 | Reply3 | Reply4 | Reply5 | Reply6 | Reply7 | Reply8]
):
    root: Annotated[
        Reply1 | Reply2 | Reply3 | Reply4 | Reply5 | Reply6 | Reply7 | Reply8,
        Field(title='Reply'),
    ]
    """
    Every reply: `ok`, the reason when refused, the command's fields when done.
    """
