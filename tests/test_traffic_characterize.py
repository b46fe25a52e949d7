"""Flow characterization, 000 Fig. 3.3 (docs/traffic.md, "Characterization"), on fixed flows."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from protolab.traffic.characterize import GRID, characterize, characterize_file
from protolab.traffic.duck import TrafficError

NS = 1_000_000_000


def _flows(path: Path, rows: list[tuple[str | None, float, int, int, int | None, int | None]],
           payload: bool = False) -> Path:
    """Rows (protocol, duration s, c2s packets, s2c packets, c2s bytes, s2c bytes)."""
    kind = "payload_bytes" if payload else "bytes"
    with duckdb.connect() as con:
        con.execute(f"CREATE TABLE f (protocol VARCHAR, first_ns BIGINT, last_ns BIGINT, c2s_packets BIGINT, "
                    f"s2c_packets BIGINT, c2s_{kind} BIGINT, s2c_{kind} BIGINT)")
        con.executemany("INSERT INTO f VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [[p, 10 * NS, 10 * NS + round(d * NS), a, b, c, e] for p, d, a, b, c, e in rows])
        con.execute(f"COPY f TO '{path}' (FORMAT parquet)")
    return path


ROWS = [("h1", 1.0, 10, 20, 1000, 20000), ("h1", 3.0, 30, 40, 3000, 60000), ("h1", 2.0, 20, 30, 2000, 30000),
        ("h2", 10.0, 5, 5, 500, 7500), ("h3", 0.5, 4, 8, 400, 9600), (None, 0.1, 1, 1, 60, 60)]


def test_cdfs_and_medians_by_class(tmp_path: Path) -> None:
    src = _flows(tmp_path / "f.parquet", ROWS)
    with duckdb.connect() as con:
        result = characterize(con, f"read_parquet('{src}')")
    # Unlabelled flows are left out; classes in the order h1, h2, h3.
    assert result["classes"] == {"h1": 3, "h2": 1, "h3": 1}
    h1 = {name: m["by_class"]["h1"] for name, m in result["metrics"].items()}
    assert h1["duration_s"]["median"] == 2.0 and h1["c2s_packets"]["median"] == 20
    assert h1["s2c_bytes"]["median"] == 30000 and h1["s2c_bytes_per_packet"]["median"] == 1000
    assert h1["c2s_bytes_per_packet"]["values"] == [100.0] * len(GRID)
    # The CDF is the data's own quantiles: the minimum at 0, the maximum at 1, non-decreasing.
    durations = h1["duration_s"]["values"]
    assert (durations[0], durations[-1]) == (1.0, 3.0) and durations == sorted(durations)
    assert result["metrics"]["c2s_bytes"]["by_class"]["h3"]["values"] == [400.0] * len(GRID)


def test_the_command_writes_json_and_figure(tmp_path: Path) -> None:
    from protolab.traffic.cli import traffic_app

    src = _flows(tmp_path / "f.parquet", ROWS, payload=True)
    out = tmp_path / "out"
    done = CliRunner().invoke(traffic_app, ["characterize", str(src), "--out", str(out)])
    assert done.exit_code == 0, done.output
    summary = json.loads((out / "characterization.json").read_text())
    assert summary["schema"] == "protolab.traffic.characterization" and summary["bytes_basis"] == "payload"
    assert summary["metrics"]["s2c_bytes"]["by_class"]["h2"]["median"] == 7500
    assert (out / "fig3_3_characterization.png").stat().st_size > 10_000
    assert (out / "fig3_3_characterization.svg").is_file()


@pytest.mark.parametrize(("args", "message"), [
    (["--bytes", "ip"], "field 'c2s_bytes' is missing or empty (--bytes ip)"),
    (["--bytes", "wire"], "--bytes wire: expected one of auto, ip, payload"),
    (["--label", "service"], "field 'service' is missing"),
])
def test_bad_options_are_named_and_write_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    from protolab.traffic.cli import traffic_app

    src = _flows(tmp_path / "f.parquet", ROWS, payload=True)
    done = CliRunner().invoke(traffic_app, ["characterize", str(src), "--out", str(tmp_path / "out"), *args])
    assert done.exit_code == 2 and message in done.output and "Traceback" not in done.output
    assert not (tmp_path / "out").exists()


def test_a_file_without_packet_counts_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT 'h1' AS protocol, 1 AS first_ns, 2 AS last_ns) TO '{bad}' (FORMAT parquet)")
    with pytest.raises(TrafficError, match=r"bad.parquet: field 'c2s_packets' is missing"):
        characterize_file(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()
