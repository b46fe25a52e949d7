"""The fleet's access-link kinds (issue 23): besides the wired links of the design (rate, RTT,
buffer, loss), a seeded share of tests replay one of the repo's cellular traces from a random
offset (data/traces/cellular, `scenarios.cellular`) or sit behind the emulator's WiFi model with
one of 000's mesh-client profiles (`scenarios.wifi`, `wifi-clients`). Also what the truth of such
a link is (a trace's mean rate over the test, from the trace file; WiFi's configured PHY rate and
aggregation) and the emulator's drops on the download link read from its event log (the true
loss bursts). Pure but for reading the trace files and an event log."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protolab.errors import ProtolabError
from protolab.scenarios.cellular import BITS_PER_OPPORTUNITY, TRACE_PAIRS, TRACES_DIR, trace_summary
from protolab.scenarios.wifi import AGGREGATED_EFFICIENCY, CLIENT_PROFILES

WIRED, CELLULAR, WIFI = "wired", "cellular", "wifi"
# Shares of the fleet's tests on a cellular trace and on the WiFi model; the rest are wired.
CELLULAR_SHARE = 0.2
WIFI_SHARE = 0.2
# The WiFi hop as `wifi-clients` configures it (000 ch. 6: aggregation on everywhere).
WIFI_AMPDU_FRAMES = 64
WIFI_FRAME_ERROR_RATE = 0.05
WIFI_RETRY_LIMIT = 7


@dataclass(frozen=True)
class AccessLink:
    """One test's access-link kind and what it needs beyond the design's RTT, buffer and loss."""

    kind: str = WIRED
    trace: str | None = None  # cellular: a TRACE_PAIRS name
    trace_start_ms: int | None = None  # cellular: where the replay starts (both directions)
    wifi_client: str | None = None  # wifi: a CLIENT_PROFILES name

    def mean_rates_bps(self) -> tuple[float, float] | None:
        """(down, up) capacity the link offers on average: the traces' means over their whole
        files, WiFi's aggregated delivery of its PHY rate less contention; None when wired."""
        if self.kind == CELLULAR and self.trace is not None:
            pair = TRACE_PAIRS[self.trace]
            return (trace_summary(TRACES_DIR / pair.down).mean_mbps * 1e6,
                    trace_summary(TRACES_DIR / pair.up).mean_mbps * 1e6)
        if self.kind == WIFI and self.wifi_client is not None:
            rate = wifi_capacity_bps(self.wifi_client)
            return rate, rate
        return None


def wifi_capacity_bps(client: str) -> float:
    """What the profile's hop delivers, saturated: ~0.9 of the PHY rate (scenarios.wifi), less the
    share of the channel other stations take."""
    profile = CLIENT_PROFILES[client]
    return profile.phy_rate_mbps * 1e6 * AGGREGATED_EFFICIENCY * (1 - profile.contention_probability)


def wifi_params(client: str) -> dict[str, Any]:
    profile = CLIENT_PROFILES[client]
    return {"phy_rate_bps": round(profile.phy_rate_mbps * 1e6), "max_ampdu_frames": WIFI_AMPDU_FRAMES,
            "frame_error_rate": WIFI_FRAME_ERROR_RATE, "retry_limit": WIFI_RETRY_LIMIT,
            "contention_probability": profile.contention_probability}


def draw_access_links(n: int, seed: int) -> list[AccessLink]:
    """N tests' access-link kinds from the seed (a stream of its own, so the wired design's draws
    stay those of a fleet without kinds): a CELLULAR_SHARE on a trace pair and random offset, a
    WIFI_SHARE on a mesh-client profile, the rest wired."""
    import numpy as np

    rng = np.random.default_rng([seed, 23])
    traces, clients = sorted(TRACE_PAIRS), sorted(CLIENT_PROFILES)
    out = []
    for _ in range(n):
        u = float(rng.random())
        if u < CELLULAR_SHARE:
            name = traces[int(rng.integers(len(traces)))]
            pair = TRACE_PAIRS[name]
            period = min(trace_summary(TRACES_DIR / pair.down).period_ms, trace_summary(TRACES_DIR / pair.up).period_ms)
            out.append(AccessLink(CELLULAR, trace=name, trace_start_ms=int(rng.integers(period))))
        elif u < CELLULAR_SHARE + WIFI_SHARE:
            out.append(AccessLink(WIFI, wifi_client=clients[int(rng.integers(len(clients)))]))
        else:
            out.append(AccessLink())
    return out


def trace_window_rate_bps(times_ms: Sequence[int], period_ms: int, start_ms: int, duration_ms: float) -> float:
    """The mean rate a Mahimahi trace (its delivery opportunities' times, one 1500-byte packet each,
    looped every `period_ms`) offers over [start, start + duration), the replay wrapping as the
    emulator's does (pure)."""
    if duration_ms <= 0 or period_ms <= 0:
        raise ValueError("a trace window needs a positive duration and period")
    import numpy as np

    # The replay's k-th loop delivers at k*period + t for every t of the file: count those in
    # (start, start + duration] per t.
    times = np.asarray(times_ms, dtype=float)
    start = float(start_ms % period_ms)
    count = int(np.sum(np.floor((start + duration_ms - times) / period_ms) - np.floor((start - times) / period_ms)))
    return count * BITS_PER_OPPORTUNITY / (duration_ms / 1e3)


def trace_times(path: Path) -> list[int]:
    try:
        return [int(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise ProtolabError(f"{path}: cannot read the trace ({exc})") from None


def link_settings(link: AccessLink, *, rate_bps: int, rtt_ms: float, queue_bytes: int, loss: float,
                  up_queue_bytes: int | None = None) -> dict[str, dict[str, Any]]:
    """The emulator's parameters (`Lab.set_link`) of client.down and client.up for one test. Only
    the link's transmitter is named (a rate, a trace or WiFi), so a change drops the previous one."""
    common: dict[str, Any] = {"delay_ns": round(rtt_ms / 2 * 1e6),
                              "loss": {"kind": "bernoulli", "p": loss} if loss > 0 else None}
    queues = {"down": queue_bytes, "up": up_queue_bytes or queue_bytes}
    out = {}
    for side in ("down", "up"):
        transmitter: dict[str, Any]
        if link.kind == CELLULAR and link.trace is not None:
            pair = TRACE_PAIRS[link.trace]
            transmitter = {"trace": str(TRACES_DIR / (pair.down if side == "down" else pair.up)),
                           "trace_start_ns": (link.trace_start_ms or 0) * 1_000_000}
        elif link.kind == WIFI and link.wifi_client is not None:
            transmitter = {"wifi": wifi_params(link.wifi_client)}
        else:
            transmitter = {"rate_bps": rate_bps}
        out[f"client.{side}"] = {**transmitter, **common, "queue": {"kind": "droptail", "bytes": queues[side]}}
    return out


def download_drops_ms(lines: Iterable[str], server_address: str, origin_ns: int) -> list[float]:
    """From the emulator's event log (docs/control.md, NDJSON): the times (ms after `origin_ns`)
    at which client.down dropped a UDP packet the server sent, in order: the true losses of the
    server's QUIC connections. Lines that are not drops are skipped unparsed (the log is large)."""
    out = []
    for line in lines:
        if '"drop"' not in line or "client.down" not in line:
            continue
        event = json.loads(line)
        if (event.get("ev") == "drop" and event.get("link") == "client.down" and event.get("src") == server_address
                and event.get("proto") == 17):
            out.append(round((int(event["t"]) - origin_ns) / 1e6, 3))
    return sorted(out)
