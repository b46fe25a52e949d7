"""Typer commands `protolab report` and `protolab export` (registered in protolab.cli)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console()


class ExportFormat(str, Enum):
    parquet = "parquet"
    csv = "csv"


def report_command(
    results_dir: Annotated[Path, typer.Argument(help="Results directory (holds results.duckdb).")],
    out: Annotated[Path | None, typer.Option("--out", help="Report directory (default RESULTS_DIR/report).")] = None,
    baseline: Annotated[str | None, typer.Option(
        "--baseline", help="Protocol mode the others are compared with (default h2 if present, else the first).")] = None,
    experiment: Annotated[list[str] | None, typer.Option(
        "--experiment", help="Report only this experiment id (repeatable; default: every experiment).")] = None,
    waterfall: Annotated[list[str] | None, typer.Option(
        "--waterfall", help="Also draw the waterfall of this run (its key or a unique prefix; repeatable).")] = None,
) -> None:
    """Write a self-contained HTML report (inline SVG) and PNG/SVG figures from a results store."""
    from protolab.report.build import build_report

    index = build_report(results_dir, out, baseline=baseline, experiments=experiment or None,
                         waterfalls=waterfall or ())
    console.print(f"wrote {index} (figures in {index.parent / 'figures'})")


def export_command(
    results_dir: Annotated[Path, typer.Argument(help="Results directory (holds results.duckdb).")],
    fmt: Annotated[ExportFormat, typer.Option("--format", help="File format, one file per table.")] = ExportFormat.parquet,
    out: Annotated[Path | None, typer.Option("--out", help="Output directory (default RESULTS_DIR/export).")] = None,
) -> None:
    """Export every table of the results store as Parquet or CSV files."""
    from protolab.store import ResultsStore

    target = out if out is not None else results_dir / "export"
    with ResultsStore(results_dir, read_only=True) as store:
        files = store.export(target, fmt.value)  # type: ignore[arg-type]
    for path in files:
        console.print(f"wrote {path}")


def interop_matrix_command(
    results_dir: Annotated[list[Path], typer.Argument(help="Results directories of interop runs (hold results.duckdb).")],
    out: Annotated[Path | None, typer.Option("--out", help="Write the Markdown here instead of printing it.")] = None,
) -> None:
    """The interop matrix: per test case, servers x clients with each run's verdict; goodput with
    its 95% interval (docs/interop.md)."""
    from protolab.report.interop import interop_matrix

    text = "\n".join(interop_matrix(path) for path in results_dir)
    if out is None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)
    else:
        out.write_text(text)
        console.print(f"wrote {out}")
