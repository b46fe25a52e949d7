"""Parallel-connection detection of 000 §4.2.2 (`protolab traffic parallel`): flows grouped into
sessions by (protocol, client, server, domain) and MAX_GAP (Algorithm 1), isolated vs parallel
flows (Algorithm 2), and per session the degree of time overlap and of data overlap (000
§4.3.3-4.3.5, Figs. 4.3-4.7). docs/traffic.md, "Parallel connections", states every definition.

**Sessions.** The key is (protocol, client IP, server IP, domain), the domain being the SNI, else
the cleartext Host, else the server's address; per protocol, so 000's "H2 flows only" is the
`h2` rows of every result. Two rules:

- `000` (default), Algorithm 1: a flow joins the key's open session if it starts no later than
  the session's *first* flow's start + MAX_GAP; otherwise it opens a new session. A session
  therefore holds the connections opened within MAX_GAP of its first one.
- `gap`: a flow joins if it starts no later than MAX_GAP after the *end* of the session so
  far (the latest end of its flows); sessions chain for as long as connections keep coming.

A flow is *parallel* if its session holds more than one flow (Algorithm 2), else *isolated*.
Independently of that, a flow is *overlapping* if it is active while another flow of its
session is: their lifetimes as half-open intervals [first, last) intersect (a flow lasting 0
overlaps nothing).

**Per session** (000's definitions): the *time overlap* p = duration of the overlap between the
longest flow f_l and the flow f_o that overlaps f_l the longest, over the duration of f_l, in %;
the *data overlap* r = (session bytes - bytes of the largest flow f_s) / bytes of f_s, in %. Both
are NULL for single-flow sessions (and p when f_l lasts 0, r when f_s carries 0 bytes or a
flow's bytes are unknown). Ties (two longest or largest flows) go to the first in start order.

**How it runs.** In bounded memory, whatever the number of flows: DuckDB (with `memory_limit`
and a private `temp_directory`) reads the columns the detection needs in one pass and writes
them into buckets by the top bits of a 64-bit hash of the key (`COPY ... PARTITION_BY`), about
`chunk_rows` flows each, so a key's flows all land in one bucket. Each bucket is then sorted by
(key hash, first, last, row) in DuckDB and reduced with vectorized numpy (two buckets at a
time): session starts, per-flow flags, per-session reductions (`reduceat`); 000's window
anchored at a session's first flow is a greedy walk, needed only inside *islands* of flows
whose consecutive starts are at most MAX_GAP apart and which span more than MAX_GAP. Each
bucket's results go to part files; the parts are merged into the two outputs with the
sessions numbered across buckets. Memory: DuckDB's limit plus two buckets in numpy (a key's
flows are never split: one huge key makes a big bucket). The key is compared by its 64-bit
hash: two different keys share it with probability about K^2 / 2^65 for K keys (3e-4 for 10^8
keys), and only then, if their flows also start within MAX_GAP of each other, would two
clients' flows fall into one session.

The algorithm itself (numpy, no I/O) and `reference_detect`, the same definitions in plain Python
for the tests, are in protolab.traffic.sessions; the summary and figures in
protolab.traffic.parallel_figures. With `cluster`, the buckets are reduced as tasks on a Dask
cluster whose workers see the same paths (one machine, or `--temp-dir` on a shared file system).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from protolab.traffic.duck import (
    TrafficError,
    atomic_output,
    console,
    describe_flows,
    duck_connect,
    error_console,
    fail,
    first_line,
    made_dir,
    remove_tree,
    sql_path,
)
from protolab.traffic.parallel_figures import draw_figures, summarize
from protolab.traffic.sessions import DEFAULT_MAX_GAP_S, NS, RULES, Batch, bucket_bits, process_batch

SUMMARY_SCHEMA = "protolab.traffic.parallel"
SUMMARY_SCHEMA_VERSION = 1
BYTES_BASES = ("auto", "payload", "ip")

# 000's figures, for the summary's comparison (campus, residential networks; H2 and SPDY flows).
PAPER_000 = {
    "isolated_flow_share": {"campus": 0.671, "residential": 0.653},   # Table 4.2
    "parallel_flow_share": {"campus": 0.329, "residential": 0.347},   # Table 4.2
    "mean_flows_per_parallel_session": 3.0,                          # §4.3.1 ("around 3")
    "median_time_overlap_pct": {"campus": 75.0, "residential": 63.0},  # Fig. 4.4 (50% of sessions at least)
    "mean_overlap_s": {"campus": 58.5, "residential": 29.0},          # §4.3.3
}

SESSION_COLUMNS: list[tuple[str, str, str]] = [
    ("session_id", "BIGINT", "0, 1, ... in the order of (key hash, start); flows_parallel.session_id refers to it"),
    ("protocol", "VARCHAR", "the flows' protocol (part of the key)"),
    ("first_flow_row", "BIGINT", "row (0-based) in FLOWS.parquet of the session's first flow: its client, server, domain"),
    ("start_ns", "BIGINT", "first flow's start, Unix ns"),
    ("end_ns", "BIGINT", "latest end of its flows, Unix ns"),
    ("flows", "BIGINT", "flows in the session"),
    ("parallel", "BOOLEAN", "more than one flow (000 Algorithm 2)"),
    ("overlapping_flows", "BIGINT", "flows active while another flow of the session is"),
    ("longest_s", "DOUBLE", "duration of the longest flow f_l, s"),
    ("overlap_s", "DOUBLE", "overlap of f_l with the flow f_o overlapping it the longest, s (NULL: one flow)"),
    ("time_overlap_pct", "DOUBLE", "000's p = overlap_s / longest_s * 100 (NULL: one flow, or f_l lasts 0)"),
    ("total_bytes", "BIGINT", "bytes of all its flows (NULL if a flow's bytes are unknown)"),
    ("largest_bytes", "BIGINT", "bytes of the largest flow f_s"),
    ("data_overlap_pct", "DOUBLE", "000's r = (total - largest) / largest * 100 (NULL: one flow, 0 or unknown bytes)"),
]
FLOW_RESULT_COLUMNS: list[tuple[str, str, str]] = [
    ("flow_row", "BIGINT", "row (0-based) in FLOWS.parquet: join on it for the flow's other columns"),
    ("session_id", "BIGINT", "its session in sessions.parquet"),
    ("position", "BIGINT", "0, 1, ... by start within the session"),
    ("protocol", "VARCHAR", "the flow's protocol"),
    ("parallel", "BOOLEAN", "its session has more than one flow (000); else the flow is isolated"),
    ("overlapping", "BOOLEAN", "active while another flow of its session is (half-open lifetimes)"),
]

REQUIRED = {"client_ip": "VARCHAR", "server_ip": "VARCHAR", "first_ns": "integer", "last_ns": "integer"}
OPTIONAL = {"client_port": "integer", "protocol": "VARCHAR", "sni": "VARCHAR", "http_host": "VARCHAR",
            "c2s_payload_bytes": "integer", "s2c_payload_bytes": "integer", "c2s_bytes": "integer",
            "s2c_bytes": "integer"}
_INTEGER_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                  "UBIGINT"}


# ----------------------------------------------------------------------------------------------
# Flow files


def _type_ok(actual: str, wanted: str) -> bool:
    return actual in _INTEGER_TYPES if wanted == "integer" else actual == wanted


def check_columns(path: Path, types: dict[str, str]) -> None:
    for name, wanted in REQUIRED.items():
        if name not in types:
            raise TrafficError(f"{path}: field '{name}' is missing (a protolab.flows file has it)")
        if not _type_ok(types[name], wanted):
            raise TrafficError(f"{path}: field '{name}' has type {types[name]}, expected {wanted}")
    for name, wanted in OPTIONAL.items():
        if name in types and not _type_ok(types[name], wanted):
            raise TrafficError(f"{path}: field '{name}' has type {types[name]}, expected {wanted}")


# ----------------------------------------------------------------------------------------------
# The detection


@dataclass
class ParallelConfig:
    max_gap_s: float = DEFAULT_MAX_GAP_S
    rule: str = "000"
    protocols: list[str] = field(default_factory=list)  # empty: every protocol
    bytes_basis: str = "auto"
    memory_limit: str = "4GB"
    threads: int | None = None
    temp_directory: Path | None = None
    figures: bool = True
    focus_protocol: str | None = None  # Figs. 4.5-4.7 (default h2 if present)
    chunk_rows: int = 2_000_000  # sorted flows handed to numpy at a time (plus the rest of a key)
    cluster: str | None = None  # a Dask scheduler (or local:N) that reduces the buckets

    def check(self) -> None:
        if not (self.max_gap_s >= 0 and math.isfinite(self.max_gap_s)):
            raise TrafficError(f"--max-gap-s {self.max_gap_s}: expected a finite number >= 0")
        if self.rule not in RULES:
            raise TrafficError(f"--rule {self.rule}: expected one of {', '.join(RULES)}")
        if self.bytes_basis not in BYTES_BASES:
            raise TrafficError(f"--bytes {self.bytes_basis}: expected one of {', '.join(BYTES_BASES)}")

    @property
    def gap_ns(self) -> int:
        return round(self.max_gap_s * NS)


def _bytes_expr(path: Path, types: dict[str, str], basis: str) -> tuple[str, str | None]:
    """SQL of a flow's bytes (both directions) and the basis used (None: no byte columns)."""
    have = {b: all(c in types for c in cols) for b, cols in
            (("payload", ("c2s_payload_bytes", "s2c_payload_bytes")), ("ip", ("c2s_bytes", "s2c_bytes")))}
    if basis == "auto":
        basis = "payload" if have["payload"] else "ip" if have["ip"] else "none"
    elif not have[basis]:
        cols = ("c2s_payload_bytes", "s2c_payload_bytes") if basis == "payload" else ("c2s_bytes", "s2c_bytes")
        missing = next(c for c in cols if c not in types)
        raise TrafficError(f"{path}: field '{missing}' is missing (--bytes {basis})")
    if basis == "payload":
        return "(c2s_payload_bytes + s2c_payload_bytes)::BIGINT", "payload"
    if basis == "ip":
        return "(c2s_bytes + s2c_bytes)::BIGINT", "ip"
    return "NULL::BIGINT", None


