"""External stacks through the quic-interop-runner interface (docs/interop.md): the trace parser
and verdicts on fixed data, the private mount namespace, and per stack a lab run whose files
must arrive intact."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from conftest import lab_namespaces, run_protolab
from protolab.interop import endpoint, links, stacks, testcases, trace
from protolab.run.interop import stop_group, write_files

CLIENT, SERVER = "10.77.0.1", "10.77.1.1"


def _line(t: float, src: str, dst: str, forms: str, types: str = "", versions: str = "", scids: str = "",
          suites: str = "") -> str:
    return "\t".join([f"{t:.6f}", src, dst, "1200", forms, types, versions, scids, suites])


# A handshake as tshark prints it: the client's Initial, the server's coalesced Initial +
# Handshake, 1-RTT data both ways; then a second connection's server Initial (another SCID).
FIXED = "\n".join([
    _line(100.000, CLIENT, SERVER, "1", "0", "0x00000001", "", "0x1301,0x1302,0x1303"),
    _line(100.031, SERVER, CLIENT, "1,1", "0,2", "0x00000001,0x00000001", "aa11,aa11"),
    _line(100.045, CLIENT, SERVER, "1,0", "2", "0x00000001", ""),
    _line(100.060, SERVER, CLIENT, "0"),
    _line(100.560, SERVER, CLIENT, "0"),
    _line(101.000, SERVER, CLIENT, "1", "0", "0x00000001", "bb22"),
])


def test_trace_of_fixed_tshark_output() -> None:
    datagrams = trace.parse_fields(FIXED)
    assert len(datagrams) == 6
    assert [p.kind for p in datagrams[1].packets] == ["initial", "handshake"]
    assert [p.kind for p in datagrams[2].packets] == ["handshake", "1rtt"]
    assert trace.handshakes(datagrams, SERVER) == 2
    assert trace.offered_cipher_suites(datagrams, SERVER) == {0x1301, 0x1302, 0x1303}
    assert trace.versions(datagrams, SERVER) == {1}
    assert trace.retries(datagrams, SERVER) == 0
    assert trace.one_rtt_span(datagrams, SERVER) == (100.060, 100.560)
    assert trace.handshake_s(datagrams, CLIENT, SERVER) == pytest.approx(0.060)
    assert trace.one_rtt_span(datagrams, CLIENT) == (100.045, 100.045)  # coalesced after its Handshake


def test_version_negotiation_and_retry_are_told_apart() -> None:
    datagrams = trace.parse_fields("\n".join([_line(1.0, SERVER, CLIENT, "1", "", "0x00000000", "cc"),
                                              _line(1.1, SERVER, CLIENT, "1", "3", "0x00000001", "dd")]))
    assert [d.packets[0].kind for d in datagrams] == ["version_negotiation", "retry"]
    assert trace.retries(datagrams, SERVER) == 1


def test_a_bad_tshark_line_names_the_line() -> None:
    with pytest.raises(trace.TraceError, match="x.txt: line 2: frame.time_epoch"):
        trace.parse_fields(FIXED.splitlines()[0] + "\nnot-a-time\t\t\t\t1", "x.txt")


def _files(ok: bool = True) -> testcases.FilesCheck:
    return testcases.FilesCheck(1, 1) if ok else testcases.FilesCheck(1, 0, missing=("abc",))


@pytest.mark.parametrize("case, client, server, files, expected, reason", [
    ("handshake", 127, None, True, "unsupported", "client does not implement"),
    ("handshake", 0, 127, True, "unsupported", "server does not implement"),
    ("handshake", 0, 1, True, "failed", "server exited with status 1"),
    ("handshake", None, None, True, "failed", "timed out"),
    ("handshake", 0, None, False, "failed", "missing: abc"),
    ("handshake", 0, None, True, "failed", "expected 1 handshake(s), the server's Initials show 2"),
    ("multiconnect", 0, None, True, "succeeded", None),
])
def test_verdicts(case: str, client: int | None, server: int | None, files: bool, expected: str,
                  reason: str | None) -> None:
    checked = _files(files) if case != "multiconnect" else testcases.FilesCheck(2, 2)
    verdict = testcases.judge(testcases.TESTCASES[case], client, server, checked, trace.parse_fields(FIXED), SERVER)
    assert verdict.result == expected
    assert (verdict.reason is None) if reason is None else (reason in (verdict.reason or ""))


def test_retry_and_zero_rtt_cases_need_their_packets() -> None:
    one = trace.parse_fields("\n".join(FIXED.splitlines()[:5]))
    retry = trace.parse_fields("\n".join([*FIXED.splitlines()[:5], _line(100.01, SERVER, CLIENT, "1", "3", "0x00000001", "ee")]))
    assert testcases.judge(testcases.TESTCASES["retry"], 0, None, _files(), one, SERVER).reason == "the server sent no Retry"
    assert testcases.judge(testcases.TESTCASES["retry"], 0, None, _files(), retry, SERVER).result == "succeeded"
    assert "Retry the case does not ask for" in str(testcases.judge(testcases.TESTCASES["handshake"], 0, None, _files(),
                                                                    retry, SERVER).reason)
    two = trace.parse_fields(FIXED)
    zero = trace.parse_fields(FIXED + "\n" + _line(101.0, CLIENT, SERVER, "1,1", "0,1", "0x00000001,0x00000001", "f,f"))
    assert trace.zero_rtt_packets(zero, SERVER) == 1
    case = testcases.TESTCASES["zerortt"]
    assert testcases.judge(case, 0, None, _files(), two, SERVER).reason == "the client sent no 0-RTT packet"
    assert testcases.judge(case, 0, None, _files(), zero, SERVER).result == "succeeded"
    assert testcases.judge(testcases.TESTCASES["resumption"], 0, None, _files(), two, SERVER).result == "succeeded"
    chacha = testcases.TESTCASES["chacha20"]
    assert "offered cipher suites ['0x1301', '0x1302', '0x1303']" in str(testcases.judge(chacha, 0, None, _files(), one,
                                                                                        SERVER).reason)
    only = trace.parse_fields(FIXED.replace("0x1301,0x1302,0x1303", "4867"))
    only = only[:5]
    assert testcases.judge(chacha, 0, None, _files(), only, SERVER).result == "succeeded"


def test_one_handshake_of_version_1_succeeds() -> None:
    one = trace.parse_fields("\n".join(FIXED.splitlines()[:5]))
    assert testcases.judge(testcases.TESTCASES["transfer"], 0, None, _files(), one, SERVER).result == "succeeded"


def test_files_are_compared_byte_for_byte(tmp_path: Path) -> None:
    www, downloads = tmp_path / "www", tmp_path / "downloads"
    www.mkdir()
    downloads.mkdir()
    names = write_files(www, [1000, 2000, 10], seed=7)
    assert write_files(tmp_path, [1000], seed=7)[0] == names[0]  # names and bytes follow the seed
    for name in names[:2]:
        (downloads / name).write_bytes((www / name).read_bytes())
    (downloads / names[1]).write_bytes(b"x" + (www / names[1]).read_bytes()[1:])
    (downloads / "extra").write_bytes(b"?")
    check = testcases.compare_files(www, downloads, names)
    assert (check.expected, check.intact) == (3, 1)
    assert check.missing == (names[2],) and check.different == (names[1],) and check.unexpected == ("extra",)
    assert not check.ok


def test_pairs_and_stacks() -> None:
    assert stacks.parse_pair(" quic-go -> aioquic ") == ("quic-go", "aioquic")
    with pytest.raises(stacks.StackError, match="SERVER->CLIENT"):
        stacks.parse_pair("quic-go vs aioquic")
    own = stacks.spec_stack("mine", "/opt/mine/run_endpoint.sh --fast", ["server"])
    assert own.command == ("/opt/mine/run_endpoint.sh", "--fast") and own.version() == "external"
    with pytest.raises(stacks.StackError, match="has no client"):
        own.require("client")
    with pytest.raises(stacks.StackError, match="roles"):
        stacks.spec_stack("mine", "x", ["browser"])


def test_spec_errors_name_the_field(tmp_path: Path) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text('schema_version = 1\nname = "bad"\nscenario = "interop"\n[axes]\nbandwidth_mbps = [10]\n'
                    'rtt_ms = [30]\nloss_pct = [0]\nbuffer = [37500]\ntestcase = ["handshake"]\n'
                    'mode = ["quic-go->msquic"]\n')
    done = run_protolab("run", spec, "--dry-run", "--results", tmp_path / "r", timeout=120)
    assert done.returncode != 0 and "unknown interop stack 'msquic'" in done.stdout + done.stderr
    spec.write_text(spec.read_text().replace('"quic-go->msquic"', '"quic-go->aioquic"').replace('"handshake"', '"x"'))
    done = run_protolab("run", spec, "--dry-run", "--results", tmp_path / "r", timeout=120)
    assert done.returncode != 0 and "axes.testcase" in done.stdout + done.stderr


def _mounted(target: str) -> bool:
    return any(line.split()[4] == target for line in Path("/proc/self/mountinfo").read_text().splitlines())


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
def test_the_binds_are_private_and_gone_after_the_endpoint(tmp_path: Path) -> None:
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "f").write_text("served\n")
    (tmp_path / "hosts").write_text(endpoint.hosts_file("10.77.1.1"))
    argv = endpoint.mounted_argv(["sh", "-c", "cat /www/f; grep server4 /etc/hosts; exit 3"],
                                 {"/www": tmp_path / "www", "/etc/hosts": tmp_path / "hosts"})
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == ["served", "10.77.1.1 server server4"]
    assert not _mounted("/www") and "server4" not in Path("/etc/hosts").read_text()


def test_stop_group_ends_the_children_too(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    process = subprocess.Popen(["sh", "-c", f"sleep 60 & echo $! > {pids}; trap '' TERM; sleep 60"],
                               start_new_session=True)
    deadline = time.monotonic() + 10
    while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pids.read_text())
    stop_group(process)
    assert process.poll() is not None
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_certificates_name_the_server(tmp_path: Path) -> None:
    certs = endpoint.make_certificates(tmp_path / "certs", "10.77.1.1")
    assert sorted(p.name for p in certs.iterdir()) == ["ca.pem", "cert.pem", "priv.key"]
    text = subprocess.run(["openssl", "x509", "-in", certs / "cert.pem", "-noout", "-ext", "subjectAltName"],
                          capture_output=True, text=True, check=True).stdout
    assert "DNS:server" in text and "DNS:server4" in text and "IP Address:10.77.1.1" in text
    verified = subprocess.run(["openssl", "verify", "-CAfile", certs / "ca.pem", certs / "cert.pem"],
                              capture_output=True, text=True, check=False)
    assert verified.returncode == 0, verified.stderr


def test_a_certificate_chain_of_the_length_asked(tmp_path: Path) -> None:
    """amplificationlimit's long chain (9 there; 3 here, to stay fast): the leaf, the
    intermediates and the CA in cert.pem, verifying up to ca.pem through the intermediates."""
    certs = endpoint.make_certificates(tmp_path / "certs", "10.77.1.1", chain=3)
    assert sorted(p.name for p in certs.iterdir()) == ["ca.pem", "cert.pem", "priv.key"]
    chain = (certs / "cert.pem").read_text()
    assert chain.count("BEGIN CERTIFICATE") == 3 and chain.endswith((certs / "ca.pem").read_text())
    verified = subprocess.run(["openssl", "verify", "-CAfile", certs / "ca.pem", "-untrusted", certs / "cert.pem",
                               certs / "cert.pem"], capture_output=True, text=True, check=False)
    assert verified.returncode == 0, verified.stderr
    alone = subprocess.run(["openssl", "verify", "-CAfile", certs / "ca.pem", certs / "cert.pem"],
                           capture_output=True, text=True, check=False)
    assert alone.returncode != 0  # the leaf is not signed by the CA itself


# ---------------------------------------------------------------------- lab runs


def _spec(tmp_path: Path, testcase: str, modes: list[str], extra: str = "") -> Path:
    spec = tmp_path / "interop.toml"
    spec.write_text(f'schema_version = 1\nname = "interop-test"\nscenario = "interop"\nseed = 3\nrepetitions = 1\n'
                    f'timeout_s = 60\n[params]\nfile_scale = 0.05\n{extra}[axes]\nbandwidth_mbps = [10]\n'
                    f'rtt_ms = [30]\nloss_pct = [0]\nbuffer = [37500]\ntestcase = {json.dumps([testcase])}\n'
                    f'mode = {json.dumps(modes)}\n')
    return spec


def _interop_rows(results: Path) -> list[dict[str, object]]:
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as db:
        cursor = db.execute("SELECT * FROM interop_results ORDER BY server, client")
        columns = [c[0] for c in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def _assert_clean(results: Path, name: str) -> None:
    assert lab_namespaces(name) == []
    for run in (results / "runs").iterdir():
        assert not (run / "interop" / "www").exists() and not (run / "interop" / "downloads").exists()
    assert not _mounted("/www") and not _mounted("/downloads")


@pytest.mark.lab
@pytest.mark.parametrize("stack, testcase", [("quic-go", "transfer"), ("aioquic", "transfer"),
                                             ("protolab", "http3")])
def test_a_stacks_transfer_arrives_intact(stack: str, testcase: str, emu_binary: Path,
                                          lab_name: Callable[[], str], tmp_path: Path) -> None:
    """The stack as server (and as client, where it has one) against itself or aioquic: every
    file byte for byte, one handshake of QUIC v1 in the server's capture."""
    client = stack if "client" in stacks.BUILTIN_STACKS[stack].roles else "aioquic"
    for name in {stack, client}:
        if stacks.BUILTIN_STACKS[name].version() is None:
            pytest.skip(f"interop stack {name} is not built in {stacks.stacks_dir()}: run `make stacks`")
    results, name = tmp_path / "results", lab_name()
    done = run_protolab("run", _spec(tmp_path, testcase, [f"{stack}->{client}"]), "--results", results, "--lab", name,
                        "--binary", emu_binary, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = _interop_rows(results)
    assert row["verdict"] == "succeeded", row
    assert row["files"] == row["files_intact"] == len(testcases.TESTCASES[testcase].files)
    assert (row["handshakes"], row["quic_versions"], row["client_status"]) == (1, "0x1", 0)
    assert isinstance(row["goodput_mbps"], float) and 0 < row["goodput_mbps"] <= 10.5  # the link's 10 Mbit/s
    _assert_clean(results, name)


@pytest.mark.lab
def test_a_failing_endpoint_fails_the_run_and_leaves_nothing(emu_binary: Path, lab_name: Callable[[], str],
                                                             tmp_path: Path) -> None:
    extra = '[params.endpoints.broken]\ncommand = "sh -c \'echo broken; exit 3\'"\nroles = ["server", "client"]\n'
    results, name = tmp_path / "results", lab_name()
    done = run_protolab("run", _spec(tmp_path, "handshake", ["broken->broken"], extra), "--results", results,
                        "--lab", name, "--binary", emu_binary, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = _interop_rows(results)
    assert row["verdict"] == "failed" and "server exited with status 3" in str(row["reason"])
    _assert_clean(results, name)


def test_matrix_of_fixed_rows() -> None:
    from protolab.report.interop import matrix_markdown

    link = {"bandwidth_mbps": 10.0, "rtt_ms": 30.0, "loss_pct": 0.0}
    rows = [{"testcase": "goodput", "server": "quic-go", "client": "aioquic", "verdict": "succeeded",
             "goodput_mbps": rate, "reason": None, **link} for rate in (8.0, 9.0, 10.0)]
    rows += [{"testcase": "handshake", "server": "protolab", "client": "quic-go", "verdict": "unsupported",
              "goodput_mbps": None, "reason": "exit 127", **link}]
    text = matrix_markdown(rows)
    # mean 9, s = 1, t(0.975, 2) = 4.303: 9 -+ 4.303 / sqrt(3) = [6.52, 11.48]
    assert "| quic-go | 9.00 [6.52, 11.48] (n=3) ✓✓✓ |" in text
    assert "| protolab | ? |" in text and "- protolab->quic-go: exit 127" in text
    assert "Link: 10 Mbit/s, 30 ms RTT, 0% loss." in text


def _datagram(t: float, src: str, dst: str, size: int, kinds: tuple[str, ...], crypto_end: int = 0) -> trace.Datagram:
    packets = tuple(trace.QuicPacket(kind != "1rtt", kind, 1 if kind != "1rtt" else None, "aa" if kind != "1rtt" else None)
                    for kind in kinds)
    return trace.Datagram(t, src, dst, size + trace.UDP_HEADER, packets, crypto_end=crypto_end)


def _amplification_trace(server_sizes: list[int]) -> list[trace.Datagram]:
    """The client's 1200-byte Initial, the server's datagrams, then the client's Handshake."""
    flight = [_datagram(1.0 + i / 100, SERVER, CLIENT, size, ("initial", "handshake") if i == 0 else ("handshake",),
                        crypto_end=9000 if i == len(server_sizes) - 1 else 100) for i, size in enumerate(server_sizes)]
    return [_datagram(1.0, CLIENT, SERVER, 1200, ("initial",)), *flight,
            _datagram(2.0, CLIENT, SERVER, 1200, ("initial", "handshake")),
            _datagram(2.1, SERVER, CLIENT, 1200, ("1rtt",))]


def test_amplification_is_counted_until_the_client_is_validated() -> None:
    sent = trace.amplification(_amplification_trace([1200, 1200, 1200]), SERVER)
    assert (sent.client_bytes, sent.server_bytes, sent.validated) == (1200, 3600, True)
    assert sent.max_ratio == pytest.approx(3.0)
    assert trace.crypto_flight(_amplification_trace([1200]), SERVER) == 9000
    case = testcases.TESTCASES["amplificationlimit"]
    judged = [testcases.judge(case, 0, None, _files(), _amplification_trace(sizes), SERVER, keylog=True)
              for sizes in ([1200, 1200, 1200], [1200, 1200, 1200, 500], [1200] * 5)]
    assert [v.result for v in judged] == ["succeeded", "succeeded", "failed"]
    assert "3600 bytes for 1200 received (3.00x at most)" in str(judged[0].reason)
    assert "within the runner's 4x tolerance" in str(judged[1].reason)
    assert "over the runner's 4x tolerance" in str(judged[2].reason)
    assert testcases.judge(case, 0, None, _files(), _amplification_trace([1200]), SERVER).result == "unsupported"
    short = [replace(d, crypto_end=min(d.crypto_end, 3000)) for d in _amplification_trace([1200])]
    assert "long certificate chain was not used" in str(testcases.judge(case, 0, None, _files(), short, SERVER,
                                                                        keylog=True).reason)
    unvalidated = _amplification_trace([1200])[:2]
    assert "no Handshake packet" in str(testcases.judge(case, 0, None, _files(), unvalidated, SERVER, keylog=True).reason)


def _counters(to_server_lost: int = 0, to_client_bytes: int = 0) -> dict[str, dict[str, object]]:
    return {links.TO_SERVER: {"dropped_packets": {"random_loss": to_server_lost}, "delivered_bytes": 0},
            links.TO_CLIENT: {"dropped_packets": {"random_loss": 0}, "delivered_bytes": to_client_bytes}}


def test_the_blackhole_goes_dark_at_half_the_files_and_lights_again() -> None:
    restore = {links.TO_SERVER: None, links.TO_CLIENT: {"kind": "bernoulli", "p": 0.02}}
    schedule = links.LinkSchedule(testcases.TESTCASES["blackhole"], 1000, restore)
    assert schedule.start() == [] and schedule.step(_counters(to_client_bytes=499), 10.0) == []
    dark = schedule.step(_counters(to_client_bytes=500), 10.0)
    assert [(c.link, c.loss) for c in dark] == [(links.TO_SERVER, links.DROP_ALL), (links.TO_CLIENT, links.DROP_ALL)]
    assert schedule.step(_counters(to_client_bytes=600), 11.99) == [] and schedule.active
    light = schedule.step(_counters(to_client_bytes=600), 12.0)
    assert [(c.link, c.loss) for c in light] == list(restore.items())
    assert not schedule.active and schedule.step(_counters(to_client_bytes=900), 20.0) == []
    assert schedule.events == ["dark both ways after 500 bytes to the client", "light again after 2.00 s"]


def test_the_droplist_passes_the_first_packet_then_drops_six() -> None:
    schedule = links.LinkSchedule(testcases.TESTCASES["amplificationlimit"], 5120, {links.TO_SERVER: None})
    [start] = schedule.start()
    assert (start.link, start.loss, start.reseed) == (links.TO_SERVER, links.PASS_FIRST_THEN_DROP, True)
    assert schedule.step(_counters(to_server_lost=5), 1.0) == []
    assert schedule.step(_counters(to_server_lost=6), 1.5) == [links.LinkChange(links.TO_SERVER, None)]
    assert not schedule.active
    assert links.LinkSchedule(testcases.TESTCASES["transfer"], 1, {}).start() == []
    assert not links.LinkSchedule(testcases.TESTCASES["transfer"], 1, {}).active


@pytest.mark.lab
@pytest.mark.parametrize("testcase", ["blackhole", "amplificationlimit"])
def test_blackhole_and_amplification_limit_on_aioquic(testcase: str, emu_binary: Path, lab_name: Callable[[], str],
                                                      tmp_path: Path) -> None:
    """aioquic against itself (built by set-up): the files arrive through the 2 s outage; the
    server's first flight (a 9-certificate chain) stays within 3x of the client's one Initial
    while the client's next six packets are dropped."""
    if stacks.BUILTIN_STACKS["aioquic"].version() is None:
        pytest.skip(f"interop stack aioquic is not built in {stacks.stacks_dir()}: run `make stacks`")
    results, name = tmp_path / "results", lab_name()
    done = run_protolab("run", _spec(tmp_path, testcase, ["aioquic->aioquic"]), "--results", results, "--lab", name,
                        "--binary", emu_binary, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = _interop_rows(results)
    assert row["verdict"] == "succeeded", row
    assert (row["files_intact"], row["handshakes"]) == (1, 1)
    [run] = list((results / "runs").iterdir())
    events = (run / "interop" / "links.log").read_text().splitlines()
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as db:
        lost = db.execute("SELECT link, dropped_random_loss_packets FROM link_counters ORDER BY link").fetchall()
    if testcase == "blackhole":
        assert events[0].startswith("dark both ways") and events[1].startswith("light again")
        assert row["completion_ms"] > testcases.BLACKOUT_S * 1000  # the outage is inside the transfer
    else:
        assert events[0].startswith("dropped the client's packets 2 to")
        assert "x at most" in str(row["reason"])
        assert dict(lost)["p0.forward"] >= 6
    _assert_clean(results, name)
