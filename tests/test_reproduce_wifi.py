"""000 ch. 6's WiFi entries (000-table6.4, 000-table6.3) judged on fixed rows, and the mesh
clients' WiFi link profiles (no lab: the runs are checked through the registry tests in
test_reproduce.py and by `protolab reproduce`)."""

from __future__ import annotations

from typing import Any

from protolab.reproduce.claims import NOT_REPRODUCED, REPRODUCED
from protolab.reproduce.figures import REGISTRY
from protolab.scenarios import SCENARIOS
from protolab.scenarios.base import Condition
from protolab.scenarios.wifi import (
    CLIENT_PROFILES,
    HT20_RATES_MBPS,
    contention_for_hops,
    phy_rate_for,
)

# Eight runs spread +-4% around a mean: enough for the ratio-of-ratios interval over one group.
SPREAD = (0.96, 0.97, 0.98, 0.99, 1.01, 1.02, 1.03, 1.04)


def _runs(mean_mbps: float, **columns: Any) -> list[dict[str, Any]]:
    return [{"goodput_mbps": mean_mbps * f, **columns} for f in SPREAD]


def _aggregation_rows(tcp: tuple[float, float], quic: tuple[float, float]) -> list[dict[str, Any]]:
    """(off, on) means per protocol, 8 runs each."""
    return [row for mode, (off, on) in (("tcp", tcp), ("h3", quic))
            for frames, mean in ((1, off), (64, on)) for row in _runs(mean, mode=mode, ampdu_frames=frames)]


def _verdicts(figure_id: str, rows: list[dict[str, Any]]) -> list[str]:
    return [claim.check(rows).outcome for claim in REGISTRY[figure_id].claims]


def test_table_6_4_holds_on_000s_own_means_and_its_ratios_are_theirs() -> None:
    # 000 Table 6.4: TCP 26.1 -> 49.8, QUIC 23.7 -> 38.2 Mbit/s.
    rows = _aggregation_rows(tcp=(26.1, 49.8), quic=(23.7, 38.2))
    figure = REGISTRY["000-table6.4"]
    estimates = [claim.check(rows) for claim in figure.claims]
    assert [v.outcome for v in estimates] == [REPRODUCED] * 3
    assert estimates[0].estimate is not None and estimates[2].estimate is not None
    assert abs(estimates[0].estimate.value - 49.8 / 26.1) < 1e-9
    assert abs(estimates[2].estimate.value - (49.8 / 26.1) / (38.2 / 23.7)) < 1e-9


def test_table_6_4_fails_when_quic_gains_more_or_aggregation_hurts() -> None:
    quic_gains_more = _aggregation_rows(tcp=(30.0, 45.0), quic=(30.0, 60.0))
    assert _verdicts("000-table6.4", quic_gains_more) == [REPRODUCED, REPRODUCED, NOT_REPRODUCED]
    aggregation_hurts = _aggregation_rows(tcp=(40.0, 30.0), quic=(40.0, 35.0))
    assert _verdicts("000-table6.4", aggregation_hurts)[:2] == [NOT_REPRODUCED, NOT_REPRODUCED]


# 000 Table 6.3 (Mbit/s): TCP, QUIC per WiFi client.
TABLE_6_3 = {"rp2": (61.1, 40.9), "rp3": (61.6, 40.3), "rp4": (5.0, 4.5), "rp5": (10.2, 7.9), "rp6": (49.8, 38.2),
             "rp7": (31.4, 21.6)}


def _client_rows(table: dict[str, tuple[float, float]]) -> list[dict[str, Any]]:
    return [row for client, (tcp, quic) in table.items()
            for mode, mean in (("tcp", tcp), ("h3", quic)) for row in _runs(mean, mode=mode, mesh_client=client)[:3]]


def test_table_6_3_holds_on_000s_per_client_numbers() -> None:
    verdict = REGISTRY["000-table6.3"].claims[0].check(_client_rows(TABLE_6_3))
    assert verdict.outcome == REPRODUCED and verdict.estimate is not None
    assert abs(verdict.estimate.value - 1.3557) < 1e-3  # geometric mean of 000's six TCP/QUIC ratios
    assert verdict.estimate.groups == 6


def test_table_6_3_fails_when_quic_is_faster_on_every_client() -> None:
    swapped = {client: (quic, tcp) for client, (tcp, quic) in TABLE_6_3.items()}
    assert REGISTRY["000-table6.3"].claims[0].check(_client_rows(swapped)).outcome == NOT_REPRODUCED


def test_phy_rate_is_the_lowest_ht20_rate_that_carries_000s_tcp_with_the_margin() -> None:
    assert [phy_rate_for(CLIENT_PROFILES[c].tcp_mbps) for c in ("rp2", "rp3", "rp4", "rp5", "rp6", "rp7")] == \
        [78.0, 78.0, 6.5, 13.0, 65.0, 39.0]
    for profile in CLIENT_PROFILES.values():
        rate = profile.phy_rate_mbps
        assert rate * 0.9 >= profile.tcp_mbps * 1.1
        lower = [r for r in HT20_RATES_MBPS if r < rate]
        assert not lower or lower[-1] * 0.9 < profile.tcp_mbps * 1.1
    assert [contention_for_hops(h) for h in (0, 1, 2, 5)] == [0.0, 0.0, 0.05, 0.2]


def test_a_mesh_client_sets_both_wifi_directions_from_its_profile() -> None:
    scenario = SCENARIOS["wifi-clients"]
    params = scenario.Params.model_validate({})
    condition = Condition.from_axes({"bandwidth_mbps": "unlimited", "rtt_ms": 90, "loss_pct": 0, "buffer": "default",
                                     "mesh_client": "rp4"})
    links = scenario.links(params, condition)
    wifi = [link["wifi"] for link in links.values() if link.get("wifi")]
    assert len(wifi) == 2
    for hop in wifi:
        assert hop["phy_rate_bps"] == 6_500_000
        assert hop["contention_probability"] == 0.2
        assert hop["max_ampdu_frames"] == 64
    assert links["p0.forward"]["delay_ns"] + links["p0.reverse"]["delay_ns"] == 90_000_000
