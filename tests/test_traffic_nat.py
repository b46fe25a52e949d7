"""NAT-aware parallel detection (protolab.traffic.nat) on fixed flows: three hosts behind one
address (two Linux stacks with their own timestamp clocks, one Windows-like stack) and one host
with its own address, loading from the same servers at the same time."""

from __future__ import annotations

import pytest

from protolab.traffic.nat import NatFlow, client_rows, clock_offset_ms, evaluate, nat_flows, score_sessions, split_hosts

S = 1_000_000_000
MS = 1_000_000
NAT, DIRECT = "10.77.0.1", "10.77.0.2"
SERVER, OTHER = "10.77.1.1", "10.77.1.2"
LINUX = {"c2s_ttl": 63, "syn_options": "M,S,T,N,W", "syn_wscale": 7, "syn_mss": 1460, "syn_window": 64240}
WINDOWS = {"c2s_ttl": 127, "syn_options": "M,S,N,W", "syn_wscale": 8, "syn_mss": 1460, "syn_window": 64240}
CLOCK = {"a": 1_000_000, "c": 3_000_000_000}  # each Linux host's timestamp offset (ms)


def _flow(row: int, host: str, start_s: float, server: str = SERVER, jitter_ms: int = 0, **extra: object) -> NatFlow:
    first = int(1_700_000_000 * S + start_s * S)
    stack = WINDOWS if host == "b" else LINUX
    tsval = None if host == "b" else (CLOCK.get(host, 7) + first // MS + jitter_ms) % 2**32
    fields = {"client_ip": DIRECT if host == "d" else NAT, "server_ip": server, "first_ns": first,
              "last_ns": first + 2 * S, "protocol": "h2", "sni": server, **stack, "syn_tsval": tsval, **extra}
    return NatFlow(row=row, **fields)  # type: ignore[arg-type]


def _corpus() -> tuple[list[NatFlow], dict[int, str]]:
    plan = [("a", 0.0, 0), ("a", 0.1, 40), ("b", 0.2, 0), ("c", 0.3, 0), ("c", 0.35, -30), ("d", 0.0, 0),
            ("b", 0.5, 0), ("a", 20.0, 5), ("c", 21.0, 0), ("b", 22.0, 0)]
    flows = [_flow(i, host, start, jitter_ms=j) for i, (host, start, j) in enumerate(plan)]
    flows.append(_flow(len(flows), "a", 0.2, server=OTHER))
    return flows, {f.row: h for f, h in zip(flows, [p[0] for p in plan] + ["a"], strict=True)}


def test_hosts_are_told_apart_by_stack_and_clock() -> None:
    flows, truth = _corpus()
    hosts = split_hosts(flows)
    by_truth: dict[str, set[str]] = {}
    for row, host in hosts.items():
        by_truth.setdefault(truth[row], set()).add(host)
    owners = {h: {truth[r] for r, x in hosts.items() if x == h} for h in set(hosts.values())}
    assert all(len(o) == 1 for o in owners.values()), owners
    # One host per real client and server: a has two (one per server: its clock differs per server).
    assert {k: len(v) for k, v in by_truth.items()} == {"a": 2, "b": 1, "c": 1, "d": 1}


def test_without_the_clock_two_linux_hosts_merge() -> None:
    flows, truth = _corpus()
    hosts = split_hosts(flows, signals=("ttl", "syn"))
    assert hosts[0] == hosts[3] != hosts[2]
    assert len({hosts[r] for r in range(len(flows)) if truth[r] == "d"}) == 1


def test_session_precision_and_recall_with_and_without_the_handling() -> None:
    flows, truth = _corpus()
    result = evaluate(flows, truth)
    # The truth: a {0,1}, b {2,6}, c {3,4}, d {5}, a {7}, c {8}, b {9}, a->OTHER {10}.
    assert result["true_sessions"] == 8
    without, with_ = result["without"], result["with"]
    # Without: the NAT's flows to SERVER in the first 5 s are one session (0,1,2,3,4,6), the
    # later ones one more (7,8,9): only d's and a's OTHER session are right.
    assert without["detected_sessions"] == 4
    assert (without["precision"], without["recall"]) == (pytest.approx(2 / 4), pytest.approx(2 / 8))
    assert without["per_client"]["b"] == {
        "flows": 3, "true_sessions": 2, "detected_sessions": 2, "recall": 0.0, "precision": 0.0,
        "found_sessions": 0, "exact_detected": 0, "isolated_flows": 1, "isolated_marked": 1,
        "true_parallel_share": pytest.approx(2 / 3), "detected_parallel_share": 1.0, "mixed_sessions": 2,
        "isolated_marked_parallel": 1.0}
    assert (with_["precision"], with_["recall"]) == (1.0, 1.0)
    assert result["hosts"] == {"inferred": 5, "mixed": 0}
    assert without["parallel_share"] == pytest.approx(9 / 11)
    assert result["true_parallel_share"] == pytest.approx(6 / 11)


def test_a_flow_without_syn_joins_the_one_stack_with_its_ttl() -> None:
    flows, _ = _corpus()
    quic = NatFlow(row=99, client_ip=NAT, server_ip=SERVER, first_ns=flows[0].first_ns, last_ns=flows[0].last_ns,
                   protocol="h3", c2s_ttl=127)
    unknown_ttl = NatFlow(row=98, client_ip=NAT, server_ip=SERVER, first_ns=flows[0].first_ns,
                          last_ns=flows[0].last_ns, protocol="h3", c2s_ttl=63)
    hosts = split_hosts([*flows, quic, unknown_ttl])
    assert hosts[99] == hosts[2]  # the only TTL-127 stack: the Windows-like host
    # The one TTL-63 stack, but no clock to tell which of its two hosts: neither's.
    assert hosts[98] not in {hosts[0], hosts[3]} and hosts[98].startswith(f"{NAT}/s")
    assert split_hosts([quic, *flows[:2], flows[3]])[99] == f"{NAT}/t127"  # no TTL-127 stack at all


def test_clock_offset_wraps_and_scores_handle_empty_input() -> None:
    f = NatFlow(row=0, client_ip=NAT, server_ip=SERVER, first_ns=5 * MS, last_ns=6 * MS, syn_tsval=2)
    assert clock_offset_ms(f) == pytest.approx(2**32 - 3)
    assert score_sessions([], [], {}) == {}
    assert nat_flows([{"client_ip": NAT, "server_ip": SERVER, "first_ns": 1, "last_ns": 2, "extra": 1}])[0].row == 0
    with pytest.raises(ValueError, match="signals"):
        split_hosts([f], signals=("user-agent",))


def test_rows_per_group_client_and_handling() -> None:
    flows, truth = _corpus()
    group = {f.row: "late" if f.first_ns - flows[0].first_ns > 10 * S else "early" for f in flows}
    rows = client_rows(flows, truth, group)
    by = {(r["group"], r["client"], r["handling"]): r for r in rows}
    assert len(rows) == 2 * (4 + 3)  # early: a b c d; late: a b c
    assert by[("early", "b", "without")]["recall"] == 0.0 and by[("early", "b", "with")]["recall"] == 1.0
    assert by[("late", "c", "without")]["precision"] == 0.0 and by[("late", "c", "with")]["precision"] == 1.0
    assert by[("early", "d", "without")]["recall"] == 1.0
    # a's early sessions: {0,1} to SERVER and {10} to OTHER; without the handling only {10} is found.
    assert by[("early", "a", "without")]["recall"] == 0.5


def test_random_offsets_per_connection_leave_a_host_whole() -> None:
    # Linux draws a timestamp offset per connection: every flow alone on its clock.
    flows = [_flow(i, "a", 0.1 * i) for i in range(4)]
    flows = [NatFlow(**{**f.__dict__, "syn_tsval": (i * 977_000_000) % 2**32}) for i, f in enumerate(flows)]
    assert len(set(split_hosts(flows).values())) == 1
