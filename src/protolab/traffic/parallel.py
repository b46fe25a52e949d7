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

`reference_detect` is the same algorithm in plain Python over a list of flows, for the tests.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from protolab.errors import ProtolabError

SUMMARY_SCHEMA = "protolab.traffic.parallel"
SUMMARY_SCHEMA_VERSION = 1
DEFAULT_MAX_GAP_S = 5.0
RULES = ("000", "gap")
BYTES_BASES = ("auto", "payload", "ip")
NS = 1_000_000_000
TWO64 = 1 << 64

# 000 Fig. 4.5/4.6: sessions by the duration of their longest flow; Fig. 4.7: by the size of
# their largest flow (kB of 1000 bytes). (label, low, high): low <= x < high.
DURATION_BUCKETS: list[tuple[str, float, float]] = [
    ("< 10 s", 0.0, 10.0), ("10-60 s", 10.0, 60.0), ("60-600 s", 60.0, 600.0), ("> 600 s", 600.0, math.inf)]
SIZE_BUCKETS: list[tuple[str, float, float]] = [
    ("< 5 kB", 0.0, 5e3), ("5-10 kB", 5e3, 1e4), ("10-50 kB", 1e4, 5e4), ("50-500 kB", 5e4, 5e5),
    ("> 500 kB", 5e5, math.inf)]

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


class TrafficError(ProtolabError):
    """Bad flows, a bad Tstat file or bad options (the `protolab traffic` commands exit with status 2)."""


# ----------------------------------------------------------------------------------------------
# DuckDB and files (shared by the traffic commands)


def sql_path(path: Path | str) -> str:
    """A path as a single-quoted SQL string's contents."""
    return str(path).replace("'", "''")


@contextmanager
def duck_connect(*, memory_limit: str = "4GB", threads: int | None = None,
                 temp_directory: Path | str | None = None) -> Iterator[Any]:
    """An in-memory DuckDB connection with bounded memory: what does not fit spills into a
    private temporary directory (under `temp_directory`), removed afterwards."""
    import duckdb

    base = Path(temp_directory) if temp_directory else None
    try:
        if base is not None:
            base.mkdir(parents=True, exist_ok=True)
        spill = Path(tempfile.mkdtemp(prefix=".protolab-duckdb-", dir=base))
    except OSError as exc:
        raise TrafficError(f"{base}: cannot create a temporary directory ({exc.strerror or exc})") from exc
    try:
        con = duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": str(spill),
                                     "preserve_insertion_order": True,
                                     **({"threads": threads} if threads else {})})
    except duckdb.Error as exc:
        _remove_tree(spill)
        raise TrafficError(f"DuckDB settings (memory limit {memory_limit!r}, threads {threads}): {_first_line(exc)}") from exc
    try:
        con.execute("SET enable_progress_bar = false")
        yield con
    finally:
        con.close()
        _remove_tree(spill)


def _remove_tree(path: Path) -> None:
    for child in sorted(path.rglob("*"), reverse=True):
        if child.is_dir():
            child.rmdir()
        else:
            child.unlink(missing_ok=True)
    path.rmdir()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def made_dir(path: Path) -> Iterator[Path]:
    """`path` as a directory (created with its parents if needed); the directories created
    here are removed again if the block fails and leaves them empty."""
    created: list[Path] = []
    probe = path
    while not probe.exists():
        created.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrafficError(f"{path}: cannot create the directory ({exc.strerror or exc})") from exc
    ok = False
    try:
        yield path
        ok = True
    finally:
        if not ok:
            for d in created:  # deepest first
                try:
                    d.rmdir()
                except OSError:
                    break


