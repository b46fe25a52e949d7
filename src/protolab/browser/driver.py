"""One page load (cold, or warm with --warm) in headless Chromium (Debian's), run inside the client namespace by the
runner (docs/browser.md):

    python -m protolab.browser.driver --url https://www.x.test/ --mode h2 --spki SPKI \\
        --map www.x.test=10.99.0.1 ... --manifest page.json --profile DIR --out result.json \\
        [--har page.har] [--timeout-ms 60000] [--warm]

Chromium gets a fresh profile (`--profile`, created by the caller and removed by it), its cache
disabled, DNS replaced by `--host-resolver-rules` and our CA trusted by SPKI; the protocol is
forced per mode. The result has the page-load engine's shape (docs/load.md): PLT from
Navigation Timing (`loadEventEnd` since navigation start), one object per response seen by
the DevTools protocol with its timing and connection, one connection per DevTools
`connectionId`, annotated from Chromium's NetLog (TLS session resumed, QUIC 0-RTT accepted).
A warm load (`--warm`) loads the page once first, closes every connection (net-internals'
"Flush socket pools") and measures a second load, which resumes the TLS sessions and sends
QUIC 0-RTT; the HTTP cache is off for both. Exit status: 0 with a result (also a failed or timed-out load), 2 when the load
could not be attempted (bad arguments, no Chromium).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from protolab.browser.modes import chromium_flags, chromium_modes
from protolab.browser.netlog import annotate, session_facts
from protolab.results.generated.load_result import LoadResult

# The load result's version (schemas/load-result.json): the same document as the engine's.
RESULT_SCHEMA_VERSION = 2
CDP_PROTOCOL = {"http/1.1": "h1", "h2": "h2", "h3": "h3"}


class Recorder:
    """What the DevTools protocol says about every request of the page."""

    def __init__(self) -> None:
        self.requests: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []

    def _entry(self, request_id: str) -> dict[str, Any]:
        if request_id not in self.requests:
            self.requests[request_id] = {"bytes": 0}
            self.order.append(request_id)
        return self.requests[request_id]

    def will_be_sent(self, e: dict[str, Any]) -> None:
        r = self._entry(e["requestId"])
        r.setdefault("url", e["request"]["url"])
        r.setdefault("sent", e["timestamp"])
        r.setdefault("wall", e.get("wallTime"))
        initiator = e.get("initiator") or {}
        r.setdefault("initiator", initiator.get("url") or (initiator.get("stack") or {}).get("callFrames", [{}])[0].get("url"))

    def response(self, e: dict[str, Any]) -> None:
        r = self._entry(e["requestId"])
        resp = e["response"]
        r["url"] = resp.get("url", r.get("url"))
        r["status"] = resp.get("status")
        r["protocol"] = resp.get("protocol", "")
        r["connection"] = resp.get("connectionId")
        r["reused"] = resp.get("connectionReused")
        r["remote"] = f"{resp.get('remoteIPAddress', '')}:{resp.get('remotePort', '')}"
        r["timing"] = resp.get("timing") or {}

    def data(self, e: dict[str, Any]) -> None:
        self._entry(e["requestId"])["bytes"] += int(e.get("dataLength", 0))

    def finished(self, e: dict[str, Any]) -> None:
        self._entry(e["requestId"])["finished"] = e["timestamp"]

    def failed(self, e: dict[str, Any]) -> None:
        r = self._entry(e["requestId"])
        r["error"] = e.get("errorText") or "failed"
        r["finished_failed"] = e["timestamp"]


def _ms(t: float | None, t0: float) -> float | None:
    return None if t is None else round((t - t0) * 1000.0, 3)


Rows = list[dict[str, Any]]


def _objects_and_connections(rec: Recorder, manifest: dict[str, Any], mode: str) -> tuple[Rows, Rows, Rows]:
    """The engine's object and connection rows from the recorded requests, and the requests
    of URLs the manifest does not have; times in ms since the root request was sent."""
    ids = [i for i in rec.order if "url" in rec.requests[i] and not rec.requests[i]["url"].startswith("data:")]
    if not ids:
        return [], [], []
    t0 = min(rec.requests[i]["sent"] for i in ids)
    sizes = {(o["origin"], o["path"]): o for o in manifest.get("objects", [])}
    objects: list[dict[str, Any]] = []
    extra: list[dict[str, Any]] = []
    connections: dict[Any, dict[str, Any]] = {}
    for i in ids:
        r = rec.requests[i]
        u = urlsplit(r["url"])
        path = u.path + (f"?{u.query}" if u.query else "")
        known = sizes.get((u.hostname or "", path))
        if known is None:  # e.g. the /favicon.ico Chromium asks for by itself
            extra.append({"url": r["url"], "status": r.get("status"), "bytes": r["bytes"],
                          "started_ms": _ms(r["sent"], t0), "error": r.get("error")})
            continue
        timing = r.get("timing") or {}
        start = timing.get("requestTime")
        send = start + timing["sendStart"] / 1000.0 if start is not None and "sendStart" in timing else r["sent"]
        head = start + timing["receiveHeadersEnd"] / 1000.0 if start is not None and "receiveHeadersEnd" in timing else None
        conn_key = (r.get("connection"), r.get("remote"))
        objects.append({
            "origin": u.hostname, "path": path,
            "parent": known.get("parent"), "delay_ms": known.get("delay_ms", 0), "queue_position": None,
            "connection": None if r.get("connection") is None else int(r["connection"]),
            "status": r.get("status"), "expected_bytes": known["size"], "bytes": r["bytes"],
            "discovered_ms": _ms(r["sent"], t0), "queued_ms": _ms(r["sent"], t0), "started_ms": _ms(send, t0),
            "first_byte_ms": _ms(head, t0), "finished_ms": _ms(r.get("finished"), t0),
            "error": r.get("error"),
        })
        if r.get("connection") is None:
            continue
        c = connections.get(conn_key)
        if c is None:
            protocol = CDP_PROTOCOL.get(r.get("protocol", ""), r.get("protocol"))
            if protocol == "h1" and mode == "h1c":
                protocol = "h1c"
            handshake = None
            if start is not None and timing.get("connectStart", -1) >= 0 and timing.get("connectEnd", -1) >= 0:
                handshake = round(timing["connectEnd"] - timing["connectStart"], 3)
            connect_start = start + timing["connectStart"] / 1000.0 if handshake is not None else None
            c = connections[conn_key] = {
                "id": int(r["connection"]), "origin": u.hostname, "protocol": protocol,
                "transport": "quic" if protocol == "h3" else ("mptcp" if mode == "h2-mptcp" else "tcp"),
                "local": None, "remote": r.get("remote"),
                "connect_start_ms": _ms(connect_start, t0), "tcp_connect_ms": None, "handshake_ms": handshake,
                "requests": 0, "bytes": 0, "subflows": None, "subflow_details": None, "error": None, "conn_id": None,
                "samples_file": None, "qlog_file": None, "resumed": None, "zero_rtt": None,
            }
        c["requests"] += 1
        c["bytes"] += r["bytes"]
    return objects, list(connections.values()), extra


async def _prime(context: Any, page: Any, a: argparse.Namespace) -> None:
    """A warm load's first load: the page once, then every connection closed (net-internals'
    "Flush socket pools", which closes HTTP/1.1, HTTP/2 and QUIC sessions alike) while the TLS
    session cache and the QUIC 0-RTT state stay, so the measured load resumes them."""
    await page.goto(a.url, wait_until="load", timeout=a.timeout_ms)
    internals = await context.new_page()
    try:
        await internals.goto("chrome://net-internals/#sockets", timeout=10_000)
        await internals.click("#sockets-view-flush-button", timeout=10_000)
        await asyncio.sleep(0.2)
    finally:
        await internals.close()


async def load(a: argparse.Namespace) -> LoadResult:
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import TimeoutError as PlaywrightTimeout
    from playwright.async_api import async_playwright

    manifest = json.loads(Path(a.manifest).read_text())
    rec = Recorder()
    config = _config(a, manifest.get("name"))
    status, error, plt_ms, navigation = "ok", None, None, {}
    start_unix_ns = time.time_ns()
    # The NetLog tells which TLS sessions were resumed and whether QUIC 0-RTT was accepted (not
    # in the DevTools protocol); it is written for every load, cold or warm, so both carry the
    # same (small) cost. It lives in the profile, which the caller removes.
    netlog = Path(a.profile) / "netlog.json"
    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            a.profile, executable_path=a.chromium, headless=True,
            args=[*chromium_flags(a.mode, a.spki, a.map), f"--log-net-log={netlog}", "--net-log-capture-mode=Default"],
            record_har_path=a.har, record_har_content="omit")
        try:
            config["chromium_version"] = context.browser.version if context.browser else None
            page = context.pages[0] if context.pages else await context.new_page()
            cdp = await context.new_cdp_session(page)
            for event, handler in [("Network.requestWillBeSent", rec.will_be_sent), ("Network.responseReceived", rec.response),
                                   ("Network.dataReceived", rec.data), ("Network.loadingFinished", rec.finished),
                                   ("Network.loadingFailed", rec.failed)]:
                cdp.on(event, handler)
            await cdp.send("Network.enable")
            await cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
            if a.warm:
                await _prime(context, page, a)
                rec.requests.clear()
                rec.order.clear()
            start_unix_ns = time.time_ns()
            try:
                await page.goto(a.url, wait_until="load", timeout=a.timeout_ms)
                navigation = await page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0]; return n ? n.toJSON() : {}; }")
                plt_ms = navigation.get("loadEventEnd")
                if not plt_ms:
                    status, error = "failed", "no loadEventEnd in Navigation Timing"
            except PlaywrightTimeout:
                status, error = "timeout", f"no load event within {a.timeout_ms} ms"
            except PlaywrightError as exc:
                status, error = "failed", str(exc).splitlines()[0]
            await asyncio.sleep(0.2)  # the last DevTools events
        finally:
            await context.close()  # writes the HAR
    try:
        facts = session_facts(json.loads(netlog.read_text()))
    except (OSError, ValueError):
        facts = {}  # no NetLog (the browser died): the connections stay without these facts
    outcome = Outcome(status, error, plt_ms, navigation, start_unix_ns)
    return result_document(rec, manifest, config, outcome, facts)


@dataclass
class Outcome:
    """How the navigation ended: status, why not ok, Navigation Timing's PLT and entry, start."""

    status: str
    error: str | None
    plt_ms: float | None
    navigation: dict[str, Any]
    start_unix_ns: int


