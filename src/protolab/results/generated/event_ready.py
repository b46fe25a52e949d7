# Generated from schemas/event-ready.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Ready(BaseModel):
    """
    `protolab-net emu run` has built the lab and forwards packets.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    control: str
    """
    The control socket (docs/control.md).
    """
    lab: str
    """
    The lab's name.
    """
    namespaces: dict[str, str]
    """
    Each host's network namespace, by host name.
    """
    pid: Annotated[int, Field(ge=0)]
    """
    The emulator's process id.
    """
    ready: bool
    """
    Always true.
    """
    start_unix_ns: Annotated[int, Field(ge=0)]
    """
    The emulator clock's zero, Unix ns (packet captures and traces count from it).
    """
