"""The validation's timing checks: delay (min and mean RTT against 4d, beyond each tool's own
latency on a bare veth pair), jitter (RTT spread and IPDV) and RTT errors under CPU contention."""

from __future__ import annotations

import functools
import math
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from protolab.files import parse_json
from protolab.lab import Lab, ms_to_ns
from protolab.measure.proc import MachineCpu, cpu_shares, peak_share
from protolab.measure.tools import IrttResult, parse_ping
from protolab.validate.decomposition import (
    Decomposition,
    clock_offset,
    decompose,
    probes_from_irtt,
    read_udp_capture,
)
from protolab.validate.disturbance import (
    LevelAttempt,
    Tail,
    lateness_outside_host_stalls,
    measure_level,
    tail_outside_host_stalls,
    timed_rtts,
)
from protolab.validate.plumbing import (
    CLIENT,
    CPU_SAMPLE_INTERVAL_S,
    IRTT_PORT,
    PING_INTERVAL_S,
    SERVER,
    VETH_ADDRESSES,
    StepCallback,
    configure_links,
    fmt_number,
    run_irtt,
    run_ping,
    run_veth_irtt,
    sampled_cpu,
    status_within,
    veth_pair,
)
from protolab.validate.report import Check, Status, Thresholds, ValidationConfig
from protolab.validate.wakeups import host_stalls, host_wakeups, judge_late_passes, wakeup_check

# Paired readings of the emulator's clock and the wall clock before and after a split irtt run;
# the one with the shortest round trip sets the offset.
CLOCK_READINGS = 5


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
        measured_text=f"{fmt_number(measured)} ms",
        error_text=f"{measured - configured:+.3f} ms",
        criterion=f"|error| <= {tolerance:g} ms",
        status=status_within(measured, configured, tolerance),
        details=details,
    )


def _reference(lab: Lab, config: ValidationConfig, workdir: Path) -> dict[str, float]:
    """Mean RTT of irtt and ping on a bare veth pair: what the tools take by themselves."""
    with veth_pair(lab) as (a, _):
        irtt = run_veth_irtt(a, workdir / "irtt-veth.json", config.delay_probes)
        ping = parse_ping(subprocess.run(["ip", "netns", "exec", a, "ping", "-q", "-n", "-c", str(config.delay_pings),
                                          "-i", str(PING_INTERVAL_S), "-W", "5", VETH_ADDRESSES[1]],
                                         capture_output=True, text=True, timeout=120, check=False).stdout)
        return {"irtt": irtt.rtt_mean_ms, "ping": ping.rtt_mean_ms}


def _floor_check(lab: Lab, config: ValidationConfig) -> Check:
    floor = lab.delay_floor_ms
    compensation_ns = lab.info().get("delay_compensation_ns", 0)
    text = "not measured (delay compensation off)" if floor is None else f"{floor:.3f} ms"
    return Check(
        id="delay.floor", group="delay", name="the lab's own round-trip latency (ping, no configured delay)",
        unit="ms", configured=None, measured=floor, error=None, configured_text="-", measured_text=text,
        error_text="-", criterion="reported; half of it is deducted per direction from configured delays",
        status="info", details={"delay_compensation_ns": compensation_ns, "compensation": config.delay_compensation})


def lateness_check(check_id: str, group: str, name: str, late: Mapping[str, Any], limits: Thresholds,
                   outside_host_stalls: Mapping[str, Any] | None = None) -> Check:
    """The emulator's own check of a level: its delivery lateness (`delivery_late` of its counters,
    reset before the level), the delay it added beyond the model's, by its own clock. The 99.9th
    percentile is judged without the late packets of passes that waited through a host stall of
    their CPU when there were any (`outside_host_stalls`, protolab.validate.disturbance)."""
    packets = int(late.get("packets") or 0)
    mean_ms = float(late.get("mean_ns") or 0) / 1e6
    p999_ns = late.get("p999_ns_at_most")
    # None with packets: the 99.9th percentile lies beyond the histogram's last edge (100 ms).
    p999_ms = math.inf if p999_ns is None else float(p999_ns) / 1e6
    judged_ms, stall_text = p999_ms, ""
    if outside_host_stalls:
        kept_ns = outside_host_stalls["p999_ns_at_most"]
        judged_ms = 0.0 if kept_ns is None else float(kept_ns) / 1e6
        stall_text = (f"; without the {outside_host_stalls['held_packets']} late packets of host stalls "
                       f"p99.9 <= {fmt_number(judged_ms)} ms")
    mean_limit, p999_limit = limits.emulator_late_mean_ms, limits.emulator_late_p999_ms
    status: Status = "info" if packets == 0 else (
        "pass" if mean_ms <= mean_limit and judged_ms <= p999_limit else "fail")
    return Check(
        id=check_id, group=group, name=name, unit="ms", configured=0.0, measured=mean_ms, error=mean_ms,
        configured_text="0 ms", measured_text=f"mean {mean_ms:.4f} ms, p99.9 <= {fmt_number(p999_ms)} ms{stall_text}",
        error_text=f"{mean_ms:+.4f} ms",
        criterion=f"mean <= {mean_limit:g} ms, p99.9 <= {p999_limit:g} ms (emulator's counters; outside host "
                  "stalls)",
        status=status, details={"delivery_late": dict(late), "p999_ms_at_most": p999_ms, "packets": packets,
                                "outside_host_stalls": dict(outside_host_stalls) if outside_host_stalls else None})


