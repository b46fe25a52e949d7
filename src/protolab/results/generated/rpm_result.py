# Generated from schemas/rpm-result.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class Confidence(StrEnum):
    """
    The draft's confidence in a stage's result.
    """

    low = 'low'
    """
    Fewer than MAD iterations of the stage ran.
    """
    medium = 'medium'
    """
    At least MAD iterations, no stability.
    """
    high = 'high'
    """
    Stable within SDT.
    """
    speculative = 'speculative'
    """
    RPM only: goodput never saturated within the time limit, so the draft computes no
    responsiveness; this one is from the probes of the last MAD intervals at the load
    reached (goresponsiveness reports such a result with "low confidence"). A number for a
    user on an unstable link, not the draft's.
    """


class Confidences(BaseModel):
    """
    Confidence in the two results of a direction.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    capacity: Confidence
    """
    Of the capacity.
    """
    rpm: Confidence
    """
    Of the RPM (`speculative`: goodput never saturated, see [`Confidence::Speculative`]).
    """


class InterfaceInfo(BaseModel):
    """
    One network interface.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    kind: str
    """
    `wifi`, `ethernet`, `tun`, `veth`, `bridge`, `other`.
    """
    name: str
    """
    Name.
    """


class IntervalState(StrEnum):
    """
    Where a direction's test was at the end of an interval.
    """

    ramping = 'ramping'
    """
    Adding load: goodput is not stable yet.
    """
    saturated = 'saturated'
    """
    Goodput is stable; probing until responsiveness is.
    """
    done = 'done'
    """
    Both stable: the test is over.
    """


class Parameters(BaseModel):
    """
    The draft's parameters (names as in its table).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    inc: Annotated[int, Field(ge=0)]
    """
    INC: connections added per interval.
    """
    inp: Annotated[int, Field(ge=0)]
    """
    INP: load-generating connections at the start.
    """
    interval_s: float
    """
    ID: interval duration, seconds. draft-08 (the latest published text) says 1 s; the
    repository's newer text (-09, July 2026) says 5 s "pending further investigation".
    """
    mad: Annotated[int, Field(ge=0)]
    """
    MAD: intervals in a moving average.
    """
    mnp: Annotated[int, Field(ge=0)]
    """
    MNP: most load-generating connections.
    """
    mps: float
    """
    MPS: most probe pairs (one foreign, one self) per second.
    """
    ptc: float
    """
    PTC: most of the capacity the probes may use, percent.
    """
    sdt: float
    """
    SDT: standard deviation tolerance, percent of the current value.
    """
    tmp: float
    """
    TMP: the share kept by the single-sided trimmed mean, percent (95: the top 5% dropped).
    """


class Percentile90(BaseModel):
    """
    The responsiveness of a window of probes over the 90th percentile of each term.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    connect_ms: float
    """
    P90 of the TCP (or QUIC) handshakes, ms.
    """
    http_foreign_ms: float
    """
    P90 of the foreign GETs, ms.
    """
    http_self_ms: float
    """
    P90 of the self probes, ms.
    """
    rpm: float
    """
    The draft's formula over these terms (mean of the two RPMs).
    """
    rpm_latency_mean: float
    """
    goresponsiveness's formula over these terms (mean of the two latencies, converted once).
    """
    tls_ms: float | None = None
    """
    P90 of the TLS handshakes, ms; null without TLS over TCP.
    """


class ProbeKind(StrEnum):
    """
    What a probe measured.
    """

    foreign = 'foreign'
    """
    On a new connection: connect, TLS and HTTP times.
    """
    self = 'self'
    """
    On a load-generating connection: the HTTP time (HTTP/1.1: the TCP stack's smoothed RTT
    of that connection).
    """


class Protocol(StrEnum):
    """
    HTTP version spoken on a connection.
    """

    h1c = 'h1c'
    """
    HTTP/1.1 over cleartext TCP.
    """
    h1 = 'h1'
    """
    HTTP/1.1 over TLS (ALPN `http/1.1`).
    """
    h2 = 'h2'
    """
    HTTP/2 over TLS (ALPN `h2`).
    """
    h3 = 'h3'
    """
    HTTP/3 over QUIC (ALPN `h3`).
    """


