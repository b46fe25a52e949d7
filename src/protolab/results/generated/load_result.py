# Generated from schemas/load-result.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class BrowserConfig(BaseModel):
    """
    The configuration of a Chromium load.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    chromium_version: str | None = None
    """
    `Browser.version` of the Chromium that ran (null: it did not start).
    """
    manifest: str
    """
    Manifest file as given (its objects are the expected ones).
    """
    mode: str
    """
    Mode (one Chromium can be made to speak: h1c, h1, h2, h2-mptcp, h3).
    """
    page: str | None = None
    """
    Page name from the manifest.
    """
    timeout_ms: Annotated[int, Field(ge=0)]
    """
    Time limit of the load, ms.
    """
    url: str | None = None
    """
    The root URL loaded.
    """
    warm: bool
    """
    Warm load: a first load, every connection closed, then the measured load.
    """


class ClientConfig2(BaseModel):
    """
    Headless Chromium driven by `protolab.browser.driver` (docs/browser.md).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    chromium_version: str | None = None
    """
    `Browser.version` of the Chromium that ran (null: it did not start).
    """
    manifest: str
    """
    Manifest file as given (its objects are the expected ones).
    """
    mode: str
    """
    Mode (one Chromium can be made to speak: h1c, h1, h2, h2-mptcp, h3).
    """
    page: str | None = None
    """
    Page name from the manifest.
    """
    timeout_ms: Annotated[int, Field(ge=0)]
    """
    Time limit of the load, ms.
    """
    url: str | None = None
    """
    The root URL loaded.
    """
    warm: bool
    """
    Warm load: a first load, every connection closed, then the measured load.
    """
    client: Literal['chromium']


class ExtraRequest(BaseModel):
    """
    A request a browser made for a URL outside the manifest.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int, Field(ge=0)]
    """
    Body bytes received.
    """
    error: str | None = None
    """
    Why it failed.
    """
    started_ms: float | None = None
    """
    Request sent, ms since the root request.
    """
    status: Annotated[int | None, Field(ge=0, le=65535)] = None
    """
    HTTP status (null: no response).
    """
    url: str
    """
    Its URL.
    """


class LoadKind(StrEnum):
    """
    `kind` of a page-load result.
    """

    page_load = 'page_load'
    """
    The only value.
    """


class LoadStatus(StrEnum):
    """
    Outcome of a load.
    """

    ok = 'ok'
    """
    Every object arrived with status 200 and the manifest's size.
    """
    failed = 'failed'
    """
    Some object failed.
    """
    timeout = 'timeout'
    """
    The load did not end within the timeout.
    """


class ObjectResult(BaseModel):
    """
    One object of the result.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int, Field(ge=0)]
    """
    Body bytes received.
    """
    connection: Annotated[int | None, Field(ge=0)] = None
    """
    Id (`connections[].id`) of the connection it was assigned to.
    """
    delay_ms: Annotated[int, Field(ge=0)]
    """
    Discovery delay from the manifest, ms.
    """
    discovered_ms: float | None = None
    """
    Parent finished + delay, ms since the root request.
    """
    error: str | None = None
    """
    Why it failed.
    """
    expected_bytes: Annotated[int, Field(ge=0)]
    """
    Size from the manifest.
    """
    finished_ms: float | None = None
    """
    Body complete (or the fetch ended in error), ms.
    """
    first_byte_ms: float | None = None
    """
    Response head received, ms.
    """
    origin: str
    """
    Origin hostname.
    """
    parent: str | None = None
    """
    `//host/path` of the parent, null for the root.
    """
    path: str
    """
    Path (with query).
    """
    queue_position: Annotated[int | None, Field(ge=0)] = None
    """
    Position in its origin's request queue (0 = first queued on that origin); the
    round-robin scheduler sends position i to the origin's connection i mod N.
    """
    queued_ms: float | None = None
    """
    Taken by the scheduler, ms.
    """
    resent_after: str | None = None
    """
    Why its first attempt failed, when that attempt ended before any response byte on a
    connection that had already delivered a response: the request was then sent again, as
    browsers do (Chromium's `HttpNetworkTransaction::ShouldResendRequest`); the fields above
    describe the second attempt. Absent when it was sent once.
    """
    started_ms: float | None = None
    """
    Request sent, ms.
    """
    status: Annotated[int | None, Field(ge=0, le=65535)] = None
    """
    HTTP status.
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


class Scheduler(StrEnum):
    """
    How a multiplexed mode with several connections per origin assigns requests.
    """

    round_robin = 'round-robin'
    """
    The origin's i-th queued request goes to connection i mod N (as in 001).
    """
    least_outstanding = 'least-outstanding'
    """
    To the connection with the fewest outstanding response bytes (expected minus received).
    """


class SubflowResult(BaseModel):
    """
    One MPTCP subflow at the end of a load (from `MPTCP_TCPINFO` and `MPTCP_SUBFLOW_ADDRS`).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes_acked: Annotated[int, Field(ge=0)]
    """
    `tcpi_bytes_acked`: bytes the client sent on it that the server acknowledged.
    """
    bytes_received: Annotated[int, Field(ge=0)]
    """
    `tcpi_bytes_received`: bytes this subflow delivered to the client.
    """
    local: str | None = None
    """
    Local address.
    """
    remote: str | None = None
    """
    Remote address.
    """
    rtt_us: Annotated[int, Field(ge=0)]
    """
    Smoothed RTT, microseconds.
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


class BrowserExtras(BaseModel):
    """
    What only a browser load has (`browser` of a Chromium result).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    extra_requests: list[ExtraRequest]
    """
    Requests for URLs outside the manifest (e.g. `/favicon.ico`).
    """
    navigation: dict[str, Any]
    """
    The page's Navigation Timing entry (numbers and strings), ms since navigation start.
    """
    not_requested: Annotated[int, Field(ge=0)]
    """
    Manifest objects the browser never requested.
    """


