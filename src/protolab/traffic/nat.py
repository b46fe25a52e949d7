"""NAT-aware parallel detection (000 §4.2.3; docs/traffic.md, "NAT"): the flows of one client
address are split into the hosts behind it before sessions are formed, so that two hosts
reaching the same server at once are not one "client" with parallel connections. Pure: flow
rows in, labels and scores out.

**Signals** (what a flow record has; `protolab-net flows` writes them, docs/flows.md):

- `ttl`: the TTL (hop limit) of the client's first packet. Hosts differ by their initial TTL
  (64 Linux/macOS, 128 Windows, 255 some embedded stacks) and by their distance to the
  capture point.
- `syn`: the client's SYN: option order, window scale, MSS, window (p0f's signature).
- `clock`: the TCP timestamp clock. The SYN's TSval minus its capture time (ms) is the
  sender's clock offset. A stack that runs one clock per host (or per address pair) gives all
  its connections to a server one offset, and two hosts different ones: flows whose offsets lie
  within `clock_tolerance_ms` of the previous one (sorted) are one host; the tolerance absorbs
  the delay between the sender and the capture. A flow alone on its offset tells nothing: Linux
  (since 4.10, per 4-tuple in the kernels of this lab) and other current systems draw a random
  offset per connection, and then the clock leaves the stack group whole.

Hosts are inferred per client address as the groups of flows with equal `ttl` and `syn`
signatures, each split by `clock` per server. A flow without a SYN in the capture (UDP/QUIC,
or TCP begun before the capture) has only its TTL: it joins the one TCP group of its address
with that TTL, if there is exactly one, else a group of its own. Not used: source ports (NAT
gateways keep or rewrite them, and clients' ranges overlap: 32768-60999 Linux, 49152-65535
Windows and macOS), User-Agent (encrypted in every mode but h1c) and the TLS ClientHello
(the lab's clients share one TLS stack).

**Scoring** against the truth (the real client of each flow): sessions are formed by 000's
Algorithm 1 (protolab.traffic.sessions.reference_detect) once with the real clients (the
truth), once per way of naming the client (the public address; the inferred hosts). A real
client's *session recall* is the share of its true sessions found exactly (same flows); its
*session precision* the share of detected sessions holding any of its flows that are exactly
one of its true sessions. A detected session mixing clients is wrong for each of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from protolab.traffic.sessions import DEFAULT_MAX_GAP_S, RefFlow, reference_detect

SIGNALS = ("ttl", "syn", "clock")
DEFAULT_CLOCK_TOLERANCE_MS = 1000.0
TS_MODULUS = 2**32
NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class NatFlow:
    """What the split reads of one flow (columns of the flow record)."""

    row: int
    client_ip: str
    server_ip: str
    first_ns: int
    last_ns: int
    protocol: str | None = None
    sni: str | None = None
    client_port: int | None = None
    c2s_ttl: int | None = None
    syn_options: str | None = None
    syn_wscale: int | None = None
    syn_mss: int | None = None
    syn_window: int | None = None
    syn_tsval: int | None = None


def nat_flows(rows: Iterable[Mapping[str, Any]]) -> list[NatFlow]:
    """NatFlows from flow-record rows (dicts with the record's column names; `row` if present,
    else their position)."""
    fields = NatFlow.__dataclass_fields__
    return [NatFlow(**{"row": i, **{k: v for k, v in r.items() if k in fields}}) for i, r in enumerate(rows)]


def _stack(flow: NatFlow, signals: Sequence[str]) -> tuple[Any, ...] | None:
    """The flow's stack signature, or None without a SYN (only its TTL is known)."""
    if flow.syn_options is None:
        return None
    ttl = flow.c2s_ttl if "ttl" in signals else None
    syn = (flow.syn_options, flow.syn_wscale, flow.syn_mss, flow.syn_window) if "syn" in signals else None
    return (ttl, syn)


def clock_offset_ms(flow: NatFlow) -> float | None:
    """TSval minus the SYN's capture time in ms, modulo 2^32: the sender's clock offset."""
    if flow.syn_tsval is None:
        return None
    return (flow.syn_tsval - flow.first_ns / NS_PER_MS) % TS_MODULUS


