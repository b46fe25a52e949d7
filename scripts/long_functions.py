#!/usr/bin/env python3
"""Print every function longer than a limit (default 100 lines) outside tests; exit 1 if any.

A function's length runs from its `def`/`fn` line to its last line (decorators, attributes and
doc comments above it are not counted; a nested function counts in its own length and in its
parent's). Python files are read with `ast`. Rust files are scanned: comments, strings and
character literals are blanked out, then each `fn NAME` is followed to the brace that closes
its body. Tests are skipped: `tests/` directories, and in Rust the item after `#[cfg(test)]`
(a test module) and `#[test]` functions.

    python3 scripts/long_functions.py [--limit 100] [--except NAME ...] [ROOT]
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SKIPPED_DIRS = {"tests", "target", "node_modules", "__pycache__"}
FN_NAME = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
TEST_ATTRIBUTE = re.compile(r"#\[\s*(?:cfg\s*\(\s*test\s*\)|test)\s*\]")
IMPL_OR_TRAIT = re.compile(r"\b(?:impl|trait)\b([^{;]*)\{")
RAW_STRING_START = re.compile(r'b?r(#*)"')


@dataclass(frozen=True)
class Function:
    path: Path
    line: int
    name: str
    length: int


def source_files(root: Path) -> Iterator[Path]:
    """The .py and .rs files under `root`, outside tests, build output and hidden directories."""
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if any(part in SKIPPED_DIRS or part.startswith(".") for part in parts[:-1]):
            continue
        if path.suffix in (".py", ".rs") and path.is_file():
            yield path


# --- Python --------------------------------------------------------------------------------------


def python_functions(path: Path, text: str) -> Iterator[Function]:
    tree = ast.parse(text, filename=str(path))
    yield from _python_functions_in(tree, path, "")


def _python_functions_in(node: ast.AST, path: Path, prefix: str) -> Iterator[Function]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{child.name}"
            end = child.end_lineno or child.lineno
            yield Function(path, child.lineno, name, end - child.lineno + 1)
            yield from _python_functions_in(child, path, f"{name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _python_functions_in(child, path, f"{prefix}{child.name}.")
        else:
            yield from _python_functions_in(child, path, prefix)


# --- Rust ----------------------------------------------------------------------------------------


def blank_rust(text: str) -> str:
    """`text` with comments, string and character literals replaced by spaces (newlines kept),
    so that braces and `fn` are only found in code."""
    out = list(text)
    i, n = 0, len(text)

    def blank(start: int, end: int) -> None:
        for k in range(start, min(end, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            end = _block_comment_end(text, i)
            blank(i, end)
            i = end
        elif (raw := RAW_STRING_START.match(text, i)) and (i == 0 or not _ident_char(text[i - 1])):
            closing = '"' + raw.group(1)
            end = text.find(closing, raw.end())
            end = n if end < 0 else end + len(closing)
            blank(i, end)
            i = end
        elif c == '"':
            end = _quoted_end(text, i, '"')
            blank(i, end)
            i = end
        elif c == "'":
            end = _char_literal_end(text, i)
            if end is not None:
                blank(i, end)
                i = end
            else:
                i += 1  # a lifetime or a loop label
        else:
            i += 1
    return "".join(out)


def _ident_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _block_comment_end(text: str, start: int) -> int:
    """End of the (nested) block comment opening at `start`."""
    depth, i = 0, start
    while i < len(text):
        if text.startswith("/*", i):
            depth += 1
            i += 2
        elif text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return len(text)


def _quoted_end(text: str, start: int, quote: str) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == quote:
            return i + 1
        else:
            i += 1
    return len(text)


def _char_literal_end(text: str, start: int) -> int | None:
    """End of a character literal at `start` ('a', '\\n', '\\u{1F600}'), None for a lifetime."""
    if text.startswith("\\", start + 1):
        end = _quoted_end(text, start, "'")
        return end if end - start <= 12 else None
    if start + 2 < len(text) and text[start + 2] == "'":
        return start + 3
    return None


def _matching_brace(code: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(code) - 1


def _item_body(code: str, start: int) -> int | None:
    """Index of the `{` that opens the body of the item starting at `start`, None if the item
    ends with `;` first (a declaration, a `use`, a unit struct)."""
    depth = 0
    for i in range(start, len(code)):
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c == "{":
            return i
        elif depth == 0 and c == ";":
            return None
    return None


def _test_ranges(code: str) -> list[tuple[int, int]]:
    """Character ranges of the items marked `#[cfg(test)]` or `#[test]`."""
    ranges = []
    for attribute in TEST_ATTRIBUTE.finditer(code):
        body = _item_body(code, attribute.end())
        if body is not None:
            ranges.append((attribute.start(), _matching_brace(code, body)))
    return ranges


def _impl_names(code: str) -> list[tuple[int, int, str]]:
    """(start, end, type name) of each `impl`/`trait` block, to qualify method names."""
    blocks = []
    for block in IMPL_OR_TRAIT.finditer(code):
        header = re.sub(r"<[^<>]*(?:<[^<>]*>[^<>]*)*>", "", block.group(1))
        header = header.split(" where ")[0]
        target = header.split(" for ")[-1].strip()
        name = target.split("::")[-1].strip() or "?"
        blocks.append((block.start(), _matching_brace(code, block.end() - 1), name))
    return blocks


def rust_functions(path: Path, text: str) -> Iterator[Function]:
    code = blank_rust(text)
    tests = _test_ranges(code)
    impls = _impl_names(code)
    for match in FN_NAME.finditer(code):
        at = match.start()
        if any(start <= at <= end for start, end in tests):
            continue
        body = _item_body(code, match.end())
        if body is None:
            continue
        end = _matching_brace(code, body)
        first_line = code.count("\n", 0, at) + 1
        last_line = first_line + code.count("\n", at, end)
        owners = [name for start, stop, name in impls if start < at < stop]
        name = "::".join([*owners[-1:], match.group(1)])
        yield Function(path, first_line, name, last_line - first_line + 1)


# --- command line --------------------------------------------------------------------------------


def long_functions(root: Path, limit: int) -> list[Function]:
    """Every function of `root` longer than `limit` lines, longest first."""
    found = []
    for path in source_files(root):
        text = path.read_text(encoding="utf-8")
        functions = python_functions(path, text) if path.suffix == ".py" else rust_functions(path, text)
        found.extend(f for f in functions if f.length > limit)
    return sorted(found, key=lambda f: (-f.length, str(f.path), f.line))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parents[1],
                        help="repository root (default: this script's repository)")
    parser.add_argument("--limit", type=int, default=100, help="longest allowed function, lines (default 100)")
    parser.add_argument("--except", dest="allowed", action="append", default=[], metavar="NAME",
                        help="a function allowed to be longer, by name (e.g. build_run_rows, Engine::finish)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    offenders = [f for f in long_functions(root, args.limit) if f.name not in args.allowed]
    for f in offenders:
        print(f"{f.path.relative_to(root)}:{f.line}: {f.name}: {f.length} lines")
    if offenders:
        print(f"{len(offenders)} function(s) over {args.limit} lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
