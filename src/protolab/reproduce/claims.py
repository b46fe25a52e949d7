"""Claims of a seed figure, checked against measured rows (pure: no I/O).

A claim is an estimate over rows (a median, a ratio of medians, a ratio of two such ratios)
with a bootstrap 95% confidence interval, and the interval the seed's statement expects it in.
The verdict compares the two: *reproduced* when the whole CI lies inside the expected
interval, *not reproduced* when none of it does, *inconclusive* otherwise, *no data* when the
rows do not hold what the claim needs.

Rows are dicts (one per run or per measured item). A filter is a dict of column -> value;
ratios are taken per group (`by`, e.g. the page) and combined by their geometric mean, so a
large page does not outweigh a small one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Row = Mapping[str, Any]
Filter = Mapping[str, Any]

BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 20261125
CONFIDENCE = 0.95

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
NO_DATA = "no data"


def matches(row: Row, where: Filter) -> bool:
    """Whether a row has every value of the filter (numbers compared as floats)."""
    for key, wanted in where.items():
        value = row.get(key)
        if isinstance(wanted, bool) or isinstance(value, bool):
            if value is not wanted:
                return False
        elif isinstance(wanted, int | float):
            if not isinstance(value, int | float) or not math.isclose(float(value), float(wanted)):
                return False
        elif value != wanted:
            return False
    return True


def _values(rows: Sequence[Row], metric: str, where: Filter, by: str | None) -> dict[Any, np.ndarray]:
    """The finite values of `metric` in the rows that match, per group."""
    groups: dict[Any, list[float]] = {}
    for row in rows:
        value = row.get(metric)
        if matches(row, where) and isinstance(value, int | float) and math.isfinite(value):
            groups.setdefault(row.get(by) if by else None, []).append(float(value))
    return {group: np.asarray(values) for group, values in groups.items()}


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap CI, over `groups` groups and `n` values."""

    value: float
    low: float
    high: float
    groups: int
    n: int


def _bootstrap(samples: list[list[np.ndarray]], statistic: Callable[[list[list[float]]], float]) -> Estimate | None:
    """`samples[g][k]`: the values of part k (numerator, denominator...) in group g.
    `statistic` maps per-group, per-part medians to one number."""
    if not samples or any(len(part) == 0 for group in samples for part in group):
        return None
    point = statistic([[float(np.median(part)) for part in group] for group in samples])
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = np.empty(BOOTSTRAP_SAMPLES)
    for i in range(BOOTSTRAP_SAMPLES):
        medians = [[float(np.median(rng.choice(part, size=len(part), replace=True))) for part in group] for group in samples]
        draws[i] = statistic(medians)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Estimate(point, float(low), float(high), len(samples), sum(len(p) for group in samples for p in group))


def _geo_mean(values: list[float]) -> float:
    if any(v <= 0 for v in values):
        return math.nan
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class Median:
    """The median of `metric` over the rows that match `where`."""

    metric: str
    where: Filter

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        groups = _values(rows, self.metric, self.where, None)
        return _bootstrap([[g] for g in groups.values()], lambda m: m[0][0])


@dataclass(frozen=True)
class Ratio:
    """median(metric | num) / median(metric | den), per group `by`, geometric mean over groups
    that have both."""

    metric: str
    num: Filter
    den: Filter
    by: str | None = None

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        num = _values(rows, self.metric, self.num, self.by)
        den = _values(rows, self.metric, self.den, self.by)
        common = sorted((g for g in num if g in den), key=str)
        return _bootstrap([[num[g], den[g]] for g in common], lambda m: _geo_mean([n / d if d else math.nan for n, d in m]))


@dataclass(frozen=True)
class RatioOfRatios:
    """(a / a_base) / (b / b_base): how much more a condition changes one thing than another,
    per group `by`, geometric mean over groups."""

    metric: str
    a: Filter
    a_base: Filter
    b: Filter
    b_base: Filter
    by: str | None = None

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        parts = [_values(rows, self.metric, where, self.by) for where in (self.a, self.a_base, self.b, self.b_base)]
        common = sorted((g for g in parts[0] if all(g in p for p in parts[1:])), key=str)

        def statistic(medians: list[list[float]]) -> float:
            return _geo_mean([(a / ab) / (b / bb) if ab and b and bb else math.nan for a, ab, b, bb in medians])

        return _bootstrap([[p[g] for p in parts] for g in common], statistic)


