"""The validation's attribution of failures (emulator or tools/host) and the split of irtt's
delays at the emulator, on fixed numbers: no lab."""

from __future__ import annotations

import json
import math
import struct
import subprocess
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest

from protolab.errors import ToolError
from protolab.validate.attribution import attribute, failure_summary, host_late
from protolab.validate.decomposition import (
    Datagram,
    Probe,
    clock_offset,
    decompose,
    probes_from_irtt,
    read_udp_capture,
)
from protolab.validate.plumbing import REALTIME_TOOL, TOOL_RT_PRIORITY
from protolab.validate.report import Check, Status, Thresholds
from protolab.validate.timing import lateness_check, split_check
from protolab.validate.wakeups import (
    PROBE_PRIORITY,
    STALL_NS,
    host_part,
    host_stalls,
    host_wakeups,
    in_host_stall,
    judge_late_passes,
    stalled_together,
    summarise,
    wakeup_check,
    worst_cpu,
)


def _check(check_id: str, status: Status, emulator_check: str | None = None) -> Check:
    return Check(id=check_id, group="delay", name=check_id, unit="ms", configured=0.0, measured=0.0, error=0.0,
                 configured_text="", measured_text="", error_text="", criterion="", status=status,
                 emulator_check=emulator_check)


def _level(tool_status: Status, emulator_status: Status) -> list[Check]:
    return [_check("delay.irtt.mean.25ms", tool_status, "delay.emulator.25ms"),
            _check("delay.ping.mean.25ms", "pass", "delay.emulator.25ms"),
            _check("delay.emulator.25ms", emulator_status)]


def test_a_tool_failure_beside_an_emulator_on_time_lies_in_the_tools() -> None:
    checks = _level("fail", "pass")
    counts = attribute(checks)
    assert [c.attribution for c in checks] == ["tools_host", None, None]
    assert [c.status for c in checks] == ["fail", "pass", "pass"]  # a failure stays a failure
    assert counts == {"emulator": 0, "tools_host": 1, "unattributed": 0}
    assert failure_summary(1, counts) == "1 failed: 0 in the emulator, 1 in the tools/host, the emulator on time"


def test_when_the_emulator_misses_its_limit_both_failures_are_its() -> None:
    checks = _level("fail", "fail")
    counts = attribute(checks)
    assert [c.attribution for c in checks] == ["emulator", None, "emulator"]
    assert counts == {"emulator": 2, "tools_host": 0, "unattributed": 0}
    assert failure_summary(2, counts) == "2 failed: 2 in the emulator, 0 in the tools/host"


def test_nothing_to_attribute_when_all_pass() -> None:
    checks = _level("pass", "pass")
    assert attribute(checks) == {"emulator": 0, "tools_host": 0, "unattributed": 0}
    assert all(c.attribution is None for c in checks)
    assert failure_summary(0, {}) == "0 failed"


def test_failures_without_an_emulator_check_stay_unattributed() -> None:
    checks = [*_level("fail", "pass"), _check("loss.irtt.up.1", "fail")]
    counts = attribute(checks)
    assert checks[-1].attribution is None
    assert counts == {"emulator": 0, "tools_host": 1, "unattributed": 1}
    assert failure_summary(2, counts) == ("2 failed: 0 in the emulator, 1 in the tools/host, 1 not attributed, "
                                          "the emulator on time")
    only_loss = [_check("loss.irtt.up.1", "fail")]
    assert failure_summary(1, attribute(only_loss)) == "1 failed"


def _level_with_host(emulator_status: Status, host_status: Status) -> list[Check]:
    checks = [*_level("fail", emulator_status), _check("delay.host.wakeups.25ms", host_status)]
    checks[2].host_check = "delay.host.wakeups.25ms"
    return checks


