"""The contract between Rust and Python (docs/architecture.md).

- `schemas/` is what `protolab-net schema` writes (the Rust test crates/contract/tests/schemas.rs
  checks the same from the Rust side);
- `protolab.results.generated` is what scripts/generate_models.py makes of `schemas/`, and each
  schema and its Python model accept the same fields;
- every field of a stored document has a place (a column, a renamed column, another table or
  part, or a reason why it is not stored) and every column of a document table comes from a
  field or is declared derived: nothing is dropped or invented silently;
- the Chromium driver's document is a load result.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, RootModel

from protolab.results import bulk, link, load, rpm, samples
from protolab.results.placement import Placement
from protolab.store.schema import RUN_KEY_COLUMNS, TABLES

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = sorted((ROOT / "schemas").glob("*.json"))
PLACEMENTS: list[Placement] = [*load.PLACEMENTS, *bulk.PLACEMENTS, *rpm.PLACEMENTS, *samples.PLACEMENTS,
                               *link.PLACEMENTS]
RUN_KEYS = {name for name, _, _ in RUN_KEY_COLUMNS}


def test_the_binary_writes_the_committed_schemas(emu_binary: Path) -> None:
    done = subprocess.run([str(emu_binary), "schema", "--check", "--out", str(ROOT / "schemas")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_models_are_generated_from_the_committed_schemas() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_models.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr


# ---------------------------------------------------------------------------------------------
# Each schema and its model accept the same fields.


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    return schema["$defs"][ref.rsplit("/", 1)[-1]] if isinstance(ref, str) else node


def _objects(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, object schema) of the root and of every $defs entry with properties."""
    yield schema.get("title", "root"), schema
    for name, node in schema.get("$defs", {}).items():
        yield name, node


def _properties(node: dict[str, Any]) -> dict[str, bool] | None:
    """name -> required, of an object schema; None when it is not a plain object."""
    if "properties" not in node:
        return None
    required = set(node.get("required", []))
    return {name: name in required for name in node["properties"]}


def _model_fields(model: type[BaseModel]) -> dict[str, bool]:
    return {(f.alias or name): f.is_required() for name, f in model.model_fields.items()}


@pytest.mark.parametrize("schema_file", SCHEMAS, ids=[p.stem for p in SCHEMAS])
def test_each_schema_and_its_model_accept_the_same_fields(schema_file: Path) -> None:
    schema = json.loads(schema_file.read_text())
    module = importlib.import_module(f"protolab.results.generated.{schema_file.stem.replace('-', '_')}")
    checked = 0
    for name, node in _objects(schema):
        properties = _properties(node)
        model = getattr(module, name, None)
        if properties is None or not (isinstance(model, type) and issubclass(model, BaseModel)) \
                or issubclass(model, RootModel):
            continue  # a union of objects (e.g. the control reply's variants): its members are checked
        fields = _model_fields(model)
        assert set(fields) == set(properties), f"{schema_file.name} {name}: fields differ"
        # A field the schema requires may be optional in the model only when it is nullable
        # (serde reads a missing Option as None, and the generated model says so).
        for field, required in properties.items():
            if fields[field] and not required:
                pytest.fail(f"{schema_file.name} {name}.{field}: the model requires what the schema does not")
        checked += 1
    assert checked > 0, f"{schema_file.name}: no model checked"


# ---------------------------------------------------------------------------------------------
# No field dropped, no column invented.


def placement_problems(placement: Placement, columns: set[str]) -> list[str]:
    """What is wrong with a placement against its table's columns (empty: nothing)."""
    fields = set(placement.model.model_fields)
    declared = {**placement.elsewhere, **placement.not_stored}
    problems = [f"{placement.model.__name__}.{name}: declared but not a field" for name in sorted(set(declared) - fields)]
    problems += [f"{placement.model.__name__}.{name}: stored and also declared elsewhere or not stored"
                 for name in sorted(set(placement.elsewhere) & set(placement.not_stored))]
    problems += [f"{placement.model.__name__}.{name}: renamed but not stored" for name in placement.renamed
                 if name not in placement.stored_fields()]
    for name in placement.stored_fields():
        column = placement.column_of(name)
        if column not in columns:
            problems.append(f"{placement.model.__name__}.{name}: no column {column!r} in table {placement.table}")
    problems += [f"{placement.table}.{c}: declared derived but no such column" for c, _, _ in placement.derived
                 if c not in columns]
    return problems


