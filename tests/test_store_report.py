"""Results store (DuckDB) round trip, replace and all-or-nothing semantics, export; the HTML report
built from a stored synthetic experiment, and a headless-Chromium screenshot of it."""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from documents import (
    bulk_result,
    counters,
    emulator_counters,
    link,
    link_counters,
    load_result,
    page_connection,
    page_object,
)

from protolab.report.stats import median_ci_ranks, summarize
from protolab.results.bulk import BulkTransfer
from protolab.results.generated.load_result import LoadResult
from protolab.results.record import RunRecord
from protolab.store import SCHEMA_VERSION, TABLES, ResultsStore, StoreError, build_run_rows

CHROMIUM = Path("/usr/bin/chromium")
START_NS = 1_763_750_000_123_456_789

# Two pages in the spirit of 001 Table I (sizes in bytes per object).
PAGES = {
    "baidu": [14_000, 6_000, 5_000, 4_000, 4_000, 3_000, 3_000, 5_000, 3_000, 3_000],
    "wikipedia": [30_000, 20_000, 40_000, 25_000] + [16_000] * 20 + [6_000],
}
MODE_CONNS = {"h1": 6, "h2": 1, "h2-parallel:2": 2, "h3": 1}


def run_key(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:24]


def page_load(page: str, mode: str, plt_ms: float | None, status: str = "ok") -> LoadResult:
    """A docs/load.md result: objects spread round-robin over the mode's connections."""
    sizes = PAGES[page]
    n_conn = min(MODE_CONNS[mode], len(sizes))
    origin = f"www.{page}.test"
    protocol = "h3" if mode.startswith("h3") else ("h1" if mode == "h1" else "h2")
    objects = []
    for i, size in enumerate(sizes):
        finished = None if plt_ms is None else plt_ms * (i + 1) / len(sizes)
        objects.append(page_object(
            origin, "/" if i == 0 else f"/obj{i}", size, parent=None if i == 0 else f"//{origin}/", connection=i % n_conn,
            finished_ms=finished, bytes=size if finished is not None else size // 2,
            discovered_ms=0.0 if i == 0 else 80.0, queued_ms=0.0 if i == 0 else 80.0,
            started_ms=31.2 if i == 0 else 81.0, first_byte_ms=83.0 if i == 0 else 120.0,
            error=None if finished is not None else "connection reset"))
    connections = []
    for c in range(n_conn):
        carried = [o for o in objects if o["connection"] == c]
        connections.append(page_connection(c, origin, protocol=protocol, transport="quic" if protocol == "h3" else "tcp",
                                           requests=len(carried), bytes=sum(o["bytes"] for o in carried)))
    return load_result(page=page, mode=mode, status=status, plt_ms=plt_ms, objects=objects, connections=connections,
                       error=None if status == "ok" else "object /obj3 failed: connection reset", tcp_cc="cubic",
                       start_unix_ns=START_NS, http_port=80, https_port=443)


def make_run(rng: np.random.Generator, params: dict[str, Any], status: str = "ok") -> RunRecord:
    page, mode = params["page"], params["mode"]
    bw, rtt, loss = params["bandwidth_mbps"], params["rtt_ms"], params["loss_pct"]
    size = sum(PAGES[page])
    base = 3 * rtt + size * 8 / (bw * 1e6) * 1000
    factor = {"h2": 1.0, "h2-parallel:2": 0.9, "h3": 0.85, "h1": 1.1}[mode]
    plt = base * factor * (1 + loss / 100 * 25 * (0.6 if mode != "h2" else 1.0)) * float(rng.lognormal(0, 0.08))
    load = page_load(page, mode, plt if status == "ok" else None, status="ok" if status == "ok" else "failed")
    p = loss / 100
    packets = int(size / 1400 * 1.05)
    lost = int(rng.binomial(packets, p)) if p > 0 else 0
    queue_full = int(rng.integers(0, 3))
    enqueued = packets - lost
    delivered = enqueued - queue_full
    duration = plt / 1000 + 0.2
    counters_reply = counters({
        "p0.forward": link_counters(enqueued=enqueued, queue_full=queue_full, random_loss=lost, max_queue_packets=30),
        "client.up": link_counters(enqueued=40, size=100, max_queue_packets=1),
    }, now_ns=START_NS + int(duration * 1e9),
        emulator=emulator_counters(rx_packets=2 * packets, tx_packets=2 * packets - lost, timer_late_ns_max=40000))
    queue = {"kind": "droptail", "bytes": 45000}
    link_config = {
        "p0.forward": link(rate_bps=int(bw * 1e6), delay_ns=int(rtt / 2 * 1e6), queue=queue,
                           loss={"kind": "bernoulli", "p": p} if p > 0 else None),
        "p0.reverse": link(rate_bps=int(bw * 1e6), delay_ns=int(rtt / 2 * 1e6)),
    }
    samples = [{"t_unix_ns": START_NS + i * 10_000_000, "conn": 0, "role": "server",
                "transport": "quic" if mode == "h3" else "tcp", "cwnd": 14600 + 1460 * i, "rtt_us": 1000.0 * rtt,
                "ssthresh": 65535} for i in range(5)]
    return RunRecord(run_key=run_key(params), params=params, status=status,
                     error=None if status == "ok" else "page load failed: object /obj3: connection reset",
                     started_unix_ns=START_NS, duration_s=duration, page_load=load, link_config=link_config,
                     link_counters=counters_reply, samples=samples, artifacts_dir=f"runs/{run_key(params)}")


