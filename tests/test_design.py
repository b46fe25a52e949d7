"""Experiment designs (docs/spec.md, "Designs"): space-filling points (LHS, Sobol, WSP) over
continuous condition axes, and adaptive repetitions, with fixed seeds and a fake executor."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from protolab.plan.design import (
    _thin,
    ci_half_width,
    converged,
    design_points,
    min_distance,
    relative_ci,
    round_significant,
    scale,
    unit_points,
    wsp,
)
from protolab.plan.experiment import SpecError, spec_from_dict
from protolab.run.runner import (
    Events,
    PlannedRun,
    RunOutcome,
    _metric,
    conditions,
    plan,
    run_experiment,
)
from protolab.store import RunRecord


def _spec(**extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"schema_version": 1, "name": "d", "scenario": "bw-rtt-grid", "seed": 4,
                            "axes": {"mode": ["h2", "h3"], "page": ["baidu"]}}
    spec.update(extra)
    return spec


def _experiment(tmp_path: Path, **extra: Any) -> Any:
    return spec_from_dict(_spec(**extra), source="s.toml", path=tmp_path / "s.toml")


def test_latin_hypercube_hits_every_stratum_once() -> None:
    points = unit_points("lhs", 20, 3, seed=5)
    for dim in range(3):
        strata = np.floor(points[:, dim] * 20).astype(int)
        assert sorted(strata) == list(range(20))


@pytest.mark.parametrize("kind", ["lhs", "sobol", "wsp"])
def test_designs_are_seeded(kind: str) -> None:
    a, b, c = (unit_points(kind, 12, 2, seed=s) for s in (1, 1, 2))
    assert a.shape == (12, 2) and np.array_equal(a, b) and not np.array_equal(a, c)
    assert ((a >= 0) & (a < 1)).all()


def test_wsp_spreads_its_points_further_apart_than_random_ones() -> None:
    points = wsp(30, 2, seed=3)
    assert len(points) == 30
    random_points = np.random.default_rng(3).random((30, 2))
    assert min_distance(points) > 2 * min_distance(random_points)
    assert min_distance(points) >= min_distance(unit_points("lhs", 30, 2, seed=3))


@pytest.mark.parametrize(("points", "dimensions"), [(1, 2), (2, 1), (17, 3), (31, 2), (51, 3), (64, 4)])
def test_wsp_gives_exactly_the_points_asked_for(points: int, dimensions: int) -> None:
    # Some of these counts are no d_min's (the walk jumps past them): the surplus is thinned.
    unit = wsp(points, dimensions, seed=11)
    assert unit.shape == (points, dimensions)
    assert len({tuple(row) for row in unit}) == points
    if points >= 10:  # (a start at the centre puts 2 points on a line 0.5 apart)
        assert min_distance(unit) > 1.5 * min_distance(np.random.default_rng(11).random((points, dimensions)))


def test_thinning_drops_a_point_of_the_closest_pair() -> None:
    points = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.52, 0.5]])
    thinned = _thin(points, 1)
    assert len(thinned) == 4 and min_distance(thinned) == pytest.approx(0.5 ** 0.5, rel=0.05)


def test_rounding_keeps_three_significant_digits_within_the_range() -> None:
    assert [round_significant(v) for v in (123456.0, 0.012345, 1.0, 0.0, 99.96)] == [123000.0, 0.0123, 1.0, 0.0, 100.0]
    # 1.2346 would round to 1.23, below the low end: clamped to the range.
    points = scale(np.array([[0.0001], [0.5], [0.99999]]), [("rtt_ms", 1.2345, 2.3456)], [])
    assert [p["rtt_ms"] for p in points] == [1.2345, 1.79, 2.3456]
    # Rounding merges equal points: fewer conditions, never duplicates.
    assert len(scale(np.array([[0.5001], [0.5002], [0.9]]), [("loss_pct", 0.0, 1.0)], [])) == 2


def test_points_lie_in_their_ranges_on_linear_and_log_scales() -> None:
    points = design_points("lhs", 40, {"bandwidth_mbps": (1, 1000), "rtt_ms": (10, 200)}, ["bandwidth_mbps"], 9)
    assert len(points) == 40
    assert all(1 <= p["bandwidth_mbps"] <= 1000 and 10 <= p["rtt_ms"] <= 200 for p in points)
    # Log scale: about as many points below 31.6 Mbit/s (the geometric middle) as above it.
    below = sum(p["bandwidth_mbps"] < 31.6 for p in points)
    assert 15 <= below <= 25
    assert all(len(f"{p['rtt_ms']:g}".replace(".", "").lstrip("0")) <= 3 for p in points)  # 3 significant digits


def test_a_design_becomes_the_plans_conditions(tmp_path: Path) -> None:
    design = {"kind": "wsp", "points": 6, "ranges": {"bandwidth_mbps": [1, 100], "rtt_ms": [10, 200]},
              "log": ["bandwidth_mbps"]}
    runs = plan(_experiment(tmp_path, design=design))
    conditions = {(r.condition.bandwidth_mbps, r.condition.rtt_ms) for r in runs}
    assert len(conditions) == 6 and len(runs) == 12  # every point x both modes
    again = plan(_experiment(tmp_path, design=design))
    assert [r.key for r in again] == [r.key for r in runs]
    other = plan(_experiment(tmp_path, design={**design, "seed": 99}))
    assert {r.key for r in other} != {r.key for r in runs}


def test_the_default_grid_keeps_run_keys(tmp_path: Path) -> None:
    plain = plan(_experiment(tmp_path))
    grid = plan(_experiment(tmp_path, design={"kind": "grid"}))
    assert [r.key for r in grid] == [r.key for r in plain]


def test_a_design_follows_the_spec_seed(tmp_path: Path) -> None:
    design = {"kind": "lhs", "points": 5, "ranges": {"rtt_ms": [10, 200]}}
    one = [c.rtt_ms for c in conditions(_experiment(tmp_path, design=design))]
    assert one == [c.rtt_ms for c in conditions(_experiment(tmp_path, design=design))]
    assert one != [c.rtt_ms for c in conditions(_experiment(tmp_path, seed=5, design=design))]


def test_a_buffer_range_is_in_bdp_multiples(tmp_path: Path) -> None:
    design = {"kind": "sobol", "points": 8, "ranges": {"buffer": [0.25, 4], "rtt_ms": [10, 100]}, "log": ["buffer"]}
    found = conditions(_experiment(tmp_path, design=design, axes={"mode": ["h2"], "bandwidth_mbps": [10]}))
    assert len(found) == 8
    for condition in found:
        assert condition.buffer.kind == "bdp" and 0.25 <= condition.buffer.value <= 4
        assert condition.as_params()["buffer"] == f"{condition.buffer.value:g}bdp"
    # On a log scale, half the points lie below the geometric middle (1 BDP).
    assert sum(c.buffer.value < 1 for c in found) == 4


def test_adaptive_repetitions_do_not_change_run_keys(tmp_path: Path) -> None:
    plain = plan(_experiment(tmp_path, repetitions=6))
    adaptive = plan(_experiment(tmp_path, repetitions=6, design={"ci_target": 0.1, "min_repetitions": 2}))
    assert [r.key for r in adaptive] == [r.key for r in plain]


@pytest.mark.parametrize(("design", "axes", "message"), [
    ({"kind": "lhs", "ranges": {"rtt_ms": [10, 20]}}, {}, r"design\.points: kind \"lhs\" needs"),
    ({"kind": "sobol", "points": 4}, {}, r"design\.ranges: kind \"sobol\" needs"),
    ({"kind": "lhs", "points": 4, "ranges": {"rtt_ms": [10, 20]}}, {"rtt_ms": [5]}, r"design\.ranges\.rtt_ms: also an axis"),
    ({"kind": "lhs", "points": 4, "ranges": {"rtt_ms": [20, 10]}}, {}, r"design\.ranges\.rtt_ms: the low end 20"),
    ({"kind": "lhs", "points": 4, "ranges": {"loss_pct": [0, 2]}, "log": ["loss_pct"]}, {}, r"design\.log\[0\]: a log"),
    ({"kind": "lhs", "points": 4, "ranges": {"rtt_ms": [10, 20]}, "log": ["loss_pct"]}, {}, r"design\.log\[0\]: loss_pct"),
    ({"kind": "grid", "points": 4}, {}, r"design\.points: only for a space-filling design"),
    ({"kind": "lhs", "points": 4, "ranges": {"mode": [1, 2]}}, {}, r"design\.ranges\.mode: not a numeric condition axis"),
    ({"kind": "lhs", "points": 4, "ranges": {"page": [1, 2]}}, {}, r"design\.ranges\.page: not a numeric condition axis"),
    ({"kind": "lhs", "points": 4, "ranges": {"quic_cc": [1, 2]}}, {}, r"design\.ranges\.quic_cc: not a numeric"),
    ({"kind": "lhs", "points": 4, "ranges": {"jitter": [1, 2]}}, {}, r"design\.ranges\.jitter: unknown axis"),
    ({"kind": "lhs", "points": 4, "ranges": {"buffer": [0, 2]}}, {}, r"design\.ranges\.buffer: .*BDP"),
    ({"kind": "lhs", "points": 4, "ranges": {"rtt_ms": [10, 10]}}, {}, r"design\.ranges\.rtt_ms: the low end 10"),
    ({"kind": "lhs", "points": 4, "ranges": {"rtt_ms": [10, float("inf")]}}, {}, r"design\.ranges\.rtt_ms\[1\]"),
    ({"kind": "lhs", "points": 4, "ranges": {"rtt_ms": [10]}}, {}, r"design\.ranges\.rtt_ms"),
    ({"kind": "lhs", "points": 4, "ranges": {"loss_pct": [0, 200]}}, {}, r"design\.ranges\.loss_pct\[1\]: invalid loss"),
    ({"kind": "halton", "points": 4}, {}, r"design\.kind"),
    ({"kind": "lhs", "points": 0, "ranges": {"rtt_ms": [10, 20]}}, {}, r"design\.points"),
    ({"kind": "wsp", "points": 5000, "ranges": {"rtt_ms": [10, 20]}}, {}, r"design\.points: a wsp design takes at most"),
    ({"kind": "lhs", "points": 2, "ranges": {"bandwidth_mbps": [-5, -1]}}, {}, r"design\.ranges\.bandwidth_mbps"),
    ({"kind": "lhs", "points": 2, "ranges": {"rtt_ms": [10, 20]}, "sobol": 1}, {}, r"design\.sobol: unknown key"),
    ({"min_repetitions": 4}, {}, r"design\.min_repetitions: only with adaptive repetitions"),
    ({"ci_target": 0.05}, {}, r"design\.ci_target: adaptive repetitions need repetitions"),
    ({"ci_target": 1.5}, {}, r"design\.ci_target"),
])
def test_bad_designs_name_the_field(tmp_path: Path, design: dict[str, Any], axes: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=r"s\.toml: " + message):
        _experiment(tmp_path, design=design, axes={"mode": ["h2"], "page": ["baidu"], **axes})


def test_confidence_interval_and_stopping_rule() -> None:
    assert ci_half_width([1.0]) == float("inf")
    assert ci_half_width([10.0, 12.0, 14.0]) == pytest.approx(4.303 * 2 / 3 ** 0.5, rel=1e-3)
    assert not converged([100.0, 100.0], 0.05, 3)  # too few
    assert converged([100.0, 101.0, 99.0], 0.05, 3)
    assert not converged([100.0, 150.0, 60.0], 0.05, 3)


class FakeSession:
    def __init__(self, executed: list[PlannedRun]) -> None:
        self.executed = executed
        self.noise = random.Random(7)

    def enter(self, condition: Any) -> None: ...

    def leave(self, condition: Any) -> None: ...

    def execute(self, run: PlannedRun, run_dir: Path) -> RunOutcome:
        self.executed.append(run)
        # h2 is steady, h3 wildly noisy.
        plt = 500.0 if run.mode == "h2" else self.noise.uniform(100, 2000)
        load = {"schema_version": 1, "kind": "page_load", "config": {"mode": run.mode}, "status": "ok", "error": None,
                "start_unix_ns": 1, "plt_ms": plt, "bytes": 0, "objects": [], "connections": []}
        return RunOutcome("ok", None, load, {}, {"now_ns": 1, "links": {}})


class FakeExecutor:
    def __init__(self) -> None:
        self.executed: list[PlannedRun] = []

    @contextlib.contextmanager
    def session(self, experiment: Any, results_dir: Path) -> Iterator[FakeSession]:
        yield FakeSession(self.executed)

    def provenance(self) -> dict[str, Any]:
        return {"fake": True}


def test_adaptive_repetitions_stop_a_steady_cell_and_run_a_noisy_one_to_the_maximum(tmp_path: Path) -> None:
    experiment = _experiment(tmp_path, repetitions=8, design={"ci_target": 0.05, "min_repetitions": 3},
                             axes={"mode": ["h2", "h3"], "page": ["baidu"], "bandwidth_mbps": [10], "rtt_ms": [20]})
    fake = FakeExecutor()
    summary = run_experiment(experiment, tmp_path / "r", fake)
    per_mode = {mode: sum(r.mode == mode for r in fake.executed) for mode in ("h2", "h3")}
    assert per_mode == {"h2": 3, "h3": 8}
    assert (summary.ok, summary.converged, summary.total) == (11, 5, 16)
    # A second invocation resumes from the store: the steady cell stays converged.
    again = FakeExecutor()
    summary = run_experiment(experiment, tmp_path / "r", again)
    assert again.executed == [] and summary.converged == 5


class Recorder(Events):
    def __init__(self) -> None:
        self.converged_runs: list[PlannedRun] = []

    def converged(self, run: PlannedRun) -> None:
        self.converged_runs.append(run)


class OldStyleEvents:
    """A progress implementation written before the `converged` callback existed."""

    def planned(self, total: int, todo: int, estimate_s: float) -> None: ...

    def starting(self, run: PlannedRun) -> None: ...

    def finished(self, run: PlannedRun, record: Any) -> None: ...

    def note(self, text: str) -> None: ...


def test_converged_runs_are_reported_and_keep_their_keys(tmp_path: Path) -> None:
    axes = {"mode": ["h2", "h3"], "page": ["baidu"], "bandwidth_mbps": [10], "rtt_ms": [20, 40]}
    experiment = _experiment(tmp_path, repetitions=5, design={"ci_target": 0.05}, axes=axes)
    events = Recorder()
    summary = run_experiment(experiment, tmp_path / "r", FakeExecutor(), events)
    assert summary.converged == len(events.converged_runs) == 4  # h2, 2 conditions x reps 3, 4
    assert {(r.mode, r.repetition) for r in events.converged_runs} == {("h2", 3), ("h2", 4)}
    assert summary.failed == 0 and summary.ok == 16
    # Without ci_target the same spec runs exactly the runs left out, under their planned keys.
    full = _experiment(tmp_path, repetitions=5, axes=axes)
    fake = FakeExecutor()
    summary = run_experiment(full, tmp_path / "r", fake, OldStyleEvents())  # type: ignore[arg-type]
    assert sorted(r.key for r in fake.executed) == sorted(r.key for r in events.converged_runs)
    assert (summary.skipped, summary.ok, summary.converged) == (16, 4, 0)


def _record(**fields: Any) -> RunRecord:
    return RunRecord(run_key="k", params={}, status="ok", error=None, started_unix_ns=0, duration_s=1.0, **fields)


def test_the_adaptive_metric_is_the_plt_or_the_bulk_goodput() -> None:
    assert _metric(_record(page_load={"plt_ms": 812.5})) == 812.5
    assert _metric(_record(bulk=[{"goodput_bps": 4e6}, {"goodput_bps": 5e6}])) == 9e6
    # Pairs (sides) have no single number: their cells run every repetition, as the store has no value.
    assert _metric(_record(bulk=[{"goodput_bps": 4e6, "side": "a"}, {"goodput_bps": 5e6, "side": "b"}])) is None
    assert _metric(_record()) is None


def test_relative_confidence_interval() -> None:
    assert relative_ci([100.0, 100.0, 100.0]) == 0.0
    assert relative_ci([0.0, 0.0]) == float("inf")
    assert relative_ci([90.0, 110.0]) == pytest.approx(12.706 * 10 / 100, rel=1e-3)  # sd 14.1, /sqrt(2)


def test_a_cluster_worker_leaves_out_converged_runs_as_a_local_run_does(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Adaptive repetitions on a cluster: a block holds every repetition of its condition, so the
    worker judges convergence itself, from the values the coordinator passes (resume)."""
    from protolab.run import cluster

    experiment = _experiment(tmp_path, repetitions=8, design={"ci_target": 0.05, "min_repetitions": 3},
                             axes={"mode": ["h2", "h3"], "page": ["baidu"], "bandwidth_mbps": [10], "rtt_ms": [20]})
    fake = FakeExecutor()
    monkeypatch.setattr(cluster, "LabExecutor", lambda workloads, lab_name: fake)
    (block,) = cluster.blocks(plan(experiment))
    spec = experiment.spec.model_dump(mode="json", exclude_unset=True)
    records = cluster.execute_block(spec, str(tmp_path / "s.toml"), [run.key for run in block], str(tmp_path / "r"))
    per_mode = {mode: sum(r.mode == mode for r in fake.executed) for mode in ("h2", "h3")}
    assert per_mode == {"h2": 3, "h3": 8} and len(records) == 11
    # Values the coordinator already had (a resumed sweep): the steady cell runs nothing more.
    steady = cluster.Adaptive(experiment, None, block, values={}).values_for(block)
    assert steady == {}
    prior = {json_cell: [500.0] * 3 for json_cell in _cells_of(block, "h2")}
    fake.executed.clear()
    cluster.execute_block(spec, str(tmp_path / "s.toml"), [r.key for r in block if r.repetition >= 3],
                          str(tmp_path / "r2"), prior)
    assert {r.mode for r in fake.executed} == {"h3"}


def _cells_of(runs: list[PlannedRun], mode: str) -> set[str]:
    from protolab.run.runner import _cell

    return {_cell(run) for run in runs if run.mode == mode}
