"""Writing result files so that no reader ever sees a half-written one, and parsing JSON and
TOML written by others without a RecursionError escaping."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any


class NestedTooDeeply(ValueError):
    """A JSON or TOML document nested deeper than Python's parsers recurse (e.g. 100,000 `[`)."""


def parse_json(text: str | bytes, **options: Any) -> Any:
    """json.loads; too deep a document raises NestedTooDeeply (a ValueError, as every other
    reason json.loads refuses a text) instead of RecursionError."""
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise NestedTooDeeply("nested too deeply to read") from None


def parse_toml(text: str) -> dict[str, Any]:
    """tomllib.loads; too deep a document raises NestedTooDeeply instead of RecursionError."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise NestedTooDeeply("nested too deeply to read") from None


def write_text_atomically(path: Path, text: str, durable: bool = False) -> None:
    """Writes `text` next to `path` and renames it into place (creating the directory).
    `durable`: the file's data and then its directory entry are fsynced, so the file survives a
    power cut or a killed machine once this returns (the live service's stored results)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Per process: two processes (cluster workers sharing a results directory) may write the
    # same file at once; each renames its own complete copy.
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    if not durable:
        partial.write_text(text)
        partial.replace(path)
        return
    with partial.open("w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    partial.replace(path)
    fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    """Makes the directory's entries (a file renamed into it, one removed) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
