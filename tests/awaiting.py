"""Waiting in tests: on a condition, never for a fixed time.

- `await_listening`: a `protolab-net serve` process prints one typed JSON line on stdout once
  every socket is bound, `{"event": "listening", "http": [...], "https": [...], "h3": [...],
  "raw": [...], ...}` (docs/server.md; the contract's `Listening`); wait for it and return it
  as the contract's model.
- `await_line`: the same for any line a process announces itself with (`protolab serve-live`).
- `await_port`: a third-party server (nginx, caddy, iperf3) prints nothing we can wait for; wait
  until the kernel of its namespace shows it listening.
- `wait_until`: any other condition (a counter reached, a file appeared, a process gone).

Every wait is bounded and fails with `NotReady` (an `AssertionError`, so a test fails rather
than errors), whose message carries what the process wrote on stderr. A process's stdout and
stderr pipes are drained by threads from the first wait on: it never blocks on a full pipe,
however long it runs, so read its output through `output` rather than from the pipes.

Plain module (no pytest), imported by the tests (`from awaiting import ...`) and, through
tests/peers/helpers.py, by the benches.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

from pydantic import ValidationError

from protolab.results.generated.event_listening import Listening

READY_WITHIN_S = 30.0
"""How long a server may take to start: generous, only a hung or failed start exceeds it."""
POLL_S = 0.05
"""Between two looks at a condition nothing announces."""
EXIT_WITHIN_S = 2.0
"""How long a process whose output ended may take to exit and finish its stderr."""
_MESSAGE_TAIL = 3000

T = TypeVar("T")
Stream = Literal["stdout", "stderr"]


class NotReady(AssertionError):
    """A process did not announce itself, or a condition did not hold, in time."""


class _Drain:
    """Reads one pipe of a process to its end in a thread, keeping every line."""

    def __init__(self, pipe: IO[Any]) -> None:
        self.lines: list[str] = []
        self.ended = False
        self.changed = threading.Condition()
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe: IO[Any]) -> None:
        try:
            while raw := pipe.readline():
                line = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
                with self.changed:
                    self.lines.append(line.rstrip("\n"))
                    self.changed.notify_all()
        except (OSError, ValueError):
            pass  # the pipe was closed under us: the process is gone
        finally:
            with self.changed:
                self.ended = True
                self.changed.notify_all()

    def await_end(self, within: float) -> None:
        with self.changed:
            self.changed.wait_for(lambda: self.ended, within)


_drains: weakref.WeakKeyDictionary[subprocess.Popen[Any], dict[str, _Drain]] = weakref.WeakKeyDictionary()


def _drain(process: subprocess.Popen[Any], stream: Stream) -> _Drain | None:
    """The drain of one of the process's pipes (started on first use); None if not a pipe."""
    drains = _drains.setdefault(process, {})
    if stream not in drains:
        pipe = getattr(process, stream)
        if pipe is None:
            return None
        drains[stream] = _Drain(pipe)
    return drains[stream]


def output(process: subprocess.Popen[Any], stream: Stream = "stderr") -> str:
    """What the process wrote so far on a pipe drained by a wait (empty if none)."""
    drain = _drains.get(process, {}).get(stream)
    if drain is None:
        return ""
    with drain.changed:
        return "\n".join(drain.lines)


def _describe(process: subprocess.Popen[Any]) -> str:
    args = process.args
    text = args if isinstance(args, str) else shlex.join(map(str, args))
    return text if len(text) <= 200 else text[:200] + "..."


def _stderr_tail(process: subprocess.Popen[Any], stderr_file: Path | None) -> str:
    if stderr_file is not None:
        try:
            text = stderr_file.read_text(errors="replace")
        except OSError as exc:
            text = f"({stderr_file}: {exc})"
    else:
        text = output(process, "stderr") if process.stderr is not None else "(stderr not captured)"
    text = text.strip() or "(nothing on stderr)"
    return text[-_MESSAGE_TAIL:]


