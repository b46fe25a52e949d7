"""The pure parts of benches/emu_throughput.py on fixed data: the CPU-per-Gbit arithmetic, the
rows' status and the row selection (its /proc readers: tests/test_measure_proc.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from protolab.errors import ToolError
from protolab.measure.tools import IperfResult

BENCH = Path(__file__).resolve().parents[1] / "benches" / "emu_throughput.py"


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_emu_throughput", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


bench = _load_bench()

def test_accounting_divides_the_emulators_cpu_by_the_delivered_gbit() -> None:
    before = bench.CpuSample(at_s=100.0, machine_busy_ticks=1000, machine_total_ticks=5000, process_ticks=300)
    after = bench.CpuSample(at_s=104.0, machine_busy_ticks=1700, machine_total_ticks=5800, process_ticks=620)
    # 4 s, 320 ticks at 100 Hz = 3.2 CPU-s; 2.5e9 bytes = 20 Gbit; 700 of 800 machine ticks busy.
    accounting = bench.transfer_accounting(before, after, 2_500_000_000, 100)
    assert accounting["emulator_cpu_s"] == pytest.approx(3.2)
    assert accounting["emulator_cpu_s_per_gbit"] == pytest.approx(0.16)
    assert accounting["emulator_cores"] == pytest.approx(0.8)
    assert accounting["machine_busy"] == pytest.approx(0.875)


def test_accounting_without_a_process_or_bytes_leaves_the_undefined_parts_out() -> None:
    before = bench.CpuSample(at_s=1.0, machine_busy_ticks=10, machine_total_ticks=20)
    after = bench.CpuSample(at_s=2.0, machine_busy_ticks=15, machine_total_ticks=40)
    veth = bench.transfer_accounting(before, after, None, 100)
    assert veth == {"machine_busy": 0.25, "emulator_cpu_s": None, "emulator_cores": None,
                    "emulator_cpu_s_per_gbit": None}
    idle = bench.transfer_accounting(bench.CpuSample(1.0, 10, 20, 5), bench.CpuSample(2.0, 10, 20, 5), 0, 100)
    assert idle["emulator_cpu_s"] == 0 and idle["emulator_cpu_s_per_gbit"] is None and idle["machine_busy"] is None


def _row(name: str) -> Any:
    return next(row for row in bench.ROWS if row.name == name)


def test_row_status_against_rate_and_ratio_targets() -> None:
    ten_g = _row("emulator-shaped-10g")
    assert bench.row_status(ten_g, 9.5, 0.2) == "pass"
    assert bench.row_status(ten_g, 4.1, 0.9) == "fail"  # a shaped row has no ratio target
    unshaped = _row("emulator-unshaped")
    assert bench.row_status(unshaped, 10.2, 0.3) == "pass"  # >= 10 Gbit/s
    assert bench.row_status(unshaped, 8.0, 0.61) == "pass"  # or >= 0.6 of veth
    assert bench.row_status(unshaped, 8.0, 0.59) == "fail"
    assert bench.row_status(unshaped, 8.0, None) == "fail"
    assert bench.row_status(_row("emulator-unshaped-8flows"), 1.0, 0.1) == "info"
    assert bench.row_status(_row("veth-reference-8flows"), 1.0, 1.0) == "reference"


def test_selected_rows_bring_their_veth_references_in_the_benchmarks_order() -> None:
    assert [row.name for row in bench.select_rows(None)] == [row.name for row in bench.ROWS]
    assert [row.name for row in bench.select_rows(" emulator-unshaped-8flows, emulator-shaped-10g")] == [
        "emulator-shaped-10g", "emulator-unshaped-8flows", "veth-reference", "veth-reference-8flows"]
    assert [row.name for row in bench.select_rows("veth-reference")] == ["veth-reference"]
    with pytest.raises(bench.UnknownRow, match="unknown row.*emulator-5g.*the rows are emulator-shaped-10g"):
        bench.select_rows("emulator-unshaped,emulator-5g")
    with pytest.raises(bench.UnknownRow, match="none given"):
        bench.select_rows(" , ")


def _transfer(gbit: float, cpu_per_gbit: float | None, peak: int | None) -> Any:
    iperf = IperfResult(goodput_bps=gbit * 1e9, sender_bps=gbit * 1e9, received_bytes=1, received_seconds=1.0,
                        retransmits=3, congestion="cubic", streams=[])
    accounting = {"emulator_cpu_s_per_gbit": cpu_per_gbit, "emulator_cores": None, "machine_busy": 0.5}
    return bench.Transfer(iperf, accounting, None, peak, True if peak is not None else None)


def test_a_summary_compares_with_its_reference_and_takes_medians_and_the_peak() -> None:
    row = _row("emulator-unshaped-8flows")
    summary = bench.summarise(row, [_transfer(3.0, 0.2, 40 << 20), _transfer(5.0, 0.1, 60 << 20),
                                    _transfer(4.0, None, 50 << 20)], reference_gbit=20.0)
    assert summary["gbit_per_s"] == 4.0 and summary["ratio_to_veth"] == pytest.approx(0.2)
    assert summary["emulator_cpu_s_per_gbit"] == pytest.approx(0.15)  # median of the defined ones
    assert summary["samples_emulator_cpu_s_per_gbit"] == [0.2, 0.1, None]
    assert summary["peak_rss_bytes"] == 60 << 20 and summary["peak_rss_per_transfer"] is True
    assert summary["status"] == "info" and summary["reference"] == "veth-reference-8flows"


def test_the_table_and_notes_show_the_accounting_and_the_memory() -> None:
    from rich.console import Console

    rows = [bench.summarise(_row("emulator-shaped-10g"), [_transfer(4.2, 0.125, 48 << 20)], reference_gbit=16.8),
            bench.summarise(_row("veth-reference"), [_transfer(16.8, None, None)], reference_gbit=16.8)]
    report = {"results": rows, "load_average": {"before": [3.0, 2.5, 2.0], "after": [3.5, 2.6, 2.1]},
              "memory": {"rss_before_first_transfer_bytes": 12 << 20, "peak_rss_shaped_10g_2bdp_bytes": 48 << 20,
                         "peak_rss_per_transfer": True}}
    console = Console(width=200, record=True)
    console.print(bench.render(report))
    table = console.export_text()
    assert "emulator-shaped-10g" in table and "0.250" in table and "0.125" in table and ">= 9.5" in table
    assert "fail" in table and "48" in table and "reference" in table
    notes = bench.render_notes(report)
    assert "before the first transfer: 12.0 MiB" in notes and "(during the transfer): 48.0 MiB" in notes
    assert "before: 3.00, 2.50, 2.00" in notes
