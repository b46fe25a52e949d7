"""`protolab corpus record URL`: load a page in headless Chromium and keep every response, as a
manifest whose objects carry their recorded bodies and headers (docs/corpus.md, "Record and
replay"). `protolab-net serve` then replays the page from the lab's origins over h1, h2 or h3.

The recording is turned into a HAR-shaped document (one entry per final response, with
Chromium's initiator) and converted by the HAR importer, so the dependency tree, the skipped
entries (redirects, errors, non-GET) and the origin addresses follow the same rules as
`protolab corpus import-har`; the bodies (`objects[].body`, files named by their SHA-256) and
the response headers the lab can replay are then attached to the objects.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from protolab.corpus.errors import CorpusError
from protolab.corpus.har import HarImport, import_har, manifest_host, target_of
from protolab.corpus.manifest import FORBIDDEN_HEADERS, check_manifest_files, valid_header_value
from protolab.files import scratch_dir

RECORD_SCHEMA_VERSION = 1
# Response headers not replayed: the server's own (dates, its protocol advertisement), hop-by-hop
# ones, and the ones a manifest cannot carry (FORBIDDEN_HEADERS).
NOT_REPLAYED = {"date", "age", "alt-svc", "server", "via", "x-cache", "expires", "set-cookie", "report-to", "nel"}


@dataclass
class Recorded:
    """One request of the recorded load, from the DevTools protocol."""

    url: str
    method: str
    sent: float  # monotonic s
    wall: float  # Unix s
    initiator: dict[str, Any] = field(default_factory=dict)
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    mime: str = ""
    remote: str | None = None
    finished: float | None = None
    error: str | None = None
    body: bytes | None = None


@dataclass
class Recording:
    url: str
    requests: list[Recorded]
    navigation: dict[str, Any]
    chromium_version: str | None


async def _record(url: str, maps: list[str], spki: str | None, timeout_ms: int, settle_s: float,
                  chromium: str) -> Recording:
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import async_playwright

    from protolab.browser.modes import COMMON_FLAGS

    flags = list(COMMON_FLAGS)
    if maps:
        flags.append("--host-resolver-rules=" + ", ".join(f"MAP {m.split('=', 1)[0]} {m.split('=', 1)[1]}" for m in maps))
    if spki:
        flags.append(f"--ignore-certificate-errors-spki-list={spki}")
    requests: dict[str, Recorded] = {}
    order: list[str] = []

    def will_be_sent(e: dict[str, Any]) -> None:
        rid = e["requestId"]
        if rid not in requests:
            order.append(rid)
        # A redirect reuses the id: the final request wins (its response is the one recorded).
        requests[rid] = Recorded(url=e["request"]["url"], method=e["request"].get("method", "GET"), sent=e["timestamp"],
                                 wall=e.get("wallTime", time.time()), initiator=e.get("initiator") or {})

    def response(e: dict[str, Any]) -> None:
        r = requests.get(e["requestId"])
        if r is None:
            return
        resp = e["response"]
        r.status = int(resp.get("status", 0))
        r.headers = {str(k).lower(): str(v) for k, v in (resp.get("headers") or {}).items()}
        r.mime = resp.get("mimeType", "")
        r.remote = resp.get("remoteIPAddress")

    def finished(e: dict[str, Any]) -> None:
        if (r := requests.get(e["requestId"])) is not None:
            r.finished = e["timestamp"]

    def failed(e: dict[str, Any]) -> None:
        if (r := requests.get(e["requestId"])) is not None:
            r.error = e.get("errorText") or "failed"

    profile = str(scratch_dir("record-chromium"))
    try:
        async with async_playwright() as pw:
            context = await pw.chromium.launch_persistent_context(profile, executable_path=chromium, headless=True,
                                                                  args=flags)
            try:
                page = context.pages[0] if context.pages else await context.new_page()
                cdp = await context.new_cdp_session(page)
                for event, handler in [("Network.requestWillBeSent", will_be_sent), ("Network.responseReceived", response),
                                       ("Network.loadingFinished", finished), ("Network.loadingFailed", failed)]:
                    cdp.on(event, handler)
                await cdp.send("Network.enable", {"maxTotalBufferSize": 512 << 20, "maxResourceBufferSize": 256 << 20})
                await cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
                try:
                    await page.goto(url, wait_until="load", timeout=timeout_ms)
                except PlaywrightError as exc:
                    raise CorpusError(f"{url}: the page did not load: {str(exc).splitlines()[0]}") from None
                await asyncio.sleep(settle_s)  # requests a little after the load event belong to the page too
                navigation = await page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0]; return n ? n.toJSON() : {}; }")
                for rid in order:
                    r = requests[rid]
                    if r.finished is None or r.error or r.method != "GET" or not 200 <= r.status < 300:
                        continue
                    try:
                        got = await cdp.send("Network.getResponseBody", {"requestId": rid})
                    except PlaywrightError:
                        continue  # evicted or never buffered: the importer gives it a generated body
                    r.body = base64.b64decode(got["body"]) if got.get("base64Encoded") else got["body"].encode()
                version = context.browser.version if context.browser else None
            finally:
                await context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return Recording(url, [requests[rid] for rid in order], navigation, version)


def _iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).isoformat().replace("+00:00", "Z")


def _initiator(initiator: dict[str, Any]) -> dict[str, Any]:
    """Chromium's initiator for the importer: a script's own stack before the `url` DevTools
    gives it (which can be the document that ran the script)."""
    frames = ((initiator.get("stack") or {}).get("callFrames") or []) if isinstance(initiator, dict) else []
    if initiator.get("type") == "script" and any(isinstance(f, dict) and f.get("url") for f in frames):
        return {k: v for k, v in initiator.items() if k != "url"}
    return initiator


def as_har(rec: Recording) -> dict[str, Any]:
    """The recording as HAR 1.2 (enough of it for the importer): final responses, their sizes
    (recorded body lengths) and Chromium's initiators."""
    entries = []
    for r in rec.requests:
        if r.finished is None and r.error is None:
            continue
        size = len(r.body) if r.body is not None else 0
        headers = [{"name": k, "value": v} for k, v in r.headers.items() if k not in ("content-length",)]
        entries.append({
            "startedDateTime": _iso(r.wall), "time": max(0.0, ((r.finished or r.sent) - r.sent) * 1000.0),
            "request": {"method": r.method, "url": r.url},
            "response": {"status": r.status if r.error is None else 0, "headers": headers,
                         "content": {"size": size, "mimeType": r.mime or r.headers.get("content-type", "")}},
            "serverIPAddress": r.remote or "", "_initiator": _initiator(r.initiator),
        })
    return {"log": {"version": "1.2", "creator": {"name": "protolab corpus record", "version": "1"},
                    "entries": entries}}


