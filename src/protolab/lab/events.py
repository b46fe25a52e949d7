"""Waiting for the event a binary prints when it is ready (`emu run`'s ready line, `serve`'s
listening line; schemas/event-*.json), read from the file its stdout goes to.

The binaries' stdout goes to a file, not a pipe, so a long-running process never blocks on a
full pipe; the wait reads that file until the event's line is there, the process exits, or the
time is up, and returns the event as its contract model.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from protolab.results.documents import DocumentError, parse_document

Event = TypeVar("Event", bound=BaseModel)
POLL_S = 0.02


class NotReady(Exception):
    """The process exited (`status` set) or the time ran out (`status` None) before its event."""

    def __init__(self, status: int | None) -> None:
        super().__init__(f"exited with status {status}" if status is not None else "timed out")
        self.status = status


def find_event(stdout: Path, model: type[Event], is_event: Callable[[dict[str, object]], bool]) -> Event | None:
    """The first line of `stdout` that `is_event` picks, as `model` (DocumentError if it does
    not match the contract); None while there is none."""
    try:
        text = stdout.read_text(errors="replace")
    except FileNotFoundError:
        return None
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and is_event(value):
            return parse_document(model, value, f"{stdout}:{number}")
    return None


def await_event(process: subprocess.Popen[bytes], stdout: Path, model: type[Event],
                is_event: Callable[[dict[str, object]], bool], timeout_s: float) -> Event:
    """Waits until `process` prints its event to `stdout`; NotReady if it exits first or the
    time runs out, DocumentError if the line breaks the contract."""
    deadline = time.monotonic() + timeout_s
    while True:
        event = find_event(stdout, model, is_event)
        if event is not None:
            return event
        status = process.poll()
        if status is not None:
            raise NotReady(status)
        if time.monotonic() >= deadline:
            raise NotReady(None)
        time.sleep(POLL_S)


__all__ = ["DocumentError", "NotReady", "await_event", "find_event"]
