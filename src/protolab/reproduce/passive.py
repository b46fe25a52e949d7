"""The rows 000 ch. 3-4's figures are judged on, made from a labelled flow corpus (pure: no I/O).

A passive figure's "run" is the lab corpus: page loads with the client's capture kept, turned
into labelled flows (`traffic.corpus`, into the store's `flows` table); its analysis is here.
Each function takes the corpus' flows (dicts: the flow schema's columns, the label `protocol`,
the run's `mode`, `page` and link condition) and returns rows for the claims (reproduce.claims):

| function | rows | 000 |
| --- | --- | --- |
| `service_shares` | per run and service: protocol shares, handshake-label agreement | Fig. 3.2 |
| `flow_features` | per labelled flow: duration, packets, bytes, bytes per packet | Fig. 3.3 a-d |
| `scatter_separation` | per panel and fold: H1 vs H2 accuracy of a tree on the panel's two features | Fig. 3.3 e-f |
| `cv_folds` | per algorithm and fold of a stratified 10-fold CV: accuracy, F1, kappa, recall per class | Fig. 3.4, Table 3.1, Fig. 3.5 |
| `domain_accuracy` | per SNI: the forest's out-of-fold accuracy and share of flows | Fig. 3.6 |
| `learning_curve` | per training-set share and repetition: the forest's accuracy on held-out flows | §3.2.4 |
| `group_holdout` | per algorithm and held-out page (or condition): accuracy and macro-F1 trained on the others | §3.2.5-3.2.7 |
| `condition_stability` | per held-out link condition and page: the forest's accuracy trained on the others, over the CV accuracy | Table 3.2, §3.2.7 |
| `sessions` | per session of each run's flows (Alg. 1-2): flows, overlap of time and data | Figs. 4.3-4.7 |
| `parallel_shares` | per run and protocol: the share of flows in parallel sessions | Table 4.2 |

Every random choice is seeded, so the same corpus gives the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from protolab.traffic.classify_models import (
    classification_metrics,
    leave_one_group_out,
    make_estimator,
    predict_labels,
)
from protolab.traffic.features import SEVEN_FEATURES, FlowData, feature_matrix
from protolab.traffic.sessions import RefFlow, reference_detect

Flow = dict[str, Any]

# 000 §3.1.3 aggregates flows by second-level domain and assigns known CDNs to their service
# ("fbcdn is used by Facebook"). The CDN and sibling domains of Fig. 3.2's ten services; any
# other name maps to its second-level label (www.vk.test and img.vk.test -> vk).
SERVICE_DOMAINS: tuple[tuple[str, str], ...] = (
    ("fbcdn.net", "facebook"), ("facebook.com", "facebook"), ("facebook.net", "facebook"),
    ("cdninstagram.com", "instagram"), ("instagram.com", "instagram"),
    ("googlevideo.com", "youtube"), ("ytimg.com", "youtube"), ("youtube.com", "youtube"),
    ("doubleclick.net", "doubleclick"), ("googlesyndication.com", "doubleclick"),
    ("gstatic.com", "google"), ("googleapis.com", "google"), ("googleusercontent.com", "google"),
    ("google.com", "google"),
    ("twimg.com", "twitter"), ("twitter.com", "twitter"), ("t.co", "twitter"),
    ("licdn.com", "linkedin"), ("linkedin.com", "linkedin"),
    ("dropboxstatic.com", "dropbox"), ("dropbox.com", "dropbox"), ("dropboxusercontent.com", "dropbox"),
    ("wikimedia.org", "wikipedia"), ("wikipedia.org", "wikipedia"),
)
# Public suffixes of two labels under which the second-level label is the third from the right.
TWO_LABEL_SUFFIXES = frozenset({"co.uk", "ac.uk", "com.au", "co.jp", "com.br", "co.in", "com.cn", "co.kr"})

CLASSIFIER_ALGORITHMS = ("rf", "c45", "nbtree", "bayes")
FOLDS = 10
TRAINING_SHARES_PCT = (1, 5, 10, 50, 100)  # §3.2.4's sizes, as shares of the corpus' training part
LEARNING_REPETITIONS = 10  # a ratio of shares paired per repetition: a t-interval over 10 groups
LEARNING_TEST_SHARE = 0.3
STABILITY_COLUMNS = ("rtt_ms", "bandwidth_mbps", "loss_pct")
# Held out like a link condition: each page left out in turn (000's spatial stability, a network
# the model never saw, is closest to a page whose origins and objects it never saw).
PAGE_COLUMN = "page"


def service_of(domain: str | None) -> str | None:
    """The web service a server name belongs to (000 §3.1.3): a known CDN's service, else the
    second-level label of the name; None without a name."""
    if not domain:
        return None
    name = domain.lower().rstrip(".")
    for suffix, service in SERVICE_DOMAINS:
        if name == suffix or name.endswith("." + suffix):
            return service
    labels = name.split(".")
    if len(labels) < 2:
        return name
    if ".".join(labels[-2:]) in TWO_LABEL_SUFFIXES and len(labels) >= 3:
        return labels[-3]
    return labels[-2]


def labelled(flows: Iterable[Flow]) -> list[Flow]:
    """The flows whose connection is known (the lab's truth in `protocol`)."""
    return [f for f in flows if f.get("protocol")]


def service_shares(flows: Sequence[Flow]) -> list[dict[str, Any]]:
    """Per run and service: its labelled flows, the share of each protocol among them
    (`share_h1`, `share_h2`, `share_h3`), `handshake_agreement` (the share whose handshake label,
    000's ground truth from ALPN, equals the lab's truth) and `service_is_page` (1.0 when the
    service the names map to is the page the run loaded)."""
    groups: dict[tuple[str, str], list[Flow]] = {}
    for flow in labelled(flows):
        service = service_of(flow.get("sni") or flow.get("http_host"))
        if service is not None:
            groups.setdefault((str(flow.get("run_key")), service), []).append(flow)
    rows = []
    for (run_key, service), members in sorted(groups.items()):
        n = len(members)
        row: dict[str, Any] = {"run_key": run_key, "service": service, "flows": n, "mode": members[0].get("mode"),
                               "page": members[0].get("page")}
        for protocol in ("h1", "h2", "h3"):
            row[f"share_{protocol}"] = sum(f["protocol"] == protocol for f in members) / n
        row["handshake_agreement"] = sum(f.get("handshake_protocol") == f["protocol"] for f in members) / n
        row["service_is_page"] = 1.0 if service == row["page"] else 0.0
        rows.append(row)
    return rows


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def flow_features(flows: Sequence[Flow]) -> list[dict[str, Any]]:
    """Per labelled flow, Fig. 3.3's quantities (bytes are IP bytes, as NetFlow counts them)."""
    rows = []
    for flow in labelled(flows):
        row = {"protocol": flow["protocol"], "mode": flow.get("mode"), "page": flow.get("page"),
               "duration_s": _number(flow.get("duration_s"))}
        for side in ("c2s", "s2c"):
            packets, nbytes = _number(flow.get(f"{side}_packets")), _number(flow.get(f"{side}_bytes"))
            row[f"{side}_packets"] = packets
            row[f"{side}_bytes"] = nbytes
            row[f"{side}_bytes_per_packet"] = nbytes / packets if packets > 0 else math.nan
        rows.append(row)
    return rows


def _flow_data(flows: Sequence[Flow]) -> FlowData:
    """The labelled flows as the classifier reads them (IP bytes; NULL counts as 0)."""
    names = ("duration_s", "c2s_packets", "s2c_packets", "c2s_bytes", "s2c_bytes", "syn", "fin", "rst", "ack")
    columns = {name: np.array([_count(f.get(name)) for f in flows], dtype=np.float64) for name in names}
    return FlowData(path="corpus", n=len(flows), bytes_basis="ip", columns=columns,
                    labels=np.array([f["protocol"] for f in flows], dtype=object),
                    label_known=np.ones(len(flows), dtype=bool),
                    domains=np.array([f.get("sni") for f in flows], dtype=object))


def _count(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0


def classifier_input(flows: Sequence[Flow]) -> tuple[np.ndarray, np.ndarray, list[Flow]]:
    """(features, labels, the labelled flows in that order): 000's seven features."""
    chosen = labelled(flows)
    data = _flow_data(chosen)
    return feature_matrix(data, SEVEN_FEATURES), np.array([f["protocol"] for f in chosen], dtype=str), chosen


def _folds(y: np.ndarray, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified folds (fewer than FOLDS when a class has fewer flows; at least 2)."""
    from sklearn.model_selection import StratifiedKFold

    smallest = int(np.unique(y, return_counts=True)[1].min()) if len(y) else 0
    folds = min(FOLDS, smallest)
    if folds < 2:
        return []
    return list(StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))


def cv_folds(flows: Sequence[Flow], algorithms: Sequence[str] = CLASSIFIER_ALGORITHMS, seed: int = 0
             ) -> list[dict[str, Any]]:
    """Per algorithm and fold of a stratified 10-fold CV (000 §3.2.2): `accuracy`,
    `weighted_f1` (000's "average F-measure"), `macro_f1` (every class alike), `kappa`, and `recall_<class>` (Fig. 3.5's
    diagonal), each on the fold's held-out flows."""
    X, y, _ = classifier_input(flows)
    rows = []
    for algorithm in algorithms:
        for fold, (train, test) in enumerate(_folds(y, seed)):
            model = make_estimator(algorithm, seed=seed, n_jobs=1).fit(X[train], y[train])
            metrics = classification_metrics(y[test], predict_labels(model, X[test], 1), np.unique(y))
            row = {"algorithm": algorithm, "fold": fold, "flows": len(test), "accuracy": metrics["accuracy"],
                   "weighted_f1": metrics["weighted_f1"], "macro_f1": metrics["macro_f1"], "kappa": metrics["kappa"]}
            for label, scores in metrics["per_class"].items():
                row[f"recall_{label}"] = scores["recall"] if scores["support"] else None
            rows.append(row)
    return rows


# 000 Fig. 3.3 e-f: scatter plots of H1 and H2 flows in two features each, "cleanly separated".
SCATTER_PANELS = {"e": ("c2s_bytes_per_packet", "s2c_bytes_per_packet"), "f": ("duration_s", "c2s_bytes_per_packet")}


def scatter_separation(flows: Sequence[Flow], seed: int = 0) -> list[dict[str, Any]]:
    """Fig. 3.3 e-f as a measure: per panel and fold of a stratified 10-fold CV over the H1 and
    H2 flows, the accuracy of a C4.5-like tree that sees only the panel's two features (how
    cleanly the two protocols separate in that plane)."""
    chosen = [f for f in labelled(flows) if f["protocol"] in ("h1", "h2")]
    data = _flow_data(chosen)
    y = np.array([f["protocol"] for f in chosen], dtype=str)
    rows = []
    for panel, features in SCATTER_PANELS.items():
        X = feature_matrix(data, list(features))
        for fold, (train, test) in enumerate(_folds(y, seed)):
            model = make_estimator("c45", seed=seed, n_jobs=1).fit(X[train], y[train])
            rows.append({"panel": panel, "fold": fold, "flows": len(test),
                         "accuracy": float((predict_labels(model, X[test], 1) == y[test]).mean())})
    return rows


def out_of_fold(flows: Sequence[Flow], algorithm: str = "rf", seed: int = 0) -> tuple[list[Flow], np.ndarray]:
    """The labelled flows and each one's prediction by a model that did not see it."""
    X, y, chosen = classifier_input(flows)
    predicted = np.empty(len(y), dtype=object)
    for train, test in _folds(y, seed):
        predicted[test] = predict_labels(make_estimator(algorithm, seed=seed, n_jobs=1).fit(X[train], y[train]),
                                         X[test], 1)
    return chosen, predicted


def domain_accuracy(flows: Sequence[Flow], algorithm: str = "rf") -> list[dict[str, Any]]:
    """Per server name (000 §3.2.5, Fig. 3.6): its flows, share of the flows and the forest's
    out-of-fold accuracy on them."""
    chosen, predicted = out_of_fold(flows, algorithm)
    per_domain: dict[str, list[bool]] = {}
    for flow, guess in zip(chosen, predicted, strict=True):
        if guess is not None and flow.get("sni"):
            per_domain.setdefault(str(flow["sni"]), []).append(guess == flow["protocol"])
    total = sum(len(v) for v in per_domain.values())
    return [{"domain": domain, "flows": len(hits), "share": len(hits) / total, "accuracy": sum(hits) / len(hits)}
            for domain, hits in sorted(per_domain.items(), key=lambda item: (-len(item[1]), item[0]))]


def _stratified_share(y: np.ndarray, index: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    """`share` of `index`, class by class (at least one flow of every class)."""
    chosen = []
    for label in np.unique(y[index]):
        members = index[y[index] == label]
        take = max(1, round(share * len(members)))
        chosen.append(rng.choice(members, size=take, replace=False))
    return np.sort(np.concatenate(chosen))


def learning_curve(flows: Sequence[Flow], shares_pct: Sequence[int] = TRAINING_SHARES_PCT,
                   repetitions: int = LEARNING_REPETITIONS, algorithm: str = "rf") -> list[dict[str, Any]]:
    """§3.2.4: per repetition and share of the training flows, the accuracy on held-out flows.
    Each repetition draws its own stratified test part (30%); every share of that repetition is
    tested on the same part (a claim compares shares per `repetition`), trained on its own
    stratified sample of the rest. `train_pct` is the share, `train_flows` the flows trained on."""
    from sklearn.model_selection import train_test_split

    X, y, _ = classifier_input(flows)
    rows: list[dict[str, Any]] = []
    if len(np.unique(y)) < 2 or np.unique(y, return_counts=True)[1].min() < 2:
        return rows
    for repetition in range(repetitions):
        train, test = train_test_split(np.arange(len(y)), test_size=LEARNING_TEST_SHARE, stratify=y,
                                       random_state=repetition)
        rng = np.random.default_rng(repetition)
        for share in shares_pct:
            sample = _stratified_share(y, train, share / 100, rng)
            model = make_estimator(algorithm, seed=repetition, n_jobs=1).fit(X[sample], y[sample])
            accuracy = float((predict_labels(model, X[test], 1) == y[test]).mean())
            rows.append({"train_pct": share, "repetition": repetition, "train_flows": len(sample),
                         "test_flows": len(test), "accuracy": accuracy})
    return rows


def group_holdout(flows: Sequence[Flow], column: str, algorithms: Sequence[str] = CLASSIFIER_ALGORITHMS,
                  seed: int = 0) -> list[dict[str, Any]]:
    """Per algorithm and value of `column` (`page`: leave-one-page-out; a link condition: a
    per-condition hold-out): the model trained on the labelled flows of every other value, tested
    on this value's: `accuracy`, `macro_f1` (over the classes the value's flows hold), `flows`,
    `train_flows`. Flows without a value take no part; a column with one value gives no rows; a
    value whose others hold a single class is left out."""
    X, y, chosen = classifier_input(flows)
    groups = np.array([f.get(column) for f in chosen], dtype=object)
    originals = {str(v): v for v in groups if v is not None}
    if len(originals) < 2:
        return []
    rows = []
    for algorithm in algorithms:
        result = leave_one_group_out(X, y, groups, algorithm, column=column, seed=seed, n_jobs=1)
        for held_out in result["per_value"]:
            if held_out["accuracy"] is None:
                continue
            rows.append({"algorithm": algorithm, "column": column, "value": originals[held_out["value"]],
                         "flows": held_out["flows"], "train_flows": held_out["trained_on"],
                         "accuracy": held_out["accuracy"], "macro_f1": held_out["macro_f1"]})
    return rows


def condition_stability(flows: Sequence[Flow], columns: Sequence[str] = (*STABILITY_COLUMNS, PAGE_COLUMN),
                        algorithm: str = "rf") -> list[dict[str, Any]]:
    """000 §3.2.6-3.2.7 in the lab: for each value of each link-condition column and each page,
    the forest trained on the flows of the other values and tested on this value's (`accuracy`,
    `macro_f1`), over the forest's 10-fold CV accuracy on every flow (`accuracy_ratio`);
    `held_out` is "page" or "condition". Columns with one value are left out."""
    _, y, _ = classifier_input(flows)
    oof = out_of_fold(flows, algorithm)[1]
    known = np.array([p is not None for p in oof], dtype=bool)
    if not known.any():
        return []
    cv_accuracy = float((oof[known] == y[known]).mean())
    rows = []
    for column in columns:
        for row in group_holdout(flows, column, (algorithm,)):
            rows.append({**row, "held_out": "page" if column == PAGE_COLUMN else "condition",
                         "cv_accuracy": cv_accuracy,
                         "accuracy_ratio": row["accuracy"] / cv_accuracy if cv_accuracy else None})
    return rows


def _payload_bytes(flow: Flow) -> int | None:
    parts = [flow.get("c2s_payload_bytes"), flow.get("s2c_payload_bytes")]
    return None if any(p is None for p in parts) else int(sum(parts))  # type: ignore[arg-type]


def sessions(flows: Sequence[Flow], max_gap_s: float = 5.0) -> list[dict[str, Any]]:
    """000 Alg. 1-2 on each run's labelled flows (a run is one page load: over a whole capture the
    lab's loads, 0.2 s apart, would merge into one session, as 000's definition says), with the
    degree of time overlap p and of data overlap r (payload bytes) of every session; each row
    carries the run's mode and condition."""
    by_run: dict[str, list[Flow]] = {}
    for flow in labelled(flows):
        by_run.setdefault(str(flow.get("run_key")), []).append(flow)
    rows = []
    for run_key, members in sorted(by_run.items()):
        refs = [RefFlow(client_ip=str(f.get("client_ip")), server_ip=str(f.get("server_ip")), first_ns=int(f["first_ns"]),
                        last_ns=int(f["last_ns"]), client_port=f.get("client_port"), protocol=f["protocol"],
                        sni=f.get("sni"), bytes=_payload_bytes(f), row=i) for i, f in enumerate(members)]
        run = {k: members[0].get(k) for k in ("mode", "page", "bandwidth_mbps", "rtt_ms", "loss_pct")}
        for session in reference_detect(refs, max_gap_s)[1]:
            rows.append({**run, "run_key": run_key, "protocol": session["protocol"], "flows": session["flows"],
                         "parallel": 1.0 if session["parallel"] else 0.0, "longest_s": session["longest_s"],
                         "time_overlap_pct": session["time_overlap_pct"], "largest_bytes": session["largest_bytes"],
                         "data_overlap_pct": session["data_overlap_pct"]})
    return rows


def parallel_shares(flows: Sequence[Flow], max_gap_s: float = 5.0) -> list[dict[str, Any]]:
    """Table 4.2 per run and protocol: `parallel_share` of the flows in sessions of more than one
    flow (000's parallel flows; the rest are isolated, `isolated_share`)."""
    counts: dict[tuple[str, str], list[int]] = {}
    runs: dict[str, dict[str, Any]] = {}
    for session in sessions(flows, max_gap_s):
        key = (session["run_key"], session["protocol"])
        total, parallel = counts.setdefault(key, [0, 0])
        counts[key] = [total + session["flows"], parallel + (session["flows"] if session["parallel"] else 0)]
        runs[session["run_key"]] = session
    rows = []
    for (run_key, protocol), (total, parallel) in sorted(counts.items()):
        run = runs[run_key]
        rows.append({"run_key": run_key, "mode": run["mode"], "page": run["page"], "protocol": protocol,
                     "flows": total, "parallel_share": parallel / total, "isolated_share": 1 - parallel / total})
    return rows