@contextmanager
def atomic_output(targets: list[Path]) -> Iterator[list[Path]]:
    """Temporary paths beside `targets` (not created), renamed over them only if the block
    succeeds; nothing is left behind otherwise (not even the directories made for them)."""
    temps: list[Path] = []
    with contextlib.ExitStack() as dirs:
        try:
            for target in targets:
                if target.is_dir():
                    raise TrafficError(f"{target}: is a directory")
                dirs.enter_context(made_dir(target.parent))
                try:
                    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
                except OSError as exc:
                    raise TrafficError(f"{target.parent}: cannot write there ({exc.strerror or exc})") from exc
                os.close(fd)
                os.unlink(tmp)  # DuckDB's COPY (or the caller) creates the file
                temps.append(Path(tmp))
            yield temps
            for tmp, target in zip(temps, targets, strict=True):
                os.replace(tmp, target)
        finally:
            for tmp in temps:
                tmp.unlink(missing_ok=True)


def describe_flows(con: Any, path: Path) -> dict[str, str]:
    """Column -> DuckDB type of a Parquet flow file; a clear error if it is missing or unreadable."""
    import duckdb

    if not path.exists():
        raise TrafficError(f"{path}: no such file")
    if not path.is_file():
        raise TrafficError(f"{path}: not a file")
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{sql_path(path)}')").fetchall()
    except duckdb.Error as exc:
        raise TrafficError(f"{path}: not a readable Parquet file ({_first_line(exc)})") from exc
    return {str(r[0]): str(r[1]) for r in rows}


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


_MIN = -(1 << 62)  # below any time: "no earlier flow"


def _segmented_prev_max(v: Any, seg_start: Any) -> Any:
    """For each i, the maximum of v over the rows of i's segment before i (_MIN if none).
    Segments are contiguous; seg_start[i] is the index of i's segment's first row. A
    Hillis-Steele scan: log2(longest segment) vectorized passes."""
    import numpy as np

    n = len(v)
    idx = np.arange(n)
    out = np.empty(n, dtype=np.int64)
    out[0] = _MIN
    out[1:] = v[:-1]
    out[seg_start == idx] = _MIN
    longest = int((idx - seg_start).max()) + 1 if n else 0
    step = 1
    while step < longest:
        ok = idx[step:] - step >= seg_start[step:]
        out[step:] = np.where(ok, np.maximum(out[step:], out[:-step]), out[step:])
        step *= 2
    return out


@dataclass
class _Batch:
    """Flows of whole keys, sorted by (key hash, start, end, row)."""

    kh: Any
    s: Any
    e: Any
    b: Any
    known: Any
    flow_row: Any
    pc: Any

    def __len__(self) -> int:
        return len(self.kh)


def _read_bucket(cur: Any, files: list[Path]) -> _Batch:
    import numpy as np

    listing = "[" + ", ".join(f"'{sql_path(f)}'" for f in files) + "]"
    got = cur.execute(f"SELECT kh, s, e, b, flow_row, pc, bad FROM read_parquet({listing}) "
                      "ORDER BY kh, s, e, flow_row").fetchnumpy()
    if np.ma.getdata(got["bad"]).any():
        raise _BadFlows
    b = got["b"]
    known = ~np.ma.getmaskarray(b)
    return _Batch(np.asarray(got["kh"], dtype=np.uint64), np.asarray(got["s"], dtype=np.int64),
                  np.asarray(got["e"], dtype=np.int64), np.asarray(np.ma.getdata(b), dtype=np.int64) * known,
                  known, np.asarray(got["flow_row"], dtype=np.int64), np.asarray(got["pc"], dtype=np.int64))


