"""The throughput decision tree (000 §6.2) on fixed data: it splits first on the feature that
separates the classes, whatever that feature is, and refuses rows it cannot use."""

from __future__ import annotations

import numpy as np
import pytest

from protolab.report.decision_tree import FEATURES_000, TreeInputError, fit_tree, throughput_class_000


def _rows(separating: str, seed: int) -> tuple[list[dict[str, float]], list[str]]:
    """120 transfers whose every 000 feature is noise except `separating`, which alone sets the
    throughput: the class is t0, t10 or t20 as the feature's value is in [0, 1), [1, 2) or [2, 3)."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i in range(120):
        row = {name: float(rng.uniform(0, 3)) for name in FEATURES_000}
        level = i % 3
        row[separating] = level + float(rng.uniform(0.05, 0.95))
        rows.append(row)
        labels.append(throughput_class_000(5.0 + 10 * level + float(rng.uniform(-4, 4))))
    return rows, labels


@pytest.mark.parametrize("separating", ["mean cwnd", "delay variation", "server burstiness"])
def test_the_tree_splits_first_on_the_separating_feature(separating: str) -> None:
    rows, labels = _rows(separating, seed=7)
    fitted = fit_tree(rows, labels, FEATURES_000)
    assert fitted.root_feature == separating
    assert fitted.split_features() == (separating,), "two thresholds of one feature separate three classes"
    assert fitted.classes == ("t0", "t10", "t20")
    assert fitted.importances[0][0] == separating and fitted.importances[0][1] == pytest.approx(1.0)
    assert fitted.training_accuracy == 1.0
    assert fitted.folds == 5 and fitted.cv_accuracy is not None and fitted.cv_accuracy >= 0.95


def test_noise_alone_predicts_worse_than_the_separating_feature() -> None:
    rows, labels = _rows("mean cwnd", seed=11)
    without = [name for name in FEATURES_000 if name != "mean cwnd"]
    fitted = fit_tree(rows, labels, without)
    assert fitted.root_feature != "mean cwnd"
    assert fitted.cv_accuracy is not None and fitted.cv_accuracy < 0.6  # three classes: chance is 1/3


def test_throughput_classes_are_000s_10_mbit_bins() -> None:
    assert [throughput_class_000(v) for v in (0.0, 9.99, 10.0, 21.6, 62.0)] == ["t0", "t0", "t10", "t20", "t60"]
    with pytest.raises(TreeInputError, match="throughput -1"):
        throughput_class_000(-1.0)


def test_000s_features_are_its_list() -> None:
    # 000 §6.2.1: items 1-10 (1-3 for server and client) and the four state frequencies of item 11.
    assert len(FEATURES_000) == 17 and len(set(FEATURES_000)) == 17
    assert {"mean cwnd", "cwnd variation", "mean delay", "delay variation", "out of order", "ACK freq"} <= set(FEATURES_000)


def test_unusable_rows_are_refused_naming_the_feature() -> None:
    rows, labels = _rows("mean cwnd", seed=3)
    rows[4] = {**rows[4], "delay variation": float("nan")}
    with pytest.raises(TreeInputError, match="row 4: 'delay variation'"):
        fit_tree(rows, labels, FEATURES_000)
    del rows[4]["delay variation"]
    with pytest.raises(TreeInputError, match="row 4: 'delay variation' is None"):
        fit_tree(rows, labels, FEATURES_000)
    with pytest.raises(TreeInputError, match="at least two"):
        fit_tree(rows[:3], ["t0"] * 3, FEATURES_000)
    with pytest.raises(TreeInputError, match="3 feature rows but 2 labels"):
        fit_tree(rows[:3], ["t0", "t10"], FEATURES_000)
