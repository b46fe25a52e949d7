"""reproduce.estimators: 002's spreads, shares, heat-map improvements and rank correlations on
fixed rows, their minimum n, and the coverage of each interval by simulation (fixed seeds)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from protolab.reproduce.claims import INCONCLUSIVE, NO_DATA, REPRODUCED, Claim
from protolab.reproduce.estimators import (
    Improvement,
    ImprovementTrend,
    ScoreCorrelation,
    ShareOfWins,
    Spread,
    clopper_pearson,
    configuration_improvements,
    cv_interval,
    ranked_sites,
    site_scores,
    spearman_interval,
    t_interval,
)

QUIC, HTTP = {"mode": "h3"}, {"mode": "h1c"}


def _load(mode: str, page: str, plt: float, bandwidth: float = 1.0, rtt: float = 30.0, **extra: Any) -> dict[str, Any]:
    return {"mode": mode, "page": page, "plt_ms": plt, "bandwidth_mbps": bandwidth, "rtt_ms": rtt, **extra}


# ------------------------------------------------------------------------------------- fixed data


def test_spread_is_std_over_mean_with_a_minimum_of_ten_values() -> None:
    values = [743 + d for d in (-30, -20, -10, -5, 0, 0, 5, 10, 20, 30)]
    rows = [_load("h3", "youtube", v, client="chromium") for v in values]
    estimate = Spread("plt_ms", {"mode": "h3"}).estimate(rows)
    assert estimate is not None and estimate.n == 10
    assert estimate.value == pytest.approx(float(np.std(values, ddof=1)) / 743, rel=1e-12)
    assert estimate.low < estimate.value < estimate.high
    short = Spread("plt_ms", {"mode": "h3"}).estimate(rows[:9])  # below the minimum: no interval, says why
    assert short is not None and not short.has_interval and "9 < 10" in short.shortfall
    verdict = Claim("spread at most 5%", Spread("plt_ms", {"mode": "h3"}), high=0.05).check(rows)
    assert verdict.outcome == REPRODUCED  # 2.3% [1.6, 4.2]
    assert Claim("x", Spread("plt_ms", {"mode": "h3"}), high=0.05).check(rows[:9]).outcome == INCONCLUSIVE
    assert Claim("x", Spread("plt_ms", {"mode": "h1"}), high=0.05).check(rows).outcome == NO_DATA


def test_share_of_wins_counts_groups_where_num_is_faster() -> None:
    rows = [_load("h3", p, 100) for p in "abcdef"] + [_load("h1c", p, 120) for p in "abcde"] + [_load("h1c", "f", 90)]
    estimate = ShareOfWins("plt_ms", QUIC, HTTP).estimate(rows)
    assert estimate is not None and estimate.value == pytest.approx(5 / 6) and estimate.n == 6
    assert (estimate.low, estimate.high) == pytest.approx(clopper_pearson(5, 6))
    # six of six wins decide "most" (> 0.5) at 95%, five of five cannot: the exact interval says so
    assert clopper_pearson(6, 6)[0] > 0.5 > clopper_pearson(5, 5)[0]
    # a region keeps only its rows; pages on one side only are not counted
    far = rows + [_load("h3", "g", 10, bandwidth=25.0)]
    inside = ShareOfWins("plt_ms", QUIC, HTTP, region={"bandwidth_mbps": (0.5, 2)}).estimate(far)
    assert inside is not None and inside.n == 6
    assert ShareOfWins("plt_ms", QUIC, HTTP, region={"rtt_ms": (100, 300)}).estimate(rows) is None


def test_configuration_improvement_is_that_of_the_median_over_pages() -> None:
    # one configuration, three pages (per-page median over two loads): medians 100/200 -> +50%
    rows = [_load("h3", p, v) for p, v in (("a", 90), ("a", 110), ("b", 100), ("b", 100), ("c", 300), ("c", 300))]
    rows += [_load("h1c", p, v) for p, v in (("a", 200), ("a", 200), ("b", 150), ("b", 250), ("c", 400), ("c", 400))]
    assert configuration_improvements(rows, "plt_ms", QUIC, HTTP) == {(1.0, 30.0): pytest.approx(50.0)}


def _grid(improvement: Any) -> list[dict[str, Any]]:
    """Two pages per configuration of a 4 x 4 grid; h3 at (1 - improvement(b, r) / 100) of h1c."""
    rows = []
    for bandwidth in (0.2, 1.0, 5.0, 25.0):
        for rtt in (30.0, 120.0, 210.0, 300.0):
            for page, plt in (("a", 1000.0), ("b", 3000.0)):
                rows.append(_load("h1c", page, plt, bandwidth, rtt))
                rows.append(_load("h3", page, plt * (1 - improvement(bandwidth, rtt) / 100), bandwidth, rtt))
    return rows


def test_improvement_over_a_region_and_its_trend_with_the_rtt() -> None:
    rows = _grid(lambda b, r: (r - 165) / 5)  # -27% at 30 ms ... +27% at 300 ms, whatever the bandwidth
    high_rtt = Improvement("plt_ms", QUIC, HTTP, {"rtt_ms": (211, 300)}).estimate(rows)
    assert high_rtt is not None and high_rtt.n == 4 and high_rtt.value == pytest.approx(27.0)
    both = Improvement("plt_ms", QUIC, HTTP, {"rtt_ms": (200, 300)}).estimate(rows)
    assert both is not None and both.value == pytest.approx((9 + 27) / 2) and both.low < 9 + 1 and both.high > 26
    two = Improvement("plt_ms", QUIC, HTTP, {"rtt_ms": (200, 300), "bandwidth_mbps": (0.1, 0.5)}).estimate(rows)
    assert two is not None and not two.has_interval and "2 configurations < 3" in two.shortfall
    trend = ImprovementTrend("plt_ms", QUIC, HTTP, "rtt_ms").estimate(rows)
    assert trend is not None and trend.n == 16 and trend.value == pytest.approx(1.0, abs=1e-9)
    flat = ImprovementTrend("plt_ms", QUIC, HTTP, "bandwidth_mbps").estimate(rows)
    assert flat is not None and flat.value == pytest.approx(0.0, abs=1e-9)
    assert Claim("grows with the RTT", ImprovementTrend("plt_ms", QUIC, HTTP, "rtt_ms"), low=0.0).check(rows).outcome \
        == REPRODUCED
    assert Claim("grows with the bandwidth", ImprovementTrend("plt_ms", QUIC, HTTP, "bandwidth_mbps"),
                 low=0.0).check(rows).outcome == INCONCLUSIVE


def _sites(scores: dict[str, float], sizes: dict[str, float]) -> list[dict[str, Any]]:
    """Two configurations; each page's h3 PLT is (1 - score / 100) of its h1c PLT in both."""
    rows = []
    for page, score in scores.items():
        attributes = {"page_bytes": sizes[page], "page_objects": 10.0, "page_mean_object_bytes": sizes[page] / 10}
        for rtt in (30.0, 300.0):
            rows.append(_load("h1c", page, 1000.0, rtt=rtt, **attributes))
            rows.append(_load("h3", page, 1000.0 * (1 - score / 100), rtt=rtt, **attributes))
    return rows


