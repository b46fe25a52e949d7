"""002 ch. 6: page loads over cellular (trace-driven) links, Cubic against Sprout-EWMA.

The traces are Mahimahi's (data/traces/cellular/PROVENANCE.md): 002's Verizon trace (19.1 Mbit/s
down, 9.1 up) is not among them, so the Verizon figures run on the T-Mobile LTE trace (16.7 /
13.3), the closest in rate; AT&T runs on ATT-LTE-driving (5.2 / 0.8; 002: 6.7 / 1.1). Medians
are compared per page (the geometric mean over pages of the ratio of medians), percentiles over
all loads pooled, as 002 reads them off its CDFs over 500 pages.
"""

from __future__ import annotations

from typing import Any

from protolab.reproduce.claims import Claim, Median, QuantileRatio
from protolab.reproduce.figures.base import PAGES_QUICK, Figure, plt_ratio

VERIZON_STAND_IN = "tmobile"
ATT = "att"
CUBIC = "cubic"
# The median of TMobile-LTE-short.down's delivered capacity per 1 s window (a property of the trace
# file, data/traces/cellular: 1500 B x the opportunities of each whole second).
TMOBILE_DOWN_MEDIAN_MBPS = 13.81
SPROUT = "sprout-ewma"

# Fig. 6-2: 1 s rates of saturating downloads; quick: 50 of them (the 90th percentile's interval needs 42).
UPLINK_QUICK: dict[str, Any] = {"repetitions": 2, "params": {"duration_s": 25}}
# Quick variants of Figs. 6-3/6-4: three pages, two repetitions (the percentile claims are then
# inconclusive: their interval needs 86 loads per cell).
CC_QUICK: dict[str, Any] = {"repetitions": 2, "axes": {"page": PAGES_QUICK}}


def _cc(quic_cc: str, rtt_ms: int) -> dict[str, Any]:
    return {"quic_cc": quic_cc, "rtt_ms": rtt_ms}


def _sprout_vs_cubic(carrier: str, medians: dict[int, str], p95_at_30: str) -> tuple[Claim, ...]:
    """002 §6.3's statements for one carrier: at 300 ms (and for Verizon at 120 ms) Sprout-EWMA's
    median PLT is lower than Cubic's, for AT&T at 120 ms higher; at 30 ms Cubic's 95th
    percentile is lower than Sprout-EWMA's. `medians`: RTT -> 002's words for that RTT."""
    claims = []
    for rtt_ms, paper in medians.items():
        lower = "lower" in paper
        statement = (f"{carrier}, {rtt_ms} ms: Sprout-EWMA's median PLT is "
                     f"{'below' if lower else 'above'} Cubic's (ratio per page)")
        ratio = plt_ratio(_cc(SPROUT, rtt_ms), _cc(CUBIC, rtt_ms))
        claims.append(Claim(statement, ratio, high=1.0, paper=paper) if lower else
                      Claim(statement, ratio, low=1.0, paper=paper))
    claims.append(Claim(
        f"{carrier}, 30 ms: Cubic's 95th-percentile PLT is below Sprout-EWMA's (all loads pooled)",
        QuantileRatio("plt_ms", _cc(CUBIC, 30), _cc(SPROUT, 30), q=0.95), high=1.0, paper=p95_at_30))
    return tuple(claims)


