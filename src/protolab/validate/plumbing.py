"""The validation's lab and tools: the topology, the servers inside it, link set-up between
checks, the tool runs (irtt, ping, iperf3), the reference veth pair without the emulator, and the
environment recorded in the result file. The checks (`timing`, `traffic`) build on these."""

from __future__ import annotations

import math
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from protolab.errors import ToolError
from protolab.lab import Lab, dumbbell, host, ideal_link, ms_to_ns
from protolab.lab.watchdog import NamespaceWatchdog
from protolab.measure.proc import MachineCpu, machine_cpu
from protolab.measure.tools import (
    IperfResult,
    IrttResult,
    PingResult,
    parse_iperf3,
    parse_irtt,
    parse_ping,
)
from protolab.run import provenance
from protolab.validate.report import Status, ValidationConfig


CLIENT, SERVER = "client", "server"
ACCESS_LINKS = ["client.up", "client.down", "server.up", "server.down"]
PATHS = ["p0", "p1"]
PATH_LINKS = [f"{p}.{d}" for p in PATHS for d in ("forward", "reverse")]
IRTT_PORT = 2112
# The reference veth pair's addresses (a /30 of TEST-NET-2, unused by labs).
VETH_ADDRESSES = ("198.51.100.1", "198.51.100.2")
IPERF_PORTS = (5201, 5202)
IRTT_INTERVAL_MS = 1.0
# irtt's SCHED_RR priority where it runs in real time (always its server in the lab, the client
# under contention): below the emulator's loop (SCHED_FIFO 10 by default) and below the host's
# wake-up probe (protolab.validate.wakeups.PROBE_PRIORITY), which must measure the host and not
# irtt's own CPU time.
TOOL_RT_PRIORITY = 1
REALTIME_TOOL = ["chrt", "-r", str(TOOL_RT_PRIORITY)]
# irtt's timer skips sends it is late for; on this class of machine about 80-85% of the
# nominal 1 ms slots carry a probe, so durations are stretched to reach the probe count.
IRTT_SEND_EFFICIENCY = 0.8
PING_INTERVAL_S = 0.005
ECMP_SETTLE_S = 0.5
MTU_BYTES = 1500
# TCP buffers large enough for 1 Gbit/s at 40 ms RTT plus a 1-BDP queue (10 MB in flight).
TCP_BUFFER_SYSCTLS = {
    "net.ipv4.tcp_rmem": "4096 131072 33554432",
    "net.ipv4.tcp_wmem": "4096 16384 33554432",
}

StepCallback = Callable[[str], None]
# /proc/stat readings this often while a contention run lasts: short enough to see a vCPU held
# off for tens of ms (the lateness the contention checks look for), cheap (one small read).
CPU_SAMPLE_INTERVAL_S = 0.1


@contextmanager
def sampled_cpu(interval_s: float = CPU_SAMPLE_INTERVAL_S) -> Iterator[list[MachineCpu]]:
    """The machine's CPU accounting (/proc/stat) read every interval while the block runs, and
    once at each end: the list fills in as it goes and is complete after the block."""
    readings: list[MachineCpu] = [machine_cpu(Path("/proc/stat").read_text())]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(interval_s):
            readings.append(machine_cpu(Path("/proc/stat").read_text()))

    sampler = threading.Thread(target=sample, name="cpu-sampler", daemon=True)
    sampler.start()
    try:
        yield readings
    finally:
        stop.set()
        sampler.join()
        readings.append(machine_cpu(Path("/proc/stat").read_text()))


# ---------------------------------------------------------------------- topology and servers


def validation_topology(config: ValidationConfig) -> dict[str, Any]:
    """Client and server, two paths; the client-server pair is pinned to p0 until the ECMP check."""
    return dumbbell(
        config.lab,
        [host(CLIENT, "left", ["10.77.0.1"])],
        [host(SERVER, "right", ["10.77.1.1"])],
        paths=PATHS,
        seed=config.seed,
        pins=[(CLIENT, SERVER, "p0")],
        sysctls=TCP_BUFFER_SYSCTLS,
    )


