"""Writing result files so that no reader ever sees a half-written one, parsing JSON and TOML
written by others without a RecursionError escaping, and scratch directories that a killed
process does not leave behind for good."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
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


def scratch_dir(kind: str) -> Path:
    """A new private directory `protolab-<kind>-<pid>-*` in the temporary directory, for files
    that live only while this process uses them (a lab's emulator output, a run's work files).
    The caller removes it when done; a process killed before that leaves it behind, so each new
    one first removes those of its kind whose process is gone (`remove_orphaned_scratch`)."""
    remove_orphaned_scratch(kind)
    return Path(tempfile.mkdtemp(prefix=f"protolab-{kind}-{os.getpid()}-"))


def remove_orphaned_scratch(kind: str, root: Path | None = None) -> list[Path]:
    """Removes the scratch directories of `kind` in `root` (default: the temporary directory)
    whose process no longer exists; the removed paths. Only names of `scratch_dir`'s form are
    touched: never a file, a symlink, or a directory of a live process (a reused pid keeps its
    directory until that process ends too)."""
    prefix = f"protolab-{kind}-"
    removed = []
    with os.scandir(root or tempfile.gettempdir()) as entries:
        for entry in entries:
            pid_text, separator, _ = entry.name.removeprefix(prefix).partition("-")
            ours = entry.name.startswith(prefix) and separator and pid_text.isdigit() and int(pid_text) > 0
            if not ours or not entry.is_dir(follow_symlinks=False) or _process_exists(int(pid_text)):
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return sorted(removed)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True
