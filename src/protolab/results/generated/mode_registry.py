# Generated from schemas/mode-registry.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class ModeRegistrySchema(StrEnum):
    """
    `schema` of the mode registry listing.
    """

    protolab_mode_registry = 'protolab.mode-registry'
    """
    The only value.
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


class SchedulerEntry(BaseModel):
    """
    One scheduler of the listing.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    description: str
    """
    What it does, in a line.
    """
    name: Scheduler
    """
    Its name (`--scheduler`, `config.scheduler` of a load result).
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


class ModeEntry(BaseModel):
    """
    One mode of the listing.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    connections: Annotated[int | None, Field(ge=0)] = None
    """
    Connections per origin when fixed by the mode (1); null for the HTTP/1.1 pool (up to
    `h1_connections`, on demand) and for the modes that take a count.
    """
    description: str
    """
    What it does, in a line.
    """
    mptcp: bool
    """
    Whether it runs over MPTCP (needs MPTCP listeners and the lab's `ip mptcp` set-up).
    """
    name: str
    """
    Registry name (`h2-parallel`); written `name:N` when `takes_count`.
    """
    protocol: Protocol
    """
    HTTP version.
    """
    takes_count: bool
    """
    Whether the mode is written `name:N` (N connections per origin, 1 to `max_parallel`).
    """
    transport: Transport
    """
    Carrier.
    """


class ModeRegistry(BaseModel):
    """
    `protolab-net modes --json`: every page-load mode and scheduler, and the largest `N`.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    max_parallel: Annotated[int, Field(ge=0)]
    """
    Largest `N` of the modes that take a connection count (`h2-parallel:N`).
    """
    modes: list[ModeEntry]
    """
    Every mode, in the registry's order (the order reports list them in).
    """
    schedulers: list[SchedulerEntry]
    """
    Every scheduler of the modes with several connections per origin.
    """
    schema_: Annotated[ModeRegistrySchema, Field(alias='schema')]
    """
    `protolab.mode-registry`.
    """
    schema_version: Annotated[int, Field(ge=0)]
    """
    Version of this listing.
    """
