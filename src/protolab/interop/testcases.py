"""The quic-interop-runner's test cases as protolab runs them, and their verdicts (pure).

Each case says which files the server's `/www` holds, what the endpoints are told (`TESTCASE`:
the measurement cases tell them `transfer`, as the runner does), how many handshakes the server's
capture must show, and the link the runner's ns-3 scenario gives it. The link is not applied
from here: the spec's axes set it (specs/interop.toml has one sweep per case, with the values of
`link`), so the conditions stay visible in the store like every other run's.

A verdict, as the runner's: `unsupported` when an endpoint exits with 127; else `failed` unless
the client exited 0, every file arrived intact (and no other), the server's Initial packets show
exactly the case's number of handshakes, all of version 1, a Retry if and only if the case asks
for one, 0-RTT packets from the client where the case asks for them (zerortt), and only the
case's cipher suites in the client's ClientHello (chacha20; tshark decrypts Initial packets). What the
runner reads from decrypted packets is not checked (see docs/interop.md).
"""

from __future__ import annotations

import filecmp
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from protolab.interop import trace

KIB = 1 << 10
MIB = 1 << 20
QUIC_V1 = 0x1
TLS_CHACHA20_POLY1305_SHA256 = 0x1303
UNSUPPORTED_STATUS = 127  # the interface's exit status for a test case an endpoint does not implement

# The runner's ns-3 link (simple-p2p --delay=15ms --bandwidth=10Mbps --queue=25): 10 Mbit/s both
# ways, 15 ms each way, a 25-packet drop-tail queue (25 x 1500 bytes here: the emulator's queues
# are in bytes).
# The runner's blackhole scenario (blackhole --on=5s --off=2s): one outage of 2 s, both ways. Its
# 5 s of link before the outage are about half of the 10 MiB file at 10 Mbit/s; here the outage
# starts when half the files' bytes have crossed the link to the client, so it lands mid-transfer
# however slowly the endpoints start on a loaded machine.
BLACKOUT_S = 2.0
AMPLIFICATION_FACTOR = 3  # RFC 9000 §8.1
AMPLIFICATION_TOLERANCE = 4  # the runner lets a server between 3x and 4x slide, and fails it above
MIN_CERT_FLIGHT = 7500  # the runner's: the server's Handshake CRYPTO data must show the long chain was used

RUNNER_LINK: Mapping[str, float] = {"bandwidth_mbps": 10, "rtt_ms": 30, "loss_pct": 0, "buffer": 25 * 1500}


@dataclass(frozen=True)
class TestCase:
    name: str
    description: str
    endpoint_testcase: str  # what ROLE's endpoints get as TESTCASE
    files: tuple[int, ...]  # sizes of the files in /www, bytes
    handshakes: int | None = 1  # None: one per file (multiconnect: a connection per request)
    timeout_s: float = 60.0
    measurement: bool = False  # goodput: the rate is the result
    link: Mapping[str, float] = field(default_factory=lambda: dict(RUNNER_LINK))
    retry: bool = False  # the server must send a Retry (else it must not)
    zero_rtt: bool = False  # the client must send 0-RTT packets
    name_length: int = 10  # of the files' names (zerortt's are long: its requests fill 0-RTT packets)
    cipher_suites: frozenset[int] | None = None  # what the client may offer (chacha20); None: any
    cross_traffic: bool = False  # a greedy TCP Cubic flow (iperf3, server to client) shares the link throughout
    transport: str = "quic"  # "tcp": HTTP/1.1 or HTTP/2 over TLS on TCP 443 (protolab's cases for caddy, nginx)
    server_testcase: str | None = None  # what the server is told, where it differs (keyupdate: transfer)
    key_update: bool = False  # both ends must send 1-RTT packets in key phase 1 (read with the key log)
    blackout_s: float = 0.0  # the link drops everything both ways this long, once half the files crossed it
    drops_to_server: int = 0  # the client's 2nd to (1 + this)th packets to the server are dropped
    amplification_limit: bool = False  # the server sends at most 3x (4x tolerated) before validating the client
    cert_chain: int = 0  # certificates in /certs/cert.pem (0: the leaf and the CA; amplificationlimit: 9)

    def expected_handshakes(self, files: int) -> int:
        return files if self.handshakes is None else self.handshakes


def _link(**changes: float) -> dict[str, float]:
    return {**RUNNER_LINK, **changes}


