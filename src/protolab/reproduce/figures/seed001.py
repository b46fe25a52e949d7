"""001's figures (page loads over HTTP/1.1, HTTP/2, H2-Parallel, H2-MPTCP and QUIC)."""

from __future__ import annotations

from typing import Any

from protolab.reproduce.claims import Claim, Median, Ratio, RatioBetweenSets, RatioOfRatios
from protolab.reproduce.figures.base import PAGES_QUICK, Explanation, Figure, plt_ratio

NO_ROUTE_OUT = "live websites: this machine has no route to the Internet (and 001's 2017 pages are gone)"


def cwnd_ratio(num: str, den: str) -> Ratio:
    """The time-averaged summed window of mode `num` over mode `den`'s, per page."""
    return Ratio("cwnd_kb", {"mode": num}, {"mode": den}, by="page")


# 001-fig6c without congestion (docs/reproduce.md, "001-fig6c on its 15 pages, with means"): the
# run behind it is specs/ecmp-mptcp-access.toml.
_FIG6C_ACCESS = Explanation(
    claim="without congestion H2-MP is faster than H2",
    cause="In 001's topology the 10 Mbit/s access link is the bottleneck, and both MPTCP subflows share it: a "
          "second subflow adds no capacity there, and MPTCP puts 2.5% more bytes on it for the same page "
          "(per-segment DSS options, smaller segments). Where the 20 Mbit/s paths are the bottleneck (a 40 Mbit/s "
          "access link) the subflows that the xor hash routes apart use both paths and H2-MP speeds up large pages. "
          "001's moderate speed-up is not reached on its own link rates here",
    evidence="2026-11-29, ECMP without congestion, 15 pages x 5 loads, ratios of mean PLT H2 / H2-MP, t over pages: "
             "access 10 Mbit/s 1.004 [0.969, 1.040] (large pages 1.068 [0.984, 1.158]); access 40 Mbit/s 1.034 "
             "[0.988, 1.083], large pages 1.104 [1.053, 1.158]; bytes delivered on the access link H2-MP / H2 1.025 "
             "[1.024, 1.026] (12 pages > 400 kB); the full run (15 pages x 10 loads): 1.009 [0.959, 1.062]",
    command="protolab run specs/ecmp-mptcp-access.toml --results DIR (then the ratio of mean PLT per page and "
            "access rate, and link_counters client.down delivered_bytes of each run.json)",
)


# 001-fig6c's loads are a lottery by design (the xor hash routes each connection onto the congested
# path or not), so its claims compare the cells' mean PLTs, as 001's averages do (claims.STATISTICS).
MEAN = "mean"


def speedup(mode: str, where: dict[str, Any], statistic: str = "median") -> Ratio:
    """H2's median (or mean) PLT over `mode`'s (> 1: `mode` is faster) under `where`, per page."""
    return plt_ratio({"mode": "h2", **where}, {"mode": mode, **where}, statistic)


def speedup_by_size(mode: str, where: dict[str, Any], statistic: str = "median") -> RatioBetweenSets:
    """The speed-up of `mode` over H2 per page, on the large pages over the one on the small pages
    (a page a group: the pages' speed-ups, not their pooled loads)."""
    return RatioBetweenSets("plt_ms", {"mode": "h2", **where}, {"mode": mode, **where},
                            {"size_class": "large"}, {"size_class": "small"}, statistic=statistic)


FIG3 = Figure(
    id="001-fig3",
    title="Congestion window during a page load at 2% loss, all five modes",
    seed="001 §V-A, Fig. 3a-b",
    spec="cwnd-loss.toml",
    source="cwnd",
    quick={"repetitions": 2},
    budget=10,
    quick_budget=8,  # one page: a ratio of two modes' medians needs 7 loads per cell
    drawing="cwnd",
    paper=(("7 Mbit/s, 50 ms RTT, 45 kB buffer, 2% loss; a page of JPG images", "cwnd per protocol over a 5 s window"),
           ("H1 (up to 6 connections, summed)", "a much higher cumulative cwnd than the others"),
           ("QUIC v39 vs H2", "almost twice H2's cwnd: 32-packet initial window, Cubic emulating 2 connections"),
           ("H2", "the single connection keeps losing: a very small cwnd"),
           ("Fig. 3b, QUIC vs H2", "on a loss QUIC's cwnd is reduced at half the rate of H2's, and recovers faster")),
    claims=(
        Claim("H1's summed window is larger than H2's", cwnd_ratio("h1", "h2"), low=1.0,
              paper="H1 has a much higher cumulative cwnd size than others"),
        Claim("H1's summed window is larger than H2-Parallel's", cwnd_ratio("h1", "h2-parallel:2"), low=1.0,
              paper="H1 has a much higher cumulative cwnd size than others"),
        Claim("H1's summed window is larger than H2-MP's (both subflows)", cwnd_ratio("h1", "h2-mptcp"), low=1.0,
              paper="H1 has a much higher cumulative cwnd size than others"),
        Claim("H1's summed window is larger than QUIC's (gquic39)", cwnd_ratio("h1", "h3"), low=1.0,
              paper="H1 has a much higher cumulative cwnd size than others"),
        Claim("QUIC's (gquic39) window is about twice H2's (1.5-2.5)", cwnd_ratio("h3", "h2"), low=1.5, high=2.5,
              paper="QUIC has almost twice the size of cwnd as compared to H2"),
        Claim("on a loss QUIC (gquic39) cuts its window about half as much as H2 (0.35-0.65)",
              Ratio("backoff", {"mode": "h3"}, {"mode": "h2"}, by="page"), low=0.35, high=0.65,
              paper="in the event of packet loss the cwnd is reduced at half the rate of H2 (Fig. 3b)"),
    ),
    note="the window the server (the sender) keeps, averaged over the load; amazon stands in for 001's page of JPGs",
)

