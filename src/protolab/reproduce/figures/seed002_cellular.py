"""002 ch. 6: page loads over cellular (trace-driven) links, Cubic against Sprout-EWMA."""

from __future__ import annotations

from protolab.reproduce.figures.base import Figure

FIGURES: tuple[Figure, ...] = ()
