"""Parallel-connection detection (000 §4.2.2-4.3, docs/traffic.md "Parallel connections") on
flows built by hand: 000's own Table 4.3 example, the lab's truth (h2-parallel:N opens exactly
N connections per origin), MAX_GAP at its boundary, the 000 and gap rules, the overlap
degrees, agreement with the plain-Python reference on random flows (also across many
buckets), bad input, and the synthetic generator."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import duckdb
import pytest
import typer
from typer.testing import CliRunner

from protolab.traffic import parallel, synthetic
from protolab.traffic.duck import TrafficError
from protolab.traffic.parallel import ParallelConfig, detect
from protolab.traffic.schema import FLOW_COLUMNS
from protolab.traffic.sessions import NS, RefFlow, reference_detect
from protolab.traffic.synthetic import SynthConfig, synthesize
from protolab.traffic.tstat import import_tstat

TYPES = {c: t for c, t, _ in FLOW_COLUMNS}
T0 = 1_700_000_000 * NS
MS = 1_000_000
FIXTURES = Path(__file__).parent / "fixtures" / "tstat"


def write_flows(path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None,
                types: dict[str, str] | None = None) -> Path:
    """A Parquet flow file with `columns` (default: the rows' keys) typed as in FLOW_COLUMNS
    (or as `types` says)."""
    columns = columns or list(rows[0])
    types = {**TYPES, **(types or {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    typed = ", ".join(f"{c} {types.get(c, 'VARCHAR')}" for c in columns)
    con.execute(f"CREATE TABLE f ({typed})")
    if rows:
        con.executemany(f"INSERT INTO f VALUES ({', '.join('?' for _ in columns)})",
                        [[r.get(c) for c in columns] for r in rows])
    con.execute(f"COPY f TO '{path}' (FORMAT parquet)")
    return path


def flow(client: str, server: str, start_ms: float, end_ms: float, *, port: int = 40000, protocol: str = "h2",
         sni: str | None = "a.example", nbytes: int | None = 1000) -> dict[str, Any]:
    return {"client_ip": client, "client_port": port, "server_ip": server, "protocol": protocol, "sni": sni,
            "first_ns": T0 + round(start_ms * MS), "last_ns": T0 + round(end_ms * MS),
            "c2s_payload_bytes": None if nbytes is None else nbytes // 10,
            "s2c_payload_bytes": None if nbytes is None else nbytes - nbytes // 10}


def run(tmp_path: Path, rows: list[dict[str, Any]], **cfg: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Detect on `rows`; returns (flow results by row, sessions by id, summary)."""
    src = write_flows(tmp_path / "flows.parquet", rows)
    out = tmp_path / "out"
    summary = detect(src, out, ParallelConfig(**{"figures": False, **cfg}))
    con = duckdb.connect()

    def table(name: str, order: str) -> list[dict[str, Any]]:
        cur = con.execute(f"SELECT * FROM read_parquet('{out / name}') ORDER BY {order}")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    return table("flows_parallel.parquet", "flow_row"), table("sessions.parquet", "session_id"), summary


# 000 Table 4.3: six overlapping H2 connections (start and end in ms since the epoch).
TABLE_4_3 = [(1456822931376, 1456822966686), (1456822931485, 1456822931907), (1456822931493, 1456822975759),
             (1456822931498, 1456823080442), (1456822931621, 1456822931858), (1456822931622, 1456822931860)]


def test_000_table_4_3_example(tmp_path: Path) -> None:
    """'The longest flow is flow F4 and the most overlapping flow is F3 with an overlap of 29.7%.'"""
    rows = [{**flow("10.0.0.5", "179.60.195.12", 0, 0, port=50101 + i), "first_ns": a * MS, "last_ns": b * MS}
            for i, (a, b) in enumerate(TABLE_4_3)]
    flows, sessions, summary = run(tmp_path, rows)
    assert len(sessions) == 1
    s = sessions[0]
    assert (s["flows"], s["parallel"], s["longest_s"]) == (6, True, 148.944)
    assert s["overlap_s"] == pytest.approx(44.261)  # F3 ends at ...975759, F4 starts at ...931498
    assert round(s["time_overlap_pct"], 1) == 29.7
    assert s["start_ns"] == TABLE_4_3[0][0] * MS and s["end_ns"] == TABLE_4_3[3][1] * MS
    assert all(f["parallel"] for f in flows)
    assert [f["position"] for f in flows] == [0, 1, 2, 3, 4, 5]
    # F1..F6 all overlap another: F5 and F6 lie inside F1, F3 and F4.
    assert s["overlapping_flows"] == 6 and all(f["overlapping"] for f in flows)
    assert summary["by_protocol"]["h2"]["parallel_flow_share"] == 1.0


def _lab_load(client: str, origins: list[str], start_ms: float, connections: int, protocol: str,
              next_port: list[int]) -> list[dict[str, Any]]:
    """One page load as the lab's page-load engine does it: `connections` connections to every
    origin, opened within 120 ms of each other, lasting 0.4-3 s."""
    rows = []
    for k, origin in enumerate(origins):
        for c in range(connections):
            opened = start_ms + 15 * k + 40 * c
            next_port[0] += 1
            rows.append(flow(client, origin, opened, opened + 400 + 600 * c + 100 * k, port=next_port[0],
                             protocol=protocol, sni=f"origin{k}.lab", nbytes=50_000 + 1000 * c))
    return rows


@pytest.mark.parametrize("rule", ["000", "gap"])
def test_lab_truth_h2_parallel_n_gives_n_parallel_flows_per_session(tmp_path: Path, rule: str) -> None:
    """h2 (one connection per origin), h2-parallel:2,3,4 and h1 (six per origin): page loads of
    three origins, 20 s apart. Detection must find exactly N flows in every (load, origin)
    session: precision and recall 1 for the parallel flows."""
    port = [20000]
    rows, truth = [], []
    modes = [("h2", 1), ("h2-parallel:2", 2), ("h2-parallel:3", 3), ("h2-parallel:4", 4), ("h1", 6)]
    for i, (mode, n) in enumerate(modes):
        for load in range(2):  # two loads of each mode, 20 s apart
            start = 60_000 * i + 20_000 * load
            made = _lab_load("10.1.0.2", ["10.2.0.1", "10.2.0.2", "10.2.0.3"], start, n,
                             "h1" if mode == "h1" else "h2", port)
            rows += made
            truth += [(mode, n)] * len(made)
    flows, sessions, summary = run(tmp_path, rows, rule=rule)
    assert len(sessions) == 5 * 2 * 3
    by_row = {f["flow_row"]: f for f in flows}
    sizes = {s["session_id"]: s["flows"] for s in sessions}
    for row, (mode, n) in enumerate(truth):
        f = by_row[row]
        assert sizes[f["session_id"]] == n, (mode, row)
        assert f["parallel"] == (n > 1)
    detected = {r for r, f in by_row.items() if f["parallel"]}
    actual = {r for r, (_, n) in enumerate(truth) if n > 1}
    assert detected == actual  # precision = recall = 1
    h2 = summary["by_protocol"]["h2"]
    assert (h2["flows"], h2["sessions"], h2["parallel_flows"]) == (60, 24, 54)
    assert h2["mean_flows_per_parallel_session"] == 3.0
    assert summary["by_protocol"]["h1"]["parallel_flows"] == 36


def test_flows_further_apart_than_max_gap_are_separate_sessions(tmp_path: Path) -> None:
    rows = [flow("10.0.0.1", "10.9.0.1", 0, 100, port=1),
            flow("10.0.0.1", "10.9.0.1", 5000, 5100, port=2),      # exactly MAX_GAP after: same session
            flow("10.0.0.1", "10.9.0.1", 10_001, 10_050, port=3),  # 5.001 s after the session's start (000)
            flow("10.0.0.1", "10.9.0.1", 30_000, 30_001, port=4),  # far: isolated
            flow("10.0.0.1", "10.9.0.1", 30_500, 30_600, port=5, sni="b.example"),  # another domain
            flow("10.0.0.3", "10.9.0.1", 30_500, 30_600, port=6),  # another client
            flow("10.0.0.1", "10.9.0.1", 30_700, 30_800, port=7, protocol="h1")]  # another protocol
    flows, _, _ = run(tmp_path, rows)
    sid = [f["session_id"] for f in flows]
    assert sid[0] == sid[1] and len(set(sid)) == 6
    assert [f["parallel"] for f in flows] == [True, True, False, False, False, False, False]
    assert not any(f["overlapping"] for f in flows)  # the two of the session do not overlap in time
    # The gap rule chains from the session's end: 10.001 s is within 5 s of 5.1 s.
    flows, _, _ = run(tmp_path / "gap", rows, rule="gap")
    assert flows[0]["session_id"] == flows[1]["session_id"] == flows[2]["session_id"]
    flows, _, _ = run(tmp_path / "g2", rows, max_gap_s=2.0)
    assert len({f["session_id"] for f in flows}) == 7


def test_a_client_polling_every_two_seconds(tmp_path: Path) -> None:
    """Starts 0, 2, ..., 20 s (1 s each): 000's window anchored at a session's first flow cuts
    sessions at 0, 6, 12 and 18 s; the gap rule keeps one session of 11 flows."""
    rows = [flow("10.0.0.1", "10.9.0.1", 2000 * i, 2000 * i + 1000, port=100 + i) for i in range(11)]
    _flows, sessions, summary = run(tmp_path, rows)
    assert [s["flows"] for s in sessions] == [3, 3, 3, 2]
    assert [(s["start_ns"] - T0) // NS for s in sessions] == [0, 6, 12, 18]
    assert summary["walked_session_starts"] == 3
    _, sessions, _ = run(tmp_path / "gap", rows, rule="gap")
    assert [s["flows"] for s in sessions] == [11]


def test_time_and_data_overlap(tmp_path: Path) -> None:
    rows = [flow("10.0.0.1", "10.9.0.1", 0, 10_000, port=1, nbytes=30_000),       # f_l and f_s
            flow("10.0.0.1", "10.9.0.1", 1000, 3000, port=2, nbytes=10_000),      # overlap 2 s
            flow("10.0.0.1", "10.9.0.1", 4000, 12_000, port=3, nbytes=5_000),     # overlap 6 s: f_o
            flow("10.0.0.2", "10.9.0.1", 0, 0, port=4, nbytes=0),                 # two flows of 0 s
            flow("10.0.0.2", "10.9.0.1", 0, 0, port=5, nbytes=0),
            flow("10.0.0.3", "10.9.0.1", 0, 1000, port=6, nbytes=None),           # unknown bytes
            flow("10.0.0.3", "10.9.0.1", 500, 700, port=7, nbytes=100)]
    flows, sessions, _ = run(tmp_path, rows)
    by_first = {s["first_flow_row"]: s for s in sessions}
    s = by_first[0]
    assert (s["flows"], s["longest_s"], s["overlap_s"], s["time_overlap_pct"]) == (3, 10.0, 6.0, 60.0)
    assert (s["total_bytes"], s["largest_bytes"], s["data_overlap_pct"]) == (45_000, 30_000, 50.0)
    z = by_first[3]
    assert (z["flows"], z["time_overlap_pct"], z["data_overlap_pct"], z["overlapping_flows"]) == (2, None, None, 0)
    u = by_first[5]
    assert (u["time_overlap_pct"], u["total_bytes"], u["data_overlap_pct"]) == (20.0, None, None)
    assert [f["overlapping"] for f in flows] == [True, True, True, False, False, True, True]


def _random_flows(n: int, seed: int) -> list[RefFlow]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        start = rnd.randint(0, 60) * NS // 2 + rnd.choice([0, 0, rnd.randint(0, NS)])
        dur = rnd.choice([0, rnd.randint(0, 10 * NS), rnd.randint(0, 3 * NS)])
        nbytes = rnd.choice([None, 0, rnd.randint(0, 10**6)]) if rnd.random() < 0.2 else rnd.randint(0, 10**5)
        out.append(RefFlow(f"10.0.0.{rnd.randint(1, 3)}", f"198.18.0.{rnd.randint(1, 2)}", T0 + start,
                           T0 + start + dur, rnd.randint(1000, 1010), rnd.choice(["h1", "h2", None]),
                           rnd.choice([None, "a.example", "b.example"]), nbytes, i))
    return out


@pytest.mark.parametrize(("seed", "rule", "chunk_rows"), [(1, "000", 2_000_000), (2, "gap", 2_000_000),
                                                          (3, "000", 40), (4, "gap", 40)])
def test_agrees_with_the_reference(tmp_path: Path, seed: int, rule: str, chunk_rows: int) -> None:
    """Random flows with ties, zero durations, unknown bytes and long islands; chunk_rows 40
    spreads the keys over 16 buckets."""
    ref_flows = _random_flows(400, seed)
    rows = [{"client_ip": f.client_ip, "client_port": f.client_port, "server_ip": f.server_ip,
             "protocol": f.protocol, "sni": f.sni, "first_ns": f.first_ns, "last_ns": f.last_ns,
             "c2s_payload_bytes": None if f.bytes is None else f.bytes // 3,
             "s2c_payload_bytes": None if f.bytes is None else f.bytes - f.bytes // 3} for f in ref_flows]
    flows, sessions, summary = run(tmp_path, rows, rule=rule, chunk_rows=chunk_rows)
    want_flows, want_sessions = reference_detect(ref_flows, 5.0, rule)
    assert summary["config"]["buckets"] == (16 if chunk_rows == 40 else 1)
    # Session numbers differ (hash order vs name order): compare through each session's first flow.
    got = {s["first_flow_row"]: {k: v for k, v in s.items() if k != "session_id"} for s in sessions}
    want = {s["first_flow_row"]: {k: v for k, v in s.items() if k != "session_id"} for s in want_sessions}
    assert got.keys() == want.keys()
    for key, w in want.items():
        assert got[key] == pytest.approx(w), key
    first_of = {s["session_id"]: s["first_flow_row"] for s in sessions}
    want_first_of = {s["session_id"]: s["first_flow_row"] for s in want_sessions}
    for g, w in zip(flows, want_flows, strict=True):
        assert {**g, "session_id": first_of[g["session_id"]]} == {**w, "session_id": want_first_of[w["session_id"]]}


def test_ip_bytes_and_no_optional_columns(tmp_path: Path) -> None:
    rows = [{"client_ip": "10.0.0.1", "server_ip": "10.9.0.1", "first_ns": T0, "last_ns": T0 + NS,
             "c2s_bytes": 100, "s2c_bytes": 900},
            {"client_ip": "10.0.0.1", "server_ip": "10.9.0.1", "first_ns": T0 + NS // 2, "last_ns": T0 + 2 * NS,
             "c2s_bytes": 50, "s2c_bytes": 250}]
    _flows, sessions, summary = run(tmp_path, rows)
    assert summary["config"]["bytes_basis"] == "ip"
    assert (sessions[0]["flows"], sessions[0]["total_bytes"], sessions[0]["data_overlap_pct"]) == (2, 1300, 30.0)
    assert sessions[0]["protocol"] is None and list(summary["by_protocol"]) == ["(none)"]
    with pytest.raises(TrafficError, match=r"flows.parquet: field 'c2s_payload_bytes' is missing \(--bytes payload\)"):
        run(tmp_path / "p", rows, bytes_basis="payload")
    with pytest.raises(TrafficError, match=r"field 'protocol' is missing \(--protocol\)"):
        run(tmp_path / "q", rows, protocols=["h2"])
    assert not (tmp_path / "q" / "out").exists()


def test_protocol_filter_and_empty_result(tmp_path: Path) -> None:
    rows = [flow("10.0.0.1", "10.9.0.1", 0, 100, port=1, protocol="h1"),
            flow("10.0.0.1", "10.9.0.1", 50, 100, port=2, protocol="h1")]
    flows, sessions, summary = run(tmp_path, rows, protocols=["h1"])
    assert (len(flows), summary["sessions"]) == (2, 1)
    flows, sessions, summary = run(tmp_path / "none", rows, protocols=["h2"])
    assert (flows, sessions, summary["flows"], summary["by_protocol"]) == ([], [], 0, {})


@pytest.mark.parametrize(("change", "message"), [
    ({"drop": "last_ns"}, r"field 'last_ns' is missing"),
    ({"retype": ("first_ns", "VARCHAR")}, r"field 'first_ns' has type VARCHAR, expected integer"),
    ({"null": "first_ns"}, r"field 'first_ns' is NULL in 1 flow\(s\) \(the first at row 1\)"),
    ({"null": "server_ip"}, r"field 'server_ip' is NULL in 1 flow\(s\)"),
    ({"backwards": True}, r"field 'last_ns' is before first_ns in 1 flow\(s\) \(the first at row 1\)"),
])
def test_bad_flows_are_named_by_field(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    rows = [flow("10.0.0.1", "10.9.0.1", 0, 100, port=1), flow("10.0.0.1", "10.9.0.1", 50, 100, port=2)]
    columns = list(rows[0])
    if "drop" in change:
        columns.remove(change["drop"])
    if "null" in change:
        rows[1][change["null"]] = None
    if change.get("backwards"):
        rows[1]["last_ns"] = rows[1]["first_ns"] - 1
    path = write_flows(tmp_path / "flows.parquet", rows, columns, types=dict([change["retype"]]) if "retype" in change
                       else None)
    with pytest.raises(TrafficError, match=rf"^{path}: {message}"):
        detect(path, tmp_path / "out", ParallelConfig(figures=False))
    assert not (tmp_path / "out").exists()


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _traffic() -> None:
        """protolab traffic (stand-in)."""

    parallel.register(app)
    synthetic.register(app)
    return app


def test_the_command_on_the_tstat_fixture(tmp_path: Path) -> None:
    """Tstat fixture -> flows -> detection, with the figures and the JSON summary."""
    flows = tmp_path / "flows.parquet"
    import_tstat([FIXTURES / "log_tcp_complete", FIXTURES / "log_udp_complete"], flows)
    out = tmp_path / "out"
    result = CliRunner().invoke(_app(), ["parallel", str(flows), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "25 flows in" in result.output
    summary = json.loads((out / "parallel_summary.json").read_text())
    assert summary["schema"] == "protolab.traffic.parallel" and summary["sessions"] == 18
    h2 = summary["by_protocol"]["h2"]
    # 000 Table 4.3's six flows form one session; the same client's flow 10 minutes later and
    # the other H2 flows are isolated.
    assert (h2["flows"], h2["parallel_flows"], h2["parallel_sessions"]) == (11, 6, 1)
    assert round(h2["median_time_overlap_pct"], 1) == 29.7
    assert summary["by_protocol"]["quic-other"]["parallel_flows"] == 2
    for name in ("fig4_3_flows_per_session", "fig4_4_time_overlap", "fig4_5_longest_flow_duration",
                 "fig4_6_time_overlap_by_duration", "fig4_7_data_overlap_by_size"):
        assert (out / f"{name}.png").stat().st_size > 1000 and (out / f"{name}.svg").is_file()
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("fig")) == \
        ["flows_parallel.parquet", "parallel_summary.json", "sessions.parquet"]


@pytest.mark.parametrize(("args", "message"), [
    (["parallel", "{tmp}/missing.parquet"], "missing.parquet: no such file"),
    (["parallel", "{fixture}"], "log_tcp_complete: not a readable Parquet file"),
    (["parallel", "{flows}", "--rule", "fixed"], "--rule fixed: expected one of 000, gap"),
    (["parallel", "{flows}", "--max-gap-s", "-1"], "--max-gap-s -1.0: expected a finite number >= 0"),
    (["synth", "--flows", "0"], "Invalid value for '--flows'"),
])
def test_bad_input_exits_2_without_output(tmp_path: Path, args: list[str], message: str) -> None:
    flows = write_flows(tmp_path / "flows.parquet", [flow("10.0.0.1", "10.9.0.1", 0, 100)])
    args = [a.format(tmp=tmp_path, fixture=FIXTURES / "log_tcp_complete", flows=flows) for a in args]
    result = CliRunner().invoke(_app(), [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_synthetic_flows(tmp_path: Path) -> None:
    a, b, c = (tmp_path / f"{x}.parquet" for x in "abc")
    synthesize(SynthConfig(flows=20_000, seed=7), a)
    synthesize(SynthConfig(flows=20_000, seed=7), b)
    synthesize(SynthConfig(flows=20_001, seed=8), c)
    con = duckdb.connect()
    schema = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{a}')").fetchall()
    assert [(r[0], r[1]) for r in schema] == [(col, t) for col, t, _ in FLOW_COLUMNS]
    same = con.execute(f"SELECT count(*) FROM (SELECT * FROM read_parquet('{a}') EXCEPT ALL "
                       f"SELECT * FROM read_parquet('{b}'))").fetchone()[0]
    assert same == 0
    assert con.execute(f"SELECT count(*) FROM read_parquet('{c}')").fetchone()[0] == 20_001
    assert con.execute(f"SELECT count(*) FROM (SELECT first_ns FROM read_parquet('{a}') INTERSECT "
                       f"SELECT first_ns FROM read_parquet('{c}'))").fetchone()[0] < 10
    mix = dict(con.execute(f"SELECT protocol, count(*) / 20000 FROM read_parquet('{a}') GROUP BY 1").fetchall())
    assert 0.46 < mix["h1"] < 0.56 and 0.36 < mix["h2"] < 0.45 and 0.07 < mix["h3"] < 0.12
    bad = con.execute(f"SELECT count(*) FROM read_parquet('{a}') WHERE last_ns < first_ns OR "
                      "(transport = 'udp') <> (protocol = 'h3') OR (server_port = 80) <> (sni IS NULL)").fetchone()[0]
    assert bad == 0
    # About a third of the H2 flows open in parallel (the model's share), most overlap in time.
    summary = detect(a, tmp_path / "out", ParallelConfig(figures=False, protocols=["h2"]))
    h2 = summary["by_protocol"]["h2"]
    assert 0.28 < h2["parallel_flow_share"] < 0.38
    assert 2.5 < h2["mean_flows_per_parallel_session"] < 3.0


def test_on_a_local_dask_cluster_the_outputs_are_the_same(tmp_path: Path) -> None:
    """The buckets reduced as tasks on two Dask worker processes give the same files as on this
    process's threads; the summary says which worker reduced how many buckets."""
    ref_flows = _random_flows(400, 11)
    rows = [{"client_ip": f.client_ip, "client_port": f.client_port, "server_ip": f.server_ip,
             "protocol": f.protocol, "sni": f.sni, "first_ns": f.first_ns, "last_ns": f.last_ns,
             "c2s_payload_bytes": f.bytes, "s2c_payload_bytes": 0 if f.bytes is not None else None}
            for f in ref_flows]
    local = run(tmp_path / "local", rows, chunk_rows=40)
    remote = run(tmp_path / "dask", rows, chunk_rows=40, cluster="local:2")
    assert remote[0] == local[0] and remote[1] == local[1]
    cluster = remote[2]["config"]["cluster"]
    assert local[2]["config"]["cluster"] is None and len(cluster["workers"]) == 2
    # One task per bucket that holds flows (a bucket no key hashed into has no file).
    assert remote[2]["config"]["buckets"] == 16 and 8 <= sum(cluster["buckets_by_worker"].values()) <= 16
    assert set(cluster["buckets_by_worker"]) <= set(cluster["workers"])
    # A flow that cannot be placed in time is named as locally, and nothing is written.
    bad = [*rows[:5], {**rows[5], "last_ns": rows[5]["first_ns"] - 1}]
    with pytest.raises(TrafficError, match=r"field 'last_ns' is before first_ns in 1 flow\(s\) \(the first at row 5\)"):
        run(tmp_path / "bad", bad, cluster="local:2")
    assert not (tmp_path / "bad" / "out").exists()


def test_a_bad_cluster_address_is_a_clear_error(tmp_path: Path) -> None:
    rows = [flow("10.0.0.1", "10.9.0.1", 0, 100)]
    with pytest.raises(Exception, match=r"--cluster local:0: expected local:N with N workers, 1 to 64"):
        run(tmp_path, rows, cluster="local:0")
    assert not (tmp_path / "out").exists()
