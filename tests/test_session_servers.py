"""LabSession's servers keyed by host and slot, without a lab: 004 Fig. 13 runs both sides'
servers in one host at once, each with its own files."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from protolab.run.session import LabSession, Server


class FakeLab:
    """Records stops; a started server is a finished `true`, so nothing stays behind."""

    def __init__(self) -> None:
        self.stopped: list[subprocess.Popen[bytes]] = []
        self.name = "pl-test"

    def stop(self, process: subprocess.Popen[bytes], timeout: float = 0) -> None:
        self.stopped.append(process)


def _session(tmp_path: Path) -> tuple[LabSession, FakeLab, list[list[str]]]:
    session = LabSession.__new__(LabSession)
    lab = FakeLab()
    started: list[list[str]] = []
    session.lab = lab  # type: ignore[assignment]
    session.binary = Path("/bin/protolab-net")
    session.workdir = tmp_path
    session.mptcp = False
    session.servers = {}
    session.experiment = SimpleNamespace(  # type: ignore[assignment]
        spec=SimpleNamespace(artifacts=SimpleNamespace(samples=True, qlog=True, sample_interval_ms=100)))

    def start(host: str, argv: list[Any], key: str, base: Path, slot: str | None) -> Server:
        started.append([str(a) for a in argv])
        process = subprocess.Popen(["true"])
        process.wait()
        return Server(host, key, process, base / "tls", base / "samples", base / "qlog", slot)

    session._start_server = start  # type: ignore[method-assign]
    return session, lab, started


def test_two_servers_in_one_host_run_side_by_side_with_their_own_files(tmp_path: Path) -> None:
    session, lab, started = _session(tmp_path)
    transport = {"tcp_cc": "cubic"}
    a = session.server("server", transport, listen=["10.77.1.1"], slot="a")
    b = session.server("server", transport, listen=["10.77.1.2"], slot="b")
    assert sorted(session.servers) == ["server.a", "server.b"]
    assert lab.stopped == []  # b did not replace a
    assert {a.samples_dir, a.qlog_dir, a.tls_dir}.isdisjoint({b.samples_dir, b.qlog_dir, b.tls_dir})
    assert a.samples_dir == tmp_path / "server.a" / "samples"
    assert "10.77.1.1" in started[0] and "10.77.1.2" in started[1]
    # A slotless server (every other scenario) keeps the host's name and directory.
    plain = session.server("server2", transport, listen=["10.77.1.3"])
    assert plain.name == "server2" and plain.samples_dir == tmp_path / "server2" / "samples"
    # stop_server(host) stops every slot of that host, and only that host's.
    session.stop_server("server")
    assert sorted(session.servers) == ["server2"]
    assert lab.stopped == [a.process, b.process]
