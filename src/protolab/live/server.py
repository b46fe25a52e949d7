"""The coordinator's JSON API over HTTP (docs/live.md), on the standard library's threading server.

Every response is JSON with CORS headers (the speed-test page may be served from another
origin, as 003 §5.3 advises), every request is one line in the log, and nothing a client sends
(bad paths, oversized bodies, broken request lines, dropped connections) prints a traceback or
stops the server.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from typing import Any

from protolab.live.coordinator import (
    MAX_CLIENT_BYTES,
    Coordinator,
    LiveError,
    check_token,
)
from protolab.live.limits import ServiceLimits
from protolab.live.metrics import LiveMetrics

# Bodies we refuse unread are read and thrown away up to this much, so the client finishes
# sending and sees our answer instead of a connection reset; beyond it we just close.
DRAIN_LIMIT_BYTES = 64 << 20
REQUEST_TIMEOUT_S = 30.0

ROUTES: tuple[tuple[re.Pattern[str], frozenset[str], str], ...] = (
    (re.compile(r"/api/token"), frozenset({"POST"}), "token"),
    (re.compile(r"/api/result/([^/]*)"), frozenset({"POST"}), "result"),
    (re.compile(r"/api/status"), frozenset({"GET"}), "status"),
    (re.compile(r"/api/tests/([^/]*)"), frozenset({"GET"}), "test"),
    (re.compile(r"/metrics"), frozenset({"GET"}), "metrics"),
)
LOG_FORMATS = ("text", "json")  # as protolab.live.cli.LOG_FORMATS


def _printable(text: str, limit: int = 200) -> str:
    """Request text for the log: control characters escaped (no forged log lines), cut short."""
    cleaned = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return cleaned + ("..." if len(text) > limit else "")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Deadlines:
    """Cuts off connections whose request does not arrive in time (a head or body trickled a
    byte at a time: slowloris), where the socket timeout alone would wait REQUEST_TIMEOUT_S per
    byte. One thread for all connections: it shuts the socket down, so the handler's blocked
    read returns at once and the handler ends. Under the lock, so that a connection whose
    handler has finished (`clear`) is never touched again."""

    def __init__(self) -> None:
        self._due: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def arm(self, conn: socket.socket, within_s: float) -> None:
        with self._lock:
            self._due[conn] = time.monotonic() + within_s
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="protolab-live-deadlines", daemon=True)
                self._thread.start()

    def clear(self, conn: socket.socket) -> None:
        with self._lock:
            self._due.pop(conn, None)

    def _run(self) -> None:
        while True:
            time.sleep(0.25)
            now = time.monotonic()
            with self._lock:
                for conn in [c for c, due in self._due.items() if due <= now]:
                    del self._due[conn]
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    """One request: route, call the coordinator, answer JSON. HTTP/1.0, one request per
    connection: simple, and a refused upload's unread body cannot confuse a next request."""

    server: LiveServer
    timeout = REQUEST_TIMEOUT_S
    server_version = "protolab-live"

    _note = ""
    _code = ""
    _unread = 0
    _text: bytes | None = None

    def version_string(self) -> str:
        return self.server_version

    @property
    def peer(self) -> str:
        """The client's address: the connection's, or behind a trusted proxy (a TLS front for
        the API) the last address of its `X-Forwarded-For`, the one that proxy appended."""
        address = self.client_address[0]
        if address not in self.server.trusted_proxies or not hasattr(self, "headers"):
            return address
        forwarded = (self.headers.get("X-Forwarded-For") or "").rsplit(",", 1)[-1].strip()
        try:
            return str(ipaddress.ip_address(forwarded))
        except ValueError:
            return address

    # -- deadlines (docs/live.md, "Limits") --------------------------------------------------

    def setup(self) -> None:
        super().setup()
        if self.server.limits.head_timeout_s is not None:
            self.server.deadlines.arm(self.connection, self.server.limits.head_timeout_s)

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        if self.server.limits.head_timeout_s is not None:
            self.server.deadlines.arm(self.connection, REQUEST_TIMEOUT_S)  # now for the body
        return parsed

    def finish(self) -> None:
        self.server.deadlines.clear(self.connection)
        super().finish()

    # -- methods -----------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_OPTIONS(self) -> None:
        """CORS preflight: any path, no body."""
        self._note = ""
        self.send_response(204)
        self._cors_headers()
        self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Content-Length", "0")
        self.end_headers()
        self._drain()

    # -- routing -----------------------------------------------------------------------------

    def _dispatch(self) -> None:
        self._note = ""
        self._code = ""
        self._unread = 0
        self._text: bytes | None = None
        headers: dict[str, str] = {}
        cap = self.server.limits.in_flight
        admitted = False
        try:
            if cap is not None:
                cap.acquire()
                admitted = True
            if self.server.limits.requests is not None:
                self.server.limits.requests.admit(self.peer)
            status, body = self._route()
        except LiveError as exc:
            status, body = exc.status, exc.body()
            self._note, self._code = exc.message, exc.code
            self.server.metrics.refused.labels(exc.code).inc()
            if "retry_after_s" in exc.extra:
                headers["Retry-After"] = str(max(1, round(exc.extra["retry_after_s"] + 0.5)))
        except Exception as exc:  # noqa: BLE001 - a bug: one log line, a 500, and the server goes on
            status, body = 500, {"error": "internal", "message": "internal error"}
            self._note, self._code = f"internal error: {type(exc).__name__}: {exc}", "internal"
        finally:
            if admitted and cap is not None:
                cap.release()
        if status == 405:
            headers["Allow"] = ", ".join(sorted(body.pop("allow")))
        if self._text is not None and status == 200:
            self._send(status, self._text, self.server.metrics.content_type, {})
        else:
            self._send_json(status, body, headers)
        self._drain()

    def _route(self) -> tuple[int, dict[str, Any]]:
        path = self.path.split("?", 1)[0]
        for pattern, methods, name in ROUTES:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if self.command not in methods:
                raise LiveError(405, "method_not_allowed", f"{self.command} is not allowed here",
                                allow=sorted(methods))
            return getattr(self, f"_{name}")(*match.groups())
        raise LiveError(404, "not_found", "no such endpoint (see docs/live.md)")

    def _token(self) -> tuple[int, dict[str, Any]]:
        body = self._read_body(MAX_CLIENT_BYTES, required=False)
        peer = self.peer
        tests = self.server.limits.tests
        if tests is not None:
            tests.admit(peer, "tests")
        try:
            issued = self.server.coordinator.issue_token(body, peer=peer,
                                                         user_agent=self.headers.get("User-Agent", "")[:300] or None)
        except LiveError:
            if tests is not None:
                tests.refund(peer)
            raise
        self.server.metrics.tests_started.inc()
        return 200, issued

    def _result(self, token: str) -> tuple[int, dict[str, Any]]:
        check_token(token)  # before anything else touches the text
        body = self._read_body(self.server.coordinator.max_upload_bytes, required=True)
        answer = self.server.coordinator.submit_result(token, body, peer=self.peer)
        self.server.metrics.test_stored(len(body), answer.get("held_s"))
        return 200, answer

    def _status(self) -> tuple[int, dict[str, Any]]:
        return 200, self.server.coordinator.status()

    def _test(self, token: str) -> tuple[int, dict[str, Any]]:
        return 200, self.server.coordinator.test_info(check_token(token))

    def _metrics(self) -> tuple[int, dict[str, Any]]:
        """Prometheus' text format (docs/live.md, "Metrics"), not JSON."""
        self._text = self.server.metrics.exposition()
        return 200, {}

    # -- bodies ------------------------------------------------------------------------------

    def _read_body(self, limit: int, required: bool) -> bytes:
        """The request body, at most `limit` bytes, judged by Content-Length before any is read."""
        declared = self.headers.get("Content-Length")
        if declared is None:
            if required or self.headers.get("Transfer-Encoding"):
                raise LiveError(411, "length_required", "send the body with a Content-Length header")
            return b""
        if not declared.strip().isdigit():
            raise LiveError(400, "bad_length", "Content-Length is not a number")
        length = int(declared)
        self._unread = length
        if length > limit:
            raise LiveError(413, "too_large", f"the body of {length} bytes is over the limit of {limit} bytes")
        try:
            data = self.rfile.read(length)
        except TimeoutError:
            self._unread = 0
            raise LiveError(408, "timeout", "the body did not arrive in time") from None
        self._unread = 0
        self.server.deadlines.clear(self.connection)  # the body is in: storing it is never cut short
        if len(data) < length:
            raise LiveError(400, "truncated", f"the body ended after {len(data)} of {length} bytes")
        return data

    def _drain(self) -> None:
        """Reads and drops a body we answered without reading, so the client sees the answer."""
        left = min(self._unread, DRAIN_LIMIT_BYTES)
        self._unread = 0
        if not left:
            return
        self.wfile.flush()
        try:
            while left > 0:
                chunk = self.rfile.read1(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass

    # -- responses ---------------------------------------------------------------------------

    def _cors_headers(self) -> None:
        self.send_header("Access-Control-Allow-Origin", self.server.allow_origin)
        self.send_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "content-type")

    def _send_json(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        self._send(status, (json.dumps(body) + "\n").encode(), "application/json", headers)

    def _send(self, status: int, data: bytes, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self._cors_headers()
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (broken request line, headers too long or too many,
        unknown method) as JSON like every other answer."""
        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # an unparsable request line: answer with a status line anyway
            self.request_version = "HTTP/1.0"
        try:
            short = HTTPStatus(code).phrase
        except ValueError:
            short = "error"
        self._note = message or short
        self._code = short.lower().replace(" ", "_")
        self._unread = 0
        self.server.metrics.refused.labels(self._code).inc()
        self._send_json(code, {"error": self._code, "message": message or short}, {})

    # -- the log -----------------------------------------------------------------------------

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        code_text = str(int(code)) if isinstance(code, int) else str(code)
        request = _printable(getattr(self, "requestline", ""))
        if self.server.log_format == "json":
            # One JSON object a line for log collectors; json.dumps escapes what a client sent.
            event = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "peer": self.peer,
                     "request": request, "status": int(code_text) if code_text.isdigit() else code_text,
                     "error": self._code or None, "message": _printable(self._note) or None}
            self.server.log(json.dumps(event))
            return
        note = f" - {_printable(self._note)}" if self._note else ""
        self.server.log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {self.peer} \"{request}\" {code_text}{note}")

    def log_error(self, format: str, *args: Any) -> None:
        """Silent: every refusal is already in the request's line (log_request)."""

    def log_message(self, format: str, *args: Any) -> None:
        self.server.log(_printable(format % args, 500))


class LiveServer(ThreadingHTTPServer):
    """The HTTP server around a Coordinator; `serve` starts it in a background thread."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # socketserver's 5 resets a burst of clients (a page opening many connections)

    def __init__(self, host: str, port: int, coordinator: Coordinator, allow_origin: str = "*",
                 log: Callable[[str], None] = _stderr, limits: ServiceLimits | None = None,
                 metrics: LiveMetrics | None = None, log_format: str = "text",
                 trusted_proxies: frozenset[str] = frozenset()) -> None:
        if log_format not in LOG_FORMATS:
            raise ValueError(f"log format {log_format!r}: expected one of {', '.join(LOG_FORMATS)}")
        self.coordinator = coordinator
        self.allow_origin = allow_origin
        self.log = log
        self.log_format = log_format
        self.trusted_proxies = trusted_proxies
        self.limits = limits or ServiceLimits()
        self.metrics = metrics or LiveMetrics()
        self.metrics.gauge("protolab_live_tests_stored", "Tests in the store",
                           lambda: coordinator.status()["tests"])
        self.metrics.gauge("protolab_live_test_running", "1 while a token holds the lock",
                           lambda: float(coordinator.status()["busy"]))
        if self.limits.in_flight is not None:
            cap = self.limits.in_flight
            self.metrics.gauge("protolab_live_requests_in_flight", "Requests being served", lambda: cap.active)
        self.thread: threading.Thread | None = None
        self._connections = 0  # accepted and not yet answered: close() lets them finish
        self._connections_done = threading.Condition()
        self.deadlines = _Deadlines()
        if self.limits.connections is not None:
            gate = self.limits.connections
            self.metrics.gauge("protolab_live_connections_open", "Connections open", lambda: gate.open)
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks DNS for the host's full name, which can hang for seconds.
        TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed outside our handling (client gone mid-answer): one line."""
        exc = sys.exc_info()[1]
        self.log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {client_address[0]} connection error: "
                 f"{type(exc).__name__}: {exc}")

    @property
    def url(self) -> str:
        host = self.server_name
        return f"http://[{host}]:{self.server_port}" if ":" in host else f"http://{host}:{self.server_port}"

    def wait(self) -> None:
        """Blocks until the server stops; Ctrl-C (KeyboardInterrupt) interrupts it."""
        while self.thread is not None and self.thread.is_alive():
            self.thread.join(0.5)

    def process_request(self, request: Any, client_address: Any) -> None:
        gate = self.limits.connections
        if gate is not None:
            refusal = gate.admit(client_address[0], exempt=client_address[0] in self.trusted_proxies)
            if refusal is not None:
                self._turn_away(request, client_address[0], refusal)
                return
        with self._connections_done:
            self._connections += 1
        super().process_request(request, client_address)

    def _turn_away(self, request: socket.socket, peer: str, message: str) -> None:
        """A connection over the limits: 503 at once, without a thread and without reading."""
        self.metrics.refused.labels("too_many_connections").inc()
        body = json.dumps({"error": "too_many_connections", "message": message, "retry_after_s": 2}).encode() + b"\n"
        head = (f"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nRetry-After: 2\r\nCache-Control: no-store\r\n"
                f"Access-Control-Allow-Origin: {self.allow_origin}\r\n\r\n").encode()
        with contextlib.suppress(OSError):
            request.send(head + body, socket.MSG_DONTWAIT)  # never block the accepting thread
        self.shutdown_request(request)
        if self.log_format == "json":
            self.log(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "peer": peer, "request": None,
                                 "status": 503, "error": "too_many_connections", "message": message}))
        else:
            self.log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {_printable(peer)} (connection) 503 - {message}")

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            if self.limits.connections is not None:
                self.limits.connections.release(client_address[0])
            with self._connections_done:
                self._connections -= 1
                self._connections_done.notify_all()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stops accepting, lets the connections already accepted finish (an upload whose body
        is arriving is read, stored and answered) for up to `timeout_s`, closes the socket and
        waits for uploads being stored to finish. What is still unanswered then is cut off
        unstored: its client sees the connection drop (a stored test is never cut short)."""
        deadline = time.monotonic() + timeout_s
        if self.thread is not None and self.thread.is_alive():
            self.shutdown()
        with self._connections_done:
            self._connections_done.wait_for(lambda: self._connections == 0, timeout_s)
        self.server_close()
        self.coordinator.close(max(0.0, deadline - time.monotonic()))


def serve(coordinator: Coordinator, host: str, port: int, allow_origin: str = "*",
          log: Callable[[str], None] = _stderr, limits: ServiceLimits | None = None,
          metrics: LiveMetrics | None = None, log_format: str = "text",
          trusted_proxies: frozenset[str] = frozenset()) -> LiveServer:
    """Binds HOST:PORT (port 0: any free port, see `server.server_port`) and serves in a daemon
    thread; `shutdown()` or `close()` stops it. Raises OSError if the address cannot be bound.
    `limits` (ServiceLimits) are off by default; `metrics` are kept either way (`GET /metrics`);
    requests from `trusted_proxies` are taken to come from their `X-Forwarded-For`."""
    server = LiveServer(host, port, coordinator, allow_origin, log, limits, metrics, log_format, trusted_proxies)
    # A short poll interval: shutdown() waits up to one interval for the loop to notice.
    server.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                     name="protolab-live", daemon=True)
    server.thread.start()
    return server