def replayable_headers(headers: dict[str, str]) -> dict[str, str]:
    """The recorded response headers a manifest can carry and the lab should replay."""
    out = {}
    for name, value in headers.items():
        first = value.split("\n")[0].strip()  # DevTools joins repeated headers with newlines
        if name in FORBIDDEN_HEADERS or name in NOT_REPLAYED or name.startswith(":") or not valid_header_value(first):
            continue
        out[name] = first
    return out


@dataclass
class RecordResult:
    imported: HarImport
    manifest_file: Path
    record_file: Path
    bodies: int
    body_bytes: int


def write_recording(rec: Recording, out: Path, name: str, network: str, seed: int = 1) -> RecordResult:
    """Manifest, bodies and the recording's description under `out` (nothing written on error)."""
    imported = import_har(as_har(rec), rec.url, name, seed, network)
    by_key: dict[tuple[str, str], Recorded] = {}
    for r in rec.requests:
        parts = urlsplit(r.url)
        if parts.hostname:
            by_key.setdefault((manifest_host(parts.hostname)[0], target_of(parts.path, parts.query)), r)
    bodies_dir = f"{name}.bodies"
    files: dict[str, bytes] = {}
    for obj in imported.manifest["objects"]:
        r = by_key.get((obj["origin"], obj["path"]))
        if r is None:
            continue
        headers = replayable_headers(r.headers)
        if headers:
            obj["headers"] = headers
        if r.body:
            if len(r.body) != obj["size"]:
                imported.warnings.append(f"{obj['origin']}{obj['path']}: recorded body of {len(r.body)} bytes, "
                                         f"size {obj['size']}: not replayed")
                continue
            digest = hashlib.sha256(r.body).hexdigest()
            obj["body"] = f"{bodies_dir}/{digest}"
            files[digest] = r.body
        else:
            imported.warnings.append(f"{obj['origin']}{obj['path']}: no recorded body (empty, or Chromium kept "
                                     "none): generated bytes are served")
    description = {
        "schema": "protolab.recording", "schema_version": RECORD_SCHEMA_VERSION, "url": rec.url,
        "recorded": datetime.now(UTC).isoformat(), "chromium_version": rec.chromium_version,
        "plt_ms": rec.navigation.get("loadEventEnd"), "navigation": rec.navigation,
        "requests": len(rec.requests), "objects": imported.kept, "skipped": dict(imported.skipped),
        "bodies": len(files), "body_bytes": sum(len(b) for b in files.values()), "warnings": imported.warnings,
    }
    staging = Path(tempfile.mkdtemp(prefix=".record-", dir=out))
    try:
        (staging / bodies_dir).mkdir()
        for digest, body in files.items():
            (staging / bodies_dir / digest).write_bytes(body)
        staged_manifest = staging / f"{name}.json"
        staged_manifest.write_text(json.dumps(imported.manifest, indent=1) + "\n")
        # Checked with its headers and bodies in place, before anything is moved into `out`.
        (error,) = check_manifest_files([staged_manifest], {str(staged_manifest): str(out / f"{name}.json")})
        if error is not None:
            raise error
        (staging / f"{name}.record.json").write_text(json.dumps(description, indent=1) + "\n")
        target_bodies = out / bodies_dir
        if target_bodies.exists():
            shutil.rmtree(target_bodies)
        (staging / bodies_dir).rename(target_bodies)
        (staging / f"{name}.record.json").replace(out / f"{name}.record.json")
        (staging / f"{name}.json").replace(out / f"{name}.json")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return RecordResult(imported, out / f"{name}.json", out / f"{name}.record.json", len(files),
                        sum(len(b) for b in files.values()))


def record(url: str, out: Path, name: str, *, maps: list[str], spki: str | None = None, network: str = "10.98.0.0/16",
           timeout_s: float = 60.0, settle_s: float = 1.0, chromium: str = "/usr/bin/chromium") -> RecordResult:
    """Record `url` into `out/<name>.json`, `out/<name>.bodies/` and `out/<name>.record.json`."""
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise CorpusError(f"{url}: not an http(s) URL")
    for m in maps:
        if "=" not in m or not m.split("=", 1)[0] or not m.split("=", 1)[1]:
            raise CorpusError(f"--map {m}: expected HOST=ADDRESS")
    if not Path(chromium).exists():
        raise CorpusError(f"--chromium {chromium}: no such file (Debian package chromium)")
    out.mkdir(parents=True, exist_ok=True)
    rec = asyncio.run(_record(url, maps, spki, int(timeout_s * 1000), settle_s, chromium))
    if not rec.requests:
        raise CorpusError(f"{url}: Chromium made no request")
    return write_recording(rec, out, name, network)
