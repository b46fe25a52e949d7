"""The rows a figure's claims are checked on, read from a results store."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from protolab.corpus.table1 import SITES
from protolab.errors import ProtolabError
from protolab.measure.transport import STATES, state_time_fractions, state_transitions, summarize_connection
from protolab.plan.spec import CONDITION_COLUMNS
from protolab.reproduce import passive, wifi_trees
from protolab.reproduce.transfer_features import Ends
from protolab.reproduce.bulk_stats import link_use, rtt_stats, window_stats
from protolab.reproduce.windows import backoff_factors, mean_summed_window
from protolab.run.runner import PlannedRun
from protolab.scenarios.base import BULK_SERVER_ADDRESS, CLIENT, CLIENT_ADDRESS, SERVER
from protolab.store import ResultsStore

RUN_COLUMNS = ("run_key", "mode", "page", *CONDITION_COLUMNS, "quic_cc", "tcp_cc",
               "repetition", "plt_ms", "goodput_mbps")


def queue_fill(counters: dict[str, Any]) -> float | None:
    """The largest queue occupancy of a link direction over its limit (1.0: it was full)."""
    queue = counters.get("configured_queue")
    queue = json.loads(queue) if isinstance(queue, str) else queue
    if not isinstance(queue, dict):
        return None
    for unit, used in (("bytes", counters.get("max_queue_bytes")), ("packets", counters.get("max_queue_packets"))):
        limit = queue.get(unit)
        if isinstance(limit, int | float) and limit > 0 and used is not None:
            return float(used) / float(limit)
    return None


def _link_metrics(store: ResultsStore, experiment: str) -> dict[str, dict[str, Any]]:
    """Per run: `queue_fill.<link>` and `queue_drops.<link>` (packets dropped at a full queue)."""
    metrics: dict[str, dict[str, Any]] = {}
    for c in store.query("SELECT run_key, link, configured_queue, max_queue_bytes, max_queue_packets, "
                         "dropped_queue_full_packets FROM link_counters WHERE experiment_id = ?", [experiment]):
        run = metrics.setdefault(c["run_key"], {})
        run[f"queue_fill.{c['link']}"] = queue_fill(c)
        run[f"queue_drops.{c['link']}"] = c["dropped_queue_full_packets"]
    return metrics


def _runs(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """Successful runs, each with its scenario parameters and extra axes (`params`) merged in,
    and the queue metrics of every link direction."""
    rows = store.query(f"SELECT {', '.join(RUN_COLUMNS)}, params FROM runs WHERE experiment_id = ? AND status = 'ok'",
                       [experiment])
    links = _link_metrics(store, experiment)
    out = []
    for row in rows:
        params = row.pop("params")
        extra = json.loads(params) if isinstance(params, str) else (params or {})
        out.append({**extra, **links.get(row["run_key"], {}), **row})
    return out


def _pairs(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    return store.query(
        "SELECT a.run_key, a.label || ' vs ' || b.label AS pair, a.share AS share_a, b.share AS share_b, a.jain AS jain "
        "FROM pair_sides a JOIN pair_sides b USING (experiment_id, run_key) JOIN runs r USING (experiment_id, run_key) "
        "WHERE a.side = 'a' AND b.side = 'b' AND a.experiment_id = ? AND r.status = 'ok'", [experiment])


def _pairs_over_time(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """The pairs, and per run and side its delivered rate per bin (`kind` = "bin": `pair`,
    `side`, `t_ms`, `mbps`; the side's total, not its flows): 000 Fig. 6.12's shares over time."""
    pairs = _pairs(store, experiment)
    names = {row["run_key"]: row["pair"] for row in pairs}
    bins = store.query("SELECT run_key, side, t_ms, mbps FROM flow_bins WHERE experiment_id = ? AND flow IS NULL "
                       "ORDER BY run_key, side, t_ms", [experiment])
    return [*pairs, *({**b, "kind": "bin", "pair": names[b["run_key"]]} for b in bins if b["run_key"] in names)]


def _overhead(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    return store.query(
        "SELECT o.run_key, o.protocol, o.link, o.factor FROM overhead o JOIN runs r USING (experiment_id, run_key) "
        "WHERE o.experiment_id = ? AND r.status = 'ok'", [experiment])


def _rpm(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """Per responsiveness result: the run's mode and condition, the buffer in BDPs, the
    measured loaded latencies over the expected loaded RTT, and the configured rate over the
    measured goodput (`rate_over_goodput`: 003 §6.3.2's overhead compensation factor)."""
    rows = store.query(
        "SELECT x.run_key, r.mode, r.bandwidth_mbps, r.rtt_ms, r.buffer_bytes, x.direction, x.queue, x.rpm, "
        "x.capacity_mbps, x.idle_latency_ms, "
        "x.loaded_latency_ms, x.foreign_latency_ms, x.expected_loaded_rtt_ms, x.factor_of_increase, x.overhead_factor "
        "FROM rpm_results x JOIN runs r USING (experiment_id, run_key) WHERE x.experiment_id = ? AND r.status = 'ok'",
        [experiment])
    for row in rows:
        bandwidth, rtt, buffer = row["bandwidth_mbps"], row["rtt_ms"], row["buffer_bytes"]
        row["buffer_bdp"] = round(buffer / (bandwidth * 1e6 * rtt / 1e3 / 8), 2) if bandwidth and rtt and buffer else None
        expected = row["expected_loaded_rtt_ms"]
        for name in ("loaded", "foreign"):
            value = row[f"{name}_latency_ms"]
            row[f"{name}_over_expected"] = value / expected if value is not None and expected else None
        capacity = row["capacity_mbps"]
        row["rate_over_goodput"] = bandwidth / capacity if bandwidth and capacity else None
        row.update(bdp_columns(bandwidth, rtt, buffer))
        idle = row["idle_latency_ms"]
        row["idle_excess_ms"] = idle - rtt if idle is not None and rtt is not None else None
    return rows


def bdp_columns(bandwidth_mbps: float | None, rtt_ms: float | None, buffer_bytes: float | None) -> dict[str, Any]:
    """`bdp_bytes` of a condition and `bdp_below_buffer` (003 Fig. 6.11: the latency increases
    where the BDP is below the router's 50 kB buffer); None without a rate, RTT or buffer."""
    if not bandwidth_mbps or not rtt_ms:
        return {"bdp_bytes": None, "bdp_below_buffer": None}
    bdp = bandwidth_mbps * 1e6 * rtt_ms / 1e3 / 8
    return {"bdp_bytes": bdp, "bdp_below_buffer": bdp < buffer_bytes if buffer_bytes else None}


def recorded_repetitions(store: ResultsStore, experiment: str) -> int | None:
    """The repetitions of the spec last run into the store (an adaptive run's last round)."""
    for row in store.query("SELECT spec FROM experiments WHERE id = ?", [experiment]):
        spec = json.loads(row["spec"]) if isinstance(row["spec"], str) else row["spec"]
        repetitions = spec.get("repetitions") if isinstance(spec, dict) else None
        return repetitions if isinstance(repetitions, int) else None
    return None


def planned_row(run: PlannedRun) -> dict[str, Any]:
    """What a claim's filters can select of a run before it ran: its mode, page, condition and
    scenario parameters, as the row sources name them (for pairs the mode is the pair, for
    overhead the protocol; the rpm source's buffer in BDPs)."""
    c = run.condition
    row = {**run.params, **dict(c.extras), "mode": run.mode, "page": run.page.name if run.page else None,
           "bandwidth_mbps": c.bandwidth_mbps, "rtt_ms": c.rtt_ms, "loss_pct": c.loss_pct,
           "pair": run.mode, "protocol": run.mode}
    row.update(bdp_columns(c.bandwidth_mbps, c.rtt_ms, c.buffer_bytes))
    if c.bandwidth_mbps and c.rtt_ms and c.buffer_bytes:
        row["buffer_bdp"] = round(c.buffer_bytes / (c.bandwidth_mbps * 1e6 * c.rtt_ms / 1e3 / 8), 2)
    site = SITES.get(row["page"] or "")
    if site is not None:  # as runs_by_size names them
        row["size_kb"] = site.size_kb
        row["size_class"] = size_class(site.size_kb)
    return row


# 001 speaks of "small", "medium and large websites" (§IV-C1) without bounds; these split Table I
# into 6 / 4 / 5 pages by size (kB): small below 500 (baidu .. reddit), large above 1500 (qq ..).
SIZE_CLASSES = ((500, "small"), (1500, "medium"), (float("inf"), "large"))


def size_class(size_kb: float) -> str:
    return next(name for bound, name in SIZE_CLASSES if size_kb < bound)


def _runs_by_size(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """The runs, each with its page's Table I size (`size_kb`) and `size_class` (small, medium,
    large; pages outside Table I have neither)."""
    rows = _runs(store, experiment)
    for row in rows:
        site = SITES.get(row.get("page") or "")
        if site is not None:
            row["size_kb"] = site.size_kb
            row["size_class"] = size_class(site.size_kb)
    return rows


ServerWindows = dict[str, dict[tuple[str, int | None], list[tuple[int, float]]]]


def server_windows(store: ResultsStore, experiment: str) -> ServerWindows:
    """Per run, per server-side connection (and MPTCP subflow): its (t_unix_ns, cwnd_bytes)
    samples. The server sends the page, so its window is the one that limits the load."""
    windows: ServerWindows = {}
    for s in store.query(
            "SELECT s.run_key, s.conn, s.subflow, s.t_unix_ns, s.cwnd_bytes FROM transport_samples s "
            "JOIN runs r USING (experiment_id, run_key) WHERE s.experiment_id = ? AND r.status = 'ok' "
            "AND s.role = 'server' AND coalesce(s.event, 'sample') = 'sample' AND s.cwnd_bytes IS NOT NULL",
            [experiment]):
        windows.setdefault(s["run_key"], {}).setdefault((s["conn"], s["subflow"]), []).append(
            (int(s["t_unix_ns"]), float(s["cwnd_bytes"])))
    return windows


def server_backoffs(store: ResultsStore, experiment: str) -> dict[str, list[float]]:
    """Per run, the backoff factor (new ssthresh / window before) of every window reduction of
    every server-side connection and subflow (reproduce.windows.backoff_factors)."""
    samples: dict[tuple[str, str, int | None], list[tuple[int, float, float | None]]] = {}
    for s in store.query(
            "SELECT s.run_key, s.conn, s.subflow, s.t_unix_ns, s.cwnd, s.ssthresh FROM transport_samples s "
            "JOIN runs r USING (experiment_id, run_key) WHERE s.experiment_id = ? AND r.status = 'ok' "
            "AND s.role = 'server' AND coalesce(s.event, 'sample') = 'sample' AND s.cwnd IS NOT NULL", [experiment]):
        samples.setdefault((s["run_key"], s["conn"], s["subflow"]), []).append(
            (int(s["t_unix_ns"]), float(s["cwnd"]), None if s["ssthresh"] is None else float(s["ssthresh"])))
    factors: dict[str, list[float]] = {}
    for (run_key, _, _), points in samples.items():
        factors.setdefault(run_key, []).extend(backoff_factors(points))
    return factors


def load_spans(store: ResultsStore, experiment: str) -> dict[str, tuple[int, int]]:
    """Per run: (start, end) of its page load, Unix ns."""
    spans = {}
    for p in store.query("SELECT run_key, start_unix_ns, plt_ms FROM page_loads WHERE experiment_id = ?", [experiment]):
        if p["start_unix_ns"] is not None and p["plt_ms"] is not None:
            spans[p["run_key"]] = (int(p["start_unix_ns"]), int(p["start_unix_ns"] + p["plt_ms"] * 1e6))
    return spans


def _cwnd(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """The runs, each with `cwnd_kb`: the server's window summed over the load's connections
    and averaged over the load (reproduce.windows), kB; `connections`; `backoff`: the share of
    the window a loss cuts (1 - the median backoff factor over the run's reductions, 001
    Fig. 3b) and `reductions`, their number."""
    rows = _runs(store, experiment)
    windows = server_windows(store, experiment)
    spans = load_spans(store, experiment)
    backoffs = server_backoffs(store, experiment)
    for row in rows:
        conns = windows.get(row["run_key"], {})
        span = spans.get(row["run_key"])
        mean = mean_summed_window(conns, *span) if span and conns else None
        row["cwnd_kb"] = None if mean is None else mean / 1000
        row["connections"] = len({conn for conn, _ in conns})
        factors = backoffs.get(row["run_key"])
        row["backoff"] = 1 - float(np.median(factors)) if factors else None
        row["reductions"] = len(factors or [])
    return rows


def _connection_shares(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """The runs, each with `connections` (opened by the load), `byte_shares` (each connection's
    share of the page's bytes, largest first) and `top_share`, the first of them (001 Fig. 4c)."""
    rows = _runs(store, experiment)
    per_run: dict[str, list[float]] = {}
    for c in store.query("SELECT run_key, bytes FROM connections WHERE experiment_id = ?", [experiment]):
        per_run.setdefault(c["run_key"], []).append(float(c["bytes"] or 0))
    for row in rows:
        carried = per_run.get(row["run_key"], [])
        total = sum(carried)
        row["connections"] = len(carried)
        row["byte_shares"] = sorted((c / total for c in carried), reverse=True) if total > 0 else []
        row["top_share"] = row["byte_shares"][0] if row["byte_shares"] else None
    return rows


SOURCES = {"runs": _runs, "pairs": _pairs, "pairs_over_time": _pairs_over_time, "overhead": _overhead, "rpm": _rpm, "runs_by_size": _runs_by_size,
           "cwnd": _cwnd, "connection_shares": _connection_shares}


def _page_attributes(store: ResultsStore, experiment: str) -> dict[str, dict[str, Any]]:
    """Per page, 002 Table 5.1's attributes from its most complete successful load: objects,
    bytes (the manifest's sizes), origins (server addresses) and the mean object size."""
    attributes: dict[str, dict[str, Any]] = {}
    for row in store.query(
            "SELECT r.page, o.run_key, count(*) AS objects, sum(o.expected_bytes) AS bytes, "
            "count(DISTINCT o.origin) AS origins FROM objects o JOIN runs r USING (experiment_id, run_key) "
            "WHERE o.experiment_id = ? AND r.status = 'ok' GROUP BY r.page, o.run_key ORDER BY o.run_key",
            [experiment]):
        known = attributes.get(row["page"])
        if known is None or row["objects"] > known["page_objects"]:
            bytes_ = float(row["bytes"] or 0)
            attributes[row["page"]] = {"page_objects": row["objects"], "page_bytes": bytes_,
                                       "page_origins": row["origins"],
                                       "page_mean_object_bytes": bytes_ / row["objects"]}
    return attributes


def _page_runs(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """The runs, each with its page's attributes (`page_objects`, `page_bytes`, `page_origins`,
    `page_mean_object_bytes`): 002 Table 5.1 relates a page's score to them."""
    attributes = _page_attributes(store, experiment)
    return [{**row, **attributes.get(row["page"], {})} for row in _runs(store, experiment)]


SOURCES["page_runs"] = _page_runs


def _intervals(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """Per interval of a bulk transfer's own log (bulk_intervals): its rate, with the run's mode,
    condition and extra axes (e.g. the cellular `trace`)."""
    runs = {row["run_key"]: row for row in _runs(store, experiment)}
    rows = store.query("SELECT run_key, side, flow, t_ms, rate_mbps FROM bulk_intervals WHERE experiment_id = ?",
                       [experiment])
    return [{**runs[row["run_key"]], **row} for row in rows if row["run_key"] in runs]


SOURCES["intervals"] = _intervals


def _controller_states(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """The runs, each with its sender's controller states (000 Fig. 6.4): `transitions`
    ("from->to": count, over the server's connections), `recovery_entries`, `frac_<state>`
    (share of the sampled time) and `slow_start_exit_ms` of its busiest connection."""
    per_conn: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in store.query(
            "SELECT s.run_key, s.conn, s.role, s.t_unix_ns, s.event, s.cc_state, s.cwnd_bytes FROM transport_samples s "
            "JOIN runs r USING (experiment_id, run_key) WHERE s.experiment_id = ? AND r.status = 'ok' "
            "AND s.role = 'server' AND s.cc_state IS NOT NULL", [experiment]):
        per_conn.setdefault((s["run_key"], s["conn"]), []).append({**s, "t_unix_ns": int(s["t_unix_ns"])})
    by_run: dict[str, list[list[dict[str, Any]]]] = {}
    for (run_key, _), samples in per_conn.items():
        by_run.setdefault(run_key, []).append(samples)
    rows = []
    for row in _runs(store, experiment):
        conns = by_run.get(row["run_key"])
        if not conns:
            continue
        counts: dict[str, int] = {}
        for samples in conns:
            for (src, dst), n in state_transitions(samples).items():
                counts[f"{src}->{dst}"] = counts.get(f"{src}->{dst}", 0) + n
        busiest = max(conns, key=len)
        fractions = state_time_fractions(busiest)
        windows = [float(s["cwnd_bytes"]) for s in busiest if s.get("event") != "state" and s["cwnd_bytes"] is not None]
        rows.append({**row, "transitions": counts,
                     "recovery_entries": sum(n for key, n in counts.items() if key.endswith("->recovery")),
                     **{f"frac_{state}": fractions.get(state, 0.0) for state in STATES},
                     "slow_start_exit_ms": summarize_connection(busiest)["slow_start_exit_ms"],
                     "mean_cwnd_bytes": float(np.mean(windows)) if windows else None,
                     "cwnd_variance": float(np.var(windows)) if windows else None})
    return rows


SOURCES["controller_states"] = _controller_states

# Where a bulk download's packets enter and leave the network, and its ACKs come back
# (scenarios.base: the client and the bulk server of a one-client scenario).
_BULK_ENDS = Ends(server=BULK_SERVER_ADDRESS, client=CLIENT_ADDRESS, server_link=f"{SERVER}.up",
                  client_link=f"{CLIENT}.down", ack_link=f"{SERVER}.down")


def _decision_trees(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """000 Figs. 6.6/6.7 (reproduce.wifi_trees): the transfers with 000's features, and a row per
    bootstrap tree per protocol."""
    transfers = wifi_trees.transfer_rows(_controller_states(store, experiment), store.results_dir / "runs",
                                         _BULK_ENDS)
    return [*transfers, *wifi_trees.draw_rows(transfers)]


SOURCES["decision_trees"] = _decision_trees
def _bulk_transport(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """The bulk runs, each with its link use (reproduce.bulk_stats.link_use) and the sender's
    window and RTT statistics (window_stats, rtt_stats) of its busiest connection (the one with
    the most samples: the transfer's)."""
    rows = _runs(store, experiment)
    per_conn: dict[str, dict[str, list[tuple[int, float | None, float | None]]]] = {}
    for s in store.query(
            "SELECT s.run_key, s.conn, s.t_unix_ns, s.cwnd_bytes, s.rtt_us FROM transport_samples s "
            "JOIN runs r USING (experiment_id, run_key) WHERE s.experiment_id = ? AND r.status = 'ok' "
            "AND s.role = 'server' AND coalesce(s.event, 'sample') = 'sample'", [experiment]):
        per_conn.setdefault(s["run_key"], {}).setdefault(s["conn"], []).append(
            (int(s["t_unix_ns"]), s["cwnd_bytes"], s["rtt_us"]))
    for row in rows:
        row.update(link_use(row))
        conns = per_conn.get(row["run_key"], {})
        busiest = max(conns.values(), key=len) if conns else []
        row.update(window_stats((t, float(c)) for t, c, _ in busiest if c is not None))
        row.update(rtt_stats((float(r) for _, _, r in busiest if r is not None), row.get("rtt_ms")))
    return rows


SOURCES["bulk_transport"] = _bulk_transport


def corpus_flows(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """The experiment's flows (`protolab traffic corpus` put them in the store's `flows`
    table), each with its run's mode, page and link condition."""
    return store.query(
        "SELECT f.*, r.mode, r.page, r.bandwidth_mbps, r.rtt_ms, r.loss_pct, r.repetition FROM flows f "
        "JOIN runs r USING (experiment_id, run_key) WHERE f.experiment_id = ? AND r.status = 'ok' "
        "ORDER BY f.run_key, f.first_ns, f.client_port", [experiment])


# The passive figures (000 ch. 3-4): rows made from the labelled flow corpus (reproduce.passive).
for _name, _analysis in (("service_shares", passive.service_shares), ("flow_features", passive.flow_features),
                         ("scatter_separation", passive.scatter_separation),
                         ("cv_folds", passive.cv_folds), ("domain_accuracy", passive.domain_accuracy),
                         ("learning_curve", passive.learning_curve),
                         ("condition_stability", passive.condition_stability), ("sessions", passive.sessions),
                         ("parallel_shares", passive.parallel_shares)):
    SOURCES[_name] = lambda store, experiment, analysis=_analysis: analysis(corpus_flows(store, experiment))


def _nat_sessions(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """000 §4.2.3 on the NAT corpus (`protolab traffic nat-corpus`, its flows in the store):
    per round, real client and handling ("without": sessions keyed by the address; "with": by
    the hosts protolab.traffic.nat infers), the client's session precision and recall and its
    parallel-flow share, true and detected; `behind_nat` says whether the client is. Plus, per
    round and handling, one `pooled` row of the clients behind the NAT together."""
    from protolab.traffic.nat import client_rows, nat_flows

    flows = store.query("SELECT * FROM flows WHERE experiment_id = ? AND real_client IS NOT NULL "
                        "ORDER BY first_ns, client_port", [experiment])
    for i, row in enumerate(flows):
        # Sessions are keyed by what a passive observer sees: the handshake's protocol.
        row["row"], row["protocol"] = i, row["handshake_protocol"]
    truth = {i: str(row["real_client"]) for i, row in enumerate(flows)}
    behind = {str(row["real_client"]): bool(row["behind_nat"]) for row in flows}
    rows = client_rows(nat_flows(flows), truth, {i: row["run_key"] for i, row in enumerate(flows)})
    pools: dict[tuple[Any, str], list[dict[str, Any]]] = {}
    for row in rows:
        row["behind_nat"], row["pooled"] = behind[row["client"]], False
        if row["behind_nat"]:
            pools.setdefault((row["group"], row["handling"]), []).append(row)
    # Per round and handling, the clients behind the NAT together: their sessions found over
    # their true sessions (recall), exact over detected (precision).
    for (group, handling), members in pools.items():
        true, detected = sum(r["true_sessions"] for r in members), sum(r["detected_sessions"] for r in members)
        rows.append({"group": group, "client": "behind-nat", "handling": handling, "behind_nat": True, "pooled": True,
                     "recall": sum(r["found_sessions"] for r in members) / true if true else None,
                     "precision": sum(r["exact_detected"] for r in members) / detected if detected else None,
                     "isolated_marked_parallel": (sum(r["isolated_marked"] for r in members) / isolated
                                                  if (isolated := sum(r["isolated_flows"] for r in members)) else None)})
    return rows


SOURCES["nat_sessions"] = _nat_sessions


def rows_of(store: ResultsStore, source: str, experiment: str) -> list[dict[str, Any]]:
    """The rows of one kind (`runs`, `pairs`, `overhead`) for an experiment."""
    try:
        reader = SOURCES[source]
    except KeyError:
        raise ProtolabError(f"unknown row source {source!r} (known: {', '.join(SOURCES)})") from None
    return reader(store, experiment)
