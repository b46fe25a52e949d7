"""The classifier's learning curve (000 §3.2.4) and its speed against data size (000 §3.2.8,
Fig. 3.7), on synthetic labelled flows shaped like 000 Fig. 3.3 (the generator of
tests/test_traffic_classify.py). Curves and ratios, not timed tests: nothing here passes or fails.

Run: .venv/bin/python benches/traffic_learning.py [--train-flows 200000] [--test-flows 100000]
     [--algorithm rf --algorithm c45] [--repeat 3] [--speed] [--sizes 1000,10000,100000]
     [--out target/bench/traffic_learning.json]
     .venv/bin/python benches/traffic_learning.py --corpus RESULTS/flows.parquet [--algorithm ...]

`--corpus` measures the lab's labelled corpus (`protolab traffic corpus`, e.g. of
specs/traffic-corpus-10x.toml) instead, with the analyses `protolab reproduce` judges
(reproduce.passive): per algorithm the 10-fold CV's accuracy and macro-F1 (median over the folds,
order-statistic 95% interval), leave-one-page-out (each page held out in turn: its accuracy and
macro-F1; median over the pages with its interval, and pooled over the flows), the hold-out of
each link-condition value, and the learning curve (10 draws, each share tested on the draw's
held-out 30%; the median of the per-draw ratios to 100%).

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
from collections import Counter
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from protolab import __version__
from protolab.reproduce import passive
from protolab.reproduce.claims import CONFIDENCE, median_interval
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


def read_corpus(path: Path) -> list[dict[str, Any]]:
    """The labelled corpus' flows as the passive analyses take them (one dict per flow)."""
    import duckdb

    with duckdb.connect() as con:
        cursor = con.execute("SELECT * FROM read_parquet(?)", [str(path)])
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def median_ci(values: list[float]) -> dict[str, Any]:
    """The median and its order-statistic 95% interval (None below 6 values), as the claims' Median."""
    interval = median_interval(np.array(values, dtype=float), CONFIDENCE) if values else None
    return {"n": len(values), "median": statistics.median(values) if values else None,
            "low": interval[0] if interval else None, "high": interval[1] if interval else None}


def corpus_rows(flows: list[dict[str, Any]], algorithms: list[str]) -> dict[str, Any]:
    """Per algorithm: the CV (accuracy, macro-F1 per fold), leave-one-page-out and per-condition
    hold-out rows (reproduce.passive) with their medians and intervals, and the learning curve."""
    folds = passive.cv_folds(flows, algorithms)
    pages = passive.group_holdout(flows, passive.PAGE_COLUMN, algorithms)
    conditions = [r for column in passive.STABILITY_COLUMNS for r in passive.group_holdout(flows, column, algorithms)]
    summary = []
    for a in algorithms:
        own_pages = [r for r in pages if r["algorithm"] == a]
        tested = sum(r["flows"] for r in own_pages)
        summary.append({
            "algorithm": a,
            "cv_accuracy": median_ci([r["accuracy"] for r in folds if r["algorithm"] == a]),
            "cv_macro_f1": median_ci([r["macro_f1"] for r in folds if r["algorithm"] == a]),
            "page_accuracy": median_ci([r["accuracy"] for r in own_pages]),
            "page_macro_f1": median_ci([r["macro_f1"] for r in own_pages]),
            "page_accuracy_pooled": sum(r["accuracy"] * r["flows"] for r in own_pages) / tested if tested else None,
            "condition_accuracy": median_ci([r["accuracy"] for r in conditions if r["algorithm"] == a])})
    learning = []
    for a in algorithms:
        draws = passive.learning_curve(flows, algorithm=a)
        full = {r["repetition"]: r["accuracy"] for r in draws if r["train_pct"] == 100}
        for share in passive.TRAINING_SHARES_PCT:
            own = [r for r in draws if r["train_pct"] == share]
            learning.append({"algorithm": a, "train_pct": share, "train_flows": statistics.median(r["train_flows"] for r in own),
                             "accuracy": median_ci([r["accuracy"] for r in own]),
                             "ratio_to_full": median_ci([r["accuracy"] / full[r["repetition"]] for r in own])})
    return {"summary": summary, "folds": folds, "pages": pages, "conditions": conditions, "learning_curve": learning}


