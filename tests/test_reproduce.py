"""`protolab reproduce`: claims and verdicts on fixed rows (order-statistic and t intervals), the
figure registry against the specs it runs, and one quick figure end to end through the emulator.
The intervals' coverage is checked by simulation in test_reproduce_stats.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from protolab.reproduce.claims import (
    INCONCLUSIVE,
    NO_DATA,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Median,
    Ratio,
    RatioOfRatios,
    matches,
    ratio_claim,
)
from protolab.reproduce.cli import companion_experiments, experiment_of, figure_named
from protolab.reproduce.data import planned_row
from protolab.reproduce.estimators import MIN_CONFIGURATIONS, Improvement, in_region
from protolab.reproduce.figures import FIGURES, merged
from protolab.run.runner import plan


def _rows(mode: str, page: str, values: list[float], **extra: Any) -> list[dict[str, Any]]:
    return [{"mode": mode, "page": page, "plt_ms": v, **extra} for v in values]


# Two pages, 8 loads per cell: medians 200 / 100 (small) and 4000 / 1000 (large) at 2% loss.
ROWS = (
    _rows("h2", "small", [200, 210, 190, 205, 195, 202, 198, 200], loss_pct=2)
    + _rows("h1", "small", [100, 105, 95, 102, 98, 101, 99, 100], loss_pct=2)
    + _rows("h2", "large", [4000, 4100, 3900, 4050, 3950, 4020, 3980, 4000], loss_pct=2)
    + _rows("h1", "large", [1000, 1010, 990, 1005, 995, 1002, 998, 1000], loss_pct=2)
    + _rows("h2", "small", [100, 101, 99, 100, 102, 98, 100, 100], loss_pct=0)
    + _rows("h1", "small", [100, 101, 99, 100, 102, 98, 100, 100], loss_pct=0)
    + _rows("h2", "large", [1000, 1010, 990, 1000, 1020, 980, 1000, 1000], loss_pct=0)
    + _rows("h1", "large", [1000, 1010, 990, 1000, 1020, 980, 1000, 1000], loss_pct=0)
)
SLOWER = Ratio("plt_ms", {"mode": "h2", "loss_pct": 2}, {"mode": "h1", "loss_pct": 2}, by="page")


def test_ratio_over_two_pages_combines_the_order_statistic_intervals_of_its_medians() -> None:
    estimate = SLOWER.estimate(ROWS)
    assert estimate is not None and estimate.has_interval
    # small: 200/100 = 2, large: 4000/1000 = 4 -> sqrt(8)
    assert estimate.value == pytest.approx(8 ** 0.5)
    # 4 medians at 0.95^(1/4) = 98.7% each: 8 values give [min, max] (coverage 1 - 2^-7 = 99.2%);
    # the ratio's ends take the numerators' low ends over the denominators' high ends.
    assert estimate.low == pytest.approx(math.sqrt(190 / 105 * 3900 / 1010))
    assert estimate.high == pytest.approx(math.sqrt(210 / 95 * 4100 / 990))
    assert (estimate.groups, estimate.n) == (2, 32)
    assert estimate.method == "order statistics of 4 medians at 98.73% each"


def test_ratio_over_three_or_more_pages_is_a_t_interval_on_the_per_page_log_ratios() -> None:
    rows = [row for page, ratio in (("a", 2.0), ("b", 2.2), ("c", 2.4))
            for row in _rows("h2", page, [100 * ratio]) + _rows("h1", page, [100.0])]
    estimate = Ratio("plt_ms", {"mode": "h2"}, {"mode": "h1"}, by="page").estimate(rows)
    assert estimate is not None and estimate.method == "t over 3 groups"
    logs = [math.log(2.0), math.log(2.2), math.log(2.4)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    t_975_2 = 4.302652729911275  # Student t, 2 degrees of freedom, 97.5th percentile
    assert estimate.value == pytest.approx(math.exp(mean))
    assert estimate.low == pytest.approx(math.exp(mean - t_975_2 * sd / math.sqrt(3)))
    assert estimate.high == pytest.approx(math.exp(mean + t_975_2 * sd / math.sqrt(3)))


def test_verdicts_follow_the_ci_against_the_expected_interval_and_say_why() -> None:
    slower = Claim("h2 slower", SLOWER, low=1.0).check(ROWS)
    assert slower.outcome == REPRODUCED and slower.reason == "CI [2.64, 3.03] inside > 1"
    faster = Claim("h2 faster", SLOWER, high=1.0).check(ROWS)
    assert faster.outcome == NOT_REPRODUCED and faster.reason == "CI [2.64, 3.03] outside < 1"
    straddles = Claim("below 2.83", SLOWER, low=2.0, high=2.83).check(ROWS)
    assert straddles.outcome == INCONCLUSIVE and straddles.reason == "CI [2.64, 3.03] straddles 2.83"
    same = Ratio("plt_ms", {"mode": "h2", "loss_pct": 0}, {"mode": "h1", "loss_pct": 0}, by="page")
    assert Claim("equal within 10%", same, low=0.9, high=1.1).check(ROWS).outcome == REPRODUCED
    missing = Claim("missing", Ratio("plt_ms", {"mode": "h3"}, {"mode": "h1"})).check(ROWS)
    assert missing.outcome == NO_DATA and missing.estimate is None and missing.reason


def test_a_ratio_claim_writes_the_shared_condition_once() -> None:
    claim = ratio_claim("h2 slower at 2% loss", "plt_ms", {"mode": "h2"}, {"mode": "h1"}, where={"loss_pct": 2},
                        by="page", low=1.0, paper="001")
    assert claim == Claim("h2 slower at 2% loss", SLOWER, low=1.0, paper="001")
    assert claim.check(ROWS).reason == "CI [2.64, 3.03] inside > 1"
    with pytest.raises(ValueError, match="claim 'clash': mode given both in where"):
        ratio_claim("clash", "plt_ms", {"mode": "h2"}, {"mode": "h1"}, where={"mode": "h3"})


def test_too_few_values_are_inconclusive_with_the_reason_not_reproduced() -> None:
    two = _rows("h2", "x", [0.7, 0.8], pair="q")
    median = Claim("more than half", Median("plt_ms", {"pair": "q"}), low=0.5).check(two)
    assert median.outcome == INCONCLUSIVE
    assert median.reason == "n = 2 < 6 values needed for a 95% interval of a median"
    assert median.estimate is not None and median.estimate.value == pytest.approx(0.75)
    # One page, 3 loads per protocol: a 10x difference still does not decide (7 per cell needed).
    one_page = _rows("h2", "x", [1000, 1100, 1050]) + _rows("h1", "x", [100, 110, 105])
    ratio = Claim("h2 slower", Ratio("plt_ms", {"mode": "h2"}, {"mode": "h1"}, by="page"), low=1.0).check(one_page)
    assert ratio.outcome == INCONCLUSIVE and ratio.reason.startswith("n = 3 < 7 values per cell")
    assert Median("plt_ms", {}).minimum() == "6 values"


def test_ratio_of_ratios_and_median() -> None:
    hurt = RatioOfRatios("plt_ms", {"mode": "h2", "loss_pct": 2}, {"mode": "h2", "loss_pct": 0},
                         {"mode": "h1", "loss_pct": 2}, {"mode": "h1", "loss_pct": 0}, by="page")
    estimate = hurt.estimate(ROWS)
    assert estimate is not None and estimate.value == pytest.approx(8 ** 0.5)  # (2/1)/(1/1) and (4/1)/(1/1)
    # 8 medians at 0.95^(1/8) = 99.36% each need 9 values per cell; these have 8.
    assert not estimate.has_interval and estimate.shortfall.startswith("n = 8 < 9 values per cell")
    median = Median("plt_ms", {"mode": "h1", "page": "large", "loss_pct": 2}).estimate(ROWS)
    # 8 values: k = 1 ([min, max], 99.2%); k = 2 would cover 1 - 2 * 9/256 = 93%.
    assert median is not None and median.value == 1000 and (median.low, median.high) == (990, 1010)


def test_verdicts_are_deterministic_and_serialise() -> None:
    claim = Claim("h2 slower", Ratio("plt_ms", {"mode": "h2"}, {"mode": "h1"}, by="page"), low=1.0, paper="001")
    first, second = claim.check(ROWS), claim.check(ROWS)
    assert first == second
    data = json.loads(json.dumps(first.to_dict()))
    assert data["verdict"] in (REPRODUCED, INCONCLUSIVE, NOT_REPRODUCED) and data["reason"]
    assert data["expected"] == {"low": 1.0, "high": None} and data["estimate"]["confidence"] == 0.95
    assert data["estimate"]["method"].startswith("order statistics") and data["budget"] is None
    few = Claim("few", Median("plt_ms", {"mode": "h2", "page": "x"}), low=1.0).check(_rows("h2", "x", [5.0]))
    text = json.dumps(few.to_dict(), allow_nan=False)  # no NaN in reproduce.json
    assert json.loads(text)["estimate"]["ci_low"] is None


def test_filters_compare_numbers_as_numbers_and_the_rest_exactly() -> None:
    assert matches({"loss_pct": 2.0, "congested": True}, {"loss_pct": 2, "congested": True})
    assert not matches({"loss_pct": 2.0}, {"loss_pct": 0.5})
    assert not matches({"congested": 1}, {"congested": True})
    assert not matches({}, {"mode": "h2"})


def test_merged_overrides_replace_lists_and_merge_tables() -> None:
    base = {"repetitions": 30, "axes": {"mode": ["h1", "h2"], "page": ["a", "b", "c"]}, "params": {"x": 1}}
    out = merged(base, {"repetitions": 2, "axes": {"page": ["a"]}})
    assert out == {"repetitions": 2, "axes": {"mode": ["h1", "h2"], "page": ["a"]}, "params": {"x": 1}}
    assert base["axes"]["page"] == ["a", "b", "c"]  # not changed in place


def _planned_rows(figure: Any, quick: bool) -> list[dict[str, Any]]:
    """What the claims' filters can select: one row per planned run (with companion specs, each
    row tagged with its experiment, as the judged rows are)."""
    experiments = [experiment_of(figure, quick), *companion_experiments(figure, quick)]
    if len(experiments) == 1:
        return [planned_row(run) for run in plan(experiments[0])]
    return [{**planned_row(run), "experiment": experiment.name} for experiment in experiments for run in plan(experiment)]


def _filters(claim: Claim) -> list[dict[str, Any]]:
    return [dict(where) for where in claim.estimator.filters()]


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f.id)
def test_a_budget_is_no_less_than_the_repetitions_it_starts_from(figure: Any) -> None:
    for quick, budget in ((True, figure.quick_budget), (False, figure.budget)):
        assert budget == 0 or budget >= experiment_of(figure, quick).spec.repetitions, (figure.id, quick)


def test_every_explanation_names_a_claim_of_its_figure() -> None:
    """An explanation is matched to its claim by the statement (atlas.claim_outcome): a typo
    would leave a measured explanation unattached and its claim counted as unexplained."""
    for figure in FIGURES:
        statements = {c.statement for c in figure.claims}
        for explanation in figure.explanations:
            assert explanation.claim == "" or explanation.claim in statements, (figure.id, explanation.claim)


@pytest.mark.parametrize("quick", [True, False])
# The passive figures' claims select rows of the corpus' analysis, not runs
# (test_reproduce_passive.py checks them on a fixed corpus).
@pytest.mark.parametrize("figure", [f for f in FIGURES if not f.not_runnable and not f.after_run], ids=lambda f: f.id)
def test_every_claim_selects_runs_that_the_spec_plans(figure: Any, quick: bool) -> None:
    rows = _planned_rows(figure, quick)
    assert rows, figure.id
    for claim in figure.claims:
        for where in _filters(claim):
            assert any(matches(row, where) for row in rows), f"{figure.id} quick={quick}: {claim.statement}: {where}"
    if quick:
        assert len(rows) <= len(_planned_rows(figure, False)) and len(rows) <= 100, figure.id
    else:  # a claim over a region of configurations has enough of them in the full variant
        for claim in figure.claims:
            region = getattr(claim.estimator, "region", None)
            if region:
                configurations = {(r["bandwidth_mbps"], r["rtt_ms"]) for r in rows if in_region(r, region)}
                assert len(configurations) >= (MIN_CONFIGURATIONS if isinstance(claim.estimator, Improvement) else 1), \
                    f"{figure.id}: {claim.statement}"


def _protolab(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "protolab", *args], capture_output=True, text=True, cwd=cwd, timeout=900,
                          check=False)


def test_reproduce_lists_and_refuses_unknown_figures() -> None:
    listed = _protolab("reproduce", "--list")
    assert listed.returncode == 0, listed.stderr
    for figure in FIGURES:
        assert figure.id in listed.stdout
    unknown = _protolab("reproduce", "fig-99")
    assert unknown.returncode != 0 and "no figure 'fig-99'" in unknown.stderr and "001-fig5" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    with pytest.raises(Exception, match="no figure"):
        figure_named("fig-99")
    missing = _protolab("reproduce", "003-overhead", "--evaluate-only", "--results", "/nonexistent/pl-results")
    assert missing.returncode != 0 and "no results.duckdb" in missing.stderr


def test_quick_overhead_figure_end_to_end(emu_binary: Path, tmp_path: Path) -> None:
    """003's overhead factor through the emulator: 4 RPM runs of at most 8 s, judged and written."""
    results = tmp_path / "repro"
    done = _protolab("reproduce", "003-overhead", "--quick", "--budget", "0", "--results", str(results))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    document = json.loads((results / "reproduce.json").read_text())
    assert document["schema"] == "protolab.reproduce" and document["schema_version"] == 2
    assert document["quick"] is True and document["figure"]["id"] == "003-overhead"
    assert document["rows"] == 4 and document["budget"] == 0
    assert [r["repetitions"] for r in document["rounds"]] == [1]  # --budget 0: no adaptive round
    seeds, wire = document["claims"][0], document["claims"][1]
    assert (seeds["whose"], wire["whose"]) == ("seed", "protolab")
    # 2 runs per protocol are too few for a 95% interval of a median (6): undecided, and it says so.
    assert seeds["verdict"] == INCONCLUSIVE and seeds["reason"].startswith("n = 2 < 6 values")
    # The test's goodput stays below the configured rate, and QUIC puts a little more than its
    # payload on the wire, whatever the verdict bands.
    assert seeds["estimate"]["value"] > 1.0
    assert 1.0 < wire["estimate"]["value"] < 1.15
    assert "claims reproduced" in done.stdout


def test_queue_fill_is_the_largest_occupancy_over_the_limit() -> None:
    from protolab.reproduce.data import queue_fill

    assert queue_fill({"configured_queue": '{"kind": "droptail", "bytes": 125000}', "max_queue_bytes": 124000,
                       "max_queue_packets": 83}) == pytest.approx(0.992)
    assert queue_fill({"configured_queue": {"kind": "droptail", "packets": 1000}, "max_queue_bytes": 1500,
                       "max_queue_packets": 1}) == pytest.approx(0.001)
    assert queue_fill({"configured_queue": None, "max_queue_bytes": 10}) is None
    assert queue_fill({"configured_queue": '{"kind": "droptail"}', "max_queue_bytes": 10}) is None