def test_when_the_host_woke_a_real_time_probe_late_the_level_lies_in_the_host() -> None:
    checks = _level_with_host("fail", "fail")
    counts = attribute(checks)
    assert [c.attribution for c in checks] == ["tools_host", None, "tools_host", "tools_host"]
    assert [c.status for c in checks] == ["fail", "pass", "fail", "fail"]
    assert counts == {"emulator": 0, "tools_host": 3, "unattributed": 0}
    assert host_late(checks)
    assert failure_summary(3, counts, woke_late=True) == (
        "3 failed: 0 in the emulator, 3 in the tools/host, the host woke a real-time probe late")


def test_a_host_on_time_leaves_the_emulators_failure_its_own() -> None:
    checks = _level_with_host("fail", "info")
    counts = attribute(checks)
    assert [c.attribution for c in checks] == ["emulator", None, "emulator", None]
    assert counts == {"emulator": 2, "tools_host": 0, "unattributed": 0}
    assert not host_late(checks)


def test_the_probe_summary_and_its_check() -> None:
    late = [10_000] * 990 + [300_000] * 9 + [4_000_000]
    summary = summarise(late)
    assert summary["wakeups"] == 1000 and summary["max_ns"] == 4_000_000
    assert (summary["p99_ns"], summary["p999_ns"]) == (10_000, 300_000)
    assert summary["mean_ns"] == pytest.approx((990 * 10_000 + 9 * 300_000 + 4_000_000) / 1000)
    limits = Thresholds()
    within = wakeup_check("delay.host.wakeups.5ms", "delay", "host", summary, limits)
    assert (within.status, within.measured) == ("info", pytest.approx(0.3))
    beyond = wakeup_check("delay.host.wakeups.5ms", "delay", "host", summarise([2_000_000] * 10), limits)
    assert beyond.status == "fail" and "p99.9 2" in beyond.measured_text
    assert wakeup_check("x", "delay", "host", None, limits).status == "info"
    assert summarise([])["p999_ns"] is None


def test_the_host_is_its_worst_cpu() -> None:
    quiet, stalled = summarise([10_000] * 1000), summarise([10_000] * 990 + [3_000_000] * 10)
    host = worst_cpu({0: quiet, 1: stalled})
    assert host is not None
    assert (host["worst_cpu"], host["p999_ns"], host["max_ns"]) == (1, 3_000_000, 3_000_000)
    assert host["wakeups"] == 2000 and set(host["cpus"]) == {"0", "1"}
    assert wakeup_check("x", "delay", "host", host, Thresholds()).status == "fail"
    assert "(CPU 1)" in wakeup_check("x", "delay", "host", host, Thresholds()).measured_text
    assert worst_cpu({0: summarise([])}) is None and worst_cpu({}) is None


def _probe_with_stalls(stalls_by_cpu: dict[int, list[list[int]]]) -> dict[str, Any]:
    per_cpu = {cpu: {**summarise([10_000] * 1000), "stalls": stalls} for cpu, stalls in stalls_by_cpu.items()}
    host = worst_cpu(per_cpu)
    assert host is not None
    return host


def test_stalls_of_every_cpu_at_once_are_the_whole_machines() -> None:
    ms = 1_000_000
    # CPU 0 stalled 100-175 ms and 300-305 ms; CPU 1 102-180 ms and 305-310 ms (in turn: no overlap).
    stalls = {0: [[175 * ms, 75 * ms], [305 * ms, 5 * ms]], 1: [[180 * ms, 78 * ms], [310 * ms, 5 * ms]]}
    together = stalled_together(stalls)
    assert together == {"cpus": 2, "any_stalled_ms": 90.0, "all_stalled_ms": 73.0, "longest_all_stalled_ms": 73.0}
    # Order of the records and overlapping records of one CPU do not matter.
    shuffled = {0: [[305 * ms, 5 * ms], [175 * ms, 75 * ms], [150 * ms, 40 * ms]], 1: stalls[1][::-1]}
    assert stalled_together(shuffled) == together
    assert stalled_together({0: stalls[0], 1: []})["all_stalled_ms"] == 0.0
    assert stalled_together({}) == {"cpus": 0, "any_stalled_ms": 0.0, "all_stalled_ms": 0.0,
                                    "longest_all_stalled_ms": 0.0}
    host = _probe_with_stalls(stalls)
    assert host["stalled_together"] == together
    text = wakeup_check("h", "contention", "host", host, Thresholds()).measured_text
    assert "all 2 CPUs stalled at once 73.0 ms (longest 73.0 ms) of 90.0 ms with any stalled" in text
    one_cpu = _probe_with_stalls({0: stalls[0]})
    assert "at once" not in wakeup_check("h", "contention", "host", one_cpu, Thresholds()).measured_text
    # With the probes' waits: the host's part (timer late) and the guest's (waiting for the CPU).
    waits = _probe_with_stalls({0: [[175 * ms, 75 * ms, 70 * ms]], 1: [[310 * ms, 5 * ms, 1 * ms]]})
    assert (waits["host_stalled_ms"], waits["waited_ms"]) == (9.0, 71.0)
    assert wakeup_check("h", "contention", "host", waits, Thresholds()).measured_text.endswith(
        "; stalls: host 9.0 ms, waiting for the CPU 71.0 ms")


