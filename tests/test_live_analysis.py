"""003 ch. 7's analyses of the live store (`protolab live analyze`, docs/live.md "Analyses (003
ch. 7)"): the pure analyses on fixed data, the store read into them and drawn into a page, a
corrupt upload named in the error, and (lab) a small fleet end to end with its truth."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from conftest import lab_namespaces, run_protolab
from documents import fixture

from protolab.live.analysis import (
    ConnectionLosses,
    Direction,
    LiveTest,
    Truth,
    browser_family,
    connection_losses,
    factor_of_increase,
    quic_share,
    quic_usage_by_browser,
    recovered_vs_true,
    summary,
    without_outliers,
)
from protolab.live.analyze import LiveAnalysisError, load_store
from protolab.live.fleet import (
    FLEET_FILE,
    LOSSLESS_SHARE,
    RATE_MBPS,
    RTT_MS,
    FleetError,
    FleetSettings,
    draw_conditions,
    link_truth,
    read_fleet_log,
    run_fleet,
)
from protolab.live.page_report import write_page
from protolab.measure.qlog import QlogEvent, QlogTrace

CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"


def test_factor_of_increase_is_idle_over_loaded_rpm() -> None:
    assert factor_of_increase(600.0, 200.0) == pytest.approx(3.0)
    assert factor_of_increase(None, 200.0) is None
    assert factor_of_increase(600.0, 0.0) is None


def test_z_score_above_3_is_an_outlier_in_either_coordinate() -> None:
    points = [(float(i), 1.0 + 0.01 * i) for i in range(20)]
    kept = without_outliers([*points, (1000.0, 1.05), (5.0, 400.0)])
    assert kept == points
    # Too few points to call one an outlier; a coordinate without spread has none.
    assert without_outliers([(1.0, 1.0), (1000.0, 1.0)]) == [(1.0, 1.0), (1000.0, 1.0)]


@pytest.mark.parametrize("user_agent, family", [
    (CHROME, "Chrome"),
    ("Mozilla/5.0 (Windows NT 10.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36 Edg/131.0", "Edge"),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox"),
    ("Mozilla/5.0 (Macintosh) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15", "Safari"),
    ("Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 Chrome/131.0 Mobile Safari/537.36 Instagram 300.0", "embedded"),
    ("curl/8.5.0", "other"),
    (None, "unknown"),
])
def test_browser_family(user_agent: str | None, family: str) -> None:
    assert browser_family(user_agent) == family


def test_quic_share_from_the_pages_protocol_counts_or_the_tests_protocol() -> None:
    assert quic_share({"protocols": {"h3": 3, "h2": 1}, "protocol": "h3"}) == pytest.approx(0.75)
    assert quic_share({"protocol": "h3"}) == 1.0
    assert quic_share({"protocol": "h2"}) == 0.0
    assert quic_share({}) is None


def _event(time_ms: float, name: str, data: dict[str, Any]) -> QlogEvent:
    return QlogEvent(time_ms, name, data)


def test_losses_of_a_qlog_are_dated_when_sent_and_grouped_by_annex_c() -> None:
    events = [_event(10.0 * n, "transport:packet_sent", {"header": {"packet_type": "1RTT", "packet_number": n}})
              for n in range(10)]
    events += [_event(200.0, "recovery:metrics_updated", {"smoothed_rtt": 0.010, "rtt_variance": 0.002}),
               _event(250.0, "recovery:packet_lost", {"header": {"packet_type": "1RTT", "packet_number": 2}}),
               _event(250.0, "recovery:packet_lost", {"header": {"packet_type": "1RTT", "packet_number": 3}}),
               _event(260.0, "recovery:packet_lost", {"header": {"packet_type": "1RTT", "packet_number": 8}})]
    losses = connection_losses(QlogTrace(Path("server.qlog"), {}, events))
    assert (losses.sent, losses.lost, losses.lost_sent_ms) == (10, 3, (20.0, 30.0, 80.0))
    assert losses.threshold_ms == pytest.approx(12.0)
    test = LiveTest("t", "protolab.rpm", "Chrome", 1.0, connections=(losses,))
    # 20 and 30 ms are 10 ms apart (within sRTT + var = 12 ms): one burst; 80 ms starts another.
    assert test.burst_sizes == [2, 1]
    assert test.loss_rate == pytest.approx(0.3)


def _test(token: str, download_rpm: float, connections: tuple[ConnectionLosses, ...] = (),
          browser: str = "Chrome", share: float | None = 1.0) -> LiveTest:
    return LiveTest(token, "protolab.rpm", browser, share, idle_rpm=600.0, idle_latency_ms=100.0,
                    directions={"download": Direction(10e6, download_rpm, 60000 / download_rpm),
                                "upload": Direction(5e6, 120.0, 500.0)},
                    connections=connections)


def test_summary_gives_the_chapters_medians_and_shares() -> None:
    tests = [_test("a", 200.0, (ConnectionLosses(100, 0),)),
             _test("b", 100.0, (ConnectionLosses(100, 2, (0.0, 1.0), 5.0),), browser="Safari", share=0.0),
             _test("c", 300.0, (ConnectionLosses(200, 1, (0.0,), 5.0),), share=0.5),
             _test("d", 60.0)]
    stats = summary(tests)
    # Download factors 3, 6, 2, 10; upload 5 everywhere (not above 5).
    assert stats["median_factor_download"] == pytest.approx(4.5)
    assert stats["share_factor_above_5_download"] == pytest.approx(0.5)
    assert stats["median_factor_upload"] == pytest.approx(5.0)
    assert stats["share_factor_above_5"] == pytest.approx(2 / 8)
    # Loss rates 0, 2%, 0.5% (d has no qlogs).
    assert (stats["n_loss"], stats["median_loss_pct"], stats["max_loss_pct"]) == (3, pytest.approx(0.5), pytest.approx(2.0))
    assert (stats["share_loss_below_1pct"], stats["share_no_loss"]) == (pytest.approx(2 / 3), pytest.approx(1 / 3))
    assert (stats["bursts"], stats["share_single_loss_bursts"], stats["share_bursts_below_10"]) == (2, 0.5, 1.0)
    assert quic_usage_by_browser(tests) == {"Chrome": {"none": 0, "some": 1, "all": 2},
                                            "Safari": {"none": 1, "some": 0, "all": 0}}


def test_recovered_against_the_fleets_truth() -> None:
    truth = Truth(rate_bps=10e6, rtt_ms=40.0, queue_bytes=100_000, loss=0.0, down_arrived=1000, down_dropped=10)
    # A full 100 kB buffer at 10 Mbit/s adds 80 ms to 40: a factor of 3.
    assert truth.full_buffer_factor == pytest.approx(3.0)
    test = LiveTest("t", "protolab.rpm", "Chrome", 1.0, idle_rpm=1400.0, idle_latency_ms=42.0,
                    directions={"download": Direction(9e6, 470.0, 126.0)},
                    connections=(ConnectionLosses(1000, 8),), truth=truth)
    untrue = _test("u", 100.0)
    stats = {r.metric: r.stats() for r in recovered_vs_true([test, untrue])}
    assert stats["download capacity"]["n"] == 1
    assert stats["download capacity"]["median_error"] == pytest.approx(-1.0)
    assert stats["download capacity"]["median_relative_error"] == pytest.approx(-0.1)
    assert stats["upload capacity"]["n"] == 0
    assert stats["base RTT (R_U)"]["median_error"] == pytest.approx(2.0)
    assert stats["download loss rate"]["median_error"] == pytest.approx(-0.2)
    assert stats["download latency increase"]["median_error"] == pytest.approx(0.0)
    # 8 declared losses, 10 drops: none need be spurious; 12 declared: at least 2 are.
    assert test.spurious_lower_bound == 0.0 and untrue.spurious_lower_bound is None
    more = LiveTest("m", "protolab.rpm", "Chrome", 1.0, connections=(ConnectionLosses(1000, 12),), truth=truth)
    assert more.spurious_lower_bound == pytest.approx(2 / 12)
    assert summary([test, more])["share_tests_spurious"] == 0.5


def test_the_fleets_design_is_seeded_and_space_filling() -> None:
    first = draw_conditions(20, seed=3)
    assert first == draw_conditions(20, seed=3) and first != draw_conditions(20, seed=4)
    low, high = RTT_MS
    strata = sorted(math.floor(20 * math.log(c.rtt_ms / low) / math.log(high / low) - 1e-9) for c in first)
    assert strata == list(range(20))  # a Latin hypercube: one RTT per stratum
    low, high = RATE_MBPS  # the wired tests' rates, each in a stratum of its own
    wired = [math.floor(20 * math.log(c.rate_bps / 1e6 / low) / math.log(high / low)) for c in first if c.link_kind == "wired"]
    assert len(set(wired)) == len(wired) >= 8
    assert sum(1 for c in first if c.loss == 0) == round(20 * LOSSLESS_SHARE)
    assert all(c.queue_bytes >= 15_000 and 10 <= c.rtt_ms <= 150 for c in first)
    assert all(c.protocol == "h3" for c in first if c.browser in ("Chrome", "Firefox"))
    assert all(c.protocol == "h2" for c in first if c.browser == "Safari")


def test_the_fleet_log_resumes_after_a_cut_line_and_names_a_broken_one(tmp_path: Path) -> None:
    log = tmp_path / FLEET_FILE
    log.write_text('{"index": 0, "token": "a"}\n{"index": 1, "tok')
    assert [e["index"] for e in read_fleet_log(log)] == [0]
    log.write_text('{"index": 0, "token": "a"}\nnot json\n{"index": 2, "token": "c"}\n')
    with pytest.raises(FleetError, match=rf"{log}: line 2: not valid JSON"):
        read_fleet_log(log)


def test_link_truth_counts_arrivals_before_the_queue() -> None:
    counters = {"links": {"client.down": {"enqueued_packets": 990, "dropped_packets": {
        "queue_full": 6, "random_loss": 4, "aqm": 0}}, "client.up": {"delivered_bytes": 12345}}}
    assert link_truth(counters) == {"down_arrived": 1000, "down_dropped": 10, "up_delivered_bytes": 12345}


QLOG_LINES = [
    {"qlog_version": "0.3", "qlog_format": "JSON-SEQ", "title": "protolab server quic-1", "description": "start_unix_ns=1"},
    *({"time": 10.0 * n, "name": "transport:packet_sent", "data": {"header": {"packet_type": "1RTT", "packet_number": n}}}
      for n in range(200)),
    {"time": 2000.0, "name": "recovery:metrics_updated", "data": {"smoothed_rtt": 0.04, "rtt_variance": 0.01}},
    {"time": 2001.0, "name": "recovery:packet_lost", "data": {"header": {"packet_type": "1RTT", "packet_number": 7}}},
]


def write_store(data: Path) -> str:
    """A store with one h3 RPM test (the contract's fixture result, a server qlog with one loss
    in 200 packets, a fleet truth) and one bulk test; the RPM test's token."""
    token = "A" * 43
    test_dir = data / "tests" / token
    (test_dir / "qlogs").mkdir(parents=True)
    meta = {"schema": "protolab.live.meta", "schema_version": 1, "token": token,
            "client": {"client": "protolab-fleet", "user_agent": CHROME}, "token_user_agent": "protolab-measure"}
    (test_dir / "meta.json").write_text(json.dumps(meta))
    (test_dir / "result.json").write_text(json.dumps({**fixture("rpm-h2.json"), "protocol": "h3"}))
    (test_dir / "qlogs" / "server-quic-1.qlog").write_text("".join(json.dumps(line) + "\n" for line in QLOG_LINES))
    bulk_dir = data / "tests" / ("B" * 43)
    bulk_dir.mkdir(parents=True)
    (bulk_dir / "meta.json").write_text(json.dumps({**meta, "token": "B" * 43}))
    (bulk_dir / "result.json").write_text(json.dumps({"schema": "protolab.measure.bulk", "schema_version": 1}))
    (data / "tests" / ".partial-xyz").mkdir()
    truth = {"index": 0, "token": token, "rate_bps": 20e6, "rtt_ms": 40.0, "queue_bytes": 400_000, "loss": 0.0,
             "down_arrived": 400, "down_dropped": 2}
    (data / FLEET_FILE).write_text(json.dumps(truth) + "\n")
    return token