def _emulator_lateness(lab: Lab) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The emulator's delivery lateness and its late passes since the counters were reset."""
    emulator = lab.counters().get("emulator") or {}
    return dict(emulator.get("delivery_late") or {}), list(emulator.get("late_passes") or [])


def delay_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    checks: list[Check] = [_floor_check(lab, config)]
    step("reference: irtt and ping on a bare veth pair")
    reference = _reference(lab, config, workdir)
    for tool, rtt in reference.items():
        checks.append(Check(
            id=f"delay.reference.{tool}", group="delay", name=f"{tool} mean RTT on a bare veth pair (the tool's own)",
            unit="ms", configured=None, measured=rtt, error=None, configured_text="-", measured_text=f"{rtt:.3f} ms",
            error_text="-", criterion="reported; mean RTT errors below are beyond it", status="info"))
    for delay_ms in config.delays_ms:
        step(f"delay {delay_ms:g} ms per link")
        checks += measure_level(
            functools.partial(_delay_level, lab, config, workdir, delay_ms, reference),
            attempts=config.level_attempts, limit_ms=config.thresholds.emulator_late_p999_ms,
            level_id=f"delay.{delay_ms:g}ms", group="delay", level_name=f"delay {delay_ms:g} ms/link", again=step)
    return checks


def _delay_level(
    lab: Lab, config: ValidationConfig, workdir: Path, delay_ms: float, reference: dict[str, float], attempt: int
) -> LevelAttempt:
    """One delay level (one attempt at it, protolab.validate.disturbance): the tools' min and mean
    RTT (end to end) and the emulator's lateness (its own check, which the end-to-end ones name),
    plus the split of irtt's delay if asked."""
    limits = config.thresholds
    floor = lab.delay_floor_ms or 0.0
    mean_limit = limits.mean_rtt_ms if config.delay_compensation else limits.mean_rtt_uncompensated_ms
    configure_links(lab, access={"delay_ns": ms_to_ns(delay_ms)}, p0_forward={}, p0_reverse={})
    lab.reset_counters()
    label = f"delay-{delay_ms:g}" + (f"-attempt{attempt}" if attempt > 1 else "")
    split: Decomposition | None = None
    with host_wakeups(workdir, label) as probe:
        if config.decompose:
            irtt, split = irtt_split(lab, workdir, label, config.delay_probes, 2 * ms_to_ns(delay_ms))
        else:
            irtt = run_irtt(lab, workdir, label, config.delay_probes)
        ping = run_ping(lab, config.delay_pings)
    late, late_passes = _emulator_lateness(lab)
    emulator = lateness_check(f"delay.emulator.{delay_ms:g}ms", "delay",
                              f"delay {delay_ms:g} ms/link: the emulator's delivery lateness", late, limits,
                              lateness_outside_host_stalls(late, late_passes, probe.summary))
    host = wakeup_check(f"delay.host.wakeups.{delay_ms:g}ms", "delay",
                        f"delay {delay_ms:g} ms/link: the host's real-time wake-ups (same minutes)", probe.summary,
                        limits)
    judge_late_passes(host, late_passes, probe.summary, emulator)
    emulator.host_check = host.id
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
    checks = [
        _rtt_check("irtt", "min", delay_ms, irtt.rtt_min_ms, limits.min_rtt_ms, irtt_details), means[0],
        _rtt_check("ping", "min", delay_ms, ping.rtt_min_ms, limits.min_rtt_ms, ping_details), means[1],
    ]
    for check in checks:
        check.emulator_check = emulator.id
    checks += [emulator, host]
    if split is not None:
        # The compensation comes out of the configured delay, never below zero.
        deducted_rtt_ns = 2 * min(int(lab.info().get("delay_compensation_ns", 0)), 2 * ms_to_ns(delay_ms))
        checks.append(split_check(delay_ms, split, reference["irtt"], deducted_rtt_ns))
    return LevelAttempt(checks, probe.summary)


