"""Namespaces that outlive a killed owner, removed (docs/emulator.md, "Clean-up").

A lab's namespaces are the emulator's: it removes them when it sees its owner gone. Some
namespaces are made by Python directly (the reference veth pair of `validate-emulator`, the NAT
clients of the live tests, the test peers); `finally` removes them on an exception or Ctrl-C,
but not when the process is killed (SIGKILL, an OOM kill, a CI time-out). `NamespaceWatchdog`
covers that: a small shell process in a session of its own polls the owner once a second and,
when the owner is gone, kills the processes inside those namespaces (`ip netns pids`: only what
runs in them, which we started) and deletes the namespaces by their exact names. The owner stops
the watchdog after its own clean-up.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence

# Only names protolab makes: `pl-` and the characters `ip netns` allows in ours.
_OURS = re.compile(r"pl-[A-Za-z0-9_.-]{1,60}")

_SCRIPT = """
owner=$1; shift
while kill -0 "$owner" 2>/dev/null; do sleep 1; done
for ns in "$@"; do
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  ip netns delete "$ns" 2>/dev/null
done
"""


class NamespaceWatchdog:
    """Removes `names` (and what runs in them) once the process `owner_pid` has died."""

    def __init__(self, names: Sequence[str], owner_pid: int | None = None) -> None:
        bad = [name for name in names if not _OURS.fullmatch(name)]
        if bad:
            raise ValueError(f"not a protolab namespace name: {bad[0]!r} (expected pl-...)")
        self.names = list(names)
        self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
            ["sh", "-c", _SCRIPT, "protolab-netns-watchdog", str(owner_pid or os.getpid()), *self.names],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)  # not in the owner's process group: a group kill spares it

    def stop(self) -> None:
        """The owner cleaned up itself: the watchdog exits without touching anything."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

