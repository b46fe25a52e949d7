"""The live service made for the internet (docs/live.md, "Run it on a server"): per-address rate
limits and the in-flight cap with clear refusals, the Prometheus metrics, JSON-lines logs,
retention, and no stored result lost when the service is killed mid-upload. Fast: a fake clock,
loopback sockets, one subprocess for the kill test."""

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
from pathlib import Path
from typing import Any

import pytest
from awaiting import await_line
from prometheus_client.parser import text_string_to_metric_families

from protolab.live import Coordinator, LiveError, serve
from protolab.live.limits import AddressRateLimiter, ConcurrencyCap, ServiceLimits
from protolab.live.metrics import LiveMetrics
from protolab.live.retention import RetentionPolicy, StoredTest, select_for_removal
from protolab.live.store import LiveStore

SRC = Path(__file__).resolve().parents[1] / "src"
RESULT: dict[str, Any] = {"schema": "protolab.rpm", "schema_version": 1, "protocol": "h3",
                          "directions": {"download": {"capacity_bps": 9e6, "rpm": 500.0}}}


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeWall:
    """Wall-clock nanoseconds that move only when a test says so."""

    def __init__(self) -> None:
        self.ns = 1_800_000_000 * 10**9

    def __call__(self) -> int:
        return self.ns


def request(port: int, method: str, path: str, body: Any = None,
            headers: dict[str, str] | None = None) -> tuple[int, Any, http.client.HTTPMessage]:
    if isinstance(body, dict):
        body = json.dumps(body)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    is_json = response.headers.get("Content-Type") == "application/json"
    return response.status, (json.loads(data) if is_json else data.decode()), response.headers


# -- limits, pure --------------------------------------------------------------------------------


def test_a_token_bucket_admits_its_burst_then_its_rate() -> None:
    clock = FakeClock()
    limiter = AddressRateLimiter(rate_per_s=0.5, burst=3, clock=clock)
    for _ in range(3):
        limiter.admit("192.0.2.1")
    with pytest.raises(LiveError) as refused:
        limiter.admit("192.0.2.1")
    assert (refused.value.status, refused.value.code, refused.value.extra["retry_after_s"]) == (429, "rate_limited", 2.0)
    limiter.admit("192.0.2.2")  # another address has its own bucket
    clock.advance(1.0)
    with pytest.raises(LiveError) as refused:
        limiter.admit("192.0.2.1")
    assert refused.value.extra["retry_after_s"] == 1.0  # half a token back after 1 s at 0.5/s
    clock.advance(1.0)
    limiter.admit("192.0.2.1")


def test_the_address_table_is_bounded_and_forgets_the_least_recently_used() -> None:
    clock = FakeClock()
    limiter = AddressRateLimiter(rate_per_s=0.001, burst=1, max_addresses=2, clock=clock)
    limiter.admit("a")
    limiter.admit("b")
    with pytest.raises(LiveError):
        limiter.admit("a")  # a is now the most recently used
    limiter.admit("c")  # evicts b
    assert len(limiter) == 2
    limiter.admit("b")  # forgotten: a full bucket again
    for _ in range(1000):
        try:
            limiter.admit(f"flood-{_}")
        except LiveError:
            pass
    assert len(limiter) == 2


def test_a_refund_gives_back_the_token() -> None:
    limiter = AddressRateLimiter(rate_per_s=0.001, burst=1, clock=FakeClock())
    limiter.admit("a")
    limiter.refund("a")
    limiter.admit("a")
    with pytest.raises(LiveError):
        limiter.admit("a")


def test_the_concurrency_cap_refuses_with_503_and_frees_on_release() -> None:
    cap = ConcurrencyCap(2)
    cap.acquire()
    cap.acquire()
    with pytest.raises(LiveError) as refused:
        cap.acquire()
    assert (refused.value.status, refused.value.code) == (503, "overloaded")
    cap.release()
    cap.acquire()
    assert cap.active == 2


# -- limits and metrics over sockets -------------------------------------------------------------


