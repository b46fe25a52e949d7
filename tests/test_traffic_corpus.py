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


def test_flow_records_are_extracted_once_per_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A corpus grown by new runs extracts only theirs; a capture made again, or another
    protolab-net, is extracted again; only the runs asked for are handed on (from a results
    directory given relative to the working directory too)."""
    import os

    from protolab.traffic.corpus import _flow_records

    monkeypatch.chdir(tmp_path)

    log = tmp_path / "extracted"
    extractor = tmp_path / "protolab-net"
    extractor.write_text(f'#!/bin/sh\necho "$2" >> {log}\necho records > "$4"\n')
    extractor.chmod(0o755)
    results = tmp_path / "results"
    for key in ("a", "b", "c"):
        (results / "runs" / key).mkdir(parents=True)
        (results / "runs" / key / "client.pcap").write_bytes(key.encode())

    def extract(keys: list[str]) -> tuple[list[str], list[str]]:
        log.write_text("")
        with _flow_records(Path("results"), keys, extractor, None) as records:
            handed = sorted(p.name for p in records.glob("*.parquet") if p.read_text() == "records\n")
        return sorted(Path(line).parent.name for line in log.read_text().split()), handed

    assert extract(["a", "b"]) == (["a", "b"], ["a.parquet", "b.parquet"])
    assert extract(["a", "b", "c"]) == (["c"], ["a.parquet", "b.parquet", "c.parquet"])
    assert extract(["a", "c"]) == ([], ["a.parquet", "c.parquet"])
    pcap = results / "runs" / "b" / "client.pcap"
    os.utime(pcap, ns=(pcap.stat().st_atime_ns, pcap.stat().st_mtime_ns + 10**10))
    assert extract(["a", "b"]) == (["b"], ["a.parquet", "b.parquet"])
    extractor.write_text(extractor.read_text() + "# another build\n")
    assert extract(["a", "b"]) == (["a", "b"], ["a.parquet", "b.parquet"])


@pytest.mark.lab
def test_captured_page_loads_become_labelled_flows(emu_binary: Path, tmp_path: Path) -> None:
    spec = {"schema_version": 1, "name": "corpus", "scenario": "traffic-corpus", "seed": 1, "repetitions": 1,
            "timeout_s": 60, "artifacts": {"pcap": True},
            "axes": {"bandwidth_mbps": [20], "rtt_ms": [20], "loss_pct": [0], "buffer": ["1bdp"],
                     "mode": ["h2", "h1", "h2-parallel:2", "h3"], "page": ["baidu"]}}
    (tmp_path / "corpus.toml").write_text(toml_text(spec))
    results = tmp_path / "results"
    done = run_protolab("run", str(tmp_path / "corpus.toml"), "--results", str(results), "--binary", str(emu_binary),
                        "--lab", "tcorpus", timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = tmp_path / "flows.parquet"
    done = run_protolab("traffic", "corpus", str(results), "--out", str(out), "--binary", str(emu_binary))
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(Path(f"{out}.json").read_text())
    assert summary["runs"] == 4
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
    assert labelled == {"h1/h1": connections["h1"], "h2/h2": connections["h2"],
                        "h2-parallel:2/h2": connections["h2-parallel:2"], "h3/h3": connections["h3"]}
    assert connections["h2-parallel:2"] >= 2  # two connections per origin
    assert transports == {"h1": ["tcp"], "h2": ["tcp"], "h3": ["udp"]}
    # The handshakes (ALPN offers, QUIC Initials) say the same as the truth.
    assert summary["handshake_label_agreement"] == 1.0
    assert not lab_namespaces("tcorpus")
    _parallel_sessions_are_the_loads_connections(results, out, tmp_path / "parallel")
    # The flows are in the store too, and the report draws 000 Fig. 3.3 from them.
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as store:
        assert store.execute("SELECT count(*), count(protocol) FROM flows").fetchone() == (
            summary["flows"], summary["labelled_flows"])
    done = run_protolab("report", str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    html = (results / "report" / "index.html").read_text()
    assert "Flow characterization (000 Fig. 3.3)" in html and "median flow duration" in html
    done = run_protolab("traffic", "characterize", str(out), "--out", str(tmp_path / "char"))
    assert done.returncode == 0, done.stderr[-2000:]
    char = json.loads((tmp_path / "char" / "characterization.json").read_text())
    assert char["classes"] == {p: n for p, n in summary["class_balance"].items() if p != "unlabelled"}
    assert char["bytes_basis"] == "ip" and (tmp_path / "char" / "fig3_3_characterization.png").stat().st_size > 10_000


def _parallel_sessions_are_the_loads_connections(results: Path, flows: Path, out: Path) -> None:
    """000 Alg. 1-2 (MAX_GAP 5 s) on each load's flows finds exactly the connections the load
    opened to each origin (h2-parallel:2: two; h2 and h3: one; h1: as many as it needed): one
    session per origin holding all of them (precision and recall 1). Per load, because the
    lab's loads follow each other within 0.2 s: over the whole capture the algorithm rightly
    merges consecutive loads of one protocol to one server into one session."""
    from protolab.traffic.parallel import ParallelConfig, detect

    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as con:
        truth = sorted(con.execute(
            "SELECT r.run_key, split_part(c.remote, ':', 1) AS server, count(*) FROM connections c "
            "JOIN runs r USING (experiment_id, run_key) GROUP BY ALL").fetchall())
        modes = dict(con.execute("SELECT run_key, mode FROM runs").fetchall())
    found = []
    for run_key in sorted(modes):
        part = out / f"{run_key}.parquet"
        out.mkdir(exist_ok=True)
        with duckdb.connect() as con:
            con.execute(f"COPY (SELECT * FROM read_parquet('{flows}') WHERE run_key = '{run_key}' "
                        f"AND protocol IS NOT NULL) TO '{part}' (FORMAT parquet)")
            detect(part, out / run_key, ParallelConfig(figures=False))
            found += con.execute(f"""
                SELECT '{run_key}', any_value(f.server_ip), count(*) FROM read_parquet('{out / run_key}/flows_parallel.parquet') p
                JOIN read_parquet('{part}', file_row_number = true) f ON f.file_row_number = p.flow_row
                GROUP BY p.session_id""").fetchall()
    assert sorted(found) == truth
    sizes = {(modes[k], n) for k, _, n in truth}
    assert all(n == 2 for m, n in sizes if m == "h2-parallel:2") and ("h2-parallel:2", 2) in sizes
    assert all(n == 1 for m, n in sizes if m in ("h2", "h3"))
