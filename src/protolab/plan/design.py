"""Experiment designs beyond the full grid (docs/spec.md, "Designs"): space-filling point sets
over continuous condition axes (Latin hypercube, scrambled Sobol, WSP), and the stopping rule
of adaptive repetitions. Pure: numbers in, numbers out; seeded.

WSP follows Santiago, Claeys-Bruno and Sergent (2012), "Construction of space-filling designs
using WSP algorithm for high dimensional spaces" (Chemometrics and Intelligent Laboratory
Systems 113:26-31): from a large candidate set, keep a point, drop every candidate closer than
d_min to it, move to the nearest remaining candidate, repeat; d_min is searched (bisection) so
that the requested number of points remains.

Adaptive repetitions use the Student t confidence interval of a cell's mean: with the few
repetitions a lab run affords (3..10), a bootstrap of the median is too coarse to stop on.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.spatial import cKDTree
from scipy.stats import qmc
from scipy.stats import t as student_t

KINDS = ("grid", "lhs", "sobol", "wsp")
SIGNIFICANT_DIGITS = 3
# WSP's candidate set: this many candidates per requested point, at most MAX_WSP_CANDIDATES.
WSP_CANDIDATES_PER_POINT = 50
MAX_WSP_CANDIDATES = 2**17
WSP_MAX_PASSES = 60
# WSP walks its candidate set once per bisection step: a few seconds at this many points.
WSP_MAX_POINTS = 2000


def derived_seed(*parts: Any) -> int:
    """A 63-bit seed from the spec seed and a purpose; stable across Python versions and runs."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def design_seed(spec_seed: int, kind: str) -> int:
    """The design's own seed, derived from the spec's (the run order and links have theirs)."""
    return derived_seed(spec_seed, "design", kind)


# ---------------------------------------------------------------------- point sets


def unit_points(kind: str, points: int, dimensions: int, seed: int) -> np.ndarray:
    """`points` points in [0, 1)^dimensions of the design `kind` (not "grid")."""
    if kind == "lhs":
        return qmc.LatinHypercube(d=dimensions, seed=seed).random(points)
    if kind == "sobol":
        # Sobol points are balanced in powers of two: draw the next one up and keep the first.
        sampler = qmc.Sobol(d=dimensions, scramble=True, seed=seed)
        return sampler.random(2 ** math.ceil(math.log2(max(points, 1))))[:points]
    if kind == "wsp":
        return wsp(points, dimensions, seed)
    raise ValueError(f"unknown design kind {kind!r} (known: {', '.join(KINDS)})")


def _wsp_pass(candidates: np.ndarray, tree: cKDTree, d_min: float, limit: int | None = None) -> list[int]:
    """One WSP walk from candidate 0 with distance d_min: the kept candidates, in path order.

    With `limit`, the walk stops as soon as more than `limit` points are kept (the bisection
    only needs to know that d_min is too small).
    """
    n = len(candidates)
    remaining = np.ones(n, dtype=bool)
    current, kept, k = 0, [0], 32
    while limit is None or len(kept) <= limit:
        here = candidates[current]
        remaining[current] = False
        nearest = -1
        while True:  # the k nearest candidates: drop those within d_min, move to the first left
            k = min(k, n)
            distances, index = tree.query(here, k=k)
            close = distances < d_min
            remaining[index[close]] = False
            if close.all() and k < n:
                k *= 2
                continue
            far = index[~close]
            far = far[remaining[far]]
            if len(far):
                nearest = int(far[0])
                k = max(32, 2 * int(close.sum()))
                break
            if k >= min(n, 4096):  # trapped: every candidate nearby is gone; search those left
                left = np.flatnonzero(remaining)
                if len(left):
                    nearest = int(left[np.argmin(np.linalg.norm(candidates[left] - here, axis=1))])
                break
            k *= 2
        if nearest < 0:
            return kept
        kept.append(nearest)
        current = nearest
    return kept


def _thin(points: np.ndarray, surplus: int) -> np.ndarray:
    """Drop `surplus` points, each time one of the closest pair (keeps the maximin distance)."""
    keep = np.ones(len(points), dtype=bool)
    for _ in range(surplus):
        index = np.flatnonzero(keep)
        distances, _neighbours = cKDTree(points[index]).query(points[index], k=2)
        keep[index[int(np.argmin(distances[:, 1]))]] = False
    return points[keep]


