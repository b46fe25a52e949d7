# Generated from schemas/bulk-result.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class BulkKind(StrEnum):
    """
    `kind` of a bulk result.
    """

    bulk = 'bulk'
    """
    The only value.
    """


class BulkProtocol(StrEnum):
    """
    What carries the bytes of a bulk transfer.
    """

    tcp = 'tcp'
    """
    The raw protocol on TCP (no HTTP; docs/bulk.md).
    """
    h1c = 'h1c'
    """
    HTTP/1.1 over cleartext TCP.
    """
    h1 = 'h1'
    """
    HTTP/1.1 over TLS.
    """
    h2 = 'h2'
    """
    HTTP/2 over TLS.
    """
    h3 = 'h3'
    """
    HTTP/3 over QUIC.
    """


class BulkStatus(StrEnum):
    """
    Outcome of a transfer.
    """

    ok = 'ok'
    """
    Every byte moved (byte count), or the transfer ran until its deadline (duration).
    """
    failed = 'failed'
    """
    The connection or the transfer failed.
    """
    timeout = 'timeout'
    """
    The run did not end within the timeout.
    """


class Direction(StrEnum):
    """
    Who sends, in a bulk transfer and in a raw request.
    """

    download = 'download'
    """
    The server sends.
    """
    upload = 'upload'
    """
    The client sends.
    """


class IntervalRow(BaseModel):
    """
    One interval of a transfer's log (half-open, `[k x interval, (k+1) x interval)`; the last
    one ends with the transfer).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int, Field(ge=0)]
    """
    Bytes in the interval.
    """
    rate_bps: float
    """
    `bytes` x 8 / the interval's length (the last one may be shorter), bit/s.
    """
    t_ms: float
    """
    End of the interval, ms since the transfer's start.
    """
    t_unix_ns: Annotated[int, Field(ge=0)]
    """
    End of the interval, Unix ns.
    """
    total_bytes: Annotated[int, Field(ge=0)]
    """
    Bytes up to the end of the interval.
    """


class Pacing(StrEnum):
    """
    Who paces a transfer at `rate_bps`: the sender.
    """

    server = 'server'
    """
    Downloads: the server, asked by the request.
    """
    client = 'client'
    """
    Uploads: the client.
    """


class ServerCount(BaseModel):
    """
    What the server reported for an upload.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int, Field(ge=0)]
    """
    Bytes it received.
    """
    duration_ms: float
    """
    Its receive time, ms (HTTP: from the request head to the end of the body; raw: from
    the request header to the last byte).
    """


class Transport(StrEnum):
    """
    What carries the HTTP connection.
    """

    tcp = 'tcp'
    """
    TCP.
    """
    mptcp = 'mptcp'
    """
    MPTCP (`IPPROTO_MPTCP`).
    """
    quic = 'quic'
    """
    QUIC over UDP.
    """


