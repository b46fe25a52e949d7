"""Flow features of the HTTP-version classifier (000 §3.2.3) and their selection.

The 17 candidate features are computed from the flow schema (`protolab.traffic.schema`), one row
per bidirectional flow, the client being the initiator:

- the flow's duration;
- per direction (client -> server `c2s`, server -> client `s2c`): packets, bytes, bytes per
  packet, packets per second, bytes per second;
- six TCP flag features. 000 used "SYN, ACK, FIN set" per direction; the flow schema counts SYN,
  FIN and RST segments over both directions and has one ACK boolean, so the six are the closest
  reading of those: `syn` (a SYN seen: the client's), `syn_both` (two or more SYNs: the server's
  SYN/ACK too), `fin` (one side closed), `fin_both` (two or more FINs: both sides closed), `ack`,
  `rst`. UDP flows (h3) have no flags: all six are 0.

**Bytes.** A byte feature counts either IP bytes (`c2s_bytes`, `s2c_bytes`: what NetFlow
counts; pcap sources have them) or transport payload bytes (`c2s_payload_bytes`, ...: what
Tstat counts). The two are never mixed: a dataset, and a model trained on it, has one *bytes
basis*. `auto` takes IP bytes when every flow has them, else payload bytes; a model remembers its
basis and refuses flows that lack it. Train on payload bytes to carry a model between pcap and
Tstat sources.

**Zero durations.** A single-packet flow lasts 0 s; its rates (per second) are 0, never NaN or
infinity. A direction without packets has 0 bytes per packet. Every feature is finite.

**Selection.** `cfs_select` is Weka's CfsSubsetEval with BestFirst (000 used it): numeric
features are discretized with Fayyad & Irani's MDL method (Weka's supervised Discretize), the
correlations are symmetric uncertainties, the merit of a subset S of k features is
k * mean SU(f, class) / sqrt(k + k (k - 1) mean SU(f, g)), the search is best-first forward
from the empty set, stopping after 5 expansions without improvement, and locally predictive
features are added afterwards (Weka's default). `mutual_information` ranks the features by
sklearn's `mutual_info_classif` as a second opinion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from protolab.errors import ProtolabError

FEATURES_VERSION = 1
"""Bumped whenever a feature's definition changes; a model trained on another version is refused."""


class ClassifyError(ProtolabError):
    """Bad flows, a bad model file or a mismatch between them (the CLI exits with status 2)."""


# name -> meaning. The order is the canonical order of `--features all`.
CANDIDATE_FEATURES: dict[str, str] = {
    "duration_s": "flow duration, s",
    "c2s_packets": "packets client -> server",
    "s2c_packets": "packets server -> client",
    "c2s_bytes": "bytes client -> server (the bytes basis: IP or payload)",
    "s2c_bytes": "bytes server -> client (the bytes basis)",
    "c2s_bytes_per_packet": "mean bytes per packet client -> server (0 without packets)",
    "s2c_bytes_per_packet": "mean bytes per packet server -> client (0 without packets)",
    "c2s_packets_per_s": "packets per second client -> server (0 if duration is 0)",
    "s2c_packets_per_s": "packets per second server -> client (0 if duration is 0)",
    "c2s_bytes_per_s": "bytes per second client -> server (0 if duration is 0)",
    "s2c_bytes_per_s": "bytes per second server -> client (0 if duration is 0)",
    "syn": "a SYN was seen (syn >= 1)",
    "syn_both": "SYN and SYN/ACK were seen (syn >= 2)",
    "fin": "a FIN was seen (fin >= 1)",
    "fin_both": "both sides sent a FIN (fin >= 2)",
    "ack": "an ACK flag was seen",
    "rst": "a RST was seen (rst >= 1)",
}
ALL_FEATURES: list[str] = list(CANDIDATE_FEATURES)
FLAG_FEATURES = frozenset({"syn", "syn_both", "fin", "fin_both", "ack", "rst"})

SEVEN_FEATURES: list[str] = [
    "c2s_bytes", "s2c_bytes", "c2s_packets", "s2c_packets",
    "c2s_bytes_per_packet", "s2c_bytes_per_packet", "duration_s",
]
"""000 §3.2.3's selection: client and server bytes and packets, bytes per packet, duration."""

