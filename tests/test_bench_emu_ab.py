"""The pure parts of benches/emu_ab.py: its --binary options and its summary on fixed samples."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benches" / "emu_ab.py"


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_emu_ab", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = _load_bench()


def test_binaries_are_name_path_pairs_of_existing_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"")
    b.write_bytes(b"")
    assert bench.parse_binaries([f"main={a}", f"new={b}"]) == {"main": a, "new": b}
    for bad, why in ([f"main{a}"], "NAME=PATH"), ([f"main={a}", f"main={b}"], "taken"), ([f"veth={a}"], "taken"), \
            ([f"main={tmp_path / 'none'}"], "no file"), ([], "at least one"):
        with pytest.raises(bench.BadBinaryOption, match=why):
            bench.parse_binaries(bad)


def test_the_summary_takes_medians_against_the_veth_median_and_adds_up_the_errors() -> None:
    def emu(gbit: float, cpu: float | None, tx_errors: int = 0) -> dict[str, object]:
        return {"gbit_per_s": gbit, "emulator_cpu_s_per_gbit": cpu, "tx_errors": tx_errors, "rx_malformed": 0}

    samples = {"main": [emu(6.0, 0.12), emu(5.0, 0.13), emu(7.0, None, 2)],
               "new": [emu(9.0, 0.08), emu(10.0, 0.09, 1), emu(11.0, 0.07)],
               "veth": [{"gbit_per_s": 20.0}, {"gbit_per_s": 30.0}, {"gbit_per_s": 25.0}]}
    summary = bench.summarise(samples)
    assert summary["main"] == {"gbit_per_s": 6.0, "ratio_to_veth": 0.24, "emulator_cpu_s_per_gbit": 0.125,
                               "late_mean_us": None, "late_p999_us_at_most": None, "late_passes": None,
                               "tx_errors": 2, "rx_malformed": 0}
    assert summary["new"]["ratio_to_veth"] == pytest.approx(0.4)
    assert summary["new"]["emulator_cpu_s_per_gbit"] == 0.08
    assert summary["veth"]["ratio_to_veth"] == 1.0 and summary["veth"]["emulator_cpu_s_per_gbit"] is None


def test_the_delivery_lateness_comes_from_the_emulators_counters_and_its_median_per_binary() -> None:
    counters = {"delivery_late": {"packets": 10, "mean_ns": 21_500, "max_ns": 3_100_000, "p999_ns_at_most": 500_000},
                "late_passes": [{"at_unix_ns": 1, "late_ns": 1_400_000, "packets": 408, "cpu": 0}]}
    assert bench.delivery_lateness(counters) == {"late_mean_us": 21.5, "late_p999_us_at_most": 500.0, "late_passes": 1}
    idle = {"delivery_late": {"packets": 0, "mean_ns": 0, "max_ns": 0, "p999_ns_at_most": None}, "late_passes": []}
    assert bench.delivery_lateness(idle) == {"late_mean_us": 0.0, "late_p999_us_at_most": None, "late_passes": 0}

    def emu(mean_us: float, passes: int) -> dict[str, object]:
        return {"gbit_per_s": 9.6, "emulator_cpu_s_per_gbit": 0.1, "tx_errors": 0, "rx_malformed": 0,
                "late_mean_us": mean_us, "late_p999_us_at_most": 200.0, "late_passes": passes}

    summary = bench.summarise({"base": [emu(45.0, 15), emu(31.0, 0), emu(71.0, 36)],
                               "veth": [{"gbit_per_s": 40.0}]})
    assert (summary["base"]["late_mean_us"], summary["base"]["late_passes"]) == (45.0, 15)
    assert summary["base"]["late_p999_us_at_most"] == 200.0 and summary["veth"]["late_mean_us"] is None
