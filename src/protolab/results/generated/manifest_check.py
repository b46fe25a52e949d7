# Generated from schemas/manifest-check.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class CheckedManifest(BaseModel):
    """
    One manifest's check: accepted (`ok`, with what it holds) or refused (the field and why).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes: Annotated[int | None, Field(ge=0)] = None
    """
    Accepted: total size of the objects, bytes.
    """
    field: str | None = None
    """
    Refused: the field, as a path (`objects[3].parent`; `(document)` for text that is not a
    JSON manifest, `(file)` for a file that cannot be read).
    """
    file: str
    """
    The file as given (`-`: the manifest read from stdin).
    """
    message: str | None = None
    """
    Refused: why.
    """
    name: str | None = None
    """
    Accepted: the page's name.
    """
    objects: Annotated[int | None, Field(ge=0)] = None
    """
    Accepted: number of objects.
    """
    ok: bool
    """
    Whether every rule holds (and every recorded body is there with its size).
    """
    origins: Annotated[int | None, Field(ge=0)] = None
    """
    Accepted: number of origins.
    """


class ManifestCheckSchema(StrEnum):
    """
    `schema` of the answer.
    """

    protolab_manifest_check = 'protolab.manifest-check'
    """
    The only value.
    """


class ManifestCheck(BaseModel):
    """
    `protolab-net manifest check --json FILE...`: one entry per file, in the order given.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    manifests: list[CheckedManifest]
    """
    Every manifest checked.
    """
    schema_: Annotated[ManifestCheckSchema, Field(alias='schema')]
    """
    `protolab.manifest-check`.
    """
    schema_version: Annotated[int, Field(ge=0)]
    """
    Version of this answer.
    """
