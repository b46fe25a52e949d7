"""000 ch. 6's WiFi entries (000-table6.4, 000-table6.3) judged on fixed rows, and the mesh
clients' WiFi link profiles (no lab: the runs are checked through the registry tests in
test_reproduce.py and by `protolab reproduce`)."""

from __future__ import annotations

from typing import Any

import pytest

from protolab.reproduce.claims import NOT_REPRODUCED, REPRODUCED
from protolab.reproduce.figures import REGISTRY
from protolab.scenarios import SCENARIOS
from protolab.scenarios.base import Condition
from protolab.scenarios.wifi import (
    CLIENT_PROFILES,
    HT20_RATES_MBPS,
    contention_for_hops,
    phy_rate_for,
)

# Eight runs spread +-4% around a mean: enough for the ratio-of-ratios interval over one group.
SPREAD = (0.96, 0.97, 0.98, 0.99, 1.01, 1.02, 1.03, 1.04)


def _runs(mean_mbps: float, **columns: Any) -> list[dict[str, Any]]:
    return [{"goodput_mbps": mean_mbps * f, **columns} for f in SPREAD]


def _aggregation_rows(tcp: tuple[float, float], quic: tuple[float, float]) -> list[dict[str, Any]]:
    """(off, on) means per protocol, 8 runs each."""
    return [row for mode, (off, on) in (("tcp", tcp), ("h3", quic))
            for frames, mean in ((1, off), (64, on)) for row in _runs(mean, mode=mode, ampdu_frames=frames)]


def _verdicts(figure_id: str, rows: list[dict[str, Any]]) -> list[str]:
    return [claim.check(rows).outcome for claim in REGISTRY[figure_id].claims]


def test_table_6_4_holds_on_000s_own_means_and_its_ratios_are_theirs() -> None:
    # 000 Table 6.4: TCP 26.1 -> 49.8, QUIC 23.7 -> 38.2 Mbit/s.
    rows = _aggregation_rows(tcp=(26.1, 49.8), quic=(23.7, 38.2))
    figure = REGISTRY["000-table6.4"]
    estimates = [claim.check(rows) for claim in figure.claims]
    assert [v.outcome for v in estimates] == [REPRODUCED] * 3
    assert estimates[0].estimate is not None and estimates[2].estimate is not None
    assert abs(estimates[0].estimate.value - 49.8 / 26.1) < 1e-9
    assert abs(estimates[2].estimate.value - (49.8 / 26.1) / (38.2 / 23.7)) < 1e-9


def test_table_6_4_fails_when_quic_gains_more_or_aggregation_hurts() -> None:
    quic_gains_more = _aggregation_rows(tcp=(30.0, 45.0), quic=(30.0, 60.0))
    assert _verdicts("000-table6.4", quic_gains_more) == [REPRODUCED, REPRODUCED, NOT_REPRODUCED]
    aggregation_hurts = _aggregation_rows(tcp=(40.0, 30.0), quic=(40.0, 35.0))
    assert _verdicts("000-table6.4", aggregation_hurts)[:2] == [NOT_REPRODUCED, NOT_REPRODUCED]


# 000 Table 6.3 (Mbit/s): TCP, QUIC per WiFi client.
TABLE_6_3 = {"rp2": (61.1, 40.9), "rp3": (61.6, 40.3), "rp4": (5.0, 4.5), "rp5": (10.2, 7.9), "rp6": (49.8, 38.2),
             "rp7": (31.4, 21.6)}


def _client_rows(table: dict[str, tuple[float, float]]) -> list[dict[str, Any]]:
    return [row for client, (tcp, quic) in table.items()
            for mode, mean in (("tcp", tcp), ("h3", quic)) for row in _runs(mean, mode=mode, mesh_client=client)[:3]]


def test_table_6_3_holds_on_000s_per_client_numbers() -> None:
    verdict = REGISTRY["000-table6.3"].claims[0].check(_client_rows(TABLE_6_3))
    assert verdict.outcome == REPRODUCED and verdict.estimate is not None
    assert abs(verdict.estimate.value - 1.3557) < 1e-3  # geometric mean of 000's six TCP/QUIC ratios
    assert verdict.estimate.groups == 6


def test_table_6_3_fails_when_quic_is_faster_on_every_client() -> None:
    swapped = {client: (quic, tcp) for client, (tcp, quic) in TABLE_6_3.items()}
    assert REGISTRY["000-table6.3"].claims[0].check(_client_rows(swapped)).outcome == NOT_REPRODUCED