class Responsiveness(BaseModel):
    """
    The trimmed means and the responsiveness of a window of probes.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    foreign_rpm: float
    """
    60000 / the mean of the foreign terms.
    """
    p90: Percentile90 | None = None
    """
    The same terms and both formulas over the 90th percentiles instead of the trimmed means
    (goresponsiveness's "P90" beside its trimmed mean). Null in results written before it
    existed.
    """
    rpm: float
    """
    The draft's formula (§"Final Algorithm" of -08 and the current text): (foreign_rpm +
    self_rpm) / 2, the arithmetic mean of the two responsiveness values. Round trips per
    minute.
    """
    rpm_latency_mean: float | None = None
    """
    goresponsiveness's and Apple networkQuality's formula: the latencies averaged, then
    converted once, 60000 / ((foreign latency + TM(http_l)) / 2), i.e. the harmonic mean of
    foreign_rpm and self_rpm. Never above `rpm`; several times below it when self probes wait
    much longer than foreign ones. Null in results written before it existed.
    """
    self_rpm: float
    """
    60000 / TM(http_l).
    """
    tm_connect_ms: float
    """
    TM(tcp_f) (TCP) or of the QUIC handshake, ms.
    """
    tm_http_foreign_ms: float
    """
    TM(http_f), ms.
    """
    tm_http_self_ms: float
    """
    TM(http_l), ms.
    """
    tm_tls_ms: float | None = None
    """
    TM(tls_f), ms; null without TLS over TCP (then the draft's TCP-only formula applies).
    """


class Direction(StrEnum):
    """
    download, upload, both (sequential).
    """

    download = 'download'
    upload = 'upload'
    both = 'both'


class RpmConfig(BaseModel):
    """
    The effective configuration.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    direction: Direction
    """
    download, upload, both (sequential).
    """
    direction_order: list[str] | None = None
    """
    The directions in the order they ran, one after the other: `both` is download, then
    upload (Apple's networkQuality loads both at once unless told `-s`; goresponsiveness has
    a serial and a parallel policy). Empty in older results.
    """
    discovery: str
    """
    Where the URLs came from: `/.well-known/nq` (its URL) or `default paths`.
    """
    draft: str
    """
    The draft version the defaults follow.
    """
    host: str
    """
    Hostname (SNI, Host).
    """
    idle_probes: Annotated[int, Field(ge=0)]
    """
    Idle probe pairs.
    """
    max_duration_s: float
    """
    Time limit per direction, s.
    """
    parameters: Parameters
    """
    The draft's parameters.
    """
    paths: Annotated[list[str], Field(max_length=3, min_length=3)]
    """
    The three URLs' paths used.
    """
    protocol: Protocol
    """
    h1, h2, h3.
    """
    quic_cc: str
    """
    QUIC controller (h3).
    """
    server: str
    """
    Server address and port.
    """
    tcp_cc: str | None = None
    """
    TCP congestion control (h1, h2); null: the system's default.
    """


class RpmSchema(StrEnum):
    """
    `schema` of the result.
    """

    protolab_rpm = 'protolab.rpm'
    """
    The only value.
    """


class RpmStatus(StrEnum):
    """
    Outcome of a responsiveness test.
    """

    ok = 'ok'
    """
    Every direction ran (its confidence says how far).
    """
    error = 'error'
    """
    Discovery, the idle probes or every load-generating connection failed.
    """


class ClientInfo(BaseModel):
    """
    Where the client ran.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    interfaces: list[InterfaceInfo]
    """
    Network interfaces other than loopback, with their kind.
    """
    kernel: str | None = None
    """
    Kernel release.
    """
    os: str | None = None
    """
    `/etc/os-release` PRETTY_NAME.
    """


class Interval(BaseModel):
    """
    One interval of a direction.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int, Field(ge=0)]
    """
    Bytes moved in it by the load-generating connections.
    """
    connections: Annotated[int, Field(ge=0)]
    """
    Load-generating connections open at its end.
    """
    goodput_bps: float
    """
    bytes / ID, bit/s.
    """
    index: Annotated[int, Field(ge=0)]
    """
    Index from 0.
    """
    moving_goodput_bps: float
    """
    The draft's moving-average aggregate goodput, bit/s.
    """
    probe_rate: float
    """
    The probe pairs per second allowed (MPS, lowered by PTC).
    """
    probes: Annotated[int, Field(ge=0)]
    """
    Probes completed in it.
    """
    responsiveness: Responsiveness | None = None
    """
    Responsiveness over the last MAD intervals (from saturation on).
    """
    state: IntervalState
    """
    `ramping`, `saturated` or `done`.
    """
    t_s: float
    """
    End, seconds since the direction began.
    """


