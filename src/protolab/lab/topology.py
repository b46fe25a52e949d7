"""Small builders for topology dicts in the format of docs/topology.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SCHEMA_VERSION = 1
LEFT_SUBNET = "10.77.0."
RIGHT_SUBNET = "10.77.1."
IDEAL_QUEUE_PACKETS = 1000


NS_PER_MS = 1_000_000
BPS_PER_MBPS = 1_000_000


def mbps_to_bps(mbps: float) -> int:
    """A rate in Mbit/s as the integer bit/s the emulator takes (`rate_bps`)."""
    return round(mbps * BPS_PER_MBPS)


def ms_to_ns(ms: float) -> int:
    """A duration in ms as the integer ns the emulator takes (`delay_ns`, `std_ns`)."""
    return round(ms * NS_PER_MS)


def link(
    rate_bps: int | None = None,
    *,
    delay_ns: int | None = None,
    jitter_ns: int | None = None,
    jitter_dist: str = "normal",
    preserve_order: bool = False,
    loss: float | Mapping[str, Any] | None = None,
    queue_packets: int | None = None,
    queue_bytes: int | None = None,
    queue_kind: str = "droptail",
    trace: str | None = None,
    trace_start_ns: int | None = None,
    wifi: Mapping[str, Any] | None = None,
    shaper: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One link direction in the emulator's numbers (docs/topology.md); fields left as None
    are omitted (the emulator's defaults apply, or set_link keeps the current value).

    `loss` as a number is a Bernoulli probability; a mapping is passed through (Gilbert-Elliott).
    `queue_kind` is droptail, drophead, codel, pie or fq_codel (each with the emulator's
    defaults); `shaper` (a tbf-like token bucket: `rate_bps`, `burst_bytes`, `limit_bytes`) is
    passed through.
    `wifi` makes the direction a WiFi station (docs/emulator.md, "WiFi links"); `{}` takes the
    802.11n defaults.
    """
    direction: dict[str, Any] = {}
    if rate_bps is not None:
        direction["rate_bps"] = rate_bps
    if trace is not None:
        direction["trace"] = trace
    if trace_start_ns is not None:
        direction["trace_start_ns"] = trace_start_ns
    if wifi is not None:
        direction["wifi"] = dict(wifi)
    if delay_ns is not None:
        direction["delay_ns"] = delay_ns
    if jitter_ns is not None:
        direction["jitter"] = {"std_ns": jitter_ns, "dist": jitter_dist, "preserve_order": preserve_order}
    if loss is not None:
        direction["loss"] = dict(loss) if isinstance(loss, Mapping) else {"kind": "bernoulli", "p": loss}
    if queue_packets is not None and queue_bytes is not None:
        raise ValueError("a queue is limited in packets or in bytes, not both")
    if queue_packets is not None or queue_bytes is not None or queue_kind != "droptail":
        queue: dict[str, Any] = {"kind": queue_kind}
        if queue_packets is not None:
            queue["packets"] = queue_packets
        if queue_bytes is not None:
            queue["bytes"] = queue_bytes
        direction["queue"] = queue
    if shaper is not None:
        direction["shaper"] = dict(shaper)
    return direction


def ideal_link(**overrides: Any) -> dict[str, Any]:
    """set_link params that return a direction to the ideal link, then apply `link(**overrides)`.

    set_link only replaces the fields it is given, so a reset names every field explicitly
    (None removes one: unlimited, no trace, no jitter, no loss, not WiFi, no shaper).
    """
    params: dict[str, Any] = {
        "rate_bps": None,
        "trace": None,
        "delay_ns": 0,
        "jitter": None,
        "loss": None,
        "wifi": None,
        "shaper": None,
        "queue": {"kind": "droptail", "packets": IDEAL_QUEUE_PACKETS},
    }
    params.update(link(**overrides))
    return params


def host(
    name: str,
    side: str,
    addresses: Sequence[str],
    *,
    up: Mapping[str, Any] | None = None,
    down: Mapping[str, Any] | None = None,
    sysctls: Mapping[str, str] | None = None,
    tcp_congestion: str | None = None,
    offload: bool | None = None,
) -> dict[str, Any]:
    """One host; `offload` sets its TUN device's segmentation offloads (None: the lab's,
    docs/emulator.md "Segmentation offloads")."""
    entry: dict[str, Any] = {"name": name, "side": side, "addresses": list(addresses)}
    if tcp_congestion is not None:
        entry["tcp_congestion"] = tcp_congestion
    if offload is not None:
        entry["offload"] = offload
    if sysctls:
        entry["sysctls"] = dict(sysctls)
    access = {k: dict(v) for k, v in (("up", up), ("down", down)) if v}
    if access:
        entry["access"] = access
    return entry


def path(
    name: str, forward: Mapping[str, Any] | None = None, reverse: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name}
    if forward:
        entry["forward"] = dict(forward)
    if reverse:
        entry["reverse"] = dict(reverse)
    return entry


def _side_hosts(
    hosts: Sequence[str | Mapping[str, Any]],
    side: str,
    subnet: str,
    sysctls: Mapping[str, str] | None,
) -> list[dict[str, Any]]:
    built = []
    for index, spec in enumerate(hosts):
        entry = host(spec, side, [f"{subnet}{index + 1}"]) if isinstance(spec, str) else dict(spec)
        entry["side"] = side
        entry.setdefault("addresses", [f"{subnet}{index + 1}"])
        if sysctls:
            entry["sysctls"] = {**sysctls, **entry.get("sysctls", {})}
        built.append(entry)
    return built


def dumbbell(
    lab: str,
    left_hosts: Sequence[str | Mapping[str, Any]],
    right_hosts: Sequence[str | Mapping[str, Any]],
    paths: int | Sequence[str | Mapping[str, Any]] = 1,
    *,
    seed: int = 1,
    tcp_congestion: str = "cubic",
    routing: str = "ecmp-xor",
    pins: Sequence[tuple[str, str, str]] = (),
    sysctls: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A complete topology dict.

    Hosts given by name get addresses 10.77.0.N (left) and 10.77.1.N (right), N from 1;
    mappings (e.g. from `host()`) are taken as they are. Paths given as a count are ideal
    paths p0..pN-1. `sysctls` go to every host (a host's own sysctls win).
    """
    if isinstance(paths, int):
        path_list = [path(f"p{i}") for i in range(paths)]
    else:
        path_list = [path(p) if isinstance(p, str) else dict(p) for p in paths]
    return {
        "schema_version": SCHEMA_VERSION,
        "lab": lab,
        "seed": seed,
        "tcp_congestion": tcp_congestion,
        "hosts": _side_hosts(left_hosts, "left", LEFT_SUBNET, sysctls)
        + _side_hosts(right_hosts, "right", RIGHT_SUBNET, sysctls),
        "paths": path_list,
        "routing": {
            "mode": routing,
            "pins": [{"left": left, "right": right, "path": via} for left, right, via in pins],
        },
    }