# ---------------------------------------------------------------------- quantiles of pooled rows
# 002 ch. 6 states some results as a percentile of the PLT distribution over its pages (the 95th).
# A quantile far in the tail gets a distribution-free order-statistic interval: it holds its
# coverage at any n (for continuous values) and says when n is too small to give one.


def quantile_interval(values: np.ndarray, q: float, confidence: float) -> tuple[float, float] | None:
    """[x(l), x(u)] of the sorted values that covers the population's q-quantile with at least
    `confidence` (B = values below the quantile is Binomial(n, q); each tail holds at most
    (1 - confidence) / 2). None when n is too small for such an interval."""
    from scipy.stats import binom  # only here: scipy is slow to import

    x = np.sort(values)
    n = len(x)
    tail = (1 - confidence) / 2
    below = binom.cdf(np.arange(n + 1), n, q)  # below[k] = P(B <= k)
    lows = [rank for rank in range(1, n + 1) if below[rank - 1] <= tail]
    highs = [rank for rank in range(1, n + 1) if 1 - below[rank - 1] <= tail]
    if not lows or not highs:
        return None
    return float(x[max(lows) - 1]), float(x[min(highs) - 1])


@dataclass(frozen=True)
class QuantileRatio:
    """q-quantile(metric | num) / q_den-quantile(metric | den) (q_den: q unless given), each over
    all matching rows pooled (a percentile of the distribution over pages and repetitions, as 002
    Figs. 6-3/6-4 read their CDFs; or a spread, the 90th over the 10th percentile). The interval combines each side's order-statistic interval at confidence
    1 - (1 - CONFIDENCE) / 2 (Bonferroni: the ratio's holds at least CONFIDENCE); with too few
    values for either side it is unbounded (NaN), so the claim is inconclusive."""

    metric: str
    num: Filter
    den: Filter
    q: float
    q_den: float | None = None

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        num = _values(rows, self.metric, self.num, None).get(None)
        den = _values(rows, self.metric, self.den, None).get(None)
        if num is None or den is None:
            return None
        q_den = self.q if self.q_den is None else self.q_den
        num_quantile, den_quantile = float(np.quantile(num, self.q)), float(np.quantile(den, q_den))
        point = num_quantile / den_quantile if den_quantile > 0 else math.nan
        side_confidence = 1 - (1 - CONFIDENCE) / 2
        num_ci, den_ci = quantile_interval(num, self.q, side_confidence), quantile_interval(den, q_den, side_confidence)
        if num_ci is None or den_ci is None or den_ci[1] <= 0:
            low = high = math.nan
        else:
            # A denominator that may be 0 (a stalled second) leaves the ratio unbounded above.
            low, high = num_ci[0] / den_ci[1], num_ci[1] / den_ci[0] if den_ci[0] > 0 else math.inf
        return Estimate(point, low, high, 1, len(num) + len(den))


Estimator = Median | Ratio | RatioOfRatios | QuantileRatio


@dataclass(frozen=True)
class Claim:
    """One statement of a seed, as an estimate expected in [low, high] (None: unbounded)."""

    statement: str
    estimator: Estimator
    low: float | None = None
    high: float | None = None
    paper: str = ""

    def expected(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{self.low:g} .. {self.high:g}"
        if self.low is not None:
            return f"> {self.low:g}"
        if self.high is not None:
            return f"< {self.high:g}"
        return "any"

    def check(self, rows: Sequence[Row]) -> Verdict:
        estimate = self.estimator.estimate(rows)
        if estimate is None or not math.isfinite(estimate.value):
            return Verdict(self, None, NO_DATA)
        low = -math.inf if self.low is None else self.low
        high = math.inf if self.high is None else self.high
        # An unbounded side of the claim constrains nothing, even an unbounded estimate.
        if (self.low is None or low < estimate.low) and (self.high is None or estimate.high < high):
            outcome = REPRODUCED
        elif estimate.high <= low or estimate.low >= high:
            outcome = NOT_REPRODUCED
        else:
            outcome = INCONCLUSIVE
        return Verdict(self, estimate, outcome)


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    estimate: Estimate | None
    outcome: str

    def to_dict(self) -> dict[str, Any]:
        e = self.estimate
        return {
            "statement": self.claim.statement,
            "paper": self.claim.paper,
            "expected": {"low": self.claim.low, "high": self.claim.high},
            "estimate": None if e is None else {"value": e.value, "ci_low": e.low, "ci_high": e.high,
                                                "confidence": CONFIDENCE, "groups": e.groups, "n": e.n},
            "verdict": self.outcome,
        }
