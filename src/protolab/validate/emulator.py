"""Emulator validation: thesis 004 §6.1 (delay and loss with ping), tightened and extended.

Real tools run inside the lab's namespaces (irtt, ping, iperf3) and their measurements are
compared with the configured link parameters:

- delay:  per-link one-way delay d on both access links (RTT = 4d), min and mean RTT
- jitter: normal jitter on one path direction, RTT standard deviation (and IPDV)
- loss:   Bernoulli loss on both path directions, irtt's upstream/downstream loss vs an exact
          99% Clopper-Pearson interval
- rate:   TCP (cubic) goodput through a rate-limited path with a 1-BDP drop-tail queue
- ECMP:   two paths, ecmp-xor; every TCP flow stays on one path (ground-truth event log)
- WiFi:   a WiFi path direction (docs/emulator.md): the rate TCP gets with and without frame
          aggregation against the model's saturated rate; the residual loss after link-layer
          retries against p^(R+1); retries turned into delay (RTT up, no loss)

One lab serves every check; link parameters change live between them.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from protolab.errors import ToolError
from protolab.lab import Lab, dumbbell, host, ideal_link, mbps_to_bps, ms_to_ns
from protolab.measure.events import paths_per_flow, xor_path_index
from protolab.measure.stats import clopper_pearson
from protolab.measure.tools import (
    IperfResult,
    IrttResult,
    PingResult,
    parse_iperf3,
    parse_irtt,
    parse_ping,
)
from protolab.run import provenance
from protolab.validate.report import (
    SCHEMA,
    Check,
    Status,
    Thresholds,
    ValidationConfig,
    ValidationReport,
)

CLIENT, SERVER = "client", "server"
ACCESS_LINKS = ["client.up", "client.down", "server.up", "server.down"]
PATHS = ["p0", "p1"]
PATH_LINKS = [f"{p}.{d}" for p in PATHS for d in ("forward", "reverse")]
IRTT_PORT = 2112
# The reference veth pair's addresses (a /30 of TEST-NET-2, unused by labs).
VETH_ADDRESSES = ("198.51.100.1", "198.51.100.2")
IPERF_PORTS = (5201, 5202)
IRTT_INTERVAL_MS = 1.0
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


def _start_servers(lab: Lab, workdir: Path) -> None:
    server_address = lab.address(SERVER)
    # -i 0: allow the client's 1 ms interval (the server's default minimum is 10 ms).
    # SCHED_RR (below the emulator's SCHED_FIFO): the server answers at once even when other
    # work loads the machine, so the probes measure the emulator (the contention checks).
    irtt_server = ["chrt", "-r", "1", "irtt", "server", "-b", f"{server_address}:{IRTT_PORT}", "-i", "0", "--timeout=0"]
    _spawn_logged(lab, SERVER, irtt_server, workdir / "irtt-server.log")
    for port in IPERF_PORTS:
        iperf_server = ["iperf3", "-s", "-B", server_address, "-p", str(port)]
        _spawn_logged(lab, SERVER, iperf_server, workdir / f"iperf3-server-{port}.log")
    _await_listening(lab, SERVER, IRTT_PORT, "udp")
    for port in IPERF_PORTS:
        _await_listening(lab, SERVER, port, "tcp")


def _configure(lab: Lab, *, access: dict[str, Any], p0_forward: dict[str, Any], p0_reverse: dict[str, Any]) -> None:
    lab.set_link(ACCESS_LINKS, **ideal_link(**access))
    lab.set_link("p0.forward", **ideal_link(**p0_forward))
    lab.set_link("p0.reverse", **ideal_link(**p0_reverse))


# ---------------------------------------------------------------------- tools


def _go_duration(ms: float) -> str:
    """A duration as irtt (Go's time.ParseDuration) reads it, exactly: integer nanoseconds."""
    return f"{ms_to_ns(ms)}ns"


def _irtt(lab: Lab, workdir: Path, label: str, probes: int) -> IrttResult:
    output = workdir / f"irtt-{label}.json"
    duration_ms = math.ceil(probes * IRTT_INTERVAL_MS / IRTT_SEND_EFFICIENCY)
    argv = [
        "irtt", "client", "-i", _go_duration(IRTT_INTERVAL_MS), "-d", _go_duration(duration_ms), "-o", str(output),
        "--fill=rand", "-Q", f"{lab.address(SERVER)}:{IRTT_PORT}",
    ]
    lab.run(CLIENT, argv, timeout=duration_ms / 1000 + 60)
    return parse_irtt(output.read_text())


def _ping(lab: Lab, count: int) -> PingResult:
    argv = ["ping", "-q", "-n", "-c", str(count), "-i", str(PING_INTERVAL_S), "-W", "5", lab.address(SERVER)]
    # ping exits 1 when replies are missing; that is a measurement here, not an error.
    completed = lab.run(CLIENT, argv, timeout=count * PING_INTERVAL_S + 60, check=False)
    if completed.returncode not in (0, 1):
        raise ToolError(f"ping exited with status {completed.returncode}: {completed.stderr.strip()}")
    return parse_ping(completed.stdout)


def _iperf3_argv(lab: Lab, port: int, seconds: int, omit: int, parallel: int = 1) -> list[str]:
    return [
        "iperf3", "-c", lab.address(SERVER), "-p", str(port), "-t", str(seconds), "-O", str(omit),
        "-P", str(parallel), "-C", "cubic", "-J",
    ]


def _spawn_iperf3(lab: Lab, output: Path, argv: list[str]) -> subprocess.Popen[Any]:
    return _spawn_logged(lab, CLIENT, argv, output)


def _finish_iperf3(process: subprocess.Popen[Any], output: Path, timeout: float) -> IperfResult:
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


# ---------------------------------------------------------------------- check builders


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _within(measured: float, configured: float, tolerance: float) -> Status:
    return "pass" if not math.isnan(measured) and abs(measured - configured) <= tolerance else "fail"


def _rtt_check(
    tool: str, stat: str, delay_ms: float, measured: float, tolerance: float, details: dict[str, Any]
) -> Check:
    configured = 4 * delay_ms
    return Check(
        id=f"delay.{tool}.{stat}.{delay_ms:g}ms",
        group="delay",
        name=f"delay {delay_ms:g} ms/link: {tool} {stat} RTT",
        unit="ms",
        configured=configured,
        measured=measured,
        error=measured - configured,
        configured_text=f"{configured:g} ms",
        measured_text=f"{_fmt(measured)} ms",
        error_text=f"{measured - configured:+.3f} ms",
        criterion=f"|error| <= {tolerance:g} ms",
        status=_within(measured, configured, tolerance),
        details=details,
    )


@contextmanager
def _veth_pair(lab: Lab) -> Iterator[tuple[str, str]]:
    """Two namespaces joined by a bare veth pair (no emulator): the reference the tools' own
    latency is measured on. Named after the lab, removed by exact name."""
    a, b = f"pl-{lab.name}-vref-a", f"pl-{lab.name}-vref-b"
    commands = [
        ["ip", "netns", "add", a], ["ip", "netns", "add", b],
        ["ip", "link", "add", "pl-vref0", "netns", a, "type", "veth", "peer", "name", "pl-vref1", "netns", b],
        ["ip", "-n", a, "addr", "add", f"{VETH_ADDRESSES[0]}/30", "dev", "pl-vref0"],
        ["ip", "-n", b, "addr", "add", f"{VETH_ADDRESSES[1]}/30", "dev", "pl-vref1"],
        ["ip", "-n", a, "link", "set", "pl-vref0", "up"], ["ip", "-n", b, "link", "set", "pl-vref1", "up"],
    ]
    server: subprocess.Popen[Any] | None = None
    try:
        for command in commands:
            subprocess.run(command, check=True, capture_output=True, timeout=10)
        server = subprocess.Popen(["ip", "netns", "exec", b, "irtt", "server", "-b", f"{VETH_ADDRESSES[1]}:{IRTT_PORT}",
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


def _reference(lab: Lab, config: ValidationConfig, workdir: Path) -> dict[str, float]:
    """Mean RTT of irtt and ping on a bare veth pair: what the tools take by themselves."""
    with _veth_pair(lab) as (a, _):
        output = workdir / "irtt-veth.json"
        duration_ms = math.ceil(config.delay_probes * IRTT_INTERVAL_MS / IRTT_SEND_EFFICIENCY)
        subprocess.run(["ip", "netns", "exec", a, "irtt", "client", "-i", _go_duration(IRTT_INTERVAL_MS),
                        "-d", _go_duration(duration_ms), "-o", str(output), "--fill=rand",
                        "-Q", f"{VETH_ADDRESSES[1]}:{IRTT_PORT}"],
                       capture_output=True, timeout=duration_ms / 1000 + 60, check=True)
        ping = parse_ping(subprocess.run(["ip", "netns", "exec", a, "ping", "-q", "-n", "-c", str(config.delay_pings),
                                          "-i", str(PING_INTERVAL_S), "-W", "5", VETH_ADDRESSES[1]],
                                         capture_output=True, text=True, timeout=120, check=False).stdout)
        return {"irtt": parse_irtt(output.read_text()).rtt_mean_ms, "ping": ping.rtt_mean_ms}


def _floor_check(lab: Lab, config: ValidationConfig) -> Check:
    floor = lab.delay_floor_ms
    compensation_ns = lab.info().get("delay_compensation_ns", 0)
    text = "not measured (delay compensation off)" if floor is None else f"{floor:.3f} ms"
    return Check(
        id="delay.floor", group="delay", name="the lab's own round-trip latency (ping, no configured delay)",
        unit="ms", configured=None, measured=floor, error=None, configured_text="-", measured_text=text,
        error_text="-", criterion="reported; half of it is deducted per direction from configured delays",
        status="info", details={"delay_compensation_ns": compensation_ns, "compensation": config.delay_compensation})


def _delay_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    checks: list[Check] = [_floor_check(lab, config)]
    step("reference: irtt and ping on a bare veth pair")
    reference = _reference(lab, config, workdir)
    for tool, rtt in reference.items():
        checks.append(Check(
            id=f"delay.reference.{tool}", group="delay", name=f"{tool} mean RTT on a bare veth pair (the tool's own)",
            unit="ms", configured=None, measured=rtt, error=None, configured_text="-", measured_text=f"{rtt:.3f} ms",
            error_text="-", criterion="reported; mean RTT errors below are beyond it", status="info"))
    limits = config.thresholds
    floor = lab.delay_floor_ms or 0.0
    mean_limit = limits.mean_rtt_ms if config.delay_compensation else limits.mean_rtt_uncompensated_ms
    for delay_ms in config.delays_ms:
        step(f"delay {delay_ms:g} ms per link")
        _configure(lab, access={"delay_ns": ms_to_ns(delay_ms)}, p0_forward={}, p0_reverse={})
        irtt = _irtt(lab, workdir, f"delay-{delay_ms:g}", config.delay_probes)
        ping = _ping(lab, config.delay_pings)
        irtt_details = {
            "probes": irtt.packets_sent,
            "received": irtt.packets_received,
            "rtt_max_ms": irtt.rtt_max_ms,
            "rtt_std_ms": irtt.rtt_std_ms,
            "one_way_up_mean_ms": irtt.send_delay_mean_ms,
            "one_way_down_mean_ms": irtt.receive_delay_mean_ms,
        }
        ping_details = {"pings": ping.transmitted, "received": ping.received, "rtt_max_ms": ping.rtt_max_ms,
                        "rtt_mdev_ms": ping.rtt_mdev_ms}
        # A tool's mean RTT includes its own wake-ups (as on any network): the emulator's error
        # is what remains beyond the tool's RTT on a bare veth pair.
        means = [
            _rtt_check("irtt", "mean", delay_ms, irtt.rtt_mean_ms - reference["irtt"], mean_limit, irtt_details),
            _rtt_check("ping", "mean", delay_ms, ping.rtt_mean_ms - reference["ping"], mean_limit, ping_details),
        ]
        for check, tool, raw in ((means[0], "irtt", irtt.rtt_mean_ms), (means[1], "ping", ping.rtt_mean_ms)):
            check.name += " beyond its veth reference"
            check.details = {**check.details, "rtt_mean_ms": raw, "veth_reference_ms": reference[tool]}
        if config.delay_compensation and 4 * delay_ms <= floor:
            # Nothing to deduct from: the lab cannot be faster than its floor.
            for check in means:
                check.status, check.criterion = "info", f"configured RTT at or below the floor ({floor:.3f} ms)"
        checks += [
            _rtt_check("irtt", "min", delay_ms, irtt.rtt_min_ms, limits.min_rtt_ms, irtt_details), means[0],
            _rtt_check("ping", "min", delay_ms, ping.rtt_min_ms, limits.min_rtt_ms, ping_details), means[1],
        ]
    return checks


def _contention_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    """RTT error with CPU hogs beside the lab. irtt runs under SCHED_RR (below the
    emulator's SCHED_FIFO) so that it measures the emulator, not its own wait for a CPU behind
    the hogs (which lab processes shorten by their nice value, docs/emulator.md)."""
    step(f"under contention: {config.contention_hogs} CPU hogs")
    limits = config.thresholds
    delay_ms = config.contention_delay_ms
    _configure(lab, access={"delay_ns": ms_to_ns(delay_ms)}, p0_forward={}, p0_reverse={})
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
            for _ in range(config.contention_hogs)]
    try:
        time.sleep(0.5)
        lab.reset_counters()
        output = workdir / "irtt-contention.json"
        duration_ms = math.ceil(config.contention_probes * IRTT_INTERVAL_MS / IRTT_SEND_EFFICIENCY)
        argv = ["chrt", "-r", "1", "irtt", "client", "-i", _go_duration(IRTT_INTERVAL_MS),
                "-d", _go_duration(duration_ms), "-o", str(output), "--fill=rand",
                "-Q", f"{lab.address(SERVER)}:{IRTT_PORT}"]
        lab.run(CLIENT, argv, timeout=duration_ms / 1000 + 60)
        irtt = parse_irtt(output.read_text())
        late = (lab.counters().get("emulator") or {}).get("delivery_late") or {}
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    configured = 4 * delay_ms
    details = {"hogs": config.contention_hogs, "probes": irtt.packets_received, "rtt_mean_ms": irtt.rtt_mean_ms,
               "rtt_p99_ms": irtt.rtt_p99_ms, "emulator_delivery_late": late}
    checks = []
    for stat, measured, limit in (("p99.9", irtt.rtt_p999_ms, limits.contention_p999_ms),
                                  ("max", irtt.rtt_max_ms, limits.contention_max_ms)):
        error = measured - configured
        checks.append(Check(
            id=f"contention.irtt.{stat}", group="contention",
            name=f"{config.contention_hogs} CPU hogs, delay {delay_ms:g} ms/link: irtt {stat} RTT error",
            unit="ms", configured=configured, measured=measured, error=error, configured_text=f"{configured:g} ms",
            measured_text=f"{_fmt(measured)} ms", error_text=f"{error:+.3f} ms", criterion=f"error <= {limit:g} ms",
            status="pass" if error <= limit else "fail", details=details))
    return checks


def _jitter_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    checks: list[Check] = []
    tolerance = config.thresholds.jitter_relative
    for std_ms in config.jitter_std_ms:
        step(f"jitter {std_ms:g} ms (normal)")
        _configure(lab, access={}, p0_forward={"delay_ns": ms_to_ns(config.jitter_delay_ms), "jitter_ns": ms_to_ns(std_ms)},
                   p0_reverse={})
        irtt = _irtt(lab, workdir, f"jitter-{std_ms:g}", config.jitter_probes)
        relative = (irtt.rtt_std_ms - std_ms) / std_ms
        # Consecutive one-way delays are independent normals, so E|d_i - d_(i-1)| = 2 std / sqrt(pi).
        expected_ipdv = 2 * std_ms / math.sqrt(math.pi)
        checks.append(Check(
            id=f"jitter.rtt_std.{std_ms:g}ms",
            group="jitter",
            name=f"jitter {std_ms:g} ms normal (delay {config.jitter_delay_ms:g} ms): irtt RTT std",
            unit="ms",
            configured=std_ms,
            measured=irtt.rtt_std_ms,
            error=relative,
            configured_text=f"{std_ms:g} ms",
            measured_text=f"{_fmt(irtt.rtt_std_ms)} ms",
            error_text=f"{relative:+.1%}",
            criterion=f"|error| <= {tolerance:.0%}",
            status="pass" if abs(relative) <= tolerance else "fail",
            details={
                "probes": irtt.packets_sent,
                "rtt_mean_ms": irtt.rtt_mean_ms,
                "one_way_up_std_ms": irtt.send_delay_std_ms,
                "one_way_up_mean_ms": irtt.send_delay_mean_ms,
            },
        ))
        ipdv_error = irtt.ipdv_rtt_mean_ms - expected_ipdv
        checks.append(Check(
            id=f"jitter.ipdv.{std_ms:g}ms",
            group="jitter",
            name=f"jitter {std_ms:g} ms normal: irtt mean IPDV (round trip)",
            unit="ms",
            configured=expected_ipdv,
            measured=irtt.ipdv_rtt_mean_ms,
            error=ipdv_error,
            configured_text=f"{expected_ipdv:.3f} ms",
            measured_text=f"{_fmt(irtt.ipdv_rtt_mean_ms)} ms",
            error_text=f"{ipdv_error / expected_ipdv:+.1%}",
            criterion="report (2 std / sqrt(pi) expected)",
            status="info",
            details={"ipdv_send_mean_ms": irtt.ipdv_send_mean_ms},
        ))
    return checks


def _loss_check(
    check_id: str, name: str, percent: float, lost: int, trials: int, confidence: float, status_if_outside: Status,
    group: str = "loss",
) -> Check:
    p = percent / 100
    if trials <= 0:
        raise ToolError(f"{name}: no probes whose fate is known")
    lower, upper = clopper_pearson(lost, trials, confidence)
    observed = lost / trials
    inside = lower <= p <= upper
    return Check(
        id=check_id,
        group=group,
        name=name,
        unit="%",
        configured=percent,
        measured=100 * observed,
        error=100 * (observed - p),
        configured_text=f"{percent:g} %",
        measured_text=f"{100 * observed:.2f} % ({lost}/{trials})",
        error_text=f"[{100 * lower:.2f},{100 * upper:.2f}]%",
        criterion=f"p inside {confidence:.0%} Clopper-Pearson",
        status="pass" if inside else status_if_outside,
        details={"lost": lost, "trials": trials, "ci_low_percent": 100 * lower, "ci_high_percent": 100 * upper},
    )


def _loss_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    checks: list[Check] = []
    confidence = config.thresholds.loss_confidence
    for percent in config.loss_percent:
        step(f"loss {percent:g} %")
        loss = {"loss": percent / 100}
        _configure(lab, access={}, p0_forward=loss, p0_reverse=loss)
        # Reseeded per level: the verdict depends on the seed, not on what ran before.
        lab.set_link(["p0.forward", "p0.reverse"], seed=config.seed)
        irtt = _irtt(lab, workdir, f"loss-{percent:g}", config.loss_probes)
        checks.append(_loss_check(f"loss.irtt.up.{percent:g}", f"loss {percent:g} %: irtt upstream",
                                  percent, irtt.lost_up, irtt.upstream_trials, confidence, "fail"))
        checks.append(_loss_check(f"loss.irtt.down.{percent:g}", f"loss {percent:g} %: irtt downstream",
                                  percent, irtt.lost_down, irtt.downstream_trials, confidence, "fail"))
        # Thesis 004 Table 6 measured with ping: a round trip survives both directions.
        ping = _ping(lab, config.loss_pings)
        round_trip_percent = 100 * (1 - (1 - percent / 100) ** 2)
        checks.append(_loss_check(f"loss.ping.round_trip.{percent:g}",
                                  f"loss {percent:g} %: ping round trip (1-(1-p)^2)",
                                  round_trip_percent, ping.lost, ping.transmitted, confidence, "info"))
    return checks


def _link_rate(before: dict[str, Any], after: dict[str, Any], link: str) -> float:
    """Delivered IP bit/s on a link between two counter snapshots."""
    path_name, direction = link.split(".")
    delivered = [int(snapshot["paths"][path_name][direction]["delivered_bytes"]) for snapshot in (before, after)]
    seconds = (int(after["now_ns"]) - int(before["now_ns"])) / 1e9
    return 8 * (delivered[1] - delivered[0]) / seconds


def _rate_status(ratio: float, rate_mbit: float, limits: Thresholds) -> Status:
    if ratio > limits.goodput_max_ratio:
        return "fail"
    if ratio >= limits.goodput_min_ratio:
        return "pass"
    return "info" if rate_mbit >= limits.info_only_rate_mbit else "fail"


def _iperf3_with_counters(
    lab: Lab, config: ValidationConfig, output: Path
) -> tuple[IperfResult, dict[str, Any], dict[str, Any]]:
    """One iperf3 TCP run of the rate checks' length, with the link counters sampled inside the
    measured interval (after slow start): the emulator's own view of the achieved rate."""
    seconds, omit = config.rate_seconds, config.rate_omit_seconds
    process = _spawn_iperf3(lab, output, _iperf3_argv(lab, IPERF_PORTS[0], seconds, omit))
    time.sleep(omit + 0.5)
    before = lab.counters()
    time.sleep(max(seconds - 1.0, 0.5))
    after = lab.counters()
    return _finish_iperf3(process, output, timeout=seconds + omit + 60), before, after


def _rate_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    checks: list[Check] = []
    limits = config.thresholds
    for rate_mbit in config.rates_mbit:
        step(f"rate {rate_mbit:g} Mbit/s")
        bdp_bytes = max(MTU_BYTES, round(rate_mbit * 1e6 * config.rate_rtt_ms / 1e3 / 8))
        _configure(lab, access={"delay_ns": ms_to_ns(config.rate_rtt_ms / 4)},
                   p0_forward={"rate_bps": mbps_to_bps(rate_mbit), "queue_bytes": bdp_bytes}, p0_reverse={})
        seconds, omit = config.rate_seconds, config.rate_omit_seconds
        iperf, before, after = _iperf3_with_counters(lab, config, workdir / f"iperf3-rate-{rate_mbit:g}.json")
        configured_bps = rate_mbit * 1e6
        goodput_ratio = iperf.goodput_bps / configured_bps
        link_bps = _link_rate(before, after, "p0.forward")
        link_ratio = link_bps / configured_bps
        criterion = f"{limits.goodput_min_ratio:.0%} <= ratio <= {limits.goodput_max_ratio:.0%}"
        common = {"bdp_queue_bytes": bdp_bytes, "rtt_ms": config.rate_rtt_ms, "seconds": seconds, "omit": omit}
        checks.append(Check(
            id=f"rate.goodput.{rate_mbit:g}",
            group="rate",
            name=f"rate {rate_mbit:g} Mbit/s: iperf3 TCP goodput",
            unit="Mbit/s",
            configured=rate_mbit,
            measured=iperf.goodput_bps / 1e6,
            error=goodput_ratio,
            configured_text=f"{rate_mbit:g} Mbit/s",
            measured_text=f"{iperf.goodput_bps / 1e6:.3f} Mbit/s",
            error_text=f"{goodput_ratio:.1%}",
            criterion=criterion,
            status=_rate_status(goodput_ratio, rate_mbit, limits),
            details={**common, "retransmits": iperf.retransmits, "sender_mbit": iperf.sender_bps / 1e6,
                     "congestion": iperf.congestion},
        ))
        checks.append(Check(
            id=f"rate.link.{rate_mbit:g}",
            group="rate",
            name=f"rate {rate_mbit:g} Mbit/s: link delivered (counters)",
            unit="Mbit/s",
            configured=rate_mbit,
            measured=link_bps / 1e6,
            error=link_ratio,
            configured_text=f"{rate_mbit:g} Mbit/s",
            measured_text=f"{link_bps / 1e6:.3f} Mbit/s",
            error_text=f"{link_ratio:.1%}",
            criterion=criterion,
            status=_rate_status(link_ratio, rate_mbit, limits),
            details={**common, "window_s": (after["now_ns"] - before["now_ns"]) / 1e9},
        ))
    return checks


class EcmpRun(BaseModel):
    """What the ECMP transfers left behind: iperf3 results, the event log and final counters."""

    results: list[IperfResult]
    events_file: Path
    events: int | None
    events_dropped: int | None
    counters: dict[str, Any]


def _run_ecmp_transfers(lab: Lab, config: ValidationConfig, workdir: Path) -> EcmpRun:
    # Packets of earlier checks still queued on p0 would show up on the "wrong" path once the
    # pin is gone: let the lab drain and the last TCP closes finish first.
    lab.await_quiet()
    time.sleep(ECMP_SETTLE_S)
    lab.set_link(ACCESS_LINKS, **ideal_link(delay_ns=ms_to_ns(config.ecmp_access_delay_ms)))
    lab.set_link(PATH_LINKS, **ideal_link(rate_bps=mbps_to_bps(config.ecmp_rate_mbit), queue_packets=100))
    lab.set_routing("ecmp-xor", pins=[])
    # Linux connect() hands out ephemeral ports of one parity (even), so the xor hash
    # (SA^DA^SP^DP^PT mod 2) sends every flow to one server port down the same path. Two
    # servers on ports of opposite parity share the flows out, half each.
    per_server = [config.ecmp_flows // len(IPERF_PORTS)] * len(IPERF_PORTS)
    per_server[0] += config.ecmp_flows - sum(per_server)
    events_file = workdir / "ecmp-events.ndjson"
    lab.reset_counters()
    lab.events_start(events_file)
    try:
        runs = []
        for port, flows in zip(IPERF_PORTS, per_server, strict=True):
            output = workdir / f"iperf3-ecmp-{port}.json"
            argv = _iperf3_argv(lab, port, config.ecmp_seconds, 0, parallel=flows)
            runs.append((_spawn_iperf3(lab, output, argv), output))
        results = [_finish_iperf3(process, output, config.ecmp_seconds + 60) for process, output in runs]
    finally:
        events_reply = lab.events_stop()
    counters = lab.counters()
    lab.set_routing("ecmp-xor", pins=[{"left": CLIENT, "right": SERVER, "path": "p0"}])
    return EcmpRun(results=results, events_file=events_file, events=events_reply.get("events"),
                   events_dropped=events_reply.get("dropped"), counters=counters)


def _ecmp_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    step(f"ECMP: {config.ecmp_flows} flows over {len(PATHS)} paths")
    run = _run_ecmp_transfers(lab, config, workdir)
    with run.events_file.open() as lines:
        crossed = paths_per_flow(lines, PATHS)
    client_addr = lab.address(CLIENT)
    data_flows = {(local, remote) for result in run.results for local, remote in result.streams}
    logged_flows = {
        (key.port_a, key.port_b) if key.addr_a == client_addr else (key.port_b, key.port_a) for key in crossed
    }
    single_path = {key: next(iter(names)) for key, names in crossed.items() if len(names) == 1}
    on_hash_path = [
        key for key, name in single_path.items()
        if name == PATHS[xor_path_index(key.addr_a, key.addr_b, key.port_a, key.port_b, key.proto, len(PATHS))]
    ]
    flows_per_path = Counter(single_path.values())
    path_bytes = {
        name: sum(run.counters["paths"][name][direction]["delivered_bytes"] for direction in ("forward", "reverse"))
        for name in PATHS
    }
    shares = {name: path_bytes[name] / (sum(path_bytes.values()) or 1) for name in PATHS}
    common = {"events": run.events, "events_dropped": run.events_dropped}
    n_flows, n_single, n_hash = len(crossed), len(single_path), len(on_hash_path)
    all_data_logged = data_flows <= logged_flows and len(data_flows) == config.ecmp_flows
    min_share = config.thresholds.ecmp_min_path_share
    return [
        Check(
            id="ecmp.single_path",
            group="ecmp",
            name=f"ECMP: every TCP flow on exactly one path ({len(data_flows)} iperf3 data flows)",
            unit="flows",
            configured=float(n_flows),
            measured=float(n_single),
            error=float(n_flows - n_single),
            configured_text=f"{n_flows} flows",
            measured_text=f"{n_single} on one path",
            error_text=f"{n_flows - n_single} split",
            criterion="all flows on one path; every iperf3 data flow in the event log",
            status="pass" if n_flows > 0 and n_single == n_flows and all_data_logged else "fail",
            details={
                **common,
                "flows": {f"{k.addr_a}:{k.port_a}-{k.addr_b}:{k.port_b}": sorted(v) for k, v in crossed.items()},
                "data_flows": sorted(data_flows),
            },
        ),
        Check(
            id="ecmp.xor_hash",
            group="ecmp",
            name="ECMP: each flow on path (SA^DA^SP^DP^PT) mod 2",
            unit="flows",
            configured=float(n_single),
            measured=float(n_hash),
            error=float(n_single - n_hash),
            configured_text=f"{n_single} flows",
            measured_text=f"{n_hash} on hash path",
            error_text=f"{n_single - n_hash} off",
            criterion="all flows on the xor-hash path",
            status="pass" if n_single and n_hash == n_single else "fail",
            details=common,
        ),
        Check(
            id="ecmp.both_paths",
            group="ecmp",
            name="ECMP: both paths carry traffic (counters)",
            unit="share",
            configured=None,
            measured=min(shares.values()),
            error=None,
            configured_text="both used",
            measured_text=", ".join(f"{p} {shares[p]:.0%} ({flows_per_path.get(p, 0)} flows)" for p in PATHS),
            error_text="-",
            criterion=f"each path >= {min_share:.0%} of bytes",
            status="pass" if min(shares.values()) >= min_share else "fail",
            details={**common, "path_bytes": path_bytes, "flows_per_path": dict(flows_per_path),
                     "goodput_mbit": [r.goodput_bps / 1e6 for r in run.results]},
        ),
    ]


# ---------------------------------------------------------------------- WiFi

# Bytes an MPDU adds to its IP packet (netmodel::MPDU_OVERHEAD_BYTES; docs/emulator.md).
WIFI_MPDU_OVERHEAD_BYTES = 42


def wifi_saturated_rate_bps(wifi: Mapping[str, Any], packet_bytes: int = MTU_BYTES) -> float:
    """IP bit/s of a saturated WiFi link direction (`wifi` as the emulator reports it): full
    A-MPDUs of `packet_bytes` packets over the mean TXOP, no frame errors, no other stations
    (docs/emulator.md, "WiFi links")."""
    mpdu_bits = (packet_bytes + WIFI_MPDU_OVERHEAD_BYTES) * 8

    def airtime_ns(frames: int) -> float:
        return float(frames * mpdu_bits * 1e9 / wifi["phy_rate_bps"])

    frames = 1
    while (frames < wifi["max_ampdu_frames"] and (frames + 1) * mpdu_bits / 8 <= wifi["max_ampdu_bytes"]
           and airtime_ns(frames + 1) <= wifi["max_ampdu_duration_ns"]):
        frames += 1
    txop_ns = (wifi["difs_ns"] + wifi["cw_min"] / 2 * wifi["slot_ns"] + wifi["preamble_ns"] + airtime_ns(frames)
               + wifi["sifs_ns"] + wifi["block_ack_ns"])
    return float(frames * packet_bytes * 8 / (txop_ns / 1e9))


def _wifi_rate_check(lab: Lab, config: ValidationConfig, workdir: Path, frames: int) -> Check:
    limits = config.thresholds
    _configure(lab, access={"delay_ns": ms_to_ns(config.rate_rtt_ms / 4)}, p0_forward={}, p0_reverse={})
    effective = lab.set_link("p0.forward", **ideal_link(wifi={"max_ampdu_frames": frames, "frame_error_rate": 0.0}))
    expected_bps = wifi_saturated_rate_bps(effective["p0.forward"]["wifi"])
    iperf, before, after = _iperf3_with_counters(lab, config, workdir / f"iperf3-wifi-{frames}.json")
    link_bps = _link_rate(before, after, "p0.forward")
    ratio = link_bps / expected_bps
    return Check(
        id=f"wifi.rate.ampdu{frames}",
        group="wifi",
        name=f"WiFi, A-MPDUs of up to {frames} frames: TCP on a saturated link (counters)",
        unit="Mbit/s",
        configured=expected_bps / 1e6,
        measured=link_bps / 1e6,
        error=ratio,
        configured_text=f"{expected_bps / 1e6:.1f} Mbit/s (model: full A-MPDUs, mean TXOP)",
        measured_text=f"{link_bps / 1e6:.1f} Mbit/s",
        error_text=f"{ratio:.1%}",
        criterion=f"{limits.goodput_min_ratio:.0%} <= ratio <= {limits.goodput_max_ratio:.0%}",
        status=_rate_status(ratio, expected_bps / 1e6, limits),
        details={"iperf3_goodput_mbit": iperf.goodput_bps / 1e6, "retransmits": iperf.retransmits,
                 "rtt_ms": config.rate_rtt_ms, "seconds": config.rate_seconds},
    )


def _wifi_retry_checks(lab: Lab, config: ValidationConfig, workdir: Path, error_rate: float, retries: int) -> list[Check]:
    _configure(lab, access={}, p0_forward={}, p0_reverse={})
    label = f"fer{error_rate:g}.r{retries}"
    rtt_ms: dict[str, float] = {}
    for name, rate in (("clean", 0.0), ("errors", error_rate)):
        wifi = {"frame_error_rate": rate, "retry_limit": retries}
        lab.set_link(["p0.forward", "p0.reverse"], seed=config.seed, **ideal_link(wifi=wifi))
        irtt = _irtt(lab, workdir, f"wifi-{label}-{name}", config.loss_probes)
        rtt_ms[name] = irtt.rtt_mean_ms
    residual = 100 * error_rate ** (retries + 1)
    confidence = config.thresholds.loss_confidence
    checks = [
        _loss_check(f"wifi.residual_loss.{direction}.{label}",
                    f"WiFi FER {error_rate:g}, {retries} retries: irtt {direction}stream loss (FER^(R+1))",
                    residual, lost, trials, confidence, "fail", group="wifi")
        for direction, lost, trials in (("up", irtt.lost_up, irtt.upstream_trials),
                                        ("down", irtt.lost_down, irtt.downstream_trials))
    ]
    # Every failed attempt costs its frame (and those behind it) at least one more TXOP: the
    # retries show as delay, never below the clean link's.
    added = rtt_ms["errors"] - rtt_ms["clean"]
    checks.append(Check(
        id=f"wifi.retry_delay.{label}", group="wifi",
        name=f"WiFi FER {error_rate:g}, {retries} retries: irtt mean RTT added by retries",
        unit="ms", configured=None, measured=added, error=None,
        configured_text=f"> 0 (clean {rtt_ms['clean']:.3f} ms)", measured_text=f"{added:+.3f} ms", error_text="-",
        criterion="mean RTT with frame errors > without", status="pass" if added > 0 else "fail",
        details={"rtt_mean_clean_ms": rtt_ms["clean"], "rtt_mean_errors_ms": rtt_ms["errors"]},
    ))
    return checks


def _wifi_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    checks: list[Check] = []
    for frames in config.wifi_ampdu_frames:
        step(f"WiFi A-MPDU {frames}")
        checks.append(_wifi_rate_check(lab, config, workdir, frames))
    for error_rate, retries in config.wifi_retries:
        step(f"WiFi FER {error_rate:g}, {retries} retries")
        checks += _wifi_retry_checks(lab, config, workdir, error_rate, retries)
    _configure(lab, access={}, p0_forward={}, p0_reverse={})
    return checks


# ---------------------------------------------------------------------- provenance


def environment(binary: Path | None) -> dict[str, Any]:
    return provenance.environment({
        "protolab-net": [str(binary), "--version"] if binary else ["protolab-net", "--version"],
        "irtt": ["irtt", "version"],
        "iperf3": ["iperf3", "--version"],
        "ping": ["ping", "-V"],
    })


# ---------------------------------------------------------------------- entry point


@contextmanager
def _workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="protolab-validate-") as name:
        yield Path(name)


def run_validation(
    config: ValidationConfig,
    *,
    binary: str | os.PathLike[str] | None = None,
    state_dir: Path | None = None,
    step: StepCallback = lambda text: None,
) -> ValidationReport:
    started_ns = time.time_ns()
    started = time.monotonic()
    checks: list[Check] = []
    counters: dict[str, Any] = {}
    with _workdir() as workdir, Lab(validation_topology(config), state_dir=state_dir, binary=binary,
                                    offload=config.offload) as lab:
        if config.delay_compensation:
            lab.calibrate_delay(CLIENT, SERVER)
        _start_servers(lab, workdir)
        for group, run_group in (
            ("delay", _delay_checks),
            ("jitter", _jitter_checks),
            ("loss", _loss_checks),
            ("rate", _rate_checks),
            ("ecmp", _ecmp_checks),
            ("contention", _contention_checks),
            ("wifi", _wifi_checks),
        ):
            checks += run_group(lab, config, workdir, step)
            counters[group] = lab.counters()
        topology = lab.topology
        env = environment(lab.binary)
    counted = Counter(check.status for check in checks)
    summary: dict[str, int] = {status: counted.get(status, 0) for status in ("pass", "fail", "info")}
    return ValidationReport(
        schema=SCHEMA,
        created_unix_ns=started_ns,
        duration_s=time.monotonic() - started,
        config=config,
        environment=env,
        topology=topology,
        checks=checks,
        counters=counters,
        summary=summary,
        ok=summary["fail"] == 0,
    )
