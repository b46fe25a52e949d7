"""Pure helpers: statistics, tool-output parsers, event-log analysis, topology builders, CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from protolab.cli import app
from protolab.errors import LabError, ToolError
from protolab.lab import dumbbell, find_binary, host, ideal_link, link, mbps_to_bps, ms_to_ns, path
from protolab.lab.lab import Ready, _lab_name_of
from protolab.measure.events import (
    flow_key,
    paths_per_flow,
    read_header,
    xor_path_index,
)
from protolab.measure.stats import clopper_pearson
from protolab.measure.tools import parse_iperf3, parse_irtt, parse_ping
from protolab.validate.plumbing import validation_topology
from protolab.validate.report import ValidationConfig

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- statistics


def test_clopper_pearson_matches_known_values() -> None:
    # Reference: the exact 95% interval for 5/10 is (0.1871, 0.8129).
    low, high = clopper_pearson(5, 10, 0.95)
    assert low == pytest.approx(0.18709, abs=1e-4)
    assert high == pytest.approx(0.81291, abs=1e-4)


def test_clopper_pearson_edges_are_closed_form() -> None:
    n = 1500
    low, high = clopper_pearson(0, n, 0.99)
    assert low == 0.0
    assert high == pytest.approx(1 - 0.005 ** (1 / n), rel=1e-9)
    low, high = clopper_pearson(n, n, 0.99)
    assert high == 1.0
    assert low == pytest.approx(0.005 ** (1 / n), rel=1e-9)


def test_clopper_pearson_thesis_table6_levels() -> None:
    # 004 Table 6: 2.58% observed over 1500 pings at 2.5% configured; 2.5% lies inside.
    low, high = clopper_pearson(39, 1500, 0.99)
    assert low < 0.025 < high
    # 30 losses of 1500 (2%) do not fit a 0.1% loss rate.
    low, _ = clopper_pearson(30, 1500, 0.99)
    assert low > 0.001


@pytest.mark.parametrize("args", [(1, 0), (-1, 10), (11, 10)])
def test_clopper_pearson_rejects_nonsense(args: tuple[int, int]) -> None:
    with pytest.raises(ValueError):
        clopper_pearson(*args)


# ----------------------------------------------------------------------------- tool parsers


def test_parse_irtt_fixture() -> None:
    result = parse_irtt((FIXTURES / "irtt_client.json").read_text())
    assert result.packets_sent == 6
    assert (result.lost_up, result.lost_down, result.lost_unknown) == (1, 1, 1)
    assert result.upstream_trials == 5
    assert result.downstream_trials == 4
    assert result.rtt_min_ms == pytest.approx(0.027129)
    assert result.rtt_mean_ms == pytest.approx(0.142558)
    assert result.rtt_std_ms == pytest.approx(0.059426)
    assert result.ipdv_rtt_mean_ms == pytest.approx(0.047106)


def test_parse_irtt_without_samples_gives_nan() -> None:
    text = json.dumps({"stats": {"packets_sent": 3, "packets_received": 0}, "round_trips": []})
    result = parse_irtt(text)
    assert math.isnan(result.rtt_min_ms)
    assert result.packets_received == 0


def test_parse_irtt_rejects_other_json() -> None:
    with pytest.raises(ToolError, match="irtt"):
        parse_irtt('{"hello": 1}')


def test_parse_iperf3_fixture() -> None:
    result = parse_iperf3((FIXTURES / "iperf3_client.json").read_text())
    assert result.goodput_bps == pytest.approx(50254984.02187463)
    assert result.received_bytes == 12582912
    assert result.congestion == "cubic"
    assert result.streams == [(33646, 5299)]
    assert result.retransmits == 0


def test_parse_iperf3_error_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="unable to connect"):
        parse_iperf3('{"start": {}, "intervals": [], "end": {}, "error": "error - unable to connect to server"}')
    with pytest.raises(ToolError, match="not JSON"):
        parse_iperf3("")


def test_parse_ping_summary() -> None:
    result = parse_ping((FIXTURES / "ping_ok.txt").read_text())
    assert (result.transmitted, result.received, result.lost) == (3, 3, 0)
    assert result.rtt_min_ms == pytest.approx(0.055)
    assert result.rtt_mean_ms == pytest.approx(0.094)


def test_parse_ping_total_loss_and_errors() -> None:
    text = ("--- 10.77.1.1 ping statistics ---\n"
            "5 packets transmitted, 0 received, +5 errors, 100% packet loss, time 4ms\n")
    result = parse_ping(text)
    assert result.lost == 5
    assert math.isnan(result.rtt_min_ms)
    with pytest.raises(ToolError):
        parse_ping("ping: connect: Network is unreachable\n")


# ----------------------------------------------------------------------------- event log

def _event(t: int, ev: str, link_name: str, src: str, sport: int, dst: str, dport: int, proto: int = 6) -> dict:
    return {"t": t, "ev": ev, "link": link_name, "src": src, "dst": dst, "sport": sport, "dport": dport,
            "proto": proto, "size": 60, "ip_id": t}


CLIENT_ADDR, SERVER_ADDR = "10.77.0.1", "10.77.1.1"
EVENTS = [
    {"schema": "protolab.events", "schema_version": 1, "lab": "x", "start_unix_ns": 1},
    # flow A (client port 40000 -> 5201) on p1 in both directions, plus its access link
    _event(2, "enqueue", "client.up", CLIENT_ADDR, 40000, SERVER_ADDR, 5201),
    _event(3, "deliver", "p1.forward", CLIENT_ADDR, 40000, SERVER_ADDR, 5201),
    _event(4, "deliver", "p1.reverse", SERVER_ADDR, 5201, CLIENT_ADDR, 40000),
    # flow B split over both paths (a violation)
    _event(5, "deliver", "p0.forward", CLIENT_ADDR, 40002, SERVER_ADDR, 5202),
    {**_event(6, "drop", "p1.reverse", SERVER_ADDR, 5202, CLIENT_ADDR, 40002), "cause": "random_loss"},
    # UDP is ignored when asking about TCP
    _event(7, "deliver", "p0.forward", CLIENT_ADDR, 1, SERVER_ADDR, 2112, proto=17),
]


def test_paths_per_flow_is_direction_independent() -> None:
    lines = [json.dumps(e) for e in EVENTS]
    crossed = paths_per_flow(lines, ["p0", "p1"])
    flow_a = flow_key("10.77.1.1", 5201, "10.77.0.1", 40000, 6)
    flow_b = flow_key("10.77.0.1", 40002, "10.77.1.1", 5202, 6)
    assert crossed == {flow_a: {"p1"}, flow_b: {"p0", "p1"}}
    assert read_header(lines[0])["lab"] == "x"


def test_flow_key_orders_endpoints() -> None:
    assert flow_key("10.77.1.1", 80, "10.77.0.1", 5000, 6) == flow_key("10.77.0.1", 5000, "10.77.1.1", 80, 6)


def test_xor_path_index_follows_the_001_hash() -> None:
    # 10.77.0.1 ^ 10.77.1.1 = 0x100; ^ 40000 ^ 5201 ^ 6 -> parity decided by the odd port 5201.
    assert xor_path_index("10.77.0.1", "10.77.1.1", 40000, 5201, 6, 2) == 1
    assert xor_path_index("10.77.0.1", "10.77.1.1", 40000, 5202, 6, 2) == 0
    # symmetric
    assert xor_path_index("10.77.1.1", "10.77.0.1", 5201, 40000, 6, 2) == 1
    assert xor_path_index("10.77.0.1", "10.77.1.1", 40000, 5201, 6, 1) == 0


# ----------------------------------------------------------------------------- topology builders


def test_link_builds_documented_fields() -> None:
    assert link(mbps_to_bps(10), delay_ns=ms_to_ns(5), jitter_ns=ms_to_ns(1.5), loss=0.02, queue_bytes=45000) == {
        "rate_bps": 10_000_000,
        "delay_ns": 5_000_000,
        "jitter": {"std_ns": 1_500_000, "dist": "normal", "preserve_order": False},
        "loss": {"kind": "bernoulli", "p": 0.02},
        "queue": {"kind": "droptail", "bytes": 45000},
    }
    assert link() == {}
    assert link(queue_kind="codel") == {"queue": {"kind": "codel"}}
    assert link(queue_kind="fq_codel", queue_packets=100) == {"queue": {"kind": "fq_codel", "packets": 100}}
    shaper = {"rate_bps": 10_000_000, "burst_bytes": 15_000, "limit_bytes": 50_000}
    assert link(shaper=shaper) == {"shaper": shaper}
    with pytest.raises(ValueError):
        link(queue_bytes=1, queue_packets=1)


def test_unit_helpers_give_the_emulator_s_integers() -> None:
    assert mbps_to_bps(0.2) == 200_000 and isinstance(mbps_to_bps(0.2), int)
    assert mbps_to_bps(1000) == 1_000_000_000
    assert ms_to_ns(0.0001) == 100
    assert ms_to_ns(2.5) == 2_500_000


def test_ideal_link_resets_every_field() -> None:
    params = ideal_link(delay_ns=ms_to_ns(10))
    assert params["rate_bps"] is None and params["trace"] is None
    assert params["jitter"] is None and params["loss"] is None and params["shaper"] is None
    assert params["delay_ns"] == 10_000_000
    assert params["queue"] == {"kind": "droptail", "packets": 1000}


def test_dumbbell_shape() -> None:
    topo = dumbbell(
        "demo",
        ["c1", host("c2", "left", ["10.77.0.9"], up=link(mbps_to_bps(5)))],
        ["s"],
        paths=[path("p0", forward=link(mbps_to_bps(10))), "p1"],
        pins=[("c1", "s", "p1")],
        sysctls={"net.ipv4.tcp_ecn": "0"},
    )
    assert topo["lab"] == "demo" and topo["schema_version"] == 1
    hosts = {h["name"]: h for h in topo["hosts"]}
    assert hosts["c1"]["addresses"] == ["10.77.0.1"] and hosts["c1"]["side"] == "left"
    assert hosts["c2"]["addresses"] == ["10.77.0.9"]
    assert hosts["c2"]["access"] == {"up": {"rate_bps": 5_000_000}}
    assert hosts["s"]["addresses"] == ["10.77.1.1"] and hosts["s"]["side"] == "right"
    assert all(h["sysctls"] == {"net.ipv4.tcp_ecn": "0"} for h in topo["hosts"])
    assert [p["name"] for p in topo["paths"]] == ["p0", "p1"]
    assert topo["routing"] == {"mode": "ecmp-xor", "pins": [{"left": "c1", "right": "s", "path": "p1"}]}
    assert [p["name"] for p in dumbbell("x", ["a"], ["b"], paths=3)["paths"]] == ["p0", "p1", "p2"]


def test_validation_topology_pins_the_pair_to_p0() -> None:
    topo = validation_topology(ValidationConfig.for_mode(quick=True))
    assert topo["routing"]["pins"] == [{"left": "client", "right": "server", "path": "p0"}]
    assert {h["name"] for h in topo["hosts"]} == {"client", "server"}


def test_validation_config_refuses_bad_lab_name() -> None:
    with pytest.raises(ValueError):
        ValidationConfig.for_mode(quick=True, lab="Bad-Name")


def test_lab_name_is_read_from_toml_and_json(tmp_path: Path) -> None:
    toml_file = tmp_path / "t.toml"
    toml_file.write_text('schema_version = 1\nlab = "demo"\n')
    json_file = tmp_path / "t.topo"
    json_file.write_text('{"lab": "other"}')
    assert _lab_name_of(toml_file) == "demo"
    assert _lab_name_of(json_file) == "other"
    assert _lab_name_of({"lab": "dict"}) == "dict"
    assert _lab_name_of(tmp_path / "missing.toml") is None


def test_the_ready_line_is_found_and_checked_against_the_contract(tmp_path: Path) -> None:
    """`lab.events.find_event` picks the event's line out of a process's stdout file (other lines
    may come first) and reads it as the contract's model, naming the field a wrong line breaks."""
    from protolab.lab.events import DocumentError, find_event

    out = tmp_path / "emu.stdout"
    line = ('{"ready": true, "lab": "demo", "pid": 1234, "control": "/run/protolab/demo/control.sock", '
            '"namespaces": {"client": "pl-demo-client"}, "start_unix_ns": 1763750000000000000}')
    is_ready = lambda value: "ready" in value  # noqa: E731
    assert find_event(out, Ready, is_ready) is None  # no file yet
    out.write_text("warning: real-time scheduling refused\n" + line[:40])
    assert find_event(out, Ready, is_ready) is None  # the line is not complete
    out.write_text("warning: real-time scheduling refused\n" + line + "\n")
    ready = find_event(out, Ready, is_ready)
    assert ready is not None and ready.namespaces["client"] == "pl-demo-client" and ready.pid == 1234
    out.write_text(line.replace('"pid": 1234', '"pid": -1') + "\n")
    with pytest.raises(DocumentError, match=r"emu.stdout:1: pid: "):
        find_event(out, Ready, is_ready)


