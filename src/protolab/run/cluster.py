"""Sweeps on a Dask cluster (docs/cluster.md): `protolab run SPEC --cluster tcp://HOST:8786`
spreads an experiment's unfinished runs over Dask workers (`protolab worker`), one lab per
worker process, and records every run in the one results store as the local runner does.

The coordinator plans the runs (the same plan, keys and order as a local run), groups them in
blocks of one condition each, at most `BLOCK_RUNS` runs (a lab session enters a condition once
for its block), and submits one task per block. A worker rebuilds the experiment from the spec,
runs its block in its own lab (named after the worker, so two workers on one machine never share
one) and returns the
run records; the coordinator alone writes the store, adding the worker's name to each run. A
worker that dies takes its block's unreturned runs with it: the scheduler gives the block to
another worker (the emulator of the dead worker's lab cleans up after its owner). Resume works
as locally: a second invocation skips the runs the store already has.

Workers must see the spec, its pages and the results directory at the same paths as the
coordinator (one machine, or a shared file system).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from protolab.errors import ProtolabError
from protolab.plan.experiment import Experiment, spec_from_dict
from protolab.run.dask_client import TASK_RETRIES, ClusterError, connect, worker_names
from protolab.run.executors import EXECUTORS
from protolab.run.runner import (
    Adaptive,
    Events,
    PlannedRun,
    Summary,
    _cell,
    _execute_one,
    _metric,
    estimate_s,
    experiment_provenance,
    plan,
)
from protolab.run.session import LabExecutor
from protolab.results.record import RunRecord
from protolab.store import ResultsStore


BLOCK_RUNS = 40
"""The most runs in a block (a cell of adaptive repetitions is never split, so one cell may hold
more). Small enough that a condition's runs are shared by all the labs (a sweep of two conditions
kept two of three labs busy when a block was a whole condition) and that an interrupt loses little
(a block's records reach the store when the block ends); large enough that a lab's set-up
(topology, delay calibration: seconds) stays a small part of a block's minutes."""


def blocks(runs: list[PlannedRun], max_runs: int = BLOCK_RUNS, whole_cells: bool = False) -> list[list[PlannedRun]]:
    """The units of work of the workers: the runs of one condition, at most `max_runs` each, every
    block in plan order. Without `whole_cells`, a condition's consecutive runs are cut in equal
    consecutive parts. With it (adaptive repetitions: a worker judges a cell's convergence from
    the repetitions it ran), every run of a cell goes into the same block: the cells are dealt to
    the condition's blocks, each to the one with the fewest runs so far."""
    out: list[list[PlannedRun]] = []
    for condition_runs in _by_condition(runs):
        parts = -(-len(condition_runs) // max_runs)
        if not whole_cells:
            size, extra = divmod(len(condition_runs), parts)
            start = 0
            for index in range(parts):
                end = start + size + (1 if index < extra else 0)
                out.append(condition_runs[start:end])
                start = end
            continue
        cells = [_cell(run) for run in condition_runs]  # a JSON text each: made once
        runs_per_cell = Counter(cells)
        loads = [0] * min(parts, len(runs_per_cell))
        part_of: dict[str, int] = {}
        for cell, count in runs_per_cell.most_common():
            part = loads.index(min(loads))
            part_of[cell] = part
            loads[part] += count
        for part in range(len(loads)):
            out.append([run for run, cell in zip(condition_runs, cells, strict=True) if part_of[cell] == part])
    return out


def _by_condition(runs: list[PlannedRun]) -> list[list[PlannedRun]]:
    """Consecutive runs of one condition, in plan order."""
    out: list[list[PlannedRun]] = []
    for run in runs:
        if out and out[-1][0].condition == run.condition:
            out[-1].append(run)
        else:
            out.append([run])
    return out


def worker_lab_name(worker: str) -> str:
    """A lab name ([a-z0-9]{1,10}) of its own for each worker process."""
    return "w" + hashlib.sha256(f"{worker}/{os.getpid()}".encode()).hexdigest()[:8]


def execute_block(spec: dict[str, Any], spec_path: str | None, keys: list[str], results_dir: str,
                  prior: dict[str, list[float]] | None = None) -> list[RunRecord]:
    """Runs on a worker: the runs `keys` of the experiment, in order, in a lab of the worker.
    With adaptive repetitions ([design] ci_target) a run whose cell has converged is left out
    (no record): `prior` holds the values the coordinator knew for the block's cells, and a
    block then holds every repetition of its cells, so the worker judges as a local run would."""
    worker = _worker_name()
    path = Path(spec_path) if spec_path else None
    experiment = spec_from_dict(spec, source=spec_path or "spec", path=path)
    planned = {run.key: run for run in plan(experiment)}
    missing = [key for key in keys if key not in planned]
    if missing:
        raise ClusterError(f"worker {worker}: the spec does not plan runs {missing[:3]} (a different spec file?)")
    runs = [planned[key] for key in keys]
    out = Path(results_dir)
    adaptive = Adaptive(experiment, None, runs, values=prior or {})
    records = []
    executor = LabExecutor(workloads=EXECUTORS, lab_name=worker_lab_name(worker))
    with executor.session(experiment, out) as session:
        session.enter(runs[0].condition)
        try:
            for run in runs:
                if adaptive.skip(run):
                    continue
                record = _execute_one(session, run, out, Events())
                record.params["worker"] = worker
                adaptive.add(run, record.status, _metric(record))
                records.append(record)
        finally:
            with contextlib.suppress(ProtolabError):
                session.leave(runs[0].condition)
    return records


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except ValueError:  # not in a worker (tests call execute_block directly)
        return f"local-{os.getpid()}"


def run_on_cluster(experiment: Experiment, results_dir: Path, address: str, events: Events | None = None,
                   retry_failed: bool = False, failed_since: datetime | None = None) -> Summary:
    """Like `protolab.run.runner.run_experiment`, with the runs executed by the cluster's workers."""
    from distributed import as_completed

    events = events or Events()
    results_dir = results_dir.resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    runs = plan(experiment)
    started = time.monotonic()
    # As written (unset fields left out): some checks depend on what the spec sets.
    spec = experiment.spec.model_dump(mode="json", exclude_unset=True)
    spec_path = str(experiment.path.resolve()) if experiment.path is not None else None
    with ResultsStore(results_dir) as store, connect(address) as client:
        provenance = experiment_provenance(LabExecutor(workloads=EXECUTORS), experiment)
        provenance["cluster"] = {"scheduler": address, "workers": worker_names(client)}
        store.upsert_experiment(experiment.name, experiment.name, experiment.spec_dict(), provenance)
        finished = store.finished_run_keys(experiment.name, retry_failed=retry_failed, failed_since=failed_since)
        todo = [run for run in runs if run.key not in finished]
        summary = Summary(experiment.name, results_dir, total=len(runs), skipped=len(runs) - len(todo))
        # The estimate is of the wall time: the runs' sum shared by the workers.
        workers = max(1, len(provenance["cluster"]["workers"]))
        events.planned(len(runs), len(todo), sum(estimate_s(run, experiment.params) for run in todo) / workers)
        by_key = {run.key: run for run in todo}
        adaptive = Adaptive(experiment, store, runs)
        on_converged = getattr(events, "converged", None)
        block_keys: dict[str, list[str]] = {}
        futures = []
        planned_blocks = blocks(todo, whole_cells=adaptive.target is not None)
        if planned_blocks:
            events.note(f"{len(planned_blocks)} blocks of at most {max(map(len, planned_blocks))} runs on {workers} "
                        f"workers; a block's runs are recorded when it ends")
        status = getattr(events, "status", None)
        if status is not None:
            status(f"0 of {len(planned_blocks)} blocks done")
        for block in planned_blocks:
            future = _submit_block(client, experiment.name, spec, spec_path, block, results_dir, adaptive)
            block_keys[future.key] = [run.key for run in block]
            futures.append(future)
        try:
            for done_blocks, future in enumerate(as_completed(futures), start=1):
                try:
                    records: list[RunRecord] = future.result()
                except Exception as exc:  # a block failed beyond its retries (a worker error, not a run's)
                    raise ClusterError(f"a block of runs failed on the cluster: {type(exc).__name__}: {exc}") from exc
                for record in records:
                    store.record_run(experiment.name, record)
                    setattr(summary, record.status, getattr(summary, record.status) + 1)
                    events.finished(by_key[record.run_key], record)
                recorded = {record.run_key for record in records}
                for key in block_keys[future.key]:
                    if key not in recorded:  # left out on the worker: its cell converged
                        summary.converged += 1
                        if on_converged is not None:
                            on_converged(by_key[key])
                if status is not None:
                    status(f"{done_blocks} of {len(planned_blocks)} blocks done")
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    summary.duration_s = time.monotonic() - started
    return summary


def _submit_block(client: Any, name: str, spec: dict[str, Any], spec_path: str | None, block: list[PlannedRun],
                  results_dir: Path, adaptive: Adaptive) -> Any:
    """One task for `block` (retried on another worker if its worker dies), with the values the
    coordinator knows for its cells under adaptive repetitions."""
    prior = adaptive.values_for(block) if adaptive.target is not None else None
    return client.submit(execute_block, spec, spec_path, [run.key for run in block], str(results_dir), prior,
                         key=f"protolab-{name}-{block[0].key}", pure=False, retries=TASK_RETRIES)


def serve_worker(scheduler: str, name: str | None = None) -> None:
    """`protolab worker`: one Dask worker process with one thread (one lab at a time), until
    the scheduler goes away or the process is interrupted."""
    import asyncio

    from distributed import Worker

    async def main() -> None:
        async with Worker(scheduler, nthreads=1, name=name, resources={"lab": 1}) as worker:
            await worker.finished()

    asyncio.run(main())
