"""`protolab analyze PATH` (docs/analysis.md): a results directory (every recorded run analysed
again into the store), or one artifact: a qlog, a samples file (NDJSON) or a capture (pcap)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from protolab.analysis.analyze import (
    AnalysisError,
    Endpoints,
    analyze_run,
    tcp_losses,
    tshark_segments,
)
from protolab.errors import ProtolabError
from protolab.measure import losses as L
from protolab.measure.conninfo import FIELDS, quic_info, tcp_info
from protolab.measure.qlog import read_qlog
from protolab.results.samples import read_samples, read_samples_file

console = Console()


def _info_table(title: str, rows: list[tuple[str, dict[str, Any]]]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD)
    table.add_column("field")
    for name, _ in rows:
        table.add_column(escape(name), justify="right")
    for field, _, _ in FIELDS:
        values = [info.get(field) for _, info in rows]
        cells = ["-" if v is None else (f"{v:,.3f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v))
                 for v in values]
        table.add_row(field, *cells)
    return table


def _analyze_file(path: Path, as_json: bool) -> None:
    name = path.name.lower()
    if name.endswith((".qlog", ".sqlog")):
        trace = read_qlog(path)
        info = quic_info(trace)
        lost = sorted(e.time_ms for e in trace.named("recovery:packet_lost"))
        threshold = (info.get("smooth_rtt_ms") or 0.0) + (info.get("var_rtt_ms") or 0.0)
        summary = {"file": str(path), "role": trace.role, "conn": trace.conn, "quic_info": info,
                   "bursts": L.burst_stats(L.bursts(lost, threshold)), "burst_threshold_ms": threshold}
        if as_json:
            print(json.dumps(summary, indent=2, default=str))
            return
        console.print(_info_table(f"QUIC_info of {path.name} ({trace.role or 'unknown role'})", [(trace.role or "-", info)]))
        console.print(f"losses: {info['lost']} packets in {summary['bursts']['bursts']} bursts "
                      f"(threshold {threshold:.1f} ms), mean burst {summary['bursts']['mean_burst']}")
    elif name.endswith(".ndjson"):
        try:
            rows = read_samples_file(path)
        except OSError as exc:
            raise AnalysisError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        if not rows:
            raise AnalysisError(f"{path}: no samples (not a protolab samples file, docs/samples.md)")
        transport = rows[0].get("transport")
        info = quic_info(None, rows) if transport == "quic" else tcp_info(rows)
        if as_json:
            print(json.dumps({"file": str(path), "transport": transport, "info": info}, indent=2, default=str))
            return
        label = "QUIC_info" if transport == "quic" else "TCP_info"
        console.print(_info_table(f"{label} of {path.name}", [(str(rows[0].get("role")), info)]))
    elif name.endswith((".pcap", ".pcapng")):
        segments = tshark_segments(path)
        flows: dict[tuple[str, int, str, int], list[dict[str, Any]]] = {}
        for segment in segments:
            flows.setdefault((segment["src"], segment["sport"], segment["dst"], segment["dport"]), []).append(segment)
        summary = []
        for (src, sport, dst, dport), mine in sorted(flows.items()):
            ends = Endpoints("tcp", (dst, dport), (src, sport))
            row, _ = tcp_losses(mine, None, ends, "server", 0.0)
            summary.append({"flow": f"{src}:{sport} > {dst}:{dport}", "segments": len(mine), **row})
        if as_json:
            print(json.dumps(summary, indent=2, default=str))
            return
        table = Table(title=f"TCP flows of {path.name}", box=box.SIMPLE_HEAD)
        for column in ("flow", "data segments", "retransmitted", "spurious (tshark)"):
            table.add_column(column, justify="right")
        for row in summary:
            table.add_row(row["flow"], str(row["segments"]), str(row["detected"]), str(row["spurious_tshark"]))
        console.print(table)
    else:
        raise AnalysisError(f"{path}: not a results directory, a qlog (.qlog, .sqlog), a samples file (.ndjson) "
                            "or a capture (.pcap, .pcapng)")


def analyze_results(results_dir: Path, experiments: list[str] | None) -> tuple[int, int, float]:
    """Every recorded run of the directory analysed again; (runs, notes, seconds)."""
    from protolab.store import ResultsStore

    started = time.monotonic()
    with ResultsStore(results_dir) as store:
        where = "" if not experiments else " WHERE experiment_id IN (SELECT unnest(?::VARCHAR[]))"
        runs = store.query(f"SELECT experiment_id, run_key, artifacts_dir FROM runs{where} ORDER BY experiment_id, "
                           "order_index", [experiments] if experiments else [])
        if experiments:
            known = {r["experiment_id"] for r in runs}
            missing = [e for e in experiments if e not in known]
            if missing:
                raise ProtolabError(f"{store.path}: no runs of experiment {', '.join(missing)}")
        notes = 0
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=console, transient=True) as progress:
            task = progress.add_task("analysing", total=len(runs))
            for run in runs:
                run_dir = results_dir / str(run["artifacts_dir"] or "")
                if run["artifacts_dir"] and run_dir.is_dir():
                    analysis = analyze_run(run_dir, read_samples(run_dir / "samples"), {})
                    store.replace_analysis(run["experiment_id"], run["run_key"], analysis)
                    notes += len(analysis.notes)
                progress.advance(task)
    return len(runs), notes, time.monotonic() - started


def analyze_command(
    path: Annotated[Path, typer.Argument(help="A results directory, or one qlog, samples (.ndjson) or pcap file.")],
    experiment: Annotated[list[str] | None, typer.Option(
        "--experiment", help="Results directory: analyse only this experiment (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One file: print JSON instead of a table.")] = False,
) -> None:
    """Transport analysis: QUIC_info/TCP_info per connection, losses and bursts against the emulator's truth, overhead."""
    if path.is_dir():
        runs, notes, seconds = analyze_results(path, experiment or None)
        console.print(f"analysed {runs} runs of {path} in {seconds:.1f} s ({notes} notes in the store's analysis_notes)")
        return
    if not path.exists():
        raise AnalysisError(f"{path}: no such file or directory")
    _analyze_file(path, as_json)
