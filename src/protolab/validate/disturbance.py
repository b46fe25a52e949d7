"""What the host did to a timing level, taken out of it: its stalls of the guest's CPUs, and
levels it held throughout.

Each timing level (a delay level, the contention group) runs beside the host's wake-up probe
(protolab.validate.wakeups), one per CPU. On this virtual machine the host stops vCPUs for
milliseconds, one or all at once: traced on 2026-11-30 (perf sched over a contention run), no
task on either CPU was switched for 9.4 ms while irtt was sending every millisecond, and irtt's
p99.9 came out +3.7 to +5.0 ms beyond its reference with /proc/stat showing no steal
(docs/validation.md, "The host's stalls"). The veth reference runs in other seconds and misses
them, so such a level measured the host, not the emulator.

A host stall is the part of a probe's stall in which its timer had not fired
(`wakeups.host_part`): a guest busy with other work (the emulator's loop, the kernel) wakes the
probe on time and keeps it waiting for the CPU, which the probe reads as its run delay, and that
wait is not a host stall. Host stalls are left out where they can be placed:

- the contention group's irtt statistics (p99.9 and maximum, through the lab and on the veth
  reference alike) are taken over the probes not in flight during a host stall of any CPU
  (`tail_outside_host_stalls`); which probes go is decided by time alone, never by their RTT;
- the emulator's own lateness check drops the late packets of its late passes (deliveries more
  than 1 ms late, kept with their time, CPU and packet count) that waited through a host stall
  of their CPU (`lateness_outside_host_stalls`); the on-time packets of those moments stay, which
  can only make what remains look later.

A level whose probe's own 99.9th percentile wake-up misses the emulator's limit (the host held
the guest's CPUs through the level, not in a few stalls) is set aside and measured again, up to
`ValidationConfig.level_attempts` times; the last attempt is kept whatever it shows. That
decision reads the probe alone, never the emulator's or the tools' figures, so a level is not
repeated because it failed, and a machine that disturbs every attempt still fails. Each set-aside
attempt stays in the report as an `info` row with its checks' figures.

Pure: documents, intervals and a measuring function in, numbers and checks out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from protolab.errors import ToolError
from protolab.measure.tools import nearest_rank
from protolab.validate.report import Check
from protolab.validate.wakeups import STALL_SLACK_NS, in_host_stall

# How late a delivery must be for the emulator to keep its pass (contract::control::LATE_PASS_NS).
LATE_PASS_NS = 1_000_000
# The figures of a set-aside attempt's checks kept in its row.
KEPT_FIGURES = ("id", "status", "measured", "error", "measured_text", "error_text")


@dataclass
class LevelAttempt:
    """One measurement of a level: its checks and the host probe's summary of the same minutes
    (protolab.validate.wakeups.worst_cpu; None when the probe gave nothing)."""

    checks: list[Check]
    probe: Mapping[str, Any] | None


class TimedRtt(NamedTuple):
    """One answered irtt probe: when it left and came back (wall clock, ns) and its RTT (ms)."""

    send_ns: int
    receive_ns: int
    rtt_ms: float


class Tail(NamedTuple):
    """irtt's tail over the probes kept: how many were kept and left out, p99.9 and max (ms)."""

    probes: int
    left_out: int
    p999_ms: float
    max_ms: float


def timed_rtts(document: Mapping[str, Any], source: str) -> list[TimedRtt]:
    """The answered probes of `irtt client -o FILE`'s JSON with their client wall timestamps."""
    trips: list[TimedRtt] = []
    try:
        for trip in document["round_trips"]:
            if trip.get("lost") != "false":
                continue
            client = trip["timestamps"]["client"]
            trips.append(TimedRtt(int(client["send"]["wall"]), int(client["receive"]["wall"]),
                                  float(trip["delay"]["rtt"]) / 1e6))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ToolError(f"{source}: round_trips without client wall timestamps and an RTT: {exc!r}") from exc
    return trips


def tail_outside_host_stalls(trips: Sequence[TimedRtt], stalls: Sequence[tuple[int, int]],
                             slack_ns: int = STALL_SLACK_NS) -> Tail:
    """irtt's p99.9 and maximum over the probes not in flight during a host stall (any CPU's,
    protolab.validate.wakeups.host_stalls; `slack_ns` either side, as the clocks are read apart).
    A stall before a probe left only delays its send, which irtt stamps after it."""
    kept = sorted(trip.rtt_ms for trip in trips
                  if not any(start - slack_ns <= trip.receive_ns and trip.send_ns <= end + slack_ns
                             for start, end in stalls))
    return Tail(len(kept), len(trips) - len(kept), nearest_rank(kept, 0.999), kept[-1] if kept else math.nan)


