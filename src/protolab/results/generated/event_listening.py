# Generated from schemas/event-listening.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class ListeningEvent(StrEnum):
    """
    `event` of [`Listening`].
    """

    listening = 'listening'
    """
    The only value.
    """


class UnfitDocument(BaseModel):
    """
    A document of a real page whose size is too small for references to all its children.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    children: Annotated[int, Field(ge=0)]
    """
    Children it should reference.
    """
    file: str
    """
    The manifest file.
    """
    origin: str
    """
    The document's origin hostname.
    """
    path: str
    """
    The document's path.
    """
    referenced: Annotated[int, Field(ge=0)]
    """
    Children it references.
    """
    size: Annotated[int, Field(ge=0)]
    """
    Its size in the manifest, bytes.
    """


class Listening(BaseModel):
    """
    `protolab-net serve` is up: where it listens and what it runs with.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    event: ListeningEvent
    """
    `listening`.
    """
    h3: list[str]
    """
    HTTP/3 (QUIC) sockets, `addr:port`.
    """
    http: list[str]
    """
    Cleartext HTTP/1.1 (and HTTP/2 with prior knowledge) sockets, `addr:port`.
    """
    https: list[str]
    """
    TLS sockets (ALPN h2 and http/1.1), `addr:port`.
    """
    mptcp: bool
    """
    Whether the listeners are MPTCP sockets.
    """
    quic_cc: str
    """
    The QUIC controller as given (`--quic-cc`).
    """
    quic_cc_canonical: str
    """
    The QUIC controller with every parameter.
    """
    raw: list[str]
    """
    Sockets of the raw bulk protocol, `addr:port` (none with `--raw-port off`).
    """
    real_page_unfit: list[UnfitDocument]
    """
    Real-page documents whose bodies could not reference all their children (the browser
    will not request the others).
    """
    spki: str
    """
    The SPKI hashes of the certificates, comma-separated (Chromium's
    `--ignore-certificate-errors-spki-list`).
    """
    tcp_cc: str
    """
    TCP congestion control of every socket.
    """
    tls_dir: str
    """
    Where the CA, certificates and SPKI hashes were written (docs/tls.md).
    """
