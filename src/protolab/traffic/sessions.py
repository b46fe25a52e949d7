"""The session algorithm of the parallel-connection detection (000 Alg. 1-2), free of I/O: a batch
of flows of whole keys, sorted, reduced with vectorized numpy into per-flow and per-session
results; and `reference_detect`, the same definitions read directly in plain Python, for the
tests. protolab.traffic.parallel does the reading, partitioning and writing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_GAP_S = 5.0
RULES = ("000", "gap")
NS = 1_000_000_000

_MIN = -(1 << 62)  # below any time: "no earlier flow"


def _segmented_prev_max(v: Any, seg_start: Any) -> Any:
    """For each i, the maximum of v over the rows of i's segment before i (_MIN if none).
    Segments are contiguous; seg_start[i] is the index of i's segment's first row. A
    Hillis-Steele scan: log2(longest segment) vectorized passes."""
    import numpy as np

    n = len(v)
    idx = np.arange(n)
    out = np.empty(n, dtype=np.int64)
    out[0] = _MIN
    out[1:] = v[:-1]
    out[seg_start == idx] = _MIN
    longest = int((idx - seg_start).max()) + 1 if n else 0
    step = 1
    while step < longest:
        ok = idx[step:] - step >= seg_start[step:]
        out[step:] = np.where(ok, np.maximum(out[step:], out[:-step]), out[step:])
        step *= 2
    return out


@dataclass
class Batch:
    """Flows of whole keys, sorted by (key hash, start, end, row)."""

    kh: Any
    s: Any
    e: Any
    b: Any
    known: Any
    flow_row: Any
    pc: Any

    def __len__(self) -> int:
        return len(self.kh)


def session_breaks(x: Batch, rule: str, gap_ns: int) -> tuple[Any, int]:
    """Rows that open a session, and how many of them the 000 rule's walk found inside
    islands longer than MAX_GAP."""
    import numpy as np

    g = gap_ns
    n = len(x)
    idx = np.arange(n)
    new_key = np.empty(n, dtype=bool)
    new_key[0] = True
    new_key[1:] = x.kh[1:] != x.kh[:-1]
    if rule == "gap":
        key_start = np.maximum.accumulate(np.where(new_key, idx, 0))
        before = _segmented_prev_max(x.e, key_start)
        return new_key | (x.s > before + g), 0
    brk = new_key.copy()
    brk[1:] |= (x.s[1:] - x.s[:-1]) > g
    island_start = np.maximum.accumulate(np.where(brk, idx, 0))
    rel = x.s - x.s[island_start]
    long_rows = np.flatnonzero(rel > g)
    if not len(long_rows):
        return brk, 0
    # Islands (consecutive starts at most MAX_GAP apart) longer than MAX_GAP: walk the anchors.
    isl = island_start[long_rows]
    lrel = rel[long_rows]
    ends = np.append(np.flatnonzero(np.diff(isl)) + 1, len(long_rows))
    end_of = np.repeat(ends, np.diff(np.concatenate(([0], ends))))
    chosen = []
    i = 0
    while i < len(long_rows):
        chosen.append(i)  # beyond MAX_GAP of the island's current session start: opens a session
        i += int(np.searchsorted(lrel[i:end_of[i]], lrel[i] + g, side="right"))
    brk[long_rows[np.asarray(chosen)]] = True
    return brk, len(chosen)


def process_batch(x: Batch, rule: str, gap_ns: int) -> tuple[dict[str, Any], dict[str, Any], int]:
    """Per-flow and per-session results of a batch of whole keys (session ids from 0)."""
    import numpy as np

    n = len(x)
    idx = np.arange(n)
    brk, walked = session_breaks(x, rule, gap_ns)
    local = np.cumsum(brk) - 1
    starts = np.flatnonzero(brk)
    lengths = np.diff(np.append(starts, n))
    start_of = starts[local]
    end_of = (starts + lengths)[local]
    d = x.e - x.s
    # Overlapping ([first, last) lifetimes intersect): an earlier flow of the session ends
    # after this one starts, or the next flow that lasts starts before this one ends.
    before = _segmented_prev_max(x.e, start_of)
    lasting = np.flatnonzero(d > 0)
    k = np.searchsorted(lasting, idx, side="right")
    nxt = lasting[np.minimum(k, len(lasting) - 1)] if len(lasting) else idx
    has_next = (k < len(lasting)) & (nxt < end_of)
    overlapping = ((before > x.s) & (d > 0)) | (has_next & (x.s[nxt] < x.e))
    flows = {"session": local, "position": idx - start_of, "parallel": lengths[local] > 1,
             "overlapping": overlapping, "flow_row": x.flow_row, "pc": x.pc}
    # 000's p: the longest flow f_l (the first of equals) and its longest overlap with another.
    longest = np.maximum.reduceat(d, starts)
    f_l = np.minimum.reduceat(np.where(d == longest[local], idx, n), starts)
    s_l, e_l = x.s[f_l][local], x.e[f_l][local]
    ov = np.maximum(0, np.minimum(x.e, e_l) - np.maximum(x.s, s_l))
    ov[f_l] = -1
    sessions = {
        "session": np.arange(len(starts)), "pc": x.pc[starts],
        "first_flow_row": x.flow_row[starts], "start_ns": x.s[starts],
        "end_ns": np.maximum.reduceat(x.e, starts), "flows": lengths,
        "overlapping_flows": np.add.reduceat(overlapping.astype(np.int64), starts),
        "longest_ns": longest, "overlap_ns": np.maximum.reduceat(ov, starts),
        "total_bytes": np.add.reduceat(x.b, starts), "largest_bytes": np.maximum.reduceat(x.b, starts),
        "unknown_bytes": np.add.reduceat((~x.known).astype(np.int64), starts),
    }
    return flows, sessions, walked


def bucket_bits(flows: int, chunk_rows: int) -> int:
    """log2 of the number of buckets: about `chunk_rows` flows each (at most 2^12 buckets)."""
    bits = 0
    while bits < 12 and (flows >> bits) > chunk_rows:
        bits += 1
    return bits





@dataclass
class RefFlow:
    client_ip: str
    server_ip: str
    first_ns: int
    last_ns: int
    client_port: int | None = None
    protocol: str | None = None
    sni: str | None = None
    bytes: int | None = None
    row: int = 0


def reference_detect(flows: Sequence[RefFlow], max_gap_s: float = DEFAULT_MAX_GAP_S, rule: str = "000"
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Sessions and per-flow results by direct reading of the definitions (O(n^2) per session).
    Sessions are listed by (key, start); `flows` results are keyed by row."""
    g = round(max_gap_s * NS)
    by_key: dict[tuple[Any, ...], list[RefFlow]] = {}
    for f in flows:
        key = (f.protocol or "", f.client_ip, f.server_ip, f.sni or f.server_ip)
        by_key.setdefault(key, []).append(f)
    sessions: list[list[RefFlow]] = []
    for key in sorted(by_key, key=lambda k: tuple("" if x is None else str(x) for x in k)):
        members = sorted(by_key[key], key=lambda f: (f.first_ns, f.last_ns, f.row))
        current: list[RefFlow] = []
        anchor = end = 0
        for f in members:
            joins = bool(current) and (f.first_ns - anchor <= g if rule == "000" else f.first_ns <= end + g)
            if not joins:
                if current:
                    sessions.append(current)
                current, anchor, end = [], f.first_ns, f.last_ns
            current.append(f)
            end = max(end, f.last_ns)
        if current:
            sessions.append(current)
    out_sessions, out_flows = [], []
    for sid, members in enumerate(sessions):
        n = len(members)
        longest = max(range(n), key=lambda i: (members[i].last_ns - members[i].first_ns, -i))
        fl = members[longest]
        overlap_ns = None
        if n > 1:
            overlap_ns = max(max(0, min(o.last_ns, fl.last_ns) - max(o.first_ns, fl.first_ns))
                             for i, o in enumerate(members) if i != longest)
        d_l = fl.last_ns - fl.first_ns
        known = all(f.bytes is not None for f in members)
        total = sum(f.bytes for f in members if f.bytes is not None) if known else None
        largest = max(f.bytes or 0 for f in members) if known else None
        overlapping = []
        for i, a in enumerate(members):
            overlapping.append(any(j != i and _overlap_half_open(a, b) for j, b in enumerate(members)))
        out_sessions.append({
            "session_id": sid, "protocol": fl.protocol, "first_flow_row": members[0].row,
            "start_ns": members[0].first_ns, "end_ns": max(f.last_ns for f in members), "flows": n,
            "parallel": n > 1, "overlapping_flows": sum(overlapping), "longest_s": d_l / 1e9,
            "overlap_s": None if overlap_ns is None else overlap_ns / 1e9,
            "time_overlap_pct": 100.0 * overlap_ns / d_l if overlap_ns is not None and d_l > 0 else None,
            "total_bytes": total, "largest_bytes": largest,
            "data_overlap_pct": (100.0 * (total - largest) / largest
                                 if n > 1 and known and largest else None),
        })
        for pos, (f, ov) in enumerate(zip(members, overlapping, strict=True)):
            out_flows.append({"flow_row": f.row, "session_id": sid, "position": pos, "protocol": f.protocol,
                              "parallel": n > 1, "overlapping": ov})
    out_flows.sort(key=lambda r: r["flow_row"])
    return out_flows, out_sessions


def _overlap_half_open(a: RefFlow, b: RefFlow) -> bool:
    """[first, last) lifetimes intersect (a flow of duration 0 overlaps nothing)."""
    return max(a.first_ns, b.first_ns) < min(a.last_ns, b.last_ns)


