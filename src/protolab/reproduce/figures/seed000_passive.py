"""000 ch. 3-4: passive traffic analysis (the HTTP-version classifier, parallel H2 connections).

000 measured real networks (a campus and a residential network, Tstat logs of 2016); the lab
cannot make that traffic. What it can judge is 000's *method* on traffic whose truth it knows
exactly: every figure here runs the labelled lab corpus (`specs/traffic-corpus-10x.toml`: loads
of twelve generated pages in h1, h2, h2-parallel:2 and h3 over several links, the client's
capture kept; under `reproduce --all` one corpus for all, reproduce.shared_corpus), builds its flows
(`after_run="corpus"`, as `protolab traffic corpus`) and analyses them (reproduce.passive). Each
figure keeps 000's statements about its networks beside the judged ones, as claims whose verdict
is "not judgeable here" with the reason (claims.NotJudgeable).

Budgets: a passive figure's repetitions are the corpus' loads per cell, so an adaptive round
doubles the corpus; the cross-validation (10 folds) and the learning curve (10 draws per share)
are fixed by reproduce.passive. The seed's numbers are transcribed with their section.
"""

from __future__ import annotations

from typing import Any

from protolab.reproduce.claims import Claim, Median, NotJudgeable, Ratio
from protolab.reproduce.figures.base import Figure

# The 10x corpus (issue 24): twelve generated pages of 8 to 52 origins, 384 loads, ~13 000
# labelled flows (the five demo pages' specs/traffic-corpus.toml gave 679), enough pages to hold
# each out in turn (Table 3.2's leave-one-page-out).
SPEC = "traffic-corpus-10x.toml"
# Three of its pages (10-15 origins), one link rate: 48 loads (a few minutes), every class with
# far more than the 10 flows 10 folds need.
QUICK: dict[str, Any] = {"axes": {"bandwidth_mbps": [10], "page": ["page-003", "page-008", "page-012"]}}
CAMPUS = "000's campus and residential traffic of 2016 (Tstat); the lab corpus has no such users or services"
LAB_LOADS = ("the lab closes every connection when its load ends (no idle connections kept open for minutes), "
             "so its durations say nothing of the wild's")


def _corpus_figure(**kwargs: Any) -> Figure:
    """A figure over the labelled lab corpus."""
    return Figure(spec=SPEC, quick=QUICK, after_run="corpus", **kwargs)


def _h2_over_h1(metric: str) -> Ratio:
    return Ratio(metric, {"protocol": "h2"}, {"protocol": "h1"})


def _algorithms(metric: str, num: str, den: str) -> Ratio:
    """num's over den's, paired per fold (both are tested on the same held-out flows)."""
    return Ratio(metric, {"algorithm": num}, {"algorithm": den}, by="fold")


def _shares(num: int, den: int) -> Ratio:
    """The accuracy trained on num% over den% of the training flows, paired per draw."""
    return Ratio("accuracy", {"train_pct": num}, {"train_pct": den}, by="repetition")


PARALLEL = {"mode": "h2-parallel:2", "protocol": "h2"}

