"""Labelled flow datasets from the lab (issue 11, `protolab traffic corpus`): every page-load
run of a results directory whose client capture was kept (`[artifacts] pcap = true`, e.g. the
`traffic-corpus` scenario) is turned into flow records with `protolab-net flows`, and each flow
gets its ground truth from the run's own load result: the connection with the same 5-tuple
(client address:port, server address:port) and its protocol. In the lab the truth is exact:
the engine knows which protocol every connection spoke. docs/traffic.md, "Lab corpus"."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from protolab.errors import ProtolabError
from protolab.files import scratch_dir, write_text_atomically
from protolab.lab.binary import find_binary
from protolab.plan.spec import CONDITION_COLUMNS
from protolab.store import ResultsStore

CORPUS_SCHEMA = "protolab.traffic.corpus"
CORPUS_SCHEMA_VERSION = 1
# Run columns every corpus row carries (the condition it was measured in).
RUN_COLUMNS = ("mode", "page", *CONDITION_COLUMNS, "repetition")


class CorpusError(ProtolabError):
    """The results directory has no usable captures, or the flow extractor failed."""


def _extract(binary: Path, pcap: Path, out: Path) -> None:
    done = subprocess.run([str(binary), "flows", str(pcap), "--out", str(out), "--format", "parquet"],
                          capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise CorpusError(f"{pcap}: protolab-net flows exited with status {done.returncode}: "
                          f"{(done.stderr or done.stdout).strip()[-1500:]}")


# Each capture's flow records, kept beside the runs so that a corpus grown by new runs extracts
# only theirs (`protolab traffic corpus` resumes; a capture newer than its records, or another
# protolab-net, is extracted again).
FLOW_RECORDS_DIR = "flow-records"


def binary_stamp(binary: Path) -> str:
    """Which protolab-net made the records (its path, size and modification time)."""
    stat = binary.stat()
    return f"{binary.resolve()} {stat.st_size} {stat.st_mtime_ns}"


@contextlib.contextmanager
def _flow_records(results: Path, run_keys: list[str], binary: Path,
                  progress: Callable[[str], None] | None) -> Iterator[Path]:
    """The directory of every run's flow records (RUN_KEY.parquet), extracting those missing."""
    records = (results / FLOW_RECORDS_DIR).resolve()  # absolute: the links below point here
    records.mkdir(exist_ok=True)
    stamp_file = records / "protolab-net"
    stamp = binary_stamp(binary)
    if not stamp_file.is_file() or stamp_file.read_text() != stamp:
        for stale in records.glob("*.parquet"):
            stale.unlink()
        write_text_atomically(stamp_file, stamp)
    wanted = {f"{key}.parquet" for key in run_keys}
    for i, key in enumerate(run_keys):
        pcap, out = results / "runs" / key / "client.pcap", records / f"{key}.parquet"
        if out.is_file() and out.stat().st_mtime_ns >= pcap.stat().st_mtime_ns:
            continue
        if progress is not None:
            progress(f"[{i + 1}/{len(run_keys)}] {key}")
        staging = records / f".{key}.parquet.tmp"
        _extract(binary, pcap, staging)
        staging.replace(out)
    # Only the runs asked for (a run that failed since, or is gone, has no say in the corpus).
    chosen = scratch_dir("corpus")
    try:
        for name in wanted:
            (chosen / name).symlink_to(records / name)
        yield chosen
    finally:
        shutil.rmtree(chosen, ignore_errors=True)


def _insert_rows(con: Any, table: str, rows: list[list[Any]]) -> None:
    """All `rows` into `table` in one statement, a list per column (executemany costs
    milliseconds a row: minutes for a corpus of 10 000 connections)."""
    if not rows:
        return
    columns = [list(column) for column in zip(*rows, strict=True)]
    unnested = ", ".join(f"unnest(${i + 1})" for i in range(len(columns)))
    con.execute(f"INSERT INTO {table} SELECT {unnested}", columns)


