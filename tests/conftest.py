"""Shared fixtures. Lab tests need root and the protolab-net binary; they skip only when the
binary is missing (CI always builds it)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protolab.errors import LabError
from protolab.lab import find_binary

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def emu_binary() -> Path:
    try:
        return find_binary()
    except LabError as exc:
        pytest.skip(f"protolab-net binary missing: {exc}")


@pytest.fixture
def lab_name() -> Callable[[], str]:
    """Unique lab names ([a-z0-9]{1,10}) so tests never collide with each other or a user's lab."""

    def fresh() -> str:
        return "t" + secrets.token_hex(4)

    return fresh


def toml_text(spec: dict[str, Any]) -> str:
    """A spec dict as TOML (values: strings, numbers, booleans and lists of them; tables one level deep)."""
    top = [f"{k} = {json.dumps(v)}" for k, v in spec.items() if not isinstance(v, dict)]
    tables = [f"[{k}]\n" + "\n".join(f"{kk} = {json.dumps(vv)}" for kk, vv in v.items())
              for k, v in spec.items() if isinstance(v, dict)]
    return "\n".join(top) + "\n" + "\n".join(tables) + "\n"


def lab_namespaces(name: str) -> list[str]:
    """The pl-<name>-* namespaces that exist right now."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in listing.splitlines() if line.startswith(f"pl-{name}-")]


@pytest.fixture(scope="session", autouse=True)
def _require_root_for_labs(request: pytest.FixtureRequest) -> None:
    # Namespaces need root; say so plainly instead of failing deep inside `ip`.
    if os.geteuid() != 0 and any(item.get_closest_marker("lab") for item in request.session.items):
        pytest.exit("the lab tests need root (network namespaces)", returncode=2)


def run_protolab(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python -m protolab ARGS` with its output captured (the tests' way to drive the CLI)."""
    return subprocess.run([sys.executable, "-m", "protolab", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, check=False)
