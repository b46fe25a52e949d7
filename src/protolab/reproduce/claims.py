"""Claims of a seed figure, checked against measured rows (pure: no I/O).

A claim is an estimate over rows (a median, a ratio of medians, a ratio of two such ratios)
with a 95% confidence interval that holds its coverage at small n, and the interval the seed's
statement expects the estimate in. The verdict compares the two: *reproduced* when the whole CI
lies inside the expected interval, *not reproduced* when none of it does, *inconclusive* when it
straddles a bound or when there are fewer values than the estimator's interval needs (each
estimator states its minimum and says why it declines), *no data* when the rows do not hold
what the claim needs. Every verdict carries its reason.

The intervals (docs/reproduce.md, "Claims, estimates and verdicts"; their coverage is checked by
simulation in tests/test_reproduce_stats.py):

- a median: the distribution-free order-statistic interval [x_(k), x_(n+1-k)], whose exact
  coverage is 1 - 2 P(B <= k-1), B ~ Binomial(n, 1/2); 95% needs n >= 6;
- a ratio (or ratio of ratios) over groups (pages): the log of the statistic is a signed sum of
  log medians per group, averaged over the groups. With at least `MIN_GROUPS_FOR_T` groups, a
  Student t-interval on the per-group log statistics (the spread between groups measures the
  noise). With fewer groups, every median of every group gets an order-statistic interval at
  level 0.95^(1/m) (m medians); the statistic is monotone in each median, so the interval made
  of their ends covers with probability >= 0.95 (the rows of different cells are independent).
  That needs 7 values per cell for a ratio over one group, 8 over two; 8 and 9 for a ratio of
  ratios;
- a ratio between two sets of groups (`RatioBetweenSets`: a ratio per page, large pages against
  small ones): Welch's t on the per-group log ratios of the two sets with at least
  `MIN_GROUPS_FOR_T` groups in each, else the order-statistic intervals combined as above;
- a ratio of the cells' means (`statistic="mean"`, for loads that are a lottery by design): the
  t over groups only; fewer groups decline.

Rows are dicts (one per run or per measured item). A filter is a dict of column -> value;
ratios are taken per group (`by`, e.g. the page) and combined by their geometric mean, so a
large page does not outweigh a small one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from scipy import stats

Row = Mapping[str, Any]
Filter = Mapping[str, Any]

CONFIDENCE = 0.95
MIN_GROUPS_FOR_T = 3

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
INCONCLUSIVE_AT_BUDGET = "inconclusive at budget"
NO_DATA = "no data"
NOT_JUDGEABLE = "not judgeable here"


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


@functools.lru_cache(maxsize=1024)
def median_rank(n: int, confidence: float) -> tuple[int, float] | None:
    """The largest k for which [x_(k), x_(n+1-k)] (1-based order statistics of n values) covers
    the median with probability >= `confidence`, and that exact coverage; None when even
    [min, max] falls short (its coverage is 1 - 2^(1-n))."""
    if n < 1:
        return None
    ranks = np.arange(1, (n + 1) // 2 + 1)
    coverage = 1.0 - 2.0 * stats.binom.cdf(ranks - 1, n, 0.5)
    enough = np.flatnonzero(coverage >= confidence)
    if enough.size == 0:
        return None
    k = int(ranks[enough[-1]])
    return k, float(coverage[enough[-1]])


@functools.lru_cache(maxsize=64)
def values_needed(confidence: float) -> int:
    """The fewest values whose order-statistic interval of the median reaches `confidence`."""
    n = 1
    while median_rank(n, confidence) is None:
        n += 1
    return n


def median_interval(values: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """The order-statistic interval of the median at `confidence` (None: too few values)."""
    rank = median_rank(len(values), confidence)
    if rank is None:
        return None
    ordered = np.sort(values)
    return float(ordered[rank[0] - 1]), float(ordered[len(values) - rank[0]])


@functools.lru_cache(maxsize=256)
def _t_quantile(degrees_of_freedom: int) -> float:
    """Student t's quantile for a two-sided `CONFIDENCE` interval."""
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, degrees_of_freedom))


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its 95% CI, over `groups` groups and `n` values. `method` names how
    the CI was made; when there are too few values for it, `low` and `high` are NaN and
    `shortfall` says what is missing."""

    value: float
    low: float
    high: float
    groups: int
    n: int
    method: str = ""
    shortfall: str = ""

    @property
    def has_interval(self) -> bool:
        return not self.shortfall and math.isfinite(self.low) and math.isfinite(self.high)


def _without_interval(value: float, groups: int, n: int, method: str, shortfall: str) -> Estimate:
    return Estimate(value, math.nan, math.nan, groups, n, method, shortfall)


# What a cell's values are summed up by before the ratios: the median (default), or the mean where
# a load's value is a lottery by design (001's ECMP: a connection's path is its hash's, so a cell's
# PLTs fall in two modes and its median flips between them with the count of lucky loads; 001
# reports averages). A mean has no distribution-free interval: it is judged by the t over groups
# only, and declines below MIN_GROUPS_FOR_T groups.
STATISTICS = {"median": np.median, "mean": np.mean}


def _check_statistic(statistic: str) -> None:
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r} (known: {', '.join(STATISTICS)})")


def _centres(samples: list[list[np.ndarray]], statistic: str) -> np.ndarray:
    summary = STATISTICS[statistic]
    return np.array([[float(summary(part)) for part in group] for group in samples])


def _grouped(samples: list[list[np.ndarray]], signs: tuple[int, ...], statistic: str = "median") -> Estimate | None:
    """`samples[g][p]`: the values of part p (numerator, denominator...) in group g. The statistic
    is exp(mean over groups of sum_p signs[p] * log median(part p)) (or of the mean, `statistic`);
    its CI as the module says."""
    if not samples or any(len(part) == 0 for group in samples for part in group):
        return None
    centres = _centres(samples, statistic)
    groups, n = len(samples), sum(len(part) for group in samples for part in group)
    if np.any(centres <= 0):
        return Estimate(math.nan, math.nan, math.nan, groups, n, shortfall=f"a {statistic} <= 0 has no ratio")
    sign = np.asarray(signs, dtype=float)
    per_group = (np.log(centres) * sign).sum(axis=1)
    value = math.exp(float(per_group.mean()))
    if groups >= MIN_GROUPS_FOR_T:
        half = _t_quantile(groups - 1) * float(per_group.std(ddof=1)) / math.sqrt(groups)
        centre = float(per_group.mean())
        return Estimate(value, math.exp(centre - half), math.exp(centre + half), groups, n, f"t over {groups} groups")
    if statistic != "median":
        return _without_interval(value, groups, n, f"t over {groups} groups",
                                 f"a ratio of {statistic}s needs {MIN_GROUPS_FOR_T} groups for its t-interval")
    medians_count = centres.size
    level = CONFIDENCE ** (1 / medians_count)
    method = f"order statistics of {medians_count} medians at {level:.2%} each"
    log_low = log_high = 0.0
    for group in samples:
        for part, s in zip(group, signs, strict=True):
            bound = median_interval(part, level)
            if bound is None:
                fewest = min(len(part) for group in samples for part in group)
                return _without_interval(value, groups, n, method,
                                         f"n = {fewest} < {values_needed(level)} values per cell needed for a 95% "
                                         f"interval of {medians_count} medians ({groups} group{'s' if groups > 1 else ''}"
                                         f" < {MIN_GROUPS_FOR_T} for a t-interval over groups)")
            low, high = bound
            if low <= 0:
                return _without_interval(value, groups, n, method, "an interval of a median reaches <= 0")
            log_low += math.log(low) if s > 0 else -math.log(high)
            log_high += math.log(high) if s > 0 else -math.log(low)
    return Estimate(value, math.exp(log_low / groups), math.exp(log_high / groups), groups, n, method)


@dataclass(frozen=True)
class Median:
    """The median of `metric` over the rows that match `where`; its CI is the order-statistic
    interval (needs 6 values for 95%)."""

    metric: str
    where: Filter

    def minimum(self) -> str:
        return f"{values_needed(CONFIDENCE)} values"

    def filters(self) -> list[Filter]:
        return [self.where]

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        values = _values(rows, self.metric, self.where, None).get(None)
        if values is None or len(values) == 0:
            return None
        value, method = float(np.median(values)), "order statistics"
        interval = median_interval(values, CONFIDENCE)
        if interval is None:
            return _without_interval(value, 1, len(values), method,
                                     f"n = {len(values)} < {values_needed(CONFIDENCE)} values needed for a 95% "
                                     "interval of a median")
        return Estimate(value, interval[0], interval[1], 1, len(values), method)


def _grouped_minimum(parts: int) -> str:
    return (f"{MIN_GROUPS_FOR_T} groups (t over groups), or with fewer groups "
            f"{values_needed(CONFIDENCE ** (1 / parts))} values per cell for one group and "
            f"{values_needed(CONFIDENCE ** (1 / (2 * parts)))} for two")


@dataclass(frozen=True)
class Ratio:
    """median(metric | num) / median(metric | den), per group `by`, geometric mean over groups
    that have both (`statistic` "mean": the cells' means instead, see STATISTICS)."""

    metric: str
    num: Filter
    den: Filter
    by: str | None = None
    statistic: str = "median"

    def __post_init__(self) -> None:
        _check_statistic(self.statistic)

    def minimum(self) -> str:
        return _grouped_minimum(2) if self.statistic == "median" else f"{MIN_GROUPS_FOR_T} groups"

    def filters(self) -> list[Filter]:
        return [self.num, self.den]

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        num = _values(rows, self.metric, self.num, self.by)
        den = _values(rows, self.metric, self.den, self.by)
        common = sorted((g for g in num if g in den), key=str)
        return _grouped([[num[g], den[g]] for g in common], (1, -1), self.statistic)


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

    def minimum(self) -> str:
        return _grouped_minimum(4)

    def filters(self) -> list[Filter]:
        return [self.a, self.a_base, self.b, self.b_base]

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        parts = [_values(rows, self.metric, where, self.by) for where in (self.a, self.a_base, self.b, self.b_base)]
        common = sorted((g for g in parts[0] if all(g in p for p in parts[1:])), key=str)
        return _grouped([[p[g] for p in parts] for g in common], (1, -1, -1, 1))


@dataclass(frozen=True)
class RatioBetweenSets:
    """How much larger a per-group ratio, median(metric | num) / median(metric | den) in each group
    `by`, is over the groups of one set (rows matching `a`) than over those of another (`b`): the
    geometric mean of set a's ratios over the one of set b's (001: H2-Parallel's speed-up on the
    large pages over the one on the small pages, a page a group). A page is in one set only, so
    the unit is the group: with at least `MIN_GROUPS_FOR_T` groups in each set, a Welch t-interval
    on the two sets' per-group log ratios; with fewer, every median's order-statistic interval at
    0.95^(1/m), combined as for `Ratio`. (A `RatioOfRatios` without groups pooled the loads of all
    pages of a set into one median, which mixes pages of different sizes: an interval as wide as
    the pages are different.)"""

    metric: str
    num: Filter
    den: Filter
    a: Filter
    b: Filter
    by: str = "page"
    statistic: str = "median"  # or "mean" (STATISTICS): then Welch's t only

    def __post_init__(self) -> None:
        _check_statistic(self.statistic)

    def minimum(self) -> str:
        if self.statistic != "median":
            return f"{MIN_GROUPS_FOR_T} groups in each set (Welch t)"
        return (f"{MIN_GROUPS_FOR_T} groups in each set (Welch t), or with fewer "
                f"{values_needed(CONFIDENCE ** (1 / 4))} values per cell for one group in each")

    def filters(self) -> list[Filter]:
        return [{**self.num, **self.a}, {**self.den, **self.a}, {**self.num, **self.b}, {**self.den, **self.b}]

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        sides: list[list[tuple[np.ndarray, np.ndarray]]] = []
        for where in (self.a, self.b):
            num = _values(rows, self.metric, {**self.num, **where}, self.by)
            den = _values(rows, self.metric, {**self.den, **where}, self.by)
            sides.append([(num[g], den[g]) for g in sorted((g for g in num if g in den), key=str)])
        if not sides[0] or not sides[1]:
            return None
        groups = len(sides[0]) + len(sides[1])
        n = sum(len(num) + len(den) for side in sides for num, den in side)
        centres = [_centres([[num, den] for num, den in side], self.statistic) for side in sides]
        if any(np.any(side <= 0) for side in centres):
            return Estimate(math.nan, math.nan, math.nan, groups, n, shortfall=f"a {self.statistic} <= 0 has no ratio")
        logs = [np.log(side[:, 0]) - np.log(side[:, 1]) for side in centres]
        centre = float(logs[0].mean() - logs[1].mean())
        value = math.exp(centre)
        if min(len(logs[0]), len(logs[1])) >= MIN_GROUPS_FOR_T:
            var_a, var_b = (float(side.var(ddof=1)) / len(side) for side in logs)
            se = math.sqrt(var_a + var_b)
            denominator = var_a ** 2 / (len(logs[0]) - 1) + var_b ** 2 / (len(logs[1]) - 1)
            dof = (var_a + var_b) ** 2 / denominator if denominator > 0 else groups - 2
            half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof)) * se
            return Estimate(value, math.exp(centre - half), math.exp(centre + half), groups, n,
                            f"Welch t over {len(logs[0])} + {len(logs[1])} groups")
        if self.statistic != "median":
            return _without_interval(value, groups, n, f"Welch t over {len(logs[0])} + {len(logs[1])} groups",
                                     f"a ratio of {self.statistic}s needs {MIN_GROUPS_FOR_T} groups in each set")
        level = CONFIDENCE ** (1 / (2 * groups))
        method = f"order statistics of {2 * groups} medians at {level:.2%} each"
        bounds: list[list[tuple[float, float]]] = []  # per set, per group: the log ratio's ends
        for side in sides:
            bounds.append([])
            for num, den in side:
                num_bound, den_bound = median_interval(num, level), median_interval(den, level)
                if num_bound is None or den_bound is None:
                    return _without_interval(value, groups, n, method,
                                             f"fewer than {values_needed(level)} values in a cell for a 95% interval "
                                             f"of {2 * groups} medians (< {MIN_GROUPS_FOR_T} groups in a set for Welch's t)")
                if num_bound[0] <= 0 or den_bound[0] <= 0:
                    return _without_interval(value, groups, n, method, "an interval of a median reaches <= 0")
                bounds[-1].append((math.log(num_bound[0]) - math.log(den_bound[1]),
                                   math.log(num_bound[1]) - math.log(den_bound[0])))
        low = np.mean([b[0] for b in bounds[0]]) - np.mean([b[1] for b in bounds[1]])
        high = np.mean([b[1] for b in bounds[0]]) - np.mean([b[0] for b in bounds[1]])
        return Estimate(value, math.exp(float(low)), math.exp(float(high)), groups, n, method)


