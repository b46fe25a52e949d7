# Generated from schemas/state-sample.json by scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class CcState(StrEnum):
    """
    A congestion controller's state (docs/congestion.md): for TCP derived from `TCP_INFO`, for
    QUIC reported by protolab's controllers.
    """

    slow_start = 'slow_start'
    """
    Exponential growth (RFC 9002 slow start).
    """
    conservative_slow_start = 'conservative_slow_start'
    """
    HyStart++'s conservative slow start (RFC 9406 §4.2).
    """
    congestion_avoidance = 'congestion_avoidance'
    """
    Congestion avoidance (or, for rate and delay based controllers, their steady state).
    """
    recovery = 'recovery'
    """
    Recovery: from a congestion event until a packet sent after it is acknowledged.
    """
    application_limited = 'application_limited'
    """
    The application did not fill the window (the controller was not the limit).
    """


class StateEvent(StrEnum):
    """
    `event` of a controller's state change.
    """

    state = 'state'
    """
    The only value.
    """


class StateSample(BaseModel):
    """
    A QUIC controller's state change, written with the next sample.
    """

    model_config = ConfigDict(
        extra='forbid',
        use_attribute_docstrings=True,
    )
    bytes_in_flight: Annotated[int, Field(ge=0)]
    """
    Bytes in flight at that moment.
    """
    cc_state: CcState
    """
    The new state.
    """
    cwnd: Annotated[int, Field(ge=0)]
    """
    The window at that moment, bytes.
    """
    event: StateEvent
    """
    Always `state`.
    """
    ssthresh: Annotated[int | None, Field(ge=0)] = None
    """
    ssthresh at that moment, bytes.
    """
    t_unix_ns: Annotated[int, Field(ge=0)]
    """
    When the state changed, Unix ns.
    """
