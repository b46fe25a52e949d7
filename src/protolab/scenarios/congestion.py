"""Scenarios of the congestion-control lab (docs/scenarios.md): fairness (001 §V-D, 004 ch. 8),
Cubic tuning (004 ch. 9), QUIC vs TCP sweeps (004 ch. 7), the controller suite of 003 ch. 4,
slow-start exit under delay variation and WiFi frame aggregation (000 ch. 6)."""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from protolab.lab import dumbbell, host, ideal_link, mbps_to_bps, ms_to_ns
from protolab.lab.cgroup import CpuLimit as CpuLimit_
from protolab.scenarios.base import (
    BULK_SERVER_ADDRESS,
    CLIENT,
    CLIENT_ADDRESS,
    SERVER,
    Condition,
    Context,
    PairServer,
    Scenario,
    direction,
)
from protolab.scenarios.workloads import BULK_TRANSFERS, PAGE_LOADS, PAIRS, Workload

CLIENT2, SERVER2 = "client2", "server2"
CLIENT2_ADDRESS = "10.77.0.2"
BULK_SERVER2_ADDRESS = "10.77.1.2"


def _one_amount(params: Any) -> Any:
    """Exactly one of `bytes` and `duration_s`: the one given wins over the other's default."""
    given = params.model_fields_set & {"bytes", "duration_s"}
    if len(given) == 2:
        raise ValueError("give one of bytes and duration_s, not both")
    if given == {"bytes"}:
        params.duration_s = None
    elif given == {"duration_s"}:
        params.bytes = None
    if (params.bytes is None) == (params.duration_s is None):
        raise ValueError("give exactly one of bytes and duration_s")
    return params


class BulkParams(BaseModel):
    """What each bulk transfer of a run does (docs/bulk.md)."""

    model_config = ConfigDict(extra="forbid")

    direction: Literal["download", "upload"] = Field("download", description="download: the server sends")
    bytes: int | None = Field(None, ge=1, le=10**12, description="bytes per transfer (or duration_s)")
    duration_s: float | None = Field(None, gt=0, le=3600, description="seconds per transfer (or bytes)")
    interval_ms: int = Field(100, ge=1, le=60_000, description="interval of the transfer's own log")
    loss_burst: float = Field(1.0, ge=1, le=1000, description="mean length of loss bursts in packets: 1 = "
                              "independent (Bernoulli) losses, more = Gilbert-Elliott losses with that mean burst")

    @model_validator(mode="after")
    def _one_amount(self) -> BulkParams:
        return _one_amount(self)


def _path_jitter(params: BaseModel) -> dict[str, Any] | None:
    """The bottleneck's delay variation from params that have `jitter_ms` (SlowStartExitParams
    and its subclasses; None: no variation). Its distribution and ordering come with it: no
    defaults here, a params class with `jitter_ms` alone fails loudly."""
    jitter_ms = getattr(params, "jitter_ms", 0.0)
    if not jitter_ms:
        return None
    return {"std_ns": ms_to_ns(jitter_ms), "dist": getattr(params, "jitter_distribution"),
            "preserve_order": getattr(params, "order_preserving")}


def _bottleneck_links(condition: Condition, params: BaseModel,
                      hosts: Sequence[str] = (CLIENT, SERVER)) -> dict[str, dict[str, Any]]:
    """One bottleneck path p0 (rate, half the RTT each way, loss, buffer) with what the scenario's
    params say of it: the mean loss burst (`loss_burst`, BulkParams) and the delay variation
    (`jitter_ms`, SlowStartExitParams); access links ideal. The params come whole, never field by
    field, so a scenario's `links` cannot leave one out (cc-suite's shaper override once dropped
    `loss_burst`, and cpu-limit never applied its `jitter_ms`)."""
    jitter = _path_jitter(params)
    links = {}
    for side in ("forward", "reverse"):
        path = direction(condition.bandwidth_mbps, condition.rtt_ms / 2, condition.loss_pct, condition.buffer_bytes,
                         getattr(params, "loss_burst", 1.0))
        if jitter is not None:
            path["jitter"] = jitter
        links[f"p0.{side}"] = path
    for name in hosts:
        links[f"{name}.up"] = ideal_link()
        links[f"{name}.down"] = ideal_link()
    return links


