"""003 ch. 7's analyses of what the live service collects (docs/live.md, "Analyses (003 ch. 7)").
Pure: the tests come in as `LiveTest` values (read from a store by `live.analyze`), the answers
go out as numbers; no I/O, tested on fixed data.

- QUIC usage per browser (Fig. 7.1): the share of a test's measurement requests that went over
  HTTP/3, per browser family of its user agent.
- The factor of increase R_U/R_L per direction (Fig. 7.2): idle RPM over loaded RPM.
- Bandwidth against the factor (Fig. 7.3) with z-score > 3 outliers removed.
- Loss rates from the server's qlogs (Fig. 7.4), bursts by 003's annex C (Fig. 7.5), losses
  against the factor (Figs. 7.7, 7.8), idle latency against the factor (Fig. 7.9).
- Spurious retransmissions (Fig. 7.6) are not in quinn's qlogs (it logs no acknowledgement
  frames, so a packet declared lost and later acknowledged cannot be told); for a fleet's tests
  a lower bound comes from the emulator's drop count (`LiveTest.spurious_lower_bound`).
- Recovered against true: for tests whose access link is known (the lab fleet,
  `live.fleet`), each recovered metric against the configured or emulator-counted value, per
  client kind (the speed-test page in a browser, or a CLI client) and access-link kind.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protolab.measure.losses import bursts
from protolab.measure.qlog import QlogTrace, header_of

DIRECTIONS = ("download", "upload")
PAGE_SCHEMA = "protolab.rpm.browser"
RPM_SCHEMAS = ("protolab.rpm", PAGE_SCHEMA)
# Client kinds: the speed-test page in a browser (its results' schema), or a CLI client.
PAGE, CLI = "page", "cli"
Z_SCORE_LIMIT = 3.0  # 003 §7.3: outliers with a z-score above 3 removed [its ref. 16]
HIGH_FACTOR = 5.0  # 003 §7.2: "for 30% of the tests, the latency increase by a factor bigger than 5"

# 003's numbers, transcribed with the place they come from (seed 003, ch. 7).
SEED_003: dict[str, tuple[float | None, str]] = {
    "tests": (750, "ch. 7 'Global results': about 750 tests"),
    "median_factor_download": (3.0, "§7.2, Fig. 7.2c: median factor of increase around 3"),
    "median_factor_upload": (3.0, "§7.2, Fig. 7.2d: median factor of increase around 3"),
    "share_factor_above_5": (0.30, "§7.2, Figs. 7.2c-d: 30% of the tests above a factor of 5"),
    "share_loss_below_1pct": (None, "§7.4, Fig. 7.4a: 'for most users the percentage of losses is under 1%'"),
    "share_no_loss": (0.5, "§7.4, Fig. 7.4b: 'for half test the users didn't have losses'"),
    "max_loss_pct": (19.22, "§7.4: the highest loss rate reaches 19.22%"),
    "share_single_loss_bursts": (0.40, "§7.4.1, Fig. 7.5: most bursts are of one packet (around 40%)"),
    "share_bursts_below_10": (0.80, "§7.4.1, Fig. 7.5: more than 80% of the bursts have fewer than 10 packets"),
}


@dataclass(frozen=True)
class Direction:
    """One direction of an RPM test: capacity (bit/s), loaded RPM, loaded latency (ms)."""

    capacity_bps: float | None = None
    rpm: float | None = None
    loaded_latency_ms: float | None = None


@dataclass(frozen=True)
class ConnectionLosses:
    """What one server qlog says about losses: packets sent and declared lost, the send times
    (ms) of the lost ones, and 003's burst threshold sRTT + RTT variance (ms, the last values)."""

    sent: int
    lost: int
    lost_sent_ms: tuple[float, ...] = ()
    threshold_ms: float | None = None
    # The qlog's reference time (Unix ms): puts its connection's losses on a clock shared with
    # the test's other connections (None: the qlog did not say).
    start_unix_ms: float | None = None


