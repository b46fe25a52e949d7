"""The page-load modes (`h1c`, `h2-parallel:N`, ...) and schedulers, as the binary defines them.

The registry lives in Rust (`crates/contract`, `protolab-net modes --json`, schema
`schemas/mode-registry.json`); Python never keeps a copy of it. The spec checks modes against
it, the report orders them by it, and the browser derives how Chromium speaks each one from its
protocol and transport.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Iterable

from protolab.errors import LabError
from protolab.lab.binary import find_binary
from protolab.results.documents import DocumentError, parse_document
from protolab.results.generated.mode_registry import ModeEntry, ModeRegistry


def _quoted(value: str) -> str:
    return json.dumps(value)


@functools.lru_cache(maxsize=4)
def _registry_of(binary: str) -> ModeRegistry:
    try:
        done = subprocess.run([binary, "modes", "--json"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise LabError(f"cannot read the mode registry from {binary}: {exc}") from exc
    try:
        return parse_document(ModeRegistry, json.loads(done.stdout), f"{binary} modes --json")
    except (ValueError, DocumentError) as exc:
        raise LabError(f"{binary} modes --json: unreadable answer ({exc})") from exc


def registry() -> ModeRegistry:
    """`protolab-net modes --json`, read once per binary."""
    return _registry_of(str(find_binary()))


def entry(base: str) -> ModeEntry | None:
    """The registry's entry of a mode's base name (`h2-parallel`), None if there is none."""
    return next((m for m in registry().modes if m.name == base), None)


def known_modes() -> str:
    """The modes as a user writes them: `h1c, h1, h2, h2-parallel:N, ...`."""
    return ", ".join(f"{m.name}:N" if m.takes_count else m.name for m in registry().modes)


def check_mode(value: str) -> str:
    """`h2-parallel:2` -> itself (N normalized); raise ValueError for an unknown mode or a bad N."""
    base, sep, count = value.partition(":")
    found = entry(base)
    if found is None:
        raise ValueError(f"unknown mode {_quoted(value)} (known: {known_modes()})")
    if found.takes_count:
        top = registry().max_parallel
        if not sep or not count.isdigit() or not 1 <= int(count) <= top:
            raise ValueError(f"mode {_quoted(value)}: {base} needs a connection count, {base}:N with N in 1..{top}")
        return f"{base}:{int(count)}"
    if sep:
        raise ValueError(f"mode {_quoted(value)}: {base} takes no connection count")
    return value


def uses_mptcp(modes: Iterable[str]) -> bool:
    """Whether any of these (checked) modes runs over MPTCP."""
    return any(getattr(entry(mode.partition(":")[0]), "mptcp", False) for mode in modes)


def check_scheduler(value: str) -> str:
    names = [str(s.name) for s in registry().schedulers]
    if value not in names:
        raise ValueError(f"unknown scheduler {_quoted(value)} (known: {', '.join(names)})")
    return value


def order_of(mode: str) -> int:
    """A mode's place in the registry (unknown modes last), for tables and figures."""
    base = mode.partition(":")[0]
    names = [m.name for m in registry().modes]
    return names.index(base) if base in names else len(names)
