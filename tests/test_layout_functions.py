"""No function over 100 lines outside tests (scripts/long_functions.py), in Python and Rust."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "long_functions.py"

# Functions allowed to be longer, by name (none: build_run_rows, excepted while it was being
# rewritten, is short since the store's rewrite).
ALLOWED: list[str] = []


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_no_function_over_100_lines() -> None:
    result = _run(*(arg for name in ALLOWED for arg in ("--except", name)), str(REPO))
    assert result.returncode == 0, f"functions over 100 lines:\n{result.stdout}"


def test_the_scan_finds_long_functions(tmp_path: Path) -> None:
    body = "\n".join(f"    x = {i}" for i in range(6))
    (tmp_path / "a.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    pass\n")
    rust_body = "\n".join(f'    let s{i} = "}} fn fake() {{"; // }}' for i in range(6))
    (tmp_path / "b.rs").write_text(
        "/* fn commented() { */\n"
        f"fn long_rust(a: [u8; 2]) -> u8 {{\n    let c = '{{';\n{rust_body}\n    0\n}}\n"
        "fn short_rust<'a>(x: &'a str) -> &'a str { x }\n"
        "#[cfg(test)]\nmod tests {\n    fn long_test() {\n" + "\n".join("        ;" for _ in range(9)) + "\n    }\n}\n"
        "impl Thing {\n    fn method(&self) {\n" + "\n".join("        ;" for _ in range(6)) + "\n    }\n}\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "c.py").write_text(f"def in_tests():\n{body}\n")
    result = _run("--limit", "5", str(tmp_path))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "b.rs:2: long_rust: 10 lines",
        "b.rs:28: Thing::method: 8 lines",
        "a.py:1: long: 7 lines",
    ]
    assert _run("--limit", "10", str(tmp_path)).returncode == 0
