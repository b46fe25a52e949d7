"""Errors of the page corpus: bad manifests, bad HAR files, bad corpus parameters."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from protolab.errors import ProtolabError
from protolab.files import parse_json


class CorpusError(ProtolabError):
    """A corpus request that cannot be met (unknown site, bad parameter, address space full)."""


class FileFieldError(CorpusError):
    """Bad input in a file; the message names the file and the field (JSON path)."""

    def __init__(self, file: str, field: str, message: str) -> None:
        self.file = file
        self.field = field
        self.message = message
        super().__init__(f"{file}: {field}: {message}")


class ManifestError(FileFieldError):
    """A page manifest breaks a rule of docs/manifest.md. The message names the file and field."""


class HarError(FileFieldError):
    """A HAR file that cannot be imported. The message names the file and the JSON path."""


def read_json_file(path: str | os.PathLike[str], error: type[FileFieldError], encoding: str = "utf-8") -> Any:
    """The JSON document of a file; unreadable or not JSON raises `error` naming the file."""
    label = str(path)
    try:
        text = Path(path).read_text(encoding=encoding)
    except (OSError, UnicodeDecodeError) as exc:
        raise error(label, "(file)", f"cannot read: {exc}") from None
    try:
        return parse_json(text)
    except ValueError as exc:  # JSONDecodeError, or NestedTooDeeply
        raise error(label, "(document)", f"not JSON: {exc}") from None
