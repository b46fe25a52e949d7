"""Browser-page tests in the live lab fleet (issue 23; docs/live.md, "The lab fleet"): the seeded
share of page tests, the page driver's output made into a fleet entry, a resumed fleet's share,
the analyses of a store with page and CLI tests (Fig. 7.1 from the page's Resource Timing, the
recovered-vs-true table per client kind), and (lab, Chromium) one page test through the fleet."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import lab_namespaces

from protolab.live.analysis import (
    CLI,
    PAGE,
    Direction,
    LiveTest,
    Truth,
    browser_family,
    fig_7_1_tests,
    quic_usage_by_browser,
    recovered_vs_true,
    recovered_vs_true_by_client_and_link,
)
from protolab.live.analyze import load_store
from protolab.live.fleet import (
    FLEET_FILE,
    FleetError,
    FleetSettings,
    FleetTestFailed,
    client_label,
    draw_clients,
    draw_conditions,
    page_answer,
    run_fleet,
)
from protolab.live.page_report import write_page

CHROMIUM = Path("/usr/bin/chromium")
HEADLESS = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0 "
            "Safari/537.36")


def test_a_seeded_share_of_the_tests_are_page_tests_and_the_design_stays() -> None:
    assert draw_clients(50, seed=1, page_share=0.0) == [CLI] * 50
    assert draw_clients(50, seed=1, page_share=1.0) == [PAGE] * 50
    half = draw_clients(400, seed=1, page_share=0.5)
    assert half == draw_clients(400, seed=1, page_share=0.5) and half != draw_clients(400, seed=2, page_share=0.5)
    assert 160 <= half.count(PAGE) <= 240
    # A larger share keeps the smaller share's page tests.
    fifth = draw_clients(400, seed=1, page_share=0.2)
    assert all(h == PAGE for f, h in zip(fifth, half, strict=True) if f == PAGE) and fifth.count(PAGE) < half.count(PAGE)
    # The client kind is drawn on a stream of its own: every other condition is the share-0 design's.
    cli_only, mixed = draw_conditions(30, seed=4), draw_conditions(30, seed=4, page_share=0.5)
    assert [dataclasses.replace(c, client=CLI) for c in mixed] == cli_only
    assert {c.client for c in mixed} == {CLI, PAGE}
    with pytest.raises(ValueError, match="page share 1.5"):
        draw_clients(3, seed=1, page_share=1.5)


def test_the_fleet_line_names_the_client() -> None:
    test = draw_conditions(1, seed=1)[0]
    assert client_label(dataclasses.replace(test, browser="Safari", protocol="h2")) == "cli Safari h2"
    assert client_label(dataclasses.replace(test, browser="Safari", protocol="h2", client=PAGE)) == "page Chromium h2"
    assert client_label(dataclasses.replace(test, protocol="h3", client=PAGE)) == "page Chromium h3"


def _driver_output(state: str = "done", ok: bool = True) -> dict[str, Any]:
    return {"state": state, "error": None if state == "done" else "the page did not finish within 72 s",
            "result": {"schema": "protolab.rpm.browser", "protocols": {"h3": 40}, "token": "T"},
            "upload": {"ok": ok, "coordinator": "http://10.78.1.1:8090", "token": "T"},
            "chromium_version": "156.0.8078.108", "elapsed_s": 21.5}


def test_a_page_tests_entry_comes_from_the_drivers_output() -> None:
    assert page_answer(_driver_output(), 3, "h3") == {
        "token": "T", "stored": "tests/T", "qlogs": None, "chromium": "156.0.8078.108", "page_mode": "h3",
        "page_protocols": {"h3": 40}, "page_elapsed_s": 21.5}
    with pytest.raises(FleetTestFailed, match="fleet test 3: the page ended 'timeout'"):
        page_answer(_driver_output(state="timeout"), 3, "h3")
    with pytest.raises(FleetTestFailed, match="'ok': False"):
        page_answer(_driver_output(ok=False), 3, "h3")


def test_a_fleet_resumes_only_with_its_page_share(tmp_path: Path) -> None:
    # A log from before page tests (no page_share) is a share-0 fleet: resumed unchanged by default.
    (tmp_path / FLEET_FILE).write_text(json.dumps({"index": 0, "token": "a", "seed": 1}) + "\n")
    lines: list[str] = []
    assert [e["index"] for e in run_fleet(FleetSettings(tmp_path, tests=1), tmp_path / "work", say=lines.append)] == [0]
    assert lines == ["fleet: 1 of 1 tests done, 0 failed, 0 to run"]
    with pytest.raises(FleetError, match=r"written with page share \[0.0\], not 0.5; use another --data or the same "
                                         "--page-share"):
        run_fleet(FleetSettings(tmp_path, tests=1, page_share=0.5), tmp_path / "work", say=lines.append)


def test_headless_chromium_is_chrome() -> None:
    assert browser_family(HEADLESS) == "Chrome"


def _live(token: str, schema: str, share: float, truth_protocol: str | None, link: str = "wired",
          capacity: float = 9e6) -> LiveTest:
    truth = Truth(rate_bps=10e6, rtt_ms=40.0, queue_bytes=100_000, loss=0.0, link_kind=link, protocol=truth_protocol)
    return LiveTest(token, schema, "Chrome", share, idle_rpm=1200.0, idle_latency_ms=50.0,
                    directions={"download": Direction(capacity, 400.0, 150.0)}, truth=truth)


def test_recovered_vs_true_per_client_kind_and_the_quic_share() -> None:
    page_h3 = _live("p3", "protolab.rpm.browser", 1.0, "h3")
    page_h2 = _live("p2", "protolab.rpm.browser", 0.0, "h2", capacity=8e6)
    cli = _live("c", "protolab.rpm", 1.0, "h3", link="cellular", capacity=5e6)
    assert (page_h3.client_kind, cli.client_kind) == (PAGE, CLI)
    h3 = {r.metric: r for r in recovered_vs_true([page_h3, page_h2, cli])}["requests over HTTP/3 (Fig. 7.1)"]
    assert h3.pairs == ((100.0, 100.0), (0.0, 0.0), (100.0, 100.0)) and h3.stats()["median_error"] == 0.0
    # A forced-h3 page whose Resource Timing saw 25% over h2 is 25 points off.
    mixed = dataclasses.replace(page_h3, quic_share=0.75)
    assert {r.metric: r for r in recovered_vs_true([mixed])}["requests over HTTP/3 (Fig. 7.1)"].errors == [-25.0]
    groups = recovered_vs_true_by_client_and_link([cli, page_h2, page_h3, dataclasses.replace(cli, truth=None)])
    assert list(groups) == [("page h3", "wired"), ("page h2", "wired"), ("cli h3", "cellular")]
    down = {k: {r.metric: r for r in v}["download capacity"] for k, v in groups.items()}
    assert down[("page h2", "wired")].pairs == ((10.0, 8.0),) and down[("cli h3", "cellular")].pairs == ((10.0, 5.0),)
    # Fig. 7.1 reads the browser's tests when the store has any, else all of them.
    assert fig_7_1_tests([cli, page_h3, page_h2]) == [page_h3, page_h2] and fig_7_1_tests([cli]) == [cli]
    assert quic_usage_by_browser(fig_7_1_tests([cli, page_h3, page_h2])) == {"Chrome": {"none": 1, "some": 0, "all": 1}}


def _store_test(data: Path, token: str, client: dict[str, Any], result: dict[str, Any]) -> None:
    test_dir = data / "tests" / token
    test_dir.mkdir(parents=True)
    (test_dir / "meta.json").write_text(json.dumps({"schema": "protolab.live.meta", "schema_version": 1,
                                                    "token": token, "client": client}))
    (test_dir / "result.json").write_text(json.dumps(result))


def test_a_mixed_store_is_read_and_drawn(tmp_path: Path) -> None:
    """A page test as the service stores it (meta `client: browser`, the page's result with its
    Resource Timing protocol counts and Chromium's User-Agent) beside a CLI test."""
    data = tmp_path / "data"
    stages = {"download": {"capacity_bps": 9e6, "rpm": 400.0, "loaded_latency_ms": 150.0},
              "upload": {"capacity_bps": 8e6, "rpm": 300.0, "loaded_latency_ms": 200.0}}
    _store_test(data, "P" * 43, {"client": "browser", "schema": "protolab.rpm.browser"},
                {"schema": "protolab.rpm.browser", "schema_version": 1, "protocol": "h2", "protocols": {"h2": 12},
                 "user_agent": HEADLESS, "idle": {"latency_ms": 50.0, "rpm": 1200.0}, "directions": stages})
    _store_test(data, "C" * 43, {"client": "protolab-fleet", "user_agent": "Mozilla/5.0 Firefox/133.0"},
                {"schema": "protolab.rpm", "schema_version": 1, "protocol": "h3",
                 "idle": {"latency_ms": 45.0, "rpm": 1333.0}, "directions": stages})
    common = {"rate_bps": 10e6, "rtt_ms": 40.0, "queue_bytes": 100_000, "loss": 0.0, "seed": 1, "page_share": 0.5}
    (data / FLEET_FILE).write_text(
        json.dumps({"index": 0, "token": "P" * 43, "client": PAGE, "protocol": "h2", "page_mode": "h2", **common}) + "\n"
        + json.dumps({"index": 1, "token": "C" * 43, "client": CLI, "protocol": "h3", **common}) + "\n")
    loaded = load_store(data)
    by_kind = {t.client_kind: t for t in loaded.tests}
    page, cli = by_kind[PAGE], by_kind[CLI]
    assert (page.browser, page.quic_share, page.truth and page.truth.quic_share) == ("Chrome", 0.0, 0.0)
    assert (cli.browser, cli.quic_share, cli.truth and cli.truth.protocol) == ("Firefox", 1.0, "h3")
    html = write_page(loaded, tmp_path / "page", "data").read_text()
    assert "The page beside the CLI client" in html and "From the speed-test page&#x27;s tests" in html
    assert "requests over HTTP/3 (Fig. 7.1)" in html and "<th>client</th>" in html


@pytest.mark.lab
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
def test_one_page_test_through_the_fleet(emu_binary: Path, tmp_path: Path) -> None:
    """`--tests 1 --page-share 1`: the page in Chromium takes its token, uploads its result, and
    the analyses read it beside the fleet's truth (about 20-30 s on the loaded machine)."""
    settings = FleetSettings(tmp_path / "data", tests=1, seed=1, max_duration_s=2.0, binary=emu_binary, page_share=1.0)
    lines: list[str] = []
    (entry,) = run_fleet(settings, tmp_path / "work", say=lines.append)
    assert lab_namespaces(settings.lab_name) == []
    assert entry["client"] == PAGE and entry["page_mode"] == entry["protocol"] and entry["chromium"]
    assert "page Chromium" in lines[-1] and entry["down_arrived"] > 100
    meta = json.loads((settings.data_dir / "tests" / entry["token"] / "meta.json").read_text())
    assert meta["client"]["client"] == "browser" and "HeadlessChrome" in meta["token_user_agent"]
    (test,) = load_store(settings.data_dir).tests
    assert test.client_kind == PAGE and test.browser == "Chrome" and test.truth is not None
    # Chromium used what it was allowed: Fig. 7.1's truth, read back from Resource Timing.
    assert test.quic_share == test.truth.quic_share
    assert test.idle_latency_ms is not None and 0.95 * test.truth.rtt_ms <= test.idle_latency_ms <= test.truth.rtt_ms + 60
    download = test.directions["download"].capacity_bps
    assert download is not None and 0 < download <= 1.05 * test.truth.rate_bps
    if entry["protocol"] == "h3":
        assert (settings.data_dir / "tests" / entry["token"] / "qlogs").is_dir() and test.loss_rate is not None