def result_document(rec: Recorder, manifest: dict[str, Any], config: dict[str, Any], outcome: Outcome,
                    facts: dict[int, Any]) -> LoadResult:
    """The load result (schemas/load-result.json) of what the browser did: the engine's objects
    and connections, Chromium's configuration and its extras in `browser`. Pure."""
    objects, connections, extra = _objects_and_connections(rec, manifest, config["mode"])
    annotate(connections, facts)
    missing = len(manifest.get("objects", [])) - len({(o["origin"], o["path"]) for o in objects})
    status, error = outcome.status, outcome.error
    if status == "ok":
        root = objects[0] if objects else None
        if root is None or root.get("status") != 200:
            status, error = "failed", f"root document: status {root.get('status') if root else None}"
    return LoadResult.model_validate({
        "schema_version": RESULT_SCHEMA_VERSION, "kind": "page_load", "status": status, "error": error,
        "plt_ms": round(outcome.plt_ms, 3) if outcome.plt_ms else None, "bytes": sum(o["bytes"] for o in objects),
        "start_unix_ns": outcome.start_unix_ns, "config": config, "objects": objects, "connections": connections,
        "browser": {"navigation": {k: v for k, v in outcome.navigation.items() if isinstance(v, int | float | str)},
                    "not_requested": missing, "extra_requests": extra},
    })


