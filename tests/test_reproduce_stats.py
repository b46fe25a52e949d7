"""The coverage of the claims' 95% intervals, by simulation (fixed seeds, so the same numbers every
time): page-load-time-like lognormal samples, many trials per (groups, values per cell), and
the share of trials whose interval holds the true value, where the estimator decides; below its
minimum it must decline. docs/reproduce.md quotes these numbers (`python
tests/test_reproduce_stats.py` prints them)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from protolab.reproduce.claims import Estimate, Median, Ratio, RatioBetweenSets, RatioOfRatios

TRIALS = 600
FLOOR = 0.93  # 95% intervals; 600 trials leave a standard error of 0.9 points

RATIO = Ratio("plt_ms", {"part": 0}, {"part": 1}, by="page")
RATIO_OF_RATIOS = RatioOfRatios("plt_ms", {"part": 0}, {"part": 1}, {"part": 2}, {"part": 3}, by="page")


def _rows(log_values: np.ndarray) -> list[dict[str, Any]]:
    """`log_values[g, p, i]`: the log PLT of load i of part p on page g."""
    return [{"page": g, "part": p, "plt_ms": float(v)}
            for (g, p, _), v in np.ndenumerate(np.exp(log_values))]


def _coverage(estimates: list[Estimate | None], truth: list[float]) -> tuple[int, float]:
    """(trials that decided, share of those whose interval holds the truth)."""
    decided = [(e, t) for e, t in zip(estimates, truth, strict=True) if e is not None and e.has_interval]
    covered = sum(e.low <= t <= e.high for e, t in decided)
    return len(decided), covered / len(decided) if decided else math.nan


def median_coverage(n: int, seed: int = 1) -> tuple[int, float]:
    """Lognormal PLTs around 1.1 s with a spread of 0.5 in the log: the true median is e^7."""
    rng = np.random.default_rng(seed)
    samples = rng.normal(7.0, 0.5, size=(TRIALS, n))
    estimates = [Median("plt_ms", {}).estimate([{"plt_ms": float(v)} for v in np.exp(s)]) for s in samples]
    return _coverage(estimates, [math.exp(7.0)] * TRIALS)


def grouped_coverage(estimator: Ratio | RatioOfRatios, groups: int, n: int, spread: str, seed: int = 2) -> tuple[int, float]:
    """Pages whose sizes differ (log-medians 6..9) and one effect for every page (the hardest
    case for a t over pages: no spread between pages to widen it); `spread` "equal" gives every
    cell a log spread of 0.3, "mixed" spreads from 0.03 to 0.9 across pages."""
    rng = np.random.default_rng(seed)
    parts = 2 if isinstance(estimator, Ratio) else 4
    effect = np.array([0.2, 0.0, -0.1, 0.0][:parts])  # log of each part's median over the page's base
    sigma = np.full(groups, 0.3) if spread == "equal" else np.geomspace(0.03, 0.9, groups)
    signs = np.array([1, -1, -1, 1][:parts])
    truth = math.exp(float((effect * signs).sum()))
    estimates = []
    for _ in range(TRIALS):
        base = rng.uniform(6.0, 9.0, size=(groups, 1, 1))
        noise = rng.normal(0.0, 1.0, size=(groups, parts, n)) * sigma[:, None, None]
        estimates.append(estimator.estimate(_rows(base + effect[None, :, None] + noise)))
    return _coverage(estimates, [truth] * TRIALS)


@pytest.mark.parametrize("n", [6, 7, 10, 25])
def test_the_median_interval_holds_its_coverage_from_6_values(n: int) -> None:
    decided, coverage = median_coverage(n)
    assert decided == TRIALS and coverage >= FLOOR, coverage


@pytest.mark.parametrize("n", [2, 5])
def test_the_median_declines_below_6_values(n: int) -> None:
    assert median_coverage(n)[0] == 0


# (estimator, groups, values per cell, whether it decides): one or two pages use the combined
# order-statistic intervals (a ratio needs 7 values per cell on one page, 8 on two; a ratio of
# ratios 8 and 9), three pages or more the t over pages (any number of values).
GROUPED = [
    (RATIO, 1, 3, False), (RATIO, 1, 6, False), (RATIO, 1, 7, True), (RATIO, 1, 12, True),
    (RATIO, 2, 7, False), (RATIO, 2, 8, True),
    (RATIO, 3, 1, True), (RATIO, 3, 2, True), (RATIO, 3, 4, True), (RATIO, 6, 3, True),
    (RATIO_OF_RATIOS, 1, 7, False), (RATIO_OF_RATIOS, 1, 8, True), (RATIO_OF_RATIOS, 2, 8, False),
    (RATIO_OF_RATIOS, 2, 9, True), (RATIO_OF_RATIOS, 3, 2, True), (RATIO_OF_RATIOS, 5, 3, True),
]


@pytest.mark.parametrize("spread", ["equal", "mixed"])
@pytest.mark.parametrize(("estimator", "groups", "n", "decides"), GROUPED,
                         ids=[f"{type(e).__name__}-{g}pages-n{n}" for e, g, n, _ in GROUPED])
def test_ratio_intervals_hold_their_coverage_or_decline(estimator: Ratio | RatioOfRatios, groups: int, n: int,
                                                        decides: bool, spread: str) -> None:
    decided, coverage = grouped_coverage(estimator, groups, n, spread)
    if decides:
        assert decided == TRIALS and coverage >= FLOOR, coverage
    else:
        assert decided == 0


RATIO_OF_MEANS = Ratio("plt_ms", {"part": 0}, {"part": 1}, by="page", statistic="mean")
# A ratio of means has only the t over pages: below three pages it declines, whatever n.
GROUPED_MEAN = [(1, 30, False), (2, 30, False), (3, 2, True), (5, 10, True), (15, 10, True)]


@pytest.mark.parametrize("spread", ["equal", "mixed"])
@pytest.mark.parametrize(("groups", "n", "decides"), GROUPED_MEAN, ids=[f"{g}pages-n{n}" for g, n, _ in GROUPED_MEAN])
def test_ratio_of_means_holds_its_coverage_or_declines(groups: int, n: int, decides: bool, spread: str) -> None:
    decided, coverage = grouped_coverage(RATIO_OF_MEANS, groups, n, spread)
    if decides:
        assert decided == TRIALS and coverage >= FLOOR, coverage
    else:
        assert decided == 0


def lottery_coverage(statistic: str, groups: int = 5, n: int = 10, seed: int = 4) -> tuple[int, float, float]:
    """001's ECMP loads: each load of the numerator's mode takes the slow path (3x) on a coin flip,
    the denominator's never; small lognormal noise (0.1). The truth for the means is the ratio of
    expected PLTs, 2. Returns (decided, coverage of 2, spread of the estimates' logs)."""
    rng = np.random.default_rng(seed)
    estimator = Ratio("plt_ms", {"part": 0}, {"part": 1}, by="page", statistic=statistic)
    estimates = []
    for _ in range(TRIALS):
        base = rng.uniform(6.0, 9.0, size=(groups, 1, 1))
        slow = np.stack([rng.random((groups, n)) < 0.5, np.zeros((groups, n), dtype=bool)], axis=1)
        logs = base + np.where(slow, math.log(3.0), 0.0) + rng.normal(0.0, 0.1, size=(groups, 2, n))
        estimates.append(estimator.estimate(_rows(logs)))
    decided, coverage = _coverage(estimates, [2.0] * TRIALS)
    return decided, coverage, float(np.std([math.log(e.value) for e in estimates]))


def test_on_a_lottery_the_mean_holds_its_coverage_where_the_median_swings() -> None:
    decided, coverage, spread = lottery_coverage("mean")
    assert decided == TRIALS and coverage >= FLOOR, coverage
    # A cell's median sits in one mode or the other as the coin falls: its estimate swings more.
    assert lottery_coverage("median")[2] > 1.5 * spread


def test_an_unknown_statistic_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown statistic 'mode'"):
        Ratio("plt_ms", {}, {}, statistic="mode")


BETWEEN_SETS = RatioBetweenSets("plt_ms", {"part": 0}, {"part": 1}, {"set": "a"}, {"set": "b"})


def between_sets_coverage(groups_a: int, groups_b: int, n: int, spread: str, seed: int = 3,
                          estimator: RatioBetweenSets = BETWEEN_SETS) -> tuple[int, float]:
    """Pages of two sets (001's large and small pages) of different sizes (log-medians 6..9); the
    ratio's log is 0.3 on every page of set a and 0.1 on every page of set b (truth e^0.2);
    `spread` as `grouped_coverage`, the spreads dealt across both sets' pages."""
    rng = np.random.default_rng(seed)
    groups = groups_a + groups_b
    sigma = np.full(groups, 0.3) if spread == "equal" else rng.permutation(np.geomspace(0.03, 0.9, groups))
    effect = np.where(np.arange(groups) < groups_a, 0.3, 0.1)
    estimates = []
    for _ in range(TRIALS):
        base = rng.uniform(6.0, 9.0, size=groups)
        noise = rng.normal(0.0, 1.0, size=(groups, 2, n)) * sigma[:, None, None]
        rows = [{"page": g, "set": "a" if g < groups_a else "b", "part": part,
                 "plt_ms": math.exp(base[g] + (effect[g] if part == 0 else 0.0) + noise[g, part, i])}
                for g in range(groups) for part in (0, 1) for i in range(n)]
        estimates.append(estimator.estimate(rows))
    return _coverage(estimates, [math.exp(0.2)] * TRIALS)


# (pages in set a, in set b, values per cell, whether it decides): one page each, order statistics
# (8 values per cell for 4 medians, 9 for 8); three pages or more in each set, Welch's t (any n).
BETWEEN = [(1, 1, 7, False), (1, 1, 8, True), (1, 1, 30, True), (2, 2, 8, False), (2, 2, 9, True),
           (3, 3, 2, True), (5, 6, 3, True), (5, 6, 30, True)]


@pytest.mark.parametrize("spread", ["equal", "mixed"])
@pytest.mark.parametrize(("groups_a", "groups_b", "n", "decides"), BETWEEN,
                         ids=[f"{a}+{b}pages-n{n}" for a, b, n, _ in BETWEEN])
def test_between_sets_intervals_hold_their_coverage_or_decline(groups_a: int, groups_b: int, n: int, decides: bool,
                                                               spread: str) -> None:
    decided, coverage = between_sets_coverage(groups_a, groups_b, n, spread)
    if decides:
        assert decided == TRIALS and coverage >= FLOOR, coverage
    else:
        assert decided == 0


BETWEEN_MEANS = [(2, 2, 30, False), (3, 3, 2, True), (5, 6, 10, True)]


@pytest.mark.parametrize("spread", ["equal", "mixed"])
@pytest.mark.parametrize(("groups_a", "groups_b", "n", "decides"), BETWEEN_MEANS,
                         ids=[f"{a}+{b}pages-n{n}" for a, b, n, _ in BETWEEN_MEANS])
def test_between_sets_of_means_hold_their_coverage_or_decline(groups_a: int, groups_b: int, n: int, decides: bool,
                                                               spread: str) -> None:
    estimator = RatioBetweenSets("plt_ms", {"part": 0}, {"part": 1}, {"set": "a"}, {"set": "b"}, statistic="mean")
    decided, coverage = between_sets_coverage(groups_a, groups_b, n, spread, estimator=estimator)
    if decides:
        assert decided == TRIALS and coverage >= FLOOR, coverage
    else:
        assert decided == 0


def test_a_ratio_between_sets_is_the_ratio_of_the_pages_geometric_means() -> None:
    # Two large pages sped up 2x and 8x (geometric mean 4), two small pages 1x and 4x (2): 4 / 2.
    speedups = {"l1": ("a", 2.0), "l2": ("a", 8.0), "s1": ("b", 1.0), "s2": ("b", 4.0)}
    rows = [{"page": page, "set": side, "part": part, "plt_ms": (1000.0 if part == 0 else 1000.0 / speedup) * (1 + i / 100)}
            for page, (side, speedup) in speedups.items() for part in (0, 1) for i in range(12)]
    estimate = BETWEEN_SETS.estimate(rows)
    assert estimate is not None and estimate.value == pytest.approx(2.0) and estimate.groups == 4
    assert estimate.has_interval and estimate.low <= 2.0 <= estimate.high


def _table() -> None:
    """The coverage figures docs/reproduce.md quotes."""
    for n in (2, 5, 6, 7, 10, 25):
        print(f"Median n={n}: decided, coverage = {median_coverage(n)}")
    for estimator, groups, n, _ in GROUPED:
        for spread in ("equal", "mixed"):
            print(f"{type(estimator).__name__} pages={groups} n={n} {spread}: {grouped_coverage(estimator, groups, n, spread)}")
    for groups_a, groups_b, n, _ in BETWEEN:
        for spread in ("equal", "mixed"):
            print(f"RatioBetweenSets pages={groups_a}+{groups_b} n={n} {spread}: "
                  f"{between_sets_coverage(groups_a, groups_b, n, spread)}")
    for groups, n, _ in GROUPED_MEAN:
        for spread in ("equal", "mixed"):
            print(f"Ratio (means) pages={groups} n={n} {spread}: {grouped_coverage(RATIO_OF_MEANS, groups, n, spread)}")
    for groups_a, groups_b, n, _ in BETWEEN_MEANS:
        estimator = RatioBetweenSets("plt_ms", {"part": 0}, {"part": 1}, {"set": "a"}, {"set": "b"}, statistic="mean")
        for spread in ("equal", "mixed"):
            print(f"RatioBetweenSets (means) pages={groups_a}+{groups_b} n={n} {spread}: "
                  f"{between_sets_coverage(groups_a, groups_b, n, spread, estimator=estimator)}")
    for statistic in ("mean", "median"):
        print(f"lottery, {statistic}: decided, coverage of 2, spread of log estimates = {lottery_coverage(statistic)}")


if __name__ == "__main__":
    _table()
