"""Classifier benchmark (issue 11's targets): prediction >= 1 M flows/s and training on 1 M flows
in under a minute, for the Random Forest and the C4.5-like tree with their default parameters
(docs/traffic.md, "Classifier"), on synthetic labelled flows shaped like 000 Fig. 3.3.

Run: .venv/bin/python benches/traffic_classify.py [--flows 1000000] [--jobs 2] [--repeat 3]
     [--algorithm rf --algorithm c45 ...] [--sweep] [--out target/bench/traffic_classify.json]

Two files of `--flows` flows each (seeds 1 and 2, the generator of tests/test_traffic_classify.py)
are written as Parquet; every algorithm trains on the first and predicts the second. Reported:
training time; prediction throughput on the feature matrix (median of `--repeat`); accuracy on the
second file; the end-to-end `classify predict` throughput (read, features, predict, write Parquet).
References measured in the same invocation: DuckDB reading the same flows into the feature matrix,
and sklearn's DummyClassifier predicting it; ratios are prediction rate / reference rate.
`--sweep` also trains forests of other sizes (the trade-off between accuracy and speed).
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
from sklearn.dummy import DummyClassifier

from protolab import __version__
from protolab.run import provenance
from protolab.traffic.classify import (
    ALGORITHM_NAMES,
    ALGORITHMS,
    DEFAULT_PARAMS,
    load_model,
    predict_file,
    save_model,
    train,
)
from protolab.traffic.classify_models import predict_labels
from protolab.traffic.features import SEVEN_FEATURES, feature_matrix, read_flows

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "target" / "bench" / "traffic_classify.json"
PREDICT_TARGET = 1_000_000  # flows/s
TRAIN_TARGET_S = 60.0  # for 1 M flows
# Logs are not terminals: give the table room.
_WIDTH = None if sys.stdout.isatty() else 140
console = Console(stderr=True, width=_WIDTH)
# Forests of the sweep: (n_estimators, max_depth, min_samples_leaf); the first is the default.
SWEEP = [(10, 20, 5), (5, 20, 5), (20, 20, 5), (10, 16, 10), (10, None, 1), (30, None, 1), (50, None, 1)]


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("test_traffic_classify", ROOT / "tests" / "test_traffic_classify.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _median_time(fn: Any, repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def bench_model(algorithm: str, params: dict[str, Any] | None, train_path: Path, X_test: np.ndarray,
                y_test: np.ndarray, jobs: int, repeat: int) -> dict[str, Any]:
    started = time.perf_counter()
    model = train(train_path, algorithm=algorithm, n_jobs=jobs, params=params)
    wall = time.perf_counter() - started
    seconds, predicted = _median_time(lambda: predict_labels(model.estimator, X_test, jobs), repeat)
    tree_info = {}
    estimators = getattr(model.estimator, "estimators_", None) or (
        [model.estimator] if hasattr(model.estimator, "tree_") and hasattr(model.estimator.tree_, "node_count") else [])
    if estimators:
        tree_info = {"trees": len(estimators), "mean_depth": float(np.mean([e.get_depth() for e in estimators])),
                     "mean_nodes": float(np.mean([e.tree_.node_count for e in estimators]))}
    return {"algorithm": algorithm, "params": model.params, "fit_seconds": model.training["fit_seconds"],
            "train_wall_seconds": round(wall, 3), "predict_seconds": seconds,
            "predict_flows_per_s": len(X_test) / seconds, "accuracy": float((predicted == y_test).mean()),
            **tree_info, "model": model}


def main(
    flows: Annotated[int, typer.Option(min=10_000, help="Flows to train on and to predict.")] = 1_000_000,
    jobs: Annotated[int, typer.Option(min=1, help="Threads (n_jobs) for training and prediction.")] = 2,
    repeat: Annotated[int, typer.Option(min=1, max=20, help="Prediction repetitions; the median counts.")] = 3,
    algorithm: Annotated[list[str] | None, typer.Option(help="Algorithms (default: rf, c45).")] = None,
    sweep: Annotated[bool, typer.Option(help="Also train the forests of SWEEP (minutes).")] = False,
    out: Annotated[Path, typer.Option(help="Result JSON.")] = DEFAULT_OUT,
) -> None:
    algorithms = algorithm or ["rf", "c45"]
    bad = [a for a in algorithms if a not in ALGORITHMS]
    if bad:
        raise typer.BadParameter(f"unknown algorithm(s) {', '.join(bad)}")
    gen = _generator()
    with tempfile.TemporaryDirectory(prefix="pl-bench-classify-") as tmp:
        tmpdir = Path(tmp)
        console.print(f"writing {flows:,} + {flows:,} synthetic flows")
        train_path = gen.write_flows(tmpdir / "train.parquet", gen.labelled_flows(flows, seed=1))
        test_path = gen.write_flows(tmpdir / "test.parquet", gen.labelled_flows(flows, seed=2))

        # Reference 1: DuckDB reading the flows into the feature matrix.
        read_s, (data, X_test) = _median_time(
            lambda: (d := read_flows(test_path, SEVEN_FEATURES, need_labels=True), feature_matrix(d, SEVEN_FEATURES)),
            repeat)
        y_test = data.labels.astype(str)
        # Reference 2: sklearn's DummyClassifier (prior) predicting the same matrix.
        dummy = DummyClassifier(strategy="prior").fit(X_test[:1000], y_test[:1000])
        dummy_s, _ = _median_time(lambda: dummy.predict(X_test), repeat)
        references = {"duckdb_read_flows_per_s": flows / read_s, "duckdb_read_seconds": read_s,
                      "dummy_predict_flows_per_s": flows / dummy_s, "dummy_predict_seconds": dummy_s}

        rows: list[dict[str, Any]] = []
        for a in algorithms:
            console.print(f"{ALGORITHM_NAMES[a]}: train on {flows:,}, predict {flows:,}")
            row = bench_model(a, None, train_path, X_test, y_test, jobs, repeat)
            model = row.pop("model")
            save_model(model, tmpdir / "models", a)
            loaded = load_model(tmpdir / "models" / f"{a}.json")
            e2e_s, _ = _median_time(lambda m=loaded: predict_file(m, test_path, tmpdir / "pred.parquet", n_jobs=jobs),
                                    repeat)
            row.update({"label": f"{a} (default)", "end_to_end_seconds": e2e_s, "end_to_end_flows_per_s": flows / e2e_s,
                        "model_bytes": (tmpdir / "models" / f"{a}.joblib").stat().st_size})
            rows.append(row)

        sweep_rows: list[dict[str, Any]] = []
        if sweep:
            for n_estimators, max_depth, leaf in SWEEP:
                params = {"n_estimators": n_estimators, "max_depth": max_depth, "min_samples_leaf": leaf}
                console.print(f"sweep: forest {params}")
                row = bench_model("rf", params, train_path, X_test, y_test, jobs, repeat)
                row.pop("model")
                row["label"] = f"rf {n_estimators} trees, depth {max_depth or 'any'}, leaf {leaf}"
                sweep_rows.append(row)

    read_rate = references["duckdb_read_flows_per_s"]
    dummy_rate = references["dummy_predict_flows_per_s"]
    table = Table(title=f"classifier on {flows:,} synthetic flows, {jobs} threads (targets: train < "
                        f"{TRAIN_TARGET_S:.0f} s, predict >= {PREDICT_TARGET:,} flows/s)")
    for column in ("model", "train s", "predict flows/s", "x DuckDB read", "x Dummy", "accuracy", "end-to-end flows/s",
                   "targets"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for row in rows + sweep_rows:
        ok = row["fit_seconds"] < TRAIN_TARGET_S and row["predict_flows_per_s"] >= PREDICT_TARGET
        e2e = row.get("end_to_end_flows_per_s")
        table.add_row(row["label"], f"{row['fit_seconds']:.1f}", f"{row['predict_flows_per_s']:,.0f}",
                      f"{row['predict_flows_per_s'] / read_rate:.2f}", f"{row['predict_flows_per_s'] / dummy_rate:.4f}",
                      f"{row['accuracy']:.2%}", "-" if e2e is None else f"{e2e:,.0f}",
                      "[green]met[/]" if ok else "[red]missed[/]")
    Console(width=_WIDTH).print(table)
    Console(width=_WIDTH).print(f"references: DuckDB reads the flows into features at {read_rate:,.0f} flows/s "
                    f"({references['duckdb_read_seconds']:.2f} s); DummyClassifier predicts {dummy_rate:,.0f} flows/s")
    for row in rows + sweep_rows:
        row["predict_ratio_to_duckdb_read"] = row["predict_flows_per_s"] / read_rate
        row["predict_ratio_to_dummy"] = row["predict_flows_per_s"] / dummy_rate
        row["targets_met"] = bool(row["fit_seconds"] < TRAIN_TARGET_S and row["predict_flows_per_s"] >= PREDICT_TARGET)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"schema": "protolab.bench.traffic_classify", "schema_version": 1, "protolab_version": __version__,
              "created_unix_ns": time.time_ns(),
              "config": {"flows": flows, "jobs": jobs, "repeat": repeat, "statistic": "median", "features": SEVEN_FEATURES,
                         "defaults": {a: DEFAULT_PARAMS[a] for a in algorithms},
                         "targets": {"predict_flows_per_s": PREDICT_TARGET, "train_seconds": TRAIN_TARGET_S}},
              "environment": provenance.environment({}), "references": references, "results": rows,
              "sweep": sweep_rows}
    out.write_text(json.dumps(report, indent=2, default=str))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(typer.run(main))
