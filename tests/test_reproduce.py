"""`protolab reproduce`: claims and verdicts on fixed rows (deterministic bootstrap), the figure
registry against the specs it runs, and one quick figure end to end through the emulator."""

from __future__ import annotations

import json
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
)
from protolab.corpus.table1 import SITES
from protolab.reproduce.cli import experiment_of, figure_named
from protolab.reproduce.data import size_class
from protolab.reproduce.figures import FIGURES, merged
from protolab.run.runner import plan


def _rows(mode: str, page: str, values: list[float], **extra: Any) -> list[dict[str, Any]]:
    return [{"mode": mode, "page": page, "plt_ms": v, **extra} for v in values]


ROWS = (
    _rows("h2", "small", [200, 210, 190, 205, 195], loss_pct=2)
    + _rows("h1", "small", [100, 105, 95, 102, 98], loss_pct=2)
    + _rows("h2", "large", [4000, 4100, 3900, 4050, 3950], loss_pct=2)
    + _rows("h1", "large", [1000, 1010, 990, 1005, 995], loss_pct=2)
    + _rows("h2", "small", [100, 101, 99], loss_pct=0)
    + _rows("h1", "small", [100, 101, 99], loss_pct=0)
    + _rows("h2", "large", [1000, 1010, 990], loss_pct=0)
    + _rows("h1", "large", [1000, 1010, 990], loss_pct=0)
)


def test_ratio_is_the_geometric_mean_of_per_page_median_ratios() -> None:
    estimate = Ratio("plt_ms", {"mode": "h2", "loss_pct": 2}, {"mode": "h1", "loss_pct": 2}, by="page").estimate(ROWS)
    assert estimate is not None
    # small: 200/100 = 2, large: 4000/1000 = 4 -> sqrt(8)
    assert estimate.value == pytest.approx(8 ** 0.5)
    assert estimate.low <= estimate.value <= estimate.high
    assert estimate.low > 2.5 and estimate.high < 3.3
    assert (estimate.groups, estimate.n) == (2, 20)


def test_verdicts_follow_the_ci_against_the_expected_interval() -> None:
    slower = Ratio("plt_ms", {"mode": "h2", "loss_pct": 2}, {"mode": "h1", "loss_pct": 2}, by="page")
    assert Claim("h2 slower", slower, low=1.0).check(ROWS).outcome == REPRODUCED
    assert Claim("h2 faster", slower, high=1.0).check(ROWS).outcome == NOT_REPRODUCED
    assert Claim("below 2.83", slower, low=2.0, high=2.83).check(ROWS).outcome == INCONCLUSIVE
    same = Ratio("plt_ms", {"mode": "h2", "loss_pct": 0}, {"mode": "h1", "loss_pct": 0}, by="page")
    assert Claim("equal within 10%", same, low=0.9, high=1.1).check(ROWS).outcome == REPRODUCED
    assert Claim("missing", Ratio("plt_ms", {"mode": "h3"}, {"mode": "h1"})).check(ROWS).outcome == NO_DATA


def test_ratio_of_ratios_and_median() -> None:
    hurt = RatioOfRatios("plt_ms", {"mode": "h2", "loss_pct": 2}, {"mode": "h2", "loss_pct": 0},
                         {"mode": "h1", "loss_pct": 2}, {"mode": "h1", "loss_pct": 0}, by="page")
    estimate = hurt.estimate(ROWS)
    assert estimate is not None and estimate.value == pytest.approx(8 ** 0.5)  # (2/1)/(1/1) and (4/1)/(1/1)
    median = Median("plt_ms", {"mode": "h1", "page": "large", "loss_pct": 2}).estimate(ROWS)
    assert median is not None and median.value == 1000 and 990 <= median.low <= median.high <= 1010


