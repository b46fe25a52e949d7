# Generated from schemas/cc-registry.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class CcParam(BaseModel):
    """
    One parameter of a controller.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    accepts: str
    """
    What values it accepts (`a number in 0.1..2`).
    """
    default: str | None = None
    """
    Its default as written; null when the parameter is required.
    """
    doc: str
    """
    What it is.
    """
    key: str
    """
    Its key (`c`, `beta`, `rate`).
    """


class CcRegistrySchema(StrEnum):
    """
    `schema` of the controller registry listing.
    """

    protolab_cc_registry = 'protolab.cc-registry'
    """
    The only value.
    """


class CcEntry(BaseModel):
    """
    One controller of the registry.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    doc: str
    """
    What it is.
    """
    name: str
    """
    Its name (`cubic`, `gquic39`).
    """
    params: list[CcParam]
    """
    Its parameters (a profile has none of its own: its base's are accepted).
    """
    profile: str | None = None
    """
    A profile: the spec it stands for (`cubic:n=2,...`); null for a controller of its own.
    """


class CcRegistry(BaseModel):
    """
    `protolab-net cc list --json`: every controller and its parameters.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    controllers: list[CcEntry]
    """
    Every controller, in the registry's order.
    """
    schema_: Annotated[CcRegistrySchema, Field(alias='schema')]
    """
    `protolab.cc-registry`.
    """
    schema_version: Annotated[int, Field(ge=0)]
    """
    Version of this listing.
    """