# ---------------------------------------------------------------------- quantiles of pooled rows
# 002 ch. 6 states some results as a percentile of the PLT distribution over its pages (the 95th).
# A quantile far in the tail gets a distribution-free order-statistic interval, as the median
# does: it holds its coverage at any n (for continuous values) and says when n is too small.


def quantile_interval(values: np.ndarray, q: float, confidence: float) -> tuple[float, float] | None:
    """[x(l), x(u)] of the sorted values that covers the population's q-quantile with at least
    `confidence` (B = values below the quantile is Binomial(n, q); each tail holds at most
    (1 - confidence) / 2). None when n is too small for such an interval."""
    x = np.sort(values)
    n = len(x)
    tail = (1 - confidence) / 2
    below = stats.binom.cdf(np.arange(n + 1), n, q)  # below[k] = P(B <= k)
    lows = [rank for rank in range(1, n + 1) if below[rank - 1] <= tail]
    highs = [rank for rank in range(1, n + 1) if 1 - below[rank - 1] <= tail]
    if not lows or not highs:
        return None
    return float(x[max(lows) - 1]), float(x[min(highs) - 1])


def quantile_values_needed(q: float, confidence: float) -> int:
    """The fewest values whose order-statistic interval of the q-quantile reaches `confidence`:
    both max(q, 1 - q)^n must be at most (1 - confidence) / 2."""
    return math.ceil(math.log((1 - confidence) / 2) / math.log(max(q, 1 - q)))


