"""Tstat import (`protolab traffic import-tstat`): Tstat's `log_tcp_complete` and
`log_udp_complete` (also `log_tcp_nocomplete`, and any of them gzipped) into the flow schema
(`protolab.traffic.schema`), one row per line, `source = 'tstat'`. docs/traffic.md, "Tstat
import", has the mapping column by column; the facts about Tstat it rests on:

- The first line names the columns: `#c_ip:1 c_port:2 ...` (Tstat 3 writes the log level
  first in the TCP logs: `#15#c_ip:1 ...`). Values are separated by spaces. Which columns exist
  depends on the measurement sets enabled (core, end-to-end, P2P, options, Layer 7, advanced):
  columns are found by name, and a column the file lacks gives NULL.
- TCP: byte counts are *payload* bytes (`c_bytes_all` = unique + retransmitted); `first` and
  `last` are absolute times in ms since the epoch, `durat` in ms; `c_syn_cnt`, `c_fin_cnt`,
  `c_rst_cnt`, `c_ack_cnt` per direction; `con_t` is a bitmask of the protocols Tstat
  recognised (1 HTTP, 8192 SSL/TLS); Layer 7: `c_tls_SNI` (ClientHello server name),
  `s_tls_SCN` (certificate subject), `c_npnalpn` / `s_npnalpn`: NPN/ALPN bitmasks of the
  ClientHello / ServerHello, Tstat's `enum npnalpn`: 1 NPN present but empty, 2 NPN http/1.x,
  4 NPN spdy, 8 NPN h2, 16 ALPN present but empty, 32 ALPN http/1.x, 64 ALPN spdy, 128 ALPN h2
  (h2 includes its drafts h2-NN). `-` is Tstat's empty string.
- UDP: `c_first_abs` / `s_first_abs` in ms since the epoch (0: no packet that way),
  `c_durat` / `s_durat` in **seconds**, `c_bytes_all` payload bytes, `c_type` / `s_type` from
  Tstat's `enum udp_type` (27 is UDP_QUIC in Tstat 3.1); a `quic_SNI` column, where a build
  has it, gives the QUIC server name. The UDP log carries no ALPN: QUIC flows are `quic-other`.

Protocol labels follow the rules of `protolab-net flows` (crates/flows): the server's ALPN
choice when the ServerHello shows it (`alpn_source = 'server'`: 128 -> h2, 32 -> h1, spdy ->
tls-other; NPN: the server's list, of which a browser takes h2, else spdy, else http/1.1), else
the client's offer (`client-offer`: TLS 1.3 hides the server's choice; the bitmask loses the
offer's order, taken as h2 before spdy before http/1.1, the browsers' order), else a TLS flow
without ALPN is `tls-other`, an HTTP flow Tstat saw in clear (`con_t` & 1, or `http_req_cnt` >
0) is h1 (`request-line`), the rest `tcp-other` / `udp-other`.

A malformed line is an error naming the file, the line and the column; `skip_bad` skips such
lines and counts them. The rows stream through a temporary tab-separated file into DuckDB and
out as Parquet, written atomically: no partial output on error.
"""

from __future__ import annotations

import gzip
import ipaddress
import os
import re
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, DecimalException
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from protolab.traffic.duck import (
    TrafficError,
    atomic_output,
    duck_connect,
    sql_path,
)
from protolab.traffic.schema import FLOW_COLUMNS, SCHEMA, SCHEMA_VERSION

# Tstat's enum npnalpn (tstat/struct.h).
NPN_EMPTY, NPN_HTTP, NPN_SPDY, NPN_H2 = 1, 2, 4, 8
ALPN_EMPTY, ALPN_HTTP, ALPN_SPDY, ALPN_H2 = 16, 32, 64, 128
CON_T_HTTP = 1
CON_T_TLS = 8192
UDP_TYPE_QUIC = 27
MAX_ERRORS_KEPT = 20
_LEVEL_PREFIX = re.compile(r"^#(\d+)#")


