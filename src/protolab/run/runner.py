"""The experiment runner: matrix, ordering, run keys, resume and the loop (docs/spec.md).

An experiment (a validated spec) expands into conditions (the network axes and the scenario's
own axes), each repeated `repetitions` times; a (condition, repetition) pair is a *block*, and
inside a block every (mode, page, transport) combination runs once, in an order shuffled with a
seed derived from the spec's seed, the condition and the repetition, so slow drift of the
machine favours no protocol or controller. With `[[sweeps]]` the conditions and combinations
are the union of the sweeps' matrices.

Every run has a stable key: a hash of its parameters (scenario and its parameters, condition,
mode, page and its manifest digest, transport options, spec seed) and its repetition. The
store's finished keys are skipped, so running the same spec again resumes where it stopped.

The executor does the work of one run (`protolab.run.session.LabExecutor` in a real lab; tests
use a fake executor with the same interface).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import random
import shutil
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from protolab.analysis.analyze import RunAnalysis, analyze_run
from protolab.analysis.fidelity import run_fidelity
from protolab.errors import ProtolabError
from protolab.files import write_text_atomically
from protolab.measure.transport import connection_summaries
from protolab.plan import controllers
from protolab.plan.design import converged, derived_seed
from protolab.plan.experiment import Experiment, Page
from protolab.plan.spec import CONDITION_AXES, STANDARD_AXES, TRANSPORT_AXES
from protolab.scenarios import Condition
from protolab.results.documents import plain
from protolab.results.record import Fidelity, RunRecord
from protolab.store import ResultsStore

KEY_LENGTH = 16


class RunnerError(ProtolabError):
    """The runner could not set up or carry on an experiment."""


# ---------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class PlannedRun:
    key: str
    condition: Condition
    condition_index: int
    repetition: int
    mode: str
    page: Page | None  # None: the workload loads no page (bulk transfers)
    order_index: int
    link_seed: int
    params: dict[str, Any] = field(hash=False, compare=False)
    # Effective transport options (percent rates resolved): what the endpoints are given.
    transport: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def label(self) -> str:
        what = f"{self.mode} {self.page.name}" if self.page is not None else self.mode
        varying = "".join(f" {k}={self.params[k]}" for k in self.params.get("transport_axes", []))
        return f"{what}{varying} | {self.condition.label()} | rep {self.repetition}"


def run_key(key_params: dict[str, Any]) -> str:
    text = json.dumps(key_params, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


def _sweep_conditions(experiment: Experiment, sweep: dict[str, list[Any]]) -> list[Condition]:
    names = [*CONDITION_AXES, *experiment.extra_axes]
    product = itertools.product(*(sweep[name] for name in names))
    return [Condition.from_axes(dict(zip(names, values, strict=True))) for values in product]


def conditions(experiment: Experiment) -> list[Condition]:
    """Every condition of the matrix, in axis order (bandwidth, RTT, loss, buffer, extras),
    sweep after sweep, each once."""
    seen: dict[Condition, None] = {}
    for sweep in experiment.sweeps:
        for condition in _sweep_conditions(experiment, sweep):
            seen.setdefault(condition, None)
    return list(seen)


def _transports(experiment: Experiment, sweep: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The transport options of a sweep: [transport] with every combination of transport axes."""
    base = experiment.spec.transport.model_dump(mode="json")
    names = [name for name in TRANSPORT_AXES if name in sweep]
    return [{**base, **dict(zip(names, values, strict=True))}
            for values in itertools.product(*(sweep[name] for name in names))]


def _without_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _key_transport(transport: dict[str, Any]) -> dict[str, Any]:
    """The transport options in a run key: the defaults of the options added later (the engine
    as client, cold loads) are left out, so runs keep the keys they had before them."""
    key = _without_none(transport)
    for name, default in (("client", "engine"), ("warm", "cold")):
        if key.get(name) == default:
            del key[name]
    return key


