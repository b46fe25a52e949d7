"""000 §4.2.3: the impact of NAT on parallel-connection detection.

000 notes that several users behind one address merge into one "client", so that two of them
reaching the same server at once look like one client with parallel connections; it removes
known NAT addresses by hand and argues from User-Agent counts that its (household) NATs are
small. The lab can measure what 000 could only argue: the NAT corpus (`protolab traffic
nat-corpus`; specs/nat-corpus.toml gives its pages, modes, link, seed and rounds) has four
clients behind one NAT gateway and two beside it, loading generated pages at once, with every
flow's real client known. Its rows (reproduce.data `nat_sessions`): per round, client and
handling, session precision/recall of 000's Algorithm 1 keyed by the address ("without") and by
the hosts protolab.traffic.nat infers from TTL, SYN signature and timestamp clock ("with").
"""

from __future__ import annotations

from protolab.reproduce.claims import PROTOLAB, Claim, Median, NotJudgeable
from protolab.reproduce.figures.base import Figure

CAMPUS = "000's campus and residential User-Agent logs of 2016; the lab's clients send no User-Agent it could count"
BEHIND = {"behind_nat": True, "pooled": False}  # each client behind the NAT, per round
POOL = {"pooled": True}  # the clients behind the NAT together, per round

FIGURES: tuple[Figure, ...] = (
    Figure(
        id="000-s4.2.3", title="NAT: several clients behind one address, with and without the NAT handling",
        seed="000 §4.2.3", spec="nat-corpus.toml", source="nat_sessions", after_run="nat-corpus",
        quick={"repetitions": 6, "axes": {"page": ["page-001", "page-002"]}},
        paper=(("NAT", "users behind one address contacting one server at once are marked parallel"),
               ("campus", "known NAT addresses removed by hand: ~12.5 M flows (~30%)"),
               ("User-Agents", "90% of 1-min bins have <= 4 per address; < 1% of bins two on one server")),
        claims=(
            Claim("without NAT handling, clients behind one address merge: their sessions are not found as they are",
                  Median("recall", {**POOL, "handling": "without"}), high=0.9,
                  paper="connections of different users would be marked as parallel"),
            Claim("without NAT handling, isolated flows of clients behind the NAT are marked parallel",
                  Median("isolated_marked_parallel", {**POOL, "handling": "without"}), low=0.0,
                  paper="connections of the different users would be marked as parallel (no number)"),
            Claim("with the NAT handling (TTL, SYN signature, timestamp clock), a client's sessions are found",
                  Median("recall", {**BEHIND, "handling": "with"}), low=0.9, paper="(not in 000)", whose=PROTOLAB),
            Claim("with the NAT handling, a client's detected sessions are true sessions",
                  Median("precision", {**BEHIND, "handling": "with"}), low=0.9, paper="(not in 000)",
                  whose=PROTOLAB),
            Claim("with the NAT handling, the sessions of all clients behind the NAT together are found",
                  Median("recall", {**POOL, "handling": "with"}), low=0.9, paper="(not in 000)", whose=PROTOLAB),
            Claim("clients with an address of their own are unaffected by the handling",
                  Median("recall", {"behind_nat": False, "handling": "with"}), low=0.99, paper="(not in 000)",
                  whose=PROTOLAB),
            Claim("90% of 1-minute bins have 4 or fewer User-Agents per address", NotJudgeable(CAMPUS),
                  paper="§4.2.3"),
            Claim("in < 1% of bins two User-Agents reach the same server (unencrypted H1)", NotJudgeable(CAMPUS),
                  paper="§4.2.3"),
        ),
        note="the clients' stacks differ by sysctls (protolab.lab.nat.OS_PROFILES); signals used and not used: "
             "docs/traffic.md, \"NAT\"",
    ),
)