class TstatError(TrafficError):
    """A Tstat log that cannot be read (file, line and column named)."""


@dataclass
class ImportReport:
    files: list[dict[str, Any]] = field(default_factory=list)
    flows: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)  # the first MAX_ERRORS_KEPT skipped lines' errors
    protocols: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "flows": self.flows, "skipped_lines": self.skipped,
                "skipped_errors": self.errors, "protocols": self.protocols, "seconds": round(self.seconds, 3)}


class _BadValue(Exception):
    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column = column
        self.message = message


# ----------------------------------------------------------------------------------------------
# Header


def parse_header(line: str, path: Path) -> list[str]:
    """Column names in order from a Tstat header line (`#c_ip:1 c_port:2 ...`, or with the log
    level first: `#15#c_ip:1 ...`). Duplicated names (Tstat's advanced set repeats a few)
    keep their first position."""
    text = line.strip()
    if not text.startswith("#"):
        raise TstatError(f"{path}: line 1: not a Tstat log (the first line must be the '#c_ip:1 ...' header)")
    m = _LEVEL_PREFIX.match(text)
    text = text[m.end():] if m else text[1:]
    names: list[str] = []
    for position, token in enumerate(text.split(), start=1):
        name, sep, number = token.rpartition(":")
        if not sep:
            name = token
        elif not (number.isascii() and number.isdigit()) or int(number) != position:  # isdigit() alone takes "²"
            raise TstatError(f"{path}: line 1: header column {position} is '{token}' (expected 'name:{position}')")
        if not name:
            raise TstatError(f"{path}: line 1: header column {position} has no name")
        names.append(name)
    if not names:
        raise TstatError(f"{path}: line 1: empty header")
    return names


def log_kind(names: Sequence[str], path: Path) -> str:
    """'tcp' (log_tcp_complete / nocomplete) or 'udp' (log_udp_complete), from the header."""
    have = set(names)
    if "c_first_abs" in have:
        missing = [c for c in ("c_ip", "c_port", "s_ip", "s_port") if c not in have]
        kind = "udp"
    elif "first" in have or "c_pkts_all" in have:
        missing = [c for c in ("c_ip", "c_port", "s_ip", "s_port", "first") if c not in have]
        if "last" not in have and "durat" not in have:
            missing.append("last")
        kind = "tcp"
    else:
        raise TstatError(f"{path}: line 1: neither a log_tcp_complete header (no column 'first') nor a "
                         "log_udp_complete header (no column 'c_first_abs')")
    if missing:
        raise TstatError(f"{path}: line 1: column '{missing[0]}' is missing from the {kind.upper()} log header")
    return kind


# ----------------------------------------------------------------------------------------------
# Values


# The flow schema's integer columns are DuckDB BIGINT or INTEGER: a value beyond them would fail
# the Parquet write with a DuckDB error instead of an error naming the line.
_INTEGER_LIMITS = {"BIGINT": 2**63 - 1, "INTEGER": 2**31 - 1}
_COLUMN_LIMITS = {c: _INTEGER_LIMITS[t] for c, t, _ in FLOW_COLUMNS if t in _INTEGER_LIMITS}
_MAX_VALUE = _INTEGER_LIMITS["BIGINT"]


def _shown(text: str) -> str:
    """A value for an error message: a 5000-digit field is cut, not printed whole."""
    return text if len(text) <= 40 else text[:40] + "..."


def _int(column: str, text: str) -> int:
    # ASCII only: int() also takes other scripts' digits ("١٢") and "1_000", which Tstat never writes.
    try:
        value = int(text) if text.isascii() and "_" not in text else None
    except ValueError:  # also Python's limit on very long digit strings
        value = None
    if value is None:
        raise _BadValue(column, f"'{_shown(text)}' is not an integer")
    if value < 0:
        raise _BadValue(column, f"'{_shown(text)}' is negative")
    if value > _MAX_VALUE:
        raise _BadValue(column, f"'{_shown(text)}' is out of range (above 2^63-1)")
    return value


