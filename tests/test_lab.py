"""The Lab around a real `protolab-net emu`: namespaces, ping, counters, live changes, refusal of
bad topologies, coexisting labs, and cleanup after the emulator is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from awaiting import await_port, wait_until
from conftest import lab_namespaces

from protolab.errors import LabError
from protolab.lab import Lab, cleanup_lab, dumbbell, ideal_link, link, mbps_to_bps, ms_to_ns
from protolab.measure.tools import parse_ping

pytestmark = pytest.mark.lab

PING_BYTES = 84  # IP bytes of a default ping: 20 IP + 8 ICMP + 56 payload


def _ping(lab: Lab, count: int, interval: float = 0.01) -> Any:
    completed = lab.run("client", ["ping", "-q", "-n", "-c", str(count), "-i", str(interval), "-W", "2",
                                   lab.address("server")], check=False, timeout=60)
    return parse_ping(completed.stdout)


def _two_hosts(name: str, **kwargs: Any) -> dict[str, Any]:
    return dumbbell(name, ["client"], ["server"], **kwargs)


def test_lab_ping_and_counters(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    name = lab_name()
    with Lab(_two_hosts(name)) as lab:
        assert lab.namespace("client") == f"pl-{name}-client"
        assert lab.address("server") == "10.77.1.1"
        assert lab.addresses("client") == ["10.77.0.1"]
        assert sorted(lab_namespaces(name)) == [f"pl-{name}-client", f"pl-{name}-server"]
        lab.reset_counters()
        result = _ping(lab, 20)
        assert (result.transmitted, result.received) == (20, 20)
        counters = lab.counters()
        for link_name in ("client.up", "server.down", "server.up", "client.down"):
            counted = counters["links"][link_name]
            assert counted["delivered_packets"] == 20, link_name
            assert counted["delivered_bytes"] == 20 * PING_BYTES, link_name
            assert sum(counted["dropped_packets"].values()) == 0
        assert counters["paths"]["p0"]["forward"]["delivered_packets"] == 20
        assert counters["paths"]["p0"]["reverse"]["delivered_packets"] == 20
        lab.reset_counters()
        assert lab.counters()["paths"]["p0"]["forward"]["delivered_packets"] == 0
        info = lab.info()
        assert info["lab"] == name and info["pid"] == lab.pid
    assert lab_namespaces(name) == []


def _cpu_latency_target_us() -> int:
    """The kernel's CPU wake-up latency bound in force (PM QoS), as /dev/cpu_dma_latency reads."""
    fd = os.open("/dev/cpu_dma_latency", os.O_RDONLY)
    try:
        return int.from_bytes(os.read(fd, 4), "little", signed=True)
    finally:
        os.close(fd)


