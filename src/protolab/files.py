"""Writing result files so that no reader ever sees a half-written one."""

from __future__ import annotations

import os
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """Writes `text` next to `path` and renames it into place (creating the directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Per process: two processes (cluster workers sharing a results directory) may write the
    # same file at once; each renames its own complete copy.
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(text)
    partial.replace(path)
