"""Nothing a run starts outlives it: a server that did not listen in time is stopped with
everything it started (else it keeps the port and every later run fails with "Address already
in use"), a client cut at its timeout or by Ctrl-C is stopped with its children, and the lab's
teardown ends whole process groups."""

from __future__ import annotations

import os
import signal
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from awaiting import wait_until
from conftest import lab_namespaces

from protolab.errors import ToolError
from protolab.lab import Lab, dumbbell
from protolab.lab.lab import _group_has_live_members
from protolab.plan.experiment import load_spec
from protolab.run import session as session_module
from protolab.run.executors import EXECUTORS
from protolab.run.runner import Events, run_experiment
from protolab.store import ResultsStore

pytestmark = pytest.mark.lab

SPEC = """
schema_version = 1
name = "slow-server"
scenario = "wifi-loss"
seed = 3
repetitions = 1
timeout_s = 30

[axes]
bandwidth_mbps = [20]
rtt_ms = [20]
loss_pct = [0]
buffer = ["1bdp"]
mode = ["h1", "h2"]
page = ["baidu"]
"""

# A stand-in protolab-net whose first `serve` binds its ports at once but announces itself
# (the listening line) only much later, as a server on a starved CPU may: the runner's wait
# times out while the server holds the ports. It runs the real server as a child, behind a
# pipe, so the process the runner started is not the one holding the sockets.
SLOW_FIRST_SERVE = """#!/bin/sh
if [ "$1" = serve ] && mkdir "{marker}" 2>/dev/null; then
    echo $$ > "{marker}/pid"
    "{real}" "$@" | (sleep 600; cat)
    exit 0
fi
exec "{real}" "$@"
"""


def _slow_first_serve(tmp_path: Path, real: Path) -> tuple[Path, Path]:
    marker = tmp_path / "first-serve"
    binary = tmp_path / "protolab-net"
    binary.write_text(SLOW_FIRST_SERVE.format(marker=marker, real=real))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return binary, marker / "pid"


def test_a_server_that_never_listened_is_stopped_and_the_next_run_succeeds(
        emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_module, "SERVER_READY_TIMEOUT_S", 8.0)
    binary, pid_file = _slow_first_serve(tmp_path, emu_binary)
    file = tmp_path / "spec.toml"
    file.write_text(SPEC)
    results = tmp_path / "results"
    name = lab_name()
    executor = session_module.LabExecutor(workloads=EXECUTORS, binary=binary, lab_name=name)
    summary = run_experiment(load_spec(file), results, executor, Events())
    with ResultsStore(results, read_only=True) as store:
        runs = store.query("SELECT status, error FROM runs ORDER BY order_index")
    assert [r["status"] for r in runs] == ["failed", "ok"], runs
    assert "was not listening after 8 s (stopped)" in runs[0]["error"]
    assert (summary.failed, summary.ok) == (1, 1)
    # The stand-in (the group leader), the real server behind its pipe and the sleeping reader
    # are all gone: none was left to the lab's teardown or orphaned.
    assert not _group_has_live_members(int(pid_file.read_text()))
    assert lab_namespaces(name) == []


def _two_hosts(name: str) -> Lab:
    return Lab(dumbbell(name, ["client"], ["server"]))


# Writes its pid (its process group: Lab starts commands in a session of their own), starts a
# child that would outlive it, and waits.
WITH_A_CHILD = 'echo $$ > "$0"; sleep 300 & wait'


def test_a_client_cut_at_its_timeout_is_stopped_with_its_children(
        emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with _two_hosts(lab_name()) as lab:
        with pytest.raises(ToolError, match="timed out after 1 s"):
            lab.run("client", ["sh", "-c", WITH_A_CHILD, pid_file], timeout=1)
        assert not _group_has_live_members(int(pid_file.read_text()))


def test_an_interrupted_client_is_stopped_with_its_children(
        emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with _two_hosts(lab_name()) as lab:
        def interrupt() -> None:
            # Ctrl-C while the runner waits for the client (SIGTERM takes the same path: protolab.cli).
            wait_until(pid_file.exists, what="the client started", within=30)
            os.kill(os.getpid(), signal.SIGINT)

        timer = threading.Thread(target=interrupt)
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                lab.run("client", ["sh", "-c", WITH_A_CHILD, pid_file], timeout=120)
        finally:
            timer.join()
        assert not _group_has_live_members(int(pid_file.read_text()))


def test_teardown_and_stop_end_whole_process_groups(
        emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> None:
    stopped, torn_down = tmp_path / "stopped", tmp_path / "torn-down"
    with pytest.raises(KeyboardInterrupt), _two_hosts(lab_name()) as lab:
        first = lab.spawn("server", ["sh", "-c", WITH_A_CHILD, stopped])
        lab.spawn("server", ["sh", "-c", WITH_A_CHILD, torn_down])
        wait_until(lambda: stopped.exists() and torn_down.exists(), what="both started", within=30)
        lab.stop(first)
        assert first.returncode is not None
        assert not _group_has_live_members(int(stopped.read_text()))
        raise KeyboardInterrupt
    assert not _group_has_live_members(int(torn_down.read_text()))