FIGURES: tuple[Figure, ...] = (
    _corpus_figure(
        id="000-fig3.2", title="H1 and H2 share of web services (SNI -> service)", seed="000 §3.1.3, Fig. 3.2",
        source="service_shares",
        paper=(("Google, YouTube, DoubleClick, Wikipedia", "heavily H2, constant June-December 2016"),
               ("Twitter", "H2 45% -> 70%"), ("LinkedIn", "~30% H2 in June, then H1 only"),
               ("Facebook / Instagram (Dec.)", "50% / 15% H2; 26% / 38% of port 443 not TLS (Zero)")),
        claims=(
            Claim("ALPN/NPN handshake labels (000's ground truth, §3.1.2) name the protocol every connection spoke",
                  Median("handshake_agreement", {}), low=0.99, paper="the ground truth of ch. 3"),
            Claim("flows grouped by server name (second-level domain, CDNs to their service) land in their service",
                  Median("service_is_page", {}), low=0.99, paper="fbcdn -> Facebook (§3.1.3)"),
            Claim("Google, YouTube, DoubleClick and Wikipedia use mostly H2", NotJudgeable(CAMPUS), paper="Fig. 3.2"),
            Claim("Facebook's H2 share fell to 50%, Instagram's to 15% (the Zero protocol)", NotJudgeable(CAMPUS),
                  paper="Fig. 3.2b"),
        ),
        note="the SNI -> service map is reproduce.passive.SERVICE_DOMAINS (docs/reproduce.md)",
    ),
    _corpus_figure(
        id="000-fig3.3", title="Characteristics of H1 and H2 flows (CDFs a-d)",
        seed="000 §3.1.4, Fig. 3.3", source="flow_features",
        paper=(("flows", "~700 000 H2 and 300 000 H1 flows, one hour of June 2016"),
               ("duration", "H1: 25% < 1 s; H2: 5% < 1 s; > 100 s: 33% H1, 53% H2; H2 36% longer on average"),
               ("packets", "50% of H2 flows >= 20 packets per direction, 22% of H1"),
               ("bytes per packet", "H2 requests 40% and responses 29% smaller than H1's")),
        claims=(
            Claim("H2 flows carry more packets than H1 flows (server to client)", _h2_over_h1("s2c_packets"), low=1.0,
                  paper="50% of H2 vs 22% of H1 flows have >= 20 packets"),
            Claim("H2 flows carry more packets than H1 flows (client to server)", _h2_over_h1("c2s_packets"), low=1.0,
                  paper="(both directions)"),
            Claim("H2 request packets are smaller than H1's", _h2_over_h1("c2s_bytes_per_packet"), high=1.0,
                  paper="40% smaller"),
            Claim("H2 response packets are smaller than H1's", _h2_over_h1("s2c_bytes_per_packet"), high=1.0,
                  paper="29% smaller"),
            Claim("large responses are more common in H2 flows", _h2_over_h1("s2c_bytes"), low=1.0,
                  paper="> 10 kB more common in H2 (Fig. 3.3d)"),
            Claim("H2 flows last longer than H1 flows", NotJudgeable(LAB_LOADS), paper="36% longer; peaks at 65 s, 240 s"),
        ),
    ),
    _corpus_figure(
        id="000-fig3.3ef", title="H1 and H2 flows in two features each (scatter plots e-f)",
        seed="000 §3.1.4, Fig. 3.3 e-f", source="scatter_separation",
        paper=(("sample", "1500 flows of each version"),
               ("e: request vs response bytes per packet", "H2 clustered at 400 / 800 bytes; H1 spread, responses > 600"),
               ("f: duration vs request size", "H2 longer with smaller requests; H1 shorter with larger requests")),
        claims=(
            Claim("H1 and H2 flows separate by request and response bytes per packet (a tree on them > 90%)",
                  Median("accuracy", {"panel": "e"}), low=0.9, paper="cleanly separated clusters (Fig. 3.3e)"),
            Claim("H1 and H2 flows separate by duration and request bytes per packet (a tree on them > 90%)",
                  Median("accuracy", {"panel": "f"}), low=0.9, paper="grouped apart (Fig. 3.3f)"),
            Claim("the clusters' places (H2 at 400 / 800 bytes)", NotJudgeable(CAMPUS), paper="Fig. 3.3e"),
        ),
        note="per fold of a 10-fold CV over the H1 and H2 flows, a C4.5-like tree on the panel's two features",
    ),
    _corpus_figure(
        id="000-fig3.4", title="Accuracy of the four algorithms (10-fold CV)", seed="000 §3.2.4, Fig. 3.4",
        source="cv_folds", budget=2, quick_budget=2,
        paper=(("Campus", "RF 97.5%, C4.5 ~95%, NBTree ~93%, BayesNet 88%"), ("Residential", "BayesNet 86%")),
        claims=(
            Claim("the forest tells HTTP versions apart from seven NetFlow features (accuracy > 90%)",
                  Median("accuracy", {"algorithm": "rf"}), low=0.9, paper="97.5%"),
            Claim("the forest is at least as accurate as C4.5", _algorithms("accuracy", "rf", "c45"), low=1.0,
                  paper="97.5 / 95 = 1.03"),
            Claim("the forest is more accurate than BayesNet", _algorithms("accuracy", "rf", "bayes"), low=1.0,
                  paper="97.5 / 88 = 1.11"),
            Claim("BayesNet is the least accurate (below NBTree)",
                  _algorithms("accuracy", "bayes", "nbtree"), high=1.0, paper="88 / 93 = 0.95"),
            Claim("the accuracies are 97.5 / 95 / 93 / 88% on campus traffic", NotJudgeable(CAMPUS), paper="Fig. 3.4"),
        ),
    ),
    _corpus_figure(
        id="000-s3.2.4-learning", title="Learning curve: accuracy against the training set's size",
        seed="000 §3.2.4", source="learning_curve", budget=2, quick_budget=2,
        paper=(("training sets", "1 K to 1 M Campus flows"),
               ("claim", "accuracy improves up to 100 K flows and stalls beyond 500 K: a limited set suffices")),
        claims=(
            Claim("accuracy grows with the training set (1% of it below all of it)",
                  _shares(1, 100), high=1.0, paper="improves up to 100 K"),
            Claim("half the training set is as good as all of it (within 3%)",
                  _shares(50, 100), low=0.97,
                  paper="stalls beyond 500 K of 1 M"),
            Claim("100 K Campus flows are needed", NotJudgeable("the size at which accuracy stalls depends on the "
                                                               "traffic's variety; the lab corpus is far smaller"),
                  paper="100 K / 500 K"),
        ),
        note="shares 1, 5, 10, 50, 100% of the training part (70%), 10 draws, each share tested on the draw's "
             "held-out 30%; benches/traffic_learning.py measures the same curve on synthetic flows",
    ),
    _corpus_figure(
        id="000-table3.1", title="F-measure and kappa of the four algorithms", seed="000 §3.2.4, Table 3.1",
        source="cv_folds", budget=2, quick_budget=2,
        paper=(("F-measure Campus", "RF 97.3, C4.5 95.2, NBTree 93.2, BayesNet 87.7"),
               ("Kappa Campus", "RF 94.8, C4.5 90.8, NBTree 86.4, BayesNet 76.5"),
               ("Residential", "F 97.5 / 95.5 / 93 / 86.2; kappa 94.7 / 90.4 / 87 / 70")),
        claims=(
            Claim("the forest's average F-measure is high (> 0.9)", Median("weighted_f1", {"algorithm": "rf"}),
                  low=0.9, paper="97.3"),
            Claim("the forest's kappa is high (> 0.8): not accuracy by chance", Median("kappa", {"algorithm": "rf"}),
                  low=0.8, paper="94.8"),
            Claim("BayesNet's kappa is the lowest (below NBTree's)",
                  _algorithms("kappa", "bayes", "nbtree"), high=1.0, paper="76.5 / 86.4"),
            Claim("the values on campus and residential traffic", NotJudgeable(CAMPUS), paper="Table 3.1"),
        ),
    ),
    _corpus_figure(
        id="000-fig3.5", title="Confusion matrices: recall per class", seed="000 §3.2.4, Fig. 3.5",
        source="cv_folds", budget=2, quick_budget=2,
        paper=(("Random Forest", "recall > 96% for every class; errors mostly H2 taken for H1"),),
        claims=(
            Claim("the forest's recall of H1 is above 96%", Median("recall_h1", {"algorithm": "rf"}), low=0.96,
                  paper="> 96%"),
            Claim("the forest's recall of H2 is above 96%", Median("recall_h2", {"algorithm": "rf"}), low=0.96,
                  paper="> 96%"),
            Claim("the forest's recall of the third class is above 96%", Median("recall_h3", {"algorithm": "rf"}),
                  low=0.96, paper="> 96% (000's third class is Others; the lab's is H3)"),
            Claim("on campus traffic the few errors are mostly H2 flows taken for H1", NotJudgeable(CAMPUS),
                  paper="Fig. 3.5a"),
        ),
    ),
    _corpus_figure(
        id="000-fig3.6", title="Accuracy per domain name against its share of flows", seed="000 §3.2.5, Fig. 3.6",
        source="domain_accuracy",
        paper=(("top-100 domains", "most classified at > 90%; the top 5 carry the largest share"),),
        claims=(
            Claim("most domains' flows are classified at > 90% (the median domain)", Median("accuracy", {}), low=0.9,
                  paper="> 90% for most of the top 100"),
            Claim("the top 5 domains carry the largest share, with a long tail", NotJudgeable(CAMPUS),
                  paper="Fig. 3.6's blue curve"),
        ),
        note="the forest's out-of-fold predictions (10 folds), per server name",
    ),
    _corpus_figure(
        id="000-table3.2", title="Stability: trained on some link conditions or pages, tested on another",
        seed="000 §3.2.6-3.2.7, Table 3.2", source="condition_stability",
        paper=(("temporal (Jun-Dec 2016)", "95.8, 94.8, 95.9, 95.5, 91, 90.4, 90.8%"),
               ("spatial (campus <-> residential)", "~92%, 4 points below training and testing on one network")),
        claims=(
            Claim("a model holds on conditions it was not trained on (>= 0.94 of its CV accuracy)",
                  Median("accuracy_ratio", {"held_out": "condition"}), low=0.94,
                  paper="92 / 96 across networks; 90.4 / 95.8 at worst"),
            Claim("a model holds on pages it was not trained on (>= 0.94 of its CV accuracy, leave-one-page-out)",
                  Median("accuracy_ratio", {"held_out": "page"}), low=0.94, paper="92 / 96 across networks"),
            Claim("a model trained on the other pages classifies an unseen page's flows at > 90%",
                  Median("accuracy", {"held_out": "page"}), low=0.9, paper="~92% on the other network"),
            Claim("the June model stays above 90% for six months", NotJudgeable(CAMPUS), paper="Table 3.2"),
        ),
        note="the forest trained on the flows of the other values of rtt_ms, bandwidth_mbps and loss_pct, and of the "
             "other pages, tested on each value's (page's) flows, over its 10-fold CV accuracy; one row per held-out "
             "value; the lab's pages stand for 000's networks: traffic the model never saw",
    ),
    Figure(
        id="000-fig3.7", title="Training and classification speed against data size", seed="000 §3.2.8, Fig. 3.7",
        spec="-", source="-",
        paper=(("training 500 K", "BayesNet 12 s, C4.5 141 s, RF 305 s, NBTree 481 s"),
               ("classifying 10 M", "C4.5 31 s (~323 000 flows/s), BayesNet 63 s, NBTree 106 s, RF 861 s")),
        claims=(Claim("C4.5 classifies faster than the forest", NotJudgeable("a timing on this shared machine"),
                      paper="323 000 vs 11 600 flows/s"),),
        not_runnable="timings against data size, not a claim over lab runs: benches/traffic_learning.py --speed "
                     "writes rows per size with the throughput ratios (docs/benchmarks.md)",
    ),
    _corpus_figure(
        id="000-table4.2", title="Isolated and parallel flows", seed="000 §4.3.1, Table 4.2", source="parallel_shares",
        paper=(("Campus", "isolated 67.1%, parallel 32.9%"), ("Residential", "isolated 65.3%, parallel 34.7%")),
        claims=(
            Claim("the detection finds every flow of a two-connection H2 load parallel", Median("parallel_share", PARALLEL),
                  low=0.99, paper="Alg. 1-2, MAX_GAP 5 s"),
            Claim("the detection finds a one-connection H2 load's flows isolated",
                  Median("parallel_share", {"mode": "h2", "protocol": "h2"}), high=0.01, paper="Alg. 1-2"),
            Claim("a third of H2 flows are parallel", NotJudgeable(CAMPUS), paper="32.9% / 34.7%"),
        ),
        note="per run (one page load): over a whole capture the lab's loads, 0.2 s apart, merge into one session",
    ),
    _corpus_figure(
        id="000-fig4.3", title="Flows per session", seed="000 §4.3.1, Fig. 4.3", source="sessions",
        paper=(("both networks", "sessions with more than one flow hold about 3 flows on average"),),
        claims=(
            Claim("a two-connection H2 load's sessions hold its 2 flows", Median("flows", PARALLEL), low=1.99, high=2.01,
                  paper="(the detection's count)"),
            Claim("parallel sessions hold about 3 flows", NotJudgeable(CAMPUS), paper="~3"),
        ),
    ),
    _corpus_figure(
        id="000-fig4.4", title="Degree of time overlap of parallel flows", seed="000 §4.3.3, Fig. 4.4",
        source="sessions",
        paper=(("median p", ">= 75% campus, >= 63% residential"), ("p ~ 100%", "> 20% / > 30% of sessions"),
               ("mean overlap", "58.5 s / 29 s"), ("Table 4.3", "p = 29.7% (F4 with F3)")),
        claims=(
            Claim("connections used together for one page overlap in time (median p >= 75%)",
                  Median("time_overlap_pct", PARALLEL), low=75, paper=">= 75% (campus)"),
            Claim("half of the wild's parallel sessions overlap by >= 75% / 63%", NotJudgeable(CAMPUS),
                  paper="Fig. 4.4"),
        ),
        note="judged on h2-parallel:2 loads, whose two connections carry one page: what hypothesis 2 describes",
    ),
    _corpus_figure(
        id="000-fig4.5", title="Sessions by the duration of their longest flow", seed="000 §4.3.4, Fig. 4.5",
        source="sessions",
        paper=(("classes", "< 10 s many, 10-600 s significant, > 600 s rare; campus and residential differ"),),
        claims=(Claim("many sessions' longest flow lasts < 10 s, a significant share 10-600 s",
                      NotJudgeable(f"{CAMPUS}; {LAB_LOADS}"), paper="Fig. 4.5"),),
    ),
    _corpus_figure(
        id="000-fig4.6", title="Time overlap by the duration of the longest flow", seed="000 §4.3.4, Fig. 4.6",
        source="sessions",
        paper=(("sessions > 60 s", "overlap significantly less than shorter ones"),),
        claims=(Claim("sessions whose longest flow lasts > 60 s overlap less", NotJudgeable(f"{CAMPUS}; {LAB_LOADS}"),
                      paper="Fig. 4.6"),),
    ),
    _corpus_figure(
        id="000-fig4.7", title="Degree of data overlap by the size of the largest flow", seed="000 §4.3.5, Fig. 4.7",
        source="sessions",
        paper=(("size classes (campus)", "< 5 kB 18%, 5-10 kB 30%, 10-50 kB 25%, 50-500 kB 22%, > 500 kB 6%"),
               ("10-50 kB", "~20% of sessions with r >= 100%"), ("< 5 kB", "r concentrated around 100%")),
        claims=(
            Claim("parallel connections of one page both carry data (median r > 10%)",
                  Median("data_overlap_pct", PARALLEL), low=10, paper="parallel flows are actively used (hypothesis 2)"),
            Claim("the distribution of r per size class", NotJudgeable(CAMPUS), paper="Fig. 4.7"),
        ),
        note="r = (session bytes - largest flow's) / largest flow's x 100, payload bytes",
    ),
)