def _clock_clusters(flows: Sequence[NatFlow], tolerance_ms: float) -> list[int]:
    """Per flow (in the given order) a cluster number: flows with offsets chained within the
    tolerance share one. A clock is a host's only if two flows or more run on it: a flow alone
    on its offset (no TSval, or a stack that draws a random offset per connection, as Linux
    does since 4.10 for every 4-tuple) gets -1, the group's flows of unknown clock."""
    offsets = sorted((o, i) for i, f in enumerate(flows) if (o := clock_offset_ms(f)) is not None)
    runs: list[list[int]] = []
    previous = None
    for offset, i in offsets:
        if previous is None or offset - previous > tolerance_ms:
            runs.append([])
        runs[-1].append(i)
        previous = offset
    labels = [-1] * len(flows)
    for cluster, members in enumerate(r for r in runs if len(r) > 1):
        for i in members:
            labels[i] = cluster
    return labels


def split_hosts(flows: Sequence[NatFlow], signals: Sequence[str] = SIGNALS,
                clock_tolerance_ms: float = DEFAULT_CLOCK_TOLERANCE_MS) -> dict[int, str]:
    """Per flow row, the inferred host: `<client_ip>` followed by what told it apart
    (`/s<n>` its stack group, or `/t<ttl>` without a SYN and a stack to join; `/c<n>@<server>`
    its clock cluster towards the flow's server, whose clock offset is the host's towards it)."""
    unknown = set(signals) - set(SIGNALS)
    if unknown:
        raise ValueError(f"signals: unknown {sorted(unknown)}; known: {', '.join(SIGNALS)}")
    hosts: dict[int, str] = {}
    by_ip: dict[str, list[NatFlow]] = {}
    for f in flows:
        by_ip.setdefault(f.client_ip, []).append(f)
    for ip, members in by_ip.items():
        stacks = sorted({s for f in members if (s := _stack(f, signals)) is not None}, key=repr)
        number = {s: n for n, s in enumerate(stacks)}
        groups: dict[str, list[NatFlow]] = {}
        for f in members:
            stack = _stack(f, signals)
            if stack is None:
                same_ttl = [s for s in stacks if "ttl" not in signals or s[0] == f.c2s_ttl]
                name = f"{ip}/s{number[same_ttl[0]]}" if len(same_ttl) == 1 else f"{ip}/t{f.c2s_ttl}"
            else:
                name = f"{ip}/s{number[stack]}"
            groups.setdefault(name, []).append(f)
        for name, group in groups.items():
            if "clock" not in signals:
                hosts.update({f.row: name for f in group})
                continue
            by_server: dict[str, list[NatFlow]] = {}
            for f in group:
                by_server.setdefault(f.server_ip, []).append(f)
            for server, toward in by_server.items():
                for f, cluster in zip(toward, _clock_clusters(toward, clock_tolerance_ms), strict=True):
                    hosts[f.row] = name if cluster < 0 else f"{name}/c{cluster}@{server}"
    return hosts


def sessions_of(flows: Sequence[NatFlow], client_of: Mapping[int, str], max_gap_s: float = DEFAULT_MAX_GAP_S,
                rule: str = "000") -> list[frozenset[int]]:
    """000's sessions (as sets of rows) with each flow's client named by `client_of`."""
    refs = [RefFlow(client_ip=client_of[f.row], server_ip=f.server_ip, first_ns=f.first_ns, last_ns=f.last_ns,
                    client_port=f.client_port, protocol=f.protocol, sni=f.sni, row=f.row) for f in flows]
    per_flow, _ = reference_detect(refs, max_gap_s, rule)
    members: dict[int, set[int]] = {}
    for r in per_flow:
        members.setdefault(r["session_id"], set()).add(r["flow_row"])
    return [frozenset(m) for m in members.values()]


