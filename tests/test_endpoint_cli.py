"""Bad input to `protolab-net serve` and `protolab-net load`: a clear message naming the file,
field or flag, exit status 2, no panic, and nothing left behind (no result file, no samples or
TLS directory). An unreachable origin is not bad input: the load runs, fails, writes its result
and exits 1."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
from awaiting import await_listening

PAGE = {
    "schema_version": 1, "name": "cli", "seed": 1,
    "origins": [{"hostname": "www.cli.test", "address": "127.0.0.9"}],
    "objects": [{"path": "/", "origin": "www.cli.test", "size": 1000, "content_type": "text/html"}],
}


def _run(binary: Path, *argv: str | Path, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *map(str, argv)], capture_output=True, text=True, timeout=timeout, check=False)


def _bad(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "panicked" not in done.stderr and "RUST_BACKTRACE" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in done.stderr, (needle, done.stderr)


@pytest.fixture
def page(tmp_path: Path) -> Path:
    path = tmp_path / "page.json"
    path.write_text(json.dumps(PAGE))
    return path


@pytest.fixture
def ca(tmp_path: Path, emu_binary: Path, page: Path) -> Path:
    """A real CA: the server writes it when it starts (then it is stopped)."""
    tls = tmp_path / "tls"
    proc = subprocess.Popen([str(emu_binary), "serve", "--listen", "127.0.0.1", "--http-port", "0", "--https-port", "0",
                             "--raw-port", "off", "--tls-dir", str(tls)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        await_listening(proc)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return tls / "ca.pem"


def test_load_bad_input(emu_binary: Path, tmp_path: Path, page: Path, ca: Path) -> None:
    out = tmp_path / "result.json"
    samples = tmp_path / "samples"
    base = ["load", "--out", out, "--samples", samples]
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": 1, "name": "x", "origins": [], "objects": [{"path": "/"}]')
    _bad(_run(emu_binary, *base, "--manifest", broken, "--mode", "h1c"), str(broken))
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**PAGE, "objects": [{**PAGE["objects"][0], "size": "big"}]}))
    _bad(_run(emu_binary, *base, "--manifest", wrong, "--mode", "h1c"), str(wrong), "size")
    _bad(_run(emu_binary, *base, "--manifest", tmp_path / "missing.json", "--mode", "h1c"), "missing.json")
    _bad(_run(emu_binary, *base, "--manifest", page, "--mode", "h4"), "--mode", "unknown mode", "h2-parallel:N")
    _bad(_run(emu_binary, *base, "--manifest", page, "--mode", "h2-parallel:0"), "--mode", "h2-parallel")
    _bad(_run(emu_binary, *base, "--manifest", page, "--mode", "h2"), "--ca")
    _bad(_run(emu_binary, *base, "--manifest", page, "--mode", "h2", "--ca", tmp_path / "nope.pem"), "nope.pem")
    _bad(_run(emu_binary, *base, "--manifest", page, "--mode", "h3", "--ca", page), str(page), "certificate")
    _bad(_run(emu_binary, *base, "--manifest", page, "--mode", "h3", "--ca", ca, "--quic-cc", "vegas"), "--quic-cc", "vegas")
    _bad(_run(emu_binary, *base, "--manifest", page, "--mode", "h3", "--ca", ca, "--quic-packet-threshold", "1"),
         "--quic-packet-threshold: 1 is below")
    _bad(_run(emu_binary, *base, "--manifest", page, "--mode", "h1c", "--sample-interval-ms", "0"), "--sample-interval-ms")
    _bad(_run(emu_binary, *base, "--manifest", page, "--mode", "h1c", "--scheduler", "random"), "--scheduler")
    _bad(_run(emu_binary, "load", "--manifest", page, "--mode", "h1c", "--out", tmp_path / "no" / "dir" / "r.json"), "--out")
    assert not out.exists() and not samples.exists()


def test_load_of_an_unreachable_origin_fails_with_a_result(emu_binary: Path, tmp_path: Path, page: Path, ca: Path) -> None:
    for mode in ("h1c", "h2", "h3"):
        out = tmp_path / f"{mode}.json"
        # Nothing listens on 127.0.0.9:9 (TCP refuses at once; QUIC gets no answer).
        done = _run(emu_binary, "load", "--manifest", page, "--mode", mode, "--ca", ca, "--out", out,
                    "--http-port", "9", "--https-port", "9", "--connect-timeout-ms", "300")
        assert done.returncode == 1, done.stderr
        assert "panicked" not in done.stderr
        assert "127.0.0.9:9" in done.stderr, done.stderr
        result = json.loads(out.read_text())
        assert result["status"] == "failed" and result["plt_ms"] is None
        assert "127.0.0.9:9" in result["objects"][0]["error"]
        assert result["connections"][0]["error"]


def test_serve_bad_input(emu_binary: Path, tmp_path: Path, page: Path) -> None:
    tls = tmp_path / "tls"
    samples = tmp_path / "samples"
    base = ["serve", "--tls-dir", tls, "--samples", samples, "--http-port", "0", "--https-port", "0"]
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    _bad(_run(emu_binary, *base, "--manifest", broken), str(broken))
    _bad(_run(emu_binary, *base, "--manifest", page, "--quic-cc", "vegas"), "--quic-cc", "vegas")
    _bad(_run(emu_binary, *base, "--manifest", page, "--quic-time-threshold", "0.5"), "--quic-time-threshold")
    _bad(_run(emu_binary, *base, "--manifest", page, "--max-header-bytes", "100"), "--max-header-bytes")
    done = _run(emu_binary, *base, "--manifest", page, "--tcp-cc", "vegas")
    assert done.returncode == 2 and "vegas" in done.stderr and "panicked" not in done.stderr
    # An address of no interface here, and a port in use: bind errors name the address.
    _bad(_run(emu_binary, *base, "--listen", "192.0.2.77"), "192.0.2.77")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _bad(_run(emu_binary, "serve", "--tls-dir", tls, "--samples", samples, "--listen", "127.0.0.1",
                  "--http-port", str(port), "--https-port", "0"), f"127.0.0.1:{port}")
    assert not tls.exists() and not samples.exists()


def test_bulk_bad_input(emu_binary: Path, tmp_path: Path, ca: Path) -> None:
    out = tmp_path / "bulk.json"
    samples = tmp_path / "samples"
    base = ["bulk", "--server", "127.0.0.9", "--out", out, "--samples", samples]
    _bad(_run(emu_binary, *base, "--protocol", "h4", "--bytes", "10"), "unknown protocol", "h4")
    _bad(_run(emu_binary, *base, "--protocol", "h2", "--direction", "sideways", "--bytes", "10", "--ca", ca), "sideways")
    _bad(_run(emu_binary, *base, "--protocol", "h2", "--bytes", "10"), "--ca")
    _bad(_run(emu_binary, *base, "--protocol", "tcp", "--bytes", "10", "--rate", "0"), "--rate")
    _bad(_run(emu_binary, *base, "--protocol", "tcp", "--bytes", "10", "--rate", "fast"), "--rate")
    _bad(_run(emu_binary, *base, "--protocol", "tcp", "--bytes", "0"), "--bytes")
    _bad(_run(emu_binary, *base, "--protocol", "h2", "--bytes", "10", "--ca", ca, "--qlog", tmp_path / "q"), "--qlog")
    _bad(_run(emu_binary, *base, "--protocol", "h2", "--direction", "upload", "--bytes", "10", "--ca", ca, "--path", "/x"), "--path")
    _bad(_run(emu_binary, *base, "--protocol", "h3", "--bytes", "10", "--ca", ca, "--quic-cc", "vegas"), "--quic-cc", "vegas")
    both = _run(emu_binary, *base, "--protocol", "tcp", "--bytes", "10", "--duration-ms", "10")
    assert both.returncode == 2 and "--duration-ms" in both.stderr and "panicked" not in both.stderr
    assert not out.exists() and not samples.exists() and not (tmp_path / "q").exists()


def test_bulk_to_an_unreachable_server_fails_with_a_result(emu_binary: Path, tmp_path: Path, ca: Path) -> None:
    for protocol in ("tcp", "h2", "h3"):
        out = tmp_path / f"{protocol}.json"
        done = _run(emu_binary, "bulk", "--server", "127.0.0.9", "--protocol", protocol, "--bytes", "1000", "--ca", ca,
                    "--raw-port", "9", "--https-port", "9", "--connect-timeout-ms", "300", "--out", out)
        assert done.returncode == 1, done.stderr
        assert "panicked" not in done.stderr and "127.0.0.9:9" in done.stderr, done.stderr
        result = json.loads(out.read_text())
        assert result["status"] == "failed" and result["bytes"] == 0 and "127.0.0.9:9" in result["error"]
