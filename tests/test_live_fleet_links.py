"""The fleet's access-link kinds (issue 23; docs/live.md, "The lab fleet"): the seeded draw of
wired, cellular-trace and WiFi links, a trace's mean rate over a test, the emulator parameters
of each kind, the true loss bursts from an event log, and recovered-vs-true per link kind, all
on fixed data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import lab_namespaces

from protolab.live.analysis import ConnectionLosses, Direction, LiveTest, Truth, recovered_vs_true, recovered_vs_true_by_link
from protolab.live.analyze import load_store
from protolab.live.fleet import FleetSettings, draw_conditions, run_fleet, true_rates
from protolab.live.fleet_links import (
    CELLULAR,
    CELLULAR_SHARE,
    WIFI,
    WIFI_SHARE,
    AccessLink,
    download_drops_ms,
    draw_access_links,
    link_settings,
    trace_window_rate_bps,
    wifi_capacity_bps,
)
from protolab.scenarios.cellular import TRACE_PAIRS, TRACES_DIR, trace_summary
from protolab.scenarios.wifi import CLIENT_PROFILES


def test_the_link_kinds_are_drawn_from_the_seed_in_their_shares() -> None:
    links = draw_access_links(400, seed=5)
    assert links == draw_access_links(400, seed=5) and links != draw_access_links(400, seed=6)
    cellular = [link for link in links if link.kind == CELLULAR]
    wifi = [link for link in links if link.kind == WIFI]
    assert abs(len(cellular) / 400 - CELLULAR_SHARE) < 0.06 and abs(len(wifi) / 400 - WIFI_SHARE) < 0.06
    assert {link.trace for link in cellular} == set(TRACE_PAIRS)
    assert {link.wifi_client for link in wifi} == set(CLIENT_PROFILES)
    for link in cellular:
        pair = TRACE_PAIRS[str(link.trace)]
        assert link.trace_start_ms is not None
        assert 0 <= link.trace_start_ms < trace_summary(TRACES_DIR / pair.down).period_ms
    assert len({link.trace_start_ms for link in cellular}) > len(cellular) * 0.9  # random offsets


def test_the_design_sizes_cellular_and_wifi_links_from_their_mean_capacity() -> None:
    conditions = draw_conditions(60, seed=2)
    assert conditions == draw_conditions(60, seed=2)
    kinds = {c.link_kind for c in conditions}
    assert kinds == {"wired", CELLULAR, WIFI}
    for c in conditions:
        if c.link_kind == CELLULAR:
            pair = TRACE_PAIRS[str(c.trace)]
            assert c.rate_bps == round(trace_summary(TRACES_DIR / pair.down).mean_mbps * 1e6)
            assert c.up_queue_bytes is not None and c.up_queue_bytes >= 15_000
        elif c.link_kind == WIFI:
            assert c.rate_bps == round(wifi_capacity_bps(str(c.wifi_client))) and c.up_queue_bytes == c.queue_bytes
        else:
            assert c.trace is None and c.wifi_client is None and c.up_queue_bytes is None


def test_a_traces_rate_over_a_window_wraps_with_the_replay() -> None:
    # Opportunities at 0, 5 and 10 ms, looped every 10 ms: 0, 5, 10, 10, 15, 20, 20, ...
    times, bits = [0, 5, 10], 1500 * 8
    assert trace_window_rate_bps(times, 10, 0, 10) == pytest.approx(3 * bits / 0.010)  # 5, 10, 10
    assert trace_window_rate_bps(times, 10, 0, 4) == 0.0
    assert trace_window_rate_bps(times, 10, 23, 3) == pytest.approx(1 * bits / 0.003)  # 25
    # A whole number of periods from any start is the file's mean rate.
    assert trace_window_rate_bps(times, 10, 7, 30) == pytest.approx(3 * bits / 0.010)
    with pytest.raises(ValueError):
        trace_window_rate_bps(times, 10, 0, 0)


def test_a_cellular_tests_true_rate_is_the_traces_over_its_wall_time() -> None:
    cellular = next(c for c in draw_conditions(40, seed=2) if c.link_kind == CELLULAR)
    pair = TRACE_PAIRS[str(cellular.trace)]
    period = trace_summary(TRACES_DIR / pair.down).period_ms
    whole = true_rates(cellular, period / 1e3)  # one period of the down trace: its mean
    assert whole["true_down_bps"] == pytest.approx(trace_summary(TRACES_DIR / pair.down).mean_mbps * 1e6, rel=1e-3)
    wired = next(c for c in draw_conditions(40, seed=2) if c.link_kind == "wired")
    assert true_rates(wired, 9.0) == {"true_down_bps": wired.rate_bps, "true_up_bps": wired.rate_bps}


def test_each_kind_names_only_its_transmitter() -> None:
    common = {"rate_bps": 8_000_000, "rtt_ms": 40.0, "queue_bytes": 50_000, "loss": 0.001}
    wired = link_settings(AccessLink(), **common)
    assert wired["client.down"] == wired["client.up"] == {
        "rate_bps": 8_000_000, "delay_ns": 20_000_000, "loss": {"kind": "bernoulli", "p": 0.001},
        "queue": {"kind": "droptail", "bytes": 50_000}}
    cellular = link_settings(AccessLink(CELLULAR, trace="verizon", trace_start_ms=1234), **common, up_queue_bytes=60_000)
    assert cellular["client.down"]["trace"].endswith("Verizon-LTE-short.down")
    assert cellular["client.up"]["trace"].endswith("Verizon-LTE-short.up")
    assert cellular["client.up"]["trace_start_ns"] == 1_234_000_000 and cellular["client.up"]["queue"]["bytes"] == 60_000
    assert "rate_bps" not in cellular["client.down"]
    wifi = link_settings(AccessLink(WIFI, wifi_client="rp4"), **{**common, "loss": 0.0})
    assert wifi["client.down"]["wifi"] == {"phy_rate_bps": 6_500_000, "max_ampdu_frames": 64, "frame_error_rate": 0.05,
                                           "retry_limit": 7, "contention_probability": 0.2}
    assert wifi["client.down"]["loss"] is None and "rate_bps" not in wifi["client.down"]


def test_the_true_drops_are_the_servers_udp_packets_dropped_on_the_download_link() -> None:
    def event(t_ms: float, ev: str, link: str = "client.down", src: str = "10.78.1.1", proto: int = 17) -> str:
        return json.dumps({"t": 1_000_000_000 + round(t_ms * 1e6), "ev": ev, "link": link, "src": src, "dst": "10.78.0.1",
                           "proto": proto, "size": 1252, "cause": "queue_full"})
    lines = ['{"schema": "protolab.events", "schema_version": 1, "lab": "x", "start_unix_ns": 1}',
             event(5, "enqueue"), event(7.5, "drop"), event(3, "drop"), event(4, "drop", link="client.up"),
             event(6, "drop", src="10.78.0.1"), event(8, "drop", proto=6), event(9, "deliver")]
    assert download_drops_ms(lines, "10.78.1.1", 1_000_000_000) == [3.0, 7.5]


def test_bursts_and_errors_per_link_kind() -> None:
    # The server declared 3 losses in 2 bursts (threshold 50 ms); the emulator dropped 4 in 3 bursts.
    truth = Truth(rate_bps=5e6, rtt_ms=40.0, queue_bytes=50_000, loss=0.0, down_arrived=1000, down_dropped=4,
                  link_kind=CELLULAR, up_rate_bps=1e6, down_drop_ms=(10.0, 20.0, 500.0, 900.0))
    cellular = LiveTest("c", "protolab.rpm", "Chrome", 1.0, idle_latency_ms=41.0,
                        directions={"download": Direction(4e6, 300.0, 100.0), "upload": Direction(1.2e6, 300.0, 100.0)},
                        connections=(ConnectionLosses(1000, 3, (12.0, 30.0, 505.0), 50.0, 1.7e12),), truth=truth)
    assert cellular.true_burst_sizes == [2, 1, 1] and cellular.burst_sizes == [2, 1]
    wired = LiveTest("w", "protolab.rpm", "Chrome", 1.0, idle_latency_ms=40.0,
                     directions={"download": Direction(9e6, 300.0, 100.0)},
                     truth=Truth(rate_bps=10e6, rtt_ms=40.0, queue_bytes=50_000, loss=0.0))
    by_link = recovered_vs_true_by_link([wired, cellular])
    assert list(by_link) == ["wired", CELLULAR]
    cell = {r.metric: r for r in by_link[CELLULAR]}
    assert cell["download loss bursts"].pairs == ((3, 2),)
    assert cell["mean download burst size"].pairs == ((4 / 3, 1.5),)
    assert cell["upload capacity"].pairs == ((1.0, 1.2),)  # the up trace's rate, not the down one's
    assert cell["download capacity"].stats()["median_relative_error"] == pytest.approx(-0.2)
    assert {r.metric: len(r.pairs) for r in by_link["wired"]}["download capacity"] == 1
    assert not {r.metric: r.pairs for r in by_link["wired"]}["download loss bursts"]  # no event log: no truth


def test_losses_of_several_connections_in_one_overflow_are_one_link_burst() -> None:
    # One overflow of the shared queue at about t = 1000 ms (test clock) drops a packet of each of
    # three connections, which started at different moments (their qlogs' times are their own).
    # Per connection (Fig. 7.5, 003's way) that is three bursts of one; on one clock it is one
    # burst of three, which is what the link's drops are: the comparison uses that.
    start = 1.7e12
    connections = tuple(ConnectionLosses(500, 1, (1000.0 - offset,), 40.0, start + offset)
                        for offset in (0.0, 200.0, 450.0))
    truth = Truth(rate_bps=5e6, rtt_ms=40.0, queue_bytes=50_000, loss=0.0, down_arrived=1500, down_dropped=3,
                  down_drop_ms=(1001.0, 1003.5, 1006.0))
    test = LiveTest("t", "protolab.rpm", "Chrome", 1.0, idle_latency_ms=41.0,
                    directions={"download": Direction(4e6, 300.0, 100.0)}, connections=connections, truth=truth)
    assert test.burst_sizes == [1, 1, 1]
    assert test.link_burst_sizes == [3] == test.true_burst_sizes
    rows = {r.metric: r for r in recovered_vs_true([test])}
    assert rows["download loss bursts"].pairs == ((1, 1),)
    assert rows["mean download burst size"].pairs == ((3.0, 3.0),)
    # A lossy connection without a reference time cannot be put on the clock: no comparison.
    undated = LiveTest("u", "protolab.rpm", "Chrome", 1.0, idle_latency_ms=41.0, directions={},
                       connections=(ConnectionLosses(500, 1, (10.0,), 40.0),), truth=truth)
    assert undated.link_burst_sizes is None
    assert not {r.metric: r.pairs for r in recovered_vs_true([undated])}["download loss bursts"]


@pytest.mark.lab
def test_a_cellular_and_a_wifi_fleet_test_with_the_event_log(emu_binary: Path, tmp_path: Path) -> None:
    # Seed 355's first two tests: a Verizon trace (59 ms, 0.18% loss) and RP4's WiFi hop (4.7
    # Mbit/s, 36 ms, 0.017% loss), both over HTTP/3 (the server's qlogs give recovered bursts).
    settings = FleetSettings(tmp_path / "data", tests=2, seed=355, max_duration_s=2.0, binary=emu_binary, event_log=True)
    entries = run_fleet(settings, tmp_path / "work", say=lambda _line: None)
    assert lab_namespaces(settings.lab_name) == []
    assert [(e["link_kind"], e["protocol"]) for e in entries] == [(CELLULAR, "h3"), (WIFI, "h3")]
    assert not list((tmp_path / "work").glob("*.events.ndjson"))  # read, then deleted
    for entry in entries:
        assert entry["event_log_bytes"] > 0 and entry["events_dropped"] == 0
        # The server's UDP drops on client.down are some of all the drops counted there.
        assert len(entry["down_drop_ms"]) <= entry["down_dropped"]
        assert entry["true_down_bps"] > 0 and entry["true_up_bps"] > 0
    assert entries[1]["true_down_bps"] == pytest.approx(wifi_capacity_bps("rp4"))
    loaded = load_store(settings.data_dir)
    by_link = recovered_vs_true_by_link(loaded.tests)
    assert list(by_link) == [CELLULAR, WIFI]
    for kind, recoveries in by_link.items():
        metrics = {r.metric: r for r in recoveries}
        (true_rate, recovered_rate), = metrics["download capacity"].pairs
        assert 0 < recovered_rate <= 1.3 * true_rate, kind
        assert len(metrics["download loss bursts"].pairs) == 1, kind  # the event log's truth beside the qlogs'


def test_a_failed_test_is_recorded_and_the_fleet_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextlib import contextmanager

    from protolab.live import fleet

    @contextmanager
    def no_lab(settings: object, workdir: Path):  # type: ignore[no-untyped-def]
        yield object(), tmp_path / "ca.pem"

    def one(lab: object, ca: Path, settings: object, conditions: fleet.Conditions, workdir: Path) -> dict[str, object]:
        if conditions.index == 1:
            raise fleet.FleetTestFailed(f"fleet test {conditions.index}: the client exited with 1: timed out")
        return {"index": conditions.index, "token": f"t{conditions.index}", "seed": 1, "wall_s": 1.0}

    monkeypatch.setattr(fleet, "fleet_lab", no_lab)
    monkeypatch.setattr(fleet, "run_one", one)
    settings = fleet.FleetSettings(data_dir=tmp_path / "data", tests=3, seed=1)
    said: list[str] = []
    entries = fleet.run_fleet(settings, tmp_path / "work", say=said.append)
    assert [e["index"] for e in entries] == [0, 2]
    failed = fleet.read_failed_log(tmp_path / "data" / fleet.FAILED_FILE)
    assert [(e["index"], e["error"].endswith("timed out")) for e in failed] == [(1, True)]
    assert any("test 1 failed" in line for line in said)
    # Resumed: nothing left to run, the failed test is not retried.
    said.clear()
    assert [e["index"] for e in fleet.run_fleet(settings, tmp_path / "work", say=said.append)] == [0, 2]
    assert said == ["fleet: 2 of 3 tests done, 1 failed, 0 to run"]
