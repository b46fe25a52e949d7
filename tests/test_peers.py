"""Our endpoints against real third-party peers, each test in its own namespace `pl-r3-<id>`
(lo up, origin addresses 10.99.0.1 and 10.99.0.2 on lo; docs/peers.md):

- our server (`protolab-net serve`) against headless Chromium over h1, h2 and h3 (Playwright
  drives Debian's /usr/bin/chromium; the protocol of every object is read from Chromium's network
  stack and from Resource Timing), curl over h1c, h1 and h2, and h2load over h2;
- our page-load engine (`protolab-net load`) against nginx (h1c, h1, h2) and caddy (h3), with
  the protocol of every request read from the servers' access logs.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from peers.helpers import (
    ADDRESSES,
    NET,
    REPO,
    STATIC,
    WWW,
    Netns,
    Served,
    curl_args,
    export_bodies,
    has_subcommand,
    load,
    manifest_urls,
    serve,
    small_page,
    start_caddy,
    start_nginx,
    workdir,
)

pytestmark = pytest.mark.lab

PYTHON = REPO / ".venv" / "bin" / "python"
BROWSER = Path(__file__).parent / "peers" / "browser.py"


def _need(*tools: str) -> None:
    if not NET.exists():
        pytest.skip(f"{NET} not built")
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip(f"{t} not installed (scripts/setup.sh installs it)")


@pytest.fixture
def site() -> Iterator[tuple[Netns, Path, dict[str, Any], Served]]:
    """A namespace running our server on the small two-origin page."""
    _need("curl")
    with workdir() as work, Netns() as ns:
        manifest = small_page(work / "page.json")
        served = serve(ns, [work / "page.json"], work / "tls")
        yield ns, work, manifest, served


# --- our server against real clients -------------------------------------------------------

CHROMIUM_PROTOCOL = {"h1": "http/1.1", "h2": "h2", "h3": "h3"}


def _chromium(ns: Netns, proto: str, spki: str, m: dict[str, Any]) -> dict[str, Any]:
    urls = [f"https://{o}{p}" for o, p, _ in manifest_urls(m)]
    argv: list[Any] = [PYTHON, BROWSER, "--proto", proto, "--spki", spki, "--root", urls[0]]
    for host, addr in ADDRESSES.items():
        argv += ["--map", f"{host}={addr}"]
    for u in urls[1:]:
        argv += ["--fetch", u]
    done = ns.run(argv, timeout=120)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("proto", ["h1", "h2", "h3"])
def test_chromium_loads_every_object_over_the_protocol(site: Any, proto: str) -> None:
    _need("/usr/bin/chromium")
    pytest.importorskip("playwright")
    ns, work, m, served = site
    spki = (work / "tls" / "spki.txt").read_text().strip()
    assert spki == served.ready.spki
    result = _chromium(ns, proto, spki, m)
    objects = result["objects"]
    want = CHROMIUM_PROTOCOL[proto]
    assert len(objects) == len(m["objects"])
    for origin, path, size in manifest_urls(m):
        o = objects[f"https://{origin}{path}"]
        assert o["status"] == 200, (origin, path, o)
        assert o["bytes"] == size, (origin, path, o)
        assert o["protocol"] == want, (origin, path, o)
        assert o["next_hop_protocol"] == want, (origin, path, o)


CURL_CASES = [
    ("h1c", ["--http1.1"], "http", "1.1"),
    ("h1", ["--http1.1"], "https", "1.1"),
    ("h2", ["--http2"], "https", "2"),
]


@pytest.mark.parametrize(("name", "flags", "scheme", "version"), CURL_CASES, ids=[c[0] for c in CURL_CASES])
def test_curl_fetches_every_object(site: Any, name: str, flags: list[str], scheme: str, version: str) -> None:
    ns, work, m, _ = site
    argv: list[Any] = ["curl", *curl_args(work / "tls"), *flags]
    urls = [f"{scheme}://{o}{p}" for o, p, _ in manifest_urls(m)]
    for u in urls:  # one curl, one connection per origin, reused
        argv += ["-o", "/dev/null", "-w", "%{url_effective} %{http_code} %{http_version} %{size_download} %{num_connects}\\n", u]
    lines = ns.run(argv).stdout.split("\n")
    got = {line.split()[0]: line.split()[1:] for line in lines if line.strip()}
    connects = 0
    for (origin, path, size), u in zip(manifest_urls(m), urls, strict=True):
        code, ver, n, nconn = got[u]
        assert (code, ver, int(n)) == ("200", version, size), u
        connects += int(nconn)
    assert connects == 2  # one per origin: the server keeps connections alive
    # curl 7.88 in Debian 12 has no HTTP/3: our h3 is checked with Chromium (and quinn in Rust).


def test_curl_sees_alt_svc_and_synthetic_endpoints(site: Any) -> None:
    ns, work, _, _ = site
    head = ns.run(["curl", *curl_args(work / "tls"), "--http2", "-sI", f"https://{WWW}/"]).stdout
    assert re.search(r'^alt-svc: h3=":443"', head, re.M | re.I), head
    out = ns.run(["curl", *curl_args(work / "tls"), "--http2", "-o", "/dev/null", "-w", "%{size_download}",
                  f"https://{STATIC}/bytes?n=12345678"]).stdout
    assert out == "12345678"


def _h2load(ns: Netns, url: str, addr: str, extra: list[str]) -> dict[str, int]:
    done = ns.run(["h2load", "-n", "1000", "-c", "4", "-m", "10", f"--connect-to={addr}:443", *extra, url], timeout=120)
    out = done.stdout
    req = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", out)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    proto = re.search(r"Application protocol: (\S+)", out)
    assert req and codes and proto, out
    keys = ["total", "started", "done", "succeeded", "failed", "errored", "timeout"]
    r = dict(zip(keys, map(int, req.groups()), strict=True))
    r["2xx"] = int(codes.group(1))
    r["protocol"] = proto.group(1)  # type: ignore[assignment]
    return r


@pytest.mark.parametrize("path", ["/site.css", "/img/5.jpg"])
def test_h2load_1000_requests_over_h2(site: Any, path: str) -> None:
    _need("h2load")
    ns, _, _, _ = site
    host = WWW if path == "/site.css" else STATIC
    r = _h2load(ns, f"https://{host}{path}", ADDRESSES[host], [])
    assert r["protocol"] == "h2"  # type: ignore[comparison-overlap]
    assert (r["succeeded"], r["failed"], r["errored"], r["timeout"], r["2xx"]) == (1000, 0, 0, 0, 1000), r


def test_h2load_1000_requests_over_h1(site: Any) -> None:
    _need("h2load")
    ns, _, _, _ = site
    r = _h2load(ns, f"https://{WWW}/app.js", ADDRESSES[WWW], ["--h1"])
    assert r["protocol"] == "http/1.1"  # type: ignore[comparison-overlap]
    assert (r["succeeded"], r["errored"], r["2xx"]) == (1000, 0, 1000), r


# --- our client against real servers -------------------------------------------------------

@pytest.fixture
def reference_site() -> Iterator[tuple[Netns, Path, dict[str, Any], Path]]:
    """A namespace with the small page's bodies exported from our server (which is stopped
    again) into a directory tree for nginx and caddy."""
    _need("curl")
    with workdir() as work, Netns() as ns:
        manifest = small_page(work / "page.json")
        served = serve(ns, [work / "page.json"], work / "tls")
        export_bodies(ns, manifest, work / "tls", work / "www")
        ns.stop(served.proc)
        yield ns, work, manifest, work / "www"


def _access_protocols(lines: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in lines:
        counts[p] = counts.get(p, 0) + 1
    return counts


def _nginx_log(work: Path) -> list[str]:
    path = work / "nginx" / "access.log"
    return [line.split()[-1] for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _caddy_log(work: Path) -> list[str]:
    protos = []
    for f in sorted((work / "caddy").glob("access-*.log")):
        for line in f.read_text().splitlines():
            if line.strip():
                protos.append(json.loads(line)["request"]["proto"])
    return protos


def test_nginx_serves_the_exported_page(reference_site: Any) -> None:
    """The reference setup itself: nginx serves the same bytes as our server, over h2."""
    _need("nginx")
    ns, work, m, root = reference_site
    start_nginx(ns, work / "nginx", root, work / "tls")
    for origin, path, size in manifest_urls(m):
        out = ns.run(["curl", *curl_args(work / "tls"), "--http2", "-o", "/dev/null", "-w", "%{http_code} %{http_version} %{size_download}",
                      f"https://{origin}{path}"]).stdout
        assert out == f"200 2 {size}", (origin, path)
    assert _access_protocols(_nginx_log(work)) == {"HTTP/2.0": len(m["objects"])}


def test_caddy_serves_the_exported_page_over_h3_to_chromium(reference_site: Any) -> None:
    """The reference setup itself: caddy speaks h3 to a real browser with our certificates."""
    _need("caddy", "/usr/bin/chromium")
    pytest.importorskip("playwright")
    ns, work, m, root = reference_site
    start_caddy(ns, work / "caddy", root, work / "tls")
    result = _chromium(ns, "h3", (work / "tls" / "spki.txt").read_text().strip(), m)
    for origin, path, size in manifest_urls(m):
        o = result["objects"][f"https://{origin}{path}"]
        assert (o["status"], o["protocol"]) == (200, "h3"), (origin, path, o)
        if path == "/":
            assert o["bytes"] == size
    assert _access_protocols(_caddy_log(work)).get("HTTP/3.0", 0) >= len(m["objects"])


LOAD_CASES = [("nginx", "h1c", "HTTP/1.1"), ("nginx", "h1", "HTTP/1.1"), ("nginx", "h2", "HTTP/2.0"),
              ("caddy", "h2", "HTTP/2.0"), ("caddy", "h3", "HTTP/3.0")]


@pytest.mark.parametrize(("server", "mode", "logged"), LOAD_CASES, ids=[f"{s}-{m}" for s, m, _ in LOAD_CASES])
def test_load_engine_against_reference_servers(reference_site: Any, server: str, mode: str, logged: str) -> None:
    if not has_subcommand("load"):
        pytest.skip("protolab-net load not built yet")
    _need(server)
    ns, work, m, root = reference_site
    if server == "nginx":
        start_nginx(ns, work / "nginx", root, work / "tls")
    else:
        start_caddy(ns, work / "caddy", root, work / "tls")
    result = load(ns, work / "page.json", mode, work / "tls" / "ca.pem", work / f"load-{mode}.json")
    assert result["status"] == "ok", (result.get("error"), result["_stderr"])
    assert result["_exit"] == 0
    assert len(result["objects"]) == len(m["objects"])
    sizes = {(o["origin"], o["path"]): o["bytes"] for o in result["objects"]}
    assert sizes == {(o, p): s for o, p, s in manifest_urls(m)}
    assert all(o["status"] == 200 for o in result["objects"])
    assert {c["protocol"] for c in result["connections"]} == {mode}
    per_origin: dict[str, int] = {}
    for c in result["connections"]:
        per_origin[c["origin"]] = per_origin.get(c["origin"], 0) + 1
    if mode in ("h2", "h3"):
        assert per_origin == {WWW: 1, STATIC: 1}
    else:
        assert all(1 <= n <= 6 for n in per_origin.values())
    logged_protocols = _nginx_log(work) if server == "nginx" else _caddy_log(work)
    assert _access_protocols(logged_protocols) == {logged: len(m["objects"])}