class BulkConfig(BaseModel):
    """
    The effective configuration of a transfer, carried into its result.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int | None, Field(ge=0)] = None
    """
    Byte count (null in duration mode).
    """
    connect_timeout_ms: Annotated[int, Field(ge=0)]
    """
    Connect timeout, ms.
    """
    direction: Direction
    """
    Who sends.
    """
    duration_ms: float | None = None
    """
    Duration (null in byte-count mode), ms.
    """
    host: str
    """
    SNI / Host.
    """
    interval_ms: float
    """
    Log interval, ms.
    """
    mptcp: bool
    """
    MPTCP socket asked for.
    """
    pacing: Pacing | None = None
    """
    Who paces: `server` (downloads), `client` (uploads), null when unpaced.
    """
    path: str | None = None
    """
    The path downloaded instead of `/bytes` (null = `/bytes`).
    """
    protocol: BulkProtocol
    """
    Protocol.
    """
    qlog_dir: str | None = None
    """
    qlog directory (null = no qlog).
    """
    quic_ack_eliciting_threshold: Annotated[int | None, Field(ge=0)] = None
    """
    ACK frequency asked of the peer: ack-eliciting threshold (null = not asked).
    """
    quic_cc: str
    """
    The controller as given (`gquic39`, `cubic:c=0.8`).
    """
    quic_cc_canonical: str
    """
    The controller with every parameter (`cubic:c=0.4,cube_factor=1,beta=0.7,n=2,...`).
    """
    quic_initial_window: Annotated[int | None, Field(ge=0)] = None
    """
    Initial window in bytes, if set apart from the controller (null = the controller's).
    """
    quic_max_ack_delay_ms: float | None = None
    """
    ACK frequency asked of the peer: maximum ACK delay, ms (null = not asked).
    """
    quic_packet_threshold: Annotated[int | None, Field(ge=0)] = None
    """
    Loss detection packet threshold (null = quinn's 3).
    """
    quic_stream_window: Annotated[int | None, Field(ge=0)] = None
    """
    Flow control: every stream's receive window, bytes (null = quinn's 1.25 MB).
    """
    quic_time_threshold: float | None = None
    """
    Loss detection time threshold, RTT multiple (null = quinn's 1.125).
    """
    rate_bps: Annotated[int | None, Field(ge=0)] = None
    """
    Application rate, bit/s (null = unpaced).
    """
    sample_interval_ms: float
    """
    Sampling interval, ms.
    """
    samples_dir: str | None = None
    """
    Samples directory (null = no samples).
    """
    server: str
    """
    Server address and port used.
    """
    tcp_cc: str | None = None
    """
    `TCP_CONGESTION` asked for (null = namespace default; not used by h3).
    """
    timeout_ms: Annotated[int, Field(ge=0)]
    """
    Timeout of the run, ms.
    """


class ConnectionInfo(BaseModel):
    """
    The connection of a bulk result.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    conn_id: str
    """
    The connection's id in sample and qlog file names, shared with the server's files
    (`<transport>-<client addr>-<server addr>`, docs/samples.md).
    """
    local: str | None = None
    """
    Local address.
    """
    mptcp_fallback: bool | None = None
    """
    MPTCP: whether the connection fell back to plain TCP (the server does not speak MPTCP).
    """
    protocol: BulkProtocol
    """
    `tcp`, `h1c`, `h1`, `h2`, `h3`.
    """
    remote: str
    """
    Remote address.
    """
    tcp_cc: str | None = None
    """
    `TCP_CONGESTION` read back from the socket (TCP transports).
    """
    transport: Transport
    """
    `tcp`, `mptcp` or `quic`.
    """


class BulkResult(BaseModel):
    """
    The result of one bulk transfer (docs/bulk.md).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int, Field(ge=0)]
    """
    Bytes moved: received (download) or handed to the transport (upload).
    """
    config: BulkConfig
    """
    Effective configuration.
    """
    connection: ConnectionInfo | None = None
    """
    The connection, once established.
    """
    duration_ms: float | None = None
    """
    From the start to the end of the transfer, ms.
    """
    error: str | None = None
    """
    What went wrong.
    """
    goodput_bps: float | None = None
    """
    `bytes` x 8 / duration, bit/s.
    """
    handshake_ms: float | None = None
    """
    From the connection attempt to the connection being ready, ms.
    """
    intervals: list[IntervalRow]
    """
    Bytes per interval.
    """
    kind: BulkKind
    """
    `bulk`.
    """
    qlog: str | None = None
    """
    The qlog file written.
    """
    samples: str | None = None
    """
    The samples file written.
    """
    schema_version: Annotated[int, Field(ge=0)]
    """
    [`SCHEMA_VERSION`].
    """
    server: ServerCount | None = None
    """
    Uploads: the server's own count.
    """
    start_unix_ns: Annotated[int, Field(ge=0)]
    """
    Unix time the transfer started (request sent), ns; the connection attempt's start when
    no transfer began.
    """
    status: BulkStatus
    """
    Outcome.
    """