def irtt_split(
    lab: Lab, workdir: Path, label: str, probes: int, delay_one_way_ns: int, *, realtime: bool = False
) -> tuple[IrttResult, Decomposition]:
    """irtt with both hosts captured, its delays split at the emulator (protolab.validate.decomposition).
    The emulator's clock is paired with the wall clock by `info` requests around the run."""
    captures = {name: workdir / f"split-{label}-{name}.pcap" for name in (CLIENT, SERVER)}
    readings: list[tuple[int, int, int]] = []
    for name, path in captures.items():
        lab.pcap_start(name, path)
    try:
        readings += [_paired_reading(lab) for _ in range(CLOCK_READINGS)]
        irtt = run_irtt(lab, workdir, label, probes, realtime=realtime)
        readings += [_paired_reading(lab) for _ in range(CLOCK_READINGS)]
    finally:
        for name in captures:
            lab.pcap_stop(name)
    offset, uncertainty = clock_offset(readings)
    irtt_file = workdir / f"irtt-{label}.json"
    compensation_ns = int(lab.info().get("delay_compensation_ns", 0))
    split = decompose(
        probes_from_irtt(parse_json(irtt_file.read_text()), str(irtt_file)),
        read_udp_capture(captures[CLIENT].read_bytes(), str(captures[CLIENT])),
        read_udp_capture(captures[SERVER].read_bytes(), str(captures[SERVER])),
        server=(lab.address(SERVER), IRTT_PORT), clock_offset_ns=offset, clock_uncertainty_ns=uncertainty,
        configured_one_way_ns=max(0, delay_one_way_ns - compensation_ns),
    )
    return irtt, split


def _paired_reading(lab: Lab) -> tuple[int, int, int]:
    """(wall clock before, the emulator's clock, wall clock after) around one `info` request."""
    before = time.time_ns()
    emulator_ns = int(lab.info()["now_ns"])
    return before, emulator_ns, time.time_ns()


def split_check(delay_ms: float, split: Decomposition, veth_reference_ms: float, deducted_rtt_ns: int) -> Check:
    """irtt's mean RTT error beyond its veth reference, split into the emulator's share (its time
    beyond the model's delays, from the captures) and the hosts' (tools, kernels, TUNs), as a
    reported row. The two add up to the end-to-end error over the matched probes."""
    # The delay compensation takes the lab's mean floor out of the model's delays to pay for the
    # hosts' TUN crossings: the hosts' share is what they take beyond the reference and it.
    hosts_beyond_ms = split.hosts_ms - veth_reference_ms - deducted_rtt_ns / 1e6
    return Check(
        id=f"delay.irtt.split.{delay_ms:g}ms", group="delay",
        name=f"delay {delay_ms:g} ms/link: irtt mean RTT error split (captures)",
        unit="ms", configured=None, measured=split.emulator_excess_ms, error=None, configured_text="-",
        measured_text=f"emulator {split.emulator_excess_ms:+.3f}, hosts {hosts_beyond_ms:+.3f} ms", error_text="-",
        criterion="reported: the emulator's and the hosts' share of the mean RTT error",
        status="info", details={**split.model_dump(), "hosts_beyond_reference_ms": hosts_beyond_ms,
                                "veth_reference_ms": veth_reference_ms, "deducted_rtt_ns": deducted_rtt_ns})


def contention_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    """RTT error with CPU hogs beside the lab. irtt runs under SCHED_RR (below the
    emulator's SCHED_FIFO) so that it measures the emulator, not its own wait for a CPU behind
    the hogs (which lab processes shorten by their nice value, docs/emulator.md)."""
    step(f"under contention: {config.contention_hogs} CPU hogs")
    configure_links(lab, access={"delay_ns": ms_to_ns(config.contention_delay_ms)}, p0_forward={}, p0_reverse={})
    return measure_level(functools.partial(_contention_level, lab, config, workdir), attempts=config.level_attempts,
                         limit_ms=config.thresholds.emulator_late_p999_ms, level_id="contention", group="contention",
                         level_name=f"{config.contention_hogs} CPU hogs", again=step)


