"""QUIC congestion-controller specs (`NAME[:key=value,...]`, docs/congestion.md).

The registry of controllers lives in Rust (`crates/cc`); Python never keeps a copy of it. A
spec's controllers are checked by `protolab-net cc check --json`, which answers with the
effective parameters or the registry's own error message (unknown name or key, value out of
range, what is accepted).

One thing is Python's: in an experiment spec a rate may be written as a percentage of the
run's bottleneck bandwidth, `fixed:rate=70%` (003's "limited" sender at 70% of the link);
`with_link_rate` turns it into bits per second for a condition.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from collections.abc import Iterable
from typing import Any

from protolab.errors import LabError
from protolab.lab.binary import find_binary

_PERCENT_RATE = re.compile(r"(?P<key>\brate\s*=\s*)(?P<pct>\d+(?:\.\d+)?)\s*%")
# Stands in for a percentage when the spec is checked before any bandwidth is known.
_PLACEHOLDER_RATE = "1mbit"


class ControllerError(ValueError):
    """A controller spec is refused; the message is the registry's."""


def has_link_rate(spec: str) -> bool:
    """Whether the spec writes a rate as a percentage of the bottleneck bandwidth."""
    return _PERCENT_RATE.search(spec) is not None


def with_link_rate(spec: str, bandwidth_mbps: float | None) -> str:
    """`fixed:rate=70%` at 10 Mbit/s -> `fixed:rate=7000000`; other specs unchanged."""
    if not has_link_rate(spec):
        return spec
    if bandwidth_mbps is None:
        raise ControllerError(f"{spec}: a rate in % of the link needs a bandwidth, and the link is unlimited")

    def replace(match: re.Match[str]) -> str:
        bps = round(float(match.group("pct")) / 100 * bandwidth_mbps * 1e6)
        return f"{match.group('key')}{bps}"

    return _PERCENT_RATE.sub(replace, spec)


@functools.lru_cache(maxsize=256)
def _check_one(binary: str, spec: str) -> dict[str, Any]:
    try:
        done = subprocess.run([binary, "cc", "check", "--json", spec], capture_output=True, text=True, timeout=30,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError(f"cannot run {binary} cc check: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.strip().removeprefix("error: ") or f"exit status {done.returncode}"
        raise ControllerError(message)
    try:
        (entry,) = json.loads(done.stdout)
    except ValueError as exc:
        raise LabError(f"{binary} cc check: unreadable answer {done.stdout[:200]!r}") from exc
    return dict(entry)


def check(spec: str) -> dict[str, Any]:
    """The registry's view of a spec (`given`, `name`, `base`, `canonical`, `params`); raises
    ControllerError with the registry's message. Percent rates are checked with a placeholder."""
    if not spec.strip():
        raise ControllerError("empty controller spec")
    # The spec goes to protolab-net as an argument: a NUL byte cannot (subprocess raises
    # ValueError), and no controller name or parameter has control characters.
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in spec):
        raise ControllerError(f"a controller spec has no control characters: {spec[:80]!r}")
    return _check_one(str(find_binary()), _PERCENT_RATE.sub(lambda m: m.group("key") + _PLACEHOLDER_RATE, spec))


def check_all(specs: Iterable[str]) -> None:
    for spec in specs:
        check(spec)


def registry() -> dict[str, Any]:
    """`protolab-net cc list --json`."""
    binary = str(find_binary())
    try:
        done = subprocess.run([binary, "cc", "list", "--json"], capture_output=True, text=True, timeout=30, check=True)
        return dict(json.loads(done.stdout))
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise LabError(f"cannot read the controller registry from {binary}: {exc}") from exc