def _config(a: argparse.Namespace, page: str | None) -> dict[str, Any]:
    """The load's `config` (schemas/load-result.json, `client` = chromium)."""
    return {"client": "chromium", "manifest": a.manifest, "page": page, "mode": a.mode, "url": a.url, "warm": a.warm,
            "timeout_ms": a.timeout_ms, "chromium_version": None}


def _failed(a: argparse.Namespace, why: str) -> LoadResult:
    """The result of a load Chromium could not attempt (it did not start, or died)."""
    return LoadResult.model_validate({
        "schema_version": RESULT_SCHEMA_VERSION, "kind": "page_load", "status": "failed", "error": why,
        "plt_ms": None, "bytes": 0, "start_unix_ns": time.time_ns(), "config": _config(a, None), "objects": [],
        "connections": [], "browser": {"navigation": {}, "not_requested": 0, "extra_requests": []}})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="protolab.browser.driver", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="the page's root URL")
    p.add_argument("--mode", choices=sorted(chromium_modes()), required=True)
    p.add_argument("--spki", required=True, help="SPKI hash(es) of the lab's certificates, comma-separated")
    p.add_argument("--map", action="append", default=[], help="HOST=ADDR (host resolver rule)")
    p.add_argument("--manifest", required=True, help="the page's manifest (expected sizes and parents)")
    p.add_argument("--profile", required=True, help="empty profile directory (the caller removes it)")
    p.add_argument("--out", required=True)
    p.add_argument("--har", default=None, help="write the load's HAR here")
    p.add_argument("--timeout-ms", type=int, default=60_000)
    p.add_argument("--warm", action="store_true", help="load once, close every connection, then measure a second load")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    a = p.parse_args(argv)
    if not Path(a.chromium).exists():
        print(f"--chromium {a.chromium}: no such file (Debian package chromium)", file=sys.stderr)
        return 2
    try:
        result = asyncio.run(load(a))
    except Exception as exc:  # noqa: BLE001 - the browser did not start or died: a failed load, with why
        result = _failed(a, f"chromium: {exc}".splitlines()[0])
    tmp = Path(a.out + ".tmp")
    tmp.write_text(result.model_dump_json(indent=1, by_alias=True))
    tmp.replace(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