def _key_scenario_params(scenario: Any, params_json: dict[str, Any]) -> dict[str, Any]:
    """The scenario's parameters in a run key: a parameter added later is left out at its neutral
    value (`Scenario.key_neutral_params`), so runs keep the keys they had before it existed."""
    neutral = scenario.key_neutral_params
    return {name: value for name, value in params_json.items() if name not in neutral or neutral[name] != value}


def plan(experiment: Experiment) -> list[PlannedRun]:
    """Every run of the experiment in execution order."""
    spec = experiment.spec
    scenario, scenario_params = experiment.scenario, experiment.params
    params_json = scenario_params.model_dump(mode="json")
    transport_axes = experiment.transport_axes
    lab_key = spec.lab.model_dump(mode="json", exclude_defaults=True)
    blocks: dict[Condition, list[tuple[str, Page | None, dict[str, Any]]]] = {}
    for sweep in experiment.sweeps:
        pages: list[Page | None] = [experiment.pages[ref] for ref in sweep["page"]] or [None]
        items = [(mode, page, transport) for mode in sweep["mode"] for page in pages
                 for transport in _transports(experiment, sweep)]
        for condition in _sweep_conditions(experiment, sweep):
            block = blocks.setdefault(condition, [])
            block.extend(item for item in items if item not in block)
    runs: list[PlannedRun] = []
    for index, (condition, items) in enumerate(blocks.items()):
        condition_params = condition.as_params()
        for repetition in range(spec.repetitions):
            block = list(items)
            random.Random(derived_seed(spec.seed, "order", condition_params, repetition)).shuffle(block)
            link_seed = derived_seed(spec.seed, "link", condition_params, repetition)
            for mode, page, written in block:
                transport = scenario.transport_for(scenario_params, condition, dict(written))
                key_params = {
                    "scenario": scenario.name,
                    "scenario_params": _key_scenario_params(scenario, params_json),
                    "condition": condition_params,
                    "mode": mode,
                    "page": page.name if page is not None else None,
                    "page_digest": page.digest if page is not None else None,
                    "transport": _key_transport(transport),
                    "spec_seed": spec.seed,
                    "repetition": repetition,
                }
                if lab_key:  # only when set, so runs keep the keys they had before [lab] existed
                    key_params["lab"] = lab_key
                params = {
                    "scenario": scenario.name,
                    **condition_params,
                    "mode": mode,
                    "page": page.name if page is not None else None,
                    "repetition": repetition,
                    "seed": link_seed,
                    **transport,
                    "order_index": len(runs),
                    "page_ref": page.ref if page is not None else None,
                    "page_bytes": page.size_bytes if page is not None else None,
                    "spec_seed": spec.seed,
                    "timeout_s": spec.timeout_s,
                    "workload": scenario.workload_for(scenario_params).name,
                }
                if transport_axes:
                    params["transport_axes"] = transport_axes
                effective = dict(transport)
                try:
                    effective["quic_cc"] = controllers.with_link_rate(transport["quic_cc"], condition.bandwidth_mbps)
                except controllers.ControllerError as exc:
                    raise RunnerError(f"{experiment.name}: {exc}") from None
                if effective["quic_cc"] != transport["quic_cc"]:
                    params["quic_cc_resolved"] = effective["quic_cc"]
                runs.append(PlannedRun(
                    key=run_key(key_params), condition=condition, condition_index=index, repetition=repetition,
                    mode=mode, page=page, order_index=len(runs), link_seed=link_seed, params=params,
                    transport=effective,
                ))
    return runs


def estimate_s(run: PlannedRun, scenario_params: Any = None) -> float:
    """A rough duration of a run (for the dry run and the demo's budget): handshakes and the
    dependency depth in RTTs, the bytes at the bottleneck rate (slowed by loss), set-up."""
    condition = run.condition
    rtt_s = condition.rtt_ms / 1e3
    duration = getattr(scenario_params, "duration_s", None) or getattr(scenario_params, "bulk_duration_s", None)
    if run.page is None and duration is not None and getattr(scenario_params, "workload", "bulk") != "page":
        return 1.5 + float(duration)
    size = run.page.size_bytes if run.page is not None else int(getattr(scenario_params, "bytes", None) or 0)
    if "vs" in run.mode:
        size *= 2  # two clients share the bottleneck
    if condition.bandwidth_mbps is None:
        transfer = size * 8 / 2e9
    else:
        transfer = size * 8 / (condition.bandwidth_mbps * 1e6)
    if condition.loss_pct > 0:
        transfer *= 1 + condition.loss_pct  # 2% loss roughly triples a single connection
    return 0.6 + 8 * rtt_s + 1.15 * transfer


