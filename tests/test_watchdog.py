"""A namespace made by Python, and what runs in it, is removed when its owner is killed
(protolab.lab.watchdog), and left alone once the owner has stopped the watchdog."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time

import pytest

from awaiting import wait_until
from protolab.lab.watchdog import NamespaceWatchdog

OWNER = """
import subprocess, sys, time
from protolab.lab.watchdog import NamespaceWatchdog
name, stop = sys.argv[1], sys.argv[2] == "stop"
watchdog = NamespaceWatchdog([name])
subprocess.run(["ip", "netns", "add", name], check=True)
sleeper = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "600"])
if stop:
    watchdog.stop()
print(sleeper.pid, flush=True)
time.sleep(600)
"""


def _namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.strip()}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _killed_owner(name: str, stop: bool) -> int:
    """Starts an owner that makes `name` with a `sleep` inside, SIGKILLs it; the sleep's pid."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER, name, "stop" if stop else "keep"],
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    assert owner.stdout is not None
    sleeper = int(owner.stdout.readline())
    assert name in _namespaces() and _alive(sleeper)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    return sleeper


def test_a_killed_owner_leaves_neither_its_namespace_nor_its_processes() -> None:
    name = "pl-wd-" + secrets.token_hex(3)
    sleeper = _killed_owner(name, stop=False)
    try:
        wait_until(lambda: name not in _namespaces() and not _alive(sleeper), within=15,
                   what=f"the watchdog to remove {name} and kill {sleeper}")
    finally:
        if _alive(sleeper):
            os.kill(sleeper, signal.SIGKILL)
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)


def test_a_stopped_watchdog_touches_nothing() -> None:
    name = "pl-wd-" + secrets.token_hex(3)
    sleeper = _killed_owner(name, stop=True)
    try:
        time.sleep(2.5)  # the watchdog polls once a second: it would have acted by now
        assert name in _namespaces() and _alive(sleeper)
    finally:
        os.kill(sleeper, signal.SIGKILL)
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)


def test_only_protolab_names_are_watched() -> None:
    with pytest.raises(ValueError, match="not a protolab namespace name: 'web'"):
        NamespaceWatchdog(["web"])
