"""Congestion windows over a page load, from transport samples (pure: no I/O).

001 Fig. 3 compares the window each protocol keeps during a page load under loss, H1's
connections summed (001 §IV-E: "the sum of the cwnd sizes of all individual connections").
Here every connection (and MPTCP subflow) holds its last sampled window from its first sample
to its last; the sum over them is taken on a regular grid across the load and averaged, so a
connection that is open for a tenth of the load counts for a tenth.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

import numpy as np

GRID_NS = 10_000_000  # 10 ms: the samplers' default interval


def summed_window_timeline(samples: Mapping[Hashable, Iterable[tuple[int, float]]], start_ns: int, end_ns: int,
                           step_ns: int = GRID_NS) -> tuple[np.ndarray, np.ndarray]:
    """(times since `start_ns` in s, summed window in bytes) on a grid of `step_ns` over
    [start_ns, end_ns). `samples` maps a connection (or subflow) to its (t_unix_ns, cwnd_bytes)
    samples; between its first and last sample a connection holds its latest value, outside
    them it counts 0."""
    if end_ns <= start_ns or step_ns <= 0:
        return np.empty(0), np.empty(0)
    grid = np.arange(start_ns, end_ns, step_ns, dtype=np.int64)
    total = np.zeros(len(grid))
    for points in samples.values():
        ordered = sorted(points)
        if not ordered:
            continue
        times = np.asarray([t for t, _ in ordered], dtype=np.int64)
        values = np.asarray([v for _, v in ordered], dtype=float)
        index = np.searchsorted(times, grid, side="right") - 1
        alive = (index >= 0) & (grid <= times[-1])
        total[alive] += values[index[alive]]
    return (grid - start_ns) / 1e9, total


def mean_summed_window(samples: Mapping[Hashable, Iterable[tuple[int, float]]], start_ns: int, end_ns: int,
                       step_ns: int = GRID_NS) -> float | None:
    """The time average of the summed window over [start_ns, end_ns), bytes; None without a
    grid point or a sample inside it."""
    _, total = summed_window_timeline(samples, start_ns, end_ns, step_ns)
    if len(total) == 0 or not total.any():
        return None
    return float(total.mean())


def backoff_factors(samples: Iterable[tuple[int, float, float | None]]) -> list[float]:
    """At each window reduction of one connection, the new slow-start threshold over the window
    just before it (Cubic: 0.7; the gquic39 profile, Cubic emulating two connections: 0.85).
    `samples` are (t_unix_ns, cwnd, ssthresh) in one unit (TCP: segments, QUIC: bytes); a
    reduction is a sample whose ssthresh is set anew below the previous sample's window."""
    factors = []
    previous_cwnd: float | None = None
    previous_ssthresh: float | None = None
    for _, cwnd, ssthresh in sorted(samples, key=lambda s: s[0]):
        if (ssthresh is not None and ssthresh != previous_ssthresh and previous_cwnd
                and 0 < ssthresh < previous_cwnd):
            factors.append(ssthresh / previous_cwnd)
        previous_cwnd, previous_ssthresh = cwnd, ssthresh if ssthresh is not None else previous_ssthresh
    return factors