def wsp(points: int, dimensions: int, seed: int) -> np.ndarray:
    """The WSP design: `points` points of a scrambled Sobol candidate set, spread out.

    The walk starts at the candidate nearest the centre (a deterministic start, as the paper
    allows). d_min is bisected (on a log scale) for a walk keeping exactly `points` points; when
    no d_min gives that count, the walk keeping the fewest points above it is thinned by
    dropping points of the closest pairs.
    """
    if points < 1 or dimensions < 1:
        raise ValueError("a WSP design needs at least one point and one dimension")
    count = min(max(points * WSP_CANDIDATES_PER_POINT, 2), max(MAX_WSP_CANDIDATES, 2 * points))
    candidates = qmc.Sobol(d=dimensions, scramble=True, seed=seed).random(2 ** math.ceil(math.log2(count)))
    centre = int(np.argmin(np.linalg.norm(candidates - 0.5, axis=1)))
    candidates[[0, centre]] = candidates[[centre, 0]]
    if points == 1:
        return candidates[:1]
    tree = cKDTree(candidates)
    # Bracket: `low` keeps more than `points`, `high` fewer or as many.
    low, high = points ** (-1 / dimensions) / 4, math.sqrt(dimensions) * 1.01
    while len(_wsp_pass(candidates, tree, low, points)) <= points:
        low /= 4
    for _ in range(WSP_MAX_PASSES):
        mid = math.sqrt(low * high)
        kept = _wsp_pass(candidates, tree, mid, points)
        if len(kept) == points:
            return candidates[kept]
        if len(kept) > points:
            low = mid
        else:
            high = mid
        if high / low < 1 + 1e-4:
            break
    kept = _wsp_pass(candidates, tree, low)
    return _thin(candidates[kept], len(kept) - points)


# ---------------------------------------------------------------------- onto the axes


def round_significant(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """`value` rounded to `digits` significant digits (readable run keys and reports)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - math.floor(math.log10(abs(value))) - 1)


def scale(unit: np.ndarray, ranges: Sequence[tuple[str, float, float]], log_axes: Sequence[str]) -> list[dict[str, float]]:
    """Unit points onto the axes' ranges (geometric for `log_axes`), rounded to 3 significant
    digits, kept within the ranges and deduplicated in order."""
    out: list[dict[str, float]] = []
    seen: set[tuple[float, ...]] = set()
    for row in unit:
        point = {}
        for value, (name, lo, hi) in zip(row, ranges, strict=True):
            if name in log_axes:
                raw = math.exp(math.log(lo) + float(value) * (math.log(hi) - math.log(lo)))
            else:
                raw = lo + float(value) * (hi - lo)
            point[name] = min(max(round_significant(raw), lo), hi)
        key = tuple(point.values())
        if key not in seen:
            seen.add(key)
            out.append(point)
    return out


def design_points(kind: str, points: int, ranges: Mapping[str, tuple[float, float]], log_axes: Sequence[str],
                  seed: int) -> list[dict[str, float]]:
    """The condition values of a space-filling design: one dict (axis -> value) per point, in
    the order the design gives them (rounding may merge a few)."""
    named = [(name, float(lo), float(hi)) for name, (lo, hi) in ranges.items()]
    return scale(unit_points(kind, points, len(named), seed), named, log_axes)


def min_distance(unit: np.ndarray) -> float:
    """The smallest distance between two of the points (the maximin criterion)."""
    if len(unit) < 2:
        return math.inf
    distances, _neighbours = cKDTree(unit).query(unit, k=2)
    return float(distances[:, 1].min())


# ---------------------------------------------------------------------- adaptive repetitions


def ci_half_width(values: Sequence[float], confidence: float = 0.95) -> float:
    """Half-width of the Student t confidence interval of the mean (inf with fewer than 2 values)."""
    n = len(values)
    if n < 2:
        return math.inf
    sd = float(np.std(values, ddof=1))
    return float(student_t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)


def relative_ci(values: Sequence[float], confidence: float = 0.95) -> float:
    """The CI half-width of the mean relative to the mean (inf when undefined)."""
    mean = float(np.mean(values)) if len(values) else 0.0
    return ci_half_width(values, confidence) / abs(mean) if mean != 0 else math.inf


def converged(values: Sequence[float], target: float, min_repetitions: int) -> bool:
    """Adaptive repetitions: a cell stops once it has `min_repetitions` values (at least 2) and
    the 95% CI half-width of their mean is at most `target` times the mean."""
    if len(values) < max(min_repetitions, 2):
        return False
    return relative_ci(values) <= target
