# Generated from schemas/sample-header.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Role(StrEnum):
    """
    Which end of the connection samples.
    """

    client = 'client'
    """
    The end that opened the connection.
    """
    server = 'server'
    """
    The end that accepted it.
    """


class SamplesSchema(StrEnum):
    """
    `schema` of a samples file.
    """

    protolab_samples = 'protolab.samples'
    """
    The only value.
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


class SampleHeader(BaseModel):
    """
    The first line of a samples file: which connection, which end, how it was sampled.

    TCP and MPTCP headers carry `mptcp_fallback` and `tcp_congestion` (either may be null);
    QUIC headers carry `quic_congestion` instead, and neither of the other two.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    conn: str
    """
    The connection id, shared by both ends (`tcp-10.77.0.1:40002-10.99.0.1:443`).
    """
    interval_ms: float
    """
    Sampling interval, ms.
    """
    local: str | None = None
    """
    Local address.
    """
    mptcp_fallback: bool | None = None
    """
    TCP and MPTCP files only: for an MPTCP socket, whether the peer did not speak MPTCP and
    the connection runs as plain TCP; null for a TCP socket.
    """
    quic_congestion: str | None = None
    """
    QUIC files only: the congestion controller as configured (`cubic`, `gquic39`).
    """
    remote: str | None = None
    """
    Remote address.
    """
    role: Role
    """
    Which end wrote the file.
    """
    schema_: Annotated[SamplesSchema, Field(alias='schema')]
    """
    `protolab.samples`.
    """
    schema_version: Annotated[int, Field(ge=0)]
    """
    [`SCHEMA_VERSION`].
    """
    start_unix_ns: Annotated[int, Field(ge=0)]
    """
    When sampling began, Unix ns.
    """
    tcp_congestion: str | None = None
    """
    TCP and MPTCP files only: the socket's `TCP_CONGESTION` (null if unreadable).
    """
    transport: Transport
    """
    `tcp`, `mptcp` or `quic`.
    """
