"""HAR 1.2 import (Chrome DevTools or Playwright export) -> page manifest.

What each manifest field comes from, and what a HAR cannot tell, is in docs/corpus.md
("HAR import"). Entries that cannot become objects are skipped and counted by reason in the
returned `HarImport`; nothing is dropped silently.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, quote, urlsplit

from protolab.corpus.build import AddressPlan, check_seed
from protolab.corpus.errors import CorpusError, HarError, ManifestError, read_json_file
from protolab.corpus.manifest import (
    MAX_DELAY_MS,
    MAX_OBJECT_SIZE,
    RESERVED_PATHS,
    SCHEMA_VERSION,
    valid_header_value,
    validate_manifest,
)

DEFAULT_NETWORK = "10.98.0.0/16"  # addresses for origins whose HAR address is unusable
PARENT_TYPES = ("text/html", "text/css", "text/javascript", "application/javascript",
                "application/x-javascript", "application/ecmascript", "text/ecmascript", "application/xhtml+xml")

# Reasons an entry is skipped (keys of HarImport.skipped).
SKIP_OTHER_PAGE = "belongs to another page of the HAR"
SKIP_METHOD = "not a GET request"
SKIP_SCHEME = "data:, blob: or other non-HTTP URL"
SKIP_FAILED = "failed (status 0, no response)"
SKIP_REDIRECT = "redirect (3xx, no body)"
SKIP_ERROR = "error status (4xx/5xx)"
SKIP_DUPLICATE = "duplicate of an earlier entry (same host and path)"
SKIP_RESERVED = "path reserved for the server's synthetic endpoints"


@dataclass
class HarImport:
    """A manifest and what happened on the way."""

    manifest: dict[str, Any]
    entries: int
    kept: int
    skipped: Counter[str] = field(default_factory=Counter)
    parents: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Entry:
    index: int
    url: str
    host: str
    path: str
    start_ms: float
    finish_ms: float
    size: int
    content_type: str
    address: str | None
    initiator: Any


def _parse_time(value: Any, where: str, file: str) -> float:
    if not isinstance(value, str):
        raise HarError(file, where, "must be an ISO 8601 date-time string")
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise HarError(file, where, f"{value!r} is not an ISO 8601 date-time") from None
    return moment.timestamp() * 1000.0


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _duration_ms(entry: dict[str, Any], where: str, file: str) -> float:
    """`time` of the entry; if absent, the sum of its non-negative `timings`."""
    total = _number(entry.get("time"))
    if total is not None and total >= 0:
        return total
    timings = entry.get("timings")
    if isinstance(timings, dict):
        parts = [_number(v) for k, v in timings.items() if k != "comment"]
        return sum(p for p in parts if p is not None and p > 0)
    raise HarError(file, f"{where}.time", "missing, and no timings to compute it from")


def _header(response: dict[str, Any], name: str) -> str | None:
    headers = response.get("headers")
    if isinstance(headers, list):
        for header in headers:
            if isinstance(header, dict) and str(header.get("name", "")).lower() == name:
                value = header.get("value")
                return value if isinstance(value, str) else None
    return None


def _size(response: dict[str, Any]) -> tuple[int | None, str]:
    """Body size and where it came from.

    An uncompressed response (no `content-encoding`, or `identity`) with a `content-length`
    header: that header, the exact body the server sent. Otherwise `content.size` (the decoded
    body), else `bodySize` (bytes on the wire), else `_transferSize` (which includes headers).
    Chromium reports the size of some text bodies after decoding them as text, which is not the
    byte count (docs/corpus.md), hence content-length first.
    """
    encoding = (_header(response, "content-encoding") or "identity").strip().lower()
    length = (_header(response, "content-length") or "").strip()
    if encoding == "identity" and length.isdigit() and int(length) > 0:
        return int(length), "content-length"
    content = response.get("content")
    candidates = (
        ("content.size", _number(content.get("size")) if isinstance(content, dict) else None),
        ("bodySize", _number(response.get("bodySize"))),
        ("_transferSize", _number(response.get("_transferSize"))),
    )
    for name, value in candidates:
        if value is not None and value > 0:
            return int(value), name
    return None, ""


def _content_type(response: dict[str, Any]) -> str:
    content = response.get("content")
    mime = content.get("mimeType") if isinstance(content, dict) else None
    if not isinstance(mime, str) or not mime.strip():
        mime = _header(response, "content-type")
    if not isinstance(mime, str) or not mime.strip() or not valid_header_value(mime.strip()):
        return "application/octet-stream"
    return mime.strip()


_UNSAFE = re.compile(r"[^\x21-\x7e]|#")


def _target(path: str, query: str) -> str:
    """Request target as the manifest wants it: printable ASCII, percent-encoding the rest."""
    target = (path or "/") + (f"?{query}" if query else "")
    if _UNSAFE.search(target):
        target = quote(target, safe="/?&=%:@!$'()*+,;~-._[]")
    return target


def target_of(path: str, query: str) -> str:
    """A URL's path and query as a manifest object's `path`."""
    return _target(path, query)


def manifest_host(host: str) -> tuple[str, str | None]:
    """A URL's host as a manifest origin: (hostname, the address an IP literal gives, or None).
    The manifest wants names: an IP-literal origin becomes ip-a-b-c-d.har.test."""
    host = host.rstrip(".").lower()
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return host, None
    name = f"ip-{str(literal).replace('.', '-').replace(':', '-')}.har.test"
    return name, str(literal) if literal.version == 4 else None


def _initiator_urls(initiator: Any) -> Iterator[str]:
    """URLs named by Chrome's `_initiator`: `url`, then the call frames of the stack and of its
    parent (async) stacks, innermost first."""
    if not isinstance(initiator, dict):
        return
    url = initiator.get("url")
    if isinstance(url, str) and url:
        yield url
    stack = initiator.get("stack")
    depth = 0
    while isinstance(stack, dict) and depth < 64:
        frames = stack.get("callFrames")
        if isinstance(frames, list):
            for frame in frames:
                if isinstance(frame, dict) and isinstance(frame.get("url"), str) and frame["url"]:
                    yield frame["url"]
        stack = stack.get("parent")
        depth += 1


def _is_parent_type(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() in PARENT_TYPES


def _url_key(url: str) -> str:
    """URL without fragment, for matching initiator URLs to entries."""
    return url.split("#", 1)[0]


def read_har(path: str | os.PathLike[str]) -> Any:
    # DevTools writes a byte-order mark on some platforms.
    return read_json_file(path, HarError, encoding="utf-8-sig")


def import_har_file(path: str | os.PathLike[str], name: str | None = None, seed: int = 1,
                    network: str | AddressPlan = DEFAULT_NETWORK) -> HarImport:
    """Read a HAR file and convert it; the page name defaults to the file's stem."""
    har = read_har(path)
    page = name if name is not None else Path(path).stem
    return import_har(har, str(path), page, seed, network)


