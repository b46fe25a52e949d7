"""The Rich consoles every command prints to: `console` (stdout) and `error_console` (stderr).

A leaf: the command modules of every stage share these without importing the app
(`protolab.cli`), which imports them."""

from __future__ import annotations

import os
import sys

from rich.console import Console

# Logs and CI output are not terminals: give tables room instead of Rich's default of 80 columns.
WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120

console = Console(width=WIDTH)
error_console = Console(stderr=True, width=WIDTH)