def _port(column: str, text: str) -> int:
    value = _int(column, text)
    if value > 65535:
        raise _BadValue(column, f"'{text}' is not a port (0-65535)")
    return value


_ip_cache: dict[str, str] = {}


def _ip(column: str, text: str) -> str:
    known = _ip_cache.get(text)
    if known is not None:
        return known
    try:
        normal = str(ipaddress.ip_address(text))
    except ValueError:
        raise _BadValue(column, f"'{text}' is not an IP address") from None
    if len(_ip_cache) < 1_000_000:
        _ip_cache[text] = normal
    return normal


def _scaled(column: str, text: str, ns_per_unit: int) -> int:
    """A non-negative decimal number of units (ms or s) as integer nanoseconds, exactly."""
    whole, dot, frac = text.partition(".")
    if text.isascii() and whole.isdigit() and len(whole) <= 19 and (not dot or frac.isdigit() or frac == ""):
        digits = len(str(ns_per_unit)) - 1  # ns_per_unit is a power of ten
        frac = (frac + "0" * digits)[:digits]
        scaled = int(whole) * ns_per_unit + (int(frac) if frac else 0)
    else:
        try:
            if not text.isascii():  # Decimal() also takes other scripts' digits
                raise DecimalException
            value = Decimal(text)
        except DecimalException:
            raise _BadValue(column, f"'{_shown(text)}' is not a number") from None
        if not value.is_finite() or value < 0:
            raise _BadValue(column, f"'{_shown(text)}' is not a non-negative number")
        # adjusted() is the exponent of the leading digit: checked before multiplying, because
        # "1e999999999" times 10^6 overflows the decimal context.
        scaled = _MAX_VALUE + 1 if value.adjusted() > 19 else int(value * ns_per_unit)
    if scaled > _MAX_VALUE:
        raise _BadValue(column, f"'{_shown(text)}' is out of range (above 2^63-1 ns)")
    return scaled


def _ms(column: str, text: str) -> int:
    return _scaled(column, text, 1_000_000)


def _s(column: str, text: str) -> int:
    return _scaled(column, text, 1_000_000_000)


def _name(text: str) -> str | None:
    return None if text in ("-", "") else text


# ----------------------------------------------------------------------------------------------
# Labels


def _alpn_names(mask: int, alpn: bool) -> list[str]:
    h2, spdy, http = (ALPN_H2, ALPN_SPDY, ALPN_HTTP) if alpn else (NPN_H2, NPN_SPDY, NPN_HTTP)
    return [name for bit, name in ((h2, "h2"), (spdy, "spdy"), (http, "http/1.1")) if mask & bit]


def _from_alpn(name: str) -> str:
    return {"h2": "h2", "http/1.1": "h1"}.get(name, "tls-other")


def tcp_labels(get: Callable[[str], str | None]) -> dict[str, Any]:
    """sni, alpn_offer, alpn_server, alpn_source and protocol of a TCP line (`get(column)`:
    the raw value, None if the log lacks the column)."""

    def mask(column: str) -> int:
        raw = get(column)
        return 0 if raw is None or raw == "-" else _int(column, raw)

    c_mask, s_mask, con_t = mask("c_npnalpn"), mask("s_npnalpn"), mask("con_t")
    http_req = mask("http_req_cnt")
    sni = _name(get("c_tls_SNI") or "-")
    if sni is None:
        scn = _name(get("s_tls_SCN") or "-")
        sni = scn if scn is not None and "*" not in scn else None
    offer = _alpn_names(c_mask, alpn=True)
    server_alpn = _alpn_names(s_mask, alpn=True)
    server_npn = _alpn_names(s_mask, alpn=False)
    out: dict[str, Any] = {"sni": sni, "alpn_offer": ",".join(offer) or None, "alpn_server": None,
                           "alpn_source": None}
    tls = bool(con_t & CON_T_TLS) or sni is not None or bool(c_mask) or bool(s_mask)
    if server_alpn or server_npn:
        chosen = (server_alpn or server_npn)[0]
        out.update(alpn_server=chosen, alpn_source="server", protocol=_from_alpn(chosen))
    elif offer:
        out.update(alpn_source="client-offer", protocol=_from_alpn(offer[0]))
    elif tls:
        out["protocol"] = "tls-other"
    elif con_t & CON_T_HTTP or http_req > 0:
        out.update(alpn_source="request-line", protocol="h1")
    else:
        out["protocol"] = "tcp-other"
    return out


