#!/usr/bin/env python3
"""Regenerates the Python models of the contract's documents from `schemas/` (docs/architecture.md).

The Rust `contract` crate defines every document that crosses Rust<->Python; `protolab-net schema`
writes their JSON Schemas into `schemas/`; this script turns each schema into pydantic models in
`src/protolab/results/generated/<name>.py` with datamodel-code-generator (pinned in
pyproject.toml's dev extras), so the Python side is defined by the same source. Run both after
changing a document:

    target/release/protolab-net schema --out schemas && .venv/bin/python scripts/generate_models.py

`--check` regenerates into a temporary directory and exits 1 naming the stale files
(tests/test_contract.py runs it).
"""

from __future__ import annotations

import argparse
import difflib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "schemas"
GENERATED = ROOT / "src" / "protolab" / "results" / "generated"

# datamodel-codegen's options: strict models (unknown fields refused, as serde's deny_unknown_fields
# would), Python 3.11 syntax, descriptions kept as field docstrings readable at run time (the
# store's column descriptions), enums as str enums (they compare equal to their strings).
OPTIONS = [
    "--input-file-type", "jsonschema",
    "--output-model-type", "pydantic_v2.BaseModel",
    "--extra-fields", "forbid",
    "--target-python-version", "3.11",
    "--use-standard-collections", "--use-union-operator", "--use-annotated", "--field-constraints",
    "--use-schema-description", "--use-field-description", "--use-attribute-docstrings",
    "--collapse-root-models", "--disable-timestamp", "--formatters", "builtin",
]

INIT = '''"""Models generated from `schemas/` by scripts/generate_models.py: do not edit (docs/architecture.md)."""
'''


def module_name(schema: Path) -> str:
    """`schemas/load-result.json` -> `load_result`."""
    return schema.stem.replace("-", "_")


def generate(out_dir: Path) -> list[Path]:
    """Every schema's models into `out_dir`; returns the files written."""
    codegen = shutil.which("datamodel-codegen", path=str(Path(sys.executable).parent)) or shutil.which("datamodel-codegen")
    if codegen is None:
        raise SystemExit("datamodel-codegen not found: install the dev extras (pip install -e '.[dev]')")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "__init__.py"]
    written[0].write_text(INIT)
    for schema in sorted(SCHEMAS.glob("*.json")):
        target = out_dir / f"{module_name(schema)}.py"
        header = f"# Generated from schemas/{schema.name} by scripts/generate_models.py: do not edit."
        completed = subprocess.run(
            [codegen, "--input", str(schema), "--output", str(target), *OPTIONS, "--custom-file-header", header],
            capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise SystemExit(f"{schema}: datamodel-codegen failed:\n{completed.stderr.strip()}")
        written.append(target)
    return written


def stale(committed: Path, fresh: Path) -> list[str]:
    """Files of `fresh` that differ from, or are missing in, `committed`, and files of
    `committed` that `fresh` no longer has."""
    names = {p.name for p in fresh.glob("*.py")} | {p.name for p in committed.glob("*.py")}
    differing = []
    for name in sorted(names):
        a, b = committed / name, fresh / name
        if not a.exists() or not b.exists() or a.read_text() != b.read_text():
            differing.append(name)
    return differing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 when stale")
    args = parser.parse_args(argv)
    if not any(SCHEMAS.glob("*.json")):
        print(f"{SCHEMAS}: no schemas (run protolab-net schema --out schemas)", file=sys.stderr)
        return 2
    if not args.check:
        shutil.rmtree(GENERATED, ignore_errors=True)
        for path in generate(GENERATED):
            print(path.relative_to(ROOT))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(fresh)
        differing = stale(GENERATED, fresh)
        for name in differing:
            old = (GENERATED / name).read_text().splitlines() if (GENERATED / name).exists() else []
            new = (fresh / name).read_text().splitlines() if (fresh / name).exists() else []
            sys.stdout.writelines(line + "\n" for line in list(difflib.unified_diff(
                old, new, f"committed/{name}", f"generated/{name}", lineterm=""))[:40])
    if differing:
        print(f"stale generated models: {', '.join(differing)} (run scripts/generate_models.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
