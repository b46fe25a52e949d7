"""The registry of seed figures and tables that the lab reproduces (`protolab reproduce`).

Each entry names its spec in `specs/`, a `--quick` variant (overrides merged into the spec:
fewer pages, repetitions or sweep points), the rows it is judged on (`source`: runs, fairness
pairs or overhead factors), the paper's numbers as printed, and the claims with the interval
each is expected in. The claims are the seed's own statements; where a seed gives only a
direction, so does the claim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from protolab.reproduce.claims import Claim, Median, Ratio, RatioOfRatios

PAGES_QUICK = ["vk", "instagram", "amazon"]


@dataclass(frozen=True)
class Figure:
    id: str
    title: str
    seed: str
    spec: str
    source: str  # "runs", "pairs" or "overhead"
    claims: tuple[Claim, ...]
    quick: dict[str, Any] = field(default_factory=dict)
    paper: tuple[tuple[str, str], ...] = ()
    note: str = ""


def _starved(mode: str, bandwidth_mbps: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The runs of `mode` at a link rate with 10% of a core, and with a whole core."""
    return ({"mode": mode, "bandwidth_mbps": bandwidth_mbps, "cpu_pct": 10},
            {"mode": mode, "bandwidth_mbps": bandwidth_mbps, "cpu_pct": 100})


def _plt(num: dict[str, Any], den: dict[str, Any]) -> Ratio:
    return Ratio("plt_ms", num, den, by="page")


