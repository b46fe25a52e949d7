"""The HTTP-version classifier of 000 §3.2 (`protolab traffic classify`): flows -> h1/h2/h3/...
from NetFlow-like features only (docs/traffic.md, "Classifier").

Library API: `train`, `save_model`, `load_model`, `TrainedModel.predict_data`, `predict_file`,
`cross_validate`, `evaluate`, `stability`, `classification_metrics` (the model and its files live in
protolab.traffic.model_files, the estimators in classify_models). CLI: `register(app)` adds
`classify train | evaluate | predict` to the `protolab traffic` sub-app. Bad input raises
`ClassifyError` (a ProtolabError); the commands turn it into a message and exit status 2.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape

from protolab.traffic.classify_models import (
    ALGORITHM_NAMES,
    ALGORITHMS,
    DEFAULT_PARAMS,
    classification_metrics,
    cross_validate,
    leave_one_group_out,
    make_estimator,
    per_domain_accuracy,
)
from protolab.traffic.features import (
    ALL_FEATURES,
    FEATURES_VERSION,
    SEVEN_FEATURES,
    ClassifyError,
    FeatureRanking,
    FlowData,
    check_feature_names,
    describe_parquet,
    feature_matrix,
    file_bytes_basis,
    flow_columns_for,
    rank_features,
    read_flows,
)
from protolab.traffic.model_files import TrainedModel, atomic_paths, load_model, save_model
from protolab.traffic.schema import SCHEMA, SCHEMA_VERSION

__all__ = [
    "ALGORITHMS", "ClassifyError", "TrainedModel", "classification_metrics", "cross_validate", "evaluate",
    "load_model", "make_estimator", "predict_file", "register", "save_model", "stability", "train",
]

EVALUATION_SCHEMA = "protolab.traffic.evaluation"
EVALUATION_SCHEMA_VERSION = 1
FEATURE_SETS = ("seven", "all", "selected")


def _labels(data: FlowData) -> np.ndarray:
    assert data.labels is not None
    return np.asarray(data.labels, dtype=str)


def stratified_subset(y: np.ndarray, max_rows: int | None, seed: int) -> np.ndarray | None:
    """Row indices of a stratified sample of at most `max_rows` rows (None: keep everything)."""
    if max_rows is None or len(y) <= max_rows:
        return None
    from sklearn.model_selection import train_test_split

    keep, _ = train_test_split(np.arange(len(y)), train_size=max_rows, stratify=y, random_state=seed)
    return np.sort(keep)


def _training_data(flows: Path | str | FlowData, features: list[str], bytes_basis: str, max_flows: int | None,
                   seed: int, want_domains: bool = False) -> FlowData:
    data = flows if isinstance(flows, FlowData) else read_flows(
        flows, features, bytes_basis=bytes_basis, need_labels=True, want_domains=want_domains)
    total = data.n
    data = data.labelled()
    unlabelled = total - data.n
    keep = stratified_subset(_labels(data), max_flows, seed)
    if keep is not None:
        data = data.subset(keep)
    data.info = {**data.info, "unlabelled_skipped": unlabelled, "sampled_to": None if keep is None else data.n}
    classes, counts = np.unique(_labels(data), return_counts=True)
    if len(classes) < 2:
        raise ClassifyError(f"{data.path}: field 'protocol' has a single class ({classes[0]}): nothing to tell apart")
    data.info["class_counts"] = {str(c): int(n) for c, n in zip(classes, counts, strict=True)}
    data.info["training_flows"] = data.n
    return data


def _check_feature_set(feature_set: str | list[str]) -> None:
    if isinstance(feature_set, list):
        check_feature_names(feature_set)
    elif feature_set not in FEATURE_SETS:
        raise ClassifyError(f"feature set {feature_set!r}: expected one of {', '.join(FEATURE_SETS)}")


def _choose_features(feature_set: str | list[str],
                     data_for_selection: Callable[[], tuple[np.ndarray, np.ndarray, list[str]]],
                     seed: int) -> tuple[list[str], str, FeatureRanking | None]:
    _check_feature_set(feature_set)
    if isinstance(feature_set, list):
        check_feature_names(feature_set)
        return list(feature_set), "custom", None
    if feature_set == "seven":
        return list(SEVEN_FEATURES), "seven", None
    if feature_set == "all":
        return list(ALL_FEATURES), "all", None
    X, y, names = data_for_selection()
    ranking = rank_features(X, y, names, seed=seed)
    return list(ranking.selected), "selected", ranking


def train(flows: Path | str | FlowData, *, algorithm: str = "rf", feature_set: str | list[str] = "seven",
          bytes_basis: str = "auto", seed: int = 0, n_jobs: int = 2, params: dict[str, Any] | None = None,
          max_flows: int | None = None, name: str = "classifier") -> TrainedModel:
    """Fit one model on labelled flows (rows without a label are skipped)."""
    estimator = make_estimator(algorithm, seed=seed, n_jobs=n_jobs, params=params)
    _check_feature_set(feature_set)
    rankable = list(ALL_FEATURES)
    if feature_set == "selected" and not isinstance(flows, FlowData):
        # Rank whichever of the 17 the file can supply (e.g. no flag columns).
        flows, rankable = _read_for_evaluation(Path(flows), [], bytes_basis)
    read_features = ALL_FEATURES if feature_set == "all" else (
        feature_set if isinstance(feature_set, list) else SEVEN_FEATURES)
    data = _training_data(flows, list(read_features), bytes_basis, max_flows, seed)
    y = _labels(data)
    features, set_name, ranking = _choose_features(
        feature_set, lambda: (feature_matrix(data, rankable), y, rankable), seed)
    X = feature_matrix(data, features)
    started = time.perf_counter()
    estimator.fit(X, y)
    fit_s = time.perf_counter() - started
    training = {**data.info, "fit_seconds": round(fit_s, 3), "seed": seed, "n_jobs": n_jobs}
    if ranking is not None:
        training["feature_selection"] = ranking.to_json()
    return TrainedModel(estimator=estimator, algorithm=algorithm, features=features,
                        classes=[str(c) for c in estimator.classes_], bytes_basis=data.bytes_basis,
                        feature_set=set_name, params={**DEFAULT_PARAMS[algorithm], **(params or {})},
                        training=training, name=name)


# ----------------------------------------------------------------------------------------------
# Metrics, cross-validation, stability


def stability(model: TrainedModel, data: FlowData, *, n_jobs: int = 2, top_domains: int = 20) -> dict[str, Any]:
    """A model trained on one dataset, tested on another (000 §3.2.6-3.2.7)."""
    test = data.labelled()
    y = _labels(test)
    predicted = model.predict_data(test, n_jobs)
    result = classification_metrics(y, predicted, model.classes)
    result.update({"test_file": data.path, "train_file": model.training.get("file"), "algorithm": model.algorithm,
                   "unseen_classes": sorted(set(np.unique(y)) - set(model.classes)),
                   "per_domain": per_domain_accuracy(test.domains, y, predicted, top_domains)})
    return result


def _read_for_evaluation(path: Path, features: list[str], bytes_basis: str,
                         group_columns: tuple[str, ...] = ()) -> tuple[FlowData, list[str]]:
    """Read the model features plus whichever of the 17 candidates the file can supply (the
    ranking covers those)."""
    types = describe_parquet(path)
    basis = file_bytes_basis(path, bytes_basis)
    rankable = [f for f in ALL_FEATURES
                if all(c in types or (c == "duration_s" and {"first_ns", "last_ns"} <= set(types))
                       for c in flow_columns_for([f], basis))]
    if not rankable and not features:
        raise ClassifyError(f"{path}: none of the 17 candidate features can be computed (fields "
                            f"'duration_s', 'c2s_packets', 's2c_packets', ... are missing)")
    wanted = list(dict.fromkeys(features + rankable))
    try:
        data = read_flows(path, wanted, bytes_basis=bytes_basis, need_labels=True, want_domains=True,
                          group_columns=group_columns)
    except ClassifyError:
        # Optional columns (the ranking's) with NULLs must not stop an evaluation of the model's features.
        data = read_flows(path, features, bytes_basis=bytes_basis, need_labels=True, want_domains=True,
                          group_columns=group_columns)
        rankable = [f for f in rankable if f in features]
    return data, [f for f in ALL_FEATURES if f in rankable]


def evaluate(flows: Path | str, *, algorithms: Iterable[str] = ALGORITHMS, folds: int = 10,
             feature_set: str | list[str] = "seven", bytes_basis: str = "auto", seed: int = 0, n_jobs: int = 2,
             top_domains: int = 20, max_flows: int | None = None, test_on: Iterable[Path | str] = (),
             stability_by: Iterable[str] = (), rank: bool = True,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """000 §3.2 on one labelled dataset: feature ranking, k-fold CV of every algorithm, per-domain
    accuracy; for each `test_on` dataset, the stability of a model trained on all of this one; for
    each `stability_by` column, leave-one-value-out stability across its values."""
    say = progress or (lambda _msg: None)
    algorithms = list(algorithms)
    for a in algorithms:
        if a not in ALGORITHMS:
            raise ClassifyError(f"unknown algorithm {a!r}: expected one of {', '.join(ALGORITHMS)}")
    if folds < 2:
        raise ClassifyError(f"--cv {folds}: need at least 2 folds")
    path = Path(flows)
    _check_feature_set(feature_set)
    base_features = SEVEN_FEATURES if feature_set in ("seven", "selected") else (
        ALL_FEATURES if feature_set == "all" else list(feature_set))
    say(f"reading {path}")
    stability_by = list(dict.fromkeys(stability_by))
    raw, rankable = _read_for_evaluation(path, list(base_features), bytes_basis, tuple(stability_by))
    data = _training_data(raw, [], bytes_basis, max_flows, seed)
    y = _labels(data)
    ranking = None
    if rank or feature_set == "selected":
        say("ranking features")
        ranking = rank_features(feature_matrix(data, rankable), y, rankable, seed=seed)
    if feature_set == "selected":
        assert ranking is not None
        features, set_name = list(ranking.selected), "selected"
    else:
        features, set_name, _ = _choose_features(feature_set, lambda: (np.empty((0, 0)), y, []), seed)
    X = feature_matrix(data, features)
    results = {}
    for a in algorithms:
        say(f"{folds}-fold CV: {ALGORITHM_NAMES[a]}")
        results[a] = cross_validate(X, y, a, folds=folds, seed=seed, n_jobs=n_jobs, domains=data.domains,
                                    top_domains=top_domains, source=str(path))
    stab = []
    for other in test_on:
        other = Path(other)
        for a in algorithms:
            say(f"stability: {ALGORITHM_NAMES[a]} on {other}")
            model = train(data, algorithm=a, feature_set=features, bytes_basis=data.bytes_basis, seed=seed,
                          n_jobs=n_jobs)
            model.feature_set = set_name
            stab.append(stability(model, model.read(other, need_labels=True, want_domains=True), n_jobs=n_jobs,
                                  top_domains=top_domains))
    by_column: dict[str, dict[str, Any]] = {}
    for column in stability_by:
        by_column[column] = {}
        for a in algorithms:
            say(f"stability across {column}: {ALGORITHM_NAMES[a]}")
            by_column[column][a] = leave_one_group_out(X, y, data.groups[column], a, column=column, seed=seed,
                                                       n_jobs=n_jobs, source=str(path))
    return {
        "schema": EVALUATION_SCHEMA, "schema_version": EVALUATION_SCHEMA_VERSION,
        "created_unix_ns": time.time_ns(),
        "config": {"file": str(path), "folds": folds, "seed": seed, "n_jobs": n_jobs, "feature_set": set_name,
                   "features": features, "features_version": FEATURES_VERSION, "bytes_basis": data.bytes_basis,
                   "top_domains": top_domains, "max_flows": max_flows, "algorithms": algorithms,
                   "test_on": [str(p) for p in test_on], "stability_by": stability_by},
        "data": data.info,
        "feature_ranking": None if ranking is None else ranking.to_json(),
        "results": results,
        "stability": stab,
        "stability_by": by_column,
    }


def confusion_png(result: dict[str, Any], path: Path, title: str) -> None:
    """The confusion matrix normalized per true class (000 Fig. 3.5), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = result["confusion"]["labels"]
    norm = np.array(result["confusion"]["normalized"]) * 100
    counts = np.array(result["confusion"]["counts"])
    size = 1.2 + 0.9 * len(labels)
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    image = ax.imshow(norm, cmap="Blues", vmin=0, vmax=100)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("actual")
    for i in range(len(labels)):
        for j in range(len(labels)):
            ax.text(j, i, f"{norm[i, j]:.1f}%\n({counts[i, j]})", ha="center", va="center", fontsize=8,
                    color="white" if norm[i, j] > 60 else "black")
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, label="% of the actual class")
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)


