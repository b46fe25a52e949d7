"""The `protolab` command line. Errors of the domain (ProtolabError) are caught in one place."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from protolab import __version__
from protolab.corpus.cli import corpus_app
from protolab.errors import ProtolabError, ValidationFailed

# Logs and CI output are not terminals: give tables room instead of Rich's default of 80 columns.
_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120
console = Console(width=_WIDTH)
error_console = Console(stderr=True, width=_WIDTH)

STATUS_STYLE = {"pass": "green", "fail": "bold red", "info": "yellow"}


class _Settings:
    debug = False


class ProtolabApp(typer.Typer):
    """A Typer app whose single error boundary turns ProtolabError into a message and exit 1."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except ProtolabError as exc:
            if _Settings.debug:
                traceback.print_exception(exc)
            error_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            sys.exit(1)


app = ProtolabApp(
    name="protolab",
    help="Reproducible lab for web-protocol performance.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(corpus_app, name="corpus")

from protolab.report.cli import export_command, report_command

app.command("report")(report_command)
app.command("export")(export_command)

from protolab.analysis.cli import analyze_command

app.command("analyze")(analyze_command)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
) -> None:
    _Settings.debug = debug
    # SIGTERM and SIGHUP (a process manager, `timeout`, a closed terminal) and SIGINT (Ctrl-C,
    # also when a non-interactive shell started us in the background with SIGINT ignored) all
    # take the Ctrl-C path: the lab is torn down and the run in progress is not recorded.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)


@app.command()
def version() -> None:
    """Print the protolab version."""
    console.print(f"protolab {__version__}")


def validation_table(report: Any) -> Table:
    limits = report.config.thresholds
    caption = (f"pass: min RTT within {limits.min_rtt_ms:g} ms, mean within {limits.mean_rtt_ms:g} ms; "
               f"jitter std within {limits.jitter_relative:.0%}; loss p inside the "
               f"{limits.loss_confidence:.0%} Clopper-Pearson interval; goodput "
               f"{limits.goodput_min_ratio:.0%}-{limits.goodput_max_ratio:.0%} of the rate")
    table = Table(title=f"Emulator validation ({'quick' if report.config.quick else 'full'})", caption=caption,
                  box=box.SIMPLE_HEAD)
    table.add_column("check", justify="left", min_width=18)
    for column in ("configured", "measured", "error"):
        table.add_column(column, justify="right")
    table.add_column("result", justify="center", no_wrap=True)
    previous_group = None
    for check in report.checks:
        if previous_group is not None and check.group != previous_group:
            table.add_section()
        previous_group = check.group
        style = STATUS_STYLE[check.status]
        table.add_row(check.name, check.configured_text, check.measured_text, check.error_text,
                      f"[{style}]{check.status}[/]")
    return table


@app.command("validate-emulator")
def validate_emulator(
    quick: Annotated[bool, typer.Option("--quick", help="Reduced probe counts and durations (~1-2 min).")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Write the result JSON here.")] = None,
    binary: Annotated[Path | None, typer.Option("--binary", help="protolab-net binary to use.")] = None,
    lab: Annotated[str, typer.Option("--lab", help="Lab name ([a-z0-9]{1,10}).")] = "plvalidate",
    no_delay_compensation: Annotated[bool, typer.Option(
        "--no-delay-compensation", help="Do not deduct the lab's measured path latency from configured delays "
                                        "(then the mean RTT limit is 0.5 ms).")] = False,
) -> None:
    """Measure the emulator with real tools (irtt, ping, iperf3) against its configured links."""
    from protolab.validate.emulator import run_validation
    from protolab.validate.report import ValidationConfig, write_report

    try:
        config = ValidationConfig.for_mode(quick=quick, lab=lab, delay_compensation=not no_delay_compensation)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                        TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                        console=console, transient=True)
    with progress:
        task = progress.add_task("starting lab", total=config.step_count())
        started = [False]

        def step(text: str) -> None:
            if started[0]:
                progress.advance(task)
            started[0] = True
            progress.update(task, description=text)

        try:
            report = run_validation(config, binary=binary, step=step)
        except KeyboardInterrupt:
            # The lab's teardown has already run by the time the interrupt gets here.
            error_console.print("interrupted: the lab was torn down")
            raise
        progress.update(task, completed=config.step_count(), description="done")
    console.print(validation_table(report))
    summary = report.summary
    console.print(f"{summary['pass']} passed, {summary['fail']} failed, {summary['info']} info "
                  f"in {report.duration_s:.0f} s")
    if out is not None:
        write_report(report, out)
        console.print(f"wrote {out}")
    if not report.ok:
        failed = ", ".join(c.id for c in report.checks if c.status == "fail")
        raise ValidationFailed(f"{summary['fail']} validation checks failed: {failed}")


from protolab.run.cli import demo_command, run_command

app.command("run")(run_command)
app.command("demo")(demo_command)

from protolab.reproduce.cli import reproduce_command, scenarios_command

app.command("reproduce")(reproduce_command)
app.command("scenarios")(scenarios_command)

from protolab.live.cli import serve_live_command

app.command("serve-live")(serve_live_command)

from protolab.traffic.cli import traffic_app

app.add_typer(traffic_app, name="traffic")


@app.command("worker")
def worker_command(
    scheduler: Annotated[str, typer.Argument(help="The Dask scheduler's address, e.g. tcp://HOST:8786.")],
    name: Annotated[str | None, typer.Option("--name", help="Worker name (default: Dask's).")] = None,
) -> None:
    """A Dask worker for `protolab run --cluster` (docs/cluster.md): one lab at a time, as root, on a
    machine with protolab set up; runs until interrupted or the scheduler goes away."""
    from protolab.run.cluster import serve_worker

    serve_worker(scheduler, name)