def test_site_scores_their_ranking_and_correlation_with_a_page_attribute() -> None:
    pages = [f"page-{i:03d}" for i in range(1, 13)]
    scores = {p: 40.0 - 10 * i for i, p in enumerate(pages)}  # the larger, the lower the score
    sizes = {p: 1e5 * 2**i for i, p in enumerate(pages)}
    rows = _sites(scores, sizes)
    assert site_scores(rows, "plt_ms", QUIC, HTTP) == pytest.approx(scores)
    by_size = ScoreCorrelation("page_bytes", "plt_ms", QUIC, HTTP).estimate(rows)
    assert by_size is not None and by_size.n == 12 and by_size.value == pytest.approx(-1.0)
    assert by_size.high < 0
    constant = Claim("x", ScoreCorrelation("page_objects", "plt_ms", QUIC, HTTP), high=0.0).check(rows)
    assert constant.outcome == NO_DATA and "no rank order" in constant.reason
    few = ScoreCorrelation("page_bytes", "plt_ms", QUIC, HTTP).estimate(_sites({p: scores[p] for p in pages[:9]}, sizes))
    assert few is not None and few.value == pytest.approx(-1.0) and "9 pages < 10" in few.shortfall
    worst, best = ranked_sites(rows, "plt_ms", QUIC, HTTP, count=3)
    assert [w["page"] for w in worst] == ["page-012", "page-011", "page-010"]
    assert [b["page"] for b in best] == ["page-003", "page-002", "page-001"]
    assert worst[0]["score"] == pytest.approx(-70.0) and worst[0]["page_bytes"] == sizes["page-012"]
    small_worst, small_best = ranked_sites(rows[:8], "plt_ms", QUIC, HTTP, count=10)  # 2 pages: one each
    assert len(small_worst) == len(small_best) == 1


# ---------------------------------------------------------------------------------------- coverage


def _coverage(trials: int, covered: Any) -> float:
    return sum(bool(covered(i)) for i in range(trials)) / trials


def test_cv_interval_holds_its_coverage_from_ten_values() -> None:
    rng = np.random.default_rng(42)
    for n in (10, 30, 100):
        def covered(_: int, n: int = n) -> bool:
            _, low, high = cv_interval(rng.normal(743, 18, n))  # 002's QuicShell: CV 2.4%
            return low <= 18 / 743 <= high

        assert 0.93 <= _coverage(1500, covered) <= 0.97, n


def test_clopper_pearson_covers_at_least_95_percent_at_every_n() -> None:
    for trials in (3, 6, 12, 30):
        for p in (0.05, 0.3, 0.5, 0.8, 0.95):
            intervals = [clopper_pearson(k, trials) for k in range(trials + 1)]
            coverage = sum(stats.binom.pmf(k, trials, p) for k, (low, high) in enumerate(intervals) if low <= p <= high)
            assert coverage >= 0.95 - 1e-9, (trials, p)