def write_evaluation(report: dict[str, Any], directory: Path) -> list[Path]:
    """DIR/evaluation.json and DIR/confusion-<algorithm>.png, each written atomically."""
    if directory.exists() and not directory.is_dir():
        raise ClassifyError(f"{directory}: not a directory")
    targets = [directory / "evaluation.json"] + [directory / f"confusion-{a}.png" for a in report["results"]]
    try:
        with atomic_paths(targets) as temps:
            temps[0].write_text(json.dumps(report, indent=2) + "\n")
            for tmp, (a, result) in zip(temps[1:], report["results"].items(), strict=True):
                title = (f"{ALGORITHM_NAMES[a]}: {result['folds']}-fold CV, accuracy {result['accuracy']:.1%}\n"
                         f"{Path(report['config']['file']).name}, {result['flows']} flows")
                confusion_png(result, tmp, title)
    except OSError as exc:
        raise ClassifyError(f"{directory}: cannot write the evaluation ({exc.strerror or exc})") from exc
    return targets


def predict_file(model: TrainedModel, flows: Path | str, out: Path | str, *, n_jobs: int = 2) -> dict[str, Any]:
    """Classify every flow of FLOWS into OUT (Parquet): FLOWS' columns plus `predicted_protocol`,
    with the flow schema and the model in the file's key-value metadata. OUT appears only when
    complete. With labels in FLOWS, the result reports the accuracy."""
    import duckdb

    flows, out = Path(flows), Path(out)
    if out.exists() and out.is_dir():
        raise ClassifyError(f"{out}: is a directory, expected a Parquet file name")
    data = model.read(flows, want_labels=False)
    started = time.perf_counter()
    codes = model.predict_codes(data, n_jobs)
    predict_s = time.perf_counter() - started
    classes = list(model.classes)
    counts = np.bincount(codes, minlength=len(classes))
    summary: dict[str, Any] = {"file": str(flows), "out": str(out), "flows": data.n, "model": model.name,
                               "predict_seconds": round(predict_s, 6),
                               "predicted": {c: int(n) for c, n in zip(classes, counts, strict=True)}}
    types = describe_parquet(flows)
    keep = [c for c in types if c != "predicted_protocol"]
    src = str(flows).replace("'", "''")
    class_list = "[" + ", ".join("'" + c.replace("'", "''") + "'" for c in classes) + "]"
    cols = ", ".join(f'f."{c}"' for c in keep)
    joined = f"read_parquet('{src}') f POSITIONAL JOIN predictions p"
    try:
        with atomic_paths([out]) as (tmp,), duckdb.connect() as con:
            con.register("predictions", {"code": codes + 1})
            meta = {"schema": SCHEMA, "schema_version": str(SCHEMA_VERSION), "predicted_by": "protolab traffic "
                    "classify predict", "model": model.name, "model_algorithm": model.algorithm,
                    "model_sha256": model.training.get("model_sha256", ""), "model_features": ",".join(model.features),
                    "model_bytes_basis": model.bytes_basis}
            kv = ", ".join(f"{k}: '{str(v).replace(chr(39), chr(39) * 2)}'" for k, v in meta.items())
            con.execute(f"COPY (SELECT {cols}, ({class_list})[p.code] AS predicted_protocol FROM {joined}) "
                        f"TO '{str(tmp).replace(chr(39), chr(39) * 2)}' (FORMAT parquet, KV_METADATA {{{kv}}})")
            if types.get("protocol") == "VARCHAR":
                labelled, correct = con.execute(
                    f"SELECT count(f.protocol), count(*) FILTER (WHERE f.protocol = ({class_list})[p.code]) "
                    f"FROM {joined}").fetchone()
                if labelled:
                    summary["labelled_flows"] = int(labelled)
                    summary["accuracy"] = correct / labelled
                    unseen = con.execute(f"SELECT protocol, count(*) FROM read_parquet('{src}') WHERE protocol IS NOT "
                                         f"NULL AND NOT list_contains({class_list}, protocol) GROUP BY 1 "
                                         f"ORDER BY 2 DESC, 1").fetchall()
                    summary["unseen_classes"] = {str(c): int(n) for c, n in unseen}
    except (OSError, duckdb.Error) as exc:
        raise ClassifyError(f"{out}: cannot write the predictions ({str(exc).strip().splitlines()[0]})") from exc
    return summary


