"""Interop stacks inside a seed's experiment (docs/interop.md, docs/reproduce.md 004-fig8-10-quic-go):
the quic-vs-tcp-stacks scenario's modes, the server qlog's windows on fixed data, and a lab run
where quinn and quic-go download the same bytes over the same link."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from conftest import lab_namespaces, run_protolab
from protolab.interop import stacks, tcp_trace, testcases, trace
from protolab.interop.trace import TraceError
from protolab.measure.qlog import QlogError, read_qlog
from protolab.run.interop import read_qlogs, window_maxima

RS = "\x1e"
HEADER = {"qlog_version": "0.3", "qlog_format": "JSON-SEQ", "title": "quic-go qlog"}


def _record(value: dict[str, object]) -> str:
    return RS + json.dumps(value) + "\n"


def _metrics(t: float, **data: object) -> dict[str, object]:
    return {"time": t, "name": "recovery:metrics_updated", "data": data}


def _quic_go_qlog(cut_short: bool) -> str:
    """As quic-go writes it: each metrics event carries only what changed; `cut_short`: the
    server was stopped mid-record."""
    text = _record(HEADER) + _record(_metrics(1.0, congestion_window=40960, bytes_in_flight=1280))
    text += _record(_metrics(2.0, bytes_in_flight=39000)) + _record(_metrics(3.0, congestion_window=81920))
    text += _record({"time": 3.5, "name": "transport:packet_sent", "data": {"header": {"packet_type": "1RTT"}}})
    return text + (RS + '{"time": 4.0, "name": "recovery:metr' if cut_short else "")


def test_window_maxima_of_a_qlog_cut_short(tmp_path: Path) -> None:
    (tmp_path / "a_server.sqlog").write_text(_quic_go_qlog(cut_short=True))
    with pytest.raises(QlogError, match="truncated record"):
        read_qlog(tmp_path / "a_server.sqlog")
    assert len(read_qlog(tmp_path / "a_server.sqlog", truncated_tail=True).events) == 4
    assert window_maxima(read_qlogs(tmp_path)) == {"max_cwnd_bytes": 81920, "max_bytes_in_flight": 39000}


def test_window_maxima_take_every_trace_and_skip_foreign_files(tmp_path: Path) -> None:
    (tmp_path / "a.sqlog").write_text(_quic_go_qlog(cut_short=False))
    (tmp_path / "b.qlog").write_text(_record(HEADER) + _record(_metrics(1.0, congestion_window=100000)))
    (tmp_path / "c.qlog").write_text('{"qlog_version": "0.2", "traces": []}')  # another format: left out
    (tmp_path / "notes.txt").write_text("not a qlog")
    assert window_maxima(read_qlogs(tmp_path)) == {"max_cwnd_bytes": 100000, "max_bytes_in_flight": 39000}
    assert window_maxima([]) == {"max_cwnd_bytes": None, "max_bytes_in_flight": None}


def test_the_download_case_is_the_goodput_case_with_its_own_file() -> None:
    case = testcases.download(5_500_000, 300.0)
    goodput = testcases.TESTCASES["goodput"]
    assert (case.name, case.files, case.timeout_s) == ("download", (5_500_000,), 300.0)
    assert (case.endpoint_testcase, case.measurement, case.handshakes) == ("transfer", True, 1)
    assert goodput.files == (10 * testcases.MIB,)  # unchanged


def _spec(tmp_path: Path, modes: list[str], params: str = "bytes = 300000\n") -> Path:
    spec = tmp_path / "stacks.toml"
    spec.write_text(f'schema_version = 1\nname = "qvt-stacks-test"\nscenario = "quic-vs-tcp-stacks"\nseed = 2\n'
                    f'repetitions = 1\ntimeout_s = 60\n[params]\n{params}[axes]\nbandwidth_mbps = [20]\n'
                    f'rtt_ms = [40]\nloss_pct = [0]\nmode = {json.dumps(modes)}\n')
    return spec


def test_modes_are_bulk_protocols_or_stack_pairs(tmp_path: Path) -> None:
    done = run_protolab("run", _spec(tmp_path, ["h1c", "h3", "quic-go->aioquic"]), "--dry-run",
                        "--results", tmp_path / "r", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 runs" in done.stdout
    done = run_protolab("run", _spec(tmp_path, ["h3", "quic-go->msquic"]), "--dry-run", "--results",
                        tmp_path / "r", timeout=120)
    assert done.returncode != 0 and "unknown interop stack 'msquic'" in done.stdout + done.stderr
    done = run_protolab("run", _spec(tmp_path, ["h3", "quic-go->quic-go"], "duration_s = 5\n"), "--dry-run",
                        "--results", tmp_path / "r", timeout=120)
    assert done.returncode != 0 and "interop stacks download a file" in done.stdout + done.stderr


@pytest.mark.lab
def test_quinn_and_quic_go_download_the_same_bytes(emu_binary: Path, lab_name: Callable[[], str],
                                                   tmp_path: Path) -> None:
    """h3 (protolab's server, then stopped) and quic-go's interop pair on one link: both runs ok,
    quic-go's file intact, its goodput below the link's rate, its window from the server's qlog."""
    if stacks.BUILTIN_STACKS["quic-go"].version() is None:
        pytest.skip(f"interop stack quic-go is not built in {stacks.stacks_dir()}: run `make stacks`")
    results, name = tmp_path / "results", lab_name()
    done = run_protolab("run", _spec(tmp_path, ["h3", "quic-go->quic-go"]), "--results", results, "--lab", name,
                        "--binary", emu_binary, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as db:
        runs = dict(db.execute("SELECT mode, goodput_mbps FROM runs WHERE status = 'ok'").fetchall())
        [row] = db.execute("SELECT testcase, verdict, files_intact, bytes, goodput_mbps, max_cwnd_bytes, "
                           "max_bytes_in_flight FROM interop_results").fetchall()
    assert set(runs) == {"h3", "quic-go->quic-go"}
    assert all(0 < rate <= 20.5 for rate in runs.values())  # the link's 20 Mbit/s
    testcase, verdict, intact, size, goodput, cwnd, in_flight = row
    assert (testcase, verdict, intact, size, goodput) == ("download", "succeeded", 1, 300000, runs["quic-go->quic-go"])
    assert cwnd is not None and in_flight is not None and 0 < in_flight <= cwnd + 1500  # a packet may go out when cwnd has room for less
    assert lab_namespaces(name) == []


# ---------------------------------------------------------------------- TCP cases (caddy, nginx, Chromium)

SERVER, CLIENT = "10.77.1.1", "10.77.0.1"


def _segment(t: float, src: str, dst: str, length: int, syn: int = 0, ack: int = 1, client_port: int = 40000) -> str:
    ports = (client_port, 443) if src == CLIENT else (443, client_port)
    return f"{t}\t{src}\t{dst}\t{ports[0]}\t{ports[1]}\t{length}\t{syn}\t{ack}"


# A TLS 1.3 download: SYN, SYN-ACK (sent twice), ACK, ClientHello, the server's flight, the
# client's Finished and request, the response from 0.150 to 0.400 s.
TCP_FIXED = "\n".join([
    _segment(0.000, CLIENT, SERVER, 0, syn=1, ack=0), _segment(0.040, SERVER, CLIENT, 0, syn=1),
    _segment(0.041, SERVER, CLIENT, 0, syn=1), _segment(0.040, CLIENT, SERVER, 0), _segment(0.041, CLIENT, SERVER, 517),
    _segment(0.081, SERVER, CLIENT, 1200), _segment(0.082, SERVER, CLIENT, 900), _segment(0.110, CLIENT, SERVER, 150),
    _segment(0.150, SERVER, CLIENT, 1448), _segment(0.300, CLIENT, SERVER, 0), _segment(0.400, SERVER, CLIENT, 500),
])


def test_tcp_trace_of_fixed_tshark_output() -> None:
    segments = tcp_trace.parse_fields(TCP_FIXED)
    assert tcp_trace.connections(segments, SERVER) == 1  # the retransmitted SYN-ACK counts once
    assert tcp_trace.response_span(segments, SERVER) == (0.150, 0.400)
    assert tcp_trace.handshake_s(segments, CLIENT, SERVER) == pytest.approx(0.150)
    two = segments + tcp_trace.parse_fields(_segment(0.5, SERVER, CLIENT, 0, syn=1, client_port=40002))
    assert tcp_trace.connections(two, SERVER) == 2
    assert tcp_trace.response_span(segments[:6], SERVER) is None  # no request after the server's flight
    with pytest.raises(TraceError, match="line 1: tcp.len 'x'"):
        tcp_trace.parse_fields(f"0.1\t{SERVER}\t{CLIENT}\t443\t40000\tx\t0\t1")


def test_tcp_cases_are_judged_by_files_and_connections() -> None:
    files = testcases.FilesCheck(3, 3)
    h1, h2 = testcases.TESTCASES["transfer-h1"], testcases.TESTCASES["transfer-h2"]
    assert (h1.transport, h2.transport, testcases.TESTCASES["transfer"].transport) == ("tcp", "tcp", "quic")
    assert testcases.judge(h2, 0, None, files, None, SERVER, 1).result == "succeeded"
    assert testcases.judge(h2, 0, None, files, None, SERVER, 2).result == "succeeded"  # Chromium's spare connection
    assert "at least 1 TCP connection(s)" in str(testcases.judge(h1, 0, None, files, None, SERVER, 0).reason)
    assert testcases.judge(h1, 0, None, files, None, SERVER, 3).result == "succeeded"  # browsers open several
    assert testcases.judge(h1, 0, None, files, None, SERVER, None).result == "failed"  # no capture
    assert testcases.judge(h1, 127, None, files, None, SERVER, 1).result == "unsupported"


def test_system_stacks_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stacks, "installed_package", lambda package: None)
    for name, role in (("caddy", "server"), ("nginx", "server"), ("chromium", "client")):
        with pytest.raises(stacks.StackError, match=f"apt-get install {name}"):
            stacks.BUILTIN_STACKS[name].require(role)
    with pytest.raises(stacks.StackError, match="has no client"):
        stacks.BUILTIN_STACKS["nginx"].require("client")


def _interop_spec(tmp_path: Path, testcase: str, mode: str) -> Path:
    spec = tmp_path / "interop.toml"
    spec.write_text(f'schema_version = 1\nname = "interop-web"\nscenario = "interop"\nseed = 3\nrepetitions = 1\n'
                    f'timeout_s = 60\n[params]\nfile_scale = 0.05\n[axes]\nbandwidth_mbps = [10]\nrtt_ms = [30]\n'
                    f'loss_pct = [0]\nbuffer = [37500]\ntestcase = ["{testcase}"]\nmode = ["{mode}"]\n')
    return spec


@pytest.mark.lab
@pytest.mark.parametrize("mode, testcase", [("caddy->chromium", "transfer-h2"), ("nginx->chromium", "transfer-h1"),
                                            ("nginx->chromium", "transfer-h2"), ("caddy->quic-go", "http3"),
                                            ("caddy->chromium", "http3")])
def test_a_web_servers_transfer_arrives_intact(mode: str, testcase: str, emu_binary: Path,
                                               lab_name: Callable[[], str], tmp_path: Path) -> None:
    """caddy and nginx serve, Chromium (or quic-go) downloads: every file byte for byte, the
    connections counted and the goodput measured from the capture."""
    for name in stacks.parse_pair(mode):
        if stacks.BUILTIN_STACKS[name].version() is None:
            pytest.skip(f"interop stack {name} is missing: "
                        f"{'run `make stacks`' if stacks.BUILTIN_STACKS[name].build else f'apt-get install {name}'}")
    results, name = tmp_path / "results", lab_name()
    done = run_protolab("run", _interop_spec(tmp_path, testcase, mode), "--results", results, "--lab", name,
                        "--binary", emu_binary, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as db:
        [row] = db.execute("SELECT verdict, reason, files, files_intact, handshakes, goodput_mbps, server_version, "
                           "client_version FROM interop_results").fetchall()
    verdict, reason, files, intact, handshakes, goodput, server_version, client_version = row
    assert (verdict, reason) == ("succeeded", None)
    assert files == intact == len(testcases.TESTCASES[testcase].files)
    assert handshakes == 1 if testcase == "http3" else handshakes >= 1
    assert isinstance(goodput, float) and 0 < goodput <= 10.5  # the link's 10 Mbit/s
    assert server_version and client_version
    assert lab_namespaces(name) == []


# ---------------------------------------------------------------------- keyupdate


def _datagram(src: str, dst: str, phases: tuple[int, ...]) -> trace.Datagram:
    return trace.Datagram(1.0, src, dst, 1200, tuple(trace.QuicPacket(False, "1rtt", None, None) for _ in phases),
                          key_phases=phases)


def _initial(src: str, dst: str) -> trace.Datagram:
    return trace.Datagram(0.5, src, dst, 1200, (trace.QuicPacket(True, "initial", 1, "aa"),))


def test_keyupdate_needs_both_ends_in_key_phase_1() -> None:
    case, files = testcases.TESTCASES["keyupdate"], testcases.FilesCheck(1, 1)
    assert (case.endpoint_testcase, case.server_testcase, case.files) == ("keyupdate", "transfer", (3 * testcases.MIB,))
    start = [_initial(SERVER, CLIENT)]

    def verdict(client_phases: tuple[int, ...], server_phases: tuple[int, ...]) -> testcases.Verdict:
        datagrams = [*start, _datagram(CLIENT, SERVER, client_phases), _datagram(SERVER, CLIENT, server_phases)]
        return testcases.judge(case, 0, None, files, datagrams, SERVER)

    assert verdict((0, 1), (0, 0, 1)).result == "succeeded"
    assert "client did not update" in str(verdict((0, 0), (0, 1)).reason)
    assert "server did not follow" in str(verdict((0, 1), (0, 0)).reason)
    assert verdict((), ()).result == "unsupported"  # not decrypted: no key log
    assert trace.key_phases([_datagram(CLIENT, SERVER, (0, 1, 1))], src=CLIENT) == {0: 1, 1: 2}


def test_key_phase_of_tshark_output() -> None:
    line = f"1.5\t{SERVER}\t{CLIENT}\t1200\t0\t\t\t\t\tTrue"
    [datagram] = trace.parse_fields(line)
    assert datagram.key_phases == (1,) and datagram.packets[0].kind == "1rtt"
    assert trace.parse_fields(line.replace("True", "0"))[0].key_phases == (0,)


@pytest.mark.lab
def test_quic_go_updates_its_keys(emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> None:
    """quic-go's client updates its keys (TESTCASE=keyupdate, its server told transfer): the
    capture, decrypted with the endpoints' key log, shows key phase 1 from both ends."""
    if stacks.BUILTIN_STACKS["quic-go"].version() is None:
        pytest.skip(f"interop stack quic-go is not built in {stacks.stacks_dir()}: run `make stacks`")
    results, name = tmp_path / "results", lab_name()
    done = run_protolab("run", _interop_spec(tmp_path, "keyupdate", "quic-go->quic-go"), "--results", results,
                        "--lab", name, "--binary", emu_binary, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as db:
        [row] = db.execute("SELECT verdict, reason, files_intact, keylog FROM interop_results").fetchall()
    assert row == ("succeeded", None, 1, True)
    assert lab_namespaces(name) == []
