"""000 ch. 6's Raspberry-Pi clients as WiFi link profiles (`wifi-clients`, Table 6.3 / Fig. 6.5).

000 measured TCP and QUIC downloads from eight Raspberry Pis in a community WiFi mesh (QMPSU,
Table 6.1: 0-5 WiFi hops) and gives, per client, the hop count, TCP's and QUIC's throughput
and loss (Table 6.3) and, for two clients, the RTT (§6.1.2: 36 ms for RP1, 90 ms for RP4; §6.2,
Fig. 6.8: a 62 Mbit/s link at 44 ms). It gives no PHY rates or contention levels, so each
client's WiFi hop is derived from what it does give (docs/scenarios.md, "wifi-clients"):

- **PHY rate**: the lowest 802.11n HT20 rate (one stream: 6.5, 13, ...; two streams: 13, 26,
  39, 52, 78, 104, 117, 130 Mbit/s) whose aggregated delivery (~0.9 of the PHY rate) is at
  least 1.1x 000's TCP throughput for the client: TCP filled the bottleneck, so its throughput
  is the link's capacity less a margin.
- **Contention**: 0.05 of `contention_probability` per WiFi hop beyond the first (000 §6.1.2:
  many hops use different channels, so neighbours take only part of the airtime).
- **RTT** is the spec's axis, paired with the client (axis `mesh_client`) in its sweeps (specs/wifi-clients.toml).

RP1 (wired, no WiFi) and RP8 (000's outlier: a 15 km link, 0.64% loss) have no profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from pydantic import Field

from protolab.lab import ideal_link, mbps_to_bps, ms_to_ns
from protolab.scenarios.base import CLIENT, Condition
from protolab.scenarios.congestion import (
    CLIENT2,
    Fairness,
    FairnessParams,
    WifiAggregation,
    WifiAggregationParams,
    fairness_server_names,
)


# 802.11n HT20 rates with the 800 ns guard interval, one and two spatial streams (IEEE
# 802.11-2016 clause 19, the HT MCS tables: MCS 0-7 and 8-15), in Mbit/s.
HT20_RATES_MBPS = (6.5, 13.0, 19.5, 26.0, 39.0, 52.0, 58.5, 65.0, 78.0, 104.0, 117.0, 130.0)
# What an aggregated 802.11n link delivers of its PHY rate, saturated: 0.93 at 130 Mbit/s with the
# model's defaults (docs/emulator.md), a little less with contention; 0.9 as a round figure.
AGGREGATED_EFFICIENCY = 0.9
# TCP filled 000's links but not to the last bit: the link is taken this much faster than TCP was.
CAPACITY_MARGIN = 1.1
CONTENTION_PER_EXTRA_HOP = 0.05


def phy_rate_for(tcp_mbps: float) -> float:
    """The lowest HT20 rate whose aggregated delivery carries `tcp_mbps` with the margin."""
    for rate in HT20_RATES_MBPS:
        if rate * AGGREGATED_EFFICIENCY >= tcp_mbps * CAPACITY_MARGIN:
            return rate
    return HT20_RATES_MBPS[-1]


def contention_for_hops(wifi_hops: int) -> float:
    """Other stations' share of the channel: 0.05 per WiFi hop beyond the first."""
    return round(CONTENTION_PER_EXTRA_HOP * max(wifi_hops - 1, 0), 2)


@dataclass(frozen=True)
class ClientProfile:
    """One of 000's mesh clients as the WiFi hop protolab gives it."""

    wifi_hops: int  # 000 Table 6.1
    tcp_mbps: float  # 000 Table 6.3: the capacity estimate the PHY rate is chosen from

    @property
    def phy_rate_mbps(self) -> float:
        return phy_rate_for(self.tcp_mbps)

    @property
    def contention_probability(self) -> float:
        return contention_for_hops(self.wifi_hops)


CLIENT_PROFILES: dict[str, ClientProfile] = {
    "rp2": ClientProfile(wifi_hops=1, tcp_mbps=61.1),
    "rp3": ClientProfile(wifi_hops=2, tcp_mbps=61.6),
    "rp4": ClientProfile(wifi_hops=5, tcp_mbps=5.0),
    "rp5": ClientProfile(wifi_hops=3, tcp_mbps=10.2),
    "rp6": ClientProfile(wifi_hops=1, tcp_mbps=49.8),
    "rp7": ClientProfile(wifi_hops=5, tcp_mbps=31.4),
}

ClientName = Literal["rp2", "rp3", "rp4", "rp5", "rp6", "rp7"]


class WifiClientsParams(WifiAggregationParams):
    ampdu_frames: int = Field(64, ge=1, le=1024, description="A-MPDU frame limit (000: aggregation on everywhere)")