def _await_listening(lab: Lab, host_name: str, port: int, proto: Literal["tcp", "udp"], within: float = 10.0) -> None:
    flag = "-Htln" if proto == "tcp" else "-Huln"
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        listening = lab.run(host_name, ["ss", flag, f"sport = :{port}"], timeout=10).stdout.strip()
        if listening:
            return
        time.sleep(0.1)
    raise ToolError(f"no {proto} listener on port {port} in host {host_name} after {within:g} s")


def _spawn_logged(lab: Lab, host_name: str, argv: list[str], log: Path) -> subprocess.Popen[Any]:
    """Start a process in a host, stdout to `log` and stderr to `log`.stderr."""
    with log.open("wb") as output, log.with_name(log.name + ".stderr").open("wb") as errors:
        return lab.spawn(host_name, argv, stdout=output, stderr=errors)


def start_servers(lab: Lab, workdir: Path) -> None:
    server_address = lab.address(SERVER)
    # -i 0: allow the client's 1 ms interval (the server's default minimum is 10 ms).
    # SCHED_RR (below the emulator's SCHED_FIFO): the server answers at once even when other
    # work loads the machine, so the probes measure the emulator (the contention checks).
    irtt_server = [*REALTIME_TOOL, "irtt", "server", "-b", f"{server_address}:{IRTT_PORT}", "-i", "0", "--timeout=0"]
    _spawn_logged(lab, SERVER, irtt_server, workdir / "irtt-server.log")
    for port in IPERF_PORTS:
        iperf_server = ["iperf3", "-s", "-B", server_address, "-p", str(port)]
        _spawn_logged(lab, SERVER, iperf_server, workdir / f"iperf3-server-{port}.log")
    _await_listening(lab, SERVER, IRTT_PORT, "udp")
    for port in IPERF_PORTS:
        _await_listening(lab, SERVER, port, "tcp")


def configure_links(lab: Lab, *, access: dict[str, Any], p0_forward: dict[str, Any], p0_reverse: dict[str, Any]) -> None:
    lab.set_link(ACCESS_LINKS, **ideal_link(**access))
    lab.set_link("p0.forward", **ideal_link(**p0_forward))
    lab.set_link("p0.reverse", **ideal_link(**p0_reverse))


# ---------------------------------------------------------------------- tools


def go_duration(ms: float) -> str:
    """A duration as irtt (Go's time.ParseDuration) reads it, exactly: integer nanoseconds."""
    return f"{ms_to_ns(ms)}ns"


def irtt_client(target: str, output: Path, probes: int, *, realtime: bool = False) -> tuple[list[str], float]:
    """irtt's client argv for `probes` probes to `target` (address), its JSON to `output`, and the
    timeout to run it with; `realtime`: under SCHED_RR at TOOL_RT_PRIORITY (below the emulator's loop)."""
    duration_ms = math.ceil(probes * IRTT_INTERVAL_MS / IRTT_SEND_EFFICIENCY)
    argv = [*(REALTIME_TOOL if realtime else []), "irtt", "client", "-i", go_duration(IRTT_INTERVAL_MS),
            "-d", go_duration(duration_ms), "-o", str(output), "--fill=rand", "-Q", f"{target}:{IRTT_PORT}"]
    return argv, duration_ms / 1000 + 60


def run_irtt(lab: Lab, workdir: Path, label: str, probes: int, *, realtime: bool = False) -> IrttResult:
    """irtt's client against the lab's server, its JSON in `workdir`/irtt-`label`.json;
    `realtime`: as the server runs (`irtt_client`)."""
    output = workdir / f"irtt-{label}.json"
    argv, timeout = irtt_client(lab.address(SERVER), output, probes, realtime=realtime)
    lab.run(CLIENT, argv, timeout=timeout)
    return parse_irtt(output.read_text())


def run_ping(lab: Lab, count: int) -> PingResult:
    argv = ["ping", "-q", "-n", "-c", str(count), "-i", str(PING_INTERVAL_S), "-W", "5", lab.address(SERVER)]
    # ping exits 1 when replies are missing; that is a measurement here, not an error.
    completed = lab.run(CLIENT, argv, timeout=count * PING_INTERVAL_S + 60, check=False)
    if completed.returncode not in (0, 1):
        raise ToolError(f"ping exited with status {completed.returncode}: {completed.stderr.strip()}")
    return parse_ping(completed.stdout)