FIG4 = Figure(
    id="001-fig4",
    title="PLT of live websites with H1, H2 and H2-Parallel, 0% and 2% loss",
    seed="001 §IV-B1, Fig. 4a-c",
    spec="",
    source="runs",
    claims=(),
    paper=(("10 live H2 sites, RTT 15-165 ms, 15 cold loads", "mean PLT and its standard deviation per site"),
           ("0% loss", "H2 mostly better than H1; H2-Parallel similar to H2"),
           ("2% loss, Facebook", "H2 almost 12 s on average, H1 around 8.5 s"),
           ("2% loss, all sites", "H2-Parallel reduces PLT by 53% on average (vs H2)"),
           ("Fig. 4c", "H2: 83% of the bytes on one connection on average; H2-Parallel: 52%")),
    not_runnable=NO_ROUTE_OUT,
    substitute="001-fig5",
    note="001-fig5 asks Fig. 4a-b's question (H1 vs H2 vs H2-Parallel at 0% and 2% loss) on the recorded Table I "
         "pages, 001-fig4c Fig. 4c's (the bytes per connection)",
)

TABLE2 = Figure(
    id="001-table2",
    title="The live websites: objects, size, domains, connections per protocol",
    seed="001 §IV-B1, Table II",
    spec="",
    source="runs",
    claims=(),
    paper=(("10 live H2 sites", "17-86 objects, 286-4266 kB, 1-3 domains"),
           ("connections", "H2: one per domain; H2-Parallel: two per domain; H1: 2-14")),
    not_runnable=NO_ROUTE_OUT,
    substitute="001-fig4c",
    note="001-fig4c counts the connections each protocol opens on the recorded Table I pages",
)

FIG4C = Figure(
    id="001-fig4c",
    title="Connections per page and the busiest connection's share of the bytes, H2 vs H2-Parallel, recorded pages",
    seed="001 §IV-B1, Fig. 4c and Table II (on the recorded Table I pages)",
    spec="connection-shares.toml",
    source="connection_shares",
    quick={"repetitions": 3, "axes": {"page": PAGES_QUICK, "loss_pct": [2]}},
    budget=15,
    quick_budget=8,  # a ratio on one page needs 7 loads per cell
    drawing="connection_shares",
    paper=(("10 live H2 sites (Table II), 1-3 domains", "H2: one connection per domain; H2-Parallel: two"),
           ("Fig. 4c, H2", "83% of the bytes on one connection, on average over the sites"),
           ("Fig. 4c, H2-Parallel", "a single connection carries 52% of the traffic on average")),
    claims=(
        Claim("H2-Parallel opens twice H2's connections (1.9-2.1)",
              Ratio("connections", {"mode": "h2-parallel:2"}, {"mode": "h2"}, by="page"), low=1.9, high=2.1,
              paper="Table II: H2 one connection per domain, H2-Parallel two"),
        Claim("with H2 one connection carries most of the bytes (> 0.5)", Median("top_share", {"mode": "h2"}), low=0.5,
              paper="83% on average"),
        Claim("with H2-Parallel the busiest connection carries about half (0.4-0.65)",
              Median("top_share", {"mode": "h2-parallel:2"}), low=0.4, high=0.65, paper="52% on average"),
        Claim("H2-Parallel spreads the bytes more evenly than H2",
              Ratio("top_share", {"mode": "h2"}, {"mode": "h2-parallel:2"}, by="page"), low=1.0,
              paper="distributing the load more evenly across multiple connections"),
    ),
    note="the recorded Table I pages (1-3 origins each, corpus.table1) stand in for 001's live sites; medians "
         "over loads where 001 averaged over sites",
)