def wifi_params(mode: str, loss: float, page: str, rep: int, order: int) -> dict[str, Any]:
    return {"scenario": "wifi-loss", "bandwidth_mbps": 7.0, "rtt_ms": 50.0, "loss_pct": loss, "buffer_bytes": 45000,
            "mode": mode, "page": page, "repetition": rep, "seed": 1000 + rep, "tcp_cc": "cubic",
            "quic_cc": "cubic", "order_index": order, "browser": "engine",
            # what the runner adds: derived from the page, or the same for every run
            "buffer": "45 kB", "page_ref": f"table1:{page}", "page_bytes": sum(PAGES[page]), "scheduler": "round-robin"}


PROVENANCE = {"protolab_version": "0.1.0", "git": {"commit": "e67b1bd" + "0" * 33, "dirty": False},
              "kernel": "6.8.0-test", "machine": "x86_64", "cpus": 2, "cpu_model": "Test CPU @ 2.0GHz",
              "python": "3.11.9", "sysctls": {"net.ipv4.tcp_congestion_control": "bbr"},
              "tools": {"protolab-net": "protolab-net 0.1.0"}}


def fill_store(results_dir: Path) -> dict[str, list[RunRecord]]:
    """wifi-loss: 2 modes x 2 losses x 2 pages x 3 reps (+ one failed and one timed-out run);
    bw-rtt-grid: 2 modes x 2 bandwidths x 2 RTTs x 1 page x 3 reps."""
    rng = np.random.default_rng(7)
    recorded: dict[str, list[RunRecord]] = {"wifi": [], "grid": []}
    with ResultsStore(results_dir) as store:
        store.upsert_experiment("wifi", "wifi-loss", {"scenario": "wifi-loss", "repetitions": 3,
                                                      "axes": {"loss_pct": [0, 2], "mode": ["h2", "h2-parallel:2"]}},
                                PROVENANCE)
        order = 0
        for rep in range(3):
            for loss in (0.0, 2.0):
                for page in PAGES:
                    for mode in ("h2", "h2-parallel:2"):
                        run = make_run(rng, wifi_params(mode, loss, page, rep, order))
                        store.record_run("wifi", run)
                        recorded["wifi"].append(run)
                        order += 1
        for status, rep in (("failed", 3), ("timeout", 4)):
            run = make_run(rng, wifi_params("h2", 2.0, "wikipedia", rep, order), status=status)
            store.record_run("wifi", run)
            recorded["wifi"].append(run)
            order += 1
        store.upsert_experiment("grid", "bw-rtt-grid", {"scenario": "bw-rtt-grid"}, PROVENANCE)
        for rep in range(3):
            for bw in (1.0, 5.0):
                for rtt in (30.0, 90.0):
                    for mode in ("h2", "h3"):
                        params = {"scenario": "bw-rtt-grid", "bandwidth_mbps": bw, "rtt_ms": rtt, "loss_pct": 0.0,
                                  "buffer_bytes": int(bw * 1e6 / 8 * rtt / 1000), "mode": mode, "page": "wikipedia",
                                  "repetition": rep, "seed": rep, "tcp_cc": "cubic", "quic_cc": "cubic",
                                  "order_index": order, "buffer": "1bdp", "page_bytes": sum(PAGES["wikipedia"])}
                        # buffer = 1 BDP varies with the cell; it is part of the condition like in 002
                        run = make_run(rng, params)
                        store.record_run("grid", run)
                        recorded["grid"].append(run)
                        order += 1
    return recorded