# ---------------------------------------------------------------------- executors


class Session(Protocol):
    def enter(self, condition: Condition) -> None: ...

    def leave(self, condition: Condition) -> None: ...

    def execute(self, run: PlannedRun, run_dir: Path) -> RunRecord: ...


class Executor(Protocol):
    def session(self, experiment: Experiment, results_dir: Path) -> contextlib.AbstractContextManager[Session]: ...

    def provenance(self) -> dict[str, Any]: ...


def _write_json(path: Path, value: Any) -> None:
    write_text_atomically(path, json.dumps(value, indent=2, sort_keys=True))


# ---------------------------------------------------------------------- the loop


class Events:
    """Progress callbacks of `run_experiment` (no-ops here; the CLI draws a Rich progress bar)."""

    def planned(self, total: int, todo: int, estimate_s: float) -> None: ...

    def starting(self, run: PlannedRun) -> None: ...

    def finished(self, run: PlannedRun, record: RunRecord) -> None: ...

    def note(self, text: str) -> None: ...

    # Optional (added with adaptive repetitions; implementations without it keep working): a
    # planned run left out because its cell has converged ([design] ci_target). It is not
    # executed, not recorded and not a failure; `Summary.converged` counts these.
    def converged(self, run: PlannedRun) -> None: ...

    # Optional too (added with small cluster blocks): what the progress stands for when the
    # coordinator sees blocks, not single runs starting ("12 of 60 blocks done").
    def status(self, text: str) -> None: ...


@dataclass
class Summary:
    experiment_id: str
    results_dir: Path
    total: int
    skipped: int
    ok: int = 0
    failed: int = 0
    timeout: int = 0
    duration_s: float = 0.0
    converged: int = 0  # runs left out because their cell's CI was already tight ([design] ci_target)

    @property
    def executed(self) -> int:
        return self.ok + self.failed + self.timeout


def experiment_provenance(executor: Executor, experiment: Experiment) -> dict[str, Any]:
    """The executor's environment with the spec file and the scenario's description."""
    env = executor.provenance()
    env["spec_file"] = str(experiment.path) if experiment.path else None
    env["scenario"] = experiment.scenario.describe()
    return env