FIG5C = Figure(
    id="001-fig5c",
    title="Speed-up of H2-MP and H2-Parallel over H2 per page, WiFi 0% and 2% loss",
    seed="001 §IV-C2, Fig. 5c",
    spec="wifi-loss-speedup.toml",
    source="runs_by_size",
    quick={"repetitions": 3, "axes": {"page": ["baidu", "amazon"]}},
    budget=30,
    quick_budget=9,  # quick: one page per size class, so a ratio of ratios needs 9 loads per cell
    drawing="speedup",
    paper=(("7 Mbit/s, 50 ms, 15 pages sorted by size x 30 cold loads", "mean speed-up over H2 in seconds per page"),
           ("0% loss", "H2-Parallel and H2-MP do not show significant differences"),
           ("2% loss", "the speed-up relative to H2 is particularly pronounced for large pages")),
    claims=(
        Claim("at 0% loss H2-Parallel is about as fast as H2 (0.9-1.1)", speedup("h2-parallel:2", {"loss_pct": 0}),
              low=0.9, high=1.1, paper="no significant differences under good network condition"),
        Claim("at 0% loss H2-MP is about as fast as H2 (0.9-1.1)", speedup("h2-mptcp", {"loss_pct": 0}),
              low=0.9, high=1.1, paper="no significant differences under good network condition"),
        Claim("at 2% loss H2-Parallel speeds up large pages", speedup("h2-parallel:2", {"loss_pct": 2, "size_class": "large"}),
              low=1.0, paper="speedup particularly pronounced for large web pages"),
        Claim("at 2% loss H2-MP speeds up large pages", speedup("h2-mptcp", {"loss_pct": 2, "size_class": "large"}),
              low=1.0, paper="speedup particularly pronounced for large web pages"),
        Claim("at 2% loss H2-Parallel's relative speed-up (PLT ratio) is larger on large pages than on small ones",
              speedup_by_size("h2-parallel:2", {"loss_pct": 2}), low=1.0,
              paper="particularly pronounced for large web pages (001 plots the speed-up in seconds)"),
    ),
    note="pages by Table I size: small < 500 kB, large > 1500 kB (reproduce.data.SIZE_CLASSES)",
)

FIG6C = Figure(
    id="001-fig6c",
    title="Speed-up of H2-MP and H2-Parallel over H2 per page, ECMP without and with congestion",
    seed="001 §IV-C1, Fig. 6c",
    spec="ecmp-speedup.toml",
    source="runs_by_size",
    # quick: three pages per size class, the fewest a t over pages (the means' only interval) needs
    quick={"repetitions": 2, "axes": {"page": ["baidu", "google", "twitter", "sohu", "youtube", "amazon"]}},
    budget=10,  # 15 pages judged per page: more loads per cell help only as far as the pages agree
    quick_budget=3,
    drawing="speedup",
    paper=(("no congestion", "no speed-up using H2-Parallel, moderate speed-up using MPTCP"),
           ("one path congested", "both H2-Parallel and MPTCP achieve impressive speed-ups, particularly for large pages")),
    claims=(
        Claim("without congestion H2-Parallel is about as fast as H2 (0.9-1.1)",
              speedup("h2-parallel:2", {"congested": False}, MEAN), low=0.9, high=1.1, paper="no speedup using H2-Parallel"),
        Claim("without congestion H2-MP is faster than H2", speedup("h2-mptcp", {"congested": False}, MEAN), low=1.0,
              paper="moderate speedup using MPTCP"),
        Claim("with congestion H2-Parallel speeds up large pages", speedup("h2-parallel:2", {"congested": True,
              "size_class": "large"}, MEAN), low=1.0, paper="impressive speedups particularly for large pages"),
        Claim("with congestion H2-MP speeds up large pages", speedup("h2-mptcp", {"congested": True, "size_class": "large"}, MEAN),
              low=1.0, paper="impressive speedups particularly for large pages"),
        Claim("with congestion H2-MP's relative speed-up (PLT ratio) is larger on large pages than on small ones",
              speedup_by_size("h2-mptcp", {"congested": True}, MEAN), low=1.0, paper="particularly for large pages"),
        Claim("with congestion H2-MP is faster than H2-Parallel",
              plt_ratio({"mode": "h2-parallel:2", "congested": True}, {"mode": "h2-mptcp", "congested": True},
                        MEAN), low=1.0,
              paper="H2-MP performs the best as it can route the traffic away from the congested path (§IV-C1)"),
    ),
    explanations=(_FIG6C_ACCESS,),
    note="paths of 20 Mbit/s with greedy cross traffic, as 001-fig6; pages small < 500 kB, large > 1500 kB; "
         "ratios of the cells' mean PLTs (001 plots averages; a load's path is its hash's, so a cell's PLTs are "
         "bimodal and a median flips between the modes)",
)

FIGURES: tuple[Figure, ...] = (
    FIG3,
    FIG4,
    FIG4C,
    TABLE2,
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
            Claim("2% loss slows H1 down by around 20% (1.1-1.35)",
                  plt_ratio({"mode": "h1", "loss_pct": 2}, {"mode": "h1", "loss_pct": 0}), low=1.1, high=1.35,
                  paper="the other protocols see only a moderate increase by around 20%"),
        ),
    ),
    FIG5C,
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
            Claim("without congestion H1C (cleartext) is faster than H1",
                  plt_ratio({"mode": "h1", "congested": False}, {"mode": "h1c", "congested": False}), low=1.0,
                  paper="H1C is faster than H1 because of the TLS overhead in the latter"),
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
    FIG6C,
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