FIGURES: tuple[Figure, ...] = (
    Figure(
        id="001-fig5",
        title="PLT over an emulated WiFi link, 0% and 2% loss",
        seed="001 §IV-C2, Fig. 5a-b",
        spec="wifi-loss.toml",
        source="runs",
        quick={"repetitions": 3, "axes": {"page": PAGES_QUICK}},
        paper=(("7 Mbit/s, 50 ms, loss 0% / 2%, 15 pages x 30 cold loads", "box plots of PLT per protocol"),
               ("with 2% loss", "H2's PLT increases greatly; the others by around 20%")),
        claims=(
            Claim("at 0% loss H2 loads faster than H1", _plt({"mode": "h2", "loss_pct": 0}, {"mode": "h1", "loss_pct": 0}),
                  high=1.0, paper="H2 performs better than H1 when there is no packet loss"),
            Claim("at 2% loss H2 is slower than H1", _plt({"mode": "h2", "loss_pct": 2}, {"mode": "h1", "loss_pct": 2}),
                  low=1.0, paper="H2 is affected the most"),
            Claim("at 2% loss H2 is slower than H2-Parallel", _plt({"mode": "h2", "loss_pct": 2},
                                                                {"mode": "h2-parallel:2", "loss_pct": 2}),
                  low=1.0, paper="H2-Parallel reduces the penalty of packet losses"),
            Claim("at 2% loss H2 is slower than QUIC", _plt({"mode": "h2", "loss_pct": 2}, {"mode": "h3", "loss_pct": 2}),
                  low=1.0, paper="QUIC is not affected as severely as H2"),
            Claim("at 2% loss H2-Parallel is about as fast as H1 (within 20%)",
                  _plt({"mode": "h2-parallel:2", "loss_pct": 2}, {"mode": "h1", "loss_pct": 2}),
                  low=0.8, high=1.25, paper="a performance similar to H1"),
            Claim("2% loss slows H2 down more than H1",
                  RatioOfRatios("plt_ms", {"mode": "h2", "loss_pct": 2}, {"mode": "h2", "loss_pct": 0},
                                {"mode": "h1", "loss_pct": 2}, {"mode": "h1", "loss_pct": 0}, by="page"),
                  low=1.0, paper="H2's PLT increases greatly while the other protocols see a moderate increase"),
        ),
    ),
    Figure(
        id="001-fig6",
        title="PLT with ECMP routing, one path congested",
        seed="001 §IV-C1, Fig. 6a-b",
        spec="ecmp-congestion.toml",
        source="runs",
        quick={"repetitions": 2, "axes": {"page": ["vk", "amazon"]}},
        paper=(("congested", "H2's PLT shoots up, some pages 12 s on average"),
               ("congested", "QUIC 34% slower than H2-Parallel on medium and large pages")),
        claims=(
            Claim("congestion slows H2 down by at least 1.5x",
                  _plt({"mode": "h2", "congested": True}, {"mode": "h2", "congested": False}),
                  low=1.5, paper="H2's PLT shoots up"),
            Claim("with congestion H2 is slower than H2-Parallel",
                  _plt({"mode": "h2", "congested": True}, {"mode": "h2-parallel:2", "congested": True}),
                  low=1.0, paper="H2-Parallel only slightly affected"),
            Claim("with congestion QUIC is slower than H2-Parallel",
                  _plt({"mode": "h3", "congested": True}, {"mode": "h2-parallel:2", "congested": True}),
                  low=1.0, paper="QUIC 34% slower than H2-Parallel"),
            Claim("the congested path's queue fills (largest occupancy / limit)",
                  Median("queue_fill.p1.reverse", {"congested": True}), low=0.9,
                  paper="the path is congested by iperf3"),
            Claim("without cross traffic that queue never fills",
                  Median("queue_fill.p1.reverse", {"congested": False}), high=0.9,
                  paper="(the control condition)"),
        ),
        note="paths of 20 Mbit/s with greedy cross traffic (001: 1 Gbit/s, 90% offered); docs/scenarios.md",
    ),
    Figure(
        id="001-fig7",
        title="Bandwidth shares of competing protocols on a 7 Mbit/s bottleneck",
        seed="001 §V-D, Fig. 7",
        spec="fairness.toml",
        source="pairs",
        quick={"repetitions": 2, "axes": {"mode": ["h3@gquic39 vs h2", "h3@gquic39 vs h2-parallel:2",
                                                   "h3@gquic39 vs h1", "h2 vs h1"]}},
        paper=(("QUIC 39 vs H2", "QUIC gets twice H2's share"), ("QUIC 39 vs H2-Parallel (2)", "equal shares"),
               ("QUIC 39 vs H1 (4 connections)", "H1 more aggressive")),
        claims=(
            Claim("QUIC (gquic39) gets more than H2", Median("share_a", {"pair": "h3@gquic39 vs h2"}), low=0.5,
                  paper="twice as much bandwidth share as H2"),
            Claim("QUIC (gquic39) gets about twice H2's share (0.6-0.72)", Median("share_a", {"pair": "h3@gquic39 vs h2"}),
                  low=0.6, high=0.72, paper="twice: a share of 2/3"),
            Claim("QUIC (gquic39) and H2-Parallel (2) share equally (0.4-0.6)",
                  Median("share_a", {"pair": "h3@gquic39 vs h2-parallel:2"}), low=0.4, high=0.6, paper="an equal share"),
            Claim("H1 (4 connections) gets more than QUIC (gquic39)", Median("share_b", {"pair": "h3@gquic39 vs h1"}),
                  low=0.5, paper="H1 is more aggressive than QUIC"),
            Claim("H1 (4 connections) gets more than H2", Median("share_b", {"pair": "h2 vs h1"}), low=0.5,
                  paper="H1 has an unfair advantage against H2"),
        ),
    ),
    Figure(
        id="004-fig8-10",
        title="5.5 MB download, QUIC vs TCP: bandwidth, RTT and loss sweeps",
        seed="004 ch. 7, Figs. 8-10",
        spec="quic-vs-tcp.toml",
        source="runs",
        quick={"repetitions": 2, "sweeps": [{"bandwidth_mbps": [100]}, {"rtt_ms": [800]}, {"loss_pct": [0, 0.5]}]},
        paper=(("100 Mbit/s, 40 ms", "QUIC 53.76, TCP 66.67 Mbit/s"), ("800 ms RTT, 50 Mbit/s", "QUIC 5.49, TCP 5.02"),
               ("0.5% loss, 50 Mbit/s, 40 ms", "QUIC 7.41, TCP 2.37"), ("0% loss", "QUIC 38.13, TCP 41.26")),
        claims=(
            Claim("at 100 Mbit/s TCP is faster than QUIC",
                  Ratio("goodput_mbps", {"mode": "h3", "bandwidth_mbps": 100, "loss_pct": 0, "rtt_ms": 40},
                        {"mode": "h1c", "bandwidth_mbps": 100, "loss_pct": 0, "rtt_ms": 40}), high=1.0,
                  paper="53.76 / 66.67 = 0.81"),
            Claim("at 800 ms RTT QUIC is at least as fast as TCP",
                  Ratio("goodput_mbps", {"mode": "h3", "rtt_ms": 800}, {"mode": "h1c", "rtt_ms": 800}), low=1.0,
                  paper="5.49 / 5.02 = 1.09"),
            Claim("at 0.5% loss QUIC is faster than TCP",
                  Ratio("goodput_mbps", {"mode": "h3", "loss_pct": 0.5}, {"mode": "h1c", "loss_pct": 0.5}), low=1.0,
                  paper="7.41 / 2.37 = 3.1"),
        ),
    ),
    Figure(
        id="000-table6.2",
        title="QUIC and TCP throughput with the client short of CPU",
        seed="000 §6.1.4, Table 6.2",
        spec="cpu-limit.toml",
        source="runs",
        quick={"repetitions": 2, "axes": {"bandwidth_mbps": [10, 60], "cpu_pct": [10, 100]}},
        paper=(("58.5 Mbit/s link", "TCP -8.6%, QUIC -54.3%"), ("31.8 Mbit/s", "TCP -6.9%, QUIC -21.6%"),
               ("10.2 Mbit/s", "TCP -3%, QUIC -16.4%")),
        claims=(
            Claim("a CPU-starved client slows QUIC down more than TCP (60 Mbit/s, 10% of a core)",
                  RatioOfRatios("goodput_mbps", *_starved("h3", 60), *_starved("tcp", 60)), high=1.0,
                  paper="QUIC -54.3% vs TCP -8.6%"),
            Claim("the higher the link rate, the more QUIC loses (60 vs 10 Mbit/s at 10% of a core)",
                  RatioOfRatios("goodput_mbps", *_starved("h3", 60), *_starved("h3", 10)), high=1.0,
                  paper="-54.3% at 58.5 Mbit/s vs -16.4% at 10.2 Mbit/s"),
        ),
    ),
    Figure(
        id="003-ch6-rpm",
        title="Responsiveness under working conditions against the buffer: drop-tail vs CoDel",
        seed="003 ch. 6 (RPM validation on emulated links), ch. 7",
        spec="rpm.toml",
        source="rpm",
        quick={"axes": {"buffer": ["1bdp", "8bdp"]}, "params": {"max_duration_s": 12}},
        paper=(("RPM method", "loaded latency tracks the buffer: bufferbloat lowers RPM"),
               ("factor of increase", "idle RPM / loaded RPM, larger with larger buffers")),
        claims=(
            Claim("h3's loaded RTT is the base RTT plus a full drop-tail buffer (8 BDP), within 15%",
                  Median("loaded_over_expected", {"mode": "h3", "queue": "droptail", "buffer_bdp": 8}), low=0.85,
                  high=1.15, paper="the latency under load is the queue's"),
            Claim("the network's loaded RTT (foreign probes) is the full buffer's, within 15% (h2, 8 BDP)",
                  Median("foreign_over_expected", {"mode": "h2", "queue": "droptail", "buffer_bdp": 8}), low=0.85,
                  high=1.15, paper="(the same for TCP)"),
            Claim("CoDel's RPM is several times (>= 3x) drop-tail's at 8 BDP",
                  Ratio("rpm", {"queue": "codel", "buffer_bdp": 8}, {"queue": "droptail", "buffer_bdp": 8}, by="mode"),
                  low=3.0, paper="an AQM removes the standing queue"),
            Claim("with drop-tail, RPM falls as the buffer grows (8 vs 1 BDP)",
                  Ratio("rpm", {"queue": "droptail", "buffer_bdp": 8}, {"queue": "droptail", "buffer_bdp": 1}, by="mode"),
                  high=1.0, paper="bufferbloat lowers responsiveness"),
            Claim("the factor of increase grows with the buffer (drop-tail, 8 vs 1 BDP)",
                  Ratio("factor_of_increase", {"queue": "droptail", "buffer_bdp": 8},
                        {"queue": "droptail", "buffer_bdp": 1}, by="mode"), low=1.0,
                  paper="R_unloaded / R_loaded"),
        ),
        note="20 Mbit/s, 40 ms, download; docs/rpm.md",
    ),
    Figure(
        id="003-overhead",
        title="Overhead factor: bytes on the wire per byte of goodput",
        seed="003 ch. 7",
        spec="loss-analysis.toml",
        source="overhead",
        quick={"repetitions": 2, "params": {"duration_s": 10}},
        paper=(("QUIC", "overhead factor 1.051"),),
        claims=(
            Claim("QUIC's overhead factor is 1.051 within 0.02", Median("factor", {"protocol": "h3"}), low=1.031,
                  high=1.071, paper="1.051"),
            Claim("QUIC carries more overhead than TCP",
                  Ratio("factor", {"protocol": "h3"}, {"protocol": "tcp"}), low=1.0, paper="(TCP not given)"),
        ),
    ),
)

REGISTRY: dict[str, Figure] = {figure.id: figure for figure in FIGURES}


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with `override` merged in: tables merge key by key, anything else replaces."""
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result
