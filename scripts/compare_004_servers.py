"""004 Fig. 15 vs Fig. 13 by hand (docs/reproduce.md, 004-fig13-15): the "tcp vs h3" runs of
fairness-004-offload (two servers, TSO at the TCP server) against fairness-004-offload-one's (one
server host with TSO), judged with the reproduce claims' own estimators (medians and the ratio of
medians, 95% CIs), when the two specs were run into separate stores. The registry judges the
same comparison itself since 004-fig13-15 names fairness-004-offload-one as its companion spec
(both in one store; docs/reproduce.md, "The registry").

Usage: python scripts/compare_004_servers.py TWO_SERVER_RESULTS ONE_SERVER_RESULTS
"""

from __future__ import annotations

import sys
from typing import Any

from protolab.reproduce.claims import Estimate, Median, Ratio
from protolab.reproduce.data import SOURCES
from protolab.store import ResultsStore

PAIR = "tcp vs h3"  # TCP on the offloading server host


def tcp_vs_quic_rows(results: str, servers: str) -> list[dict[str, Any]]:
    with ResultsStore(results, read_only=True) as store:
        experiments = [r["id"] for r in store.query("SELECT id FROM experiments")]
        return [{**row, "servers": servers} for experiment in experiments
                for row in SOURCES["pairs"](store, experiment) if row["pair"] == PAIR]


def shown(estimate: Estimate | None) -> str:
    if estimate is None:
        return "no rows"
    return f"{estimate.value:.3f} [{estimate.low:.3f}, {estimate.high:.3f}] (n = {estimate.n}, {estimate.method})"


def main(two: str, one: str) -> None:
    rows = tcp_vs_quic_rows(two, "two") + tcp_vs_quic_rows(one, "one")
    for metric, what in (("share_a", "TCP's share"), ("jain", "Jain's index")):
        for servers in ("two", "one"):
            print(f"{what}, {servers} server(s): {shown(Median(metric, {'servers': servers}).estimate(rows))}")
        print(f"{what}, two over one (004: > 1): {shown(Ratio(metric, {'servers': 'two'}, {'servers': 'one'}).estimate(rows))}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
