# Generated from schemas/link-patch.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


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


class LinkPatch(BaseModel):
    """
    A `set_link` change (docs/control.md): each field absent keeps the current value, `null`
    removes it (back to the ideal link's: unlimited, no trace, the default queue, no delay, no
    jitter, no loss), a value replaces it. Setting a rate drops the trace and setting a trace
    drops the rate, unless the patch names both. Takes the same input forms as [`LinkParams`].
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
    queue: (
        QueueParams1 | QueueParams2 | QueueParams3 | QueueParams4 | QueueParams5 | None
    ) = None
    """
    New queue.
    """
    rate_bps: Annotated[int | None, Field(ge=1)] = None
    """
    New rate, bit/s (`null` or `"unlimited"`: unlimited).
    """
    shaper: ShaperParams | None = None
    """
    New token-bucket shaper.
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
