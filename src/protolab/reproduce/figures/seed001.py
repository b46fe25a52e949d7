"""001's figures (page loads over HTTP/1.1, HTTP/2, H2-Parallel, H2-MPTCP and QUIC)."""

from __future__ import annotations

from protolab.reproduce.claims import Claim, Median, Ratio, RatioOfRatios
from protolab.reproduce.figures.base import PAGES_QUICK, Figure, plt_ratio

FIGURES: tuple[Figure, ...] = (
    Figure(
        id="001-fig5",
        title="PLT over an emulated WiFi link, 0% and 2% loss",
        seed="001 §IV-C2, Fig. 5a-b",
        spec="wifi-loss.toml",
        source="runs",
        budget=30,  # the spec's 30 loads per cell (4500 runs)
        quick_budget=6,  # 3 pages (t over pages): more loads help only as far as the pages agree
        quick={"repetitions": 3, "axes": {"page": PAGES_QUICK}},
        paper=(("7 Mbit/s, 50 ms, loss 0% / 2%, 15 pages x 30 cold loads", "box plots of PLT per protocol"),
               ("with 2% loss", "H2's PLT increases greatly; the others by around 20%")),
        claims=(
            Claim("at 0% loss H2 loads faster than H1", plt_ratio({"mode": "h2", "loss_pct": 0}, {"mode": "h1", "loss_pct": 0}),
                  high=1.0, paper="H2 performs better than H1 when there is no packet loss"),
            Claim("at 2% loss H2 is slower than H1", plt_ratio({"mode": "h2", "loss_pct": 2}, {"mode": "h1", "loss_pct": 2}),
                  low=1.0, paper="H2 is affected the most"),
            Claim("at 2% loss H2 is slower than H2-Parallel", plt_ratio({"mode": "h2", "loss_pct": 2},
                                                                {"mode": "h2-parallel:2", "loss_pct": 2}),
                  low=1.0, paper="H2-Parallel reduces the penalty of packet losses"),
            Claim("at 2% loss H2 is slower than QUIC", plt_ratio({"mode": "h2", "loss_pct": 2}, {"mode": "h3", "loss_pct": 2}),
                  low=1.0, paper="QUIC is not affected as severely as H2"),
            Claim("at 2% loss H2-Parallel is about as fast as H1 (within 20%)",
                  plt_ratio({"mode": "h2-parallel:2", "loss_pct": 2}, {"mode": "h1", "loss_pct": 2}),
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
        budget=10,  # 5 pages: a t over pages; up to twice the spec's 5 loads
        quick_budget=8,  # 2 pages: each ratio's 4 medians need 8 loads per cell
        quick={"repetitions": 2, "axes": {"page": ["vk", "amazon"]}},
        paper=(("congested", "H2's PLT shoots up, some pages 12 s on average"),
               ("congested", "QUIC 34% slower than H2-Parallel on medium and large pages")),
        claims=(
            Claim("congestion slows H2 down by at least 1.5x",
                  plt_ratio({"mode": "h2", "congested": True}, {"mode": "h2", "congested": False}),
                  low=1.5, paper="H2's PLT shoots up"),
            Claim("with congestion H2 is slower than H2-Parallel",
                  plt_ratio({"mode": "h2", "congested": True}, {"mode": "h2-parallel:2", "congested": True}),
                  low=1.0, paper="H2-Parallel only slightly affected"),
            Claim("with congestion QUIC is slower than H2-Parallel",
                  plt_ratio({"mode": "h3", "congested": True}, {"mode": "h2-parallel:2", "congested": True}),
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
        budget=12,
        quick_budget=6,  # a median share needs 6 runs per pair
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
)
