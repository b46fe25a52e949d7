"""The endpoints' transport samples files (docs/samples.md) read into rows: one dict per sample,
with its connection's header fields. Pure parsing of a run's artifacts."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any


def read_samples_file(file: Path) -> list[dict[str, Any]]:
    """The sample rows (lines with `t_unix_ns`) of one samples file (docs/samples.md), with its
    header's `conn`, `role`, `transport` and controller; TCP's `retrans` is the store's
    `retransmits`, and `cwnd_bytes` is the window in bytes for every transport (TCP's `cwnd`
    counts segments of `snd_mss` bytes). Lines that are not JSON objects are skipped."""
    samples: list[dict[str, Any]] = []
    header: dict[str, Any] = {}
    for line in file.read_text(errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(line)
            if not isinstance(value, dict):
                continue
            if value.get("schema") == "protolab.samples":
                header = {k: value.get(k) for k in ("conn", "role", "transport")}
                header["controller"] = value.get("quic_congestion") or value.get("tcp_congestion")
            elif isinstance(value.get("t_unix_ns"), int) and header:
                row = {**header, **value}
                if "retrans" in row:
                    row["retransmits"] = row.pop("retrans")
                cwnd = row.get("cwnd")
                if isinstance(cwnd, int):
                    mss = row.get("snd_mss")
                    row["cwnd_bytes"] = cwnd * mss if row.get("transport") != "quic" and isinstance(mss, int) else cwnd
                samples.append(row)
    return samples


def read_samples(directory: Path) -> list[dict[str, Any]]:
    """Every sample row of the samples files under a directory ([`read_samples_file`])."""
    if not directory.is_dir():
        return []
    return [row for file in sorted(directory.rglob("*.ndjson")) for row in read_samples_file(file)]