def test_the_lab_holds_the_cpu_wakeup_latency_while_it_runs(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    # Idle vCPUs of a VM wake the loop milliseconds late unless they poll (docs/emulator.md).
    with Lab(_two_hosts(lab_name())) as lab:
        assert lab.info()["cpu_latency_us"] == 0
        assert _cpu_latency_target_us() == 0
    with Lab(_two_hosts(lab_name()), emu_args=["--cpu-latency-us", "off"]) as lab:
        assert lab.info()["cpu_latency_us"] is None
    with Lab(_two_hosts(lab_name()), emu_args=["--cpu-latency-us", "25"]) as lab:
        assert lab.info()["cpu_latency_us"] == 25
        assert _cpu_latency_target_us() <= 25


def test_set_link_changes_delay_live(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    with Lab(_two_hosts(lab_name())) as lab:
        baseline = _ping(lab, 10)
        assert baseline.rtt_min_ms < 2.0
        effective = lab.set_link(["client.up", "client.down"], delay_ns=ms_to_ns(10))
        assert {name: params["delay_ns"] for name, params in effective.items()} == {
            "client.up": 10_000_000, "client.down": 10_000_000}
        assert effective["client.up"]["queue"] == {"kind": "droptail", "packets": 1000}  # complete, in numbers
        slowed = _ping(lab, 10)
        assert slowed.received == 10
        assert 20.0 <= slowed.rtt_min_ms <= 21.5  # 10 ms each way on the client's access link
        lab.set_link(["client.up", "client.down"], **ideal_link())
        assert _ping(lab, 10).rtt_min_ms < 2.0


def test_set_link_refuses_bad_params_and_unknown_links(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    with Lab(_two_hosts(lab_name())) as lab:
        with pytest.raises(LabError, match="rate"):
            lab.set_link("p0.forward", rate="-5mbit")  # the written form is still read, and checked
        with pytest.raises(LabError, match="nosuch"):
            lab.set_link("nosuch.up", delay_ns=ms_to_ns(1))
        assert _ping(lab, 3).received == 3  # still working after refused requests


def test_loss_is_counted_per_cause(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    with Lab(_two_hosts(lab_name())) as lab:
        lab.set_link("p0.forward", **link(loss=1.0))
        lab.reset_counters()
        assert _ping(lab, 5, interval=0.01).received == 0
        forward = lab.counters()["paths"]["p0"]["forward"]
        assert forward["dropped_packets"]["random_loss"] == 5
        assert forward["delivered_packets"] == 0
        lab.set_link("p0.forward", loss=None)
        assert _ping(lab, 5).received == 5


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda t: t["hosts"][0].setdefault("access", {}).update(up={"rate": "-5mbit"}), "rate"),
        (lambda t: t["hosts"][1].update(addresses=["10.77.0.1"]), "address"),
        (lambda t: t["paths"][0].update(forward={"queue": {"kind": "fifo-ish"}}), "kind"),
    ],
    ids=["negative-rate", "duplicate-address", "unknown-queue-kind"],
)
def test_invalid_topology_is_refused_without_leftovers(
    emu_binary: Path, lab_name: Callable[[], str], mutate: Callable[[dict[str, Any]], None], field: str
) -> None:
    name = lab_name()
    topology = _two_hosts(name)
    mutate(topology)
    with pytest.raises(LabError) as refused, Lab(topology):
        pytest.fail("an invalid topology must not start")
    assert field in str(refused.value)
    assert lab_namespaces(name) == []
    assert not (Path("/run/protolab") / name).exists()


def test_two_labs_run_side_by_side(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    first, second = lab_name(), lab_name()
    # Same addresses in both: each lab is its own world.
    with Lab(_two_hosts(first)) as lab_a, Lab(_two_hosts(second)) as lab_b:
        lab_b.set_link(["client.up"], delay_ns=ms_to_ns(5))
        assert _ping(lab_a, 5).rtt_min_ms < 2.0
        assert 5.0 <= _ping(lab_b, 5).rtt_min_ms <= 6.5
    assert lab_namespaces(first) == [] and lab_namespaces(second) == []


def test_name_collision_is_refused_and_harmless(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    name = lab_name()
    with Lab(_two_hosts(name)) as lab:
        with pytest.raises(LabError, match="already exists"), Lab(_two_hosts(name)):
            pytest.fail("a second lab with the same name must not start")
        # The refused twin must not have cleaned up (or otherwise hurt) the running lab.
        assert _ping(lab, 3).received == 3
        assert len(lab_namespaces(name)) == 2


def test_spawned_processes_are_stopped_at_teardown(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    name = lab_name()
    with Lab(_two_hosts(name)) as lab:
        sleeper = lab.spawn("server", ["sleep", "600"])
        assert sleeper.poll() is None
    assert sleeper.poll() is not None
    assert lab_namespaces(name) == []


def test_teardown_runs_on_keyboard_interrupt(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    name = lab_name()
    with pytest.raises(KeyboardInterrupt), Lab(_two_hosts(name)) as lab:
        lab.spawn("client", ["sleep", "600"])
        raise KeyboardInterrupt
    assert lab_namespaces(name) == []


def test_cleanup_after_sigkill(emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> None:
    name = lab_name()
    state_dir = tmp_path / "state"
    topology = _two_hosts(name, paths=[{"name": "p0", "forward": link(mbps_to_bps(50))}])
    # Without the watchdog: this test is about the manual cleanup command.
    lab = Lab(topology, state_dir=state_dir, emu_args=["--no-watchdog"])
    lab.start()
    try:
        assert (state_dir / name / "emu.pid").read_text().strip() == str(lab.pid)
        server = lab.spawn("server", ["iperf3", "-s", "-B", lab.address("server"), "-p", "5201"])
        await_port(lab.namespace("server"), 5201, address=lab.address("server"), process=server)
        client = lab.spawn("client", ["iperf3", "-c", lab.address("server"), "-p", "5201", "-t", "60"])
        wait_until(lambda: lab.counters()["paths"]["p0"]["forward"]["delivered_bytes"] >= 1_000_000,
                   what="1 MB through the lab", within=30, process=client)
        os.kill(lab.pid, signal.SIGKILL)
        cleanup_lab(name, state_dir=state_dir)
        assert lab_namespaces(name) == []
        assert not (state_dir / name).exists()
        for process in (server, client):
            # Our own children: reaping them proves they were killed by the cleanup.
            process.wait(timeout=10)
        # Idempotent.
        cleanup_lab(name, state_dir=state_dir)
    finally:
        lab.close()
    assert lab_namespaces(name) == []


def test_run_reports_failures_with_stderr(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    from protolab.errors import ToolError

    with Lab(_two_hosts(lab_name())) as lab:
        with pytest.raises(ToolError, match="status"):
            lab.run("client", ["sh", "-c", "echo boom >&2; exit 3"])
        completed = lab.run("client", ["sh", "-c", "exit 3"], check=False)
        assert completed.returncode == 3
        with pytest.raises(ToolError, match="timed out"):
            lab.run("client", ["sleep", "5"], timeout=0.5)
        with pytest.raises(LabError, match="no host"):
            lab.run("nosuch", ["true"])
        # each host really is its own namespace with its own address
        addresses = lab.run("server", ["ip", "-4", "-o", "addr", "show", "dev", "pl0"]).stdout
        assert "10.77.1.1/32" in addresses
        assert subprocess.run(["ip", "netns", "pids", lab.namespace("client")], capture_output=True,
                              text=True).returncode == 0


def test_watchdog_cleans_up_after_sigkill_by_itself(emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> None:
    name = lab_name()
    state_dir = tmp_path / "state"
    lab = Lab(_two_hosts(name), state_dir=state_dir)
    lab.start()
    try:
        sleeper = lab.spawn("server", ["sleep", "600"])
        os.kill(lab.pid, signal.SIGKILL)
        wait_until(lambda: not lab_namespaces(name) and not (state_dir / name).exists(),
                   what="the watchdog's cleanup", within=30)
        assert lab_namespaces(name) == []
        assert not (state_dir / name).exists()
        sleeper.wait(timeout=10)  # killed by the watchdog's cleanup, reaped by us
    finally:
        lab.close()


_OWNER_SCRIPT = """
import json, sys, time
from protolab.lab import Lab
from protolab.lab.cgroup import CpuLimit
lab = Lab(json.loads(sys.argv[1]), state_dir=sys.argv[2])
lab.start()
limit = CpuLimit(f"pl-{lab.name}-cpu")
limit.create()
sleeper = lab.spawn("server", ["sleep", "600"], cgroup=limit.path)
print(json.dumps({"emulator": lab.pid, "sleeper": sleeper.pid, "cgroup": str(limit.path),
                  "workdir": str(lab._workdir)}), flush=True)
time.sleep(600)
"""


def test_a_sigkilled_runner_leaves_no_lab_behind(emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> None:
    """The emulator watches the process that started it (`--owner-pid`): when a runner is
    SIGKILLed mid-run, its lab, the processes in it and its CPU-limit cgroup go too; its
    scratch directory (the emulator's output) goes when the next lab starts."""
    import sys

    name = lab_name()
    state_dir = tmp_path / "state"
    runner = subprocess.Popen([sys.executable, "-c", _OWNER_SCRIPT, json.dumps(_two_hosts(name)), str(state_dir)],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = runner.stdout.readline() if runner.stdout else ""
        assert line, "the runner did not start its lab"
        started = json.loads(line)
        assert lab_namespaces(name) and Path(started["cgroup"]).is_dir()
        runner.kill()
        runner.wait(timeout=10)
        wait_until(lambda: not (lab_namespaces(name) or (state_dir / name).exists() or Path(started["cgroup"]).exists()),
                   what="the emulator's cleanup after its owner's death", within=30)
        assert lab_namespaces(name) == []
        assert not (state_dir / name).exists()
        assert not Path(started["cgroup"]).exists(), "the lab's CPU-limit cgroup is removed"
        for pid in (started["emulator"], started["sleeper"]):
            assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
        workdir = Path(started["workdir"])
        assert workdir.is_dir() and (workdir / "emu.stderr").exists(), "a killed runner cannot remove its own"
        with Lab(_two_hosts(lab_name())) as next_lab:
            assert not workdir.exists(), "the next lab removes the dead runner's scratch directory"
            assert next_lab._workdir is not None and next_lab._workdir.is_dir()
    finally:
        if runner.poll() is None:
            runner.kill()
        cleanup_lab(name, state_dir=state_dir)


def test_control_socket_survives_garbage(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    import socket

    with Lab(_two_hosts(lab_name())) as lab:
        assert lab.ready is not None
        replies = []
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(lab.ready.control))
            stream = sock.makefile("rwb")
            for line in [b"not json", b"[1, 2]", b'{"cmd": 5}', b'{"cmd": "nosuch"}', b'{}',
                         b'{"cmd": "set_link", "link": 7, "params": {}}',
                         b'{"cmd": "set_link", "link": "p0.forward", "params": {"rate": -1}}',
                         b'{"cmd": "set_link", "link": "p0.forward", "params": {}, "seed": "x"}',
                         b'{"cmd": "pcap_start", "host": "client", "path": "/nonexistent/dir/x.pcap"}',
                         b'{"cmd": "set_routing", "pins": [{"left": "server", "right": "client", "path": "p0"}]}',
                         b"\xff\xfe\x00garbage"]:
                stream.write(line + b"\n")
                stream.flush()
                replies.append(json.loads(stream.readline()))
        assert all(r["ok"] is False and r["error"] for r in replies), replies
        assert "p0.forward" not in json.dumps(replies[5])  # a wrong type is named, not echoed blindly
        assert "rate" in replies[6]["error"]
        assert "seed" in replies[7]["error"]
        assert "left" in replies[9]["error"]
        # An oversized request closes that connection only; the emulator keeps serving.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(lab.ready.control))
            try:
                sock.sendall(b"{" + b" " * (2 << 20))
            except OSError:
                pass
        assert lab.counters()["links"]["client.up"]["dropped_packets"]["queue_full"] == 0
        assert lab.info()["lab"] == lab.name
