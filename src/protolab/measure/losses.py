"""Losses as the endpoints detect them, and as the emulator knows them (docs/analysis.md).

- Detected losses: QUIC's `recovery:packet_lost` qlog events (packet numbers); TCP's
  retransmitted segments, as tshark's TCP analysis finds them in the sender's capture.
- Bursts (003 ch. 7, annex C): consecutive losses closer in time than sRTT + RTT variance form
  one burst.
- Ground truth: the emulator's event log says which datagrams were dropped and why. A sender's
  datagrams are followed link by link through the path in send order (every link is FIFO: a
  datagram either arrives at a link and is dropped there, or leaves it in order); the QUIC
  packet in each datagram comes from the qlog's `packet_sent` sequence, TCP's from the IP id in
  the capture. Detected losses are then compared with the true ones: precision, recall, and
  spurious retransmissions (a packet declared lost, or retransmitted, whose original was
  delivered).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

UDP_IP_OVERHEAD = 28  # IPv4 (20) + UDP (8) headers


def bursts(times_ms: Sequence[float], threshold_ms: float) -> list[int]:
    """003 annex C: losses (sorted by time) less than `threshold_ms` apart belong to one burst;
    the burst sizes in order. (003's listing starts its counter at 0, counting one loss short
    in the first burst; here every burst counts all its losses.)"""
    sizes: list[int] = []
    previous: float | None = None
    for t in sorted(times_ms):
        if previous is not None and t - previous <= threshold_ms:
            sizes[-1] += 1
        else:
            sizes.append(1)
        previous = t
    return sizes


def burst_stats(sizes: Sequence[int]) -> dict[str, Any]:
    return {
        "bursts": len(sizes),
        "mean_burst": sum(sizes) / len(sizes) if sizes else None,
        "max_burst": max(sizes) if sizes else None,
        "single_loss_bursts": sum(1 for s in sizes if s == 1),
    }


@dataclass
class Datagram:
    """One datagram of the sender, in send order, with its fate on the path."""

    index: int
    size: int  # IP bytes
    sent_ns: int  # arrival at the first link
    dropped: str | None = None  # cause, if a link dropped it
    dropped_link: str | None = None
    dropped_ns: int | None = None
    # Still inside a link when the log ended (a run's tail): what became of it is not known.
    unknown: bool = False


class GroundTruthError(ValueError):
    """The event log cannot give the truth for this flow (e.g. a link that reorders)."""


def follow_flow(events: Sequence[Mapping[str, Any]], links: Sequence[str]) -> list[Datagram]:
    """The sender's datagrams of one flow (its events, any order) through `links`, the path in
    order from the sender: each link's arrivals (enqueue, or a drop at arrival) are the previous
    link's departures in order. Datagrams a link had not yet delivered when the log ended are
    marked `unknown` (the tail of a run: the log stops while its last packets are on the way).
    Drops of queued packets (AQM, drop-head) are not followed."""
    by_link: dict[str, list[Mapping[str, Any]]] = {link: [] for link in links}
    for event in events:
        if event.get("link") in by_link:
            by_link[str(event["link"])].append(event)
    datagrams: list[Datagram] = []
    survivors: list[Datagram] | None = None
    for position, link in enumerate(links):
        ordered = sorted(by_link[link], key=lambda e: int(e["t"]))
        arrivals = [e for e in ordered if e.get("ev") == "enqueue" or (e.get("ev") == "drop" and e.get("cause") in ("queue_full", "random_loss"))]
        if any(e.get("ev") == "drop" and e.get("cause") not in ("queue_full", "random_loss") for e in ordered):
            raise GroundTruthError(f"link {link}: drops of queued packets (AQM or drop-head) are not followed")
        if survivors is None:
            datagrams = [Datagram(i, int(e["size"]), int(e["t"])) for i, e in enumerate(arrivals)]
            survivors = datagrams
        elif len(arrivals) != len(survivors):
            raise GroundTruthError(f"link {link}: {len(arrivals)} arrivals, but {len(survivors)} datagrams left the "
                                   "previous link (packets of the flow outside the log?)")
        survivors = _through_link(link, survivors, arrivals)
        if position < len(links) - 1:
            survivors = _departed(link, survivors, sum(1 for e in ordered if e.get("ev") == "deliver"))
    return datagrams


def _through_link(link: str, survivors: list[Datagram], arrivals: list[Mapping[str, Any]]) -> list[Datagram]:
    """The datagrams the link queued (in order), its drops at arrival recorded on the datagrams."""
    queued = []
    for datagram, event in zip(survivors, arrivals, strict=True):
        if int(event["size"]) != datagram.size:
            raise GroundTruthError(f"link {link}: datagram {datagram.index} is {datagram.size} bytes at the "
                                   f"first link and {event['size']} here: the link reorders the flow")
        if event.get("ev") == "drop":
            datagram.dropped, datagram.dropped_link, datagram.dropped_ns = str(event.get("cause")), link, int(event["t"])
        else:
            queued.append(datagram)
    return queued


def _departed(link: str, queued: list[Datagram], delivered: int) -> list[Datagram]:
    """The queued datagrams the link delivered within the log (the first ones: it keeps their
    order); the others were still inside it when the log ended."""
    if delivered > len(queued):
        raise GroundTruthError(f"link {link}: {delivered} departures, but {len(queued)} datagrams entered it "
                               "(packets of the flow outside the log?)")
    for datagram in queued[delivered:]:
        datagram.unknown = True
    return queued[:delivered]


@dataclass
class PacketMap:
    """QUIC packets of the qlog mapped to the datagrams of the event log."""

    packet_datagram: dict[tuple[str, int], int] = field(default_factory=dict)  # (space, pn) -> datagram
    unmatched_packets: int = 0
    unmatched_datagrams: int = 0


def map_quic_packets(sent: Sequence[tuple[str, int, int]], datagrams: Sequence[Datagram]) -> PacketMap:
    """Maps the qlog's `packet_sent` sequence ((packet type, packet number, length) in send
    order) onto the datagrams (in send order): a datagram carries one packet whose length is its
    UDP payload, or several coalesced ones whose lengths add up to it (the handshake)."""
    result = PacketMap()
    j = 0
    for datagram in datagrams:
        payload = datagram.size - UDP_IP_OVERHEAD
        total, k = 0, j
        while k < len(sent) and total < payload:
            total += sent[k][2]
            k += 1
        if total == payload:
            for ptype, pn, _ in sent[j:k]:
                result.packet_datagram[(ptype, pn)] = datagram.index
            j = k
        else:
            result.unmatched_datagrams += 1
    result.unmatched_packets = len(sent) - j
    return result


def compare(detected: set[Any], truly_lost: set[Any], delivered: set[Any],
            censored: set[Any] | frozenset[Any] = frozenset()) -> dict[str, Any]:
    """Precision and recall of `detected` against `truly_lost`; spurious = detected but delivered.

    `censored` packets were sent too close to the flow's end for the sender to detect their loss
    (it stopped sending before an RTT had passed): they are left out of precision and recall,
    and counted as `censored_losses` when they were lost."""
    kept_detected, kept_lost = detected - censored, truly_lost - censored
    hits = kept_detected & kept_lost
    return {
        "detected": len(detected),
        "true_losses": len(truly_lost),
        "censored_losses": len(truly_lost & censored),
        "true_positives": len(hits),
        "precision": len(hits) / len(kept_detected) if kept_detected else None,
        "recall": len(hits) / len(kept_lost) if kept_lost else None,
        "spurious": len(detected & delivered),
    }
