"""`protolab run SPEC` and `protolab demo`: the experiment runner behind a Rich progress bar."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from protolab.console import console
from protolab.errors import ProtolabError
from protolab.plan.experiment import Experiment, load_spec
from protolab.plan.spec import CONDITION_AXES
from protolab.run.executors import EXECUTORS
from protolab.run.runner import (
    Events,
    PlannedRun,
    Summary,
    estimate_s,
    plan,
    run_experiment,
)
from protolab.run.session import LabExecutor
from protolab.results.record import RunRecord
from protolab.store import ResultsStore

REPO_ROOT = Path(__file__).resolve().parents[3]
DEMO_SPEC = REPO_ROOT / "specs" / "demo.toml"
DEMO_RESULTS = Path("results") / "demo"
DRY_RUN_ROWS = 60
STATUS_STYLE = {"ok": "green", "failed": "bold red", "timeout": "yellow"}


class RunFailed(ProtolabError):
    """Some runs of an experiment failed (they are recorded; the sweep went on)."""


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


class RichEvents(Events):
    """Progress bar with ETA; one line per finished run that did not succeed."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console, transient=False,
        )
        self.task: TaskID | None = None

    def planned(self, total: int, todo: int, estimate: float) -> None:
        done = total - todo
        if done:
            self.console.print(f"resuming: {done} of {total} runs already recorded")
        self.console.print(f"{todo} runs to do (estimate {_duration(estimate)})")
        self.task = self.progress.add_task("starting lab", total=todo)
        self.progress.start()

    def starting(self, run: PlannedRun) -> None:
        if self.task is not None:
            what = f"{run.mode} {run.page.name}" if run.page is not None else run.mode
            self.progress.update(self.task, description=escape(f"{what} (rep {run.repetition})"))

    def finished(self, run: PlannedRun, record: RunRecord) -> None:
        if self.task is not None:
            self.progress.advance(self.task)
        if record.status != "ok":
            style = STATUS_STYLE.get(record.status, "red")
            self.progress.console.print(
                f"[{style}]{record.status}[/] {escape(run.label())}: {escape((record.error or '')[:300])}",
                highlight=False)

    def status(self, text: str) -> None:
        """What the bar stands for when no single run is starting (a cluster's blocks)."""
        if self.task is not None:
            self.progress.update(self.task, description=escape(text))

    def converged(self, run: PlannedRun) -> None:
        """A run left out because its cell converged ([design] ci_target): the bar counts it."""
        if self.task is not None:
            self.progress.advance(self.task)

    def note(self, text: str) -> None:
        self.progress.console.print(escape(text), style="dim", highlight=False)

    def stop(self) -> None:
        self.progress.stop()


def matrix_table(experiment: Experiment, runs: list[PlannedRun], finished: set[str]) -> Table:
    table = Table(title=f"{experiment.name}: scenario {experiment.scenario.name}", box=box.SIMPLE_HEAD)
    transport_axes = experiment.transport_axes
    columns = [("#", "right"), ("key", "left"), ("condition", "left"), ("rep", "right"), ("mode", "left")]
    columns += [(name, "left") for name in transport_axes]
    if experiment.pages:
        columns += [("page", "left"), ("kB", "right")]
    columns += [("est s", "right"), ("state", "left")]
    for column, justify in columns:
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for run in runs[:DRY_RUN_ROWS]:
        cells = [str(run.order_index), run.key, escape(run.condition.label()), str(run.repetition), escape(run.mode)]
        cells += [escape(str(run.params.get(name))) for name in transport_axes]
        if experiment.pages:
            cells += [run.page.name if run.page else "-", f"{run.page.size_bytes / 1000:.0f}" if run.page else "-"]
        cells += [f"{estimate_s(run, experiment.params):.1f}", "done" if run.key in finished else "todo"]
        table.add_row(*cells)
    return table


def _finished_keys(results_dir: Path, experiment_id: str, retry_failed: bool = False) -> set[str]:
    if not (results_dir / "results.duckdb").exists():
        return set()
    with ResultsStore(results_dir, read_only=True) as store:
        return store.finished_run_keys(experiment_id, retry_failed=retry_failed)


def dry_run(experiment: Experiment, results_dir: Path, console: Console, retry_failed: bool = False) -> None:
    """The run matrix, what is done and what is to do (with `retry_failed`, the failed runs too)."""
    runs = plan(experiment)
    finished = _finished_keys(results_dir, experiment.name, retry_failed)
    console.print(matrix_table(experiment, runs, finished))
    if len(runs) > DRY_RUN_ROWS:
        console.print(f"... {len(runs) - DRY_RUN_ROWS} more runs")
    todo = [run for run in runs if run.key not in finished]
    reps = experiment.spec.repetitions
    parts = []
    for sweep in experiment.sweeps:
        conditions = " x ".join(f"{len(sweep[name])} {name}" for name in (*CONDITION_AXES, *experiment.extra_axes))
        shape = f"{conditions} conditions x {reps} repetitions x {len(sweep['mode'])} modes"
        shape += "".join(f" x {len(sweep[name])} {name}" for name in experiment.transport_axes if name in sweep)
        if sweep.get("page"):
            shape += f" x {len(sweep['page'])} pages"
        parts.append(shape)
    shape = parts[0] if len(parts) == 1 else " + ".join(f"({p})" for p in parts) + ", common runs once"
    console.print(
        f"{len(runs)} runs = {shape}; {len(runs) - len(todo)} done, {len(todo)} to do; "
        f"estimate {_duration(sum(estimate_s(run, experiment.params) for run in todo))}; results in {results_dir}"
    )