def test_a_late_pass_lies_in_a_host_stall_only_on_its_cpu_and_when_the_two_overlap() -> None:
    ms = 1_000_000
    # CPU 1 stalled from 100 ms to 105 ms (woke at 105 ms, 5 ms late).
    probe = _probe_with_stalls({0: [], 1: [[105 * ms, 5 * ms]]})
    inside = {"at_unix_ns": 104 * ms, "late_ns": 2 * ms, "cpu": 1}
    assert in_host_stall(inside, probe)
    assert not in_host_stall({**inside, "cpu": 0}, probe), "CPU 0 did not stall"
    assert in_host_stall({**inside, "cpu": None}, probe), "no CPU named: any CPU's stall"
    assert not in_host_stall({"at_unix_ns": 110 * ms, "late_ns": 2 * ms, "cpu": 1}, probe), "due after the stall"
    assert not in_host_stall({"at_unix_ns": 99 * ms, "late_ns": 2 * ms, "cpu": 1}, probe), "ran before it"
    assert in_host_stall({"at_unix_ns": 99_900_000, "late_ns": 2 * ms, "cpu": 1}, probe), "within the slack"
    assert not in_host_stall(inside, None)
    # A stall the probe spent woken and waiting for its CPU (run delay) was the guest's own work,
    # not the host's; its timer-late start still is.
    waited = _probe_with_stalls({0: [], 1: [[105 * ms, 5 * ms, 5 * ms]]})
    assert not in_host_stall(inside, waited)
    split = _probe_with_stalls({0: [], 1: [[105 * ms, 5 * ms, 2 * ms]]})  # timer 3 ms late, then 2 ms waiting
    assert host_stalls(split) == {"0": [], "1": [(100 * ms, 103 * ms)]}
    assert in_host_stall({"at_unix_ns": 102 * ms, "late_ns": 2 * ms, "cpu": 1}, split)
    assert not in_host_stall({"at_unix_ns": 105 * ms, "late_ns": 1_500_000, "cpu": 1}, split), "after the host's part"


def test_a_stall_is_the_hosts_when_the_timer_fired_late() -> None:
    ms = 1_000_000
    assert host_part([105 * ms, 5 * ms]) == (100 * ms, 105 * ms), "wait unknown: the whole stall"
    assert host_part([105 * ms, 5 * ms, 0]) == (100 * ms, 105 * ms)
    assert host_part([105 * ms, 5 * ms, 4_600_000]) is None, "0.4 ms late: under STALL_NS"
    assert host_part([105 * ms, 5 * ms, 5 * ms]) is None