def score_sessions(truth: Sequence[frozenset[int]], detected: Sequence[frozenset[int]],
                   real_client: Mapping[int, str]) -> dict[str, dict[str, Any]]:
    """Per real client: true sessions, detected sessions touching it, session precision and
    recall (exact matches), the parallel-flow share of its flows, true and detected, and the
    share of its truly isolated flows that detection puts in a parallel session."""
    exact = set(truth) & set(detected)
    scores: dict[str, dict[str, Any]] = {}
    for client in sorted(set(real_client.values())):
        mine = [s for s in truth if real_client[next(iter(s))] == client]
        touching = [s for s in detected if any(real_client[r] == client for r in s)]
        flows = [r for r, c in real_client.items() if c == client]
        true_parallel = {r for s in mine if len(s) > 1 for r in s}
        detected_parallel = {r for s in detected if len(s) > 1 for r in s if real_client[r] == client}
        isolated = {r for s in mine if len(s) == 1 for r in s}
        scores[client] = {
            "flows": len(flows), "true_sessions": len(mine), "detected_sessions": len(touching),
            "found_sessions": sum(s in exact for s in mine), "exact_detected": sum(s in exact for s in touching),
            "isolated_flows": len(isolated), "isolated_marked": len(isolated & detected_parallel),
            "recall": sum(s in exact for s in mine) / len(mine) if mine else None,
            "precision": sum(s in exact for s in touching) / len(touching) if touching else None,
            "true_parallel_share": len(true_parallel) / len(flows) if flows else None,
            # 000's worry: truly isolated flows of the client that detection calls parallel.
            "isolated_marked_parallel": (len(isolated & detected_parallel) / len(isolated)) if isolated else None,
            "detected_parallel_share": len(detected_parallel) / len(flows) if flows else None,
            "mixed_sessions": sum(len({real_client[r] for r in s}) > 1 for s in touching),
        }
    return scores


def client_rows(flows: Sequence[NatFlow], real_client: Mapping[int, str], group_of: Mapping[int, Any],
                signals: Sequence[str] = SIGNALS, max_gap_s: float = DEFAULT_MAX_GAP_S,
                clock_tolerance_ms: float = DEFAULT_CLOCK_TOLERANCE_MS) -> list[dict[str, Any]]:
    """One row per (group, real client, handling): `score_sessions` of the sessions whose first
    flow (by row) lies in the group (e.g. a round of the corpus), without the NAT handling
    (`handling` "without") and with it ("with"). The rows a claim takes a median over."""
    truth = sessions_of(flows, real_client, max_gap_s)
    namings = {"without": {f.row: f.client_ip for f in flows},
               "with": split_hosts(flows, signals, clock_tolerance_ms)}
    rows = []
    for handling, naming in namings.items():
        detected = sessions_of(flows, naming, max_gap_s)
        for group in sorted({group_of[f.row] for f in flows}, key=repr):
            in_group = {f.row for f in flows if group_of[f.row] == group}
            first_in = [s for s in truth if min(s) in in_group]
            found = [s for s in detected if min(s) in in_group]
            clients = {r: c for r, c in real_client.items() if r in in_group}
            for client, score in score_sessions(first_in, found, clients | {
                    r: real_client[r] for s in (*first_in, *found) for r in s}).items():
                if client not in clients.values():
                    continue
                rows.append({"group": group, "client": client, "handling": handling, **score})
    return rows


def evaluate(flows: Sequence[NatFlow], real_client: Mapping[int, str], signals: Sequence[str] = SIGNALS,
             max_gap_s: float = DEFAULT_MAX_GAP_S, clock_tolerance_ms: float = DEFAULT_CLOCK_TOLERANCE_MS
             ) -> dict[str, Any]:
    """Sessions per real client without the NAT handling (the public address) and with it
    (the inferred hosts), scored against the truth; with the inferred hosts' purity."""
    truth = sessions_of(flows, real_client, max_gap_s)
    public = {f.row: f.client_ip for f in flows}
    hosts = split_hosts(flows, signals, clock_tolerance_ms)
    result: dict[str, Any] = {"flows": len(flows), "clients": len(set(real_client.values())),
                              "true_sessions": len(truth), "signals": list(signals)}
    for name, naming in (("without", public), ("with", hosts)):
        detected = sessions_of(flows, naming, max_gap_s)
        per_client = score_sessions(truth, detected, real_client)
        exact = set(truth) & set(detected)
        result[name] = {
            "detected_sessions": len(detected),
            "precision": len(exact) / len(detected) if detected else None,
            "recall": len(exact) / len(truth) if truth else None,
            "parallel_share": sum(len(s) for s in detected if len(s) > 1) / len(flows) if flows else None,
            "per_client": per_client,
        }
    result["true_parallel_share"] = sum(len(s) for s in truth if len(s) > 1) / len(flows) if flows else None
    # How many inferred hosts hold flows of more than one real client (merged), and how many
    # real clients are spread over several hosts towards one server (split).
    owners: dict[str, set[str]] = {}
    for row, host in hosts.items():
        owners.setdefault(host, set()).add(real_client[row])
    result["hosts"] = {"inferred": len(owners), "mixed": sum(len(o) > 1 for o in owners.values())}
    return result
