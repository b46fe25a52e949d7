"""000 §6.2.1's features of one data transfer, pure: from the emulator's ground-truth packet
events (docs/control.md, "Event log") and the sender's transport samples, where 000 used
tcpdump at both ends and its cwnd logs. The names are 000's (`report.decision_tree.FEATURES_000`).

What each is here:

- *server / client mean inter-packet time* and *variation* (µs, µs²): the gaps between the
  data packets entering the server's access link (their departures) and leaving the client's
  (their arrivals);
- *server / client burstiness*: the index of dispersion for intervals (000's [94]) of those gaps,
  IDI(k) = Var(sum of k consecutive gaps) / (k mean²), at k = `BURST_WINDOW` (1 for a Poisson
  stream, 0 for an even one, larger when packets bunch);
- *mean delay* and *delay variation* (ms, ms²): the one-way delay of the data packets, as the
  sum over the data path's links of each packet's time in the link (enqueue to delivery,
  matched first-in first-out per flow: every link of the model keeps a flow's order, the WiFi
  hop through its reorder buffer); the variation sums the links' variances (their delays are
  independent draws, the wired ones nearly constant);
- *packet loss*: data packets dropped on any link over those the server sent;
- *out of order*: delivered data packets whose IP id comes before an earlier one of the same
  flow (000 used the IP ids too), over those delivered; only flows whose ids count up one per
  packet count (TCP's; Linux numbers each UDP GSO batch of quinn's unconnected socket from 0),
  so it is 0 for QUIC;
- *ACK freq*: packets from the client over data packets to it (both at the access links);
- *mean cwnd*, *cwnd variation* (bytes, bytes²): the sender's sampled window;
- the four *freq* features: shares of time per controller state (reproduce.data's
  `controller_states`; conservative slow start counts as slow start).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Gaps per window of the index of dispersion. k = 1 (the gaps' squared coefficient of variation):
# at a larger k, bursts that recur every k packets sum to equal windows and the index vanishes.
BURST_WINDOW = 1

Flow = tuple[Any, ...]


@dataclass(frozen=True)
class PacketEvent:
    """One event of the emulator's log, as far as the features need it."""

    t_ns: int
    ev: str  # enqueue, deliver, drop
    link: str
    flow: Flow  # (src, dst, sport, dport, proto)
    ip_id: int = 0


def gap_statistics(times_ns: Sequence[int], window: int = BURST_WINDOW) -> tuple[float, float, float] | None:
    """(mean gap µs, gap variance µs², index of dispersion at `window`) of a packet stream's
    times; None with fewer than `window` + 1 gaps or a zero mean."""
    gaps = np.diff(np.sort(np.asarray(times_ns, dtype=np.int64))) / 1e3
    if len(gaps) < window + 1:
        return None
    mean = float(gaps.mean())
    if mean <= 0:
        return None
    sums = np.convolve(gaps, np.ones(window), mode="valid")
    return mean, float(gaps.var()), float(sums.var() / (window * mean * mean))


def fifo_sojourns(events: Iterable[PacketEvent]) -> np.ndarray:
    """Each delivered packet's time in its link (ns): per link and flow, the k-th delivery is
    the k-th enqueue (first in, first out). Packets still queued when the log ends have no
    delivery and are left out."""
    enqueued: dict[tuple[str, Flow], list[int]] = defaultdict(list)
    delivered: dict[tuple[str, Flow], list[int]] = defaultdict(list)
    for e in events:
        if e.ev == "enqueue":
            enqueued[(e.link, e.flow)].append(e.t_ns)
        elif e.ev == "deliver":
            delivered[(e.link, e.flow)].append(e.t_ns)
    out: list[np.ndarray] = []
    for key, arrivals in delivered.items():
        starts = sorted(enqueued.get(key, []))
        n = min(len(starts), len(arrivals))
        out.append(np.asarray(sorted(arrivals)[:n], dtype=np.int64) - np.asarray(starts[:n], dtype=np.int64))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


IP_ID_SPACE = 1 << 16


def _behind(a: int, b: int) -> bool:
    """Whether IP id `a` comes before `b` (16-bit serial arithmetic: they wrap)."""
    return 0 < (b - a) % IP_ID_SPACE < IP_ID_SPACE // 2


# A flow's IP ids are a sequence when at most this share of its packets carry id 0.
MAX_ZERO_ID_SHARE = 0.01


