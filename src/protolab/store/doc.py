"""docs/store.md's column tables, written from the schema (`protolab.store.schema`).

Under each `### `table`` heading of docs/store.md the prose is the author's; the `| column |
type | meaning |` table below it is this module's, rewritten from TABLES (the document tables'
columns and meanings come from the documents' own schemas). `python -m protolab.store.doc`
rewrites the file, `--check` exits 1 when it is stale (tests/test_contract.py runs it).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from protolab.store.schema import TABLES, Column

DOC = Path(__file__).resolve().parents[3] / "docs" / "store.md"
HEADING = re.compile(r"^### `(?P<table>[a-z_]+)`$")
HEADER = "| column | type | meaning |\n| --- | --- | --- |\n"


def _type(sql_type: str) -> str:
    base, _, modifiers = sql_type.partition(" ")
    return f"{base} {modifiers.lower()}".strip()


def column_table(columns: list[Column]) -> str:
    rows = "".join(f"| `{name}` | {_type(sql_type)} | {meaning.replace('|', '/')} |\n" for name, sql_type, meaning in columns)
    return HEADER + rows


def render(text: str) -> str:
    """`text` (docs/store.md) with the column table of every table's section rewritten; a
    section without a table gets one after its prose."""
    out: list[str] = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        out.append(lines[i])
        match = HEADING.match(lines[i].rstrip("\n"))
        i += 1
        if not match or match["table"] not in TABLES:
            continue
        # The prose up to the table (or the next heading), then the table, skipped and rewritten.
        while i < len(lines) and not lines[i].startswith("| column |") and not lines[i].startswith("#"):
            out.append(lines[i])
            i += 1
        while i < len(lines) and lines[i].startswith("|"):
            i += 1
        out.append(column_table(TABLES[match["table"]]))
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/store.md is stale, writing nothing")
    args = parser.parse_args(argv)
    text = DOC.read_text()
    fresh = render(text)
    if args.check:
        if fresh != text:
            print(f"{DOC}: its column tables are stale (run python -m protolab.store.doc)", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
