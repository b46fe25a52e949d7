#!/usr/bin/env python3
"""Import cycles between the modules of each Rust crate (tests/test_layout.py runs it; Python's own
cycles are checked there too).

A module is a file under `crates/<crate>/src` (`a/b.rs` and `a/b/mod.rs` are `a::b`); module A
depends on module B when A's code (outside `#[cfg(test)]` items, comments and literals) names a
path `crate::B...`. Edges between a module and its own ancestors or descendants are left out: a
parent declaring its child and a child using its parent's items is how Rust nests modules, not a
cycle of the design. Exit 1 and print each cycle found.
"""

from __future__ import annotations

import argparse
import graphlib
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from long_functions import _test_ranges, blank_rust  # noqa: E402 - the same blanking and test scan

CRATE_PATH = re.compile(r"\bcrate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)")
USE_GROUP = re.compile(r"\bcrate::((?:[a-z_][a-z0-9_]*::)*)\{([^}]*)\}")


def module_of(src: Path, file: Path) -> str:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return "::".join(parts)


def _referenced(code: str) -> set[str]:
    """Every `crate::a::b` path the code names, `use crate::a::{b, c}` groups expanded."""
    paths = {m.group(1) for m in CRATE_PATH.finditer(code)}
    for m in USE_GROUP.finditer(code):
        prefix = m.group(1)
        paths.update(prefix + item.strip().split(" ")[0].split("::")[0] for item in m.group(2).split(","))
    return paths


def _non_test_code(text: str) -> str:
    code = blank_rust(text)
    for start, end in sorted(_test_ranges(code), reverse=True):
        code = code[:start] + " " * (end - start) + code[end:]
    return code


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "::") or b.startswith(a + "::") or not a or not b


def crate_graph(src: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same crate it names, test code left out."""
    files = [f for f in sorted(src.rglob("*.rs")) if f.name != "tests.rs" and "tests" not in f.relative_to(src).parts]
    modules = {module_of(src, f): f for f in files}
    graph: dict[str, set[str]] = {}
    for module, file in modules.items():
        targets: set[str] = set()
        for path in _referenced(_non_test_code(file.read_text())):
            parts = path.split("::")
            # The longest prefix that is a module of the crate (the rest names an item in it).
            found = next((t for t in ("::".join(parts[:n]) for n in range(len(parts), 0, -1)) if t in modules), None)
            if found is not None and not _nested(module, found):
                targets.add(found)
        graph[module] = targets
    return graph


def cycle_of(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))
    return None


def cycles(root: Path) -> list[tuple[str, list[str]]]:
    """(crate, one cycle) for each crate of the workspace that has one."""
    found = []
    for src in sorted(root.glob("crates/*/src")):
        cycle = cycle_of(crate_graph(src))
        if cycle is not None:
            found.append((src.parent.name, cycle))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args(argv)
    found = cycles(args.root)
    for crate, cycle in found:
        print(f"{crate}: " + " -> ".join(cycle))
    print(f"{len(found)} crate(s) with an import cycle")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
