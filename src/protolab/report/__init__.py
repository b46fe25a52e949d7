"""The HTML report of a results directory (reads only the results store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def build_report(*args: Any, **kwargs: Any) -> Path:
    """See protolab.report.build.build_report (imported lazily: matplotlib is heavy)."""
    from protolab.report.build import build_report as build

    return build(*args, **kwargs)