# ---------------------------------------------------------------------------------------------
# Store


def test_store_round_trip(tmp_path: Path) -> None:
    recorded = fill_store(tmp_path / "res")
    wifi = recorded["wifi"]
    with ResultsStore(tmp_path / "res", read_only=True) as store:
        assert store.schema_version() == SCHEMA_VERSION
        exp = store.query("SELECT * FROM experiments WHERE id = 'wifi'")[0]
        assert exp["name"] == "wifi-loss"
        assert json.loads(exp["provenance"])["git"]["commit"].startswith("e67b1bd")
        assert json.loads(exp["spec"])["axes"]["loss_pct"] == [0, 2]
        runs = store.query("SELECT * FROM runs WHERE experiment_id = 'wifi' ORDER BY order_index")
        assert len(runs) == 2 * 2 * 2 * 3 + 2
        first, rec = runs[0], wifi[0]
        assert first["run_key"] == rec.run_key
        assert first["bandwidth_mbps"] == 7.0 and first["rtt_ms"] == 50.0 and first["loss_pct"] == 0.0
        assert first["buffer_bytes"] == 45000 and first["repetition"] == 0 and first["seed"] == 1000
        assert first["mode"] == "h2" and first["page"] == "baidu" and first["scenario"] == "wifi-loss"
        assert json.loads(first["params"]) == {"browser": "engine", "buffer": "45 kB", "page_ref": "table1:baidu",
                                               "page_bytes": 50_000, "scheduler": "round-robin"}
        assert first["plt_ms"] == pytest.approx(rec.page_load.plt_ms)  # type: ignore[union-attr]
        assert first["started_unix_ns"] == START_NS  # full 64-bit precision kept
        assert first["artifacts_dir"] == f"runs/{rec.run_key}"
        assert json.loads(first["emulator_counters"])["timer_late_ns_max"] == 40000
        failed = [r for r in runs if r["status"] != "ok"]
        assert {r["status"] for r in failed} == {"failed", "timeout"}
        assert all(r["plt_ms"] is None and "connection reset" in r["error"] for r in failed)

        pl = store.query("SELECT * FROM page_loads WHERE run_key = ?", [rec.run_key])[0]
        assert pl["n_objects"] == len(PAGES["baidu"]) and pl["n_connections"] == 1
        assert pl["bytes"] == sum(PAGES["baidu"]) and pl["start_unix_ns"] == START_NS
        assert pl["mode"] == "h2" and json.loads(pl["config"])["scheduler"] == "round-robin"
        objects = store.query("SELECT * FROM objects WHERE run_key = ? ORDER BY idx", [rec.run_key])
        assert [o["expected_bytes"] for o in objects] == PAGES["baidu"]
        assert objects[0]["parent"] is None and objects[1]["parent"] == "//www.baidu.test/"
        assert objects[0]["http_status"] == 200 and objects[0]["first_byte_ms"] == 83.0
        par = next(r for r in wifi if r.params["mode"] == "h2-parallel:2")
        conns = store.query("SELECT * FROM connections WHERE run_key = ? ORDER BY idx", [par.run_key])
        assert [c["idx"] for c in conns] == [0, 1]
        assert [c["conn_id"] for c in conns] == [c.conn_id for c in par.page_load.connections]  # type: ignore[union-attr]
        assert sum(c["bytes"] for c in conns) == par.page_load.bytes  # type: ignore[union-attr]
        samples = store.query("SELECT * FROM transport_samples WHERE run_key = ? ORDER BY t_unix_ns", [rec.run_key])
        assert len(samples) == 5 and samples[1]["cwnd"] == 16060 and samples[0]["conn"] == "0"
        assert samples[0]["rtt_us"] == 50000.0 and samples[0]["ssthresh"] == 65535
        assert json.loads(samples[0]["fields"]) == {}

        lossy = next(r for r in wifi if r.params["loss_pct"] == 2.0 and r.status == "ok")
        links = {row["link"]: row for row in store.query("SELECT * FROM link_counters WHERE run_key = ?",
                                                         [lossy.run_key])}
        assert set(links) == {"p0.forward", "p0.reverse", "client.up"}
        fwd = links["p0.forward"]
        raw = lossy.link_counters.links["p0.forward"].model_dump()  # type: ignore[union-attr]
        assert fwd["configured_rate_mbps"] == 7.0 and fwd["configured_delay_ms"] == 25.0
        assert fwd["configured_loss_pct"] == pytest.approx(2.0)
        assert json.loads(fwd["configured_queue"]) == {"kind": "droptail", "bytes": 45000}
        arrived = raw["enqueued_packets"] + raw["dropped_packets"]["random_loss"] + raw["dropped_packets"]["queue_full"]
        assert fwd["arrived_packets"] == arrived
        assert fwd["achieved_loss_pct"] == pytest.approx(100 * raw["dropped_packets"]["random_loss"] / arrived)
        assert fwd["achieved_rate_mbps"] == pytest.approx(raw["delivered_bytes"] * 8 / lossy.duration_s / 1e6)
        assert fwd["link_group"] == "p0" and fwd["direction"] == "forward" and fwd["interval_s"] == lossy.duration_s
        rev = links["p0.reverse"]
        assert rev["configured_rate_mbps"] == 7.0 and rev["configured_loss_pct"] == 0.0 and rev["counters"] is None
        assert links["client.up"]["configured_rate_mbps"] is None and links["client.up"]["delivered_bytes"] == 4000

        assert store.finished_run_keys("wifi") == {r.run_key for r in wifi if r.status in ("ok", "failed")}
        assert store.finished_run_keys("nope") == set()


