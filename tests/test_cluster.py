"""Sweeps on a Dask cluster (docs/cluster.md): a local scheduler and two `protolab worker`
processes run a sweep into the same store content as a local run, and the sweep survives a
worker killed in the middle of it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from awaiting import wait_until
from conftest import toml_text

from protolab.plan.experiment import spec_from_dict
from protolab.run.cluster import blocks, worker_lab_name
from protolab.run.runner import plan

VENV_BIN = Path(sys.executable).parent


def _spec(name: str) -> dict[str, Any]:
    return {
        "schema_version": 1, "name": name, "scenario": "wifi-loss", "seed": 3, "repetitions": 1, "timeout_s": 60,
        "axes": {"bandwidth_mbps": [10, 20], "rtt_ms": [20], "loss_pct": [0, 1], "buffer": ["1bdp"],
                 "mode": ["h2", "h3"], "page": ["baidu"]},
    }


def test_blocks_are_the_plans_condition_runs_in_order(tmp_path: Path) -> None:
    runs = plan(spec_from_dict({**_spec("b"), "repetitions": 2}, source="s.toml", path=tmp_path / "s.toml"))
    grouped = blocks(runs)
    assert [run for block in grouped for run in block] == runs
    assert len(grouped) == 4  # four conditions, each block both repetitions of one
    assert all(len({run.condition for run in block}) == 1 for block in grouped)
    names = {worker_lab_name(f"w{i}") for i in range(20)}
    assert len(names) == 20 and all(n.isalnum() and n.islower() and len(n) <= 10 for n in names)


def test_a_large_condition_is_cut_in_equal_blocks_for_several_labs(tmp_path: Path) -> None:
    # Two conditions of 2 modes x 7 repetitions = 14 runs each, at most 5 runs a block: 3 blocks
    # of 5/5/4 per condition, consecutive in plan order (the plan's interleaving kept).
    spec = {**_spec("c"), "repetitions": 7, "axes": {**_spec("c")["axes"], "bandwidth_mbps": [10], "loss_pct": [0, 1]}}
    runs = plan(spec_from_dict(spec, source="s.toml", path=tmp_path / "s.toml"))
    grouped = blocks(runs, max_runs=5)
    assert [run for block in grouped for run in block] == runs
    assert [len(block) for block in grouped] == [5, 5, 4, 5, 5, 4]
    assert all(len({run.condition for run in block}) == 1 for block in grouped)


def test_adaptive_blocks_keep_every_repetition_of_a_cell_together(tmp_path: Path) -> None:
    # Adaptive repetitions judge a cell on the worker that ran it: a cell is never split, and the
    # cells of a condition are dealt to blocks of balanced size, each block in plan order.
    spec = {**_spec("d"), "repetitions": 4,
            "axes": {**_spec("d")["axes"], "bandwidth_mbps": [10], "loss_pct": [0], "mode": ["h1", "h2", "h3"],
                     "page": ["baidu", "amazon"]}}
    runs = plan(spec_from_dict(spec, source="s.toml", path=tmp_path / "s.toml"))
    assert len(runs) == 24  # one condition, 6 cells x 4 repetitions
    grouped = blocks(runs, max_runs=10, whole_cells=True)
    assert sorted(len(block) for block in grouped) == [8, 8, 8]
    cells = [{(run.mode, run.page.name if run.page else None) for run in block} for block in grouped]
    assert all(len(block_cells) == 2 for block_cells in cells)
    assert set.union(*cells) == {(run.mode, run.page.name if run.page else None) for run in runs}
    assert not any(a & b for i, a in enumerate(cells) for b in cells[i + 1:])
    order = {run.key: index for index, run in enumerate(runs)}
    assert all([order[run.key] for run in block] == sorted(order[run.key] for run in block) for block in grouped)
    assert blocks(runs, max_runs=1000, whole_cells=True) == [runs]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.port = _free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.logs = tmp
        self.scheduler = subprocess.Popen(
            [str(VENV_BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
             "--dashboard-address", ":0"], stdout=subprocess.DEVNULL, stderr=(tmp / "scheduler.log").open("wb"))
        self.workers: dict[str, subprocess.Popen[bytes]] = {}

    def add_worker(self, name: str) -> None:
        self.workers[name] = subprocess.Popen(
            [sys.executable, "-m", "protolab", "worker", self.address, "--name", name],
            stdout=subprocess.DEVNULL, stderr=(self.logs / f"{name}.log").open("wb"))

    def wait_for_workers(self, n: int) -> None:
        from distributed import Client

        with Client(self.address, timeout="30s") as client:
            client.wait_for_workers(n, timeout=60)

    def stop(self) -> None:
        for process in [*self.workers.values(), self.scheduler]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*self.workers.values(), self.scheduler]:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        c.add_worker("wa")
        c.add_worker("wb")
        c.wait_for_workers(2)
        yield c
    finally:
        c.stop()


def _run(spec: Path, results: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "protolab", "run", str(spec), "--results", str(results), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _content(results: Path) -> dict[str, tuple[Any, ...]]:
    """What a run's store rows say modulo timing: status, mode, condition, objects and bytes."""
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT r.run_key, r.status, r.mode, r.bandwidth_mbps, r.loss_pct, p.n_objects, p.bytes "
            "FROM runs r JOIN page_loads p USING (run_key)").fetchall()
    return {key: rest for key, *rest in rows}


