"""Transport analysis through real namespaces: QUIC and TCP bulk downloads over a lossy link
(independent and bursty losses) with the qlog, the samples, the captures and the emulator's event
log; the analysis recorded with each run must find every loss the emulator made and no other.
Precision and recall are counts, not timings: they hold on a busy machine."""

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
name = "analysis-lab"
scenario = "cc-suite"
repetitions = 1
[params]
duration_s = 4
loss_burst = {burst}
[axes]
bandwidth_mbps = [10]
rtt_ms = [40]
loss_pct = [1]
buffer = ["2bdp"]
mode = ["h3", "tcp"]
quic_cc = ["cubic"]
[artifacts]
samples = true
qlog = true
events = true
pcap = true
"""


def _rows(results: Path, sql: str) -> list[dict[str, Any]]:
    with ResultsStore(results, read_only=True) as store:
        return store.query(sql)


@pytest.mark.parametrize("burst", [1, 3], ids=["bernoulli", "gilbert-elliott"])
def test_detected_losses_match_the_emulators_truth(tmp_path: Path, emu_binary: Path, lab_name: Callable[[], str],
                                                   burst: int) -> None:
    results = tmp_path / "results"
    summary = run_experiment(parse_spec(SPEC.format(burst=burst)), results,
                             LabExecutor(workloads=EXECUTORS, binary=emu_binary, lab_name=lab_name()), Events())
    assert (summary.ok, summary.total) == (2, 2)
    assert _rows(results, "SELECT * FROM analysis_notes") == []
    losses = {r["transport"]: r for r in _rows(results, "SELECT * FROM loss_analysis")}
    assert set(losses) == {"quic", "tcp"}
    for transport, row in losses.items():
        assert row["ground_truth"] and row["role"] == "server", row
        # 1% of some 3000 datagrams: enough losses to mean something.
        assert row["true_losses"] >= 10, row
        assert row["precision"] >= 0.99, (transport, row)
        # TCP's truth counts a retransmission dropped again as a second loss of its segment, which
        # the sender's record shows once (bursts make that likelier): one such miss is allowed.
        missed = round(row["true_losses"] * (1 - row["recall"]))
        assert row["recall"] >= 0.99 or (transport == "tcp" and missed <= 1), (transport, row)
        assert row["spurious"] <= 1, row
        # TCP's truth also counts dropped retransmissions and the censored tail, which a sender
        # never retransmits: a few dozen losses leave its mean burst a little looser.
        tolerance = 0.1 if transport == "quic" else 0.25
        assert row["true_mean_burst"] and abs(row["detected_mean_burst"] - row["true_mean_burst"]) <= tolerance * row["true_mean_burst"], row
    quic = losses["quic"]
    assert quic["unmatched_datagrams"] == 0 and quic["unmatched_packets"] == 0, quic
    if burst > 1:
        assert quic["true_mean_run"] > 1.5, "Gilbert-Elliott losses come in runs of consecutive packets"
    # QUIC_info of the sender: from the qlog and the samples.
    info = {(r["transport"], r["role"]): r for r in _rows(results, "SELECT * FROM connection_info")}
    server = info[("quic", "server")]
    assert server["source"] == "qlog+samples" and server["snd_mss"] >= 1200 and server["lost"] == quic["detected"]
    assert server["spurious"] == quic["spurious"] and server["next_send_pkt_nbr"] > 1000
    assert 35 < server["min_rtt_ms"] < 60 and server["frames_sent"] is None
    tcp = info[("tcp", "server")]
    # Every drop the sender could see is retransmitted; a censored one (in flight when the timed
    # download stopped) may never be.
    detectable = losses["tcp"]["true_losses"] - losses["tcp"]["censored_losses"]
    assert tcp["rto_ms"] >= 200 and tcp["retrans"] >= detectable and tcp["dgrams_sent"] > 1000
    # The overhead of both protocols, wire bytes over body bytes.
    overhead = {r["protocol"]: r["factor"] for r in _rows(results, "SELECT * FROM overhead")}
    assert set(overhead) == {"h3", "tcp"} and all(1.0 < f < 1.15 for f in overhead.values()), overhead
