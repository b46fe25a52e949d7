"""Parallel-connection detection at scale (issue 11's target: 200 M synthetic flows in under 5
minutes on this 2-core machine, with bounded memory; docs/traffic.md, "Parallel connections").

Run: .venv/bin/python benches/traffic_parallel.py [--flows 200000000] [--seed 1] [--memory-limit 4GB]
     [--work target/bench/traffic_parallel] [--flows-file FILE] [--keep] [--out target/bench/traffic_parallel.json]

Three child processes, each measured on its own (wall time, CPU, peak RSS from wait4's rusage):
1. `protolab traffic synth --flows N --seed S` writes the synthetic flows (skipped with
   --flows-file, which also gives N);
2. `protolab traffic parallel FLOWS --out DIR --no-figures` (the detection: partition, sort,
   sessions, both output files, summary);
3. the reference, on the same file in the same invocation: DuckDB's plain
   `SELECT client_ip, count(*) ... GROUP BY client_ip` (one scan and a hash aggregate), with
   the same memory limit.
Printed and written: flows/s, elapsed, peak RSS, the ratio detection / reference, the
detection's own phases, the load average while it ran, and the target. The flows and outputs
are deleted afterwards unless --keep.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from protolab import __version__
from protolab.run import provenance

ROOT = Path(__file__).resolve().parents[1]
PROTOLAB = Path(sys.executable).parent / "protolab"
TARGET_S = 300.0
TARGET_FLOWS = 200_000_000
console = Console(stderr=True)

REFERENCE = """
import duckdb, sys, time
con = duckdb.connect(config={"memory_limit": sys.argv[2], "temp_directory": sys.argv[3]})
con.execute("SET enable_progress_bar = false")
started = time.perf_counter()
groups = con.execute(f"SELECT count(*) FROM (SELECT client_ip, count(*) FROM read_parquet('{sys.argv[1]}') "
                     "GROUP BY client_ip)").fetchone()[0]
print(groups, time.perf_counter() - started)
"""


def _child(argv: list[str], label: str) -> dict[str, Any]:
    """Run a child; its wall time, CPU time and peak RSS (its own rusage, from wait4)."""
    console.print(f"[dim]{time.strftime('%X')} {label}: {' '.join(argv)}[/]", highlight=False)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        console.print(out)
        raise SystemExit(f"{label} failed (exit {code})")
    return {"seconds": round(elapsed, 2), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2), "output": out.strip()}


def main(
    flows: Annotated[int, typer.Option("--flows", min=1, help="Synthetic flows (ignored with --flows-file).")
                     ] = TARGET_FLOWS,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the synthetic flows.")] = 1,
    memory_limit: Annotated[str, typer.Option("--memory-limit", help="DuckDB's memory limit (both runs).")] = "4GB",
    work: Annotated[Path, typer.Option("--work", help="Directory for the flows and the outputs.")
                    ] = ROOT / "target" / "bench" / "traffic_parallel",
    flows_file: Annotated[Path | None, typer.Option("--flows-file", help="Use these flows instead of "
                                                                         "synthesizing.")] = None,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the flows and the outputs.")] = False,
    out: Annotated[Path, typer.Option("--out", help="Result JSON.")] = ROOT / "target" / "bench" / "traffic_parallel.json",
) -> None:
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    if flows_file is None:
        flows_file = work / f"synthetic-{flows}-{seed}.parquet"
        results["synth"] = _child([str(PROTOLAB), "traffic", "synth", "--flows", str(flows), "--seed", str(seed),
                                   "--out", str(flows_file), "--memory-limit", memory_limit], "synthesize")
    import duckdb

    n = duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{flows_file}')").fetchone()[0]
    out_dir = work / "out"
    shutil.rmtree(out_dir, ignore_errors=True)
    detection = _child([str(PROTOLAB), "traffic", "parallel", str(flows_file), "--out", str(out_dir),
                        "--no-figures", "--memory-limit", memory_limit], "detect")
    summary = json.loads((out_dir / "parallel_summary.json").read_text())
    spill = work / "reference-spill"
    spill.mkdir(exist_ok=True)
    reference = _child([sys.executable, "-c", REFERENCE, str(flows_file), memory_limit, str(spill)], "reference")
    groups, query_s = reference["output"].splitlines()[-1].split()
    reference["clients"] = int(groups)
    reference["query_seconds"] = round(float(query_s), 2)
    results.update(detection=detection, reference=reference)
    rate = n / detection["seconds"]
    ratio = detection["seconds"] / reference["seconds"]
    # Extrapolated to the target's 200 M flows when fewer were run (linear in the flows).
    at_target = detection["seconds"] * TARGET_FLOWS / n
    table = Table(title=f"Parallel detection on {n:,} synthetic flows ({os.cpu_count()} cores, "
                        f"memory limit {memory_limit})")
    for column in ("step", "seconds", "flows/s", "CPU s", "peak RSS MB", "load avg before/after"):
        table.add_column(column, justify="left" if column == "step" else "right")
    for label, r in (("synthesize", results.get("synth")), ("detect", detection), ("reference GROUP BY client", reference)):
        if r is None:
            continue
        table.add_row(label, f"{r['seconds']:.1f}", f"{n / r['seconds']:,.0f}", f"{r['cpu_seconds']:.1f}",
                      f"{r['peak_rss_mb']:.0f}", f"{r['load_before']:.1f} / {r['load_after']:.1f}")
    print_console = Console(width=120)
    print_console.print(table)
    phases = ", ".join(f"{k} {v:.1f}" for k, v in summary["timings"].items())
    print_console.print(f"detection phases (s): {phases}")
    print_console.print(f"ratio detection / reference: {ratio:.1f}; {rate:,.0f} flows/s")
    verdict = "met" if at_target <= TARGET_S else "missed"
    scale = "" if n == TARGET_FLOWS else f" (extrapolated linearly from {n:,}: {at_target:.0f} s)"
    print_console.print(f"target: {TARGET_FLOWS:,} flows in under {TARGET_S:.0f} s{scale}: {verdict}")
    record = {
        "schema": "protolab.bench.traffic_parallel", "schema_version": 1, "protolab_version": __version__,
        "config": {"flows": n, "seed": seed if flows_file.name.startswith("synthetic-") else None,
                   "memory_limit": memory_limit, "flows_file": str(flows_file)},
        "results": results, "detection_timings": summary["timings"], "buckets": summary["config"]["buckets"],
        "flows_per_s": round(rate), "ratio_to_reference": round(ratio, 2),
        "seconds_at_200M_linear": round(at_target, 1), "target_s": TARGET_S, "target": verdict,
        "parallel_flow_share": summary["parallel_flow_share"],
        "bench_self_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "environment": provenance.environment({}),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print_console.print(f"wrote {out}")
    if not keep:
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.rmtree(spill, ignore_errors=True)
        if flows_file.parent == work and flows_file.name.startswith("synthetic-"):
            flows_file.unlink(missing_ok=True)


if __name__ == "__main__":
    typer.run(main)