def table_problems(table: str, placements: list[Placement], columns: set[str]) -> list[str]:
    """Columns of a document table that no placement fills."""
    filled = {p.column_of(name) for p in placements for name in p.stored_fields()}
    filled |= {c for p in placements for c, _, _ in p.derived}
    return [f"{table}.{c}: no field or derivation fills it" for c in sorted(columns - filled - RUN_KEYS)]


@pytest.mark.parametrize("placement", PLACEMENTS, ids=[f"{p.table}:{p.model.__name__}" for p in PLACEMENTS])
def test_every_field_of_a_document_is_placed(placement: Placement) -> None:
    columns = {name for name, _, _ in TABLES[placement.table]}
    assert placement_problems(placement, columns) == []


@pytest.mark.parametrize("table", sorted({p.table for p in PLACEMENTS}))
def test_every_column_of_a_document_table_is_filled(table: str) -> None:
    placements = [p for p in PLACEMENTS if p.table == table]
    columns = {name for name, _, _ in TABLES[table]}
    assert table_problems(table, placements, columns) == []


def test_a_dropped_field_is_caught() -> None:
    """The checks above fail on a placement that silently drops a field or stores one nowhere."""
    columns = {name for name, _, _ in TABLES["objects"]}
    dropped = Placement(table="objects", model=load.OBJECTS.model, renamed=load.OBJECTS.renamed,
                        derived=load.OBJECTS.derived)
    assert placement_problems(dropped, columns - {"delay_ms"}) == [
        "ObjectResult.delay_ms: no column 'delay_ms' in table objects"]
    unfilled = Placement(table="objects", model=load.OBJECTS.model, renamed=load.OBJECTS.renamed,
                         not_stored={"error": "pretend"}, derived=load.OBJECTS.derived)
    assert table_problems("objects", [unfilled], columns) == ["objects.error: no field or derivation fills it"]


def test_every_object_of_a_stored_document_is_placed_or_stored_whole() -> None:
    """A nested object of a stored document must have its own placement, or sit in a JSON
    column of its parent, or be declared: otherwise its fields would vanish unnoticed."""
    placed = {p.model for p in PLACEMENTS}
    for placement in PLACEMENTS:
        for name in placement.elsewhere:
            annotation = placement.model.model_fields[name].annotation
            nested = [t for t in _models_in(annotation) if t not in placed]
            where = placement.elsewhere[name]
            assert not nested or "column" in where or "(JSON)" in where or "count" in where, (
                f"{placement.model.__name__}.{name} ({where}): {', '.join(t.__name__ for t in nested)} has no placement")


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


# ---------------------------------------------------------------------------------------------
# The Chromium driver writes the same document as the engine.


def _devtools(rec: Any, request_id: str, url: str, t: float, size: int, connection: int, protocol: str = "h2") -> None:
    rec.will_be_sent({"requestId": request_id, "request": {"url": url}, "timestamp": t, "wallTime": 1.0})
    rec.response({"requestId": request_id, "response": {
        "url": url, "status": 200, "protocol": protocol, "connectionId": connection, "connectionReused": False,
        "remoteIPAddress": "10.99.0.1", "remotePort": 443,
        "timing": {"requestTime": t, "connectStart": 0.5, "connectEnd": 20.5, "sendStart": 21.0,
                   "receiveHeadersEnd": 40.0}}})
    rec.data({"requestId": request_id, "dataLength": size})
    rec.finished({"requestId": request_id, "timestamp": t + 0.05})


