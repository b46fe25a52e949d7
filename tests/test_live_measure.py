"""The wild client `protolab measure` (docs/live.md, "The wild client"; 003 §4.2.2): the host's
metadata and 003's rmem_max gate on a fake /proc and /sys, the token-and-upload loop against a
real coordinator on loopback (the test itself faked), and one lab run: the coordinator and the
server in one namespace, the client in another, its results stored beside the browser tests."""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import lab_namespaces
from documents import fixture
from test_live_browser import HOSTNAME, SERVER_ADDRESS, start_coordinator, start_server, speedtest_topology

from protolab.lab import Lab
from protolab.live import Coordinator as LiveCoordinator
from protolab.live import serve
from protolab.live.measure import (
    BULK_SCHEMA,
    CLIENT_NAME,
    RMEM_MAX_GATE_BYTES,
    BulkPlan,
    BulkRun,
    Coordinator,
    MeasureError,
    RpmRun,
    bulk_envelope,
    host_metadata,
    limited_rates,
    measure,
)
from protolab.live.page import write_manifest


def fake_root(tmp_path: Path, rmem_max: str | None = "4194304") -> Path:
    """A /etc, /proc and /sys with an Ethernet card, a WiFi card, a veth and loopback."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text('NAME="Debian"\nPRETTY_NAME="Debian GNU/Linux 13 (trixie)"\n')
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.12.0-test\n")
    (root / "proc/sys/net/core").mkdir(parents=True)
    if rmem_max is not None:
        (root / "proc/sys/net/core/rmem_max").write_text(rmem_max + "\n")
    net = root / "sys/class/net"
    for name, files, dirs in [("eth0", {"uevent": ""}, ["device"]), ("wlan0", {"uevent": "DEVTYPE=wlan\n"}, ["device", "wireless"]),
                              ("veth1", {"uevent": "DEVTYPE=veth\n"}, []), ("lo", {"uevent": ""}, [])]:
        (net / name).mkdir(parents=True)
        for file, text in files.items():
            (net / name / file).write_text(text)
        for d in dirs:
            (net / name / d).mkdir()
    return root


def test_host_metadata_and_the_rmem_gate(tmp_path: Path) -> None:
    meta = host_metadata(fake_root(tmp_path))
    assert meta["client"] == CLIENT_NAME
    assert (meta["os"], meta["kernel"]) == ("Debian GNU/Linux 13 (trixie)", "6.12.0-test")
    assert meta["interfaces"] == [{"name": "eth0", "kind": "ethernet"}, {"name": "veth1", "kind": "veth"},
                                  {"name": "wlan0", "kind": "wifi"}]
    assert meta["rmem_max"] == 4_194_304
    assert meta["rmem_max_gate"] == {"required_bytes": 2_500_000, "passed": True}
    # Debian's default (208 kB) fails the gate; an unreadable value (a container) fails it too.
    small = host_metadata(fake_root(tmp_path / "small", "212992"))
    assert (small["rmem_max"], small["rmem_max_gate"]["passed"]) == (212_992, False)
    hidden = host_metadata(fake_root(tmp_path / "hidden", None))
    assert (hidden["rmem_max"], hidden["rmem_max_gate"]["passed"]) == (None, False)
    # The token request's metadata must fit the coordinator's 4 KiB.
    assert len(json.dumps(meta)) < 4096


@dataclass
class FakeRpm(RpmRun):
    """protolab-net rpm replaced by the contract's fixture result, relabelled per protocol."""

    def run(self, protocol: str, workdir: Path) -> dict[str, Any]:
        self.ran = [*getattr(self, "ran", []), protocol]
        return {**fixture("rpm-h2.json"), "protocol": protocol}


@dataclass
class FakeBulk(BulkRun):
    """protolab-net bulk replaced by the contract's fixture, its goodput set per controller (or
    to the rate of a limited test)."""

    def run(self, name: str, controller: str, rate_bps: float | None, workdir: Path) -> dict[str, Any]:
        self.ran = [*getattr(self, "ran", []), (name, controller, rate_bps)]
        goodput = rate_bps if rate_bps is not None else {"cubic": 18e6, "bbr": 16e6}[controller]
        return {**fixture("bulk-tcp.json"), "goodput_bps": goodput}