@dataclass(frozen=True)
class QuantileRatio:
    """q-quantile(metric | num) / q_den-quantile(metric | den) (q_den: q unless given), each over
    all matching rows pooled (a percentile of the distribution over pages and repetitions, as 002
    Figs. 6-3/6-4 read their CDFs; or a spread, the 90th percentile over the median). The
    interval combines each side's order-statistic interval at 1 - (1 - CONFIDENCE) / 2
    (Bonferroni: the ratio's covers with at least CONFIDENCE)."""

    metric: str
    num: Filter
    den: Filter
    q: float
    q_den: float | None = None

    @property
    def _side_confidence(self) -> float:
        return 1 - (1 - CONFIDENCE) / 2

    def minimum(self) -> str:
        quantiles = sorted({self.q, self.q if self.q_den is None else self.q_den})
        return " and ".join(f"{quantile_values_needed(q, self._side_confidence)} values per side for the "
                            f"{q:g} quantile" for q in quantiles)

    def filters(self) -> list[Filter]:
        return [self.num, self.den]

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        num = _values(rows, self.metric, self.num, None).get(None)
        den = _values(rows, self.metric, self.den, None).get(None)
        if num is None or den is None:
            return None
        q_den = self.q if self.q_den is None else self.q_den
        num_quantile, den_quantile = float(np.quantile(num, self.q)), float(np.quantile(den, q_den))
        point = num_quantile / den_quantile if den_quantile > 0 else math.nan
        n, method = len(num) + len(den), "order statistics of each side, Bonferroni"
        num_ci = quantile_interval(num, self.q, self._side_confidence)
        den_ci = quantile_interval(den, q_den, self._side_confidence)
        if num_ci is None or den_ci is None:
            return _without_interval(point, 1, n, method, f"n = {len(num)} and {len(den)} < {self.minimum()}")
        if den_ci[0] <= 0:
            return _without_interval(point, 1, n, method, "the denominator's interval reaches 0")
        return Estimate(point, num_ci[0] / den_ci[1], num_ci[1] / den_ci[0], 1, n, method)


