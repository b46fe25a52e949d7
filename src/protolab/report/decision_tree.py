"""The throughput decision tree of 000 §6.2, pure (no store, no I/O): fit a tree on feature rows
and throughput classes, and say which feature it splits on first.

000 §6.2.1 lists the features (`FEATURES_000`, in its words) and §6.2.2 the method: C4.5
(Weka), splitting on information gain, throughput classes in 10 Mbit/s bins (`t0`, `t10`, ...).
scikit-learn's CART with the entropy criterion splits on the same information gain (binary
splits, no C4.5 pruning). The report's section (`analysis.determinants`) fits it on the
features the store has; the reproduction of 000's Figs. 6.6/6.7 on the features 000 names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from protolab.errors import ProtolabError

# 000 §6.2.1, items 1-11 (item 11 is four features), named as 000 names them.
FEATURES_000: tuple[str, ...] = (
    "server mean inter-packet time", "client mean inter-packet time",
    "server inter-packet time variation", "client inter-packet time variation",
    "server burstiness", "client burstiness",
    "mean delay", "delay variation",
    "packet loss", "out of order", "ACK freq",
    "mean cwnd", "cwnd variation",
    "slow start freq", "congestion avoidance freq", "app limited freq", "recovery freq",
)
THROUGHPUT_BIN_MBPS = 10  # 000 §6.2.2: classes t0, t10, t20, ... of 10 Mbit/s each
DEFAULT_DEPTH = 3
CRITERION = "entropy"  # information gain, as C4.5


class TreeInputError(ProtolabError):
    """Feature rows the tree cannot be fitted on (a missing or non-finite feature, one class)."""


def throughput_class_000(mbps: float) -> str:
    """000's class of a throughput: `t0` for 0-10 Mbit/s, `t10` for 10-20, ..."""
    if not np.isfinite(mbps) or mbps < 0:
        raise TreeInputError(f"throughput {mbps!r} Mbit/s: not a finite non-negative number")
    return f"t{int(mbps // THROUGHPUT_BIN_MBPS) * THROUGHPUT_BIN_MBPS}"


@dataclass(frozen=True)
class FittedTree:
    """A fitted tree, what it learnt and how well it predicts."""

    tree: Any  # sklearn.tree.DecisionTreeClassifier
    feature_names: tuple[str, ...]
    classes: tuple[str, ...]
    importances: tuple[tuple[str, float], ...]  # by decreasing importance, zeros left out
    training_accuracy: float
    cv_accuracy: float | None  # k-fold cross-validated, None when a class has fewer than 2 rows
    folds: int

    @property
    def root_feature(self) -> str | None:
        """The feature of the first split (None: the tree is a single leaf)."""
        index = int(self.tree.tree_.feature[0])
        return self.feature_names[index] if index >= 0 else None

    def split_features(self) -> tuple[str, ...]:
        """Every feature the tree splits on, in the order of its nodes (root first)."""
        seen: list[str] = []
        for index in self.tree.tree_.feature:
            if index >= 0 and self.feature_names[int(index)] not in seen:
                seen.append(self.feature_names[int(index)])
        return tuple(seen)


def feature_matrix(rows: Sequence[Mapping[str, float]], feature_names: Sequence[str]) -> np.ndarray:
    """The rows as a matrix in `feature_names`' order; a row without a finite value for one
    of them is refused, naming the row and the feature."""
    matrix = np.empty((len(rows), len(feature_names)))
    for i, row in enumerate(rows):
        for j, name in enumerate(feature_names):
            value = row.get(name)
            if not isinstance(value, int | float) or not np.isfinite(value):
                raise TreeInputError(f"feature row {i}: {name!r} is {value!r}, not a finite number")
            matrix[i, j] = float(value)
    return matrix


def fit_tree(rows: Sequence[Mapping[str, float]], labels: Sequence[str], feature_names: Sequence[str],
             depth: int = DEFAULT_DEPTH) -> FittedTree:
    """A depth-limited tree (information gain) predicting `labels` from the rows' features."""
    if len(rows) != len(labels):
        raise TreeInputError(f"{len(rows)} feature rows but {len(labels)} labels")
    if len(set(labels)) < 2:
        raise TreeInputError(f"the labels have {len(set(labels))} class(es): a tree needs at least two")
    from sklearn.model_selection import cross_val_score
    from sklearn.tree import DecisionTreeClassifier

    x = feature_matrix(rows, feature_names)
    y = np.array(labels)

    def new_tree() -> Any:
        return DecisionTreeClassifier(max_depth=depth, criterion=CRITERION, random_state=0)

    tree = new_tree().fit(x, y)
    folds = min(5, min(int((y == c).sum()) for c in set(labels)))
    cv = float(np.mean(cross_val_score(new_tree(), x, y, cv=folds))) if folds >= 2 else None
    importances = sorted(zip(feature_names, (float(v) for v in tree.feature_importances_), strict=True),
                         key=lambda kv: -kv[1])
    return FittedTree(tree=tree, feature_names=tuple(feature_names), classes=tuple(str(c) for c in tree.classes_),
                      importances=tuple((n, v) for n, v in importances if v > 0),
                      training_accuracy=float(tree.score(x, y)), cv_accuracy=cv, folds=folds)
