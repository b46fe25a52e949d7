"""Every benchmark script still imports and parses its options.

The benchmarks are not run by the suite (they measure, they do not assert), so a moved module
broke all of them once without a failing test; `--help` loads each one and stops before any
measurement.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHES = sorted((Path(__file__).resolve().parent.parent / "benches").glob("*.py"))


@pytest.mark.parametrize("bench", BENCHES, ids=[bench.name for bench in BENCHES])
def test_bench_imports_and_shows_its_options(bench: Path) -> None:
    done = subprocess.run([sys.executable, str(bench), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Usage" in done.stdout or "usage" in done.stdout