def test_over_sockets_a_second_test_is_refused_limits_answer_429_and_503_and_metrics_count(tmp_path: Path) -> None:
    clock = FakeClock()
    lines: list[str] = []
    coordinator = Coordinator(tmp_path / "data", lock_timeout_s=60, clock=clock, log=lines.append)
    limits = ServiceLimits(requests=AddressRateLimiter(0.001, 7, clock=clock),
                           tests=AddressRateLimiter(0.001, 2, clock=clock), in_flight=ConcurrencyCap(1))
    server = serve(coordinator, "127.0.0.1", 0, log=lines.append, limits=limits,
                   metrics=LiveMetrics(clock=clock), log_format="json")
    port = server.server_port
    try:
        status, first, _ = request(port, "POST", "/api/token", {"client": "cli"})
        assert status == 200
        # A second concurrent test from the same address: refused, and told it is its own.
        status, body, headers = request(port, "POST", "/api/token")
        assert (status, body["error"], headers["Retry-After"]) == (409, "busy", "60")
        assert "your address" in body["message"]
        # The in-flight cap: an upload whose body has not arrived holds the only slot.
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.sendall(f"POST /api/result/{first['token']} HTTP/1.1\r\nContent-Length: 100\r\n\r\n{{".encode())
            deadline = time.monotonic() + 10
            while limits.in_flight.active == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            status, body, headers = request(port, "GET", "/api/status")
            assert (status, body["error"], headers["Retry-After"]) == (503, "overloaded", "2")  # rounded up from 1.0 s, as every Retry-After
        clock.advance(12.5)
        upload = json.dumps(RESULT)
        deadline = time.monotonic() + 10
        while limits.in_flight.active and time.monotonic() < deadline:  # the dropped upload's handler ends
            time.sleep(0.01)
        status, stored, _ = request(port, "POST", f"/api/result/{first['token']}", upload)
        assert (status, stored["held_s"]) == (200, 12.5)
        # The address's second of 2 tests (the refused token request above gave its test back).
        assert request(port, "POST", "/api/token")[0] == 200
        status, body, headers = request(port, "POST", "/api/token")
        assert (status, body["error"], headers["Retry-After"]) == (429, "rate_limited", "988")  # (1 - 12.5 s × 0.001/s) / 0.001/s
        assert "too many tests" in body["message"]
        status, body, headers = request(port, "GET", "/api/status")  # the 7th request counted (not the 503)
        assert status == 200
        status, body, headers = request(port, "GET", "/api/status")
        assert (status, body["error"], headers["Retry-After"]) == (429, "rate_limited", "988")  # (1 - 12.5 s × 0.001/s) / 0.001/s
        clock.advance(1000)
        status, text, headers = request(port, "GET", "/metrics")
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
    finally:
        server.close()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("protolab_live_tests_started_total", ())] == 2
    assert samples[("protolab_live_tests_completed_total", ())] == 1
    assert samples[("protolab_live_upload_bytes_total", ())] == len(upload)
    assert samples[("protolab_live_requests_refused_total", (("reason", "busy"),))] == 1
    assert samples[("protolab_live_requests_refused_total", (("reason", "overloaded"),))] == 1
    assert samples[("protolab_live_requests_refused_total", (("reason", "rate_limited"),))] == 2
    assert samples[("protolab_live_test_duration_seconds_count", ())] == 1
    assert samples[("protolab_live_test_duration_seconds_sum", ())] == 12.5
    assert samples[("protolab_live_test_duration_seconds_bucket", (("le", "20.0"),))] == 1
    assert samples[("protolab_live_test_duration_seconds_bucket", (("le", "10.0"),))] == 0
    assert samples[("protolab_live_uptime_seconds", ())] == 1012.5
    assert samples[("protolab_live_tests_stored", ())] == 1
    assert samples[("protolab_live_test_running", ())] == 0  # the second token's lock timed out
    events = [json.loads(line) for line in lines if line.startswith("{")]
    refused = [(e["status"], e["error"]) for e in events if e["status"] != 200]
    assert refused == [(409, "busy"), (503, "overloaded"), (400, "truncated"), (429, "rate_limited"), (429, "rate_limited")]


# -- retention -----------------------------------------------------------------------------------


