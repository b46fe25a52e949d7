"""How late this machine wakes a real-time thread: a probe beside each timing level.

The emulator's own check (its delivery lateness) fails when its loop wakes late. Its loop runs
under SCHED_FIFO, so inside the guest nothing but the kernel should delay it; a virtual machine
whose host is busy can still wake a vCPU milliseconds late (measured here on 2026-11-29: a
SCHED_FIFO thread sleeping 0.1 ms overslept 89 us on average, 0.66 ms at the 99th percentile and
4.8 ms at worst, the machine otherwise idle). So each level runs a probe in the same minutes: a
process under SCHED_FIFO (PROBE_PRIORITY: above the tools' real-time priority, below the
emulator's loop) that sleeps 1 ms at a time and records how late each sleep ends. When the
probe's own 99.9th percentile misses the limit the emulator's lateness is held to, no program
could have met it on this machine then: the emulator's failure of that level lies in the host
(protolab.validate.attribution).

There is one probe per CPU, each pinned to its CPU: a virtual machine's host stalls one vCPU at
a time, and a single probe, which the kernel keeps on whichever CPU is free, saw nothing of a
stall of the CPU the emulator's loop ran on (2026-11-29: emulator tails of 2-10 ms beside a
probe whose 99.9th percentile stayed under 1 ms). The emulator's loop is not pinned, so the
worst CPU's figures are the host's.

Each probe also keeps its stalls (sleeps that ended more than 0.5 ms late) with their wall-clock
times and how much of each it spent woken and waiting for its CPU (its run delay): the rest, the
time before its timer fired, is the host's (`host_part`: a guest busy with other work wakes the
probe on time and keeps it waiting; perf sched showed the host's stalls with the probe's wake-up
at their end). The emulator keeps its late passes (deliveries more than 1 ms late) with their
times and the CPU it ran on (`late_passes` of its counters). A late pass that overlaps a host
stall of its CPU was held up by the host; when every late pass of a level whose emulator check
failed was, the host's row fails even if its 99.9th percentile stayed within the limit
(`judge_late_passes`).

When every CPU's probe stalled at the same moments, nothing below the emulator's loop ran on
any CPU then: the host did not run the guest, or something at a higher real-time priority held
every CPU. `stalled_together` gives that time, and the host's row reports it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from protolab.lab import stop_process
from protolab.measure.tools import nearest_rank
from protolab.validate.plumbing import TOOL_RT_PRIORITY, fmt_number
from protolab.validate.report import Check, Thresholds

# The probe: on CPU `cpu` only, sleeps `interval` seconds at a time until SIGTERM, then writes
# every oversleep (ns) and its stalls ([wall-clock ns when it woke, oversleep ns, ns of it spent
# runnable but waiting for the CPU (/proc/thread-self/schedstat's run delay; absent when not
# readable)], the first `keep` beyond `stall` ns).
PROBE_SOURCE = """
import json, os, signal, sys, time
interval, out, cpu, stall, keep = float(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
os.sched_setaffinity(0, {cpu})
try:
    schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
except OSError:
    schedstat = None
def waited():
    # The thread's time runnable but waiting for its CPU so far (ns; 0 when not known).
    return int(os.pread(schedstat, 100, 0).split()[1]) if schedstat is not None else 0
late, stalls, running = [], [], [True]
signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
target_ns = int(interval * 1e9)
while running[0]:
    queued = waited()
    start = time.perf_counter_ns()
    time.sleep(interval)
    over = max(0, time.perf_counter_ns() - start - target_ns)
    late.append(over)
    if over > stall and len(stalls) < keep:
        stalls.append([time.time_ns(), over] + ([waited() - queued] if schedstat is not None else []))
with open(out, "w") as f:
    json.dump({"late": late, "stalls": stalls}, f)
"""
PROBE_INTERVAL_S = 0.001
# Above the tools' real-time priority and below the emulator's loop. At irtt's own priority the
# probe waited whenever irtt ran: a SCHED_RR thread keeps its CPU against a woken thread of its
# priority for its whole 100 ms time slice, and at the end of the contention group's run irtt's
# client and server each ran 88-99 ms on their CPUs (perf sched, 2026-11-30), which the probe
# reported as a host stall of both CPUs at once.
PROBE_PRIORITY = TOOL_RT_PRIORITY + 1
STALL_NS = 500_000
STALLS_KEPT = 2000
# How far apart a late pass and a stall may lie and still be one event (the two clocks are read
# at slightly different moments of the same wake-up).
STALL_SLACK_NS = 200_000


class WakeupProbe:
    """The probe's result once it has stopped: the summary, or None if it gave nothing."""

    def __init__(self) -> None:
        self.summary: dict[str, Any] | None = None


def summarise(late_ns: Sequence[int]) -> dict[str, Any]:
    """Count, mean, 99th and 99.9th percentile (nearest rank) and maximum of the oversleeps, ns."""
    if not late_ns:
        return {"wakeups": 0, "mean_ns": None, "p99_ns": None, "p999_ns": None, "max_ns": None}
    ordered = sorted(late_ns)
    return {"wakeups": len(ordered), "mean_ns": sum(ordered) / len(ordered), "p99_ns": nearest_rank(ordered, 0.99),
            "p999_ns": nearest_rank(ordered, 0.999), "max_ns": ordered[-1], "interval_s": PROBE_INTERVAL_S}


def _merged(intervals: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, overlapping or touching intervals joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _intersection(left: Sequence[tuple[int, int]], right: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The time in both of two merged interval lists."""
    both, i, j = [], 0, 0
    while i < len(left) and j < len(right):
        start, end = max(left[i][0], right[j][0]), min(left[i][1], right[j][1])
        if start < end:
            both.append((start, end))
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return both


def _stall_intervals(stalls_by_cpu: Mapping[Any, Sequence[Sequence[int]]]) -> list[list[tuple[int, int]]]:
    """Each CPU's stalls ([woke ns, oversleep ns]: stalled from woke - oversleep to woke) as
    merged intervals."""
    return [_merged([(stall[0] - stall[1], stall[0]) for stall in stalls]) for stalls in stalls_by_cpu.values()]


def _all_at_once(per_cpu: Sequence[Sequence[tuple[int, int]]]) -> list[tuple[int, int]]:
    together = list(per_cpu[0]) if per_cpu else []
    for intervals in per_cpu[1:]:
        together = _intersection(together, intervals)
    return together


def stalled_together(stalls_by_cpu: Mapping[Any, Sequence[Sequence[int]]]) -> dict[str, Any]:
    """How the CPUs' stalls ([woke ns, oversleep ns, ...]) lie against each other: the time any CPU
    was stalled, the time every CPU was at once and the longest such stretch, ms. A lower bound:
    only stalls beyond STALL_NS are kept."""
    per_cpu = _stall_intervals(stalls_by_cpu)
    if not per_cpu:
        return {"cpus": 0, "any_stalled_ms": 0.0, "all_stalled_ms": 0.0, "longest_all_stalled_ms": 0.0}
    together = _all_at_once(per_cpu)
    anywhere = _merged([interval for intervals in per_cpu for interval in intervals])
    return {"cpus": len(per_cpu),
            "any_stalled_ms": sum(end - start for start, end in anywhere) / 1e6,
            "all_stalled_ms": sum(end - start for start, end in together) / 1e6,
            "longest_all_stalled_ms": max((end - start for start, end in together), default=0) / 1e6}


def host_part(stall: Sequence[int]) -> tuple[int, int] | None:
    """The part of a stall ([woke ns, oversleep ns, waited ns]) in which the probe's timer had not
    fired yet: the vCPU did not run (a guest busy with other work would have woken the probe on
    time and kept it waiting for the CPU, which counts as waited). It comes first, from the due
    time on. None when under STALL_NS; the whole stall when the wait is not known."""
    woke, over = stall[0], stall[1]
    waited = stall[2] if len(stall) > 2 else 0
    if over - waited <= STALL_NS:
        return None
    return woke - over, woke - waited


def host_stalls(summary: Mapping[str, Any] | None) -> dict[str, list[tuple[int, int]]]:
    """Each CPU's host stalls (`host_part` of its probe's stalls, merged) of a summary
    (`worst_cpu`), by CPU."""
    cpus = (summary or {}).get("cpus") or {}
    return {cpu: _merged([part for stall in probe.get("stalls") or [] if (part := host_part(stall))])
            for cpu, probe in cpus.items()}


def worst_cpu(per_cpu: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """The host's figures from each CPU's probe: the worst CPU's (by its 99.9th percentile, then
    its maximum) at the top, every CPU's under `cpus`; None if no probe gave anything."""
    measured = {cpu: summary for cpu, summary in per_cpu.items() if summary.get("p999_ns") is not None}
    if not measured:
        return None
    cpu, worst = max(measured.items(), key=lambda item: (item[1]["p999_ns"], item[1]["max_ns"]))
    figures = {key: value for key, value in worst.items() if key != "stalls"}
    together = stalled_together({c: s.get("stalls") or [] for c, s in sorted(measured.items())})
    # How the stalls' time divides: the host's (the probe's timer late) and the guest's (woken on
    # time, waiting for the CPU behind other work), summed over the CPUs.
    stalls = [stall for s in measured.values() for stall in s.get("stalls") or []]
    waited_ms = sum(stall[2] for stall in stalls if len(stall) > 2) / 1e6
    host_ms = sum(part[1] - part[0] for part in map(host_part, stalls) if part) / 1e6
    return {**figures, "wakeups": sum(s["wakeups"] for s in measured.values()), "worst_cpu": cpu,
            "stalled_together": together, "host_stalled_ms": host_ms, "waited_ms": waited_ms,
            "cpus": {str(c): s for c, s in sorted(per_cpu.items())}}


@contextmanager
def host_wakeups(workdir: Path, label: str) -> Iterator[WakeupProbe]:
    """Runs a probe on every CPU this process may use for the duration of the block; the
    summary ([worst_cpu]) is set on leaving."""
    outs = {cpu: workdir / f"wakeups-{label}-cpu{cpu}.json" for cpu in sorted(os.sched_getaffinity(0))}
    probe = WakeupProbe()
    processes = [subprocess.Popen(["chrt", "-f", str(PROBE_PRIORITY), sys.executable, "-c", PROBE_SOURCE,
                                   str(PROBE_INTERVAL_S), str(out), str(cpu), str(STALL_NS), str(STALLS_KEPT)],
                                  stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                 for cpu, out in outs.items()]
    try:
        yield probe
    finally:
        # SIGTERM first: each probe writes what it measured on it.
        for process in processes:
            stop_process(process)
        per_cpu = {}
        for cpu, out in outs.items():
            try:
                measured = json.loads(out.read_text())
                per_cpu[cpu] = {**summarise([int(n) for n in measured["late"]]),
                                "stalls": [[int(value) for value in stall] for stall in measured["stalls"]]}
            except (OSError, ValueError, TypeError, KeyError):
                continue
        probe.summary = worst_cpu(per_cpu)


def wakeup_check(check_id: str, group: str, name: str, summary: dict[str, Any] | None,
                 limits: Thresholds) -> Check:
    """The host's row of a level: `fail` when the probe's 99.9th percentile oversleep is beyond
    the limit of the emulator's own lateness (then the host, not the emulator's code, is what
    cannot deliver on time); `info` when it is within, or the probe gave nothing."""
    limit = limits.emulator_late_p999_ms
    p999 = summary.get("p999_ns") if summary else None
    if p999 is None:
        return Check(id=check_id, group=group, name=name, unit="ms", configured=None, measured=None, error=None,
                     configured_text="-", measured_text="no probe result", error_text="-",
                     criterion="reported", status="info", details={"probe": summary})
    assert summary is not None
    p999_ms, mean_ms, max_ms = p999 / 1e6, summary["mean_ns"] / 1e6, summary["max_ns"] / 1e6
    return Check(
        id=check_id, group=group, name=name, unit="ms", configured=0.0, measured=p999_ms, error=p999_ms,
        configured_text="0 ms",
        measured_text=(f"p99.9 {fmt_number(p999_ms)} ms, mean {mean_ms:.3f} ms, max {fmt_number(max_ms)} ms"
                       + (f" (CPU {summary['worst_cpu']})" if "worst_cpu" in summary else "")
                       + _together_text(summary.get("stalled_together")) + _host_text(summary)),
        error_text=f"{p999_ms:+.3f} ms",
        criterion=f"p99.9 <= {limit:g} ms, as the emulator's own lateness (a real-time thread "
                  f"sleeping {PROBE_INTERVAL_S * 1e3:g} ms on each CPU; the worst CPU)",
        status="fail" if p999_ms > limit else "info", details={"probe": summary})


def _together_text(together: Mapping[str, Any] | None) -> str:
    """The share of the stalls when every CPU stalled at once (then nothing below the emulator's
    loop ran anywhere), for two CPUs or more."""
    if not together or together["cpus"] < 2 or together["all_stalled_ms"] <= 0:
        return ""
    return (f"; all {together['cpus']} CPUs stalled at once {together['all_stalled_ms']:.1f} ms "
            f"(longest {together['longest_all_stalled_ms']:.1f} ms) of {together['any_stalled_ms']:.1f} ms with "
            f"any stalled")


def _host_text(summary: Mapping[str, Any]) -> str:
    """How the stalls' time divides between the host (the probe's timer late) and the guest
    (woken, waiting for the CPU), when the probes read their wait."""
    if "host_stalled_ms" not in summary or not (summary["host_stalled_ms"] or summary["waited_ms"]):
        return ""
    return f"; stalls: host {summary['host_stalled_ms']:.1f} ms, waiting for the CPU {summary['waited_ms']:.1f} ms"


def in_host_stall(late_pass: Mapping[str, Any], summary: Mapping[str, Any] | None) -> bool:
    """Whether a late pass of the emulator (`late_passes` of its counters) overlaps a host stall
    (`host_part`) the probe of its CPU saw (of any CPU when the pass names none): the emulator
    was due at `at_unix_ns - late_ns` and ran at `at_unix_ns`."""
    stalls = host_stalls(summary)
    cpu = late_pass.get("cpu")
    due, ran = late_pass["at_unix_ns"] - late_pass["late_ns"], late_pass["at_unix_ns"]
    intervals = stalls[str(cpu)] if cpu is not None and str(cpu) in stalls else \
        [interval for per_cpu in stalls.values() for interval in per_cpu]
    return any(start - STALL_SLACK_NS <= ran and due <= end + STALL_SLACK_NS for start, end in intervals)


def judge_late_passes(host: Check, late_passes: Sequence[Mapping[str, Any]], summary: Mapping[str, Any] | None,
                      emulator: Check) -> None:
    """Matches the emulator's late passes of a level with the host's stalls: how many fell in one
    goes into both checks' details; when all did and the emulator's check failed, the host's row
    fails (the host held the emulator's CPU: the failure is the host's) and says so. A level the
    emulator passed keeps the host's row as its percentile says: held-up passes within the
    emulator's limits are no failure to place."""
    if not late_passes:
        return
    held = sum(in_host_stall(late_pass, summary) for late_pass in late_passes)
    matched = {"late_passes": len(late_passes), "late_passes_in_host_stalls": held}
    emulator.details.update(matched)
    host.details.update(matched)
    if held == len(late_passes) and summary and emulator.status == "fail":
        host.status = "fail"
        host.measured_text += f"; all {held} of the emulator's late passes (> 1 ms) fell in host stalls of their CPU"