def test_phy_rate_is_the_lowest_ht20_rate_that_carries_000s_tcp_with_the_margin() -> None:
    assert [phy_rate_for(CLIENT_PROFILES[c].tcp_mbps) for c in ("rp2", "rp3", "rp4", "rp5", "rp6", "rp7")] == \
        [78.0, 78.0, 6.5, 13.0, 65.0, 39.0]
    for profile in CLIENT_PROFILES.values():
        rate = profile.phy_rate_mbps
        assert rate * 0.9 >= profile.tcp_mbps * 1.1
        lower = [r for r in HT20_RATES_MBPS if r < rate]
        assert not lower or lower[-1] * 0.9 < profile.tcp_mbps * 1.1
    assert [contention_for_hops(h) for h in (0, 1, 2, 5)] == [0.0, 0.0, 0.05, 0.2]


def test_a_mesh_client_sets_both_wifi_directions_from_its_profile() -> None:
    scenario = SCENARIOS["wifi-clients"]
    params = scenario.Params.model_validate({})
    condition = Condition.from_axes({"bandwidth_mbps": "unlimited", "rtt_ms": 90, "loss_pct": 0, "buffer": "default",
                                     "mesh_client": "rp4"})
    links = scenario.links(params, condition)
    wifi = [link["wifi"] for link in links.values() if link.get("wifi")]
    assert len(wifi) == 2
    for hop in wifi:
        assert hop["phy_rate_bps"] == 6_500_000
        assert hop["contention_probability"] == 0.2
        assert hop["max_ampdu_frames"] == 64
    assert links["p0.forward"]["delay_ns"] + links["p0.reverse"]["delay_ns"] == 90_000_000


# ---------------------------------------------------------------------- Table 6.5, Fig. 6.4

def _bquic_rows(gains_pct: dict[str, float], quic_mbps: float = 40.0) -> list[dict[str, Any]]:
    """Three runs per client and controller: QUIC at `quic_mbps`, BQUIC that much faster."""
    return [row for client, gain in gains_pct.items()
            for cc, mean in (("cubic", quic_mbps), ("bquic", quic_mbps * (1 + gain / 100)))
            for row in _runs(mean, mode="h3", quic_cc=cc, mesh_client=client)[:3]]


def test_table_6_5_holds_on_000s_gains_and_its_estimate_is_their_geometric_mean() -> None:
    from protolab.reproduce.figures.seed000_wifi import BQUIC_GAINS_000

    verdicts = [claim.check(_bquic_rows(BQUIC_GAINS_000)) for claim in REGISTRY["000-table6.5"].claims]
    assert [v.outcome for v in verdicts] == [REPRODUCED, REPRODUCED]
    assert verdicts[0].estimate is not None and verdicts[0].estimate.groups == 6
    assert abs(verdicts[0].estimate.value - 1.1755) < 1e-3  # 000's six ratios 1.073 .. 1.28


def test_table_6_5_fails_when_bquic_is_slower_or_gains_far_more_than_000() -> None:
    slower = {client: -15.0 + i for i, client in enumerate(("rp2", "rp3", "rp5", "rp6"))}
    assert _verdicts("000-table6.5", _bquic_rows(slower)) == [NOT_REPRODUCED, NOT_REPRODUCED]
    doubled = {client: 100.0 + i for i, client in enumerate(("rp2", "rp3", "rp5", "rp6"))}
    assert _verdicts("000-table6.5", _bquic_rows(doubled)) == [REPRODUCED, NOT_REPRODUCED]


def _state_run(cc: str, exit_ms: float, app_limited: float, avoidance: float, recoveries: int = 0) -> dict[str, Any]:
    return {"mode": "h3", "quic_cc": cc, "slow_start_exit_ms": exit_ms, "frac_application_limited": app_limited,
            "frac_congestion_avoidance": avoidance, "frac_slow_start": 1 - app_limited - avoidance,
            "recovery_entries": recoveries,
            "transitions": {"slow_start->congestion_avoidance": 1, "congestion_avoidance->recovery": 2,
                            "recovery->congestion_avoidance": 2}}


def test_fig_6_4_claims_on_fixed_runs() -> None:
    rows = [_state_run("cubic", 300 + 10 * i, 0.01 * i, 0.8) for i in range(7)]
    rows += [_state_run("bquic", 500 + 10 * i, 0.02, 0.7) for i in range(8)]
    assert _verdicts("000-fig6.4", rows) == [REPRODUCED, REPRODUCED, REPRODUCED]
    starved = [{**r, "frac_application_limited": 0.5} for r in rows]
    assert _verdicts("000-fig6.4", starved)[0] == NOT_REPRODUCED
    bquic_earlier = [{**r, "slow_start_exit_ms": 100.0 + i} if r["quic_cc"] == "bquic" else r for i, r in enumerate(rows)]
    assert _verdicts("000-fig6.4", bquic_earlier)[1] == NOT_REPRODUCED
    spurious = [{**r, "recovery_entries": 3 + i % 2} for i, r in enumerate(rows)]
    assert _verdicts("000-fig6.4", spurious)[2] == NOT_REPRODUCED


