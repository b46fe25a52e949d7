"""Trained HTTP-version classifiers and their files (docs/traffic.md, "Model files"): the
fitted estimator with its feature schema, bytes basis and classes (`TrainedModel`), saved as a
joblib file plus a JSON sidecar with checksums and versions, and loaded back with every field
checked against the running feature schema."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from protolab.traffic.classify_models import ALGORITHM_NAMES, ALGORITHMS, predict_codes
from protolab.traffic.features import (
    BYTES_BASES,
    FEATURES_VERSION,
    ClassifyError,
    FlowData,
    check_feature_names,
    feature_matrix,
    read_flows,
)

MODEL_SCHEMA = "protolab.traffic.model"
MODEL_SCHEMA_VERSION = 1


@dataclass
class TrainedModel:
    """A fitted estimator and everything needed to apply it to other flows."""

    estimator: Any
    algorithm: str
    features: list[str]
    classes: list[str]
    bytes_basis: str
    feature_set: str = "seven"
    params: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    name: str = "classifier"
    warnings: list[str] = field(default_factory=list)

    def predict_matrix(self, X: np.ndarray, n_jobs: int = 2) -> np.ndarray:
        return np.asarray(self.classes)[predict_codes(self.estimator, X, n_jobs)]

    def read(self, path: Path | str, *, need_labels: bool = False, want_labels: bool = True,
             want_domains: bool = False) -> FlowData:
        """Read flows for this model: its features, its bytes basis; a clear error otherwise."""
        return read_flows(path, self.features, bytes_basis=self.bytes_basis, need_labels=need_labels,
                          want_labels=want_labels, want_domains=want_domains, model_name=self.name)

    def predict_codes(self, data: FlowData, n_jobs: int = 2) -> np.ndarray:
        """Index into `classes` of each flow's prediction."""
        if data.bytes_basis != self.bytes_basis:
            raise ClassifyError(f"{data.path}: flows read with {data.bytes_basis} bytes, model {self.name} "
                                f"was trained on {self.bytes_basis} bytes")
        return predict_codes(self.estimator, feature_matrix(data, self.features), n_jobs)

    def predict_data(self, data: FlowData, n_jobs: int = 2) -> np.ndarray:
        """The predicted class of each flow."""
        return np.asarray(self.classes)[self.predict_codes(data, n_jobs)]

    def sidecar(self, model_file: str, sha256: str) -> dict[str, Any]:
        import sklearn

        from protolab import __version__

        return {
            "schema": MODEL_SCHEMA, "schema_version": MODEL_SCHEMA_VERSION,
            "name": self.name, "algorithm": self.algorithm, "algorithm_name": ALGORITHM_NAMES[self.algorithm],
            "estimator": type(self.estimator).__module__ + "." + type(self.estimator).__name__,
            "params": self.params,
            "feature_set": self.feature_set, "features": list(self.features), "features_version": FEATURES_VERSION,
            "bytes_basis": self.bytes_basis, "classes": list(self.classes),
            "model_file": model_file, "model_sha256": sha256,
            "sklearn_version": sklearn.__version__, "numpy_version": np.__version__, "protolab_version": __version__,
            "created_unix_ns": time.time_ns(),
            "training": self.training,
        }



def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def atomic_paths(targets: list[Path]) -> Iterator[list[Path]]:
    """Temporary files beside `targets`, renamed over them only if the block succeeds."""
    temps: list[Path] = []
    created: list[Path] = []  # directories made here, removed again on failure
    done = False
    try:
        for target in targets:
            missing = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
            target.parent.mkdir(parents=True, exist_ok=True)
            created.extend(p for p in missing if p not in created)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            os.close(fd)
            temps.append(Path(tmp))
        yield temps
        umask = os.umask(0)
        os.umask(umask)
        for tmp, target in zip(temps, targets, strict=True):
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 is not what a plain open() gives
            os.replace(tmp, target)
        done = True
    finally:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        if not done:
            for directory in created:  # deepest first
                try:
                    directory.rmdir()
                except OSError:
                    pass


def save_model(model: TrainedModel, directory: Path | str, name: str | None = None) -> tuple[Path, Path]:
    """DIR/NAME.joblib (the estimator) and DIR/NAME.json (its sidecar), written atomically."""
    import joblib

    name = name or model.name
    if not name or "/" in name or name.startswith("."):
        raise ClassifyError(f"model name {name!r}: expected a plain file name")
    model.name = name
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ClassifyError(f"{directory}: not a directory")
    joblib_path, json_path = directory / f"{name}.joblib", directory / f"{name}.json"
    try:
        with atomic_paths([joblib_path, json_path]) as (tmp_model, tmp_json):
            joblib.dump(model.estimator, tmp_model, compress=3)
            sidecar = model.sidecar(joblib_path.name, _sha256(tmp_model))
            tmp_json.write_text(json.dumps(sidecar, indent=2) + "\n")
    except OSError as exc:
        raise ClassifyError(f"{directory}: cannot write the model ({exc.strerror or exc})") from exc
    return joblib_path, json_path


