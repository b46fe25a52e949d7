"""Tstat import (docs/traffic.md, "Tstat import"): the hand-made fixture of tests/fixtures/tstat
(19 TCP flows, 6 UDP flows) mapped into the flow schema column by column, the header variants,
malformed lines named by file, line and column, --skip-bad, and the command's exit status."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import duckdb
import pytest
import typer
from typer.testing import CliRunner

from protolab.traffic import tstat
from protolab.traffic.schema import FLOW_COLUMNS
from protolab.traffic.tstat import TstatError, import_tstat, parse_header, tcp_labels

FIXTURES = Path(__file__).parent / "fixtures" / "tstat"
TCP_LOG = FIXTURES / "log_tcp_complete"
UDP_LOG = FIXTURES / "log_udp_complete"
FB = "scontent-bru2-1.xx.fbcdn.net"


def _rows(path: Path) -> list[dict[str, Any]]:
    con = duckdb.connect()
    cur = con.execute(f"SELECT * FROM read_parquet('{path}')")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tstat.ImportReport]:
    out = tmp_path_factory.mktemp("tstat") / "flows.parquet"
    report = import_tstat([TCP_LOG, UDP_LOG], out)
    return out, report


def test_the_fixture_imports_into_the_flow_schema(imported: tuple[Path, tstat.ImportReport]) -> None:
    out, report = imported
    assert report.flows == 25 and report.skipped == 0
    assert [f["kind"] for f in report.files] == ["tcp", "udp"]
    assert [f["columns"] for f in report.files] == [64, 20]
    assert report.protocols == {"h2": 11, "h1": 5, "tls-other": 2, "tcp-other": 1, "udp-other": 3, "quic-other": 3}
    schema = duckdb.connect().execute(f"DESCRIBE SELECT * FROM read_parquet('{out}')").fetchall()
    assert [(r[0], r[1]) for r in schema] == [(c, t) for c, t, _ in FLOW_COLUMNS]
    meta = dict(duckdb.connect().execute(
        f"SELECT key::VARCHAR, value::VARCHAR FROM parquet_kv_metadata('{out}')").fetchall())
    assert meta["schema"] == "protolab.flows" and meta["schema_version"] == "1"
    rows = _rows(out)
    assert {r["source"] for r in rows} == {"tstat"}
    assert all(r["c2s_bytes"] is None and r["s2c_bytes"] is None for r in rows)  # Tstat counts payload bytes


def test_a_tcp_line_column_by_column(imported: tuple[Path, tstat.ImportReport]) -> None:
    rows = {(r["client_ip"], r["client_port"]): r for r in _rows(imported[0])}
    f4 = rows[("10.0.0.5", 50104)]  # 000 Table 4.3's F4
    assert f4 == {
        "source": "tstat", "transport": "tcp", "client_ip": "10.0.0.5", "client_port": 50104,
        "server_ip": "179.60.195.12", "server_port": 443,
        "first_ns": 1456822931498_000000, "last_ns": 1456823080442_000000, "duration_s": 148.944,
        "c2s_packets": 120, "s2c_packets": 230, "c2s_bytes": None, "s2c_bytes": None,
        "c2s_payload_bytes": 9012, "s2c_payload_bytes": 297315, "c2s_retrans_bytes": 0, "s2c_retrans_bytes": 0,
        "syn": 2, "fin": 2, "rst": 0, "ack": True, "sni": FB, "alpn_offer": "h2,http/1.1",
        "alpn_server": "h2", "alpn_source": "server", "tls_version": None, "quic_version": None,
        "http_host": None, "protocol": "h2"}
    # Fractional milliseconds become exact nanoseconds.
    late = rows[("10.0.0.5", 50230)]
    assert (late["first_ns"], late["last_ns"]) == (1456823531000_250000, 1456823533500_750000)
    assert late["duration_s"] == pytest.approx(2.5005)
    # Retransmitted payload bytes, a reset by the client: FIN 0 + 0, RST 1 + 0.
    reset = rows[("10.0.0.12", 54002)]
    assert (reset["c2s_payload_bytes"], reset["c2s_retrans_bytes"], reset["s2c_retrans_bytes"]) == (2920, 1460, 2920)
    assert (reset["syn"], reset["fin"], reset["rst"]) == (2, 0, 1)


@pytest.mark.parametrize(("port", "protocol", "source", "offer", "server", "sni"), [
    (50101, "h2", "server", "h2,http/1.1", "h2", FB),                         # s_npnalpn 128
    (41000, "h1", "request-line", None, None, None),                        # HTTP in clear (con_t 1)
    (41010, "h1", "server", "h2,http/1.1", "http/1.1", "www.reddit.com"),   # server chose http/1.1 (32)
    (52000, "h2", "client-offer", "h2,http/1.1", None, "www.google.com"),   # TLS 1.3: only the offer (160)
    (52001, "h1", "client-offer", "http/1.1", None, "www.google.com"),      # offer of http/1.1 only (32)
    (52002, "h2", "server", None, "h2", "www.facebook.com"),                # NPN list h2, spdy, http (14)
    (52003, "tls-other", "server", "spdy,http/1.1", "spdy", "mail.google.com"),  # ALPN spdy (64)
    (53000, "tls-other", None, None, None, "imap.example.net"),             # TLS without ALPN
    (53001, "tcp-other", None, None, None, None),                           # SSH
    (54000, "h2", "server", "h2", "h2", "www.example.com"),                 # no SNI: certificate name
    (54001, "h2", "server", "h2,http/1.1", "h2", None),                     # wildcard certificate: no name
])
def test_protocol_labels_from_the_bitmasks(imported: tuple[Path, tstat.ImportReport], port: int, protocol: str,
                                           source: str | None, offer: str | None, server: str | None,
                                           sni: str | None) -> None:
    row = next(r for r in _rows(imported[0]) if r["client_port"] == port)
    assert (row["protocol"], row["alpn_source"], row["alpn_offer"], row["alpn_server"], row["sni"]) == \
        (protocol, source, offer, server, sni)


def test_udp_lines_and_quic(imported: tuple[Path, tstat.ImportReport]) -> None:
    rows = {r["client_port"]: r for r in _rows(imported[0]) if r["transport"] == "udp"}
    quic = rows[61001]
    # c_first_abs in ms, c_durat in s: the flow spans both directions.
    assert (quic["first_ns"], quic["last_ns"]) == (1456822960100_000000, 1456822960122_000000 + 14_230000000)
    assert (quic["c2s_packets"], quic["s2c_packets"], quic["c2s_payload_bytes"], quic["s2c_payload_bytes"]) == \
        (120, 640, 12021, 880213)
    assert (quic["protocol"], quic["sni"], quic["syn"], quic["ack"]) == ("quic-other", "www.youtube.com", None, None)
    assert rows[61003]["protocol"] == "quic-other" and rows[61003]["sni"] is None
    assert [rows[p]["protocol"] for p in (53124, 40000, 40001)] == ["udp-other"] * 3
    one_way = rows[40001]  # no server packet: s_first_abs 0
    assert (one_way["first_ns"], one_way["last_ns"], one_way["s2c_packets"]) == \
        (1456822946000_001000, 1456822947000_001000, 0)


def test_header_variants() -> None:
    p = Path("x")
    assert parse_header("#15#c_ip:1 c_port:2 s_ip:3", p) == ["c_ip", "c_port", "s_ip"]
    assert parse_header("#c_ip:1 c_port:2\n", p) == ["c_ip", "c_port"]
    with pytest.raises(TstatError, match=r"x: line 1: header column 2 is 'c_port:3'"):
        parse_header("#c_ip:1 c_port:3", p)
    with pytest.raises(TstatError, match=r"x: line 1: not a Tstat log"):
        parse_header("c_ip:1 c_port:2", p)


def test_labels_without_layer7_columns() -> None:
    """A log without the Layer-7 set: con_t alone says TLS or HTTP."""
    cols = {"con_t": "8192"}
    assert tcp_labels(cols.get)["protocol"] == "tls-other"
    assert tcp_labels({"con_t": "1"}.get) == {"sni": None, "alpn_offer": None, "alpn_server": None,
                                                   "alpn_source": "request-line", "protocol": "h1"}
    assert tcp_labels({}.get)["protocol"] == "tcp-other"


def _log(tmp_path: Path, lines: list[str], name: str = "log_tcp_complete") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


HEADER = "#c_ip:1 c_port:2 s_ip:3 s_port:4 first:5 last:6 c_pkts_all:7 s_pkts_all:8"
GOOD = "10.0.0.1 40000 10.0.0.2 443 1000.5 2000 3 4"


@pytest.mark.parametrize(("line", "message"), [
    ("10.0.0.1 40000 10.0.0.2 443 1000.5 2000 3", r"line 3: 7 fields, the header names 8"),
    ("10.0.0.1 4000x 10.0.0.2 443 1000.5 2000 3 4", r"line 3: column 'c_port' \(column 2\) '4000x' is not an integer"),
    ("10.0.0.1 40000 10.0.0.2 70000 1000.5 2000 3 4", r"line 3: column 's_port' \(column 4\) '70000' is not a port"),
    ("10.0.0.999 40000 10.0.0.2 443 1000.5 2000 3 4", r"line 3: column 'c_ip' \(column 1\) '10.0.0.999' is not an IP"),
    ("10.0.0.1 40000 10.0.0.2 443 abc 2000 3 4", r"line 3: column 'first' \(column 5\) 'abc' is not a number"),
    ("10.0.0.1 40000 10.0.0.2 443 3000 2000 3 4", r"line 3: column 'last' \(column 6\) '2000' is before 'first'"),
    ("10.0.0.1 40000 10.0.0.2 443 1000 2000 -3 4", r"line 3: column 'c_pkts_all' \(column 7\) '-3' is negative"),
])
def test_a_malformed_line_names_file_line_and_column(tmp_path: Path, line: str, message: str) -> None:
    log = _log(tmp_path, [HEADER, GOOD, line])
    out = tmp_path / "out" / "flows.parquet"
    with pytest.raises(TstatError, match=rf"^{tmp_path}/log_tcp_complete: {message}"):
        import_tstat([log], out)
    assert not (tmp_path / "out").exists()  # no partial output, not even the directory


def test_skip_bad_skips_and_counts(tmp_path: Path) -> None:
    log = _log(tmp_path, [HEADER, GOOD, "10.0.0.1 x 10.0.0.2 443 1 2 3 4", "", GOOD.replace("40000", "40001"),
                          "short line"])
    report = import_tstat([log], tmp_path / "f.parquet", skip_bad=True)
    assert (report.flows, report.skipped) == (2, 2)
    assert report.errors[0].endswith("line 3: column 'c_port' (column 2) 'x' is not an integer")
    assert report.errors[1].endswith("line 6: 2 fields, the header names 8")
    rows = _rows(tmp_path / "f.parquet")
    assert [r["client_port"] for r in rows] == [40000, 40001]
    assert rows[0]["first_ns"] == 1_000_500_000 and rows[0]["protocol"] == "tcp-other"


@pytest.mark.parametrize(("lines", "message"), [
    ([], r"empty file"),
    (["#c_ip:1 c_port:2 s_ip:3 s_port:4"], r"line 1: neither a log_tcp_complete header"),
    (["#c_ip:1 c_port:2 s_port:3 first:4 durat:5"], r"line 1: column 's_ip' is missing from the TCP log header"),
    (["#c_ip:1 c_port:2 s_ip:3 s_port:4 first:5"], r"line 1: column 'last' is missing from the TCP log header"),
])
def test_bad_headers(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "log"
    path.write_text("\n".join(lines) + ("\n" if lines else ""))
    with pytest.raises(TstatError, match=message):
        import_tstat([path], tmp_path / "f.parquet")


def test_gzipped_logs_and_durat_without_last(tmp_path: Path) -> None:
    path = tmp_path / "log_tcp_complete.gz"
    with gzip.open(path, "wt") as f:
        f.write("#15#c_ip:1 c_port:2 s_ip:3 s_port:4 first:5 durat:6 con_t:7 http_req_cnt:8\n")
        f.write("2001:db8::1 40000 2001:db8::2 80 1456822940000.125 250.5 0 2\n")
    report = import_tstat([path], tmp_path / "f.parquet")
    row = _rows(tmp_path / "f.parquet")[0]
    assert report.flows == 1
    assert (row["client_ip"], row["first_ns"], row["last_ns"]) == \
        ("2001:db8::1", 1456822940000_125000, 1456822940250_625000)
    assert (row["protocol"], row["alpn_source"], row["c2s_packets"], row["syn"]) == ("h1", "request-line", None, None)


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _traffic() -> None:
        """protolab traffic (stand-in)."""

    tstat.register(app)
    return app


def test_the_command(tmp_path: Path) -> None:
    out = tmp_path / "flows.parquet"
    result = CliRunner().invoke(_app(), ["import-tstat", str(TCP_LOG), str(UDP_LOG), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "25 flows from 2 file(s) (h2 11, h1 5" in result.output and out.is_file()
    bad = _log(tmp_path, [HEADER, GOOD, "10.0.0.1 40000 10.0.0.2 443 1 2 3 x"], "bad_log")
    result = CliRunner().invoke(_app(), ["import-tstat", str(bad), "--out", str(tmp_path / "b.parquet")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "bad_log: line 3: column 's_pkts_all' (column 8) 'x' is not an integer" in result.output
    assert not (tmp_path / "b.parquet").exists()
    result = CliRunner().invoke(_app(), ["import-tstat", str(tmp_path / "nope"), "--out", str(out)])
    assert result.exit_code == 2 and "nope: no such file" in result.output
    result = CliRunner().invoke(_app(), ["import-tstat", str(bad), "--skip-bad", "--out", str(tmp_path / "s.parquet")])
    assert result.exit_code == 0 and "skipped 1 malformed line(s)" in result.output
