"""Every protocol mode of the page-load engine through the real emulator: `protolab-net serve`
in the server namespace, `protolab-net load` in the client namespace, a corpus page with many
objects on three origins and nested dependencies (the Table I replica of yahoo: 86 objects,
839 kB). Checks what arrived, the connection counts per origin each mode must open, that the
bytes crossed the emulated link, and that h2-mptcp really carries data on two subflows (the
lab's `ip mptcp` set-up, Lab.enable_mptcp) as the client's and the server's samples both show.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from awaiting import await_listening, wait_until

from protolab.corpus import site_manifest
from protolab.lab import Lab, dumbbell, host, link, path
from protolab.results.samples import read_samples
from protolab.run.session import MPTCP_SIGNAL_ADDRESS

pytestmark = pytest.mark.lab

PAGE = "yahoo"


@pytest.fixture(scope="module")
def served(emu_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, Path, dict[str, Any]]]:
    work = tmp_path_factory.mktemp("modes")
    manifest = site_manifest(PAGE)
    (work / "page.json").write_text(json.dumps(manifest))
    addresses = [o["address"] for o in manifest["origins"]]
    topology = dumbbell(
        "tm" + str(int(time.time() * 1000) % 10**7),
        [host("client", "left", ["10.77.0.1"])],
        [host("server", "right", [*addresses, MPTCP_SIGNAL_ADDRESS])],
        paths=[path("p0", forward=link(100_000_000, delay_ns=5_000_000), reverse=link(100_000_000, delay_ns=5_000_000))],
        tcp_congestion="cubic",
    )
    with Lab(topology, binary=emu_binary) as lab:
        lab.enable_mptcp("client", "server", MPTCP_SIGNAL_ADDRESS)
        server = lab.spawn("server", [emu_binary, "serve", "--manifest", work / "page.json", "--tls-dir", work / "tls",
                                      "--mptcp", "--samples", work / "server-samples", "--sample-interval-ms", "5"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        await_listening(server)
        yield lab, work, manifest


def _load(lab: Lab, binary: Path, work: Path, mode: str, *extra: str) -> dict[str, Any]:
    out = work / f"load-{mode.replace(':', '-')}.json"
    done = lab.run("client", [binary, "load", "--manifest", work / "page.json", "--mode", mode, "--ca", work / "tls" / "ca.pem",
                              "--out", out, *extra], check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    return result


MODES: list[tuple[str, Callable[[int], bool]]] = [
    ("h1c", lambda n: 1 <= n <= 6),
    ("h1", lambda n: 1 <= n <= 6),
    ("h2", lambda n: n == 1),
    ("h2-parallel:3", lambda n: n == 3),
    ("h2-mptcp", lambda n: n == 1),
    ("h3", lambda n: n == 1),
    ("h3-parallel:2", lambda n: n == 2),
]


@pytest.mark.parametrize(("mode", "per_origin_ok"), MODES, ids=[m for m, _ in MODES])
def test_mode_loads_the_page_through_the_emulator(served: Any, emu_binary: Path, mode: str,
                                                  per_origin_ok: Callable[[int], bool]) -> None:
    lab, work, manifest = served
    lab.reset_counters()
    result = _load(lab, emu_binary, work, mode)
    assert result["status"] == "ok", result["error"]
    assert result["config"]["mode"] == mode
    sizes = {(o["origin"], o["path"]): o["size"] for o in manifest["objects"]}
    got = {(o["origin"], o["path"]): o["bytes"] for o in result["objects"]}
    assert got == sizes
    assert all(o["status"] == 200 for o in result["objects"])
    per_origin = Counter(c["origin"] for c in result["connections"])
    assert set(per_origin) == {o["hostname"] for o in manifest["origins"]}
    assert all(per_origin_ok(n) for n in per_origin.values()), per_origin
    if mode.startswith("h1"):
        # The image origin has dozens of images pending at once: the browser limit is reached.
        assert max(per_origin.values()) == 6, per_origin
    transports = {c["transport"] for c in result["connections"]}
    assert transports == {"quic" if mode.startswith("h3") else "mptcp" if mode == "h2-mptcp" else "tcp"}
    # Everything crossed the emulated path (plus headers, handshakes and retransmissions).
    delivered = lab.counters()["paths"]["p0"]["reverse"]["delivered_bytes"]
    assert delivered >= result["bytes"] > 0
    assert delivered < 1.25 * result["bytes"], (delivered, result["bytes"])


def test_h2_mptcp_uses_two_subflows(served: Any, emu_binary: Path) -> None:
    lab, work, manifest = served
    samples = work / "client-samples"
    result = _load(lab, emu_binary, work, "h2-mptcp", "--samples", str(samples), "--sample-interval-ms", "5")
    assert result["status"] == "ok", result["error"]
    for conn in result["connections"]:
        assert conn["transport"] == "mptcp"
        assert conn["subflows"] == 2, conn
        details = conn["subflow_details"]
        assert len(details) == 2, conn
        remotes = {d["remote"].rsplit(":", 1)[0] for d in details}
        assert remotes == {conn["remote"].rsplit(":", 1)[0], MPTCP_SIGNAL_ADDRESS}, details
    # On the largest connection (the image origin) both subflows carried page data.
    biggest = max(result["connections"], key=lambda c: c["bytes"])
    assert min(d["bytes_received"] for d in biggest["subflow_details"]) > 0.05 * biggest["bytes"], biggest
    assert sum(d["bytes_received"] for d in biggest["subflow_details"]) >= biggest["bytes"]
    # The client's samples show both subflows of that connection, and so do the server's (same
    # connection id; the server ends its file once it sees the connection closed).
    rows = [r for r in read_samples(samples) if r["conn"] == biggest["conn_id"]]
    assert {r["subflow"] for r in rows} == {0, 1}
    assert all(r["role"] == "client" and r["transport"] == "mptcp" for r in rows)
    server_file = work / "server-samples" / Path(biggest["samples_file"]).name.replace("client-", "server-", 1)


    def server_lines() -> list[dict[str, Any]] | None:
        """The server's file once it has rows of both subflows (complete lines only: the server
        writes it for as long as it sees the connection)."""
        text = server_file.read_text() if server_file.exists() else ""
        lines = [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]
        return lines if {r.get("subflow") for r in lines[1:]} >= {0, 1} else None

    header, *server_rows = wait_until(server_lines, what=f"rows of both subflows in {server_file}", within=10)
    assert header["conn"] == biggest["conn_id"] and header["role"] == "server" and header["mptcp_fallback"] is False
    sent = {}
    for r in server_rows:
        sent[r["subflow"]] = r["bytes_acked"]
    assert set(sent) == {0, 1} and all(v > 0 for v in sent.values()), sent


def _bulk(lab: Lab, binary: Path, work: Path, manifest: dict[str, Any], *args: str) -> dict[str, Any]:
    """`protolab-net bulk` against the page's first origin."""
    out = work / "bulk.json"
    origin = manifest["origins"][0]
    done = lab.run("client", [binary, "bulk", "--server", origin["address"], "--host", origin["hostname"],
                              "--ca", work / "tls" / "ca.pem", "--out", out, *args], check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    return result


@pytest.mark.parametrize("protocol", ["tcp", "h2", "h3"])
def test_bulk_through_the_emulator(served: Any, emu_binary: Path, protocol: str) -> None:
    """Unpaced downloads fill most of the 100 Mbit/s path and no more; paced transfers (003's
    "limited" tests) hold 20 Mbit/s in both directions; the bytes crossed the emulator."""
    lab, work, manifest = served
    lab.reset_counters()
    r = _bulk(lab, emu_binary, work, manifest, "--protocol", protocol, "--bytes", "6000000")
    assert r["status"] == "ok" and r["bytes"] == 6_000_000, r["error"]
    assert 40e6 < r["goodput_bps"] <= 100e6, r["goodput_bps"]
    assert lab.counters()["paths"]["p0"]["reverse"]["delivered_bytes"] >= 6_000_000
    for direction in ("download", "upload"):
        r = _bulk(lab, emu_binary, work, manifest, "--protocol", protocol, "--direction", direction, "--duration-ms", "2500",
                  "--rate", "20mbit", "--interval-ms", "250")
        assert r["status"] == "ok", r["error"]
        assert r["goodput_bps"] == pytest.approx(20e6, rel=0.1), (direction, r["goodput_bps"])
        # Steady state: the middle intervals hold the rate too, not just the average.
        middle = sorted(row["rate_bps"] for row in r["intervals"][2:-1])
        assert middle[len(middle) // 2] == pytest.approx(20e6, rel=0.1), (direction, middle)


def test_bulk_over_mptcp_uses_the_servers_mptcp(served: Any, emu_binary: Path) -> None:
    lab, work, manifest = served
    r = _bulk(lab, emu_binary, work, manifest, "--protocol", "h2", "--mptcp", "--bytes", "3000000")
    assert r["status"] == "ok", r["error"]
    assert r["connection"]["transport"] == "mptcp" and r["connection"]["mptcp_fallback"] is False, r["connection"]
