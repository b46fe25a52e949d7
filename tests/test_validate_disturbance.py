"""A timing level the host disturbed is measured again (protolab.validate.disturbance), on fixed
probe summaries and a counting stand-in for the level."""

from __future__ import annotations

from typing import Any

import pytest

from protolab.errors import ToolError
from protolab.validate.disturbance import (
    LevelAttempt,
    TimedRtt,
    host_disturbance,
    is_set_aside,
    lateness_outside_host_stalls,
    measure_level,
    tail_outside_host_stalls,
    timed_rtts,
)
from protolab.validate.report import Check, Status, Thresholds
from protolab.validate.timing import lateness_check
from protolab.validate.wakeups import summarise, worst_cpu

LIMIT_MS = 1.0


def probe(*, p999_ms: float = 0.3, longest_all_ms: float = 0.0, cpus: int = 2) -> dict[str, Any]:
    return {"p999_ns": int(p999_ms * 1e6), "max_ns": 5_000_000,
            "stalled_together": {"cpus": cpus, "any_stalled_ms": 40.0, "all_stalled_ms": longest_all_ms,
                                 "longest_all_stalled_ms": longest_all_ms}}


def check(check_id: str, status: Status, measured: float) -> Check:
    return Check(id=check_id, group="delay", name=check_id, unit="ms", configured=20.0, measured=measured,
                 error=measured - 20.0, configured_text="20 ms", measured_text=f"{measured} ms",
                 error_text=f"{measured - 20.0:+.3f} ms", criterion="-", status=status)


QUIET = probe()
HELD = probe(p999_ms=1.4)


def test_a_quiet_probe_disturbs_nothing() -> None:
    assert host_disturbance(QUIET, LIMIT_MS) is None
    assert host_disturbance(None, LIMIT_MS) is None
    assert host_disturbance({}, LIMIT_MS) is None
    # At the limit is within it, as the emulator's own check.
    assert host_disturbance(probe(p999_ms=1.0), LIMIT_MS) is None


def test_host_stalls_alone_are_left_out_not_measured_again() -> None:
    # Every CPU stalled at once for 8.7 ms, the percentile within the limit.
    assert host_disturbance(probe(longest_all_ms=8.7), LIMIT_MS) is None


def test_a_late_percentile_is_the_host_holding_the_level() -> None:
    assert host_disturbance(probe(p999_ms=1.344), LIMIT_MS) == "the probe's p99.9 wake-up 1.344 ms late"


class Level:
    """A level whose attempts return the given probes and a failing or passing RTT check each."""

    def __init__(self, probes: list[dict[str, Any]], statuses: list[Status]) -> None:
        self.probes, self.statuses, self.calls = probes, statuses, []  # type: ignore[var-annotated]

    def __call__(self, attempt: int) -> LevelAttempt:
        self.calls.append(attempt)
        rtt = 20.0 + attempt  # each attempt's figures are its own
        return LevelAttempt([check("delay.irtt.mean.5ms", self.statuses[attempt - 1], rtt)],
                            self.probes[attempt - 1])


def measure(level: Level, attempts: int = 3, heard: list[str] | None = None) -> list[Check]:
    return measure_level(level, attempts=attempts, limit_ms=LIMIT_MS, level_id="delay.5ms", group="delay",
                         level_name="delay 5 ms/link", again=(heard if heard is not None else []).append)


def test_a_disturbed_attempt_is_set_aside_and_the_clean_one_kept() -> None:
    level = Level([HELD, QUIET, QUIET], ["fail", "pass", "pass"])
    heard: list[str] = []
    checks = measure(level, heard=heard)
    assert level.calls == [1, 2]
    kept, aside = checks
    assert (kept.id, kept.status, kept.measured) == ("delay.irtt.mean.5ms", "pass", 22.0)
    assert aside.id == "delay.5ms.set_aside.1" and aside.status == "info" and is_set_aside(aside)
    assert aside.measured_text == "host: the probe's p99.9 wake-up 1.400 ms late"
    # The set-aside attempt's figures stay in the report.
    assert aside.details["checks"] == [{"id": "delay.irtt.mean.5ms", "status": "fail", "measured": 21.0,
                                        "error": 1.0, "measured_text": "21.0 ms", "error_text": "+1.000 ms"}]
    assert aside.details["probe_p999_ns"] == 1_400_000
    assert heard == ["delay 5 ms/link: again, the host disturbed attempt 1 (the probe's p99.9 wake-up 1.400 ms late)"]
    assert not is_set_aside(kept)


