"""The classifier's models (000 §3.2.1 used Weka's RandomForest, J48 (C4.5), NBTree and
BayesNet); sklearn has the first two, the other two are approximated here as small
sklearn-compatible estimators:

- `NBTreeClassifier` (for Kohavi's NBTree): a shallow entropy tree whose leaves hold Gaussian
  Naive Bayes models over log1p(features). NBTree chooses its splits by the cross-validated
  accuracy of Naive Bayes at the children; this one splits by information gain (C4.5's
  criterion) with a depth limit and a minimum leaf size, which keeps the leaves large enough for
  their Naive Bayes. Classes rare in a leaf (< 2 flows) use their global mean and variance;
  class priors in a leaf are Laplace-smoothed.
- `BayesNetClassifier` (for Weka's BayesNet): Weka's default BayesNet (K2 search with at most one
  parent per node, SimpleEstimator with alpha 0.5, numeric attributes discretized by Fayyad &
  Irani's MDL method) learns exactly the Naive Bayes structure, the class being each feature's
  only parent. So this is categorical Naive Bayes (alpha 0.5) over MDL-discretized features:
  Weka's default network, not an approximation of its structure.

Also here: the registry of algorithms with their defaults (`make_estimator`), threaded
prediction, the metrics (accuracy, kappa, P/R/F1, confusion matrices), per-domain accuracy and
stratified k-fold cross-validation.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.validation import check_is_fitted

from protolab.traffic.features import ClassifyError, discretize, mdl_cut_points

_CHUNK = 65_536


def _as_float(X: Any) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"expected a 2-D feature matrix, got shape {X.shape}")
    return X


def _log_softmax_rows(jll: np.ndarray) -> np.ndarray:
    top = jll.max(axis=1, keepdims=True)
    return jll - (top + np.log(np.exp(jll - top).sum(axis=1, keepdims=True)))


class NBTreeClassifier(ClassifierMixin, BaseEstimator):
    """An entropy tree of depth <= `max_depth` with Gaussian Naive Bayes at each leaf."""

    def __init__(self, max_depth: int = 4, min_samples_leaf: int = 50, var_smoothing: float = 1e-9,
                 log_features: bool = True, random_state: int | None = 0) -> None:
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.var_smoothing = var_smoothing
        self.log_features = log_features
        self.random_state = random_state

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return np.log1p(np.maximum(X, 0.0)) if self.log_features else X

    def fit(self, X: Any, y: Any) -> NBTreeClassifier:
        X = _as_float(X)
        y = np.asarray(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        self.n_features_in_ = X.shape[1]
        c, f = len(self.classes_), X.shape[1]
        self.tree_ = DecisionTreeClassifier(criterion="entropy", max_depth=self.max_depth,
                                            min_samples_leaf=self.min_samples_leaf,
                                            random_state=self.random_state).fit(X.astype(np.float32), codes)
        nodes = self.tree_.apply(X.astype(np.float32))
        leaves = np.unique(nodes)
        self.leaf_of_node_ = np.full(self.tree_.tree_.node_count, -1, dtype=np.int64)
        self.leaf_of_node_[leaves] = np.arange(len(leaves))
        leaf = self.leaf_of_node_[nodes]
        n_leaves = len(leaves)
        Z = self._transform(X)
        index = leaf * c + codes
        counts = np.bincount(index, minlength=n_leaves * c).reshape(n_leaves, c).astype(np.float64)
        s1 = np.empty((n_leaves, c, f))
        s2 = np.empty((n_leaves, c, f))
        for j in range(f):
            s1[:, :, j] = np.bincount(index, weights=Z[:, j], minlength=n_leaves * c).reshape(n_leaves, c)
            s2[:, :, j] = np.bincount(index, weights=Z[:, j] ** 2, minlength=n_leaves * c).reshape(n_leaves, c)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = s1 / counts[:, :, None]
            var = s2 / counts[:, :, None] - mean**2
        # Global per-class parameters for classes too rare in a leaf.
        g_mean = np.stack([Z[codes == k].mean(axis=0) for k in range(c)])
        g_var = np.stack([Z[codes == k].var(axis=0) for k in range(c)])
        rare = counts < 2
        mean = np.where(rare[:, :, None], g_mean[None], mean)
        var = np.where(rare[:, :, None], g_var[None], np.maximum(var, 0.0))
        epsilon = self.var_smoothing * max(float(Z.var(axis=0).max()), 1e-12)
        var = var + epsilon
        prior = (counts + 1.0) / (counts.sum(axis=1, keepdims=True) + c)
        self.mean_ = mean
        self.inv2var_ = 0.5 / var
        self.const_ = np.log(prior) - 0.5 * np.log(2 * np.pi * var).sum(axis=2)
        self.leaf_counts_ = counts
        return self

    def _jll(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "tree_")
        X = _as_float(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the model {self.n_features_in_}")
        out = np.empty((X.shape[0], len(self.classes_)))
        for start in range(0, X.shape[0], _CHUNK):
            part = X[start:start + _CHUNK]
            leaf = self.leaf_of_node_[self.tree_.apply(part.astype(np.float32))]
            z = self._transform(part)[:, None, :]
            out[start:start + _CHUNK] = self.const_[leaf] - ((z - self.mean_[leaf]) ** 2 * self.inv2var_[leaf]).sum(axis=2)
        return out

    def predict_log_proba(self, X: Any) -> np.ndarray:
        return _log_softmax_rows(self._jll(X))

    def predict_proba(self, X: Any) -> np.ndarray:
        return np.exp(self.predict_log_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[np.argmax(self._jll(X), axis=1)]


class BayesNetClassifier(ClassifierMixin, BaseEstimator):
    """Categorical Naive Bayes (Lidstone alpha) over MDL-discretized features: Weka's default
    BayesNet. The cut points are learnt on at most `max_discretize_rows` training flows."""

    def __init__(self, alpha: float = 0.5, max_discretize_rows: int = 200_000, random_state: int | None = 0) -> None:
        self.alpha = alpha
        self.max_discretize_rows = max_discretize_rows
        self.random_state = random_state

    def _bins(self, X: np.ndarray) -> np.ndarray:
        out = np.empty(X.shape, dtype=np.int64)
        for j, cuts in enumerate(self.cuts_):
            out[:, j] = discretize(X[:, j], cuts)
        return out

    def fit(self, X: Any, y: Any) -> BayesNetClassifier:
        X = _as_float(X)
        y = np.asarray(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        self.n_features_in_ = X.shape[1]
        c = len(self.classes_)
        rows = np.arange(len(codes))
        if len(rows) > self.max_discretize_rows:
            rows = np.sort(np.random.default_rng(self.random_state).choice(len(codes), self.max_discretize_rows,
                                                                            replace=False))
        self.cuts_ = [mdl_cut_points(X[rows, j], codes[rows], c) for j in range(X.shape[1])]
        B = self._bins(X)
        counts = np.bincount(codes, minlength=c).astype(np.float64)
        # Weka's SimpleEstimator smooths the class prior too.
        self.class_log_prior_ = np.log((counts + self.alpha) / (counts.sum() + c * self.alpha))
        self.feature_log_prob_ = []
        for j, cuts in enumerate(self.cuts_):
            k = len(cuts) + 1
            table = np.bincount(codes * k + B[:, j], minlength=c * k).reshape(c, k).astype(np.float64)
            self.feature_log_prob_.append(np.log((table + self.alpha) / (table.sum(axis=1, keepdims=True) + k * self.alpha)))
        return self

    def _jll(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "cuts_")
        X = _as_float(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the model {self.n_features_in_}")
        jll = np.tile(self.class_log_prior_, (X.shape[0], 1))
        for j, (cuts, table) in enumerate(zip(self.cuts_, self.feature_log_prob_, strict=True)):
            jll += table[:, discretize(X[:, j], cuts)].T
        return jll

    def predict_log_proba(self, X: Any) -> np.ndarray:
        return _log_softmax_rows(self._jll(X))

    def predict_proba(self, X: Any) -> np.ndarray:
        return np.exp(self.predict_log_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[np.argmax(self._jll(X), axis=1)]


# ----------------------------------------------------------------------------------------------
# Algorithms, metrics, cross-validation

ALGORITHMS = ("rf", "c45", "nbtree", "bayes")
ALGORITHM_NAMES = {"rf": "Random Forest", "c45": "C4.5-like tree", "nbtree": "NBTree-like", "bayes": "BayesNet-like"}

# 000 §3.2.4, Campus dataset: accuracy (Fig. 3.4), F-measure and kappa (Table 3.1), in %.
PAPER = {
    "rf": {"accuracy": 97.5, "f_measure": 97.3, "kappa": 94.8},
    "c45": {"accuracy": 95.0, "f_measure": 95.2, "kappa": 90.8},
    "nbtree": {"accuracy": 93.0, "f_measure": 93.2, "kappa": 86.4},
    "bayes": {"accuracy": 88.0, "f_measure": 87.7, "kappa": 76.5},
}

# Defaults. The forest's were tuned with benches/traffic_classify.py on 1 M synthetic flows
# (docs/traffic.md): 10 trees of depth <= 20 with leaves of >= 5 flows predict > 1 M flows/s and
# train on 1 M flows in well under a minute on 2 cores, as accurately as 50 unlimited trees there.
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "rf": {"n_estimators": 10, "max_depth": 20, "min_samples_leaf": 5, "max_features": "sqrt"},
    "c45": {"min_samples_leaf": 2},  # J48's minNumObj
    "nbtree": {"max_depth": 6, "min_samples_leaf": 30},  # NBTree splits nodes of >= 30 instances
    "bayes": {"alpha": 0.5},  # Weka's SimpleEstimator
}
PARALLEL_PREDICT_ROWS = 100_000
PREDICT_BLOCK_ROWS = 262_144


def make_estimator(algorithm: str, *, seed: int = 0, n_jobs: int = 2, params: dict[str, Any] | None = None) -> Any:
    """A fresh, unfitted estimator for `algorithm` with the default parameters updated by `params`."""
    from sklearn.ensemble import RandomForestClassifier

    if algorithm not in ALGORITHMS:
        raise ClassifyError(f"unknown algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}")
    merged = {**DEFAULT_PARAMS[algorithm], **(params or {})}
    try:
        if algorithm == "rf":
            return RandomForestClassifier(**merged, n_jobs=n_jobs, random_state=seed)
        if algorithm == "c45":
            return DecisionTreeClassifier(criterion="entropy", **merged, random_state=seed)
        if algorithm == "nbtree":
            return NBTreeClassifier(**merged, random_state=seed)
        return BayesNetClassifier(**merged, random_state=seed)
    except TypeError as exc:
        raise ClassifyError(f"algorithm {algorithm}: bad parameter ({exc})") from exc


def predict_codes(estimator: Any, X: np.ndarray, n_jobs: int) -> np.ndarray:
    """Index into `estimator.classes_` of each row's prediction: argmax of predict_proba (what
    every model here predicts), over row blocks spread on `n_jobs` threads (the trees' Cython
    loops and numpy release the GIL). A forest predicts each block with one thread, summing its
    trees in order: unlike sklearn's tree-parallel predict, whose sums depend on thread timing,
    the result is the same on every run and for any `n_jobs`."""
    if getattr(estimator, "n_jobs", None) not in (None, 1):
        estimator.n_jobs = 1

    def block(start: int) -> np.ndarray:
        return np.argmax(estimator.predict_proba(X[start:start + PREDICT_BLOCK_ROWS]), axis=1).astype(np.int32)

    if n_jobs <= 1 or len(X) < PARALLEL_PREDICT_ROWS:
        return np.concatenate([block(s) for s in range(0, len(X), PREDICT_BLOCK_ROWS)] or
                              [np.empty(0, dtype=np.int32)])
    with ThreadPoolExecutor(max_workers=n_jobs) as pool:
        return np.concatenate(list(pool.map(block, range(0, len(X), PREDICT_BLOCK_ROWS))))


def predict_labels(estimator: Any, X: np.ndarray, n_jobs: int) -> np.ndarray:
    """The predicted class of each row (see `predict_codes`)."""
    return np.asarray(estimator.classes_)[predict_codes(estimator, X, n_jobs)]


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray, classes: Iterable[str] | None = None) -> dict[str, Any]:
    """Accuracy, Cohen's kappa, precision/recall/F1 per class (and macro, weighted averages),
    the confusion matrix in counts and normalized per true class (rows sum to 1)."""
    from sklearn.metrics import (
        cohen_kappa_score,
        confusion_matrix,
        precision_recall_fscore_support,
    )

    y_true = np.asarray(y_true, dtype=str)
    y_pred = np.asarray(y_pred, dtype=str)
    labels = sorted(set(() if classes is None else [str(c) for c in classes]) | set(np.unique(y_true)) | set(np.unique(y_pred)))
    cm = confusion_matrix(y_true, y_pred, labels=labels)
    rows = cm.sum(axis=1, keepdims=True)
    normalized = np.divide(cm, rows, out=np.zeros(cm.shape), where=rows > 0)
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=0)
    present = s > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kappa = float(cohen_kappa_score(y_true, y_pred, labels=labels))
    return {
        "flows": len(y_true),
        "accuracy": float((y_true == y_pred).mean()) if len(y_true) else 0.0,
        "kappa": 0.0 if np.isnan(kappa) else kappa,
        "per_class": {c: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]), "support": int(s[i])}
                      for i, c in enumerate(labels)},
        "macro_f1": float(f[present].mean()) if present.any() else 0.0,
        "weighted_f1": float((f * s).sum() / s.sum()) if s.sum() else 0.0,
        "confusion": {"labels": labels, "counts": cm.tolist(), "normalized": normalized.round(6).tolist()},
    }


def per_domain_accuracy(domains: np.ndarray | None, y_true: np.ndarray, y_pred: np.ndarray,
                        top: int) -> list[dict[str, Any]]:
    """Accuracy for each of the `top` domains (SNI) with the most flows (000 §3.2.5)."""
    if domains is None or top <= 0:
        return []
    known = np.array([d is not None and d != "" for d in domains], dtype=bool)
    if not known.any():
        return []
    names, inverse, counts = np.unique(np.asarray(domains[known], dtype=str), return_inverse=True, return_counts=True)
    correct = np.bincount(inverse, weights=(np.asarray(y_true)[known] == np.asarray(y_pred)[known]).astype(float),
                          minlength=len(names))
    order = np.lexsort((names, -counts))[:top]
    return [{"domain": str(names[i]), "flows": int(counts[i]), "share": float(counts[i] / len(y_true)),
             "accuracy": float(correct[i] / counts[i])} for i in order]


def cross_validate(X: np.ndarray, y: np.ndarray, algorithm: str, *, folds: int = 10, seed: int = 0,
                   n_jobs: int = 2, params: dict[str, Any] | None = None,
                   domains: np.ndarray | None = None, top_domains: int = 20, source: str = "flows") -> dict[str, Any]:
    """Stratified k-fold CV of one algorithm: per-fold accuracy, pooled out-of-fold metrics
    (the confusion matrices of the folds summed), per-domain accuracy, fit and predict times."""
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(y, dtype=str)
    classes, counts = np.unique(y, return_counts=True)
    if counts.min() < folds:
        rare = ", ".join(f"{c} ({n})" for c, n in zip(classes, counts, strict=True) if n < folds)
        raise ClassifyError(f"{source}: field 'protocol': class(es) {rare} have fewer labelled flows than the "
                            f"{folds} folds (use fewer folds or more flows)")
    predicted = np.empty(len(y), dtype=object)
    fold_accuracy, fit_s, predict_s = [], 0.0, 0.0
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for train_idx, test_idx in splitter.split(X, y):
        estimator = make_estimator(algorithm, seed=seed, n_jobs=n_jobs, params=params)
        started = time.perf_counter()
        estimator.fit(X[train_idx], y[train_idx])
        fit_s += time.perf_counter() - started
        started = time.perf_counter()
        predicted[test_idx] = predict_labels(estimator, X[test_idx], n_jobs)
        predict_s += time.perf_counter() - started
        fold_accuracy.append(float((predicted[test_idx] == y[test_idx]).mean()))
    predicted = predicted.astype(str)
    result = classification_metrics(y, predicted, classes)
    result.update({
        "algorithm": algorithm, "algorithm_name": ALGORITHM_NAMES[algorithm],
        "params": {**DEFAULT_PARAMS[algorithm], **(params or {})},
        "folds": folds, "fold_accuracy": fold_accuracy,
        "accuracy_mean": float(np.mean(fold_accuracy)), "accuracy_std": float(np.std(fold_accuracy, ddof=1)),
        "fit_seconds": round(fit_s, 3), "predict_seconds": round(predict_s, 3),
        "predict_flows_per_s": float(len(y) / predict_s) if predict_s > 0 else None,
        "per_domain": per_domain_accuracy(domains, y, predicted, top_domains),
        "paper_000": PAPER[algorithm],
    })
    return result


MAX_GROUPS = 50


def _natural(value: str) -> tuple[int, float, str]:
    """Numbers in numeric order (20 before 100), then text."""
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def leave_one_group_out(X: np.ndarray, y: np.ndarray, groups: np.ndarray, algorithm: str, *, column: str,
                        seed: int = 0, n_jobs: int = 2, params: dict[str, Any] | None = None,
                        source: str = "flows") -> dict[str, Any]:
    """Stability across the values of one column (a link condition, a page, a site): for each
    value, train on the flows with every other value and test on the flows with this one. Flows
    whose value is NULL take no part. Returns the accuracy and macro-F1 per value (`per_value`;
    leave-one-page-out when the column is the page) and the pooled metrics."""
    y = np.asarray(y, dtype=str)
    known = np.array([g is not None for g in groups], dtype=bool)
    values = sorted({str(g) for g in groups[known]}, key=_natural)
    if len(values) < 2:
        raise ClassifyError(f"{source}: field '{column}' has {len(values)} distinct value(s): stability across "
                            f"its values needs at least 2")
    if len(values) > MAX_GROUPS:
        raise ClassifyError(f"{source}: field '{column}' has {len(values)} distinct values, more than {MAX_GROUPS}: "
                            f"group it first")
    text = np.where(known, groups.astype(str), "")
    predicted = np.empty(len(y), dtype=object)
    per_value = []
    for value in values:
        test = known & (text == value)
        train = known & ~test
        row: dict[str, Any] = {"value": value, "flows": int(test.sum()), "trained_on": int(train.sum())}
        if len(np.unique(y[train])) < 2:
            row.update({"accuracy": None, "note": "the other values hold a single class"})
            per_value.append(row)
            continue
        estimator = make_estimator(algorithm, seed=seed, n_jobs=n_jobs, params=params).fit(X[train], y[train])
        predicted[test] = predict_labels(estimator, X[test], n_jobs)
        row["accuracy"] = float((predicted[test] == y[test]).mean())
        # Over the classes of this value's flows (a page may lack one): F1 of each, averaged.
        row["macro_f1"] = classification_metrics(y[test], predicted[test].astype(str))["macro_f1"]
        row["unseen_classes"] = sorted(set(np.unique(y[test])) - set(estimator.classes_))
        per_value.append(row)
    tested = known & np.array([p is not None for p in predicted], dtype=bool)
    result = classification_metrics(y[tested], predicted[tested].astype(str), np.unique(y))
    result.update({"algorithm": algorithm, "column": column, "per_value": per_value})
    return result
