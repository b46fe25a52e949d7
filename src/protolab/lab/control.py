"""Client for the emulator's control socket (UNIX stream, one JSON object per line)."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

from protolab.errors import LabError


class ControlClient:
    """One connection to a running lab; requests are serialized so replies stay in order."""

    def __init__(self, path: Path, *, timeout: float = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._reader: Any = None

    def connect(self, *, within: float = 5.0) -> None:
        # The socket exists before the ready line is printed, but retry briefly anyway so a
        # slow filesystem cannot turn into a spurious failure.
        deadline = time.monotonic() + within
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(str(self.path))
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                sock.close()
                if time.monotonic() >= deadline:
                    raise LabError(f"cannot connect to control socket {self.path}: {exc}") from exc
                time.sleep(0.05)
                continue
            self._sock = sock
            self._reader = sock.makefile("rb")
            return

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request; return the reply, or raise LabError if the emulator says ok=false."""
        if self._sock is None:
            raise LabError("control socket is not connected")
        command = request.get("cmd", "?")
        with self._lock:
            try:
                self._sock.sendall(json.dumps(request).encode() + b"\n")
                line = self._reader.readline()
            except OSError as exc:
                raise LabError(f"control request {command!r} failed: {exc}") from exc
        if not line:
            raise LabError(f"control request {command!r}: the emulator closed the control socket")
        try:
            reply = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LabError(f"control request {command!r}: unparsable reply {line[:200]!r}") from exc
        if not isinstance(reply, dict) or reply.get("ok") is not True:
            error = reply.get("error", "no error text") if isinstance(reply, dict) else reply
            raise LabError(f"control request {command!r} refused: {error}")
        return reply

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._reader = None