# ----------------------------------------------------------------------------------------------
# Command line


Algorithm = Annotated[str, typer.Option("--algorithm", "-a", help="rf, c45, nbtree or bayes.")]
Features = Annotated[str, typer.Option("--features", help="seven (000's), all (the 17 candidates) or selected "
                                                          "(CFS best-first on the training flows).")]
Bytes = Annotated[str, typer.Option("--bytes", help="Bytes basis: auto (IP bytes if every flow has them, else "
                                                    "payload bytes), ip or payload.")]
Jobs = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Threads for training and prediction.")]
Seed = Annotated[int, typer.Option("--seed", help="Random seed (folds, forests, sampling).")]
# Logs and CI output are not terminals: give tables room (as protolab.cli does).
_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120
_console = Console(width=_WIDTH)
_errors = Console(stderr=True, width=_WIDTH)


def _fail(exc: ClassifyError) -> typer.Exit:
    _errors.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def train_command(
    flows: Annotated[Path, typer.Argument(help="Labelled flows (Parquet, protolab.flows schema).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for NAME.joblib and NAME.json.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model name NAME (the files' stem).")] = "classifier",
    algorithm: Algorithm = "rf",
    features: Features = "seven",
    bytes_basis: Bytes = "auto",
    max_flows: Annotated[int | None, typer.Option("--max-flows", min=2,
                                                  help="Train on a stratified sample of at most N flows.")] = None,
    seed: Seed = 0,
    jobs: Jobs = 2,
) -> None:
    """Train one model on labelled flows and save it with its feature schema (NAME.joblib + NAME.json)."""
    try:
        trained = train(flows, algorithm=algorithm, feature_set=features, bytes_basis=bytes_basis, seed=seed,
                        n_jobs=jobs, max_flows=max_flows, name=model)
        paths = save_model(trained, out, model)
    except ClassifyError as exc:
        raise _fail(exc) from None
    t = trained.training
    _console.print(f"{ALGORITHM_NAMES[algorithm]} on {t['training_flows']} labelled flows of "
                   f"{escape(str(flows))} ({', '.join(f'{c} {n}' for c, n in t['class_counts'].items())}); "
                   f"{t['unlabelled_skipped']} unlabelled skipped; fit {t['fit_seconds']:.1f} s")
    _console.print(f"features ({trained.feature_set}, {trained.bytes_basis} bytes): {', '.join(trained.features)}")
    _console.print(f"wrote {escape(str(paths[0]))} and {escape(str(paths[1]))}")