def test_a_failure_on_a_quiet_host_is_never_measured_again() -> None:
    level = Level([QUIET, QUIET, QUIET], ["fail", "pass", "pass"])
    checks = measure(level)
    assert level.calls == [1]
    assert [c.status for c in checks] == ["fail"]


def test_the_last_attempt_is_kept_however_disturbed() -> None:
    level = Level([HELD, HELD, HELD], ["fail", "fail", "fail"])
    checks = measure(level)
    assert level.calls == [1, 2, 3]
    assert [c.id for c in checks] == ["delay.irtt.mean.5ms", "delay.5ms.set_aside.1", "delay.5ms.set_aside.2"]
    assert checks[0].status == "fail" and checks[0].measured == 23.0


@pytest.mark.parametrize("attempts", [1, 2])
def test_attempts_bound_the_repeats(attempts: int) -> None:
    level = Level([HELD, HELD, HELD], ["pass", "pass", "pass"])
    checks = measure(level, attempts=attempts)
    assert level.calls == list(range(1, attempts + 1))
    assert sum(is_set_aside(c) for c in checks) == attempts - 1


MS = 1_000_000


def trip(send_ms: float, rtt_ms: float) -> TimedRtt:
    return TimedRtt(int(send_ms * MS), int((send_ms + rtt_ms) * MS), rtt_ms)


def test_probes_in_flight_during_a_host_stall_are_left_out_by_time_alone() -> None:
    # 2000 probes of 20 ms at 1 ms; the host stalled a CPU 8 ms from t = 1000 ms, which held the
    # 29 probes in flight then by up to 8 ms.
    stall = (1000 * MS, 1008 * MS)
    trips = [trip(t, 20.0 + (8.0 if 980 - 0.2 <= t <= 1008 + 0.2 else 0.0)) for t in range(2000)]
    every = tail_outside_host_stalls(trips, [])
    assert every.left_out == 0 and every.p999_ms == 28.0 and every.max_ms == 28.0
    kept = tail_outside_host_stalls(trips, [stall])
    assert kept.left_out == 29  # sent 980..1008 ms: in flight at some moment of the stall
    assert kept.probes == 1971 and kept.p999_ms == 20.0 and kept.max_ms == 20.0
    # A slow probe outside every stall stays: the choice is by time, not by RTT.
    slow = [*trips, trip(3000, 31.0)]
    assert tail_outside_host_stalls(slow, [stall]).max_ms == 31.0


def test_a_host_stall_before_a_probe_left_does_not_touch_it() -> None:
    stall = (1000 * MS, 1008 * MS)
    assert tail_outside_host_stalls([trip(1009, 20.0)], [stall]).left_out == 0
    assert tail_outside_host_stalls([trip(1008.1, 20.0)], [stall]).left_out == 1  # within the slack
    assert tail_outside_host_stalls([trip(960, 20.0)], [stall]).left_out == 0  # back before it


def test_irtt_without_wall_timestamps_names_the_file() -> None:
    document = {"round_trips": [{"lost": "false", "seqno": 0, "delay": {"rtt": 20_000_000}, "timestamps": {}}]}
    with pytest.raises(ToolError, match="irtt-contention.json: round_trips without client wall timestamps"):
        timed_rtts(document, "irtt-contention.json")
    good = {"round_trips": [
        {"lost": "true_down", "seqno": 0},
        {"lost": "false", "seqno": 1, "delay": {"rtt": 20_500_000},
         "timestamps": {"client": {"send": {"wall": 5 * MS}, "receive": {"wall": 26 * MS}}}}]}
    assert timed_rtts(good, "x.json") == [TimedRtt(5 * MS, 26 * MS, 20.5)]


