"""One interop run (the `interop` workload, docs/interop.md): a server stack and a client stack
through the quic-interop-runner interface, on the run's link, judged like the runner.

The run's directory gets `interop/`: `www/` (the case's files, random bytes from the run's
seed), `downloads/`, `server/` and `client/` (each endpoint's `/logs`: key log, qlogs, its
output), `hosts`. Each endpoint runs in its host in a private mount namespace
(`protolab.interop.endpoint`) in a process group of its own, which is ended (TERM, then KILL)
whatever happens; `www/` and `downloads/` are removed after the verdict, even when the run
fails. The captures of both hosts are taken for the verdict (and removed after it unless the
spec keeps captures).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import string
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protolab.errors import ToolError
from protolab.interop import endpoint, links, stacks, tcp_trace, testcases, trace
from protolab.measure.qlog import QlogError, QlogTrace, read_qlog
from protolab.results.record import RunRecord
from protolab.run.runner import PlannedRun, derived_seed
from protolab.run.session import LabSession
from protolab.scenarios.interop import file_sizes, spec_stacks

SERVER_READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 5.0
TSHARK_TIMEOUT_S = 300.0
NAME_LENGTH = 10


@dataclass(frozen=True)
class InteropDirs:
    root: Path

    @property
    def www(self) -> Path:
        return self.root / "www"

    @property
    def downloads(self) -> Path:
        return self.root / "downloads"

    def logs(self, role: str) -> Path:
        return self.root / role

    def create(self) -> None:
        for directory in (self.www, self.downloads, self.logs("server") / "qlog", self.logs("client") / "qlog"):
            directory.mkdir(parents=True, exist_ok=True)

    def remove_files(self) -> None:
        """The served and downloaded files: large, and the verdict has read them."""
        for directory in (self.www, self.downloads):
            shutil.rmtree(directory, ignore_errors=True)


def write_files(www: Path, sizes: list[int], seed: int, name_length: int = NAME_LENGTH) -> list[str]:
    """Files of random bytes with random names (both from `seed`), as the runner makes them."""
    rng = random.Random(seed)
    names: list[str] = []
    for size in sizes:
        name = "".join(rng.choice(string.ascii_lowercase) for _ in range(name_length))
        while name in names:
            name = "".join(rng.choice(string.ascii_lowercase) for _ in range(name_length))
        (www / name).write_bytes(rng.randbytes(size))
        names.append(name)
    return names


def _certificates(session: LabSession, server_address: str, chain: int = 0) -> Path:
    """The session's interop CA and server certificate (or a chain of `chain` certificates),
    made on first use."""
    directory = session.workdir / ("interop-certs" if chain == 0 else f"interop-certs-chain{chain}")
    if not (directory / "cert.pem").exists():
        endpoint.make_certificates(directory, server_address, chain)
    return directory


def stop_group(process: subprocess.Popen[Any]) -> None:
    """End the endpoint's process group (it may have started children): TERM, then KILL."""
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, STOP_TIMEOUT_S)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait)
            # The leader is gone; children that ignored TERM still get the KILL below.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue


