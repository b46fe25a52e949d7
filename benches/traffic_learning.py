"""The classifier's learning curve (000 §3.2.4) and its speed against data size (000 §3.2.8,
Fig. 3.7), on synthetic labelled flows shaped like 000 Fig. 3.3 (the generator of
tests/test_traffic_classify.py). Curves and ratios, not timed tests: nothing here passes or fails.

Run: .venv/bin/python benches/traffic_learning.py [--train-flows 200000] [--test-flows 100000]
     [--algorithm rf --algorithm c45] [--repeat 3] [--speed] [--sizes 1000,10000,100000]
     [--out target/bench/traffic_learning.json]

Learning curve: every algorithm trained on 1, 5, 10, 50 and 100% of `--train-flows` (a seeded
stratified sample per repetition; seed 1), tested on `--test-flows` other flows (seed 2); per
share the median accuracy over `--repeat` samples and its ratio to the accuracy at 100%. 000's
claim: accuracy improves up to 100 K training flows and stalls beyond 500 K (of 1 M), so a
limited set suffices.

`--speed` (Fig. 3.7): per algorithm and size of `--sizes`, training on that many flows (seconds,
flows/s) and predicting that many (flows/s); the ratios are each throughput over the same
algorithm's at the smallest size (1: it scales linearly) and each algorithm's prediction rate
over the forest's at the same size (000: C4.5 the fastest classifier, the forest the slowest).
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from protolab import __version__
from protolab.run import provenance
from protolab.traffic.classify_models import ALGORITHMS, make_estimator, predict_labels
from protolab.traffic.features import SEVEN_FEATURES, feature_matrix, read_flows

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "target" / "bench" / "traffic_learning.json"
SHARES_PCT = (1, 5, 10, 50, 100)
_WIDTH = None if sys.stdout.isatty() else 140
console = Console(stderr=True, width=_WIDTH)


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("test_traffic_classify", ROOT / "tests" / "test_traffic_classify.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _matrix(gen: Any, directory: Path, name: str, flows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seven-feature matrix and labels of `flows` synthetic flows, through Parquet as `classify` reads them."""
    path = gen.write_flows(directory / f"{name}.parquet", gen.labelled_flows(flows, seed=seed))
    data = read_flows(path, SEVEN_FEATURES, need_labels=True)
    return feature_matrix(data, SEVEN_FEATURES), data.labels.astype(str)


