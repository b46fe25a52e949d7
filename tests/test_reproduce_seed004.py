"""004's ch. 8-9 entries and 003 ch. 6's on its tbf setup, judged on fixed rows, and the pure
window and RTT statistics behind them (reproduce.bulk_stats). The runs themselves are checked
through the registry tests in test_reproduce.py and by `protolab reproduce`."""

from __future__ import annotations

from typing import Any

import pytest

from protolab.reproduce.bulk_stats import fixed_rate_share, link_use, rtt_stats, window_falls, window_stats
from protolab.reproduce.claims import INCONCLUSIVE, NO_DATA, NOT_REPRODUCED, REPRODUCED
from protolab.reproduce.data import bdp_columns
from protolab.reproduce.figures import REGISTRY
from protolab.scenarios import Condition
from protolab.scenarios.congestion import CcSuite, CcSuiteParams

SPREAD = (0.96, 0.97, 0.98, 0.99, 1.01, 1.02, 1.03, 1.04)  # eight runs around a mean
MS = 1_000_000


def _verdicts(figure_id: str, rows: list[dict[str, Any]]) -> list[str]:
    return [claim.check(rows).outcome for claim in REGISTRY[figure_id].claims]


# ---------------------------------------------------------------------- bulk_stats


def test_window_falls_are_bottom_over_top_of_each_run_of_decreases() -> None:
    assert window_falls([10, 20, 14, 15, 16, 12, 11, 12]) == pytest.approx([0.7, 11 / 16])
    assert window_falls([10, 20, 30]) == []
    assert window_falls([30, 20]) == pytest.approx([2 / 3])  # a fall still under way at the end


def test_window_stats_start_at_the_first_fall_and_keep_a_window_that_never_falls_whole() -> None:
    # Slow start 1 -> 8 kB, a cut to 4 kB at 30 ms, 6 kB from 80 ms to the last sample at 130 ms.
    samples = [(0, 1000.0), (10 * MS, 2000.0), (20 * MS, 8000.0), (30 * MS, 4000.0), (80 * MS, 6000.0),
               (130 * MS, 6000.0)]
    stats = window_stats(samples)
    assert stats["window_kept"] == pytest.approx(0.5)
    # From the sample before the fall (20 ms) to the last (130 ms) on a 10 ms grid: 8, 4 x5, 6 x6 kB.
    grid = [8.0, *[4.0] * 5, *[6.0] * 6]
    mean = sum(grid) / len(grid)
    assert stats["cwnd_kb"] == pytest.approx(mean)
    spread = (sum((g - mean) ** 2 for g in grid) / len(grid)) ** 0.5
    assert stats["cwnd_cv"] == pytest.approx(spread / mean)
    never_falls = window_stats([(0, 1000.0), (10 * MS, 2000.0), (20 * MS, 3000.0)])
    assert never_falls["window_kept"] == 1.0
    assert window_stats([(0, 1000.0)]) == {"cwnd_kb": None, "cwnd_cv": None, "window_kept": None}


def test_rtt_stats_are_the_four_metrics_of_003_fig_6_4_in_ms() -> None:
    stats = rtt_stats([10_000.0 * k for k in range(1, 11)], base_rtt_ms=50)  # 10 .. 100 ms over a 50 ms path
    assert stats == pytest.approx({"rtt_mean_ms": 55.0, "rtt_median_ms": 55.0, "rtt_p80_ms": 82.0, "rtt_p90_ms": 91.0,
                                   "rtt_inflation": 1.1})
    assert rtt_stats([])["rtt_median_ms"] is None and rtt_stats([20_000.0])["rtt_inflation"] is None


def test_link_use_and_the_fixed_senders_target() -> None:
    assert fixed_rate_share("fixed:rate=90%") == pytest.approx(0.9)
    assert fixed_rate_share("fixed:rate=9000000") is None and fixed_rate_share("cubic") is None
    use = link_use({"bandwidth_mbps": 10, "rtt_ms": 20, "goodput_mbps": 8.1, "quic_cc": "fixed:rate=90%"})
    assert use == pytest.approx({"utilization": 0.81, "link": "10x20", "target_share": 0.9, "rate_accuracy": 0.9})
    assert link_use({"bandwidth_mbps": None, "rtt_ms": 20, "goodput_mbps": 8.1})["utilization"] is None


