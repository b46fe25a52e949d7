"""The rows a figure's claims are checked on, read from a results store."""

from __future__ import annotations

import json
from typing import Any

from protolab.errors import ProtolabError
from protolab.store import ResultsStore

RUN_COLUMNS = ("run_key", "mode", "page", "bandwidth_mbps", "rtt_ms", "loss_pct", "buffer_bytes", "quic_cc", "tcp_cc",
               "repetition", "plt_ms", "goodput_mbps")


def _runs(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    """Successful runs, each with its scenario parameters and extra axes (`params`) merged in."""
    rows = store.query(f"SELECT {', '.join(RUN_COLUMNS)}, params FROM runs WHERE experiment_id = ? AND status = 'ok'",
                       [experiment])
    out = []
    for row in rows:
        params = row.pop("params")
        extra = json.loads(params) if isinstance(params, str) else (params or {})
        out.append({**extra, **row})
    return out


def _pairs(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    return store.query(
        "SELECT a.run_key, a.label || ' vs ' || b.label AS pair, a.share AS share_a, b.share AS share_b, a.jain AS jain "
        "FROM pair_sides a JOIN pair_sides b USING (experiment_id, run_key) JOIN runs r USING (experiment_id, run_key) "
        "WHERE a.side = 'a' AND b.side = 'b' AND a.experiment_id = ? AND r.status = 'ok'", [experiment])


def _overhead(store: ResultsStore, experiment: str) -> list[dict[str, Any]]:
    return store.query(
        "SELECT o.run_key, o.protocol, o.link, o.factor FROM overhead o JOIN runs r USING (experiment_id, run_key) "
        "WHERE o.experiment_id = ? AND r.status = 'ok'", [experiment])


SOURCES = {"runs": _runs, "pairs": _pairs, "overhead": _overhead}


def rows_of(store: ResultsStore, source: str, experiment: str) -> list[dict[str, Any]]:
    """The rows of one kind (`runs`, `pairs`, `overhead`) for an experiment."""
    try:
        reader = SOURCES[source]
    except KeyError:
        raise ProtolabError(f"unknown row source {source!r} (known: {', '.join(SOURCES)})") from None
    return reader(store, experiment)
