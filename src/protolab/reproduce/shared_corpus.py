"""One labelled flow corpus for every passive entry (000 ch. 3-4) under `protolab reproduce --all`.

The passive entries all run the same spec (`Figure.after_run == "corpus"`); each building its
own corpus would repeat the same page loads many times. Under `--all` they share one results
directory, keyed by the spec's configuration (quick overrides merged in): RESULTS/corpus/
NAME-KEY. The runs there resume (only missing runs are made), and the flow corpus is rebuilt
only when the captures it is made of change (`corpus_fingerprint`, kept beside flows.parquet).
A spec edited in any way gets a new key, so a new directory: nothing stale is reused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

SHARED_DIR = "corpus"
FINGERPRINT_FILE = "flows.parquet.fingerprint"


def config_key(spec_data: dict[str, Any]) -> str:
    """A short, stable digest of a spec's data (key order does not matter)."""
    text = json.dumps(spec_data, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def shared_dir(root: Path, spec_data: dict[str, Any], quick: bool) -> Path:
    """Where the passive entries of one configuration keep their common corpus under `root`."""
    name = str(spec_data.get("name") or "corpus")
    return root / SHARED_DIR / f"{name}{'-quick' if quick else ''}-{config_key(spec_data)}"


def corpus_fingerprint(results_dir: Path, binary_stamp: str) -> str:
    """A digest of every run's client capture (its name, size and modification time) and of the
    flow extractor: equal fingerprints mean the same corpus."""
    digest = hashlib.sha256(binary_stamp.encode())
    for pcap in sorted((results_dir / "runs").glob("*/client.pcap")):
        stat = pcap.stat()
        digest.update(f"\n{pcap.parent.name} {stat.st_size} {stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def corpus_is_current(results_dir: Path, fingerprint: str) -> bool:
    """True when RESULTS/flows.parquet was built from the captures `fingerprint` describes."""
    marker = results_dir / FINGERPRINT_FILE
    return (results_dir / "flows.parquet").is_file() and marker.is_file() and marker.read_text() == fingerprint
