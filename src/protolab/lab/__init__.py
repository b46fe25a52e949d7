"""Topology lifecycle around `protolab-net emu` and running processes in its hosts."""

from protolab.lab.binary import find_binary
from protolab.lab.control import ControlClient
from protolab.lab.lab import Lab, Ready, cleanup_lab, stop_process
from protolab.lab.topology import (
    dumbbell,
    host,
    ideal_link,
    link,
    mbps_to_bps,
    ms_to_ns,
    path,
)

__all__ = [
    "ControlClient",
    "Lab",
    "Ready",
    "cleanup_lab",
    "dumbbell",
    "find_binary",
    "host",
    "ideal_link",
    "link",
    "mbps_to_bps",
    "ms_to_ns",
    "path",
    "stop_process",
]