def run_experiment(
    experiment: Experiment,
    results_dir: Path,
    executor: Executor,
    events: Events | None = None,
    needed: Callable[[PlannedRun], bool] | None = None,
    retry_failed: bool = False,
    failed_since: datetime | None = None,
) -> Summary:
    """Run every unfinished run of the experiment; record each in RESULTS/results.duckdb.

    A run that fails is recorded with its error and the sweep goes on. Ctrl-C (KeyboardInterrupt)
    stops at once: the lab is torn down, the run in progress is not recorded (its directory is
    removed) and the exception propagates; running the same spec again resumes. `needed`, when
    given, keeps only the planned runs it accepts (the totals count those): `protolab reproduce`
    grows only the cells its undecided claims read. `retry_failed` runs the runs recorded as
    failed again too (each keeps its earlier attempts: `_execute_one`), given `failed_since`
    only those recorded before it (ResultsStore.finished_run_keys).
    """
    events = events or Events()
    results_dir.mkdir(parents=True, exist_ok=True)
    runs = [run for run in plan(experiment) if needed is None or needed(run)]
    experiment_id = experiment.name
    started = time.monotonic()
    with ResultsStore(results_dir) as store:
        store.upsert_experiment(experiment_id, experiment.name, experiment.spec_dict(),
                                experiment_provenance(executor, experiment))
        finished = store.finished_run_keys(experiment_id, retry_failed=retry_failed, failed_since=failed_since)
        todo = [run for run in runs if run.key not in finished]
        summary = Summary(experiment_id, results_dir, total=len(runs), skipped=len(runs) - len(todo))
        events.planned(len(runs), len(todo), sum(estimate_s(run, experiment.params) for run in todo))
        if not todo:
            return summary
        adaptive = Adaptive(experiment, store, runs)
        on_converged = getattr(events, "converged", None)
        with executor.session(experiment, results_dir) as session:
            current: Condition | None = None
            try:
                for run in todo:
                    if adaptive.skip(run):
                        summary.converged += 1
                        if on_converged is not None:
                            on_converged(run)
                        continue
                    if run.condition != current:
                        if current is not None:
                            session.leave(current)
                        current = None
                        events.note(f"condition: {run.condition.label()}")
                        session.enter(run.condition)
                        current = run.condition
                    record = _execute_one(session, run, results_dir, events)
                    store.record_run(experiment_id, record)
                    adaptive.add(run, record.status, _metric(record))
                    setattr(summary, record.status, getattr(summary, record.status) + 1)
                    events.finished(run, record)
            finally:
                if current is not None:
                    with contextlib.suppress(ProtolabError):
                        session.leave(current)
    summary.duration_s = time.monotonic() - started
    return summary


def _metric(record: RunRecord) -> float | None:
    """What adaptive repetitions watch, as the store's `runs` row has it (so a resumed
    experiment sees the same numbers): the PLT of a page load, else the goodput of a bulk run
    (the sum of its flows, bits/s). Pairs have neither: their cells run every repetition."""
    if record.page_load is not None and record.page_load.plt_ms is not None:
        return record.page_load.plt_ms
    goodput = record.goodput_mbps() if record.status == "ok" else None
    return goodput * 1e6 if goodput is not None else None


class Adaptive:
    """Adaptive repetitions ([design] ci_target): the metric of every finished ok run per cell
    (condition, mode, page, transport), from the store and from this invocation; a run is left
    out when its cell has converged (protolab.plan.design.converged). A left-out run keeps its key:
    raising `repetitions` or `ci_target` later runs it then."""

    def __init__(self, experiment: Experiment, store: Any, runs: list[PlannedRun],
                 values: dict[str, list[float]] | None = None) -> None:
        """The values per cell come from the store, or are given (`values`: what the
        coordinator of a cluster knew, `values_for` of its own Adaptive)."""
        design = experiment.spec.design
        self.target, self.min_repetitions = design.ci_target, design.min_repetitions
        self.values: dict[str, list[float]] = defaultdict(list)
        if values is not None:
            self.values.update({cell: list(v) for cell, v in values.items()})
            return
        if self.target is None:
            return
        cells = {run.key: _cell(run) for run in runs}
        for row in store.query("SELECT run_key, plt_ms, goodput_mbps FROM runs WHERE experiment_id = ? AND status = 'ok'",
                               [experiment.name]):
            value = row["plt_ms"] if row["plt_ms"] is not None else (
                row["goodput_mbps"] * 1e6 if row["goodput_mbps"] is not None else None)
            if value is not None and row["run_key"] in cells:
                self.values[cells[row["run_key"]]].append(float(value))

    def skip(self, run: PlannedRun) -> bool:
        return (self.target is not None and run.repetition >= self.min_repetitions
                and converged(self.values[_cell(run)], self.target, self.min_repetitions))

    def add(self, run: PlannedRun, status: str, value: float | None) -> None:
        if self.target is not None and status == "ok" and value is not None:
            self.values[_cell(run)].append(value)

    def values_for(self, runs: list[PlannedRun]) -> dict[str, list[float]]:
        """The values known for the cells of `runs` (what a worker needs for a block)."""
        cells = {_cell(run) for run in runs}
        return {cell: list(self.values[cell]) for cell in cells if self.values.get(cell)}


