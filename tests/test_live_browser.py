"""The browser speed test (docs/live.md, "The speed-test page"; issue 10, 003 ch. 5: LibreSpeed with
RPM over HTTP/3): its manifest, and the page itself in headless Chromium over forced QUIC through a
20 Mbit/s, 40 ms RTT link with a 4-BDP drop-tail queue, served by `protolab-net serve`, with the
coordinator (`protolab serve-live`) when it exists.

`run_speedtest_page` returns what the page measured, for comparisons with other clients (the
CLI's `protolab-net rpm`, `run_cli_rpm`) on the same lab; the page's download RPM is checked
against the CLI's self-probe RPM there."""

from __future__ import annotations

import json
import math
import secrets
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from awaiting import await_line, await_listening
from conftest import run_protolab

from protolab.lab import Lab, dumbbell, host, link, mbps_to_bps, ms_to_ns
from protolab.live.page import (
    BODIES_DIR,
    PAGE_DIR,
    PAGE_OBJECTS,
    load_hostnames,
    manifest,
    page_query,
    page_url,
    resolver_maps,
    write_manifest,
)

CHROMIUM = Path("/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")

ARTIFACTS = Path(__file__).resolve().parents[1] / "target" / "test-artifacts" / "live"
HOSTNAME = "speed.pl.test"
CLIENT_ADDRESS, SERVER_ADDRESS = "10.77.0.1", "10.77.1.1"
COORDINATOR_PORT = 8090
RATE_MBPS, RTT_MS, QUEUE_BDP = 20, 40, 4
BDP_BYTES = RATE_MBPS * 1_000_000 // 8 * RTT_MS // 1000  # 100 kB
SERVER_READY_S = 30.0
# The bound: the page's RPM within this fraction of the CLI's (its self-probe RPM).
RPM_TOLERANCE = 0.2


def speedtest_topology(lab: str, rate_mbps: float = RATE_MBPS, rtt_ms: float = RTT_MS,
                       queue_bdp: float = QUEUE_BDP) -> dict[str, Any]:
    """Client and server; the client's access link is the bottleneck: `rate_mbps` and half the
    RTT each way, a drop-tail queue of `queue_bdp` BDPs in both directions."""
    queue = round(queue_bdp * rate_mbps * 1e6 / 8 * rtt_ms / 1e3)
    access = link(mbps_to_bps(rate_mbps), delay_ns=ms_to_ns(rtt_ms / 2), queue_bytes=queue)
    return dumbbell(lab, [host("client", "left", [CLIENT_ADDRESS], up=access, down=access)],
                    [host("server", "right", [SERVER_ADDRESS])], paths=1)


@dataclass
class Served:
    """A running `protolab-net serve` in the lab's server host."""

    process: subprocess.Popen[bytes]
    tls_dir: Path
    spki: str