def test_record_replaces_earlier_record(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    params = wifi_params("h2", 2.0, "wikipedia", 0, 0)
    with ResultsStore(tmp_path) as store:
        store.upsert_experiment("e", "exp", {}, {})
        store.record_run("e", make_run(rng, params, status="timeout"))
        assert store.finished_run_keys("e") == set()  # a timeout is run again on resume
        again = make_run(rng, params)
        again.samples = again.samples[:2]
        store.record_run("e", again)
        assert store.finished_run_keys("e") == {again.run_key}
        counts = {t: store.query(f"SELECT count(*) AS n FROM {t} WHERE run_key = ?", [again.run_key])[0]["n"]
                  for t in ("runs", "page_loads", "objects", "connections", "transport_samples", "link_counters")}
        assert counts == {"runs": 1, "page_loads": 1, "objects": len(PAGES["wikipedia"]), "connections": 1,
                          "transport_samples": 2, "link_counters": 3}
        row = store.query("SELECT status, plt_ms FROM runs")[0]
        assert row["status"] == "ok" and row["plt_ms"] == pytest.approx(again.page_load.plt_ms)  # type: ignore[union-attr]
        # upsert keeps `created`, replaces the rest
        created = store.query("SELECT created FROM experiments")[0]["created"]
        store.upsert_experiment("e", "renamed", {"x": 1}, {"y": 2})
        exp = store.query("SELECT * FROM experiments")
        assert len(exp) == 1 and exp[0]["name"] == "renamed" and exp[0]["created"] == created


def test_failures_since_an_instant_count_as_finished_when_retrying(tmp_path: Path) -> None:
    """`protolab reproduce --retry-failed`: the failures recorded before the invocation are run
    again in every round, the ones it records itself are not."""
    from datetime import UTC, datetime

    rng = np.random.default_rng(3)
    ok, earlier, later = (make_run(rng, wifi_params("h2", 2.0, "wikipedia", 0, rep), status=status)
                          for rep, status in ((0, "ok"), (1, "failed"), (2, "failed")))
    with ResultsStore(tmp_path) as store:
        store.upsert_experiment("e", "exp", {}, {})
        store.record_run("e", ok)
        store.record_run("e", earlier)
        since = datetime.now(UTC).replace(tzinfo=None)
        store.record_run("e", later)
        every = {ok.run_key, earlier.run_key, later.run_key}
        assert len(every) == 3 and store.finished_run_keys("e") == every
        assert store.finished_run_keys("e", retry_failed=True) == {ok.run_key}
        assert store.finished_run_keys("e", retry_failed=True, failed_since=since) == {ok.run_key, later.run_key}


def test_record_is_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    params = wifi_params("h2-parallel:2", 0.0, "wikipedia", 1, 0)
    with ResultsStore(tmp_path) as store:
        store.upsert_experiment("e", "exp", {}, {})
        good = make_run(rng, params)
        store.record_run("e", good)

        def snapshot() -> dict[str, int]:
            return {t: store.query(f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in TABLES}

        before = snapshot()
        # a bad value in the middle of the objects: a clear error, nothing written
        bad = make_run(rng, params)
        objects = list(bad.page_load.objects)  # type: ignore[union-attr]
        objects[5] = objects[5].model_copy(update={"bytes": "lots"})  # unchecked: what a broken producer might give
        bad.page_load = bad.page_load.model_copy(update={"objects": objects})  # type: ignore[union-attr]
        with pytest.raises(StoreError, match=r"objects\[5\]\.bytes: expected an integer"):
            store.record_run("e", bad)
        assert snapshot() == before
        # a database failure after some tables were written: rolled back, the earlier record stays
        original = ResultsStore._insert

        def failing(self: ResultsStore, table: str, rows: list[dict[str, Any]]) -> None:
            if table == "transport_samples":
                raise duckdb.ConversionException("disk on fire")
            original(self, table, rows)

        monkeypatch.setattr(ResultsStore, "_insert", failing)
        other = make_run(rng, params)
        other.page_load = other.page_load.model_copy(  # type: ignore[union-attr]
            update={"objects": other.page_load.objects[:3]})  # type: ignore[union-attr]
        with pytest.raises(StoreError, match="cannot record run .*disk on fire"):
            store.record_run("e", other)
        monkeypatch.undo()
        assert snapshot() == before
        plt = store.query("SELECT plt_ms FROM runs")[0]["plt_ms"]
        assert plt == pytest.approx(good.page_load.plt_ms)  # type: ignore[union-attr]
        # the store is still usable
        store.record_run("e", other)
        assert store.query("SELECT count(*) AS n FROM objects")[0]["n"] == 3


def test_record_validation_errors(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    run = make_run(rng, wifi_params("h2", 0.0, "baidu", 0, 0))
    with ResultsStore(tmp_path) as store, pytest.raises(StoreError, match="experiment 'x' is not recorded"):
        store.record_run("x", run)
    run.status = "weird"
    with pytest.raises(StoreError, match="status: expected one of ok, failed, timeout"):
        build_run_rows("e", run)
    run.status = "ok"
    run.params["bandwidth_mbps"] = "fast"
    with pytest.raises(StoreError, match=r"runs\[0\]\.bandwidth_mbps: expected a number"):
        build_run_rows("e", run)
    run.params["bandwidth_mbps"] = 7
    run.samples = [{"conn": 0}]
    with pytest.raises(StoreError, match=r"transport_samples\[0\]\.t_unix_ns: missing"):
        build_run_rows("e", run)


def test_schema_version_and_bad_files(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "a"):
        pass
    with ResultsStore(tmp_path / "a"):  # idempotent
        pass
    con = duckdb.connect(str(tmp_path / "a" / "results.duckdb"))
    con.execute("UPDATE meta SET schema_version = 99")
    con.close()
    with pytest.raises(StoreError, match=rf"meta\.schema_version is 99.*schema version {SCHEMA_VERSION}"):
        ResultsStore(tmp_path / "a")
    with pytest.raises(StoreError, match="no results store here"):
        ResultsStore(tmp_path / "missing", read_only=True)
    (tmp_path / "b").mkdir()
    con = duckdb.connect(str(tmp_path / "b" / "results.duckdb"))
    con.execute("CREATE TABLE other (x INTEGER)")
    con.close()
    with pytest.raises(StoreError, match="not a protolab results store"):
        ResultsStore(tmp_path / "b")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "results.duckdb").write_text("not a database")
    with pytest.raises(StoreError, match="cannot open the results store"):
        ResultsStore(tmp_path / "c")
    with ResultsStore(tmp_path / "d"):
        pass
    with ResultsStore(tmp_path / "d", read_only=True) as ro, pytest.raises(StoreError, match="read-only"):
        ro.upsert_experiment("e", "n", {}, {})


V2_TABLES = ("bulk_transfers", "bulk_intervals", "pair_sides", "flow_bins", "connection_states")
V2_COLUMNS = {"runs": ("goodput_mbps", "workload"),
              "transport_samples": ("subflow", "controller", "event", "cc_state", "cwnd_bytes", "ssthresh", "min_rtt_us")}


@pytest.mark.parametrize("read_only", [False, True])
def test_version_1_store_is_migrated(tmp_path: Path, read_only: bool) -> None:
    """A store written by schema version 1 (without the tables and columns of version 2) is
    brought to version 2 in place when opened, even for reading (the report), keeping its runs."""
    fill_store(tmp_path / "res")
    con = duckdb.connect(str(tmp_path / "res" / "results.duckdb"))
    runs_before = con.execute("SELECT count(*) FROM runs").fetchone()
    for table in V2_TABLES:
        con.execute(f"DROP TABLE {table}")
    for table, columns in V2_COLUMNS.items():
        for column in columns:
            con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.execute("UPDATE meta SET schema_version = 1")
    con.close()
    with ResultsStore(tmp_path / "res", read_only=read_only) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.query("SELECT count(*) AS n FROM runs")[0]["n"] == runs_before[0]
        for table in V2_TABLES:
            assert store.query(f"SELECT count(*) AS n FROM {table}")[0]["n"] == 0
        assert all(r["goodput_mbps"] is None for r in store.query("SELECT goodput_mbps FROM runs"))
    with ResultsStore(tmp_path / "res") as store:  # writes go to the new columns by name
        store.upsert_experiment("m", "m", {}, {})
        store.record_run("m", RunRecord(run_key="k1", params={"mode": "h3", "workload": "bulk"}, status="ok",
                                        error=None, started_unix_ns=START_NS, duration_s=1.0,
                                        bulk=[BulkTransfer(bulk_result(goodput_bps=5e6))]))
        row = store.query("SELECT goodput_mbps, workload FROM runs WHERE run_key = 'k1'")[0]
        assert row == {"goodput_mbps": 5.0, "workload": "bulk"}


def test_version_4_store_is_migrated_and_reported(tmp_path: Path) -> None:
    """A store of schema 4 (connections.conn_id the result's integer index, no document columns
    of 5) opens read-only, is migrated (conn_id -> idx, the new columns NULL) and reported."""
    from protolab.report.build import build_report

    fill_store(tmp_path / "res")
    con = duckdb.connect(str(tmp_path / "res" / "results.duckdb"))
    indexes = con.execute("SELECT run_key, idx FROM connections ORDER BY run_key, idx").fetchall()
    con.execute("ALTER TABLE connections DROP COLUMN conn_id")
    con.execute("ALTER TABLE connections RENAME COLUMN idx TO conn_id")
    for table, column in (("objects", "delay_ms"), ("objects", "queue_position"), ("connections", "samples_file"),
                          ("page_loads", "browser"), ("bulk_intervals", "total_bytes")):
        con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.execute("UPDATE meta SET schema_version = 4")
    con.close()
    with ResultsStore(tmp_path / "res", read_only=True) as store:
        assert store.schema_version() == SCHEMA_VERSION
        rows = store.query("SELECT run_key, idx, conn_id FROM connections ORDER BY run_key, idx")
        assert [(r["run_key"], r["idx"]) for r in rows] == indexes
        assert all(r["conn_id"] is None for r in rows)
        assert all(r["delay_ms"] is None for r in store.query("SELECT delay_ms FROM objects"))
    assert "wifi-loss" in build_report(tmp_path / "res").read_text()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export(tmp_path: Path, fmt: str) -> None:
    recorded = fill_store(tmp_path / "res")
    with ResultsStore(tmp_path / "res", read_only=True) as store:
        files = store.export(tmp_path / "out", fmt)  # type: ignore[arg-type]
        expected_runs = store.query("SELECT count(*) AS n FROM runs")[0]["n"]
        expected_objects = store.query("SELECT count(*) AS n FROM objects")[0]["n"]
    assert sorted(p.name for p in files) == sorted(f"{t}.{fmt}" for t in TABLES)
    reader = "read_parquet" if fmt == "parquet" else "read_csv_auto"
    con = duckdb.connect()
    assert expected_runs == len(recorded["wifi"]) + len(recorded["grid"])
    assert con.execute(f"SELECT count(*) FROM {reader}(?)", [str(tmp_path / 'out' / f'runs.{fmt}')]).fetchone()[0] \
        == expected_runs
    assert con.execute(f"SELECT count(*) FROM {reader}(?)", [str(tmp_path / 'out' / f'objects.{fmt}')]).fetchone()[0] \
        == expected_objects
    row = con.execute(f"SELECT schema_version FROM {reader}(?)", [str(tmp_path / 'out' / f'meta.{fmt}')]).fetchone()
    assert row[0] == SCHEMA_VERSION
    cols = [d[0] for d in con.execute(f"SELECT * FROM {reader}(?) LIMIT 1",
                                      [str(tmp_path / 'out' / f'link_counters.{fmt}')]).description]
    assert cols == [name for name, _, _ in TABLES["link_counters"]]


# ---------------------------------------------------------------------------------------------
# Statistics


def test_median_ci_order_statistics() -> None:
    assert median_ci_ranks(5) is None  # max coverage 1 - 2/32 = 93.75% < 95%
    low, high, cov = median_ci_ranks(6)  # type: ignore[misc]
    assert (low, high) == (1, 6) and cov == pytest.approx(1 - 2 / 64)
    low, high, cov = median_ci_ranks(30)  # type: ignore[misc]
    assert (low, high) == (10, 21) and cov == pytest.approx(0.9572, abs=1e-4)
    s = summarize(list(range(1, 31)))
    assert s.n == 30 and s.median == 15.5 and s.mean == 15.5 and s.q1 == 8.25 and s.q3 == 22.75
    assert (s.ci_low, s.ci_high) == (10.0, 21.0)
    assert summarize([3.0, 1.0, 2.0]).ci_low is None
    assert summarize([]).n == 0
    # t interval of the mean: mean 2, s = 1, n = 3: 2 +- 4.3027 / sqrt(3)
    three = summarize([3.0, 1.0, 2.0])
    assert three.mean_ci_low == pytest.approx(2 - 4.302653 / 3**0.5, rel=1e-6)
    assert three.mean_ci_high == pytest.approx(2 + 4.302653 / 3**0.5, rel=1e-6)
    assert summarize([5.0]).mean_ci_low is None


# ---------------------------------------------------------------------------------------------
# Report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from protolab.report.build import build_report

    results = tmp_path_factory.mktemp("results")
    fill_store(results)
    index = build_report(results)
    assert index == results / "report" / "index.html"
    return index


def test_report_contents(report: Path) -> None:
    text = report.read_text()
    assert text.count("<svg") >= 9  # 5 figures for wifi-loss, 5 (with heat maps) for the grid
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        'xmlns:xlink="http://www.w3.org/1999/xlink"', "").replace("http://www.w3.org/", "").replace(
        "http://purl.org/dc/", "").replace("http://creativecommons.org/", "")  # nothing fetched
    assert "<script" not in text and "<link " not in text
    for needle in ("Experiment wifi-loss", "Experiment bw-rtt-grid", "Test CPU @ 2.0GHz", "6.8.0-test",
                   "e67b1bd", "Statistics per cell", "95% CI of median", "95% CI of mean", "Failed runs",
                   "page load failed: object /obj3: connection reset", "timeout",
                   "Achieved versus configured", "p0.forward", "loss 2%", "loss 0%", "h2-parallel:2",
                   "Experiment spec", "Generated "):
        assert needle in text, needle
    # the wifi experiment has no grid: a note instead of heat maps; the grid has heat maps
    assert "do not span more than one bandwidth and more than one RTT" in text
    assert "h3 vs h2" in text
    # conditions are the axes only: nothing derived from the page, nor the 1-BDP buffer in bytes
    assert "page_bytes=" not in text and "page_ref=" not in text and "buffer 3750 B" not in text
    assert "<td>1 Mbit/s, RTT 30 ms</td>" in text
    # page ordering by size: baidu before wikipedia in the cell table
    assert text.index("<td>baidu</td>") < text.index("<td>wikipedia</td>")
    # stats row for a cell of 3 runs: CI not available (n < 6)
    assert "n/a" in text
    ids = re.findall(r'\bid="(f\d+-[^"]+)"', text)
    assert len(ids) == len(set(ids))  # inline SVG ids are unique across figures
    figures = report.parent / "figures"
    for name in ("wifi-plt", "wifi-speedup", "wifi-cdf", "wifi-connections", "grid-plt", "grid-heatmaps",
                 "grid-speedup", "grid-cdf", "grid-connections"):
        for ext in ("svg", "png"):
            assert (figures / f"{name}.{ext}").stat().st_size > 1000, f"{name}.{ext}"
    assert not (figures / "wifi-heatmaps.svg").exists()
    from PIL import Image

    with Image.open(figures / "grid-heatmaps.png") as img:
        assert img.width > 500 and img.height > 300


def test_report_baseline_and_errors(tmp_path: Path, report: Path) -> None:
    from protolab.report.build import ReportError, build_report

    results = report.parent.parent
    index = build_report(results, tmp_path / "r", baseline="h2-parallel:2", experiments=["wifi"])
    text = index.read_text()
    assert "versus h2-parallel:2" in text and "bw-rtt-grid" not in text
    with pytest.raises(ReportError, match="--baseline: no runs with mode 'h9'"):
        build_report(results, tmp_path / "r2", baseline="h9")
    with pytest.raises(ReportError, match="no experiment nope"):
        build_report(results, tmp_path / "r3", experiments=["nope"])
    with ResultsStore(tmp_path / "empty"):
        pass
    with pytest.raises(ReportError, match="holds no experiment"):
        build_report(tmp_path / "empty")


def test_cli_report_and_export(tmp_path: Path, report: Path) -> None:
    exe = Path(sys.executable).parent / "protolab"
    results = report.parent.parent
    done = subprocess.run([str(exe), "export", str(results), "--format", "csv", "--out", str(tmp_path / "csv")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "csv" / "runs.csv").is_file()
    done = subprocess.run([str(exe), "report", str(tmp_path / "nothing")], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1
    assert "error:" in done.stderr and "no results store here" in done.stderr and "Traceback" not in done.stderr


def test_report_screenshot_in_headless_chromium(tmp_path: Path, report: Path) -> None:
    if not CHROMIUM.exists() and shutil.which("chromium") is None:
        pytest.skip("chromium is not installed")
    from PIL import Image

    shot = tmp_path / "report.png"
    done = subprocess.run(
        [str(CHROMIUM if CHROMIUM.exists() else shutil.which("chromium")), "--headless", "--no-sandbox",
         "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}",
         f"--screenshot={shot}", "--window-size=1400,4000", report.resolve().as_uri()],
        capture_output=True, text=True, timeout=180, check=False)
    assert shot.is_file(), f"no screenshot: rc={done.returncode} {done.stderr[-2000:]}"
    with Image.open(shot) as img:
        assert img.size == (1400, 4000)
        rgb = img.convert("RGB")
        colors = rgb.getcolors(maxcolors=1 << 20)
        assert colors is not None and len(colors) > 200  # text, plots, tables: not a blank page
        # something non-white in both the top (header) and further down (figures)
        top = rgb.crop((0, 0, 1400, 400)).getcolors(maxcolors=1 << 20)
        lower = rgb.crop((0, 1000, 1400, 3000)).getcolors(maxcolors=1 << 20)
        assert top is not None and len(top) > 20
        assert lower is not None and len(lower) > 100
        # the plot palette appears (mode colours of the box plots, e.g. #1f77b4 at alpha 0.7)
        assert math.isfinite(float(np.asarray(rgb).std())) and float(np.asarray(rgb).std()) > 10


def test_report_without_data_for_sections(tmp_path: Path) -> None:
    """Every section degrades to a note: one mode, only failed runs without load results or counters."""
    from protolab.report.build import build_report

    with ResultsStore(tmp_path) as store:
        store.upsert_experiment("bare", "bare", {}, {})
        for rep in range(2):
            store.record_run("bare", RunRecord(
                run_key=f"k{rep}", params={"mode": "h3", "page": "p", "repetition": rep}, status="failed",
                error="protolab-net load exited with status 2: bad manifest", started_unix_ns=START_NS,
                duration_s=0.5))
    text = build_report(tmp_path).read_text()
    assert "<svg" not in text
    for needle in ("No successful page loads", "Only one protocol mode", "no heat maps",
                   "No page-load results with connections", "No link counters recorded",
                   "bad manifest", "No provenance recorded"):
        assert needle in text, needle
