"""002's figures and tables (QUIC vs HTTP/1.1 page loads under emulated conditions, ch. 4-5)."""

from __future__ import annotations

from protolab.reproduce.figures.base import Figure

FIGURES: tuple[Figure, ...] = ()