class BulkScenario(Scenario):
    """A client and a server joined by one bottleneck path; each run is one bulk transfer."""

    workload = BULK_TRANSFERS
    Params: ClassVar[type[BaseModel]] = BulkParams

    def topology(self, lab: str, params: Any, server_addresses: Sequence[str], seed: int) -> dict[str, Any]:
        addresses = list(server_addresses) or [BULK_SERVER_ADDRESS]
        if BULK_SERVER_ADDRESS not in addresses:
            addresses.insert(0, BULK_SERVER_ADDRESS)
        return dumbbell(lab, [host(CLIENT, "left", [CLIENT_ADDRESS])], [host(SERVER, "right", addresses)],
                        paths=1, seed=seed)

    def links(self, params: Any, condition: Condition) -> dict[str, dict[str, Any]]:
        return _bottleneck_links(condition, params)


# ---------------------------------------------------------------------- fairness

LARGE_IMAGES_PAGE = "large-images"
LARGE_IMAGES_HOST = "images.fairness.test"
LARGE_IMAGES_ADDRESS = "10.98.1.1"


def large_images_page(images: int, image_bytes: int) -> dict[str, Any]:
    """001 §V-D's "synthetic web page with large JPG images": an HTML root and its images."""
    objects: list[dict[str, Any]] = [{"path": "/", "origin": LARGE_IMAGES_HOST, "size": 20_000,
                                      "content_type": "text/html; charset=utf-8"}]
    objects += [{"path": f"/img/{i:02d}.jpg", "origin": LARGE_IMAGES_HOST, "size": image_bytes,
                 "content_type": "image/jpeg", "parent": "/"} for i in range(images)]
    return {"schema_version": 1, "name": LARGE_IMAGES_PAGE, "seed": 1,
            "origins": [{"hostname": LARGE_IMAGES_HOST, "address": LARGE_IMAGES_ADDRESS}], "objects": objects}


def second_address(address: str) -> str:
    """The address of an origin's copy on the second server: 100 added to the second octet
    (10.98.1.1 -> 10.198.1.1); corpus and scenario origins live in 10.x with x < 156."""
    octets = str(ipaddress.IPv4Address(address)).split(".")
    if int(octets[1]) >= 156:
        raise ValueError(f"origin address {address}: no room for a second server's copy (second octet >= 156)")
    octets[1] = str(int(octets[1]) + 100)
    return ".".join(octets)


def second_copy(manifest: dict[str, Any]) -> dict[str, Any]:
    """The page as the second server serves it: every origin renamed `b-<host>` at its second address."""
    rename = {o["hostname"]: "b-" + o["hostname"] for o in manifest["origins"]}
    origins = [{"hostname": rename[o["hostname"]], "address": second_address(o["address"])} for o in manifest["origins"]]
    objects = []
    for obj in manifest["objects"]:
        copy = {**obj, "origin": rename[obj["origin"]]}
        parent = obj.get("parent")
        if isinstance(parent, str) and parent.startswith("//"):
            hostname, _, path = parent[2:].partition("/")
            copy["parent"] = f"//{rename.get(hostname, hostname)}/{path}"
        objects.append(copy)
    return {**manifest, "origins": origins, "objects": objects}


class FairnessParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload: Literal["page", "bulk"] = Field("page", description="the sides load pages, or run bulk transfers")
    images: int = Field(16, ge=1, le=500, description="images of the large-images page")
    image_bytes: int = Field(400_000, ge=1000, le=50_000_000, description="bytes per image")
    bulk_duration_s: float = Field(30.0, gt=0, le=3600, description="length of each bulk flow")
    bin_ms: int = Field(100, ge=10, le=10_000, description="throughput bins (from the emulator's event log)")
    servers: Literal["two", "one"] = Field(
        "two", description="two: each side has its own server host (004 Fig. 15); one: both sides' servers in "
        "one server host behind one access link (004 Fig. 13)")


def fairness_server_hosts(params: FairnessParams, first: Sequence[str], second: Sequence[str]) -> list[dict[str, Any]]:
    """The server hosts of the fairness dumbbell: 004 Fig. 15's two (one per side), or Fig. 13's
    one host carrying both sides' addresses (both servers share its namespace and access link)."""
    if params.servers == "one":
        return [host(SERVER, "right", [*first, *second])]
    return [host(SERVER, "right", list(first)), host(SERVER2, "right", list(second))]


def fairness_server_names(params: FairnessParams) -> tuple[str, ...]:
    """The server hosts the fairness topology has (Fig. 13's one, or Fig. 15's two)."""
    return (SERVER,) if params.servers == "one" else (SERVER, SERVER2)


class Fairness(Scenario):
    """001 §V-D, 004 ch. 8: two clients behind one shared bottleneck (7 Mbit/s, 50 ms RTT, 1 BDP),
    each with its own server, start at the same time with a protocol pair (`h3 vs h2`,
    `h3 vs h2-parallel:2`, `h3 vs h1`, `h2 vs h1`; a side may carry its own QUIC controller,
    `h3@gquic39`). Page workload: both load the large-images page (the second client from a copy
    on the second server); bulk workload: `tcp*2 vs h3*2` runs N downloads per side. Throughput
    per side over time comes from the emulator's event log (deliveries on the bottleneck).
    """

    name = "fairness"
    source = "001 §V-D, 004 ch. 8, 000 §6.3.3"
    description = "two clients share a 7 Mbit/s, 50 ms, 1-BDP bottleneck with a protocol pair; shares and Jain's index"
    Params = FairnessParams
    workload = PAIRS
    clients = (CLIENT, CLIENT2)
    servers = (SERVER, SERVER2)
    # `servers` came after recorded runs, which all had two server hosts.
    key_neutral_params: ClassVar[dict[str, Any]] = {"servers": "two"}
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [7],
        "rtt_ms": [50],
        "loss_pct": [0],
        "buffer": ["1bdp"],
        "mode": ["h3 vs h2", "h3 vs h2-parallel:2", "h3 vs h1", "h2 vs h1"],
        "page": [LARGE_IMAGES_PAGE],
    }

    def pages(self, params: FairnessParams) -> dict[str, dict[str, Any]]:
        return {LARGE_IMAGES_PAGE: large_images_page(params.images, params.image_bytes)}

    def topology(self, lab: str, params: FairnessParams, server_addresses: Sequence[str], seed: int) -> dict[str, Any]:
        if params.workload == "page":
            first = list(server_addresses)
            second = [second_address(a) for a in server_addresses]
        else:
            first, second = [BULK_SERVER_ADDRESS], [BULK_SERVER2_ADDRESS]
        return dumbbell(
            lab,
            [host(CLIENT, "left", [CLIENT_ADDRESS]), host(CLIENT2, "left", [CLIENT2_ADDRESS])],
            fairness_server_hosts(params, first, second),
            paths=1, seed=seed,
        )

    def links(self, params: FairnessParams, condition: Condition) -> dict[str, dict[str, Any]]:
        return _bottleneck_links(condition, params, hosts=(CLIENT, CLIENT2, *fairness_server_names(params)))

    def pair_servers(self, params: FairnessParams) -> tuple[PairServer, PairServer]:
        """Sides a and b's servers: each in its own host (Fig. 15), or both in one host, each on
        its half of the host's addresses (Fig. 13)."""
        if params.servers == "one":
            return PairServer(SERVER, "a", 0, 2), PairServer(SERVER, "b", 1, 2)
        return PairServer(SERVER), PairServer(SERVER2)

    def bulk_server_address(self, params: Any) -> str:
        return BULK_SERVER_ADDRESS

    def check(self, params: FairnessParams, axes: Mapping[str, Sequence[Any]]) -> None:
        if params.workload == "page" and len(axes.get("page", [])) > 0:
            # Every page gets a copy on the second server, at its second address.
            page = large_images_page(params.images, params.image_bytes)
            try:
                second_copy(page)
            except ValueError as exc:
                raise ValueError(f"params: {exc}") from None