def import_har(har: Any, file: str, name: str, seed: int = 1,
               network: str | AddressPlan = DEFAULT_NETWORK) -> HarImport:
    """Convert parsed HAR JSON to a manifest; `file` names the HAR in errors. The manifest is
    checked by `protolab-net manifest check`: one the lab cannot serve is refused, naming the
    HAR entry its field came from."""
    plan = network if isinstance(network, AddressPlan) else AddressPlan.parse(network)
    check_seed(seed)
    raw_entries, first_page = _log_entries(har, file)
    result = HarImport(manifest={}, entries=len(raw_entries), kept=0)
    reader = _EntryReader(file, first_page, result)
    entries = [e for start_ms, i, raw in _by_start(raw_entries, file) if (e := reader.read(i, start_ms, raw))]
    reader.warn_about(entries)
    parents = _parents(entries, result)
    result.kept = len(entries)
    result.manifest = {"schema_version": SCHEMA_VERSION, "name": name, "seed": seed,
                       "origins": _origins(entries, plan), "objects": _objects(entries, parents, result)}
    _check_servable(result.manifest, entries, file)
    return result


def _log_entries(har: Any, file: str) -> tuple[list[Any], str | None]:
    """The entries of the HAR's log, and the id of its first page (None if it names none)."""
    if not isinstance(har, dict):
        raise HarError(file, "(document)", "a HAR file is a JSON object with a \"log\"")
    log = har.get("log")
    if not isinstance(log, dict):
        raise HarError(file, "log", "missing or not an object")
    raw_entries = log.get("entries")
    if not isinstance(raw_entries, list):
        raise HarError(file, "log.entries", "missing or not a list")
    pages = log.get("pages")
    first_page: str | None = None
    if isinstance(pages, list) and pages and isinstance(pages[0], dict) and isinstance(pages[0].get("id"), str):
        first_page = pages[0]["id"]
    return raw_entries, first_page