def test_a_store_is_read_and_drawn_into_the_page(tmp_path: Path) -> None:
    token = write_store(tmp_path / "data")
    loaded = load_store(tmp_path / "data")
    (test,) = loaded.tests
    assert (test.token, test.browser, test.quic_share, test.loss_rate) == (token, "Chrome", 1.0, pytest.approx(0.005))
    rpm = fixture("rpm-h2.json")
    assert test.factor("download") == pytest.approx(rpm["idle"]["rpm"] / rpm["directions"]["download"]["rpm"])
    assert test.truth is not None and test.truth.down_loss_rate == pytest.approx(0.005)
    assert loaded.other_schemas == {"protolab.measure.bulk": 1} and loaded.fleet_entries == 1
    page = write_page(loaded, tmp_path / "page", "data").read_text()
    assert "Whose distribution" in page and "19.22%" in page and "Recovered against true" in page
    assert "Fig. 7.6: spurious retransmissions" in page
    assert "fig7-6-spurious" in page  # the store's fleet truth gives Fig. 7.6's lower bound
    assert len(list((tmp_path / "page" / "figures").glob("*.svg"))) == 9


def test_a_corrupt_upload_is_named_in_the_error(tmp_path: Path) -> None:
    write_store(tmp_path / "data")
    broken = tmp_path / "data" / "tests" / ("C" * 43)
    broken.mkdir()
    (broken / "meta.json").write_text("{}")
    (broken / "result.json").write_text('{"schema": "protolab.rpm", "idle": ')
    with pytest.raises(LiveAnalysisError, match=rf"{broken / 'result.json'}: not valid JSON"):
        load_store(tmp_path / "data")
    done = run_protolab("live", "analyze", tmp_path / "data", timeout=120)
    assert done.returncode == 1 and f"{broken / 'result.json'}: not valid JSON" in " ".join(done.stderr.split())
    assert "Traceback" not in done.stderr
    # --skip-bad reads the rest and lists what it left out (the page shows the list).
    loaded = load_store(tmp_path / "data", skip_bad=True)
    assert len(loaded.tests) == 1 and loaded.skipped == [f"{broken / 'result.json'}: not valid JSON "
                                                         "(Expecting value: line 1 column 36 (char 35))"]


