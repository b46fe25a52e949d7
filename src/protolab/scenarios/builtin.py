"""The built-in scenarios, with the parameters of the seeds (DESIGN.md, docs/scenarios.md)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from protolab.corpus import DEMO_PAGES
from protolab.errors import ToolError
from protolab.lab import dumbbell, host, ideal_link, mbps_to_bps
from protolab.plan.spec import parse_buffer
from protolab.scenarios.base import (
    CLIENT,
    CLIENT_ADDRESS,
    SERVER,
    Condition,
    Context,
    Scenario,
    direction,
)

# The 15 cloned pages of 001 Table I, small to large (names of protolab.corpus).
TABLE_I_PAGES = [
    "baidu", "google", "live", "twitter", "wikipedia", "reddit", "yahoo", "vk", "taobao",
    "instagram", "qq", "sohu", "youtube", "facebook", "amazon",
]
# Five pages of different sizes (baidu 50 kB ... amazon 3.7 MB), for grids that cannot afford 15.
FIVE_PAGES = list(DEMO_PAGES)


def _one_way(rtt_ms: float) -> float:
    return rtt_ms / 2


def _client_server(lab: str, server_addresses: Sequence[str], seed: int, tcp_cc: str = "cubic") -> dict[str, Any]:
    return dumbbell(
        lab,
        [host(CLIENT, "left", [CLIENT_ADDRESS])],
        [host(SERVER, "right", list(server_addresses))],
        paths=1,
        seed=seed,
        tcp_congestion=tcp_cc,
    )


# ---------------------------------------------------------------------- wifi-loss


class WifiLossParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    loss_directions: Literal["both", "down", "up"] = Field(
        "both", description="directions of the WiFi link that drop packets (Mininet's TCLink: both)"
    )


class WifiLoss(Scenario):
    """001 §IV-C2 / 000 §5.2: one WiFi link, 7 Mbit/s, 50 ms, random loss 0% and 2%.

    The WiFi link is the client's access link (`client.up`, `client.down`); the path and the
    server's access link are ideal. "50 ms latency" is taken as the round-trip time (25 ms each
    way): §V-A uses the same link as "7 Mbps, 50 ms RTT, 45 kB buffer", and 45 kB is one BDP
    of 7 Mbit/s x 50 ms. The loss is Bernoulli per packet in both directions, as netem on a
    Mininet TCLink applies it (`loss_directions` changes that). The queue is the buffer axis
    (default one BDP) in both directions.
    """

    name = "wifi-loss"
    source = "001 §IV-C2, 000 §5.2"
    description = "one WiFi link 7 Mbit/s, 50 ms RTT, Bernoulli loss 0% and 2%; cloned pages, cold loads"
    Params = WifiLossParams
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [7],
        "rtt_ms": [50],
        "loss_pct": [0, 2],
        "buffer": ["1bdp"],
        "mode": ["h1", "h2", "h2-parallel:2", "h3"],
        "page": TABLE_I_PAGES,
    }

    def topology(self, lab: str, params: Any, server_addresses: Sequence[str], seed: int) -> dict[str, Any]:
        return _client_server(lab, server_addresses, seed)

    def links(self, params: WifiLossParams, condition: Condition) -> dict[str, dict[str, Any]]:
        lossy = {"both": ("up", "down"), "down": ("down",), "up": ("up",)}[params.loss_directions]
        delay = _one_way(condition.rtt_ms)
        links = {
            f"{CLIENT}.{side}": direction(
                condition.bandwidth_mbps, delay, condition.loss_pct if side in lossy else 0, condition.buffer_bytes
            )
            for side in ("up", "down")
        }
        for name in (f"{SERVER}.up", f"{SERVER}.down", "p0.forward", "p0.reverse"):
            links[name] = ideal_link()
        return links


# ---------------------------------------------------------------------- ecmp-congestion

XCLIENT, XSERVER = "xclient", "xserver"
XCLIENT_ADDRESS, XSERVER_ADDRESS = "10.77.0.2", "10.77.1.1"
IPERF_PORT = 5201
CROSS_SETTLE_S = 2.0


class EcmpParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path_mbps: float = Field(20, gt=0, description="rate of each ISP->server path (001: 1 Gbit/s; see docs/scenarios.md)")
    path_buffer: int | str = Field("1bdp", description="queue of each path direction: bytes, <x>bdp or default")
    cross_flows: int = Field(8, ge=1, le=128, description="iperf3 connections on the congested path (001: 8)")
    cross_load: Annotated[float, Field(gt=0, le=1.0)] | Literal["greedy"] = Field(
        "greedy", description="their total rate as a share of the path (001: 90%), or greedy: unpaced flows that "
        "fill the path's queue and drop, as 001's congested path did")
    congested_path: Literal["p0", "p1"] = "p1"
    cross_cc: str = "cubic"
    source_ports: Literal["seeded", "kernel"] = Field(
        "seeded", description="client source ports: drawn from the run's seed (both parities, as the seed's "
        "2017 kernel chose them) or the kernel's (even only: every connection to one server port hashes alike)"
    )


class EcmpCongestion(Scenario):
    """001 §IV-C1: a home network behind a 10 Mbit/s access link; the ISP's head-end balances
    flows over two equal-cost paths to the server with the 5-tuple XOR hash
    H = SA ^ DA ^ SP ^ DP ^ PT mod 2 (the emulator's `ecmp-xor` routing); one path carries
    cross traffic from 8 iperf3 connections: greedy by default, so the path's queue fills and
    drops (001 offered 90% of 1 Gbit/s, and its H2 loads shot up); `cross_load` < 1 paces them.

    Hosts: `client` (access link = the bandwidth axis, queue = the buffer axis), `xclient` and
    `xserver` (cross traffic, ideal access links, pinned to the congested path), `server` (every
    origin address of the pages). Each path runs at `path_mbps` with half the RTT axis each way.
    The cross traffic flows server side -> client side (iperf3 -R), the direction of the page
    data. The `congested` axis turns it off and on (default both).
    """

    name = "ecmp-congestion"
    source = "001 §IV-C1, 000 §5.2"
    description = "10 Mbit/s access, two equal-cost paths (xor flow hash), one congested by 8 greedy iperf3 flows"
    Params = EcmpParams
    extra_axes: ClassVar[dict[str, Any]] = {"congested": bool}
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [10],
        "rtt_ms": [50],
        "loss_pct": [0],
        "buffer": ["1bdp"],
        "mode": ["h1c", "h1", "h2", "h2-parallel:2", "h3"],
        "page": TABLE_I_PAGES,
        "congested": [False, True],
    }

    def check(self, params: EcmpParams, axes: Mapping[str, Sequence[Any]]) -> None:
        try:
            parse_buffer(params.path_buffer)
        except ValueError as exc:
            raise ValueError(f"params.path_buffer: {exc}") from None

    def topology(self, lab: str, params: EcmpParams, server_addresses: Sequence[str], seed: int) -> dict[str, Any]:
        return dumbbell(
            lab,
            [host(CLIENT, "left", [CLIENT_ADDRESS]), host(XCLIENT, "left", [XCLIENT_ADDRESS])],
            [host(XSERVER, "right", [XSERVER_ADDRESS]), host(SERVER, "right", list(server_addresses))],
            paths=["p0", "p1"],
            seed=seed,
            routing="ecmp-xor",
            pins=[(XCLIENT, XSERVER, params.congested_path)],
        )

    def links(self, params: EcmpParams, condition: Condition) -> dict[str, dict[str, Any]]:
        delay = _one_way(condition.rtt_ms)
        path_queue = parse_buffer(params.path_buffer).bytes_for(params.path_mbps, condition.rtt_ms)
        links = {
            f"{CLIENT}.{side}": direction(condition.bandwidth_mbps, 0, condition.loss_pct, condition.buffer_bytes)
            for side in ("up", "down")
        }
        for name in (f"{SERVER}.up", f"{SERVER}.down", f"{XCLIENT}.up", f"{XCLIENT}.down",
                     f"{XSERVER}.up", f"{XSERVER}.down"):
            links[name] = ideal_link()
        for path_name in ("p0", "p1"):
            for side in ("forward", "reverse"):
                links[f"{path_name}.{side}"] = direction(params.path_mbps, delay, 0, path_queue)
        return links

    def seeded_source_ports(self, params: EcmpParams) -> bool:
        return params.source_ports == "seeded"

    def start(self, ctx: Context, params: EcmpParams) -> None:
        log = ctx.workdir / "iperf3-server.log"
        with log.open("wb") as out:
            ctx.lab.spawn(XSERVER, ["iperf3", "-s", "-B", XSERVER_ADDRESS, "-p", str(IPERF_PORT)],
                          stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            listening = ctx.lab.run(XSERVER, ["ss", "-Htln", f"sport = :{IPERF_PORT}"], timeout=10).stdout
            if listening.strip():
                return
            time.sleep(0.1)
        raise ToolError(f"iperf3 server in host {XSERVER} is not listening after 10 s (see {log})")

    def enter(self, ctx: Context, params: EcmpParams, condition: Condition) -> None:
        if not condition.extra("congested"):
            return
        if params.cross_load == "greedy":
            rate = "0"  # iperf3: unlimited, each flow as fast as its congestion control lets it
        else:
            rate = str(mbps_to_bps(params.path_mbps * params.cross_load / params.cross_flows))  # bit/s
        argv = [
            "iperf3", "-c", XSERVER_ADDRESS, "-p", str(IPERF_PORT), "-R", "-P", str(params.cross_flows),
            "-b", rate, "-t", "86400", "-C", params.cross_cc,
        ]
        log = ctx.workdir / "iperf3-cross.log"
        with log.open("ab") as out:
            ctx.state["cross"] = ctx.lab.spawn(XCLIENT, argv, stdout=out, stderr=subprocess.STDOUT)
        time.sleep(CROSS_SETTLE_S)
        process = ctx.state["cross"]
        if process.poll() is not None:
            raise ToolError(f"cross-traffic iperf3 exited with status {process.returncode} (see {log})")

    def busy(self, params: EcmpParams, condition: Condition) -> bool:
        return bool(condition.extra("congested"))

    def leave(self, ctx: Context, params: EcmpParams, condition: Condition) -> None:
        process = ctx.state.pop("cross", None)
        if process is None:
            return
        ctx.lab.stop(process, timeout=5)
        with contextlib.suppress(Exception):
            ctx.lab.await_quiet(within=10)


# ---------------------------------------------------------------------- bw-rtt-grid


class Bottleneck(Scenario):
    """Client and server joined by one bottleneck path (Mahimahi's LinkShell inside DelayShell):
    the rate in both directions, half the RTT each way, the buffer axis as the queue of both
    directions, the loss (if any) on both directions."""

    def topology(self, lab: str, params: Any, server_addresses: Sequence[str], seed: int) -> dict[str, Any]:
        return _client_server(lab, server_addresses, seed)

    def links(self, params: Any, condition: Condition) -> dict[str, dict[str, Any]]:
        delay = _one_way(condition.rtt_ms)
        links = {
            f"p0.{side}": direction(condition.bandwidth_mbps, delay, condition.loss_pct, condition.buffer_bytes)
            for side in ("forward", "reverse")
        }
        for name in (f"{CLIENT}.up", f"{CLIENT}.down", f"{SERVER}.up", f"{SERVER}.down"):
            links[name] = ideal_link()
        return links


class BwRttGrid(Bottleneck):
    """002 §4.5: the 10 x 10 grid of bandwidth (0.2-25 Mbit/s, log) x minimum RTT (30-300 ms),
    buffer = 1 BDP (floored at two packets, docs/spec.md); HTTP/1.1 vs SPDY (here h2) vs QUIC."""

    name = "bw-rtt-grid"
    source = "002 §4.5, ch. 5"
    description = "10 x 10 bandwidth x min-RTT grid, 1-BDP buffer; heat maps of median-PLT improvement"
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [0.2, 0.3, 0.6, 1, 1.7, 2.9, 5, 8.6, 14.6, 25],
        "rtt_ms": [30, 60, 90, 120, 150, 180, 210, 240, 270, 300],
        "loss_pct": [0],
        "buffer": ["1bdp"],
        "mode": ["h1", "h2", "h3"],
        "page": FIVE_PAGES,
    }


# ---------------------------------------------------------------------- single-object

SINGLE_OBJECT_PAGE = "single-object"
SINGLE_OBJECT_HOST = "object.single.test"
SINGLE_OBJECT_ADDRESS = "10.98.0.1"


class SingleObjectParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    object_bytes: int = Field(8_000_000, ge=1, le=2**30, description="size of the one object (002: 8 MB)")


class SingleObject(Bottleneck):
    """002 §4.2.2: one 8 MB object over an unlimited and a 14 Mbit/s link with 0 ms minimum RTT:
    HTTP (h1c) vs HTTPS (h1) vs QUIC (h3), the overhead of TLS and of the QUIC implementation.
    The page `single-object` is provided by the scenario (one origin, one object)."""

    name = "single-object"
    source = "002 §4.2.2"
    description = "one 8 MB object, unlimited and 14 Mbit/s links, 0 ms RTT: HTTP vs HTTPS vs QUIC"
    Params = SingleObjectParams
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": ["unlimited", 14],
        "rtt_ms": [0],
        "loss_pct": [0],
        "buffer": ["default"],
        "mode": ["h1c", "h1", "h3"],
        "page": [SINGLE_OBJECT_PAGE],
    }

    def pages(self, params: SingleObjectParams) -> dict[str, dict[str, Any]]:
        return {
            SINGLE_OBJECT_PAGE: {
                "schema_version": 1,
                "name": SINGLE_OBJECT_PAGE,
                "seed": 1,
                "origins": [{"hostname": SINGLE_OBJECT_HOST, "address": SINGLE_OBJECT_ADDRESS}],
                "objects": [{
                    "path": "/object.bin",
                    "origin": SINGLE_OBJECT_HOST,
                    "size": params.object_bytes,
                    "content_type": "application/octet-stream",
                }],
            }
        }