def test_bdp_columns_place_a_condition_against_003s_50_kb_buffer() -> None:
    assert bdp_columns(5, 20, 50_000) == {"bdp_bytes": 12_500.0, "bdp_below_buffer": True}
    assert bdp_columns(100, 40, 50_000) == {"bdp_bytes": 500_000.0, "bdp_below_buffer": False}
    assert bdp_columns(None, 40, 50_000)["bdp_below_buffer"] is None


# ---------------------------------------------------------------------- 004


def _jain(share: float) -> float:
    return 1 / (2 * (share**2 + (1 - share) ** 2))


def _pairs(jain_quic: float, jain_tcp: float, tcp_share: float) -> list[dict[str, Any]]:
    rows = []
    for f in SPREAD:
        rows.append({"pair": "h3 vs h3", "jain": min(jain_quic * f, 1.0), "share_a": 0.5})
        rows.append({"pair": "tcp vs tcp", "jain": min(jain_tcp * f, 1.0), "share_a": 0.5})
        rows.append({"pair": "tcp vs h3", "jain": 0.9, "share_a": tcp_share * f})
    return rows


def test_004_fairness_holds_when_like_pairs_are_fair_and_tcp_takes_more() -> None:
    assert _verdicts("004-fig11-14", _pairs(0.99, 0.99, 0.63)) == [REPRODUCED] * 3
    assert _verdicts("004-fig11-14", _pairs(0.80, 0.99, 0.35)) == [NOT_REPRODUCED, REPRODUCED, NOT_REPRODUCED]

def _length_pairs(experiment: str, tcp_share: float) -> list[dict[str, Any]]:
    """004-fig16's rows (fairness-004-small, 8 s) or its companion's (fairness-004-long, 32 s)."""
    return [{"pair": "tcp vs h3", "experiment": experiment, "share_a": tcp_share * f, "jain": _jain(tcp_share * f)}
            for f in (1 + (f - 1) / 4 for f in SPREAD)]


def test_004_fig16_compares_the_short_flows_with_its_companion_s_long_ones() -> None:
    # 8 s: TCP 0.55 (Jain 0.99); 32 s: TCP 0.65 (Jain 0.92): fairer with the small transfer, as 004.
    rows = _length_pairs("fairness-004-small", 0.55) + _length_pairs("fairness-004-long", 0.65)
    assert _verdicts("004-fig16", rows) == [REPRODUCED, REPRODUCED]
    # The other way round: less fair with the small transfer; the long rows alone decide nothing.
    rows = _length_pairs("fairness-004-small", 0.65) + _length_pairs("fairness-004-long", 0.55)
    assert _verdicts("004-fig16", rows) == [REPRODUCED, NOT_REPRODUCED]
    assert _verdicts("004-fig16", _length_pairs("fairness-004-long", 0.6)) == [NO_DATA, NO_DATA]


def _offload_pairs(tcp_share_with: float, tcp_share_without: float) -> list[dict[str, Any]]:
    """fairness-004-offload's rows: TCP on the offloading server ("tcp vs h3", side a) and on the
    other one ("h3 vs tcp", side b); Jain's index from the shares."""
    rows = []
    for f in SPREAD:
        narrow = 1 + (f - 1) / 4  # shares within 1%: Jain's index moves less than the band
        with_tso, without = tcp_share_with * narrow, tcp_share_without * narrow
        rows.append({"pair": "tcp vs h3", "share_a": with_tso, "share_b": 1 - with_tso, "jain": _jain(with_tso),
                     "experiment": "fairness-004-offload"})
        rows.append({"pair": "h3 vs tcp", "share_a": 1 - without, "share_b": without, "jain": _jain(without),
                     "experiment": "fairness-004-offload"})
    return rows


def _one_server_pairs(tcp_share: float) -> list[dict[str, Any]]:
    """The companion fairness-004-offload-one's rows (both servers in one host, TSO there)."""
    return [{"pair": "tcp vs h3", "share_a": tcp_share * f, "share_b": 1 - tcp_share * f, "jain": _jain(tcp_share * f),
             "experiment": "fairness-004-offload-one"} for f in (1 + (f - 1) / 4 for f in SPREAD)]