def _protocol_names(con: Any, path: Path, types: dict[str, str]) -> list[str]:
    """The distinct protocol labels of the file (codes 1..n in the sorted table; 0 is NULL)."""
    if "protocol" not in types:
        return []
    return [r[0] for r in con.execute(f"SELECT DISTINCT protocol FROM read_parquet('{sql_path(path)}') "
                                      "WHERE protocol IS NOT NULL ORDER BY 1").fetchall()]


def _sql_list(values: Sequence[str]) -> str:
    return "[" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + "]::VARCHAR[]"


def _projection_sql(path: Path, types: dict[str, str], cfg: ParallelConfig, bytes_sql: str,
                    protocols: list[str], bucket_bits: int) -> str:
    """The columns the detection needs, one row per flow, with the key's hash and its bucket."""
    domain_parts = [f"NULLIF({c}, '')" for c in ("sni", "http_host") if c in types] + ["server_ip"]
    domain = f"coalesce({', '.join(domain_parts)})"
    protocol = "protocol" if "protocol" in types else "NULL::VARCHAR"
    code = f"coalesce(list_position({_sql_list(protocols)}, protocol), 0)" if protocols else "0"
    where = ""
    if cfg.protocols:
        if "protocol" not in types:
            raise TrafficError(f"{path}: field 'protocol' is missing (--protocol)")
        where = f"WHERE list_contains({_sql_list(cfg.protocols)}, protocol)"
    bad = ("((client_ip IS NULL)::UTINYINT | ((server_ip IS NULL)::UTINYINT << 1) | "
           "((first_ns IS NULL)::UTINYINT << 2) | ((last_ns IS NULL)::UTINYINT << 3) | "
           "(coalesce(last_ns < first_ns, false)::UTINYINT << 4))")
    bucket = f"(kh >> {64 - bucket_bits})::INTEGER" if bucket_bits else "0"
    return f"""
SELECT kh, {bucket} AS bucket, s, e, b, flow_row, pc, bad FROM (
    SELECT hash(coalesce({protocol}, ''), client_ip, server_ip, {domain}) AS kh,
           first_ns::BIGINT AS s, last_ns::BIGINT AS e, {bytes_sql} AS b,
           file_row_number::BIGINT AS flow_row, {code}::UINTEGER AS pc, {bad} AS bad
    FROM read_parquet('{sql_path(path)}', file_row_number = true)
    {where})
"""