def lateness_outside_host_stalls(late: Mapping[str, Any], late_passes: Sequence[Mapping[str, Any]],
                                 probe: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The emulator's delivery lateness (`delivery_late` of its counters) without the late
    packets of the passes that waited through a host stall of their CPU (`wakeups.in_host_stall`
    on the probe's summary): `held_packets` and the 99.9th percentile's bucket edge of the rest
    (`p999_ns_at_most`, None when nothing is left). None when no late pass met one. Those packets
    were more than LATE_PASS_NS late, so they leave the lowest buckets above it first: what
    remains is never earlier than it was."""
    held = sum(int(p.get("packets") or 0) for p in late_passes if in_host_stall(p, probe))
    if held == 0:
        return None
    max_ns = int(late.get("max_ns") or 0)
    # Upper edges in order, the bucket above the last edge (None) last.
    buckets = sorted(([edge, int(count)] for edge, count in late.get("buckets") or []),
                     key=lambda bucket: math.inf if bucket[0] is None else bucket[0])
    to_remove = held
    for bucket in buckets:
        if to_remove and (bucket[0] is None or bucket[0] > LATE_PASS_NS):
            taken = min(bucket[1], to_remove)
            bucket[1] -= taken
            to_remove -= taken
    remaining = sum(count for _, count in buckets)
    p999: int | None = None
    if remaining:
        wanted, seen = max(1, math.ceil(0.999 * remaining)), 0
        for edge, count in buckets:
            seen += count
            if seen >= wanted:
                p999 = min(max_ns, max_ns if edge is None else int(edge))
                break
    return {"held_packets": held - to_remove, "packets": remaining, "p999_ns_at_most": p999}


def host_disturbance(probe: Mapping[str, Any] | None, limit_ms: float) -> str | None:
    """Why the host disturbed a level, from its probe alone; None when it did not (or the probe
    gave nothing): the probe's 99.9th percentile wake-up beyond the limit the emulator is held
    to, so the machine could not wake a real-time thread in time through the level. Stalls of
    the guest's CPUs alone are not a reason: the checks leave their moments out instead."""
    if not probe or probe.get("p999_ns") is None:
        return None
    p999_ms = probe["p999_ns"] / 1e6
    return f"the probe's p99.9 wake-up {p999_ms:.3f} ms late" if p999_ms > limit_ms else None


def set_aside_row(level_id: str, group: str, level_name: str, attempt: int, reason: str,
                  result: LevelAttempt) -> Check:
    """The report's row for an attempt that was measured again."""
    return Check(
        id=f"{level_id}.set_aside.{attempt}", group=group,
        name=f"{level_name}: attempt {attempt} set aside, measured again", unit="-", configured=None,
        measured=None, error=None, configured_text="-", measured_text=f"host: {reason}", error_text="-",
        criterion="a level the host disturbed (its probe alone) is measured again", status="info",
        details={"reason": reason, "stalled_together": (result.probe or {}).get("stalled_together"),
                 "probe_p999_ns": (result.probe or {}).get("p999_ns"),
                 "checks": [{key: getattr(check, key) for key in KEPT_FIGURES} for check in result.checks]})


def is_set_aside(check: Check) -> bool:
    """Whether a row reports a set-aside attempt (`set_aside_row`)."""
    return check.id.rsplit(".", 2)[-2:-1] == ["set_aside"]


def measure_level(measure: Callable[[int], LevelAttempt], *, attempts: int, limit_ms: float, level_id: str,
                  group: str, level_name: str, again: Callable[[str], None] = lambda text: None) -> list[Check]:
    """Measures a level (`measure(attempt)`, from 1) until its probe shows no disturbance or
    `attempts` are used: the kept attempt's checks, then a row for each set-aside one. `again`
    hears of each repeat."""
    set_aside: list[Check] = []
    attempt = 1
    while True:
        result = measure(attempt)
        reason = host_disturbance(result.probe, limit_ms)
        if reason is None or attempt >= attempts:
            return result.checks + set_aside
        set_aside.append(set_aside_row(level_id, group, level_name, attempt, reason, result))
        attempt += 1
        again(f"{level_name}: again, the host disturbed attempt {attempt - 1} ({reason})")
