"""Experiment specs: TOML files naming a scenario and the axes of a run matrix (docs/spec.md).

Loading happens in two stages, both before anything runs:

1. structure (here): the TOML is checked against pydantic models (unknown keys refused,
   buffers, numbers, transport options);
2. meaning (`protolab.plan.experiment`): the scenario, its parameters and axes, the modes of its
   workload, the QUIC controllers and the pages.

Every error is a `SpecError` naming the file and the field, e.g.
`spec.toml: axes.mode[2]: unknown mode "h4" (known: h1c, h1, h2, h2-parallel:N, ...)`.
This module imports no scenario: scenarios import it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
)

from protolab.errors import ProtolabError
from protolab.plan.modes import check_mode, check_scheduler

SCHEMA_VERSION = 1
MTU_BYTES = 1500
# A queue of one BDP can be smaller than a packet (0.2 Mbit/s x 30 ms = 750 B): it would then
# drop every full-size packet. Byte limits are floored at two full packets (docs/spec.md).
MIN_BUFFER_BYTES = 2 * MTU_BYTES


class SpecError(ProtolabError):
    """An experiment spec is invalid; the message names the file and the field."""


def quoted(value: Any) -> str:
    """A value as the spec writes it: strings in double quotes, numbers plain."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


# ---------------------------------------------------------------------- registries


TCP_CONGESTION_CONTROLS: dict[str, str] = {
    "cubic": "CUBIC (the seeds' controller)",
    "reno": "NewReno",
    "bbr": "BBR (the kernel default here)",
}


def _registry_check(registry: Mapping[str, str], what: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in registry:
            raise ValueError(f"unknown {what} {quoted(value)} (known: {', '.join(registry)})")
        return value

    return check


# ---------------------------------------------------------------------- axis values


@dataclass(frozen=True)
class Buffer:
    """A queue limit: fixed bytes, a multiple of the bandwidth-delay product, or the emulator's default."""

    kind: Literal["bytes", "bdp", "default"]
    value: float = 0.0

    def label(self) -> str:
        if self.kind == "bytes":
            return str(int(self.value))
        if self.kind == "bdp":
            return f"{self.value:g}bdp"
        return "default"

    def bytes_for(self, bandwidth_mbps: float | None, rtt_ms: float) -> int | None:
        """The limit in bytes for a condition; None = the emulator's default queue (1000 packets).

        A BDP multiple on an unlimited link has no BDP: it falls back to the default queue.
        """
        if self.kind == "default":
            return None
        if self.kind == "bytes":
            return int(self.value)
        if bandwidth_mbps is None:
            return None
        bdp = bandwidth_mbps * 1e6 / 8 * rtt_ms / 1e3
        return max(MIN_BUFFER_BYTES, round(self.value * bdp))


_BDP = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*bdp\s*$", re.IGNORECASE)


def parse_buffer(value: float | str) -> Buffer:
    if isinstance(value, bool):
        raise ValueError(f"invalid buffer {quoted(value)}: bytes (integer), \"<x>bdp\" or \"default\"")
    if isinstance(value, int | float):
        if value != int(value) or value < 1:
            raise ValueError(f"invalid buffer {quoted(value)}: a byte count must be a positive integer")
        return Buffer("bytes", int(value))
    if value.strip().lower() == "default":
        return Buffer("default")
    match = _BDP.match(value)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"invalid buffer {quoted(value)}: bytes (integer), \"<x>bdp\" (e.g. \"1bdp\") or \"default\"")
    return Buffer("bdp", float(match.group(1)))


def _check_buffer(value: float | str) -> int | float | str:
    parse_buffer(value)
    return value


def _check_bandwidth(value: float | str) -> float | str:
    if isinstance(value, str):
        if value != "unlimited":
            raise ValueError(f"invalid bandwidth {quoted(value)}: Mbit/s (a positive number) or \"unlimited\"")
        return value
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"invalid bandwidth {quoted(value)}: must be a positive number of Mbit/s")
    return value


def _check_rtt(value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"invalid RTT {quoted(value)}: must be >= 0 ms")
    return value


def _check_loss(value: float) -> float:
    if not math.isfinite(value) or not 0 <= value <= 100:
        raise ValueError(f"invalid loss {quoted(value)}: must be a percentage in 0..100")
    return value


def _check_page(value: str) -> str:
    if not value.strip():
        raise ValueError("empty page name")
    return value


Mode = Annotated[str, AfterValidator(check_mode)]
BufferValue = Annotated[int | float | str, AfterValidator(_check_buffer)]
Bandwidth = Annotated[float | str, AfterValidator(_check_bandwidth)]
Rtt = Annotated[float, AfterValidator(_check_rtt)]
Loss = Annotated[float, AfterValidator(_check_loss)]
PageName = Annotated[str, AfterValidator(_check_page)]
TcpCC = Annotated[str, AfterValidator(_registry_check(TCP_CONGESTION_CONTROLS, "TCP congestion control"))]
QuicCC = Annotated[str, Field(min_length=1, max_length=500)]  # checked against the Rust registry in stage 2
Scheduler = Annotated[str, AfterValidator(check_scheduler)]