_BAD_FIELDS = [(1, "client_ip", "is NULL"), (2, "server_ip", "is NULL"), (4, "first_ns", "is NULL"),
               (8, "last_ns", "is NULL"), (16, "last_ns", "is before first_ns")]


class _BadFlows(Exception):
    """A bucket holds flows that cannot be placed in time (see _check_buckets)."""


def _check_buckets(con: Any, path: Path, source: str) -> int:
    """The number of flows; an error naming the field if a flow cannot be placed in time."""
    parts = [f"count(*) FILTER (WHERE bad & {bit} > 0), min(flow_row) FILTER (WHERE bad & {bit} > 0)"
             for bit, _, _ in _BAD_FIELDS]
    row = con.execute(f"SELECT count(*), {', '.join(parts)} FROM {source}").fetchone()
    for i, (_, name, what) in enumerate(_BAD_FIELDS):
        n, first = row[1 + 2 * i], row[2 + 2 * i]
        if n:
            raise TrafficError(f"{path}: field '{name}' {what} in {n} flow(s) (the first at row {first})")
    return int(row[0])


def _read_bucket(cur: Any, files: list[Path]) -> Batch:
    import numpy as np

    listing = "[" + ", ".join(f"'{sql_path(f)}'" for f in files) + "]"
    got = cur.execute(f"SELECT kh, s, e, b, flow_row, pc, bad FROM read_parquet({listing}) "
                      "ORDER BY kh, s, e, flow_row").fetchnumpy()
    if np.ma.getdata(got["bad"]).any():
        raise _BadFlows
    b = got["b"]
    known = ~np.ma.getmaskarray(b)
    return Batch(np.asarray(got["kh"], dtype=np.uint64), np.asarray(got["s"], dtype=np.int64),
                  np.asarray(got["e"], dtype=np.int64), np.asarray(np.ma.getdata(b), dtype=np.int64) * known,
                  known, np.asarray(got["flow_row"], dtype=np.int64), np.asarray(got["pc"], dtype=np.int64))


