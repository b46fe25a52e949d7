"""Statistics of the report: cell summaries with a distribution-free CI of the median and a
Student-t CI of the mean."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom, t

CI_LEVEL = 0.95


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    q1: float
    q3: float
    ci_low: float | None      # None when n is too small for a CI_LEVEL interval
    ci_high: float | None
    ci_coverage: float | None  # exact coverage of the order-statistic interval
    mean_ci_low: float | None = None   # Student-t interval of the mean; None when n < 2
    mean_ci_high: float | None = None


def median_ci_ranks(n: int, level: float = CI_LEVEL) -> tuple[int, int, float] | None:
    """1-based ranks (l, u) of the order statistics x_(l), x_(u) that bound the median with at
    least `level` probability whatever the distribution (continuous), with u = n + 1 - l and l
    as large as possible; and the exact coverage P(l <= B <= n - l), B ~ Binomial(n, 1/2).
    None when even (x_(1), x_(n)) covers less than `level` (n < 6 at 95%)."""
    if n < 1:
        return None
    best: tuple[int, int, float] | None = None
    for low in range(1, n // 2 + 1):
        coverage = float(binom.cdf(n - low, n, 0.5) - binom.cdf(low - 1, n, 0.5))
        if coverage >= level:
            best = (low, n + 1 - low, coverage)
        else:
            break
    return best


def mean_ci(data: np.ndarray, level: float = CI_LEVEL) -> tuple[float, float] | None:
    """mean +- t(n-1) x s / sqrt(n): the `level` interval of the mean, assuming the mean is about
    normally distributed (few repetitions give wide intervals, as they should). None when n < 2."""
    n = int(data.size)
    if n < 2:
        return None
    half = float(t.ppf(0.5 + level / 2, n - 1)) * float(data.std(ddof=1)) / math.sqrt(n)
    mean = float(data.mean())
    return mean - half, mean + half


def summarize(values: Sequence[float], level: float = CI_LEVEL) -> Summary:
    """n, median, mean, quartiles (linear interpolation), the order-statistic CI of the median and
    the t CI of the mean."""
    data = np.sort(np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float))
    n = int(data.size)
    if n == 0:
        nan = float("nan")
        return Summary(0, nan, nan, nan, nan, None, None, None)
    q1, median, q3 = (float(x) for x in np.percentile(data, [25, 50, 75]))
    ranks = median_ci_ranks(n, level)
    if ranks is None:
        low = high = coverage = None
    else:
        low, high, coverage = float(data[ranks[0] - 1]), float(data[ranks[1] - 1]), ranks[2]
    interval = mean_ci(data, level)
    return Summary(n, median, float(data.mean()), q1, q3, low, high, coverage,
                   interval[0] if interval else None, interval[1] if interval else None)


def median(values: Sequence[float]) -> float:
    data = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.median(data)) if data else float("nan")


def improvement_pct(baseline: float, other: float) -> float:
    """% improvement of `other` over `baseline` (positive: other is faster)."""
    if not (math.isfinite(baseline) and math.isfinite(other)) or baseline <= 0:
        return float("nan")
    return 100.0 * (baseline - other) / baseline


def speedup(baseline: float, other: float) -> float:
    """Ratio baseline / other (above 1: other is faster)."""
    if not (math.isfinite(baseline) and math.isfinite(other)) or other <= 0:
        return float("nan")
    return baseline / other


def ecdf(values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    data = np.sort(np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float))
    return data, np.arange(1, data.size + 1) / max(data.size, 1)
