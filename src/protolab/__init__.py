"""protolab: a reproducible lab for web-protocol performance."""

__version__ = "0.1.0"