_FLOW_PART = ("bucket", "session", "position", "flow_row", "pc", "parallel", "overlapping")
_SESSION_PART = ("bucket", "session", "pc", "first_flow_row", "start_ns", "end_ns", "flows", "overlapping_flows",
                 "longest_ns", "overlap_ns", "total_bytes", "largest_bytes", "unknown_bytes")


def _reduce_bucket(cur: Any, bucket: int, files: list[Path], parts_dir: Path, rule: str, gap_ns: int
                   ) -> tuple[int, int, int]:
    """One bucket (whole keys): sort its flows, compute their sessions and write them as two part
    files (session numbers from 0). Returns its sessions, the session starts found by the walk
    and its flows."""
    import threading

    import numpy as np

    batch = _read_bucket(cur, files)
    if not len(batch):
        return 0, 0, 0
    flows, sess, walked = process_batch(batch, rule, gap_ns)
    for name, table, columns in (("flows", flows, _FLOW_PART), ("sessions", sess, _SESSION_PART)):
        table["bucket"] = np.full(len(table["session"]), bucket, dtype=np.int32)
        view = f"part_{name}_{threading.get_ident()}"
        cur.register(view, table)
        cur.execute(f"COPY (SELECT {', '.join(columns)} FROM {view}) TO "
                    f"'{sql_path(parts_dir / name / f'part-{bucket:05d}.parquet')}' (FORMAT parquet)")
        cur.unregister(view)
    return len(sess["session"]), walked, len(batch)


def reduce_bucket_task(bucket: int, files: list[str], parts_dir: str, rule: str, gap_ns: int, memory_limit: str
                       ) -> tuple[int, int, int, int, str]:
    """`_reduce_bucket` on a Dask worker, with a DuckDB connection of its own (one thread; it
    spills under `parts_dir`). Paths must be the same on the worker as on the coordinator.
    Returns the bucket, its sessions, walked starts, flows and the worker's name."""
    from distributed import get_worker

    with duck_connect(memory_limit=memory_limit, threads=1, temp_directory=parts_dir) as con:
        n_sessions, walked, n = _reduce_bucket(con, bucket, [Path(f) for f in files], Path(parts_dir), rule, gap_ns)
    return bucket, n_sessions, walked, n, str(get_worker().name)


