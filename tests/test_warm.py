"""Warm loads (docs/load.md, "Warm loads"): the `warm` axis, Chromium's NetLog facts, and real
warm loads through the emulator by the engine and by Chromium, which resume the TLS sessions of
a priming load and, over HTTP/3, send their first requests as 0-RTT data answered in 0.5-RTT."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import run_protolab, toml_text

from protolab.browser.netlog import SessionFacts, annotate, session_facts
from protolab.plan.experiment import SpecError, spec_from_dict
from protolab.run.runner import plan

CHROMIUM = Path("/usr/bin/chromium")
RTT_MS = 60


def _netlog(events: list[dict[str, Any]]) -> dict[str, Any]:
    types = ["SSL_CONNECT", "TCP_CONNECT", "QUIC_SESSION_ZERO_RTT_STATE", "SOCKET_BYTES_SENT"]
    return {"constants": {"logEventTypes": {t: i for i, t in enumerate(types)},
                          "logEventPhase": {"PHASE_BEGIN": 1, "PHASE_END": 2, "PHASE_NONE": 0}},
            "events": events}


def test_netlog_gives_resumption_and_0rtt_per_connection() -> None:
    log = _netlog([
        {"type": 1, "phase": 2, "source": {"id": 7}, "params": {"local_address": "10.0.0.1:4000"}},
        {"type": 0, "phase": 1, "source": {"id": 7}},
        {"type": 0, "phase": 2, "source": {"id": 7}, "params": {"is_resumed": True, "version": "TLS 1.3"}},
        {"type": 0, "phase": 2, "source": {"id": 8}, "params": {"is_resumed": False}},
        {"type": 2, "phase": 0, "source": {"id": 9}, "params": {"state": "AttemptedAndSucceeded"}},
        {"type": 2, "phase": 0, "source": {"id": 10}, "params": {"state": "NotAttempted"}},
        {"type": 2, "phase": 0, "source": {"id": 11}, "params": {"state": "AttemptedAndRejected"}},
        {"type": 3, "phase": 0, "source": {"id": 7}, "params": {"byte_count": 10}},
        {"type": 99, "phase": 0, "source": {"id": "x"}}, "not an event", {"type": 0, "source": None},
    ])
    facts = session_facts(log)
    assert facts == {7: SessionFacts(True, None, "10.0.0.1:4000"), 8: SessionFacts(False, None, None),
                     9: SessionFacts(True, True, None), 10: SessionFacts(False, None, None),
                     11: SessionFacts(True, False, None)}
    conns = [{"id": 7, "local": None}, {"id": 9, "local": "kept"}, {"id": 12, "local": None}]
    annotate(conns, facts)
    assert conns == [{"id": 7, "local": "10.0.0.1:4000", "resumed": True, "zero_rtt": None},
                     {"id": 9, "local": "kept", "resumed": True, "zero_rtt": True},
                     {"id": 12, "local": None}]
    # Not a NetLog, or one cut short: no facts, no error.
    assert session_facts([]) == session_facts({"constants": {}}) == session_facts({"events": "x"}) == {}


def _spec(**extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schema_version": 1, "name": "warm", "scenario": "wifi-loss", "seed": 1, "repetitions": 1, "timeout_s": 60,
        "axes": {"bandwidth_mbps": [20], "rtt_ms": [RTT_MS], "loss_pct": [0], "buffer": ["1bdp"], "mode": ["h2", "h3"],
                 "page": ["wikipedia"]},
        "transport": {"tcp_cc": "cubic"},
    }
    for key, value in extra.items():
        spec[key] = {**spec.get(key, {}), **value}
    return spec


def test_warm_axis_keeps_cold_run_keys_and_is_for_page_loads(tmp_path: Path) -> None:
    plain = plan(spec_from_dict(_spec(), source="s.toml", path=tmp_path / "s.toml"))
    both = plan(spec_from_dict(_spec(axes={"warm": ["cold", "resumed"]}), source="s.toml", path=tmp_path / "s.toml"))
    cold = [r for r in both if r.transport["warm"] == "cold"]
    resumed = [r for r in both if r.transport["warm"] == "resumed"]
    # Runs from before the axis existed keep their keys (and their results, on resume).
    assert sorted(r.key for r in cold) == sorted(r.key for r in plain)
    assert len(resumed) == 2 and not {r.key for r in resumed} & {r.key for r in cold}
    with pytest.raises(SpecError, match=r"s\.toml: transport\.warm"):
        spec_from_dict(_spec(transport={"warm": "hot"}), source="s.toml", path=tmp_path / "s.toml")
    bulk = {"schema_version": 1, "scenario": "cc-suite", "axes": {"warm": ["cold", "resumed"]}}
    with pytest.raises(SpecError, match=r"b\.toml: axes\.warm: warm loads are page loads; scenario \"cc-suite\""):
        spec_from_dict(bulk, source="b.toml", path=tmp_path / "b.toml")


@pytest.mark.lab
def test_warm_loads_resume_sessions_and_answer_0rtt_a_round_trip_sooner(emu_binary: Path, tmp_path: Path) -> None:
    clients = ["engine", "chromium"] if CHROMIUM.exists() else ["engine"]
    spec = tmp_path / "warm.toml"
    spec.write_text(toml_text(_spec(axes={"warm": ["cold", "resumed"], "client": clients})))
    results = tmp_path / "results"
    done = run_protolab("run", spec, "--results", results)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as con:
        runs = con.execute("SELECT run_key, client, mode, warm, status, error FROM runs").fetchall()
        assert len(runs) == 4 * len(clients)
        first_byte: dict[tuple[str, str, str], float] = {}
        for key, client, mode, warm, status, error in runs:
            assert (status, error) == ("ok", None), (client, mode, warm)
            conns = con.execute("SELECT origin, resumed, zero_rtt FROM connections WHERE run_key = ? "
                                "ORDER BY connect_start_ms", [key]).fetchall()
            assert conns, (client, mode, warm)
            if warm == "resumed":
                # Every connection resumed a primed session; HTTP/3 sent 0-RTT and it was accepted.
                assert all(r for _, r, _ in conns), (client, mode, conns)
                assert all(z is (True if mode == "h3" else None) for *_, z in conns), (client, mode, conns)
            else:
                first = {}
                for origin, r, z in conns:
                    first.setdefault(origin, r)
                    assert z is None, (client, mode, conns)
                assert not any(first.values()), (client, mode, conns)
            (root,) = con.execute("SELECT first_byte_ms FROM objects WHERE run_key = ? AND parent IS NULL",
                                  [key]).fetchone()
            first_byte[(client, mode, warm)] = root
    for client in clients:
        # 0-RTT with a 0.5-RTT answer saves a round trip (cold: handshake, then request; warm:
        # the request rides on the first flight). TLS 1.3 resumption over TCP saves none: the
        # root still takes TCP's, TLS's and the request's round trips (a bound that a busy
        # machine, which only adds, cannot break; what it adds to a full handshake's CPU time
        # can make cold h2 slower, so no upper bound on h2's difference).
        h3_saved = first_byte[(client, "h3", "cold")] - first_byte[(client, "h3", "resumed")]
        assert h3_saved > 0.5 * RTT_MS, (client, first_byte)
        assert first_byte[(client, "h3", "cold")] >= 1.95 * RTT_MS, (client, first_byte)
        assert first_byte[(client, "h2", "resumed")] >= 2.95 * RTT_MS, (client, first_byte)
    built = subprocess.run([sys.executable, "-m", "protolab", "report", str(results)], capture_output=True, text=True,
                           timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-2000:]
    html = (results / "report" / "index.html").read_text()
    assert "cold loads" in html and "resumed loads" in html
