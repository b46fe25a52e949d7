"""The `interop` scenario (issue 26, docs/interop.md): external QUIC stacks crossed through the
quic-interop-runner endpoint interface, on one bottleneck like the runner's ns-3 link.

The `mode` axis is a stack pair `SERVER->CLIENT` (`quic-go->aioquic`), the `testcase` axis a
test case of `protolab.interop.testcases`; the network axes are the link (specs/interop.toml
gives each case the runner's link). `[params.endpoints.NAME]` adds a stack of the spec's own: a
`command` (its `run_endpoint.sh`) and the `roles` it plays.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from protolab.errors import ToolError
from protolab.interop import stacks, testcases
from protolab.lab import stop_process
from protolab.scenarios.base import BULK_SERVER_ADDRESS, CLIENT, SERVER, Condition, Context
from protolab.scenarios.builtin import Bottleneck, _client_server
from protolab.scenarios.congestion import QuicVsTcp, QuicVsTcpParams
from protolab.scenarios.workloads import Workload, check_bulk_protocol


class EndpointParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(description="the endpoint's command (e.g. /path/to/run_endpoint.sh), run in the lab host")
    roles: list[str] = Field(["server", "client"], description="what it plays: server, client or both")


class InteropParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoints: dict[str, EndpointParams] = Field(default_factory=dict,
                                                 description="the spec's own stacks by name (docs/interop.md)")
    file_scale: float = Field(1.0, gt=0, le=1, description="scale the test case's file sizes (quick tests), >= 1 byte")
    files: int | None = Field(None, ge=1, le=1000, description="serve only this many of the case's files (quick tests)")


def spec_stacks(params: Any) -> dict[str, stacks.Stack]:
    endpoints: Mapping[str, EndpointParams] = getattr(params, "endpoints", {}) or {}
    return {name: stacks.spec_stack(name, e.command, e.roles) for name, e in endpoints.items()}


def file_sizes(case: testcases.TestCase, params: Any) -> list[int]:
    """The case's file sizes with the spec's `file_scale` and `files`."""
    scale = float(getattr(params, "file_scale", 1.0))
    count = getattr(params, "files", None)
    sizes = [max(1, int(size * scale)) for size in case.files]
    return sizes[:count] if count is not None else sizes


CROSS_PORT = 5201
CROSS_SETTLE_S = 2.0  # the cross flow's slow start is over before the measured transfer begins


def _cross_traffic(condition: Condition) -> bool:
    return testcases.check_testcase(str(condition.extra("testcase"))).cross_traffic


class InteropPairs(Workload):
    """One server stack and one client stack, through the interop interface."""

    name = "interop"
    description = "an interop server and client (quic-interop-runner interface)"

    def check_mode(self, value: str, params: Any) -> str:
        try:
            server, client = stacks.parse_pair(value)
            extra = spec_stacks(params)
            for name, role in ((server, "server"), (client, "client")):
                stack = stacks.lookup(name, extra)
                if role not in stack.roles:
                    raise stacks.StackError(f"interop stack {name!r} has no {role}")
        except stacks.StackError as exc:
            raise ValueError(str(exc)) from None
        return f"{server}->{client}"


INTEROP_PAIRS = InteropPairs()


class Interop(Bottleneck):
    """Stacks x stacks x test case on the runner's link (10 Mbit/s, 30 ms RTT, 25 packets)."""

    name = "interop"
    source = "issue 26 (quic-interop-runner test cases)"
    description = "external QUIC stacks crossed through the quic-interop-runner interface: verdicts, goodput"
    Params = InteropParams
    workload: ClassVar[Workload] = INTEROP_PAIRS
    extra_axes: ClassVar[dict[str, Any]] = {"testcase": str}
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [testcases.RUNNER_LINK["bandwidth_mbps"]],
        "rtt_ms": [testcases.RUNNER_LINK["rtt_ms"]],
        "loss_pct": [0],
        "buffer": [int(testcases.RUNNER_LINK["buffer"])],
        "testcase": ["handshake", "transfer", "http3", "goodput"],
        "mode": ["quic-go->quic-go", "aioquic->aioquic", "quic-go->aioquic", "aioquic->quic-go"],
        "page": [],
    }

    def topology(self, lab: str, params: Any, server_addresses: Sequence[str], seed: int) -> dict[str, Any]:
        return _client_server(lab, [BULK_SERVER_ADDRESS], seed)

    def enter(self, ctx: Context, params: Any, condition: Condition) -> None:
        """The crosstraffic case: a greedy iperf3 TCP Cubic flow from the server host to the client
        host (`-R`) for the whole condition, as the runner's iperf container."""
        if not _cross_traffic(condition):
            return
        log = ctx.workdir / "iperf3-cross.log"
        with log.open("ab") as out:
            ctx.state["cross-server"] = ctx.lab.spawn(SERVER, ["iperf3", "-s", "-B", BULK_SERVER_ADDRESS,
                                                               "-p", str(CROSS_PORT)], stdout=out, stderr=out)
            time.sleep(0.5)
            ctx.state["cross-client"] = ctx.lab.spawn(
                CLIENT, ["iperf3", "-c", BULK_SERVER_ADDRESS, "-p", str(CROSS_PORT), "-R", "-t", "86400", "-C", "cubic"],
                stdout=out, stderr=out)
        time.sleep(CROSS_SETTLE_S)
        for name in ("cross-server", "cross-client"):
            if ctx.state[name].poll() is not None:
                raise ToolError(f"cross-traffic iperf3 ({name}) exited with status {ctx.state[name].returncode} "
                                f"(see {log})")

    def busy(self, params: Any, condition: Condition) -> bool:
        return _cross_traffic(condition)

    def leave(self, ctx: Context, params: Any, condition: Condition) -> None:
        for name in ("cross-client", "cross-server"):
            process = ctx.state.pop(name, None)
            if process is not None:
                stop_process(process)

    def check(self, params: Any, axes: Mapping[str, Sequence[Any]]) -> None:
        for name in axes.get("testcase", ()):
            try:
                testcases.check_testcase(name)
            except ValueError as exc:
                raise ValueError(f"axes.testcase: {exc}") from None
        try:
            spec_stacks(params)
        except stacks.StackError as exc:
            raise ValueError(f"params.endpoints: {exc}") from None


