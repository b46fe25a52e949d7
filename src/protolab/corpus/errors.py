"""Errors of the page corpus: bad manifests, bad HAR files, bad corpus parameters."""

from __future__ import annotations

from protolab.errors import ProtolabError


class CorpusError(ProtolabError):
    """A corpus request that cannot be met (unknown site, bad parameter, address space full)."""


class ManifestError(CorpusError):
    """A page manifest breaks a rule of docs/manifest.md. The message names the file and field."""

    def __init__(self, file: str, field: str, message: str) -> None:
        self.file = file
        self.field = field
        self.message = message
        super().__init__(f"{file}: {field}: {message}")


class HarError(CorpusError):
    """A HAR file that cannot be imported. The message names the file and the JSON path."""

    def __init__(self, file: str, field: str, message: str) -> None:
        self.file = file
        self.field = field
        self.message = message
        super().__init__(f"{file}: {field}: {message}")