def _session_breaks(x: _Batch, cfg: ParallelConfig) -> tuple[Any, int]:
    """Rows that open a session, and how many of them the 000 rule's walk found inside
    islands longer than MAX_GAP."""
    import numpy as np

    g = cfg.gap_ns
    n = len(x)
    idx = np.arange(n)
    new_key = np.empty(n, dtype=bool)
    new_key[0] = True
    new_key[1:] = x.kh[1:] != x.kh[:-1]
    if cfg.rule == "gap":
        key_start = np.maximum.accumulate(np.where(new_key, idx, 0))
        before = _segmented_prev_max(x.e, key_start)
        return new_key | (x.s > before + g), 0
    brk = new_key.copy()
    brk[1:] |= (x.s[1:] - x.s[:-1]) > g
    island_start = np.maximum.accumulate(np.where(brk, idx, 0))
    rel = x.s - x.s[island_start]
    long_rows = np.flatnonzero(rel > g)
    if not len(long_rows):
        return brk, 0
    # Islands (consecutive starts at most MAX_GAP apart) longer than MAX_GAP: walk the anchors.
    isl = island_start[long_rows]
    lrel = rel[long_rows]
    ends = np.append(np.flatnonzero(np.diff(isl)) + 1, len(long_rows))
    end_of = np.repeat(ends, np.diff(np.concatenate(([0], ends))))
    chosen = []
    i = 0
    while i < len(long_rows):
        chosen.append(i)  # beyond MAX_GAP of the island's current session start: opens a session
        i += int(np.searchsorted(lrel[i:end_of[i]], lrel[i] + g, side="right"))
    brk[long_rows[np.asarray(chosen)]] = True
    return brk, len(chosen)


def _process(x: _Batch, cfg: ParallelConfig) -> tuple[dict[str, Any], dict[str, Any], int]:
    """Per-flow and per-session results of a batch of whole keys (session ids from 0)."""
    import numpy as np

    n = len(x)
    idx = np.arange(n)
    brk, walked = _session_breaks(x, cfg)
    local = np.cumsum(brk) - 1
    starts = np.flatnonzero(brk)
    lengths = np.diff(np.append(starts, n))
    start_of = starts[local]
    end_of = (starts + lengths)[local]
    d = x.e - x.s
    # Overlapping ([first, last) lifetimes intersect): an earlier flow of the session ends
    # after this one starts, or the next flow that lasts starts before this one ends.
    before = _segmented_prev_max(x.e, start_of)
    lasting = np.flatnonzero(d > 0)
    k = np.searchsorted(lasting, idx, side="right")
    nxt = lasting[np.minimum(k, len(lasting) - 1)] if len(lasting) else idx
    has_next = (k < len(lasting)) & (nxt < end_of)
    overlapping = ((before > x.s) & (d > 0)) | (has_next & (x.s[nxt] < x.e))
    flows = {"session": local, "position": idx - start_of, "parallel": lengths[local] > 1,
             "overlapping": overlapping, "flow_row": x.flow_row, "pc": x.pc}
    # 000's p: the longest flow f_l (the first of equals) and its longest overlap with another.
    longest = np.maximum.reduceat(d, starts)
    f_l = np.minimum.reduceat(np.where(d == longest[local], idx, n), starts)
    s_l, e_l = x.s[f_l][local], x.e[f_l][local]
    ov = np.maximum(0, np.minimum(x.e, e_l) - np.maximum(x.s, s_l))
    ov[f_l] = -1
    sessions = {
        "session": np.arange(len(starts)), "pc": x.pc[starts],
        "first_flow_row": x.flow_row[starts], "start_ns": x.s[starts],
        "end_ns": np.maximum.reduceat(x.e, starts), "flows": lengths,
        "overlapping_flows": np.add.reduceat(overlapping.astype(np.int64), starts),
        "longest_ns": longest, "overlap_ns": np.maximum.reduceat(ov, starts),
        "total_bytes": np.add.reduceat(x.b, starts), "largest_bytes": np.maximum.reduceat(x.b, starts),
        "unknown_bytes": np.add.reduceat((~x.known).astype(np.int64), starts),
    }
    return flows, sessions, walked


def _bucket_bits(flows: int, chunk_rows: int) -> int:
    """log2 of the number of buckets: about `chunk_rows` flows each (at most 2^12 buckets)."""
    bits = 0
    while bits < 12 and (flows >> bits) > chunk_rows:
        bits += 1
    return bits