def evaluate_command(
    flows: Annotated[Path, typer.Argument(help="Labelled flows (Parquet, protolab.flows schema).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for evaluation.json and confusion-*.png.")],
    cv: Annotated[int, typer.Option("--cv", min=2, max=100, help="Folds of the stratified cross-validation.")] = 10,
    algorithm: Annotated[list[str] | None, typer.Option(
        "--algorithm", "-a", help="An algorithm to evaluate (repeat; default: all four).")] = None,
    features: Features = "seven",
    bytes_basis: Bytes = "auto",
    test_on: Annotated[list[Path] | None, typer.Option(
        "--test-on", help="Stability: train on all of FLOWS, test on this labelled file (repeat).")] = None,
    stability_by: Annotated[list[str] | None, typer.Option(
        "--stability-by", help="Stability across the values of this column (e.g. the lab corpus' rtt_ms, "
                               "page): train on the other values, test on each (repeat).")] = None,
    top_domains: Annotated[int, typer.Option(
        "--top-domains", min=0, help="Accuracy per domain for the N domains (SNI) with the most flows.")] = 20,
    max_flows: Annotated[int | None, typer.Option(
        "--max-flows", min=2, help="Evaluate a stratified sample of at most N flows (000: 500 K suffice).")] = 500_000,
    seed: Seed = 0,
    jobs: Jobs = 2,
) -> None:
    """Feature ranking, k-fold CV of every algorithm, per-domain accuracy, stability (--test-on).

    Prints and writes (DIR/evaluation.json, DIR/confusion-*.png) accuracy, precision, recall and
    F1 per class, kappa and the confusion matrices beside 000's figures."""
    try:
        for other in test_on or []:
            describe_parquet(other)
        report = evaluate(flows, algorithms=algorithm or ALGORITHMS, folds=cv, feature_set=features,
                          bytes_basis=bytes_basis, seed=seed, n_jobs=jobs, top_domains=top_domains,
                          max_flows=max_flows, test_on=test_on or [], stability_by=stability_by or [],
                          progress=lambda m: _errors.print(f"[dim]{escape(m)}[/]", highlight=False))
        paths = write_evaluation(report, out)
    except ClassifyError as exc:
        raise _fail(exc) from None
    for table in report_tables(report):
        _console.print(table)
    _console.print(f"wrote {', '.join(escape(str(p)) for p in paths)}")


