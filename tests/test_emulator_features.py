"""Emulator features end to end with real tools: pcap capture and the ground-truth event log,
Mahimahi-trace links under TCP, and CoDel against drop-tail under a real TCP load."""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from awaiting import await_port, wait_until
from conftest import lab_namespaces

from protolab.lab import Lab, dumbbell, ideal_link, link, mbps_to_bps, ms_to_ns, path
from protolab.measure.tools import parse_iperf3

pytestmark = pytest.mark.lab

PATH_DELAY_MS = 5
LOSS = 0.2
PINGS = 200


def _tcpdump_lines(pcap: Path) -> list[str]:
    out = subprocess.run(["tcpdump", "-n", "-r", str(pcap)], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def _events(log: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = log.read_text().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def test_pcap_and_event_log_are_ground_truth(emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> None:
    name = lab_name()
    topology = dumbbell(name, ["client"], ["server"],
                        paths=[path("p0", forward=link(delay_ns=ms_to_ns(PATH_DELAY_MS), loss=LOSS))])
    with Lab(topology) as lab:
        lab.set_link("p0.forward", seed=3)
        lab.reset_counters()
        lab.events_start(tmp_path / "events.ndjson")
        lab.pcap_start("client", tmp_path / "client.pcap")
        lab.pcap_start("server", tmp_path / "server.pcap")
        lab.run("client", ["ping", "-q", "-n", "-c", str(PINGS), "-i", "0.005", "-W", "1", lab.address("server")],
                check=False, timeout=60)
        lab.await_quiet()
        client_capture = lab.pcap_stop("client")
        server_capture = lab.pcap_stop("server")
        log_summary = lab.events_stop()
        counters = lab.counters()["links"]
    assert lab_namespaces(name) == []

    lost = counters["p0.forward"]["dropped_packets"]["random_loss"]
    delivered = counters["server.down"]["delivered_packets"]
    assert lost + delivered == PINGS
    assert 0.1 * PINGS < lost < 0.3 * PINGS  # p = 0.2

    # The captures are valid pcap files that tcpdump reads; they see what each host saw.
    client_lines = _tcpdump_lines(tmp_path / "client.pcap")
    server_lines = _tcpdump_lines(tmp_path / "server.pcap")
    assert sum("echo request" in line for line in client_lines) == PINGS
    assert sum("echo reply" in line for line in client_lines) == delivered
    assert sum("echo request" in line for line in server_lines) == delivered
    assert client_capture["dropped"] == 0 and server_capture["dropped"] == 0
    assert client_capture["packets"] == len(client_lines)

    header, events = _events(tmp_path / "events.ndjson")
    assert header["schema"] == "protolab.events" and header["schema_version"] == 1 and header["lab"] == name
    assert log_summary["dropped"] == 0 and log_summary["events"] == len(events)
    drops = [e for e in events if e["ev"] == "drop"]
    assert len(drops) == lost
    assert all(e["cause"] == "random_loss" and e["link"] == "p0.forward" for e in drops)

    # One-way delay from the emulator's own clock: exactly the configured path delay (no rate
    # limit, so no serialization), something no endpoint capture can measure.
    sent = {e["ip_id"]: e["t"] for e in events if e["ev"] == "enqueue" and e["link"] == "client.up"}
    arrived = {e["ip_id"]: e["t"] for e in events if e["ev"] == "deliver" and e["link"] == "server.down"}
    assert len(arrived) == delivered
    one_way_ns = [arrived[i] - sent[i] for i in arrived]
    assert all(d == PATH_DELAY_MS * 1_000_000 for d in one_way_ns), sorted(set(one_way_ns))[:5]
    assert {e["proto"] for e in events} == {1}


# 10 delivery opportunities of 1500 bytes every 10 ms, unevenly spaced: 12 Mbit/s on average.
TRACE = "1\n1\n3\n3\n3\n5\n7\n7\n9\n10\n"
TRACE_MBIT = 10 * 1500 * 8 / 0.010 / 1e6


IPERF3_PORT = 5201  # iperf3's default


def _iperf3_server(lab: Lab) -> subprocess.Popen[Any]:
    """A one-test iperf3 server in the server host, once it listens."""
    server = lab.spawn("server", ["iperf3", "-s", "-1", "-B", lab.address("server"), "-p", str(IPERF3_PORT)])
    await_port(lab.namespace("server"), IPERF3_PORT, address=lab.address("server"), process=server)
    return server


def _iperf3(lab: Lab, seconds: int) -> Any:
    server = _iperf3_server(lab)
    out = lab.run("client", ["iperf3", "-c", lab.address("server"), "-t", str(seconds), "-O", "1", "-C", "cubic", "-J"],
                  check=False, timeout=seconds + 30)
    server.wait(timeout=10)
    return parse_iperf3(out.stdout)


def test_trace_driven_link_delivers_the_trace_rate(emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> None:
    trace = tmp_path / "uneven.trace"
    trace.write_text(TRACE)
    topology = dumbbell(lab_name(), ["client"], ["server"], paths=[
        path("p0", forward=link(trace=str(trace), queue_packets=60, delay_ns=ms_to_ns(10)), reverse=link(delay_ns=ms_to_ns(10))),
    ])
    with Lab(topology) as lab:
        before = lab.counters()["links"]["p0.forward"]["delivered_bytes"]
        started = time.monotonic()
        result = _iperf3(lab, seconds=5)
        elapsed = time.monotonic() - started
        after = lab.counters()["links"]["p0.forward"]["delivered_bytes"]
    goodput_mbit = result.goodput_bps / 1e6
    payload_share = 1448 / 1500
    assert goodput_mbit <= TRACE_MBIT * payload_share * 1.01
    assert goodput_mbit >= 0.85 * TRACE_MBIT * payload_share, goodput_mbit
    # The link never delivered more than the trace allows over the whole transfer.
    assert (after - before) * 8 / elapsed / 1e6 <= TRACE_MBIT * 1.01


# Pings under load: 6 s of them, 10 per second.
PINGS_UNDER_LOAD = 60
# A standing queue of a drop-tail link: 60 packets, 72 ms at 10 Mbit/s. Cubic (HyStart leaves slow
# start before the first loss) grows it by about 40 packets per second, so it stands about 1.5 s
# into the transfer, and keeps growing while the pings run.
STANDING_QUEUE_PACKETS = 60


def _standing_queue(link: dict[str, Any]) -> bool:
    """The bottleneck is past the sender's slow start: CoDel has started dropping, or a drop-tail
    queue stands."""
    return link["dropped_packets"]["aqm"] > 0 or link["queue_packets"] >= STANDING_QUEUE_PACKETS


def _ping_under_load(lab: Lab) -> tuple[list[float], dict[str, Any]]:
    """Round trips of pings sent once a long TCP transfer has formed its standing queue at p0's
    bottleneck, and the link's counters; the transfer lasts as long as the pings."""
    server = _iperf3_server(lab)
    lab.reset_counters()
    load = lab.spawn("client", ["iperf3", "-c", lab.address("server"), "-t", "600", "-C", "cubic"])
    wait_until(lambda: _standing_queue(lab.counters()["links"]["p0.forward"]), what="a standing queue at p0.forward",
               within=60, process=load)
    pings = lab.run("client", ["ping", "-n", "-c", str(PINGS_UNDER_LOAD), "-i", "0.1", lab.address("server")],
                    check=False, timeout=PINGS_UNDER_LOAD * 0.1 + 30).stdout
    counters = lab.counters()["links"]["p0.forward"]
    load.terminate()  # iperf3 ends the test with its server, which then exits (-1)
    load.wait(timeout=10)
    server.wait(timeout=10)
    rtts = [float(word.split("=")[1]) for line in pings.splitlines() for word in line.split() if word.startswith("time=")]
    return rtts, counters


def test_codel_keeps_queueing_delay_low_where_droptail_bloats(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    base_rtt_ms = 20
    topology = dumbbell(lab_name(), ["client"], ["server"], paths=[
        path("p0", forward=link(mbps_to_bps(10), delay_ns=ms_to_ns(base_rtt_ms / 2), queue_packets=400),
             reverse=link(delay_ns=ms_to_ns(base_rtt_ms / 2))),
    ])
    with Lab(topology) as lab:
        droptail_rtts, droptail = _ping_under_load(lab)
        lab.set_link("p0.forward", **ideal_link(rate_bps=mbps_to_bps(10), delay_ns=ms_to_ns(base_rtt_ms / 2),
                                                 queue_packets=400, queue_kind="codel"))
        codel_rtts, codel = _ping_under_load(lab)
    # Drop-tail: cubic fills the 400-packet (480 ms) buffer. CoDel: drops early ("aqm") and keeps
    # the standing queue near its 5 ms target.
    assert statistics.median(droptail_rtts) > base_rtt_ms + 150, statistics.median(droptail_rtts)
    assert droptail["dropped_packets"]["aqm"] == 0
    assert statistics.median(codel_rtts) < base_rtt_ms + 30, statistics.median(codel_rtts)
    assert codel["dropped_packets"]["aqm"] > 0
    assert codel["dropped_packets"]["queue_full"] == 0


def test_pie_holds_its_target_and_fq_codel_isolates_a_sparse_flow(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    base_rtt_ms = 20
    bottleneck = {"rate_bps": mbps_to_bps(10), "delay_ns": ms_to_ns(base_rtt_ms / 2), "queue_packets": 400}
    topology = dumbbell(lab_name(), ["client"], ["server"], paths=[
        path("p0", forward=link(**bottleneck, queue_kind="pie"), reverse=link(delay_ns=ms_to_ns(base_rtt_ms / 2))),
    ])
    with Lab(topology) as lab:
        pie_rtts, pie = _ping_under_load(lab)
        lab.set_link("p0.forward", **ideal_link(**bottleneck, queue_kind="fq_codel"))
        fq_rtts, fq = _ping_under_load(lab)
    # PIE steers the standing queue to its 15 ms target (drop-tail would fill the 480 ms buffer,
    # as in the CoDel test above); pings share that queue.
    assert statistics.median(pie_rtts) < base_rtt_ms + 15 + 25, statistics.median(pie_rtts)
    assert pie["dropped_packets"]["aqm"] > 0 and pie["dropped_packets"]["queue_full"] == 0, pie
    # FQ-CoDel: the pings are a flow of their own, served before the bulk flow's queue: they wait
    # at most for a bulk packet or two on the wire (1.2 ms each at 10 Mbit/s).
    assert statistics.median(fq_rtts) < base_rtt_ms + 5, statistics.median(fq_rtts)
    assert fq["dropped_packets"]["aqm"] > 0 and fq["dropped_packets"]["queue_full"] == 0, fq
