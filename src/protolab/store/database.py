"""The results store: one DuckDB database (`results.duckdb`) per results directory.

The runner records experiments and runs here; the report and `protolab export` read only this
database. The schema (`protolab.store.schema`) is documented column by column in docs/store.md.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Self

from protolab import __version__
from protolab.analysis.fidelity import run_fidelity
from protolab.errors import ProtolabError
from protolab.store.schema import (
    ANALYSIS_TABLES,
    KNOWN_PARAMS,
    PRIMARY_KEYS,
    RUN_KEY_COLUMNS,
    RUN_TABLES,
    SCHEMA_VERSION,
    TABLES,
    Column,
)

DB_NAME = "results.duckdb"

RUN_STATUSES = ("ok", "failed", "timeout")
FINISHED_STATUSES = ("ok", "failed")


class StoreError(ProtolabError):
    """The results store cannot be opened, read or written, or a record does not fit it."""


@dataclass
class RunRecord:
    """Everything the runner knows about one run (see the module docstring of the runner)."""

    run_key: str
    params: dict[str, Any]
    status: str
    error: str | None
    started_unix_ns: int
    duration_s: float
    page_load: dict[str, Any] | None = None
    link_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    link_counters: dict[str, Any] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)
    bulk: list[dict[str, Any]] = field(default_factory=list)  # bulk results, with side and flow
    sides: list[dict[str, Any]] = field(default_factory=list)  # pairs: per side
    flow_bins: list[dict[str, Any]] = field(default_factory=list)  # pairs: per side and bin
    rpm: list[dict[str, Any]] = field(default_factory=list)  # rpm runs: per direction
    connection_states: list[dict[str, Any]] = field(default_factory=list)  # measure.transport summaries
    analysis: Any = None  # protolab.analysis.analyze.RunAnalysis: QUIC_info/TCP_info, losses, overhead
    artifacts_dir: str | None = None


# ---------------------------------------------------------------------------------------------
# Value conversion: every value that goes into a typed column passes through here, so a bad
# record gives an error naming the run and the field instead of a DuckDB message.


def _base_type(sql_type: str) -> str:
    return sql_type.split()[0]


def _convert(value: Any, sql_type: str, where: str) -> Any:
    if value is None:
        return None
    kind = _base_type(sql_type)
    if kind in ("BIGINT", "INTEGER"):
        if isinstance(value, bool):
            raise StoreError(f"{where}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise StoreError(f"{where}: expected an integer, got {value!r}")
    if kind == "BOOLEAN":
        if not isinstance(value, bool):
            raise StoreError(f"{where}: expected true or false, got {value!r}")
        return value
    if kind == "DOUBLE":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise StoreError(f"{where}: expected a number, got {value!r}")
        number = float(value)
        return number if math.isfinite(number) else None
    if kind == "VARCHAR":
        if isinstance(value, (dict, list)):
            raise StoreError(f"{where}: expected a string, got {type(value).__name__}")
        return str(value)
    if kind == "JSON":
        try:
            return json.dumps(value, sort_keys=True, allow_nan=False, default=str)
        except ValueError as exc:
            raise StoreError(f"{where}: not representable as JSON ({exc})") from exc
    if kind == "TIMESTAMP":
        return value.isoformat(sep=" ") if isinstance(value, datetime) else str(value)
    raise StoreError(f"{where}: unsupported column type {sql_type}")  # pragma: no cover


def _utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _get(mapping: Any, key: str, where: str) -> Any:
    if not isinstance(mapping, dict):
        raise StoreError(f"{where}: expected an object, got {type(mapping).__name__}")
    return mapping.get(key)


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise StoreError(f"{where}: expected a list, got {type(value).__name__}")
    return value


_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(bit|kbit|mbit|gbit)?\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ns|us|ms|s)?\s*$", re.IGNORECASE)


def _rate_mbps(config: dict[str, Any]) -> float | None:
    if isinstance(config.get("rate_mbps"), (int, float)):
        return float(config["rate_mbps"])
    rate = config.get("rate")
    if isinstance(rate, (int, float)) and not isinstance(rate, bool):
        return float(rate) / 1e6
    if isinstance(rate, str):
        match = _RATE.match(rate)
        if match:
            scale = {"bit": 1e-6, "kbit": 1e-3, "mbit": 1.0, "gbit": 1e3}[(match.group(2) or "bit").lower()]
            return float(match.group(1)) * scale
    return None


def _delay_ms(config: dict[str, Any]) -> float | None:
    if isinstance(config.get("delay_ms"), (int, float)):
        return float(config["delay_ms"])
    delay = config.get("delay")
    if isinstance(delay, str):
        match = _DURATION.match(delay)
        if match:
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[(match.group(2) or "s").lower()]
            return float(match.group(1)) * scale
    return None


def _loss_pct(config: dict[str, Any]) -> float | None:
    if isinstance(config.get("loss_pct"), (int, float)):
        return float(config["loss_pct"])
    loss = config.get("loss")
    if isinstance(loss, dict):
        try:
            if loss.get("kind", "bernoulli") == "bernoulli":
                return float(loss["p"]) * 100
            if loss.get("kind") == "gilbert-elliott":
                p, r = float(loss["p"]), float(loss["r"])
                good, bad = float(loss.get("loss_good", 0.0)), float(loss.get("loss_bad", 1.0))
                if p + r > 0:
                    return 100 * (r * good + p * bad) / (p + r)
        except (KeyError, TypeError, ValueError):
            return None
    if loss is None and config:
        return 0.0  # a configured link without a loss model loses nothing at random
    return None


def _queue(config: dict[str, Any]) -> Any:
    if "queue" in config:
        return config["queue"]
    extra = {k: config[k] for k in ("queue_bytes", "queue_packets") if k in config}
    return extra or None


# ---------------------------------------------------------------------------------------------


class ResultsStore:
    """One DuckDB database per results directory (`<results_dir>/results.duckdb`)."""

    def __init__(self, results_dir: Path, *, read_only: bool = False) -> None:
        import duckdb

        self.results_dir = Path(results_dir)
        self.path = self.results_dir / DB_NAME
        self.read_only = read_only
        if read_only:
            if not self.path.is_file():
                raise StoreError(f"{self.path}: no results store here (run an experiment into this directory first)")
        else:
            try:
                self.results_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{self.results_dir}: cannot create the results directory ({exc})") from exc
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot open the results store ({_first_line(exc)})") from exc
        try:
            self._check_or_create_schema()
        except BaseException:
            self.con.close()
            raise

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tables(self) -> set[str]:
        rows = self.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()
        return {row[0] for row in rows}

    def _check_or_create_schema(self) -> None:
        import duckdb

        try:
            tables = self._tables()
            if "meta" in tables:
                rows = self.con.execute("SELECT schema_version FROM meta").fetchall()
                if len(rows) != 1:
                    raise StoreError(f"{self.path}: table meta must hold exactly one row, found {len(rows)}")
                version = rows[0][0]
                if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
                    raise StoreError(
                        f"{self.path}: meta.schema_version is {version}, this protolab ({__version__}) "
                        f"reads and writes schema version {SCHEMA_VERSION}; use a matching protolab "
                        "or a new results directory")
                if version < SCHEMA_VERSION or self._missing_columns():
                    self._migrate()
                return
            if tables:
                raise StoreError(f"{self.path}: not a protolab results store (no meta table; "
                                 f"has {', '.join(sorted(tables))})")
            if self.read_only:
                raise StoreError(f"{self.path}: empty database, not a protolab results store")
            self.con.execute("BEGIN TRANSACTION")
            for table, columns in TABLES.items():
                self.con.execute(_create_table(table, columns))
            self.con.execute("INSERT INTO meta VALUES (?, ?, ?)", [SCHEMA_VERSION, _utc_now(), __version__])
            self.con.execute("COMMIT")
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot read or create the schema ({_first_line(exc)})") from exc

    def _missing_columns(self) -> bool:
        """Whether a table or column of the schema is missing (a store of an earlier build)."""
        present: dict[str, set[str]] = defaultdict(set)
        for table, column in self.con.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main'").fetchall():
            present[table].add(column)
        return any(name not in present[table] for table, columns in TABLES.items() for name, _, _ in columns)

    def _migrate(self) -> None:
        """Brings an older store to this schema: every change so far only adds tables and
        columns, so the migration adds what is missing (new columns are NULL for old runs; the
        analysis tables fill with `protolab analyze`). A store opened read-only is migrated
        through a short read-write connection first."""
        import duckdb

        if self.read_only:
            self.con.close()
            with ResultsStore(self.results_dir):
                pass
            self.con = duckdb.connect(str(self.path), read_only=True)
            return
        self.con.execute("BEGIN TRANSACTION")
        tables = self._tables()
        for table, columns in TABLES.items():
            if table not in tables:
                self.con.execute(_create_table(table, columns))
                continue
            present = {row[0] for row in self.con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'main' AND table_name = ?",
                [table]).fetchall()}
            for name, sql_type, _ in columns:
                if name not in present:
                    self.con.execute(f"ALTER TABLE {table} ADD COLUMN {name} {_base_type(sql_type)}")
        self.con.execute("UPDATE meta SET schema_version = ?", [SCHEMA_VERSION])
        self.con.execute("COMMIT")

    def _writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self.path}: the store was opened read-only")

    # -- writes ---------------------------------------------------------------------------

    def upsert_experiment(self, experiment_id: str, name: str, spec: dict[str, Any], provenance: dict[str, Any]) -> None:
        """Record an experiment, or update its name, spec and provenance (keeping `created`)."""
        import duckdb

        self._writable()
        if not experiment_id:
            raise StoreError("experiment id: must not be empty")
        spec_json = _convert(spec, "JSON", f"experiment {experiment_id}: spec")
        prov_json = _convert(provenance, "JSON", f"experiment {experiment_id}: provenance")
        now = _utc_now()
        try:
            self.con.execute(
                "INSERT INTO experiments (id, name, spec, provenance, created, updated) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET name = excluded.name, spec = excluded.spec, "
                "provenance = excluded.provenance, updated = excluded.updated",
                [experiment_id, name, spec_json, prov_json, now, now])
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot record experiment {experiment_id} ({_first_line(exc)})") from exc

    def finished_run_keys(self, experiment_id: str) -> set[str]:
        """Keys of the runs recorded with status 'ok' or 'failed' (a 'timeout' is run again)."""
        rows = self.con.execute(
            "SELECT run_key FROM runs WHERE experiment_id = ? AND status IN ('ok', 'failed')",
            [experiment_id]).fetchall()
        return {row[0] for row in rows}

    def record_run(self, experiment_id: str, run: RunRecord) -> None:
        """Write every row of one run in one transaction, replacing an earlier record of the same
        run_key; on any error nothing of this run is written (an earlier record stays)."""
        import duckdb

        self._writable()
        exists = self.con.execute("SELECT count(*) FROM experiments WHERE id = ?", [experiment_id]).fetchone()
        if not exists or exists[0] == 0:
            raise StoreError(f"run {run.run_key}: experiment {experiment_id!r} is not recorded (upsert_experiment first)")
        rows = build_run_rows(experiment_id, run)  # every conversion error happens before writing
        try:
            self.con.execute("BEGIN TRANSACTION")
            for table in RUN_TABLES:
                self.con.execute(f"DELETE FROM {table} WHERE experiment_id = ? AND run_key = ?",
                                 [experiment_id, run.run_key])
            for table in RUN_TABLES:
                self._insert(table, rows[table])
            self.con.execute("COMMIT")
        except BaseException as exc:
            try:
                self.con.execute("ROLLBACK")
            except duckdb.Error:
                pass
            if isinstance(exc, duckdb.Error):
                raise StoreError(f"{self.path}: cannot record run {run.run_key} ({_first_line(exc)})") from exc
            raise

    def replace_analysis(self, experiment_id: str, run_key: str, analysis: Any) -> None:
        """Replace the analysis rows of one recorded run (`protolab analyze`), in one transaction."""
        import duckdb

        self._writable()
        ids = {"experiment_id": experiment_id, "run_key": run_key}
        types = {table: {name: t for name, t, _ in TABLES[table]} for table in ANALYSIS_TABLES}
        rows: dict[str, list[dict[str, Any]]] = {table: [] for table in ANALYSIS_TABLES}
        for table, items, label in analysis_items(analysis):
            names = [n for n in types[table] if n not in ids]
            for i, item in enumerate(items):
                rows[table].append({**ids, **{n: _convert(item.get(n), types[table][n], f"run {run_key}: {label}[{i}].{n}")
                                              for n in names}})
        try:
            self.con.execute("BEGIN TRANSACTION")
            for table in ANALYSIS_TABLES:
                self.con.execute(f"DELETE FROM {table} WHERE experiment_id = ? AND run_key = ?", [experiment_id, run_key])
                self._insert(table, rows[table])
            self.con.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error):
                raise StoreError(f"{self.path}: cannot record the analysis of run {run_key} ({_first_line(exc)})") from exc
            raise

    def replace_flows(self, parquet: Path) -> int:
        """Replace the `flows` rows of every run a Parquet file of labelled flows (`protolab
        traffic corpus`) covers with its rows, in one transaction; returns the rows written."""
        import duckdb

        self._writable()
        names = [name for name, _, _ in TABLES["flows"]]
        source = f"read_parquet('{str(parquet).replace(chr(39), chr(39) * 2)}')"
        try:
            self.con.execute("BEGIN TRANSACTION")
            self.con.execute(f"DELETE FROM flows WHERE (experiment_id, run_key) IN "
                             f"(SELECT DISTINCT experiment_id, run_key FROM {source})")
            self.con.execute(f"INSERT INTO flows ({', '.join(names)}) SELECT {', '.join(names)} FROM {source}")
            written = self.con.execute(f"SELECT count(*) FROM {source}").fetchone()
            self.con.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error):
                raise StoreError(f"{self.path}: cannot record the flows of {parquet} ({_first_line(exc)})") from exc
            raise
        return int(written[0]) if written else 0

    def _insert(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Bulk insert: the rows travel as one JSON parameter (DuckDB's executemany is slow)."""
        if not rows:
            return
        columns = TABLES[table]
        struct = {name: ("VARCHAR" if _base_type(t) in ("JSON", "TIMESTAMP") else _base_type(t))
                  for name, t, _ in columns}
        select = ", ".join(
            f"r.{name}::{_base_type(t)}" if _base_type(t) in ("JSON", "TIMESTAMP") else f"r.{name}"
            for name, t, _ in columns)
        payload = json.dumps([{name: row.get(name) for name, _, _ in columns} for row in rows], allow_nan=False)
        names = ", ".join(name for name, _, _ in columns)  # by name: migrated tables have other column orders
        self.con.execute(
            f"INSERT INTO {table} ({names}) SELECT {select} FROM (SELECT unnest(from_json(?::JSON, ?)) AS r)",
            [payload, json.dumps([struct])])

    # -- reads ----------------------------------------------------------------------------

    def query(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a query as dicts (column name -> value); JSON columns come back as text."""
        import duckdb

        try:
            cursor = self.con.execute(sql, params or [])
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: query failed ({_first_line(exc)})") from exc

    def schema_version(self) -> int:
        row = self.con.execute("SELECT schema_version FROM meta").fetchone()
        return int(row[0]) if row else -1

    # -- export ---------------------------------------------------------------------------

    def export(self, out_dir: Path, fmt: Literal["parquet", "csv"]) -> list[Path]:
        """Write every table to `out_dir/<table>.<fmt>` (JSON columns as text); returns the files."""
        import duckdb

        if fmt not in ("parquet", "csv"):
            raise StoreError(f"export format: expected parquet or csv, got {fmt!r}")
        out_dir = Path(out_dir)
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{out_dir}: cannot create the export directory ({exc})") from exc
        written: list[Path] = []
        for table in TABLES:
            target = out_dir / f"{table}.{fmt}"
            options = "FORMAT parquet" if fmt == "parquet" else "FORMAT csv, HEADER true"
            escaped = str(target).replace("'", "''")
            try:
                self.con.execute(f"COPY (SELECT * FROM {table}) TO '{escaped}' ({options})")
            except duckdb.Error as exc:
                raise StoreError(f"{target}: cannot export table {table} ({_first_line(exc)})") from exc
            written.append(target)
        return written


def _create_table(table: str, columns: list[Column]) -> str:
    body = ", ".join(f"{name} {sql_type}" for name, sql_type, _ in columns)
    if table in PRIMARY_KEYS:
        body += ", " + PRIMARY_KEYS[table]
    return f"CREATE TABLE {table} ({body})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ---------------------------------------------------------------------------------------------
# Building the rows of a run (pure: no database).


def build_run_rows(experiment_id: str, run: RunRecord) -> dict[str, list[dict[str, Any]]]:
    """The rows of every run table for one run, converted and checked."""
    key = run.run_key
    if not isinstance(key, str) or not key:
        raise StoreError(f"run_key: must be a non-empty string, got {key!r}")
    where = f"run {key}"
    if run.status not in RUN_STATUSES:
        raise StoreError(f"{where}: status: expected one of {', '.join(RUN_STATUSES)}, got {run.status!r}")
    if not isinstance(run.params, dict):
        raise StoreError(f"{where}: params: expected an object")
    ids = {"experiment_id": experiment_id, "run_key": key}
    types = {table: {name: t for name, t, _ in columns} for table, columns in TABLES.items()}

    def typed(table: str, values: dict[str, Any], prefix: str) -> dict[str, Any]:
        return {name: _convert(value, types[table][name], f"{where}: {prefix}{name}") for name, value in values.items()}

    # runs
    known = {name for name, _, _ in KNOWN_PARAMS}
    page_load = run.page_load
    if page_load is not None and not isinstance(page_load, dict):
        raise StoreError(f"{where}: page_load: expected an object, got {type(page_load).__name__}")
    plt = _get(page_load, "plt_ms", f"{where}: page_load") if page_load is not None and run.status == "ok" else None
    counters = run.link_counters or {}
    if not isinstance(counters, dict):
        raise StoreError(f"{where}: link_counters: expected an object")
    bulk = _list(run.bulk, f"{where}: bulk")
    goodput = None
    if run.status == "ok" and bulk and all(isinstance(b, dict) and b.get("side") is None for b in bulk):
        rates = [b.get("goodput_bps") for b in bulk]
        if all(isinstance(r, int | float) and not isinstance(r, bool) for r in rates):
            goodput = sum(rates) / 1e6
    run_row = {
        **ids,
        **typed("runs", {"status": run.status, "error": run.error, "started_unix_ns": run.started_unix_ns,
                         "duration_s": run.duration_s, "plt_ms": plt, "goodput_mbps": goodput}, ""),
        **typed("runs", {name: run.params.get(name) for name in known}, "params."),
        "params": _convert({k: v for k, v in run.params.items() if k not in known}, "JSON", f"{where}: params"),
        "emulator_counters": _convert(counters.get("emulator"), "JSON", f"{where}: link_counters.emulator"),
        "artifacts_dir": _convert(run.artifacts_dir, "VARCHAR", f"{where}: artifacts_dir"),
        "recorded": _convert(_utc_now(), "TIMESTAMP", f"{where}: recorded"),
    }
    rows: dict[str, list[dict[str, Any]]] = {table: [] for table in RUN_TABLES}
    rows["runs"].append(run_row)

    # page_loads, objects, connections
    if page_load is not None:
        pl = "page_load."
        objects = _list(page_load.get("objects"), f"{where}: page_load.objects")
        connections = _list(page_load.get("connections"), f"{where}: page_load.connections")
        config = page_load.get("config") or {}
        if not isinstance(config, dict):
            raise StoreError(f"{where}: page_load.config: expected an object")
        rows["page_loads"].append({
            **ids,
            **typed("page_loads", {
                "result_schema_version": page_load.get("schema_version"), "status": page_load.get("status"),
                "error": page_load.get("error"), "plt_ms": page_load.get("plt_ms"), "bytes": page_load.get("bytes"),
                "start_unix_ns": page_load.get("start_unix_ns"), "mode": config.get("mode"),
                "page": config.get("page")}, pl),
            "n_objects": len(objects), "n_connections": len(connections),
            "config": _convert(config, "JSON", f"{where}: page_load.config"),
        })
        for i, obj in enumerate(objects):
            prefix = f"page_load.objects[{i}]."
            if not isinstance(obj, dict):
                raise StoreError(f"{where}: {prefix[:-1]}: expected an object")
            values = {name: obj.get(name) for name in (
                "origin", "path", "parent", "connection", "expected_bytes", "bytes", "discovered_ms", "queued_ms",
                "started_ms", "first_byte_ms", "finished_ms", "error")}
            row = typed("objects", values, prefix)
            row["http_status"] = _convert(obj.get("status"), "INTEGER", f"{where}: {prefix}status")
            rows["objects"].append({**ids, "idx": i, **row})
        for i, conn in enumerate(connections):
            prefix = f"page_load.connections[{i}]."
            if not isinstance(conn, dict):
                raise StoreError(f"{where}: {prefix[:-1]}: expected an object")
            values = {name: conn.get(name) for name in (
                "origin", "protocol", "transport", "local", "remote", "connect_start_ms", "handshake_ms",
                "requests", "bytes", "subflows", "resumed", "zero_rtt", "error")}
            row = typed("connections", values, prefix)
            row["conn_id"] = _convert(conn.get("id"), "INTEGER", f"{where}: {prefix}id")
            rows["connections"].append({**ids, **row})

    # transport_samples
    sample_columns = [name for name, _, _ in TABLES["transport_samples"]
                      if name not in ("experiment_id", "run_key", "fields")]
    for i, sample in enumerate(_list(run.samples, f"{where}: samples")):
        prefix = f"samples[{i}]."
        if not isinstance(sample, dict):
            raise StoreError(f"{where}: samples[{i}]: expected an object")
        if sample.get("t_unix_ns") is None:
            raise StoreError(f"{where}: {prefix}t_unix_ns: missing")
        values = {name: sample.get(name) for name in sample_columns}
        if values["conn"] is not None:
            values["conn"] = str(values["conn"])
        row = typed("transport_samples", values, prefix)
        rest = {k: v for k, v in sample.items() if k not in sample_columns}
        rows["transport_samples"].append({**ids, **row, "fields": _convert(rest, "JSON", f"{where}: {prefix[:-1]}")})

    # bulk transfers and their intervals
    for i, result in enumerate(bulk):
        prefix = f"bulk[{i}]."
        if not isinstance(result, dict):
            raise StoreError(f"{where}: bulk[{i}]: expected an object")
        config = result.get("config") or {}
        connection = result.get("connection") or {}
        if not isinstance(config, dict) or not isinstance(connection, dict):
            raise StoreError(f"{where}: {prefix}config/connection: expected objects")
        rate = result.get("goodput_bps")
        side, flow = result.get("side"), result.get("flow", 0)
        rows["bulk_transfers"].append({**ids, **typed("bulk_transfers", {
            "side": side, "flow": flow, "protocol": config.get("protocol"), "direction": config.get("direction"),
            "status": result.get("status"), "error": result.get("error"), "bytes": result.get("bytes"),
            "duration_ms": result.get("duration_ms"),
            "goodput_mbps": rate / 1e6 if isinstance(rate, int | float) and not isinstance(rate, bool) else None,
            "handshake_ms": result.get("handshake_ms"), "transport": connection.get("transport"),
            "quic_cc": config.get("quic_cc"), "conn_id": connection.get("conn_id"), "config": config}, prefix)})
        for j, interval in enumerate(_list(result.get("intervals"), f"{where}: {prefix}intervals")):
            if not isinstance(interval, dict):
                raise StoreError(f"{where}: {prefix}intervals[{j}]: expected an object")
            rate = interval.get("rate_bps")
            rows["bulk_intervals"].append({**ids, **typed("bulk_intervals", {
                "side": side, "flow": flow, "t_ms": interval.get("t_ms"), "bytes": interval.get("bytes"),
                "rate_mbps": rate / 1e6 if isinstance(rate, int | float) and not isinstance(rate, bool) else None,
            }, f"{prefix}intervals[{j}].")})

    # pairs, throughput bins, connection states, analysis: rows already in the table's shape
    shaped = [("pair_sides", run.sides, "sides"), ("flow_bins", run.flow_bins, "flow_bins"), ("rpm_results", run.rpm, "rpm"),
              ("connection_states", run.connection_states, "connection_states")]
    shaped += analysis_items(run.analysis)
    for table, items, label in shaped:
        names = [name for name, _, _ in TABLES[table] if name not in ("experiment_id", "run_key")]
        for i, item in enumerate(_list(items, f"{where}: {label}")):
            if not isinstance(item, dict):
                raise StoreError(f"{where}: {label}[{i}]: expected an object")
            rows[table].append({**ids, **typed(table, {name: item.get(name) for name in names}, f"{label}[{i}].")})

    # link_counters
    link_config = run.link_config or {}
    if not isinstance(link_config, dict):
        raise StoreError(f"{where}: link_config: expected an object")
    links = counters.get("links") or {}
    if not isinstance(links, dict):
        raise StoreError(f"{where}: link_counters.links: expected an object")
    for name in sorted(set(link_config) | set(links)):
        rows["link_counters"].append(_link_row(ids, where, name, link_config.get(name), links.get(name),
                                               counters.get("now_ns"), run.duration_s))

    # the fidelity record (protolab.analysis.fidelity)
    fid = run_fidelity(counters.get("emulator"), [{**row, "config": link_config.get(row["link"])}
                                                   for row in rows["link_counters"]])
    run_row.update(typed("runs", {"late_mean_us": fid.late_mean_us, "late_p999_us": fid.late_p999_us,
                                  "late_max_us": fid.late_max_us, "fidelity_flags": fid.flags_text}, "fidelity."))
    return rows


def analysis_items(analysis: Any) -> list[tuple[str, list[dict[str, Any]], str]]:
    """(table, rows, label) of a run's analysis (protolab.analysis.analyze.RunAnalysis), or none."""
    if analysis is None:
        return []
    return [(table, getattr(analysis, field), f"analysis.{field}") for table, field in (
        ("connection_info", "connection_info"), ("loss_analysis", "losses"), ("loss_bursts", "loss_bursts"),
        ("overhead", "overhead"), ("analysis_notes", "notes"))]


def _link_row(ids: dict[str, str], where: str, name: str, config: Any, counters: Any, now_ns: Any,
              duration_s: float) -> dict[str, Any]:
    types = {n: t for n, t, _ in TABLES["link_counters"]}
    config = config or {}
    if not isinstance(config, dict):
        raise StoreError(f"{where}: link_config.{name}: expected an object")
    if counters is not None and not isinstance(counters, dict):
        raise StoreError(f"{where}: link_counters.links.{name}: expected an object")
    group, _, direction = name.rpartition(".")
    row: dict[str, Any] = {
        **ids, "link": name, "link_group": group or None, "direction": direction if group else None,
        "configured_rate_mbps": _rate_mbps(config), "configured_delay_ms": _delay_ms(config),
        "configured_loss_pct": _loss_pct(config),
        "configured_queue": _convert(_queue(config), "JSON", f"{where}: link_config.{name}.queue"),
        "config": _convert(config, "JSON", f"{where}: link_config.{name}"),
        "now_ns": _convert(now_ns, "BIGINT", f"{where}: link_counters.now_ns"),
        "interval_s": _convert(duration_s, "DOUBLE", f"{where}: duration_s"),
        "counters": _convert(counters, "JSON", f"{where}: link_counters.links.{name}"),
    }
    if counters is None:
        return row
    prefix = f"{where}: link_counters.links.{name}."

    def number(key: str, sub: str | None = None) -> int | None:
        value = counters.get(key)
        label = key
        if sub is not None:
            value = value.get(sub) if isinstance(value, dict) else None
            label = f"{key}.{sub}"
        return _convert(value, "BIGINT", prefix + label)

    for key in ("enqueued_packets", "enqueued_bytes", "delivered_packets", "delivered_bytes",
                "max_queue_packets", "max_queue_bytes"):
        row[key] = number(key)
    for unit in ("packets", "bytes"):
        for cause in ("queue_full", "random_loss", "aqm"):
            row[f"dropped_{cause}_{unit}"] = number(f"dropped_{unit}", cause)
    queue = config.get("queue")
    drophead = isinstance(queue, dict) and queue.get("kind") == "drophead"
    enqueued = row["enqueued_packets"] or 0
    random_loss = row["dropped_random_loss_packets"] or 0
    queue_full = row["dropped_queue_full_packets"] or 0
    aqm = row["dropped_aqm_packets"] or 0
    # docs/control.md: arrived = enqueued + random_loss + queue_full at arrival; a drophead
    # queue drops packets that were enqueued first, so they are already counted.
    arrived = enqueued + random_loss + (0 if drophead else queue_full)
    row["arrived_packets"] = arrived
    if arrived > 0:
        row["achieved_loss_pct"] = 100.0 * random_loss / arrived
        row["drop_pct"] = 100.0 * (random_loss + queue_full + aqm) / arrived
    if row["delivered_bytes"] is not None and duration_s and duration_s > 0:
        row["achieved_rate_mbps"] = row["delivered_bytes"] * 8 / duration_s / 1e6
    for key in ("achieved_loss_pct", "drop_pct", "achieved_rate_mbps"):
        row[key] = _convert(row.get(key), types[key], prefix + key)
    return row


__all__ = [
    "DB_NAME", "KNOWN_PARAMS", "RUN_KEY_COLUMNS", "RUN_TABLES", "SCHEMA_VERSION", "TABLES", "ResultsStore", "RunRecord",
    "StoreError", "build_run_rows",
]