# ----------------------------------------------------------------------------------------------
# Lines -> rows


OUT_COLUMNS = [c for c, _, _ in FLOW_COLUMNS]


def _tcp_row(get: Callable[[str], str | None]) -> dict[str, Any]:
    def need(column: str) -> str:
        raw = get(column)
        assert raw is not None  # the header check guarantees the required columns
        return raw

    def opt_int(column: str) -> int | None:
        raw = get(column)
        return None if raw is None else _int(column, raw)

    def pair_sum(a: str, b: str) -> int | None:
        x, y = opt_int(a), opt_int(b)
        return None if x is None or y is None else x + y

    first = _ms("first", need("first"))
    if get("last") is not None:
        last = _ms("last", need("last"))
        if last < first:
            raise _BadValue("last", f"'{get('last')}' is before 'first' ({get('first')})")
    else:
        last = first + _ms("durat", need("durat"))
    c_payload = opt_int("c_bytes_all")
    if c_payload is None:
        c_payload = opt_int("c_bytes_uniq")
    s_payload = opt_int("s_bytes_all")
    if s_payload is None:
        s_payload = opt_int("s_bytes_uniq")
    acks = pair_sum("c_ack_cnt", "s_ack_cnt")
    return {
        "source": "tstat", "transport": "tcp",
        "client_ip": _ip("c_ip", need("c_ip")), "client_port": _port("c_port", need("c_port")),
        "server_ip": _ip("s_ip", need("s_ip")), "server_port": _port("s_port", need("s_port")),
        "first_ns": first, "last_ns": last, "duration_s": (last - first) / 1e9,
        "c2s_packets": opt_int("c_pkts_all"), "s2c_packets": opt_int("s_pkts_all"),
        "c2s_bytes": None, "s2c_bytes": None,
        "c2s_payload_bytes": c_payload, "s2c_payload_bytes": s_payload,
        "c2s_retrans_bytes": opt_int("c_bytes_retx"), "s2c_retrans_bytes": opt_int("s_bytes_retx"),
        "syn": pair_sum("c_syn_cnt", "s_syn_cnt"), "fin": pair_sum("c_fin_cnt", "s_fin_cnt"),
        "rst": pair_sum("c_rst_cnt", "s_rst_cnt"), "ack": None if acks is None else acks > 0,
        "tls_version": None, "quic_version": None, "http_host": None,
        **tcp_labels(get),
    }


