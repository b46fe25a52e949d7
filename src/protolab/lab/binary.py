"""Locating the `protolab-net` binary."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from protolab.errors import LabError

BINARY_NAME = "protolab-net"
ENV_VAR = "PROTOLAB_NET"
# src/protolab/lab/binary.py -> parents[3] is the repository root (src layout).
REPO_ROOT = Path(__file__).resolve().parents[3]
REPO_BUILD = REPO_ROOT / "target" / "release" / BINARY_NAME


def _usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_binary(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The emulator binary: explicit argument, $PROTOLAB_NET, the repo's release build, then PATH."""
    if explicit is not None:
        path = Path(explicit)
        if not _usable(path):
            raise LabError(f"protolab-net binary {path} does not exist or is not executable")
        return path
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        path = Path(from_env)
        if not _usable(path):
            raise LabError(f"${ENV_VAR}={from_env} does not exist or is not executable")
        return path
    if _usable(REPO_BUILD):
        return REPO_BUILD
    on_path = shutil.which(BINARY_NAME)
    if on_path:
        return Path(on_path)
    raise LabError(
        f"{BINARY_NAME} not found (tried ${ENV_VAR}, {REPO_BUILD} and PATH); "
        f"build it with `cargo build --release -p protolab-cli` or set {ENV_VAR}"
    )