def _sidecar_path(path: Path) -> Path:
    if path.is_dir():
        found = sorted(p for p in path.glob("*.json") if _looks_like_sidecar(p))
        if len(found) != 1:
            raise ClassifyError(f"{path}: expected one model sidecar (*.json with schema {MODEL_SCHEMA}), "
                                f"found {len(found)}")
        return found[0]
    if path.suffix == ".json":
        return path
    if path.suffix == ".joblib":
        return path.with_suffix(".json")
    return path.with_name(path.name + ".json")


def _looks_like_sidecar(path: Path) -> bool:
    try:
        return json.loads(path.read_text()).get("schema") == MODEL_SCHEMA
    except (OSError, ValueError, AttributeError):
        return False


def load_model(path: Path | str) -> TrainedModel:
    """Load NAME.joblib through its sidecar NAME.json (give either, or NAME, or the directory).
    The sidecar's schema, its feature names and their definitions' version, and the estimator's
    shape and classes are checked; a mismatch is refused with an error naming the file and field."""
    import joblib
    import sklearn

    path = Path(path)
    side = _sidecar_path(path)
    if not side.is_file():
        raise ClassifyError(f"{side}: no such model sidecar (a model is NAME.joblib + NAME.json)")
    try:
        meta = json.loads(side.read_text())
    except (OSError, ValueError) as exc:
        raise ClassifyError(f"{side}: not a readable JSON model sidecar ({exc})") from exc
    if not isinstance(meta, dict):
        raise ClassifyError(f"{side}: not a model sidecar (expected a JSON object)")

    def field_of(key: str, kind: type | tuple[type, ...]) -> Any:
        if key not in meta:
            raise ClassifyError(f"{side}: field '{key}' is missing")
        if not isinstance(meta[key], kind):
            raise ClassifyError(f"{side}: field '{key}' has the wrong type ({type(meta[key]).__name__})")
        return meta[key]

    if field_of("schema", str) != MODEL_SCHEMA:
        raise ClassifyError(f"{side}: field 'schema' is {meta['schema']!r}, expected {MODEL_SCHEMA!r}")
    if field_of("schema_version", int) != MODEL_SCHEMA_VERSION:
        raise ClassifyError(f"{side}: field 'schema_version' is {meta['schema_version']}, this protolab reads "
                            f"version {MODEL_SCHEMA_VERSION}")
    features = field_of("features", list)
    if not features or not all(isinstance(f, str) for f in features):
        raise ClassifyError(f"{side}: field 'features' must be a non-empty list of names")
    try:
        check_feature_names(features)
    except ClassifyError as exc:
        raise ClassifyError(f"{side}: field 'features': {exc}") from exc
    if field_of("features_version", int) != FEATURES_VERSION:
        raise ClassifyError(f"{side}: field 'features_version' is {meta['features_version']}, this protolab computes "
                            f"features version {FEATURES_VERSION}: retrain the model")
    basis = field_of("bytes_basis", str)
    if basis not in BYTES_BASES:
        raise ClassifyError(f"{side}: field 'bytes_basis' is {basis!r}, expected one of {', '.join(BYTES_BASES)}")
    classes = field_of("classes", list)
    algorithm = field_of("algorithm", str)
    if algorithm not in ALGORITHMS:
        raise ClassifyError(f"{side}: field 'algorithm' is {algorithm!r}, expected one of {', '.join(ALGORITHMS)}")
    model_file = side.parent / Path(field_of("model_file", str)).name
    if not model_file.is_file():
        raise ClassifyError(f"{model_file}: no such file (named by field 'model_file' of {side})")
    if _sha256(model_file) != field_of("model_sha256", str):
        raise ClassifyError(f"{model_file}: does not match field 'model_sha256' of {side} (another model's file?)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator = joblib.load(model_file)
    except Exception as exc:  # a corrupt or foreign pickle can fail in many ways
        raise ClassifyError(f"{model_file}: cannot load the model ({type(exc).__name__}: {exc})") from exc
    n_in = getattr(estimator, "n_features_in_", None)
    if n_in != len(features):
        raise ClassifyError(f"{side}: field 'features' lists {len(features)} features, the model in {model_file.name} "
                            f"takes {n_in}: feature schema mismatch")
    if [str(c) for c in getattr(estimator, "classes_", [])] != [str(c) for c in classes]:
        raise ClassifyError(f"{side}: field 'classes' {classes} differs from the model's "
                            f"{[str(c) for c in getattr(estimator, 'classes_', [])]}")
    notes = []
    if meta.get("sklearn_version") != sklearn.__version__:
        notes.append(f"model trained with scikit-learn {meta.get('sklearn_version')}, running {sklearn.__version__}")
    training = {**(meta.get("training") if isinstance(meta.get("training"), dict) else {}),
                "model_sha256": meta["model_sha256"]}
    return TrainedModel(estimator=estimator, algorithm=algorithm, features=list(features),
                        classes=[str(c) for c in classes], bytes_basis=basis,
                        feature_set=str(meta.get("feature_set", "custom")), params=dict(meta.get("params") or {}),
                        training=training, name=str(meta.get("name") or side.stem), warnings=notes)