def _failure(process: subprocess.Popen[Any], why: str, stderr_file: Path | None, said: list[str],
             ended: bool = False) -> NotReady:
    if ended:
        # Its output ended: the process is exiting; let it finish saying why.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(EXIT_WITHIN_S)
        stderr = _drains.get(process, {}).get("stderr")
        if stderr is not None:
            stderr.await_end(EXIT_WITHIN_S)
    status = process.poll()
    state = "still running" if status is None else f"exit status {status}"
    message = f"`{_describe(process)}` {why} ({state}); stderr: {_stderr_tail(process, stderr_file)}"
    if said:
        message += "; it printed: " + "\n".join(said)[-_MESSAGE_TAIL:]
    return NotReady(message)


def await_line(process: subprocess.Popen[Any], matches: Callable[[str], T | None], *, what: str,
               stream: Stream = "stdout", within: float = READY_WITHIN_S, stderr_file: Path | None = None) -> T:
    """Waits until the process prints a line on `stream` (a pipe) for which `matches` returns
    something other than None, and returns that. Fails when the pipe ends first (the process
    exited) or after `within` seconds, with the process's stderr (its pipe, or `stderr_file`)."""
    drain = _drain(process, stream)
    if drain is None:
        raise ValueError(f"await_line needs the {stream} of `{_describe(process)}` as a pipe")
    if stream == "stdout":
        _drain(process, "stderr")  # drained too, for the message and so that it never blocks
    deadline = time.monotonic() + within
    seen = 0
    with drain.changed:
        while True:
            for line in drain.lines[seen:]:
                found = matches(line)
                if found is not None:
                    return found
            seen = len(drain.lines)
            if drain.ended:
                raise _failure(process, f"ended its {stream} before {what}", stderr_file, drain.lines, ended=True)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _failure(process, f"did not print {what} within {within:g} s", stderr_file, drain.lines)
            drain.changed.wait(remaining)


def _listening_event(line: str) -> Listening | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("event") != "listening":
        return None
    try:
        return Listening.model_validate(data)
    except ValidationError as exc:
        raise NotReady(f"the listening event breaks the contract (schemas/event-listening.json): {exc}\n{line}") from None


def await_listening(process: subprocess.Popen[Any], *, within: float = READY_WITHIN_S,
                    stderr_file: Path | None = None) -> Listening:
    """Waits for `protolab-net serve`'s `listening` event on the process's stdout (a pipe) and
    returns it, read as the contract's model: from then on every socket it lists accepts
    connections."""
    return await_line(process, _listening_event, what="its listening event", within=within, stderr_file=stderr_file)


def wait_until(condition: Callable[[], T], *, what: str, within: float,
               process: subprocess.Popen[Any] | None = None, stderr_file: Path | None = None) -> T:
    """Polls `condition` until it returns something true, and returns that. Fails after
    `within` seconds, or as soon as `process` (when given) has exited, naming `what`."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise _failure(process, f"exited before {what}", stderr_file, [], ended=True)
        if time.monotonic() >= deadline:
            if process is not None:
                raise _failure(process, f"ran, but not {what} within {within:g} s", stderr_file, [])
            raise NotReady(f"not {what} within {within:g} s")
        time.sleep(POLL_S)


def await_port(namespace: str, port: int, *, address: str | None = None, udp: bool = False,
               within: float = READY_WITHIN_S, process: subprocess.Popen[Any] | None = None,
               stderr_file: Path | None = None) -> None:
    """Waits until a socket listens on `port` (TCP, or UDP with `udp`) in the network namespace,
    on `address` if given: for servers that announce nothing we can read."""
    flags = "-Hlun" if udp else "-Hltn"
    where = f"{address or '*'}:{port}{'/udp' if udp else ''} in {namespace}"

    def listening() -> bool:
        sockets = subprocess.run(["ip", "netns", "exec", namespace, "ss", flags, f"sport = :{port}"],
                                 capture_output=True, text=True, timeout=30, check=False).stdout
        return any(address is None or f"{address}:{port}" in line.split() for line in sockets.splitlines())

    wait_until(listening, what=f"listening on {where}", within=within, process=process, stderr_file=stderr_file)