def _contention_level(lab: Lab, config: ValidationConfig, workdir: Path, attempt: int) -> LevelAttempt:
    """One attempt at the contention group (protolab.validate.disturbance): irtt through the lab
    and on a bare veth pair under the same hogs, the host's probe beside both (a host stall
    during the reference alone would widen the tool's own tail and so loosen the check)."""
    limits = config.thresholds
    delay_ms = config.contention_delay_ms
    label = "contention" + (f"-attempt{attempt}" if attempt > 1 else "")
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
            for _ in range(config.contention_hogs)]
    split: Decomposition | None = None
    try:
        time.sleep(0.5)
        lab.reset_counters()
        with host_wakeups(workdir, label) as probe:
            with sampled_cpu() as cpu:
                if config.decompose:
                    irtt, split = irtt_split(lab, workdir, label, config.contention_probes,
                                             2 * ms_to_ns(delay_ms), realtime=True)
                else:
                    irtt = run_irtt(lab, workdir, label, config.contention_probes, realtime=True)
            late, late_passes = _emulator_lateness(lab)
            # The same tool under the same hogs with no emulator in the way: its own tail.
            reference_file = workdir / f"irtt-veth-{label}.json"
            with veth_pair(lab, realtime=True) as (a, _):
                reference = run_veth_irtt(a, reference_file, config.contention_probes, realtime=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    configured = 4 * delay_ms
    # Any CPU's: the probes' path crosses the client, the emulator and the server, wherever they ran.
    stalls = [stall for per_cpu in host_stalls(probe.summary).values() for stall in per_cpu]
    lab_tail, own_tail = (tail_outside_host_stalls(timed_rtts(parse_json(path.read_text()), str(path)), stalls)
                          for path in (workdir / f"irtt-{label}.json", reference_file))
    details = {"hogs": config.contention_hogs, "probes": irtt.packets_received, "rtt_mean_ms": irtt.rtt_mean_ms,
               "rtt_p99_ms": irtt.rtt_p99_ms, "emulator_delivery_late": late,
               "host_stalls": len(stalls), "host_stalled_ms": sum(end - start for start, end in stalls) / 1e6,
               "left_out": lab_tail.left_out, "veth_left_out": own_tail.left_out}
    emulator = lateness_check("contention.emulator", "contention",
                              f"{config.contention_hogs} CPU hogs: the emulator's delivery lateness", late, limits,
                              lateness_outside_host_stalls(late, late_passes, probe.summary))
    host = wakeup_check("contention.host.wakeups", "contention",
                        f"{config.contention_hogs} CPU hogs: the host's real-time wake-ups (same minutes)",
                        probe.summary, limits)
    judge_late_passes(host, late_passes, probe.summary, emulator)
    emulator.host_check = host.id
    checks: list[Check] = [_contention_reference_check(own_tail, reference, config.contention_hogs)]
    left_out = (f"; {lab_tail.left_out} + {own_tail.left_out} probes in host stalls left out"
                if lab_tail.left_out or own_tail.left_out else "")
    for stat, measured, tool_own, every, every_own, limit in (
            ("p99.9", lab_tail.p999_ms, own_tail.p999_ms, irtt.rtt_p999_ms, reference.rtt_p999_ms,
             limits.contention_p999_ms),
            ("max", lab_tail.max_ms, own_tail.max_ms, irtt.rtt_max_ms, reference.rtt_max_ms,
             limits.contention_max_ms)):
        # As the mean RTT checks: the error beyond what the tool takes by itself on a bare veth
        # pair, here its same statistic under the same hogs (measured in the same minute), both
        # over the probes not in flight while the host stalled a CPU (protolab.validate.disturbance).
        error = measured - configured - tool_own
        checks.append(Check(
            id=f"contention.irtt.{stat}", group="contention",
            name=f"{config.contention_hogs} CPU hogs, delay {delay_ms:g} ms/link: irtt {stat} RTT error "
                 "beyond its veth reference",
            unit="ms", configured=configured, measured=measured, error=error, configured_text=f"{configured:g} ms",
            measured_text=f"{fmt_number(measured)} ms (veth {fmt_number(tool_own)} ms){left_out}",
            error_text=f"{error:+.3f} ms", criterion=f"error <= {limit:g} ms (outside host stalls)",
            status="pass" if error <= limit else "fail",
            details={**details, "error_without_reference_ms": measured - configured, "veth_reference_ms": tool_own,
                     "every_probe": {"rtt_ms": every, "veth_ms": every_own,
                                     "error_ms": every - configured - every_own}},
            emulator_check=emulator.id))
    checks += [emulator, host, steal_check(cpu, config.contention_hogs)]
    if split is not None:
        checks.append(tail_split_check(split, configured, config.contention_hogs))
    return LevelAttempt(checks, probe.summary)


def _contention_reference_check(tail: Tail, reference: IrttResult, hogs: int) -> Check:
    return Check(
        id="contention.reference.irtt", group="contention",
        name=f"{hogs} CPU hogs: irtt on a bare veth pair (the tool's own tail)", unit="ms", configured=None,
        measured=tail.p999_ms, error=None, configured_text="-",
        measured_text=f"p99.9 {fmt_number(tail.p999_ms)} ms, max {fmt_number(tail.max_ms)} ms",
        error_text="-", criterion="reported; the p99.9 and max errors above are beyond it", status="info",
        details={"probes": reference.packets_received, "rtt_mean_ms": reference.rtt_mean_ms,
                 "rtt_p999_ms": tail.p999_ms, "rtt_max_ms": tail.max_ms, "left_out": tail.left_out,
                 "every_probe": {"rtt_p999_ms": reference.rtt_p999_ms, "rtt_max_ms": reference.rtt_max_ms}})


def steal_check(readings: list[MachineCpu], hogs: int) -> Check:
    """The CPU time the hypervisor took from this guest during the contention run (/proc/stat's
    steal), over the run and at its worst sampling interval, as a reported row: a vCPU held off by
    its host delays even the emulator's real-time thread, which no priority inside the guest wins
    against, so lateness beside a steal burst is the machine's, not the emulator's code's."""
    shares = cpu_shares(readings[0], readings[-1])
    run_share = shares["steal"]
    peak = peak_share(readings, "steal")
    return Check(
        id="contention.host.steal", group="contention",
        name=f"{hogs} CPU hogs: CPU time the hypervisor took (steal, /proc/stat)", unit="share",
        configured=None, measured=run_share, error=None, configured_text="-",
        measured_text=f"{fmt_share(run_share)} of the run, {fmt_share(peak)} at worst "
                      f"({CPU_SAMPLE_INTERVAL_S * 1e3:g} ms readings)",
        error_text="-", criterion="reported: lateness beside steal lies in the host machine",
        status="info", details={"cpu_shares": shares, "steal_peak_share": peak, "readings": len(readings),
                                "interval_s": CPU_SAMPLE_INTERVAL_S})


def fmt_share(share: float | None) -> str:
    return "-" if share is None else f"{share:.2%}"


def tail_split_check(split: Decomposition, configured_rtt_ms: float, hogs: int) -> Check:
    """What made the slowest 0.1% of probes slow: the emulator's time beyond the model's delays
    and the hosts' (tools, kernels, TUNs), their means over those probes, as a reported row."""
    return Check(
        id="contention.irtt.split", group="contention",
        name=f"{hogs} CPU hogs: irtt p99.9 RTT split over the slowest 0.1% (captures)", unit="ms",
        configured=configured_rtt_ms, measured=split.rtt_p999_ms, error=split.rtt_p999_ms - configured_rtt_ms,
        configured_text=f"{configured_rtt_ms:g} ms", measured_text=f"{split.rtt_p999_ms:.3f} ms",
        error_text=(f"emulator {split.tail_emulator_excess_ms:+.3f}, client {split.tail_client_host_ms:.3f}, "
                    f"server {split.tail_server_host_ms:.3f} ms"),
        criterion="reported: the emulator's and the hosts' share of the slowest probes' RTT",
        status="info", details=split.model_dump())


def jitter_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    checks: list[Check] = []
    tolerance = config.thresholds.jitter_relative
    for std_ms in config.jitter_std_ms:
        step(f"jitter {std_ms:g} ms (normal)")
        configure_links(lab, access={}, p0_forward={"delay_ns": ms_to_ns(config.jitter_delay_ms), "jitter_ns": ms_to_ns(std_ms)},
                   p0_reverse={})
        irtt = run_irtt(lab, workdir, f"jitter-{std_ms:g}", config.jitter_probes)
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
            measured_text=f"{fmt_number(irtt.rtt_std_ms)} ms",
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
            measured_text=f"{fmt_number(irtt.ipdv_rtt_mean_ms)} ms",
            error_text=f"{ipdv_error / expected_ipdv:+.1%}",
            criterion="report (2 std / sqrt(pi) expected)",
            status="info",
            details={"ipdv_send_mean_ms": irtt.ipdv_send_mean_ms},
        ))
    return checks