def predict_command(
    flows: Annotated[Path, typer.Argument(help="Flows to classify (Parquet, protolab.flows schema).")],
    model: Annotated[Path, typer.Option("--model", "-m", help="NAME.json, NAME.joblib, NAME, or its directory.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output Parquet: the flows plus predicted_protocol.")],
    jobs: Jobs = 2,
) -> None:
    """Classify flows with a saved model; with labelled flows, report the accuracy (stability)."""
    try:
        trained = load_model(model)
        for note in trained.warnings:
            _errors.print(f"[yellow]warning:[/] {escape(note)}", highlight=False)
        summary = predict_file(trained, flows, out, n_jobs=jobs)
    except ClassifyError as exc:
        raise _fail(exc) from None
    counts = ", ".join(f"{c} {n}" for c, n in summary["predicted"].items())
    seconds = summary["predict_seconds"]
    rate = f"{summary['flows'] / seconds:,.0f}" if seconds > 0 else "-"
    _console.print(f"{summary['flows']} flows classified by {escape(trained.name)} ({trained.algorithm}) in "
                   f"{seconds:.2f} s ({rate} flows/s): {counts}")
    if "accuracy" in summary:
        unseen = summary.get("unseen_classes") or {}
        never = f"; labels the model never learnt: {', '.join(f'{c} {n}' for c, n in unseen.items())}" if unseen else ""
        _console.print(f"accuracy against the flows' own labels ({summary['labelled_flows']} labelled): "
                       f"{summary['accuracy']:.2%}{never}")
    _console.print(f"wrote {escape(str(out))}")