class ClientConfig1(BaseModel):
    """
    protolab's page-load engine (`protolab-net load`).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    connect_timeout_ms: Annotated[int, Field(ge=0)]
    """
    TCP connect timeout (TCP + TLS + HTTP set-up), ms.
    """
    h1_connections: Annotated[int, Field(ge=0)]
    """
    HTTP/1.1 connection limit per origin.
    """
    h2_connection_window: Annotated[int, Field(ge=0)]
    """
    HTTP/2 connection window announced.
    """
    h2_stream_window: Annotated[int, Field(ge=0)]
    """
    HTTP/2 `SETTINGS_INITIAL_WINDOW_SIZE` sent.
    """
    http_port: Annotated[int, Field(ge=0, le=65535)]
    """
    Cleartext port.
    """
    https_port: Annotated[int, Field(ge=0, le=65535)]
    """
    TLS / QUIC port.
    """
    manifest: str
    """
    Manifest file as given.
    """
    mode: str
    """
    Mode as written (`h2-parallel:2`; see the mode registry).
    """
    page: str
    """
    Page name from the manifest.
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
    quic_handshake_timeout_ms: Annotated[int | None, Field(ge=0)] = None
    """
    QUIC handshake timeout (QUIC + HTTP/3 set-up), ms (absent in results from before it
    existed, when `connect_timeout_ms` bounded both).
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
    sample_interval_ms: float
    """
    Sampling interval, ms.
    """
    samples_dir: str | None = None
    """
    Samples directory (null = no samples).
    """
    scheduler: Scheduler
    """
    Request assignment in modes with several connections per origin.
    """
    source_port_seed: Annotated[int | None, Field(ge=0)] = None
    """
    Seed of the source ports (null = the kernel's choice).
    """
    tcp_cc: str | None = None
    """
    TCP congestion control (null = namespace default).
    """
    tcp_rcvbuf: Annotated[int | None, Field(ge=0)] = None
    """
    `SO_RCVBUF` of TCP/MPTCP sockets, bytes (null = autotuned).
    """
    timeout_ms: Annotated[int, Field(ge=0)]
    """
    Load timeout, ms.
    """
    warm: bool
    """
    Warm load: TLS sessions resumed, QUIC 0-RTT (`--warm`).
    """
    client: Literal['engine']


class ConnectionResult(BaseModel):
    """
    One connection of the result.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int, Field(ge=0)]
    """
    Response body bytes received on it.
    """
    conn_id: str | None = None
    """
    Its id in sample and qlog file names: `<transport>-<client addr>-<server addr>`; the
    server's files of the same connection carry the same id (docs/samples.md).
    """
    connect_start_ms: float | None = None
    """
    When the connection attempt began, ms since the root request (null: the client did
    not say, as Chromium for a connection it opened before the page's requests).
    """
    error: str | None = None
    """
    Why the connection failed.
    """
    handshake_ms: float | None = None
    """
    Until the connection could carry requests (TCP + TLS + HTTP set-up, or QUIC + HTTP/3), ms.
    """
    id: Annotated[int, Field(ge=0)]
    """
    Index in `connections` (what `objects[].connection` refers to).
    """
    local: str | None = None
    """
    Local address.
    """
    origin: str
    """
    Origin hostname.
    """
    protocol: Protocol
    """
    `h1c`, `h1`, `h2` or `h3`.
    """
    qlog_file: str | None = None
    """
    Its qlog file (`--qlog`), for QUIC connections.
    """
    remote: str
    """
    Remote address.
    """
    requests: Annotated[int, Field(ge=0)]
    """
    Requests sent on it.
    """
    resumed: bool | None = None
    """
    Whether the TLS session was resumed (TLS over TCP: the handshake kind; QUIC: a session
    ticket was used). Null without TLS.
    """
    samples_file: str | None = None
    """
    Its samples file (`--samples`), when sampled.
    """
    subflow_details: list[SubflowResult] | None = None
    """
    MPTCP: every subflow alive at the end of the load, with what it carried.
    """
    subflows: Annotated[int | None, Field(ge=0, le=255)] = None
    """
    MPTCP: most subflows seen at once, the initial one included (`mptcpi_subflows` + 1).
    """
    tcp_connect_ms: float | None = None
    """
    TCP connect duration (TCP and MPTCP), ms.
    """
    transport: Transport
    """
    `tcp`, `mptcp` or `quic`.
    """
    zero_rtt: bool | None = None
    """
    QUIC 0-RTT (`--warm`): whether the server accepted the early data; null when not tried.
    """