TESTCASES: dict[str, TestCase] = {case.name: case for case in (
    TestCase("handshake", "one 1 KiB file over one handshake", "handshake", (1 * KIB,)),
    TestCase("transfer", "2, 3 and 5 MiB over one connection; the connection closes cleanly", "transfer",
             (2 * MIB, 3 * MIB, 5 * MIB)),
    TestCase("http3", "5 KiB, 10 KiB and 500 KiB over HTTP/3", "http3", (5 * KIB, 10 * KIB, 500 * KIB)),
    TestCase("multiconnect", "handshake loss: 50 files of 1 KiB, one connection each, 30% loss both ways",
             "multiconnect", (1 * KIB,) * 50, handshakes=None, timeout_s=300.0, link=_link(loss_pct=30)),
    TestCase("retry", "10 KiB after the server's Retry", "retry", (10 * KIB,), retry=True),
    TestCase("chacha20", "3 MiB, the client offering ChaCha20-Poly1305 only", "chacha20", (3 * MIB,),
             cipher_suites=frozenset({TLS_CHACHA20_POLY1305_SHA256})),
    TestCase("resumption", "5 KiB, then 10 KiB over a resumed second connection", "resumption", (5 * KIB, 10 * KIB),
             handshakes=2),
    TestCase("zerortt", "40 files of 32 bytes, the second connection's requests in 0-RTT", "zerortt", (32,) * 40,
             handshakes=2, zero_rtt=True, name_length=250),
    TestCase("keyupdate", "3 MiB; the client updates its 1-RTT keys, the server follows", "keyupdate", (3 * MIB,),
             server_testcase="transfer", key_update=True),
    TestCase("blackhole", "10 MiB; the link drops everything both ways for 2 s mid-transfer", "transfer",
             (10 * MIB,), blackout_s=BLACKOUT_S),
    TestCase("amplificationlimit", "5 KiB; the client's 2nd to 7th packets to the server dropped, a 9-certificate "
             "chain: the server's first flight stays within 3x what it received", "transfer", (5 * KIB,),
             drops_to_server=6, amplification_limit=True, cert_chain=9),
    TestCase("transferloss", "one 2 MiB file with 2% loss both ways", "transfer", (2 * MIB,), link=_link(loss_pct=2)),
    TestCase("goodput", "goodput of one 10 MiB file on the runner's link", "transfer", (10 * MIB,), measurement=True),
    TestCase("crosstraffic", "goodput of one 25 MiB file beside a TCP Cubic flow", "transfer", (25 * MIB,),
             measurement=True, timeout_s=180.0, cross_traffic=True),
    # protolab's, not the runner's: the transfer case's files over TLS on TCP, for web servers
    # and browsers (caddy, nginx, Chromium); the endpoints are told the case's own name.
    TestCase("transfer-h1", "transfer's files over HTTP/1.1 over TLS (TCP)", "transfer-h1",
             (2 * MIB, 3 * MIB, 5 * MIB), handshakes=None, transport="tcp"),
    TestCase("transfer-h2", "transfer's files over HTTP/2 over TLS (TCP)", "transfer-h2",
             (2 * MIB, 3 * MIB, 5 * MIB), handshakes=None, transport="tcp"),
)}


def download(size: int, timeout_s: float) -> TestCase:
    """One file of `size` bytes, measured like the goodput case: a scenario's own download (the
    `quic-vs-tcp-stacks` scenario's 5.5 MB of 004), not one of the runner's cases."""
    return replace(TESTCASES["goodput"], name="download", description=f"goodput of one {size}-byte file",
                   files=(size,), timeout_s=timeout_s)


def check_testcase(name: str) -> TestCase:
    try:
        return TESTCASES[name]
    except KeyError:
        raise ValueError(f"unknown interop test case {name!r} (known: {', '.join(TESTCASES)})") from None


@dataclass(frozen=True)
class FilesCheck:
    """The client's /downloads against the server's /www."""

    expected: int
    intact: int
    missing: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()
    different: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.intact == self.expected and not (self.missing or self.unexpected or self.different)

    def problem(self) -> str | None:
        parts = [f"{what}: {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"
                 for what, names in (("missing", self.missing), ("unexpected", self.unexpected),
                                     ("content differs", self.different)) if names]
        return "; ".join(parts) or None


def compare_files(www: Path, downloads: Path, names: Sequence[str]) -> FilesCheck:
    """Every served file must have arrived byte for byte, and nothing else."""
    present = {p.name for p in downloads.iterdir() if p.is_file()} if downloads.is_dir() else set()
    missing = tuple(sorted(n for n in names if n not in present))
    unexpected = tuple(sorted(present - set(names)))
    different = tuple(sorted(n for n in names if n in present
                             and not filecmp.cmp(www / n, downloads / n, shallow=False)))
    return FilesCheck(len(names), len(names) - len(missing) - len(different), missing, unexpected, different)


@dataclass(frozen=True)
class Verdict:
    result: str  # succeeded, failed, unsupported
    reason: str | None = None


