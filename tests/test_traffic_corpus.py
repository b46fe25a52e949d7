"""The lab's labelled flow corpus (docs/traffic.md, "Lab corpus"): page loads captured in the
lab, turned into flows by protolab-net flows and labelled with each connection's protocol."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from conftest import lab_namespaces, run_protolab, toml_text

from protolab.traffic.corpus import CorpusError, build_corpus


def test_a_results_directory_without_captures_is_refused(tmp_path: Path) -> None:
    from protolab.store import ResultsStore

    with ResultsStore(tmp_path / "r"):
        pass
    with pytest.raises(CorpusError, match=r"no run kept a client capture"):
        build_corpus(tmp_path / "r", tmp_path / "flows.parquet", Path("/nonexistent"))
    done = run_protolab("traffic", "corpus", str(tmp_path / "nothing"), "--out", str(tmp_path / "f.parquet"))
    assert done.returncode == 2 and "no results.duckdb" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "f.parquet").exists()


@pytest.mark.lab
def test_captured_page_loads_become_labelled_flows(emu_binary: Path, tmp_path: Path) -> None:
    spec = {"schema_version": 1, "name": "corpus", "scenario": "traffic-corpus", "seed": 1, "repetitions": 1,
            "timeout_s": 60, "artifacts": {"pcap": True},
            "axes": {"bandwidth_mbps": [20], "rtt_ms": [20], "loss_pct": [0], "buffer": ["1bdp"],
                     "mode": ["h1", "h2-parallel:2", "h3"], "page": ["baidu"]}}
    (tmp_path / "corpus.toml").write_text(toml_text(spec))
    results = tmp_path / "results"
    done = run_protolab("run", str(tmp_path / "corpus.toml"), "--results", str(results), "--binary", str(emu_binary),
                        "--lab", "tcorpus", timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = tmp_path / "flows.parquet"
    done = run_protolab("traffic", "corpus", str(results), "--out", str(out), "--binary", str(emu_binary))
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(Path(f"{out}.json").read_text())
    assert summary["runs"] == 3
    with duckdb.connect() as con:
        labelled = dict(con.execute(
            f"SELECT mode || '/' || protocol, count(*) FROM read_parquet('{out}') WHERE protocol IS NOT NULL "
            "GROUP BY 1").fetchall())
        connections = dict(duckdb.connect(str(results / "results.duckdb"), read_only=True).execute(
            "SELECT r.mode, count(*) FROM connections c JOIN runs r USING (experiment_id, run_key) GROUP BY 1").fetchall())
        transports = dict(con.execute(
            f"SELECT protocol, list_distinct(list(transport)) FROM read_parquet('{out}') WHERE protocol IS NOT NULL "
            "GROUP BY 1").fetchall())
    # Every connection of every load is one labelled flow, with its mode's protocol.
    assert labelled == {"h1/h1": connections["h1"], "h2-parallel:2/h2": connections["h2-parallel:2"],
                        "h3/h3": connections["h3"]}
    assert connections["h2-parallel:2"] >= 2  # two connections per origin
    assert transports == {"h1": ["tcp"], "h2": ["tcp"], "h3": ["udp"]}
    # The handshakes (ALPN offers, QUIC Initials) say the same as the truth.
    assert summary["handshake_label_agreement"] == 1.0
    assert not lab_namespaces("tcorpus")
