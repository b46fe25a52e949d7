"""The congestion-control lab through real namespaces: bulk transfers per QUIC controller with
the sender's state samples, the fixed-rate sender holding its rate, a controller swept as an
axis (the server restarted per run), and two clients competing at one bottleneck with shares
measured from the emulator's event log. Tolerances are what a busy 2-core machine keeps; the
precise figures come from `protolab run specs/bulk-controllers.toml` and `specs/fairness.toml`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protolab.plan.experiment import parse_spec
from protolab.run.executors import EXECUTORS
from protolab.run.runner import Events, run_experiment
from protolab.run.session import LabExecutor
from protolab.store import ResultsStore

pytestmark = pytest.mark.lab

BULK = """
schema_version = 1
name = "cc-lab"
scenario = "cc-suite"
repetitions = 1
[params]
duration_s = 4
[axes]
bandwidth_mbps = [10]
rtt_ms = [40]
buffer = ["1bdp"]
mode = ["h3", "tcp"]
quic_cc = ["cubic", "fixed:rate=40%"]
[artifacts]
samples = true
"""

PAIR = """
schema_version = 1
name = "pair-lab"
scenario = "fairness"
repetitions = 1
timeout_s = 60
[params]
images = 4
image_bytes = 250000
[axes]
mode = ["h3@gquic39 vs h2"]
[artifacts]
samples = true
"""


def _rows(results: Path, sql: str) -> list[dict[str, Any]]:
    with ResultsStore(results, read_only=True) as store:
        return store.query(sql)


def _run_pair(spec: str, results: Path, emu_binary: Path, lab: str) -> dict[str, dict[str, Any]]:
    """One pair run of `spec` in a real lab, asserted ok; its `pair_sides` rows by side."""
    executor = LabExecutor(workloads=EXECUTORS, binary=emu_binary, lab_name=lab)
    summary = run_experiment(parse_spec(spec), results, executor, Events())
    assert (summary.ok, summary.total) == (1, 1)
    return {s["side"]: s for s in _rows(results, "SELECT * FROM pair_sides")}


def test_bulk_per_controller_with_states(tmp_path: Path, emu_binary: Path, lab_name: Callable[[], str]) -> None:
    results = tmp_path / "results"
    executor = LabExecutor(workloads=EXECUTORS, binary=emu_binary, lab_name=lab_name())
    summary = run_experiment(parse_spec(BULK), results, executor, Events())
    assert (summary.ok, summary.total) == (4, 4)
    runs = {(r["mode"], r["quic_cc"]): r for r in _rows(results, "SELECT mode, quic_cc, goodput_mbps, run_key FROM runs")}
    # Greedy senders fill most of the 10 Mbit/s link within 4 s (slow start included).
    assert runs[("h3", "cubic")]["goodput_mbps"] > 6.0, runs
    assert runs[("tcp", "cubic")]["goodput_mbps"] > 6.0, runs
    # The fixed-rate sender holds 40% of the link whatever the network allows.
    assert 3.4 < runs[("h3", "fixed:rate=40%")]["goodput_mbps"] < 4.2, runs
    senders = _rows(results, "SELECT r.mode, r.quic_cc, c.transport, c.controller, c.frac_slow_start, "
                             "c.frac_congestion_avoidance, c.slow_start_exit_ms, c.mean_cwnd_bytes "
                             "FROM connection_states c JOIN runs r USING (run_key) WHERE c.sender AND c.role = 'server'")
    by = {(s["mode"], s["quic_cc"]): s for s in senders}
    assert set(by) == set(runs), senders
    cubic = by[("h3", "cubic")]
    assert cubic["controller"] == "cubic" and cubic["slow_start_exit_ms"] is not None
    assert cubic["frac_congestion_avoidance"] > 0.3, cubic
    fixed = by[("h3", "fixed:rate=40%")]
    assert fixed["controller"] == "fixed:rate=4000000" and fixed["frac_congestion_avoidance"] > 0.8, fixed
    assert by[("tcp", "cubic")]["transport"] == "tcp" and by[("tcp", "cubic")]["slow_start_exit_ms"] is not None
    # QUIC senders write a row at each state change; the first is slow start.
    first = _rows(results, "SELECT s.cc_state FROM transport_samples s JOIN runs r USING (run_key) WHERE "
                           "r.mode = 'h3' AND r.quic_cc = 'cubic' AND s.role = 'server' AND s.event = 'state' "
                           "ORDER BY s.t_unix_ns LIMIT 1")
    assert first == [{"cc_state": "slow_start"}]
    intervals = _rows(results, "SELECT count(*) AS n FROM bulk_intervals")[0]["n"]
    assert intervals >= 4 * 39  # 100 ms rows over 4 s, every run


def test_pair_shares_from_the_event_log(tmp_path: Path, emu_binary: Path, lab_name: Callable[[], str]) -> None:
    results = tmp_path / "results"
    sides = _run_pair(PAIR, results, emu_binary, lab_name())
    a, b = sides["a"], sides["b"]
    assert (a["label"], b["label"], a["quic_cc"]) == ("h3@gquic39", "h2", "gquic39")
    assert a["plt_ms"] > 0 and b["plt_ms"] > 0 and a["status"] == b["status"] == "ok"
    page = 20_000 + 4 * 250_000
    # IP bytes delivered at the bottleneck: the page plus headers and retransmissions.
    assert page < a["bytes"] < 1.3 * page and page < b["bytes"] < 1.3 * page, sides
    assert a["share"] + b["share"] == pytest.approx(1.0)
    assert 0.5 <= a["jain"] <= 1.0 and a["common_s"] > 0.5
    assert a["common_mbps"] + b["common_mbps"] < 7.0 * 1.05  # the bottleneck's rate bounds the sum
    bins = _rows(results, "SELECT side, count(*) AS n, max(mbps) AS peak FROM flow_bins GROUP BY side ORDER BY side")
    assert [x["side"] for x in bins] == ["a", "b"] and all(x["n"] >= 5 and x["peak"] <= 7.0 * 1.1 for x in bins)
    # Both servers' samples of both sides are there; the QUIC side runs gquic39's Cubic (n = 2).
    senders = _rows(results, "SELECT transport, controller FROM connection_states WHERE sender ORDER BY transport")
    assert {s["transport"] for s in senders} == {"quic", "tcp"} and "gquic39" in {s["controller"] for s in senders}
    assert (results / "runs").is_dir() and list((results / "runs").glob("*/events.ndjson"))


ONE_SERVER_BULK = """
schema_version = 1
name = "one-server-lab"
scenario = "fairness"
repetitions = 1
[params]
workload = "bulk"
bulk_duration_s = 4
servers = "one"
[axes]
bandwidth_mbps = [10]
rtt_ms = [40]
buffer = ["1bdp"]
mode = ["tcp vs h3"]
[artifacts]
samples = true
pcap = true
"""


def test_one_server_host_runs_both_sides(tmp_path: Path, emu_binary: Path, lab_name: Callable[[], str]) -> None:
    """004 Fig. 13: both sides' servers in one host at once, each on its own address."""
    results = tmp_path / "results"
    sides = _run_pair(ONE_SERVER_BULK, results, emu_binary, lab_name())
    a, b = sides["a"], sides["b"]
    assert (a["label"], b["label"]) == ("tcp", "h3") and a["status"] == b["status"] == "ok"
    # Both flows crossed the 10 Mbit/s bottleneck for 4 s: each well over 100 kB, together at most the link's.
    assert a["bytes"] > 100_000 and b["bytes"] > 100_000, sides
    assert a["bytes"] + b["bytes"] < 10e6 / 8 * 6, sides
    transfers = _rows(results, "SELECT side, goodput_mbps FROM bulk_transfers ORDER BY side")
    assert [t["side"] for t in transfers] == ["a", "b"] and all(t["goodput_mbps"] > 0.2 for t in transfers)
    # One server host: its pcap and the clients', none for a second server host.
    (run_dir,) = list((results / "runs").iterdir())
    assert sorted(p.name for p in run_dir.glob("*.pcap")) == ["client.pcap", "client2.pcap", "server.pcap"]