def test_a_corrupt_qlog_is_named_too(tmp_path: Path) -> None:
    token = write_store(tmp_path / "data")
    qlog = tmp_path / "data" / "tests" / token / "qlogs" / "server-quic-1.qlog"
    qlog.write_text(qlog.read_text()[:-20] + "\n")
    with pytest.raises(LiveAnalysisError, match=rf"{qlog}: line 203"):
        load_store(tmp_path / "data")


@pytest.mark.lab
def test_a_small_fleet_end_to_end(emu_binary: Path, tmp_path: Path) -> None:
    settings = FleetSettings(tmp_path / "data", tests=2, seed=7, max_duration_s=2.0, binary=emu_binary)
    lines: list[str] = []
    entries = run_fleet(settings, tmp_path / "work", say=lines.append)
    assert lab_namespaces(settings.lab_name) == []
    assert [e["index"] for e in entries] == [0, 1] and lines[-1].startswith("[2/2] test 1:")
    loaded = load_store(settings.data_dir)
    assert len(loaded.tests) == 2 and all(t.truth is not None for t in loaded.tests)
    for test in loaded.tests:
        truth = test.truth
        assert truth is not None
        # The idle probes see the configured RTT and a little more (the endpoints), never less.
        assert test.idle_latency_ms is not None and truth.rtt_ms * 0.95 <= test.idle_latency_ms <= truth.rtt_ms + 40
        download = test.directions["download"].capacity_bps
        assert download is not None and download <= 1.05 * truth.rate_bps
        assert truth.down_arrived and truth.down_arrived > 100
    # Every browser label's protocol is the design's: the QUIC usage recovers it.
    design = {c.index: c for c in draw_conditions(2, 7)}
    by_token = {e["token"]: design[e["index"]] for e in entries}
    assert all(t.quic_share == (1.0 if by_token[t.token].protocol == "h3" else 0.0) for t in loaded.tests)
    # Resumed: nothing left to run, no lab started.
    again = run_fleet(settings, tmp_path / "work", say=lines.append)
    assert again == entries and lines[-1] == "fleet: 2 of 2 tests done, 0 failed, 0 to run"