def _sample(t_ms: int, state: str, event: str = "sample") -> dict[str, Any]:
    return {"t_unix_ns": t_ms * 1_000_000, "cc_state": state, "event": event}


def test_state_transitions_count_changes_in_time_order_and_a_change_row_once() -> None:
    from protolab.measure.transport import state_time_fractions, state_transitions

    rows = [_sample(0, "slow_start"), _sample(40, "congestion_avoidance", "state"),
            _sample(40, "congestion_avoidance"), _sample(100, "recovery", "state"), _sample(150, "congestion_avoidance",
                                                                                          "state"),
            _sample(200, "recovery", "state"), _sample(250, "congestion_avoidance", "state"), _sample(300, "congestion_avoidance"),
            {"t_unix_ns": 320_000_000, "event": "sample", "cc_state": None}]
    shuffled = rows[::-1]
    assert state_transitions(shuffled) == {("slow_start", "congestion_avoidance"): 1,
                                           ("congestion_avoidance", "recovery"): 2,
                                           ("recovery", "congestion_avoidance"): 2}
    fractions = state_time_fractions(shuffled)
    assert fractions == {"slow_start": 40 / 300, "congestion_avoidance": 160 / 300, "recovery": 100 / 300}
    assert state_transitions([_sample(0, "slow_start")]) == {} and state_time_fractions([]) == {}


def test_the_state_graph_sums_transitions_over_runs_and_is_drawn() -> None:
    from protolab.reproduce.drawings import DrawingInput, drawing_for
    from protolab.reproduce.state_graph import node_positions, state_graph

    rows = [_state_run("cubic", 300, 0.02, 0.8), _state_run("cubic", 310, 0.04, 0.6),
            {**_state_run("bquic", 400, 0.0, 0.9), "transitions": {"slow_start->congestion_avoidance": 1}}]
    cubic = state_graph(rows[:2])
    assert cubic.runs == 2
    assert cubic.transitions == {("slow_start", "congestion_avoidance"): 2, ("congestion_avoidance", "recovery"): 4,
                                 ("recovery", "congestion_avoidance"): 4}
    assert cubic.per_run(("congestion_avoidance", "recovery")) == 2.0
    assert cubic.time_shares["application_limited"] == 0.03 and cubic.time_shares["congestion_avoidance"] == 0.7
    assert cubic.states() == ["slow_start", "congestion_avoidance", "recovery", "application_limited"]
    positions = node_positions(cubic.states())
    assert positions["slow_start"] == (0.0, 1.0) and len(set(positions.values())) == 4
    drawing = drawing_for(REGISTRY["000-fig6.4"])
    assert drawing is not None
    figure = drawing(DrawingInput(figure=REGISTRY["000-fig6.4"], rows=rows))
    assert figure is not None and len([ax for ax in figure.axes if ax.get_title()]) == 2
    labels = {t.get_text() for ax in figure.axes for t in ax.texts}
    assert "4 (2.0/run)" in labels and "1 (1.0/run)" in labels


def _pair_rows(pair: str, tcp_share: float) -> list[dict[str, Any]]:
    return [{"pair": pair, "share_a": tcp_share * f, "share_b": 1 - tcp_share * f} for f in SPREAD]


def test_fig_6_12_holds_when_tcp_starves_quic_but_not_bquic() -> None:
    rows = _pair_rows("tcp vs h3", 0.75) + _pair_rows("tcp vs h3@bquic", 0.5)
    assert _verdicts("000-fig6.12", rows) == [REPRODUCED, REPRODUCED, REPRODUCED]
    quic_wins = _pair_rows("tcp vs h3", 0.2) + _pair_rows("tcp vs h3@bquic", 0.3)
    assert _verdicts("000-fig6.12", quic_wins) == [NOT_REPRODUCED, NOT_REPRODUCED, NOT_REPRODUCED]


def test_wifi_fairness_makes_the_shared_path_a_wifi_hop_with_half_the_rtt_each_way() -> None:
    scenario = SCENARIOS["wifi-fairness"]
    params = scenario.Params.model_validate({"phy_rate_mbps": 39, "ampdu_frames": 16})
    condition = Condition.from_axes({"bandwidth_mbps": "unlimited", "rtt_ms": 40, "loss_pct": 0, "buffer": "default"})
    links = scenario.links(params, condition)
    for side in ("forward", "reverse"):
        hop = links[f"p0.{side}"]
        assert hop["wifi"]["phy_rate_bps"] == 39_000_000 and hop["wifi"]["max_ampdu_frames"] == 16
        assert hop["delay_ns"] == 20_000_000 and hop["rate_bps"] is None
    assert [name for name, link in links.items() if link.get("wifi")] == ["p0.forward", "p0.reverse"]
    assert {"client.down", "client2.down", "server.up", "server2.up"} <= set(links)
    with pytest.raises(ValueError, match="axes.bandwidth_mbps"):
        scenario.check(params, {"bandwidth_mbps": [50], "loss_pct": [0]})
    with pytest.raises(ValueError, match="params.workload"):
        scenario.check(scenario.Params.model_validate({"workload": "page"}), {})


