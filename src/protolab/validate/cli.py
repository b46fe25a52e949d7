"""`protolab validate-emulator` (docs/validation.md): the validation behind a progress bar, its
table of checks, and the result file. Registered in protolab.cli."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from protolab.console import console, error_console
from protolab.errors import ValidationFailed

STATUS_STYLE = {"pass": "green", "fail": "bold red", "info": "yellow"}


def validation_table(report: Any) -> Table:
    limits = report.config.thresholds
    caption = (f"pass: min RTT within {limits.min_rtt_ms:g} ms, mean within {limits.mean_rtt_ms:g} ms; "
               f"jitter std within {limits.jitter_relative:.0%}; loss p inside the "
               f"{limits.loss_confidence:.0%} Clopper-Pearson interval; goodput "
               f"{limits.goodput_min_ratio:.0%}-{limits.goodput_max_ratio:.0%} of the rate; the emulator's own "
               f"lateness mean within {limits.emulator_late_mean_ms:g} ms, p99.9 within "
               f"{limits.emulator_late_p999_ms:g} ms. fail: emulator / tools/host: where a failure lies "
               f"(docs/validation.md)")
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
        # A failure says where it lies: the emulator's own check of the level failed too, or not.
        place = {"emulator": ": emulator", "tools_host": ": tools/host"}.get(check.attribution or "", "")
        table.add_row(check.name, check.configured_text, check.measured_text, check.error_text,
                      f"[{style}]{check.status}{place}[/]")
    return table


def validate_emulator_command(
    quick: Annotated[bool, typer.Option("--quick", help="Reduced probe counts and durations (~1-2 min).")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Write the result JSON here.")] = None,
    binary: Annotated[Path | None, typer.Option("--binary", help="protolab-net binary to use.")] = None,
    lab: Annotated[str, typer.Option("--lab", help="Lab name ([a-z0-9]{1,10}).")] = "plvalidate",
    no_delay_compensation: Annotated[bool, typer.Option(
        "--no-delay-compensation", help="Do not deduct the lab's measured path latency from configured delays "
                                        "(then the mean RTT limit is 0.5 ms).")] = False,
    offload: Annotated[bool | None, typer.Option(
        "--offload/--no-offload", help="TUN segmentation offloads on or off (default: the emulator's).")] = None,
    group: Annotated[list[str] | None, typer.Option(
        "--group", help="Run only this check group (repeatable): delay, jitter, loss, rate, ecmp, contention, "
                        "wifi. Default: all.")] = None,
    decompose: Annotated[bool, typer.Option(
        "--decompose", help="Capture each delay level's irtt run and split its RTT error into the emulator's "
                            "share and the hosts' (docs/validation.md).")] = False,
    attempts: Annotated[int, typer.Option(
        "--attempts", min=1, max=10, help="Measure a timing level at most this often when the host's probe shows "
                                          "the host held the guest during it (1: never again; docs/validation.md).")] = 3,
) -> None:
    """Measure the emulator with real tools (irtt, ping, iperf3) against its configured links."""
    from protolab.validate.attribution import failure_summary, host_late
    from protolab.validate.emulator import run_validation
    from protolab.validate.report import GROUP_NAMES, ValidationConfig, write_report

    unknown = [name for name in group or [] if name not in GROUP_NAMES]
    if unknown:
        raise typer.BadParameter(f"{', '.join(unknown)}: choose from {', '.join(GROUP_NAMES)}", param_hint="--group")
    try:
        config = ValidationConfig.for_mode(quick=quick, lab=lab, delay_compensation=not no_delay_compensation,
                                           offload=offload, decompose=decompose, level_attempts=attempts,
                                           **({"groups": group} if group else {}))
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
                # A level measured again adds a step (protolab.validate.disturbance).
                done = progress.tasks[0].completed
                if done >= (progress.tasks[0].total or 0):
                    progress.update(task, total=done + 1)
            started[0] = True
            progress.update(task, description=text)

        try:
            report = run_validation(config, binary=binary, step=step)
        except KeyboardInterrupt:
            # The lab's teardown has already run by the time the interrupt gets here.
            error_console.print("interrupted: the lab was torn down")
            raise
        progress.update(task, completed=progress.tasks[0].total, description="done")
    console.print(validation_table(report))
    summary = report.summary
    failures = failure_summary(summary["fail"], report.attribution, woke_late=host_late(report.checks))
    again = (f"; {report.set_aside} level attempt{'s' * (report.set_aside != 1)} set aside and measured again "
             "(the host held the guest)" if report.set_aside else "")
    console.print(f"{summary['pass']} passed, {failures}; "
                  f"{summary['info']} info in {report.duration_s:.0f} s{again}")
    if out is not None:
        write_report(report, out)
        console.print(f"wrote {out}")
    if not report.ok:
        failed = ", ".join(c.id + (f" ({c.attribution.replace('_', '/')})" if c.attribution else "")
                           for c in report.checks if c.status == "fail")
        raise ValidationFailed(f"{failures}: {failed}")
