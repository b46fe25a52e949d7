"""000 §4.2.3 in `protolab reproduce` (figures.seed000_nat, source `nat_sessions`): a fixed NAT
corpus in a results store (six rounds; three clients behind one address, each opening one
connection to the same server at about the same time, and one client with its own address
opening two), its rows, and the entry's claims judged on them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from protolab.reproduce.claims import NOT_JUDGEABLE, REPRODUCED
from protolab.reproduce.data import rows_of
from protolab.reproduce.figures import REGISTRY
from protolab.store import ResultsStore

S = 1_000_000_000
NAT, DIRECT, SERVER = "10.77.0.1", "10.77.0.2", "10.77.1.1"
LINUX = {"c2s_ttl": 63, "syn_options": "M,S,T,N,W", "syn_wscale": 7, "syn_mss": 1460, "syn_window": 64240}
WINDOWS = {"c2s_ttl": 127, "syn_options": "M,S,N,W", "syn_wscale": 9, "syn_mss": 1460, "syn_window": 64240,
           "syn_tsval": None}
CLOCKS = {"a": 5_000, "c": 2_000_000_000, "d": 90_000_000}


def _flow(round_: int, client: str, offset_s: float, port: int) -> dict[str, Any]:
    first = 1_700_000_000 * S + round_ * 60 * S + int(offset_s * S)
    stack = WINDOWS if client == "b" else {**LINUX, "syn_tsval": (CLOCKS[client] + first // 1_000_000) % 2**32}
    return {"experiment_id": "nat-corpus", "run_key": f"nat-r{round_:03d}", "transport": "tcp",
            "client_ip": DIRECT if client == "d" else NAT, "client_port": port, "server_ip": SERVER,
            "server_port": 443, "first_ns": first, "last_ns": first + 2 * S, "sni": "www.page-001.test",
            "handshake_protocol": "h2", "protocol": "h2", "real_client": client, "behind_nat": client != "d", **stack}


def _store(tmp_path: Path) -> Path:
    rows = [_flow(r, client, offset, 40_000 + 10 * r + i)
            for r in range(6) for i, (client, offset) in enumerate((("a", 0.0), ("b", 0.4), ("c", 0.9),
                                                                    ("d", 0.0), ("d", 0.1)))]
    parquet = tmp_path / "nat-flows.parquet"
    con = duckdb.connect()
    columns = list(rows[0])
    con.execute("CREATE TABLE t (" + ", ".join(f"{c} {_type(rows, c)}" for c in columns) + ")")
    con.executemany(f"INSERT INTO t VALUES ({', '.join('?' for _ in columns)})", [[r[c] for c in columns] for r in rows])
    con.execute(f"COPY t TO '{parquet}' (FORMAT PARQUET)")
    con.close()
    with ResultsStore(tmp_path) as store:
        assert store.replace_flows(parquet) == 30
    return tmp_path


def _type(rows: list[dict[str, Any]], column: str) -> str:
    value = next((r[column] for r in rows if r[column] is not None), 0)
    return "BOOLEAN" if isinstance(value, bool) else "BIGINT" if isinstance(value, int) else "VARCHAR"


def test_nat_rows_and_the_entry_s_verdicts(tmp_path: Path) -> None:
    with ResultsStore(_store(tmp_path), read_only=True) as store:
        rows = rows_of(store, "nat_sessions", "nat-corpus")
    assert len(rows) == 6 * (4 + 1) * 2  # rounds x (clients + the NAT's pool) x handling
    without = [r for r in rows if r["handling"] == "without" and r["behind_nat"] and not r["pooled"]]
    assert {r["recall"] for r in without} == {0.0} and {r["isolated_marked_parallel"] for r in without} == {1.0}
    assert {r["recall"] for r in rows if r["handling"] == "with"} == {1.0}
    verdicts = [claim.check(rows) for claim in REGISTRY["000-s4.2.3"].claims]
    assert [v.outcome for v in verdicts] == [REPRODUCED] * 6 + [NOT_JUDGEABLE] * 2
