"""The live-measurement coordinator (docs/live.md): one test at a time over a JSON API, results
stored with their qlogs, and nothing a client sends escapes DATA, leaves partial files or
crashes the server. Fast: loopback HTTP, a fake clock, no namespaces."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer
from conftest import run_protolab

from protolab.errors import ProtolabError
from protolab.live import Coordinator, LiveError, LiveServer, serve
from protolab.live.cli import parse_listen
from protolab.live.store import LiveStore

LIMIT = 10_000

FULL_RESULT: dict[str, Any] = {
    "schema": "protolab.rpm",
    "schema_version": 1,
    "protocol": "h3",
    "idle": {"latency_ms": 21.5},
    "directions": {
        "download": {"capacity_bps": 95e6, "rpm": 640.0, "confidence": {"rpm": "high", "capacity": "high"}},
        "upload": {"capacity_bps": 18e6, "rpm": 410, "confidence": {"rpm": "medium"}},
    },
}


class FakeClock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Live:
    coordinator: Coordinator
    server: LiveServer
    clock: FakeClock
    data: Path
    qlogs: Path
    lines: list[str] = field(default_factory=list)

    def request(self, method: str, path: str, body: bytes | str | dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, Any, http.client.HTTPMessage]:
        """One request on a fresh connection: status, decoded JSON body (None if empty), headers."""
        if isinstance(body, dict):
            body = json.dumps(body)
        conn = http.client.HTTPConnection("127.0.0.1", self.server.server_port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        return response.status, (json.loads(data) if data else None), response.headers

    def token(self, client: dict[str, Any] | None = None) -> str:
        status, body, _ = self.request("POST", "/api/token", client)
        assert status == 200, body
        return body["token"]

    def raw(self, data: bytes) -> bytes:
        """Bytes straight onto a socket, for requests http.client refuses to send."""
        with socket.create_connection(("127.0.0.1", self.server.server_port), timeout=10) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    clock = FakeClock()
    qlogs = tmp_path / "qlogs"
    qlogs.mkdir()
    lines: list[str] = []
    coordinator = Coordinator(tmp_path / "data", lock_timeout_s=60, max_upload_bytes=LIMIT, qlog_dir=qlogs,
                              clock=clock, log=lines.append)
    server = serve(coordinator, "127.0.0.1", 0, log=lines.append)
    yield Live(coordinator, server, clock, tmp_path / "data", qlogs, lines)
    server.close()
    assert not any("Traceback" in line for line in lines)


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def stored(live: Live) -> list[str]:
    return sorted(p.name for p in (live.data / "tests").iterdir())


# -- the lock ------------------------------------------------------------------------------------


def test_one_of_twenty_concurrent_token_requests_wins(live: Live) -> None:
    barrier = threading.Barrier(20)
    answers: list[tuple[int, Any, Any]] = []

    def ask() -> None:
        barrier.wait()
        answers.append(live.request("POST", "/api/token", {"client": "test"}))

    threads = [threading.Thread(target=ask) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(status for status, _, _ in answers)
    assert statuses == [200] + [409] * 19
    winner = next(body for status, body, _ in answers if status == 200)
    assert len(winner["token"]) == 43 and winner["expires_in_s"] == 60
    for status, body, headers in answers:
        if status == 409:
            assert body["error"] == "busy" and 0 < body["retry_after_s"] <= 60
            assert headers["Retry-After"] == "60"
    assert live.request("GET", "/api/status")[1] == {"busy": True, "held_for_s": 0.0, "tests": 0}


def test_expired_lock_goes_to_the_next_client_and_the_old_token_is_refused(live: Live) -> None:
    first = live.token()
    live.clock.advance(30)
    status, body, _ = live.request("POST", "/api/token")
    assert (status, body["retry_after_s"]) == (409, 30.0)
    assert live.request("GET", "/api/status")[1] == {"busy": True, "held_for_s": 30.0, "tests": 0}
    live.clock.advance(30)  # the lock timeout: a stuck client no longer blocks the service
    assert live.request("GET", "/api/status")[1] == {"busy": False, "held_for_s": None, "tests": 0}
    second = live.token()
    status, body, _ = live.request("POST", f"/api/result/{first}", FULL_RESULT)
    assert (status, body["error"]) == (410, "expired")
    assert live.request("POST", f"/api/result/{second}", FULL_RESULT)[0] == 200
    assert stored(live) == [second]


def test_an_expired_token_is_refused_even_when_nobody_took_the_lock(tmp_path: Path) -> None:
    clock = FakeClock()
    coordinator = Coordinator(tmp_path, lock_timeout_s=5, clock=clock, log=lambda line: None)
    token = coordinator.issue_token({"client": "cli"})["token"]
    clock.advance(5)
    with pytest.raises(LiveError) as refused:
        coordinator.submit_result(token, FULL_RESULT)
    assert (refused.value.status, refused.value.code) == (410, "expired")
    assert coordinator.status() == {"busy": False, "held_for_s": None, "tests": 0}
    coordinator.close()


def test_an_upload_releases_the_lock_and_the_token_is_single_use(live: Live) -> None:
    token = live.token()
    status, body, _ = live.request("POST", f"/api/result/{token}", FULL_RESULT)
    assert status == 200
    assert body["stored"] == f"tests/{token}" and body["recorded"] is True and body["qlogs"] == 0
    assert live.request("GET", "/api/status")[1] == {"busy": False, "held_for_s": None, "tests": 1}
    status, body, _ = live.request("POST", f"/api/result/{token}", FULL_RESULT)
    assert (status, body["error"]) == (410, "used")
    assert live.token() != token  # the lock is free again
    status, body, _ = live.request("POST", "/api/result/" + "A" * 43, FULL_RESULT)
    assert (status, body["error"]) == (404, "unknown_token")


# -- refused uploads -----------------------------------------------------------------------------


def test_an_oversized_upload_is_refused_before_it_is_read_and_leaves_nothing(live: Live) -> None:
    token = live.token()
    big = dict(FULL_RESULT, padding="x" * (16 << 20))  # more than socket buffers hold: the server must drain
    status, body, _ = live.request("POST", f"/api/result/{token}", big)
    assert (status, body["error"]) == (413, "too_large")
    assert str(LIMIT) in body["message"]
    assert tree(live.data / "tests") == set()
    # The token still holds the lock and can upload a result that fits.
    assert live.request("POST", "/api/token")[0] == 409
    assert live.request("POST", f"/api/result/{token}", FULL_RESULT)[0] == 200


def test_an_upload_without_content_length_is_refused(live: Live) -> None:
    token = live.token()
    answer = live.raw(f"POST /api/result/{token} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "2\r\n{}\r\n0\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.0 411 ")
    assert b'"length_required"' in answer
    answer = live.raw(f"POST /api/result/{token} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.0 411 ")
    assert tree(live.data / "tests") == set()


@pytest.mark.parametrize("body", [
    b"{not json", b"", b'{"schema": "protolab.rpm", "schema_version": 1, "x": NaN}', b"\xff\xfe{}",
    b"[" * 5000 + b"]" * 5000,
], ids=["broken", "empty", "nan", "not-utf8", "deep"])
def test_malformed_json_is_a_400(live: Live, body: bytes) -> None:
    token = live.token()
    status, answer, _ = live.request("POST", f"/api/result/{token}", body)
    assert status == 400 and answer["error"] == "bad_json", answer
    assert tree(live.data / "tests") == set()
    assert live.request("POST", f"/api/result/{token}", FULL_RESULT)[0] == 200  # the token was not used up


@pytest.mark.parametrize(("result", "field_name"), [
    ({"schema_version": 1}, "`schema`"),
    ({"schema": "protolab.load", "schema_version": 1}, "`schema`"),
    ({"schema": "protolab.rpm"}, "`schema_version`"),
    ({"schema": "protolab.rpm", "schema_version": "1"}, "`schema_version`"),
    ({"schema": "protolab.rpm", "schema_version": True}, "`schema_version`"),
    ([1, 2], "object"),
])
def test_a_result_with_the_wrong_schema_is_a_400_naming_the_field(live: Live, result: Any, field_name: str) -> None:
    token = live.token()
    status, answer, _ = live.request("POST", f"/api/result/{token}", json.dumps(result))
    assert (status, answer["error"]) == (400, "bad_result")
    assert field_name in answer["message"]
    assert tree(live.data / "tests") == set()


def test_bad_client_metadata_is_refused_and_takes_no_lock(live: Live) -> None:
    for body, status in ((b"[]", 400), (b'{"client": 3}', 400), (b"{" + b" " * 5000 + b"}", 413), (b"{x", 400)):
        assert live.request("POST", "/api/token", body)[0] == status
    assert live.request("GET", "/api/status")[1]["busy"] is False


PATHS = [
    "/api/result/..%2F..%2Fetc",
    "/api/result/../x",
    "/api/result/../../../../tmp/x",
    "/api/result/" + "a" * 44,
    "/api/result/" + "a" * 5000,
    "/api/result/" + "a" * 20 + "/" + "a" * 22,
    "/api/result/" + "a" * 40 + "%2F",
    "/api/result/" + "." * 43,
    "/api/result/",
    "/api/result/%00" + "a" * 40,
    "/api/tests/..%2F..%2Fetc%2Fpasswd",
    "/api/tests/../../etc/passwd",
    "/api/tests/" + "." * 43,
]


@pytest.mark.parametrize("path", PATHS)
def test_path_traversal_attempts_write_nothing_outside_data(live: Live, tmp_path: Path, path: str) -> None:
    token = live.token()
    outside = tree(tmp_path)
    method = "GET" if path.startswith("/api/tests") else "POST"
    status, answer, _ = live.request(method, path, FULL_RESULT if method == "POST" else None)
    assert status in (400, 404), answer
    assert tree(tmp_path) == outside
    assert live.request("POST", f"/api/result/{token}", FULL_RESULT)[0] == 200
    assert stored(live) == [token]


def test_tokens_are_checked_before_any_path_is_built(tmp_path: Path) -> None:
    coordinator = Coordinator(tmp_path / "data", log=lambda line: None)
    for token in ("../../etc/passwd", "a" * 42 + "/", "." * 43, "a" * 44, ""):
        with pytest.raises(LiveError) as refused:
            coordinator.submit_result(token, FULL_RESULT)
        assert refused.value.status == 400
        with pytest.raises(LiveError):
            coordinator.test_info(token)
    assert tree(tmp_path) == {"data", "data/tests", "data/live.duckdb", "data/serve-live.lock"}
    coordinator.close()


# -- what is stored ------------------------------------------------------------------------------


def test_qlogs_written_during_the_test_are_moved_under_its_token(live: Live) -> None:
    old = live.qlogs / "server-old.qlog"
    old.write_text("{}")
    os.utime(old, ns=(time.time_ns() - 10**10,) * 2)
    token = live.token({"client": "browser", "user_agent": "Firefox/140"})
    for name in ("server-a1.qlog", "server-b2.qlog", "notes.txt"):
        (live.qlogs / name).write_text("\x1e{}\n")
    (live.qlogs / "sub").mkdir()
    (live.qlogs / "sub" / "server-c3.qlog").write_text("{}")
    status, body, _ = live.request("POST", f"/api/result/{token}", FULL_RESULT)
    assert (status, body["qlogs"]) == (200, 2)
    test_dir = live.data / "tests" / token
    assert sorted(p.name for p in (test_dir / "qlogs").iterdir()) == ["server-a1.qlog", "server-b2.qlog"]
    assert (test_dir / "qlogs" / "server-a1.qlog").read_text() == "\x1e{}\n"
    assert tree(live.qlogs) == {"server-old.qlog", "notes.txt", "sub", "sub/server-c3.qlog"}
    meta = json.loads((test_dir / "meta.json").read_text())
    assert meta["qlogs"] == ["server-a1.qlog", "server-b2.qlog"]
    assert meta["client"] == {"client": "browser", "user_agent": "Firefox/140"}
    assert meta["token_peer"] == meta["upload_peer"] == "127.0.0.1"
    assert meta["issued_unix_ns"] <= meta["uploaded_unix_ns"]
    assert (meta["schema"], meta["schema_version"]) == ("protolab.live.meta", 1)
    assert json.loads((test_dir / "result.json").read_text()) == FULL_RESULT
    assert sorted(p.name for p in test_dir.iterdir()) == ["meta.json", "qlogs", "result.json"]
    assert live.coordinator.store.rows()[0]["qlogs"] == 2


def test_the_duckdb_row_holds_the_results_numbers(live: Live) -> None:
    full = live.token({"client": "protolab-net"})
    live.request("POST", f"/api/result/{full}", FULL_RESULT)
    sparse = live.token()
    live.request("POST", f"/api/result/{sparse}", {"schema": "protolab.rpm.browser", "schema_version": 2,
                                                   "idle": {"latency_ms": "fast"},
                                                   "directions": {"download": {"rpm": 90}, "upload": []}})
    rows = LiveStore(live.data / "live.duckdb").rows()
    assert [row["token"] for row in rows] == [full, sparse]
    first, second = rows
    assert first["issued_unix_ns"] <= first["uploaded_unix_ns"] <= second["issued_unix_ns"]
    assert {k: v for k, v in first.items() if k not in ("token", "issued_unix_ns", "uploaded_unix_ns")} == {
        "client": "protolab-net", "schema": "protolab.rpm", "protocol": "h3", "idle_latency_ms": 21.5,
        "download_bps": 95e6, "upload_bps": 18e6, "download_rpm": 640.0, "upload_rpm": 410.0,
        "download_confidence": "high", "upload_confidence": "medium", "qlogs": 0,
        "result_path": f"tests/{full}/result.json",
    }
    assert (second["client"], second["schema"], second["protocol"], second["idle_latency_ms"]) == (
        None, "protolab.rpm.browser", None, None)
    assert (second["download_rpm"], second["download_bps"], second["upload_rpm"], second["download_confidence"]) == (
        90.0, None, None, None)


def test_a_stored_test_can_be_read_back(live: Live) -> None:
    token = live.token({"client": "browser"})
    live.request("POST", f"/api/result/{token}", FULL_RESULT)
    status, body, _ = live.request("GET", f"/api/tests/{token}")
    assert status == 200
    assert body["meta"]["token"] == token and body["meta"]["client"] == {"client": "browser"}
    assert body["summary"]["download_rpm"] == 640.0 and body["summary"]["protocol"] == "h3"
    other = live.token()
    assert live.request("GET", f"/api/tests/{other}")[0] == 404  # issued, nothing stored yet
    assert live.request("GET", "/api/tests/nope")[0] == 400


def test_a_restart_keeps_the_tests_and_rewrites_missing_rows(tmp_path: Path) -> None:
    lines: list[str] = []
    first = Coordinator(tmp_path, log=lines.append)
    token = first.issue_token()["token"]
    first.submit_result(token, json.dumps(FULL_RESULT).encode())
    with pytest.raises(ProtolabError, match="another coordinator"):
        Coordinator(tmp_path, log=lines.append)
    first.close()
    (tmp_path / "live.duckdb").unlink()  # as if the row's write had failed
    again = Coordinator(tmp_path, log=lines.append)
    assert [row["token"] for row in again.store.rows()] == [token]
    assert again.status()["tests"] == 1
    with pytest.raises(LiveError) as refused:
        again.submit_result(token, FULL_RESULT)
    assert refused.value.status == 410
    assert any("indexed stored test" in line for line in lines)
    again.close()


def test_a_failed_store_puts_the_qlogs_back_and_keeps_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    qlogs = tmp_path / "qlogs"
    qlogs.mkdir()
    coordinator = Coordinator(tmp_path / "data", qlog_dir=qlogs, log=lambda line: None)
    token = coordinator.issue_token()["token"]
    (qlogs / "server-1.qlog").write_text("{}")
    import protolab.live.coordinator as module

    real = module.write_text_atomically

    def failing(path: Path, text: str, durable: bool = False) -> None:
        if path.name == "meta.json":
            raise OSError(28, "No space left on device")
        real(path, text, durable)

    monkeypatch.setattr(module, "write_text_atomically", failing)
    with pytest.raises(OSError):
        coordinator.submit_result(token, FULL_RESULT)
    assert tree(qlogs) == {"server-1.qlog"}
    assert tree(tmp_path / "data" / "tests") == set()
    monkeypatch.setattr(module, "write_text_atomically", real)
    assert coordinator.submit_result(token, FULL_RESULT)["qlogs"] == 1
    coordinator.close()


# -- HTTP details --------------------------------------------------------------------------------


def test_cors_preflight_and_headers(tmp_path: Path) -> None:
    coordinator = Coordinator(tmp_path, log=lambda line: None)
    server = serve(coordinator, "127.0.0.1", 0, allow_origin="https://lab.test", log=lambda line: None)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
        conn.request("OPTIONS", "/api/result/x", headers={"Origin": "https://lab.test",
                                                          "Access-Control-Request-Method": "POST"})
        response = conn.getresponse()
        assert response.status == 204 and response.read() == b""
        assert response.headers["Access-Control-Allow-Origin"] == "https://lab.test"
        assert response.headers["Access-Control-Allow-Methods"] == "GET, POST, OPTIONS"
        assert response.headers["Access-Control-Allow-Headers"] == "content-type"
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
        conn.request("GET", "/api/status")
        response = conn.getresponse()
        assert response.status == 200 and response.headers["Content-Type"] == "application/json"
        assert response.headers["Access-Control-Allow-Origin"] == "https://lab.test"
        conn.close()
    finally:
        server.close()


def test_unknown_paths_and_methods(live: Live) -> None:
    status, body, headers = live.request("GET", "/")
    assert (status, body["error"], headers["Content-Type"]) == (404, "not_found", "application/json")
    status, body, headers = live.request("DELETE", "/api/status")
    assert (status, headers["Allow"]) == (405, "GET")
    assert live.request("GET", "/api/token")[0] == 405
    assert live.request("PUT", "/api/result/" + "a" * 43, "{}")[0] == 405
    assert live.request("GET", "/api/status?x=1")[0] == 200


def test_broken_requests_get_json_errors_and_the_server_goes_on(live: Live) -> None:
    answers = [
        live.raw(b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n"),  # request line too long
        live.raw(b"GET /api/status HTTP/1.1\r\n" + b"X-A: b\r\n" * 200 + b"\r\n"),  # too many headers
        live.raw(b"GET /api/status HTTP/1.1\r\nX-A: " + b"b" * 70000 + b"\r\n\r\n"),  # header too long
        live.raw(b"NONSENSE\r\n\r\n"),
        live.raw(b"BREW /api/status HTTP/1.1\r\n\r\n"),
        live.raw(b"POST /api/token HTTP/1.1\r\nContent-Length: 100\r\n\r\n{}"),  # body cut short
        live.raw(b"POST /api/token HTTP/1.1\r\nContent-Length: -5\r\n\r\n"),
    ]
    codes = [answer.split(b" ", 2)[1] for answer in answers]
    assert codes == [b"414", b"431", b"431", b"400", b"501", b"400", b"400"]
    for answer in answers:
        assert b"Content-Type: application/json" in answer
        json.loads(answer.split(b"\r\n\r\n", 1)[1])
    live.raw(b"GET /api/sta")  # a client that hangs up mid-line
    assert live.request("GET", "/api/status")[1]["busy"] is False
    assert len(live.lines) >= len(answers) + 1


# -- the command ---------------------------------------------------------------------------------


def test_the_command_has_help_and_rejects_a_bad_listen_address(tmp_path: Path) -> None:
    done = run_protolab("serve-live", "--help", timeout=60)
    assert done.returncode == 0 and "--lock-timeout-s" in done.stdout and "--qlog-dir" in done.stdout
    done = run_protolab("serve-live", "--listen", "nope", "--data", tmp_path / "d", timeout=60)
    assert done.returncode == 2, done.stderr
    assert "--listen" in done.stderr and "HOST:PORT" in done.stderr and "Traceback" not in done.stderr
    for listen in ("127.0.0.1:99999", ":80", "::1:80", "host:port", "127.0.0.1:"):
        with pytest.raises(typer.BadParameter):
            parse_listen(listen)
    assert parse_listen("[::1]:8090") == ("::1", 8090)
    assert parse_listen("0.0.0.0:0") == ("0.0.0.0", 0)


def test_the_command_serves_until_sigterm(tmp_path: Path) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    try:
        done = run_protolab("serve-live", "--listen", f"127.0.0.1:{blocker.getsockname()[1]}",
                            "--data", tmp_path / "d", timeout=60)
    finally:
        blocker.close()
    assert done.returncode == 1 and "cannot listen on" in done.stderr and "Traceback" not in done.stderr

    process = subprocess.Popen([sys.executable, "-m", "protolab", "serve-live", "--listen", "127.0.0.1:0",
                                "--data", str(tmp_path / "d")], stderr=subprocess.PIPE, text=True)
    try:
        first = process.stderr.readline()  # type: ignore[union-attr]
        assert "listening on http://127.0.0.1:" in first, first
        port = int(first.split("http://127.0.0.1:")[1].split(",")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/status")
        assert json.loads(conn.getresponse().read()) == {"busy": False, "held_for_s": None, "tests": 0}
        conn.close()
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, rest
    assert '"GET /api/status HTTP/1.1" 200' in rest and "stopping" in rest and "Traceback" not in rest
