"""Admission limits of the live service (docs/live.md, "Limits"): a token bucket per client
address with a bounded table, and a cap on the requests being served at once. Pure: the clock is
passed in, so tests drive them with a fake one.

Refusals are LiveError: 429 `rate_limited` with `retry_after_s` (the server turns it into a
`Retry-After` header) and 503 `overloaded`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from protolab.live.coordinator import LiveError


@dataclass
class _Bucket:
    tokens: float
    updated: float


class AddressRateLimiter:
    """One token bucket per client address: `burst` requests at once, then `rate_per_s` on
    average. The table keeps at most `max_addresses` buckets; when full, the bucket unused the
    longest goes (a forgotten address starts again with a full bucket, so a flood of spoofed or
    many addresses costs memory of at most `max_addresses` entries, never more)."""

    def __init__(self, rate_per_s: float, burst: float, max_addresses: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not rate_per_s > 0 or not burst >= 1:
            raise ValueError(f"a rate limit needs a positive rate and a burst of at least 1, "
                             f"got rate {rate_per_s}, burst {burst}")
        if max_addresses < 1:
            raise ValueError(f"the address table needs room for at least one address, got {max_addresses}")
        self.rate_per_s = float(rate_per_s)
        self.burst = float(burst)
        self.max_addresses = int(max_addresses)
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._buckets)

    def admit(self, address: str, what: str = "requests") -> None:
        """Takes one token from the address's bucket, or raises 429 `rate_limited` with the
        seconds until one is back."""
        with self._lock:
            now = self._clock()
            bucket = self._buckets.pop(address, None)
            if bucket is None:
                bucket = _Bucket(self.burst, now)
            else:
                elapsed = max(0.0, now - bucket.updated)
                bucket.tokens = min(self.burst, bucket.tokens + elapsed * self.rate_per_s)
                bucket.updated = now
            self._buckets[address] = bucket  # most recently used last
            while len(self._buckets) > self.max_addresses:
                self._buckets.popitem(last=False)
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return
            wait_s = (1.0 - bucket.tokens) / self.rate_per_s
        raise LiveError(429, "rate_limited",
                        f"too many {what} from your address (at most {self.burst:g} at once, then one every "
                        f"{1 / self.rate_per_s:g} s); ask again later", retry_after_s=round(wait_s, 3))


    def refund(self, address: str) -> None:
        """Gives back the token `admit` took, for a request that was refused for another reason
        (a token request while another test runs must not use up the address's tests)."""
        with self._lock:
            bucket = self._buckets.get(address)
            if bucket is not None:
                bucket.tokens = min(self.burst, bucket.tokens + 1.0)


class ConcurrencyCap:
    """At most `limit` requests served at once; one more is refused at once with 503
    `overloaded` (queueing would hold a thread and a socket per waiting client)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the concurrency cap must be at least 1, got {limit}")
        self.limit = int(limit)
        self._active = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> int:
        return self._active

    def acquire(self) -> None:
        with self._lock:
            if self._active >= self.limit:
                raise LiveError(503, "overloaded", f"the service is serving {self.limit} requests already; "
                                                   "ask again shortly", retry_after_s=1.0)
            self._active += 1

    def release(self) -> None:
        with self._lock:
            self._active = max(0, self._active - 1)


class ConnectionGate:
    """Open connections, per client address and in all, counted from accept to close: the
    server checks it before it starts a thread for a connection, so clients that open
    connections and send nothing (or a byte now and then: slowloris) hold at most
    `per_address` threads each and `total` in all, and everyone else still gets in. Returns
    the refusal's message, or None when the connection is admitted."""

    def __init__(self, total: int, per_address: int) -> None:
        if total < 1 or per_address < 1:
            raise ValueError(f"connection limits must be at least 1, got {total} in all, {per_address} per address")
        self.total = int(total)
        self.per_address = int(per_address)
        self._open: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def open(self) -> int:
        return sum(self._open.values())

    def admit(self, address: str, exempt: bool = False) -> str | None:
        """Counts a new connection from `address` (an exempt one, a trusted proxy, is limited
        only by the total) or says why not."""
        with self._lock:
            if sum(self._open.values()) >= self.total:
                return f"the service has {self.total} connections open already; try again shortly"
            if not exempt and self._open[address] >= self.per_address:
                return f"your address has {self.per_address} connections open already; close one first"
            self._open[address] += 1
            return None

    def release(self, address: str) -> None:
        with self._lock:
            self._open[address] -= 1
            if self._open[address] <= 0:
                del self._open[address]


@dataclass
class ServiceLimits:
    """The limits the HTTP server applies (None: that limit is off). `requests`: every API
    request, per address; `tests`: tokens issued per address (a refused token request gives its
    token back); `in_flight`: requests served at once, over all addresses; `connections`:
    connections open per address and in all; `head_timeout_s`: time for a request's line and
    headers to arrive, from the connection's accept (its body then has REQUEST_TIMEOUT_S)."""

    requests: AddressRateLimiter | None = None
    tests: AddressRateLimiter | None = None
    in_flight: ConcurrencyCap | None = None
    connections: ConnectionGate | None = None
    head_timeout_s: float | None = None
