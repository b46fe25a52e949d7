"""Adaptive repetitions for `protolab reproduce`: run a figure's spec, judge its claims, and
while some claim is inconclusive, raise the spec's repetitions (doubling, capped at the figure's
budget) and run again; a claim still inconclusive at the budget is "inconclusive at budget N".

Running again resumes: a run's key holds its repetition index, not the spec's repetition count
(protolab.run.runner.plan), so the runs already in the store keep their keys and are skipped;
only the new repetitions run. From the second round on, only the cells an undecided claim reads
grow (`needed_runs`: the planned runs its filters select); when a claim's filter selects no
planned run (a row source whose columns a planned run does not name), the whole spec grows.

Pure of I/O itself: the caller gives the functions that run the spec at a repetition count and
judge the store (tests give fakes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from protolab.reproduce.claims import INCONCLUSIVE, INCONCLUSIVE_AT_BUDGET, Claim, Verdict, matches
from protolab.reproduce.data import planned_row
from protolab.run.runner import PlannedRun


@dataclass(frozen=True)
class Round:
    """One run of the spec and the judgement after it."""

    repetitions: int
    rows: int
    undecided: int  # claims inconclusive after this round

    def to_dict(self) -> dict[str, int]:
        return {"repetitions": self.repetitions, "rows": self.rows, "undecided": self.undecided}


@dataclass(frozen=True)
class Outcome:
    verdicts: list[Verdict]
    rows: int
    rounds: list[Round]

    @property
    def repetitions(self) -> int:
        return self.rounds[-1].repetitions


def next_repetitions(current: int, budget: int) -> int:
    """Double the repetitions, capped at the budget."""
    return min(budget, max(2 * current, current + 1))


def undecided(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The claims more repetitions could decide (not those without data: more of the same
    runs do not bring a mode that was never run)."""
    return [v for v in verdicts if v.outcome == INCONCLUSIVE]


def at_budget(verdicts: Sequence[Verdict], repetitions: int) -> list[Verdict]:
    """Every inconclusive verdict turned into "inconclusive at budget `repetitions`"."""
    return [replace(v, outcome=INCONCLUSIVE_AT_BUDGET, budget=repetitions,
                    reason=f"{v.reason}; still so at the budget of {repetitions} repetitions per cell")
            if v.outcome == INCONCLUSIVE else v for v in verdicts]


def needed_runs(claims: Sequence[Claim], runs: Sequence[PlannedRun]) -> Callable[[PlannedRun], bool] | None:
    """Whether a planned run is one the claims read (a filter of theirs selects it); None (every
    run) when some filter of theirs selects no planned run at all."""
    rows = {run.key: planned_row(run) for run in runs}
    keys: set[str] = set()
    for claim in claims:
        for where in claim.estimator.filters():
            selected = {key for key, row in rows.items() if matches(row, where)}
            if not selected:
                return None
            keys |= selected
    return lambda run: run.key in keys


def run_adaptively(
    start: int,
    budget: int,
    run: Callable[[int, list[Claim] | None], object],
    judge: Callable[[], tuple[list[Verdict], int]],
    progress: Callable[[str], object] = lambda _: None,
) -> Outcome:
    """Run with `start` repetitions per cell, judge, and grow while a claim is undecided and the
    repetitions are below `budget` (0 or <= start: one round, no adaptation and no budget
    verdict). `run(repetitions, claims)` runs the spec at that count (resuming), only the cells the
    undecided `claims` read (None: every cell, the first round); `judge()` returns the
    verdicts on the store and the number of rows judged."""
    repetitions = start
    run(repetitions, None)
    verdicts, rows = judge()
    rounds = [Round(repetitions, rows, len(undecided(verdicts)))]
    while undecided(verdicts) and repetitions < budget:
        waiting = undecided(verdicts)
        repetitions = next_repetitions(repetitions, budget)
        progress(f"round {len(rounds) + 1}: {len(waiting)} claim{'s' if len(waiting) > 1 else ''} undecided "
                 f"({'; '.join(v.claim.statement for v in waiting)}): {rounds[-1].repetitions} -> {repetitions} "
                 f"repetitions per cell (budget {budget})")
        run(repetitions, [v.claim for v in waiting])
        verdicts, rows = judge()
        rounds.append(Round(repetitions, rows, len(undecided(verdicts))))
    if budget > 0 and repetitions >= budget:
        verdicts = at_budget(verdicts, repetitions)
    if len(rounds) > 1:
        left = rounds[-1].undecided
        progress(f"{len(rounds)} rounds, {repetitions} repetitions per cell, "
                 f"{left} claim{'' if left == 1 else 's'} undecided")
    return Outcome(verdicts, rows, rounds)
