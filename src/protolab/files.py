"""Writing result files so that no reader ever sees a half-written one."""

from __future__ import annotations

from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """Writes `text` next to `path` and renames it into place (creating the directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)
