"""The live store: one row per accepted test in DATA/live.duckdb (docs/live.md).

The files under DATA/tests/<token>/ are the record; the table is an index over them for
queries and reports, so a row that could not be written (the database locked by a reader in
another process, a full disk) is written again from the files when the coordinator next starts.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

from protolab.errors import ProtolabError

TABLE = "live_tests"

# Column name and DuckDB type, in table order (docs/live.md describes each).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("token", "VARCHAR PRIMARY KEY"),
    ("issued_unix_ns", "BIGINT"),
    ("uploaded_unix_ns", "BIGINT"),
    ("client", "VARCHAR"),
    ("schema", "VARCHAR"),
    ("protocol", "VARCHAR"),
    ("idle_latency_ms", "DOUBLE"),
    ("download_bps", "DOUBLE"),
    ("upload_bps", "DOUBLE"),
    ("download_rpm", "DOUBLE"),
    ("upload_rpm", "DOUBLE"),
    ("download_confidence", "VARCHAR"),
    ("upload_confidence", "VARCHAR"),
    ("qlogs", "INTEGER"),
    ("result_path", "VARCHAR"),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)


def _at(value: Any, *keys: str) -> Any:
    """The value under nested keys, or None as soon as one level is missing or not an object."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _number(value: Any) -> float | None:
    """A finite number as float; anything else (strings, booleans, NaN) is not a measurement."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _text(value: Any, limit: int = 200) -> str | None:
    """A string (cut to `limit`) or a number written as text; other values are left out."""
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def summarize(result: Any) -> dict[str, Any]:
    """The numbers the table keeps from an RPM result, read tolerantly: a client that leaves a
    field out (a browser cannot measure everything) gets NULL there, not a refused upload."""
    summary: dict[str, Any] = {
        "schema": _text(_at(result, "schema")),
        "protocol": _text(_at(result, "protocol")),
        "idle_latency_ms": _number(_at(result, "idle", "latency_ms")),
    }
    for direction in ("download", "upload"):
        stage = _at(result, "directions", direction)
        summary[f"{direction}_bps"] = _number(_at(stage, "capacity_bps"))
        summary[f"{direction}_rpm"] = _number(_at(stage, "rpm"))
        summary[f"{direction}_confidence"] = _text(_at(stage, "confidence", "rpm"))
    return summary


def row_for(token: str, meta: dict[str, Any], result: Any, result_path: str) -> dict[str, Any]:
    """The table row of one stored test, from its meta.json and result.json contents."""
    client = _at(meta, "client", "client")
    return {
        "token": token,
        "issued_unix_ns": meta.get("issued_unix_ns"),
        "uploaded_unix_ns": meta.get("uploaded_unix_ns"),
        "client": _text(client),
        **summarize(result),
        "qlogs": len(meta.get("qlogs") or []),
        "result_path": result_path,
    }


class LiveStoreError(ProtolabError):
    """The live store cannot be opened or written (locked by another process, corrupt, disk full)."""


class LiveStore:
    """DuckDB writes, one connection per write, serialized by a lock: request threads never
    share a connection, and between writes another process may open the file to read it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._write(lambda con: None)

    def _write(self, action: Any) -> Any:
        import duckdb  # here, not at import time: `protolab --help` should not load DuckDB

        columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
        with self._lock:
            try:
                con = duckdb.connect(str(self.path))
                try:
                    con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} ({columns})")
                    return action(con)
                finally:
                    con.close()
            except duckdb.Error as exc:
                raise LiveStoreError(f"{self.path}: {exc}") from exc

    def record(self, row: dict[str, Any]) -> None:
        """Inserts one test's row; a token already there keeps its first row (tokens are single use)."""
        values = [row.get(name) for name in COLUMN_NAMES]
        marks = ", ".join("?" for _ in COLUMN_NAMES)
        sql = f"INSERT INTO {TABLE} ({', '.join(COLUMN_NAMES)}) VALUES ({marks}) ON CONFLICT (token) DO NOTHING"
        self._write(lambda con: con.execute(sql, values))

    def delete(self, tokens: list[str]) -> None:
        """Removes the rows of these tokens (retention; tokens without a row are ignored)."""
        if tokens:
            self._write(lambda con: con.executemany(f"DELETE FROM {TABLE} WHERE token = ?", [[t] for t in tokens]))

    def tokens(self) -> set[str]:
        """Every token with a row."""
        return self._write(lambda con: {r[0] for r in con.execute(f"SELECT token FROM {TABLE}").fetchall()})

    def rows(self) -> list[dict[str, Any]]:
        """Every row as a dict, oldest upload first (for tests and small tools)."""
        def fetch(con: Any) -> list[dict[str, Any]]:
            cursor = con.execute(f"SELECT * FROM {TABLE} ORDER BY uploaded_unix_ns")
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]

        return self._write(fetch)


def read_stored_test(test_dir: Path) -> tuple[dict[str, Any], Any]:
    """meta.json and result.json of a stored test (raises OSError or ValueError if unreadable:
    a missing file, broken JSON, or a meta.json that is not an object)."""
    meta = json.loads((test_dir / "meta.json").read_text())
    result = json.loads((test_dir / "result.json").read_text())
    if not isinstance(meta, dict):
        raise ValueError("meta.json is not a JSON object")  # noqa: TRY004 - bad content, as broken JSON is
    return meta, result
