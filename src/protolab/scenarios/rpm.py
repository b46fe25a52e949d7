"""The `rpm` scenario (003 ch. 6-7 in the lab): responsiveness under working conditions
(`protolab-net rpm`, draft-ietf-ippm-responsiveness) over h2 and h3 across bandwidth, RTT and
buffer size, with a drop-tail, CoDel, PIE or FQ-CoDel queue at the bottleneck. The emulator knows the queue,
so every run also carries the loaded RTT a full buffer implies (docs/rpm.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from protolab.lab import ideal_link, mbps_to_bps, ms_to_ns
from protolab.scenarios.base import (
    BULK_SERVER_ADDRESS,
    CLIENT,
    SERVER,
    Condition,
    loss_model,
    rate_bps,
)
from protolab.scenarios.builtin import Bottleneck, _client_server, _one_way
from protolab.scenarios.workloads import RPM_TESTS, Workload

QUEUE_KINDS = ("droptail", "codel", "pie", "fq_codel")
# The target delays of the AQMs (the emulator's defaults): what their standing queue aims at.
# CoDel's (RFC 8289) is also FQ-CoDel's per flow (RFC 8290); PIE's QDELAY_REF (RFC 8033).
CODEL_TARGET_MS = 5.0
PIE_TARGET_MS = 15.0
AQM_TARGET_MS = {"codel": CODEL_TARGET_MS, "fq_codel": CODEL_TARGET_MS, "pie": PIE_TARGET_MS}


class RpmParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    direction: Literal["download", "upload", "both"] = Field("download", description="directions tested (both: download, then upload)")
    max_duration_s: float = Field(20.0, gt=0, le=600, description="time limit per direction, s")
    idle_probes: int = Field(10, ge=1, le=1000, description="idle probe pairs before the load")
    interval_s: float = Field(1.0, gt=0, le=60, description="the draft's ID, s (draft-08: 1; the repository's -09 text: 5)")
    mps: float = Field(100.0, gt=0, le=1000, description="the draft's MPS: most probe pairs per second")
    shaper_burst_bytes: int | None = Field(
        None, ge=1500, description="a tbf-like shaper as the bottleneck (003 ch. 6): tokens at the bandwidth, this "
        "bucket size, the buffer as its limit, behind a link of line_rate_mbps; unset: the link's rate is the bottleneck")
    line_rate_mbps: float = Field(1000.0, gt=0, description="the bottleneck link's own rate under a shaper, Mbit/s")


def expected_loaded_rtt_ms(condition: Condition, queue: str) -> float | None:
    """Base RTT plus the delay of a full buffer (drop-tail), or plus the AQM's target (CoDel,
    PIE and FQ-CoDel's per-flow CoDel keep the standing queue near it; under FQ-CoDel a probe on
    its own connection is a sparse flow and may see less). None without a rate (no queue builds)."""
    if condition.bandwidth_mbps is None:
        return None
    if queue in AQM_TARGET_MS:
        return condition.rtt_ms + AQM_TARGET_MS[queue]
    buffer_bytes = condition.buffer_bytes
    if buffer_bytes is None:
        return None
    return condition.rtt_ms + buffer_bytes * 8 / (condition.bandwidth_mbps * 1e6) * 1e3


class Rpm(Bottleneck):
    """003 ch. 6-7: RPM over h2 and h3 on one bottleneck (rate both ways, half the RTT each way),
    buffer 0.5..8 BDP, drop-tail vs CoDel, PIE and FQ-CoDel (`queue` axis)."""

    name = "rpm"
    source = "003 ch. 6-7"
    description = "responsiveness (RPM) over h2 and h3: bandwidth x RTT x buffer (0.5-8 BDP), drop-tail vs CoDel/PIE/FQ-CoDel"
    Params = RpmParams
    workload: ClassVar[Workload] = RPM_TESTS
    extra_axes: ClassVar[dict[str, Any]] = {"queue": str}
    default_axes: ClassVar[dict[str, list[Any]]] = {
        "bandwidth_mbps": [10, 20, 50],
        "rtt_ms": [20, 40, 100],
        "loss_pct": [0],
        "buffer": ["0.5bdp", "1bdp", "4bdp", "8bdp"],
        "queue": ["droptail", "codel"],
        "mode": ["h2", "h3"],
        "page": [],
    }

    def topology(self, lab: str, params: Any, server_addresses: Sequence[str], seed: int) -> dict[str, Any]:
        return _client_server(lab, [BULK_SERVER_ADDRESS], seed)

    def check(self, params: Any, axes: Mapping[str, Sequence[Any]]) -> None:
        for kind in axes.get("queue", ()):
            if kind not in QUEUE_KINDS:
                raise ValueError(f"axes.queue: {kind!r} is not one of {', '.join(QUEUE_KINDS)}")
        if params.shaper_burst_bytes is not None:
            if "unlimited" in axes.get("bandwidth_mbps", ()):
                raise ValueError("params.shaper_burst_bytes: a shaper needs a bandwidth, not \"unlimited\"")
            if any(str(b).strip().lower() == "default" for b in axes.get("buffer", ())):
                raise ValueError("params.shaper_burst_bytes: a shaper needs a buffer (its limit), not \"default\"")

    def links(self, params: Any, condition: Condition) -> dict[str, dict[str, Any]]:
        queue = dict(condition.extras).get("queue", "droptail")
        delay = _one_way(condition.rtt_ms)
        shaper = None
        line_rate = rate_bps(condition.bandwidth_mbps)
        if params.shaper_burst_bytes is not None and line_rate is not None and condition.buffer_bytes is not None:
            # 003's tbf: the token rate is the bottleneck; the buffer waits for tokens.
            shaper = {"rate_bps": line_rate, "burst_bytes": params.shaper_burst_bytes, "limit_bytes": condition.buffer_bytes}
            line_rate = mbps_to_bps(params.line_rate_mbps)
        bottleneck = ideal_link(rate_bps=line_rate, delay_ns=ms_to_ns(delay), loss=loss_model(condition.loss_pct),
                                queue_bytes=condition.buffer_bytes, queue_kind=queue, shaper=shaper)
        links = {f"p0.{side}": dict(bottleneck) for side in ("forward", "reverse")}
        for name in (f"{CLIENT}.up", f"{CLIENT}.down", f"{SERVER}.up", f"{SERVER}.down"):
            links[name] = ideal_link()
        return links
