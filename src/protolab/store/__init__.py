"""Store: the results store, one DuckDB database per results directory (docs/store.md).

Owns the database (`database`: open, migrate, record runs, query, export) and its schema
(`schema`, the single source of truth for the tables). Public names are importable from here.

May import: `errors`, the per-run computations it stores (`analysis.fidelity`) and the column
lists of measurement modules (`measure.conninfo`, `traffic.schema`). Never `run`, `report` or
`reproduce`, which read and write through it.
"""

from protolab.store.database import ResultsStore, RunRecord, StoreError, build_run_rows
from protolab.store.schema import KNOWN_PARAMS, SCHEMA_VERSION, TABLES

__all__ = [
    "KNOWN_PARAMS",
    "SCHEMA_VERSION",
    "TABLES",
    "ResultsStore",
    "RunRecord",
    "StoreError",
    "build_run_rows",
]