def execute(experiment: Experiment, results_dir: Path, console: Console, *, binary: Path | None,
            lab: str | None, delay_compensation: bool = True, cluster: str | None = None,
            needed: Callable[[PlannedRun], bool] | None = None, retry_failed: bool = False,
            failed_since: datetime | None = None, offload: bool | None = None) -> Summary:
    """Run the experiment (resuming); `needed` keeps only the planned runs it accepts (not with a
    cluster); `retry_failed` runs the runs recorded as failed again (given `failed_since`, those
    recorded before it)."""
    events = RichEvents(console)
    executor = LabExecutor(workloads=EXECUTORS, binary=binary, lab_name=lab, delay_compensation=delay_compensation,
                           offload=offload)
    try:
        if cluster is not None:
            from protolab.run.cluster import run_on_cluster

            summary = run_on_cluster(experiment, results_dir, cluster, events, retry_failed=retry_failed,
                                     failed_since=failed_since)
        else:
            summary = run_experiment(experiment, results_dir, executor, events, needed=needed,
                                     retry_failed=retry_failed, failed_since=failed_since)
    except KeyboardInterrupt:
        events.stop()
        console.print("interrupted: the lab was torn down and the run in progress was not recorded; "
                      "run the same command again to resume")
        raise typer.Exit(130) from None
    finally:
        events.stop()
    console.print(
        f"{summary.experiment_id}: {summary.ok} ok, {summary.failed} failed, {summary.timeout} timed out"
        f"{f', {summary.skipped} already recorded' if summary.skipped else ''}"
        f"{f', {summary.converged} left out (their cells converged)' if summary.converged else ''}"
        f" in {_duration(summary.duration_s)}; "
        f"results in {results_dir / 'results.duckdb'}"
    )
    return summary


SpecArgument = Annotated[Path, typer.Argument(help="Experiment spec (TOML, docs/spec.md).")]
ResultsOption = Annotated[Path | None, typer.Option("--results", help="Results directory (default: results/NAME, NAME from the spec).")]
BinaryOption = Annotated[Path | None, typer.Option("--binary", help="protolab-net binary to use.")]
LabOption = Annotated[str | None, typer.Option("--lab", help="Lab name, 1-10 characters a-z 0-9 (default: random).")]
RetryFailedOption = Annotated[bool, typer.Option(
    "--retry-failed", help="Run the runs recorded as failed again (each keeps its earlier attempts: "
                           "run.json's previous_attempts, their files in RESULTS/attempts/KEY/N).")]


def run_command(
    spec: SpecArgument,
    results: ResultsOption = None,
    dry_run_flag: Annotated[bool, typer.Option("--dry-run", help="Print the run matrix and exit.")] = False,
    binary: BinaryOption = None,
    lab: LabOption = None,
    no_delay_compensation: Annotated[bool, typer.Option(
        "--no-delay-compensation",
        help="Do not deduct the lab's measured path latency from configured delays (RESULTS/calibration.json "
             "records the choice).")] = False,
    cluster: Annotated[str | None, typer.Option(
        "--cluster", help="Run on a Dask cluster: the scheduler's address (tcp://HOST:8786); workers are "
                          "`protolab worker` processes (docs/cluster.md). local:N starts N workers on this "
                          "machine, each with a lab of its own.")] = None,
    retry_failed: RetryFailedOption = False,
    offload: Annotated[bool | None, typer.Option(
        "--offload/--no-offload", help="The emulator's TUN segmentation offloads in every host, over the spec's "
                                       "[lab] offload (a host in [lab.host_offload] keeps its own; default: the "
                                       "spec's, else the emulator's; RESULTS/calibration.json records each host's; "
                                       "not with --cluster).")] = None,
) -> None:
    """Run an experiment spec: every run of its matrix, recorded in RESULTS/results.duckdb (resumes)."""
    if cluster is not None and offload is not None:
        raise typer.BadParameter("--offload/--no-offload apply to a local lab, not to --cluster (each worker starts its own)")
    experiment = load_spec(spec)
    results_dir = results if results is not None else Path("results") / experiment.name
    if dry_run_flag:
        dry_run(experiment, results_dir, console, retry_failed)
        return
    summary = execute(experiment, results_dir, console, binary=binary, lab=lab,
                      delay_compensation=not no_delay_compensation, cluster=cluster, retry_failed=retry_failed,
                      offload=offload)
    if summary.failed or summary.timeout:
        console.print(f"see `protolab report {results_dir}`; failed runs are recorded with their error "
                      "(--retry-failed runs them again)")


def report(results_dir: Path, console: Console) -> Path:
    """`protolab report RESULTS_DIR` (in its own process: the report module is separate)."""
    completed = subprocess.run([sys.executable, "-m", "protolab", "report", str(results_dir)], check=False)
    if completed.returncode != 0:
        raise RunFailed(f"protolab report {results_dir} exited with status {completed.returncode}")
    return results_dir / "report" / "index.html"


def demo_command(
    results: ResultsOption = None,
    binary: BinaryOption = None,
    lab: LabOption = None,
) -> None:
    """The wifi-loss demo (specs/demo.toml, ~10 min): run it into results/demo, then the report."""
    experiment = load_spec(DEMO_SPEC)
    results_dir = results if results is not None else DEMO_RESULTS
    summary = execute(experiment, results_dir, console, binary=binary, lab=lab)
    index = report(results_dir, console)
    console.print(f"report: {index.resolve()}")
    if summary.ok == 0 and summary.executed:
        raise RunFailed(f"every run of the demo failed; see {results_dir}/runs/*/load.stderr")