def test_retention_removes_the_oldest_beyond_each_limit() -> None:
    day = 86400 * 10**9
    tests = [StoredTest("c", 3 * day, 300), StoredTest("a", 1 * day, 100), StoredTest("b", 2 * day, 200)]
    now = 4 * day
    assert select_for_removal(tests, RetentionPolicy(), now) == []
    assert select_for_removal(tests, RetentionPolicy(max_tests=1), now) == ["a", "b"]
    assert select_for_removal(tests, RetentionPolicy(max_bytes=500), now) == ["a"]
    assert select_for_removal(tests, RetentionPolicy(max_bytes=499), now) == ["a", "b"]
    assert select_for_removal(tests, RetentionPolicy(max_bytes=600), now) == []
    assert select_for_removal(tests, RetentionPolicy(max_age_s=2.5 * 86400), now) == ["a"]
    assert select_for_removal(tests, RetentionPolicy(max_age_s=2.5 * 86400, max_tests=1), now) == ["a", "b"]
    assert select_for_removal(tests, RetentionPolicy(max_tests=0), now) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="max_tests"):
        RetentionPolicy(max_tests=-1)


def _upload(coordinator: Coordinator, wall: FakeWall, seconds: int) -> str:
    token = coordinator.issue_token()["token"]
    wall.ns += seconds * 10**9
    coordinator.submit_result(token, RESULT)
    return token


def test_retention_keeps_the_files_and_the_index_consistent_also_across_a_crash(tmp_path: Path) -> None:
    wall = FakeWall()
    data = tmp_path / "data"
    coordinator = Coordinator(data, wall_clock=wall, log=lambda line: None,
                              retention=RetentionPolicy(max_tests=2, max_age_s=3600))
    tokens = [_upload(coordinator, wall, 60) for _ in range(3)]
    assert sorted(p.name for p in (data / "tests").iterdir()) == sorted(tokens[1:])
    assert {row["token"] for row in coordinator.store.rows()} == set(tokens[1:])
    assert coordinator.status()["tests"] == 2
    wall.ns += 3600 * 10**9 - 30 * 10**9  # the second is now 90 s past the hour, the third 30 s
    assert coordinator.enforce_retention() == [tokens[1]]
    assert coordinator.status()["tests"] == 1
    coordinator.close()
    # A crash between the rename and the row's deletion: the next start finishes it.
    (data / "tests" / tokens[2]).rename(data / "tests" / f".removing-{tokens[2]}")
    restarted = Coordinator(data, wall_clock=wall, log=lambda line: None)
    assert list((data / "tests").iterdir()) == []
    assert restarted.store.rows() == [] and restarted.status()["tests"] == 0
    restarted.close()


# -- graceful restart ----------------------------------------------------------------------------