class Probe(BaseModel):
    """
    One probe.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    connect_ms: float | None = None
    """
    Foreign: TCP handshake, or the QUIC handshake, ms.
    """
    error: str | None = None
    """
    Why the probe failed.
    """
    http_ms: float | None = None
    """
    The GET of the small object, ms.
    """
    kind: ProbeKind
    """
    `foreign` (a new connection) or `self` (on a load-generating connection; HTTP/1.1: the
    TCP stack's smoothed RTT of that connection, `http_ms` then is that RTT).
    """
    t_s: float
    """
    Completion, seconds since the stage began.
    """
    tls_ms: float | None = None
    """
    Foreign over TCP: TLS handshake, ms.
    """


class DirectionResult(BaseModel):
    """
    One direction's result.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int, Field(ge=0)]
    """
    Payload bytes the load-generating connections moved.
    """
    capacity_bps: float | None = None
    """
    Capacity: the last moving-average goodput, bit/s (HTTP payload).
    """
    confidence: Confidences
    """
    Draft §"Confidence of Test-Results".
    """
    duration_s: float
    """
    The direction's duration, s.
    """
    errors: list[str]
    """
    Errors of load-generating connections (the draft aborts; this client records them and
    lets the next interval add a connection).
    """
    intervals: list[Interval]
    """
    Every interval.
    """
    load_connections: Annotated[int, Field(ge=0)]
    """
    Load-generating connections at the end.
    """
    load_connections_max: Annotated[int | None, Field(ge=0)] = None
    """
    Most load-generating connections open at an interval's end (the cap is the parameter
    MNP, 16 as in goresponsiveness). Null in older results.
    """
    loaded_latency_ms: float | None = None
    """
    60000 / RPM: the round-trip time the RPM stands for, ms.
    """
    probes: list[Probe]
    """
    Every probe.
    """
    responsiveness: Responsiveness | None = None
    """
    The trimmed means and partial RPMs behind `rpm`.
    """
    rpm: float | None = None
    """
    Responsiveness, round trips per minute, by the draft's formula (the mean of the foreign
    and self RPMs). From the last interval's window once goodput saturated; if it never did,
    from the last MAD intervals' probes, with RPM confidence `speculative`.
    """
    rpm_latency_mean: float | None = None
    """
    The same probes by goresponsiveness's and Apple's formula (the foreign and self latencies
    averaged, converted once): what those clients would report. Null in older results.
    """
    saturated_at: Annotated[int | None, Field(ge=0)] = None
    """
    Interval at which goodput saturated.
    """


class IdleResult(BaseModel):
    """
    Idle latency: probes on an unloaded path.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    http_median_ms: float | None = None
    """
    Median of the self probes' HTTP times (LibreSpeed's "ping"), ms.
    """
    latency_ms: float | None = None
    """
    60000 / idle RPM, ms.
    """
    probes: list[Probe]
    """
    Every probe.
    """
    responsiveness: Responsiveness | None = None
    """
    The trimmed means.
    """
    rpm: float | None = None
    """
    The draft's formula over the idle probes.
    """


class RpmResult(BaseModel):
    """
    The result of `protolab-net rpm` (docs/rpm.md).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    client: ClientInfo
    """
    The client machine.
    """
    config: RpmConfig
    """
    The configuration.
    """
    directions: dict[Literal['download', 'upload'], DirectionResult]
    """
    Per direction that ran: `download`, `upload`.
    """
    error: str | None = None
    """
    What failed (discovery, every connection...).
    """
    idle: IdleResult | None = None
    """
    Idle latency.
    """
    protocol: Protocol
    """
    h1, h2, h3.
    """
    schema_: Annotated[RpmSchema, Field(alias='schema')]
    """
    `protolab.rpm`.
    """
    schema_version: Annotated[int, Field(ge=0)]
    """
    [`SCHEMA_VERSION`].
    """
    started_unix_ns: Annotated[int, Field(ge=0)]
    """
    Start, Unix ns.
    """
    status: RpmStatus
    """
    `ok`, `error`.
    """
    tool: str
    """
    `protolab-net` version.
    """