# ---------------------------------------------------------------------- cubic-tuning


class CubicTuningParams(BulkParams):
    base: str = Field("cubic", description="the controller whose c, cube_factor and beta the axes set")
    duration_s: float | None = Field(30.0, gt=0, le=3600, description="seconds per transfer (or bytes)")


class CubicTuning(BulkScenario):
    """004 ch. 9: QUIC bulk transfers with Cubic's CubeFactor (0, 1, 2: quic-go's `cubeFactor`
    as a multiple of its default, which scales K^3 and leaves the growth C alone) and beta (0.5,
    0.7, 1) over 10 Mbit/s, 40 ms RTT, 0.05% loss; throughput, retransmissions and cwnd over
    time. The axes `c`, `cube_factor` and `beta` set the controller
    (`<base>:c=C,cube_factor=F,beta=B`)."""

    name = "cubic-tuning"
    source = "004 ch. 9"
    description = "QUIC bulk with Cubic's CubeFactor in {0, 1, 2} x beta in {0.5, 0.7, 1}; 10 Mbit/s, 40 ms, 0.05% loss"
    Params = CubicTuningParams
    extra_axes: ClassVar[dict[str, Any]] = {"c": float, "cube_factor": float, "beta": float}
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [10],
        "rtt_ms": [40],
        "loss_pct": [0.05],
        "buffer": ["1bdp"],
        "mode": ["h3"],
        "page": [],
        "c": [0.4],
        "cube_factor": [0.0, 1.0, 2.0],
        "beta": [0.5, 0.7, 1.0],
    }

    @staticmethod
    def controller(base: str, c: Any, cube_factor: Any, beta: Any) -> str:
        return f"{base}:c={c},cube_factor={cube_factor},beta={beta}"

    def check(self, params: CubicTuningParams, axes: Mapping[str, Sequence[Any]]) -> None:
        from protolab.plan import controllers

        for c, cube_factor, beta in itertools.product(axes["c"], axes["cube_factor"], axes["beta"]):
            try:
                controllers.check(self.controller(params.base, c, cube_factor, beta))
            except controllers.ControllerError as exc:
                raise ValueError(f"axes.c/cube_factor/beta: {exc}") from None
        if "quic_cc" in axes:
            raise ValueError("axes.quic_cc: the c, cube_factor and beta axes set the controller here (params.base "
                             "names it)")

    def transport_for(self, params: CubicTuningParams, condition: Condition, transport: dict[str, Any]) -> dict[str, Any]:
        controller = self.controller(params.base, condition.extra("c"), condition.extra("cube_factor"),
                                     condition.extra("beta"))
        return {**transport, "quic_cc": controller}


# ---------------------------------------------------------------------- quic-vs-tcp


class QuicVsTcpParams(BulkParams):
    bytes: int | None = Field(5_500_000, ge=1, le=10**12, description="the seed's 5.5 MB file")


