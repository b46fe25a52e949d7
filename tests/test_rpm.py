"""The `rpm` scenario (responsiveness, draft-ietf-ippm-responsiveness; docs/rpm.md): the rows of
`rpm_results` computed from a fixed result (expected loaded RTT, factor of increase, foreign
latency, overhead factor), spec errors that name the field, and one real lab run in which a full
8-BDP drop-tail buffer shows up as the loaded latency and CoDel keeps the RPM high."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import duckdb
import pytest
from conftest import lab_namespaces, run_protolab, toml_text

from documents import fixture, rpm_result

from protolab.plan.experiment import parse_spec
from protolab.plan.spec import SpecError
from protolab.results.generated.rpm_result import RpmResult
from protolab.results.rpm import RpmContext, rpm_rows
from protolab.scenarios import Condition
from protolab.scenarios.rpm import Rpm, RpmParams, expected_loaded_rtt_ms

# ---------------------------------------------------------------------- rpm_rows on fixed data

PARAMS = {"bandwidth_mbps": 20, "rtt_ms": 40, "loss_pct": 0, "buffer": "4bdp", "buffer_bytes": 400_000,
          "queue": "droptail"}
DELIVERED = {"p0.reverse": 10_600_000, "p0.forward": 400_000}


def _context(queue: str = "droptail", **params: Any) -> RpmContext:
    condition = Condition.from_axes({**PARAMS, **params})
    return RpmContext(queue=queue, expected_loaded_rtt_ms=expected_loaded_rtt_ms(condition, queue),
                      delivered_bytes=DELIVERED)


def _direction(**extra: Any) -> dict[str, Any]:
    real = fixture("rpm-h2.json")["directions"]["download"]
    probe = real["probes"][0]
    return {
        **real,
        "capacity_bps": 18.5e6,
        "rpm": 300.0,
        "loaded_latency_ms": 200.0,
        "rpm_latency_mean": 300.0,
        "responsiveness": {"foreign_rpm": 400.0, "self_rpm": 240.0, "rpm": 300.0, "tm_http_self_ms": 250.0,
                           "tm_connect_ms": 150.0, "tm_http_foreign_ms": 150.0, "tm_tls_ms": None,
                           "rpm_latency_mean": 300.0,
                           "p90": {"connect_ms": 180.0, "tls_ms": None, "http_foreign_ms": 180.0, "http_self_ms": 400.0,
                                   "rpm": 241.7, "rpm_latency_mean": 206.9}},
        "confidence": {"capacity": "high", "rpm": "medium"},
        "load_connections": 4,
        "load_connections_max": 5,
        "bytes": 10_000_000,
        "duration_s": 8.0,
        "saturated_at": 3,
        "intervals": real["intervals"][:1] * 8,
        "probes": [{**probe, "http_ms": 150.0}, {"t_s": 1.0, "kind": "self", "http_ms": 250.0},
                   {"t_s": 2.0, "kind": "foreign", "error": "no answer within 10000 ms"}],
        "errors": [],
        **extra,
    }


def _result(*directions: str, **overrides: Any) -> RpmResult:
    real = fixture("rpm-h2.json")
    fields = {"protocol": "h3", "status": "ok", "error": None, "idle": {**real["idle"], "rpm": 1500.0, "latency_ms": 40.0},
              "directions": {name: _direction() for name in directions}}
    return rpm_result(**{**fields, **overrides})


def test_rows_of_a_fixed_result_droptail() -> None:
    result = _result("download")
    (row,) = rpm_rows(result, _context())
    # A full drop-tail buffer: 40 ms + 400 000 B x 8 / 20 Mbit/s = 40 + 160 ms.
    assert row["expected_loaded_rtt_ms"] == pytest.approx(40 + 400_000 * 8 / 20e6 * 1000)
    assert row["expected_loaded_rtt_ms"] == pytest.approx(200.0)
    assert row["factor_of_increase"] == pytest.approx(5.0)  # idle 1500 / loaded 300
    assert row["foreign_latency_ms"] == pytest.approx(150.0)  # 60000 / 400
    assert row["self_latency_ms"] == pytest.approx(250.0)
    # The data direction of a download is the bottleneck's reverse link.
    assert row["wire_bytes"] == 10_600_000
    assert row["overhead_factor"] == pytest.approx(10_600_000 / 10_000_000)
    assert row == {
        "direction": "download", "protocol": "h3", "status": "ok", "error": None,
        "started_unix_ns": result.started_unix_ns, "capacity_mbps": pytest.approx(18.5),
        "rpm": 300.0, "loaded_latency_ms": 200.0, "rpm_latency_mean": 300.0, "rpm_p90": 241.7,
        "rpm_latency_mean_p90": 206.9, "foreign_latency_ms": pytest.approx(150.0),
        "self_latency_ms": 250.0, "idle_latency_ms": 40.0, "idle_rpm": 1500.0, "factor_of_increase": pytest.approx(5.0),
        "expected_loaded_rtt_ms": pytest.approx(200.0), "queue": "droptail", "confidence_capacity": "high",
        "confidence_rpm": "medium", "load_connections": 4, "load_connections_max": 5, "intervals": 8, "saturated_at": 3, "probes": 2,
        "probe_errors": 1, "errors": [], "responsiveness": _direction()["responsiveness"],
        "bytes": 10_000_000, "duration_s": 8.0, "wire_bytes": 10_600_000,
        "overhead_factor": pytest.approx(1.06),
        # The fixture was written before the config recorded the directions' order.
        "config": {**fixture("rpm-h2.json")["config"], "direction_order": None},
    }


def test_rows_codel_two_directions_and_missing_values() -> None:
    # CoDel keeps the standing queue near its 5 ms target.
    (codel,) = rpm_rows(_result("download"), _context("codel"))
    assert codel["expected_loaded_rtt_ms"] == pytest.approx(45.0)
    assert codel["queue"] == "codel"
    # Two directions share the run's link counters: no per-direction wire bytes.
    rows = rpm_rows(_result("download", "upload"), _context())
    assert [r["direction"] for r in rows] == ["download", "upload"]
    assert all(r["wire_bytes"] is None and r["overhead_factor"] is None for r in rows)
    assert all(r["expected_loaded_rtt_ms"] == pytest.approx(200.0) for r in rows)
    # The upload's data goes through the forward link.
    (up,) = rpm_rows(_result("upload"), _context())
    assert up["wire_bytes"] == 400_000
    # No rate, no queue: nothing expected. A failed test: no RPM, no factor, no error.
    (unlimited,) = rpm_rows(_result("download"), _context(bandwidth_mbps="unlimited"))
    assert unlimited["expected_loaded_rtt_ms"] is None
    failed = _result("download", status="error", idle=None)
    failed.directions["download"] = failed.directions["download"].model_copy(
        update={"rpm": None, "responsiveness": None, "loaded_latency_ms": None})
    (row,) = rpm_rows(failed, RpmContext())
    assert (row["status"], row["rpm"], row["factor_of_increase"], row["foreign_latency_ms"], row["idle_rpm"]) == (
        "error", None, None, None, None)
    assert row["wire_bytes"] is None and row["overhead_factor"] is None
    assert rpm_rows(_result(status="error"), RpmContext()) == []
    # A result written before the second formula, the P90 and the peak connections: NULL.
    for old in rpm_rows(rpm_result(), RpmContext()):
        assert (old["rpm_latency_mean"], old["rpm_p90"], old["rpm_latency_mean_p90"], old["load_connections_max"]) == (
            None, None, None, None)
        assert old["rpm"] is not None


# ---------------------------------------------------------------------- spec errors

def _spec(**axes: Any) -> dict[str, Any]:
    return {
        "schema_version": 1, "name": "rpm-test", "scenario": "rpm", "seed": 1, "repetitions": 1, "timeout_s": 60,
        "params": {"max_duration_s": 8, "idle_probes": 5},
        "axes": {"bandwidth_mbps": [20], "rtt_ms": [40], "loss_pct": [0], "buffer": ["8bdp"],
                 "queue": ["droptail", "codel"], "mode": ["h3"], **axes},
    }


BAD = [
    ({"queue": ["red"]}, "spec.toml: axes.queue: 'red' is not one of droptail, codel, pie, fq_codel"),
    ({"mode": ["h2-parallel:2"]}, "spec.toml: axes.mode[0]: unknown RPM protocol 'h2-parallel:2' (known: h1, h2, h3)"),
]


@pytest.mark.parametrize(("axes", "expected"), BAD, ids=["queue", "mode"])
def test_bad_rpm_specs_name_the_field(axes: dict[str, Any], expected: str, tmp_path: Path) -> None:
    assert parse_spec(toml_text(_spec())).scenario.name == "rpm"
    with pytest.raises(SpecError) as raised:
        parse_spec(toml_text(_spec(**axes)))
    assert expected in str(raised.value), str(raised.value)
    # The CLI says the same and nothing else: no traceback, exit 1, nothing written.
    file = tmp_path / "bad.toml"
    file.write_text(toml_text(_spec(**axes)))
    done = run_protolab("run", file, "--dry-run", "--results", tmp_path / "r", timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert expected.replace("spec.toml", "bad.toml") in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not (tmp_path / "r").exists()


def test_aqm_targets_and_the_tbf_bottleneck() -> None:
    # PIE steers to 15 ms, FQ-CoDel's per-flow CoDel to 5 ms (the emulator's defaults).
    assert _context("pie").expected_loaded_rtt_ms == pytest.approx(55.0)
    assert _context("fq_codel").expected_loaded_rtt_ms == pytest.approx(45.0)
    scenario = Rpm()
    condition = Condition.from_axes({**PARAMS, "buffer": 50_000, "queue": "pie"})
    plain = scenario.links(RpmParams(), condition)["p0.reverse"]
    assert (plain["rate_bps"], plain["shaper"], plain["queue"]) == (20_000_000, None, {"kind": "pie", "bytes": 50_000})
    # 003 ch. 6: a tbf at the bandwidth with a 50 kB limit, behind a 1 Gbit/s link.
    shaped = scenario.links(RpmParams(shaper_burst_bytes=15_000), condition)["p0.reverse"]
    assert shaped["rate_bps"] == 1_000_000_000
    assert shaped["shaper"] == {"rate_bps": 20_000_000, "burst_bytes": 15_000, "limit_bytes": 50_000}
    with pytest.raises(SpecError, match=r"params.shaper_burst_bytes: a shaper needs a buffer"):
        parse_spec(toml_text({**_spec(buffer=["default"]), "params": {"shaper_burst_bytes": 15_000}}))


# ---------------------------------------------------------------------- a real lab run

class RunRpm(Protocol):
    """What the `run_rpm` fixture gives a test."""

    def __call__(self, document: dict[str, Any], timeout: float) -> Path: ...


@pytest.fixture
def run_rpm(emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> RunRpm:
    """`run_rpm(document, timeout=...)`: runs the spec document in a fresh lab, asserts that the
    run succeeded and left no namespace behind, and returns its results directory."""

    def run(document: dict[str, Any], timeout: float) -> Path:
        spec = tmp_path / "rpm.toml"
        spec.write_text(toml_text(document))
        results = tmp_path / "results"
        name = lab_name()
        done = run_protolab("run", spec, "--results", results, "--lab", name, "--binary", emu_binary, timeout=timeout)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert lab_namespaces(name) == []
        return results

    return run


def _stored(results: Path, query: str) -> list[dict[str, Any]]:
    """The rows of a query on the run's store, as column -> value."""
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as con:
        cursor = con.execute(query)
        columns = [c[0] for c in cursor.description]
        return [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]