def judge(case: TestCase, client_status: int | None, server_status: int | None, files: FilesCheck,
          datagrams: Sequence[trace.Datagram] | None, server: str, tcp_connections: int | None = None,
          keylog: bool = False) -> Verdict:
    """The runner's verdict of one run (see the module doc). `server_status` is None while the
    server still ran when the client ended (as it should); `datagrams` None: no capture. A TCP
    case reads `tcp_connections` (the server's SYN-ACKs) instead of the QUIC packets: at least
    one (a browser opens a spare connection even for HTTP/2). `keylog`: the capture was read with
    the endpoints' key log (amplificationlimit needs it, as the runner's)."""
    if UNSUPPORTED_STATUS in (client_status, server_status):
        who = "client" if client_status == UNSUPPORTED_STATUS else "server"
        return Verdict("unsupported", f"the {who} does not implement test case {case.endpoint_testcase!r} (exit 127)")
    if server_status is not None:
        return Verdict("failed", f"the server exited with status {server_status} before the client was done")
    if client_status != 0:
        return Verdict("failed", "the client timed out" if client_status is None
                       else f"the client exited with status {client_status}")
    if not files.ok:
        return Verdict("failed", f"files: {files.problem()}")
    if case.transport == "tcp":
        return _judge_tcp(case, tcp_connections)
    if datagrams is None:
        return Verdict("failed", "no capture of the server to judge the handshakes by")
    expected = case.expected_handshakes(files.expected)
    seen = trace.handshakes(datagrams, server)
    if seen != expected:
        return Verdict("failed", f"expected {expected} handshake(s), the server's Initials show {seen}")
    found = trace.versions(datagrams, server)
    if found != {QUIC_V1}:
        return Verdict("failed", f"expected QUIC version 0x1 only, found {sorted(hex(v) for v in found)}")
    retried = trace.retries(datagrams, server)
    if retried and not case.retry:
        return Verdict("failed", "the server sent a Retry the case does not ask for")
    if case.retry and not retried:
        return Verdict("failed", "the server sent no Retry")
    if case.zero_rtt and not trace.zero_rtt_packets(datagrams, server):
        return Verdict("failed", "the client sent no 0-RTT packet")
    if case.key_update:
        client_phases, server_phases = trace.key_phases(datagrams, dst=server), trace.key_phases(datagrams, src=server)
        if not sum(client_phases.values()) + sum(server_phases.values()):
            return Verdict("unsupported", "no key log (SSLKEYLOGFILE) to read the 1-RTT packets' key phase with")
        if not client_phases[1]:
            return Verdict("failed", "the client did not update its keys (no 1-RTT packet in key phase 1)")
        if not server_phases[1]:
            return Verdict("failed", "the server did not follow the key update (no 1-RTT packet in key phase 1)")
    offered = trace.offered_cipher_suites(datagrams, server)
    if case.cipher_suites is not None and offered != case.cipher_suites:
        return Verdict("failed", f"the client offered cipher suites {sorted(hex(s) for s in offered)}, "
                                 f"expected {sorted(hex(s) for s in case.cipher_suites)}")
    if case.amplification_limit:
        return _judge_amplification(datagrams, server, keylog)
    return Verdict("succeeded")


def _judge_amplification(datagrams: Sequence[trace.Datagram], server: str, keylog: bool) -> Verdict:
    """The runner's amplificationlimit check: the server used the long chain (its Handshake
    CRYPTO data, read with the key log) and sent at most 3x (4x tolerated) of what the client's
    Initials brought until a Handshake packet of the client's validated its address."""
    if not keylog:
        return Verdict("unsupported", "no key log (SSLKEYLOGFILE) to read the server's Handshake CRYPTO data with")
    flight = trace.crypto_flight(datagrams, server)
    if flight < MIN_CERT_FLIGHT:
        return Verdict("failed", f"the server's TLS flight shows {flight} bytes of CRYPTO data, fewer than "
                                 f"{MIN_CERT_FLIGHT}: the long certificate chain was not used")
    sent = trace.amplification(datagrams, server)
    summary = (f"before validating the client the server sent {sent.server_bytes} bytes for "
               f"{sent.client_bytes} received ({sent.max_ratio:.2f}x at most)")
    if not sent.validated:
        return Verdict("failed", "no Handshake packet of the client's reached the server")
    if sent.max_ratio > AMPLIFICATION_TOLERANCE:
        return Verdict("failed", f"{summary}: over the runner's {AMPLIFICATION_TOLERANCE}x tolerance")
    if sent.max_ratio > AMPLIFICATION_FACTOR:
        return Verdict("succeeded", f"{summary}: over {AMPLIFICATION_FACTOR}x, within the runner's "
                                    f"{AMPLIFICATION_TOLERANCE}x tolerance")
    return Verdict("succeeded", summary)


def _judge_tcp(case: TestCase, connections: int | None) -> Verdict:
    if connections is None:
        return Verdict("failed", "no capture of the server to judge the connections by")
    if connections < 1 or (case.handshakes is not None and connections != case.handshakes):
        expected = "at least 1" if case.handshakes is None else str(case.handshakes)
        return Verdict("failed", f"expected {expected} TCP connection(s), the server's SYN-ACKs show {connections}")
    return Verdict("succeeded")