class QuicVsTcp(BulkScenario):
    """004 ch. 7: a 5.5 MB download over QUIC (h3) and TCP (HTTP/1.1 cleartext, the seed's wget)
    through two links (client-switch, switch-server), each with the bandwidth, a quarter of the
    RTT each way and the loss (so a packet meets the loss twice, as on the seed's Mininet links).
    The seed sweeps one factor at a time; specs/quic-vs-tcp.toml does it with sweeps."""

    name = "quic-vs-tcp"
    source = "004 ch. 7"
    description = "5.5 MB download, QUIC vs TCP; bandwidth 2-100 Mbit/s, RTT 40-800 ms, loss 0-0.5%"
    Params = QuicVsTcpParams
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [50],
        "rtt_ms": [40],
        "loss_pct": [0, 0.05, 0.075, 0.1, 0.5],
        "buffer": ["1bdp"],
        "mode": ["h1c", "h3"],
        "page": [],
    }

    def links(self, params: Any, condition: Condition) -> dict[str, dict[str, Any]]:
        quarter = condition.rtt_ms / 4
        links = {}
        for name in (f"{CLIENT}.up", f"{CLIENT}.down", f"{SERVER}.up", f"{SERVER}.down"):
            links[name] = direction(condition.bandwidth_mbps, quarter, condition.loss_pct, condition.buffer_bytes,
                                    params.loss_burst)
        for side in ("forward", "reverse"):
            links[f"p0.{side}"] = ideal_link()
        return links


# ---------------------------------------------------------------------- cc-suite


class CcSuiteParams(BulkParams):
    duration_s: float | None = Field(10.0, gt=0, le=3600, description="seconds per transfer (or bytes)")
    shaper_burst_bytes: int | None = Field(
        None, ge=1500, description="003 §6.1's tc tbf as the bottleneck: tokens at the bandwidth, this bucket size, "
        "the buffer as its limit, behind a link of line_rate_mbps; unset: the link's rate is the bottleneck")
    line_rate_mbps: float = Field(1000.0, gt=0, description="the bottleneck link's own rate under a shaper (003: 1 Gbit/s)")


class CcSuite(BulkScenario):
    """003 ch. 4 and §6.2: NesQUIC's bulk tests per controller (cubic, bbr, reno, fast) and its
    "limited" tests, a fixed rate at 30-110% of the link (`fixed:rate=70%`: a rate in % of the
    run's bandwidth), over links of 5-100 Mbit/s and 10-250 ms RTT with the seed's 50 kB
    token-bucket buffer (`shaper_burst_bytes`: 003's tbf itself, the buffer as its limit).
    Throughput, latency under load (the sender's RTT samples) and loss."""

    name = "cc-suite"
    source = "003 ch. 4, §6.2"
    description = "bulk per QUIC controller (cubic, bbr, reno, fast) and fixed at 30-110% of the link; 50 kB buffer"
    Params = CcSuiteParams
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [10, 50],
        "rtt_ms": [20, 100],
        "loss_pct": [0],
        "buffer": [50_000],
        "mode": ["h3"],
        "page": [],
    }

    def check(self, params: CcSuiteParams, axes: Mapping[str, Sequence[Any]]) -> None:
        if params.shaper_burst_bytes is not None:
            if "unlimited" in axes.get("bandwidth_mbps", ()):
                raise ValueError("params.shaper_burst_bytes: a shaper needs a bandwidth, not \"unlimited\"")
            if any(str(b).strip().lower() == "default" for b in axes.get("buffer", ())):
                raise ValueError("params.shaper_burst_bytes: a shaper needs a buffer (its limit), not \"default\"")

    def links(self, params: CcSuiteParams, condition: Condition) -> dict[str, dict[str, Any]]:
        links = _bottleneck_links(condition, params)
        if params.shaper_burst_bytes is None or condition.bandwidth_mbps is None or condition.buffer_bytes is None:
            return links
        # 003's tbf: the tokens (at the bandwidth) pace the bottleneck, the buffer waits for them,
        # and the link under the shaper runs at the router's line rate.
        shaper = {"rate_bps": mbps_to_bps(condition.bandwidth_mbps), "burst_bytes": params.shaper_burst_bytes,
                  "limit_bytes": condition.buffer_bytes}
        for side in ("forward", "reverse"):
            links[f"p0.{side}"] = {**links[f"p0.{side}"], "rate_bps": mbps_to_bps(params.line_rate_mbps), "shaper": shaper}
        return links


