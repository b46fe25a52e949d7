"""protolab.measure.proc on fixed text: /proc/PID/stat, /proc/stat and /proc/PID/status, and the
CPU shares (steal among them) between two readings."""

from __future__ import annotations

import pytest

from protolab.errors import ToolError
from protolab.measure import proc

# A real line's shape, with a comm holding a space and a ')' (fields 14/15: utime 1234, stime 567).
PROCESS_STAT = ("4242 (protolab-net x)) S 1 4242 4242 0 -1 4194560 2917 0 0 0 1234 567 0 0 20 0 3 0 "
                "4615863 80330752 9000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n")
MACHINE_STAT = """cpu  4284877 661615 1301047 2819397 42716 0 19409 5053 0 0
cpu0 2142438 330807 650523 1409698 21358 0 9704 2526 0 0
cpu1 2142439 330808 650524 1409699 21358 0 9705 2527 0 0
intr 1 2 3
"""
STATUS = "Name:\tprotolab-net\nVmPeak:\t  300000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   20480 kB\nThreads:\t3\n"


def test_process_ticks_are_utime_plus_stime_after_the_last_parenthesis() -> None:
    assert proc.process_cpu_ticks(PROCESS_STAT, "/proc/4242/stat") == 1234 + 567


@pytest.mark.parametrize("text", ["", "4242 (emu S 1 2", "4242 (emu) S 1 2 3", "4242 (emu) S 1 2 3 4 5 6 7 8 9 10 x 5"])
def test_a_stat_line_without_times_is_an_error_naming_the_file(text: str) -> None:
    with pytest.raises(ToolError, match=r"/proc/4242/stat: no utime and stime"):
        proc.process_cpu_ticks(text, "/proc/4242/stat")


def test_machine_ticks_count_idle_and_iowait_as_idle_and_stop_at_steal() -> None:
    busy, total = proc.machine_ticks(MACHINE_STAT)
    assert total == 4284877 + 661615 + 1301047 + 2819397 + 42716 + 0 + 19409 + 5053
    assert busy == total - 2819397 - 42716


@pytest.mark.parametrize(("text", "message"), [
    ("cpu0 1 2 3 4 5\n", "no `cpu` line"),
    ("cpu 1 2 x 4 5\n", "not a number"),
    ("cpu 1 2 3 4\n", "fewer than the 5"),
])
def test_a_bad_proc_stat_is_an_error_naming_the_file(text: str, message: str) -> None:
    with pytest.raises(ToolError, match=rf"^/proc/stat: .*{message}"):
        proc.machine_ticks(text)


def test_status_fields_are_read_in_bytes_and_bad_ones_named() -> None:
    assert proc.status_bytes(STATUS, "VmHWM", "/proc/1/status") == 51200 * 1024
    assert proc.status_bytes(STATUS, "VmRSS", "/proc/1/status") == 20480 * 1024
    with pytest.raises(ToolError, match=r"/proc/1/status: no VmSwap line"):
        proc.status_bytes(STATUS, "VmSwap", "/proc/1/status")
    with pytest.raises(ToolError, match=r"/proc/1/status: VmHWM is '12 MB'"):
        proc.status_bytes("VmHWM:\t12 MB\n", "VmHWM", "/proc/1/status")



def test_cpu_shares_between_two_readings_include_steal() -> None:
    before = proc.machine_cpu(MACHINE_STAT)
    after = proc.machine_cpu("cpu  4284977 661615 1301147 2819497 42716 0 19409 5153 0 0\n")
    shares = proc.cpu_shares(before, after)
    # 400 ticks passed: 100 user, 100 system, 100 idle, 100 stolen by the hypervisor.
    assert shares["steal"] == pytest.approx(0.25)
    assert shares["idle"] == pytest.approx(0.25)
    assert shares["busy"] == pytest.approx(0.75)
    assert proc.cpu_shares(after, after)["steal"] is None


def test_a_cpu_line_without_steal_reads_it_as_zero() -> None:
    cpu = proc.machine_cpu("cpu 10 0 5 80 5\n")
    assert (cpu.steal, cpu.total, cpu.busy) == (0, 100, 15)


def test_the_peak_share_finds_a_burst_the_average_hides() -> None:
    readings = [proc.MachineCpu(user=100 * i, idle=100 * i) for i in range(10)]
    # One 200-tick interval in which the hypervisor took half of the time.
    last = readings[-1]
    readings.append(proc.MachineCpu(user=last.user + 50, idle=last.idle + 50, steal=100))
    assert proc.peak_share(readings, "steal") == pytest.approx(0.5)
    assert proc.cpu_shares(readings[0], readings[-1])["steal"] == pytest.approx(100 / 2000)
    assert proc.peak_share(readings[:1], "steal") is None
