"""000 ch. 6 over the emulator's WiFi model (docs/emulator.md, "WiFi links"): Table 6.4 / Fig. 6.10
(throughput with and without frame aggregation), Table 6.3 / Fig. 6.5 (TCP vs QUIC per mesh
client, the clients as WiFi link profiles: src/protolab/scenarios/wifi.py), Table 6.5 (QUIC vs
BQUIC per client), Fig. 6.4 (the controller's state transitions, drawn as a graph) and Fig. 6.12
(TCP against QUIC and BQUIC sharing one WiFi hop), Figs. 6.6/6.7 (throughput decision trees on
000 §6.2.1's features: reproduce.wifi_trees) and Fig. 6.8 (mean cwnd against the BDP-optimal window)."""

from __future__ import annotations

from typing import Any

from protolab.reproduce.claims import PROTOLAB, Claim, Median, Ratio, RatioOfRatios, ratio_claim
from protolab.reproduce.figures.base import Explanation, Figure

AGGREGATION_ON, AGGREGATION_OFF = 64, 1


def _aggregation(mode: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The runs of `mode` with aggregation on (A-MPDUs of 64 frames) and off (1 frame)."""
    return {"mode": mode, "ampdu_frames": AGGREGATION_ON}, {"mode": mode, "ampdu_frames": AGGREGATION_OFF}


# Measured 2026-11-26 (docs/reproduce.md, "000 ch. 6 over WiFi"): three runs of the entry, medians
# of 8, 8 and 12 runs per cell.
_SMALL_AGGREGATION_EDGE = Explanation(
    claim="aggregation raises TCP's throughput more than QUIC's (TCP's burstier traffic)",
    cause="TCP's edge is real in every run but small (TCP / QUIC 1.03 without aggregation, 1.03-1.12 with), "
          "no larger than QUIC's run-to-run spread with aggregation; QUIC runs in user space on this "
          "shared 2-core machine (000 Table 6.2: a short CPU slows QUIC, not TCP): suspected, not varied",
    evidence="medians (min-max) in Mbit/s, aggregation off -> on: full (12 runs per cell) TCP 35.4 -> 81.6 "
             "(80.1-84.8), QUIC 34.4 -> 78.9 (70.8-81.3), ratio of ratios 1.01 [0.956, 1.12]; quick (8) "
             "TCP 35.4 -> 82.3, QUIC 34.4 -> 76.0, 1.05 [0.95, 1.15]; quick from 3 reps (8) TCP 35.3 -> 83.4, "
             "QUIC 34.4 -> 74.5, 1.09 [1.01, 1.2] (reproduced)",
    command="protolab reproduce 000-table6.4",
)

# 000 Table 6.5: BQUIC's gain over QUIC per WiFi client (RP2-RP7), as printed.
BQUIC_GAINS_000 = {"rp2": 23.8, "rp3": 28.0, "rp4": 7.3, "rp5": 16.3, "rp6": 10.7, "rp7": 20.5}
# The quick variant: three clients (a t-interval over the per-client ratios needs three groups).
_QUICK_CLIENTS = [{"mesh_client": ["rp3"], "rtt_ms": [44]}, {"mesh_client": ["rp6"], "rtt_ms": [40]},
                  {"mesh_client": ["rp5"], "rtt_ms": [48]}]
_QUIC, _BQUIC = {"mode": "h3", "quic_cc": "cubic"}, {"mode": "h3", "quic_cc": "bquic"}
# 000 §6.2.3: RP3's optimal window, 62 Mbit/s x 44 ms ("at least 340 kB").
RP3_OPTIMAL_CWND_BYTES = 340_000

# Measured 2026-11-26 (docs/reproduce.md, "000 ch. 6 over WiFi"): the quick runs of the entries
# below and the probes specs/wifi-bquic-probe.toml (RP3, TCP / QUIC / BQUIC with the event log, at
# the profiles' 5% and at 30% frame errors) and specs/wifi-states-window.toml.
_BQUIC_PROBE = "protolab run specs/wifi-bquic-probe.toml (and with params.frame_error_rate = 0.3)"
_NO_HEADROOM = Explanation(
    claim="",
    cause="QUIC already fills the profiles' WiFi hops (000-table6.3's full run: TCP / QUIC 1.02), and what BQUIC "
          "changes does not happen here: quinn's receiver already acknowledges about one packet in 17 over the WiFi "
          "hop (it reads each aggregate's packets as a batch), so ACK decimation hardly changes the ACK ratio or the "
          "sender's burstiness; neither controller enters recovery (no spurious loss detection: 000-fig6.4); both "
          "leave slow start late",
    evidence="quick run (RP3, RP6, RP5, 4 runs each): BQUIC / QUIC 0.997 [0.994, 1.0]; medians Mbit/s QUIC/BQUIC "
             "RP3 52.9/52.8, RP6 47.9/47.7, RP5 10.13/10.09. Probe at 5% frame errors (3 runs each): ACK ratio "
             "QUIC 0.060, BQUIC 0.050, TCP 0.205; server burstiness (IDI of the gaps) 46, 44, 62; recovery entries 0 "
             "for all; goodput 52.5, 51.0, 54.3. At 30% frame errors: 40.7, 39.6, 42.2 Mbit/s; BQUIC leaves slow start "
             "later (479 vs 395 ms) and is burstier (43 vs 35), but is not faster",
    command=_BQUIC_PROBE,
)
_FLOW_CONTROL_LIMITED = Explanation(
    claim="QUIC's user-space sender is rarely application-limited on a capable client (< 10% of the time)",
    cause="quinn flags a send opportunity with nothing to send and neither the window nor the pacer blocking as "
          "application-limited, and that includes a stream blocked by the receiver's flow control: the bloated "
          "WiFi queue (one-way delay ~100 ms against 22 ms of propagation) grows the window (~1.3 MB) past quinn's "
          "default 1.25 MB stream window. It is not the CPU: the goodput is the link's either way",
    evidence="RP3, 3 runs each: application-limited 0.32-0.35 of the time with the 1.25 MB stream window, 0.10-0.17 "
             "with 16 MB; goodput 51.7-53.5 and 51.4-52.8 Mbit/s (TCP 53.9 on this profile)",
    command="protolab run specs/wifi-states-window.toml",
)
_BLOATED_WINDOWS = Explanation(
    claim="",
    cause="the WiFi hop's queue (the emulator's default 1000 packets) fills: both windows grow with the queueing "
          "delay far past the BDP of the base RTT, QUIC's more than TCP's (no early slow-start exit, no spurious "
          "reduction: 000-fig6.4; part of its window stays unused, flow-control limited). 000's QUIC left slow "
          "start early or reduced spuriously on delay variation (Fig. 6.9), which kept its window small",
    evidence="quick run (RP3, 7 runs each): mean cwnd QUIC 1.31 MB [1.20, 1.51], TCP 809 kB [683, 960], QUIC / TCP "
             "1.62 [1.25, 2.21]; probe at 5% frame errors: mean one-way delay QUIC 100 ms, TCP 113 ms (22 ms of it "
             "propagation)",
    command="protolab reproduce 000-fig6.8 --quick; " + _BQUIC_PROBE,
)
_BQUIC_SHARE = Explanation(
    claim="",
    cause="BQUIC sends as QUIC does on this hop (see 000-table6.5: the ACK ratio is already low, no spurious "
          "reductions), so TCP takes the same share from both",
    evidence="quick run, 8 runs per pair: TCP's share against QUIC 0.634 [0.507, 0.734] (medians of the sides' "
             "goodput TCP 34.4, QUIC 19.8 Mbit/s), against BQUIC 0.643 [0.496, 0.71] (BQUIC 19.2); BQUIC's share "
             "over QUIC's 0.974 [0.588, 1.89]",
    command="protolab reproduce 000-fig6.12 --quick",
)
_CLASSES_ARE_CLIENTS = Explanation(
    claim="",
    cause="here the throughput class is the client's: each client's runs hardly vary, so the first split is "
          "whichever feature tells the slow client from the fast ones cleanly, the congestion-avoidance share; the "
          "mean cwnd does not tell RP3 from RP6 (the bloated WiFi queue grows every window past the BDP: 000-fig6.8). "
          "000's ~2000 live transfers varied within each client (early slow-start exits, spurious reductions: "
          "Fig. 6.9), which made the window decide the class; neither happens on our model (000-fig6.4)",
    evidence="quick run (RP3, RP6, RP5, 3 runs each): goodput RP3 51.4-54.8, RP6 47.0-49.0, RP5 10.1-10.3 Mbit/s "
             "(classes t50, t40, t10); congestion-avoidance share TCP 0.57-0.73 (RP3, RP6) vs 0.95 (RP5), QUIC "
             "0.06-0.20 vs 0.75; mean cwnd QUIC 1.07-1.53 MB on RP3 and RP6, TCP 0.76-1.20 MB. Roots of the 30 "
             "bootstrap trees: TCP congestion-avoidance share 22, client burstiness 6, mean cwnd 0; QUIC 21, 5, 4",
    command="protolab reproduce 000-fig6.6-6.7 --quick",
)

FIGURES: tuple[Figure, ...] = (
    Figure(
        id="000-table6.4",
        title="TCP and QUIC throughput over WiFi with and without frame aggregation",
        seed="000 §6.2.3, Table 6.4, Fig. 6.10",
        spec="wifi-aggregation.toml",
        source="runs",
        budget=12,
        quick_budget=8,  # one group: a ratio of ratios needs 8 runs per cell
        quick={"repetitions": 2},
        paper=(("TCP (RP6)", "26.1 ± 1.3 -> 49.8 ± 2.4 Mbit/s, +90%"),
               ("QUIC (RP6)", "23.7 ± 1.1 -> 38.2 ± 2.4 Mbit/s, +61%"),
               ("Fig. 6.10a", "inter-packet time: TCP's half at 2-4 us, QUIC's at 50-100 us")),
        claims=(
            Claim("aggregation raises TCP's throughput",
                  Ratio("goodput_mbps", *_aggregation("tcp")), low=1.0, paper="49.8 / 26.1 = 1.91"),
            Claim("aggregation raises QUIC's throughput",
                  Ratio("goodput_mbps", *_aggregation("h3")), low=1.0, paper="38.2 / 23.7 = 1.61"),
            Claim("aggregation raises TCP's throughput more than QUIC's (TCP's burstier traffic)",
                  RatioOfRatios("goodput_mbps", *_aggregation("tcp"), *_aggregation("h3")), low=1.0,
                  paper="1.91 / 1.61 = 1.18"),
        ),
        explanations=(_SMALL_AGGREGATION_EDGE,),
        note="000's RP6 reached the gateway over one WiFi hop whose antenna had aggregation switched off; "
             "ours: one 802.11n hop (130 Mbit/s PHY, both directions), 10 MB downloads, 40 ms RTT",
    ),
    Figure(
        id="000-table6.3",
        title="TCP vs QUIC throughput per mesh client over WiFi (aggregation on)",
        seed="000 §6.1.5, Table 6.3, Fig. 6.5",
        spec="wifi-clients.toml",
        source="runs",
        budget=8,  # six clients: a t-interval over the per-client ratios; more runs steady each median
        quick_budget=4,
        quick={"repetitions": 3, "sweeps": [{"mesh_client": ["rp3"], "rtt_ms": [44]}, {"mesh_client": ["rp6"], "rtt_ms": [40]},
                                            {"mesh_client": ["rp5"], "rtt_ms": [48]}]},
        paper=(("RP2 (1 hop)", "TCP 61.1, QUIC 40.9 Mbit/s (+49.5%)"), ("RP3 (2 hops)", "TCP 61.6, QUIC 40.3 (+52.6%)"),
               ("RP4 (5 hops)", "TCP 5.0, QUIC 4.5 (+12.3%)"), ("RP5 (3 hops)", "TCP 10.2, QUIC 7.9 (+29.4%)"),
               ("RP6 (1 hop)", "TCP 49.8, QUIC 38.2 (+30.3%)"), ("RP7 (5 hops)", "TCP 31.4, QUIC 21.6 (+45.4%)"),
               ("RP1 (wired)", "TCP 71.9, QUIC 76.3 (-5.7%): not a WiFi client, no profile"),
               ("RP8 (15 km link)", "TCP 3.7, QUIC 6.0: 000's outlier (0.64% loss), no profile")),
        claims=(
            Claim("over WiFi TCP's throughput is higher than QUIC's (geometric mean over the clients)",
                  Ratio("goodput_mbps", {"mode": "tcp"}, {"mode": "h3"}, by="mesh_client"), low=1.0,
                  paper="TCP / QUIC 1.12-1.53 over RP2-RP7, geometric mean 1.36"),
        ),
        note="the clients are WiFi link profiles: PHY rate from 000's TCP throughput, contention from the "
             "hop count, RTT from 000 §6.1.2 and Fig. 6.8 (RP3, RP4) or the hop count (specs/wifi-clients.toml says how)",
    ),
    Figure(
        id="000-table6.5",
        title="QUIC vs BQUIC throughput per mesh client over WiFi (aggregation on)",
        seed="000 §6.3.2, Table 6.5",
        spec="wifi-bquic.toml",
        source="runs",
        budget=8,  # six clients: a t-interval over the per-client ratios; more runs steady each median
        quick_budget=4,
        quick={"repetitions": 3, "sweeps": _QUICK_CLIENTS},
        paper=(("RP2 (1 hop)", "QUIC 40.9, BQUIC 50.6 Mbit/s (+23.8%)"), ("RP3 (2 hops)", "QUIC 40.3, BQUIC 51.7 (+28%)"),
               ("RP4 (5 hops)", "QUIC 4.5, BQUIC 4.8 (+7.3%)"), ("RP5 (3 hops)", "QUIC 7.9, BQUIC 9.2 (+16.3%)"),
               ("RP6 (1 hop)", "QUIC 38.2, BQUIC 42.2 (+10.7%)"), ("RP7 (5 hops)", "QUIC 21.6, BQUIC 26 (+20.5%)"),
               ("RP1 (wired)", "QUIC 76.3, BQUIC 80.3 (+5.4%): not a WiFi client, no profile"),
               ("RP8 (15 km link)", "QUIC 6, BQUIC 4.75 (-20.8%): 000's outlier, no profile")),
        claims=(
            Claim("over WiFi BQUIC's throughput is higher than QUIC's (geometric mean over the clients)",
                  Ratio("goodput_mbps", _BQUIC, _QUIC, by="mesh_client"), low=1.0,
                  paper="BQUIC / QUIC 1.07-1.28 over RP2-RP7, geometric mean 1.18"),
            Claim("BQUIC's gain over QUIC is within 000's +7% to +28% (geometric mean over the clients)",
                  Ratio("goodput_mbps", _BQUIC, _QUIC, by="mesh_client"), low=1.07, high=1.28,
                  paper="+7.3% (RP4) to +28% (RP3)"),
        ),
        note="the clients of 000-table6.3 (WiFi link profiles, specs/wifi-clients.toml); QUIC is protolab's Cubic, "
             "BQUIC the `bquic` profile (docs/congestion.md: ACK decimation up to 10 packets / 25 ms, a later "
             "slow-start exit, a higher time threshold); 000's BQUIC was Chromium's QUIC v43 modified the same three ways",
        explanations=(_NO_HEADROOM,),
    ),
    Figure(
        id="000-fig6.4",
        title="QUIC's controller state transitions over WiFi, with transition counts (QUIC and BQUIC)",
        seed="000 §6.1.4, Fig. 6.4 (and §6.2.3, Fig. 6.9a: the early slow-start exit)",
        spec="wifi-bquic.toml",
        source="controller_states",
        drawing="state_graph",
        budget=8,
        quick_budget=7,  # a ratio over one client needs 7 runs per controller
        quick={"repetitions": 7, "sweeps": [{"mesh_client": ["rp3"], "rtt_ms": [44]}]},
        paper=(("Fig. 6.4", "QUIC v43's states with the percentage of time in each, RPi vs PC: "
                            "\"very similar on both devices\" (no transition counts)"),
               ("§6.1.4, Kakhki et al. [55]", "application-limited 58.84% of the time on a MotoG, 7.05% on a PC"),
               ("Fig. 6.9a", "QUIC exits slow start early under WiFi delay variation; BQUIC's higher threshold avoids it")),
        claims=(
            Claim("QUIC's user-space sender is rarely application-limited on a capable client (< 10% of the time)",
                  Median("frac_application_limited", _QUIC), high=0.10,
                  paper="000: RPi like a PC (Fig. 6.4); a PC 7.05% [55]"),
            Claim("BQUIC leaves slow start later than QUIC over WiFi (its higher slow-start exit threshold)",
                  Ratio("slow_start_exit_ms", _BQUIC, _QUIC), low=1.0,
                  paper="Fig. 6.9a: QUIC exits at a 6 ms delay swing; BQUIC raises the threshold (§6.3.1)"),
            Claim("QUIC rarely enters recovery over the WiFi hop (median entries per 10 MB transfer < 1.5): the "
                  "link layer's retries hide the frame errors", Median("recovery_entries", _QUIC), high=1.5,
                  paper="Fig. 6.9b: gQUIC v43 reduced its window repeatedly with zero losses (spurious detection)",
                  whose=PROTOLAB),
        ),
        note="the states are protolab's controller's (docs/samples.md: slow start, conservative slow start, "
             "congestion avoidance, recovery, application-limited), recorded by the server at every change; "
             "000's were QUIC v43's (Chromium), whose state machine it does not print; RP3's profile (44 ms)",
        explanations=(_FLOW_CONTROL_LIMITED,),
    ),
    Figure(
        id="000-fig6.12",
        title="Fairness on WiFi: TCP against QUIC and against BQUIC sharing one WiFi hop",
        seed="000 §6.3.3, Fig. 6.12",
        spec="wifi-fairness.toml",
        source="pairs_over_time",
        budget=12,
        quick_budget=8,  # a ratio over one group needs 7 runs per pair
        quick={"repetitions": 7, "params": {"bulk_duration_s": 8}},
        paper=(("Fig. 6.12, TCP vs QUIC", "TCP gets a much higher share; QUIC grabs more only once TCP's flow is "
                                          "about to finish"),
               ("Fig. 6.12, TCP vs BQUIC", "\"quite fair to each other\""),
               ("Fig. 6.11 (wired, not here)", "QUIC takes much more than TCP; BQUIC no more than QUIC")),
        claims=(
            Claim("on WiFi TCP takes the larger share against QUIC", Median("share_a", {"pair": "tcp vs h3"}), low=0.5,
                  paper="Fig. 6.12: TCP much higher (shares drawn only)"),
            Claim("on WiFi TCP and BQUIC share fairly (TCP's share 0.4-0.6)",
                  Median("share_a", {"pair": "tcp vs h3@bquic"}), low=0.4, high=0.6, paper="\"quite fair\""),
            Claim("BQUIC takes a larger share against TCP than QUIC does",
                  Ratio("share_b", {"pair": "tcp vs h3@bquic"}, {"pair": "tcp vs h3"}), low=1.0,
                  paper="Fig. 6.12: QUIC starved until TCP ends, BQUIC fair"),
        ),
        note="two clients behind one 802.11n hop (65 Mbit/s PHY as RP6's profile, A-MPDUs of 64, 40 ms; scenario "
             "wifi-fairness), 20 s bulk downloads at the same time (000: a 10 MB page in two threads of one client); "
             "shares and Jain's index from the emulator's deliveries on the hop. Fig. 6.11 (the wired link) is "
             "001-fig7 / 004's fairness pairs on a wired bottleneck",
        explanations=(_BQUIC_SHARE,),
    ),
    Figure(
        id="000-fig6.6-6.7",
        title="Throughput decision trees for TCP and QUIC over WiFi on 000's transfer features",
        seed="000 §6.2.1-6.2.2, Figs. 6.6/6.7",
        spec="wifi-trees.toml",
        source="decision_trees",
        budget=8,  # 8 runs per client and protocol: 48 transfers per tree
        quick_budget=3,
        quick={"repetitions": 3, "sweeps": _QUICK_CLIENTS},
        paper=(("Fig. 6.6 (TCP)", "C4.5 tree rooted at the mean cwnd"),
               ("Fig. 6.7 (QUIC)", "rooted at the mean cwnd; delay, delay variation and burstiness below it"),
               ("§6.2.2", "~2000 transfers, classes t0, t10, ... of 10 Mbit/s, Weka's C4.5, pruned")),
        claims=(
            Claim("TCP's throughput tree splits first on the mean cwnd (share of bootstrap trees > 0.5)",
                  Median("root_is_mean_cwnd", {"mode": "tcp"}), low=0.5,
                  paper="Fig. 6.6: mean cwnd at the root"),
            Claim("QUIC's throughput tree splits first on the mean cwnd (share of bootstrap trees > 0.5)",
                  Median("root_is_mean_cwnd", {"mode": "h3"}), low=0.5,
                  paper="Fig. 6.7: mean cwnd at the root"),
            Claim("QUIC's tree splits on a delay or burstiness feature (share of bootstrap trees > 0.5)",
                  Median("splits_on_delay_or_burstiness", {"mode": "h3"}), low=0.5,
                  paper="§6.2.2: delay, delay variation and client/server burstiness are in the trees"),
        ),
        note="000's 17 features per transfer from the emulator's event log and the server's samples "
             "(reproduce.transfer_features says how each is measured); QUIC's tree is the h3 runs' (Cubic); CART with information gain, depth 3, "
             "as report.decision_tree (000: C4.5, pruned). The intervals are over 30 bootstrap trees per "
             "protocol: how stable the tree's root is on these transfers, not a sampling interval over runs. "
             "QUIC is protolab's Cubic; the clients are 000-table6.3's profiles",
        explanations=(_CLASSES_ARE_CLIENTS,),
    ),
    Figure(
        id="000-fig6.8",
        title="Mean congestion window of TCP and QUIC on RP3 against the BDP-optimal window",
        seed="000 §6.2.3, Fig. 6.8",
        spec="wifi-trees.toml",
        source="controller_states",
        budget=8,
        quick_budget=7,  # a ratio over one client needs 7 runs per mode
        quick={"repetitions": 7, "sweeps": [{"mesh_client": ["rp3"], "rtt_ms": [44]}], "artifacts": {"events": False}},
        paper=(("Fig. 6.8 (RP3, >200 transfers each)", "mean cwnd below the optimal 340 kB in ~70% of QUIC's transfers, "
                                                        "29% of TCP's; below half of it in ~25% of QUIC's"),),
        claims=(
            Claim("QUIC's mean cwnd is below the BDP-optimal window on RP3 (median transfer < 340 kB)",
                  Median("mean_cwnd_bytes", {**_QUIC, "mesh_client": "rp3"}), high=RP3_OPTIMAL_CWND_BYTES,
                  paper="~70% of QUIC's transfers below 340 kB"),
            Claim("TCP's mean cwnd reaches the BDP-optimal window on RP3 (median transfer > 340 kB)",
                  Median("mean_cwnd_bytes", {"mode": "tcp", "mesh_client": "rp3"}), low=RP3_OPTIMAL_CWND_BYTES,
                  paper="29% of TCP's transfers below 340 kB"),
            ratio_claim("QUIC's mean cwnd is smaller than TCP's on RP3", "mean_cwnd_bytes", _QUIC, {"mode": "tcp"},
                        where={"mesh_client": "rp3"}, high=1.0, paper="Fig. 6.8: QUIC's ECDF left of TCP's"),
        ),
        note="RP3's profile (78 Mbit/s PHY, 2 WiFi hops, 44 ms; 000-table6.3); the mean of the server's sampled "
             "window over each 10 MB download; 000's optimal window is its RP3's 62 Mbit/s x 44 ms. "
             "Figs. 6.9a/b (early slow-start exit, spurious congestion detection) are claims of 000-fig6.4",
        explanations=(_BLOATED_WINDOWS,),
    ),
)