def test_the_chromium_drivers_document_is_a_load_result() -> None:
    from protolab.browser.driver import Outcome, Recorder, result_document
    from protolab.results.generated.load_result import LoadResult

    manifest = {"name": "p", "objects": [
        {"origin": "www.p.test", "path": "/", "size": 1000},
        {"origin": "www.p.test", "path": "/a.css", "size": 300, "parent": "//www.p.test/", "delay_ms": 7}]}
    rec = Recorder()
    _devtools(rec, "1", "https://www.p.test/", 10.0, 1000, 5)
    _devtools(rec, "2", "https://www.p.test/a.css", 10.06, 300, 5)
    _devtools(rec, "3", "https://www.p.test/favicon.ico", 10.1, 40, 5)
    config = {"client": "chromium", "manifest": "p.json", "page": "p", "mode": "h2", "url": "https://www.p.test/",
              "warm": False, "timeout_ms": 60000, "chromium_version": "156.0"}
    result = result_document(rec, manifest, config, Outcome("ok", None, 120.5, {"loadEventEnd": 120.5}, 1), {})
    assert isinstance(result, LoadResult) and result.status == "ok" and result.plt_ms == 120.5
    assert [(o.path, o.delay_ms, o.connection, o.bytes) for o in result.objects] == [("/", 0, 5, 1000), ("/a.css", 7, 5, 300)]
    (conn,) = result.connections
    assert (conn.id, conn.protocol, conn.requests, conn.bytes, conn.handshake_ms) == (5, "h2", 2, 1300, 20.0)
    assert result.browser is not None and [e.url for e in result.browser.extra_requests] == [
        "https://www.p.test/favicon.ico"]
    # What the driver writes reads back as the same model, and gives the store its rows.
    again = LoadResult.model_validate_json(result.model_dump_json(by_alias=True))
    assert again == result
    rows = load.load_rows(again)
    assert rows["page_loads"][0]["mode"] == "h2" and len(rows["objects"]) == 2


# ---------------------------------------------------------------------------------------------
# One mode registry: the binary's.


def test_the_spec_takes_the_modes_the_engine_runs(emu_binary: Path) -> None:
    """A spec accepts exactly the modes `protolab-net load` accepts (the registry is the
    binary's: `protolab-net modes --json`), e.g. h2-parallel:32, which a copied table refused."""
    from protolab.plan.modes import check_mode, registry

    top = registry().max_parallel
    for mode, ok in (("h2-parallel:32", True), (f"h3-parallel:{top}", True), (f"h2-parallel:{top + 1}", False),
                     ("h2", True), ("h2:2", False), ("h4", False)):
        refused = subprocess.run([str(emu_binary), "load", "--mode", mode, "--manifest", "/nonexistent"],
                                 capture_output=True, text=True, check=False)
        engine_refuses_mode = refused.stderr.startswith("error: --mode")
        try:
            check_mode(mode)
            python_ok = True
        except ValueError:
            python_ok = False
        assert python_ok == ok, mode
        assert engine_refuses_mode != ok, (mode, refused.stderr)


def test_every_transport_flag_of_a_spec_is_an_endpoint_option(emu_binary: Path) -> None:
    """Each spec transport key the runner passes on (run.session.TRANSPORT_FLAGS) is an option of
    the server and of both clients, so a spec key never reaches an endpoint that refuses it."""
    from protolab.run.session import ENDPOINT_TRANSPORT_FLAGS, TRANSPORT_FLAGS, transport_argv

    for command in ("serve", "load", "bulk"):
        usage = subprocess.run([str(emu_binary), command, "--help"], capture_output=True, text=True,
                               check=True).stdout
        flags = [*TRANSPORT_FLAGS.values(), *ENDPOINT_TRANSPORT_FLAGS.get(command, {}).values()]
        missing = [flag for flag in flags if flag not in usage]
        assert not missing, (command, missing)
    assert transport_argv({"quic_stream_window": 16_000_000}) == ["--quic-stream-window", "16000000"]
    # an endpoint's own options reach that endpoint only
    options = {"quic_stream_window": 16_000_000, "tcp_notsent_lowat": 16384, "quic_handshake_timeout_ms": 60000}
    assert transport_argv(options) == ["--quic-stream-window", "16000000"]
    assert transport_argv(options, endpoint="server") == ["--quic-stream-window", "16000000",
                                                          "--tcp-notsent-lowat", "16384"]
    assert transport_argv(options, endpoint="load") == ["--quic-stream-window", "16000000",
                                                        "--quic-handshake-timeout-ms", "60000"]


def test_the_store_documentation_lists_the_columns_of_the_code() -> None:
    from protolab.store import doc

    assert doc.render(doc.DOC.read_text()) == doc.DOC.read_text(), "run python -m protolab.store.doc"
