"""What a scenario is: topology, per-condition link parameters, optional background traffic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from protolab.lab import Lab, ideal_link, mbps_to_bps, ms_to_ns
from protolab.plan.spec import CONDITION_AXES, Buffer, parse_buffer
from protolab.scenarios.workloads import PAGE_LOADS, Workload

CLIENT = "client"
SERVER = "server"
CLIENT_ADDRESS = "10.77.0.1"
# The server's address when no page gives it one (bulk transfers; docs/scenarios.md).
BULK_SERVER_ADDRESS = "10.77.1.1"


@dataclass(frozen=True)
class Condition:
    """The network condition of a block of runs: every axis except mode and page."""

    bandwidth_mbps: float | None  # None = unlimited
    rtt_ms: float
    loss_pct: float
    buffer: Buffer
    extras: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def from_axes(cls, values: Mapping[str, Any]) -> Condition:
        bandwidth = values["bandwidth_mbps"]
        extras = tuple(sorted((k, v) for k, v in values.items() if k not in _CONDITION_KEYS))
        return cls(
            bandwidth_mbps=None if bandwidth == "unlimited" else float(bandwidth),
            rtt_ms=float(values["rtt_ms"]),
            loss_pct=float(values["loss_pct"]),
            buffer=parse_buffer(values["buffer"]),
            extras=extras,
        )

    @property
    def buffer_bytes(self) -> int | None:
        """The bottleneck queue in bytes (None: the emulator's default of 1000 packets)."""
        return self.buffer.bytes_for(self.bandwidth_mbps, self.rtt_ms)

    def extra(self, name: str) -> Any:
        return dict(self.extras)[name]

    def as_params(self) -> dict[str, Any]:
        """The condition's columns of a run record."""
        return {
            "bandwidth_mbps": self.bandwidth_mbps,
            "rtt_ms": self.rtt_ms,
            "loss_pct": self.loss_pct,
            "buffer": self.buffer.label(),
            "buffer_bytes": self.buffer_bytes,
            **dict(self.extras),
        }

    def label(self) -> str:
        bandwidth = "unlimited" if self.bandwidth_mbps is None else f"{self.bandwidth_mbps:g} Mbit/s"
        text = f"{bandwidth}, {self.rtt_ms:g} ms, {self.loss_pct:g}% loss, buffer {self.buffer.label()}"
        return text + "".join(f", {k}={v}" for k, v in self.extras)


_CONDITION_KEYS = {*CONDITION_AXES, "mode", "page"}


def rate_bps(bandwidth_mbps: float | None) -> int | None:
    """A condition's bandwidth as the emulator's rate (None: unlimited)."""
    return None if bandwidth_mbps is None else mbps_to_bps(bandwidth_mbps)


def loss_model(loss_pct: float, mean_burst: float = 1.0) -> float | dict[str, Any] | None:
    """Random loss of `loss_pct` on average: independent (Bernoulli) losses, or with a mean burst
    of more than one packet, Gilbert-Elliott losses (lose every packet in the bad state, none in
    the good one; mean burst 1/r, stationary loss p / (p + r))."""
    if loss_pct <= 0:
        return None
    loss = loss_pct / 100
    if mean_burst <= 1:
        return loss
    r = 1 / mean_burst
    return {"kind": "gilbert-elliott", "p": loss * r / (1 - loss), "r": r, "loss_good": 0.0, "loss_bad": 1.0}


def direction(
    bandwidth_mbps: float | None,
    one_way_delay_ms: float,
    loss_pct: float,
    buffer_bytes: int | None,
    loss_burst: float = 1.0,
) -> dict[str, Any]:
    """Complete set_link params of one link direction (every field named, so nothing lingers)."""
    return ideal_link(
        rate_bps=rate_bps(bandwidth_mbps),
        delay_ns=ms_to_ns(one_way_delay_ms),
        loss=loss_model(loss_pct, loss_burst),
        queue_bytes=buffer_bytes,
    )


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass
class Context:
    """What a scenario's hooks get while a lab is running."""

    lab: Lab
    workdir: Path
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PairServer:
    """Where one side's server runs: its host, its slot in that host (None: the host's only
    server), and which part of the host's addresses it listens on (`part` of `parts` equal
    parts: Fig. 13's one host carries side a's addresses, then side b's, equally many)."""

    host: str
    slot: str | None = None
    part: int = 0
    parts: int = 1

    def address(self, addresses: Sequence[str]) -> str:
        """The side's primary address among the host's."""
        share = len(addresses) // self.parts
        if share == 0 or len(addresses) % self.parts:
            raise ValueError(f"host {self.host}: {len(addresses)} addresses do not split into {self.parts} sides")
        return addresses[self.part * share]


class Scenario:
    """A named experiment setting from the seeds.

    Subclasses set the class attributes and implement `topology` and `links`. Defaults of the
    standard axes live in `default_axes`; scenario-specific axes are declared in `extra_axes`
    (name -> item type) with their defaults in `default_axes` too.
    """

    name: ClassVar[str]
    source: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams
    default_axes: ClassVar[dict[str, list[Any]]]
    extra_axes: ClassVar[dict[str, Any]] = {}
    workload: ClassVar[Workload] = PAGE_LOADS
    client: ClassVar[str] = CLIENT
    server: ClassVar[str] = SERVER
    # The pair workload's second client and server (scenarios with two of each).
    clients: ClassVar[tuple[str, ...]] = (CLIENT,)
    servers: ClassVar[tuple[str, ...]] = (SERVER,)
    # Parameters added after runs were recorded, with the value that behaves as before: a run
    # whose parameter has that value leaves it out of its key, so recorded runs keep their keys.
    key_neutral_params: ClassVar[dict[str, Any]] = {}

    def workload_for(self, params: Any) -> Workload:
        """The workload of the runs (a scenario may let a parameter choose it)."""
        return self.workload

    def transport_for(self, params: Any, condition: Condition, transport: dict[str, Any]) -> dict[str, Any]:
        """The transport options of a run (e.g. a controller built from scenario axes)."""
        return transport

    def pair_servers(self, params: Any) -> tuple[PairServer, PairServer]:
        """A pair workload's two sides' servers: by default each in its own host, the first two
        of `servers`."""
        first, second = self.servers[:2]
        return PairServer(first), PairServer(second)

    def bulk_server_address(self, params: Any) -> str:
        """Where bulk transfers connect (the server host's first address)."""
        return BULK_SERVER_ADDRESS

    def pages(self, params: Any) -> dict[str, dict[str, Any]]:
        """Pages this scenario provides itself (name -> manifest), besides the corpus."""
        return {}

    def check(self, params: Any, axes: Mapping[str, Sequence[Any]]) -> None:
        """Cross-field checks; raise ValueError("field: message")."""

    def topology(self, lab: str, params: Any, server_addresses: Sequence[str], seed: int) -> dict[str, Any]:
        raise NotImplementedError

    def links(self, params: Any, condition: Condition) -> dict[str, dict[str, Any]]:
        """Link name -> complete set_link params for a condition."""
        raise NotImplementedError

    def run_links(self, params: Any, condition: Condition, seed: int | None) -> dict[str, dict[str, Any]]:
        """The links of one run with the run's link seed (None: entering the condition); a
        scenario whose links depend on the run (where a trace starts) overrides this."""
        return self.links(params, condition)

    def start(self, ctx: Context, params: Any) -> None:
        """Once per lab, before the first run (e.g. cross-traffic servers)."""

    def stop(self, ctx: Context, params: Any) -> None:
        """Once per lab, after the last run and the servers stopped (undo what `start` made)."""

    def cgroup(self, ctx: Context, params: Any, role: str) -> Path | None:
        """The cgroup a `client` or `server` command runs in (None: the runner's own)."""
        return None

    def enter(self, ctx: Context, params: Any, condition: Condition) -> None:
        """Before the first run of a condition (after its links are set)."""

    def leave(self, ctx: Context, params: Any, condition: Condition) -> None:
        """After the last run of a condition."""

    def seeded_source_ports(self, params: Any) -> bool:
        """Whether the client draws its source ports from the run's seed (`protolab-net load
        --source-port-seed`) instead of taking the kernel's even connect() ports, so that a
        flow hash spreads its connections over paths."""
        return False

    def busy(self, params: Any, condition: Condition) -> bool:
        """Whether background traffic runs during the condition (the queues never drain)."""
        return False

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "description": self.description,
            "params": self.Params().model_dump(mode="json"),
            "default_axes": self.default_axes,
            "workload": self.workload.name,
        }