def _ci(value: dict[str, Any]) -> str:
    if value["median"] is None:
        return "-"
    if value["low"] is None:
        return f"{value['median']:.3f} (n={value['n']})"
    return f"{value['median']:.3f} [{value['low']:.3f}, {value['high']:.3f}]"


def _print_corpus(rows: dict[str, Any]) -> None:
    table = Table(title="Lab corpus: 10-fold CV, leave-one-page-out, per-condition hold-out (median [95% CI])")
    for column in ("algorithm", "CV accuracy", "CV macro-F1", "LOO page accuracy", "LOO page macro-F1",
                   "LOO pooled", "condition hold-out"):
        table.add_column(column, justify="right")
    for r in rows["summary"]:
        pooled = "-" if r["page_accuracy_pooled"] is None else f"{r['page_accuracy_pooled']:.3f}"
        table.add_row(r["algorithm"], _ci(r["cv_accuracy"]), _ci(r["cv_macro_f1"]), _ci(r["page_accuracy"]),
                      _ci(r["page_macro_f1"]), pooled, _ci(r["condition_accuracy"]))
    console.print(table)
    table = Table(title="Leave-one-page-out: accuracy / macro-F1 of each page held out")
    table.add_column("page")
    algorithms = list(dict.fromkeys(r["algorithm"] for r in rows["pages"]))
    for a in algorithms:
        table.add_column(a, justify="right")
    for page in sorted({str(r["value"]) for r in rows["pages"]}):
        cells = {r["algorithm"]: f"{r['accuracy']:.3f} / {r['macro_f1']:.3f} ({r['flows']})"
                 for r in rows["pages"] if str(r["value"]) == page}
        table.add_row(page, *(cells.get(a, "-") for a in algorithms))
    console.print(table)
    table = Table(title="Learning curve on the corpus (median over 10 draws; ratio to 100% paired per draw)")
    for column in ("algorithm", "share", "flows", "accuracy", "x 100%"):
        table.add_column(column, justify="right")
    for r in rows["learning_curve"]:
        table.add_row(r["algorithm"], f"{r['train_pct']}%", f"{r['train_flows']:,.0f}", _ci(r["accuracy"]),
                      _ci(r["ratio_to_full"]))
    console.print(table)


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
    out: Annotated[Path | None, typer.Option(help="Result JSON (default target/bench/traffic_learning[_corpus].json).")
                   ] = None,
    corpus: Annotated[Path | None, typer.Option(help="A labelled lab corpus (flows.parquet of protolab traffic "
                                                      "corpus) to measure instead of synthetic flows.")] = None,
) -> None:
    algorithms = algorithm or (list(passive.CLASSIFIER_ALGORITHMS) if corpus else ["rf", "c45"])
    bad = [a for a in algorithms if a not in ALGORITHMS]
    if bad:
        raise typer.BadParameter(f"unknown algorithm(s) {', '.join(bad)}")
    if corpus is not None:
        _corpus_main(corpus, algorithms, out or DEFAULT_OUT.with_name("traffic_learning_corpus.json"))
        return
    out = out or DEFAULT_OUT
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


def _corpus_main(corpus: Path, algorithms: list[str], out: Path) -> None:
    if not corpus.is_file():
        raise typer.BadParameter(f"--corpus: {corpus} is not a file (protolab traffic corpus RESULTS writes "
                                 "RESULTS/flows.parquet)")
    flows = read_corpus(corpus)
    labelled = passive.labelled(flows)
    balance = dict(sorted(Counter(str(f["protocol"]) for f in labelled).items()))
    console.print(f"{corpus}: {len(flows):,} flows, {len(labelled):,} labelled {balance}, "
                  f"{len({f.get('page') for f in labelled})} pages")
    started = time.perf_counter()
    rows = corpus_rows(flows, algorithms)
    _print_corpus(rows)
    report = {"schema": "protolab.bench.traffic_learning_corpus", "schema_version": 1, "protolab_version": __version__,
              "config": {"corpus": str(corpus), "algorithms": algorithms, "folds": passive.FOLDS,
                         "learning_repetitions": passive.LEARNING_REPETITIONS},
              "corpus": {"flows": len(flows), "labelled_flows": len(labelled), "class_balance": balance},
              "environment": provenance.environment({}), "seconds": time.perf_counter() - started, **rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    typer.run(main)
