"""DuckDB and files, shared by the `protolab traffic` commands: bounded-memory connections, outputs
written atomically, flow files described, and the commands' error reporting."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from protolab.errors import ProtolabError


class TrafficError(ProtolabError):
    """Bad flows, a bad Tstat file or bad options (the `protolab traffic` commands exit with status 2)."""



def sql_path(path: Path | str) -> str:
    """A path as a single-quoted SQL string's contents."""
    return str(path).replace("'", "''")


@contextmanager
def duck_connect(*, memory_limit: str = "4GB", threads: int | None = None,
                 temp_directory: Path | str | None = None) -> Iterator[Any]:
    """An in-memory DuckDB connection with bounded memory: what does not fit spills into a
    private temporary directory (under `temp_directory`), removed afterwards."""
    import duckdb

    base = Path(temp_directory) if temp_directory else None
    try:
        if base is not None:
            base.mkdir(parents=True, exist_ok=True)
        spill = Path(tempfile.mkdtemp(prefix=".protolab-duckdb-", dir=base))
    except OSError as exc:
        raise TrafficError(f"{base}: cannot create a temporary directory ({exc.strerror or exc})") from exc
    try:
        con = duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": str(spill),
                                     "preserve_insertion_order": True,
                                     **({"threads": threads} if threads else {})})
    except duckdb.Error as exc:
        remove_tree(spill)
        raise TrafficError(f"DuckDB settings (memory limit {memory_limit!r}, threads {threads}): {first_line(exc)}") from exc
    try:
        con.execute("SET enable_progress_bar = false")
        yield con
    finally:
        con.close()
        remove_tree(spill)


def remove_tree(path: Path) -> None:
    for child in sorted(path.rglob("*"), reverse=True):
        if child.is_dir():
            child.rmdir()
        else:
            child.unlink(missing_ok=True)
    path.rmdir()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def made_dir(path: Path) -> Iterator[Path]:
    """`path` as a directory (created with its parents if needed); the directories created
    here are removed again if the block fails and leaves them empty."""
    created: list[Path] = []
    probe = path
    while not probe.exists():
        created.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrafficError(f"{path}: cannot create the directory ({exc.strerror or exc})") from exc
    ok = False
    try:
        yield path
        ok = True
    finally:
        if not ok:
            for d in created:  # deepest first
                try:
                    d.rmdir()
                except OSError:
                    break


@contextmanager
def atomic_output(targets: list[Path]) -> Iterator[list[Path]]:
    """Temporary paths beside `targets` (not created), renamed over them only if the block
    succeeds; nothing is left behind otherwise (not even the directories made for them)."""
    temps: list[Path] = []
    with contextlib.ExitStack() as dirs:
        try:
            for target in targets:
                if target.is_dir():
                    raise TrafficError(f"{target}: is a directory")
                dirs.enter_context(made_dir(target.parent))
                try:
                    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
                except OSError as exc:
                    raise TrafficError(f"{target.parent}: cannot write there ({exc.strerror or exc})") from exc
                os.close(fd)
                os.unlink(tmp)  # DuckDB's COPY (or the caller) creates the file
                temps.append(Path(tmp))
            yield temps
            for tmp, target in zip(temps, targets, strict=True):
                os.replace(tmp, target)
        finally:
            for tmp in temps:
                tmp.unlink(missing_ok=True)


def describe_flows(con: Any, path: Path) -> dict[str, str]:
    """Column -> DuckDB type of a Parquet flow file; a clear error if it is missing or unreadable."""
    import duckdb

    if not path.exists():
        raise TrafficError(f"{path}: no such file")
    if not path.is_file():
        raise TrafficError(f"{path}: not a file")
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{sql_path(path)}')").fetchall()
    except duckdb.Error as exc:
        raise TrafficError(f"{path}: not a readable Parquet file ({first_line(exc)})") from exc
    return {str(r[0]): str(r[1]) for r in rows}


def fail(exc: BaseException) -> Any:
    """Print a traffic command's error on stderr; the typer.Exit(2) to raise."""
    from rich.markup import escape

    error_console().print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def console() -> Any:
    import sys

    from rich.console import Console

    # Logs and CI output are not terminals: give tables room (as protolab.cli does).
    return Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120)


def error_console() -> Any:
    import sys

    from rich.console import Console

    return Console(stderr=True, width=None if sys.stderr.isatty() or "COLUMNS" in os.environ else 120)
