"""Per-run waterfalls in the report (protolab.report.waterfall), the QUIC-variant comparison
(protolab.report.quic_controllers), and the waterfall checked in headless Chromium: a screenshot
of the section is kept in results/test-artifacts/ (docs/report.md)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from documents import START_NS, load_result, page_connection, page_object
from test_store_report import fill_store

from protolab.report import quic_controllers as qc
from protolab.report import waterfall as wf
from protolab.report.build import ReportError, build_report
from protolab.report.section import Experiment, Run, controller_modes, mode_sort_key
from protolab.results.record import RunRecord
from protolab.store import ResultsStore

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "results" / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")


def _object(idx: int, conn: int | None, started: float | None, first: float | None, finished: float | None,
            **extra: Any) -> dict[str, Any]:
    return {"idx": idx, "origin": "www.a.test", "path": f"/o{idx}", "connection": conn, "queued_ms": 0.0,
            "started_ms": started, "first_byte_ms": first, "finished_ms": finished, "error": None, **extra}


def test_layout_groups_objects_by_connection_in_request_order() -> None:
    objects = [_object(0, 1, 200.0, 260.0, 300.0), _object(1, 0, 50.0, 100.0, 150.0),
               _object(2, 1, 120.0, 180.0, 400.0), _object(3, None, None, None, None, error="refused"),
               _object(4, 0, 160.0, None, None, error="reset")]
    connections = [
        {"idx": 0, "origin": "www.a.test", "protocol": "h2", "connect_start_ms": 0.0, "tcp_connect_ms": 20.0,
         "handshake_ms": 45.0},
        # Chromium: no start time; its set-up is drawn to end at its first request (120 ms)
        {"idx": 1, "origin": "www.a.test", "protocol": "h3", "connect_start_ms": None, "tcp_connect_ms": None,
         "handshake_ms": 30.0},
    ]
    waterfall = wf.layout("k", "t", 400.0, objects, connections)
    assert [lane.connection for lane in waterfall.lanes] == [0, 1, wf.NO_CONNECTION]
    assert [row.label for row in waterfall.lanes[0].rows] == ["/o1", "/o4"]
    assert [row.label for row in waterfall.lanes[1].rows] == ["/o2", "/o0"]
    assert waterfall.lanes[0].setup == wf.Setup(0.0, 20.0, 45.0, placed=False)
    assert waterfall.lanes[1].setup == wf.Setup(90.0, None, 30.0, placed=True)
    assert waterfall.lanes[0].label == "#0 h2 www.a.test"
    assert waterfall.lanes[2].setup is None and waterfall.lanes[2].rows[0].failed
    assert waterfall.received == 3  # the failed ones have no last byte


def _run(key: str, mode: str, page: str, plt: float | None, condition: tuple[Any, ...] = (),
         quic_cc: str = "cubic", status: str = "ok") -> Run:
    return Run(run_key=key, status=status, error=None, plt_ms=plt, mode=mode, page=page, repetition=0,
               params={"quic_cc": quic_cc}, condition=condition)


def test_choose_runs_takes_the_median_plt_of_the_median_page() -> None:
    runs = [_run("a1", "h2", "small", 100.0), _run("b1", "h2", "mid", 300.0), _run("b2", "h2", "mid", 100.0),
            _run("b3", "h2", "mid", 200.0), _run("b4", "h2", "mid", 400.0), _run("c1", "h2", "big", 900.0),
            _run("b5", "h3", "mid", 50.0), _run("b6", "h3", "mid", None, status="failed")]
    exp = Experiment(id="e", name="e", spec=None, provenance=None, created=None, updated=None, runs=runs,
                     modes=["h2", "h3"], pages=["small", "mid", "big"], conditions=[()])
    page, chosen = wf.choose_runs(exp)
    assert page == "mid"
    assert [r.run_key for r in chosen] == ["b3", "b5"]  # of 100, 200, 300, 400 the lower median
    assert [r.run_key for r in wf.find_runs(exp, ["c1", "zz"])] == ["c1"]
    with pytest.raises(wf.WaterfallError, match="6 runs of experiment e start with it"):
        wf.find_runs(exp, ["b"])
    with pytest.raises(wf.WaterfallError, match="--waterfall zz: no run"):
        wf.check_requested([exp], ["zz"])


def test_quic_controller_joins_the_mode_when_only_http3_varies_it() -> None:
    runs = [_run("1", "h2", "p", 1.0), _run("2", "h3", "p", 1.0), _run("3", "h3", "p", 1.0, quic_cc="gquic39")]
    controller_modes(runs)
    assert [r.mode for r in runs] == ["h2", "h3", "h3@gquic39"]
    assert sorted(["h3@gquic39", "h3", "h2", "h1"], key=mode_sort_key) == ["h1", "h2", "h3", "h3@gquic39"]
    # the TCP modes ran with both controllers too: the controller stays a condition
    both = [_run("1", "h2", "p", 1.0), _run("2", "h2", "p", 1.0, quic_cc="gquic39"), _run("3", "h3", "p", 1.0),
            _run("4", "h3", "p", 1.0, quic_cc="gquic39")]
    controller_modes(both)
    assert [r.mode for r in both] == ["h2", "h2", "h3", "h3"]
    unknown = [_run("1", "h2", "p", 1.0), _run("2", "h3", "p", 1.0)]
    unknown[0].params["quic_cc"] = None  # the TCP runs do not say: no reference to name a variant by
    controller_modes(unknown)
    assert [r.mode for r in unknown] == ["h2", "h3"]


def test_controller_parameters_from_the_canonical_spec() -> None:
    gquic = qc.parse_controller("gquic39", "cubic:c=0.4,beta=0.7,n=2,iw=32,hystart=plusplus")
    assert (gquic.initial_window_packets, gquic.connections, gquic.beta) == (32, 2, 0.7)
    assert gquic.beta_n == pytest.approx(0.85)
    assert qc.parse_controller("cubic", "cubic:c=0.4,beta=0.7,n=1,iw=10").beta_n == pytest.approx(0.7)
    assert qc.parse_controller("x", None).initial_window_packets is None
    assert qc.variant_pairs(["h1", "h2", "h3", "h3@gquic39"]) == [("h3", "h3@gquic39")]
    assert qc.geometric_mean([0.5, 2.0]) == pytest.approx(1.0)


CANONICAL = {"cubic": "cubic:c=0.4,beta=0.7,n=1,iw=10", "gquic39": "cubic:c=0.4,beta=0.7,n=2,iw=32"}


def _variant_store(results: Path) -> None:
    """h2 and h3 with cubic, h3 with gquic39, 2% loss, one page, 3 repetitions; gquic39 at 0.8 x cubic."""
    with ResultsStore(results) as store:
        store.upsert_experiment("demo", "demo", {"scenario": "wifi-loss"}, {})
        for rep in range(3):
            for mode, cc, plt in (("h2", "cubic", 1200.0), ("h3", "cubic", 1000.0), ("h3", "gquic39", 800.0)):
                plt += 10 * rep
                params = {"scenario": "wifi-loss", "loss_pct": 2.0, "mode": mode, "page": "vk", "repetition": rep,
                          "quic_cc": cc, "tcp_cc": "cubic", "order_index": rep}
                objects = [page_object("www.vk.test", "/", 5000, connection=0, finished_ms=plt / 2),
                           page_object("www.vk.test", "/a.js", 9000, connection=0, finished_ms=plt)]
                load = load_result(page="vk", mode=mode, plt_ms=plt, objects=objects,
                                   connections=[page_connection(0, "www.vk.test", requests=2, bytes=14000)],
                                   quic_cc=cc, quic_cc_canonical=CANONICAL[cc])
                store.record_run("demo", RunRecord(run_key=f"{mode}-{cc}-{rep}", params=params, status="ok",
                                                   started_unix_ns=START_NS, duration_s=plt / 1000, page_load=load))


def test_report_explains_the_quic_variants_from_the_measured_plts(tmp_path: Path) -> None:
    _variant_store(tmp_path)
    text = build_report(tmp_path, waterfalls=["h2-cubic-2"]).read_text()
    assert "Why the QUIC variants differ" in text and "h3@gquic39" in text
    assert "an initial window of 32 packets (38,400 bytes)" in text and "10 packets (12,000 bytes)" in text
    assert "shrinks its window to 0.85 of itself" in text and "(15% for gquic39 against 30%)" in text
    # medians 1010 (h3) and 810 (h3@gquic39): 0.80; against h2's 1210
    assert "h3@gquic39 needs 0.80 x the median PLT of h3" in text
    assert "the ratio h3@gquic39 / h3" not in text  # one loss rate: nothing to say about the loss
    assert "<td class=\"num\">0.80</td>" in text and "<td class=\"num\">0.83</td>" in text
    # three waterfalls (one per protocol) and the one asked for
    assert len(re.findall(r'<figure id="demo-waterfall-\d+"', text)) == 4
    assert "Requested with --waterfall. Waterfall of run h2-cubic-2" in text
    with pytest.raises(ReportError, match="--waterfall nope: no run"):
        build_report(tmp_path, tmp_path / "r2", waterfalls=["nope"])


def _check_in_chromium(index: Path, results: Path, experiment: str, figures_expected: int, shot: Path) -> None:
    """Open the report in headless Chromium: the experiment's waterfall section has its figures,
    each with a size and one receiving bar per object that the store says got its last byte;
    screenshot the section."""
    playwright = pytest.importorskip("playwright.sync_api")
    with ResultsStore(results, read_only=True) as store:
        received = {r["run_key"]: r["n"] for r in store.query(
            "SELECT run_key, count(*) AS n FROM objects WHERE experiment_id = ? "
            "AND first_byte_ms IS NOT NULL AND finished_ms IS NOT NULL GROUP BY run_key", [experiment])}
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(index.resolve().as_uri())
            assert page.locator(f"#{experiment}-waterfall").count() == 1
            figures = page.locator(f"figure[id^='{experiment}-waterfall-']")
            assert figures.count() == figures_expected
            for i in range(figures.count()):
                figure = figures.nth(i)
                box = figure.bounding_box()
                assert box is not None and box["width"] > 600 and box["height"] > 200
                caption = figure.locator("figcaption").inner_text()
                key = re.search(r"Waterfall of run (\w+)", caption)
                assert key is not None, caption
                bars = figure.locator("[id*='wf-receive-']").count()
                assert bars == received[key.group(1)] > 0, caption
            # the whole section, from its heading to its last figure, in page coordinates
            top, bottom = page.evaluate(
                """([heading, last]) => {
                    const a = document.getElementById(heading).getBoundingClientRect();
                    const b = document.getElementById(last).getBoundingClientRect();
                    return [a.top + window.scrollY, b.bottom + window.scrollY];
                }""", [f"{experiment}-waterfall", f"{experiment}-waterfall-{figures_expected}"])
            page.screenshot(path=str(shot), full_page=True, clip={"x": 0, "y": top, "width": 1400,
                                                                  "height": bottom - top})
        finally:
            browser.close()
    from PIL import Image

    with Image.open(shot) as img:
        assert img.width == 1400 and img.height > 200 * figures_expected
        colors = img.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colors is not None and len(colors) > 50  # bars, text and bands: not blank
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / shot.name)


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
def test_waterfall_in_headless_chromium(tmp_path: Path) -> None:
    """The report of a small store (2 losses x 2 protocols, one page): four waterfalls; the
    screenshot is kept as results/test-artifacts/waterfall.png."""
    fill_store(tmp_path)
    index = build_report(tmp_path, experiments=["wifi"])
    _check_in_chromium(index, tmp_path, "wifi", 4, tmp_path / "waterfall.png")


DEMO_RESULTS = Path(os.environ.get("PROTOLAB_DEMO_RESULTS", REPO / "results" / "demo"))


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
@pytest.mark.skipif(not (DEMO_RESULTS / "results.duckdb").is_file(),
                    reason="no demo results (make demo, or PROTOLAB_DEMO_RESULTS=DIR)")
def test_demo_waterfall_in_headless_chromium(tmp_path: Path) -> None:
    """The demo's own report (after `make demo`), written to a temporary directory: one waterfall
    per condition x protocol (2 losses x h1, h2, h2-parallel:2, h3, h3@gquic39), checked in
    Chromium; the screenshot is kept as results/test-artifacts/demo-waterfall.png."""
    from protolab.store import ResultsStore

    with ResultsStore(DEMO_RESULTS, read_only=True) as store:
        variants = store.query("SELECT count(*) AS n FROM runs WHERE experiment_id = 'demo' AND quic_cc = 'gquic39'")
    if not variants or not variants[0]["n"]:
        pytest.skip(f"{DEMO_RESULTS} predates the demo's gquic39 runs (run make demo again)")
    index = build_report(DEMO_RESULTS, tmp_path / "report", experiments=["demo"])
    assert "Why the QUIC variants differ" in index.read_text()
    _check_in_chromium(index, DEMO_RESULTS, "demo", 2 * 5, tmp_path / "demo-waterfall.png")
