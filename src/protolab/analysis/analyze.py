"""Transport analysis of runs (`protolab analyze`, docs/analysis.md): per connection end the
`QUIC_info`/`TCP_info` row, the detected losses and their bursts, and, with the emulator's event
log, the truth about every loss; per run the overhead factor. The runner analyses every run as
it records it; `protolab analyze RESULTS` does it again for a whole results directory (e.g.
after the analysis changed), and `protolab analyze FILE` summarizes one qlog or samples file.

It reads a run's raw artifacts (runs/<key>/: samples, qlog, events.ndjson, <host>.pcap,
result.json, run.json); the report reads its results from the store.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from protolab.errors import ProtolabError
from protolab.measure import losses as L
from protolab.measure.conninfo import FIELD_NAMES, quic_info, tcp_info
from protolab.measure.qlog import QlogError, QlogTrace, header_of, read_qlog

TSHARK_FIELDS = ("frame.time_epoch", "ip.src", "tcp.srcport", "ip.dst", "tcp.dstport", "ip.id", "tcp.seq",
                 "tcp.len", "tcp.analysis.spurious_retransmission")
_EVENT_COLUMNS = ("{'t': 'BIGINT', 'ev': 'VARCHAR', 'cause': 'VARCHAR', 'link': 'VARCHAR', 'src': 'VARCHAR', "
                  "'dst': 'VARCHAR', 'sport': 'INTEGER', 'dport': 'INTEGER', 'proto': 'INTEGER', 'size': 'BIGINT', "
                  "'ip_id': 'INTEGER'}")


class AnalysisError(ProtolabError):
    """An artifact cannot be analysed (the message names the file)."""


@dataclass
class RunAnalysis:
    connection_info: list[dict[str, Any]] = field(default_factory=list)
    losses: list[dict[str, Any]] = field(default_factory=list)
    loss_bursts: list[dict[str, Any]] = field(default_factory=list)
    overhead: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)


# ---------------------------------------------------------------------- connections


@dataclass(frozen=True)
class Endpoints:
    """The addresses of a connection id (`<transport>-<client>:<port>-<server>:<port>`)."""

    transport: str
    client: tuple[str, int]
    server: tuple[str, int]

    @classmethod
    def parse(cls, conn: str) -> Endpoints | None:
        transport, _, rest = conn.partition("-")
        parts = rest.split("-")
        if len(parts) != 2:
            return None
        try:
            ends = [(host, int(port)) for host, _, port in (p.rpartition(":") for p in parts)]
        except ValueError:
            return None
        return cls(transport, ends[0], ends[1])

    def sender(self, role: str) -> tuple[tuple[str, int], tuple[str, int]]:
        """(source, destination) of what `role` sends."""
        return (self.server, self.client) if role == "server" else (self.client, self.server)


def _group_samples(samples: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    ends: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in samples:
        if row.get("subflow") in (None, 0) and isinstance(row.get("t_unix_ns"), int):
            ends[(str(row.get("conn")), str(row.get("role")))].append(row)
    for rows in ends.values():
        rows.sort(key=lambda r: r["t_unix_ns"])
    return ends


def _read_traces(run_dir: Path, notes: list[dict[str, Any]]) -> dict[tuple[str, str], QlogTrace]:
    traces = {}
    for file in sorted((run_dir / "qlog").glob("*.qlog")):
        try:
            trace = read_qlog(file)
        except QlogError as exc:
            notes.append({"file": str(file.relative_to(run_dir)), "note": str(exc)})
            continue
        if trace.conn and trace.role:
            traces[(trace.conn, trace.role)] = trace
    return traces


# ---------------------------------------------------------------------- ground truth


def _flow_events(events: Path, src: tuple[str, int], dst: tuple[str, int], proto: int) -> list[dict[str, Any]]:
    import duckdb

    con = duckdb.connect()
    try:
        rows = con.execute(
            f"SELECT t, ev, cause, link, size, ip_id FROM read_json($path, format='newline_delimited', "
            f"columns={_EVENT_COLUMNS}) WHERE ev IS NOT NULL AND src = $src AND sport = $sport AND dst = $dst "
            "AND dport = $dport AND proto = $proto ORDER BY t",
            {"path": str(events), "src": src[0], "sport": src[1], "dst": dst[0], "dport": dst[1], "proto": proto},
        ).fetchall()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AnalysisError(f"{events}: cannot read the event log ({first})") from exc
    finally:
        con.close()
    return [{"t": t, "ev": ev, "cause": cause, "link": link, "size": size, "ip_id": ip_id}
            for t, ev, cause, link, size, ip_id in rows]


def _path_links(flow_events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The links of the flow in path order: each link's first event comes in path order."""
    seen: dict[str, None] = {}
    for event in flow_events:
        seen.setdefault(str(event["link"]), None)
    return list(seen)