@dataclass(frozen=True)
class NotJudgeable:
    """A seed's statement about the networks it measured (000's campus and residential traffic),
    which lab data cannot judge: kept beside the judged claims with the reason, its verdict
    always "not judgeable here"."""

    why: str

    def minimum(self) -> str:
        return "data from the seed's networks"

    def filters(self) -> list[Filter]:
        return []

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        return None


class Estimator(Protocol):
    """What a claim estimates: Median, Ratio, RatioOfRatios, QuantileRatio here, and reproduce.estimators'."""

    def minimum(self) -> str:
        """The fewest values its interval needs, in words."""
        ...

    def filters(self) -> list[Filter]:
        """The row filters it reads (adaptive rounds grow only the runs they select)."""
        ...

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        """The estimate and its interval from the rows (None: they hold nothing it needs)."""
        ...


def format_number(value: float) -> str:
    """Three significant digits, or a whole number from 100 up."""
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


# Whose claim it is: the seed's own (what the paper says), or protolab's expectation judged beside
# it (what follows from our model or setup, never presented as the seed's).
SEED = "seed"
PROTOLAB = "protolab"
WHOSE = (SEED, PROTOLAB)


@dataclass(frozen=True)
class Claim:
    """One statement of a seed (or, `whose` = "protolab", protolab's own expectation beside the
    seed's), as an estimate expected in [low, high] (None: unbounded)."""

    statement: str
    estimator: Estimator
    low: float | None = None
    high: float | None = None
    paper: str = ""
    whose: str = SEED

    def __post_init__(self) -> None:
        if self.whose not in WHOSE:
            raise ValueError(f"claim {self.statement!r}: whose = {self.whose!r}, not one of {', '.join(WHOSE)}")

    def attributed(self) -> str:
        """The statement as tables show it: protolab's claims say so."""
        return f"[protolab's] {self.statement}" if self.whose == PROTOLAB else self.statement

    def expected(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{self.low:g} .. {self.high:g}"
        if self.low is not None:
            return f"> {self.low:g}"
        if self.high is not None:
            return f"< {self.high:g}"
        return "any"

    def check(self, rows: Sequence[Row]) -> Verdict:
        if isinstance(self.estimator, NotJudgeable):
            return Verdict(self, None, NOT_JUDGEABLE, self.estimator.why)
        estimate = self.estimator.estimate(rows)
        if estimate is None:
            return Verdict(self, None, NO_DATA, "no rows hold every part of the claim")
        if not math.isfinite(estimate.value):
            return Verdict(self, None, NO_DATA, estimate.shortfall or "no finite estimate")
        if not estimate.has_interval:
            return Verdict(self, estimate, INCONCLUSIVE, estimate.shortfall)
        low = -math.inf if self.low is None else self.low
        high = math.inf if self.high is None else self.high
        ci = f"CI [{format_number(estimate.low)}, {format_number(estimate.high)}]"
        if low < estimate.low and estimate.high < high:
            return Verdict(self, estimate, REPRODUCED, f"{ci} inside {self.expected()}")
        if estimate.high <= low or estimate.low >= high:
            return Verdict(self, estimate, NOT_REPRODUCED, f"{ci} outside {self.expected()}")
        straddled = [f"{b:g}" for b in (low, high) if math.isfinite(b) and estimate.low <= b <= estimate.high]
        return Verdict(self, estimate, INCONCLUSIVE, f"{ci} straddles {' and '.join(straddled)}")


def ratio_claim(statement: str, metric: str, num: Filter, den: Filter, *, where: Filter | None = None,
                by: str | None = None, low: float | None = None, high: float | None = None, paper: str = "",
                whose: str = SEED) -> Claim:
    """A claim on median(metric | num, where) / median(metric | den, where) (a `Ratio`, per group
    `by`), expected in [low, high]. `where` is what both sides share (the condition they are
    compared at), written once so the sides cannot drift apart; `num` and `den` hold only what
    tells them apart."""
    shared = dict(where or {})
    for side in (num, den):
        if overlap := sorted(shared.keys() & side.keys()):
            raise ValueError(f"claim {statement!r}: {', '.join(overlap)} given both in where (shared) "
                             "and in a side's filter")
    return Claim(statement, Ratio(metric, {**num, **shared}, {**den, **shared}, by=by), low=low, high=high,
                 paper=paper, whose=whose)


@dataclass(frozen=True)
class Verdict:
    """A claim's outcome with its reason; `budget` is the repetitions an adaptive run spent
    when the outcome is "inconclusive at budget"."""

    claim: Claim
    estimate: Estimate | None
    outcome: str
    reason: str = ""
    budget: int | None = None

    def label(self) -> str:
        """The outcome as a table shows it ("inconclusive at budget 8")."""
        return f"{self.outcome} {self.budget}" if self.outcome == INCONCLUSIVE_AT_BUDGET else self.outcome

    def to_dict(self) -> dict[str, Any]:
        e = self.estimate

        def finite(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "statement": self.claim.statement,
            "whose": self.claim.whose,
            "paper": self.claim.paper,
            "expected": {"low": self.claim.low, "high": self.claim.high},
            "estimate": None if e is None else {"value": e.value, "ci_low": finite(e.low), "ci_high": finite(e.high),
                                                "confidence": CONFIDENCE, "groups": e.groups, "n": e.n,
                                                "method": e.method},
            "verdict": self.outcome,
            "reason": self.reason,
            "budget": self.budget,
        }