def test_bootstrap_is_deterministic_and_verdicts_serialise() -> None:
    claim = Claim("h2 slower", Ratio("plt_ms", {"mode": "h2"}, {"mode": "h1"}, by="page"), low=1.0, paper="001")
    first, second = claim.check(ROWS), claim.check(ROWS)
    assert first.estimate == second.estimate
    data = json.loads(json.dumps(first.to_dict()))
    assert data["verdict"] in (REPRODUCED, INCONCLUSIVE, NOT_REPRODUCED)
    assert data["expected"] == {"low": 1.0, "high": None} and data["estimate"]["confidence"] == 0.95


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
    """What the claims' filters can select: one row per planned run (mode, page, condition,
    scenario parameters; for pairs the mode is the pair; for overhead, the protocol)."""
    rows = []
    for run in plan(experiment_of(figure, quick)):
        c = run.condition
        row = {**run.params, **dict(c.extras), "mode": run.mode, "page": run.page.name if run.page else None,
               "bandwidth_mbps": c.bandwidth_mbps, "rtt_ms": c.rtt_ms, "loss_pct": c.loss_pct,
               "pair": run.mode, "protocol": run.mode}
        # The rpm source's derived column (protolab.reproduce.data._rpm).
        if c.bandwidth_mbps and c.rtt_ms and c.buffer_bytes:
            row["buffer_bdp"] = round(c.buffer_bytes / (c.bandwidth_mbps * 1e6 * c.rtt_ms / 1e3 / 8), 2)
        # The runs_by_size source's derived column.
        if run.page and run.page.name in SITES:
            row["size_class"] = size_class(SITES[run.page.name].size_kb)
        rows.append(row)
    return rows


def _filters(claim: Claim) -> list[dict[str, Any]]:
    e = claim.estimator
    if isinstance(e, Median):
        return [dict(e.where)]
    if isinstance(e, Ratio):
        return [dict(e.num), dict(e.den)]
    return [dict(e.a), dict(e.a_base), dict(e.b), dict(e.b_base)]


@pytest.mark.parametrize("quick", [True, False])
@pytest.mark.parametrize("figure", [f for f in FIGURES if not f.not_runnable], ids=lambda f: f.id)
def test_every_claim_selects_runs_that_the_spec_plans(figure: Any, quick: bool) -> None:
    rows = _planned_rows(figure, quick)
    assert rows, figure.id
    for claim in figure.claims:
        for where in _filters(claim):
            assert any(matches(row, where) for row in rows), f"{figure.id} quick={quick}: {claim.statement}: {where}"
    if quick:
        assert len(rows) <= len(_planned_rows(figure, False)) and len(rows) <= 100, figure.id


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
    """003's overhead factor through the emulator: 4 bulk runs of 10 s, judged and written."""
    results = tmp_path / "repro"
    done = _protolab("reproduce", "003-overhead", "--quick", "--results", str(results))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    document = json.loads((results / "reproduce.json").read_text())
    assert document["schema"] == "protolab.reproduce" and document["schema_version"] == 1
    assert document["quick"] is True and document["figure"]["id"] == "003-overhead"
    assert document["rows"] == 4
    quic = document["claims"][0]
    assert quic["verdict"] != NO_DATA
    # QUIC carries a little more than TCP on the wire per byte delivered, whatever the verdict band.
    assert 1.0 < quic["estimate"]["value"] < 1.15
    assert "claims reproduced" in done.stdout


def test_queue_fill_is_the_largest_occupancy_over_the_limit() -> None:
    from protolab.reproduce.data import queue_fill

    assert queue_fill({"configured_queue": '{"kind": "droptail", "bytes": 125000}', "max_queue_bytes": 124000,
                       "max_queue_packets": 83}) == pytest.approx(0.992)
    assert queue_fill({"configured_queue": {"kind": "droptail", "packets": 1000}, "max_queue_bytes": 1500,
                       "max_queue_packets": 1}) == pytest.approx(0.001)
    assert queue_fill({"configured_queue": None, "max_queue_bytes": 10}) is None
    assert queue_fill({"configured_queue": '{"kind": "droptail"}', "max_queue_bytes": 10}) is None