BYTES_BASES = ("ip", "payload")
_BYTE_COLUMNS = {"ip": ("c2s_bytes", "s2c_bytes"), "payload": ("c2s_payload_bytes", "s2c_payload_bytes")}
_FLAG_COLUMNS = {"syn": "syn", "syn_both": "syn", "fin": "fin", "fin_both": "fin", "ack": "ack", "rst": "rst"}
_NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                  "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL", "BOOLEAN")
LABEL_COLUMN = "protocol"
DOMAIN_COLUMN = "sni"


def check_feature_names(names: list[str]) -> None:
    unknown = [n for n in names if n not in CANDIDATE_FEATURES]
    if unknown:
        raise ClassifyError(f"unknown feature(s) {', '.join(unknown)}; known: {', '.join(ALL_FEATURES)}")
    if len(set(names)) != len(names):
        raise ClassifyError(f"feature list repeats a name: {', '.join(names)}")


def flow_columns_for(features: list[str], bytes_basis: str) -> dict[str, list[str]]:
    """Flow column -> the features that need it (duration may come from first_ns/last_ns)."""
    needs: dict[str, list[str]] = {}
    c2s_b, s2c_b = _BYTE_COLUMNS[bytes_basis]
    for name in features:
        columns: list[str] = []
        if name in _FLAG_COLUMNS:
            columns = [_FLAG_COLUMNS[name]]
        else:
            if name == "duration_s" or name.endswith("_per_s"):
                columns.append("duration_s")
            if "packets" in name or name.endswith("_per_packet"):
                columns.append(f"{name[:3]}_packets")
            if "bytes" in name:
                columns.append(c2s_b if name.startswith("c2s") else s2c_b)
        for column in columns:
            needs.setdefault(column, []).append(name)
    return needs


@dataclass
class FlowData:
    """Flows read from a Parquet file: the numeric columns the features need (float64, NULLs
    handled), the labels (`protocol`) and the domains (`sni`) when present."""

    path: str
    n: int
    bytes_basis: str
    columns: dict[str, np.ndarray]
    labels: np.ndarray | None = None  # object array of str; None where unlabelled is not allowed
    label_known: np.ndarray | None = None  # bool: the row has a label
    domains: np.ndarray | None = None  # object array of str or None
    info: dict[str, Any] = field(default_factory=dict)
    groups: dict[str, np.ndarray] = field(default_factory=dict)  # extra columns as text (None = NULL)

    def subset(self, index: np.ndarray) -> FlowData:
        return FlowData(
            path=self.path, n=len(index), bytes_basis=self.bytes_basis,
            columns={k: v[index] for k, v in self.columns.items()},
            labels=None if self.labels is None else self.labels[index],
            label_known=None if self.label_known is None else self.label_known[index],
            domains=None if self.domains is None else self.domains[index],
            info=dict(self.info),
            groups={k: v[index] for k, v in self.groups.items()},
        )

    def labelled(self) -> FlowData:
        """Only the rows with a label."""
        if self.labels is None or self.label_known is None:
            raise ClassifyError(f"{self.path}: field '{LABEL_COLUMN}' is missing: the flows carry no labels")
        if self.label_known.all():
            return self
        return self.subset(np.flatnonzero(self.label_known))


def _connect() -> Any:
    import duckdb

    return duckdb.connect()


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def describe_parquet(path: Path) -> dict[str, str]:
    """Column -> DuckDB type of a Parquet file; a clear error if it is missing or unreadable."""
    import duckdb

    if not path.is_file():
        raise ClassifyError(f"{path}: no such file")
    try:
        with _connect() as con:
            rows = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{_sql_path(path)}')").fetchall()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ClassifyError(f"{path}: not a readable Parquet flow file ({first})") from exc
    return {str(r[0]): str(r[1]) for r in rows}


def resolve_bytes_basis(path: Path, types: dict[str, str], requested: str, nulls: dict[str, int]) -> str:
    """`auto` -> ip when both IP byte columns exist without NULLs, else payload."""
    if requested in BYTES_BASES:
        return requested
    if requested != "auto":
        raise ClassifyError(f"bytes basis {requested!r}: expected auto, ip or payload")
    ip = _BYTE_COLUMNS["ip"]
    if all(c in types for c in ip) and all(nulls.get(c, 1) == 0 for c in ip):
        return "ip"
    return "payload"


