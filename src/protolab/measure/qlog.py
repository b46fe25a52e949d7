"""Reading qlog files (docs/analysis.md): the JSON-SEQ traces quinn writes (qlog 0.3, one trace
per file, records separated by the RS character 0x1e), as qvis loads them. Newline-delimited
records without RS are read too.

A file that is not valid qlog gets a `QlogError` naming the file, the line and the byte offset:
a record that is not JSON, a truncated last record, a first record without `qlog_version` and
`qlog_format` (a foreign file), an event without a numeric `time` or a string `name`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protolab.errors import ProtolabError
from protolab.files import parse_json

RS = b"\x1e"
# What protolab writes (quinn 0.11, qlog crate 0.15): docs/samples.md.
QLOG_VERSIONS = ("0.3", "0.4")
_START = re.compile(r"start_unix_ns=(\d+)")
_TITLE = re.compile(r"^protolab (client|server) (\S+)$")


class QlogError(ProtolabError):
    """A qlog file cannot be read; the message names the file, line and byte offset."""


@dataclass
class QlogEvent:
    time_ms: float  # since the trace's reference time
    name: str  # category:event, e.g. transport:packet_sent
    data: dict[str, Any]


@dataclass
class QlogTrace:
    path: Path
    header: dict[str, Any]
    events: list[QlogEvent] = field(default_factory=list)

    @property
    def start_unix_ns(self) -> int | None:
        """The trace's reference time (protolab writes `start_unix_ns=<ns>` in its description)."""
        match = _START.search(str(self.header.get("description") or ""))
        return int(match.group(1)) if match else None

    @property
    def role(self) -> str | None:
        """`client` or `server`, from protolab's title (`protolab client <conn id>`)."""
        match = _TITLE.match(str(self.header.get("title") or ""))
        return match.group(1) if match else None

    @property
    def conn(self) -> str | None:
        match = _TITLE.match(str(self.header.get("title") or ""))
        return match.group(2) if match else None

    def named(self, name: str) -> Iterator[QlogEvent]:
        return (e for e in self.events if e.name == name)

    def unix_ns(self, time_ms: float) -> int | None:
        start = self.start_unix_ns
        return None if start is None else start + round(time_ms * 1e6)


def _records(raw: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(line, byte offset, record) of every record: RS-separated when the file has RS, else lines."""
    if RS in raw:
        # Line numbers are counted incrementally: counting from the file's start for every record
        # made a 5 MB qlog take seconds.
        offset, line, counted = 0, 1, 0
        for chunk in raw.split(RS):
            if chunk.strip():
                start = offset + (len(chunk) - len(chunk.lstrip()))
                line += raw.count(b"\n", counted, start)
                counted = start
                yield line, start, chunk.strip()
            offset += len(chunk) + 1
    else:
        offset = 0
        for number, line in enumerate(raw.split(b"\n"), start=1):
            if line.strip():
                yield number, offset, line.strip()
            offset += len(line) + 1


def read_qlog(path: Path, *, truncated_tail: bool = False) -> QlogTrace:
    """The trace of a qlog file; raises QlogError. `truncated_tail`: a last record cut short is
    left out instead (an endpoint stopped before it flushed its file: the interop servers)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise QlogError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    trace: QlogTrace | None = None
    ends_cleanly = raw.rstrip(b" \t\r").endswith(b"\n") or not raw.strip()
    records = list(_records(raw))
    for index, (line, offset, record) in enumerate(records):
        where = f"{path}: line {line} (byte {offset})"
        try:
            value = parse_json(record)
        except (ValueError, UnicodeDecodeError) as exc:  # incl. NestedTooDeeply
            last = index == len(records) - 1
            if last and not ends_cleanly:
                if truncated_tail and trace is not None:
                    break
                raise QlogError(f"{where}: truncated record at the end of the file") from None
            raise QlogError(f"{where}: not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise QlogError(f"{where}: a record must be a JSON object")
        if trace is None:
            if "qlog_version" not in value or "qlog_format" not in value:
                raise QlogError(f"{where}: not a qlog trace: the first record has no qlog_version and qlog_format")
            version = str(value.get("qlog_version"))
            if version not in QLOG_VERSIONS:
                raise QlogError(f"{where}: qlog_version {version!r} is not read (reads {', '.join(QLOG_VERSIONS)})")
            trace = QlogTrace(Path(path), value)
            continue
        time_ms, name, data = value.get("time"), value.get("name"), value.get("data", {})
        if isinstance(time_ms, bool) or not isinstance(time_ms, int | float):
            raise QlogError(f"{where}: event without a numeric time")
        if not isinstance(name, str):
            raise QlogError(f"{where}: event without a name")
        if not isinstance(data, dict):
            raise QlogError(f"{where}: {name}: data must be an object")
        trace.events.append(QlogEvent(float(time_ms), name, data))
    if trace is None:
        raise QlogError(f"{path}: empty file, not a qlog trace")
    return trace


def header_of(event: QlogEvent) -> dict[str, Any]:
    header = event.data.get("header")
    return header if isinstance(header, dict) else {}