_FLOW_PART = ("bucket", "session", "position", "flow_row", "pc", "parallel", "overlapping")
_SESSION_PART = ("bucket", "session", "pc", "first_flow_row", "start_ns", "end_ns", "flows", "overlapping_flows",
                 "longest_ns", "overlap_ns", "total_bytes", "largest_bytes", "unknown_bytes")


def _run_buckets(con: Any, bucket_dir: Path, parts_dir: Path, cfg: ParallelConfig
                 ) -> tuple[dict[int, int], int, int]:
    """Sort each bucket (whole keys), compute its sessions and write them as part files
    (session numbers from 0 in each bucket), two buckets at a time. Returns the sessions per
    bucket, the session starts found by the walk and the number of flows."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    buckets = sorted((int(p.name.split("=", 1)[1]), sorted(p.glob("*.parquet")))
                     for p in bucket_dir.glob("bucket=*") if p.is_dir())
    (parts_dir / "flows").mkdir(parents=True, exist_ok=True)
    (parts_dir / "sessions").mkdir(parents=True, exist_ok=True)
    local = threading.local()

    def work(bucket: int, files: list[Path]) -> tuple[int, int, int, int]:
        import numpy as np

        cur = getattr(local, "cur", None)
        if cur is None:
            cur = local.cur = con.cursor()
        batch = _read_bucket(cur, files)
        if not len(batch):
            return bucket, 0, 0, 0
        flows, sess, walked = _process(batch, cfg)
        for name, table, columns in (("flows", flows, _FLOW_PART), ("sessions", sess, _SESSION_PART)):
            table["bucket"] = np.full(len(table["session"]), bucket, dtype=np.int32)
            view = f"part_{name}_{threading.get_ident()}"
            cur.register(view, table)
            cur.execute(f"COPY (SELECT {', '.join(columns)} FROM {view}) TO "
                        f"'{sql_path(parts_dir / name / f'part-{bucket:05d}.parquet')}' (FORMAT parquet)")
            cur.unregister(view)
        return bucket, len(sess["session"]), walked, len(batch)

    counts: dict[int, int] = {}
    walked = n_flows = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        for bucket, n_sessions, w, n in pool.map(lambda item: work(*item), buckets):
            counts[bucket] = n_sessions
            walked += w
            n_flows += n
    return counts, walked, n_flows


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
        raise TrafficError(f"{flows}: {_first_line(exc)}") from exc


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
        bits = _bucket_bits(rows, cfg.chunk_rows)
        spill = Path(con.execute("SELECT current_setting('temp_directory')").fetchone()[0])
        bucket_dir = spill / "buckets"
        say(f"partitioning {rows} flows into {1 << bits} bucket(s) by key")
        con.execute(f"COPY ({_projection_sql(flows, types, cfg, bytes_sql, protocols, bits)}) "
                    f"TO '{sql_path(bucket_dir)}' (FORMAT parquet, PARTITION_BY (bucket), "
                    "WRITE_PARTITION_COLUMNS false)")
        lap("partition_s")
        say("sessions, bucket by bucket")
        con.execute("SET preserve_insertion_order = false")
        try:
            counts, walked, n = _run_buckets(con, bucket_dir, spill / "parts", cfg)
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
                    _remove_tree(staging)
                lap("figures_s")
            timings["total_s"] = round(time.perf_counter() - started, 3)
            summary = {
                "schema": SUMMARY_SCHEMA, "schema_version": SUMMARY_SCHEMA_VERSION,
                "input": str(flows),
                "config": {"max_gap_s": cfg.max_gap_s, "rule": cfg.rule, "protocols": cfg.protocols or None,
                           "bytes_basis": basis, "memory_limit": cfg.memory_limit, "threads": cfg.threads,
                           "buckets": 1 << bits},
                "walked_session_starts": walked,
                **summary,
                "paper_000": PAPER_000,
                "files": [str(p) for p in targets] + figures,
                "timings": timings,
            }
            tmp_summary.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


# ----------------------------------------------------------------------------------------------
# Summary and figures


def _frac(a: float | None, b: float | None) -> float | None:
    return None if not b or a is None else a / b


def summarize(con: Any, sessions: Path, flows: Path) -> dict[str, Any]:
    """Per protocol: flows, sessions, isolated and parallel flows, overlap statistics."""
    rows = con.execute(f"""
        SELECT protocol, count(*) AS sessions, sum(flows) AS flows,
               count(*) FILTER (WHERE parallel) AS parallel_sessions,
               coalesce(sum(flows) FILTER (WHERE parallel), 0) AS parallel_flows,
               sum(overlapping_flows) AS overlapping_flows,
               max(flows) AS max_flows,
               median(time_overlap_pct) FILTER (WHERE parallel) AS median_p,
               avg(time_overlap_pct) FILTER (WHERE parallel) AS mean_p,
               avg(overlap_s) FILTER (WHERE parallel) AS mean_overlap_s,
               median(data_overlap_pct) FILTER (WHERE parallel) AS median_r,
               count(*) FILTER (WHERE parallel AND data_overlap_pct >= 100) AS r_ge_100,
               count(data_overlap_pct) FILTER (WHERE parallel) AS r_known,
               count(*) FILTER (WHERE parallel AND time_overlap_pct >= 95) AS p_ge_95,
               count(time_overlap_pct) FILTER (WHERE parallel) AS p_known
        FROM read_parquet('{sql_path(sessions)}')
        GROUP BY ALL ORDER BY flows DESC, protocol NULLS LAST
    """).fetchall()
    cols = ["protocol", "sessions", "flows", "parallel_sessions", "parallel_flows", "overlapping_flows", "max_flows",
            "median_p", "mean_p", "mean_overlap_s", "median_r", "r_ge_100", "r_known", "p_ge_95", "p_known"]
    by_protocol: dict[str, Any] = {}
    for r in rows:
        d = dict(zip(cols, r, strict=True))
        name = d["protocol"] if d["protocol"] is not None else "(none)"
        flows_n = int(d["flows"])
        by_protocol[name] = {
            "flows": flows_n, "sessions": int(d["sessions"]),
            "parallel_sessions": int(d["parallel_sessions"]), "parallel_flows": int(d["parallel_flows"]),
            "isolated_flows": flows_n - int(d["parallel_flows"]),
            "parallel_flow_share": _frac(d["parallel_flows"], flows_n),
            "isolated_flow_share": _frac(flows_n - d["parallel_flows"], flows_n),
            "overlapping_flows": int(d["overlapping_flows"]),
            "overlapping_flow_share": _frac(d["overlapping_flows"], flows_n),
            "mean_flows_per_parallel_session": _frac(d["parallel_flows"], d["parallel_sessions"]),
            "max_flows_per_session": int(d["max_flows"]),
            "median_time_overlap_pct": d["median_p"], "mean_time_overlap_pct": d["mean_p"],
            "share_time_overlap_ge_95pct": _frac(d["p_ge_95"], d["p_known"]),
            "mean_overlap_s": d["mean_overlap_s"],
            "median_data_overlap_pct": d["median_r"],
            "share_data_overlap_ge_100pct": _frac(d["r_ge_100"], d["r_known"]),
        }
    total_flows = sum(v["flows"] for v in by_protocol.values())
    total_parallel = sum(v["parallel_flows"] for v in by_protocol.values())
    n_results = con.execute(f"SELECT count(*) FROM read_parquet('{sql_path(flows)}')").fetchone()[0]
    if n_results != total_flows:
        raise TrafficError(f"internal error: {n_results} flow results for {total_flows} flows in sessions")
    return {"flows": total_flows, "sessions": sum(v["sessions"] for v in by_protocol.values()),
            "parallel_flow_share": _frac(total_parallel, total_flows),
            "by_protocol": by_protocol}


def _bin_sql(value: str, edges: Sequence[float]) -> str:
    """Index of the first edge >= value (len(edges) above the last)."""
    n = len(edges)
    steps = {round(b - a, 9) for a, b in itertools.pairwise(edges)}
    if len(steps) == 1 and edges[0] == 0:
        w = steps.pop()
        return f"least({n}, greatest(0, ceil({value} / {w!r})))::BIGINT"
    parts = " ".join(f"WHEN {value} <= {e!r} THEN {k}" for k, e in enumerate(edges))
    return f"(CASE {parts} ELSE {n} END)"


def _cdf_from_histogram(con: Any, sessions: Path, value: str, group: str, where: str, edges: Sequence[float]
                        ) -> dict[str, tuple[list[float], list[float]]]:
    """Exact CDF at `edges` (share of sessions with value <= edge) per group, in bounded memory."""
    import numpy as np

    rows = con.execute(f"""
        SELECT {group} AS g, {_bin_sql(value, edges)} AS bin, count(*)
        FROM read_parquet('{sql_path(sessions)}') WHERE ({where}) AND {value} IS NOT NULL
        GROUP BY ALL
    """).fetchall()
    out: dict[str, tuple[list[float], list[float]]] = {}
    for g in sorted({r[0] for r in rows if r[0] is not None}):
        counts = np.zeros(len(edges) + 1)
        for gg, b, c in rows:
            if gg == g:
                counts[int(b)] += c
        cdf = np.cumsum(counts)[: len(edges)] / counts.sum()
        out[str(g)] = (list(edges), cdf.tolist())
    return out


def _bucket_case(column: str, buckets: list[tuple[str, float, float]]) -> str:
    parts = [f"WHEN {column} < {high!r} THEN '{label}'" for label, _, high in buckets[:-1]]
    return f"(CASE {' '.join(parts)} ELSE '{buckets[-1][0]}' END)"


def draw_figures(con: Any, sessions: Path, out_dir: Path, focus: str | None = None) -> list[str]:
    """000 Figs. 4.3-4.7 as PNG and SVG in OUT_DIR; returns the paths written."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    from protolab.report.figures import PALETTE, RC

    src = f"read_parquet('{sql_path(sessions)}')"
    protocols = [r[0] for r in con.execute(
        f"SELECT protocol FROM {src} WHERE protocol IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC").fetchall()]
    if focus is None:
        focus = "h2" if "h2" in protocols else None
    focus_where = f"protocol = '{focus}'" if focus else "true"
    focus_label = focus or "all protocols"
    written: list[str] = []

    def save(fig: Figure, name: str) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        with rc_context(RC):
            fig.savefig(out_dir / f"{name}.svg", format="svg", metadata={"Date": None})
            fig.savefig(out_dir / f"{name}.png", format="png", dpi=110)
        written.extend([str(out_dir / f"{name}.svg"), str(out_dir / f"{name}.png")])

    def cdf_plot(name: str, title: str, xlabel: str, curves: dict[str, tuple[list[float], list[float]]],
                 log_x: bool = False, order: Sequence[str] | None = None) -> None:
        with rc_context(RC):
            fig = Figure(figsize=(5.2, 3.4))
            ax = fig.add_subplot()
            for i, key in enumerate(order or sorted(curves)):
                if key not in curves:
                    continue
                x, y = curves[key]
                ax.step(x, y, where="post", color=PALETTE[i % len(PALETTE)], label=key)
            if log_x:
                ax.set_xscale("log")
            # Up to the first edge where every curve has reached 1 (long empty tails say nothing).
            last = max((next((i for i, v in enumerate(y) if v >= 1.0 - 1e-12), len(y) - 1)
                        for _, y in curves.values()), default=None)
            if last is not None:
                xs = next(iter(curves.values()))[0]
                ax.set_xlim(xs[0], xs[min(len(xs) - 1, last + 1)])
            ax.set_ylim(0, 1.01)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("CDF")
            ax.set_title(title)
            if curves:
                ax.legend(fontsize=7)
            else:
                ax.text(0.5, 0.5, "no sessions with parallel flows", ha="center", transform=ax.transAxes)
            fig.tight_layout()
        save(fig, name)

    pct_edges = [float(x) for x in range(101)]
    flows_edges = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 50, 100, 200, 500, 1000]
    cdf_plot("fig4_3_flows_per_session", "Flows per session (000 Fig. 4.3)", "flows in the session",
             _cdf_from_histogram(con, sessions, "flows", "protocol", "true", flows_edges), log_x=True,
             order=protocols)
    cdf_plot("fig4_4_time_overlap", "Degree of time overlap, sessions with parallel flows (000 Fig. 4.4)",
             "time overlap p (%)",
             _cdf_from_histogram(con, sessions, "time_overlap_pct", "protocol", "parallel", pct_edges),
             order=protocols)
    # Fig. 4.5: share of parallel sessions by the duration of their longest flow.
    labels = [b[0] for b in DURATION_BUCKETS]
    dur_case = _bucket_case("longest_s", DURATION_BUCKETS)
    counts = dict(con.execute(f"SELECT {dur_case}, count(*) FROM {src} WHERE parallel AND {focus_where} "
                              "GROUP BY 1").fetchall())
    total = sum(counts.values())
    with rc_context(RC):
        fig = Figure(figsize=(5.2, 3.4))
        ax = fig.add_subplot()
        shares = [counts.get(lab, 0) / total * 100 if total else 0.0 for lab in labels]
        ax.bar(labels, shares, color=PALETTE[0])
        for i, v in enumerate(shares):
            ax.text(i, v, f"{v:.1f}%", ha="center", va="bottom", fontsize=7)
        ax.set_ylabel("share of sessions (%)")
        ax.set_xlabel("duration of the longest flow")
        ax.set_title(f"Sessions with parallel flows by longest flow, {focus_label} (000 Fig. 4.5)")
        fig.tight_layout()
    save(fig, "fig4_5_longest_flow_duration")
    cdf_plot("fig4_6_time_overlap_by_duration",
             f"Time overlap by longest-flow duration, {focus_label} (000 Fig. 4.6)", "time overlap p (%)",
             _cdf_from_histogram(con, sessions, "time_overlap_pct", dur_case, f"parallel AND {focus_where}",
                                 pct_edges), order=labels)
    r_edges = [float(x) for x in range(0, 1001, 10)]
    size_case = _bucket_case("largest_bytes", SIZE_BUCKETS)
    cdf_plot("fig4_7_data_overlap_by_size",
             f"Data overlap by largest-flow size, {focus_label} (000 Fig. 4.7)", "data overlap r (%)",
             _cdf_from_histogram(con, sessions, "data_overlap_pct", size_case, f"parallel AND {focus_where}",
                                 r_edges), order=[b[0] for b in SIZE_BUCKETS])
    return written


