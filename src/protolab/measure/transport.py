"""Per-connection summaries of transport samples (docs/samples.md): how long the sender spent in
each controller state (000 Fig. 6.4), when it left slow start and with what window (000 ch. 6),
windows, RTTs and losses. Pure functions over sample rows (as `measure.samples.read_samples`
returns them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import pairwise
from typing import Any

import numpy as np

STATES = ("slow_start", "conservative_slow_start", "congestion_avoidance", "recovery", "application_limited")
SLOW_START = ("slow_start",)
# States that do not end slow start: growth paused because the application had nothing to send.
NOT_AN_EXIT = ("slow_start", "application_limited")


def _counter(row: dict[str, Any], keys: tuple[str, ...]) -> int:
    for key in keys:
        value = row.get(key)
        if isinstance(value, int):
            return value
    return 0


def _sent_bytes(row: dict[str, Any]) -> int:
    return _counter(row, ("udp_tx_bytes", "bytes_sent"))


def _received_bytes(row: dict[str, Any]) -> int:
    return _counter(row, ("udp_rx_bytes", "bytes_received"))


def summarize_connection(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary of one connection end: rows of one (conn, role), any order."""
    rows = sorted(rows, key=lambda r: (r["t_unix_ns"], r.get("event") != "state"))
    first, last = rows[0], rows[-1]
    t0 = first["t_unix_ns"]
    duration_ns = last["t_unix_ns"] - t0
    in_state: dict[str, int] = defaultdict(int)
    for row, following in pairwise(rows):
        state = row.get("cc_state") or "unknown"
        in_state[state] += following["t_unix_ns"] - row["t_unix_ns"]
    fractions = {f"frac_{state}": (in_state.get(state, 0) / duration_ns if duration_ns > 0 else None)
                 for state in (*STATES, "unknown")}
    exit_ms: float | None = None
    cwnd_at_exit: int | None = None
    was_in_slow_start = False
    for row in rows:
        state = row.get("cc_state")
        if state in SLOW_START:
            was_in_slow_start = True
        elif was_in_slow_start and state is not None and state not in NOT_AN_EXIT:
            exit_ms = (row["t_unix_ns"] - t0) / 1e6
            cwnd_at_exit = row.get("cwnd_bytes") if isinstance(row.get("cwnd_bytes"), int) else row.get("cwnd")
            break
    samples = [r for r in rows if r.get("event", "sample") == "sample"]
    cwnds = [r["cwnd_bytes"] for r in samples if isinstance(r.get("cwnd_bytes"), int)]
    rtts = [r["rtt_us"] / 1e3 for r in samples if isinstance(r.get("rtt_us"), int | float) and r["rtt_us"] > 0]
    min_rtts = [r["min_rtt_us"] / 1e3 for r in samples if isinstance(r.get("min_rtt_us"), int | float) and r["min_rtt_us"] > 0]
    last_sample = samples[-1] if samples else last
    return {
        "conn": first.get("conn"),
        "role": first.get("role"),
        "transport": first.get("transport"),
        "controller": first.get("controller"),
        "rows": len(rows),
        "start_unix_ns": t0,
        "duration_ms": duration_ns / 1e6,
        **fractions,
        "slow_start_exit_ms": exit_ms,
        "cwnd_at_exit_bytes": cwnd_at_exit,
        "mean_cwnd_bytes": float(np.mean(cwnds)) if cwnds else None,
        # State rows carry the window at the change: a peak can fall between samples.
        "max_cwnd_bytes": max((r["cwnd_bytes"] for r in rows if isinstance(r.get("cwnd_bytes"), int)), default=None),
        "mean_rtt_ms": float(np.mean(rtts)) if rtts else None,
        "p90_rtt_ms": float(np.percentile(rtts, 90)) if rtts else None,
        "min_rtt_ms": min(min_rtts) if min_rtts else None,
        "retransmits": last_sample.get("retransmits"),
        "lost_packets": last_sample.get("lost_packets"),
        "bytes_sent": _sent_bytes(last_sample),
        # The sending end of the data: it sent more than it received (the server of a download).
        "sender": _sent_bytes(last_sample) > _received_bytes(last_sample),
    }


def state_transitions(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """How often one connection end's controller went from one state to another (000 Fig. 6.4
    as a graph): consecutive rows in time order whose `cc_state` differs, counted per (from, to).
    Rows without a state are skipped; a state change row and a sample at the same instant
    count once (the change row first, then the sample repeats its state)."""
    ordered = sorted((r for r in rows if isinstance(r.get("t_unix_ns"), int) and r.get("cc_state")),
                     key=lambda r: (r["t_unix_ns"], r.get("event") != "state"))
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for row, following in pairwise(ordered):
        if row["cc_state"] != following["cc_state"]:
            counts[(row["cc_state"], following["cc_state"])] += 1
    return dict(counts)


def state_time_fractions(rows: Iterable[dict[str, Any]]) -> dict[str, float]:
    """The share of one connection end's sampled time spent in each controller state (000 Fig.
    6.4's percentages): each row's state holds until the next row; empty for under two rows."""
    ordered = sorted((r for r in rows if isinstance(r.get("t_unix_ns"), int) and r.get("cc_state")),
                     key=lambda r: (r["t_unix_ns"], r.get("event") != "state"))
    in_state: dict[str, int] = defaultdict(int)
    for row, following in pairwise(ordered):
        in_state[row["cc_state"]] += following["t_unix_ns"] - row["t_unix_ns"]
    total = sum(in_state.values())
    return {state: ns / total for state, ns in in_state.items()} if total > 0 else {}


def connection_summaries(samples: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary per connection end (conn, role) and, for MPTCP, per subflow."""
    groups: dict[tuple[Any, Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for row in samples:
        if isinstance(row.get("t_unix_ns"), int):
            groups[(row.get("conn"), row.get("role"), row.get("subflow"))].append(row)
    summaries = []
    for (_, _, subflow), rows in sorted(groups.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
        summary = summarize_connection(rows)
        summary["subflow"] = subflow
        summaries.append(summary)
    return summaries