@dataclass(frozen=True)
class Truth:
    """A fleet test's access link as configured (rate, base RTT, drop-tail queue, random loss
    per direction) and, where the emulator counted it during the test, the packets that arrived
    at and were dropped on the download direction (server to client)."""

    rate_bps: float
    rtt_ms: float
    queue_bytes: int
    loss: float
    down_arrived: int | None = None
    down_dropped: int | None = None
    link_kind: str = "wired"
    up_rate_bps: float | None = None  # when it differs from rate_bps (a cellular trace's up direction)
    down_drop_ms: tuple[float, ...] | None = None  # the emulator's drops of the server's packets (event log)
    protocol: str | None = None  # the HTTP version the client was given (a page test: what Chromium was allowed)

    @property
    def quic_share(self) -> float | None:
        """The share of requests that should have gone over HTTP/3: 1 for h3, 0 otherwise."""
        return None if self.protocol is None else (1.0 if self.protocol == "h3" else 0.0)

    @property
    def down_loss_rate(self) -> float | None:
        if not self.down_arrived or self.down_dropped is None:
            return None
        return self.down_dropped / self.down_arrived

    @property
    def full_buffer_factor(self) -> float:
        """(RTT + buffer/rate) / RTT: the factor of increase when a drop-tail buffer stays full."""
        return (self.rtt_ms + self.queue_bytes * 8 / self.rate_bps * 1e3) / self.rtt_ms


@dataclass(frozen=True)
class LiveTest:
    token: str
    schema: str
    browser: str
    quic_share: float | None
    idle_rpm: float | None = None
    idle_latency_ms: float | None = None
    directions: Mapping[str, Direction] = field(default_factory=dict)
    connections: tuple[ConnectionLosses, ...] = ()
    truth: Truth | None = None

    @property
    def client_kind(self) -> str:
        """PAGE for the speed-test page's results (a browser), CLI for the wild client's."""
        return PAGE if self.schema == PAGE_SCHEMA else CLI

    def factor(self, direction: str) -> float | None:
        stage = self.directions.get(direction)
        return factor_of_increase(self.idle_rpm, stage.rpm if stage else None)

    @property
    def loss_rate(self) -> float | None:
        """Lost over sent packets of the server's connections (None without qlogs)."""
        sent = sum(c.sent for c in self.connections)
        return sum(c.lost for c in self.connections) / sent if sent else None

    @property
    def spurious_lower_bound(self) -> float | None:
        """For a test with the emulator's count of drops on the download link: the share of the
        server's declared losses that cannot have been drops, max(0, lost - dropped) / lost.
        A lower bound on 003's spurious rate (Fig. 7.6), since some drops hit packets the server
        does not track (acknowledgements, other flows); None without losses or truth."""
        lost = sum(c.lost for c in self.connections)
        if not lost or self.truth is None or self.truth.down_dropped is None:
            return None
        return max(0, lost - self.truth.down_dropped) / lost

    @property
    def burst_sizes(self) -> list[int]:
        return [size for c in self.connections if c.lost and c.threshold_ms is not None
                for size in bursts(c.lost_sent_ms, c.threshold_ms)]

    @property
    def link_burst_sizes(self) -> list[int] | None:
        """The server's losses of all the test's connections on one clock, grouped into bursts by
        the same rule and threshold as `true_burst_sizes`: what the download link's drops are
        compared with (one overflow of the shared drop-tail queue hits several connections at
        once; counted per connection, as Fig. 7.5 and 003 do, it is several bursts). None when a
        connection with losses has no reference time or no threshold is known."""
        dated = [(c.start_unix_ms, c.lost_sent_ms) for c in self.connections if c.lost]
        if any(start is None for start, _ in dated):
            return None
        threshold = _median([c.threshold_ms for c in self.connections if c.threshold_ms is not None])
        if threshold is None:
            return None if dated else []
        # Relative times: bursts depend only on the spacing, and Unix ms would lose precision.
        origin = min((start for start, _ in dated if start is not None), default=0.0)
        return bursts(sorted(start - origin + t for start, times in dated if start is not None for t in times),
                      threshold)

    @property
    def true_burst_sizes(self) -> list[int] | None:
        """The emulator's drops on the download link grouped into bursts by the same rule (003
        annex C) and threshold (the median of the server's connections'); None without the
        event log's drops, or without a threshold when there were drops."""
        if self.truth is None or self.truth.down_drop_ms is None:
            return None
        thresholds = [c.threshold_ms for c in self.connections if c.threshold_ms is not None]
        if not self.truth.down_drop_ms:
            return []
        threshold = _median(thresholds)
        return None if threshold is None else bursts(self.truth.down_drop_ms, threshold)