def _buckets(bucket_dir: Path) -> list[tuple[int, list[Path]]]:
    return sorted((int(p.name.split("=", 1)[1]), sorted(p.glob("*.parquet")))
                  for p in bucket_dir.glob("bucket=*") if p.is_dir())


def _run_buckets(con: Any, bucket_dir: Path, parts_dir: Path, cfg: ParallelConfig
                 ) -> tuple[dict[int, int], int, int]:
    """Every bucket through `_reduce_bucket`, two at a time on this machine's cores. Returns the
    sessions per bucket, the session starts found by the walk and the number of flows."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    local = threading.local()

    def work(bucket: int, files: list[Path]) -> tuple[int, int, int, int]:
        cur = getattr(local, "cur", None)
        if cur is None:
            cur = local.cur = con.cursor()
        return bucket, *_reduce_bucket(cur, bucket, files, parts_dir, cfg.rule, cfg.gap_ns)

    counts: dict[int, int] = {}
    walked = n_flows = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        for bucket, n_sessions, w, n in pool.map(lambda item: work(*item), _buckets(bucket_dir)):
            counts[bucket] = n_sessions
            walked += w
            n_flows += n
    return counts, walked, n_flows


def _run_buckets_on_cluster(bucket_dir: Path, parts_dir: Path, cfg: ParallelConfig, address: str
                            ) -> tuple[dict[int, int], int, int, dict[str, Any]]:
    """Every bucket as one task on the Dask cluster at `address` (a task whose worker dies is
    given to another); as `_run_buckets`, plus what ran where."""
    from distributed import as_completed

    from protolab.run.dask_client import TASK_RETRIES, connect, worker_names

    counts: dict[int, int] = {}
    walked = n_flows = 0
    by_worker: dict[str, int] = {}
    with connect(address) as client:
        futures = [client.submit(reduce_bucket_task, bucket, [str(f) for f in files], str(parts_dir), cfg.rule,
                                 cfg.gap_ns, cfg.memory_limit, pure=False, retries=TASK_RETRIES,
                                 key=f"protolab-parallel-{os.getpid()}-{bucket}")
                   for bucket, files in _buckets(bucket_dir)]
        workers = worker_names(client)
        try:
            for future in as_completed(futures):
                bucket, n_sessions, w, n, worker = future.result()
                counts[bucket] = n_sessions
                walked += w
                n_flows += n
                by_worker[worker] = by_worker.get(worker, 0) + 1
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return counts, walked, n_flows, {"scheduler": address, "workers": workers, "buckets_by_worker": by_worker}


def _protocol_sql(column: str, protocols: list[str]) -> str:
    if not protocols:
        return "NULL::VARCHAR"
    return f"(CASE WHEN {column} = 0 THEN NULL ELSE list_extract({_sql_list(protocols)}, {column}) END)"


def _write_outputs(con: Any, protocols: list[str], parts_dir: Path, counts: dict[int, int], flows_path: Path,
                   sessions_path: Path, meta: str) -> None:
    """Merge the parts into the two output files, numbering sessions across buckets."""
    import numpy as np

    ordered = sorted(counts)
    offsets = np.cumsum([0] + [counts[b] for b in ordered])[:-1]
    con.register("bucket_offsets", {"bucket": np.asarray(ordered, dtype=np.int32),
                                    "first_session": np.asarray(offsets, dtype=np.int64)})
    con.execute("CREATE TEMP TABLE offsets AS SELECT * FROM bucket_offsets")
    con.unregister("bucket_offsets")
    flows_src = f"read_parquet('{sql_path(parts_dir)}/flows/*.parquet')"
    sessions_src = f"read_parquet('{sql_path(parts_dir)}/sessions/*.parquet')"
    if not counts:  # no flows: empty parts of the right types
        flows_src = ("(SELECT NULL::INTEGER AS bucket, NULL::BIGINT AS session, NULL::BIGINT AS position, "
                     "NULL::BIGINT AS flow_row, NULL::UINTEGER AS pc, NULL::BOOLEAN AS parallel, "
                     "NULL::BOOLEAN AS overlapping WHERE false)")
        sessions_src = ("(SELECT NULL::INTEGER AS bucket, NULL::BIGINT AS session, NULL::UINTEGER AS pc, "
                        "NULL::BIGINT AS first_flow_row, NULL::BIGINT AS start_ns, NULL::BIGINT AS end_ns, "
                        "NULL::BIGINT AS flows, NULL::BIGINT AS overlapping_flows, NULL::BIGINT AS longest_ns, "
                        "NULL::BIGINT AS overlap_ns, NULL::BIGINT AS total_bytes, NULL::BIGINT AS largest_bytes, "
                        "NULL::BIGINT AS unknown_bytes WHERE false)")
    con.execute(f"""
        COPY (SELECT flow_row, first_session + session AS session_id, position,
                     {_protocol_sql('pc', protocols)} AS protocol, parallel, overlapping
              FROM {flows_src} JOIN offsets USING (bucket))
        TO '{sql_path(flows_path)}' (FORMAT parquet, {meta})""")
    con.execute(f"""
        COPY (SELECT first_session + session AS session_id, {_protocol_sql('pc', protocols)} AS protocol,
                     first_flow_row, start_ns, end_ns, flows, flows > 1 AS parallel, overlapping_flows,
                     longest_ns / 1e9 AS longest_s,
                     CASE WHEN flows > 1 THEN overlap_ns / 1e9 END AS overlap_s,
                     CASE WHEN flows > 1 AND longest_ns > 0 THEN 100.0 * overlap_ns / longest_ns END
                         AS time_overlap_pct,
                     CASE WHEN unknown_bytes = 0 THEN total_bytes END AS total_bytes,
                     CASE WHEN unknown_bytes = 0 THEN largest_bytes END AS largest_bytes,
                     CASE WHEN flows > 1 AND unknown_bytes = 0 AND largest_bytes > 0
                          THEN 100.0 * (total_bytes - largest_bytes) / largest_bytes END AS data_overlap_pct
              FROM {sessions_src} JOIN offsets USING (bucket))
        TO '{sql_path(sessions_path)}' (FORMAT parquet, {meta})""")


def detect(flows: Path | str, out_dir: Path | str, cfg: ParallelConfig | None = None,
           progress: Any = None) -> dict[str, Any]:
    """Run the detection on FLOWS (Parquet, protolab.flows schema) and write into OUT_DIR:
    sessions.parquet, flows_parallel.parquet, parallel_summary.json and the figures. Returns the
    summary. Nothing is written unless everything succeeds."""
    import duckdb

    try:
        return _detect(flows, out_dir, cfg, progress)
    except duckdb.Error as exc:  # a corrupt file met while reading, no space or memory left, ...
        raise TrafficError(f"{flows}: {first_line(exc)}") from exc


def _detect(flows: Path | str, out_dir: Path | str, cfg: ParallelConfig | None, progress: Any) -> dict[str, Any]:
    cfg = cfg or ParallelConfig()
    cfg.check()
    flows, out_dir = Path(flows), Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise TrafficError(f"{out_dir}: not a directory")
    say = progress or (lambda message: None)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    clock = [started]

    def lap(name: str) -> None:
        now = time.perf_counter()
        timings[name] = round(now - clock[0], 3)
        clock[0] = now

    targets = [out_dir / "sessions.parquet", out_dir / "flows_parallel.parquet", out_dir / "parallel_summary.json"]
    import duckdb

    with duckdb.connect() as probe:  # the input is checked before anything is created
        types = describe_flows(probe, flows)
    check_columns(flows, types)
    bytes_sql, basis = _bytes_expr(flows, types, cfg.bytes_basis)
    with made_dir(out_dir), duck_connect(memory_limit=cfg.memory_limit, threads=cfg.threads,
                                         temp_directory=cfg.temp_directory or out_dir) as con:
        protocols = _protocol_names(con, flows, types)
        rows = con.execute(f"SELECT count(*) FROM read_parquet('{sql_path(flows)}')").fetchone()[0]
        bits = bucket_bits(rows, cfg.chunk_rows)
        spill = Path(con.execute("SELECT current_setting('temp_directory')").fetchone()[0])
        bucket_dir = spill / "buckets"
        say(f"partitioning {rows} flows into {1 << bits} bucket(s) by key")
        con.execute(f"COPY ({_projection_sql(flows, types, cfg, bytes_sql, protocols, bits)}) "
                    f"TO '{sql_path(bucket_dir)}' (FORMAT parquet, PARTITION_BY (bucket), "
                    "WRITE_PARTITION_COLUMNS false)")
        lap("partition_s")
        if not cfg.cluster:
            say("sessions, bucket by bucket")
        con.execute("SET preserve_insertion_order = false")
        parts = spill / "parts"
        (parts / "flows").mkdir(parents=True)
        (parts / "sessions").mkdir(parents=True)
        cluster: dict[str, Any] | None = None
        try:
            if cfg.cluster:
                say(f"sessions, one task per bucket on the cluster {cfg.cluster}")
                counts, walked, n, cluster = _run_buckets_on_cluster(bucket_dir, parts, cfg, cfg.cluster)
            else:
                counts, walked, n = _run_buckets(con, bucket_dir, parts, cfg)
        except _BadFlows:  # name the field, with the count over all flows
            _check_buckets(con, flows, f"read_parquet('{sql_path(bucket_dir)}/*/*.parquet')")
            raise
        lap("sessions_s")
        with atomic_output(targets) as (tmp_sessions, tmp_flows, tmp_summary):
            meta = (f"KV_METADATA {{schema: '{SUMMARY_SCHEMA}', schema_version: '{SUMMARY_SCHEMA_VERSION}', "
                    f"rule: '{cfg.rule}', max_gap_s: '{cfg.max_gap_s:g}'}}")
            say("writing flows_parallel.parquet and sessions.parquet")
            _write_outputs(con, protocols, spill / "parts", counts, tmp_flows, tmp_sessions, meta)
            lap("write_s")
            summary = summarize(con, tmp_sessions, tmp_flows)
            if summary["flows"] != n:
                raise TrafficError(f"internal error: {summary['flows']} flows in sessions of {n} flows")
            lap("summary_s")
            figures: list[str] = []
            if cfg.figures:
                say("drawing the figures")
                staging = Path(tempfile.mkdtemp(prefix=".figures-", dir=out_dir))
                try:
                    drawn = draw_figures(con, tmp_sessions, staging, cfg.focus_protocol)
                    for f in drawn:
                        os.replace(f, out_dir / Path(f).name)
                        figures.append(str(out_dir / Path(f).name))
                finally:
                    remove_tree(staging)
                lap("figures_s")
            timings["total_s"] = round(time.perf_counter() - started, 3)
            summary = {
                "schema": SUMMARY_SCHEMA, "schema_version": SUMMARY_SCHEMA_VERSION,
                "input": str(flows),
                "config": {"max_gap_s": cfg.max_gap_s, "rule": cfg.rule, "protocols": cfg.protocols or None,
                           "bytes_basis": basis, "memory_limit": cfg.memory_limit, "threads": cfg.threads,
                           "buckets": 1 << bits, "cluster": cluster},
                "walked_session_starts": walked,
                **summary,
                "paper_000": PAPER_000,
                "files": [str(p) for p in targets] + figures,
                "timings": timings,
            }
            tmp_summary.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


# ----------------------------------------------------------------------------------------------
# Command line (registered on `protolab traffic` by protolab.traffic.cli)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def summary_table(summary: dict[str, Any]) -> Any:
    from rich import box
    from rich.table import Table

    cfg = summary["config"]
    table = Table(title=f"Parallel connections: {summary['flows']} flows, {summary['sessions']} sessions "
                        f"(rule {cfg['rule']}, MAX_GAP {cfg['max_gap_s']:g} s)",
                  caption="parallel: the session has more than one flow (000 Alg. 2); overlapping: active while "
                          "another flow of the session is; p: time overlap, r: data overlap (000 §4.3.3-4.3.5), "
                          "medians over sessions with parallel flows. 000, H2+SPDY: parallel 32.9% (campus), "
                          "34.7% (residential), ~3 flows per parallel session, median p >= 75% / 63%.",
                  box=box.SIMPLE_HEAD)
    for column in ("protocol", "flows", "sessions", "parallel flows", "isolated flows", "flows / parallel session",
                   "overlapping flows", "median p", "mean overlap s", "median r"):
        table.add_column(column, justify="left" if column == "protocol" else "right")
    for name, v in summary["by_protocol"].items():
        table.add_row(name, str(v["flows"]), str(v["sessions"]), _pct(v["parallel_flow_share"]),
                      _pct(v["isolated_flow_share"]), _num(v["mean_flows_per_parallel_session"], ".2f"),
                      _pct(v["overlapping_flow_share"]), _num(v["median_time_overlap_pct"]),
                      _num(v["mean_overlap_s"]), _num(v["median_data_overlap_pct"]))
    return table


def parallel_command(
    flows: Annotated[Path, typer.Argument(help="Flows (Parquet, protolab.flows schema).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for sessions.parquet, flows_parallel.parquet, "
                                                           "parallel_summary.json and the figures.")],
    max_gap_s: Annotated[float, typer.Option("--max-gap-s", help="MAX_GAP of 000 Alg. 1, seconds.")] = DEFAULT_MAX_GAP_S,
    rule: Annotated[str, typer.Option("--rule", help="000: a session holds the flows starting within MAX_GAP of its "
                                                     "first flow (Alg. 1); gap: within MAX_GAP of its latest end.")
                    ] = "000",
    protocol: Annotated[list[str] | None, typer.Option(
        "--protocol", help="Only flows of this protocol (repeat; default: all, each in its own sessions).")] = None,
    bytes_basis: Annotated[str, typer.Option("--bytes", help="auto (payload bytes if the file has them, else IP "
                                                             "bytes), payload or ip.")] = "auto",
    memory_limit: Annotated[str, typer.Option("--memory-limit", help="DuckDB's memory limit.")] = "4GB",
    temp_dir: Annotated[Path | None, typer.Option(
        "--temp-dir", help="Where DuckDB spills and the buckets go (default: the output directory).")] = None,
    threads: Annotated[int | None, typer.Option("--threads", min=1, help="DuckDB threads (default: all cores).")
                       ] = None,
    figures: Annotated[bool, typer.Option("--figures/--no-figures", help="Draw 000 Figs. 4.3-4.7.")] = True,
    figure_protocol: Annotated[str | None, typer.Option(
        "--figure-protocol", help="Protocol of Figs. 4.5-4.7 (default h2 if present, else all).")] = None,
    cluster: Annotated[str | None, typer.Option(
        "--cluster", help="Reduce the buckets on a Dask cluster: tcp://HOST:8786 (workers must see --temp-dir "
                          "at the same path), or local:N for N worker processes on this machine.")] = None,
) -> None:
    """Parallel connections (000 §4.2.2): sessions by (protocol, client, server, domain) and MAX_GAP,
    isolated vs parallel flows, time and data overlap per session; a summary and 000 Figs. 4.3-4.7."""
    cfg = ParallelConfig(max_gap_s=max_gap_s, rule=rule, protocols=list(protocol or []), bytes_basis=bytes_basis,
                         memory_limit=memory_limit, threads=threads, temp_directory=temp_dir, figures=figures,
                         focus_protocol=figure_protocol, cluster=cluster)
    err = error_console()
    try:
        summary = detect(flows, out, cfg, progress=lambda m: err.print(f"[dim]{m}[/]", highlight=False))
    except TrafficError as exc:
        raise fail(exc) from None
    con = console()
    con.print(summary_table(summary))
    t = summary["timings"]
    rate = summary["flows"] / t["total_s"] if t["total_s"] else 0.0
    con.print(f"{summary['flows']} flows in {t['total_s']:.1f} s ({rate:,.0f} flows/s); wrote "
              f"{out / 'sessions.parquet'}, {out / 'flows_parallel.parquet'}, {out / 'parallel_summary.json'}"
              + (f" and {len(summary['files']) - 3} figure files" if len(summary["files"]) > 3 else ""))


def register(app: Any) -> None:
    """Add `parallel` to the `protolab traffic` Typer app."""
    app.command("parallel")(parallel_command)