def test_limited_rates_are_fractions_of_the_reference_controllers_best_goodput() -> None:
    runs = [bulk_envelope("bulk", "cubic", {"goodput_bps": 18e6}), bulk_envelope("bulk", "bbr", {"goodput_bps": 16e6}),
            bulk_envelope("bulk", "bbr", {"goodput_bps": 17e6}), bulk_envelope("bulk", "bbr", {"goodput_bps": None})]
    # 003 §4.2.2: the highest of the reference (BBR) transfers, whatever the others did.
    assert limited_rates(runs, BulkPlan(("cubic", "bbr"), (0.3, 1.1), "bbr")) == [
        (0.3, pytest.approx(0.3 * 17e6)), (1.1, pytest.approx(1.1 * 17e6))]
    assert limited_rates(runs[:1], BulkPlan(("cubic",), (0.5,), "bbr")) == []
    envelope = bulk_envelope("limited", "bbr", {"goodput_bps": 8e6, "status": "ok"}, 8.5e6, 0.5)
    assert (envelope["schema"], envelope["schema_version"], envelope["test"], envelope["rate_bps"]) == (
        BULK_SCHEMA, 1, "limited", 8.5e6)


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[tuple[LiveCoordinator, str]]:
    live = LiveCoordinator(tmp_path / "data", lock_timeout_s=30, log=lambda line: None)
    server = serve(live, "127.0.0.1", 0)
    try:
        yield live, f"http://127.0.0.1:{server.server_port}"
    finally:
        server.close()


def test_each_protocol_is_tested_under_its_own_token_and_stored(coordinator: tuple[LiveCoordinator, str],
                                                                 tmp_path: Path) -> None:
    live, url = coordinator
    rpm = FakeRpm(Path("/nonexistent"), "10.0.0.1")
    answers = measure(Coordinator(url), rpm, ["h2", "h3"], tmp_path / "out", root=fake_root(tmp_path))
    assert rpm.ran == ["h2", "h3"]
    assert len({a["token"] for a in answers}) == 2
    rows = live.store.rows()
    assert [(r["client"], r["schema"], r["protocol"]) for r in rows] == [
        (CLIENT_NAME, "protolab.rpm", "h2"), (CLIENT_NAME, "protolab.rpm", "h3")]
    assert rows[0]["download_rpm"] == pytest.approx(fixture("rpm-h2.json")["directions"]["download"]["rpm"])
    meta = json.loads((live.data_dir / answers[0]["stored"] / "meta.json").read_text())
    assert meta["client"]["rmem_max"] == 4_194_304 and meta["client"]["protocol"] == "h2"
    assert meta["client"]["interfaces"][0] == {"name": "eth0", "kind": "ethernet"}
    assert live.status() == {"busy": False, "held_for_s": None, "tests": 2}


def test_bulk_per_controller_then_limited_tests_are_stored(coordinator: tuple[LiveCoordinator, str],
                                                           tmp_path: Path) -> None:
    live, url = coordinator
    bulk = FakeBulk(Path("/nonexistent"), "10.0.0.1")
    answers = measure(Coordinator(url), FakeRpm(Path("/nonexistent"), "10.0.0.1"), ["h3"], tmp_path / "out",
                      bulk=bulk, plan=BulkPlan(("cubic", "bbr"), (0.5, 1.1), "bbr"), root=fake_root(tmp_path))
    # BBR's 16 Mbit/s sets the limited rates, with BBR under the pacer.
    assert bulk.ran == [("bulk-cubic", "cubic", None), ("bulk-bbr", "bbr", None),
                        ("limited-0.5", "bbr", pytest.approx(8e6)), ("limited-1.1", "bbr", pytest.approx(17.6e6))]
    assert len({a["token"] for a in answers}) == 5
    assert [(r["schema"], r["protocol"]) for r in live.store.rows()] == [
        ("protolab.rpm", "h3"), *[(BULK_SCHEMA, "h3")] * 4]
    stored = json.loads((live.data_dir / answers[3]["stored"] / "result.json").read_text())
    assert (stored["test"], stored["controller"], stored["fraction"]) == ("limited", "bbr", 0.5)
    assert stored["result"]["goodput_bps"] == pytest.approx(8e6)


def test_a_host_below_the_gate_takes_no_token(coordinator: tuple[LiveCoordinator, str], tmp_path: Path) -> None:
    live, url = coordinator
    rpm = FakeRpm(Path("/nonexistent"), "10.0.0.1")
    with pytest.raises(MeasureError, match=f"rmem_max is 212992 bytes, below the {RMEM_MAX_GATE_BYTES}"):
        measure(Coordinator(url), rpm, ["h3"], tmp_path / "out", root=fake_root(tmp_path, "212992"))
    assert live.status()["busy"] is False and not hasattr(rpm, "ran")
    # --no-rmem-gate measures anyway; the metadata says the gate failed.
    (answer,) = measure(Coordinator(url), rpm, ["h3"], tmp_path / "out", root=fake_root(tmp_path / "b", "212992"),
                        enforce_gate=False)
    meta = json.loads((live.data_dir / answer["stored"] / "meta.json").read_text())
    assert meta["client"]["rmem_max_gate"]["passed"] is False