# ----------------------------------------------------------------------------------------------
# The reference: the same algorithm in plain Python, for the tests


@dataclass
class RefFlow:
    client_ip: str
    server_ip: str
    first_ns: int
    last_ns: int
    client_port: int | None = None
    protocol: str | None = None
    sni: str | None = None
    bytes: int | None = None
    row: int = 0


def reference_detect(flows: Sequence[RefFlow], max_gap_s: float = DEFAULT_MAX_GAP_S, rule: str = "000"
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Sessions and per-flow results by direct reading of the definitions (O(n^2) per session).
    Sessions are listed by (key, start); `flows` results are keyed by row."""
    g = round(max_gap_s * NS)
    by_key: dict[tuple[Any, ...], list[RefFlow]] = {}
    for f in flows:
        key = (f.protocol or "", f.client_ip, f.server_ip, f.sni or f.server_ip)
        by_key.setdefault(key, []).append(f)
    sessions: list[list[RefFlow]] = []
    for key in sorted(by_key, key=lambda k: tuple("" if x is None else str(x) for x in k)):
        members = sorted(by_key[key], key=lambda f: (f.first_ns, f.last_ns, f.row))
        current: list[RefFlow] = []
        anchor = end = 0
        for f in members:
            joins = bool(current) and (f.first_ns - anchor <= g if rule == "000" else f.first_ns <= end + g)
            if not joins:
                if current:
                    sessions.append(current)
                current, anchor, end = [], f.first_ns, f.last_ns
            current.append(f)
            end = max(end, f.last_ns)
        if current:
            sessions.append(current)
    out_sessions, out_flows = [], []
    for sid, members in enumerate(sessions):
        n = len(members)
        longest = max(range(n), key=lambda i: (members[i].last_ns - members[i].first_ns, -i))
        fl = members[longest]
        overlap_ns = None
        if n > 1:
            overlap_ns = max(max(0, min(o.last_ns, fl.last_ns) - max(o.first_ns, fl.first_ns))
                             for i, o in enumerate(members) if i != longest)
        d_l = fl.last_ns - fl.first_ns
        known = all(f.bytes is not None for f in members)
        total = sum(f.bytes for f in members if f.bytes is not None) if known else None
        largest = max(f.bytes or 0 for f in members) if known else None
        overlapping = []
        for i, a in enumerate(members):
            overlapping.append(any(j != i and _overlap_half_open(a, b) for j, b in enumerate(members)))
        out_sessions.append({
            "session_id": sid, "protocol": fl.protocol, "first_flow_row": members[0].row,
            "start_ns": members[0].first_ns, "end_ns": max(f.last_ns for f in members), "flows": n,
            "parallel": n > 1, "overlapping_flows": sum(overlapping), "longest_s": d_l / 1e9,
            "overlap_s": None if overlap_ns is None else overlap_ns / 1e9,
            "time_overlap_pct": 100.0 * overlap_ns / d_l if overlap_ns is not None and d_l > 0 else None,
            "total_bytes": total, "largest_bytes": largest,
            "data_overlap_pct": (100.0 * (total - largest) / largest
                                 if n > 1 and known and largest else None),
        })
        for pos, (f, ov) in enumerate(zip(members, overlapping, strict=True)):
            out_flows.append({"flow_row": f.row, "session_id": sid, "position": pos, "protocol": f.protocol,
                              "parallel": n > 1, "overlapping": ov})
    out_flows.sort(key=lambda r: r["flow_row"])
    return out_flows, out_sessions


def _overlap_half_open(a: RefFlow, b: RefFlow) -> bool:
    """[first, last) lifetimes intersect (a flow of duration 0 overlaps nothing)."""
    return max(a.first_ns, b.first_ns) < min(a.last_ns, b.last_ns)


# ----------------------------------------------------------------------------------------------
# Command line (registered on `protolab traffic` by protolab.traffic.cli)


def fail(exc: BaseException) -> Any:
    """Print a traffic command's error on stderr; the typer.Exit(2) to raise."""
    from rich.markup import escape

    _error_console().print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def console() -> Any:
    import sys

    from rich.console import Console

    # Logs and CI output are not terminals: give tables room (as protolab.cli does).
    return Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120)


def _error_console() -> Any:
    import sys

    from rich.console import Console

    return Console(stderr=True, width=None if sys.stderr.isatty() or "COLUMNS" in os.environ else 120)


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
) -> None:
    """Parallel connections (000 §4.2.2): sessions by (protocol, client, server, domain) and MAX_GAP,
    isolated vs parallel flows, time and data overlap per session; a summary and 000 Figs. 4.3-4.7."""
    cfg = ParallelConfig(max_gap_s=max_gap_s, rule=rule, protocols=list(protocol or []), bytes_basis=bytes_basis,
                         memory_limit=memory_limit, threads=threads, temp_directory=temp_dir, figures=figures,
                         focus_protocol=figure_protocol)
    err = _error_console()
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