def _file_bytes_basis(con: Any, path: Path, types: dict[str, str], requested: str) -> str:
    if requested in BYTES_BASES:
        return requested
    candidates = [c for c in _BYTE_COLUMNS["ip"] if c in types and types[c].split("(")[0] in _NUMERIC_TYPES]
    null_counts: dict[str, int] = {}
    if len(candidates) == 2:
        row = con.execute(f"SELECT {', '.join(f'count(*) - count({c})' for c in candidates)} "
                          f"FROM read_parquet('{_sql_path(path)}')").fetchone()
        null_counts = dict(zip(candidates, row, strict=True))
    return resolve_bytes_basis(path, types, requested, null_counts)


def file_bytes_basis(path: Path | str, requested: str = "auto") -> str:
    """The bytes basis `requested` resolves to for this file (auto: ip if every flow has IP bytes)."""
    path = Path(path)
    types = describe_parquet(path)
    with _connect() as con:
        return _file_bytes_basis(con, path, types, requested)


def read_flows(path: Path | str, features: list[str], *, bytes_basis: str = "auto", need_labels: bool = False,
               want_labels: bool = True, want_domains: bool = False, model_name: str | None = None,
               group_columns: tuple[str, ...] | list[str] = ()) -> FlowData:
    """Read the flow columns `features` need from a Parquet file, checked: a missing field, a
    non-numeric type, NULLs, negative counts or a non-finite duration are errors naming the file
    and the field. Rows without a label are kept (`label_known` False) unless `need_labels`
    finds none at all; `want_labels=False` skips reading them. `group_columns` (any columns, e.g.
    the lab corpus' `rtt_ms` or `page`) are read as text into `groups`."""
    path = Path(path)
    check_feature_names(features)
    types = describe_parquet(path)
    whose = f" (model {model_name})" if model_name else ""

    # Which optional columns exist decides the bytes basis and the duration's source.
    with _connect() as con:
        basis = _file_bytes_basis(con, path, types, bytes_basis)
        needs, use_ns = _columns_needed(features, basis, types)
        _check_columns(path, types, needs, basis, whose, model_name)
        _check_text_columns(path, types, need_labels, want_domains, group_columns)
        flags = [c for c in needs if c in ("syn", "fin", "rst", "ack")]
        counted = [c for c in needs if c not in flags]
        n = _check_values(con, path, needs, counted, whose, bytes_basis, model_name)
        has_labels = (need_labels or want_labels) and LABEL_COLUMN in types and types[LABEL_COLUMN] == "VARCHAR"
        has_domains = want_domains and DOMAIN_COLUMN in types and types[DOMAIN_COLUMN] == "VARCHAR"
        fetched = _fetch(con, path, counted, flags, has_labels, has_domains, group_columns)

    columns: dict[str, np.ndarray] = {}
    for c in counted + flags:
        columns[c] = np.ascontiguousarray(np.ma.getdata(fetched[c]), dtype=np.float64)
    if use_ns:
        columns["duration_s"] = np.maximum(columns.pop("last_ns") - columns.pop("first_ns"), 0.0) / 1e9
    labels = known = domains = None
    if has_labels:
        labels = _text_column(fetched[LABEL_COLUMN])
        known = ~np.ma.getmaskarray(fetched[LABEL_COLUMN])
        if need_labels and not known.any():
            raise ClassifyError(f"{path}: field '{LABEL_COLUMN}' is NULL in every flow: nothing to learn from")
    if has_domains:
        domains = _text_column(fetched[DOMAIN_COLUMN])
    groups = {name: _text_column(fetched[f"group_{i}"]) for i, name in enumerate(group_columns)}
    info = {"file": str(path), "flows": n, "bytes_basis": basis,
            "duration_from": "first_ns/last_ns" if use_ns else "duration_s"}
    return FlowData(path=str(path), n=n, bytes_basis=basis, columns=columns, labels=labels, label_known=known,
                    domains=domains, info=info, groups=groups)


