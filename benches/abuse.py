"""Abuse, measured (issue 23; docs/live.md, "Abuse"): the live service (`protolab serve-live`)
and the measurement server (`protolab-net serve`) on loopback under hostile clients.

Run: .venv/bin/python benches/abuse.py [--out abuse.json] [--quick] [--binary PATH]

Both servers run as child processes on 127.0.0.1 (nothing leaves the machine); every attack
is a bounded loop from 127.0.0.1 (the distributed token guessing from 127.0.0.10-59), and a
legitimate client on 127.0.0.2 keeps asking during each attack. Per attack: what the server
answered (the limit that held), the server process's peak RSS, threads and CPU seconds per
second (sampled from /proc by psutil every 50 ms) against an unattacked baseline window of the
same length measured first in the same invocation, how many legitimate requests succeeded,
and, for the service, that every result stored before and during the attacks is still stored
byte for byte afterwards.

The attacks: HTTP/2 rapid reset (HEADERS + RST_STREAM) and CONTINUATION floods, oversized
request heads (HTTP/1.1 and HTTP/2), slow heads (slowloris) on cleartext and TLS, QUIC
handshake floods (valid Initials from aioquic that are never continued), the anti-amplification
limit (bytes the server sends to an unvalidated address against bytes it received, RFC 9000
§8.1), garbage and unknown-version Initials; on the service: slowloris, token guessing from
one and from many addresses, oversized and malformed result uploads. HTTP/2 frames come from
`h2`/`hyperframe`, QUIC Initials from `aioquic` (dev dependencies, imported only to run).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import queue
import secrets
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

REPO_ROOT = Path(__file__).resolve().parents[1]
ATTACKER = "127.0.0.1"
LEGIT = "127.0.0.2"
PROBE = "127.0.0.3"  # the anti-amplification probe's own address (its replies are not the flood's)
MIB = 1 << 20

app = typer.Typer(add_completion=False)


# -- the servers ---------------------------------------------------------------------------


@dataclass
class Target:
    """A server under test: its process and where it listens."""

    name: str
    process: subprocess.Popen[bytes]
    addrs: dict[str, tuple[str, int]]
    data_dir: Path | None = None


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def start_serve(binary: Path, work: Path) -> Target:
    """`protolab-net serve` with its default limits on free loopback ports, but for the live
    service's 10 s handshake and 30 s send timeouts (the lab's defaults are nginx's 60 s)."""
    cmd = [str(binary), "serve", "--listen", ATTACKER, "--http-port", "0", "--https-port", "0",
           "--raw-port", "off", "--tls-dir", str(work / "tls"), "--handshake-timeout-ms", "10000",
           "--send-timeout-ms", "30000", "--strict-send-timeout"]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=(work / "serve.log").open("wb"))
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"protolab-net serve did not start: {(work / 'serve.log').read_text()[-2000:]}")
    listening = json.loads(line)
    addrs = {kind: _host_port(listening[kind][0]) for kind in ("http", "https", "h3")}
    return Target("protolab-net serve", process, addrs)


def start_live(work: Path) -> Target:
    """`protolab serve-live` with its default limits (rate 2/s burst 40 per address, 30 tests an
    hour, 64 in flight, 1 MiB uploads) on a free loopback port."""
    data = work / "live-data"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "protolab", "serve-live", "--listen", f"{ATTACKER}:0", "--data", str(data)]
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        # Its log goes on (one line a request): copied to a file so that the pipe never fills up.
        assert process.stderr is not None
        with (work / "serve-live.log").open("wb") as log:
            for raw in process.stderr:
                log.write(raw)
                lines.put(raw.decode(errors="replace"))

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + 300  # a loaded machine takes a while to import the service
    while (left := deadline - time.monotonic()) > 0 and process.poll() is None:
        with contextlib.suppress(queue.Empty):
            line = lines.get(timeout=min(left, 1.0))
            if "listening on http://" in line:
                url = line.split("listening on ", 1)[1].split()[0].rstrip(",")
                return Target("protolab serve-live", process, {"api": _host_port(url.removeprefix("http://"))}, data)
    process.kill()
    raise RuntimeError("protolab serve-live did not start")


def stop(target: Target) -> None:
    target.process.terminate()
    try:
        target.process.wait(15)
    except subprocess.TimeoutExpired:
        target.process.kill()
        target.process.wait()


# -- measuring the server process ----------------------------------------------------------