def _cell(run: PlannedRun) -> str:
    return json.dumps([run.condition.as_params(), run.mode, run.page.name if run.page else None,
                       run.params.get("transport_axes") and {k: run.params.get(k) for k in run.params["transport_axes"]}],
                      sort_keys=True, default=str)


def analyze_record(run_dir: Path, record: RunRecord) -> RunAnalysis:
    """The transport analysis of a finished run; a failure of the analysis is a note, never a
    failed run."""
    try:
        return analyze_run(run_dir, record.samples, record.params)
    except Exception as exc:  # noqa: BLE001 - whatever breaks the analysis, the run itself stands
        return RunAnalysis(notes=[{"file": str(run_dir.name), "note": f"analysis failed: {type(exc).__name__}: {exc}"}])


def fidelity_of(record: RunRecord) -> Fidelity:
    """The run's fidelity record from the emulator's counters and the links' conditions."""
    emulator = plain(record.link_counters.emulator) if record.link_counters is not None else None
    found = run_fidelity(emulator, record.link_rows())
    return Fidelity(found.late_mean_us, found.late_p999_us, found.late_max_us, found.flags_text)


ATTEMPTS_DIR = "attempts"


def keep_earlier_attempt(results_dir: Path, key: str) -> list[dict[str, Any]]:
    """The run's earlier recorded attempts, oldest first, its last one included: each its
    status, error, start, duration and directory. A recorded attempt (one with a run.json: a
    failed or timed-out run run again) keeps its directory, moved to
    RESULTS/attempts/<key>/<n> (n from 1); what an interrupted attempt left is removed."""
    run_dir = results_dir / "runs" / key
    try:
        earlier = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        earlier = None
    if not isinstance(earlier, dict):
        shutil.rmtree(run_dir, ignore_errors=True)  # leftovers of an interrupted attempt
        return []
    attempts = [a for a in earlier.get("previous_attempts", []) if isinstance(a, dict)]
    moved = Path(ATTEMPTS_DIR) / key / str(len(attempts) + 1)
    shutil.rmtree(results_dir / moved, ignore_errors=True)
    (results_dir / moved).parent.mkdir(parents=True, exist_ok=True)
    run_dir.rename(results_dir / moved)
    attempts.append({"status": earlier.get("status"), "error": earlier.get("error"),
                     "started_unix_ns": earlier.get("started_unix_ns"), "duration_s": earlier.get("duration_s"),
                     "artifacts_dir": str(moved)})
    return attempts


def _execute_one(session: Session, run: PlannedRun, results_dir: Path, events: Events) -> RunRecord:
    relative = Path("runs") / run.key
    run_dir = results_dir / relative
    previous_attempts = keep_earlier_attempt(results_dir, run.key)
    run_dir.mkdir(parents=True)
    events.starting(run)
    started_ns = time.time_ns()
    started = time.monotonic()
    try:
        record = session.execute(run, run_dir)
    except KeyboardInterrupt:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    except (ProtolabError, OSError, subprocess.SubprocessError) as exc:
        record = RunRecord(run.key, dict(run.params), "failed", f"{type(exc).__name__}: {exc}")
    record.started_unix_ns, record.duration_s, record.artifacts_dir = started_ns, time.monotonic() - started, str(relative)
    run_json = {
        "schema_version": 1, "kind": "run", "run_key": run.key, "params": run.params,
        "status": record.status, "error": record.error, "started_unix_ns": started_ns,
        "duration_s": record.duration_s, "link_config": plain(record.link_config),
        "link_counters": plain(record.link_counters) or {},
        "attempt": len(previous_attempts) + 1, "previous_attempts": previous_attempts,
    }
    _write_json(run_dir / "run.json", run_json)
    record.analysis = analyze_record(run_dir, record)
    record.connection_states = connection_summaries(record.samples)
    record.fidelity = fidelity_of(record)
    return record


__all__ = [
    "STANDARD_AXES",
    "Events",
    "PlannedRun",
    "RunnerError",
    "Summary",
    "conditions",
    "derived_seed",
    "estimate_s",
    "plan",
    "run_experiment",
    "run_key",
]