def _start_service(data: Path) -> tuple[subprocess.Popen[str], int]:
    env = dict(os.environ, PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    process = subprocess.Popen(
        [sys.executable, "-m", "protolab", "serve-live", "--listen", "127.0.0.1:0", "--data", str(data),
         "--rate-per-address", "0", "--tests-per-address-per-hour", "0"],
        stderr=subprocess.PIPE, text=True, env=env)
    port = await_line(process, lambda line: int(line.split("http://127.0.0.1:")[1].split(",")[0])
                      if "listening on http://127.0.0.1:" in line else None, stream="stderr", what="its start line")
    return process, port


def _uploads_until_killed(port: int, sent: dict[str, bytes], answered: dict[str, int], stop: threading.Event) -> None:
    """Token, then an upload sent in pieces (so the kill can land mid-body), again and again."""
    index = 0
    while not stop.is_set():
        try:
            status, body, _ = request(port, "POST", "/api/token")
            if status != 200:
                continue
            token = body["token"]
            payload = json.dumps(dict(RESULT, index=index, padding="p" * 20_000)).encode()
            index += 1
            sent[token] = payload
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(f"POST /api/result/{token} HTTP/1.1\r\nContent-Length: {len(payload)}\r\n\r\n".encode())
                for start in range(0, len(payload), 4096):
                    sock.sendall(payload[start:start + 4096])
                answer = sock.makefile("rb").readline()
            answered[token] = int(answer.split()[1])
        except (OSError, IndexError, ValueError, http.client.HTTPException):
            return  # the service is gone (a connection refused or cut, an answer cut short)


def test_sigterm_mid_upload_finishes_the_upload_then_stops(tmp_path: Path) -> None:
    data = tmp_path / "data"
    process, port = _start_service(data)
    token = request(port, "POST", "/api/token")[1]["token"]
    payload = json.dumps(dict(RESULT, padding="p" * 50_000)).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(f"POST /api/result/{token} HTTP/1.1\r\nContent-Length: {len(payload)}\r\n\r\n".encode())
        sock.sendall(payload[:1000])
        time.sleep(0.5)  # the handler is reading the body (not timing-critical: it waits for the rest either way)
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        sock.sendall(payload[1000:])
        answer = sock.makefile("rb").readline()
    assert answer.split()[1] == b"200"
    assert process.wait(20) == 0
    assert (data / "tests" / token / "result.json").read_bytes() == payload
    with pytest.raises(OSError):  # it stopped accepting
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_killed_mid_upload_and_restarted_every_stored_result_is_intact(tmp_path: Path) -> None:
    data = tmp_path / "data"
    process, port = _start_service(data)
    sent: dict[str, bytes] = {}
    answered: dict[str, int] = {}
    stop = threading.Event()
    client = threading.Thread(target=_uploads_until_killed, args=(port, sent, answered, stop))
    client.start()
    deadline = time.monotonic() + 20
    while len(answered) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    stop.set()
    client.join(20)
    assert process.wait(20) == -signal.SIGKILL
    assert len(answered) >= 5
    restarted, port = _start_service(data)
    try:
        status = request(port, "GET", "/api/status")[1]
    finally:
        restarted.send_signal(signal.SIGTERM)
        assert restarted.wait(20) == 0
    stored = {p.name for p in (data / "tests").iterdir() if not p.name.startswith(".")}
    acknowledged = {token for token, code in answered.items() if code == 200}
    assert acknowledged <= stored  # every upload answered 200 survived
    assert stored <= set(sent)
    for token in stored:  # and every stored one is whole: the bytes sent, its meta, its row
        assert (data / "tests" / token / "result.json").read_bytes() == sent[token]
        assert json.loads((data / "tests" / token / "meta.json").read_text())["token"] == token
    assert status["tests"] == len(stored)
    assert {row["token"] for row in LiveStore(data / "live.duckdb").rows()} == stored


def test_behind_a_trusted_proxy_the_client_is_the_forwarded_address(tmp_path: Path) -> None:
    coordinator = Coordinator(tmp_path / "data", log=lambda line: None)
    lines: list[str] = []
    server = serve(coordinator, "127.0.0.1", 0, log=lines.append, trusted_proxies=frozenset({"127.0.0.1"}),
                   log_format="json")
    port = server.server_port
    try:
        status, issued, _ = request(port, "POST", "/api/token", headers={"X-Forwarded-For": "198.51.100.9, 192.0.2.7"})
        assert status == 200
        status, body, _ = request(port, "POST", "/api/token", headers={"X-Forwarded-For": "192.0.2.8"})
        assert (status, body["message"]) == (409, "another test is running; ask again later")
        status, body, _ = request(port, "POST", "/api/token", headers={"X-Forwarded-For": "192.0.2.7"})
        assert status == 409 and "your address" in body["message"]
        status, body, _ = request(port, "POST", "/api/token", headers={"X-Forwarded-For": "not an address"})
        assert status == 409 and "your address" not in body["message"]  # taken as the proxy's own
        assert request(port, "POST", f"/api/result/{issued['token']}", RESULT)[0] == 200
        meta = request(port, "GET", f"/api/tests/{issued['token']}")[1]["meta"]
        assert meta["token_peer"] == "192.0.2.7"
    finally:
        server.close()
    assert [json.loads(line)["peer"] for line in lines][:3] == ["192.0.2.7", "192.0.2.8", "192.0.2.7"]
    untrusting = serve(Coordinator(tmp_path / "other", log=lambda line: None), "127.0.0.1", 0, log=lambda line: None)
    try:
        issued = request(untrusting.server_port, "POST", "/api/token", headers={"X-Forwarded-For": "192.0.2.7"})[1]
        request(untrusting.server_port, "POST", f"/api/result/{issued['token']}", RESULT)
        meta = request(untrusting.server_port, "GET", f"/api/tests/{issued['token']}")[1]["meta"]
        assert meta["token_peer"] == "127.0.0.1"  # a client cannot pick its address
    finally:
        untrusting.close()