def out_of_order_share(deliveries: Sequence[PacketEvent]) -> float:
    """Deliveries whose IP id comes before the latest seen in their flow (ids wrap at 2^16),
    over the deliveries of flows whose ids count up one per packet: TCP's (its SYN-ACK's id 0
    left out). QUIC's are not a sequence (Linux numbers a UDP GSO batch's segments from 0 on an
    unconnected socket, quinn's), so flows with more than a few id-0 packets do not count; 0
    when no flow counts."""
    by_flow: dict[Flow, list[int]] = defaultdict(list)
    for e in sorted(deliveries, key=lambda e: e.t_ns):
        by_flow[e.flow].append(e.ip_id)
    late = counted = 0
    for all_ids in by_flow.values():
        ids = [i for i in all_ids if i != 0]
        steps = [(b - a) % IP_ID_SPACE for a, b in zip(ids, ids[1:], strict=False)]
        if len(all_ids) - len(ids) > MAX_ZERO_ID_SHARE * len(all_ids) or not steps or float(np.median(steps)) != 1.0:
            continue
        latest = ids[0]
        counted += len(ids)
        for ip_id in ids[1:]:
            if _behind(ip_id, latest):
                late += 1
            else:
                latest = ip_id
    return late / counted if counted else 0.0


def _delay(events: Sequence[PacketEvent]) -> tuple[float, float] | None:
    """(mean one-way delay ms, its variance ms²): per-link sojourns summed over the links."""
    per_link: dict[str, list[PacketEvent]] = defaultdict(list)
    for e in events:
        per_link[e.link].append(e)
    means, variances = [], []
    for link_events in per_link.values():
        sojourns = fifo_sojourns(link_events) / 1e6
        if len(sojourns):
            means.append(float(sojourns.mean()))
            variances.append(float(sojourns.var()))
    return (sum(means), sum(variances)) if means else None


@dataclass(frozen=True)
class Ends:
    """Where a transfer's packets are seen: the addresses of the sending server and the
    receiving client, the link its data enter the network by (`server_link`: departures),
    the link they leave it by (`client_link`: arrivals), and the link the client's packets
    (its ACKs) reach the server by (`ack_link`)."""

    server: str
    client: str
    server_link: str
    client_link: str
    ack_link: str


def packet_features(events: Sequence[PacketEvent], ends: Ends) -> dict[str, float] | None:
    """000's packet features of one transfer from its events; None when either end saw too
    few data packets for the gap statistics."""
    server, client, server_link, client_link = ends.server, ends.client, ends.server_link, ends.client_link
    data = [e for e in events if e.flow[0] == server and e.flow[1] == client]
    sent = [e.t_ns for e in data if e.link == server_link and e.ev == "enqueue"]
    deliveries = [e for e in data if e.link == client_link and e.ev == "deliver"]
    server_gaps, client_gaps = gap_statistics(sent), gap_statistics([e.t_ns for e in deliveries])
    delay = _delay(data)
    if server_gaps is None or client_gaps is None or delay is None:
        return None
    acks = sum(1 for e in events if e.flow[0] == client and e.flow[1] == server and e.ev == "deliver"
               and e.link == ends.ack_link)
    drops = sum(1 for e in data if e.ev == "drop")
    return {
        "server mean inter-packet time": server_gaps[0], "server inter-packet time variation": server_gaps[1],
        "server burstiness": server_gaps[2],
        "client mean inter-packet time": client_gaps[0], "client inter-packet time variation": client_gaps[1],
        "client burstiness": client_gaps[2],
        "mean delay": delay[0], "delay variation": delay[1],
        "packet loss": drops / len(sent),
        "out of order": out_of_order_share(deliveries),
        "ACK freq": acks / len(deliveries) if deliveries else 0.0,
    }


def state_features(run: Mapping[str, Any]) -> dict[str, float]:
    """The window and state features of a `controller_states` row (missing states: 0)."""
    def share(*states: str) -> float:
        return float(sum(run.get(f"frac_{s}") or 0.0 for s in states))

    return {"mean cwnd": float(run.get("mean_cwnd_bytes") or 0.0),
            "cwnd variation": float(run.get("cwnd_variance") or 0.0),
            "slow start freq": share("slow_start", "conservative_slow_start"),
            "congestion avoidance freq": share("congestion_avoidance"),
            "app limited freq": share("application_limited"), "recovery freq": share("recovery")}
