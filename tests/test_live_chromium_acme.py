"""The live service end to end with a real certificate and a real browser (issue 23, docs/live.md
"Run it on a server"): in a namespace with Debian's `pebble` test CA (the fixture of
`test_live_acme.py`), the service obtains its certificates over ACME HTTP-01, serves the
speed-test page, and headless Chromium loads it and runs a test over HTTP/3, which the
coordinator stores.

Chromium trusts pebble's root through a throwaway NSS database in a `$HOME` of this run only,
not `--ignore-certificate-errors-spki-list`: the pin would waive every certificate error
(wrong name, missing intermediate, expiry), while the NSS root makes Chromium verify the chain
the service serves as a user's browser verifies a public CA's. QUIC is enabled but not forced:
the browser finds HTTP/3 through the server's `Alt-Svc`, as a user's does. Needs root, pebble,
certutil, Chromium and a protolab-net with `--cert-dir`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from test_live_acme import HOST, Pebble, _binary_has_cert_dir, _inside, _pebble_root, _wait_for_pebble, pebble

CHROMIUM = Path("/usr/bin/chromium")
COORDINATOR = "http://127.0.0.1:8090"
LOAD_ORIGINS = 2
MAX_DURATION_S = 4

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
    """The service as serve-live wires it (certificates first, then the coordinator's API and
    the measurement server), two load origins to keep the ACME orders few; then the page in
    Chromium, with the coordinator, until it has uploaded its result."""
    from protolab.lab.binary import find_binary
    from protolab.live.acme import AcmeSettings
    from protolab.live.coordinator import Coordinator
    from protolab.live.page import page_query, resolver_maps
    from protolab.live.server import serve
    from protolab.live.service import Certificates, MeasurementServer, SpeedtestSite

    _wait_for_pebble(directory_url, tls_cert)
    base = Path(work)
    data = base / "data"
    site = SpeedtestSite(HOST, "127.0.0.1", COORDINATOR, load_origins=LOAD_ORIGINS)
    certificates = Certificates(AcmeSettings(directory_url, None, Path(tls_cert)), data, site, log=lambda line: None)
    obtained = certificates.ensure()
    root = base / "pebble-root.pem"
    root.write_text(_pebble_root(tls_cert))
    _nss_home(base / "home", root)
    measurement = MeasurementServer(find_binary(), data, site, cert_dir=certificates.cert_dir)
    measurement.qlog_dir.mkdir(parents=True, exist_ok=True)
    coordinator = Coordinator(data, qlog_dir=measurement.qlog_dir, log=lambda line: None)
    api = serve(coordinator, "127.0.0.1", 8090, log=lambda line: None)
    out = base / "page.json"
    # The page at the query the service serves it at; the test's parameters in the fragment.
    url = (f"https://{HOST}/?{page_query(coordinator=COORDINATOR)}"
           f"#load_origins={LOAD_ORIGINS}&max_duration_s={MAX_DURATION_S}")
    try:
        measurement.start()
        argv = [sys.executable, "-m", "protolab.live.page.drive", "--url", url, "--mode", "h3",
                *(arg for m in resolver_maps(HOST, "127.0.0.1", LOAD_ORIGINS) for arg in ("--map", m)),
                "--out", str(out), "--timeout-s", "60"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                              env=dict(os.environ, HOME=str(base / "home")))
    finally:
        measurement.stop()
        api.close()
        coordinator.close()
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"driver exited with {done.returncode}: {done.stderr[-3000:]}")
    return {"obtained": obtained, "page": json.loads(out.read_text())}


# -- the test ------------------------------------------------------------------------------------


def test_chromium_runs_the_speed_test_over_h3_with_the_acme_certificate(pebble: Pebble) -> None:
    out: dict[str, Any] = _inside(pebble, "serve_page_to_chromium", timeout_s=180, module="test_live_chromium_acme")
    page = out["page"]
    (pebble.work / "page-run.json").write_text(json.dumps(page, indent=1))
    hostnames = [HOST, *(f"load{i}.{HOST}" for i in range(1, LOAD_ORIGINS + 1))]
    assert out["obtained"] == hostnames  # one certificate per origin, from pebble over HTTP-01
    # Done: Chromium verified each origin's chain up to pebble's root (no pin, no ignored errors).
    assert page["state"] == "done", (page["error"], page["console"][-20:])
    result = page["result"]
    # HTTP/3, as the page saw it: the navigation's nextHopProtocol, and every measurement
    # request's (Resource Timing; the server sends Timing-Allow-Origin) ...
    assert result["page_protocol"] == "h3" and result["protocol"] == "h3"
    assert set(result["protocols"]) == {"h3"} and sum(result["protocols"].values()) >= 20, result["protocols"]
    assert result["load_origins"] == hostnames[1:]
    # ... and as DevTools saw it: every request to the site's origins, the coordinator's aside.
    site = {h: o for h, o in page["origins"].items() if h in hostnames}
    assert set(site) == set(hostnames), page["origins"]
    assert {p for o in site.values() for p in o["protocols"]} == {"h3"}, site
    download = result["directions"]["download"]
    assert download["capacity_bps"] > 0 and download["rpm"] is not None and download["probe_counts"]["failed"] == 0
    # Stored by the coordinator with the server's qlogs of the test (QUIC connections: the
    # server's own record that the test ran over HTTP/3).
    token = result["token"]
    assert page["upload"] == {"ok": True, "coordinator": COORDINATOR, "token": token}, page["upload"]
    stored = pebble.work / "data" / "tests" / token
    assert json.loads((stored / "result.json").read_text()) == result
    meta = json.loads((stored / "meta.json").read_text())
    assert meta["client"]["client"] == "browser" and len(meta["qlogs"]) >= len(hostnames), meta["qlogs"]
    assert {q.name for q in (stored / "qlogs").glob("*.qlog")} == set(meta["qlogs"])
    with duckdb.connect(str(pebble.work / "data" / "live.duckdb"), read_only=True) as con:
        row = con.execute("SELECT client, schema, protocol, download_rpm, qlogs FROM live_tests WHERE token = ?",
                          [token]).fetchone()
    assert row == ("browser", "protolab.rpm.browser", "h3", pytest.approx(download["rpm"]), len(meta["qlogs"]))