def _by_start(raw_entries: list[Any], file: str) -> list[tuple[float, int, dict[str, Any]]]:
    """(start in ms, index, entry), by start time: HAR order is usually, not always, by start."""
    started: list[tuple[float, int, dict[str, Any]]] = []
    for i, raw in enumerate(raw_entries):
        where = f"log.entries[{i}]"
        if not isinstance(raw, dict):
            raise HarError(file, where, "must be an object")
        started.append((_parse_time(raw.get("startedDateTime"), f"{where}.startedDateTime", file), i, raw))
    started.sort(key=lambda item: (item[0], item[1]))
    return started


def _request_fields(raw: dict[str, Any], where: str, file: str) -> tuple[dict[str, Any], str, str, int]:
    """(response, url, method, status) of an entry; HarError naming the missing or mistyped one."""
    request = raw.get("request")
    response = raw.get("response")
    if not isinstance(request, dict):
        raise HarError(file, f"{where}.request", "missing or not an object")
    if not isinstance(response, dict):
        raise HarError(file, f"{where}.response", "missing or not an object")
    url = request.get("url")
    if not isinstance(url, str) or not url:
        raise HarError(file, f"{where}.request.url", "missing or not a string")
    method = request.get("method")
    if not isinstance(method, str):
        raise HarError(file, f"{where}.request.method", "missing or not a string")
    status = response.get("status")
    if isinstance(status, bool) or not isinstance(status, int):
        raise HarError(file, f"{where}.response.status", "missing or not an integer")
    return response, url, method, status


