"""Adaptive repetitions of `protolab reproduce` (reproduce/adaptive.py) without a lab: a fake run
function that adds the rows of the new repetitions, and the real claims judging them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from protolab.reproduce.adaptive import needed_runs, next_repetitions, run_adaptively
from protolab.reproduce.claims import (
    INCONCLUSIVE,
    INCONCLUSIVE_AT_BUDGET,
    NO_DATA,
    REPRODUCED,
    Claim,
    Median,
    Verdict,
)
from protolab.reproduce.cli import experiment_of, figure_named
from protolab.run.runner import plan


class FakeLab:
    """Rows per repetition: `shares[pair](repetition)` is that run's share; running at a count
    adds only the repetitions not yet run (as the runner's resume does)."""

    def __init__(self, shares: dict[str, Any]) -> None:
        self.shares = shares
        self.rows: list[dict[str, Any]] = []
        self.done = 0
        self.calls: list[tuple[int, int]] = []  # (repetitions asked, repetitions newly run)
        self.asked: list[list[str] | None] = []  # the undecided claims each round grows for

    def run(self, repetitions: int, claims: list[Claim] | None) -> None:
        self.calls.append((repetitions, repetitions - self.done))
        self.asked.append(None if claims is None else [c.statement for c in claims])
        for repetition in range(self.done, repetitions):
            self.rows += [{"pair": pair, "share_a": share(repetition)} for pair, share in self.shares.items()]
        self.done = max(self.done, repetitions)

    def judge(self, claims: list[Claim]) -> tuple[list[Verdict], int]:
        return [claim.check(self.rows) for claim in claims], len(self.rows)


MORE_THAN_HALF = Claim("a gets more", Median("share_a", {"pair": "a vs b"}), low=0.5)
MISSING = Claim("c gets more", Median("share_a", {"pair": "c vs d"}), low=0.5)


def test_a_claim_inconclusive_on_3_runs_decides_at_round_2() -> None:
    lab = FakeLab({"a vs b": lambda r: 0.70 + 0.01 * (r % 3)})
    messages: list[str] = []
    outcome = run_adaptively(3, 12, lab.run, lambda: lab.judge([MORE_THAN_HALF, MISSING]), messages.append)
    assert lab.calls == [(3, 3), (6, 3)]  # doubled; only the new repetitions ran
    assert lab.asked == [None, ["a gets more"]]  # first every cell, then what the undecided claim reads
    assert [(r.repetitions, r.rows, r.undecided) for r in outcome.rounds] == [(3, 3, 1), (6, 6, 0)]
    decided, missing = outcome.verdicts
    assert decided.outcome == REPRODUCED and decided.estimate is not None and decided.estimate.n == 6
    assert missing.outcome == NO_DATA  # no data does not grow the runs and is not "at budget"
    assert messages[0].startswith("round 2: 1 claim undecided (a gets more): 3 -> 6 repetitions per cell (budget 12)")


def test_a_claim_that_never_decides_is_inconclusive_at_the_budget() -> None:
    lab = FakeLab({"a vs b": lambda r: 0.3 if r % 2 else 0.7})  # the median sits on 0.5
    outcome = run_adaptively(2, 10, lab.run, lambda: lab.judge([MORE_THAN_HALF]))
    assert [call[0] for call in lab.calls] == [2, 4, 8, 10]  # doubling, capped at the budget
    verdict = outcome.verdicts[0]
    assert verdict.outcome == INCONCLUSIVE_AT_BUDGET and verdict.budget == 10 and outcome.repetitions == 10
    assert verdict.label() == "inconclusive at budget 10"
    assert verdict.reason == "CI [0.3, 0.7] straddles 0.5; still so at the budget of 10 repetitions per cell"
    assert verdict.to_dict()["verdict"] == "inconclusive at budget" and verdict.to_dict()["budget"] == 10


def test_without_a_budget_there_is_one_round_and_a_plain_verdict() -> None:
    lab = FakeLab({"a vs b": lambda r: 0.7})
    outcome = run_adaptively(2, 0, lab.run, lambda: lab.judge([MORE_THAN_HALF]))
    assert lab.calls == [(2, 2)] and len(outcome.rounds) == 1
    assert outcome.verdicts[0].outcome == INCONCLUSIVE and outcome.verdicts[0].budget is None


def test_next_repetitions_doubles_up_to_the_budget() -> None:
    assert [next_repetitions(r, 30) for r in (1, 2, 3, 16, 29)] == [2, 4, 6, 30, 30]


def test_raising_the_repetitions_keeps_the_keys_of_the_runs_already_done() -> None:
    """What makes a round resume: a run's key holds its repetition, not the count."""
    figure = figure_named("001-fig7")
    small = {run.key for run in plan(experiment_of(figure, True, repetitions=2))}
    large = plan(experiment_of(figure, True, repetitions=5))
    assert small < {run.key for run in large}
    assert len(large) == 5 * len(small) // 2
    assert {run.repetition for run in large if run.key not in small} == {2, 3, 4}


def test_a_round_grows_only_the_cells_the_undecided_claims_read() -> None:
    figure = figure_named("004-fig8-10")
    runs = plan(experiment_of(figure, True, repetitions=4))
    long_rtt = next(c for c in figure.claims if "800 ms" in c.statement)
    needed = needed_runs([long_rtt], runs)
    assert needed is not None
    grown = [run for run in runs if needed(run)]
    assert grown and len(grown) < len(runs)
    assert {run.condition.rtt_ms for run in grown} == {800} and {run.mode for run in grown} == {"h3", "h1c"}
    # A filter no planned run can answer (a column of another row source): every run grows.
    unknown = Claim("?", Median("share_a", {"link": "p1.reverse"}), low=0.5)
    assert needed_runs([long_rtt, unknown], runs) is None


def test_the_store_says_the_repetitions_last_run(tmp_path: Path) -> None:
    """What --evaluate-only compares with the budget."""
    from protolab.reproduce.data import recorded_repetitions
    from protolab.store import ResultsStore

    with ResultsStore(tmp_path) as store:
        assert recorded_repetitions(store, "fairness") is None
        six = experiment_of(figure_named("001-fig7"), True, repetitions=6)
        store.upsert_experiment("fairness", "fairness", six.spec_dict(), {})
        assert recorded_repetitions(store, "fairness") == 6


def test_retry_failed_reaches_every_round_with_the_invocations_start(monkeypatch: Any, tmp_path: Path) -> None:
    """`protolab reproduce --retry-failed` reruns the runs that failed before the invocation in
    every round (a later round's cells hold earlier failures too: 002-fig6-3 kept 84 of them),
    and not what failed in this invocation (`failed_since`: ResultsStore.finished_run_keys)."""
    from datetime import datetime

    from protolab.reproduce import cli

    passed: list[tuple[bool, bool, Any]] = []
    monkeypatch.setattr(cli, "execute", lambda *args, needed=None, retry_failed=False, failed_since=None, **kwargs:
                        passed.append((needed is None, retry_failed, failed_since)))
    figure = figure_named("001-fig7")
    started = datetime(2026, 11, 27, 4, 0)
    cli.run_round(figure, True, 2, None, tmp_path, None, None, retry_failed_before=started)
    cli.run_round(figure, True, 4, list(figure.claims[:1]), tmp_path, None, None, retry_failed_before=started)
    cli.run_round(figure, True, 2, None, tmp_path, None, None)
    assert passed == [(True, True, started), (False, True, started), (True, False, None)]


def test_a_round_runs_the_companion_specs_in_every_cell(monkeypatch: Any, tmp_path: Path) -> None:
    """A figure's companions (Figure.companions) run in each round at the round's repetitions,
    every cell, into the same store; their rows join the figure's tagged with their experiment."""
    from protolab.reproduce import cli

    executed: list[tuple[str, int, bool]] = []
    monkeypatch.setattr(cli, "execute", lambda experiment, *args, needed=None, retry_failed=False, **kwargs:
                        executed.append((experiment.name, experiment.spec.repetitions, needed is None)))
    figure = figure_named("004-fig13-15")
    cli.run_round(figure, True, 3, None, tmp_path, None, None)
    cli.run_round(figure, True, 6, list(figure.claims[2:]), tmp_path, None, None)
    assert executed == [("fairness-004-offload", 3, True), ("fairness-004-offload-one", 3, True),
                        ("fairness-004-offload", 6, True), ("fairness-004-offload-one", 6, True)]
    assert cli.companion_names(figure) == ("fairness-004-offload-one",)


def test_companion_rows_are_tagged_with_their_experiment(monkeypatch: Any) -> None:
    from protolab.reproduce import cli

    monkeypatch.setattr(cli, "rows_of", lambda store, source, experiment: [{"pair": "tcp vs h3", "from": experiment}])
    figure = figure_named("004-fig13-15")
    rows = cli.figure_rows(None, figure, "fairness-004-offload", ("fairness-004-offload-one",))  # type: ignore[arg-type]
    assert rows == [{"pair": "tcp vs h3", "from": "fairness-004-offload", "experiment": "fairness-004-offload"},
                    {"pair": "tcp vs h3", "from": "fairness-004-offload-one", "experiment": "fairness-004-offload-one"}]
    # Without companions the rows are the source's, untagged.
    assert cli.figure_rows(None, figure, "x") == [{"pair": "tcp vs h3", "from": "x"}]  # type: ignore[arg-type]


def test_a_rejudging_keeps_the_rounds_and_wall_time_of_the_run(tmp_path: Path) -> None:
    """--evaluate-only rewrote reproduce.json with no rounds and its own seconds as the wall time;
    it keeps the earlier document's (same figure and variant) and reports its time apart."""
    from protolab.reproduce.cli import SCHEMA, keep_earlier_rounds

    path = tmp_path / "reproduce.json"
    rounds = [{"repetitions": 5, "runs": 150}, {"repetitions": 10, "runs": 150}]
    path.write_text(json.dumps({"schema": SCHEMA, "figure": {"id": "001-fig6c"}, "quick": False,
                                "rounds": rounds, "wall_time_s": 1680.0}))

    def rejudged(figure: str = "001-fig6c", quick: bool = False) -> dict[str, Any]:
        document = {"schema": SCHEMA, "figure": {"id": figure}, "quick": quick, "rounds": [], "wall_time_s": 2.5}
        keep_earlier_rounds(document, path)
        return document

    assert rejudged() == {"schema": SCHEMA, "figure": {"id": "001-fig6c"}, "quick": False, "rounds": rounds,
                          "wall_time_s": 1680.0, "judging_s": 2.5}
    for other in (rejudged("001-fig5c"), rejudged(quick=True)):  # not the same run: nothing kept
        assert other["rounds"] == [] and other["wall_time_s"] is None and other["judging_s"] == 2.5
    path.write_text("{not json")
    assert rejudged()["wall_time_s"] is None
