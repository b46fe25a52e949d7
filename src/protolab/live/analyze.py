"""`protolab live analyze DATA`: 003 ch. 7's analyses (`live.analysis`, pure) of a live store,
read here (the uploads, their server qlogs, and a lab fleet's truth when DATA has one) and drawn
into an HTML page with the report's figure and table helpers (docs/live.md, "Analyses")."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protolab.errors import ProtolabError
from protolab.live.analysis import (
    RPM_SCHEMAS,
    LiveTest,
    Truth,
    browser_family,
    connection_losses,
    directions_of,
    finite,
    quic_share,
)
from protolab.live.fleet import FLEET_FILE, read_fleet_log
from protolab.measure.qlog import QlogError, read_qlog


class LiveAnalysisError(ProtolabError):
    """A stored test cannot be analysed: its file is missing, not JSON, or not what was stored."""


@dataclass
class LoadedStore:
    tests: list[LiveTest]
    other_schemas: dict[str, int] = field(default_factory=dict)  # stored tests not of an RPM schema
    skipped: list[str] = field(default_factory=list)  # "file: reason" of tests left out (--skip-bad)
    fleet_entries: int = 0


def _json_object(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_bytes())
    except OSError as exc:
        raise LiveAnalysisError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise LiveAnalysisError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise LiveAnalysisError(f"{path}: expected a JSON object, found {type(value).__name__}")
    return value


def _truth(entry: Mapping[str, Any] | None) -> Truth | None:
    if entry is None:
        return None
    drops = entry.get("down_drop_ms")
    return Truth(float(entry.get("true_down_bps", entry["rate_bps"])), float(entry["rtt_ms"]), int(entry["queue_bytes"]),
                 float(entry["loss"]), entry.get("down_arrived"), entry.get("down_dropped"),
                 str(entry.get("link_kind", "wired")),
                 float(entry["true_up_bps"]) if entry.get("true_up_bps") is not None else None,
                 tuple(float(t) for t in drops) if drops is not None else None,
                 str(entry.get("page_mode", entry.get("protocol"))) if entry.get("protocol") is not None else None)


def load_test(test_dir: Path, fleet: Mapping[str, Mapping[str, Any]]) -> LiveTest | str:
    """One stored test as a LiveTest, or its result's schema when it is not an RPM test."""
    meta = _json_object(test_dir / "meta.json")
    result = _json_object(test_dir / "result.json")
    schema = result.get("schema")
    if not isinstance(schema, str):
        raise LiveAnalysisError(f"{test_dir / 'result.json'}: field `schema`: expected a string")
    if schema not in RPM_SCHEMAS:
        return schema
    client = meta.get("client") if isinstance(meta.get("client"), dict) else {}
    user_agent = next((v for v in (client.get("user_agent"), result.get("user_agent"), meta.get("token_user_agent"))
                       if isinstance(v, str)), None)
    connections = []
    for path in sorted((test_dir / "qlogs").glob("*.qlog")):
        try:
            trace = read_qlog(path)
        except QlogError as exc:
            raise LiveAnalysisError(str(exc)) from None
        if trace.role in (None, "server"):
            connections.append(connection_losses(trace))
    idle = result.get("idle") if isinstance(result.get("idle"), dict) else {}
    token = str(meta.get("token") or test_dir.name)
    try:
        truth = _truth(fleet.get(token))
    except (KeyError, TypeError, ValueError) as exc:
        raise LiveAnalysisError(f"{test_dir.parent.parent / FLEET_FILE}: the entry of {token}: {exc!r}") from None
    return LiveTest(token, schema, browser_family(user_agent), quic_share(result),
                    finite(idle.get("rpm")), finite(idle.get("latency_ms")), directions_of(result),
                    tuple(connections), truth)


def load_store(data_dir: Path, *, skip_bad: bool = False) -> LoadedStore:
    """Every stored test of DATA (tests/<token>/, not the partial or removed ones) with the
    fleet's truth (DATA/fleet.jsonl) where there is one. A test that cannot be read is an error
    naming its file, or with `skip_bad` is left out and listed."""
    tests_dir = data_dir / "tests"
    if not tests_dir.is_dir():
        raise LiveAnalysisError(f"{data_dir}: not a live store (no tests/ directory; `protolab serve-live --data`)")
    try:
        entries = read_fleet_log(data_dir / FLEET_FILE)
    except ProtolabError as exc:
        raise LiveAnalysisError(str(exc)) from None
    fleet = {e["token"]: e for e in entries}
    loaded = LoadedStore([], fleet_entries=len(entries))
    for test_dir in sorted(p for p in tests_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            test = load_test(test_dir, fleet)
        except LiveAnalysisError as exc:
            if not skip_bad:
                raise
            loaded.skipped.append(str(exc))
            continue
        if isinstance(test, str):
            loaded.other_schemas[test] = loaded.other_schemas.get(test, 0) + 1
        else:
            loaded.tests.append(test)
    return loaded