def finite(value: Any) -> float | None:
    """A finite number as float; anything else (strings, booleans, NaN) is no measurement."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def factor_of_increase(idle_rpm: float | None, loaded_rpm: float | None) -> float | None:
    """003 §7.2: R_U / R_L, unloaded over loaded responsiveness (both RPM): how many times the
    latency grew under load. None when either is missing or not positive."""
    if idle_rpm is None or loaded_rpm is None or idle_rpm <= 0 or loaded_rpm <= 0:
        return None
    return idle_rpm / loaded_rpm


_BROWSERS = (  # order matters: Edge and Opera say Chrome too, Chrome says Safari
    ("Edge", re.compile(r"\bEdg(e|A|iOS)?/")), ("Opera", re.compile(r"\bOPR/")),
    ("Firefox", re.compile(r"\bFirefox/")), ("Chrome", re.compile(r"\b(HeadlessChrome|Chrome|Chromium|CriOS)/")),
    ("Safari", re.compile(r"\bVersion/[\d.]+.*\bSafari/")),
)
_EMBEDDED = re.compile(r"\b(FBAN|FBAV|Instagram|LinkedInApp|Twitter)\b")


def browser_family(user_agent: str | None) -> str:
    """The browser family of a User-Agent (003 Fig. 7.1b groups by browser); apps' embedded
    browsers (003: LinkedIn, Instagram, Twitter) are 'embedded', anything else 'other'."""
    if not user_agent:
        return "unknown"
    if _EMBEDDED.search(user_agent):
        return "embedded"
    for name, pattern in _BROWSERS:
        if pattern.search(user_agent):
            return name
    return "other"


def quic_share(result: Mapping[str, Any]) -> float | None:
    """The share of a test's requests over HTTP/3: from the page's `protocols` counts (Resource
    Timing's nextHopProtocol), else 1 or 0 from the test's one `protocol` (the CLI)."""
    counts = result.get("protocols")
    if isinstance(counts, Mapping):
        numbers = {k: v for k, v in counts.items() if finite(v) is not None and v >= 0}
        total = sum(numbers.values())
        if total > 0:
            return sum(v for k, v in numbers.items() if str(k).startswith("h3")) / total
    protocol = result.get("protocol")
    return (1.0 if protocol == "h3" else 0.0) if isinstance(protocol, str) else None


def directions_of(result: Mapping[str, Any]) -> dict[str, Direction]:
    stages = result.get("directions")
    out: dict[str, Direction] = {}
    for direction in DIRECTIONS:
        stage = stages.get(direction) if isinstance(stages, Mapping) else None
        if isinstance(stage, Mapping):
            out[direction] = Direction(finite(stage.get("capacity_bps")), finite(stage.get("rpm")),
                                       finite(stage.get("loaded_latency_ms")))
    return out


def connection_losses(trace: QlogTrace) -> ConnectionLosses:
    """Packets sent and lost of one qlog, the lost ones dated when they were sent (as
    docs/analysis.md's bursts; 003's listing dates them at detection), and 003's threshold."""
    sent_at: dict[tuple[Any, Any], float] = {}
    for event in trace.named("transport:packet_sent"):
        header = header_of(event)
        sent_at[(header.get("packet_type"), header.get("packet_number"))] = event.time_ms
    lost_times = []
    lost = 0
    for event in trace.named("recovery:packet_lost"):
        header = header_of(event)
        lost += 1
        lost_times.append(sent_at.get((header.get("packet_type"), header.get("packet_number")), event.time_ms))
    srtt = rttvar = None
    for event in trace.named("recovery:metrics_updated"):
        srtt = finite(event.data.get("smoothed_rtt")) or srtt
        rttvar = finite(event.data.get("rtt_variance")) or rttvar
    # quinn writes RTTs in seconds (docs/analysis.md)
    threshold = (srtt + (rttvar or 0.0)) * 1e3 if srtt is not None else None
    start = trace.start_unix_ns
    return ConnectionLosses(len(sent_at), lost, tuple(sorted(lost_times)), threshold,
                            None if start is None else start / 1e6)


def without_outliers(points: Sequence[tuple[float, float]], limit: float = Z_SCORE_LIMIT) -> list[tuple[float, float]]:
    """The points whose z-score is at most `limit` in both coordinates (003 §7.3). With fewer
    than three points, or a coordinate without spread, nothing is an outlier in it."""
    if len(points) < 3:
        return list(points)
    keep = [True] * len(points)
    for axis in (0, 1):
        values = [p[axis] for p in points]
        mean, sd = statistics.fmean(values), statistics.pstdev(values)
        if sd > 0:
            keep = [k and abs(v - mean) / sd <= limit for k, v in zip(keep, values, strict=True)]
    return [p for p, k in zip(points, keep, strict=True) if k]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _share(values: Sequence[Any], predicate: Any) -> float | None:
    return sum(1 for v in values if predicate(v)) / len(values) if values else None


def factors(tests: Sequence[LiveTest], direction: str) -> list[float]:
    return [f for t in tests if (f := t.factor(direction)) is not None]


def summary(tests: Sequence[LiveTest]) -> dict[str, Any]:
    """The medians and shares of ch. 7, under the keys of SEED_003 where 003 gives the number."""
    out: dict[str, Any] = {"tests": len(tests)}
    all_factors: list[float] = []
    for direction in DIRECTIONS:
        values = factors(tests, direction)
        all_factors += values
        out[f"n_factor_{direction}"] = len(values)
        out[f"median_factor_{direction}"] = _median(values)
        out[f"share_factor_above_5_{direction}"] = _share(values, lambda f: f > HIGH_FACTOR)
    out["share_factor_above_5"] = _share(all_factors, lambda f: f > HIGH_FACTOR)
    rates = [r for t in tests if (r := t.loss_rate) is not None]
    out["n_loss"] = len(rates)
    out["median_loss_pct"] = None if not rates else 100 * statistics.median(rates)
    out["share_loss_below_1pct"] = _share(rates, lambda r: r < 0.01)
    out["share_no_loss"] = _share(rates, lambda r: r == 0)
    out["max_loss_pct"] = 100 * max(rates) if rates else None
    sizes = [s for t in tests for s in t.burst_sizes]
    out["bursts"] = len(sizes)
    out["share_single_loss_bursts"] = _share(sizes, lambda s: s == 1)
    out["share_bursts_below_10"] = _share(sizes, lambda s: s < 10)
    spurious = [s for t in tests if (s := t.spurious_lower_bound) is not None]
    out["n_spurious"] = len(spurious)
    out["share_tests_spurious"] = _share(spurious, lambda s: s > 0)
    out["max_spurious_lower_bound"] = max(spurious) if spurious else None
    shares = [s for t in tests if (s := t.quic_share) is not None]
    out["share_tests_all_h3"] = _share(shares, lambda s: s >= 0.99)
    out["share_tests_no_h3"] = _share(shares, lambda s: s <= 0.01)
    return out


def fig_7_1_tests(tests: Sequence[LiveTest]) -> list[LiveTest]:
    """The tests Fig. 7.1 is drawn from: the page's (a browser's choice of protocol, read from its
    Resource Timing) when the store has any, else all (a CLI test's protocol is its user's)."""
    pages = [t for t in tests if t.client_kind == PAGE]
    return pages or list(tests)


def quic_usage_by_browser(tests: Sequence[LiveTest]) -> dict[str, dict[str, int]]:
    """Per browser family: tests with no HTTP/3 request, some, and only HTTP/3 (Fig. 7.1b)."""
    out: dict[str, dict[str, int]] = {}
    for t in tests:
        if t.quic_share is None:
            continue
        kind = "none" if t.quic_share <= 0.01 else "all" if t.quic_share >= 0.99 else "some"
        counts = out.setdefault(t.browser, {"none": 0, "some": 0, "all": 0})
        counts[kind] += 1
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class Recovery:
    """One metric recovered against its truth over the tests that have both."""

    metric: str
    unit: str
    pairs: tuple[tuple[float, float], ...]  # (true, recovered)
    how: str

    @property
    def errors(self) -> list[float]:
        return [r - t for t, r in self.pairs]

    @property
    def relative_errors(self) -> list[float]:
        return [(r - t) / t for t, r in self.pairs if t != 0]

    def stats(self) -> dict[str, float | int | None]:
        errors, relative = self.errors, self.relative_errors
        return {"n": len(self.pairs), "median_error": _median(errors),
                "median_abs_error": _median([abs(e) for e in errors]),
                "median_relative_error": _median(relative),
                "p90_abs_relative_error": _quantile([abs(e) for e in relative], 0.9)}


def _quantile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def recovered_vs_true(tests: Sequence[LiveTest]) -> list[Recovery]:
    """Each metric the analyses recover against what the fleet configured or the emulator counted."""
    rows: dict[str, list[tuple[float, float]]] = {k: [] for k in ("down", "up", "rtt", "loss", "factor", "bursts",
                                                                  "burst_size", "h3")}
    for t in tests:
        truth = t.truth
        if truth is None:
            continue
        for key, direction in (("down", "download"), ("up", "upload")):
            stage = t.directions.get(direction)
            rate = truth.up_rate_bps if key == "up" and truth.up_rate_bps is not None else truth.rate_bps
            if stage and stage.capacity_bps is not None:
                rows[key].append((rate / 1e6, stage.capacity_bps / 1e6))
        if t.idle_latency_ms is not None:
            rows["rtt"].append((truth.rtt_ms, t.idle_latency_ms))
        if truth.down_loss_rate is not None and t.loss_rate is not None:
            rows["loss"].append((100 * truth.down_loss_rate, 100 * t.loss_rate))
        stage = t.directions.get("download")
        if stage and stage.loaded_latency_ms is not None and t.idle_latency_ms:
            rows["factor"].append((truth.full_buffer_factor, stage.loaded_latency_ms / t.idle_latency_ms))
        if truth.quic_share is not None and t.quic_share is not None:
            rows["h3"].append((100 * truth.quic_share, 100 * t.quic_share))
        true_bursts = t.true_burst_sizes
        recovered = t.link_burst_sizes
        if true_bursts is not None and recovered is not None and t.connections:
            rows["bursts"].append((len(true_bursts), len(recovered)))
            if true_bursts and recovered:
                rows["burst_size"].append((sum(true_bursts) / len(true_bursts), sum(recovered) / len(recovered)))
    return [
        Recovery("download capacity", "Mbit/s", tuple(rows["down"]), "capacity_bps against the link's rate (a cellular trace's mean over the test)"),
        Recovery("upload capacity", "Mbit/s", tuple(rows["up"]), "capacity_bps against the link's rate (a cellular trace's mean over the test)"),
        Recovery("base RTT (R_U)", "ms", tuple(rows["rtt"]), "idle latency against the configured RTT"),
        Recovery("download loss rate", "%", tuple(rows["loss"]),
                 "server qlogs' lost/sent against the emulator's drops/arrivals on the download link"),
        Recovery("download latency increase", "x", tuple(rows["factor"]),
                 "loaded/idle latency against (RTT + buffer/rate)/RTT, a full drop-tail buffer"),
        Recovery("download loss bursts", "bursts", tuple(rows["bursts"]),
                 "bursts of the server qlogs' losses, all connections on one clock, against those of the "
                 "emulator's drops on the download link (event log), 003 annex C's rule and threshold for both"),
        Recovery("mean download burst size", "losses", tuple(rows["burst_size"]),
                 "the same bursts' mean size, tests with bursts on both sides"),
        Recovery("requests over HTTP/3 (Fig. 7.1)", "%", tuple(rows["h3"]),
                 "the page's Resource Timing protocols (a CLI test: its protocol) against the protocol the client "
                 "was given (a page test: QUIC forced or disabled in Chromium)"),
    ]


def client_group(test: LiveTest) -> str:
    """A test's client kind with the protocol it was given (`page h3`, `cli h2`; the kind alone
    without a truth's protocol): over TCP a probe on a loaded connection also waits behind the
    server's send buffer, which the network's truth does not hold, so the two differ."""
    protocol = test.truth.protocol if test.truth is not None else None
    return f"{test.client_kind} {protocol}" if protocol else test.client_kind


def recovered_vs_true_by_client_and_link(tests: Sequence[LiveTest]) -> dict[tuple[str, str], list[Recovery]]:
    """recovered_vs_true per client group (`client_group`: page before CLI, h3 before h2) and,
    within it, access-link kind: the page measures with a browser's self probes only and its own
    timers, so its errors are its own."""
    groups = sorted({client_group(t) for t in tests},
                    key=lambda g: (g.split(" ")[0] != PAGE, g.split(" ")[-1] != "h3", g))
    out: dict[tuple[str, str], list[Recovery]] = {}
    for group in groups:
        for link, recoveries in recovered_vs_true_by_link([t for t in tests if client_group(t) == group]).items():
            out[(group, link)] = recoveries
    return out


def recovered_vs_true_by_link(tests: Sequence[LiveTest]) -> dict[str, list[Recovery]]:
    """recovered_vs_true per access-link kind of the fleet (wired, cellular, wifi), in that order."""
    order = {"wired": 0, "cellular": 1, "wifi": 2}
    kinds = sorted({t.truth.link_kind for t in tests if t.truth is not None}, key=lambda k: (order.get(k, 3), k))
    return {kind: recovered_vs_true([t for t in tests if t.truth is not None and t.truth.link_kind == kind])
            for kind in kinds}