def _spawn(session: LabSession, host: str, stack: stacks.Stack, binds: dict[str, Path], env: dict[str, str],
           log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return session.lab.spawn(host, endpoint.mounted_argv(stack.command, binds), stdout=out,
                                 stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _await_listener(session: LabSession, host: str, server: subprocess.Popen[bytes], transport: str,
                    port: int = 443) -> None:
    """Until a UDP socket is bound to the port in the host (a TCP socket listens, for a TCP
    case), or the server ends (the verdict reads its status) or the time is up."""
    deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
    flags, name = ("-Hltn", "TCP") if transport == "tcp" else ("-Hlun", "UDP")
    while time.monotonic() < deadline and server.poll() is None:
        listed = session.lab.run(host, ["ss", flags, f"sport = :{port}"], timeout=10, check=False)
        if listed.stdout.strip():
            return
        time.sleep(0.1)
    if server.poll() is None:
        raise ToolError(f"the interop server in host {host} bound no {name} port {port} within "
                        f"{SERVER_READY_TIMEOUT_S:g} s")


def _tshark(pcap: Path, display_filter: str, fields: tuple[str, ...], keylog: Path | None = None) -> str:
    argv = ["tshark", "-n", "-r", str(pcap), "-Y", display_filter, "-T", "fields", "-E", "separator=/t",
            "-E", "occurrence=a", "-E", "aggregator=,"]
    if keylog is not None:
        argv += ["-o", f"tls.keylog_file:{keylog}"]
    for name in fields:
        argv += ["-e", name]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TSHARK_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError(f"tshark on {pcap}: {exc}") from exc
    if done.returncode != 0:
        raise ToolError(f"tshark on {pcap} exited with status {done.returncode}: {done.stderr.strip()[-800:]}")
    return done.stdout


def read_trace(pcap: Path, keylog: Path | None = None) -> list[trace.Datagram] | None:
    """The QUIC datagrams of a capture (tshark; decrypted with `keylog` when given); None without
    the capture."""
    if not pcap.exists():
        return None
    return trace.parse_fields(_tshark(pcap, "quic", trace.TSHARK_FIELDS, keylog), str(pcap))


def _keylog(dirs: InteropDirs) -> Path | None:
    """The endpoints' TLS keys in one file (either may have written them), None when neither did."""
    logs = [dirs.logs(role) / "keys.log" for role in ("client", "server")]
    text = "".join(p.read_text(errors="replace") for p in logs if p.exists())
    if not text.strip():
        return None
    merged = dirs.root / "keys.log"
    merged.write_text(text)
    return merged


def read_tcp_trace(pcap: Path) -> list[tcp_trace.Segment] | None:
    """The TCP segments to and from port 443 of a capture (tshark); None without the capture."""
    if not pcap.exists():
        return None
    return tcp_trace.parse_fields(_tshark(pcap, "tcp.port == 443", tcp_trace.TSHARK_FIELDS), str(pcap))


@dataclass
class Endpoints:
    """What the two endpoints did."""

    client_status: int | None
    server_status: int | None
    link_config: dict[str, Any]
    counters: Any  # the emulator's counters (results.generated.control_reply.Counters)
    link_events_done: bool = True  # the case's link events (blackhole, amplificationlimit) all happened


def _run_endpoints(session: LabSession, run: PlannedRun, run_dir: Path, dirs: InteropDirs, pair: tuple[stacks.Stack, stacks.Stack],
                   case: testcases.TestCase, names: list[str]) -> Endpoints:
    server_stack, client_stack = pair
    server_host, client_host = session.scenario.server, session.scenario.client
    server_address = session.lab.address(server_host)
    (dirs.root / "hosts").write_text(endpoint.hosts_file(server_address))
    certs = _certificates(session, server_address, case.cert_chain)
    base = {**os.environ, "PROTOLAB_NET": str(session.binary), "PROTOLAB_STACKS": str(stacks.stacks_dir()),
            "PROTOLAB_SERVER_ADDRESS": server_address, "PROTOLAB_PYTHON": sys.executable}
    common = {"/certs": certs, "/etc/hosts": dirs.root / "hosts"}
    server = _spawn(session, server_host, server_stack,
                    {"/www": dirs.www, "/logs": dirs.logs("server"), **common},
                    endpoint.environment(base, "server", case.server_testcase or case.endpoint_testcase),
                    dirs.root / "server.log")
    client: subprocess.Popen[bytes] | None = None
    schedule = links.LinkSchedule(case, sum((dirs.www / n).stat().st_size for n in names),
                                  {name: params.get("loss") for name, params in
                                   session.scenario.run_links(session.params, run.condition, run.link_seed).items()})
    capture = None
    link_config: dict[str, Any] = {}
    try:
        _await_listener(session, server_host, server, case.transport)
        link_config, capture = session.begin(run, run_dir)
        _apply(session, schedule.start(), run.link_seed)
        if not capture.pcap_hosts:
            for host in (client_host, server_host):
                session.lab.pcap_start(host, (run_dir / f"{host}.pcap").resolve())
                capture.pcap_hosts.append(host)
        client_env = endpoint.environment(base, "client", case.endpoint_testcase, endpoint.request_urls(names))
        client = _spawn(session, client_host, client_stack,
                        {"/downloads": dirs.downloads, "/logs": dirs.logs("client"), **common},
                        client_env, dirs.root / "client.log")
        client_status = _await_client(session, client, schedule, case.timeout_s)
        server_status = server.poll()
    finally:
        if client is not None:
            stop_group(client)
        stop_group(server)
        counters = session.end(capture) if capture is not None else None
    if schedule.events:
        (dirs.root / "links.log").write_text("\n".join(schedule.events) + "\n")
    return Endpoints(client_status, server_status, link_config, counters,
                     link_events_done=not schedule.active)


def _apply(session: LabSession, changes: list[links.LinkChange], seed: int | None) -> None:
    for change in changes:
        session.lab.set_link(change.link, seed=seed if change.reseed else None, loss=change.loss)


def _await_client(session: LabSession, client: subprocess.Popen[bytes], schedule: links.LinkSchedule,
                  timeout_s: float) -> int | None:
    """The client's exit status (None: timed out); meanwhile the case's link events, each applied
    as soon as the emulator's counters make it due."""
    deadline = time.monotonic() + timeout_s
    while schedule.active:
        status = client.poll()
        if status is not None:
            return status
        if time.monotonic() >= deadline:
            return None
        now = time.monotonic()
        _apply(session, schedule.step(session.lab.counters().get("links", {}), now), None)
        time.sleep(schedule.poll_s)
    try:
        return client.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return None


def _empty_metrics() -> dict[str, Any]:
    return {"handshakes": None, "quic_versions": None, "retries": None, "handshake_ms": None,
            "completion_ms": None, "goodput_mbps": None}


def _timing(row: dict[str, Any], sizes: list[int], files: testcases.FilesCheck, handshake: float | None,
            start: float | None, span: tuple[float, float] | None) -> None:
    """handshake_ms, completion_ms (from `start`, the client's first packet) and goodput_mbps
    (the files' bytes over the server's data `span`, every file intact)."""
    row["handshake_ms"] = handshake * 1e3 if handshake is not None else None
    if span is not None and start is not None:
        row["completion_ms"] = (span[1] - start) * 1e3
    if span is not None and span[1] > span[0] and files.ok:
        row["goodput_mbps"] = sum(sizes) * 8 / (span[1] - span[0]) / 1e6


def _metrics(sizes: list[int], files: testcases.FilesCheck, server_trace: list[trace.Datagram] | None,
             client_trace: list[trace.Datagram] | None, client: str, server: str) -> dict[str, Any]:
    row = _empty_metrics()
    if server_trace is not None:
        row["handshakes"] = trace.handshakes(server_trace, server)
        row["quic_versions"] = ",".join(sorted(hex(v) for v in trace.versions(server_trace, server))) or None
        row["retries"] = trace.retries(server_trace, server)
    if client_trace is not None:
        initials = [d.time_s for d in client_trace if d.src == client and any(p.kind == "initial" for p in d.packets)]
        _timing(row, sizes, files, trace.handshake_s(client_trace, client, server), min(initials, default=None),
                trace.one_rtt_span(client_trace, server))
    return row


def _tcp_metrics(sizes: list[int], files: testcases.FilesCheck, server_trace: list[tcp_trace.Segment] | None,
                 client_trace: list[tcp_trace.Segment] | None, client: str, server: str) -> dict[str, Any]:
    """As `_metrics` for a TCP case: handshakes are the server's TCP connections."""
    row = _empty_metrics()
    if server_trace is not None:
        row["handshakes"] = tcp_trace.connections(server_trace, server)
    if client_trace is not None:
        syns = [s.time_s for s in client_trace if s.src == client and s.syn and not s.ack]
        _timing(row, sizes, files, tcp_trace.handshake_s(client_trace, client, server), min(syns, default=None),
                tcp_trace.response_span(client_trace, server))
    return row


def _count_files(directory: Path) -> int:
    return sum(1 for p in directory.rglob("*") if p.is_file()) if directory.is_dir() else 0


def window_maxima(traces: list[QlogTrace]) -> dict[str, int | None]:
    """The largest congestion window and bytes in flight the traces' `recovery:metrics_updated`
    events give (a stack logs them as it likes: quic-go every change, aioquic none in a form read
    here); None where no event has the field."""
    maxima: dict[str, int | None] = {"max_cwnd_bytes": None, "max_bytes_in_flight": None}
    for column, key in (("max_cwnd_bytes", "congestion_window"), ("max_bytes_in_flight", "bytes_in_flight")):
        values = [int(e.data[key]) for t in traces for e in t.named("recovery:metrics_updated")
                  if isinstance(e.data.get(key), int | float) and not isinstance(e.data.get(key), bool)]
        maxima[column] = max(values) if values else None
    return maxima


def read_qlogs(directory: Path) -> list[QlogTrace]:
    """The qlog traces of an endpoint's QLOGDIR that protolab's reader takes (qlog 0.3/0.4,
    JSON-SEQ or lines), each up to its last whole record (the server is stopped when the client
    is done, often before it flushed); a file in another format is left out (the stack's choice)."""
    traces = []
    for path in sorted(directory.rglob("*")) if directory.is_dir() else ():
        if path.is_file() and path.suffix in (".qlog", ".sqlog"):
            with contextlib.suppress(QlogError):
                traces.append(read_qlog(path, truncated_tail=True))
    return traces


def run_interop(session: LabSession, run: PlannedRun, run_dir: Path, case: testcases.TestCase | None = None) -> RunRecord:
    """One interop run; `case` is the condition's `testcase` axis unless a scenario gives its own
    (the quic-vs-tcp-stacks download)."""
    case = case or testcases.check_testcase(str(run.condition.extra("testcase")))
    server_name, client_name = stacks.parse_pair(run.mode)
    extra = spec_stacks(session.params)
    pair = (stacks.lookup(server_name, extra), stacks.lookup(client_name, extra))
    record = RunRecord(run.key, dict(run.params))
    row: dict[str, Any] = {"testcase": case.name, "server": server_name, "client": client_name,
                           "server_version": pair[0].version(), "client_version": pair[1].version()}
    try:
        pair[0].require("server")
        pair[1].require("client")
    except stacks.StackError as exc:
        record.error = str(exc)
        record.interop = [{**row, "verdict": "failed", "reason": str(exc)}]
        return record
    dirs = InteropDirs((run_dir / "interop").resolve())
    dirs.create()
    sizes = file_sizes(case, session.params)
    try:
        names = write_files(dirs.www, sizes, derived_seed(run.link_seed, "interop-files", run.key), case.name_length)
        ran = _run_endpoints(session, run, run_dir, dirs, pair, case, names)
        files = testcases.compare_files(dirs.www, dirs.downloads, names)
    finally:
        dirs.remove_files()
    record.link_config, record.link_counters = ran.link_config, ran.counters
    client, server = (session.lab.address(session.scenario.client), session.lab.address(session.scenario.server))
    pcaps = (run_dir / f"{session.scenario.server}.pcap", run_dir / f"{session.scenario.client}.pcap")
    if case.transport == "tcp":
        server_segments, client_segments = read_tcp_trace(pcaps[0]), read_tcp_trace(pcaps[1])
        metrics = _tcp_metrics(sizes, files, server_segments, client_segments, client, server)
        server_trace, keylog = None, None
    else:
        keylog = _keylog(dirs) if case.key_update or case.amplification_limit else None
        server_trace = read_trace(pcaps[0], keylog)
        metrics = _metrics(sizes, files, server_trace, read_trace(pcaps[1]), client, server)
    if not session.experiment.spec.artifacts.pcap:
        for pcap in pcaps:
            pcap.unlink(missing_ok=True)
    verdict = testcases.judge(case, ran.client_status, ran.server_status, files, server_trace, server,
                              metrics["handshakes"] if case.transport == "tcp" else None, keylog is not None)
    if verdict.result == "succeeded" and not ran.link_events_done:
        verdict = testcases.Verdict("failed", "the client ended before the case's link events all happened "
                                              "(interop/links.log)")
    keylogs = [dirs.logs(role) / "keys.log" for role in ("server", "client")]
    qlogs = _count_files(dirs.logs("server") / "qlog") + _count_files(dirs.logs("client") / "qlog")
    row.update(verdict=verdict.result, reason=verdict.reason, files=len(names), files_intact=files.intact,
               bytes=sum(sizes), client_status=ran.client_status, server_status=ran.server_status,
               keylog=any(p.exists() and p.stat().st_size > 0 for p in keylogs), qlogs=qlogs or None,
               **metrics,
               **window_maxima(read_qlogs(dirs.logs("server") / "qlog")))
    record.interop = [row]
    record.status = ("ok" if verdict.result == "succeeded"
                     else "timeout" if ran.client_status is None and verdict.result == "failed" else "failed")
    record.error = None if verdict.result == "succeeded" else f"{verdict.result}: {verdict.reason}"
    return record
