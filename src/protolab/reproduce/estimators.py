"""Estimators for claims that a median or a ratio of medians cannot state (pure: no I/O).

002's results are spreads (Fig. 4-2: std/mean of 100 replayed loads), shares (how many pages or
configurations QUIC wins), % improvements per network configuration (Fig. 5-2's heat maps, each
cell the improvement of the median PLT over the pages) and rank correlations (QUIC's per-site
score against a page attribute, Table 5.1; the improvement against the RTT). Each estimator has
the interface of `claims.Median`: `estimate(rows) -> Estimate | None`, with a 95% interval that
holds its coverage at small n, or an explicit minimum n below which the estimate has no interval
and says what is missing (`Estimate.shortfall`: the claim is "inconclusive", and an adaptive run
may grow its cells, `filters()`):

| estimator | interval | minimum |
| --- | --- | --- |
| `Spread` | Vangel's modified McKay interval for a coefficient of variation (normal model) | 10 values |
| `ShareOfWins` | Clopper-Pearson (exact binomial) over the groups | 1 group |
| `Improvement` | Student t over the configurations' improvements | 3 configurations |
| `ImprovementTrend`, `ScoreCorrelation` | Fisher z of Spearman's rho, SE sqrt(1.06 / (n - 3)) (Fieller, Hartley and Pearson 1957) | 10 pairs |

tests/test_reproduce_estimators.py checks each interval's coverage by simulation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from protolab.reproduce.claims import CONFIDENCE, Estimate, Filter, Row, matches

Region = Mapping[str, tuple[float, float]]  # column -> inclusive [low, high]

CONFIGURATION = ("bandwidth_mbps", "rtt_ms")  # 002's network configuration
MIN_SPREAD_VALUES = 10
MIN_CONFIGURATIONS = 3
MIN_CORRELATION_PAIRS = 10
_ALPHA = 1 - CONFIDENCE


def _short(value: float, groups: int, n: int, method: str, shortfall: str) -> Estimate:
    """An estimate without an interval: too few values for `method`."""
    return Estimate(value, math.nan, math.nan, groups, n, method, shortfall)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def in_region(row: Row, region: Region) -> bool:
    """Whether every column of the region lies in its inclusive range."""
    for column, (low, high) in region.items():
        value = row.get(column)
        if not _finite(value) or not low <= float(value) <= high:
            return False
    return True


def _medians(rows: Sequence[Row], metric: str, where: Filter, keys: tuple[str, ...]) -> dict[tuple[Any, ...], float]:
    """The median of `metric` per value of `keys`, over the rows that match `where`."""
    values: dict[tuple[Any, ...], list[float]] = {}
    for row in rows:
        value = row.get(metric)
        if matches(row, where) and _finite(value):
            values.setdefault(tuple(row.get(k) for k in keys), []).append(float(value))
    return {key: float(np.median(v)) for key, v in values.items()}


# ---------------------------------------------------------------------------------------- spread


def cv_interval(values: np.ndarray) -> tuple[float, float, float]:
    """The coefficient of variation (sample std / mean) and Vangel's modified McKay 95% interval.

    The interval assumes roughly normal values with a small CV (< 0.33); its coverage is close to
    nominal from n = 10 (Vangel 1996), which the test checks."""
    n = len(values)
    mean = float(np.mean(values))
    k = float(np.std(values, ddof=1)) / mean
    nu = n - 1
    upper_q, lower_q = stats.chi2.ppf(1 - _ALPHA / 2, nu), stats.chi2.ppf(_ALPHA / 2, nu)

    def bound(u: float) -> float:
        denominator = ((u + 2) / n - 1) * k * k + u / nu
        return k / math.sqrt(denominator) if denominator > 0 else math.inf

    return k, bound(upper_q), bound(lower_q)


@dataclass(frozen=True)
class Spread:
    """std / mean of `metric` over the rows that match `where` (002 Fig. 4-2: 743 ± 18 ms, 2.5%)."""

    metric: str
    where: Filter

    def minimum(self) -> str:
        return f"{MIN_SPREAD_VALUES} values"

    def filters(self) -> list[Filter]:
        return [self.where]

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        values = np.asarray([float(r[self.metric]) for r in rows
                             if matches(r, self.where) and _finite(r.get(self.metric))])
        if len(values) < 2:
            return None
        method = "Vangel's modified McKay interval"
        if float(np.mean(values)) <= 0:
            return _short(math.nan, 1, len(values), method, "a mean <= 0 has no coefficient of variation")
        k, low, high = cv_interval(values)
        if len(values) < MIN_SPREAD_VALUES:
            return _short(k, 1, len(values), method, f"n = {len(values)} < {MIN_SPREAD_VALUES} values needed")
        return Estimate(k, low, high, 1, len(values), method)


# ---------------------------------------------------------------------------------------- shares


def clopper_pearson(successes: int, trials: int) -> tuple[float, float]:
    """The exact binomial 95% interval of a proportion (coverage >= 95% at every n)."""
    low = 0.0 if successes == 0 else float(stats.beta.ppf(_ALPHA / 2, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(stats.beta.ppf(1 - _ALPHA / 2, successes + 1, trials - successes))
    return low, high


@dataclass(frozen=True)
class ShareOfWins:
    """The share of groups (pages, or configurations with `by=CONFIGURATION`) where the median
    of `metric` under `num` is lower than under `den` ("QUIC loads faster"), rows restricted to
    `region`."""

    metric: str
    num: Filter
    den: Filter
    by: tuple[str, ...] = ("page",)
    region: Region = field(default_factory=dict)

    def minimum(self) -> str:
        return "1 group (6 of 6 is the least that decides a majority)"

    def filters(self) -> list[Filter]:
        return [self.num, self.den]

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        inside = [r for r in rows if in_region(r, self.region)]
        num = _medians(inside, self.metric, self.num, self.by)
        den = _medians(inside, self.metric, self.den, self.by)
        common = [g for g in num if g in den]
        if not common:
            return None
        wins = sum(num[g] < den[g] for g in common)
        low, high = clopper_pearson(wins, len(common))
        return Estimate(wins / len(common), low, high, len(common), len(common), "Clopper-Pearson")


# ---------------------------------------------------------------------------------- improvements


def configuration_improvements(rows: Sequence[Row], metric: str, num: Filter, den: Filter,
                               region: Region | None = None) -> dict[tuple[Any, ...], float]:
    """002's heat-map cell: per configuration, the % improvement of the median over the pages
    (each page's median over its loads) of `num` against `den`: 100 (1 - num / den). Only pages
    with both are counted."""
    inside = [r for r in rows if in_region(r, region or {})]
    keys = (*CONFIGURATION, "page")
    num_m, den_m = _medians(inside, metric, num, keys), _medians(inside, metric, den, keys)
    per_config: dict[tuple[Any, ...], tuple[list[float], list[float]]] = {}
    for key in num_m.keys() & den_m.keys():
        n_list, d_list = per_config.setdefault(key[:-1], ([], []))
        n_list.append(num_m[key])
        d_list.append(den_m[key])
    return {config: 100 * (1 - float(np.median(n)) / float(np.median(d)))
            for config, (n, d) in per_config.items() if float(np.median(d)) > 0}


def t_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The mean and its Student-t 95% interval."""
    array = np.asarray(values, dtype=float)
    mean = float(np.mean(array))
    half = float(stats.t.ppf(1 - _ALPHA / 2, len(array) - 1)) * float(np.std(array, ddof=1)) / math.sqrt(len(array))
    return mean, mean - half, mean + half


@dataclass(frozen=True)
class Improvement:
    """The mean over the configurations in `region` of 002's % improvement (a heat map's cells
    averaged), with a t-interval over the configurations."""

    metric: str
    num: Filter
    den: Filter
    region: Region = field(default_factory=dict)

    def minimum(self) -> str:
        return f"{MIN_CONFIGURATIONS} configurations"

    def filters(self) -> list[Filter]:
        return [self.num, self.den]

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        cells = configuration_improvements(rows, self.metric, self.num, self.den, self.region)
        if not cells:
            return None
        method = f"t over {len(cells)} configurations"
        if len(cells) < MIN_CONFIGURATIONS:
            return _short(float(np.mean(list(cells.values()))), len(cells), len(cells), method,
                          f"{len(cells)} configurations < {MIN_CONFIGURATIONS} needed in the region")
        mean, low, high = t_interval(list(cells.values()))
        return Estimate(mean, low, high, len(cells), len(cells), method)


# ----------------------------------------------------------------------------------- correlations


def spearman_interval(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """Spearman's rho and its Fisher-z 95% interval (SE sqrt(1.06 / (n - 3)))."""
    if len(set(x)) < 2 or len(set(y)) < 2:  # a constant has no rank order
        return math.nan, math.nan, math.nan
    rho = float(stats.spearmanr(x, y).statistic)
    if not math.isfinite(rho):
        return math.nan, math.nan, math.nan
    z = math.atanh(max(min(rho, 0.999999), -0.999999))
    half = float(stats.norm.ppf(1 - _ALPHA / 2)) * math.sqrt(1.06 / (len(x) - 3))
    return rho, math.tanh(z - half), math.tanh(z + half)


def _correlation(x: Sequence[float], y: Sequence[float], units: str) -> Estimate | None:
    if len(x) < 3:
        return None
    rho, low, high = spearman_interval(x, y)
    method = "Fisher z of Spearman's rho"
    if not math.isfinite(rho):
        return _short(math.nan, len(x), len(x), method, f"no rank order (a constant) over the {units}")
    if len(x) < MIN_CORRELATION_PAIRS:
        return _short(rho, len(x), len(x), method, f"{len(x)} {units} < {MIN_CORRELATION_PAIRS} needed")
    return Estimate(rho, low, high, len(x), len(x), method)


@dataclass(frozen=True)
class ImprovementTrend:
    """Spearman's rho between a configuration column (`axis`, e.g. the RTT) and 002's %
    improvement of that configuration: "QUIC improves as RTT increases" is rho > 0."""

    metric: str
    num: Filter
    den: Filter
    axis: str
    region: Region = field(default_factory=dict)

    def minimum(self) -> str:
        return f"{MIN_CORRELATION_PAIRS} configurations"

    def filters(self) -> list[Filter]:
        return [self.num, self.den]

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        cells = configuration_improvements(rows, self.metric, self.num, self.den, self.region)
        position = CONFIGURATION.index(self.axis)
        configs = sorted(cells, key=str)
        return _correlation([float(c[position]) for c in configs], [cells[c] for c in configs], "configurations")


def site_scores(rows: Sequence[Row], metric: str, num: Filter, den: Filter) -> dict[Any, float]:
    """002 Table 5.1's score per page: the mean over the configurations where the page has both
    of 100 (1 - median(num) / median(den))."""
    keys = ("page", *CONFIGURATION)
    num_m, den_m = _medians(rows, metric, num, keys), _medians(rows, metric, den, keys)
    per_page: dict[Any, list[float]] = {}
    for key in num_m.keys() & den_m.keys():
        if den_m[key] > 0:
            per_page.setdefault(key[0], []).append(100 * (1 - num_m[key] / den_m[key]))
    return {page: float(np.mean(values)) for page, values in per_page.items()}


def page_attributes(rows: Sequence[Row], attribute: str) -> dict[Any, float]:
    """The value of a page attribute column (e.g. `page_bytes`) per page, from the first row
    that has it."""
    found: dict[Any, float] = {}
    for row in rows:
        value = row.get(attribute)
        if _finite(value) and row.get("page") not in found:
            found[row.get("page")] = float(value)
    return found


@dataclass(frozen=True)
class ScoreCorrelation:
    """Spearman's rho between a page attribute (`page_bytes`, `page_objects`,
    `page_mean_object_bytes`, `page_origins`) and the page's score (`site_scores`)."""

    attribute: str
    metric: str
    num: Filter
    den: Filter

    def minimum(self) -> str:
        return f"{MIN_CORRELATION_PAIRS} pages"

    def filters(self) -> list[Filter]:
        return [self.num, self.den]

    def estimate(self, rows: Sequence[Row]) -> Estimate | None:
        scores = site_scores(rows, self.metric, self.num, self.den)
        attributes = page_attributes(rows, self.attribute)
        pages = sorted((p for p in scores if p in attributes), key=str)
        return _correlation([attributes[p] for p in pages], [scores[p] for p in pages], "pages")


ATTRIBUTES = ("page_origins", "page_objects", "page_mean_object_bytes", "page_bytes")


def ranked_sites(rows: Sequence[Row], metric: str, num: Filter, den: Filter, count: int = 10
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Table 5.1: the `count` pages QUIC hurts most (lowest score first) and helps most (highest
    last), each with its score and attributes."""
    scores = site_scores(rows, metric, num, den)
    attributes = {name: page_attributes(rows, name) for name in ATTRIBUTES}
    ranked = [{"page": page, "score": score, **{name: values.get(page) for name, values in attributes.items()}}
              for page, score in sorted(scores.items(), key=lambda item: (item[1], str(item[0])))]
    count = min(count, len(ranked) // 2)  # the two ends never share a page
    return ranked[:count], ranked[len(ranked) - count:]
