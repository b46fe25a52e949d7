"""The results store: one DuckDB database (`results.duckdb`) per results directory.

The runner records experiments and runs here; the report and `protolab export` read only this
database. The schema (`protolab.store.schema`) is documented column by column in docs/store.md.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Self

from protolab import __version__
from protolab.errors import ProtolabError
from protolab.results.record import RUN_STATUSES, RunRecord, analysis_rows
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

FINISHED_STATUSES = ("ok", "failed")


class StoreError(ProtolabError):
    """The results store cannot be opened, read or written, or a record does not fit it."""


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
        self._rename_connection_index()
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

    def _rename_connection_index(self) -> None:
        """Stores before schema 5 kept the result's connection index (`id`) in connections.conn_id,
        an integer; it is connections.idx now, and conn_id the connection's name (a string)."""
        found = self.con.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_schema = 'main' "
            "AND table_name = 'connections' AND column_name = 'conn_id'").fetchone()
        if found is not None and found[0] in ("INTEGER", "BIGINT"):
            self.con.execute("ALTER TABLE connections RENAME COLUMN conn_id TO idx")

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

    def finished_run_keys(self, experiment_id: str, *, retry_failed: bool = False,
                          failed_since: datetime | None = None) -> set[str]:
        """Keys of the runs recorded with status 'ok' or 'failed' (a 'timeout' is run again);
        with `retry_failed` only the 'ok' ones (`protolab run --retry-failed`) and, given
        `failed_since` (UTC), the failed ones recorded since then: `protolab reproduce` retries the
        failures of earlier invocations in every round, and not its own again."""
        if not retry_failed:
            where, args = "status IN ('ok', 'failed')", []
        elif failed_since is None:
            where, args = "status = 'ok'", []
        else:
            where, args = "(status = 'ok' OR (status = 'failed' AND recorded >= ?))", [failed_since]
        rows = self.con.execute(f"SELECT run_key FROM runs WHERE experiment_id = ? AND {where}",
                                [experiment_id, *args]).fetchall()
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
        for table, items in analysis_rows(analysis):
            names = [n for n in types[table] if n not in ids]
            for i, item in enumerate(items):
                rows[table].append({**ids, **{n: _convert(item.get(n), types[table][n], f"run {run_key}: {table}[{i}].{n}")
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
        source = f"read_parquet('{str(parquet).replace(chr(39), chr(39) * 2)}')"
        try:
            present = {row[0] for row in self.con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
            # Columns a corpus does not carry (the NAT corpus' truth in the ordinary one) stay NULL.
            names = [name for name, _, _ in TABLES["flows"] if name in present]
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
# The rows of a run (pure: no database). The record gives its rows (protolab.results); the store
# checks that each names columns it has and converts every value to its column's type.


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
    rows: dict[str, list[dict[str, Any]]] = {table: [] for table in RUN_TABLES}
    for table, items in run.rows().items():
        if table not in rows:
            raise StoreError(f"{where}: {table}: not a table of a run")
        for i, item in enumerate(items):
            values = {**_split_params(item), "recorded": _utc_now()} if table == "runs" else item
            rows[table].append({**ids, **_typed(table, values, f"{where}: {table}[{i}]")})
    return rows


def _split_params(runs_row: dict[str, Any]) -> dict[str, Any]:
    """The runs row with the known parameters in their own columns, the others in `params`."""
    known = {name for name, _, _ in KNOWN_PARAMS}
    params = runs_row["params"]
    return {**{k: v for k, v in runs_row.items() if k != "params"},
            **{name: params.get(name) for name in known},
            "params": {k: v for k, v in params.items() if k not in known}}


def _typed(table: str, values: dict[str, Any], where: str) -> dict[str, Any]:
    """`values` converted to `table`'s column types; a name that is no column is an error."""
    types = _COLUMN_TYPES[table]
    unknown = sorted(set(values) - set(types))
    if unknown:
        raise StoreError(f"{where}: {', '.join(unknown)}: no such column in table {table}")
    missing = [name for name, sql_type in types.items()
               if "NOT NULL" in sql_type and name not in _RUN_KEYS and values.get(name) is None]
    if missing:
        raise StoreError(f"{where}.{missing[0]}: missing")
    return {name: _convert(value, types[name], f"{where}.{name}") for name, value in values.items()}


_RUN_KEYS = {name for name, _, _ in RUN_KEY_COLUMNS}
_COLUMN_TYPES = {table: {name: sql_type for name, sql_type, _ in columns} for table, columns in TABLES.items()}


__all__ = [
    "DB_NAME", "KNOWN_PARAMS", "RUN_KEY_COLUMNS", "RUN_TABLES", "SCHEMA_VERSION", "TABLES", "ResultsStore",
    "StoreError", "build_run_rows",
]