def iperf3_argv(lab: Lab, port: int, seconds: int, omit: int, parallel: int = 1) -> list[str]:
    return [
        "iperf3", "-c", lab.address(SERVER), "-p", str(port), "-t", str(seconds), "-O", str(omit),
        "-P", str(parallel), "-C", "cubic", "-J",
    ]


def spawn_iperf3(lab: Lab, output: Path, argv: list[str]) -> subprocess.Popen[Any]:
    return _spawn_logged(lab, CLIENT, argv, output)


def finish_iperf3(process: subprocess.Popen[Any], output: Path, timeout: float) -> IperfResult:
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        process.kill()
        raise ToolError(f"iperf3 did not finish within {timeout:g} s") from exc
    try:
        return parse_iperf3(output.read_text())
    except ToolError as exc:
        stderr = output.with_name(output.name + ".stderr").read_text(errors="replace").strip()
        raise ToolError(f"{exc} (iperf3 exit status {process.returncode}; stderr: {stderr[-500:] or '-'})") from exc


def fmt_number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def status_within(measured: float, configured: float, tolerance: float) -> Status:
    return "pass" if not math.isnan(measured) and abs(measured - configured) <= tolerance else "fail"


@contextmanager
def veth_pair(lab: Lab, *, realtime: bool = False) -> Iterator[tuple[str, str]]:
    """Two namespaces joined by a bare veth pair (no emulator): the reference the tools' own
    latency is measured on. Named after the lab, removed by exact name. `realtime`: the irtt
    server under SCHED_RR at TOOL_RT_PRIORITY, as the lab's runs under contention."""
    a, b = f"pl-{lab.name}-vref-a", f"pl-{lab.name}-vref-b"
    commands = [
        ["ip", "netns", "add", a], ["ip", "netns", "add", b],
        ["ip", "link", "add", "pl-vref0", "netns", a, "type", "veth", "peer", "name", "pl-vref1", "netns", b],
        ["ip", "-n", a, "addr", "add", f"{VETH_ADDRESSES[0]}/30", "dev", "pl-vref0"],
        ["ip", "-n", b, "addr", "add", f"{VETH_ADDRESSES[1]}/30", "dev", "pl-vref1"],
        ["ip", "-n", a, "link", "set", "pl-vref0", "up"], ["ip", "-n", b, "link", "set", "pl-vref1", "up"],
    ]
    server: subprocess.Popen[Any] | None = None
    watchdog = NamespaceWatchdog([a, b])  # a killed validation leaves neither behind
    try:
        for command in commands:
            subprocess.run(command, check=True, capture_output=True, timeout=10)
        server = subprocess.Popen(["ip", "netns", "exec", b, *(REALTIME_TOOL if realtime else []), "irtt", "server", "-b", f"{VETH_ADDRESSES[1]}:{IRTT_PORT}",
                                   "-i", "0", "--timeout=0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        yield a, b
    except subprocess.CalledProcessError as exc:
        raise ToolError(f"reference veth pair: {' '.join(exc.cmd)}: {exc.stderr.decode(errors='replace').strip()}") from exc
    finally:
        if server is not None:
            server.kill()
            server.wait()
        for name in (a, b):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False, timeout=10)
        watchdog.stop()


def run_veth_irtt(namespace: str, output: Path, probes: int, *, realtime: bool = False) -> IrttResult:
    """irtt's client in the reference pair's first namespace against its server (`veth_pair`)."""
    argv, timeout = irtt_client(VETH_ADDRESSES[1], output, probes, realtime=realtime)
    subprocess.run(["ip", "netns", "exec", namespace, *argv], capture_output=True, timeout=timeout, check=True)
    return parse_irtt(output.read_text())


# ---------------------------------------------------------------------- provenance


def environment(binary: Path | None) -> dict[str, Any]:
    return provenance.environment({
        "protolab-net": [str(binary), "--version"] if binary else ["protolab-net", "--version"],
        "irtt": ["irtt", "version"],
        "iperf3": ["iperf3", "--version"],
        "ping": ["ping", "-V"],
    })