def test_004_offload_judges_the_influence_of_tso_on_fairness_within_one_spec() -> None:
    # TCP at 0.63 with and without TSO: a little influence (none), and TCP still above half; no
    # one-server rows: Fig. 15 vs 13 has no data.
    assert _verdicts("004-fig13-15", _offload_pairs(0.63, 0.63)) == [REPRODUCED, REPRODUCED, NO_DATA, NO_DATA]
    # TSO makes TCP take 0.8 against 0.6 without: Jain's index falls by a quarter, more than a little.
    assert _verdicts("004-fig13-15", _offload_pairs(0.8, 0.6))[:2] == [NOT_REPRODUCED, REPRODUCED]
    # QUIC takes the larger share against the offloading TCP.
    assert _verdicts("004-fig13-15", _offload_pairs(0.4, 0.4))[1] == NOT_REPRODUCED


def test_004_fig15_vs_13_compares_the_companion_spec_rows() -> None:
    # Two servers: TCP 0.63; one server: 0.55. TCP's share rises with two servers (004's
    # direction), but the pair is less fair (Jain's index 0.94 against 0.99): 004 saw it fairer.
    rows = _offload_pairs(0.63, 0.63) + _one_server_pairs(0.55)
    assert _verdicts("004-fig13-15", rows)[2:] == [REPRODUCED, NOT_REPRODUCED]
    # The same shares either way: neither claim can be decided.
    assert _verdicts("004-fig13-15", _offload_pairs(0.6, 0.6) + _one_server_pairs(0.6))[2:] == [INCONCLUSIVE] * 2


def _cubic_rows(goodput: dict[float, float], kept: dict[float, float], cv: dict[tuple[float, float], float]
                ) -> list[dict[str, Any]]:
    """Eight runs per (CubeFactor, beta) cell of cubic-tuning-004; `goodput` and `kept` are keyed
    by beta (CubeFactor 1), `cv` by the cell (0.3 where it is not given)."""
    cells = [(1.0, 0.5), (1.0, 0.7), (1.0, 1.0), (2.0, 0.7), (0.0, 0.5)]
    rows = []
    for cube_factor, beta in cells:
        for f in SPREAD:
            rows.append({"c": 0.4, "cube_factor": cube_factor, "beta": beta,
                         "goodput_mbps": goodput.get(beta, 9.0) * f,
                         "window_kept": min(kept.get(beta, 0.7) * f, 1.0) if cube_factor == 1.0 else 0.7,
                         "cwnd_cv": cv.get((cube_factor, beta), 0.3) * f})
    return rows


def test_004_cubic_tuning_judges_backoff_and_cube_factor_on_fixed_runs() -> None:
    seed_like = _cubic_rows(goodput={0.5: 8.0, 0.7: 9.0, 1.0: 9.5}, kept={0.5: 0.5, 0.7: 0.7, 1.0: 1.0},
                            cv={(1.0, 0.7): 0.30, (2.0, 0.7): 0.20, (0.0, 0.5): 0.45, (1.0, 0.5): 0.35})
    assert _verdicts("004-fig18-22", seed_like) == [REPRODUCED] * 6
    cut_deeper = [dict(row, window_kept=0.5) if row["cube_factor"] == 1.0 and row["beta"] == 0.7 else row
                  for row in seed_like]
    assert _verdicts("004-fig18-22", cut_deeper)[4] == NOT_REPRODUCED
    reversed_ = _cubic_rows(goodput={0.5: 9.5, 0.7: 8.0}, kept={1.0: 0.6},
                            cv={(1.0, 0.7): 0.2, (2.0, 0.7): 0.3, (0.0, 0.5): 0.15})
    assert _verdicts("004-fig18-22", reversed_)[:4] == [NOT_REPRODUCED] * 4
    # As the full run found: K = 0 smooths the window at backoff 0.5 (0.198 against 0.322).
    measured = _cubic_rows(goodput={}, kept={}, cv={(1.0, 0.7): 0.197, (2.0, 0.7): 0.181, (0.0, 0.5): 0.198,
                                                    (1.0, 0.5): 0.322})
    assert _verdicts("004-fig18-22", measured)[5] == NOT_REPRODUCED
    # CubeFactor 0 as smooth as the default: undecided.
    even = _cubic_rows(goodput={}, kept={}, cv={(1.0, 0.7): 0.3, (0.0, 0.5): 0.3})
    assert _verdicts("004-fig18-22", even)[3] == INCONCLUSIVE


