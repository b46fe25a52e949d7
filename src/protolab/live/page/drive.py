"""Runs the speed-test page in headless Chromium (Debian's, through Playwright) and writes what it
measured; run inside a lab's client namespace (docs/live.md, "The speed-test page"):

    python -m protolab.live.page.drive --url 'https://speed.pl.test/?autostart=1' --mode h3 \\
        --spki SPKI --map speed.pl.test=10.77.1.1 --map load1.speed.pl.test=10.77.1.1 ... \\
        --out run.json [--screenshots DIR] \\
        [--secure-origin http://10.77.1.1:8090] [--timeout-s 120] [--netlog FILE]

The protocol is forced per mode and the lab's CA trusted by SPKI, as for page loads
(docs/browser.md); `--map` is given for the page's origin and each of its load origins
(`protolab.live.page.resolver_maps`). `--secure-origin` lets an https page reach a plain-http
coordinator (Chromium blocks such mixed content otherwise). The output: `state` (`done`,
`error` or `timeout`), `error`, `result` (the page's `window.speedtestResult`), `upload`
(`window.speedtestUpload`), `screenshots`, `chromium_version`, `console`, and `requests`: what
the DevTools protocol saw of every request (`host`, `path`, `protocol`, `connection`: the
DevTools `connectionId`, one per QUIC connection; `t_s`: when the page issued it; `wait_ms`:
from then until the browser sent it; `rtt_ms`: from then to the response's headers, whatever
the page could time), and `origins`: per host, requests, protocols and connections. Exit status 0 with an output file, 2 when the browser could not be
run at all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from protolab.browser.modes import chromium_flags, chromium_modes
from protolab.files import write_text_atomically

VIEWPORT = {"width": 1000, "height": 1000}
# The mid-test screenshot: once the download phase has run this many intervals.
PROGRESS_INTERVALS = 3
POLL_MS = 250
CDP_PROTOCOL = {"http/1.1": "h1", "h2": "h2", "h3": "h3"}


class Requests:
    """Every request as the DevTools protocol reports it: URL, protocol, connection, timing."""

    def __init__(self) -> None:
        self.by_id: dict[str, dict[str, Any]] = {}

    def will_be_sent(self, e: dict[str, Any]) -> None:
        self.by_id.setdefault(e["requestId"], {"url": e["request"]["url"], "sent": e["timestamp"]})

    def response(self, e: dict[str, Any]) -> None:
        r = self.by_id.setdefault(e["requestId"], {"url": e["response"].get("url"), "sent": e["timestamp"]})
        resp = e["response"]
        r["protocol"] = CDP_PROTOCOL.get(resp.get("protocol", ""), resp.get("protocol"))
        r["connection"] = resp.get("connectionId")
        r["status"] = resp.get("status")
        timing = resp.get("timing") or {}
        if timing.get("sendStart", -1) >= 0 and timing.get("receiveHeadersEnd", -1) >= 0:
            r["rtt_ms"] = round(timing["receiveHeadersEnd"] - timing["sendStart"], 3)
            if timing.get("requestTime") is not None:
                r["wait_ms"] = round((timing["requestTime"] - r["sent"]) * 1000 + timing["sendStart"], 3)

    def failed(self, e: dict[str, Any]) -> None:
        if e["requestId"] in self.by_id:
            self.by_id[e["requestId"]]["error"] = e.get("errorText") or "failed"

    def rows(self) -> list[dict[str, Any]]:
        if not self.by_id:
            return []
        t0 = min(r["sent"] for r in self.by_id.values())
        rows = []
        for r in sorted(self.by_id.values(), key=lambda r: r["sent"]):
            u = urlsplit(r["url"] or "")
            rows.append({"host": u.hostname, "path": u.path + (f"?{u.query}" if u.query else ""),
                         "protocol": r.get("protocol"), "connection": r.get("connection"), "status": r.get("status"),
                         "t_s": round(r["sent"] - t0, 4), "wait_ms": r.get("wait_ms"), "rtt_ms": r.get("rtt_ms"),
                         "error": r.get("error")})
        return rows


def by_origin(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per host: requests, protocols (with counts), connections (DevTools connection ids)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if not r["host"] or r["protocol"] is None:
            continue
        o = out.setdefault(r["host"], {"requests": 0, "protocols": {}, "connections": []})
        o["requests"] += 1
        o["protocols"][r["protocol"]] = o["protocols"].get(r["protocol"], 0) + 1
        if r["connection"] is not None and r["connection"] not in o["connections"]:
            o["connections"].append(r["connection"])
    return out


async def drive(a: argparse.Namespace) -> dict[str, Any]:
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import TimeoutError as PlaywrightTimeout
    from playwright.async_api import async_playwright

    flags = chromium_flags(a.mode, a.spki, a.map, force_quic=not a.alt_svc)
    if a.secure_origin:
        flags.append("--unsafely-treat-insecure-origin-as-secure=" + ",".join(a.secure_origin))
    if a.netlog:
        flags += [f"--log-net-log={a.netlog}", "--net-log-capture-mode=Default"]
    out: dict[str, Any] = {"state": None, "error": None, "result": None, "upload": None, "screenshots": {},
                           "url": a.url, "mode": a.mode, "console": []}
    shots = Path(a.screenshots) if a.screenshots else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=a.chromium, headless=True, args=flags)
        requests: Requests | None = None
        try:
            out["chromium_version"] = browser.version
            page = await browser.new_page(viewport=VIEWPORT)
            requests = Requests()
            cdp = await page.context.new_cdp_session(page)
            for event, handler in [("Network.requestWillBeSent", requests.will_be_sent),
                                   ("Network.responseReceived", requests.response),
                                   ("Network.loadingFailed", requests.failed)]:
                cdp.on(event, handler)
            await cdp.send("Network.enable")
            page.on("console", lambda m: out["console"].append(f"{m.type}: {m.text}"[:500]))
            page.on("pageerror", lambda e: out["console"].append(f"pageerror: {e}"[:500]))
            await page.goto(a.url, wait_until="load", timeout=30_000)
            if shots:
                try:
                    await page.wait_for_function(
                        "n => { const p = window.speedtestProgress || {}; return (p.phase === 'download' && p.intervals >= n)"
                        " || ['done', 'error'].includes(document.body.dataset.state); }",
                        arg=PROGRESS_INTERVALS, polling=POLL_MS, timeout=a.timeout_s * 1000)
                    target = shots / f"{a.prefix}progress.png"
                    await page.screenshot(path=str(target), full_page=True)
                    out["screenshots"]["progress"] = str(target)
                except PlaywrightTimeout:
                    pass
            remaining = max(1.0, a.timeout_s - (time.monotonic() - started))
            try:
                await page.wait_for_function("() => ['done', 'error'].includes(document.body.dataset.state)",
                                             polling=POLL_MS, timeout=remaining * 1000)
                out["state"] = await page.evaluate("() => document.body.dataset.state")
            except PlaywrightTimeout:
                out["state"] = "timeout"
                out["error"] = f"the page did not finish within {a.timeout_s:g} s"
            page_state = await page.evaluate(
                "() => ({result: window.speedtestResult || null, upload: window.speedtestUpload || null,"
                " error: window.speedtestError || null, progress: window.speedtestProgress || null})")
            out["result"], out["upload"], out["progress"] = page_state["result"], page_state["upload"], page_state["progress"]
            out["error"] = page_state["error"] or out["error"]
            if shots:
                target = shots / f"{a.prefix}result.png"
                await page.screenshot(path=str(target), full_page=True)
                out["screenshots"]["result"] = str(target)
        except PlaywrightError as exc:
            out["state"] = out["state"] or "error"
            out["error"] = out["error"] or f"chromium: {str(exc).splitlines()[0]}"
        finally:
            out["requests"] = requests.rows() if requests else []
            out["origins"] = by_origin(out["requests"])
            await browser.close()
    out["elapsed_s"] = round(time.monotonic() - started, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="protolab.live.page.drive", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="the page's URL (with ?autostart=1)")
    p.add_argument("--mode", choices=sorted(chromium_modes()), default="h3")
    p.add_argument("--spki", default="", help="SPKI hash(es) of the lab's certificates, comma-separated; "
                   "none: trust what the NSS db in $HOME trusts (e.g. an ACME test CA's root)")
    p.add_argument("--alt-svc", action="store_true",
                   help="with --mode h3: QUIC enabled, not forced; HTTP/3 where the server's Alt-Svc offers it (Chromium "
                        "then refuses QUIC to a certificate of a root the user installed: ERR_QUIC_CERT_ROOT_NOT_KNOWN)")
    p.add_argument("--map", action="append", default=[],
                   help="HOST=ADDR (host resolver rule; the page's origin and each load origin)")
    p.add_argument("--out", required=True)
    p.add_argument("--screenshots", default=None, help="directory for <prefix>progress.png and <prefix>result.png")
    p.add_argument("--prefix", default="speedtest-", help="screenshot file name prefix")
    p.add_argument("--secure-origin", action="append", default=[],
                   help="an http origin (the coordinator) the https page may call")
    p.add_argument("--timeout-s", type=float, default=120.0)
    p.add_argument("--netlog", default=None, help="write Chromium's NetLog here (diagnosis)")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    a = p.parse_args(argv)
    if not Path(a.chromium).exists():
        print(f"--chromium {a.chromium}: no such file (Debian package chromium)", file=sys.stderr)
        return 2
    try:
        out = asyncio.run(drive(a))
    except Exception as exc:  # noqa: BLE001 - the browser did not start: say why
        print(f"chromium: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    write_text_atomically(Path(a.out), json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