class WifiClients(WifiAggregation):
    """000 ch. 6, Table 6.3 / Fig. 6.5: TCP vs QUIC downloads per mesh client, each client a WiFi
    hop (both directions) with its profile's PHY rate and contention; aggregation on."""

    name = "wifi-clients"
    source = "000 ch. 6, Table 6.3, Fig. 6.5"
    description = "bulk over 000's mesh clients as WiFi link profiles (PHY rate, contention): TCP vs QUIC"
    Params = WifiClientsParams
    extra_axes: ClassVar[dict[str, Any]] = {"mesh_client": ClientName}
    default_axes: ClassVar[dict[str, list[Any]]] = {
        **{name: values for name, values in WifiAggregation.default_axes.items() if name != "ampdu_frames"},
        "mesh_client": list(CLIENT_PROFILES),
    }

    def check(self, params: WifiClientsParams, axes: Mapping[str, Sequence[Any]]) -> None:
        return None  # the mesh_client axis is checked by its type (a profile name)

    def links(self, params: WifiClientsParams, condition: Condition) -> dict[str, dict[str, Any]]:
        """The WiFi hop of `wifi-aggregation` with the client's PHY rate and contention (they
        replace the params of the same names) and aggregation at `ampdu_frames`."""
        profile = CLIENT_PROFILES[str(condition.extra("mesh_client"))]
        as_profile = params.model_copy(update={"phy_rate_mbps": profile.phy_rate_mbps,
                                               "contention_probability": profile.contention_probability})
        with_ampdu = replace(condition, extras=(*condition.extras, ("ampdu_frames", params.ampdu_frames)))
        return super().links(as_profile, with_ampdu)


class WifiFairnessParams(FairnessParams):
    workload: Literal["page", "bulk"] = Field("bulk", description="the sides run bulk downloads (000: a 10 MB file each)")
    phy_rate_mbps: float = Field(65.0, gt=0, le=10_000, description="WiFi PHY rate (RP6's profile: 65)")
    ampdu_frames: int = Field(64, ge=1, le=1024, description="A-MPDU frame limit (000: aggregation on)")
    frame_error_rate: float = Field(0.05, ge=0, le=1, description="probability that one MPDU attempt fails")
    retry_limit: int = Field(7, ge=0, le=255, description="retransmissions of a failed MPDU before it is lost")
    contention_probability: float = Field(0.0, ge=0, lt=1, description="another station takes the channel "
                                          "before a TXOP with this probability")


class WifiFairness(Fairness):
    """000 §6.3.3, Fig. 6.12: two flows, TCP against QUIC or BQUIC, share one WiFi hop. The
    shared path p0 is the WiFi hop in both directions (a station of the emulator's WiFi model
    with the condition's one-way delay: the data one way, the ACKs the other), so both
    clients' downloads contend for its airtime and aggregates; the access links are ideal.
    000 ran the two downloads from one client in two threads; here they come from two clients
    behind the same hop, so the emulator's deliveries on p0 tell the sides apart."""

    name = "wifi-fairness"
    source = "000 §6.3.3, Fig. 6.12"
    description = "TCP vs QUIC (or BQUIC) downloads sharing one 802.11n WiFi hop: shares and Jain's index"
    Params = WifiFairnessParams
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": ["unlimited"],
        "rtt_ms": [40],
        "loss_pct": [0],
        "buffer": ["default"],
        "mode": ["tcp vs h3", "tcp vs h3@bquic"],
        "page": [],
    }

    def links(self, params: WifiFairnessParams, condition: Condition) -> dict[str, dict[str, Any]]:
        """p0 is the WiFi hop (half the RTT each way, the condition's queue); access links ideal."""
        wifi = {
            "phy_rate_bps": mbps_to_bps(params.phy_rate_mbps),
            "max_ampdu_frames": params.ampdu_frames,
            "frame_error_rate": params.frame_error_rate,
            "retry_limit": params.retry_limit,
            "contention_probability": params.contention_probability,
        }
        links = {f"p0.{side}": ideal_link(wifi=wifi, delay_ns=ms_to_ns(condition.rtt_ms / 2),
                                          queue_bytes=condition.buffer_bytes) for side in ("forward", "reverse")}
        for name in (CLIENT, CLIENT2, *fairness_server_names(params)):
            links[f"{name}.up"] = ideal_link()
            links[f"{name}.down"] = ideal_link()
        return links

    def check(self, params: WifiFairnessParams, axes: Mapping[str, Sequence[Any]]) -> None:
        if params.workload != "bulk":
            raise ValueError("params.workload: wifi-fairness runs bulk downloads (000's 10 MB file per flow)")
        for value in axes.get("bandwidth_mbps", []):
            if value != "unlimited":
                raise ValueError(f"axes.bandwidth_mbps: {value!r}: the WiFi hop sets the rate (params.phy_rate_mbps)")
        for value in axes.get("loss_pct", []):
            if value:
                raise ValueError(f"axes.loss_pct: {value!r}: the WiFi hop's losses are its frame errors")