def _stratified(y: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    """`share` of the rows, class by class (at least one of every class)."""
    chosen = [rng.choice(np.flatnonzero(y == label), size=max(1, round(share * int((y == label).sum()))), replace=False)
              for label in np.unique(y)]
    return np.sort(np.concatenate(chosen))


def learning_rows(X: np.ndarray, y: np.ndarray, X_test: np.ndarray, y_test: np.ndarray, algorithms: list[str],
                  repeat: int, jobs: int) -> list[dict[str, Any]]:
    rows = []
    for algorithm in algorithms:
        for share in SHARES_PCT:
            accuracies, flows = [], 0
            for repetition in range(1 if share == 100 else repeat):
                sample = _stratified(y, share / 100, np.random.default_rng(repetition))
                model = make_estimator(algorithm, seed=repetition, n_jobs=jobs).fit(X[sample], y[sample])
                accuracies.append(float((predict_labels(model, X_test, jobs) == y_test).mean()))
                flows = len(sample)
            rows.append({"algorithm": algorithm, "train_pct": share, "train_flows": flows,
                         "accuracy": statistics.median(accuracies), "accuracy_min": min(accuracies),
                         "accuracy_max": max(accuracies)})
        full = next(r["accuracy"] for r in rows if r["algorithm"] == algorithm and r["train_pct"] == 100)
        for row in rows:
            if row["algorithm"] == algorithm:
                row["ratio_to_full"] = row["accuracy"] / full
    return rows


def speed_rows(X: np.ndarray, y: np.ndarray, algorithms: list[str], sizes: list[int], jobs: int
               ) -> list[dict[str, Any]]:
    rows = []
    for algorithm in algorithms:
        for size in sizes:
            sample = _stratified(y, min(1.0, size / len(y)), np.random.default_rng(0))
            started = time.perf_counter()
            model = make_estimator(algorithm, seed=0, n_jobs=jobs).fit(X[sample], y[sample])
            train_s = time.perf_counter() - started
            test = np.resize(np.arange(len(y)), size)  # `size` rows to classify (repeating the data if needed)
            started = time.perf_counter()
            predict_labels(model, X[test], jobs)
            predict_s = time.perf_counter() - started
            rows.append({"algorithm": algorithm, "size": size, "train_flows": len(sample), "train_seconds": train_s,
                         "train_flows_per_s": len(sample) / train_s, "predict_seconds": predict_s,
                         "predict_flows_per_s": size / predict_s})
    for row in rows:
        smallest = next(r for r in rows if r["algorithm"] == row["algorithm"] and r["size"] == min(sizes))
        forest = next((r for r in rows if r["algorithm"] == "rf" and r["size"] == row["size"]), None)
        row["train_rate_vs_smallest"] = row["train_flows_per_s"] / smallest["train_flows_per_s"]
        row["predict_rate_vs_smallest"] = row["predict_flows_per_s"] / smallest["predict_flows_per_s"]
        row["predict_rate_vs_forest"] = row["predict_flows_per_s"] / forest["predict_flows_per_s"] if forest else None
    return rows


def _print(learning: list[dict[str, Any]], speed: list[dict[str, Any]]) -> None:
    table = Table(title="Learning curve (000 §3.2.4): accuracy on held-out flows against the training share")
    for column in ("algorithm", "share", "flows", "accuracy (min-max)", "x 100%"):
        table.add_column(column, justify="right")
    for r in learning:
        table.add_row(r["algorithm"], f"{r['train_pct']}%", f"{r['train_flows']:,}",
                      f"{r['accuracy']:.2%} ({r['accuracy_min']:.2%}-{r['accuracy_max']:.2%})", f"{r['ratio_to_full']:.3f}")
    console.print(table)
    if not speed:
        return
    table = Table(title="Speed against data size (000 Fig. 3.7)")
    for column in ("algorithm", "size", "train s", "train flows/s", "x smallest", "predict flows/s", "x smallest",
                   "x forest"):
        table.add_column(column, justify="right")
    for r in speed:
        vs_forest = "-" if r["predict_rate_vs_forest"] is None else f"{r['predict_rate_vs_forest']:.2f}"
        table.add_row(r["algorithm"], f"{r['size']:,}", f"{r['train_seconds']:.2f}", f"{r['train_flows_per_s']:,.0f}",
                      f"{r['train_rate_vs_smallest']:.2f}", f"{r['predict_flows_per_s']:,.0f}",
                      f"{r['predict_rate_vs_smallest']:.2f}", vs_forest)
    console.print(table)


def main(
    train_flows: Annotated[int, typer.Option(min=1000, help="Flows of the training set (100%).")] = 200_000,
    test_flows: Annotated[int, typer.Option(min=1000, help="Held-out flows the curve is measured on.")] = 100_000,
    algorithm: Annotated[list[str] | None, typer.Option(help="Algorithms (default: rf, c45).")] = None,
    repeat: Annotated[int, typer.Option(min=1, max=20, help="Samples per share below 100%; the median counts.")] = 3,
    speed: Annotated[bool, typer.Option(help="Also time training and prediction against data size (Fig. 3.7).")] = False,
    sizes: Annotated[str, typer.Option(help="Sizes for --speed, comma-separated.")] = "1000,10000,100000",
    jobs: Annotated[int, typer.Option(min=1, help="Threads (n_jobs).")] = 2,
    out: Annotated[Path, typer.Option(help="Result JSON.")] = DEFAULT_OUT,
) -> None:
    algorithms = algorithm or ["rf", "c45"]
    bad = [a for a in algorithms if a not in ALGORITHMS]
    if bad:
        raise typer.BadParameter(f"unknown algorithm(s) {', '.join(bad)}")
    try:
        size_list = sorted({int(s) for s in sizes.split(",") if s.strip()})
    except ValueError:
        raise typer.BadParameter(f"--sizes: {sizes!r} is not a comma-separated list of integers") from None
    gen = _generator()
    with tempfile.TemporaryDirectory(prefix="pl-bench-learning-") as tmp:
        console.print(f"writing {train_flows:,} + {test_flows:,} synthetic flows")
        X, y = _matrix(gen, Path(tmp), "train", max(train_flows, max(size_list) if speed else 0), seed=1)
        X_test, y_test = _matrix(gen, Path(tmp), "test", test_flows, seed=2)
    learning = learning_rows(X[:train_flows], y[:train_flows], X_test, y_test, algorithms, repeat, jobs)
    speed_table = speed_rows(X, y, algorithms, size_list, jobs) if speed else []
    _print(learning, speed_table)
    report = {"schema": "protolab.bench.traffic_learning", "schema_version": 1, "protolab_version": __version__,
              "config": {"train_flows": train_flows, "test_flows": test_flows, "algorithms": algorithms,
                         "repeat": repeat, "sizes": size_list if speed else [], "jobs": jobs},
              "environment": provenance.environment({}), "learning_curve": learning, "speed": speed_table}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    typer.run(main)