def _columns_needed(features: list[str], basis: str, types: dict[str, str]) -> tuple[dict[str, list[str]], bool]:
    """Column -> the features that need it, and whether the duration comes from first_ns/last_ns
    (a file without duration_s)."""
    needs = flow_columns_for(features, basis)
    use_ns = "duration_s" in needs and "duration_s" not in types and {"first_ns", "last_ns"} <= set(types)
    if use_ns:
        needs.setdefault("first_ns", []).extend(needs["duration_s"])
        needs.setdefault("last_ns", []).extend(needs.pop("duration_s"))
    return needs, use_ns


def _check_columns(path: Path, types: dict[str, str], needs: dict[str, list[str]], basis: str, whose: str,
                   model_name: str | None) -> None:
    """Every needed column exists and holds numbers."""
    for column, users in needs.items():
        if column not in types:
            hint = ""
            if column in _BYTE_COLUMNS["ip"] and basis == "ip":
                hint = ("; the model counts IP bytes: retrain it with --bytes payload" if model_name else
                        "; the bytes basis is IP bytes (use payload bytes: --bytes payload)")
            raise ClassifyError(f"{path}: field '{column}' is missing; feature(s) {', '.join(users)}{whose} "
                                f"need it{hint}")
        base = types[column].split("(")[0]
        if base not in _NUMERIC_TYPES:
            raise ClassifyError(f"{path}: field '{column}' has type {types[column]}, expected a number")


def _check_text_columns(path: Path, types: dict[str, str], need_labels: bool, want_domains: bool,
                        group_columns: tuple[str, ...] | list[str]) -> None:
    """Labels and domains, when wanted, are text; group columns exist; labels exist when needed."""
    for name, wanted in ((LABEL_COLUMN, need_labels), (DOMAIN_COLUMN, want_domains)):
        if wanted and name in types and types[name] != "VARCHAR":
            raise ClassifyError(f"{path}: field '{name}' has type {types[name]}, expected VARCHAR")
    for name in group_columns:
        if name not in types:
            raise ClassifyError(f"{path}: field '{name}' is missing (asked for as a group column)")
    if need_labels and LABEL_COLUMN not in types:
        raise ClassifyError(f"{path}: field '{LABEL_COLUMN}' is missing: training and evaluation need labelled flows")


def _check_values(con: Any, path: Path, needs: dict[str, list[str]], counted: list[str], whose: str,
                  bytes_basis: str, model_name: str | None) -> int:
    """No NULL or negative count, a finite duration, at least one flow: the number of flows."""
    import duckdb

    checks = [f"count(*) - count({c})" for c in counted]
    checks += [f"count(*) FILTER (WHERE {c} < 0)" for c in counted]
    checks += [f"count(*) FILTER (WHERE NOT isfinite({c}::DOUBLE))" for c in counted if c == "duration_s"]
    try:
        row = con.execute(f"SELECT count(*){''.join(', ' + c for c in checks)} "
                          f"FROM read_parquet('{_sql_path(path)}')").fetchone()
    except duckdb.Error as exc:
        raise ClassifyError(f"{path}: cannot read the flows ({str(exc).strip().splitlines()[0]})") from exc
    n = int(row[0])
    k = len(counted)
    for i, column in enumerate(counted):
        if row[1 + i]:
            extra = ""
            if column in _BYTE_COLUMNS["ip"] and bytes_basis == "ip":
                extra = (" (IP bytes unknown: the model counts IP bytes; retrain it with --bytes payload)"
                         if model_name else " (IP bytes unknown: use payload bytes, --bytes payload)")
            raise ClassifyError(f"{path}: field '{column}' is NULL in {row[1 + i]} of {n} flows{extra}; "
                                f"feature(s) {', '.join(needs[column])}{whose} need it")
        if row[1 + k + i]:
            raise ClassifyError(f"{path}: field '{column}' is negative in {row[1 + k + i]} flows")
    if "duration_s" in counted and row[1 + 2 * k]:
        raise ClassifyError(f"{path}: field 'duration_s' is not finite in {row[1 + 2 * k]} flows")
    if n == 0:
        raise ClassifyError(f"{path}: no flows")
    return n


