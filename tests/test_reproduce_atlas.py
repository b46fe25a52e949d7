"""001's registry entries, the summed-window source of Fig. 3 and the reproduction atlas, on
fixed data and a small fake store (no lab)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from documents import START_NS, load_result, page_connection
from protolab.reproduce import atlas
from protolab.reproduce.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Claim
from protolab.reproduce.cli import experiment_of, judge, run_counts, verdict_document
from protolab.reproduce.data import rows_of, size_class
from protolab.reproduce.drawings import DRAWINGS, DrawingInput, _panels, drawing_for
from protolab.reproduce.figures import FIGURES, REGISTRY, Explanation, Figure
from protolab.reproduce.windows import backoff_factors, mean_summed_window, summed_window_timeline
from protolab.results.record import RunRecord
from protolab.run.runner import plan
from protolab.store import ResultsStore

ROOT = Path(__file__).resolve().parents[1]

SEED001 = [f for f in FIGURES if f.id.startswith("001-")]


def test_every_result_of_001_is_in_the_registry() -> None:
    """Figs. 3, 4 (and 4c on recorded pages), 5a-b, 5c, 6a-b, 6c, 7 and Table II (Table I is the
    corpus, an input)."""
    assert {f.id for f in SEED001} == {"001-fig3", "001-fig4", "001-fig4c", "001-table2", "001-fig5", "001-fig5c",
                                       "001-fig6", "001-fig6c", "001-fig7"}


@pytest.mark.parametrize("figure", [f for f in FIGURES if not f.not_runnable], ids=lambda f: f.id)
def test_runnable_entries_plan_and_their_quick_variant_is_smaller(figure: Figure) -> None:
    quick, full = (len(plan(experiment_of(figure, q))) for q in (True, False))
    assert 0 < quick < full, figure.id
    assert figure.claims and figure.paper and figure.seed, figure.id
    assert figure.quick_budget <= figure.budget or figure.budget == 0, figure.id


@pytest.mark.parametrize("figure", [f for f in FIGURES if f.not_runnable], ids=lambda f: f.id)
def test_not_runnable_entries_say_why_and_name_a_runnable_substitute(figure: Figure) -> None:
    assert len(figure.not_runnable) > 20 and figure.paper, figure.id
    if figure.substitute:
        assert figure.substitute in REGISTRY and not REGISTRY[figure.substitute].not_runnable, figure.id


@pytest.mark.parametrize("figure", [f for f in FIGURES if f.explanations], ids=lambda f: f.id)
def test_explanations_name_a_claim_of_their_figure_and_an_existing_spec(figure: Figure) -> None:
    # A statement that drifts from its claim would leave the claim counted as unexplained.
    statements = {claim.statement for claim in figure.claims}
    for explanation in figure.explanations:
        assert explanation.claim in statements | {""}, (figure.id, explanation.claim)
        assert explanation.cause and explanation.evidence, figure.id
        for spec in re.findall(r"specs/[\w.-]+\.toml", explanation.command + explanation.evidence):
            assert (ROOT / spec).is_file(), (figure.id, spec)


def test_list_marks_not_runnable_entries_and_running_one_is_refused() -> None:
    listed = subprocess.run([sys.executable, "-m", "protolab", "reproduce", "--list"], capture_output=True, text=True,
                            timeout=300, check=False, env=_wide_env())
    assert listed.returncode == 0, listed.stderr
    # the runs column says so (a short cell that never wraps), the description why and what instead
    lines = {line.split()[0]: line for line in listed.stdout.splitlines() if line.split() and line.split()[0] in REGISTRY}
    for figure in FIGURES:
        assert ("not runnable" in lines[figure.id]) == bool(figure.not_runnable), lines[figure.id]
    assert "instead: 001-fig5" in " ".join(listed.stdout.split())
    refused = subprocess.run([sys.executable, "-m", "protolab", "reproduce", "001-fig4"], capture_output=True,
                             text=True, timeout=300, check=False)
    assert refused.returncode != 0 and "cannot run here" in refused.stderr and "001-fig5" in refused.stderr


def _wide_env() -> dict[str, str]:
    import os

    return {**os.environ, "COLUMNS": "200"}


def test_size_classes_split_table_one() -> None:
    assert [size_class(kb) for kb in (50, 499, 500, 1499, 1500, 3723)] == ["small", "small", "medium", "medium",
                                                                          "large", "large"]


# --------------------------------------------------------------------- summed windows (pure)

def test_the_summed_window_holds_each_connection_between_its_first_and_last_sample() -> None:
    s = 1_000_000_000
    samples = {
        "a": [(0, 10_000.0), (s, 10_000.0)],                  # the whole second
        "b": [(s // 2, 20_000.0), (s, 40_000.0)],            # from 0.5 s, 20 kB until its last sample
        "c": [(0, 5_000.0), (s // 5, 5_000.0)],              # 0 .. 0.2 s inclusive: 21 of 100 grid points
    }
    times, total = summed_window_timeline(samples, 0, s)
    assert len(times) == 100 and times[1] == pytest.approx(0.01)
    assert total[0] == 15_000 and total[30] == 10_000 and total[60] == 30_000
    assert mean_summed_window(samples, 0, s) == pytest.approx(10_000 + 20_000 * 0.5 + 5_000 * 0.21)
    assert mean_summed_window({}, 0, s) is None
    assert mean_summed_window(samples, s, s) is None


def test_backoff_factors_are_the_new_threshold_over_the_window_before_each_reduction() -> None:
    # A Cubic connection (0.7) in segments: slow start, a loss at 20, growth, a loss at 16; the
    # threshold repeated by later samples is no new reduction.
    tcp = [(0, 10, None), (1, 20, None), (2, 14, 14), (3, 15, 14), (4, 16, 14), (5, 11.2, 11.2)]
    assert backoff_factors(tcp) == pytest.approx([0.7, 0.7])
    # gquic39 in bytes (0.85), the samples out of order.
    quic = [(2, 85_000, 85_000), (1, 100_000, None), (3, 90_000, 85_000)]
    assert backoff_factors(quic) == pytest.approx([0.85])
    assert backoff_factors([(0, 10, None), (1, 20, 30)]) == []  # a threshold above the window: no reduction


# --------------------------------------------------------------------- a fake store

def _samples(conns: dict[str, float], transport: str = "tcp") -> list[dict[str, Any]]:
    """Server samples every 10 ms over the first second, each connection at a constant window,
    a loss every 200 ms that sets the threshold to Cubic's 0.7 (gquic39: 0.85) of it."""
    factor = 0.85 if transport == "quic" else 0.7
    return [{"t_unix_ns": START_NS + i * 10_000_000, "conn": conn, "role": "server", "transport": transport,
             "event": "sample", "cwnd": int(window), "cwnd_bytes": int(window),
             # a loss every 20 samples: the threshold drops to `factor` of the window (kept constant)
             "ssthresh": int(window * factor) - i // 20}
            for conn, window in conns.items() for i in range(101)]


# mode -> server windows per connection (bytes): H1's six small windows sum to the largest.
WINDOWS = {"h1": {f"tcp-{i}": 12_000.0 for i in range(6)}, "h2": {"tcp-0": 10_000.0},
           "h2-parallel:2": {"tcp-0": 11_000.0, "tcp-1": 11_000.0}, "h2-mptcp": {"mptcp-0": 25_000.0},
           "h3": {"quic-0": 20_000.0}}


def fill_cwnd_store(results_dir: Path, experiment: str) -> None:
    with ResultsStore(results_dir) as store:
        store.upsert_experiment(experiment, experiment, {"scenario": "wifi-loss"}, {})
        for rep in range(8):  # a ratio on one page needs 7 values per cell (reproduce.claims)
            for mode, conns in WINDOWS.items():
                params = {"mode": mode, "page": "amazon", "loss_pct": 2.0, "bandwidth_mbps": 7.0, "rtt_ms": 50.0,
                          "repetition": rep, "quic_cc": "gquic39", "workload": "page"}
                # every repetition a little different, so the CIs have a width
                scaled = {conn: window * (1 + 0.01 * rep) for conn, window in conns.items()}
                load = load_result(page="amazon", mode=mode, plt_ms=1000.0, start_unix_ns=START_NS)
                store.record_run(experiment, RunRecord(f"{mode}-{rep}", params, "ok", None, started_unix_ns=START_NS,
                                                       duration_s=1.5, page_load=load,
                                                       samples=_samples(scaled, "quic" if mode == "h3" else "tcp")))


def test_the_cwnd_source_averages_the_summed_server_window(tmp_path: Path) -> None:
    fill_cwnd_store(tmp_path, "cwnd-loss")
    with ResultsStore(tmp_path, read_only=True) as store:
        rows = {(r["mode"], r["repetition"]): r for r in rows_of(store, "cwnd", "cwnd-loss")}
    assert rows[("h1", 0)]["cwnd_kb"] == pytest.approx(72.0) and rows[("h1", 0)]["connections"] == 6
    assert rows[("h2", 0)]["cwnd_kb"] == pytest.approx(10.0) and rows[("h3", 5)]["cwnd_kb"] == pytest.approx(21.0)
    assert rows[("h2", 0)]["backoff"] == pytest.approx(0.3, abs=0.001) and rows[("h2", 0)]["reductions"] == 5
    assert rows[("h3", 0)]["backoff"] == pytest.approx(0.15, abs=0.001)


def test_connection_shares_rank_each_load_s_connections_by_bytes(tmp_path: Path) -> None:
    carried = {"h2": [800, 200], "h2-parallel:2": [300, 300, 200, 200]}
    with ResultsStore(tmp_path) as store:
        store.upsert_experiment("shares", "connection-shares", {"scenario": "wifi-loss"}, {})
        for rep in range(8):  # enough values for any interval (a ratio on one page needs 7 per cell)
            for mode, sizes in carried.items():
                connections = [page_connection(i, "www.page.test", bytes=b + 10 * rep * (i == 0))
                               for i, b in enumerate(sizes)]
                load = load_result(page="vk", mode=mode, plt_ms=900.0, connections=connections)
                store.record_run("shares", RunRecord(f"{mode}-{rep}", {"mode": mode, "page": "vk", "repetition": rep},
                                                     "ok", None, started_unix_ns=START_NS, duration_s=1.0, page_load=load))
    with ResultsStore(tmp_path, read_only=True) as store:
        all_rows = rows_of(store, "connection_shares", "shares")
    rows = {r["mode"]: r for r in all_rows if r["repetition"] == 0}
    assert rows["h2"]["connections"] == 2 and rows["h2"]["top_share"] == pytest.approx(0.8)
    assert rows["h2-parallel:2"]["byte_shares"] == pytest.approx([0.3, 0.3, 0.2, 0.2])
    figure = REGISTRY["001-fig4c"]
    drawing = drawing_for(figure)
    assert drawing is not None and drawing(DrawingInput(figure, all_rows)) is not None
    verdicts = [c.check(all_rows).outcome for c in figure.claims]
    # 4 / 2 connections; 0.8 on H2's busiest; H2-Parallel's 0.3 is below 0.4; 0.8 / 0.3 > 1.
    assert verdicts[0] == REPRODUCED and verdicts[1] == REPRODUCED and verdicts[3] == REPRODUCED
    assert verdicts[2] == NOT_REPRODUCED


def _write_reproduce_json(figure: Figure, results_dir: Path, wall_time_s: float) -> dict[str, Any]:
    experiment = experiment_of(figure, True)
    verdicts, rows = judge(figure, results_dir, experiment.name)
    document = verdict_document(figure, True, experiment, verdicts, rows, runs=run_counts(results_dir, experiment.name),
                                wall_time_s=wall_time_s)
    (results_dir / "reproduce.json").write_text(json.dumps(document))
    return document


def test_fig3_claims_on_the_fake_store(tmp_path: Path) -> None:
    figure = REGISTRY["001-fig3"]
    fill_cwnd_store(tmp_path, "cwnd-loss")
    document = _write_reproduce_json(figure, tmp_path, 12.5)
    verdicts = {c["statement"]: c["verdict"] for c in document["claims"]}
    # H1 72 kB against 10 / 22 / 25 / 20 kB: larger than every other; QUIC / H2 = 2.0; QUIC's
    # backoff 0.15 against H2's 0.3: half.
    assert list(verdicts.values()) == [REPRODUCED] * 6, verdicts
    assert document["runs"] == {"ok": 40, "failed": 0, "duration_s": pytest.approx(60.0)}
    assert document["wall_time_s"] == 12.5


def test_atlas_from_fixed_results_is_self_contained(tmp_path: Path) -> None:
    """Two figures judged from fake stores (one with a claim explained, one fixed reproduce.json
    without a store), the rest not run or not runnable: counts, drawings, no external URL."""
    fig3 = REGISTRY["001-fig3"]
    fill_cwnd_store(atlas.results_dir_of(tmp_path, fig3, True), "cwnd-loss")
    _write_reproduce_json(fig3, atlas.results_dir_of(tmp_path, fig3, True), 90.0)
    fig7 = REGISTRY["001-fig7"]
    explained = Figure(**{**fig7.__dict__, "explanations": (Explanation(fig7.claims[1].statement, "gquic39's cwnd",
                                                                        "0.755 at 1 BDP"),)})
    fixed = {"schema": "protolab.reproduce", "schema_version": 1, "figure": {"id": fig7.id, "spec": fig7.spec},
             "quick": True, "experiment": "fairness", "rows": 8, "runs": {"ok": 8, "failed": 0, "duration_s": 130.0},
             "wall_time_s": 136.0, "claims": [
                 {"statement": fig7.claims[0].statement, "paper": "", "expected": {"low": 0.5, "high": None},
                  "estimate": {"value": 0.7, "ci_low": 0.68, "ci_high": 0.72, "n": 2}, "verdict": REPRODUCED},
                 {"statement": fig7.claims[1].statement, "paper": "", "expected": {"low": 0.6, "high": 0.72},
                  "estimate": {"value": 0.755, "ci_low": 0.736, "ci_high": 0.759, "n": 2}, "verdict": NOT_REPRODUCED},
                 {"statement": fig7.claims[2].statement, "paper": "", "expected": {"low": 0.4, "high": 0.6},
                  "estimate": {"value": 0.55, "ci_low": 0.3, "ci_high": 0.7, "n": 2}, "verdict": INCONCLUSIVE}]}
    fig7_dir = atlas.results_dir_of(tmp_path, fig7, True)
    fig7_dir.mkdir(parents=True)
    (fig7_dir / "reproduce.json").write_text(json.dumps(fixed))
    figures = [fig3, REGISTRY["001-fig4"], explained, REGISTRY["001-fig5"]]
    page = atlas.build(figures, tmp_path, quick=True).read_text()

    summary = page[page.index("<h2>Summary</h2>"):page.index("<section")]
    # 6 (fig3) + 3 (fig7) claims judged: 7 reproduced, 1 explained, 0 unexplained, 1 inconclusive, 0 no data
    assert re.search(r"<td>9</td><td class=\"ok\">7</td><td class=\"explained\">1</td><td class=\"bad\">0</td>"
                     r"<td class=\"unsure\">1</td><td class=\"unsure\">0</td><td class=\"none\">0</td>", summary), summary
    assert "not runnable here" in summary and 'href="#001-fig5"' in summary and "not run yet" in summary
    assert "1m30s" in summary and "2m16s" in summary and "1m00s" in summary and "2m10s" in summary
    fig3_section = page[page.index('<section id="001-fig3">'):page.index('<section id="001-fig4">')]
    assert fig3_section.count("<svg") == 2  # ours (the window timeline) and the claims
    assert "specs/cwnd-loss.toml" in fig3_section and "40 ok" in fig3_section
    assert "gquic39&#x27;s cwnd" in page  # the explanation
    assert "Not runnable here" in page
    # Self-contained: nothing loaded from elsewhere.
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "<script" not in page and "<link" not in page and "@import" not in page


def test_atlas_rejects_a_foreign_document(tmp_path: Path) -> None:
    (tmp_path / "reproduce.json").write_text(json.dumps({"schema": "something else"}))
    with pytest.raises(atlas.AtlasError, match="reproduce.json: field schema"):
        atlas.read_document(tmp_path / "reproduce.json")


def test_every_source_has_a_drawing_or_the_claims_alone() -> None:
    for figure in SEED001:
        if not figure.not_runnable:
            assert drawing_for(figure) is not None, figure.id
    assert {"runs", "pairs", "speedup", "cwnd"} <= set(DRAWINGS)


def test_bulk_runs_are_drawn_by_goodput_and_overhead_by_protocol() -> None:
    figure = REGISTRY["004-fig8-10"]
    rows = [{"mode": mode, "goodput_mbps": rate, "plt_ms": None, "bandwidth_mbps": bw, "buffer_bytes": 250_000}
            for mode, rate, bw in (("h1c", 40.0, 50.0), ("h3", 39.0, 50.0), ("h1c", 66.0, 100.0), ("h3", 58.0, 100.0))]
    drawn = DRAWINGS["runs"](DrawingInput(figure, rows))
    assert drawn is not None and [ax.get_ylabel() for ax in drawn.axes] == ["goodput (Mbit/s)"] * 2
    assert sorted(ax.get_title() for ax in drawn.axes) == ["100 Mbit/s", "50 Mbit/s"]
    overhead = DRAWINGS["overhead"](DrawingInput(REGISTRY["003-overhead"], [{"protocol": "h3", "factor": 1.05},
                                                                           {"protocol": "tcp", "factor": 1.04}]))
    assert overhead is not None and [t.get_text() for t in overhead.axes[0].get_xticklabels()] == ["h3", "tcp"]


def test_panels_fill_a_grid_in_reading_order_and_hide_the_cells_past_the_count() -> None:
    with _panels(5, (3.0, 2.0), columns=3, extra_height=0.5) as (fig, axes):
        axes[3].set_title("fourth")
    assert len(axes) == 5 and [ax.get_visible() for ax in fig.axes] == [True] * 5 + [False]
    assert fig.axes[3].get_title() == "fourth"  # the second row's first panel
    assert tuple(fig.get_size_inches()) == (9.0, 4.5)  # 3 panels wide, 2 high, half an inch more
    with _panels(2, (4.0, 3.4)) as (row, _):  # one row by default
        pass
    assert len(row.axes) == 2 and tuple(row.get_size_inches()) == (8.0, 3.4)


def test_protolabs_own_claims_are_labelled_so_in_the_list_the_atlas_and_verdicts(tmp_path: Path) -> None:
    """003-ch6-rpm judges 003's buffer claims and protolab's CoDel expectations; 003-overhead
    003's rate / goodput and protolab's wire bytes: every view says whose claim it is."""
    rpm, overhead = REGISTRY["003-ch6-rpm"], REGISTRY["003-overhead"]
    assert [c.whose for c in rpm.claims] == ["seed", "seed", "protolab", "protolab", "protolab"]
    assert all(c.whose == "protolab" for c in rpm.claims if "CoDel" in c.statement)
    assert [c.whose for c in overhead.claims] == ["seed", "protolab", "protolab"]
    assert "rate_over_goodput" in repr(overhead.claims[0].estimator) and "§6.3.2" in overhead.seed
    with pytest.raises(ValueError, match="whose = 'paper'"):
        Claim("x", overhead.claims[0].estimator, whose="paper")
    listed = subprocess.run([sys.executable, "-m", "protolab", "reproduce", "--list"], capture_output=True, text=True,
                            timeout=300, check=False, env=_wide_env())
    lines = {line.split()[0]: line for line in listed.stdout.splitlines() if line.split() and line.split()[0] in REGISTRY}
    assert "5 (3 protolab's)" in lines["003-ch6-rpm"] and "3 (2 protolab's)" in lines["003-overhead"]
    rows = [{"mode": "h3", "capacity_mbps": 9.5, "bandwidth_mbps": 10.0, "rate_over_goodput": 10 / 9.5,
             "overhead_factor": 1.04}] * 6
    document = {"schema": "protolab.reproduce", "schema_version": 2, "figure": {"id": overhead.id, "spec": overhead.spec},
                "quick": True, "experiment": "overhead-003", "rows": 6, "runs": {"ok": 6},
                "claims": [c.check(rows).to_dict() for c in overhead.claims]}
    assert [c["whose"] for c in document["claims"]] == ["seed", "protolab", "protolab"]
    assert document["claims"][0]["estimate"]["value"] == pytest.approx(1.0526, abs=1e-4)
    results = atlas.results_dir_of(tmp_path, overhead, True)
    results.mkdir(parents=True)
    (results / "reproduce.json").write_text(json.dumps(document))
    page = atlas.build([overhead], tmp_path, quick=True).read_text()
    section = page[page.index('<section id="003-overhead">'):]
    assert section.count('<span class="whose">protolab\'s</span>') == 2
    assert "3 (2 protolab&#x27;s)" in page[:page.index("<section")]
    drawn = DRAWINGS["rate_vs_goodput"](DrawingInput(overhead, rows))
    assert drawn is not None and drawn.axes[0].get_xlabel() == "configured rate (Mbit/s)"
