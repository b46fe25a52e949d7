"""Page manifests (docs/manifest.md): what Python needs to build them, and their check.

The rules live in Rust (`web::manifest`); Python keeps no copy of them. A manifest Python did not
build itself (a file a spec names, a HAR import, a recording) is checked by
`protolab-net manifest check --json`, which answers, per manifest, with the refused field and
why: `page.json: objects[3].parent: no object "/x.css"` (a `ManifestError`). What stays here is
what building a manifest needs: the format's version and limits (to cap sizes and delays, skip
reserved paths and keep replayable headers; tests/test_manifest_rules.py checks them against
the binary), the typed model, and atomic writing.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protolab.corpus.errors import CorpusError, ManifestError, read_json_file
from protolab.errors import LabError
from protolab.lab.binary import find_binary

SCHEMA_VERSION = 1
MAX_OBJECT_SIZE = 1 << 30
MAX_DELAY_MS = 600_000
MAX_SEED = (1 << 64) - 1
RESERVED_PATHS = frozenset({"/bytes", "/upload", "/empty"})
# Response headers the server writes itself (or hop-by-hop ones): a manifest cannot carry them.
FORBIDDEN_HEADERS = frozenset({
    "content-length", "content-type", "content-encoding", "transfer-encoding", "connection",
    "keep-alive", "upgrade", "te", "trailer", "proxy-connection",
})


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Origin(_Model):
    hostname: str
    address: str


class PageObject(_Model):
    path: str
    origin: str
    size: int
    content_type: str
    headers: dict[str, str] = Field(default_factory=dict)
    parent: str | None = None
    delay_ms: int = 0
    body: str | None = None  # a recorded body, relative to the manifest's directory

    def key(self) -> tuple[str, str]:
        return (self.origin, self.path)


class Manifest(_Model):
    """A manifest the binary accepted, typed."""

    schema_version: int = SCHEMA_VERSION
    name: str
    seed: int = 1
    origins: list[Origin]
    objects: list[PageObject]

    def total_size(self) -> int:
        return sum(o.size for o in self.objects)


def valid_header_value(value: str) -> bool:
    """Whether a recorded content type or header value can be carried: no control characters but
    tab, no DEL, as the server's HTTP library takes them (the HAR import and the recorder keep
    only those)."""
    return all(c == "\t" or (ord(c) >= 0x20 and ord(c) != 0x7F) for c in value)


# --- the check, by protolab-net ---------------------------------------------------------------


def _run_check(arguments: Sequence[str], stdin: str | None = None) -> list[dict[str, Any]]:
    """`protolab-net manifest check --json ARGUMENTS`: one entry per manifest
    (schemas/manifest-check.json; read as plain JSON, as the plan reads `cc check`)."""
    binary = str(find_binary())
    try:
        done = subprocess.run([binary, "manifest", "check", "--json", *arguments], input=stdin, capture_output=True,
                              text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError(f"cannot run {binary} manifest check: {exc}") from exc
    try:
        entries = json.loads(done.stdout)["manifests"]
    except (ValueError, KeyError, TypeError):
        message = done.stderr.strip().removeprefix("error: ") or done.stdout[:200]
        raise LabError(f"{binary} manifest check: {message}") from None
    return list(entries)


def check_manifest_files(files: Sequence[str | os.PathLike[str]],
                         labels: Mapping[str, str] | None = None) -> list[ManifestError | None]:
    """Check manifest files with the binary, in one run; per file, None or its ManifestError.
    `labels` renames files in the errors (e.g. a staged file as its final name)."""
    if not files:
        return []
    names = [str(f) for f in files]
    # After `--` nothing is an option; a file named `-` (stdin to the binary) is given as `./-`.
    entries = _run_check(["--", *("./-" if name == "-" else name for name in names)])
    results: list[ManifestError | None] = []
    for name, entry in zip(names, entries, strict=True):
        label = (labels or {}).get(name, name)
        results.append(None if entry["ok"] else ManifestError(label, entry["field"], entry["message"]))
    return results


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A manifest file the binary accepted (its rules and recorded bodies), as written."""
    (error,) = check_manifest_files([path])
    if error is not None:
        raise error
    return dict(read_json_file(path, ManifestError))


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read a manifest file the binary accepted, typed."""
    return _typed(read_manifest(path), str(path))


def validate_manifest(data: Any, file: str | os.PathLike[str] = "manifest.json") -> Manifest:
    """Check `data` (parsed JSON, as if it were the file `file`) with the binary; the typed
    manifest, or ManifestError naming the file and field."""
    label = str(file)
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ManifestError(label, "(document)", f"not JSON: {exc}") from None
    (entry,) = _run_check(["--stdin-name", label, "-"], stdin=text)
    if not entry["ok"]:
        raise ManifestError(label, entry["field"], entry["message"])
    return _typed(data, label)


def _typed(data: Any, label: str) -> Manifest:
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:  # the binary accepted it: a model out of step with the format
        raise ManifestError(label, "(document)", f"accepted by protolab-net, but not by the model: {exc}") from None


# --- writing --------------------------------------------------------------------------------------


def manifest_json(manifest: dict[str, Any]) -> str:
    """The canonical text of a manifest: stable key order as built, 2-space indent, final newline."""
    return json.dumps(manifest, indent=2, ensure_ascii=True) + "\n"


def write_manifests(manifests: dict[Path, dict[str, Any]]) -> None:
    """Write each manifest to a temporary file next to its target, then rename them all into
    place: a failed write leaves nothing half-written. The manifests are built by protolab
    (the Table I replicas, generated pages) or were checked when imported."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, manifest in manifests.items():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
                staged.append((tmp, path))
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(manifest_json(manifest))
            except OSError as exc:
                raise CorpusError(f"{path}: cannot write: {exc.strerror or exc}") from None
        for tmp, path in staged:
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise CorpusError(f"{path}: cannot write: {exc.strerror or exc}") from None
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