def _nonempty(values: list[Any] | None) -> list[Any] | None:
    if values is not None and not values:
        raise ValueError("an axis needs at least one value")
    return values


def _distinct(values: list[Any] | None) -> list[Any] | None:
    if values is None:
        return None
    seen: set[str] = set()
    for index, value in enumerate(values):
        marker = json.dumps(value, sort_keys=True)
        if marker in seen:
            raise ValueError(f"value {quoted(value)} at [{index}] appears twice")
        seen.add(marker)
    return values


_AXIS_CHECKS = (AfterValidator(_nonempty), AfterValidator(_distinct))


def axis_type(item: Any) -> Any:
    """The annotation of an axis of items of a type known at run time (scenario axes)."""
    return Annotated[list[item] | None, *_AXIS_CHECKS]


# ---------------------------------------------------------------------- models


class Axes(BaseModel):
    """The matrix. An axis left out takes the scenario's default values.

    Scenario-specific axes (e.g. `congested` of ecmp-congestion) are extra keys, checked
    against the scenario in stage 2.
    """

    model_config = ConfigDict(extra="allow")

    bandwidth_mbps: Annotated[list[Bandwidth] | None, *_AXIS_CHECKS] = None
    rtt_ms: Annotated[list[Rtt] | None, *_AXIS_CHECKS] = None
    loss_pct: Annotated[list[Loss] | None, *_AXIS_CHECKS] = None
    buffer: Annotated[list[BufferValue] | None, *_AXIS_CHECKS] = None
    # What the client runs: a page-load mode, a bulk protocol or a pair, by the scenario's
    # workload (checked in stage 2).
    mode: Annotated[list[Annotated[str, Field(min_length=1)]] | None, *_AXIS_CHECKS] = None
    page: Annotated[list[PageName] | None, *_AXIS_CHECKS] = None


STANDARD_AXES = tuple(Axes.model_fields)


class Transport(BaseModel):
    """Client and server transport options (docs/spec.md). Every key can also be an axis
    (`[axes] quic_cc = [...]`), which then varies it from run to run."""

    model_config = ConfigDict(extra="forbid")

    tcp_cc: TcpCC = "cubic"
    quic_cc: QuicCC = "cubic"
    quic_initial_window: Annotated[int, Field(ge=2400, le=1_000_000_000)] | None = None
    quic_packet_threshold: Annotated[int, Field(ge=3, le=100_000)] | None = None
    quic_time_threshold: Annotated[float, Field(ge=1.0, le=1000.0)] | None = None
    quic_ack_eliciting_threshold: Annotated[int, Field(ge=0, le=100_000)] | None = None
    quic_max_ack_delay_ms: Annotated[int, Field(ge=1, le=16_383)] | None = None
    # Flow control: every QUIC stream's receive window, bytes (None: quinn's 1.25 MB).
    quic_stream_window: Annotated[int, Field(ge=1200, le=1 << 40)] | None = None
    # The servers' TCP_NOTSENT_LOWAT, bytes (None: the kernel's, unlimited): how much written
    # data a connection may hold unsent before the server stops writing to it.
    tcp_notsent_lowat: Annotated[int, Field(ge=1, le=(1 << 31) - 1)] | None = None
    # The page-load engine's bound on one QUIC connection attempt, ms (None: Chromium's 10 s,
    # after which Chromium falls back to TCP and the engine's h3 modes fail the connection).
    quic_handshake_timeout_ms: Annotated[int, Field(ge=100, le=600_000)] | None = None
    h1_connections: Annotated[int, Field(ge=1, le=64)] = 6
    scheduler: Scheduler = "round-robin"
    # Who loads the pages: protolab's page-load engine or headless Chromium (docs/browser.md).
    client: Literal["engine", "chromium"] = "engine"
    # Cold loads, or warm ones that resume the TLS sessions (and send QUIC 0-RTT) of a priming
    # connection per origin (docs/load.md).
    warm: Literal["cold", "resumed"] = "cold"


TRANSPORT_AXES = tuple(Transport.model_fields)


FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
# Condition axes a space-filling design can range over (buffer: in multiples of the BDP);
# checked in stage 2, with a message naming them.
# The axes that make a run's network condition (protolab.scenarios.Condition), as a spec
# writes them, and as the store keeps them (runs' columns; the buffer in bytes).
CONDITION_AXES = ("bandwidth_mbps", "rtt_ms", "loss_pct", "buffer")
CONDITION_COLUMNS = ("bandwidth_mbps", "rtt_ms", "loss_pct", "buffer_bytes")
# A design's ranges span the condition's axes.
RANGED_AXES = CONDITION_AXES