@pytest.mark.lab
def test_droptail_buffer_shows_as_loaded_latency_and_codel_keeps_rpm(run_rpm: RunRpm) -> None:
    started = time.monotonic()
    results = run_rpm(_spec(), timeout=180)
    took = time.monotonic() - started
    runs = _stored(results, "SELECT run_key, status, error FROM runs")
    assert len(runs) == 2
    assert all((run["status"], run["error"]) == ("ok", None) for run in runs), runs
    rows = _stored(results, "SELECT * FROM rpm_results")
    assert sorted(r["queue"] for r in rows) == ["codel", "droptail"], rows
    by_queue = {r["queue"]: r for r in rows}
    for queue, r in by_queue.items():
        assert (r["direction"], r["protocol"], r["status"]) == ("download", "h3", "ok"), (queue, r)
        assert r["run_key"] in {run["run_key"] for run in runs}
        assert 12 <= r["capacity_mbps"] <= 20.5, (queue, r)
        assert 38 <= r["idle_latency_ms"] <= 70, (queue, r)
        assert r["rpm"] > 0 and r["loaded_latency_ms"] == pytest.approx(60_000 / r["rpm"]), (queue, r)
        # Goodput may not saturate within the 8 s on a loaded machine: then the RPM is the
        # speculative one from the last intervals' probes, never missing.
        assert (r["saturated_at"] is None) == (r["confidence_rpm"] == "speculative"), (queue, r)
        # The latencies' mean converted once is never above the mean of the RPMs.
        assert 0 < r["rpm_latency_mean"] <= r["rpm"] * (1 + 1e-9), (queue, r)
        assert r["rpm_p90"] > 0 and r["rpm_latency_mean_p90"] <= r["rpm_p90"] * (1 + 1e-9), (queue, r)
        assert 1 <= r["load_connections_max"] <= 16, (queue, r)
        assert r["factor_of_increase"] == pytest.approx(r["idle_rpm"] / r["rpm"]), (queue, r)
        assert r["probes"] > 0 and r["intervals"] >= 1 and r["bytes"] > 0, (queue, r)
        # One direction: the bottleneck's delivered bytes, more than the payload.
        assert r["wire_bytes"] > r["bytes"] and r["overhead_factor"] > 1, (queue, r)
    droptail, codel = by_queue["droptail"], by_queue["codel"]
    # 8 BDP of 20 Mbit/s x 40 ms: 800 000 B, 320 ms of queue on top of the 40 ms.
    assert droptail["expected_loaded_rtt_ms"] == pytest.approx(360.0)
    assert codel["expected_loaded_rtt_ms"] == pytest.approx(45.0)
    assert 0.6 * 360 <= droptail["loaded_latency_ms"] <= 1.2 * 360, droptail
    assert codel["rpm"] >= 2 * droptail["rpm"], (codel, droptail)
    assert droptail["factor_of_increase"] > codel["factor_of_increase"], (droptail, codel)
    assert took < 120, f"took {took:.0f} s"


