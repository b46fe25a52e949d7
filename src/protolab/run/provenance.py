"""Provenance recorded with every result: versions, git commit, kernel, CPU, relevant sysctls."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from protolab import __version__

REPO_ROOT = Path(__file__).resolve().parents[3]

# Host-level settings that change what a lab measures.
SYSCTLS = (
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_allowed_congestion_control",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.mptcp.enabled",
)


def first_line(argv: list[str]) -> str:
    """The first line a command prints (its version, usually), or why it could not run."""
    try:
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"
    text = (completed.stdout or completed.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def sysctls() -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for name in SYSCTLS:
        try:
            values[name] = Path("/proc/sys", *name.split(".")).read_text().strip()
        except OSError:
            values[name] = None
    return values


def git_commit() -> dict[str, Any]:
    """The checkout's commit and whether it had uncommitted changes (None outside a checkout)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def environment(tools: dict[str, list[str]]) -> dict[str, Any]:
    """Everything about this machine and checkout that a result depends on; `tools` maps a
    tool name to the command that prints its version."""
    return {
        "protolab_version": __version__,
        "git": git_commit(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "python": platform.python_version(),
        "sysctls": sysctls(),
        "tools": {name: first_line(argv) for name, argv in tools.items()},
    }