class Monitor:
    """Samples a process's RSS, CPU time, threads and open files every 50 ms."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.process = psutil.Process(pid)
        self.samples: list[tuple[float, int, float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self.process.oneshot():
                    cpu = self.process.cpu_times()
                    self.samples.append((time.monotonic(), self.process.memory_info().rss, cpu.user + cpu.system,
                                         self.process.num_threads(), self.process.num_fds()))
            except Exception:  # noqa: BLE001 - the process ended: nothing more to sample
                return
            self._stop.wait(0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

    def window(self, start: float, end: float) -> dict[str, float]:
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return {}
        cpu = (inside[-1][2] - inside[0][2]) / max(inside[-1][0] - inside[0][0], 1e-9)
        return {"peak_rss_mib": max(s[1] for s in inside) / MIB, "cpu_s_per_s": cpu,
                "peak_threads": max(s[3] for s in inside), "peak_fds": max(s[4] for s in inside),
                "end_rss_mib": inside[-1][1] / MIB}


# -- legitimate clients --------------------------------------------------------------------


def _insecure_tls(alpn: list[str]) -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the server's own lab CA; nothing to verify on loopback
    context.set_alpn_protocols(alpn)
    return context


def legit_h1(target: Target) -> bool:
    """GET /bytes?n=1000 over cleartext HTTP/1.1 and over TLS from the legitimate address."""
    ok = True
    for kind in ("http", "https"):
        host, port = target.addrs[kind]
        conn: http.client.HTTPConnection
        if kind == "http":
            conn = http.client.HTTPConnection(host, port, timeout=5, source_address=(LEGIT, 0))
        else:
            conn = http.client.HTTPSConnection(host, port, timeout=5, source_address=(LEGIT, 0),
                                               context=_insecure_tls(["http/1.1"]))
        try:
            conn.request("GET", "/bytes?n=1000")
            response = conn.getresponse()
            ok &= response.status == 200 and len(response.read()) == 1000
        except OSError:
            ok = False
        finally:
            conn.close()
    return ok


def legit_h3(target: Target) -> bool:
    """GET /bytes?n=1000 over HTTP/3 (aioquic, which follows a Retry) from the legitimate address."""
    try:
        return asyncio.run(asyncio.wait_for(_h3_get(target.addrs["h3"], "/bytes?n=1000"), 8)) == (200, 1000)
    except (OSError, asyncio.TimeoutError, ConnectionError):
        return False


async def _h3_get(addr: tuple[str, int], path: str) -> tuple[int, int]:
    from aioquic.asyncio.client import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration

    class Client(QuicConnectionProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.h3 = H3Connection(self._quic)
            self.status = 0
            self.received = 0
            self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def quic_event_received(self, event: Any) -> None:
            for e in self.h3.handle_event(event):
                if isinstance(e, HeadersReceived):
                    self.status = int(dict(e.headers).get(b":status", b"0"))
                elif isinstance(e, DataReceived):
                    self.received += len(e.data)
                if isinstance(e, (HeadersReceived, DataReceived)) and e.stream_ended and not self.done.done():
                    self.done.set_result(None)

    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE, server_name="localhost")
    async with connect(addr[0], addr[1], configuration=config, create_protocol=Client, local_port=0,
                       wait_connected=True) as client:
        assert isinstance(client, Client)
        stream = client._quic.get_next_available_stream_id()
        client.h3.send_headers(stream, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"localhost"),
                                        (b":path", path.encode())], end_stream=True)
        client.transmit()
        await client.done
        return client.status, client.received


def _api(target: Target, method: str, path: str, body: bytes | None = None, source: str = LEGIT,
         timeout: float = 10) -> tuple[int, dict[str, Any]]:
    host, port = target.addrs["api"]
    conn = http.client.HTTPConnection(host, port, timeout=timeout, source_address=(source, 0))
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body is not None else {})
        response = conn.getresponse()
        raw = response.read()
        try:
            return response.status, json.loads(raw) if raw else {}
        except ValueError:
            return response.status, {"raw": raw[:200].decode(errors="replace")}
    finally:
        conn.close()


def result_body(note: str) -> bytes:
    """A valid result upload (the schema the CLI's RPM test sends), unique per test."""
    return json.dumps({"schema": "protolab.rpm", "schema_version": 1, "protocol": "h2",
                       "note": note, "nonce": secrets.token_hex(16)}).encode()


@dataclass
class Ledger:
    """The results the service answered 200 for: token -> the exact bytes uploaded."""

    stored: dict[str, bytes] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def legit_test(target: Target, ledger: Ledger, note: str, source: str = LEGIT) -> bool:
    """A whole test from the legitimate client: a token, then its upload (retried while busy)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            status, answer = _api(target, "POST", "/api/token", json.dumps({"client": "abuse-bench"}).encode(), source)
        except OSError:
            return False
        if status == 200 or time.monotonic() > deadline or status not in (409, 429, 503):
            break
        time.sleep(min(float(answer.get("retry_after_s", 1)), 2))
    if status != 200:
        return False
    body = result_body(note)
    try:
        status, _ = _api(target, "POST", f"/api/result/{answer['token']}", body, source)
    except OSError:
        return False
    if status == 200:
        with ledger.lock:
            ledger.stored[answer["token"]] = body
    return status == 200


def legit_live(target: Target) -> bool:
    try:
        return _api(target, "GET", "/api/status")[0] == 200
    except OSError:
        return False


def check_store(target: Target, ledger: Ledger) -> dict[str, Any]:
    """Every answered upload is stored byte for byte, indexed, and nothing else appeared."""
    assert target.data_dir is not None
    tests = target.data_dir / "tests"
    lost = [t for t, body in ledger.stored.items()
            if not (tests / t / "result.json").is_file() or (tests / t / "result.json").read_bytes() != body]
    unreadable = [t for t in ledger.stored if _api(target, "GET", f"/api/tests/{t}", source="127.0.0.4")[0] != 200]
    on_disk = sorted(p.name for p in tests.iterdir()) if tests.is_dir() else []
    extra = [name for name in on_disk if name not in ledger.stored]
    status = _api(target, "GET", "/api/status", source="127.0.0.4")[1]
    return {"answered_uploads": len(ledger.stored), "lost_or_changed": lost, "not_served": unreadable,
            "unexpected_entries": extra, "status_tests": status.get("tests"),
            "intact": not lost and not unreadable and not extra and status.get("tests") == len(ledger.stored)}


# -- attacks on protolab-net serve ---------------------------------------------------------


def _h2_socket(target: Target, timeout: float = 5) -> ssl.SSLSocket:
    raw = socket.create_connection(target.addrs["https"], timeout=timeout, source_address=(ATTACKER, 0))
    tls = _insecure_tls(["h2"]).wrap_socket(raw, server_hostname="localhost")
    if tls.selected_alpn_protocol() != "h2":
        raise RuntimeError("the server did not choose h2")
    return tls


def _h2_client() -> Any:
    import h2.config
    import h2.connection

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    return conn


def _h2_poll(sock: ssl.SSLSocket, conn: Any) -> tuple[bool, int | None]:
    """Reads what the server sent so far: (connection still open, GOAWAY error code if any)."""
    import h2.events
    import h2.exceptions

    sock.setblocking(False)
    code = None
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return False, code
            try:
                events = conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                return False, code
            for event in events:
                if isinstance(event, h2.events.ConnectionTerminated):
                    code = int(event.error_code)
    except (ssl.SSLWantReadError, BlockingIOError):
        return True, code
    except OSError:
        return False, code
    finally:
        sock.setblocking(True)


def _goaway_name(code: int | None) -> str | None:
    if code is None:
        return None
    import h2.errors

    try:
        return h2.errors.ErrorCodes(code).name
    except ValueError:
        return str(code)


REQUEST = [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/bytes?n=100000")]


def rapid_reset(target: Target, until: float, max_streams: int) -> dict[str, Any]:
    """HEADERS + RST_STREAM as fast as the client can, on new connections while time is left."""
    streams_per_connection: list[int] = []
    codes: Counter[str] = Counter()
    while time.monotonic() < until and len(streams_per_connection) < 200:
        conn, sock = _h2_client(), _h2_socket(target)
        sent, open_, code = 0, True, None
        try:
            sock.sendall(conn.data_to_send())
            while open_ and code is None and sent < max_streams and time.monotonic() < until:
                for _ in range(50):
                    stream = conn.get_next_available_stream_id()
                    conn.send_headers(stream, REQUEST, end_stream=True)
                    conn.reset_stream(stream)
                    sent += 1
                sock.sendall(conn.data_to_send())
                open_, code = _h2_poll(sock, conn)
        except OSError:
            open_ = False
        except Exception:  # noqa: BLE001 - h2 refuses to send after the server's GOAWAY
            open_, code = _h2_poll(sock, conn)[0], code
        finally:
            sock.close()
        streams_per_connection.append(sent)
        codes[_goaway_name(code) or ("closed" if not open_ else "open at the end")] += 1
    return {"connections": len(streams_per_connection), "streams": sum(streams_per_connection),
            "max_streams_per_connection": max(streams_per_connection, default=0), "ends": dict(codes)}


def continuation_flood(target: Target, until: float, max_bytes: int) -> dict[str, Any]:
    """HEADERS without END_HEADERS, then CONTINUATION frames of fresh literal headers, endlessly."""
    import hpack
    from hyperframe.frame import ContinuationFrame, HeadersFrame

    per_connection: list[int] = []
    codes: Counter[str] = Counter()
    while time.monotonic() < until and len(per_connection) < 100:
        conn, sock, encoder = _h2_client(), _h2_socket(target), hpack.Encoder()
        sent, open_, code = 0, True, None
        try:
            sock.sendall(conn.data_to_send())
            sock.sendall(HeadersFrame(1, data=encoder.encode(REQUEST)).serialize())
            index = 0
            while open_ and code is None and sent < max_bytes and time.monotonic() < until:
                chunk = b"".join(ContinuationFrame(1, data=encoder.encode([(f"x-flood-{index + i}", "a" * 1000)])).serialize()
                                 for i in range(16))
                index += 16
                sock.sendall(chunk)
                sent += len(chunk)
                open_, code = _h2_poll(sock, conn)
        except OSError:
            open_ = False
        finally:
            sock.close()
        per_connection.append(sent)
        codes[_goaway_name(code) or ("closed" if not open_ else "open at the end")] += 1
    return {"connections": len(per_connection), "max_bytes_accepted_per_connection": max(per_connection, default=0),
            "ends": dict(codes)}


def oversized_heads(target: Target, until: float) -> dict[str, Any]:
    """64 KiB request heads over HTTP/1.1 (one header) and HTTP/2 (a header list), repeatedly."""
    h1: Counter[str] = Counter()
    h2_: Counter[str] = Counter()
    big = "a" * (64 * 1024)
    while time.monotonic() < until and sum(h1.values()) < 2000:
        conn = http.client.HTTPConnection(*target.addrs["http"], timeout=5, source_address=(ATTACKER, 0))
        try:
            conn.request("GET", "/empty", headers={"X-Big": big})
            h1[str(conn.getresponse().status)] += 1
        except OSError as exc:
            h1[type(exc).__name__] += 1
        finally:
            conn.close()
        h2_[_h2_big_request(target, big)] += 1
    return {"h1": dict(h1), "h2": dict(h2_)}


def _h2_big_request(target: Target, big: str) -> str:
    import h2.events

    conn, sock = _h2_client(), _h2_socket(target)
    try:
        sock.sendall(conn.data_to_send())
        conn.send_headers(1, [*REQUEST[:3], (":path", "/empty"), ("x-big", big)], end_stream=True)
        sock.sendall(conn.data_to_send())
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                return "closed"
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    return dict(event.headers).get(":status", "?")
                if isinstance(event, h2.events.StreamReset):
                    return f"RST_STREAM {_goaway_name(int(event.error_code))}"
                if isinstance(event, h2.events.ConnectionTerminated):
                    return f"GOAWAY {_goaway_name(int(event.error_code))}"
            sock.sendall(conn.data_to_send())
        return "no answer"
    except Exception as exc:  # noqa: BLE001 - whatever the server did, it is the observation
        return type(exc).__name__
    finally:
        sock.close()


def slowloris(addr: tuple[str, int], until: float, connections: int, tls: bool, every_s: float = 1.0,
              source: str = ATTACKER) -> dict[str, Any]:
    """`connections` clients that send a request head (or a TLS ClientHello's bytes) one byte a
    `every_s`: how many the server closed and after how long."""
    socks: list[tuple[socket.socket, float]] = []
    refused = 0
    for _ in range(connections):
        try:
            s = socket.create_connection(addr, timeout=2, source_address=(source, 0))
        except OSError:
            refused += 1
            continue
        s.setblocking(False)
        socks.append((s, time.monotonic()))
    head = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 2000 if tls else b"GET / HTTP/1.1\r\nHost: localhost\r\n" + b"X-Slow: a\r\n" * 1000
    closed_after: list[float] = []
    position = 0
    while socks and time.monotonic() < until:
        still: list[tuple[socket.socket, float]] = []
        for s, opened in socks:
            try:
                if s.recv(4096) == b"":
                    raise ConnectionResetError
            except (BlockingIOError, ssl.SSLWantReadError):
                pass
            except OSError:
                closed_after.append(time.monotonic() - opened)
                s.close()
                continue
            try:
                s.send(head[position % len(head):position % len(head) + 1])
                still.append((s, opened))
            except BlockingIOError:
                still.append((s, opened))
            except OSError:
                closed_after.append(time.monotonic() - opened)
                s.close()
        socks, position = still, position + 1
        time.sleep(every_s)
    for s, _ in socks:
        s.close()
    closed_after.sort()
    return {"connections": connections, "refused_at_connect": refused, "closed_by_server": len(closed_after),
            "still_open_at_end": len(socks),
            "closed_after_s": {"min": round(closed_after[0], 1), "median": round(closed_after[len(closed_after) // 2], 1),
                               "max": round(closed_after[-1], 1)} if closed_after else None}


# -- QUIC ----------------------------------------------------------------------------------


def client_initials(addr: tuple[str, int], count: int) -> list[list[bytes]]:
    """`count` first flights of fresh aioquic client connections (each its own connection ID)."""
    from aioquic.h3.connection import H3_ALPN
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.connection import QuicConnection

    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE, server_name="localhost")
    flights = []
    for _ in range(count):
        conn = QuicConnection(configuration=config)
        now = time.time()
        conn.connect(addr, now=now)
        flights.append([data for data, _ in conn.datagrams_to_send(now=now)])
    return flights


def amplification(target: Target, listen_s: float = 3.0) -> dict[str, Any]:
    """One client Initial from an address that never answers: every byte the server sends back
    (its first flight and retransmissions) against the bytes it received."""
    results = {}
    garbage_version = b"\xc0" + b"\x1a\x2a\x3a\x4a" + b"\x08" + os.urandom(8) + b"\x08" + os.urandom(8) + os.urandom(1180)
    cases = {"initial": client_initials(target.addrs["h3"], 1)[0], "unknown_version": [garbage_version],
             "garbage_initial": [b"\xc0\x00\x00\x00\x01\x08" + os.urandom(1194)], "random_bytes": [os.urandom(1200)]}
    for name, flight in cases.items():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind((PROBE, 0))
            sent = sum(sock.sendto(d, target.addrs["h3"]) for d in flight)
            received, datagrams, deadline = 0, 0, time.monotonic() + listen_s
            while (left := deadline - time.monotonic()) > 0:
                sock.settimeout(left)
                try:
                    received += len(sock.recv(65536))
                    datagrams += 1
                except TimeoutError:
                    break
        results[name] = {"sent": sent, "received": received, "datagrams": datagrams, "ratio": round(received / sent, 3)}
    return results


def handshake_flood(target: Target, until: float, flights: list[list[bytes]]) -> dict[str, Any]:
    """Sends every pre-built Initial flight once (spread over the attack window) and never
    continues: counts the server's answers and their bytes."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((ATTACKER, 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * MIB)
    counts = {"received": 0, "datagrams": 0, "retry": 0}
    done = threading.Event()

    def receive() -> None:
        sock.settimeout(0.2)
        while not done.is_set():
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            counts["received"] += len(data)
            counts["datagrams"] += 1
            # Long header, type 3 (Retry) in QUIC v1; the fixed bit 0x40 may be greased (RFC 9287).
            counts["retry"] += (data[0] & 0xB0) == 0xB0

    receiver = threading.Thread(target=receive, daemon=True)
    receiver.start()
    sent, start = 0, time.monotonic()
    span = max(until - start - 2.0, 0.5)  # the last 2 s let the answers and the timeouts play out
    for i, flight in enumerate(flights):
        pause = start + span * i / len(flights) - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        sent += sum(sock.sendto(d, target.addrs["h3"]) for d in flight)
    time.sleep(max(0.0, until - time.monotonic()))
    done.set()
    receiver.join()
    sock.close()
    return {"initials": len(flights), "sent_bytes": sent, "received_bytes": counts["received"],
            "answers": counts["datagrams"], "retry_packets": counts["retry"],
            "ratio": round(counts["received"] / max(sent, 1), 3)}


def garbage_flood(target: Target, until: float, max_datagrams: int) -> dict[str, Any]:
    """Random 1200-byte datagrams with a QUIC v1 long header (undecryptable Initials)."""
    sent = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((ATTACKER, 0))
        while sent < max_datagrams and time.monotonic() < until:
            for _ in range(100):
                sock.sendto(b"\xc3\x00\x00\x00\x01\x08" + os.urandom(1194), target.addrs["h3"])
            sent += 100
            time.sleep(0.002)
    return {"datagrams": sent}


# -- attacks on the live service -----------------------------------------------------------


def token_guessing(target: Target, until: float, sources: list[str], max_guesses: int) -> dict[str, Any]:
    """Uploads to random tokens of the right shape, as fast as one client goes, round-robin
    over `sources`: what the service answered."""
    answers: Counter[str] = Counter()
    guesses = 0
    body = result_body("guess")
    while time.monotonic() < until and guesses < max_guesses:
        source = sources[guesses % len(sources)]
        try:
            status, answer = _api(target, "POST", f"/api/result/{secrets.token_urlsafe(32)}", body, source, timeout=5)
            answers[f"{status} {answer.get('error')}"] += 1
        except OSError as exc:
            answers[type(exc).__name__] += 1
        guesses += 1
    return {"guesses": guesses, "addresses": len(sources), "answers": dict(answers),
            "found": sum(n for k, n in answers.items() if k.startswith("200"))}


def _attacker_token(target: Target, source: str) -> str | None:
    """A token held by the attacker (it holds the service's lock until the attacker releases it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, answer = _api(target, "POST", "/api/token", b"{}", source)
        if status == 200:
            return str(answer["token"])
        time.sleep(min(float(answer.get("retry_after_s", 1)), 2))
    return None


def _raw_upload(target: Target, token: str, declared: int, send: int, source: str) -> str:
    """An upload announcing `declared` bytes and sending `send` of them (zeros)."""
    # Long enough for the service's 30 s body timeout to answer a body that never arrives.
    with socket.create_connection(target.addrs["api"], timeout=45, source_address=(source, 0)) as s:
        s.sendall(f"POST /api/result/{token} HTTP/1.1\r\nHost: x\r\nContent-Length: {declared}\r\n\r\n".encode())
        chunk = b"0" * MIB
        left = send
        try:
            while left > 0:
                left -= s.send(chunk[:min(left, MIB)])
        except OSError:
            pass
        try:
            reply = s.recv(4096).decode(errors="replace")
        except OSError as exc:
            return type(exc).__name__
    line = reply.split("\r\n", 1)[0]
    error = reply.rsplit("\r\n\r\n", 1)[-1]
    with contextlib.suppress(ValueError):
        return f"{line.split(' ', 2)[1]} {json.loads(error).get('error')}"
    return line or "closed"


MALFORMED: dict[str, bytes] = {
    "not utf-8": b'{"schema": "\xff\xfe"}',
    "not json": b"{schema: protolab.rpm}",
    "NaN": b'{"schema": "protolab.rpm", "schema_version": 1, "x": NaN}',
    "nested 100k deep": b"[" * 100_000 + b"]" * 100_000,
    "a 100k-digit number": b'{"schema": "protolab.rpm", "schema_version": 1, "x": ' + b"9" * 100_000 + b"}",
    "an array": b"[1, 2, 3]",
    "no schema": b'{"schema_version": 1}',
    "unknown schema": b'{"schema": "evil", "schema_version": 1}',
    "version a string": b'{"schema": "protolab.rpm", "schema_version": "1"}',
    "duplicate keys": b'{"schema": "protolab.rpm", "schema": "evil", "schema_version": 1}',
}


def bad_uploads(target: Target, ledger: Ledger, until: float, source: str) -> dict[str, Any]:
    """Oversized and malformed uploads with a real token, then the token's good upload."""
    token = _attacker_token(target, source)
    if token is None:
        return {"error": "no token"}
    oversized = {
        "1 MiB + 1 announced and sent": _raw_upload(target, token, MIB + 1, MIB + 1, source),
        "64 MiB announced and sent": _raw_upload(target, token, 64 * MIB, 64 * MIB, source),
        "10 GB announced, 80 MiB sent": _raw_upload(target, token, 10**10, 80 * MIB, source),
        "1000 announced, 10 sent": _raw_upload(target, token, 1000, 10, source),
    }
    malformed = {}
    for name, body in MALFORMED.items():
        status, answer = _api(target, "POST", f"/api/result/{token}", body, source)
        malformed[name] = f"{status} {answer.get('error')}: {str(answer.get('message'))[:90]}"
        time.sleep(0.5)  # within the per-address rate (2/s)
    time.sleep(max(0.0, until - time.monotonic()))
    body = result_body("after the bad uploads")
    status, _ = _api(target, "POST", f"/api/result/{token}", body, source)
    if status == 200:
        with ledger.lock:
            ledger.stored[token] = body
    return {"oversized": oversized, "malformed": malformed, "token_still_uploads": status == 200}


# -- the run -------------------------------------------------------------------------------


@dataclass
class Attack:
    name: str
    target: str
    limit: str
    run: Callable[[float], dict[str, Any]]
    duration_s: float


def measured(monitor: Monitor, legit: Callable[[], bool], attack: Callable[[float], dict[str, Any]] | None,
             duration_s: float, legit_every_s: float = 0.5) -> dict[str, Any]:
    """Runs `attack(until)` in a thread while the legitimate client asks every `legit_every_s`."""
    start = time.monotonic()
    until = start + duration_s
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome.update(attack(until) if attack else {})
        except Exception as exc:  # noqa: BLE001 - a failed attack is reported, not fatal
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    legit_ok = legit_n = 0
    while time.monotonic() < until or thread.is_alive():
        legit_ok += legit()
        legit_n += 1
        time.sleep(legit_every_s)
        if time.monotonic() > until + 120:  # an attack loop that did not stop: report, go on
            outcome["error"] = "the attack did not end"
            break
    end = time.monotonic()
    return {"observed": outcome, "legit": {"ok": legit_ok, "of": legit_n}, "server": monitor.window(start, end),
            "wall_s": round(end - start, 1)}


def _ratios(row: dict[str, Any], baseline: dict[str, Any]) -> None:
    server, base = row.get("server", {}), baseline.get("server", {})
    if server and base:
        row["rss_x_baseline"] = round(server["peak_rss_mib"] / base["peak_rss_mib"], 2)
        row["cpu_x_baseline"] = round(server["cpu_s_per_s"] / max(base["cpu_s_per_s"], 1e-3), 1)


def serve_attacks(target: Target, quick: bool) -> list[Attack]:
    scale = 0.25 if quick else 1.0
    flights = client_initials(target.addrs["h3"], int(6000 * scale))
    return [
        Attack("HTTP/2 rapid reset", target.name, "hyper max_pending_accept_reset_streams=20 (GOAWAY)",
               lambda until: rapid_reset(target, until, 100_000), 6),
        Attack("HTTP/2 CONTINUATION flood", target.name, "h2 max_header_list_size 32 KiB (--max-header-bytes)",
               lambda until: continuation_flood(target, until, 16 * MIB), 6),
        Attack("oversized request heads (64 KiB)", target.name, "--max-header-bytes 32 KiB (431 / h2 header list)",
               lambda until: oversized_heads(target, until), 5),
        Attack("slowloris, cleartext HTTP/1.1", target.name, "header_read_timeout 10 s",
               lambda until: slowloris(target.addrs["http"], until, int(800 * scale), tls=False), 14),
        Attack("slowloris, TLS handshake", target.name, "TLS handshake timeout 10 s",
               lambda until: slowloris(target.addrs["https"], until, int(800 * scale), tls=True), 14),
        Attack(f"QUIC handshake flood ({len(flights)} Initials)", target.name, "--quic-handshakes-before-retry 64 (Retry)",
               lambda until: handshake_flood(target, until, flights), 10),
        Attack("QUIC garbage Initials", target.name, "undecryptable packets dropped",
               lambda until: garbage_flood(target, until, int(200_000 * scale)), 5),
    ]


def live_attacks(target: Target, ledger: Ledger, quick: bool) -> list[Attack]:
    scale = 0.25 if quick else 1.0
    many = [f"127.0.0.{i}" for i in range(10, 60)]
    return [
        Attack("slowloris on the API", target.name, "--max-connections-per-address 16 (503), --head-timeout-s 10",
               lambda until: slowloris(target.addrs["api"], until, int(800 * scale), tls=False), 14),
        Attack("token guessing, one address", target.name, "--rate-per-address 2 --burst-per-address 40 (429)",
               lambda until: token_guessing(target, until, [ATTACKER], 5000), 6),
        Attack("token guessing, 50 addresses", target.name, "256-bit tokens; per-address buckets",
               lambda until: token_guessing(target, until, many, 5000), 6),
        Attack("oversized and malformed uploads", target.name, "--max-upload-bytes 1 MiB (413), checks (400)",
               lambda until: bad_uploads(target, ledger, until, "127.0.0.5"), 8),
    ]


def run_target(target: Target, attacks: Callable[[], list[Attack]], legit: Callable[[], bool],
               baseline_s: float) -> list[dict[str, Any]]:
    monitor = Monitor(target.process.pid)
    try:
        time.sleep(0.5)
        baseline = measured(monitor, legit, None, baseline_s)
        rows = [{"target": target.name, "attack": "baseline (legitimate requests only)", "limit": "", **baseline}]
        for attack in attacks():
            print(f"{target.name}: {attack.name} ...", file=sys.stderr, flush=True)
            row = {"target": attack.target, "attack": attack.name, "limit": attack.limit,
                   **measured(monitor, legit, attack.run, attack.duration_s)}
            _ratios(row, baseline)
            row["alive_after"] = target.process.poll() is None and legit()
            rows.append(row)
            time.sleep(1)
        return rows
    finally:
        monitor.close()


def serve_rows(binary: Path, work: Path, quick: bool) -> list[dict[str, Any]]:
    target = start_serve(binary, work)
    try:
        rows = run_target(target, lambda: serve_attacks(target, quick), lambda: legit_h1(target) and legit_h3(target), 5)
        rows.append({"target": target.name, "attack": "anti-amplification (one Initial, 3 s of answers)",
                     "limit": "RFC 9000 §8.1: at most 3x the bytes received before validation",
                     "observed": amplification(target)})
        return rows
    finally:
        stop(target)


def live_rows(work: Path, quick: bool) -> list[dict[str, Any]]:
    target = start_live(work)
    ledger = Ledger()
    try:
        for i in range(3):  # results stored before the attacks
            if not legit_test(target, ledger, f"before {i}"):
                raise RuntimeError("the service did not store a legitimate test before the attacks")
        tests_during = iter(range(10**6))

        def legit() -> bool:
            # A status request every time, a whole test (token and upload) every fourth.
            ok = legit_live(target)
            if next(tests_during) % 4 == 0:
                ok &= legit_test(target, ledger, "during")
            return ok

        rows = run_target(target, lambda: live_attacks(target, ledger, quick), legit, 6)
        rows.append({"target": target.name, "attack": "store after the attacks", "limit": "", "observed": check_store(target, ledger)})
        return rows
    finally:
        stop(target)


def _cell(row: dict[str, Any]) -> list[str]:
    server = row.get("server", {})
    legit = row.get("legit")
    return [row["target"].split()[-1], row["attack"], row.get("limit", ""),
            f"{server['peak_rss_mib']:.0f} ({row.get('rss_x_baseline', 1.0)}x)" if server else "",
            f"{server['cpu_s_per_s']:.2f} ({row.get('cpu_x_baseline', 1.0)}x)" if server else "",
            str(server.get("peak_threads", "")), f"{legit['ok']}/{legit['of']}" if legit else ""]


def print_table(rows: list[dict[str, Any]]) -> None:
    header = ["server", "attack", "limit", "peak RSS MiB", "CPU s/s", "threads", "legit ok"]
    cells = [header] + [_cell(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)))
    for r in rows:
        print(f"\n{r['target']} / {r['attack']}: {json.dumps(r.get('observed', {}))}")


@app.command()
def main(
    out: Annotated[Path, typer.Option("--out", help="Where the JSON goes.")] = Path("abuse.json"),
    binary: Annotated[Path | None, typer.Option("--binary", help="protolab-net (default: $PROTOLAB_NET, the release build, PATH).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A quarter of the connections and packets.")] = False,
    only: Annotated[str, typer.Option("--only", help="serve, live or both.")] = "both",
) -> None:
    """Attack `protolab-net serve` and `protolab serve-live` on loopback; print a table, write JSON."""
    from protolab.lab import find_binary

    binary = find_binary(binary) if only in ("serve", "both") else binary
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="abuse-") as tmp:
        work = Path(tmp)
        if only in ("serve", "both"):
            rows += serve_rows(binary, work, quick)
        if only in ("live", "both"):
            rows += live_rows(work, quick)
    print_table(rows)
    out.write_text(json.dumps({"schema": "protolab.bench.abuse", "schema_version": 1, "quick": quick,
                               "binary": str(binary) if binary else None, "rows": rows}, indent=2) + "\n")
    print(f"\nwritten {out}")


if __name__ == "__main__":
    app()