def test_when_every_late_pass_fell_in_a_host_stall_the_host_row_fails() -> None:
    ms = 1_000_000
    probe = _probe_with_stalls({0: [[50 * ms, 3 * ms]], 1: [[105 * ms, 5 * ms]]})
    limits = Thresholds()
    passes = [{"at_unix_ns": 104 * ms, "late_ns": 2 * ms, "cpu": 1}, {"at_unix_ns": 49 * ms, "late_ns": 1_500_000, "cpu": 0}]
    host, emulator = wakeup_check("h", "delay", "host", probe, limits), _check("e", "fail")
    assert host.status == "info", "the probes' 99.9th percentiles are within the limit"
    judge_late_passes(host, passes, probe, emulator)
    assert host.status == "fail" and "all 2 of the emulator's late passes" in host.measured_text
    assert emulator.details["late_passes_in_host_stalls"] == 2 == host.details["late_passes"]
    # One pass the host did not hold up: the emulator's own, the host's row as its percentile says.
    host, emulator = wakeup_check("h", "delay", "host", probe, limits), _check("e", "fail")
    judge_late_passes(host, [*passes, {"at_unix_ns": 200 * ms, "late_ns": 2 * ms, "cpu": 1}], probe, emulator)
    assert host.status == "info" and emulator.details["late_passes_in_host_stalls"] == 2
    host = wakeup_check("h", "delay", "host", probe, limits)
    judge_late_passes(host, [], probe, emulator)
    assert host.status == "info" and "late_passes" not in host.details
    # The emulator within its limits: nothing to place, the host's row stays as its percentile says.
    host, emulator = wakeup_check("h", "delay", "host", probe, limits), _check("e", "pass")
    judge_late_passes(host, passes, probe, emulator)
    assert host.status == "info" and host.details["late_passes_in_host_stalls"] == 2


def test_the_probe_measures_real_wake_ups_on_every_cpu(tmp_path: Path) -> None:
    import os
    import time
    with host_wakeups(tmp_path, "t") as probe:
        time.sleep(0.3)
    assert probe.summary is not None
    assert set(probe.summary["cpus"]) == {str(cpu) for cpu in os.sched_getaffinity(0)}
    for summary in probe.summary["cpus"].values():
        assert summary["wakeups"] >= 20
        assert summary["max_ns"] >= summary["p999_ns"] >= summary["p99_ns"] >= 0
    assert probe.summary["p999_ns"] == max(s["p999_ns"] for s in probe.summary["cpus"].values())
    assert "stalls" not in probe.summary
    for summary in probe.summary["cpus"].values():
        # [woke, oversleep, of it waiting for the CPU]
        assert all(len(stall) == 3 and stall[1] > STALL_NS and 0 <= stall[2] for stall in summary["stalls"])
    assert probe.summary["host_stalled_ms"] >= 0 and probe.summary["waited_ms"] >= 0


def test_the_probe_is_not_held_up_by_a_real_time_tool(tmp_path: Path) -> None:
    """A tool at the tools' real-time priority that keeps its CPU busy (irtt did, 88-99 ms at
    the end of a run) must not show as a host stall: the probe runs above it. At the same
    priority the probe waited out the tool's 100 ms SCHED_RR time slice."""
    import os
    import sys
    import time

    cpu = min(os.sched_getaffinity(0))
    # Ends by itself after 0.8 s, even if this test does not get to stop it.
    spin = f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nend = time.time() + 0.8\nwhile time.time() < end: pass"
    tool = subprocess.Popen([*REALTIME_TOOL, sys.executable, "-c", spin])
    try:
        time.sleep(0.1)
        with host_wakeups(tmp_path, "rr") as probe:
            time.sleep(0.5)
    finally:
        tool.kill()
        tool.wait()
    assert probe.summary is not None
    held = probe.summary["cpus"][str(cpu)]
    assert held["wakeups"] >= 50 and held["max_ns"] < 30_000_000, held["max_ns"]
    assert PROBE_PRIORITY > TOOL_RT_PRIORITY


