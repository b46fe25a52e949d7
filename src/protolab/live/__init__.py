"""Live measurements (issue 10, seed 003 §5.3): the coordinator that lets one responsiveness
test run at a time and keeps each test's result with its server-side qlogs (docs/live.md)."""

from protolab.live.coordinator import Coordinator, LiveError
from protolab.live.server import LiveServer, serve

__all__ = ["Coordinator", "LiveError", "LiveServer", "serve"]