def test_fig_6_8_compares_the_mean_windows_with_000s_optimal_340_kb() -> None:
    def runs(mode: str, kb: float, **extra: Any) -> list[dict[str, Any]]:
        return [{"mode": mode, "mesh_client": "rp3", "mean_cwnd_bytes": kb * 1e3 * f, **extra} for f in SPREAD]

    as_000 = runs("h3", 200, quic_cc="cubic") + runs("tcp", 420)
    assert _verdicts("000-fig6.8", as_000) == [REPRODUCED, REPRODUCED, REPRODUCED]
    bloated = runs("h3", 1400, quic_cc="cubic") + runs("tcp", 900)
    assert _verdicts("000-fig6.8", bloated) == [NOT_REPRODUCED, REPRODUCED, NOT_REPRODUCED]


def test_fig_6_12_draws_each_sides_rate_over_time_from_the_bins() -> None:
    from protolab.reproduce.drawings import DrawingInput, drawing_for, side_rates_over_time

    bins = [{"kind": "bin", "pair": "tcp vs h3", "run_key": run, "side": side, "t_ms": t, "mbps": rate}
            for run, scale in (("r1", 1.0), ("r2", 2.0), ("r3", 3.0))
            for side, base in (("a", 30.0), ("b", 10.0))
            for t, rate in ((0.0, base * scale), (100.0, base))
            if not (run == "r3" and side == "b" and t == 100.0)]  # r3's side b delivered nothing then
    sides = side_rates_over_time(bins, "tcp vs h3")
    assert sides["a"][0].tolist() == [0.0, 0.1] and sides["a"][1].tolist() == [60.0, 30.0]
    assert sides["b"][1].tolist() == [20.0, 10.0]  # the median of 10, 10 and r3's missing 0
    figure = REGISTRY["000-fig6.12"]
    drawing = drawing_for(figure)
    assert drawing is not None
    drawn = drawing(DrawingInput(figure=figure, rows=[*_pair_rows("tcp vs h3", 0.75), *bins]))
    assert drawn is not None and drawn.axes[0].get_title() == "tcp vs h3"
    assert [line.get_label() for line in drawn.axes[0].get_legend().get_lines()] == ["tcp", "h3"]


def test_the_controller_states_source_counts_each_runs_server_transitions(tmp_path: Any) -> None:
    from documents import START_NS, load_result

    from protolab.reproduce.data import rows_of
    from protolab.results.record import RunRecord
    from protolab.store import ResultsStore

    def row(ms: int, state: str, event: str, role: str = "server", cwnd: int = 100_000) -> dict[str, Any]:
        return {"t_unix_ns": START_NS + ms * 1_000_000, "conn": "quic-0", "role": role, "transport": "quic",
                "event": event, "cc_state": state, "cwnd": cwnd, "cwnd_bytes": cwnd}

    samples = [row(0, "slow_start", "sample", cwnd=50_000), row(100, "congestion_avoidance", "state"),
               row(100, "congestion_avoidance", "sample", cwnd=150_000), row(300, "recovery", "state"),
               row(350, "congestion_avoidance", "state"), row(400, "congestion_avoidance", "sample"),
               row(0, "slow_start", "sample", role="client"), row(50, "recovery", "state", role="client")]
    with ResultsStore(tmp_path) as store:
        store.upsert_experiment("wifi-bquic", "wifi-bquic", {"scenario": "wifi-clients"}, {})
        store.record_run("wifi-bquic", RunRecord("r1", {"mode": "h3", "quic_cc": "cubic", "repetition": 0,
                                                        "page": "amazon", "workload": "page"}, "ok",
                                                 started_unix_ns=START_NS, duration_s=0.5,
                                                 page_load=load_result(page="amazon", mode="h3", plt_ms=400.0,
                                                                       start_unix_ns=START_NS), samples=samples))
    with ResultsStore(tmp_path, read_only=True) as store:
        (run,) = rows_of(store, "controller_states", "wifi-bquic")
    assert run["transitions"] == {"slow_start->congestion_avoidance": 1, "congestion_avoidance->recovery": 1,
                                  "recovery->congestion_avoidance": 1}  # the server's only
    assert run["recovery_entries"] == 1 and run["slow_start_exit_ms"] == pytest.approx(100.0)
    assert run["frac_slow_start"] == pytest.approx(0.25) and run["frac_recovery"] == pytest.approx(0.125)
    assert run["mean_cwnd_bytes"] == pytest.approx(100_000.0) and run["cwnd_variance"] == pytest.approx(50_000.0 ** 2 * 2 / 3)