def test_a_busy_coordinator_is_asked_again_until_the_wait_ends(coordinator: tuple[LiveCoordinator, str]) -> None:
    live, url = coordinator
    held = live.issue_token({"client": "browser"})
    now = [0.0]
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds

    client = Coordinator(url, sleep=sleep, clock=lambda: now[0])
    with pytest.raises(MeasureError, match="409 busy"):
        client.token({"client": CLIENT_NAME}, wait_s=25)
    # Asked again after the coordinator's retry_after_s (about 30 s), cut to 10 s, until 25 s.
    assert pauses == [10.0, 10.0, 5.0]
    live.submit_result(held["token"], fixture("rpm-h2.json"))
    assert len(client.token({"client": CLIENT_NAME}, wait_s=0)) == 43


@pytest.mark.lab
def test_the_wild_client_runs_against_the_coordinator_on_the_lab(emu_binary: Path, tmp_path: Path) -> None:
    manifest_file = write_manifest(tmp_path / "site", HOSTNAME, SERVER_ADDRESS)
    with Lab(speedtest_topology("t" + secrets.token_hex(4)), binary=emu_binary) as lab:
        served = start_server(lab, emu_binary, manifest_file, tmp_path / "server")
        url = start_coordinator(lab, tmp_path / "live-data")
        done = lab.run("client", [sys.executable, "-m", "protolab", "measure", "--coordinator", url, "--server",
                                  SERVER_ADDRESS, "--host", HOSTNAME, "--ca", served.tls_dir / "ca.pem",
                                  "--protocols", "h2,h3", "--max-duration-s", "4", "--out", tmp_path / "out",
                                  "--controllers", "cubic,bbr", "--bulk-duration-s", "2", "--limited-fractions", "0.5",
                                  "--no-rmem-gate", "--binary", emu_binary], timeout=200, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout)
    assert [a["summary"]["protocol"] for a in answers] == ["h2", "h3", "h3", "h3", "h3"]
    with duckdb.connect(str(tmp_path / "live-data" / "live.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT client, schema, protocol, download_bps, download_rpm, download_confidence "
                           "FROM live_tests ORDER BY uploaded_unix_ns").fetchall()
    assert [r[:3] for r in rows] == [(CLIENT_NAME, "protolab.rpm", "h2"), (CLIENT_NAME, "protolab.rpm", "h3"),
                                     *[(CLIENT_NAME, BULK_SCHEMA, "h3")] * 3]
    bulk = [json.loads((tmp_path / "live-data" / a["stored"] / "result.json").read_text()) for a in answers[2:]]
    assert [(b["test"], b["controller"], b["status"]) for b in bulk] == [
        ("bulk", "cubic", "ok"), ("bulk", "bbr", "ok"), ("limited", "bbr", "ok")]
    # The uploads fill the 20 Mbit/s link; the limited one is paced at half of BBR's goodput.
    assert all(10e6 <= b["goodput_bps"] <= 21e6 for b in bulk[:2]), bulk
    assert bulk[2]["rate_bps"] == pytest.approx(0.5 * bulk[1]["goodput_bps"])
    assert 0.8 * bulk[2]["rate_bps"] <= bulk[2]["goodput_bps"] <= 1.1 * bulk[2]["rate_bps"], bulk[2]
    for _, _, protocol, bps, rpm, confidence in rows[:2]:
        # The 20 Mbit/s access link of the page's lab; 4 s cannot saturate, so the RPM is speculative.
        assert 8e6 <= bps <= 20.5e6 and rpm > 0 and confidence == "speculative", (protocol, bps, rpm, confidence)
    stored = tmp_path / "live-data" / answers[1]["stored"]
    meta = json.loads((stored / "meta.json").read_text())
    assert meta["client"]["client"] == CLIENT_NAME and meta["client"]["kernel"]
    # A lab host's one interface is the emulator's TUN device.
    assert meta["client"]["interfaces"] == [{"name": "pl0", "kind": "tun"}], meta["client"]["interfaces"]
    result = json.loads((stored / "result.json").read_text())
    assert result["directions"]["download"]["rpm_latency_mean"] > 0
    # The h3 test's client qlogs stay with the client's results.
    assert list((tmp_path / "out" / "qlog-h3").glob("*.qlog"))
    assert lab_namespaces(lab.name or "") == []