def test_a_cpu_held_inside_the_guest_is_no_host_stall(tmp_path: Path) -> None:
    """A real-time thread above the probe holds one CPU for 0.3 s (as the emulator's loop could):
    the probe there is woken on time and waits for the CPU, and that wait is the guest's, not a
    host stall (a host that stops the vCPU makes the probe's timer itself fire late)."""
    import os
    import sys
    import time

    cpu = min(os.sched_getaffinity(0))
    spin = f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nend = time.time() + 0.3\nwhile time.time() < end: pass"
    with host_wakeups(tmp_path, "fifo") as probe:
        time.sleep(0.05)
        holder = subprocess.Popen(["chrt", "-f", str(PROBE_PRIORITY + 1), sys.executable, "-c", spin])
        try:
            holder.wait(timeout=10)
        finally:
            holder.kill()
        time.sleep(0.05)
    assert probe.summary is not None
    stalls = probe.summary["cpus"][str(cpu)]["stalls"]
    longest = max(stalls, key=lambda stall: stall[1])
    assert longest[1] >= 200_000_000, "the CPU was held"
    assert longest[2] >= longest[1] - 20_000_000, "the probe waited through it, woken on time"
    assert all(end - start < 20_000_000 for start, end in host_stalls(probe.summary)[str(cpu)])


def _late(mean_ns: int, p999_ns: int | None, packets: int = 4000) -> dict[str, Any]:
    return {"packets": packets, "mean_ns": mean_ns, "max_ns": 2_000_000, "p99_ns_at_most": 5000,
            "p999_ns_at_most": p999_ns, "buckets": []}


@pytest.mark.parametrize("late, status", [
    (_late(4_000, 50_000), "pass"),
    (_late(50_000, 1_000_000), "pass"),           # both at their limits
    (_late(60_000, 50_000), "fail"),              # mean above 0.05 ms
    (_late(4_000, 2_000_000), "fail"),            # p99.9 above 1 ms
    (_late(4_000, None), "fail"),                 # beyond the histogram's last edge
    (_late(0, None, packets=0), "info"),          # nothing delivered: nothing to judge
])
def test_the_emulator_check_judges_its_delivery_lateness(late: dict[str, Any], status: str) -> None:
    check = lateness_check("delay.emulator.5ms", "delay", "lateness", late, Thresholds())
    assert check.status == status
    assert check.measured == pytest.approx(late["mean_ns"] / 1e6)


# ------------------------------------------------------------------ the split of irtt's delays

CLIENT, SERVER, PORT, CLIENT_PORT = "10.77.0.1", "10.77.1.1", 2112, 40000
OFFSET = 1_000_000_123  # emulator clock - wall clock


