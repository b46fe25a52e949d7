"""A run's fidelity record (docs/store.md, "Fidelity"): how closely the emulator delivered the
conditions it was given. Pure: from the emulator's counters of the run.

The network model is exact by construction (rates, delays, queues and losses follow the
configuration and are tested on a virtual clock); what a real machine adds is lateness: a
packet leaves the emulator a little after the model delivered it, because the loop woke late.
So a run's delay error is its packets' delivery lateness (`delivery_late` in the counters),
its rate and delay per link direction are the configured ones plus that error, and its
random loss is checked against the configured rate with a Clopper-Pearson interval. A run is
flagged when one of these is off by more than a tolerance; flagged runs stay in the store and
the report shows them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from protolab.measure.stats import clopper_pearson

# Tolerances (issue 13): the delay error's 99.9th percentile and maximum.
LATE_P999_LIMIT_US = 1_000.0
LATE_MAX_LIMIT_US = 5_000.0
# Random loss is flagged outside this two-sided interval, with at least this many packets.
LOSS_CONFIDENCE = 0.999
LOSS_MIN_PACKETS = 200


@dataclass
class RunFidelity:
    """The fidelity columns of a run (NULL when the counters do not have them)."""

    late_mean_us: float | None = None
    late_p999_us: float | None = None  # upper bound: the edge of the histogram bucket
    late_max_us: float | None = None
    flags: list[str] = field(default_factory=list)

    @property
    def flags_text(self) -> str | None:
        return "; ".join(self.flags) if self.flags else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def run_fidelity(emulator: Any, links: Iterable[Mapping[str, Any]]) -> RunFidelity:
    """The record from the run's `emulator` counters and its link_counters rows (with
    `link`, `configured_loss_pct`, `arrived_packets`, `dropped_random_loss_packets`)."""
    fid = RunFidelity()
    late = emulator.get("delivery_late") if isinstance(emulator, Mapping) else None
    if isinstance(late, Mapping) and (_number(late.get("packets")) or 0) > 0:
        mean, p999, top = (_number(late.get(k)) for k in ("mean_ns", "p999_ns_at_most", "max_ns"))
        fid.late_mean_us = None if mean is None else mean / 1e3
        fid.late_p999_us = None if p999 is None else p999 / 1e3
        fid.late_max_us = None if top is None else top / 1e3
        if fid.late_p999_us is not None and fid.late_p999_us > LATE_P999_LIMIT_US:
            fid.flags.append(f"delay error p99.9 up to {fid.late_p999_us / 1e3:g} ms (limit {LATE_P999_LIMIT_US / 1e3:g})")
        if fid.late_max_us is not None and fid.late_max_us > LATE_MAX_LIMIT_US:
            fid.flags.append(f"delay error max {fid.late_max_us / 1e3:.1f} ms (limit {LATE_MAX_LIMIT_US / 1e3:g})")
    if isinstance(emulator, Mapping):
        for name, what in (("tx_errors", "packets lost to failed TUN writes"), ("pcap_dropped", "capture records dropped"),
                           ("events_dropped", "event-log records dropped")):
            count = _number(emulator.get(name))
            if count:
                fid.flags.append(f"{int(count)} {what}")
    for row in links:
        arrived = _number(row.get("arrived_packets")) or 0
        if arrived < LOSS_MIN_PACKETS:
            continue
        config = row.get("config")
        loss = config.get("loss") if isinstance(config, Mapping) else None
        if isinstance(loss, Mapping) and loss.get("kind") == "gilbert-elliott":
            continue  # bursty loss: a binomial interval does not apply
        configured = _number(row.get("configured_loss_pct")) or 0.0
        lost = int(_number(row.get("dropped_random_loss_packets")) or 0)
        low, high = clopper_pearson(lost, int(arrived), LOSS_CONFIDENCE)
        if not 100 * low <= configured <= 100 * high:
            fid.flags.append(f"{row.get('link')}: random loss {100 * lost / arrived:.3f}% outside the "
                             f"{100 * LOSS_CONFIDENCE:g}% interval of the configured {configured:g}%")
    return fid