def _http_url(url: str, where: str, file: str) -> SplitResult | None:
    """The parts of an http(s) URL with a host; None for another scheme (data:, blob:, ...)."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme not in ("http", "https"):
        if not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme):
            raise HarError(file, f"{where}.request.url", f"{url[:200]!r} is not an absolute URL")
        return None
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # .port raises ValueError when out of range
    except ValueError as exc:
        raise HarError(file, f"{where}.request.url", f"{url[:200]!r}: {exc}") from None
    if not host:
        raise HarError(file, f"{where}.request.url", f"{url[:200]!r} has no host")
    return parts


def _status_skip(method: str, status: int) -> str | None:
    """Why a response cannot be an object of the page, if it cannot."""
    if method.upper() != "GET":
        return SKIP_METHOD
    if status <= 0:
        return SKIP_FAILED
    if 300 <= status < 400 and status != 304:
        return SKIP_REDIRECT
    if status >= 400:
        return SKIP_ERROR
    return None


@dataclass
class _EntryReader:
    """Reads HAR entries, in start order, into the objects to serve; counts what it skips."""

    file: str
    first_page: str | None
    result: HarImport
    seen: set[tuple[str, str]] = field(default_factory=set)
    ports: set[str] = field(default_factory=set)
    cached: int = 0

    def read(self, i: int, start_ms: float, raw: dict[str, Any]) -> _Entry | None:
        """The entry as an object, or None if it is skipped."""
        where = f"log.entries[{i}]"
        response, url, method, status = _request_fields(raw, where, self.file)
        pageref = raw.get("pageref")
        if self.first_page is not None and isinstance(pageref, str) and pageref != self.first_page:
            return self._skip(SKIP_OTHER_PAGE)
        parts = _http_url(url, where, self.file)
        if parts is None:
            return self._skip(SKIP_SCHEME)
        skip = _status_skip(method, status)
        if skip is not None:
            return self._skip(skip)
        host, address = manifest_host(parts.hostname or "")
        if parts.port is not None and parts.port != (443 if parts.scheme == "https" else 80):
            self.ports.add(f"{host}:{parts.port}")
        target = _target(parts.path, parts.query)
        if (parts.path or "/") in RESERVED_PATHS:
            self.result.warnings.append(f"{where}: {target} skipped: reserved for the server's synthetic endpoints")
            return self._skip(SKIP_RESERVED)
        if (host, target) in self.seen:
            return self._skip(SKIP_DUPLICATE)
        self.seen.add((host, target))
        if status == 304 or raw.get("_fromCache"):
            self.cached += 1
        server_ip = raw.get("serverIPAddress")
        if address is None and isinstance(server_ip, str):
            address = _usable_ipv4(server_ip)
        duration = _duration_ms(raw, where, self.file)
        return _Entry(index=i, url=_url_key(url), host=host, path=target, start_ms=start_ms,
                      finish_ms=start_ms + duration, size=self._size(response, where),
                      content_type=_content_type(response), address=address, initiator=raw.get("_initiator"))

    def _skip(self, reason: str) -> None:
        self.result.skipped[reason] += 1

    def _size(self, response: dict[str, Any], where: str) -> int:
        size, source = _size(response)
        if size is None:
            self.result.warnings.append(f"{where}: no body size (content.size, bodySize, _transferSize); "
                                        "size set to 1 byte")
            return 1
        if source == "_transferSize":
            self.result.warnings.append(f"{where}: size from _transferSize (includes headers)")
        if size > MAX_OBJECT_SIZE:
            self.result.warnings.append(f"{where}: size {size} capped at {MAX_OBJECT_SIZE} bytes")
            return MAX_OBJECT_SIZE
        return size

    def warn_about(self, entries: list[_Entry]) -> None:
        """What the whole read tells: nothing servable (an error), cached entries, dropped ports,
        a root that is not HTML."""
        if not entries:
            raise HarError(self.file, "log.entries", "no entry can be served (all were skipped: "
                           + ", ".join(f"{n} {r}" for r, n in self.result.skipped.items()) + ")")
        if self.cached:
            self.result.warnings.append(f"{self.cached} entries came from the browser cache (304 or _fromCache): "
                                        "kept as objects, but their timings say little about the network")
        for host_port in sorted(self.ports):
            self.result.warnings.append(f"{host_port}: non-default port dropped (the lab serves 80 and 443)")
        root = entries[0]
        if not _is_parent_type(root.content_type) or not root.content_type.startswith("text/html"):
            self.result.warnings.append(f"log.entries[{root.index}]: the root (first entry) is {root.content_type}, "
                                        "not an HTML document")


def _parents(entries: list[_Entry], result: HarImport) -> list[int | None]:
    """Each entry's parent (None for the root, the first): the earliest initiator URL that is an
    earlier entry; else the parent-type entry that finished last before it started; else the root."""
    by_url: dict[str, int] = {}
    for k, entry in enumerate(entries):
        by_url.setdefault(entry.url, k)
    parents: list[int | None] = [None]
    for k, entry in enumerate(entries[1:], start=1):
        parent = None
        for url in _initiator_urls(entry.initiator):
            candidate = by_url.get(_url_key(url))
            # Only an earlier entry can have discovered this one (this also rules out cycles).
            if candidate is not None and candidate < k:
                parent = candidate
                break
        if parent is not None:
            result.parents["initiator"] += 1
        else:
            finished = [j for j in range(k) if entries[j].finish_ms <= entry.start_ms
                        and _is_parent_type(entries[j].content_type)]
            if finished:
                parent = max(finished, key=lambda j: (entries[j].finish_ms, j))
                result.parents["timing"] += 1
            else:
                parent = 0
                result.parents["root (nothing finished before it)"] += 1
        parents.append(parent)
    return parents


def _objects(entries: list[_Entry], parents: list[int | None], result: HarImport) -> list[dict[str, Any]]:
    """The manifest's objects: the entries with their parent references and discovery delays."""
    objects: list[dict[str, Any]] = []
    for k, entry in enumerate(entries):
        obj: dict[str, Any] = {"path": entry.path, "origin": entry.host, "size": entry.size,
                               "content_type": entry.content_type}
        parent = parents[k]
        if parent is not None:
            p = entries[parent]
            obj["parent"] = p.path if p.host == entry.host else f"//{p.host}{p.path}"
            delay = round(max(0.0, entry.start_ms - p.finish_ms))
            if delay > MAX_DELAY_MS:
                result.warnings.append(f"log.entries[{entry.index}]: delay {delay} ms capped at {MAX_DELAY_MS}")
                delay = MAX_DELAY_MS
            if delay:
                obj["delay_ms"] = delay
        objects.append(obj)
    return objects