def _udp_row(get: Callable[[str], str | None]) -> dict[str, Any]:
    def opt_int(column: str) -> int | None:
        raw = get(column)
        return None if raw is None else _int(column, raw)

    def side(prefix: str) -> tuple[int, int] | None:
        raw_first = get(f"{prefix}_first_abs")
        if raw_first is None:
            return None
        first = _ms(f"{prefix}_first_abs", raw_first)
        packets = opt_int(f"{prefix}_pkts_all")
        if first == 0 or packets == 0:
            return None  # nothing seen in that direction
        raw_durat = get(f"{prefix}_durat")
        return first, first + (_s(f"{prefix}_durat", raw_durat) if raw_durat is not None else 0)

    spans = [x for x in (side("c"), side("s")) if x is not None]
    if not spans:
        raise _BadValue("c_first_abs", "no packet in either direction (c_first_abs and s_first_abs are 0)")
    first, last = min(a for a, _ in spans), max(b for _, b in spans)
    types = {opt_int("c_type"), opt_int("s_type")}
    quic_sni = _name(get("quic_SNI") or get("quic_sni") or "-")
    quic = UDP_TYPE_QUIC in types or quic_sni is not None
    c_ip, s_ip = get("c_ip"), get("s_ip")
    c_port, s_port = get("c_port"), get("s_port")
    assert c_ip is not None and s_ip is not None and c_port is not None and s_port is not None
    return {
        "source": "tstat", "transport": "udp",
        "client_ip": _ip("c_ip", c_ip), "client_port": _port("c_port", c_port),
        "server_ip": _ip("s_ip", s_ip), "server_port": _port("s_port", s_port),
        "first_ns": first, "last_ns": last, "duration_s": (last - first) / 1e9,
        "c2s_packets": opt_int("c_pkts_all"), "s2c_packets": opt_int("s_pkts_all"),
        "c2s_bytes": None, "s2c_bytes": None,
        "c2s_payload_bytes": opt_int("c_bytes_all"), "s2c_payload_bytes": opt_int("s_bytes_all"),
        "c2s_retrans_bytes": None, "s2c_retrans_bytes": None,
        "syn": None, "fin": None, "rst": None, "ack": None,
        "sni": quic_sni, "alpn_offer": None, "alpn_server": None, "alpn_source": None,
        "tls_version": None, "quic_version": None, "http_host": None,
        "protocol": "quic-other" if quic else "udp-other",
    }


def _check_limits(row: dict[str, Any]) -> None:
    """Sums of valid values (last = first + durat, SYNs of both directions) can still exceed
    their column."""
    for column, limit in _COLUMN_LIMITS.items():
        value = row.get(column)
        if isinstance(value, int) and value > limit:
            raise _BadValue("", f"{column} = {value} is beyond the flow schema's range (at most {limit})")


# A corrupt gzip stream fails in zlib (not an OSError) when the damage is past the gzip header.
_GZIP_ERRORS = (OSError, EOFError, gzip.BadGzipFile, zlib.error)


def _open_text(path: Path) -> IO[str]:
    try:
        with path.open("rb") as probe:
            magic = probe.read(2)
        if magic == b"\x1f\x8b":
            return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="")
        return path.open("r", encoding="utf-8", errors="replace", newline="")
    except FileNotFoundError:
        raise TstatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TstatError(f"{path}: is a directory") from None
    except OSError as exc:
        raise TstatError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def read_log(path: Path, *, skip_bad: bool = False, report: ImportReport | None = None
             ) -> Iterator[dict[str, Any]]:
    """Rows of one Tstat log, in file order."""
    report = report if report is not None else ImportReport()
    info: dict[str, Any] = {"file": str(path), "flows": 0, "skipped_lines": 0}
    with _open_text(path) as f:
        try:
            header = f.readline()
        except _GZIP_ERRORS as exc:
            raise TstatError(f"{path}: cannot read ({exc})") from exc
        if not header:
            raise TstatError(f"{path}: empty file (no Tstat header)")
        names = parse_header(header, path)
        kind = log_kind(names, path)
        info["kind"] = kind
        info["columns"] = len(names)
        position: dict[str, int] = {}
        for i, name in enumerate(names):
            position.setdefault(name, i)
        make = _tcp_row if kind == "tcp" else _udp_row
        width = len(names)
        line_no = 1
        while True:
            try:
                line = f.readline()
            except _GZIP_ERRORS as exc:
                raise TstatError(f"{path}: line {line_no + 1}: cannot read ({exc})") from exc
            if not line:
                break
            line_no += 1
            if not line.strip() or line.startswith("#"):
                continue  # blank lines; Tstat repeats its header when it rotates a log
            fields = line.split()
            try:
                if len(fields) != width:
                    raise _BadValue("", f"{len(fields)} fields, the header names {width}")
                row = make(lambda c, f=fields: f[position[c]] if c in position else None)
                _check_limits(row)
            except _BadValue as bad:
                where = f" column '{bad.column}' (column {position[bad.column] + 1})" if bad.column in position else ""
                message = f"{path}: line {line_no}:{where} {bad.message}"
                if not skip_bad:
                    raise TstatError(message) from None
                info["skipped_lines"] += 1
                report.skipped += 1
                if len(report.errors) < MAX_ERRORS_KEPT:
                    report.errors.append(message)
                continue
            info["flows"] += 1
            yield row
    report.files.append(info)