# ---------------------------------------------------------------------- QUIC


def _quic_losses(trace: QlogTrace, info: Mapping[str, Any], events: Path | None, ends: Endpoints,
                 role: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lost = [(e.time_ms, header_of(e)) for e in trace.named("recovery:packet_lost")]
    detected = {(str(h.get("packet_type")), h.get("packet_number")) for _, h in lost}
    sent_at = {(str(h.get("packet_type")), h.get("packet_number")): e.time_ms
               for e in trace.named("transport:packet_sent") for h in (header_of(e),)}
    threshold = (info.get("smooth_rtt_ms") or 0.0) + (info.get("var_rtt_ms") or 0.0)
    # A loss happens when the lost packet is sent (003 dates it when it is declared lost).
    detected_sizes = L.bursts([sent_at.get(key, t) for t, key in ((t, (str(h.get("packet_type")), h.get("packet_number")))
                                                                   for t, h in lost)], threshold)
    row: dict[str, Any] = {"detected": len(detected), "burst_threshold_ms": threshold,
                           "detected_mean_burst_003": L.burst_stats(L.bursts([t for t, _ in lost], threshold))["mean_burst"],
                           **{f"detected_{k}": v for k, v in L.burst_stats(detected_sizes).items()}}
    bursts = [{"kind": "detected", "size": s} for s in detected_sizes]
    if events is None:
        return row, bursts
    src, dst = ends.sender(role)
    flow = _flow_events(events, src, dst, 17)
    datagrams = L.follow_flow(flow, _path_links(flow))
    sent = [(str(h.get("packet_type")), h.get("packet_number"), h.get("length"))
            for h in (header_of(e) for e in trace.named("transport:packet_sent"))
            if isinstance(h.get("packet_number"), int) and isinstance(h.get("length"), int)]
    mapping = L.map_quic_packets(sent, datagrams)
    dropped = {key for key, index in mapping.packet_datagram.items() if datagrams[index].dropped}
    unknown = {key for key, index in mapping.packet_datagram.items() if datagrams[index].unknown}
    delivered = {key for key, index in mapping.packet_datagram.items()
                 if not datagrams[index].dropped and not datagrams[index].unknown}
    last_sent = max(sent_at.values(), default=0.0)
    window = censor_window_ms(info)
    # Packets still on the way when the log ended have no known fate: left out like the ones
    # sent too late for the sender to detect a loss.
    censored = {key for key, t in sent_at.items() if t > last_sent - window} | unknown
    truth = L.compare(detected, dropped, delivered, censored)
    start = trace.start_unix_ns or 0
    true_times = sorted((datagrams[mapping.packet_datagram[k]].dropped_ns or 0) / 1e6 - start / 1e6 for k in dropped)
    true_sizes = L.bursts(true_times, threshold)
    bursts += [{"kind": "true", "size": s} for s in true_sizes]
    row.update(truth)
    row.update({f"true_{k}": v for k, v in L.burst_stats(true_sizes).items()})
    row.update({
        "ground_truth": True, "datagrams": len(datagrams), "unmatched_datagrams": mapping.unmatched_datagrams,
        "unmatched_packets": mapping.unmatched_packets,
        "drops_by_cause": _causes(datagrams),
        "detected_mean_run": _mean_run(sorted(pn for space, pn in detected if space == "1RTT")),
        "true_mean_run": _mean_run(sorted(pn for space, pn in dropped if space == "1RTT")),
    })
    return row, bursts


def censor_window_ms(info: Mapping[str, Any]) -> float:
    """How long before its last transmission a sender can no longer detect a loss: sRTT + 4 RTT
    variance (an RTO without its floor; twice the minimum RTT when there is no smoothed RTT)."""
    smoothed = info.get("smooth_rtt_ms")
    if isinstance(smoothed, int | float) and smoothed > 0:
        return float(smoothed) + 4 * float(info.get("var_rtt_ms") or 0.0)
    minimum = info.get("min_rtt_ms")
    return 2 * float(minimum) if isinstance(minimum, int | float) else 0.0


def _causes(datagrams: Sequence[L.Datagram]) -> dict[str, int]:
    causes: dict[str, int] = defaultdict(int)
    for d in datagrams:
        if d.dropped:
            causes[d.dropped] += 1
    return dict(causes)


def _mean_run(numbers: Sequence[int]) -> float | None:
    """The mean length of runs of consecutive numbers (a loss burst in send order)."""
    if not numbers:
        return None
    runs, length = [], 1
    for previous, current in pairwise(numbers):
        if current == previous + 1:
            length += 1
        else:
            runs.append(length)
            length = 1
    runs.append(length)
    return sum(runs) / len(runs)


# ---------------------------------------------------------------------- TCP


def tshark_segments(pcap: Path) -> list[dict[str, Any]]:
    """Every TCP segment with data in a capture (decoded by tshark), with tshark's flag of a
    spurious retransmission."""
    tshark = shutil.which("tshark")
    if tshark is None:
        raise AnalysisError("tshark is not installed (make setup installs it)")
    argv = [tshark, "-r", str(pcap), "-n", "-o", "tcp.relative_sequence_numbers:FALSE", "-Y", "tcp.len > 0",
            "-T", "fields", "-E", "separator=\t", *[a for f in TSHARK_FIELDS for a in ("-e", f)]]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AnalysisError(f"{pcap}: tshark failed: {exc}") from exc
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit status {done.returncode}"
        raise AnalysisError(f"{pcap}: not a readable capture ({detail})")
    segments = []
    for row in csv.reader(io.StringIO(done.stdout), delimiter="\t"):
        if len(row) < len(TSHARK_FIELDS):
            continue
        with contextlib.suppress(ValueError):
            segments.append({
                "t": float(row[0]), "src": row[1], "sport": int(row[2]), "dst": row[3], "dport": int(row[4]),
                "ip_id": int(row[5], 0), "seq": int(row[6]), "len": int(row[7]), "spurious_flag": bool(row[8]),
            })
    return segments


def tcp_losses(segments: Sequence[Mapping[str, Any]], events: Path | None, ends: Endpoints,
               role: str, threshold_ms: float, censor_ms: float = 0.0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    src, dst = ends.sender(role)
    mine = [s for s in segments if (s["src"], s["sport"], s["dst"], s["dport"]) == (*src, *dst)]
    # At the sender a segment below the highest sequence number sent so far is a retransmission
    # (tshark's own flags take some for reordering, which a sender's capture cannot show).
    highest = None
    retransmitted = []
    for segment in mine:
        end = (segment["seq"] + segment["len"]) % 2**32
        if highest is not None and (segment["seq"] - highest) % 2**32 >= 2**31:
            retransmitted.append(segment)
        if highest is None or (end - highest) % 2**32 < 2**31:
            highest = end
    retransmission = {id(s) for s in retransmitted}
    detected = {s["seq"] for s in retransmitted}
    first_sent: dict[int, float] = {}
    for segment in mine:
        first_sent.setdefault(segment["seq"], segment["t"])
    # A loss happens when the lost segment was sent; 003 dates it when it is retransmitted.
    detected_sizes = L.bursts([first_sent[s["seq"]] * 1e3 for s in retransmitted], threshold_ms)
    row: dict[str, Any] = {"detected": len(retransmitted), "burst_threshold_ms": threshold_ms,
                           "detected_mean_burst_003": L.burst_stats(L.bursts([s["t"] * 1e3 for s in retransmitted],
                                                                             threshold_ms))["mean_burst"],
                           "spurious_tshark": sum(1 for s in retransmitted if s["spurious_flag"]),
                           "datagrams": len(mine),
                           **{f"detected_{k}": v for k, v in L.burst_stats(detected_sizes).items()}}
    bursts = [{"kind": "detected", "size": s} for s in detected_sizes]
    if events is None:
        return row, bursts
    flow = _flow_events(events, src, dst, 6)
    dropped_ids = {e["ip_id"]: e for e in flow if e["ev"] == "drop"}
    # A sequence number is truly lost when a transmission of it was dropped.
    lost_seqs = {s["seq"] for s in mine if s["ip_id"] in dropped_ids}
    delivered_seqs = {s["seq"] for s in mine if s["ip_id"] not in dropped_ids and id(s) not in retransmission}
    last_sent = max((s["t"] for s in mine), default=0.0)
    censored = {seq for seq, t in first_sent.items() if t > last_sent - censor_ms / 1e3}
    truth = L.compare(detected, lost_seqs, delivered_seqs - lost_seqs, censored)
    true_times = sorted(dropped_ids[s["ip_id"]]["t"] / 1e6 for s in mine if s["ip_id"] in dropped_ids)
    true_sizes = L.bursts(true_times, threshold_ms)
    bursts += [{"kind": "true", "size": s} for s in true_sizes]
    causes: dict[str, int] = defaultdict(int)
    for s in mine:
        if s["ip_id"] in dropped_ids:
            causes[str(dropped_ids[s["ip_id"]]["cause"])] += 1
    row.update(truth)
    row.update({f"true_{k}": v for k, v in L.burst_stats(true_sizes).items()})
    row.update({"ground_truth": True, "datagrams": len(mine), "drops_by_cause": dict(causes)})
    return row, bursts


def _sender_capture(captures: Mapping[Path, list[dict[str, Any]]], ends: Endpoints,
                    role: str) -> list[dict[str, Any]] | None:
    """The capture taken at the sender (it holds every transmission, dropped ones too): the one
    with the most data segments of the flow."""
    src, dst = ends.sender(role)
    best, count = None, 0
    for segments in captures.values():
        n = sum(1 for s in segments if (s["src"], s["sport"], s["dst"], s["dport"]) == (*src, *dst))
        if n > count:
            best, count = segments, n
    return best


# ---------------------------------------------------------------------- runs


def _overhead(run_dir: Path, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Wire bytes to the client (the emulator's delivered IP bytes on its downlink) over the
    application bytes it received: bulk downloads and page loads of single-client runs."""
    run = _json(run_dir / "run.json") or {}
    result = _json(run_dir / "result.json") or {}
    if not run or not result or result.get("status") != "ok":
        return []
    config = result.get("config") or {}
    if result.get("kind") == "bulk":
        if config.get("direction") != "download":
            return []
        app_bytes, protocol = result.get("bytes"), config.get("protocol")
    else:
        app_bytes, protocol = result.get("bytes"), config.get("mode")
    links = (run.get("link_counters") or {}).get("links") or {}
    downlink = links.get("client.down") or {}
    wire = downlink.get("delivered_bytes")
    if not isinstance(app_bytes, int) or not isinstance(wire, int) or app_bytes <= 0:
        return []
    return [{"protocol": protocol, "link": "client.down", "wire_bytes": wire, "app_bytes": app_bytes,
             "factor": wire / app_bytes}]


def _json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def analyze_run(run_dir: Path, samples: Sequence[Mapping[str, Any]], params: Mapping[str, Any]) -> RunAnalysis:
    """Everything of one run's directory (samples as `results.samples.read_samples` returns them)."""
    out = RunAnalysis()
    traces = _read_traces(run_dir, out.notes)
    grouped = _group_samples(samples)
    events = run_dir / "events.ndjson"
    events_path = events if events.is_file() else None
    captures: dict[Path, list[dict[str, Any]]] | None = None
    for conn, role in sorted(set(grouped) | set(traces)):
        rows = grouped.get((conn, role), [])
        trace = traces.get((conn, role))
        transport = (rows[0].get("transport") if rows else None) or ("quic" if trace else None)
        info = quic_info(trace, rows) if transport == "quic" else tcp_info(rows)
        base = {"conn": conn, "role": role, "transport": transport,
                "source": "+".join(s for s, present in (("qlog", trace is not None), ("samples", bool(rows))) if present)}
        ends = Endpoints.parse(conn)
        sender = isinstance(info.get("bytes_sent"), int) and info["bytes_sent"] > (info.get("bytes_recv") or 0)
        loss_row: dict[str, Any] | None = None
        bursts: list[dict[str, Any]] = []
        try:
            if sender and ends is not None and trace is not None and transport == "quic":
                loss_row, bursts = _quic_losses(trace, info, events_path, ends, role)
                if loss_row.get("ground_truth"):
                    info["spurious"] = loss_row["spurious"]
            elif sender and ends is not None and transport == "tcp":
                if captures is None:
                    captures = {pcap: tshark_segments(pcap) for pcap in sorted(run_dir.glob("*.pcap"))}
                segments = _sender_capture(captures, ends, role)
                if segments is not None:
                    threshold = (info.get("smooth_rtt_ms") or 0.0) + (info.get("var_rtt_ms") or 0.0)
                    loss_row, bursts = tcp_losses(segments, events_path, ends, role, threshold, censor_window_ms(info))
        except (AnalysisError, L.GroundTruthError) as exc:
            out.notes.append({"file": conn, "note": str(exc)})
        out.connection_info.append({**base, **{k: info.get(k) for k in FIELD_NAMES}})
        if loss_row is not None:
            out.losses.append({**base, **loss_row})
            out.loss_bursts += [{"conn": conn, "role": role, **b} for b in bursts]
    out.overhead = _overhead(run_dir, params)
    return out
