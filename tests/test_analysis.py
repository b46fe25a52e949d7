"""Transport analysis without a lab: the qlog reader and its errors, 003's burst algorithm,
following a flow's datagrams through the event log, mapping QUIC packets onto them, QUIC_info
and TCP_info from crafted traces and samples, and `protolab analyze` on bad files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from protolab.measure import losses as L
from protolab.measure.conninfo import FIELD_NAMES, quic_info, tcp_info
from protolab.measure.qlog import QlogError, read_qlog

RS = "\x1e"
HEADER = {"qlog_version": "0.3", "qlog_format": "JSON-SEQ", "title": "protolab server quic-10.77.0.1:5000-10.77.1.1:443",
          "description": "start_unix_ns=1800000000000000000", "trace": {"vantage_point": {"type": "unknown"}}}


def qlog_text(events: list[dict[str, Any]], header: dict[str, Any] | None = None) -> str:
    return "".join(RS + json.dumps(r) + "\n" for r in [header or HEADER, *events])


def sent(t: float, pn: int, length: int, ptype: str = "1RTT") -> dict[str, Any]:
    return {"time": t, "name": "transport:packet_sent", "data": {"header": {"packet_type": ptype, "packet_number": pn, "length": length}}}


def lost(t: float, pn: int) -> dict[str, Any]:
    return {"time": t, "name": "recovery:packet_lost", "data": {"header": {"packet_type": "1RTT", "packet_number": pn}}}


def metrics(t: float, **values: Any) -> dict[str, Any]:
    return {"time": t, "name": "recovery:metrics_updated", "data": values}


# ---------------------------------------------------------------------- qlog


def test_qlog_reader(tmp_path: Path) -> None:
    path = tmp_path / "server.qlog"
    path.write_text(qlog_text([sent(1.0, 0, 1200, "initial"), metrics(2.0, smoothed_rtt=0.05)]))
    trace = read_qlog(path)
    assert (trace.role, trace.conn, trace.start_unix_ns) == ("server", "quic-10.77.0.1:5000-10.77.1.1:443", 1800000000000000000)
    assert [e.name for e in trace.events] == ["transport:packet_sent", "recovery:metrics_updated"]
    assert trace.unix_ns(1.5) == 1800000000001500000
    ndjson = tmp_path / "lines.qlog"
    ndjson.write_text("\n".join(json.dumps(r) for r in [HEADER, sent(1.0, 0, 1200)]) + "\n")
    assert len(read_qlog(ndjson).events) == 1


@pytest.mark.parametrize(("content", "message"), [
    (qlog_text([sent(1.0, 0, 1200)])[:-30], r"line 2 \(byte \d+\): truncated record at the end"),
    (qlog_text([sent(1.0, 0, 1200)]) + RS + "{not json}\n", r"line 3 \(byte \d+\): not valid JSON"),
    (RS + json.dumps({"traceEvents": []}) + "\n", r"line 1 \(byte 1\): not a qlog trace"),
    (qlog_text([sent(float(i), i, 1200) for i in range(5)]) + RS + "{not json}\n", r"line 7 \(byte \d+\): not valid JSON"),
    (qlog_text([], {**HEADER, "qlog_version": "0.1"}), "qlog_version '0.1' is not read"),
    (qlog_text([{"name": "x", "data": {}}]), "event without a numeric time"),
    (qlog_text([{"time": 1, "data": {}}]), "event without a name"),
    (qlog_text([{"time": 1, "name": "x", "data": [1]}]), "x: data must be an object"),
    (RS + "[1, 2]\n", "a record must be a JSON object"),
    ("", "empty file, not a qlog trace"),
])
def test_qlog_errors_name_file_line_and_offset(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.qlog"
    path.write_text(content)
    with pytest.raises(QlogError, match=message) as raised:
        read_qlog(path)
    assert str(path) in str(raised.value)


# ---------------------------------------------------------------------- losses


def test_bursts_by_003_annex_c() -> None:
    assert L.bursts([], 10) == []
    assert L.bursts([5.0], 10) == [1]
    assert L.bursts([0, 5, 9, 30, 31, 100], 10) == [3, 2, 1]
    assert L.bursts([30, 0, 5], 10) == [2, 1], "sorted by time first"
    assert L.burst_stats([3, 2, 1]) == {"bursts": 3, "mean_burst": 2.0, "max_burst": 3, "single_loss_bursts": 1}


def ev(t: int, kind: str, link: str, size: int = 1480, cause: str | None = None) -> dict[str, Any]:
    return {"t": t, "ev": kind, "link": link, "size": size, "cause": cause}


def test_follow_flow_through_the_path() -> None:
    """Five datagrams; the 2nd is lost at random on the bottleneck, the 4th overflows it, the
    5th is lost on the last link."""
    events = []
    for i in range(5):
        events.append(ev(10 * i, "enqueue", "server.up"))
        events.append(ev(10 * i + 1, "deliver", "server.up"))
    for i, fate in enumerate(["ok", "random_loss", "ok", "queue_full", "ok"]):
        t = 10 * i + 1
        events.append(ev(t, "drop" if fate != "ok" else "enqueue", "p0.reverse", cause=None if fate == "ok" else fate))
        if fate == "ok":
            events.append(ev(t + 5, "deliver", "p0.reverse"))
    for i, fate in zip((0, 2, 4), ["ok", "ok", "random_loss"], strict=True):
        t = 10 * i + 6
        events.append(ev(t, "drop" if fate != "ok" else "enqueue", "client.down", cause=None if fate == "ok" else fate))
    datagrams = L.follow_flow(events, ["server.up", "p0.reverse", "client.down"])
    assert [(d.index, d.dropped, d.dropped_link) for d in datagrams] == [
        (0, None, None), (1, "random_loss", "p0.reverse"), (2, None, None), (3, "queue_full", "p0.reverse"),
        (4, "random_loss", "client.down")]
    with pytest.raises(L.GroundTruthError, match="drops of queued packets"):
        L.follow_flow([*events, ev(100, "drop", "p0.reverse", cause="aqm")], ["server.up", "p0.reverse"])
    with pytest.raises(L.GroundTruthError, match="3 arrivals, but 5 datagrams"):
        L.follow_flow([e for e in events if not (e["link"] == "p0.reverse" and e["t"] < 15)], ["server.up", "p0.reverse"])
    # The log ended while the 5th was on the bottleneck: its fate is unknown, the others stand.
    cut = [e for e in events if e["t"] < 45]
    tail = L.follow_flow(cut, ["server.up", "p0.reverse", "client.down"])
    assert [(d.index, d.dropped, d.unknown) for d in tail] == [
        (0, None, False), (1, "random_loss", False), (2, None, False), (3, "queue_full", False), (4, None, True)]
    # A link that delivers more of the flow than entered it: packets from before the log.
    with pytest.raises(L.GroundTruthError, match="4 departures, but 3 datagrams entered"):
        L.follow_flow([ev(0, "deliver", "p0.reverse"), *events], ["server.up", "p0.reverse", "client.down"])


def test_quic_packets_onto_datagrams() -> None:
    datagrams = [L.Datagram(i, size + 28, 0) for i, size in enumerate([1200, 1452, 1452, 500])]
    sent_packets = [("initial", 0, 1200), ("handshake", 0, 600), ("1RTT", 0, 852), ("1RTT", 1, 1452), ("1RTT", 2, 500)]
    mapping = L.map_quic_packets(sent_packets, datagrams)
    assert mapping.packet_datagram == {("initial", 0): 0, ("handshake", 0): 1, ("1RTT", 0): 1, ("1RTT", 1): 2,
                                       ("1RTT", 2): 3}
    assert (mapping.unmatched_datagrams, mapping.unmatched_packets) == (0, 0)
    result = L.compare({("1RTT", 1), ("1RTT", 2)}, {("1RTT", 1)}, {("1RTT", 0), ("1RTT", 2)})
    assert result == {"detected": 2, "true_losses": 1, "censored_losses": 0, "true_positives": 1, "precision": 0.5,
                      "recall": 1.0, "spurious": 1}
    # Packets sent too near the end for the sender to notice their loss leave precision and recall.
    censored = L.compare({1, 2}, {1, 2, 8, 9}, {3, 4, 5}, censored={8, 9, 5})
    assert (censored["true_losses"], censored["censored_losses"], censored["recall"], censored["precision"]) == (4, 2, 1.0, 1.0)


def test_censor_window() -> None:
    from protolab.analysis.analyze import censor_window_ms

    assert censor_window_ms({"smooth_rtt_ms": 40.0, "var_rtt_ms": 5.0}) == 60.0
    assert censor_window_ms({"smooth_rtt_ms": None, "min_rtt_ms": 30.0}) == 60.0
    assert censor_window_ms({}) == 0.0


# ---------------------------------------------------------------------- QUIC_info, TCP_info


def test_quic_info_from_qlog_and_samples(tmp_path: Path) -> None:
    events = [
        sent(0.1, 0, 1200, "initial"), metrics(0.1, latest_rtt=0.333, smoothed_rtt=0.333, min_rtt=0.333),
        {"time": 40.0, "name": "transport:packet_received", "data": {"header": {"packet_type": "1RTT", "packet_number": 0}}},
        metrics(40.0, latest_rtt=0.040, smoothed_rtt=0.040, rtt_variance=0.02, min_rtt=0.040, congestion_window=12000,
                pacing_rate=3_000_000),
        sent(41.0, 0, 1452), sent(42.0, 1, 1452), lost(90.0, 0),
        metrics(95.0, latest_rtt=0.060, smoothed_rtt=0.045, rtt_variance=0.01, min_rtt=0.040, congestion_window=8400,
                pacing_rate=2_000_000),
    ]
    path = tmp_path / "q.qlog"
    path.write_text(qlog_text(events))
    info = quic_info(read_qlog(path))
    assert set(info) == set(FIELD_NAMES)
    assert info["snd_mss"] == 1452 and info["lost"] == 1 and info["cwnd_bytes"] == 8400
    assert info["smooth_rtt_ms"] == pytest.approx(45.0) and info["var_rtt_ms"] == pytest.approx(10.0)
    assert info["max_rtt_ms"] == pytest.approx(60.0), "the initial 333 ms estimate is no sample"
    assert info["min_rtt_ms"] == pytest.approx(40.0)
    assert (info["pacing_rate_bps"], info["max_pacing_rate_bps"]) == (2_000_000.0, 3_000_000.0)
    assert (info["next_send_pkt_nbr"], info["next_recv_pkt_nbr"]) == (2, 1)
    assert info["bytes_sent"] == 1200 + 2 * 1452 and info["duration_ms"] == pytest.approx(94.9)
    for never in ("rto_ms", "ato_ms", "frames_sent", "data_frames_recv", "retrans", "delivery_rate_bps", "spurious"):
        assert info[never] is None, never
    samples = [{"t_unix_ns": 1, "event": "sample", "udp_tx_bytes": 9999, "udp_rx_bytes": 555, "udp_tx_datagrams": 7,
                "udp_rx_datagrams": 3}]
    with_samples = quic_info(read_qlog(path), samples)
    assert (with_samples["bytes_sent"], with_samples["bytes_recv"], with_samples["dgrams_sent"]) == (9999, 555, 7)


def test_tcp_info_by_003_annex_b() -> None:
    rows = [
        {"t_unix_ns": 1_000_000_000, "event": "sample", "snd_mss": 1448, "cwnd": 10},
        {"t_unix_ns": 3_000_000_000, "event": "sample", "snd_mss": 1448, "rcv_mss": 536, "cwnd": 20, "rto_us": 204_000,
         "ato_us": 40_000, "rtt_us": 50_000, "rttvar_us": 5_000, "min_rtt_us": 40_000, "bytes_sent": 1_000_000,
         "bytes_retrans": 10_000, "bytes_received": 100, "segs_out": 700, "segs_in": 350, "data_segs_out": 690,
         "data_segs_in": 1, "lost": 0, "retransmits": 7, "pacing_rate_bps": 8e6, "max_pacing_rate_bps": None,
         "delivery_rate_bps": 7e6, "dsack_dups": 2, "last_data_sent_ms": 10, "last_data_recv_ms": 1500,
         "last_ack_recv_ms": 5},
    ]
    info = tcp_info(rows)
    assert (info["rto_ms"], info["ato_ms"], info["smooth_rtt_ms"], info["var_rtt_ms"]) == (204.0, 40.0, 50.0, 5.0)
    assert info["cwnd_bytes"] == 20 * 1448 and info["data_sent"] == 990_000 and info["retrans"] == 7
    assert (info["dgrams_sent"], info["data_dgrams_sent"], info["spurious"]) == (700, 690, 2)
    assert info["last_data_sent_ms"] == pytest.approx(1990.0) and info["last_data_recv_ms"] == pytest.approx(500.0)
    assert info["duration_ms"] == 2000.0 and info["next_send_pkt_nbr"] is None and info["max_rtt_ms"] is None


# ---------------------------------------------------------------------- the command


def _protolab(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "protolab", *map(str, argv)], capture_output=True, text=True,
                          timeout=120, check=False)


def test_analyze_command_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "broken.qlog"
    bad.write_text(qlog_text([sent(1.0, 0, 1200)])[:-20])
    for path, message in ((bad, "truncated record"), (tmp_path / "none.qlog", "no such file"),
                          (tmp_path / "x.txt", "not a results directory, a qlog")):
        if path.suffix == ".txt":
            path.write_text("hello")
        result = _protolab("analyze", path)
        assert result.returncode == 1, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    pcap = tmp_path / "garbage.pcap"
    pcap.write_bytes(b"\x00" * 100)
    result = _protolab("analyze", pcap)
    assert result.returncode == 1 and "not a readable capture" in result.stderr, result.stderr
    samples = tmp_path / "s.ndjson"
    samples.write_text('{"not": "samples"}\n')
    result = _protolab("analyze", samples)
    assert result.returncode == 1 and "no samples" in result.stderr, result.stderr