@pytest.mark.lab
def test_a_test_too_short_to_saturate_still_reports_a_speculative_rpm(run_rpm: RunRpm) -> None:
    # 3 intervals of 1 s: fewer than the MAD = 4 moving averages stability needs, so goodput
    # can never be declared saturated and the draft alone would give no responsiveness.
    document = _spec(queue=["droptail"], buffer=["4bdp"])
    document["params"] = {"max_duration_s": 3, "idle_probes": 3}
    (row,) = _stored(run_rpm(document, timeout=120), "SELECT * FROM rpm_results")
    assert (row["status"], row["saturated_at"], row["intervals"]) == ("ok", None, 3), row
    assert row["confidence_rpm"] == "speculative", row
    # A number all the same, from the probes of the run, with both formulas and the P90.
    assert row["rpm"] > 0 and row["loaded_latency_ms"] == pytest.approx(60_000 / row["rpm"]), row
    assert 0 < row["rpm_latency_mean"] <= row["rpm"] * (1 + 1e-9), row
    assert row["rpm_p90"] > 0, row
    # 4 BDP of 20 Mbit/s x 40 ms: at most 40 + 160 ms of round trip, and no less than the base.
    assert 38 <= row["loaded_latency_ms"] <= 1.2 * 200, row


@pytest.mark.lab
def test_upload_capacity_counts_delivered_bytes_not_accepted_ones(run_rpm: RunRpm) -> None:
    # Issue 23: counting the bytes the stack accepted (socket and stream buffers) put seconds of
    # a slow link's traffic into the first intervals: on this 10 Mbit/s link the upload measured
    # 13.4 (h1), 17.2 (h2) and 18.1 Mbit/s (h3), and counted 1.4-1.8x the bytes the link carried.
    document = _spec(queue=["droptail"], buffer=["4bdp"], bandwidth_mbps=[10], mode=["h1", "h2", "h3"])
    document["params"] = {"direction": "upload", "max_duration_s": 5, "idle_probes": 2}
    rows = _stored(run_rpm(document, timeout=150), "SELECT * FROM rpm_results")
    assert sorted(r["protocol"] for r in rows) == ["h1", "h2", "h3"], rows
    for r in rows:
        assert (r["direction"], r["status"]) == ("upload", "ok"), r
        # Delivered bytes passed the bottleneck, whose count has every header on top: at most
        # its IP bytes (QUIC's estimate includes packet headers, hence the 2% of slack).
        assert 0 < r["bytes"] <= 1.02 * r["wire_bytes"], r
        # Goodput below the 10 Mbit/s: generous below (a loaded machine may not fill the link
        # in 5 s), at most 10% above (QUIC headers counted, the window estimate's noise).
        assert 6.0 <= r["capacity_mbps"] <= 11.0, r
