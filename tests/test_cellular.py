"""The `cellular` scenario (002 ch. 6): its trace links, the per-run trace start, a real lab
whose trace link delivers the trace's rate, and the quantile claims of 002 Figs. 6-3/6-4."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from awaiting import await_port
from conftest import lab_namespaces

from protolab.errors import ProtolabError
from protolab.lab import Lab
from protolab.reproduce.claims import (
    INCONCLUSIVE,
    NO_DATA,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    QuantileRatio,
    quantile_interval,
    quantile_values_needed,
)
from protolab.scenarios import SCENARIOS, Condition
from protolab.scenarios.cellular import TRACE_PAIRS, TRACES_DIR, CellularParams, summarize_trace, trace_start_ms


def _condition(rtt_ms: float = 120, buffer: str = "1bdp", trace: str = "verizon") -> Condition:
    return Condition.from_axes({"bandwidth_mbps": "unlimited", "rtt_ms": rtt_ms, "loss_pct": 0, "buffer": buffer,
                                "trace": trace})


def test_trace_summary_and_its_errors() -> None:
    summary = summarize_trace("1\n1\n3\n\n10\n", "t.trace")
    assert summary.period_ms == 10
    assert summary.mean_mbps == pytest.approx(4 * 1500 * 8 / 0.010 / 1e6)
    with pytest.raises(ProtolabError, match=r"t.trace: line 2: 'x' is not a millisecond timestamp"):
        summarize_trace("1\nx\n", "t.trace")
    with pytest.raises(ProtolabError, match="t.trace: no delivery opportunity"):
        summarize_trace("\n", "t.trace")


def test_every_trace_pair_is_in_the_repository_with_its_provenance() -> None:
    provenance = (TRACES_DIR / "PROVENANCE.md").read_text()
    for pair in TRACE_PAIRS.values():
        for name in (pair.down, pair.up):
            assert (TRACES_DIR / name).is_file(), name
            assert name in provenance, name


def test_trace_start_is_drawn_from_the_run_seed() -> None:
    starts = [trace_start_ms(seed, "att", 786_000) for seed in range(200)]
    assert starts == [trace_start_ms(seed, "att", 786_000) for seed in range(200)], "reproducible"
    assert all(0 <= s < 786_000 for s in starts)
    assert len(set(starts)) == 200, "repetitions see different parts of the trace"
    # Spread over the whole trace, not bunched at its beginning.
    assert min(starts) < 786_000 * 0.1 and max(starts) > 786_000 * 0.9
    assert trace_start_ms(None, "att", 786_000) == 0


def test_links_replay_both_directions_with_a_bdp_queue_and_half_the_rtt() -> None:
    scenario = SCENARIOS["cellular"]
    params = CellularParams()
    links = scenario.run_links(params, _condition(rtt_ms=120), seed=7)
    down, up = links["client.down"], links["client.up"]
    assert down["trace"] == str(TRACES_DIR / "Verizon-LTE-short.down")
    assert up["trace"] == str(TRACES_DIR / "Verizon-LTE-short.up")
    assert down["rate_bps"] is None and down["delay_ns"] == up["delay_ns"] == 60_000_000
    assert down["trace_start_ns"] == up["trace_start_ns"] == trace_start_ms(7, "verizon", 140_000) * 1_000_000
    # 1 BDP at each direction's mean rate (5.03 / 5.95 Mbit/s, PROVENANCE.md) x 120 ms.
    assert down["queue"]["bytes"] == pytest.approx(5.03e6 / 8 * 0.120, rel=0.01)
    assert up["queue"]["bytes"] == pytest.approx(5.95e6 / 8 * 0.120, rel=0.01)
    for name in ("server.up", "server.down", "p0.forward", "p0.reverse"):
        assert links[name]["trace"] is None and links[name]["rate_bps"] is None
    # Entering the condition (no run seed) and trace_start = "beginning" start at 0.
    assert scenario.links(params, _condition())["client.down"]["trace_start_ns"] == 0
    beginning = CellularParams(trace_start="beginning")
    assert scenario.run_links(beginning, _condition(), seed=7)["client.up"]["trace_start_ns"] == 0


def test_check_refuses_a_bandwidth_and_unknown_traces() -> None:
    scenario = SCENARIOS["cellular"]
    with pytest.raises(ValueError, match="axes.bandwidth_mbps: 10: the cellular trace sets the rate"):
        scenario.check(CellularParams(), {"bandwidth_mbps": [10]})
    with pytest.raises(ValueError, match="axes.trace: unknown trace 'sprint'"):
        scenario.check(CellularParams(), {"trace": ["sprint"]})
    scenario.check(CellularParams(), {"bandwidth_mbps": ["unlimited"], "trace": ["att", "tmobile"]})


# ---------------------------------------------------------------------- quantile claims


def test_quantile_interval_needs_enough_values_and_brackets_the_quantile() -> None:
    values = np.arange(1.0, 101.0)  # 1 .. 100
    low, high = quantile_interval(values, 0.5, 0.95)  # type: ignore[misc]
    assert low < 50.5 < high and high - low < 25
    # The 95th percentile at 97.5% needs 0.95^n <= 1.25%: 86 values.
    assert quantile_interval(values[:85], 0.95, 0.975) is None
    assert quantile_interval(values[:86], 0.95, 0.975) is not None
    assert quantile_values_needed(0.95, 0.975) == 86 and quantile_values_needed(0.9, 0.975) == 42
    # The median at 95% needs 0.5^n <= 2.5%: 6 values, and then it is [min, max].
    assert quantile_interval(values[:5], 0.5, 0.95) is None
    assert quantile_interval(values[:6], 0.5, 0.95) == (1.0, 6.0)


def test_quantile_interval_holds_its_coverage() -> None:
    rng = np.random.default_rng(5)
    true_p95 = float(np.exp(1.6448536269514722))  # lognormal(0, 1)
    hits = 0
    trials = 400
    for _ in range(trials):
        interval = quantile_interval(rng.lognormal(0, 1, 120), 0.95, 0.95)
        assert interval is not None
        hits += interval[0] <= true_p95 <= interval[1]
    # Coverage at least 95% (the interval is conservative); 400 trials: 3 sd is about 3.3%.
    assert hits / trials >= 0.95 - 0.033


def test_quantile_ratio_claim_verdicts() -> None:
    rng = np.random.default_rng(11)
    rows = ([{"cc": "a", "plt_ms": v} for v in rng.lognormal(np.log(1000), 0.3, 200)]
            + [{"cc": "b", "plt_ms": v} for v in rng.lognormal(np.log(1500), 0.3, 200)])
    faster = Claim("a's p95 below b's", QuantileRatio("plt_ms", {"cc": "a"}, {"cc": "b"}, q=0.95), high=1.0)
    verdict = faster.check(rows)
    assert verdict.outcome == REPRODUCED
    assert verdict.estimate is not None and verdict.estimate.value == pytest.approx(1 / 1.5, rel=0.15)
    slower = Claim("b's p95 below a's", QuantileRatio("plt_ms", {"cc": "b"}, {"cc": "a"}, q=0.95), high=1.0)
    assert slower.check(rows).outcome == NOT_REPRODUCED
    few = faster.check(rows[:20] + rows[200:220])
    assert few.outcome == INCONCLUSIVE, "too few loads for a 95th-percentile interval"
    assert few.estimate is not None and "86 values per side for the 0.95 quantile" in few.estimate.shortfall
    spread = Claim("p90 over p10", QuantileRatio("plt_ms", {"cc": "a"}, {"cc": "a"}, q=0.9, q_den=0.1), low=1.5)
    assert spread.check(rows).outcome == REPRODUCED  # lognormal sd 0.3: p90/p10 = exp(2 x 1.28 x 0.3) = 2.2


# ---------------------------------------------------------------------- a real lab

IPERF3_PORT = 5201
WINDOW_S = 4.0
# Tolerance of the end-to-end check: TCP keeps the 1000-packet queue of the 5 Mbit/s link
# non-empty, so the link could deliver every opportunity of the window; it never delivers more.
# On this shared 2-core machine it delivered 96.4% (2.69 of 2.79 MB); 10% below allows for the
# moments the emulator's packet loop or the sender runs late on a loaded machine. The wrong 4 s
# of the trace (50 s later) offer 0.91 MB: the check tells the trace's parts apart.
DELIVERY_TOLERANCE = 0.10


def _opportunities(path: Path, from_ms: float, to_ms: float) -> int:
    """Opportunities of the looped trace in [from_ms, to_ms), counted from the file."""
    times = np.array([int(line) for line in path.read_text().split()])
    period = int(times[-1])
    looped = np.concatenate([times + lap * period for lap in range(int(to_ms // period) + 1)])
    return int(np.count_nonzero((looped >= from_ms) & (looped < to_ms)))


@pytest.mark.lab
def test_cellular_link_delivers_the_traces_rate(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    scenario = SCENARIOS["cellular"]
    params = CellularParams(workload="bulk")
    condition = _condition(rtt_ms=30, buffer="default", trace="verizon")
    name = lab_name()
    links = scenario.run_links(params, condition, seed=2026)
    start_ms = links["client.down"]["trace_start_ns"] / 1e6
    with Lab(scenario.topology(name, params, [], seed=1)) as lab:
        for link, values in links.items():
            effective = lab.set_link(link, **values)
            if link == "client.down":
                epoch_ns = lab.counters()["now_ns"]  # the replay started just before this
                assert effective["client.down"]["trace_start_ns"] == start_ms * 1e6
        server = lab.spawn("server", ["iperf3", "-s", "-1", "-B", lab.address("server"), "-p", str(IPERF3_PORT)])
        await_port(lab.namespace("server"), IPERF3_PORT, address=lab.address("server"), process=server)
        client = lab.spawn("client", ["iperf3", "-c", lab.address("server"), "-R", "-t", str(int(WINDOW_S) + 3),
                                      "-C", "cubic"], stdout=subprocess.DEVNULL)
        time.sleep(2.0)  # past slow start: the queue stands
        first = lab.counters()
        time.sleep(WINDOW_S)
        second = lab.counters()
        client.wait(timeout=30)
        server.wait(timeout=10)
    assert lab_namespaces(name) == []
    delivered = second["links"]["client.down"]["delivered_bytes"] - first["links"]["client.down"]["delivered_bytes"]
    from_ms = start_ms + (first["now_ns"] - epoch_ns) / 1e6
    to_ms = start_ms + (second["now_ns"] - epoch_ns) / 1e6
    offered = 1500 * _opportunities(TRACES_DIR / TRACE_PAIRS["verizon"].down, from_ms, to_ms)
    assert offered > 1_000_000, "the window holds megabits of the trace"
    # 2%: the replay started a few ms before `epoch_ns` was read, which shifts the window.
    assert delivered <= 1.02 * offered, ("more than the trace offers", delivered, offered, from_ms, to_ms)
    assert delivered >= (1 - DELIVERY_TOLERANCE) * offered, (delivered, offered, from_ms, to_ms)


def test_a_denominator_whose_interval_reaches_zero_gives_no_interval() -> None:
    rates = [{"rate_mbps": float(v)} for v in [0.0] * 60 + list(range(1, 41))]
    spread = Claim("p90 over the median", QuantileRatio("rate_mbps", {}, {}, q=0.9, q_den=0.5), low=1.5)
    verdict = spread.check(rates)
    assert verdict.outcome == NO_DATA  # the median is 0: no finite ratio
    rates = [{"rate_mbps": float(v)} for v in [0.0] * 45 + list(range(1, 56))]
    verdict = spread.check(rates)
    assert verdict.outcome == INCONCLUSIVE and verdict.estimate is not None
    assert verdict.estimate.shortfall == "the denominator's interval reaches 0"