# ---------------------------------------------------------------------- slow-start-exit


class SlowStartExitParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload: Literal["bulk", "page"] = Field("bulk", description="bulk downloads (throughput) or page loads (PLT)")
    direction: Literal["download", "upload"] = "download"
    bytes: int | None = Field(10_000_000, ge=1, le=10**12, description="the seed's 10 MB download")
    duration_s: float | None = Field(None, gt=0, le=3600)
    interval_ms: int = Field(100, ge=1, le=60_000)
    jitter_ms: float = Field(4.0, ge=0, le=1000, description="standard deviation of the delay, each way")
    jitter_distribution: Literal["normal", "uniform", "pareto"] = "normal"
    order_preserving: bool = Field(True, description="delays never reorder packets (802.11 delivers in order)")

    @model_validator(mode="after")
    def _one_amount(self) -> SlowStartExitParams:
        return _one_amount(self)


class SlowStartExit(BulkScenario):
    """000 ch. 6: a WiFi-like path whose delay varies by milliseconds makes QUIC leave slow start
    early (HyStart's RTT threshold). Cubic with HyStart++ at RFC 9406's thresholds, with tuned
    (larger) ones, and without HyStart; slow-start exit time and cwnd at exit (from the sender's
    state samples), throughput of a 10 MB download, or PLT with `params.workload = "page"`."""

    name = "slow-start-exit"
    source = "000 ch. 6"
    description = "delay variation on a 50 Mbit/s, 40 ms path; HyStart++ default vs tuned vs off: exit time, cwnd at exit"
    Params = SlowStartExitParams
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [50],
        "rtt_ms": [40],
        "loss_pct": [0],
        "buffer": ["2bdp"],
        "mode": ["h3"],
        "page": ["amazon"],
    }

    def workload_for(self, params: SlowStartExitParams) -> Workload:
        return PAGE_LOADS if params.workload == "page" else BULK_TRANSFERS


# ---------------------------------------------------------------------- cpu-limit


class CpuLimitParams(SlowStartExitParams):
    jitter_ms: float = Field(0.0, ge=0, le=1000, description="delay variation (none by default)")
    limit_server: bool = Field(False, description="also run the server in the CPU-limited cgroup")


class CpuLimit(BulkScenario):
    """000 §6.1.4, Table 6.2: QUIC runs in user space, TCP in the kernel, so a client short of CPU
    slows QUIC down more. The client (and with `limit_server` the server) runs in a cgroup whose
    CPU quota is the scenario axis `cpu_pct`, percent of one core (cgroup v2 `cpu.max`, or v1
    `cpu.cfs_quota_us` where the cpu controller is v1's); 100 means no limit. A 10 MB download
    (or page loads with `workload = "page"`) over links of the seed's three clients' rates."""

    name = "cpu-limit"
    source = "000 §6.1.4, Table 6.2"
    description = "client CPU quota 10-100% of a core: QUIC (user space) vs TCP (kernel) throughput and PLT"
    Params = CpuLimitParams
    extra_axes: ClassVar[dict[str, Any]] = {"cpu_pct": float}
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [10, 30, 60],
        "rtt_ms": [40],
        "loss_pct": [0],
        "buffer": ["1bdp"],
        "mode": ["tcp", "h3"],
        "page": ["amazon"],
        "cpu_pct": [10, 25, 50, 100],
    }

    def workload_for(self, params: CpuLimitParams) -> Workload:
        return PAGE_LOADS if params.workload == "page" else BULK_TRANSFERS

    def check(self, params: CpuLimitParams, axes: Mapping[str, Sequence[Any]]) -> None:
        for value in axes["cpu_pct"]:
            if not 1 <= value <= 100:
                raise ValueError(f"axes.cpu_pct: {value} is not a share of one core in 1..100 (%)")

    def start(self, ctx: Context, params: CpuLimitParams) -> None:
        limit = CpuLimit_(f"pl-{ctx.lab.name}-cpu")
        limit.create()
        ctx.state["cpu"] = limit

    def enter(self, ctx: Context, params: CpuLimitParams, condition: Condition) -> None:
        ctx.state["cpu"].set(float(condition.extra("cpu_pct")))

    def stop(self, ctx: Context, params: CpuLimitParams) -> None:
        limit = ctx.state.pop("cpu", None)
        if limit is not None:
            limit.remove()

    def cgroup(self, ctx: Context, params: CpuLimitParams, role: str) -> Path | None:
        limit = ctx.state.get("cpu")
        if limit is None or (role == "server" and not params.limit_server):
            return None
        return limit.path


