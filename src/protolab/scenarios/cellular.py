"""002 ch. 6: page loads over a cellular link replayed from Mahimahi delivery traces."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from protolab.errors import ProtolabError
from protolab.lab import dumbbell, host, ideal_link, ms_to_ns
from protolab.lab.binary import REPO_ROOT
from protolab.scenarios.base import (
    BULK_SERVER_ADDRESS,
    CLIENT,
    CLIENT_ADDRESS,
    SERVER,
    Condition,
    Scenario,
    loss_model,
)
from protolab.scenarios.builtin import FIVE_PAGES
from protolab.scenarios.workloads import BULK_TRANSFERS, PAGE_LOADS, Workload

TRACES_DIR = REPO_ROOT / "data" / "traces" / "cellular"
NS_PER_MS = 1_000_000
BITS_PER_OPPORTUNITY = 1500 * 8  # a Mahimahi delivery opportunity carries one 1500-byte packet


@dataclass(frozen=True)
class TracePair:
    """The down (network -> phone) and up traces of one recording (data/traces/cellular)."""

    down: str
    up: str
    recording: str


# The `trace` axis. 002 ch. 6 used Mahimahi's Verizon LTE (19.1 Mbit/s down, 9.1 up) and AT&T
# LTE (6.7 down, 1.1 up) traces; data/traces/cellular/PROVENANCE.md says which stand-ins these are.
TRACE_PAIRS: dict[str, TracePair] = {
    "verizon": TracePair("Verizon-LTE-short.down", "Verizon-LTE-short.up", "Verizon LTE, 140 s, 5.0 down / 6.0 up"),
    "att": TracePair("ATT-LTE-driving.down", "ATT-LTE-driving.up", "AT&T LTE driving, 786 s, 5.2 down / 0.8 up"),
    "tmobile": TracePair("TMobile-LTE-short.down", "TMobile-LTE-short.up", "T-Mobile LTE, 140 s, 16.7 down / 13.3 up"),
}


@dataclass(frozen=True)
class TraceSummary:
    """What the scenario needs of a trace file: its loop period and mean capacity."""

    period_ms: int
    mean_mbps: float


def summarize_trace(text: str, source: str) -> TraceSummary:
    """Period (the last timestamp) and mean rate of a Mahimahi trace's text (pure)."""
    times = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                times.append(int(line))
            except ValueError:
                raise ProtolabError(f"{source}: line {number}: {line.strip()!r} is not a millisecond timestamp") from None
    if not times or times[-1] <= 0:
        raise ProtolabError(f"{source}: no delivery opportunity after 0 ms")
    return TraceSummary(period_ms=times[-1], mean_mbps=len(times) * BITS_PER_OPPORTUNITY / (times[-1] / 1e3) / 1e6)


@functools.cache
def trace_summary(path: Path) -> TraceSummary:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProtolabError(f"{path}: cannot read the trace ({exc.strerror})") from None
    return summarize_trace(text, str(path))


def trace_start_ms(seed: int | None, pair: str, period_ms: int) -> int:
    """Where a run's replay starts in the trace, drawn uniformly from [0, period) with the run's
    link seed (None: the beginning). Both directions start at the same moment of the recording."""
    if seed is None:
        return 0
    # The pair's name is mixed in so that two traces of one run do not start at the same share.
    rng = np.random.default_rng([seed, *pair.encode()])
    return int(rng.integers(0, period_ms))


class CellularParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trace_start: Literal["seeded", "beginning"] = Field(
        "seeded", description="where each run's replay starts: drawn from the run's link seed (repetitions see "
        "different parts of the trace) or the trace's beginning"
    )
    workload: Literal["page", "bulk"] = Field("page", description="page loads (PLT) or one bulk transfer per run "
                                              "(the link's rate over time, 002 Fig. 6-2)")
    direction: Literal["download", "upload"] = Field("download", description="bulk: download (server sends) or upload")
    duration_s: float = Field(20.0, gt=0, le=3600, description="bulk: seconds per transfer")
    interval_ms: int = Field(1000, ge=1, le=60_000, description="bulk: interval of the transfer's own log")


class Cellular(Scenario):
    """002 ch. 6: the client's access link replays a cellular delivery trace in each direction
    (axis `trace`: a down/up pair of data/traces/cellular), with half the minimum RTT each way on
    that link (Mahimahi's LinkShell inside DelayShell) and a drop-tail queue of the buffer axis,
    a BDP taken at the direction's mean trace rate (002 §4.5 sets 1 BDP for every configuration;
    ch. 6 says nothing else). The bandwidth axis must stay "unlimited": the trace sets the rate.
    """

    name = "cellular"
    source = "002 ch. 6"
    description = "trace-driven LTE links (Verizon, AT&T, T-Mobile), min RTT 30/120/300 ms, 1-BDP queue"
    Params = CellularParams
    extra_axes: ClassVar[dict[str, Any]] = {"trace": str}
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": ["unlimited"],
        "rtt_ms": [30, 120, 300],
        "loss_pct": [0],
        "buffer": ["1bdp"],
        "mode": ["h3"],
        "page": FIVE_PAGES,
        "trace": ["verizon", "att"],
    }

    def workload_for(self, params: CellularParams) -> Workload:
        return BULK_TRANSFERS if params.workload == "bulk" else PAGE_LOADS

    def check(self, params: CellularParams, axes: Mapping[str, Sequence[Any]]) -> None:
        for value in axes.get("bandwidth_mbps", []):
            if value != "unlimited":
                raise ValueError(f"axes.bandwidth_mbps: {value!r}: the cellular trace sets the rate; leave it \"unlimited\"")
        for value in axes.get("trace", []):
            if value not in TRACE_PAIRS:
                raise ValueError(f"axes.trace: unknown trace {value!r} (known: {', '.join(TRACE_PAIRS)})")

    def topology(self, lab: str, params: CellularParams, server_addresses: Sequence[str], seed: int) -> dict[str, Any]:
        addresses = list(server_addresses)
        if params.workload == "bulk" and BULK_SERVER_ADDRESS not in addresses:
            addresses.insert(0, BULK_SERVER_ADDRESS)  # where bulk transfers connect
        return dumbbell(lab, [host(CLIENT, "left", [CLIENT_ADDRESS])], [host(SERVER, "right", addresses)],
                        paths=1, seed=seed)

    def links(self, params: CellularParams, condition: Condition) -> dict[str, dict[str, Any]]:
        return self.run_links(params, condition, None)

    def run_links(self, params: CellularParams, condition: Condition, seed: int | None) -> dict[str, dict[str, Any]]:
        pair_name = str(condition.extra("trace"))
        pair = TRACE_PAIRS[pair_name]
        down, up = TRACES_DIR / pair.down, TRACES_DIR / pair.up
        summaries = {side: trace_summary(path) for side, path in (("down", down), ("up", up))}
        period = min(s.period_ms for s in summaries.values())
        start_ms = trace_start_ms(seed if params.trace_start == "seeded" else None, pair_name, period)
        links = {
            f"{CLIENT}.{side}": ideal_link(
                trace=str(path),
                trace_start_ns=start_ms * NS_PER_MS,
                delay_ns=ms_to_ns(condition.rtt_ms / 2),
                loss=loss_model(condition.loss_pct),
                queue_bytes=condition.buffer.bytes_for(summaries[side].mean_mbps, condition.rtt_ms),
            )
            for side, path in (("down", down), ("up", up))
        }
        for name in (f"{SERVER}.up", f"{SERVER}.down", "p0.forward", "p0.reverse"):
            links[name] = ideal_link()
        return links
