"""The live service end to end with a real certificate and a real browser (issue 23, docs/live.md
"Run it on a server", "Certificates"): in a namespace with Debian's `pebble` test CA (the
fixture of `test_live_acme.py`), `protolab serve-live` obtains its 17 certificates over ACME
HTTP-01 and serves the speed-test page; headless Chromium loads it and runs a test over HTTP/3
(the page's Navigation and Resource Timing `nextHopProtocol`, DevTools per origin, the server's
qlogs), which the coordinator stores.

Chromium trusts pebble's root through a throwaway NSS database in a `$HOME` of this run only,
not `--ignore-certificate-errors-spki-list`: the pin would waive every certificate error
(wrong name, missing intermediate, expiry), while the NSS root makes Chromium verify the chain
the service serves as a user's browser verifies a public CA's. QUIC is forced for the site's
origins: Chromium refuses QUIC found through `Alt-Svc` when the chain ends at a root the user
installed rather than one of its root store (docs/live.md, "Certificates"). Needs root, pebble,
certutil, Chromium and a protolab-net with `--cert-dir`; about 50 s, most of it the 17 ACME
orders (the acme library polls each once a second)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from test_live_acme import HOST, Pebble, _binary_has_cert_dir, _inside, _pebble_root, _wait_for_pebble, pebble

from protolab.live.page import load_hostnames

CHROMIUM = Path("/usr/bin/chromium")
COORDINATOR = "http://127.0.0.1:8090"
MAX_DURATION_S = 4
# The service obtains 17 certificates (the page's origin and 16 load origins) before it listens.
SERVICE_READY_S = 120.0

__all__ = ["pebble"]  # the fixture, imported for pytest

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(shutil.which("pebble") is None, reason="Debian's pebble is not installed (make setup)"),
    pytest.mark.skipif(shutil.which("certutil") is None, reason="certutil (libnss3-tools) is not installed"),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
    pytest.mark.skipif(not _binary_has_cert_dir(), reason="protolab-net without --cert-dir: rebuild it"),
]


def _nss_home(home: Path, root_pem: Path) -> None:
    """A `$HOME` whose NSS database (Chromium's trust store on Linux) trusts `root_pem` for TLS
    servers: for this run only, nothing of the machine's is touched."""
    nssdb = home / ".pki" / "nssdb"
    nssdb.mkdir(parents=True)
    subprocess.run(["certutil", "-N", "-d", f"sql:{nssdb}", "--empty-password"], check=True, capture_output=True)
    subprocess.run(["certutil", "-A", "-d", f"sql:{nssdb}", "-n", "pebble test root", "-t", "C,,", "-i", str(root_pem)],
                   check=True, capture_output=True)


# -- run inside the namespace --------------------------------------------------------------------


def serve_page_to_chromium(work: str, directory_url: str, tls_cert: str) -> dict[str, Any]:
    """`protolab serve-live` with the speed-test site and certificates from pebble (the
    command of "Run it on a server"); once it listens, the page in Chromium with the
    coordinator until it has uploaded its result; then SIGTERM, as a process manager stops it."""
    from awaiting import await_line

    from protolab.lab.binary import find_binary
    from protolab.live.page import page_query, resolver_maps

    _wait_for_pebble(directory_url, tls_cert)
    base = Path(work)
    service = subprocess.Popen(
        [sys.executable, "-m", "protolab", "serve-live", "--listen", COORDINATOR.removeprefix("http://"),
         "--data", str(base / "data"), "--speedtest-host", HOST, "--speedtest-address", "127.0.0.1",
         "--acme-directory", directory_url, "--acme-ca-bundle", tls_cert, "--protolab-net", str(find_binary())],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    out = base / "page.json"
    try:
        announced = f"protolab serve-live: listening on {COORDINATOR}"
        await_line(service, lambda line: line if line.startswith(announced) else None, stream="stderr",
                   what=f"'{announced}'", within=SERVICE_READY_S)
        root = base / "pebble-root.pem"
        root.write_text(_pebble_root(tls_cert))
        _nss_home(base / "home", root)
        # The page at the query the service serves it at; the test's length in the fragment.
        url = f"https://{HOST}/?{page_query(coordinator=COORDINATOR)}#max_duration_s={MAX_DURATION_S}"
        argv = [sys.executable, "-m", "protolab.live.page.drive", "--url", url, "--mode", "h3",
                *(arg for m in resolver_maps(HOST, "127.0.0.1") for arg in ("--map", m)),
                "--out", str(out), "--timeout-s", "60"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                              env=dict(os.environ, HOME=str(base / "home")))
    finally:
        service.send_signal(signal.SIGTERM)
        try:
            stopped = service.wait(30)
        except subprocess.TimeoutExpired:
            service.kill()  # ours, by its handle
            stopped = service.wait()
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"driver exited with {done.returncode}: {done.stderr[-3000:]}")
    obtained = sorted(p.name.removesuffix(".pem") for p in (base / "data" / "acme" / "certs").glob("*.pem")
                      if not p.name.endswith(".key.pem"))
    return {"obtained": obtained, "page": json.loads(out.read_text()), "exit_status": stopped}


# -- the test ------------------------------------------------------------------------------------


def test_chromium_runs_the_speed_test_over_h3_with_the_acme_certificate(pebble: Pebble) -> None:
    out: dict[str, Any] = _inside(pebble, "serve_page_to_chromium", timeout_s=180, module="test_live_chromium_acme")
    page = out["page"]
    (pebble.work / "page-run.json").write_text(json.dumps(page, indent=1))
    hostnames = [HOST, *load_hostnames(HOST)]
    assert out["obtained"] == sorted(hostnames)  # one certificate per origin, from pebble over HTTP-01
    assert out["exit_status"] == 0  # stopped cleanly by SIGTERM
    # Done: Chromium verified each origin's chain up to pebble's root (no pin, no ignored errors).
    assert page["state"] == "done", (page["error"], page["console"][-20:])
    result = page["result"]
    # HTTP/3, as the page saw it: the navigation's nextHopProtocol, and every measurement
    # request's (Resource Timing; the server sends Timing-Allow-Origin) ...
    assert result["page_protocol"] == "h3" and result["protocol"] == "h3"
    assert set(result["protocols"]) == {"h3"} and sum(result["protocols"].values()) >= 20, result["protocols"]
    assert result["load_origins"] == hostnames[1:]
    # ... and as DevTools saw it: every request to the site's origins (the page's and the load
    # origins it used), the coordinator's aside.
    site = {h: o for h, o in page["origins"].items() if h in hostnames}
    assert HOST in site and f"load1.{HOST}" in site, page["origins"]
    assert {p for o in site.values() for p in o["protocols"]} == {"h3"}, site
    download = result["directions"]["download"]
    assert download["capacity_bps"] > 0 and download["rpm"] is not None and download["probe_counts"]["failed"] == 0
    # Stored by the coordinator with the server's qlogs of the test, a QUIC connection's each:
    # the server's own record that the test ran over HTTP/3.
    token = result["token"]
    assert page["upload"] == {"ok": True, "coordinator": COORDINATOR, "token": token}, page["upload"]
    stored = pebble.work / "data" / "tests" / token
    assert json.loads((stored / "result.json").read_text()) == result
    meta = json.loads((stored / "meta.json").read_text())
    connections = {c for o in site.values() for c in o["connections"]}  # one per origin used
    assert meta["client"]["client"] == "browser" and len(meta["qlogs"]) >= len(connections), (meta["qlogs"], site)
    assert {q.name for q in (stored / "qlogs").glob("*.qlog")} == set(meta["qlogs"])
    with duckdb.connect(str(pebble.work / "data" / "live.duckdb"), read_only=True) as con:
        row = con.execute("SELECT client, schema, protocol, download_rpm, qlogs FROM live_tests WHERE token = ?",
                          [token]).fetchone()
    assert row == ("browser", "protolab.rpm.browser", "h3", pytest.approx(download["rpm"]), len(meta["qlogs"]))