def build_corpus(results: Path, out: Path, binary: Path,
                 progress: Callable[[str], None] | None = None, record: bool = True) -> dict[str, Any]:
    """Writes the labelled flows of every run with a client capture to `out` (Parquet) and, with
    `record`, into the results store's `flows` table (the report's flow characterization reads
    them there); returns the summary (also written as `out` + `.json`): runs, flows, labelled
    flows and the class balance of the ground truth."""
    import duckdb

    with ResultsStore(results, read_only=True) as store:
        runs = store.query(f"SELECT run_key, experiment_id, {', '.join(RUN_COLUMNS)} FROM runs WHERE status = 'ok'")
        connections = store.query("SELECT run_key, protocol, transport, local, remote FROM connections")
    captured = [r for r in runs if (results / "runs" / r["run_key"] / "client.pcap").is_file()]
    if not captured:
        raise CorpusError(f"{results}: no run kept a client capture (runs/<key>/client.pcap); run a spec with "
                          "[artifacts] pcap = true, e.g. specs/traffic-corpus.toml")
    with _flow_records(results, [r["run_key"] for r in captured], binary, progress) as tmp:
        con = duckdb.connect()
        con.execute("CREATE TABLE runs (run_key VARCHAR, experiment_id VARCHAR, mode VARCHAR, page VARCHAR, "
                    "bandwidth_mbps DOUBLE, rtt_ms DOUBLE, loss_pct DOUBLE, buffer_bytes BIGINT, repetition INTEGER)")
        _insert_rows(con, "runs", [[r["run_key"], r["experiment_id"], *(r[c] for c in RUN_COLUMNS)] for r in captured])
        con.execute("CREATE TABLE truth (run_key VARCHAR, truth_protocol VARCHAR, truth_transport VARCHAR, "
                    "local VARCHAR, remote VARCHAR)")
        _insert_rows(con, "truth", [[c["run_key"], c["protocol"], c["transport"], c["local"], c["remote"]]
                                    for c in connections if c["local"] and c["remote"]])
        parts = ", ".join(f"'{p}'" for p in sorted(str(p) for p in tmp.glob("*.parquet")))
        # The file name carries the run key (one capture per run).
        con.execute(f"CREATE VIEW flows AS SELECT *, regexp_extract(filename, '([^/]+)\\.parquet$', 1) AS run_key "
                    f"FROM read_parquet([{parts}], filename = true, union_by_name = true)")
        staging = out.with_name(f".{out.name}.tmp")
        con.execute(f"""
            COPY (
                SELECT f.* EXCLUDE (filename, protocol), f.protocol AS handshake_protocol,
                       -- The label the classifier learns (`protocol`): the lab's truth, cleartext
                       -- HTTP/1.1 counted as h1 (000's classes are HTTP versions).
                       CASE t.truth_protocol WHEN 'h1c' THEN 'h1' ELSE t.truth_protocol END AS protocol,
                       r.experiment_id, r.mode, r.page, r.bandwidth_mbps, r.rtt_ms, r.loss_pct,
                       r.buffer_bytes, r.repetition, t.truth_protocol, t.truth_transport
                FROM flows f JOIN runs r USING (run_key)
                LEFT JOIN truth t ON t.run_key = f.run_key
                    AND t.local = f.client_ip || ':' || f.client_port AND t.remote = f.server_ip || ':' || f.server_port
            ) TO '{staging}' (FORMAT PARQUET)""")
        balance = dict(con.execute(f"SELECT coalesce(protocol, 'unlabelled'), count(*) FROM read_parquet('{staging}') "
                                   "GROUP BY 1 ORDER BY 1").fetchall())
        agreement = con.execute(f"SELECT count(*) FILTER (WHERE handshake_protocol = protocol), "
                                f"count(*) FILTER (WHERE truth_protocol IS NOT NULL) FROM read_parquet('{staging}')").fetchone()
        con.close()
        shutil.move(staging, out)
    stored = None
    if record:
        with ResultsStore(results) as store:
            stored = store.replace_flows(out)
    labelled = sum(n for label, n in balance.items() if label != "unlabelled")
    summary = {
        "schema": CORPUS_SCHEMA, "schema_version": CORPUS_SCHEMA_VERSION, "results": str(results), "out": str(out),
        "runs": len(captured), "flows": sum(balance.values()), "labelled_flows": labelled, "class_balance": balance,
        # How often the extractor's handshake label (ALPN, QUIC, request line) equals the truth.
        "handshake_label_agreement": (agreement[0] / agreement[1]) if agreement and agreement[1] else None,
        "stored_flows": stored,
    }
    write_text_atomically(out.with_name(out.name + ".json"), json.dumps(summary, indent=2))
    return summary


def register(app: typer.Typer) -> None:
    """Adds `corpus` to the `protolab traffic` command group."""
    console, errors = Console(), Console(stderr=True)

    @app.command("corpus")
    def corpus_command(
        results: Annotated[Path, typer.Argument(help="A results directory whose runs kept the client's capture.")],
        out: Annotated[Path | None, typer.Option(
            "--out", "-o", help="The labelled flows (Parquet; default RESULTS/flows.parquet); a summary goes to "
                                "OUT.json.")] = None,
        binary: Annotated[Path | None, typer.Option("--binary", help="protolab-net to use.")] = None,
        record: Annotated[bool, typer.Option(
            "--store/--no-store", help="Also record the flows in the results store (table flows) for the report.")
                          ] = True,
    ) -> None:
        """Labelled flows from the lab: the client captures of a results directory (e.g. of
        specs/traffic-corpus.toml) through protolab-net flows, each flow labelled with the protocol
        its connection spoke (the run's load result)."""
        out = out if out is not None else results / "flows.parquet"
        try:
            if not (results / "results.duckdb").is_file():
                raise CorpusError(f"{results}: no results.duckdb (a results directory of protolab run)")
            if not out.parent.is_dir():
                raise CorpusError(f"--out: directory {out.parent} does not exist")
            summary = build_corpus(results, out, find_binary(binary), progress=lambda line: errors.print(line, style="dim"),
                                   record=record)
        except ProtolabError as exc:
            errors.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        balance = ", ".join(f"{k} {v}" for k, v in summary["class_balance"].items())
        console.print(f"{summary['runs']} runs, {summary['flows']} flows, {summary['labelled_flows']} labelled "
                      f"({balance}); handshake labels agree with the truth for "
                      f"{(summary['handshake_label_agreement'] or 0) * 100:.1f}% of labelled flows")
        console.print(f"wrote {escape(str(out))} and {escape(str(out))}.json"
                      + (f"; {summary['stored_flows']} flows recorded in the store (table flows)" if record else ""))