# ---------------------------------------------------------------------- quic-vs-tcp-stacks


def is_stack_pair(mode: str) -> bool:
    """Whether a mode names interop stacks (`SERVER->CLIENT`) rather than a bulk protocol."""
    return "->" in mode


class BulkOrInterop(Workload):
    """Bulk transfers (`h1c`, `h3`: protolab-net bulk) and downloads between interop stacks
    (`quic-go->quic-go`) in one experiment, so a seed's QUIC-vs-TCP comparison can put another
    QUIC stack beside quinn on the same links."""

    name = "bulk-or-interop"
    description = "bulk transfers (protolab-net bulk) or an interop server and client downloading the same bytes"

    def check_mode(self, value: str, params: Any) -> str:
        if is_stack_pair(value):
            return INTEROP_PAIRS.check_mode(value, params)
        return check_bulk_protocol(value)


BULK_OR_INTEROP = BulkOrInterop()


class QuicVsTcpStacksParams(QuicVsTcpParams):
    endpoints: dict[str, EndpointParams] = Field(default_factory=dict,
                                                 description="the spec's own stacks by name (docs/interop.md)")


class QuicVsTcpStacks(QuicVsTcp):
    """004 ch. 7's 5.5 MB download (the `quic-vs-tcp` links and sweeps) with interop stacks
    beside protolab's bulk modes: a mode `SERVER->CLIENT` (`quic-go->quic-go`) downloads one file
    of `bytes` through the quic-interop-runner interface (docs/interop.md), measured from the
    captures like the interop goodput case, with the server's qlog giving its congestion window."""

    name = "quic-vs-tcp-stacks"
    source = "004 ch. 7, issue 26"
    description = "004's 5.5 MB download over TCP, quinn and external QUIC stacks (interop interface)"
    Params = QuicVsTcpStacksParams
    workload: ClassVar[Workload] = BULK_OR_INTEROP
    default_axes: ClassVar[dict[str, list[Any]]] = {**QuicVsTcp.default_axes, "mode": ["h1c", "h3", "quic-go->quic-go"]}

    def check(self, params: Any, axes: Mapping[str, Sequence[Any]]) -> None:
        super().check(params, axes)
        if any(is_stack_pair(str(m)) for m in axes.get("mode", ())) and (
                params.direction != "download" or params.bytes is None):
            raise ValueError("params: interop stacks download a file: direction = \"download\" and bytes, "
                             "not duration_s")
