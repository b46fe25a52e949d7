"""Analysis benchmark: how long `protolab analyze` takes on a results directory, against how long
its runs took (docs/benchmarks.md). Issue 9's target: under 10% on the demo's results.

Run: .venv/bin/python benches/analysis.py [RESULTS ...] [--repeat 3] [--out target/bench/analysis.json]

RESULTS defaults to results/demo (`make demo`). Each directory is analysed `--repeat` times on a
copy (the results themselves are never changed); the median wall time of the analysis is set
against the sum of the runs' recorded durations (`runs.duration_s`) in the same store. The
artifacts the runs kept decide the work: qlogs, captures (tshark) and the event log cost most.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from protolab import __version__
from protolab.run import provenance
from protolab.analysis.cli import analyze_results
from protolab.store import ResultsStore

console = Console(stderr=True)
TARGET = 0.10
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "target" / "bench" / "analysis.json"


def _artifacts(results: Path) -> dict[str, int]:
    runs = results / "runs"
    return {
        "qlogs": sum(1 for _ in runs.glob("*/qlog/*")),
        "captures": sum(1 for _ in runs.glob("*/*.pcap")),
        "event logs": sum(1 for _ in runs.glob("*/events.ndjson")),
        "samples": sum(1 for _ in runs.glob("*/samples/*")),
    }


def bench_one(results: Path, repeat: int) -> dict[str, Any]:
    with ResultsStore(results, read_only=True) as store:
        row = store.query("SELECT count(*) AS runs, sum(duration_s) AS seconds FROM runs")[0]
    if not row["runs"]:
        raise SystemExit(f"{results}: no runs recorded")
    times = []
    with tempfile.TemporaryDirectory(prefix="pl-bench-analysis-") as tmp:
        copy = Path(tmp) / results.name
        shutil.copytree(results, copy, ignore=shutil.ignore_patterns("report", "export"))
        for _ in range(repeat):
            started = time.perf_counter()
            analyze_results(copy, None)
            times.append(time.perf_counter() - started)
    analysis = statistics.median(times)
    return {"results": str(results), "runs": row["runs"], "run_seconds": row["seconds"],
            "analysis_seconds": analysis, "analysis_seconds_all": times,
            "ratio": analysis / row["seconds"], "target": TARGET, "artifacts": _artifacts(results)}


def main(
    results: Annotated[list[Path] | None, typer.Argument(help="Results directories (default: results/demo).")] = None,
    repeat: Annotated[int, typer.Option(min=1, max=20, help="Analyses per directory; the median counts.")] = 3,
    out: Annotated[Path, typer.Option(help="Result JSON.")] = DEFAULT_OUT,
) -> None:
    directories = results or [Path("results/demo")]
    missing = [d for d in directories if not (d / "results.duckdb").is_file()]
    if missing:
        console.print(f"analysis bench: no results store in {', '.join(map(str, missing))} (run `make demo` first)")
        raise typer.Exit(1)
    rows = [bench_one(d, repeat) for d in directories]
    table = Table(title="protolab analyze vs the runs it analyses")
    for column in ("results", "runs", "artifacts", "runs took (s)", "analysis (s, median)", "ratio", "target"):
        table.add_column(column, justify="left" if column in ("results", "artifacts") else "right")
    for r in rows:
        artifacts = ", ".join(f"{n} {k}" for k, n in r["artifacts"].items() if n) or "none"
        table.add_row(r["results"], str(r["runs"]), artifacts, f"{r['run_seconds']:.0f}", f"{r['analysis_seconds']:.2f}",
                      f"{r['ratio']:.2%}", f"< {TARGET:.0%}")
    Console().print(table)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"schema": "protolab.bench.analysis", "schema_version": 1, "protolab_version": __version__,
              "created_unix_ns": time.time_ns(), "config": {"repeat": repeat, "statistic": "median", "target": TARGET},
              "environment": provenance.environment({"tshark": ["tshark", "--version"]}), "results": rows}
    out.write_text(json.dumps(report, indent=2))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(typer.run(main))
