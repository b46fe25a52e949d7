"""000 ch. 3-4 in `protolab reproduce` (reproduce.passive, figures.seed000_passive): the analyses
of a labelled flow corpus on a fixed, seeded corpus shaped like the lab's (page loads in h1, h2,
h2-parallel:2 and h3 over link conditions), exact numbers where the corpus fixes them, every
passive figure's claims judged on it, and the registry listing them."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from protolab.reproduce import passive
from protolab.reproduce.claims import NO_DATA, NOT_JUDGEABLE, Claim, Median, NotJudgeable
from protolab.reproduce.data import SOURCES
from protolab.reproduce.figures import FIGURES, REGISTRY, seed000_passive

# Per mode: (protocol, transport, connections per origin, packets s2c, bytes per packet c2s).
MODES = {"h1": ("h1", "tcp", 3, 40, 300), "h2": ("h2", "tcp", 1, 120, 90),
         "h2-parallel:2": ("h2", "tcp", 2, 70, 90), "h3": ("h3", "udp", 1, 130, 160)}
PAGES = ("vk", "wikipedia")
CONDITIONS = [{"bandwidth_mbps": b, "rtt_ms": r, "loss_pct": 0.0} for b in (10.0, 50.0) for r in (20.0, 100.0)]
SECOND = 1_000_000_000


def _flow(rng: np.random.Generator, run: dict[str, Any], origin: str, connection: int, start_ns: int) -> dict[str, Any]:
    protocol, transport, _, s2c_packets, c2s_bpp = MODES[run["mode"]]
    s2c = max(3, int(rng.normal(s2c_packets, s2c_packets / 8)))
    c2s = max(3, int(s2c * 0.5))
    duration_ns = int(rng.uniform(0.8, 1.6) * SECOND)
    tcp = transport == "tcp"
    return {
        **run, "client_ip": "10.0.0.2", "client_port": 40000 + connection, "server_ip": f"10.99.0.{len(origin)}",
        "server_port": 443, "transport": transport, "first_ns": start_ns, "last_ns": start_ns + duration_ns,
        "duration_s": duration_ns / SECOND, "c2s_packets": c2s, "s2c_packets": s2c,
        "c2s_bytes": int(c2s * rng.normal(c2s_bpp, 10)), "s2c_bytes": s2c * 1400,
        "c2s_payload_bytes": c2s * 40, "s2c_payload_bytes": s2c * 1300 * (connection + 1),
        "syn": 2 if tcp else None, "fin": 2 if tcp else None, "rst": 0 if tcp else None, "ack": True if tcp else None,
        "sni": f"{origin}.{run['page']}.test", "protocol": protocol, "handshake_protocol": protocol,
    }


@functools.lru_cache(maxsize=1)
def corpus() -> tuple[dict[str, Any], ...]:
    """Two pages (two origins each) x four modes x four conditions x two repetitions; one extra
    unlabelled flow (another run's closing packets) per run. Seeded."""
    rng = np.random.default_rng(7)
    flows = []
    for mode in MODES:
        for page in PAGES:
            for c, condition in enumerate(CONDITIONS):
                for repetition in range(2):
                    run = {"run_key": f"{mode}-{page}-{c}-{repetition}", "mode": mode, "page": page,
                           "repetition": repetition, **condition}
                    start = (c * 10 + repetition) * 100 * SECOND
                    for origin in ("www", "img"):
                        for connection in range(MODES[mode][2]):
                            flows.append(_flow(rng, run, origin, connection, start + connection * SECOND // 100))
                    flows.append({**_flow(rng, run, "www", 9, start), "protocol": None, "handshake_protocol": None})
    return tuple(flows)


@functools.lru_cache(maxsize=None)
def rows_of(source: str) -> list[dict[str, Any]]:
    """A passive source's rows on the corpus, read through a store that holds it."""

    class Store:
        def query(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
            assert "FROM flows" in sql and params == ["traffic-corpus"]
            return [dict(f) for f in corpus()]

    return SOURCES[source](Store(), "traffic-corpus")  # type: ignore[arg-type]


def test_service_of_maps_lab_names_cdns_and_second_level_domains() -> None:
    assert passive.service_of("www.vk.test") == passive.service_of("img.vk.test") == "vk"
    assert passive.service_of("scontent.xx.fbcdn.net") == "facebook"
    assert passive.service_of("r3---sn-4g5e6nzz.googlevideo.com") == "youtube"
    assert passive.service_of("pbs.twimg.com") == "twitter"
    assert passive.service_of("news.bbc.co.uk") == "bbc"
    assert passive.service_of("WWW.Example.COM.") == "example"
    assert passive.service_of(None) is None and passive.service_of("") is None
    assert passive.service_of("localhost") == "localhost"


def test_service_shares_per_run_count_protocols_and_handshake_agreement() -> None:
    flows = [dict(f) for f in corpus() if f["run_key"] == "h1-vk-0-0"]
    flows[0]["handshake_protocol"] = "h2"  # one wrong handshake label among the run's 6 labelled flows
    rows = passive.service_shares(flows)
    assert len(rows) == 1 and rows[0]["service"] == "vk" and rows[0]["flows"] == 6
    assert rows[0]["share_h1"] == 1.0 and rows[0]["share_h2"] == 0.0
    assert rows[0]["handshake_agreement"] == pytest.approx(5 / 6)
    assert rows[0]["service_is_page"] == 1.0


def test_flow_features_are_the_labelled_flows_with_bytes_per_packet() -> None:
    rows = rows_of("flow_features")
    assert len(rows) == sum(1 for f in corpus() if f["protocol"])
    first = next(f for f in corpus() if f["protocol"])
    assert rows[0]["s2c_bytes_per_packet"] == pytest.approx(1400.0)
    assert rows[0]["c2s_bytes_per_packet"] == pytest.approx(first["c2s_bytes"] / first["c2s_packets"])


def test_scatter_separation_is_a_two_feature_tree_per_panel_on_h1_and_h2() -> None:
    rows = rows_of("scatter_separation")
    assert [r["panel"] for r in rows] == ["e"] * passive.FOLDS + ["f"] * passive.FOLDS
    h1_h2 = sum(1 for f in corpus() if f["protocol"] in ("h1", "h2"))
    assert sum(r["flows"] for r in rows if r["panel"] == "e") == h1_h2
    # The corpus' h1 requests are ~300 bytes per packet against h2's ~90: panel e separates them.
    assert min(r["accuracy"] for r in rows if r["panel"] == "e") >= 0.9


def test_cv_folds_give_ten_folds_per_algorithm_with_their_metrics() -> None:
    rows = rows_of("cv_folds")
    assert len(rows) == 4 * passive.FOLDS
    assert {r["algorithm"] for r in rows} == set(passive.CLASSIFIER_ALGORITHMS)
    labelled = sum(1 for f in corpus() if f["protocol"])
    assert sum(r["flows"] for r in rows if r["algorithm"] == "rf") == labelled  # every flow held out once
    forest = [r for r in rows if r["algorithm"] == "rf"]
    assert min(r["accuracy"] for r in forest) >= 0.9  # the modes' packets and packet sizes differ
    assert all(0 <= r["recall_h1"] <= 1 and -1 <= r["kappa"] <= 1 for r in forest)


def test_learning_curve_trains_on_growing_stratified_shares_of_one_draw() -> None:
    rows = rows_of("learning_curve")
    assert len(rows) == len(passive.TRAINING_SHARES_PCT) * passive.LEARNING_REPETITIONS
    for repetition in range(passive.LEARNING_REPETITIONS):
        draw = sorted((r for r in rows if r["repetition"] == repetition), key=lambda r: r["train_pct"])
        sizes = [r["train_flows"] for r in draw]
        assert sizes == sorted(sizes) and sizes[0] >= 3  # at 1%, still one flow of every class
        assert len({r["test_flows"] for r in draw}) == 1
    labelled = sum(1 for f in corpus() if f["protocol"])
    full = next(r for r in rows if r["train_pct"] == 100)
    assert full["train_flows"] + full["test_flows"] == labelled


def test_condition_stability_holds_out_each_value_of_each_varying_column_and_each_page() -> None:
    rows = rows_of("condition_stability")
    assert {(r["column"], r["value"]) for r in rows} == {("rtt_ms", 20.0), ("rtt_ms", 100.0),
                                                         ("bandwidth_mbps", 10.0), ("bandwidth_mbps", 50.0),
                                                         ("page", "vk"), ("page", "wikipedia")}
    assert {r["held_out"] for r in rows if r["column"] == "page"} == {"page"}
    assert {r["held_out"] for r in rows if r["column"] != "page"} == {"condition"}
    assert all(r["accuracy_ratio"] == pytest.approx(r["accuracy"] / r["cv_accuracy"]) for r in rows)
    assert all(r["algorithm"] == "rf" for r in rows)


def test_group_holdout_leaves_each_page_out_and_scores_an_unlike_page_zero() -> None:
    """A third page whose h2 flows are copies of vk's h1 flows: trained on the two other pages,
    every model takes all of them for h1 (accuracy and macro-F1 0)."""
    flows = list(corpus())
    odd = [{**f, "page": "odd", "protocol": "h2", "run_key": "odd-" + f["run_key"]}
           for f in corpus() if f["page"] == "vk" and f["mode"] == "h1" and f["protocol"]]
    rows = passive.group_holdout(flows + odd, "page", ("rf", "c45"))
    assert [(r["algorithm"], r["value"]) for r in rows] == [(a, p) for a in ("rf", "c45")
                                                            for p in ("odd", "vk", "wikipedia")]
    labelled = {page: sum(1 for f in flows + odd if f["protocol"] and f["page"] == page)
                for page in ("odd", "vk", "wikipedia")}
    for row in rows:
        assert row["flows"] == labelled[row["value"]]
        assert row["train_flows"] == sum(labelled.values()) - labelled[row["value"]]
    for row in (r for r in rows if r["value"] == "odd"):
        assert (row["accuracy"], row["macro_f1"]) == (0.0, 0.0)
    # Without the odd page, each of the two pages held out is classified as in the CV.
    alike = passive.group_holdout(flows, "page", ("rf",))
    assert [r["value"] for r in alike] == ["vk", "wikipedia"]
    assert all(r["accuracy"] >= 0.9 and r["macro_f1"] >= 0.9 for r in alike)
    assert passive.group_holdout([f for f in flows if f["page"] == "vk"], "page") == []  # one page: nothing to hold out


def test_sessions_find_each_loads_connections_and_their_overlap() -> None:
    rows = rows_of("sessions")
    parallel = [r for r in rows if r["mode"] == "h2-parallel:2"]
    assert parallel and all(r["flows"] == 2 and r["parallel"] == 1.0 for r in parallel)
    assert all(r["flows"] == 1 and r["time_overlap_pct"] is None for r in rows if r["mode"] in ("h2", "h3"))
    assert all(r["flows"] == 3 for r in rows if r["mode"] == "h1")
    # The second connection carries more server payload than the first: r = first's / second's.
    session = parallel[0]
    members = [f for f in corpus() if f["run_key"] == session["run_key"] and f["protocol"]
               and f["sni"].startswith("img.")]
    sizes = sorted(f["c2s_payload_bytes"] + f["s2c_payload_bytes"] for f in members)
    img = next(r for r in parallel if r["run_key"] == session["run_key"] and r["largest_bytes"] == sizes[1])
    assert img["data_overlap_pct"] == pytest.approx(100 * sizes[0] / sizes[1])


def test_parallel_shares_are_one_for_parallel_loads_and_zero_for_single_connections() -> None:
    rows = rows_of("parallel_shares")
    assert {r["parallel_share"] for r in rows if r["mode"] == "h2-parallel:2"} == {1.0}
    assert {r["parallel_share"] for r in rows if r["mode"] in ("h2", "h3")} == {0.0}
    assert all(r["isolated_share"] == 1 - r["parallel_share"] for r in rows)


def test_not_judgeable_claims_say_why_and_serialise() -> None:
    verdict = Claim("a third of H2 flows are parallel", NotJudgeable("campus traffic")).check([])
    assert verdict.outcome == NOT_JUDGEABLE and verdict.reason == "campus traffic" and verdict.estimate is None
    assert verdict.to_dict()["verdict"] == "not judgeable here"


PASSIVE = [f for f in seed000_passive.FIGURES if not f.not_runnable]


@pytest.mark.parametrize("figure", PASSIVE, ids=lambda f: f.id)
def test_every_passive_claim_has_data_on_a_corpus(figure: Any) -> None:
    """Every judged claim of a passive figure finds its rows in its source's analysis of the
    corpus (an estimate, whatever the verdict); the campus claims are "not judgeable here"."""
    rows = rows_of(figure.source)
    assert figure.after_run == "corpus" and figure.spec == seed000_passive.SPEC == "traffic-corpus-10x.toml"
    for claim in figure.claims:
        verdict = claim.check(rows)
        if isinstance(claim.estimator, NotJudgeable):
            assert verdict.outcome == NOT_JUDGEABLE and claim.estimator.why
        else:
            assert verdict.outcome != NO_DATA and verdict.estimate is not None, (figure.id, claim.statement)


def test_judged_lab_truths_are_reproduced_on_the_corpus() -> None:
    """Where the corpus fixes the answer, the verdict follows it."""
    for figure_id in ("000-table4.2", "000-fig4.3", "000-fig3.2"):
        figure = REGISTRY[figure_id]
        verdicts = [c.check(rows_of(figure.source)) for c in figure.claims if not isinstance(c.estimator, NotJudgeable)]
        assert verdicts and all(v.outcome == "reproduced" for v in verdicts), figure_id
    wrong_labels = passive.service_shares([{**f, "handshake_protocol": "h3"} for f in corpus() if f["mode"] != "h3"])
    assert Claim("x", Median("handshake_agreement", {}), low=0.99).check(wrong_labels).outcome == "not reproduced"


def test_the_registry_lists_000_ch3_and_ch4() -> None:
    ids = {f.id for f in FIGURES}
    wanted = {"000-fig3.2", "000-fig3.3", "000-fig3.3ef", "000-fig3.4", "000-s3.2.4-learning", "000-table3.1", "000-fig3.5",
              "000-fig3.6", "000-table3.2", "000-fig3.7", "000-table4.2", "000-fig4.3", "000-fig4.4", "000-fig4.5",
              "000-fig4.6", "000-fig4.7"}
    assert wanted <= ids
    assert REGISTRY["000-fig3.7"].not_runnable and "benches/" in REGISTRY["000-fig3.7"].not_runnable
    for figure in seed000_passive.FIGURES:
        assert figure.paper and figure.claims, figure.id
        assert any(isinstance(c.estimator, NotJudgeable) for c in figure.claims), figure.id  # the campus side


@pytest.mark.parametrize("source", ["learning_curve", "cv_folds"])
def test_the_atlas_draws_the_learning_curve_and_the_folds(source: str) -> None:
    from protolab.reproduce.drawings import DrawingInput, drawing_for

    figure = next(f for f in seed000_passive.FIGURES if f.source == source)
    drawing = drawing_for(figure)
    assert drawing is not None
    drawn = drawing(DrawingInput(figure, rows_of(source)))
    assert drawn is not None and len(drawn.axes) == 1
    assert drawing(DrawingInput(figure, [])) is None
