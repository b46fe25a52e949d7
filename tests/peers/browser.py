"""Headless Chromium (Debian's /usr/bin/chromium) driven by Playwright, run inside a lab
namespace by tests/test_peers.py:

    ip netns exec NS python tests/peers/browser.py --proto h2 --spki SPKI --map HOST=ADDR ... \
        --root https://www.x.test/ --fetch https://static.x.test/img/1.jpg ...

Opens the root document, then fetches every other URL from a script in the page (CORS: the
manifest gives those objects `access-control-allow-origin: *` and `timing-allow-origin: *`) and
reads each body to the end. Prints one JSON object: per URL the HTTP status, the body length
read by the page, the protocol Chromium's network stack reports (CDP `Network.responseReceived`
`response.protocol`) and the Resource Timing `nextHopProtocol`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
from typing import Any

from playwright.async_api import async_playwright

CDP_EVENTS_WITHIN_S = 10.0

FETCH_ALL = """
async (urls) => {
  const out = {};
  await Promise.all(urls.map(async (u) => {
    try {
      const r = await fetch(u, {cache: 'no-store'});
      const b = await r.arrayBuffer();
      out[u] = {status: r.status, bytes: b.byteLength};
    } catch (e) {
      out[u] = {status: 0, bytes: 0, error: String(e)};
    }
  }));
  const nav = performance.getEntriesByType('navigation')[0];
  const timing = {};
  if (nav) timing[nav.name] = nav.nextHopProtocol;
  for (const e of performance.getEntriesByType('resource')) timing[e.name] = e.nextHopProtocol;
  return {fetched: out, timing: timing};
}
"""


def chromium_args(proto: str, spki: str, maps: list[str]) -> list[str]:
    rules = ", ".join(f"MAP {m.split('=')[0]} {m.split('=')[1]}" for m in maps)
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
            f"--host-resolver-rules={rules}", f"--ignore-certificate-errors-spki-list={spki}"]
    if proto == "h1":
        args.append("--disable-http2")
        args.append("--disable-quic")
    elif proto == "h2":
        args.append("--disable-quic")
    elif proto == "h3":
        hosts = ",".join(f"{m.split('=')[0]}:443" for m in maps)
        args += ["--enable-quic", f"--origin-to-force-quic-on={hosts}"]
    return args


async def run(a: argparse.Namespace) -> dict[str, Any]:
    protocols: dict[str, str] = {}
    statuses: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="pl-r3-chromium-") as profile:
        async with async_playwright() as pw:
            context = await pw.chromium.launch_persistent_context(
                profile, executable_path=a.chromium, headless=True,
                args=chromium_args(a.proto, a.spki, a.map), ignore_https_errors=False)
            page = context.pages[0] if context.pages else await context.new_page()
            cdp = await context.new_cdp_session(page)
            await cdp.send("Network.enable")
            await cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})

            expected = {a.root, *a.fetch}
            every_response = asyncio.Event()

            def on_response(event: dict[str, Any]) -> None:
                r = event["response"]
                protocols[r["url"]] = r.get("protocol", "")
                statuses[r["url"]] = r.get("status", 0)
                if expected <= protocols.keys():
                    every_response.set()

            cdp.on("Network.responseReceived", on_response)
            nav = await page.goto(a.root, wait_until="load", timeout=30_000)
            root_status = nav.status if nav else 0
            root_bytes = len(await nav.body()) if nav else 0
            result = await page.evaluate(FETCH_ALL, a.fetch)
            # CDP events may trail the page's own view: wait for one per URL (a URL that failed
            # has none; the caller sees its protocol missing).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(every_response.wait(), CDP_EVENTS_WITHIN_S)
            await context.close()
    objects = {a.root: {"status": root_status, "bytes": root_bytes}}
    objects.update(result["fetched"])
    for url, o in objects.items():
        o["protocol"] = protocols.get(url, "")
        o["next_hop_protocol"] = result["timing"].get(url, "")
    return {"proto": a.proto, "objects": objects}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--proto", choices=["h1", "h2", "h3"], required=True)
    p.add_argument("--spki", required=True)
    p.add_argument("--map", action="append", default=[], help="HOST=ADDR")
    p.add_argument("--root", required=True)
    p.add_argument("--fetch", action="append", default=[])
    p.add_argument("--chromium", default="/usr/bin/chromium")
    a = p.parse_args()
    print(json.dumps(asyncio.run(run(a))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