# ---------------------------------------------------------------------- 003


def _nesquic_rows(utilization: dict[str, float], rtt: dict[str, float]) -> list[dict[str, Any]]:
    rows = []
    for bandwidth in (10, 50):
        for rtt_ms in (20, 100):
            for cc in utilization:
                for f in SPREAD[::2]:  # four repetitions
                    target = fixed_rate_share(cc)
                    use = utilization[cc] * f
                    rows.append({"quic_cc": cc, "bandwidth_mbps": bandwidth, "rtt_ms": rtt_ms, "link": f"{bandwidth}x{rtt_ms}",
                                 "utilization": use, "rate_accuracy": use / target if target else None,
                                 "rtt_median_ms": rtt_ms * rtt[cc] * f, "rtt_inflation": rtt[cc] * f})
    return rows


def test_003_nesquic_claims_on_fixed_runs() -> None:
    # 003 Figs. 6.3-6.6 as it reads them: cubic and bbr near the link, reno lower, fast small;
    # fast's and bbr's RTT below cubic's; the 90% sender a bit below target; 110% queues.
    utilization = {"cubic": 0.95, "bbr": 0.93, "reno": 0.85, "fast": 0.3, "fixed:rate=90%": 0.86,
                   "fixed:rate=110%": 0.97}
    rtt = {"cubic": 1.5, "bbr": 1.2, "reno": 1.5, "fast": 1.05, "fixed:rate=90%": 1.02, "fixed:rate=110%": 1.6}
    assert _verdicts("003-fig6-3-6", _nesquic_rows(utilization, rtt)) == [REPRODUCED] * 9
    lazy_cubic = {**utilization, "cubic": 0.5, "fast": 0.9}
    verdicts = _verdicts("003-fig6-3-6", _nesquic_rows(lazy_cubic, rtt))
    assert verdicts[0] == NOT_REPRODUCED and verdicts[3] == NOT_REPRODUCED


def _rpm_rows(excess_ms: float, factor_below: float, factor_above: float) -> list[dict[str, Any]]:
    rows = []
    for below, factor in ((True, factor_below), (False, factor_above)):
        for f in SPREAD:
            rows.append({"mode": "h3", "bdp_below_buffer": below, "factor_of_increase": factor * f,
                         "rate_over_goodput": 1.05 * f, "idle_excess_ms": excess_ms * f})
    return rows


def test_003_librespeed_claims_on_fixed_rpm_rows() -> None:
    # Most points hardly change under load (1.1), the small-BDP ones do (1.6); 3 ms of idle excess.
    rows = _rpm_rows(3.0, 1.6, 1.1) + _rpm_rows(3.0, 1.6, 1.1)[8:] * 2
    assert _verdicts("003-fig6-7-11", rows) == [REPRODUCED] * 4
    assert _verdicts("003-fig6-7-11", _rpm_rows(30.0, 2.0, 2.5))[1:] == [NOT_REPRODUCED] * 3


def test_cc_suite_puts_003s_tbf_on_the_bottleneck_when_asked() -> None:
    scenario = CcSuite()
    condition = Condition.from_axes({"bandwidth_mbps": 10, "rtt_ms": 20, "loss_pct": 0, "buffer": 50_000,
                                     "buffer_bytes": 50_000})
    plain = scenario.links(CcSuiteParams(), condition)["p0.forward"]
    assert (plain["rate_bps"], plain["shaper"]) == (10_000_000, None)
    shaped = scenario.links(CcSuiteParams(shaper_burst_bytes=50_000), condition)
    for side in ("forward", "reverse"):
        link = shaped[f"p0.{side}"]
        assert link["rate_bps"] == 1_000_000_000 and link["delay_ns"] == 10 * MS
        assert link["shaper"] == {"rate_bps": 10_000_000, "burst_bytes": 50_000, "limit_bytes": 50_000}
        assert link["queue"] == {"kind": "droptail", "bytes": 50_000}
    with pytest.raises(ValueError, match="a shaper needs a buffer"):
        scenario.check(CcSuiteParams(shaper_burst_bytes=50_000), {"buffer": ["default"]})
    with pytest.raises(ValueError, match="a shaper needs a bandwidth"):
        scenario.check(CcSuiteParams(shaper_burst_bytes=50_000), {"bandwidth_mbps": ["unlimited"]})