_MANIFEST_FIELD = re.compile(r"(?P<list>objects|origins)\[(?P<k>\d+)\](?:\.(?P<field>\w+))?")
# The part of a HAR entry a manifest field is made of.
_HAR_FIELD = {"hostname": "request.url", "path": "request.url", "address": "serverIPAddress",
              "content_type": "response.content.mimeType"}


def _check_servable(manifest: dict[str, Any], entries: list[_Entry], file: str) -> None:
    """The manifest must be one the lab serves; a refused field is traced to its HAR entry."""
    try:
        validate_manifest(manifest, file)
    except ManifestError as exc:
        match = _MANIFEST_FIELD.fullmatch(exc.field)
        if match is None:
            raise HarError(file, "(manifest)", f"cannot be served ({exc.field}: {exc.message})") from None
        k = int(match["k"])
        if match["list"] == "objects":
            entry = entries[k]
        else:
            entry = next(e for e in entries if e.host == manifest["origins"][k]["hostname"])
        part = _HAR_FIELD.get(match["field"] or "")
        where = f"log.entries[{entry.index}]" + (f".{part}" if part else "")
        raise HarError(file, where, f"cannot be served ({exc.field}: {exc.message})") from None


def _usable_ipv4(text: str) -> str | None:
    """The address if it is an IPv4 address a lab origin can have, else None (IPv6, loopback,
    unspecified, multicast, broadcast, link-local, or not an address)."""
    try:
        address = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None
    if (address.version != 4 or address.is_loopback or address.is_unspecified or address.is_multicast
            or address.is_link_local or address == ipaddress.IPv4Address("255.255.255.255")):
        return None
    return str(address)


def _origins(entries: list[_Entry], plan: AddressPlan) -> list[dict[str, str]]:
    """One origin per hostname, in order of first use. Its address: the first usable IPv4
    `serverIPAddress` of its entries, else the next free host address of the network."""
    chosen: dict[str, str | None] = {}
    for entry in entries:
        if chosen.get(entry.host) is None:
            chosen[entry.host] = entry.address
    used = {a for a in chosen.values() if a is not None}
    free = (str(a) for a in plan.network.hosts() if str(a) not in used)
    origins = []
    for host, address in chosen.items():
        if address is None:
            address = next(free, None)
            if address is None:
                raise CorpusError(f"--network {plan.network} has no free address left for {host}")
        origins.append({"hostname": host, "address": address})
    return origins
