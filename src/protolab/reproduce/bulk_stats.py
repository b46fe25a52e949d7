"""A bulk transfer's window and RTT statistics from its sender's transport samples (pure: no I/O).

004 ch. 9 (Figs. 18-22) reads Cubic's window over time: how deep a loss cuts it (the backoff
factor), how long it takes to come back, how smooth the curve is. 003 §6.2 (Figs. 6.3-6.6) reads
per controller the share of the link a transfer used and the RTT percentiles it saw. These are
those numbers per run:

- `cwnd_kb`, `cwnd_cv`: the time average of the window and its coefficient of variation (the
  "smoothness" of 004 §9), on a 10 ms grid from the window's first fall on, so slow start's
  ramp does not count as variation;
- `window_kept`: the median, over the window's falls, of the window after a fall over the window
  before it (a fall: consecutive decreasing samples, from the local maximum to the local
  minimum); 1.0 when the window never falls (004 Fig. 19: backoff factor 1);
- `rtt_mean_ms`, `rtt_median_ms`, `rtt_p80_ms`, `rtt_p90_ms`: over the sender's RTT samples
  (003 Fig. 6.4's four metrics), and `rtt_inflation`, the median over the configured RTT (what
  the queue adds, comparable across links).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from protolab.reproduce.windows import GRID_NS, summed_window_timeline

_FIXED_SHARE = re.compile(r"^fixed:rate=(\d+(?:\.\d+)?)%$")


def window_falls(cwnds: Sequence[float]) -> list[float]:
    """Per fall of the window (a run of decreasing samples), the window at its bottom over the
    window at its top."""
    falls = []
    top: float | None = None
    for previous, current in zip(cwnds, cwnds[1:], strict=False):
        if current < previous:
            top = previous if top is None else top
        elif top is not None:
            falls.append(previous / top)
            top = None
    if top is not None and cwnds:
        falls.append(cwnds[-1] / top)
    return [f for f in falls if math.isfinite(f)]


def window_stats(samples: Iterable[tuple[int, float]]) -> dict[str, float | None]:
    """`cwnd_kb`, `cwnd_cv` and `window_kept` of one connection's (t_unix_ns, cwnd_bytes) samples
    (the module says how); None where there are no positive samples."""
    ordered = sorted((t, v) for t, v in samples if v is not None and v > 0)
    empty: dict[str, float | None] = {"cwnd_kb": None, "cwnd_cv": None, "window_kept": None}
    if len(ordered) < 2:
        return empty
    cwnds = [v for _, v in ordered]
    falls = window_falls(cwnds)
    first_fall = next((i for i in range(1, len(cwnds)) if cwnds[i] < cwnds[i - 1]), 0)
    start = ordered[max(first_fall - 1, 0)][0]
    _, timeline = summed_window_timeline({0: ordered}, start, ordered[-1][0] + 1, GRID_NS)
    if len(timeline) == 0 or timeline.mean() <= 0:
        return {**empty, "window_kept": float(np.median(falls)) if falls else 1.0}
    mean = float(timeline.mean())
    return {"cwnd_kb": mean / 1000, "cwnd_cv": float(timeline.std()) / mean,
            "window_kept": float(np.median(falls)) if falls else 1.0}


def rtt_stats(rtts_us: Iterable[float], base_rtt_ms: float | None = None) -> dict[str, float | None]:
    """Mean, median, 80th and 90th percentile of the RTT samples, ms, and `rtt_inflation`, the
    median over the configured `base_rtt_ms` (None without samples or base)."""
    values = np.asarray([r for r in rtts_us if r is not None and r > 0], dtype=float) / 1000
    if values.size == 0:
        return {"rtt_mean_ms": None, "rtt_median_ms": None, "rtt_p80_ms": None, "rtt_p90_ms": None,
                "rtt_inflation": None}
    median = float(np.median(values))
    return {"rtt_mean_ms": float(values.mean()), "rtt_median_ms": median,
            "rtt_p80_ms": float(np.percentile(values, 80)), "rtt_p90_ms": float(np.percentile(values, 90)),
            "rtt_inflation": median / base_rtt_ms if base_rtt_ms else None}


def fixed_rate_share(quic_cc: str | None) -> float | None:
    """The link share a `fixed:rate=N%` controller targets (0.9 for 90%); None for any other."""
    match = _FIXED_SHARE.match(quic_cc or "")
    return float(match.group(1)) / 100 if match else None


def link_use(row: dict[str, Any]) -> dict[str, Any]:
    """`utilization` (goodput over the configured rate), `link` ("10x20": the group of one link
    condition) and, for a fixed-rate sender, `target_share` and `rate_accuracy` (utilization over
    the share it targets: 003 Fig. 6.5's bandwidth accuracy)."""
    bandwidth, rtt, goodput = row.get("bandwidth_mbps"), row.get("rtt_ms"), row.get("goodput_mbps")
    numeric = isinstance(bandwidth, int | float) and isinstance(rtt, int | float)
    utilization = goodput / bandwidth if numeric and bandwidth > 0 and goodput is not None else None
    target = fixed_rate_share(row.get("quic_cc"))
    return {"utilization": utilization, "link": f"{bandwidth:g}x{rtt:g}" if numeric else None,
            "target_share": target,
            "rate_accuracy": utilization / target if utilization is not None and target else None}
