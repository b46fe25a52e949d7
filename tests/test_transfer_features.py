"""000 §6.2.1's transfer features (reproduce.transfer_features) and the bootstrap trees of
000 Figs. 6.6/6.7 (reproduce.wifi_trees) on fixed events and rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from protolab.reproduce.claims import NOT_REPRODUCED, REPRODUCED
from protolab.reproduce.figures import REGISTRY
from protolab.reproduce.transfer_features import (
    Ends,
    PacketEvent,
    fifo_sojourns,
    gap_statistics,
    out_of_order_share,
    packet_features,
    state_features,
)
from protolab.reproduce.wifi_trees import draw_rows, protocol_of

SERVER, CLIENT = "10.77.1.1", "10.77.0.1"
DATA = (SERVER, CLIENT, 443, 40000, 17)
ACK = (CLIENT, SERVER, 40000, 443, 17)
ENDS = Ends(server=SERVER, client=CLIENT, server_link="server.up", client_link="client.down", ack_link="server.down")


def test_gap_statistics_of_an_even_stream_and_of_bursts() -> None:
    even = gap_statistics([i * 100_000 for i in range(50)])  # one packet per 100 us
    assert even is not None
    assert even[0] == pytest.approx(100.0) and even[1] == pytest.approx(0.0) and even[2] == pytest.approx(0.0)
    # Bursts of 10 packets 2 us apart, one burst per 1 ms: the same mean rate, bunched.
    bursts = gap_statistics([b * 1_000_000 + i * 2_000 for b in range(10) for i in range(10)])
    assert bursts is not None and bursts[2] > 5 and bursts[1] > 1e4
    # Alternating gaps of 1 and 3 us: k = 1 sees their spread (variance 1 over a squared mean of 4),
    # k = 2 consecutive gaps always sum to 4 us, so no dispersion at that scale.
    alternating = [0, *np.cumsum([1_000, 3_000] * 20).tolist()]
    at_one, at_two = gap_statistics(alternating), gap_statistics(alternating, window=2)
    assert at_one is not None and at_one[1] == pytest.approx(1.0) and at_one[2] == pytest.approx(0.25)
    assert at_two is not None and at_two[2] == pytest.approx(0.0, abs=1e-9)
    assert gap_statistics([5]) is None and gap_statistics([7, 7, 7]) is None  # no gap; gaps of zero


def test_fifo_sojourns_pair_each_flows_kth_delivery_with_its_kth_enqueue() -> None:
    other = (SERVER, CLIENT, 443, 40001, 6)
    events = [PacketEvent(0, "enqueue", "client.down", DATA), PacketEvent(5, "enqueue", "client.down", other),
              PacketEvent(10, "enqueue", "client.down", DATA), PacketEvent(12, "deliver", "client.down", other),
              PacketEvent(30, "deliver", "client.down", DATA), PacketEvent(31, "deliver", "client.down", DATA),
              PacketEvent(40, "enqueue", "client.down", DATA)]  # still queued when the log ends
    assert sorted(fifo_sojourns(events).tolist()) == [7, 21, 30]


def test_out_of_order_counts_late_ids_in_sequential_flows_across_the_wrap() -> None:
    tcp = (SERVER, CLIENT, 443, 40001, 6)
    # The SYN-ACK's id 0, then 200 ids that wrap at 2^16; 65535 arrives after 1.
    ids = [0, 65533, 65534, 1, 65535, *range(2, 198)]
    deliveries = [PacketEvent(t, "deliver", "client.down", tcp, ip_id) for t, ip_id in enumerate(ids)]
    assert out_of_order_share(deliveries) == 1 / 200
    # QUIC: each GSO batch's segments numbered from 0: not a sequence, not counted.
    batches = [PacketEvent(20 + t, "deliver", "client.down", DATA, ip_id) for t, ip_id in
               enumerate((0, 1, 2, 3, 0, 1, 0, 1, 2, 3, 4))]
    assert out_of_order_share(deliveries + batches) == 1 / 200
    assert out_of_order_share(batches) == 0.0


def _transfer(packets: int, gap_ns: int, wifi_ns: int, acks_every: int) -> list[PacketEvent]:
    """A download: each data packet crosses server.up (ideal), p0.reverse (10 ms) and client.down
    (`wifi_ns` per packet); every `acks_every`-th is acknowledged."""
    events = []
    for i in range(packets):
        t = i * gap_ns
        events += [PacketEvent(t, "enqueue", "server.up", DATA), PacketEvent(t, "deliver", "server.up", DATA),
                   PacketEvent(t, "enqueue", "p0.reverse", DATA), PacketEvent(t + 10_000_000, "deliver", "p0.reverse", DATA),
                   PacketEvent(t + 10_000_000, "enqueue", "client.down", DATA),
                   PacketEvent(t + 10_000_000 + wifi_ns, "deliver", "client.down", DATA)]
        if i % acks_every == 0:
            events.append(PacketEvent(t + 30_000_000, "deliver", "server.down", ACK))
    return events


def test_packet_features_of_a_fixed_transfer() -> None:
    features = packet_features(_transfer(100, 200_000, 2_000_000, acks_every=2), ENDS)
    assert features is not None
    assert features["server mean inter-packet time"] == pytest.approx(200.0)
    assert features["client mean inter-packet time"] == pytest.approx(200.0)
    assert features["mean delay"] == pytest.approx(12.0) and features["delay variation"] == pytest.approx(0.0)
    assert features["ACK freq"] == pytest.approx(0.5)
    assert features["packet loss"] == 0.0 and features["out of order"] == 0.0
    dropped = [*_transfer(100, 200_000, 2_000_000, acks_every=10), PacketEvent(5, "drop", "client.down", DATA)]
    lossy = packet_features(dropped, ENDS)
    assert lossy is not None and lossy["packet loss"] == pytest.approx(0.01) and lossy["ACK freq"] == pytest.approx(0.1)
    assert packet_features(_transfer(1, 200_000, 1, 1), ENDS) is None  # no gap


def test_state_features_fold_conservative_slow_start_into_slow_start() -> None:
    run = {"mean_cwnd_bytes": 3e5, "cwnd_variance": 4e9, "frac_slow_start": 0.2, "frac_conservative_slow_start": 0.1,
           "frac_congestion_avoidance": 0.5, "frac_application_limited": 0.2, "frac_recovery": None}
    assert state_features(run) == {"mean cwnd": 3e5, "cwnd variation": 4e9, "slow start freq": pytest.approx(0.3),
                                   "congestion avoidance freq": 0.5, "app limited freq": 0.2, "recovery freq": 0.0}


def _transfers(protocol: str, separating: str, n: int = 60, seed: int = 3) -> list[dict[str, Any]]:
    """Transfers whose class is set by `separating` alone, every other feature noise."""
    from protolab.report.decision_tree import FEATURES_000

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        level = i % 3
        features = {name: float(rng.uniform(0, 3)) for name in FEATURES_000}
        features[separating] = level + float(rng.uniform(0.1, 0.9))
        out.append({"kind": "transfer", "protocol": protocol, "mode": "tcp" if protocol == "tcp" else "h3",
                    "class": f"t{10 * level}", "features": features})
    return out


def test_bootstrap_trees_find_the_separating_root_and_the_claims_follow() -> None:
    transfers = _transfers("tcp", "mean cwnd") + _transfers("cubic", "mean cwnd", seed=4)
    draws = draw_rows(transfers, draws=12)
    assert {r["protocol"] for r in draws} == {"tcp", "cubic"} and len(draws) == 24
    assert all(r["root"] == "mean cwnd" and r["root_is_mean_cwnd"] == 1.0 for r in draws)
    verdicts = [c.check(draws).outcome for c in REGISTRY["000-fig6.6-6.7"].claims]
    assert verdicts[:2] == [REPRODUCED, REPRODUCED]
    assert verdicts[2] == NOT_REPRODUCED  # one feature separates: no delay or burstiness split
    by_delay = draw_rows(_transfers("cubic", "client burstiness"), draws=12)
    verdicts = [c.check(by_delay).outcome for c in REGISTRY["000-fig6.6-6.7"].claims]
    assert verdicts[1:] == [NOT_REPRODUCED, REPRODUCED]


def test_a_protocol_with_one_class_gets_no_tree() -> None:
    one_class = [{**t, "class": "t0"} for t in _transfers("tcp", "mean cwnd")]
    assert draw_rows(one_class, draws=5) == []
    assert protocol_of({"mode": "tcp", "quic_cc": "bquic"}) == "tcp" and protocol_of({"mode": "h3", "quic_cc": "bquic"}) == "bquic"


def test_the_atlas_draws_each_protocols_full_data_tree() -> None:
    from protolab.reproduce.drawings import DrawingInput, drawing_for

    figure = REGISTRY["000-fig6.6-6.7"]
    transfers = _transfers("tcp", "mean cwnd") + _transfers("cubic", "delay variation", seed=5)
    drawing = drawing_for(figure)
    assert drawing is not None
    drawn = drawing(DrawingInput(figure=figure, rows=[*transfers, *draw_rows(transfers, draws=2)]))
    assert drawn is not None
    titles = [ax.get_title() for ax in drawn.axes]
    assert titles == ["TCP: 60 transfers, training accuracy 1.00", "QUIC (cubic): 60 transfers, training accuracy 1.00"]
    assert any("mean cwnd" in t.get_text() for t in drawn.axes[0].texts)
    assert any("delay variation" in t.get_text() for t in drawn.axes[1].texts)