def register(app: typer.Typer) -> None:
    """Add `classify train | evaluate | predict` to the `protolab traffic` Typer app. The
    commands print bad input as one error line and exit with status 2."""
    classify_app = typer.Typer(help="HTTP-version classifier over NetFlow-like flow features (000 §3.2).",
                               no_args_is_help=True, rich_markup_mode=None)
    classify_app.command("train")(train_command)
    classify_app.command("evaluate")(evaluate_command)
    classify_app.command("predict")(predict_command)
    app.add_typer(classify_app, name="classify")


def report_tables(report: dict[str, Any]) -> list[Any]:
    """Rich tables of an evaluation: CV results beside 000's, per-class F1, feature ranking,
    per-domain accuracy, stability."""
    from rich import box
    from rich.table import Table

    results = report["results"]
    tables = []
    info = report["data"]
    used = info.get("training_flows", info["flows"])
    labelled = info["flows"] - info.get("unlabelled_skipped", 0)
    notes = ([f"a stratified sample of {labelled}"] if info.get("sampled_to") else []) + (
        [f"{info['unlabelled_skipped']} unlabelled skipped"] if info.get("unlabelled_skipped") else [])
    of = f" ({'; '.join(notes)})" if notes else ""
    cv = Table(title=f"{report['config']['folds']}-fold stratified CV on {used} labelled flows{of} "
                     f"({', '.join(report['config']['features'])}; {report['config']['bytes_basis']} bytes)",
               box=box.SIMPLE_HEAD)
    for column in ("algorithm", "accuracy ± sd", "weighted F1", "macro F1", "kappa", "fit s", "predict flows/s",
                   "000: accuracy, F1, kappa"):
        cv.add_column(column, justify="left" if column == "algorithm" else "right")
    for r in results.values():
        paper = r["paper_000"]
        rate = r["predict_flows_per_s"]
        cv.add_row(r["algorithm_name"], f"{r['accuracy']:.2%} ± {r['accuracy_std']:.2%}", f"{r['weighted_f1']:.3f}",
                   f"{r['macro_f1']:.3f}", f"{r['kappa']:.3f}", f"{r['fit_seconds']:.1f}",
                   "-" if rate is None else f"{rate:,.0f}",
                   f"{paper['accuracy']:.1f}%, {paper['f_measure'] / 100:.3f}, {paper['kappa'] / 100:.3f}")
    tables.append(cv)
    classes = sorted({c for r in results.values() for c in r["per_class"]})
    per_class = Table(title="per class: precision / recall / F1", box=box.SIMPLE_HEAD)
    per_class.add_column("algorithm")
    for c in classes:
        per_class.add_column(c, justify="right")
    for r in results.values():
        cells = []
        for c in classes:
            m = r["per_class"].get(c)
            cells.append("-" if m is None else f"{m['precision']:.3f} / {m['recall']:.3f} / {m['f1']:.3f}")
        per_class.add_row(r["algorithm_name"], *cells)
    tables.append(per_class)
    ranking = report.get("feature_ranking")
    if ranking:
        rank = Table(title=f"feature ranking on {ranking['rows']} flows (CFS best-first subset: "
                           f"{', '.join(ranking['selected'])})", box=box.SIMPLE_HEAD)
        for column in ("#", "feature (CFS forward order)", "merit", "SU with class", "MDL bins", "MI (nats)",
                       "MI rank"):
            rank.add_column(column, justify="left" if column.startswith("feature") else "right")
        mi = ranking["mutual_information_nats"]
        mi_rank = {f: i + 1 for i, f in enumerate(sorted(mi, key=lambda k: -mi[k]))}
        for i, row in enumerate(ranking["forward_order"], 1):
            f = row["feature"]
            mark = " *" if f in ranking["selected"] else ""
            rank.add_row(str(i), f + mark, f"{row['merit']:.3f}", f"{ranking['class_symmetric_uncertainty'][f]:.3f}",
                         str(ranking["mdl_bins"][f]), f"{mi[f]:.3f}", str(mi_rank[f]))
        tables.append(rank)
    first = next(iter(results.values()), None)
    if first and first["per_domain"]:
        dom = Table(title="accuracy per domain (SNI), top by flows", box=box.SIMPLE_HEAD)
        dom.add_column("domain")
        dom.add_column("flows", justify="right")
        dom.add_column("share", justify="right")
        for r in results.values():
            dom.add_column(r["algorithm"], justify="right")
        by_alg = {a: {d["domain"]: d["accuracy"] for d in r["per_domain"]} for a, r in results.items()}
        for d in first["per_domain"]:
            dom.add_row(d["domain"], str(d["flows"]), f"{d['share']:.1%}",
                        *[f"{by_alg[a].get(d['domain'], float('nan')):.1%}" for a in results])
        tables.append(dom)
    if report["stability"]:
        stab = Table(title="stability: trained on all of the CV dataset, tested on another", box=box.SIMPLE_HEAD)
        for column in ("algorithm", "test file", "flows", "accuracy", "weighted F1", "kappa", "unseen classes"):
            stab.add_column(column, justify="left" if column in ("algorithm", "test file") else "right")
        for s in report["stability"]:
            stab.add_row(ALGORITHM_NAMES[s["algorithm"]], s["test_file"], str(s["flows"]), f"{s['accuracy']:.2%}",
                         f"{s['weighted_f1']:.3f}", f"{s['kappa']:.3f}", ", ".join(s["unseen_classes"]) or "-")
        tables.append(stab)
    for column, by_alg in report.get("stability_by", {}).items():
        table = Table(title=f"stability across {column}: trained on the other values, tested on each",
                      box=box.SIMPLE_HEAD)
        table.add_column(column)
        table.add_column("flows", justify="right")
        for a in by_alg:
            table.add_column(a, justify="right")
        first_alg = next(iter(by_alg.values()))
        for i, row in enumerate(first_alg["per_value"]):
            cells = []
            for r in by_alg.values():
                acc = r["per_value"][i]["accuracy"]
                cells.append("-" if acc is None else f"{acc:.1%}")
            table.add_row(row["value"], str(row["flows"]), *cells)
        table.add_row("all", str(sum(r["flows"] for r in first_alg["per_value"])),
                      *[f"{r['accuracy']:.1%}" for r in by_alg.values()], style="bold")
        table.add_row("(CV, all mixed)", str(results[next(iter(by_alg))]["flows"]),
                      *[f"{results[a]['accuracy']:.1%}" for a in by_alg], style="dim")
        tables.append(table)
    return tables
