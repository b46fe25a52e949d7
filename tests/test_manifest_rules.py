"""The manifest rules live in Rust; Python asks `protolab-net manifest check` (docs/manifest.md).

The shared table tests/fixtures/bad_manifests.json is run here through Python's API and by
crates/web/tests/manifest_rules.rs in Rust: both refuse every case, naming the same field. The
limits Python keeps to build manifests (sizes, delays, seeds, reserved paths, headers) are
checked against what the binary accepts.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from protolab.corpus.errors import ManifestError
from protolab.corpus.manifest import (
    FORBIDDEN_HEADERS,
    MAX_DELAY_MS,
    MAX_OBJECT_SIZE,
    MAX_SEED,
    RESERVED_PATHS,
    SCHEMA_VERSION,
    check_manifest_files,
    load_manifest,
    read_manifest,
    valid_header_value,
    validate_manifest,
)

TABLE = json.loads((Path(__file__).parent / "fixtures" / "bad_manifests.json").read_text())
CASES: list[dict[str, Any]] = TABLE["cases"]


def _text(case: dict[str, Any]) -> str:
    return case["text"] if "text" in case else json.dumps(case["manifest"])


def test_every_bad_manifest_file_is_refused_naming_its_field(tmp_path: Path) -> None:
    files = []
    for i, case in enumerate(CASES):
        files.append(tmp_path / f"case-{i:02d}.json")
        files[-1].write_text(_text(case))
    errors = check_manifest_files(files)
    wrong = []
    for file, case, error in zip(files, CASES, errors, strict=True):
        if error is None:
            wrong.append(f"{case['name']}: accepted")
        elif error.field != case["field"] or not str(error).startswith(f"{file}: {case['field']}: "):
            wrong.append(f"{case['name']}: expected {case['field']}, got {error}")
    assert not wrong, "\n".join(wrong)
    assert len(CASES) >= 60


@pytest.mark.parametrize("case", [c for c in CASES if "manifest" in c], ids=lambda c: c["name"])
def test_validate_manifest_refuses_naming_the_field(case: dict[str, Any]) -> None:
    with pytest.raises(ManifestError) as info:
        validate_manifest(case["manifest"], "page.json")
    assert info.value.field == case["field"]
    assert str(info.value).startswith(f"page.json: {case['field']}: ")
    assert "Traceback" not in str(info.value)


def test_the_valid_page_is_accepted_and_typed(tmp_path: Path) -> None:
    manifest = validate_manifest(TABLE["valid"], "page.json")
    assert manifest.schema_version == SCHEMA_VERSION and len(manifest.objects) == 4
    assert manifest.objects[2].key() == ("static.a.test", "/f.woff2") and manifest.total_size() == 1030
    file = tmp_path / "page.json"
    file.write_text(json.dumps(TABLE["valid"]))
    assert load_manifest(file) == manifest
    assert read_manifest(file) == TABLE["valid"]


def test_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ManifestError, match=r"bad.json: \(document\): key must be a string"):
        load_manifest(bad)
    with pytest.raises(ManifestError, match=r"missing.json: \(file\): cannot read"):
        load_manifest(tmp_path / "missing.json")
    with pytest.raises(ManifestError, match=r"page.json: \(document\): not JSON"):
        validate_manifest({"name": {1, 2}}, "page.json")


def test_recorded_bodies_are_checked(tmp_path: Path) -> None:
    (tmp_path / "p.bodies").mkdir()
    (tmp_path / "p.bodies" / "root").write_bytes(b"x" * 1000)
    page = copy.deepcopy(TABLE["valid"])
    page["objects"][0]["body"] = "p.bodies/root"
    file = tmp_path / "p.json"
    file.write_text(json.dumps(page))
    assert load_manifest(file).objects[0].body == "p.bodies/root"
    assert validate_manifest(page, file).objects[0].body == "p.bodies/root"
    page["objects"][0]["size"] = 999
    file.write_text(json.dumps(page))
    with pytest.raises(ManifestError, match=r"p.json: objects\[0\].body: .* has 1000 bytes, but size is 999"):
        load_manifest(file)
    with pytest.raises(ManifestError, match=r"elsewhere.json: objects\[0\].body: cannot read"):
        validate_manifest(page, tmp_path / "sub" / "elsewhere.json")


def _variant(path: list[str | int], value: Any) -> dict[str, Any]:
    page = copy.deepcopy(TABLE["valid"])
    target: Any = page
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return page


def _accepted(tmp_path: Path, pages: list[dict[str, Any]]) -> list[bool]:
    files = []
    for i, page in enumerate(pages):
        files.append(tmp_path / f"v{i}.json")
        files[-1].write_text(json.dumps(page))
    return [error is None for error in check_manifest_files(files)]


def test_the_limits_python_builds_with_are_the_binarys(tmp_path: Path) -> None:
    accepted = [
        _variant(["objects", 1, "size"], MAX_OBJECT_SIZE),
        _variant(["objects", 1, "delay_ms"], MAX_DELAY_MS),
        _variant(["seed"], MAX_SEED),
        _variant(["objects", 3, "path"], "/bytesx"),
        _variant(["objects", 1, "headers"], {"cache-control": "max-age=1"}),
    ]
    refused = [
        _variant(["objects", 1, "size"], MAX_OBJECT_SIZE + 1),
        _variant(["objects", 1, "delay_ms"], MAX_DELAY_MS + 1),
        _variant(["seed"], MAX_SEED + 1),
        _variant(["schema_version"], SCHEMA_VERSION + 1),
        *(_variant(["objects", 3, "path"], path) for path in sorted(RESERVED_PATHS)),
        *(_variant(["objects", 1, "headers"], {name: "1"}) for name in sorted(FORBIDDEN_HEADERS)),
        *(_variant(["objects", 1, "headers"], {name.upper(): "1"}) for name in sorted(FORBIDDEN_HEADERS)),
    ]
    assert _accepted(tmp_path, accepted + refused) == [True] * len(accepted) + [False] * len(refused)


@pytest.mark.parametrize("value", ["text/css", "text/html; charset=utf-8", "a\tb", "x" * 300, "", "caf\u00e9",
                                   "a\nb", "a\rb", "a\x7fb", "a\x00b", "~!@#$%^&*()"])
def test_valid_header_value_agrees_with_the_binary(tmp_path: Path, value: str) -> None:
    page = _variant(["objects", 1, "headers"], {"x-a": value})
    assert _accepted(tmp_path, [page]) == [valid_header_value(value)]
