"""Live measurements (issue 10, seed 003 §5.3): the coordinator that lets one responsiveness
test run at a time and keeps each test's result with its server-side qlogs (docs/live.md);
003 ch. 7's analyses of what it stores (`analysis`, pure; `analyze` reads a store, `page_report`
draws the page with the report's helpers) and a lab fleet of tests with known truth (`fleet`),
both behind `protolab live` (`commands`). The fleet drives a lab (`lab`); the analyses read qlogs
with `measure` and draw with the report's figure helpers (`report.figures`, `report.section`)."""

from protolab.live.coordinator import Coordinator, LiveError
from protolab.live.server import LiveServer, serve

__all__ = ["Coordinator", "LiveError", "LiveServer", "serve"]
