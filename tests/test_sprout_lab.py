"""Sprout-EWMA with the receiver's feedback through real namespaces: a QUIC download with
`quic_cc = "sprout-ewma"` over an emulated link completes, the server's controller received the
client's reports (QUIC datagrams), and its window is the one the reports make,
rate x (min RTT + min(100 ms, min RTT)) (docs/congestion.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protolab.plan.experiment import parse_spec
from protolab.run.executors import EXECUTORS
from protolab.run.runner import Events, run_experiment
from protolab.run.session import LabExecutor
from protolab.store import ResultsStore

pytestmark = pytest.mark.lab

SPEC = """
schema_version = 1
name = "sprout-lab"
scenario = "cc-suite"
repetitions = 1
[params]
duration_s = 4
[axes]
bandwidth_mbps = [10]
rtt_ms = [60]
buffer = ["2bdp"]
mode = ["h3"]
quic_cc = ["sprout-ewma"]
[artifacts]
samples = true
"""


def _rows(results: Path, sql: str) -> list[dict[str, Any]]:
    with ResultsStore(results, read_only=True) as store:
        return store.query(sql)


def _window_of(rate_bps: int, min_rtt_us: float, mtu: int) -> float:
    """The window a report of `rate_bps` makes at this minimum RTT (at least 2 datagrams)."""
    min_rtt_s = min_rtt_us / 1e6
    return max(rate_bps / 8 * (min_rtt_s + min(0.100, min_rtt_s)), 2 * mtu)


def test_sprout_ewma_window_comes_from_the_receivers_reports(tmp_path: Path, emu_binary: Path,
                                                              lab_name: Callable[[], str]) -> None:
    results = tmp_path / "results"
    executor = LabExecutor(workloads=EXECUTORS, binary=emu_binary, lab_name=lab_name())
    summary = run_experiment(parse_spec(SPEC), results, executor, Events())
    assert (summary.ok, summary.total) == (1, 1)
    [run] = _rows(results, "SELECT quic_cc, goodput_mbps FROM runs")
    assert run["quic_cc"] == "sprout-ewma"
    # The window follows the measured rate with up to twice the BDP of headroom: most of the
    # link within 4 s (loose: a busy 2-core machine delays the client's ticks).
    assert run["goodput_mbps"] > 4.0, run
    samples = _rows(results, """
        SELECT s.t_unix_ns, s.cwnd_bytes, s.min_rtt_us,
               CAST(json_extract(s.fields, '$.cc_feedback_reports') AS BIGINT) AS reports,
               CAST(json_extract(s.fields, '$.cc_feedback_rate_bps') AS BIGINT) AS rate_bps,
               CAST(json_extract(s.fields, '$.current_mtu') AS BIGINT) AS mtu
        FROM transport_samples s
        WHERE s.role = 'server' AND s.transport = 'quic' AND s.event = 'sample'
        ORDER BY s.t_unix_ns""")
    assert samples, "the server sampled its connection"
    # The client reports every 20 ms tick that received data: about 200 over a 4 s download.
    reports = max(s["reports"] or 0 for s in samples)
    assert reports >= 50, reports
    fed = [s for s in samples if s["rate_bps"]]
    assert len(fed) >= 0.5 * len(samples), (len(fed), len(samples))
    # Each row's window is the one its latest applied report makes (sampled a moment apart from
    # the window quinn reports, so a few rows may straddle a new report).
    matching = [s for s in fed
                if abs(s["cwnd_bytes"] - _window_of(s["rate_bps"], s["min_rtt_us"], s["mtu"])) <= 0.01 * s["cwnd_bytes"] + 2]
    assert len(matching) >= 0.8 * len(fed), [(s["cwnd_bytes"], s["rate_bps"], s["min_rtt_us"]) for s in fed[:20]]
    # The reports carried the link's rate: the last estimate is within 20% of 10 Mbit/s.
    assert 8e6 < fed[-1]["rate_bps"] < 12e6, fed[-1]
    # Before the first report the window is the initial one (10 datagrams of 1 200 bytes).
    first = samples[0]
    if not first["rate_bps"]:
        assert first["cwnd_bytes"] == 12_000, first