def start_server(lab: Lab, binary: Path, manifest_file: Path, workdir: Path) -> Served:
    """`protolab-net serve` with the page's manifest in the server host, once it listens."""
    workdir.mkdir(parents=True, exist_ok=True)
    tls = workdir / "tls"
    process = lab.spawn("server", [binary, "serve", "--manifest", manifest_file, "--tls-dir", tls,
                                   "--lab", lab.name or "lab"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    await_listening(process, within=SERVER_READY_S)
    return Served(process, tls, (tls / "spki.txt").read_text().strip())


def coordinator_available() -> tuple[bool, str]:
    """Whether `protolab serve-live` exists in this tree (it is being built alongside the page)."""
    done = run_protolab("serve-live", "--help", timeout=120)
    if done.returncode == 0:
        return True, ""
    return False, ("`protolab serve-live` is not available in this tree yet (`protolab serve-live --help` exited "
                   f"with status {done.returncode}); the page's coordinator upload is not checked")


def start_coordinator(lab: Lab, data_dir: Path) -> str:
    """`protolab serve-live` in the server host; its base URL once it says it listens."""
    listen = f"{SERVER_ADDRESS}:{COORDINATOR_PORT}"
    process = lab.spawn("server", [sys.executable, "-m", "protolab", "serve-live", "--listen", listen,
                                   "--data", data_dir], stderr=subprocess.PIPE)
    announced = f"protolab serve-live: listening on http://{listen}"
    await_line(process, lambda line: line if line.startswith(announced) else None, stream="stderr",
               what=f"'{announced}'", within=SERVER_READY_S)
    return f"http://{listen}"


def run_speedtest_page(lab: Lab, served: Served, workdir: Path, *, mode: str = "h3", coordinator: str | None = None,
                       screenshots: Path | None = None, params: Mapping[str, Any] | None = None,
                       url: str | None = None, timeout_s: float = 100.0, netlog: Path | None = None) -> dict[str, Any]:
    """Loads the speed-test page in headless Chromium in the lab's client host (protocol forced by
    `mode`) and waits for it to finish. Returns the driver's output (protolab.live.page.drive):
    `state`, `error`, `result` (the page's `window.speedtestResult`, schema protolab.rpm.browser),
    `upload`, `screenshots`. The page's parameters go in the URL's fragment unless `url` is
    given. Reusable to compare the page with other clients on the same lab."""
    out = workdir / f"speedtest-{mode}.json"
    scheme = "http" if mode == "h1c" else "https"
    url = url or page_url(HOSTNAME, scheme=scheme, coordinator=coordinator, params=params)
    argv = [sys.executable, "-m", "protolab.live.page.drive", "--url", url, "--mode", mode, "--spki", served.spki,
            *(arg for m in resolver_maps(HOSTNAME, SERVER_ADDRESS) for arg in ("--map", m)),
            "--out", out, "--timeout-s", str(timeout_s)]
    if screenshots is not None:
        argv += ["--screenshots", screenshots]
    if coordinator:
        argv += ["--secure-origin", coordinator]
    if netlog is not None:
        argv += ["--netlog", netlog]
    done = lab.run("client", argv, timeout=timeout_s + 60, check=False)
    assert done.returncode == 0 and out.exists(), f"driver exited with {done.returncode}: {done.stderr[-3000:]}"
    return json.loads(out.read_text())


def run_cli_rpm(lab: Lab, binary: Path, served: Served, workdir: Path, *, direction: str = "download",
                timeout_s: float = 90.0) -> dict[str, Any]:
    """`protolab-net rpm --protocol h3` (docs/rpm.md) from the lab's client host against the
    page's server and hostname: its result (schema protolab.rpm)."""
    out = workdir / f"cli-rpm-{direction}.json"
    done = lab.run("client", [binary, "rpm", "--server", SERVER_ADDRESS, "--host", HOSTNAME, "--ca", served.tls_dir / "ca.pem",
                              "--protocol", "h3", "--direction", direction, "--out", out, "--quiet"],
                   timeout=timeout_s, check=False)
    assert out.exists(), f"protolab-net rpm exited with {done.returncode}: {done.stderr[-3000:]}"
    return json.loads(out.read_text())


@dataclass
class PageRun:
    output: dict[str, Any]
    coordinator: str | None
    skip_reason: str
    data_dir: Path
    cli: dict[str, Any]


@pytest.fixture(scope="module")
def page_run(emu_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PageRun]:
    """One run of the page through the lab (the measurement takes up to 2 x 20 s; the tests share
    it), then `protolab-net rpm --protocol h3 --direction download` on the same lab."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed")
    work = tmp_path_factory.mktemp("live-browser")
    available, reason = coordinator_available()
    coordinator = f"http://{SERVER_ADDRESS}:{COORDINATOR_PORT}" if available else None
    # With a coordinator the page is loaded as /?coordinator=...&autostart=1: the query string
    # the coordinator's users get, which the manifest serves besides / (the server matches
    # queries exactly); without one, the parameters ride in the fragment.
    query = page_query(coordinator=coordinator) if coordinator else None
    manifest_file = write_manifest(work / "site", HOSTNAME, SERVER_ADDRESS, queries=[query] if query else [])
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("speedtest-*.png"):
        old.unlink()
    name = "t" + secrets.token_hex(4)
    with Lab(speedtest_topology(name), binary=emu_binary) as lab:
        served = start_server(lab, emu_binary, manifest_file, work / "server")
        if coordinator:
            assert start_coordinator(lab, work / "live-data") == coordinator
        url = f"https://{HOSTNAME}/?{query}" if query else None
        output = run_speedtest_page(lab, served, work, coordinator=coordinator, screenshots=ARTIFACTS, url=url)
        (ARTIFACTS / "speedtest-result.json").write_text(json.dumps(output, indent=1))
        cli = run_cli_rpm(lab, emu_binary, served, work)
    (ARTIFACTS / "speedtest-cli-rpm.json").write_text(json.dumps(cli, indent=1))
    yield PageRun(output, coordinator, reason, work / "live-data", cli)


def test_manifest_serves_the_page_files_as_recorded_bodies(tmp_path: Path) -> None:
    target = write_manifest(tmp_path, HOSTNAME, SERVER_ADDRESS)
    page = json.loads(target.read_text())
    assert page == manifest(HOSTNAME, SERVER_ADDRESS)
    # The page's origin, then the load origins load1. .. load16. at the same address.
    assert [o["hostname"] for o in page["origins"]] == [HOSTNAME, *(f"load{i}.{HOSTNAME}" for i in range(1, 17))]
    assert {o["address"] for o in page["origins"]} == {SERVER_ADDRESS}
    assert {o["origin"] for o in page["objects"]} == {HOSTNAME}
    assert load_hostnames(HOSTNAME, 2) == [f"load1.{HOSTNAME}", f"load2.{HOSTNAME}"]
    assert resolver_maps(HOSTNAME, SERVER_ADDRESS, 1) == [f"{HOSTNAME}={SERVER_ADDRESS}", f"load1.{HOSTNAME}={SERVER_ADDRESS}"]
    assert [o["hostname"] for o in manifest(HOSTNAME, SERVER_ADDRESS, load_origins=0)["origins"]] == [HOSTNAME]
    with pytest.raises(ValueError, match="hostname"):
        manifest("a" * 60 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 62, SERVER_ADDRESS)  # load16. makes it too long
    assert [o["path"] for o in page["objects"]] == ["/", "/style.css", "/speedtest.js"]
    assert [o.get("parent") for o in page["objects"]] == [None, "/", "/"]
    for obj, (_, file, _, _) in zip(page["objects"], PAGE_OBJECTS, strict=True):
        body = target.parent / obj["body"]
        assert obj["body"] == f"{BODIES_DIR}/{file}"
        assert body.read_bytes() == (PAGE_DIR / file).read_bytes() and obj["size"] == body.stat().st_size
    html = (PAGE_DIR / "index.html").read_text()
    assert 'src="/speedtest.js"' in html and 'href="/style.css"' in html
    with pytest.raises(ValueError, match="IP literal"):
        manifest("10.0.0.1", SERVER_ADDRESS)
    with pytest.raises(ValueError, match="IPv4"):
        manifest(HOSTNAME, "speed")
    assert page_url(HOSTNAME, coordinator="http://10.1.2.3:8090", params={"max_duration_s": 5}) == \
        "https://speed.pl.test/#coordinator=http%3A%2F%2F10.1.2.3%3A8090&autostart=1&max_duration_s=5"
    # The page at a query string too (the server matches queries exactly).
    query = page_query(coordinator="http://10.1.2.3:8090")
    aliased = manifest(HOSTNAME, SERVER_ADDRESS, queries=[query, query])
    assert [o["path"] for o in aliased["objects"][3:]] == [f"/?{query}"]
    assert aliased["objects"][3]["body"] == aliased["objects"][0]["body"]
    with pytest.raises(ValueError, match="query"):
        manifest(HOSTNAME, SERVER_ADDRESS, queries=["a b"])


@pytest.mark.lab
@needs_chromium
def test_page_measures_capacity_latency_and_rpm_over_h3(page_run: PageRun) -> None:
    out = page_run.output
    assert out["state"] == "done", (out["error"], out["console"][-20:])
    r = out["result"]
    assert r["schema"] == "protolab.rpm.browser" and r["schema_version"] == 1
    assert r["probes"] == "self" and r["load_note"] is None
    assert r["load_origins"] == load_hostnames(HOSTNAME)
    # Every request to the page's origins went over HTTP/3 (DevTools; Resource Timing hides the
    # protocol of cross-origin requests), the page's origin on one connection, each load origin
    # used on a connection of its own: no two origins share one (their certificates differ).
    # (The coordinator is another server, over plain HTTP.)
    origins = {h: o for h, o in out["origins"].items() if h == HOSTNAME or h.endswith(f".{HOSTNAME}")}
    assert HOSTNAME in origins and f"load1.{HOSTNAME}" in origins, out["origins"]
    assert {p for o in origins.values() for p in o["protocols"]} == {"h3"}, origins
    assert r["protocol"] == "h3" and set(r["protocols"]) == {"h3"}, r["protocols"]
    assert r["page_protocol"] == "h3"
    assert all(len(o["connections"]) == 1 for o in origins.values()), origins
    connections = [o["connections"][0] for o in origins.values()]
    assert len(set(connections)) == len(connections), origins
    idle = r["idle"]
    assert RTT_MS <= idle["latency_ms"] < 2 * RTT_MS, idle
    assert idle["rpm"] == pytest.approx(60000 / idle["latency_ms"], rel=1e-3)
    assert {p["host"] for p in idle["probes"]} == {HOSTNAME}
    # The draft's order: download, then upload, on the same load origins' connections.
    assert list(r["directions"]) == ["download", "upload"]
    dl = r["directions"]["download"]
    assert 0.6 * RATE_MBPS * 1e6 <= dl["capacity_bps"] <= 1.05 * RATE_MBPS * 1e6, dl["intervals"]
    assert dl["load_hosts"] == load_hostnames(HOSTNAME, dl["load_generators"]) and set(dl["load_hosts"]) <= set(origins)
    # A 4-BDP queue in front of the link: loaded round trips approach 40 + 4 x 40 = 200 ms.
    assert dl["rpm"] is not None and math.isfinite(dl["rpm"]) and dl["rpm"] < idle["rpm"]
    assert dl["loaded_latency_ms"] > 2 * idle["latency_ms"], (dl["loaded_latency_ms"], idle["latency_ms"])
    assert dl["confidence"]["capacity"] in ("medium", "high") and dl["confidence"]["rpm"] in ("low", "medium", "high")
    # Self probes on the load-generating connections.
    assert all(p["kind"] == "self" and p["host"] in dl["load_hosts"] for p in dl["probes"])
    assert len(dl["probes"]) >= 3 * dl["duration_s"] and dl["probe_counts"]["failed"] == 0, dl["probe_counts"]
    assert len(dl["intervals"]) >= r["parameters"]["mad"]
    # The upload after the download's aborted requests: its load and probes are answered.
    ul = r["directions"]["upload"]
    assert ul["capacity_bps"] > 0.3 * RATE_MBPS * 1e6, ul["intervals"]
    assert ul["rpm"] is not None and ul["rpm"] < idle["rpm"], ul["probe_counts"]
    assert all(p["host"] in ul["load_hosts"] for p in ul["probes"]) and ul["probe_counts"]["failed"] == 0
    assert (r["parameters"]["mps"], r["parameters"]["mnp"], r["parameters"]["max_duration_s"]) == (10, 16, 20)
    # The screenshots: the live progress during the download, then the result card.
    from PIL import Image

    for kind in ("progress", "result"):
        shot = ARTIFACTS / f"speedtest-{kind}.png"
        assert out["screenshots"].get(kind) == str(shot) and shot.stat().st_size > 20_000, kind
        with Image.open(shot) as image:
            assert image.size[0] >= 800 and len(image.convert("RGB").getcolors(1 << 20) or range(1 << 20)) > 50, kind


@pytest.mark.lab
@needs_chromium
def test_page_rpm_is_within_20_percent_of_the_cli(page_run: PageRun, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's check: the page's download RPM (self probes on its load-generating
    connections) within 20% of `protolab-net rpm --protocol h3`'s self-probe RPM on the same
    lab. The CLI's combined RPM (the mean of its foreign and self terms) is reported too."""
    out = page_run.output
    assert out["state"] == "done", (out["error"], out["console"][-20:])
    dl = out["result"]["directions"]["download"]
    cli = page_run.cli
    assert cli["status"] == "ok", cli.get("error")
    c = cli["directions"]["download"]
    resp = c["responsiveness"]
    with capsys.disabled():
        print(f"\npage download: {dl['capacity_bps'] / 1e6:.2f} Mbit/s, RPM {dl['rpm']:.0f} "
              f"({dl['loaded_latency_ms']:.1f} ms, self probes, {dl['load_generators']} load connections, "
              f"confidence {dl['confidence']['rpm']})\n"
              f"CLI  download: {c['capacity_bps'] / 1e6:.2f} Mbit/s, self RPM {resp['self_rpm']:.0f} "
              f"({resp['tm_http_self_ms']:.1f} ms), foreign RPM {resp['foreign_rpm']:.0f}, RPM {c['rpm']:.0f} "
              f"({c['loaded_latency_ms']:.1f} ms, {c['load_connections']} connections); "
              f"page / CLI self = {dl['rpm'] / resp['self_rpm']:.3f}, page / CLI RPM = {dl['rpm'] / c['rpm']:.3f}")
    assert 0.6 * RATE_MBPS * 1e6 <= c["capacity_bps"] <= 1.05 * RATE_MBPS * 1e6, c["intervals"]
    assert abs(dl["rpm"] - resp["self_rpm"]) <= RPM_TOLERANCE * resp["self_rpm"], (dl["rpm"], resp)


@pytest.mark.lab
@needs_chromium
def test_page_takes_a_token_and_uploads_its_result_to_the_coordinator(page_run: PageRun) -> None:
    if page_run.coordinator is None:
        pytest.skip(page_run.skip_reason)
    out = page_run.output
    assert out["state"] == "done", out["error"]
    token = out["result"]["token"]
    assert isinstance(token, str) and token
    assert out["upload"] == {"ok": True, "coordinator": page_run.coordinator, "token": token}, out["upload"]
    # Stored as docs/live.md says: DATA/tests/<token>/result.json (as sent) and a live_tests row.
    data = page_run.data_dir
    stored = json.loads((data / "tests" / token / "result.json").read_text())
    assert stored == {k: v for k, v in out["result"].items()}
    meta = json.loads((data / "tests" / token / "meta.json").read_text())
    assert meta["token"] == token and meta["client"]["client"] == "browser"
    with duckdb.connect(str(data / "live.duckdb"), read_only=True) as con:
        row = con.execute("SELECT client, schema, protocol, download_bps, download_rpm FROM live_tests WHERE token = ?",
                          [token]).fetchone()
    dl = out["result"]["directions"]["download"]
    assert row == ("browser", "protolab.rpm.browser", "h3", pytest.approx(dl["capacity_bps"]), pytest.approx(dl["rpm"]))