FIGURES: tuple[Figure, ...] = (
    Figure(
        id="002-fig6-1",
        title="HTTP/1.1, SPDY and QUIC page loads over a Verizon 4G link, 120 ms RTT",
        seed="002 §6.1, Fig. 6-1",
        spec="cellular-fig6-1.toml",
        source="runs",
        quick={"repetitions": 2, "axes": {"page": PAGES_QUICK}},
        paper=(("Verizon LTE, 9.1 Mbit/s up, 19.1 down, 120 ms min RTT, 500 pages", "CDFs of PLT per protocol"),
               ("high bandwidth, so (by §5.1)", "both HTTP/1.1 and SPDY outperform QUIC")),
        claims=(
            Claim("QUIC (H3, Cubic) loads slower than HTTP/1.1", plt_ratio({"mode": "h3"}, {"mode": "h1"}),
                  low=1.0, paper="HTTP/1.1 outperforms QUIC"),
            Claim("QUIC (H3, Cubic) loads slower than SPDY (here HTTP/2)", plt_ratio({"mode": "h3"}, {"mode": "h2"}),
                  low=1.0, paper="SPDY outperforms QUIC"),
        ),
        budget=6,
        quick_budget=3,
        note="Verizon stand-in: the T-Mobile LTE trace (16.7 / 13.3 Mbit/s); SPDY is HTTP/2 here",
    ),
    Figure(
        id="002-fig6-2",
        title="The variability of a Verizon 4G link's bandwidth over time",
        seed="002 §6.1, Fig. 6-2",
        spec="cellular-fig6-2.toml",
        source="intervals",
        quick=UPLINK_QUICK,
        paper=(("Verizon LTE uplink", "the delivered rate over time varies widely"),),
        claims=(
            Claim("the link's rate varies widely: the 90th percentile of its 1 s rate is over 1.5 times its median "
                  "(the trace's own: 2.1)",
                  QuantileRatio("rate_mbps", {}, {}, q=0.9, q_den=0.5), low=1.5,
                  paper="high variability of bandwidth over time"),
            Claim("a saturating download gets the trace's typical rate: median 1 s rate within 25% of the trace's "
                  "(13.8 Mbit/s, the median over TMobile-LTE-short.down's 1 s windows)",
                  Median("rate_mbps", {}), low=TMOBILE_DOWN_MEDIAN_MBPS * 0.75, high=TMOBILE_DOWN_MEDIAN_MBPS * 1.25,
                  paper="(the link replays the recorded trace)"),
        ),
        budget=5,
        quick_budget=2,
        note="Verizon stand-in: the T-Mobile LTE trace; 002 plots the uplink, here the downlink, where the "
             "receiving client logs what the link delivered (raw TCP, 1000-packet queue); the 1 s rates of one "
             "transfer are a time series, so their interval is indicative",
    ),
    Figure(
        id="002-fig6-3",
        title="QUIC/Cubic vs QUIC/Sprout-EWMA page loads over a Verizon 4G link, 30/120/300 ms",
        seed="002 §6.3, Fig. 6-3",
        spec="cellular-fig6-3.toml",
        source="runs",
        quick=CC_QUICK,
        paper=(("300 ms", "Sprout-EWMA's median PLT 10% lower than Cubic's"),
               ("120 ms", "Sprout-EWMA's median PLT 10% lower than Cubic's"),
               ("30 ms", "Cubic's 95th-percentile PLT 13% lower than Sprout-EWMA's")),
        claims=_sprout_vs_cubic("Verizon (T-Mobile trace)",
                                {300: "10% lower (ratio 0.90)", 120: "10% lower (ratio 0.90)"},
                                "Cubic's p95 13% lower (ratio 0.87)"),
        budget=10,
        quick_budget=3,
        note="Verizon stand-in: the T-Mobile LTE trace; Sprout-EWMA is `sprout-ewma` (002 §6.2: the "
             "receiver's rate estimate fed back, gain 1/8, target delay min(100 ms, min RTT))",
    ),
    Figure(
        id="002-fig6-4",
        title="QUIC/Cubic vs QUIC/Sprout-EWMA page loads over an AT&T 4G link, 30/120/300 ms",
        seed="002 §6.3, Fig. 6-4",
        spec="cellular-fig6-4.toml",
        source="runs",
        quick=CC_QUICK,
        paper=(("300 ms", "Sprout-EWMA's median PLT 13% lower than Cubic's"),
               ("120 ms", "Sprout-EWMA's median PLT 13% higher than Cubic's"),
               ("30 ms", "Cubic's 95th-percentile PLT 16% lower than Sprout-EWMA's")),
        claims=_sprout_vs_cubic("AT&T", {300: "13% lower (ratio 0.87)", 120: "13% higher (ratio 1.13)"},
                                "Cubic's p95 16% lower (ratio 0.84)"),
        budget=10,
        quick_budget=3,
        note="the ATT-LTE-driving trace (5.2 / 0.8 Mbit/s; 002's AT&T: 6.7 / 1.1)",
    ),
)
