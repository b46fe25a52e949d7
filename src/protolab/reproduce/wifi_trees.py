"""000 Figs. 6.6/6.7: throughput decision trees for TCP and QUIC over the WiFi model, on 000
§6.2.1's features of each transfer (reproduce.transfer_features) read from the runs' event logs
and transport samples, with 000's classes (t0, t10, ...: 10 Mbit/s bins).

000 fitted one C4.5 tree per protocol on ~2000 transfers and read its root and splits. A single
tree says nothing of how stable its root is, so the claims are judged on `BOOTSTRAP_DRAWS` trees
per protocol, each fitted on a resample of the transfers (with replacement): a row per draw
(`kind` = "draw") says whether that tree's root is the mean cwnd, whether it splits on a delay or
burstiness feature, and its cross-validated accuracy. The transfers themselves are rows too
(`kind` = "transfer": features and class), which the atlas draws the full-data tree from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from protolab.errors import ProtolabError
from protolab.report.decision_tree import FEATURES_000, TreeInputError, fit_tree, throughput_class_000
from protolab.reproduce.transfer_features import Ends, PacketEvent, packet_features, state_features

BOOTSTRAP_DRAWS = 30
TREE_DEPTH = 3
# 000 §6.2.2 names delay and burstiness as what the QUIC tree splits on besides the window.
DELAY_OR_BURSTINESS = ("mean delay", "delay variation", "server burstiness", "client burstiness")
EVENTS_FILE = "events.ndjson"
_COLUMNS = ("{'t': 'BIGINT', 'ev': 'VARCHAR', 'link': 'VARCHAR', 'src': 'VARCHAR', 'dst': 'VARCHAR', "
            "'sport': 'INTEGER', 'dport': 'INTEGER', 'proto': 'INTEGER', 'ip_id': 'BIGINT'}")


class EventLogError(ProtolabError):
    """A run's event log cannot be read."""


def read_events(path: Path) -> list[PacketEvent]:
    """The packet events of an event log (its header line has no `ev` and is skipped)."""
    import duckdb

    con = duckdb.connect()
    try:
        rows = con.execute(f"SELECT t, ev, link, src, dst, sport, dport, proto, ip_id FROM read_json($path, "
                           f"format='newline_delimited', columns={_COLUMNS}) WHERE ev IS NOT NULL",
                           {"path": str(path)}).fetchall()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EventLogError(f"{path}: cannot read the event log ({first})") from exc
    finally:
        con.close()
    return [PacketEvent(int(t), ev, link, (src, dst, sport, dport, proto), int(ip_id or 0))
            for t, ev, link, src, dst, sport, dport, proto, ip_id in rows]


def protocol_of(run: Mapping[str, Any]) -> str:
    """The tree a run belongs to: `tcp`, or the QUIC controller (`cubic` is 000's QUIC)."""
    return "tcp" if run.get("mode") == "tcp" else str(run.get("quic_cc") or "quic")


def transfer_rows(runs: Sequence[Mapping[str, Any]], runs_dir: Path, ends: Ends) -> list[dict[str, Any]]:
    """One row per run with an event log and enough packets: its 000 features, throughput
    class and protocol (runs without a log or goodput are left out)."""
    out = []
    for run in runs:
        path = runs_dir / str(run["run_key"]) / EVENTS_FILE
        goodput = run.get("goodput_mbps")
        if not path.is_file() or not isinstance(goodput, int | float):
            continue
        packets = packet_features(read_events(path), ends)
        if packets is None:
            continue
        out.append({"kind": "transfer", "run_key": run["run_key"], "protocol": protocol_of(run), "mode": run.get("mode"),
                    "mesh_client": run.get("mesh_client"), "goodput_mbps": goodput,
                    "class": throughput_class_000(float(goodput)), "features": {**packets, **state_features(run)}})
    return out


def draw_rows(transfers: Sequence[Mapping[str, Any]], draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> list[dict[str, Any]]:
    """Per protocol, `draws` trees on bootstrap resamples of its transfers: a row per tree with
    its root, `root_is_mean_cwnd` and `splits_on_delay_or_burstiness` (1 or 0), `cv_accuracy`, and
    the protocol's `mode` (what the claims select a tree by).
    A resample with a single class is drawn again (at most 10 times)."""
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    for protocol in sorted({str(t["protocol"]) for t in transfers}):
        mine = [t for t in transfers if t["protocol"] == protocol]
        if len({t["class"] for t in mine}) < 2:
            continue
        for draw in range(draws):
            for _ in range(10):
                picked = [mine[i] for i in rng.integers(0, len(mine), len(mine))]
                if len({t["class"] for t in picked}) >= 2:
                    break
            else:
                continue
            try:
                fitted = fit_tree([t["features"] for t in picked], [t["class"] for t in picked], FEATURES_000,
                                  depth=TREE_DEPTH)
            except TreeInputError:
                continue
            splits = fitted.split_features()
            out.append({"kind": "draw", "protocol": protocol, "mode": mine[0].get("mode"), "draw": draw,
                        "root": fitted.root_feature,
                        "root_is_mean_cwnd": float(fitted.root_feature == "mean cwnd"),
                        "splits_on_delay_or_burstiness": float(any(f in splits for f in DELAY_OR_BURSTINESS)),
                        "cv_accuracy": fitted.cv_accuracy})
    return out