def _workers(results: Path) -> dict[str, str | None]:
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as con:
        return dict(con.execute("SELECT run_key, worker FROM runs").fetchall())


@pytest.mark.lab
def test_a_cluster_sweep_matches_a_local_one_and_survives_a_killed_worker(
        emu_binary: Path, cluster: Cluster, tmp_path: Path) -> None:
    spec = tmp_path / "sweep.toml"
    spec.write_text(toml_text(_spec("sweep")))
    local = _run(spec, tmp_path / "local")
    out, _ = local.communicate(timeout=600)
    assert local.returncode == 0, out[-3000:]

    # Labs of other work on the machine (a sweep of its own on a local cluster) are not this
    # test's: only namespaces that appear from here on are its workers'.
    others = set(_worker_namespaces())
    remote = _run(spec, tmp_path / "cluster", "--cluster", cluster.address)
    runs_dir = tmp_path / "cluster" / "runs"
    # Kill a worker as soon as it is in the middle of a run.
    wait_until(lambda: runs_dir.is_dir() and any(runs_dir.iterdir()), what="the first run on the cluster", within=120,
               process=remote)
    victim = cluster.workers["wa"]
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    out, _ = remote.communicate(timeout=600)
    assert remote.returncode == 0, out[-3000:]
    # Four conditions of two runs: a block each, announced before they run.
    assert re.search(r"4 blocks of at most 2 runs on [12] workers", out), out[-3000:]

    expected = _content(tmp_path / "local")
    assert len(expected) == 8
    assert all(status == "ok" for status, *_ in expected.values())
    assert _content(tmp_path / "cluster") == expected
    workers = _workers(tmp_path / "cluster")
    assert set(workers.values()) <= {"wa", "wb"} and "wb" in set(workers.values())
    assert set(_workers(tmp_path / "local").values()) == {None}
    # The killed worker's lab went with it (its emulator watched its owner).
    listing = sorted(set(_worker_namespaces()) - others)
    wait_until(lambda: not set(_worker_namespaces()) - others, what=f"the workers' namespaces gone (had: {listing})",
               within=30)


def _worker_namespaces() -> list[str]:
    """The network namespaces of cluster workers' labs (`pl-w...`) on this machine."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in listing.splitlines() if line.startswith("pl-w")]


def test_two_local_clusters_at_once_start_without_a_port_warning() -> None:
    """Two sweeps on `--cluster local:N` at the same time: each scheduler's HTTP server takes a free
    port, so neither warns that another holds 8787."""
    import warnings

    from protolab.run.dask_client import connect

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with connect("local:1") as first, connect("local:1") as second:
            assert first.scheduler.address != second.scheduler.address
            assert first.submit(sum, [1, 2]).result(timeout=60) == 3
    assert not [w for w in caught if "already in use" in str(w.message)], [str(w.message) for w in caught]