# ---------------------------------------------------------------------- wifi-aggregation


class WifiAggregationParams(BulkParams):
    bytes: int | None = Field(10_000_000, ge=1, le=10**12, description="bytes per download (or duration_s)")
    phy_rate_mbps: float = Field(130.0, gt=0, le=10_000, description="WiFi PHY rate (802.11n MCS 15: 130)")
    frame_error_rate: float = Field(0.05, ge=0, le=1, description="probability that one MPDU attempt fails")
    retry_limit: int = Field(7, ge=0, le=255, description="retransmissions of a failed MPDU before it is lost")
    contention_probability: float = Field(0.0, ge=0, lt=1, description="another station takes the channel "
                                          "before a TXOP with this probability (again after each of its TXOPs)")
    uplink_wifi: bool = Field(True, description="the client's uplink (its ACKs) is a WiFi station too")


class WifiAggregation(BulkScenario):
    """000 ch. 6, Table 6.4: the client sits behind a WiFi hop (its access link, both ways, a
    station of the emulator's WiFi model: docs/emulator.md) with frame aggregation on (A-MPDUs
    of up to 64 frames) or off (`ampdu_frames` = 1). TCP's bursty sending fills aggregates,
    which raises its throughput more than QUIC's paced sending (000's finding). Bulk downloads;
    the wired path p0 has the condition's bandwidth (unlimited by default), RTT and loss."""

    name = "wifi-aggregation"
    source = "000 ch. 6, Table 6.4"
    description = "bulk over an 802.11n WiFi hop, A-MPDU aggregation on (64) vs off (1): TCP vs QUIC throughput"
    Params = WifiAggregationParams
    extra_axes: ClassVar[dict[str, Any]] = {"ampdu_frames": int}
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": ["unlimited"],
        "rtt_ms": [40],
        "loss_pct": [0],
        "buffer": ["default"],
        "mode": ["tcp", "h3"],
        "page": [],
        "ampdu_frames": [1, 64],
    }

    def check(self, params: WifiAggregationParams, axes: Mapping[str, Sequence[Any]]) -> None:
        for value in axes["ampdu_frames"]:
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
                raise ValueError(f"axes.ampdu_frames: {value!r} is not an A-MPDU frame limit in 1..1024")

    def links(self, params: WifiAggregationParams, condition: Condition) -> dict[str, dict[str, Any]]:
        links = _bottleneck_links(condition, params)
        wifi = {
            "phy_rate_bps": mbps_to_bps(params.phy_rate_mbps),
            "max_ampdu_frames": int(condition.extra("ampdu_frames")),
            "frame_error_rate": params.frame_error_rate,
            "retry_limit": params.retry_limit,
            "contention_probability": params.contention_probability,
        }
        hops = [f"{CLIENT}.down"] + ([f"{CLIENT}.up"] if params.uplink_wifi else [])
        for hop in hops:
            links[hop] = ideal_link(wifi=wifi, queue_bytes=condition.buffer_bytes)
        return links