def test_t_interval_over_configurations_holds_its_coverage_from_three() -> None:
    rng = np.random.default_rng(7)
    for n in (3, 5, 10):
        def covered(_: int, n: int = n) -> bool:
            _, low, high = t_interval(list(rng.normal(-20, 15, n)))
            return low <= -20 <= high

        assert 0.93 <= _coverage(2000, covered) <= 0.97, n


def test_spearman_interval_holds_its_coverage_from_ten_pairs() -> None:
    rng = np.random.default_rng(11)
    rho_normal = -0.6  # Pearson's correlation of the bivariate normal
    true_spearman = 6 / math.pi * math.asin(rho_normal / 2)
    for n in (10, 30):
        def covered(_: int, n: int = n) -> bool:
            x = rng.normal(size=n)
            y = rho_normal * x + math.sqrt(1 - rho_normal**2) * rng.normal(size=n)
            _, low, high = spearman_interval(list(np.exp(x)), list(y))  # ranks: any monotone attribute
            return low <= true_spearman <= high

        assert 0.92 <= _coverage(1500, covered) <= 0.98, n


# ------------------------------------------------------------------------------------ page_runs rows


def test_page_runs_carry_each_page_attributes_from_its_objects(tmp_path: Any) -> None:
    """The `page_runs` source: the runs, each with its page's objects, bytes, origins and mean
    object size from the `objects` table (the most complete successful load of the page)."""
    from documents import load_result, page_object

    from protolab.reproduce.data import rows_of
    from protolab.results.record import RunRecord
    from protolab.store import ResultsStore

    pages = {"small": [("www.small.test", 1000), ("www.small.test", 3000)],
             "large": [("www.large.test", 50_000), ("img.large.test", 30_000), ("img.large.test", 20_000)]}
    with ResultsStore(tmp_path) as store:
        store.upsert_experiment("scores", "bw-rtt-grid", {"scenario": "bw-rtt-grid"}, {})
        for index, (page, objects) in enumerate(pages.items()):
            for mode in ("h1c", "h3"):
                params = {"scenario": "bw-rtt-grid", "bandwidth_mbps": 1.0, "rtt_ms": 30.0, "loss_pct": 0.0,
                          "mode": mode, "page": page, "repetition": 0, "seed": 1, "order_index": index}
                load = load_result(page=page, mode=mode, plt_ms=100.0 + index, objects=[
                    page_object(origin, "/" if i == 0 else f"/o{i}", size) for i, (origin, size) in enumerate(objects)])
                store.record_run("scores", RunRecord(run_key=f"{page}-{mode}", params=params, status="ok",
                                                     page_load=load))
    with ResultsStore(tmp_path, read_only=True) as store:
        rows = rows_of(store, "page_runs", "scores")
    assert len(rows) == 4
    large = next(r for r in rows if r["page"] == "large")
    assert (large["page_objects"], large["page_bytes"], large["page_origins"]) == (3, 100_000.0, 2)
    assert large["page_mean_object_bytes"] == pytest.approx(100_000 / 3)
    small = next(r for r in rows if r["page"] == "small" and r["mode"] == "h3")
    assert (small["page_objects"], small["page_bytes"], small["page_origins"]) == (2, 4000.0, 1)


def test_the_atlas_draws_002_heat_maps_and_cdfs() -> None:
    """002 Fig. 5-2 as three maps of the cells' improvements (a map per protocol pair that was
    run), Figs. 4-2 and 5-1 as CDFs of PLT per mode, a panel per condition."""
    from protolab.reproduce.drawings import DrawingInput, drawing_for
    from protolab.reproduce.figures import REGISTRY

    rows = _grid(lambda b, r: (r - 165) / 5)  # h1c and h3 only: one map, QUIC over HTTP/1.1
    heatmap = drawing_for(REGISTRY["002-fig5-2"])(DrawingInput(REGISTRY["002-fig5-2"], rows))
    assert heatmap is not None
    maps = [ax for ax in heatmap.axes if ax.get_title()]
    assert [ax.get_title() for ax in maps] == ["QUIC over HTTP/1.1 (h1c)"]
    assert sorted(float(t.get_text()) for t in maps[0].texts) == sorted(
        [(r - 165) / 5 for _ in range(4) for r in (30, 120, 210, 300)])
    cdf = drawing_for(REGISTRY["002-fig5-1"])(DrawingInput(REGISTRY["002-fig5-1"], rows))
    assert cdf is not None and len([ax for ax in cdf.axes if ax.get_visible()]) == 16  # one per configuration
    assert drawing_for(REGISTRY["002-fig5-2"])(DrawingInput(REGISTRY["002-fig5-2"], [])) is None
    table = REGISTRY["002-table5.1"]
    pages = [f"page-{i:03d}" for i in range(1, 25)]
    sites = _sites({p: 40.0 - 3 * i for i, p in enumerate(pages)}, {p: 1e5 * 1.3**i for i, p in enumerate(pages)})
    scores = drawing_for(table)(DrawingInput(table, sites))
    assert scores is not None and len(scores.axes) == 2
    assert len(scores.axes[0].collections[0].get_offsets()) == 24  # every page a point
    assert len(scores.axes[0].texts) == 20  # the bottom and top 10 named
