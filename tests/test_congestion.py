"""The congestion-control lab without a lab: controller specs checked against the Rust registry,
% of link rates, pair syntax, sweeps and transport axes in the plan, the second server's page
copy, fairness from a hand-made event log, controller-state summaries from hand-made samples,
and the report's transport sections over a store filled by a fake executor."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from documents import bulk_result

from protolab.measure.flows import fairness, jain_index
from protolab.measure.transport import connection_summaries
from protolab.plan import controllers
from protolab.plan.experiment import load_spec, parse_spec
from protolab.plan.spec import SpecError
from protolab.report.build import build_report
from protolab.run.runner import (
    Events,
    PlannedRun,
    conditions,
    plan,
    run_experiment,
)
from protolab.scenarios import Condition
from protolab.scenarios.base import Scenario
from protolab.scenarios.congestion import (
    CcSuite,
    CpuLimit,
    CubicTuning,
    Fairness,
    SlowStartExit,
    WifiAggregation,
    large_images_page,
    second_address,
    FairnessParams,
    fairness_server_hosts,
    second_copy,
)
from protolab.scenarios.workloads import Side, parse_pair
from protolab.results.bulk import BulkTransfer
from protolab.results.record import RunRecord
from protolab.store import ResultsStore

REPO = Path(__file__).resolve().parents[1]
T0 = 1_800_000_000_000_000_000
MS = 1_000_000


# ---------------------------------------------------------------------- controller specs


def test_controllers_are_checked_by_the_rust_registry(emu_binary: Path) -> None:
    assert controllers.check("gquic39")["canonical"].startswith("cubic:c=0.4,cube_factor=1,beta=0.7,n=2,iw=32,")
    assert controllers.check("cubic:c=0.8,beta=0.5")["params"]["beta"] == "0.5"
    assert controllers.check("fixed:rate=70%")["base"] == "fixed"  # checked with a placeholder rate
    with pytest.raises(controllers.ControllerError, match=r'cubic: beta="1.5": a number in 0.05..1'):
        controllers.check("cubic:beta=1.5")
    with pytest.raises(controllers.ControllerError, match=r"unknown congestion controller \"vegas\""):
        controllers.check("vegas")
    with pytest.raises(controllers.ControllerError, match="rate is required"):
        controllers.check("fixed")


def test_percent_rates_follow_the_link() -> None:
    assert controllers.with_link_rate("fixed:rate=70%", 10) == "fixed:rate=7000000"
    assert controllers.with_link_rate("fixed:rate=110%", 7.5) == "fixed:rate=8250000"
    assert controllers.with_link_rate("cubic:c=0.8", None) == "cubic:c=0.8"
    with pytest.raises(controllers.ControllerError, match="needs a bandwidth"):
        controllers.with_link_rate("fixed:rate=50%", None)


def test_cc_command_line_bad_input(emu_binary: Path) -> None:
    done = subprocess.run([str(emu_binary), "cc", "check", "cubic", "reno:n=0"], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and 'reno: n="0": an integer in 1..64' in done.stderr, done.stderr
    listing = json.loads(subprocess.run([str(emu_binary), "cc", "list", "--json"], capture_output=True, text=True,
                                        check=True).stdout)
    names = [c["name"] for c in listing["controllers"]]
    assert names[:5] == ["cubic", "reno", "fast", "sprout-ewma", "fixed"] and "gquic39" in names
    done = subprocess.run([str(emu_binary), "bulk", "--server", "127.0.0.1", "--protocol", "h3", "--bytes", "1",
                           "--quic-cc", "gquic39", "--quic-initial-window", "20000"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "--quic-initial-window" in done.stderr and "set twice" in done.stderr, done.stderr
    assert "panicked" not in done.stderr


# ---------------------------------------------------------------------- pairs, pages, specs


def test_pair_syntax() -> None:
    a, b = parse_pair("h3@gquic39 vs h2-parallel:2", "page")
    assert a == Side("h3", 1, "gquic39") and b == Side("h2-parallel:2")
    assert parse_pair("tcp*2  vs  h3*2@cubic:c=0.8", "bulk") == (Side("tcp", 2), Side("h3", 2, "cubic:c=0.8"))
    for bad, message in (("h3", "a pair is"), ("h3 vs h9", "unknown mode"), ("h2@gquic39 vs h3", "does not run QUIC"),
                         ("h3*2 vs h2", "for bulk transfers"), ("h3@nosuch vs h2", "unknown congestion controller")):
        with pytest.raises(ValueError, match=message):
            parse_pair(bad, "page")
    with pytest.raises(ValueError, match="unknown bulk protocol"):
        parse_pair("quic vs tcp", "bulk")


def test_second_server_copy_of_a_page() -> None:
    page = large_images_page(3, 1000)
    copy = second_copy(page)
    assert copy["origins"] == [{"hostname": "b-images.fairness.test", "address": "10.198.1.1"}]
    assert {o["origin"] for o in copy["objects"]} == {"b-images.fairness.test"}
    assert [o.get("parent") for o in copy["objects"]] == [None, "/", "/", "/"]
    assert second_address("10.99.3.4") == "10.199.3.4"
    with pytest.raises(ValueError, match="no room"):
        second_address("10.156.0.1")


def test_fairness_one_server_host_carries_both_sides_addresses() -> None:
    first, second = ["10.99.1.1", "10.99.1.2"], ["10.199.1.1"]
    one = fairness_server_hosts(FairnessParams(servers="one"), first, second)
    assert [h["name"] for h in one] == ["server"]
    assert one[0]["addresses"] == ["10.99.1.1", "10.99.1.2", "10.199.1.1"]
    two = fairness_server_hosts(FairnessParams(), first, second)
    assert [(h["name"], h["addresses"]) for h in two] == [("server", first), ("server2", second)]
    condition = Condition.from_axes({"bandwidth_mbps": 7, "rtt_ms": 50, "loss_pct": 0, "buffer": 50_000})
    links = Fairness().links(FairnessParams(servers="one"), condition)
    assert "server.up" in links and "server2.up" not in links


def test_fairness_servers_param_is_validated(emu_binary: Path) -> None:
    with pytest.raises(SpecError, match=r"params.servers"):
        parse_spec('schema_version = 1\nscenario = "fairness"\n[params]\nservers = "three"\n')
    parse_spec('schema_version = 1\nscenario = "fairness"\n[params]\nservers = "one"\n')  # runnable now


def test_fairness_one_server_puts_both_sides_in_one_host_on_its_halves() -> None:
    a, b = Fairness().pair_servers(FairnessParams(servers="one"))
    assert (a.host, a.slot, b.host, b.slot) == ("server", "a", "server", "b")
    host = fairness_server_hosts(FairnessParams(servers="one", workload="page"),
                                 ["10.99.1.1", "10.99.1.2"], ["10.199.1.1", "10.199.1.2"])[0]
    assert (a.address(host["addresses"]), b.address(host["addresses"])) == ("10.99.1.1", "10.199.1.1")
    assert b.address(["10.77.1.1", "10.77.1.2"]) == "10.77.1.2"  # the bulk workload's two addresses
    with pytest.raises(ValueError, match="do not split into 2"):
        b.address(["10.77.1.1", "10.77.1.2", "10.77.1.3"])
    two = Fairness().pair_servers(FairnessParams())
    assert [(s.host, s.slot, s.address(["10.77.1.1"])) for s in two] == [("server", None, "10.77.1.1"),
                                                                         ("server2", None, "10.77.1.1")]
    # Recorded two-server runs keep their keys; one-server runs get their own.
    assert Fairness.key_neutral_params == {"servers": "two"}


def test_sweeps_transport_axes_and_percent_rates_in_the_plan(emu_binary: Path) -> None:
    quic_vs_tcp = load_spec(REPO / "specs" / "quic-vs-tcp.toml")
    # 8 bandwidths + 7 RTTs + 5 losses, the common point (50 Mbit/s, 40 ms, 0%) counted once.
    assert len(conditions(quic_vs_tcp)) == 8 + 7 + 5 - 2
    runs = plan(quic_vs_tcp)
    assert len(runs) == 18 * 2 * 3 and len({r.key for r in runs}) == len(runs)
    assert all(r.page is None for r in runs)
    suite = load_spec(REPO / "specs" / "cc-suite.toml")
    fixed = [r for r in plan(suite) if r.params["quic_cc"] == "fixed:rate=70%"]
    assert {(r.condition.bandwidth_mbps, r.transport["quic_cc"]) for r in fixed} == {
        (10.0, "fixed:rate=7000000"), (50.0, "fixed:rate=35000000")}
    assert all(r.params["quic_cc_resolved"] == r.transport["quic_cc"] for r in fixed)
    # Controllers and modes are interleaved inside a block (one condition, one repetition).
    ss = load_spec(REPO / "specs" / "slow-start-exit.toml")
    block = [(r.mode, r.params["quic_cc"]) for r in plan(ss) if r.repetition == 0]
    assert len(block) == 6 and len(set(block)) == 6
    tuning = plan(load_spec(REPO / "specs" / "cubic-tuning.toml"))
    assert {r.transport["quic_cc"] for r in tuning} == {f"cubic:c=0.4,cube_factor={f},beta={b}"
                                                        for f in (0.0, 1.0, 2.0) for b in (0.5, 0.7, 1.0)}
    fig22 = plan(load_spec(REPO / "specs" / "cubic-tuning-004.toml"))
    assert {r.transport["quic_cc"] for r in fig22} == {
        "cubic:c=0.4,cube_factor=1.0,beta=0.7", "cubic:c=0.4,cube_factor=1.0,beta=0.5",
        "cubic:c=0.4,cube_factor=1.0,beta=1.0", "cubic:c=0.4,cube_factor=2.0,beta=0.7",
        "cubic:c=0.4,cube_factor=0.0,beta=0.5"}


def test_bulk_scenarios_take_no_pages(emu_binary: Path) -> None:
    with pytest.raises(SpecError, match=r'axes.page: scenario "cc-suite" runs bulk transfers .* which load no pages'):
        parse_spec('schema_version = 1\nscenario = "cc-suite"\n[axes]\npage = ["baidu"]\n')
    with pytest.raises(SpecError, match=r"params: give one of bytes and duration_s, not both"):
        parse_spec('schema_version = 1\nscenario = "cc-suite"\n[params]\nbytes = 10\nduration_s = 1\n')
    with pytest.raises(SpecError, match=r"axes.mode\[0\]: .*unknown bulk protocol"):
        parse_spec('schema_version = 1\nscenario = "quic-vs-tcp"\n[axes]\nmode = ["h2-parallel:2"]\n')
    with pytest.raises(SpecError, match=r'axes.mode\[1\]: unknown mode "h4"'):
        parse_spec('schema_version = 1\nscenario = "fairness"\n[axes]\nmode = ["h3 vs h2", "h3 vs h4"]\n')


# ---------------------------------------------------------------------- the bottleneck's params

# The params fields that shape the bottleneck p0, set away from their defaults (loss bursts of 4
# packets, 2 ms of delay variation); each scenario with p0 must carry those its params have.
PATH_FIELDS = {"loss_burst": 4.0, "jitter_ms": 2.0}
P0_SCENARIOS: list[tuple[type[Scenario], dict[str, Any]]] = [
    (CcSuite, {}), (CcSuite, {"shaper_burst_bytes": 15_000}), (CubicTuning, {}), (WifiAggregation, {}),
    (SlowStartExit, {}), (CpuLimit, {}), (Fairness, {}),
]


@pytest.mark.parametrize(("scenario_class", "extra"), P0_SCENARIOS,
                         ids=lambda c: c.__name__ if isinstance(c, type) else ",".join(c) or "plain")
def test_the_params_path_fields_reach_both_directions_of_the_bottleneck(scenario_class: type[Scenario],
                                                                        extra: dict[str, Any]) -> None:
    given = {k: v for k, v in PATH_FIELDS.items() if k in scenario_class.Params.model_fields}
    params = scenario_class.Params(**given, **extra)
    condition = Condition.from_axes({"bandwidth_mbps": 10, "rtt_ms": 20, "loss_pct": 1, "buffer": 50_000,
                                     "buffer_bytes": 50_000, "ampdu_frames": 64})
    links = scenario_class().links(params, condition)
    for side in ("forward", "reverse"):
        path = links[f"p0.{side}"]
        if "loss_burst" in given:  # Gilbert-Elliott: mean burst 1 / r
            assert path["loss"]["kind"] == "gilbert-elliott" and path["loss"]["r"] == pytest.approx(1 / 4), path
        else:
            assert path["loss"] == {"kind": "bernoulli", "p": pytest.approx(0.01)}, path
        if "jitter_ms" in given:
            assert path["jitter"] == {"std_ns": 2 * MS, "dist": "normal", "preserve_order": True}, path
        else:
            assert path["jitter"] is None, path
        assert path["delay_ns"] == 10 * MS
    assert given or scenario_class is Fairness  # the list holds scenarios whose params shape the path


# ---------------------------------------------------------------------- fairness from events


def _event(t_ms: float, dst: str, size: int = 1500, ev: str = "deliver", link: str = "p0.reverse") -> str:
    return json.dumps({"t": T0 + int(t_ms * MS), "ev": ev, "link": link, "src": "10.77.1.1", "dst": dst,
                       "sport": 443, "dport": 40000, "proto": 17, "size": size, "ip_id": 0})


def test_fairness_from_the_event_log(tmp_path: Path) -> None:
    """Side a receives 1000 B every ms from 0 to 1000 ms; side b 500 B every ms from 200 to 2000
    ms. Both receive from 200 to 1000 ms, where a gets 2/3."""
    lines = [json.dumps({"schema": "protolab.events", "schema_version": 1, "lab": "x", "start_unix_ns": T0})]
    lines += [_event(t, "10.77.0.1", 1000) for t in range(1001)]
    lines += [_event(t, "10.77.0.2", 500) for t in range(200, 2001)]
    lines += [_event(t, "10.77.0.1", 1000, ev="enqueue") for t in range(100)]  # not deliveries
    lines += [_event(t, "10.77.0.2", 1000, link="p0.forward") for t in range(100)]  # other link
    events = tmp_path / "events.ndjson"
    events.write_text("\n".join(lines) + "\n")
    bins, sides = fairness(events, "p0.reverse", {"10.77.0.1": "a", "10.77.0.2": "b"}, 100)
    a, b = sides["a"], sides["b"]
    assert (a["packets"], a["bytes"], b["bytes"]) == (1001, 1_001_000, 1801 * 500)
    assert (a["first_ms"], a["last_ms"], b["first_ms"], b["last_ms"]) == (0.0, 1000.0, 200.0, 2000.0)
    assert a["common_s"] == pytest.approx(0.8)
    assert a["common_bytes"] == 801 * 1000 and b["common_bytes"] == 801 * 500
    assert a["share"] == pytest.approx(2 / 3) and b["share"] == pytest.approx(1 / 3)
    assert a["jain"] == pytest.approx(jain_index([2, 1])) == pytest.approx(0.9)
    totals = [x for x in bins if x["flow"] is None]
    first = next(x for x in totals if x["side"] == "a" and x["bin"] == 0)
    assert first["bytes"] == 100_000 and first["mbps"] == pytest.approx(8.0)
    assert {x["bin"] for x in totals if x["side"] == "b"} == set(range(2, 21))
    flows = {(x["side"], x["flow"]) for x in bins if x["flow"] is not None}
    assert flows == {("a", "udp 10.77.1.1:443>10.77.0.1:40000"), ("b", "udp 10.77.1.1:443>10.77.0.2:40000")}
    assert sum(x["bytes"] for x in bins if x["flow"] is not None) == sum(x["bytes"] for x in totals)
    assert jain_index([1, 1, 1]) == 1.0 and jain_index([1, 0]) == 0.5 and jain_index([]) is None


# ---------------------------------------------------------------------- controller states


def _row(t_ms: float, state: str | None, cwnd: int, *, event: str = "sample", tx: int = 0, rx: int = 0,
         role: str = "server") -> dict[str, Any]:
    return {"t_unix_ns": T0 + int(t_ms * MS), "conn": "quic-x", "role": role, "transport": "quic",
            "controller": "cubic", "event": event, "cc_state": state, "cwnd": cwnd, "cwnd_bytes": cwnd,
            "rtt_us": 50_000, "min_rtt_us": 40_000, "udp_tx_bytes": tx, "udp_rx_bytes": rx, "lost_packets": 3}


def test_state_fractions_and_slow_start_exit() -> None:
    rows = [_row(0, "application_limited", 12_000), _row(100, "slow_start", 12_000),
            _row(350, "conservative_slow_start", 90_000, event="state"), _row(400, "conservative_slow_start", 95_000),
            _row(500, "congestion_avoidance", 100_000, event="state"), _row(700, "recovery", 70_000),
            _row(800, "congestion_avoidance", 70_000), _row(1000, "congestion_avoidance", 75_000, tx=5_000_000, rx=9000)]
    rows += [_row(t, "application_limited", 14_000, role="client", tx=9000, rx=5_000_000) for t in (0, 1000)]
    summaries = {s["role"]: s for s in connection_summaries(list(reversed(rows)))}
    server = summaries["server"]
    assert server["sender"] and not summaries["client"]["sender"]
    assert server["duration_ms"] == 1000.0 and server["rows"] == 8
    assert server["frac_application_limited"] == pytest.approx(0.1)
    assert server["frac_slow_start"] == pytest.approx(0.25)
    assert server["frac_conservative_slow_start"] == pytest.approx(0.15)
    assert server["frac_congestion_avoidance"] == pytest.approx(0.4)
    assert server["frac_recovery"] == pytest.approx(0.1)
    assert server["slow_start_exit_ms"] == 350.0 and server["cwnd_at_exit_bytes"] == 90_000
    assert server["max_cwnd_bytes"] == 100_000 and server["lost_packets"] == 3 and server["mean_rtt_ms"] == 50.0
    assert summaries["client"]["slow_start_exit_ms"] is None


# ---------------------------------------------------------------------- report


PAIR_SPEC = """
schema_version = 1
name = "fake-fairness"
scenario = "fairness"
repetitions = 2
[params]
workload = "bulk"
[axes]
mode = ["tcp vs h3", "tcp vs h3@gquic39"]
"""
BULK_SPEC = """
schema_version = 1
name = "fake-bulk"
scenario = "cubic-tuning"
repetitions = 2
[axes]
c = [0.0, 0.4]
cube_factor = [1.0]
beta = [0.5, 0.7]
"""


def _fake_samples(run: PlannedRun) -> list[dict[str, Any]]:
    rows = []
    for i in range(20):
        state = "slow_start" if i < 5 else "congestion_avoidance"
        rows.append({**_row(i * 10.0, state, 10_000 + 1000 * i, tx=1000 * i, rx=10), "conn": f"quic-10.77.0.1:1-x-{run.key}"})
    return rows


class FakeTransportSession:
    def enter(self, condition: Condition) -> None: ...

    def leave(self, condition: Condition) -> None: ...

    def execute(self, run: PlannedRun, run_dir: Path) -> RunRecord:
        outcome = RunRecord(run.key, dict(run.params), "ok", None, samples=_fake_samples(run))
        if " vs " in run.mode:
            share = 0.75 if "gquic39" in run.mode else 0.5
            for side, value in (("a", 1 - share), ("b", share)):
                outcome.sides.append({"side": side, "label": run.mode.split(" vs ")[0 if side == "a" else 1],
                                      "mode": "tcp", "flows": 1, "status": "ok", "address": "10.77.0.1" if side == "a" else "x",
                                      "common_mbps": 7 * value, "share": value, "jain": 0.8, "common_s": 20.0})
                outcome.flow_bins += [{"side": side, "bin": b, "t_ms": 100.0 * b, "bytes": 1000, "packets": 1,
                                       "mbps": 7 * value} for b in range(10)]
        else:
            goodput = 9e6 * (0.5 + float(run.condition.extra("beta")) / 2)
            intervals = [{"t_ms": 100.0 * i, "t_unix_ns": i, "bytes": 1000, "total_bytes": 1000 * i, "rate_bps": goodput}
                         for i in range(1, 5)]
            outcome.bulk.append(BulkTransfer(bulk_result(goodput_bps=goodput, bytes=1000, duration_ms=30000.0,
                                                         intervals=intervals)))
        return outcome


class FakeTransportExecutor:
    @contextlib.contextmanager
    def session(self, experiment: Any, results_dir: Path) -> Iterator[FakeTransportSession]:
        yield FakeTransportSession()

    def provenance(self) -> dict[str, Any]:
        return {"machine": "fake"}


def test_report_transport_sections(tmp_path: Path, emu_binary: Path) -> None:
    results = tmp_path / "res"
    for text in (PAIR_SPEC, BULK_SPEC):
        summary = run_experiment(parse_spec(text), results, FakeTransportExecutor(), Events())  # type: ignore[arg-type]
        assert summary.ok == summary.total > 0
    with ResultsStore(results, read_only=True) as store:
        sides = store.query("SELECT label, share FROM pair_sides WHERE experiment_id = 'fake-fairness' ORDER BY label")
        assert len(sides) == 8 and {s["label"] for s in sides} == {"tcp", "h3", "h3@gquic39"}
        goodput = store.query("SELECT goodput_mbps FROM runs WHERE experiment_id = 'fake-bulk' ORDER BY goodput_mbps")
        assert [g["goodput_mbps"] for g in goodput][:2] == [pytest.approx(6.75)] * 2
        states = store.query("SELECT count(*) AS n FROM connection_states WHERE sender")[0]["n"]
        assert states == 4 + 8  # one sending connection per run
    index = build_report(results)
    html = index.read_text()
    assert "Shares of the bottleneck and Jain" in html and "QUIC about 2x" not in html  # tcp is not h2
    assert "Throughput per protocol and condition" in html and "beta \\ c" in html
    assert "Congestion windows over time" in html and "Controller states per connection" in html
    figures = {p.name for p in (index.parent / "figures").glob("*.svg")}
    assert {"fake-fairness-fairness.svg", "fake-fairness-share-time.svg", "fake-bulk-goodput-time.svg",
            "fake-bulk-cwnd.svg", "fake-bulk-states.svg"} <= figures
