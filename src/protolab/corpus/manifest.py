"""Page manifests (docs/manifest.md): pydantic models and the validation rules.

The Rust side (`web::manifest`) validates the same rules when it loads a manifest; this module
lets Python refuse a bad manifest before anything is started, with the same style of message:
`page.json: objects[3].parent: no object "/x.css"`.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from protolab.corpus.errors import CorpusError, ManifestError, read_json_file

SCHEMA_VERSION = 1
MAX_OBJECT_SIZE = 1 << 30
MAX_DELAY_MS = 600_000
MAX_SEED = (1 << 64) - 1
MAX_PATH_LEN = 2048
RESERVED_PATHS = frozenset({"/bytes", "/upload", "/empty"})
FORBIDDEN_HEADERS = frozenset({
    "content-length", "content-type", "content-encoding", "transfer-encoding", "connection",
    "keep-alive", "upgrade", "te", "trailer", "proxy-connection",
})
_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def valid_body_path(body: str) -> bool:
    """A recorded body's file: relative, inside the manifest's directory (as crates/web checks)."""
    parts = body.split("/")
    return (0 < len(body) <= 1024 and not body.startswith("/") and "\\" not in body
            and all(part not in ("", ".", "..") for part in parts))


class Origin(_Strict):
    hostname: StrictStr
    address: StrictStr


class PageObject(_Strict):
    path: StrictStr
    origin: StrictStr
    size: StrictInt
    content_type: StrictStr
    headers: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    parent: StrictStr | None = None
    delay_ms: StrictInt = 0
    body: StrictStr | None = None  # a recorded body, relative to the manifest's directory

    def key(self) -> tuple[str, str]:
        return (self.origin, self.path)


class Manifest(_Strict):
    schema_version: StrictInt = SCHEMA_VERSION
    name: StrictStr
    seed: StrictInt = 1
    origins: list[Origin]
    objects: list[PageObject]

    def total_size(self) -> int:
        return sum(o.size for o in self.objects)


def valid_hostname(name: str) -> bool:
    """Lowercase LDH labels of 1-63 characters, at most 253 in all, not an IP literal."""
    if not name or len(name) > 253:
        return False
    try:
        ipaddress.ip_address(name)
        return False
    except ValueError:
        pass
    return all(_LABEL.match(label) for label in name.split("."))


def valid_path(path: str) -> bool:
    """Origin-form request target: starts with '/', printable ASCII without '#', <= 2048 chars."""
    return (path.startswith("/") and len(path) <= MAX_PATH_LEN
            and all(0x21 <= ord(c) <= 0x7E and c != "#" for c in path))


def path_only(target: str) -> str:
    return target.split("?", 1)[0]


def valid_header_value(value: str) -> bool:
    """What an HTTP header value may hold: no control characters except tab, no DEL."""
    return all(c == "\t" or (ord(c) >= 0x20 and ord(c) != 0x7F) for c in value)


def parent_reference(reference: str, own_origin: str) -> tuple[str, str]:
    """(hostname, path) of a parent reference `/path` or `//hostname/path`; ValueError if neither."""
    if reference.startswith("//"):
        rest = reference[2:]
        slash = rest.find("/")
        if slash < 0:
            raise ValueError(f'"{reference}" must be "/path" or "//hostname/path"')
        host, path = rest[:slash], rest[slash:]
        if not valid_hostname(host):
            raise ValueError(f'"{host}" in "{reference}" is not a hostname')
        return host, path
    if reference.startswith("/"):
        return own_origin, reference
    raise ValueError(f'"{reference}" must be "/path" or "//hostname/path"')


def _loc_to_field(loc: tuple[int | str, ...]) -> str:
    field = ""
    for part in loc:
        if isinstance(part, int):
            field += f"[{part}]"
        else:
            field += f".{part}" if field else str(part)
    return field or "(document)"


def validate_manifest(data: Any, file: str | os.PathLike[str] = "manifest.json") -> Manifest:
    """Check `data` (parsed JSON) against every rule of docs/manifest.md; ManifestError if not."""
    label = str(file)

    def fail(field: str, message: str) -> ManifestError:
        return ManifestError(label, field, message)

    if not isinstance(data, dict):
        raise fail("(document)", "a manifest is a JSON object")
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        message = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        if error["type"] == "missing":
            message = "missing"
        raise fail(_loc_to_field(tuple(error["loc"])), message) from None

    if manifest.schema_version != SCHEMA_VERSION:
        raise fail("schema_version", f"version {manifest.schema_version} is not supported "
                                     f"(this build reads {SCHEMA_VERSION})")
    if not 0 <= manifest.seed <= MAX_SEED:
        raise fail("seed", f"{manifest.seed} is not an unsigned 64-bit integer")
    if not manifest.origins:
        raise fail("origins", "a page needs at least one origin")
    hostnames: set[str] = set()
    for i, origin in enumerate(manifest.origins):
        if not valid_hostname(origin.hostname):
            raise fail(f"origins[{i}].hostname",
                       f'"{origin.hostname}" is not a hostname (lowercase letters, digits, \'-\' and \'.\')')
        if origin.hostname in hostnames:
            raise fail(f"origins[{i}].hostname", f'origin "{origin.hostname}" is defined twice')
        hostnames.add(origin.hostname)
        try:
            address = ipaddress.IPv4Address(origin.address)
        except ValueError:
            raise fail(f"origins[{i}].address", f'"{origin.address}" is not an IPv4 address') from None
        if address.is_unspecified or address.is_multicast or address == ipaddress.IPv4Address("255.255.255.255"):
            raise fail(f"origins[{i}].address", f"{address} cannot be an origin address")

    if not manifest.objects:
        raise fail("objects", "a page needs at least one object (the root)")
    index: dict[tuple[str, str], int] = {}
    root: int | None = None
    for i, obj in enumerate(manifest.objects):
        at = f"objects[{i}]"
        if not valid_path(obj.path):
            raise fail(f"{at}.path", f'"{obj.path}" must start with \'/\' and be printable ASCII without \'#\'')
        if path_only(obj.path) in RESERVED_PATHS:
            raise fail(f"{at}.path", f'"{obj.path}" is reserved for the server\'s synthetic endpoints')
        if obj.origin not in hostnames:
            raise fail(f"{at}.origin", f'no origin "{obj.origin}" in origins')
        if not 1 <= obj.size <= MAX_OBJECT_SIZE:
            raise fail(f"{at}.size", f"{obj.size} must be between 1 and {MAX_OBJECT_SIZE} bytes")
        if not obj.content_type or not valid_header_value(obj.content_type):
            raise fail(f"{at}.content_type", f'"{obj.content_type}" is not a header value')
        for name, value in obj.headers.items():
            field = f"{at}.headers.{name}"
            if not _TOKEN.match(name):
                raise fail(field, "not a header name")
            if name.lower() in FORBIDDEN_HEADERS:
                raise fail(field, "set by the server; a manifest cannot set it")
            if not valid_header_value(value):
                raise fail(field, f'"{value}" is not a header value')
        if not 0 <= obj.delay_ms <= MAX_DELAY_MS:
            raise fail(f"{at}.delay_ms", f"{obj.delay_ms} must be between 0 and {MAX_DELAY_MS} ms")
        if obj.body is not None and not valid_body_path(obj.body):
            raise fail(f"{at}.body", f'"{obj.body}" must be a relative path inside the manifest\'s directory')
        previous = index.get(obj.key())
        if previous is not None:
            raise fail(f"{at}.path", f'"{obj.path}" on "{obj.origin}" is already objects[{previous}]')
        index[obj.key()] = i
        if obj.parent is None:
            if root is not None:
                raise fail(f"{at}.parent", f"missing: only the root has no parent, and objects[{root}] "
                                           "is already the root")
            if obj.delay_ms != 0:
                raise fail(f"{at}.delay_ms", "the root has no parent, so it has no discovery delay")
            root = i
    if root is None:
        raise fail("objects", "no root: exactly one object (the main HTML document) has no parent")

    parents: list[int | None] = [None] * len(manifest.objects)
    for i, obj in enumerate(manifest.objects):
        if obj.parent is None:
            continue
        try:
            host, path = parent_reference(obj.parent, obj.origin)
        except ValueError as exc:
            raise fail(f"objects[{i}].parent", str(exc)) from None
        if host not in hostnames:
            raise fail(f"objects[{i}].parent", f'no origin "{host}" in origins')
        found = index.get((host, path))
        if found is None:
            where = "" if host == obj.origin else f' on origin "{host}"'
            raise fail(f"objects[{i}].parent", f'no object "{path}"{where}')
        if found == i:
            raise fail(f"objects[{i}].parent", "an object cannot discover itself")
        parents[i] = found

    reaches_root = [False] * len(parents)
    reaches_root[root] = True
    for start in range(len(parents)):
        chain = [start]
        at_index = start
        while not reaches_root[at_index]:
            nxt = parents[at_index]
            if nxt is None:
                break
            if nxt in chain:
                cycle = " -> ".join(f'"{manifest.objects[k].path}"' for k in chain[chain.index(nxt):] + [nxt])
                raise fail(f"objects[{start}].parent", f"cycle: {cycle}")
            chain.append(nxt)
            at_index = nxt
        for k in chain:
            reaches_root[k] = True
    return manifest


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate a manifest file."""
    return validate_manifest(read_json_file(path, ManifestError), str(path))


def manifest_json(manifest: dict[str, Any]) -> str:
    """The canonical text of a manifest: stable key order as built, 2-space indent, final newline."""
    return json.dumps(manifest, indent=2, ensure_ascii=True) + "\n"


def write_manifests(manifests: dict[Path, dict[str, Any]]) -> None:
    """Validate every manifest, write each to a temporary file next to its target, then rename
    them all into place: a bad manifest or a failed write leaves nothing half-written."""
    for path, manifest in manifests.items():
        validate_manifest(manifest, path)
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
