"""The `protolab` command line. Errors of the domain (ProtolabError) are caught in one place."""

from __future__ import annotations

import signal
import sys
import traceback
from typing import Annotated, Any

import typer
from rich.markup import escape

from protolab import __version__
from protolab.console import console, error_console
from protolab.corpus.cli import corpus_app
from protolab.errors import ProtolabError


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
    # Help texts name spec tables ([lab] offload) and patterns ([a-z0-9]): never Rich markup.
    rich_markup_mode=None,
)
app.add_typer(corpus_app, name="corpus")

from protolab.report.cli import export_command, interop_matrix_command, report_command

app.command("report")(report_command)
app.command("export")(export_command)
app.command("interop-matrix")(interop_matrix_command)

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


from protolab.validate.cli import validate_emulator_command

app.command("validate-emulator")(validate_emulator_command)


from protolab.run.cli import demo_command, run_command

app.command("run")(run_command)
app.command("demo")(demo_command)

from protolab.reproduce.cli import reproduce_command, scenarios_command

app.command("reproduce")(reproduce_command)
app.command("scenarios")(scenarios_command)

from protolab.live.cli import serve_live_command

app.command("serve-live")(serve_live_command)

from protolab.live.measure import measure_command

app.command("measure")(measure_command)

from protolab.live.commands import live_app

app.add_typer(live_app, name="live")

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
