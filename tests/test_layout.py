"""The Python package's layout (issue 20): no import cycle between its modules, the stage
packages import only the stages before them, and every package's `__init__` says what it owns.

The import graph is read with `ast`, not by importing: every `import` counts, at module level,
inside functions and under `if TYPE_CHECKING:` alike, since each is a dependency of the design
even when Python would tolerate the cycle at run time. Importing `a.b.c` also depends on the
packages `a.b` and `a` (their `__init__` runs first) unless the importer is inside them.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def module_files(src: Path, package: str) -> dict[str, Path]:
    """Every module of a package under `src`, by dotted name (a package by its own name)."""
    modules: dict[str, Path] = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _absolute(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module an ImportFrom names, with a relative import resolved against its importer."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _with_packages(target: str, importer: str) -> set[str]:
    """`target` and the packages above it that importing it runs first; those that hold the
    importer have begun before it, so they are no dependency of it."""
    parts = target.split(".")
    names = {".".join(parts[:end]) for end in range(1, len(parts) + 1)}
    holding = {".".join(importer.split(".")[:end]) for end in range(1, importer.count(".") + 2)}
    return {target} | (names - holding)


def imports_of(importer: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `importer` (at `path`) imports, anywhere in its code."""
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(importer, path.name == "__init__.py", node)
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                targets.add(submodule if submodule in known else module)
    found = set().union(*(_with_packages(target, importer) for target in targets)) if targets else set()
    return (found & known) - {importer}


def import_graph(src: Path, package: str) -> dict[str, set[str]]:
    modules = module_files(src, package)
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, each module importing the next and the first repeated at the end;
    None when there is none."""
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        # graphlib lists each module before the ones that import it.
        return list(reversed(exc.args[1]))
    return None


def test_protolab_has_no_import_cycle() -> None:
    graph = import_graph(SRC, "protolab")
    assert len(graph) > 100 and "protolab.run.runner" in graph["protolab.run.cli"]
    cycle = import_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def write_package(directory: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)


# The stage packages in the order their imports point: each imports only stages before it. The
# runner drives a run through analysis into the store, so those sit below it although their data
# comes after the run's; the commands (`<stage>.cli`) sit above every stage and are not checked.
STAGES = ("results", "plan", "analysis", "store", "run", "validate", "report", "reproduce")


def stage_of(module: str) -> int | None:
    """The module's place in STAGES; None outside the stage packages."""
    parts = module.split(".")
    return STAGES.index(parts[1]) if len(parts) > 1 and parts[1] in STAGES else None


def test_stages_import_only_the_stages_before_them() -> None:
    graph = import_graph(SRC, "protolab")
    later = [f"{module} -> {target}" for module, targets in sorted(graph.items()) for target in sorted(targets)
             if not module.endswith(".cli") and (own := stage_of(module)) is not None
             and (other := stage_of(target)) is not None and other > own]
    assert not later, f"imports of a later stage: {later}"


@pytest.mark.parametrize("how, files", [
    ("module level", {"a.py": "import pkg.b\n", "b.py": "from pkg import a\n"}),
    ("function level", {"a.py": "from pkg.b import x\n", "b.py": "def f():\n    from pkg.a import y\n"}),
    ("type checking", {"a.py": "from pkg.b import x\n",
                       "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n"}),
    ("relative", {"a.py": "from .sub import c\n", "sub/__init__.py": "", "sub/c.py": "from ..a import x\n"}),
    ("through a package's __init__", {"a.py": "from pkg.sub.c import x\n",
                                      "sub/__init__.py": "from pkg.a import y\n", "sub/c.py": ""}),
])
def test_cycles_of_every_kind_are_found(tmp_path: Path, how: str, files: dict[str, str]) -> None:
    write_package(tmp_path / "pkg", {"__init__.py": "", **files})
    cycle = import_cycle(import_graph(tmp_path, "pkg"))
    assert cycle is not None and "pkg.a" in cycle, how


def test_a_package_importing_its_own_modules_is_no_cycle(tmp_path: Path) -> None:
    """A package's `__init__` re-exporting its modules, which import each other, is fine."""
    write_package(tmp_path / "pkg", {"__init__.py": "from pkg.a import x\n", "a.py": "from pkg.b import y\nx = y\n",
                                     "b.py": "y = 1\n"})
    assert import_cycle(import_graph(tmp_path, "pkg")) is None


def test_every_package_says_what_it_owns() -> None:
    packages = sorted((SRC / "protolab").rglob("__init__.py"))
    assert len(packages) > 10
    silent = [str(p.relative_to(SRC)) for p in packages if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not silent, f"packages whose __init__ has no docstring: {silent}"


# ---------------------------------------------------------------------------------------------
# Rust: no import cycle between the modules of a crate (scripts/rust_module_cycles.py).

RUST_CYCLES = SRC.parent / "scripts" / "rust_module_cycles.py"


def _rust_cycles(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUST_CYCLES), str(root)], capture_output=True, text=True, check=False)


def test_no_rust_crate_has_an_import_cycle() -> None:
    done = _rust_cycles(SRC.parent)
    assert done.returncode == 0, done.stdout


def test_a_rust_import_cycle_is_found(tmp_path: Path) -> None:
    src = tmp_path / "crates" / "demo" / "src"
    files = {
        "lib.rs": "pub mod a;\npub mod b;\npub mod c;\n",
        "a.rs": "use crate::b::B;\npub struct A;\n",
        "b.rs": "use crate::{c::C, a as _};\npub struct B;\n",
        # `a` named only in a comment, a string and a test: no dependency of `c`
        "c.rs": "// crate::a::A\nconst S: &str = \"crate::a\";\npub struct C;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
    }
    write_package(src, files)
    found = _rust_cycles(tmp_path)
    assert found.returncode == 1 and "a -> b -> a" in found.stdout, found.stdout  # b names a in its use group
    write_package(src, {**files, "b.rs": "use crate::{c::C};\npub struct B;\n"})
    assert _rust_cycles(tmp_path).returncode == 0
    write_package(src, {**files, "b.rs": "use crate::{c::C};\npub struct B;\n", "c.rs": "fn f() -> crate::a::A { todo!() }\n"})
    found = _rust_cycles(tmp_path)
    assert found.returncode == 1 and "demo:" in found.stdout, found.stdout