# ----------------------------------------------------------------------------- binary lookup and CLI


def test_binary_lookup_explains_what_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PROTOLAB_NET", str(tmp_path / "nope"))
    with pytest.raises(LabError, match="PROTOLAB_NET"):
        find_binary()
    with pytest.raises(LabError, match="not executable"):
        find_binary(tmp_path / "nope")
    fake = tmp_path / "protolab-net"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert find_binary(fake) == fake
    monkeypatch.setenv("PROTOLAB_NET", str(fake))
    assert find_binary() == fake


def _protolab(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # Through the real entry point: the error boundary lives in the app's __call__.
    return subprocess.run([sys.executable, "-m", "protolab", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)


def test_cli_reports_domain_errors_without_traceback(tmp_path: Path) -> None:
    result = _protolab("validate-emulator", "--quick", env={"PROTOLAB_NET": str(tmp_path / "missing-binary")})
    assert result.returncode == 1
    assert "error:" in result.stderr and "missing-binary" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_cli_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = _protolab("--debug", "validate-emulator", "--quick", env={"PROTOLAB_NET": str(tmp_path / "missing")})
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "LabError" in result.stderr


def test_cli_version_is_the_declared_version() -> None:
    # `protolab.__version__` (printed, and recorded in every result) is a copy of the version
    # pyproject.toml declares for the package: they must not drift apart.
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"protolab {declared}"