CPU = """
schema_version = 1
name = "cpu-lab"
scenario = "cpu-limit"
repetitions = 1
[params]
bytes = 10000000
[axes]
bandwidth_mbps = [100]
cpu_pct = [5, 100]
mode = ["tcp", "h3"]
"""


def test_cpu_limited_client(tmp_path: Path, emu_binary: Path, lab_name: Callable[[], str]) -> None:
    """A client held to 5% of a core: QUIC, whose packets the client's own process handles,
    slows down; TCP, handled by the kernel, hardly. The lab's cgroup is gone afterwards."""
    name = lab_name()
    results = tmp_path / "results"
    executor = LabExecutor(workloads=EXECUTORS, binary=emu_binary, lab_name=name)
    summary = run_experiment(parse_spec(CPU), results, executor, Events())
    assert (summary.ok, summary.total) == (4, 4)
    goodput = {(r["mode"], r["cpu"]): r["goodput_mbps"] for r in _rows(
        results, "SELECT mode, CAST(json_extract(params, '$.cpu_pct') AS DOUBLE) AS cpu, goodput_mbps FROM runs")}
    # Quiet machine: QUIC keeps about a third, TCP all but a few percent. With two CPU hogs the
    # throttled client also reads TCP more slowly (about three quarters kept): the gap stays wide.
    h3_kept, tcp_kept = (goodput[(mode, 5.0)] / goodput[(mode, 100.0)] for mode in ("h3", "tcp"))
    assert h3_kept < 0.7 and tcp_kept > h3_kept + 0.25, goodput
    assert not any(p.name == f"pl-{name}-cpu" for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/cpu"),
                                                             Path("/sys/fs/cgroup/unified")) if root.is_dir()
                   for p in root.iterdir())


def test_one_server_host_serves_both_page_copies(tmp_path: Path, emu_binary: Path, lab_name: Callable[[], str]) -> None:
    """The page workload with one server host: side b's server serves the second copy from the
    host's second addresses beside side a's."""
    spec = PAIR.replace("image_bytes = 250000\n", 'image_bytes = 250000\nservers = "one"\n')
    assert 'servers = "one"' in spec
    sides = _run_pair(spec, tmp_path / "results", emu_binary, lab_name())
    page = 20_000 + 4 * 250_000
    assert all(s["status"] == "ok" and s["plt_ms"] > 0 and page < s["bytes"] < 1.3 * page for s in sides.values()), sides