class Design(BaseModel):
    """How the conditions are chosen and how often each cell runs (docs/spec.md, "Designs")."""

    model_config = ConfigDict(extra="forbid")

    # grid: every combination of the axes' values; lhs (Latin hypercube), sobol (scrambled
    # Sobol), wsp (Santiago et al. 2012): `points` space-filling points over the continuous
    # `ranges`, each a condition crossed with the other axes.
    kind: Literal["grid", "lhs", "sobol", "wsp"] = "grid"
    points: Annotated[int, Field(ge=1, le=100_000)] | None = None  # the budget of conditions
    # [low, high] per axis: Mbit/s, ms, % and (buffer) multiples of the condition's BDP.
    ranges: dict[str, tuple[FiniteFloat, FiniteFloat]] = {}
    log: list[str] = []  # axes sampled on a log scale (low end > 0)
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None  # default: the spec's seed
    # Adaptive repetitions: a cell (condition, mode, page, transport) stops repeating once the
    # 95% CI half-width of its mean PLT (bulk: goodput) is at most ci_target x the mean, after
    # min_repetitions; `repetitions` is the maximum.
    ci_target: Annotated[float, Field(gt=0, lt=1)] | None = None
    min_repetitions: Annotated[int, Field(ge=2, le=10_000)] = 3


class Artifacts(BaseModel):
    """What each run keeps besides the page-load result."""

    model_config = ConfigDict(extra="forbid")

    pcap: bool = False  # capture of every client and server per run (runs/<key>/<host>.pcap)
    events: bool = False  # the emulator's ground-truth event log per run (runs/<key>/events.ndjson)
    samples: bool = False  # TCP_INFO / QUIC samples of both ends (runs/<key>/samples/)
    sample_interval_ms: Annotated[int, Field(ge=1, le=10_000)] = 10
    qlog: bool = False  # qlog of every QUIC connection, both ends (runs/<key>/qlog/)


class LabSettings(BaseModel):
    """The lab every run of the spec shares (docs/spec.md, "Lab").

    Offloads are strict booleans: a string or number (`offload = "on"`, `1`) is refused, not
    read as one."""

    model_config = ConfigDict(extra="forbid")

    # The TUN devices' segmentation offloads in every host (docs/emulator.md, "Segmentation
    # offloads"); None: the emulator's default (off). `protolab run --offload/--no-offload`
    # overrides it.
    offload: StrictBool | None = None
    # Per host, by the scenario's host names (checked in stage 2): wins over `offload` and over
    # the command line's flag (004 Figs. 13/15: offloads on the TCP server only).
    host_offload: dict[str, StrictBool] = {}

    def offload_for(self, host: str, override: bool | None = None) -> bool | None:
        """A host's offloads: its own setting, else `override` (the command line), else the
        spec's lab-wide one; None leaves it to the emulator."""
        if host in self.host_offload:
            return self.host_offload[host]
        return override if override is not None else self.offload


class Spec(BaseModel):
    """An experiment spec as written in TOML (docs/spec.md)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1]
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    description: str = ""
    scenario: str
    seed: int = Field(1, ge=0, le=2**63 - 1)
    repetitions: int = Field(1, ge=1, le=10_000)
    timeout_s: float = Field(60.0, gt=0, le=3600)
    axes: Axes = Axes()
    # One-factor-at-a-time designs: each sweep overrides some axes; the runs are the union of
    # the sweeps' matrices (none: the axes alone).
    sweeps: list[Axes] = []
    design: Design = Design()
    transport: Transport = Transport()
    params: dict[str, Any] = {}
    artifacts: Artifacts = Artifacts()
    lab: LabSettings = LabSettings()


# ---------------------------------------------------------------------- error formatting


def _loc(loc: Sequence[int | str]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text or "(top level)"


def _message(error: Mapping[str, Any], known: Sequence[str] = ()) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return f"unknown key (known: {', '.join(known)})" if known else "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind == "literal_error" and tuple(error.get("loc", ())) == ("schema_version",):
        return f"unsupported schema_version {error.get('input')!r} (this build reads {SCHEMA_VERSION})"
    message = str(error.get("msg", "invalid"))
    return message.removeprefix("Value error, ")


def _known_keys(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The keys allowed where an unknown key was found (for the error message)."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            return []
        info = current.model_fields.get(part) if isinstance(current, type) and issubclass(current, BaseModel) else None
        annotation = info.annotation if info is not None else None
        current = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def format_validation_error(
    source: str, exc: ValidationError, model: type[BaseModel] | None = None, prefix: Sequence[str] = ()
) -> str:
    lines = []
    for error in exc.errors():
        loc = (*prefix, *error["loc"])
        known = _known_keys(model, tuple(error["loc"])) if model is not None else []
        lines.append(f"{source}: {_loc(loc)}: {_message(error, known)}")
    return "\n".join(lines)


