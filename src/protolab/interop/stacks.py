"""The stacks an interop run can cross (docs/interop.md), each an endpoint with the
quic-interop-runner interface: a command run in a lab host with ROLE, TESTCASE, REQUESTS, ...

Built in: `protolab` (our `protolab-net serve`, HTTP/3 only: server), `aioquic` (its examples'
HTTP/3 and HTTP/0.9 client and server), `quic-go` (its interop client and server), and from
Debian's packages `caddy` (server: HTTP/1.1, HTTP/2, HTTP/3), `nginx` (server: HTTP/1.1,
HTTP/2) and `chromium` (client, driven by Playwright). The
wrappers live in `stacks/<name>/run_endpoint.sh`; what they run is built into the stacks
directory (`PROTOLAB_STACKS`, default `.stacks` in the repository) by `scripts/build_stacks.sh`.
A spec adds its own (`[params.endpoints.NAME]`, `protolab.scenarios.interop`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from protolab.errors import ProtolabError

REPOSITORY = Path(__file__).resolve().parents[3]
ROLES = ("server", "client")


class StackError(ProtolabError):
    """An interop stack is unknown, not built or cannot play a role."""


def stacks_dir() -> Path:
    """Where scripts/build_stacks.sh puts the stacks' builds."""
    return Path(os.environ.get("PROTOLAB_STACKS") or REPOSITORY / ".stacks")


@dataclass(frozen=True)
class Stack:
    name: str
    command: tuple[str, ...]  # what runs in the lab host, with the interface's environment
    roles: tuple[str, ...]
    build: str | None = None  # the directory under stacks_dir() its build goes to; None: nothing to build
    package: str | None = None  # a Debian package it runs (caddy, nginx, chromium): installed, not built

    def version(self) -> str | None:
        """What was built (`.stacks/<name>/version.txt`) or is installed (the Debian package's
        version), "external" for a spec's own command; None when the stack needs a build or a
        package that is not there."""
        if self.package is not None:
            return installed_package(self.package)
        if self.build is None:
            return "protolab" if self.name == "protolab" else "external"
        try:
            return (stacks_dir() / self.build / "version.txt").read_text().strip() or None
        except OSError:
            return None

    def require(self, role: str) -> None:
        if role not in self.roles:
            raise StackError(f"interop stack {self.name!r} has no {role} (it plays: {', '.join(self.roles)})")
        if self.version() is None and self.package is not None:
            raise StackError(f"interop stack {self.name!r} needs the Debian package {self.package!r}: "
                             f"apt-get install {self.package}")
        if self.version() is None:
            raise StackError(f"interop stack {self.name!r} is not built in {stacks_dir()}: "
                             f"run `make stacks` (scripts/build_stacks.sh {self.build})")


def installed_package(package: str) -> str | None:
    """"PACKAGE VERSION" of an installed Debian package whose program is on PATH; None otherwise."""
    if shutil.which(package) is None and not Path("/usr/sbin", package).exists():
        return None
    try:
        done = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}", package], capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return package  # on PATH, version unknown (not a dpkg system)
    found = done.stdout.strip() if done.returncode == 0 else ""
    return found or package


def _wrapper(name: str) -> tuple[str, ...]:
    return (str(REPOSITORY / "stacks" / name / "run_endpoint.sh"),)


BUILTIN_STACKS: dict[str, Stack] = {stack.name: stack for stack in (
    Stack("protolab", _wrapper("protolab"), ("server",)),
    Stack("aioquic", _wrapper("aioquic"), ROLES, build="aioquic"),
    Stack("quic-go", _wrapper("quic-go"), ROLES, build="quic-go"),
    Stack("caddy", _wrapper("caddy"), ("server",), package="caddy"),
    Stack("nginx", _wrapper("nginx"), ("server",), package="nginx"),
    Stack("chromium", _wrapper("chromium"), ("client",), package="chromium"),
)}


def spec_stack(name: str, command: str, roles: Sequence[str]) -> Stack:
    """A spec's own endpoint: `command` is split like a shell would (no shell runs it)."""
    argv = tuple(shlex.split(command))
    if not argv:
        raise StackError(f"interop endpoint {name!r}: empty command")
    unknown = [r for r in roles if r not in ROLES]
    if unknown or not roles:
        raise StackError(f"interop endpoint {name!r}: roles must be among {', '.join(ROLES)} (got {list(roles)})")
    return Stack(name, argv, tuple(roles))


def lookup(name: str, extra: Mapping[str, Stack] | None = None) -> Stack:
    known = {**BUILTIN_STACKS, **(extra or {})}
    try:
        return known[name]
    except KeyError:
        raise StackError(f"unknown interop stack {name!r} (known: {', '.join(known)})") from None


def parse_pair(mode: str) -> tuple[str, str]:
    """`SERVER->CLIENT` (what serves, what downloads) -> the two names."""
    server, arrow, client = mode.partition("->")
    if not arrow or not server.strip() or not client.strip():
        raise StackError(f"interop mode {mode!r}: expected SERVER->CLIENT, e.g. \"quic-go->aioquic\"")
    return server.strip(), client.strip()