# 23,000 packets, 30 of them more than 1 ms late: the 99.9th percentile (rank 22,977) in the 2 ms bucket.
LATE = {"packets": 23_000, "mean_ns": 4_000, "max_ns": 5_760_000, "p99_ns_at_most": 1_000, "p999_ns_at_most": 2_000_000,
        "buckets": [[1_000, 22_940], [1_000_000, 30], [2_000_000, 20], [5_000_000, 10]]}
STALL = (96 * MS, 101 * MS)


def probe_stalled(start: int, end: int, *, waited: int = 0, cpu: int = 0) -> dict[str, Any]:
    """Two CPUs' probe summary whose CPU `cpu` stalled from `start` to `end` (ns), `waited` of
    it runnable."""
    per_cpu = {c: {**summarise([10_000] * 1000), "stalls": [[end, end - start, waited]] if c == cpu else []}
               for c in (0, 1)}
    summary = worst_cpu(per_cpu)
    assert summary is not None
    return summary


STALLED = probe_stalled(*STALL)


def late_pass(at_ms: float, late_ms: float, packets: int) -> dict[str, Any]:
    return {"at_unix_ns": int(at_ms * MS), "late_ns": int(late_ms * MS), "packets": packets, "cpu": 0}


def test_late_packets_of_a_pass_through_a_host_stall_leave_the_emulators_percentile() -> None:
    passes = [late_pass(100, 5.76, 12), late_pass(200, 1.5, 2)]
    assert lateness_outside_host_stalls(LATE, passes, None) is None
    assert lateness_outside_host_stalls(LATE, [late_pass(200, 1.5, 2)], STALLED) is None
    # 12 held packets leave the 2 ms bucket: rank 22,966 of 22,988 now lies in the 1 ms bucket.
    assert lateness_outside_host_stalls(LATE, passes, STALLED) == {
        "held_packets": 12, "packets": 22_988, "p999_ns_at_most": 1_000_000}
    failed = lateness_check("contention.emulator", "contention", "lateness", LATE, Thresholds())
    assert failed.status == "fail"
    kept = lateness_check("contention.emulator", "contention", "lateness", LATE, Thresholds(),
                          lateness_outside_host_stalls(LATE, passes, STALLED))
    assert kept.status == "pass"
    assert kept.measured_text == ("mean 0.0040 ms, p99.9 <= 2.000 ms; without the 12 late packets of host "
                                  "stalls p99.9 <= 1.000 ms")


def test_held_packets_leave_the_lowest_late_buckets_first() -> None:
    # 25 held: the 2 ms bucket empties, 5 leave the 5 ms one; the 5 ms packets left still count.
    held = lateness_outside_host_stalls(LATE, [late_pass(100, 5.76, 25)], STALLED)
    assert held == {"held_packets": 25, "packets": 22_975, "p999_ns_at_most": 1_000_000}
    worse = {**LATE, "buckets": [[1_000, 22_940], [2_000_000, 20], [5_000_000, 40]]}
    # Removing the 2 ms packets (not the 5 ms ones) keeps the percentile where the 5 ms ones put it.
    assert lateness_outside_host_stalls(worse, [late_pass(100, 5.76, 20)], STALLED)["p999_ns_at_most"] == 5_000_000


def test_a_pass_beyond_the_last_edge_counts_at_the_maximum() -> None:
    late = {"packets": 1_000, "mean_ns": 150_000, "max_ns": 150 * MS, "buckets": [[1_000, 999], [None, 1]]}
    assert lateness_outside_host_stalls(late, [late_pass(100, 150, 1)], STALLED) == {
        "held_packets": 1, "packets": 999, "p999_ns_at_most": 1_000}
    three = {**late, "packets": 1_002, "buckets": [[1_000, 999], [None, 3]]}
    assert lateness_outside_host_stalls(three, [late_pass(100, 150, 1)], STALLED)["p999_ns_at_most"] == 150 * MS


def test_only_a_host_stall_of_the_passes_own_cpu_counts() -> None:
    passes = [late_pass(100, 5.76, 12)]
    assert lateness_outside_host_stalls(LATE, passes, probe_stalled(*STALL, cpu=1)) is None
    # Woken on time and waiting for the CPU: the guest's own work, maybe the emulator's.
    assert lateness_outside_host_stalls(LATE, passes, probe_stalled(*STALL, waited=5 * MS)) is None
