"""WiFi links (docs/emulator.md, "WiFi links") without a lab: the wifi-aggregation scenario's
links per condition, its axis checks, and the emulator's check of a topology with WiFi links
(defaults filled in, bad values refused naming the field)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from protolab.lab import dumbbell, host, ideal_link, link
from protolab.plan.experiment import load_spec, parse_spec
from protolab.plan.spec import SpecError
from protolab.run.runner import conditions, plan
from protolab.validate.traffic import wifi_saturated_rate_bps

REPO = Path(__file__).resolve().parents[1]


def test_wifi_aggregation_links_per_condition() -> None:
    experiment = load_spec(REPO / "specs" / "wifi-aggregation.toml")
    scenario, params = experiment.scenario, experiment.params
    by_frames = {c.extra("ampdu_frames"): c for c in conditions(experiment)}
    assert sorted(by_frames) == [1, 64]
    for frames, condition in by_frames.items():
        links = scenario.links(params, condition)
        for hop in ("client.down", "client.up"):
            assert links[hop]["wifi"] == {"phy_rate_bps": 130_000_000, "max_ampdu_frames": frames,
                                          "frame_error_rate": 0.05, "retry_limit": 7, "contention_probability": 0.0}
            assert links[hop]["rate_bps"] is None and links[hop]["trace"] is None
        assert links["p0.reverse"]["delay_ns"] == 20_000_000 and links["p0.reverse"]["wifi"] is None
        assert links["server.down"]["wifi"] is None
    runs = plan(experiment)
    assert len(runs) == 2 * 2 * 3 and {r.mode for r in runs} == {"tcp", "h3"}
    downlink_only = parse_spec('schema_version = 1\nscenario = "wifi-aggregation"\n'
                               '[params]\nuplink_wifi = false\nframe_error_rate = 0.2\n')
    links = scenario.links(downlink_only.params, conditions(downlink_only)[0])
    assert links["client.up"]["wifi"] is None and links["client.down"]["wifi"]["frame_error_rate"] == 0.2


def test_wifi_aggregation_refuses_bad_values() -> None:
    with pytest.raises(SpecError, match=r"axes.ampdu_frames: 0 is not an A-MPDU frame limit"):
        parse_spec('schema_version = 1\nscenario = "wifi-aggregation"\n[axes]\nampdu_frames = [0, 64]\n')
    with pytest.raises(SpecError, match=r"params.contention_probability"):
        parse_spec('schema_version = 1\nscenario = "wifi-aggregation"\n[params]\ncontention_probability = 1\n')


def _check(emu_binary: Path, tmp_path: Path, wifi: dict[str, object]) -> subprocess.CompletedProcess[str]:
    client = host("client", "left", ["10.77.0.1"], down=link(delay_ns=1_000_000, wifi=wifi))
    topology = dumbbell("wifitest", [client], ["server"], 1)
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(topology))
    return subprocess.run([str(emu_binary), "emu", "check", "--topology", str(path)], capture_output=True, text=True, check=False)


def test_emulator_checks_wifi_links(emu_binary: Path, tmp_path: Path) -> None:
    done = _check(emu_binary, tmp_path, {"max_ampdu_frames": 1, "slot": "20us"})
    if "unknown field `wifi`" in done.stderr:
        pytest.skip("the protolab-net binary predates WiFi links")
    assert done.returncode == 0, done.stderr
    down = json.loads(done.stdout)["hosts"][0]["access"]["down"]
    assert down["wifi"]["max_ampdu_frames"] == 1 and down["wifi"]["slot_ns"] == 20_000
    assert down["wifi"]["difs_ns"] == 34_000 and down["rate_bps"] is None, "defaults filled in"
    refused = _check(emu_binary, tmp_path, {"cw_min": 63, "cw_max": 31})
    assert refused.returncode != 0 and "wifi.cw_min" in refused.stderr, refused.stderr
    refused = _check(emu_binary, tmp_path, {"difs": "0"})
    assert refused.returncode != 0 and "wifi.difs_ns" in refused.stderr, refused.stderr
    assert ideal_link()["wifi"] is None, "a reset leaves no WiFi behind"


def test_validation_expects_the_model_s_saturated_rate() -> None:
    # The emulator's complete form of the 802.11n defaults (contract::link::WifiParams).
    defaults = {"phy_rate_bps": 130_000_000, "max_ampdu_frames": 64, "max_ampdu_bytes": 65_535,
                "max_ampdu_duration_ns": 4_000_000, "slot_ns": 9_000, "sifs_ns": 16_000, "difs_ns": 34_000,
                "cw_min": 15, "cw_max": 1023, "preamble_ns": 40_000, "block_ack_ns": 32_000}
    # 42 frames of 1500 B (the byte limit) per 4174.98 us; one frame per 284.392 us (the numbers
    # of netmodel's saturated_rate_matches_the_efficiency_formula).
    assert wifi_saturated_rate_bps(defaults) == pytest.approx(42 * 12_000 / 4174.977e-6, rel=1e-6)
    assert wifi_saturated_rate_bps({**defaults, "max_ampdu_frames": 1}) == pytest.approx(12_000 / 284.3923e-6, rel=1e-6)
    assert wifi_saturated_rate_bps({**defaults, "max_ampdu_bytes": 1 << 20, "max_ampdu_duration_ns": 10**9}) \
        > wifi_saturated_rate_bps(defaults), "64 frames when neither bytes nor airtime limit"