def _fetch(con: Any, path: Path, counted: list[str], flags: list[str], has_labels: bool, has_domains: bool,
           group_columns: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The columns as numpy arrays: counts as doubles, flags with NULL as 0, text columns."""
    select = [f"{c}::DOUBLE AS {c}" for c in counted]
    select += [f"coalesce({c}::DOUBLE, 0) AS {c}" for c in flags]
    if has_labels:
        select.append(f"{LABEL_COLUMN}")
    if has_domains:
        select.append(f"{DOMAIN_COLUMN}")
    for i, name in enumerate(group_columns):
        select.append(f'CAST("{name.replace(chr(34), chr(34) * 2)}" AS VARCHAR) AS group_{i}')
    return dict(con.execute(f"SELECT {', '.join(select)} FROM read_parquet('{_sql_path(path)}')").fetchnumpy())


def _text_column(raw: Any) -> np.ndarray:
    """A fetched text column as an object array, None where NULL."""
    values = np.asarray(np.ma.getdata(raw), dtype=object)
    values[np.ma.getmaskarray(raw)] = None
    return values


def compute_feature(data: FlowData, name: str) -> np.ndarray:
    """One feature as float64, finite everywhere."""
    col = data.columns
    if name in _FLAG_COLUMNS:
        v = col[_FLAG_COLUMNS[name]]
        return (v >= (2 if name.endswith("_both") else 1)).astype(np.float64)
    if name == "duration_s":
        return col["duration_s"]
    side = name[:3]
    c2s_b, s2c_b = _BYTE_COLUMNS[data.bytes_basis]
    packets = col.get(f"{side}_packets")
    nbytes = col.get(c2s_b if side == "c2s" else s2c_b)
    if name.endswith("_packets"):
        return packets  # type: ignore[return-value]
    if name.endswith("_bytes"):
        return nbytes  # type: ignore[return-value]
    if name.endswith("_bytes_per_packet"):
        return _safe_ratio(nbytes, packets)  # type: ignore[arg-type]
    duration = col["duration_s"]
    if name.endswith("_packets_per_s"):
        return _safe_ratio(packets, duration)  # type: ignore[arg-type]
    if name.endswith("_bytes_per_s"):
        return _safe_ratio(nbytes, duration)  # type: ignore[arg-type]
    raise ClassifyError(f"unknown feature {name!r}")


def _safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(num.shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def feature_matrix(data: FlowData, features: list[str]) -> np.ndarray:
    """(flows, features) float32, C order: what the trees consume without a copy."""
    matrix = np.empty((data.n, len(features)), dtype=np.float32)
    for j, name in enumerate(features):
        matrix[:, j] = compute_feature(data, name)
    return matrix


# ----------------------------------------------------------------------------------------------
# Discretization (Fayyad & Irani's MDL method, as Weka's supervised Discretize)


def _entropy_rows(counts: np.ndarray) -> np.ndarray:
    """Entropy (bits) of each row of class counts."""
    totals = counts.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(totals > 0, counts / np.maximum(totals, 1), 0.0)
        logs = np.where(p > 0, np.log2(np.where(p > 0, p, 1.0)), 0.0)
    return -(p * logs).sum(axis=-1)


def mdl_cut_points(x: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Cut points of `x` (ascending) by recursive minimum-entropy splits, each accepted only if
    its information gain passes Fayyad & Irani's MDL criterion. `y` are class codes 0..C-1."""
    order = np.argsort(x, kind="stable")
    xs = np.asarray(x, dtype=np.float64)[order]
    ys = np.asarray(y)[order]
    onehot = np.zeros((len(ys), n_classes), dtype=np.int64)
    onehot[np.arange(len(ys)), ys] = 1
    cuts: list[float] = []
    stack = [(0, len(xs))]
    while stack:
        lo, hi = stack.pop()
        n = hi - lo
        if n < 4:
            continue
        seg = xs[lo:hi]
        boundaries = np.flatnonzero(seg[1:] != seg[:-1]) + 1  # cut before index i
        if len(boundaries) == 0:
            continue
        cum = np.cumsum(onehot[lo:hi], axis=0)
        total = cum[-1]
        left = cum[boundaries - 1]
        right = total - left
        weights = boundaries / n
        weighted = weights * _entropy_rows(left) + (1 - weights) * _entropy_rows(right)
        best = int(np.argmin(weighted))
        i = int(boundaries[best])
        ent = float(_entropy_rows(total[None, :])[0])
        ent1 = float(_entropy_rows(left[best][None, :])[0])
        ent2 = float(_entropy_rows(right[best][None, :])[0])
        gain = ent - float(weighted[best])
        k, k1, k2 = int((total > 0).sum()), int((left[best] > 0).sum()), int((right[best] > 0).sum())
        delta = math.log2(3**k - 2) - (k * ent - k1 * ent1 - k2 * ent2)
        if gain > (math.log2(n - 1) + delta) / n:
            cuts.append(float((seg[i - 1] + seg[i]) / 2))
            stack.append((lo, lo + i))
            stack.append((lo + i, hi))
    return np.array(sorted(cuts), dtype=np.float64)


def discretize(x: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Bin index 0..len(cuts) of every value."""
    return np.searchsorted(cuts, x, side="right").astype(np.int64)


def _class_codes(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    classes, codes = np.unique(np.asarray(y, dtype=str), return_inverse=True)
    return classes, codes.astype(np.int64)


def _entropy_codes(codes: np.ndarray) -> float:
    counts = np.bincount(codes)
    return float(_entropy_rows(counts[None, :].astype(np.float64))[0])


def symmetric_uncertainty(a: np.ndarray, b: np.ndarray) -> float:
    """2 I(A;B) / (H(A) + H(B)) of two discrete code arrays, in [0, 1]."""
    ha, hb = _entropy_codes(a), _entropy_codes(b)
    if ha + hb == 0:
        return 0.0
    joint = a * (int(b.max()) + 1) + b
    hab = _entropy_codes(np.unique(joint, return_inverse=True)[1])
    return max(0.0, min(1.0, 2 * (ha + hb - hab) / (ha + hb)))


def _sample(n: int, max_rows: int, seed: int) -> np.ndarray:
    if n <= max_rows:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_rows, replace=False))


@dataclass
class FeatureRanking:
    """The outcome of feature selection on one dataset."""

    features: list[str]
    class_su: dict[str, float]  # SU(feature, class) after MDL discretization
    bins: dict[str, int]  # MDL bins per feature
    forward_order: list[tuple[str, float]]  # greedy forward order by CFS merit: (feature, merit after adding it)
    selected: list[str]  # best-first subset + locally predictive features
    selected_merit: float  # merit of the whole selection
    best_first: list[str]  # the best-first subset alone
    best_first_merit: float
    mutual_info: dict[str, float]  # nats, sklearn mutual_info_classif
    rows: int

    def to_json(self) -> dict[str, Any]:
        return {
            "method": {
                "cfs": "CfsSubsetEval-like: MDL (Fayyad-Irani) discretization, symmetric uncertainty, best-first "
                       "forward search from the empty set, 5 non-improving expansions, locally predictive features added",
                "mutual_information": "sklearn.feature_selection.mutual_info_classif (k=3 neighbours; flag features discrete)",
            },
            "rows": self.rows,
            "selected": self.selected,
            "selected_merit": self.selected_merit,
            "best_first_subset": self.best_first,
            "best_first_merit": self.best_first_merit,
            "forward_order": [{"feature": f, "merit": m} for f, m in self.forward_order],
            "class_symmetric_uncertainty": self.class_su,
            "mdl_bins": self.bins,
            "mutual_information_nats": self.mutual_info,
        }


class _Merit:
    def __init__(self, codes: list[np.ndarray], y: np.ndarray) -> None:
        self.codes = codes
        self.rcf = np.array([symmetric_uncertainty(c, y) for c in codes])
        self._rff: dict[tuple[int, int], float] = {}

    def rff(self, i: int, j: int) -> float:
        key = (min(i, j), max(i, j))
        if key not in self._rff:
            self._rff[key] = symmetric_uncertainty(self.codes[key[0]], self.codes[key[1]])
        return self._rff[key]

    def __call__(self, subset: frozenset[int]) -> float:
        k = len(subset)
        if k == 0:
            return 0.0
        items = sorted(subset)
        num = float(self.rcf[items].sum())
        den = k + 2 * sum(self.rff(a, b) for x, a in enumerate(items) for b in items[x + 1:])
        return num / math.sqrt(den) if den > 0 else 0.0


def cfs_select(X: np.ndarray, y: np.ndarray, features: list[str], *, max_rows: int = 100_000, seed: int = 0,
               search_termination: int = 5,
               locally_predictive: bool = True) -> tuple[list[str], float, _Merit, list[int], list[str]]:
    """Weka's CfsSubsetEval + BestFirst (forward). Returns the selection (the best-first subset
    plus the locally predictive features), the best-first subset's merit, the merit evaluator
    (with the SU values), the MDL bin counts and the best-first subset alone."""
    rows = _sample(len(y), max_rows, seed)
    Xs, ys = np.asarray(X)[rows], np.asarray(y)[rows]
    _, yc = _class_codes(ys)
    n_classes = int(yc.max()) + 1
    codes, bins = [], []
    for j in range(Xs.shape[1]):
        cuts = mdl_cut_points(Xs[:, j], yc, n_classes)
        codes.append(discretize(Xs[:, j], cuts))
        bins.append(len(cuts) + 1)
    merit = _Merit(codes, yc)
    m = len(features)

    start: frozenset[int] = frozenset()
    best, best_merit = start, 0.0
    open_list: list[tuple[float, frozenset[int]]] = [(0.0, start)]
    seen = {start}
    stale = 0
    while open_list and stale < search_termination:
        open_list.sort(key=lambda t: (-t[0], sorted(t[1])))
        _, current = open_list.pop(0)
        improved = False
        for f in range(m):
            if f in current:
                continue
            child = current | {f}
            if child in seen:
                continue
            seen.add(child)
            value = merit(child)
            open_list.append((value, child))
            if value > best_merit + 1e-12:
                best, best_merit, improved = child, value, True
        stale = 0 if improved else stale + 1

    best_first = sorted(best, key=lambda i: -merit.rcf[i])
    chosen = list(best_first)
    if locally_predictive:
        # Weka: add, by decreasing class correlation, every feature whose correlation with the
        # class exceeds its correlation with each feature already chosen.
        for f in np.argsort(-merit.rcf, kind="stable"):
            f = int(f)
            if f in chosen or merit.rcf[f] <= 0:
                continue
            if all(merit.rff(f, g) < merit.rcf[f] for g in chosen):
                chosen.append(f)
    return [features[i] for i in chosen], best_merit, merit, bins, [features[i] for i in best_first]


def forward_ranking(merit: _Merit, features: list[str]) -> list[tuple[str, float]]:
    """Every feature in the order a greedy forward search by CFS merit adds it."""
    chosen: frozenset[int] = frozenset()
    order = []
    remaining = set(range(len(features)))
    while remaining:
        value, f = max((merit(chosen | {f}), -f) for f in remaining)
        f = -f
        chosen = chosen | {f}
        remaining.discard(f)
        order.append((features[f], value))
    return order


def mutual_information(X: np.ndarray, y: np.ndarray, features: list[str], *, max_rows: int = 20_000,
                       seed: int = 0) -> dict[str, float]:
    from sklearn.feature_selection import mutual_info_classif

    rows = _sample(len(y), max_rows, seed + 1)
    discrete = np.array([f in FLAG_FEATURES for f in features])
    mi = mutual_info_classif(np.asarray(X, dtype=np.float64)[rows], np.asarray(y, dtype=str)[rows],
                             discrete_features=discrete, n_neighbors=3, random_state=seed)
    return {f: float(v) for f, v in zip(features, mi, strict=True)}


def rank_features(X: np.ndarray, y: np.ndarray, features: list[str], *, seed: int = 0,
                  max_rows: int = 100_000) -> FeatureRanking:
    """CFS best-first selection, the greedy forward order by merit and the mutual information."""
    selected, best_merit, merit, bins, best_first = cfs_select(X, y, features, max_rows=max_rows, seed=seed)
    return FeatureRanking(
        features=list(features),
        class_su={f: float(v) for f, v in zip(features, merit.rcf, strict=True)},
        bins=dict(zip(features, bins, strict=True)),
        forward_order=forward_ranking(merit, features),
        selected=selected,
        selected_merit=merit(frozenset(features.index(f) for f in selected)),
        best_first=best_first,
        best_first_merit=best_merit,
        mutual_info=mutual_information(X, y, features, seed=seed),
        rows=int(min(len(y), max_rows)),
    )
