"""Transport sample files (`schemas/sample-header.json`, `tcp-sample.json`, `quic-sample.json`,
`state-sample.json`; docs/samples.md) read into their models, and their rows in transport_samples.

A samples file is NDJSON: one header line, then one row per sample (`"event": "sample"`) or per
QUIC controller state change (`"event": "state"`). Every row carries its header's connection,
role, transport and controller into the store; TCP's `retrans` is the store's `retransmits`, and
`cwnd_bytes` is the window in bytes for every transport (TCP's `cwnd` counts segments of
`snd_mss` bytes).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from protolab.files import parse_json
from protolab.results.documents import DocumentError, parse_document
from protolab.results.generated.quic_sample import QuicSample
from protolab.results.generated.sample_header import SampleHeader
from protolab.results.generated.state_sample import StateSample
from protolab.results.generated.tcp_sample import TcpSample
from protolab.results.placement import Column, Placement

# The typed columns of transport_samples (after the run key); every other field of a row goes
# to `fields` (JSON).
SAMPLE_COLUMNS: list[Column] = [
    ("t_unix_ns", "BIGINT NOT NULL", "sample time (Unix ns)"),
    ("conn", "VARCHAR", "connection the sample describes (as the sampler names it)"),
    ("role", "VARCHAR", "client or server"),
    ("transport", "VARCHAR", "tcp, mptcp or quic"),
    ("subflow", "INTEGER", "MPTCP subflow (NULL otherwise)"),
    ("controller", "VARCHAR", "congestion controller of this end (TCP_CONGESTION or the QUIC controller)"),
    ("event", "VARCHAR", "sample (a periodic row) or state (the QUIC controller changed state)"),
    ("cc_state", "VARCHAR", ("controller state: slow_start, conservative_slow_start, congestion_avoidance, "
                             "recovery, application_limited (NULL: unknown, e.g. quinn's BBR)")),
    ("cwnd", "BIGINT", "congestion window (as the sampler reports it: bytes for QUIC, see the sampler docs)"),
    ("cwnd_bytes", "BIGINT", "congestion window in bytes (TCP: cwnd x snd_mss)"),
    ("ssthresh", "BIGINT", "slow-start threshold (TCP: segments, QUIC: bytes; NULL until set)"),
    ("rtt_us", "DOUBLE", "smoothed RTT, us"),
    ("min_rtt_us", "DOUBLE", "minimum RTT, us"),
    ("rttvar_us", "DOUBLE", "RTT variation, us"),
    ("bytes_in_flight", "BIGINT", "bytes in flight"),
    ("lost_packets", "BIGINT", "lost packets so far"),
    ("retransmits", "BIGINT", "retransmitted segments so far"),
    ("delivery_rate_bps", "DOUBLE", "delivery rate estimate, bit/s"),
    ("pacing_rate_bps", "DOUBLE", "pacing rate, bit/s"),
    ("fields", "JSON", "every other field of the sample"),
]
_TYPED = frozenset(name for name, _, _ in SAMPLE_COLUMNS)


def _row_placement(model: type[BaseModel], renamed: dict[str, str] | None = None) -> Placement:
    return Placement(table="transport_samples", model=model, renamed=renamed or {}, typed_columns=_TYPED,
                     rest_column="fields")


TCP_SAMPLES = _row_placement(TcpSample, {"retrans": "retransmits"})
QUIC_SAMPLES = _row_placement(QuicSample)
STATE_SAMPLES = _row_placement(StateSample)
HEADER = Placement(
    table="transport_samples",
    model=SampleHeader,
    elsewhere={"quic_congestion": "column controller (QUIC)", "tcp_congestion": "column controller (TCP)"},
    not_stored={
        "schema_": "always protolab.samples",
        "schema_version": "the samples file's version (the rows are read into its model)",
        "interval_ms": "the sampling interval: the result's config.sample_interval_ms",
        "start_unix_ns": "when sampling began: the first row's t_unix_ns",
        "local": "the client end: in the connection id (conn)",
        "remote": "the server end: in the connection id (conn)",
        "mptcp_fallback": "MPTCP fell back to TCP: the rows then have no subflow (and bulk results say it)",
    },
    typed_columns=_TYPED,
    derived=tuple(c for c in SAMPLE_COLUMNS if c[0] in ("controller", "cwnd_bytes", "fields")),
)


def _header_columns(header: SampleHeader) -> dict[str, Any]:
    return {**HEADER.row(header), "controller": header.quic_congestion or header.tcp_congestion}


def _row_model(value: dict[str, Any], header: SampleHeader) -> tuple[type[BaseModel], Placement]:
    if value.get("event") == "state":
        return StateSample, STATE_SAMPLES
    if header.transport == "quic":
        return QuicSample, QUIC_SAMPLES
    return TcpSample, TCP_SAMPLES


def _lines(file: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of every complete JSON object line; a line cut short by a killed
    sampler (the last one) or any non-object line is skipped."""
    try:
        text = file.read_text(errors="replace")
    except OSError as exc:
        raise DocumentError(f"{file}: cannot read: {exc}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            value = parse_json(line)
        except ValueError:  # not JSON, or nested too deeply: not a sample line
            continue
        if isinstance(value, dict):
            yield number, value


def read_samples_file(file: Path) -> list[dict[str, Any]]:
    """The sample rows of one samples file, each checked against its model and flat: the header's
    columns (conn, role, transport, controller), then the row's fields (`retrans` as
    `retransmits`) and `cwnd_bytes`. A row that does not match its model raises DocumentError
    naming the file, the line and the field."""
    rows: list[dict[str, Any]] = []
    header: SampleHeader | None = None
    columns: dict[str, Any] = {}
    for number, value in _lines(file):
        if value.get("schema") == "protolab.samples":
            header = parse_document(SampleHeader, value, f"{file}:{number}")
            columns = _header_columns(header)
            continue
        if header is None:
            continue
        model, placement = _row_model(value, header)
        sample = parse_document(model, value, f"{file}:{number}")
        row = {**columns, **{placement.renamed.get(k, k): v for k, v in sample.model_dump(mode="json").items()}}
        cwnd, mss = row.get("cwnd"), row.get("snd_mss")
        row["cwnd_bytes"] = cwnd * mss if header.transport != "quic" and isinstance(mss, int) else cwnd
        rows.append(row)
    return rows


def read_samples(directory: Path) -> list[dict[str, Any]]:
    """Every transport_samples row of the samples files under a directory."""
    if not directory.is_dir():
        return []
    return [row for file in sorted(directory.rglob("*.ndjson")) for row in read_samples_file(file)]


def sample_store_rows(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """transport_samples rows of flat sample rows: the typed columns, the rest in `fields`."""
    typed = [name for name, _, _ in SAMPLE_COLUMNS if name != "fields"]
    return [{**{name: row.get(name) for name in typed},
             "fields": {k: v for k, v in row.items() if k not in _TYPED}} for row in samples]


PLACEMENTS = (HEADER, TCP_SAMPLES, QUIC_SAMPLES, STATE_SAMPLES)
