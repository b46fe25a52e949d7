"""The live service's Prometheus metrics (docs/live.md, "Metrics"), in a registry of its own so
that two services in one process (tests) do not share counters. `GET /metrics` serves them in
Prometheus' text format, written by `prometheus_client`."""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# A test holds the lock from its token to its upload: the CLI's RPM takes 10-30 s, the page
# 20-50 s (docs/live.md, "Measured"), and the lock timeout is 120 s by default.
DURATION_BUCKETS_S = (1.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0)


class LiveMetrics:
    """Counters the HTTP server updates as it answers; gauges read from the service on scrape."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        started = clock()
        self.tests_started = Counter("protolab_live_tests_started", "Tokens issued (tests begun)",
                                     registry=self.registry)
        self.tests_completed = Counter("protolab_live_tests_completed", "Results stored",
                                       registry=self.registry)
        self.refused = Counter("protolab_live_requests_refused", "Requests refused, by reason (the JSON `error`)",
                               ["reason"], registry=self.registry)
        self.upload_bytes = Counter("protolab_live_upload_bytes", "Bytes of stored results",
                                    registry=self.registry)
        self.test_duration = Histogram("protolab_live_test_duration_seconds",
                                       "Time from a stored test's token to its upload",
                                       buckets=DURATION_BUCKETS_S, registry=self.registry)
        uptime = Gauge("protolab_live_uptime_seconds", "Seconds since the service started", registry=self.registry)
        uptime.set_function(lambda: clock() - started)
        self._gauges: dict[str, Gauge] = {}

    def gauge(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        """A value read from the service at each scrape (stored tests, requests in flight...)."""
        gauge = Gauge(name, documentation, registry=self.registry)
        gauge.set_function(read)
        self._gauges[name] = gauge

    def test_stored(self, body_bytes: int, held_s: float | None) -> None:
        self.tests_completed.inc()
        self.upload_bytes.inc(body_bytes)
        if held_s is not None:
            self.test_duration.observe(held_s)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