# ----------------------------------------------------------------------------------------------
# Import


def import_tstat(paths: Sequence[Path | str], out: Path | str, *, skip_bad: bool = False,
                 memory_limit: str = "2GB") -> ImportReport:
    """Read Tstat logs into one Parquet file of flows (atomically). Every file is checked before
    anything is written."""
    if not paths:
        raise TstatError("no Tstat log given")
    out = Path(out)
    files = [Path(p) for p in paths]
    for p in files:
        if not p.exists():
            raise TstatError(f"{p}: no such file")
        if not p.is_file():
            raise TstatError(f"{p}: not a file")
    report = ImportReport()
    started = time.perf_counter()
    types = {c: t for c, t, _ in FLOW_COLUMNS}
    with atomic_output([out]) as (tmp_out,):
        fd, tsv_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tsv", dir=out.parent)
        tsv = Path(tsv_name)
        try:
            # Tab-separated, no quoting: Tstat's values never hold white space (it splits on it).
            with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
                for path in files:
                    for row in read_log(path, skip_bad=skip_bad, report=report):
                        handle.write("\t".join(_cell(row[c]) for c in OUT_COLUMNS) + "\n")
                        report.flows += 1
                        report.protocols[row["protocol"]] = report.protocols.get(row["protocol"], 0) + 1
            columns = "{" + ", ".join(f"'{c}': '{t}'" for c, t in types.items()) + "}"
            meta = f"KV_METADATA {{schema: '{SCHEMA}', schema_version: '{SCHEMA_VERSION}', importer: 'tstat'}}"
            with duck_connect(memory_limit=memory_limit, temp_directory=out.parent) as con:
                con.execute(f"""
                    COPY (SELECT {', '.join(OUT_COLUMNS)} FROM read_csv('{sql_path(tsv)}', delim = '\\t',
                          header = false, quote = '', escape = '', nullstr = '\\N', columns = {columns},
                          auto_detect = false))
                    TO '{sql_path(tmp_out)}' (FORMAT parquet, {meta})""")
        finally:
            tsv.unlink(missing_ok=True)
    report.seconds = time.perf_counter() - started
    return report


def _cell(value: Any) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


# ----------------------------------------------------------------------------------------------
# Command line (registered on `protolab traffic` by protolab.traffic.cli)


def import_tstat_command(
    files: Annotated[list[Path], typer.Argument(help="Tstat logs: log_tcp_complete, log_tcp_nocomplete, "
                                                     "log_udp_complete (plain or gzipped).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output Parquet file (protolab.flows schema).")],
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Skip malformed lines (counted) instead of "
                                                              "stopping at the first.")] = False,
) -> None:
    """Import Tstat flow logs into the flow schema (source = tstat)."""
    from rich.markup import escape

    from protolab.traffic.duck import console, fail

    try:
        report = import_tstat(files, out, skip_bad=skip_bad)
    except TrafficError as exc:
        raise fail(exc) from None
    con = console()
    mix = ", ".join(f"{p} {n}" for p, n in sorted(report.protocols.items(), key=lambda kv: -kv[1]))
    con.print(f"{report.flows} flows from {len(report.files)} file(s) ({escape(mix) or 'none'}) in "
              f"{report.seconds:.1f} s; wrote {escape(str(out))}")
    if report.skipped:
        con.print(f"[yellow]skipped {report.skipped} malformed line(s)[/]; the first:")
        for message in report.errors[:5]:
            con.print(f"  {escape(message)}", highlight=False)


def register(app: Any) -> None:
    """Add `import-tstat` to the `protolab traffic` Typer app."""
    app.command("import-tstat")(import_tstat_command)