class LoadConfig(BaseModel):
    """
    The effective configuration of an engine load, carried into its result.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    connect_timeout_ms: Annotated[int, Field(ge=0)]
    """
    TCP connect timeout (TCP + TLS + HTTP set-up), ms.
    """
    h1_connections: Annotated[int, Field(ge=0)]
    """
    HTTP/1.1 connection limit per origin.
    """
    h2_connection_window: Annotated[int, Field(ge=0)]
    """
    HTTP/2 connection window announced.
    """
    h2_stream_window: Annotated[int, Field(ge=0)]
    """
    HTTP/2 `SETTINGS_INITIAL_WINDOW_SIZE` sent.
    """
    http_port: Annotated[int, Field(ge=0, le=65535)]
    """
    Cleartext port.
    """
    https_port: Annotated[int, Field(ge=0, le=65535)]
    """
    TLS / QUIC port.
    """
    manifest: str
    """
    Manifest file as given.
    """
    mode: str
    """
    Mode as written (`h2-parallel:2`; see the mode registry).
    """
    page: str
    """
    Page name from the manifest.
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
    quic_handshake_timeout_ms: Annotated[int | None, Field(ge=0)] = None
    """
    QUIC handshake timeout (QUIC + HTTP/3 set-up), ms (absent in results from before it
    existed, when `connect_timeout_ms` bounded both).
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
    sample_interval_ms: float
    """
    Sampling interval, ms.
    """
    samples_dir: str | None = None
    """
    Samples directory (null = no samples).
    """
    scheduler: Scheduler
    """
    Request assignment in modes with several connections per origin.
    """
    source_port_seed: Annotated[int | None, Field(ge=0)] = None
    """
    Seed of the source ports (null = the kernel's choice).
    """
    tcp_cc: str | None = None
    """
    TCP congestion control (null = namespace default).
    """
    tcp_rcvbuf: Annotated[int | None, Field(ge=0)] = None
    """
    `SO_RCVBUF` of TCP/MPTCP sockets, bytes (null = autotuned).
    """
    timeout_ms: Annotated[int, Field(ge=0)]
    """
    Load timeout, ms.
    """
    warm: bool
    """
    Warm load: TLS sessions resumed, QUIC 0-RTT (`--warm`).
    """


class LoadResult(BaseModel):
    """
    The result of one page load (docs/load.md).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    browser: BrowserExtras | None = None
    """
    A browser load's extras (absent for the engine).
    """
    bytes: Annotated[int, Field(ge=0)]
    """
    Body bytes received in all.
    """
    config: ClientConfig1 | ClientConfig2
    """
    Who loaded the page and its effective configuration.
    """
    connections: list[ConnectionResult]
    """
    Every connection opened, in order of opening.
    """
    error: str | None = None
    """
    Summary of what went wrong.
    """
    kind: LoadKind
    """
    `page_load`.
    """
    objects: list[ObjectResult]
    """
    Every manifest object, in manifest order.
    """
    plt_ms: float | None = None
    """
    Page load time (last object finished), ms, when ok.
    """
    schema_version: Annotated[int, Field(ge=0)]
    """
    [`SCHEMA_VERSION`].
    """
    start_unix_ns: Annotated[int, Field(ge=0)]
    """
    Unix time of the root request, ns.
    """
    status: LoadStatus
    """
    Outcome.
    """
