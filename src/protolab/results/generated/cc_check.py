# Generated from schemas/cc-check.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, RootModel


class CcSpec(BaseModel):
    """
    One checked `NAME[:key=value,...]` spec (`protolab-net cc check --json` prints a list of
    them, one per spec given).
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    base: str
    """
    The controller that implements it (a profile's base, e.g. `cubic`).
    """
    canonical: str
    """
    The spec with every parameter's effective value.
    """
    given: str
    """
    The spec as given.
    """
    name: str
    """
    The name given (a profile's own name, e.g. `gquic39`).
    """
    params: dict[str, str]
    """
    Every parameter's effective value, as written.
    """


class ArrayOfCcSpec(RootModel[list[CcSpec]]):
    root: Annotated[list[CcSpec], Field(title='Array_of_CcSpec')]