def _udp(src: str, sport: int, dst: str, dport: int, payload: bytes) -> bytes:
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 1, 0x4000, 64, 17, 0,
                         IPv4Address(src).packed, IPv4Address(dst).packed)
    return header + struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def _pcap(records: list[tuple[int, bytes]]) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 101)
    for t_ns, packet in records:
        out += struct.pack("<IIII", t_ns // 1_000_000_000, t_ns % 1_000_000_000, len(packet), len(packet)) + packet
    return out


def _scenario() -> tuple[list[Probe], bytes, bytes]:
    """Three probes 1 ms apart (the second only 0.9 ms after the first: a late timer), 5 ms model
    delay each way. Client host: 30 µs to the emulator, 40 µs back; server host: 10 µs in, 15 µs out;
    the emulator 2 µs late upstream, 4 µs downstream; an irtt handshake packet before them."""
    start, model = 1_800_000_000_000_000_000, 5_000_000
    probes, client, server = [], [], []
    client.append((start - 3_000_000 + OFFSET, _udp(CLIENT, CLIENT_PORT, SERVER, PORT, b"open")))
    for seqno, sent in enumerate((start, start + 900_000, start + 1_900_000)):
        up = (sent + 30_000 + OFFSET, sent + 30_000 + model + 2_000 + OFFSET)
        server_receive = up[1] - OFFSET + 10_000
        server_send = server_receive + 3_000
        down = (server_send + 15_000 + OFFSET, server_send + 15_000 + model + 4_000 + OFFSET)
        client_receive = down[1] - OFFSET + 40_000
        probes.append(Probe(seqno, sent, server_receive, server_send, client_receive))
        request, reply = b"probe%d" % seqno, b"reply%d" % seqno
        client.append((up[0], _udp(CLIENT, CLIENT_PORT, SERVER, PORT, request)))
        server.append((up[1], _udp(CLIENT, CLIENT_PORT, SERVER, PORT, request)))
        server.append((down[0], _udp(SERVER, PORT, CLIENT, CLIENT_PORT, reply)))
        client.append((down[1], _udp(SERVER, PORT, CLIENT, CLIENT_PORT, reply)))
    return probes, _pcap(sorted(client)), _pcap(sorted(server))


def test_each_probe_splits_into_hosts_and_emulator() -> None:
    probes, client_pcap, server_pcap = _scenario()
    client, server = read_udp_capture(client_pcap, "c.pcap"), read_udp_capture(server_pcap, "s.pcap")
    assert len(client) == 7 and client[1] == Datagram(client[1].t_ns, CLIENT, CLIENT_PORT, SERVER, PORT, b"probe0")
    split = decompose(probes, client, server, server=(SERVER, PORT), clock_offset_ns=OFFSET, clock_uncertainty_ns=50,
                      configured_one_way_ns=5_000_000)
    assert (split.probes, split.matched) == (3, 3)
    assert split.up.before_ms == pytest.approx(0.030) and split.up.after_ms == pytest.approx(0.010)
    assert split.down.before_ms == pytest.approx(0.015) and split.down.after_ms == pytest.approx(0.040)
    assert split.up.inside_ms == pytest.approx(5.002) and split.down.inside_ms == pytest.approx(5.004)
    assert split.up.inside_excess_ms == pytest.approx(0.002) and split.down.inside_excess_p999_ms == pytest.approx(0.004)
    assert split.client_host_ms == pytest.approx(0.070) and split.server_host_ms == pytest.approx(0.025)
    assert split.server_processing_ms == pytest.approx(0.003)
    assert split.emulator_excess_ms == pytest.approx(0.006) and split.hosts_ms == pytest.approx(0.095)
    assert split.rtt_ms == pytest.approx(10 + 0.006 + 0.095)
    # Every probe took as long: the slowest 0.1% is all three, with the same shares.
    assert split.rtt_p999_ms == pytest.approx(10.101) and split.tail_probes == 3
    assert split.tail_emulator_excess_ms == pytest.approx(0.006) and split.tail_hosts_ms == pytest.approx(0.095)
    assert split.tail_client_host_ms == pytest.approx(0.070) and split.tail_server_host_ms == pytest.approx(0.025)


def test_a_wrong_clock_offset_moves_time_between_before_and_after_only() -> None:
    probes, client_pcap, server_pcap = _scenario()
    client, server = read_udp_capture(client_pcap, "c"), read_udp_capture(server_pcap, "s")
    split = decompose(probes, client, server, server=(SERVER, PORT), clock_offset_ns=OFFSET + 8_000,
                      clock_uncertainty_ns=0, configured_one_way_ns=5_000_000)
    assert split.up.before_ms == pytest.approx(0.022) and split.down.after_ms == pytest.approx(0.048)
    assert split.client_host_ms == pytest.approx(0.070) and split.server_host_ms == pytest.approx(0.025)
    assert split.emulator_excess_ms == pytest.approx(0.006)


def test_a_probe_whose_datagram_never_reached_the_server_is_left_out() -> None:
    probes, client_pcap, server_pcap = _scenario()
    server = [d for d in read_udp_capture(server_pcap, "s") if d.payload != b"probe1"]
    split = decompose(probes, read_udp_capture(client_pcap, "c"), server, server=(SERVER, PORT),
                      clock_offset_ns=OFFSET, clock_uncertainty_ns=0, configured_one_way_ns=5_000_000)
    assert (split.probes, split.matched) == (3, 2)
    with pytest.raises(ToolError, match="no irtt probe matched"):
        decompose(probes, [], [], server=(SERVER, PORT), clock_offset_ns=OFFSET, clock_uncertainty_ns=0,
                  configured_one_way_ns=0)


def test_the_split_row_adds_up_to_the_end_to_end_error() -> None:
    probes, client_pcap, server_pcap = _scenario()
    split = decompose(probes, read_udp_capture(client_pcap, "c"), read_udp_capture(server_pcap, "s"),
                      server=(SERVER, PORT), clock_offset_ns=OFFSET, clock_uncertainty_ns=0,
                      configured_one_way_ns=5_000_000 - 10_000)
    # 2.5 ms per link, 10 µs deducted per direction, irtt's veth reference 0.050 ms.
    row = split_check(2.5, split, 0.050, 20_000)
    hosts_beyond = row.details["hosts_beyond_reference_ms"]
    assert hosts_beyond == pytest.approx(0.095 - 0.050 - 0.020)
    end_to_end = split.rtt_ms - 0.050 - 10.0
    assert row.measured + hosts_beyond == pytest.approx(end_to_end)
    assert row.status == "info" and row.id == "delay.irtt.split.2.5ms"


def test_irtt_round_trips_and_bad_inputs() -> None:
    stamps = {"client": {"send": {"wall": 10}, "receive": {"wall": 90}},
              "server": {"receive": {"wall": 40}, "send": {"wall": 45}}}
    document = {"round_trips": [{"seqno": 0, "lost": "false", "timestamps": stamps},
                                {"seqno": 1, "lost": "true_down", "timestamps": stamps}]}
    assert probes_from_irtt(document, "x.json") == [Probe(0, 10, 40, 45, 90)]
    with pytest.raises(ToolError, match="x.json: round_trips without the four wall timestamps"):
        probes_from_irtt({"round_trips": [{"seqno": 0, "lost": "false", "timestamps": {}}]}, "x.json")
    with pytest.raises(ToolError, match="c.pcap: not a pcap file"):
        read_udp_capture(b"\x00" * 40, "c.pcap")
    with pytest.raises(ToolError, match="cut short"):
        read_udp_capture(_pcap([(5, _udp(CLIENT, 1, SERVER, 2, b"x"))])[:-3], "c.pcap")
    ethernet = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
    with pytest.raises(ToolError, match="link type 1"):
        read_udp_capture(ethernet, "c.pcap")


def test_probes_from_a_real_irtt_document() -> None:
    # irtt 0.9's own output: the one-way delays it reports are the wall-clock differences read.
    document = json.loads((Path(__file__).parent / "fixtures" / "irtt_client.json").read_text())
    probes = probes_from_irtt(document, "irtt_client.json")
    answered = [trip for trip in document["round_trips"] if trip["lost"] == "false"]
    assert len(probes) == len(answered) > 0
    for probe, trip in zip(probes, answered, strict=True):
        assert probe.server_receive - probe.client_send == trip["delay"]["send"]
        assert probe.client_receive - probe.server_send == trip["delay"]["receive"]


def test_clock_offset_from_the_tightest_paired_reading() -> None:
    readings = [(1000, 5600, 1400), (2000, 6540, 2080), (3000, 7700, 3600)]
    assert clock_offset(readings) == (6540 - 2040, 40)
    assert not math.isnan(clock_offset([(0, 0, 0)])[0])


def test_the_table_says_where_a_failure_lies() -> None:
    from rich.console import Console

    from protolab.validate.cli import validation_table
    from protolab.validate.report import ValidationConfig, ValidationReport

    checks = _level("fail", "pass")
    report = ValidationReport(created_unix_ns=0, duration_s=1.0, config=ValidationConfig(quick=True), environment={},
                              topology={}, checks=checks, counters={}, summary={"pass": 2, "fail": 1, "info": 0},
                              attribution=attribute(checks), ok=False)
    console = Console(record=True, width=200)
    console.print(validation_table(report))
    text = console.export_text()
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip().startswith("delay.")}
    assert "fail: tools/host" in rows["delay.irtt.mean.25ms"]
    assert "fail" not in rows["delay.emulator.25ms"] and "pass" in rows["delay.emulator.25ms"]
