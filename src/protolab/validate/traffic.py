"""The validation's traffic checks: loss (seeded Bernoulli against an exact Clopper-Pearson
interval), rate (TCP goodput and the link's delivered bits), ECMP (every flow on its hashed path,
from the event log) and WiFi (aggregation's rate, residual loss after retries, retries as delay)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from protolab.errors import ToolError
from protolab.lab import Lab, ideal_link, mbps_to_bps, ms_to_ns
from protolab.measure.events import paths_per_flow, xor_path_index
from protolab.measure.stats import clopper_pearson
from protolab.measure.tools import IperfResult
from protolab.validate.plumbing import (
    ACCESS_LINKS,
    CLIENT,
    ECMP_SETTLE_S,
    IPERF_PORTS,
    MTU_BYTES,
    PATH_LINKS,
    PATHS,
    SERVER,
    StepCallback,
    configure_links,
    finish_iperf3,
    iperf3_argv,
    run_irtt,
    run_ping,
    spawn_iperf3,
)
from protolab.validate.report import Check, Status, Thresholds, ValidationConfig


def _loss_check(
    check_id: str, name: str, percent: float, lost: int, trials: int, confidence: float, status_if_outside: Status,
    group: str = "loss",
) -> Check:
    p = percent / 100
    if trials <= 0:
        raise ToolError(f"{name}: no probes whose fate is known")
    lower, upper = clopper_pearson(lost, trials, confidence)
    observed = lost / trials
    inside = lower <= p <= upper
    return Check(
        id=check_id,
        group=group,
        name=name,
        unit="%",
        configured=percent,
        measured=100 * observed,
        error=100 * (observed - p),
        configured_text=f"{percent:g} %",
        measured_text=f"{100 * observed:.2f} % ({lost}/{trials})",
        error_text=f"[{100 * lower:.2f},{100 * upper:.2f}]%",
        criterion=f"p inside {confidence:.0%} Clopper-Pearson",
        status="pass" if inside else status_if_outside,
        details={"lost": lost, "trials": trials, "ci_low_percent": 100 * lower, "ci_high_percent": 100 * upper},
    )


def loss_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    checks: list[Check] = []
    confidence = config.thresholds.loss_confidence
    for percent in config.loss_percent:
        step(f"loss {percent:g} %")
        loss = {"loss": percent / 100}
        configure_links(lab, access={}, p0_forward=loss, p0_reverse=loss)
        # Reseeded per level: the verdict depends on the seed, not on what ran before.
        lab.set_link(["p0.forward", "p0.reverse"], seed=config.seed)
        irtt = run_irtt(lab, workdir, f"loss-{percent:g}", config.loss_probes)
        checks.append(_loss_check(f"loss.irtt.up.{percent:g}", f"loss {percent:g} %: irtt upstream",
                                  percent, irtt.lost_up, irtt.upstream_trials, confidence, "fail"))
        checks.append(_loss_check(f"loss.irtt.down.{percent:g}", f"loss {percent:g} %: irtt downstream",
                                  percent, irtt.lost_down, irtt.downstream_trials, confidence, "fail"))
        # Thesis 004 Table 6 measured with ping: a round trip survives both directions.
        ping = run_ping(lab, config.loss_pings)
        round_trip_percent = 100 * (1 - (1 - percent / 100) ** 2)
        checks.append(_loss_check(f"loss.ping.round_trip.{percent:g}",
                                  f"loss {percent:g} %: ping round trip (1-(1-p)^2)",
                                  round_trip_percent, ping.lost, ping.transmitted, confidence, "info"))
    return checks


def _link_rate(before: dict[str, Any], after: dict[str, Any], link: str) -> float:
    """Delivered IP bit/s on a link between two counter snapshots."""
    path_name, direction = link.split(".")
    delivered = [int(snapshot["paths"][path_name][direction]["delivered_bytes"]) for snapshot in (before, after)]
    seconds = (int(after["now_ns"]) - int(before["now_ns"])) / 1e9
    return 8 * (delivered[1] - delivered[0]) / seconds


def _rate_status(ratio: float, rate_mbit: float, limits: Thresholds) -> Status:
    if ratio > limits.goodput_max_ratio:
        return "fail"
    if ratio >= limits.goodput_min_ratio:
        return "pass"
    return "info" if rate_mbit >= limits.info_only_rate_mbit else "fail"


def _iperf3_with_counters(
    lab: Lab, config: ValidationConfig, output: Path
) -> tuple[IperfResult, dict[str, Any], dict[str, Any]]:
    """One iperf3 TCP run of the rate checks' length, with the link counters sampled inside the
    measured interval (after slow start): the emulator's own view of the achieved rate."""
    seconds, omit = config.rate_seconds, config.rate_omit_seconds
    process = spawn_iperf3(lab, output, iperf3_argv(lab, IPERF_PORTS[0], seconds, omit))
    time.sleep(omit + 0.5)
    before = lab.counters()
    time.sleep(max(seconds - 1.0, 0.5))
    after = lab.counters()
    return finish_iperf3(process, output, timeout=seconds + omit + 60), before, after


def rate_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    checks: list[Check] = []
    limits = config.thresholds
    for rate_mbit in config.rates_mbit:
        step(f"rate {rate_mbit:g} Mbit/s")
        bdp_bytes = max(MTU_BYTES, round(rate_mbit * 1e6 * config.rate_rtt_ms / 1e3 / 8))
        configure_links(lab, access={"delay_ns": ms_to_ns(config.rate_rtt_ms / 4)},
                   p0_forward={"rate_bps": mbps_to_bps(rate_mbit), "queue_bytes": bdp_bytes}, p0_reverse={})
        seconds, omit = config.rate_seconds, config.rate_omit_seconds
        iperf, before, after = _iperf3_with_counters(lab, config, workdir / f"iperf3-rate-{rate_mbit:g}.json")
        configured_bps = rate_mbit * 1e6
        goodput_ratio = iperf.goodput_bps / configured_bps
        link_bps = _link_rate(before, after, "p0.forward")
        link_ratio = link_bps / configured_bps
        criterion = f"{limits.goodput_min_ratio:.0%} <= ratio <= {limits.goodput_max_ratio:.0%}"
        common = {"bdp_queue_bytes": bdp_bytes, "rtt_ms": config.rate_rtt_ms, "seconds": seconds, "omit": omit}
        checks.append(Check(
            id=f"rate.goodput.{rate_mbit:g}",
            group="rate",
            name=f"rate {rate_mbit:g} Mbit/s: iperf3 TCP goodput",
            unit="Mbit/s",
            configured=rate_mbit,
            measured=iperf.goodput_bps / 1e6,
            error=goodput_ratio,
            configured_text=f"{rate_mbit:g} Mbit/s",
            measured_text=f"{iperf.goodput_bps / 1e6:.3f} Mbit/s",
            error_text=f"{goodput_ratio:.1%}",
            criterion=criterion,
            status=_rate_status(goodput_ratio, rate_mbit, limits),
            details={**common, "retransmits": iperf.retransmits, "sender_mbit": iperf.sender_bps / 1e6,
                     "congestion": iperf.congestion},
        ))
        checks.append(Check(
            id=f"rate.link.{rate_mbit:g}",
            group="rate",
            name=f"rate {rate_mbit:g} Mbit/s: link delivered (counters)",
            unit="Mbit/s",
            configured=rate_mbit,
            measured=link_bps / 1e6,
            error=link_ratio,
            configured_text=f"{rate_mbit:g} Mbit/s",
            measured_text=f"{link_bps / 1e6:.3f} Mbit/s",
            error_text=f"{link_ratio:.1%}",
            criterion=criterion,
            status=_rate_status(link_ratio, rate_mbit, limits),
            details={**common, "window_s": (after["now_ns"] - before["now_ns"]) / 1e9},
        ))
    return checks


class EcmpRun(BaseModel):
    """What the ECMP transfers left behind: iperf3 results, the event log and final counters."""

    results: list[IperfResult]
    events_file: Path
    events: int | None
    events_dropped: int | None
    counters: dict[str, Any]


def _run_ecmp_transfers(lab: Lab, config: ValidationConfig, workdir: Path) -> EcmpRun:
    # Packets of earlier checks still queued on p0 would show up on the "wrong" path once the
    # pin is gone: let the lab drain and the last TCP closes finish first.
    lab.await_quiet()
    time.sleep(ECMP_SETTLE_S)
    lab.set_link(ACCESS_LINKS, **ideal_link(delay_ns=ms_to_ns(config.ecmp_access_delay_ms)))
    lab.set_link(PATH_LINKS, **ideal_link(rate_bps=mbps_to_bps(config.ecmp_rate_mbit), queue_packets=100))
    lab.set_routing("ecmp-xor", pins=[])
    # Linux connect() hands out ephemeral ports of one parity (even), so the xor hash
    # (SA^DA^SP^DP^PT mod 2) sends every flow to one server port down the same path. Two
    # servers on ports of opposite parity share the flows out, half each.
    per_server = [config.ecmp_flows // len(IPERF_PORTS)] * len(IPERF_PORTS)
    per_server[0] += config.ecmp_flows - sum(per_server)
    events_file = workdir / "ecmp-events.ndjson"
    lab.reset_counters()
    lab.events_start(events_file)
    try:
        runs = []
        for port, flows in zip(IPERF_PORTS, per_server, strict=True):
            output = workdir / f"iperf3-ecmp-{port}.json"
            argv = iperf3_argv(lab, port, config.ecmp_seconds, 0, parallel=flows)
            runs.append((spawn_iperf3(lab, output, argv), output))
        results = [finish_iperf3(process, output, config.ecmp_seconds + 60) for process, output in runs]
    finally:
        events_reply = lab.events_stop()
    counters = lab.counters()
    lab.set_routing("ecmp-xor", pins=[{"left": CLIENT, "right": SERVER, "path": "p0"}])
    return EcmpRun(results=results, events_file=events_file, events=events_reply.get("events"),
                   events_dropped=events_reply.get("dropped"), counters=counters)


def ecmp_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    step(f"ECMP: {config.ecmp_flows} flows over {len(PATHS)} paths")
    run = _run_ecmp_transfers(lab, config, workdir)
    with run.events_file.open() as lines:
        crossed = paths_per_flow(lines, PATHS)
    client_addr = lab.address(CLIENT)
    data_flows = {(local, remote) for result in run.results for local, remote in result.streams}
    logged_flows = {
        (key.port_a, key.port_b) if key.addr_a == client_addr else (key.port_b, key.port_a) for key in crossed
    }
    single_path = {key: next(iter(names)) for key, names in crossed.items() if len(names) == 1}
    on_hash_path = [
        key for key, name in single_path.items()
        if name == PATHS[xor_path_index(key.addr_a, key.addr_b, key.port_a, key.port_b, key.proto, len(PATHS))]
    ]
    flows_per_path = Counter(single_path.values())
    path_bytes = {
        name: sum(run.counters["paths"][name][direction]["delivered_bytes"] for direction in ("forward", "reverse"))
        for name in PATHS
    }
    shares = {name: path_bytes[name] / (sum(path_bytes.values()) or 1) for name in PATHS}
    common = {"events": run.events, "events_dropped": run.events_dropped}
    n_flows, n_single, n_hash = len(crossed), len(single_path), len(on_hash_path)
    all_data_logged = data_flows <= logged_flows and len(data_flows) == config.ecmp_flows
    min_share = config.thresholds.ecmp_min_path_share
    return [
        Check(
            id="ecmp.single_path",
            group="ecmp",
            name=f"ECMP: every TCP flow on exactly one path ({len(data_flows)} iperf3 data flows)",
            unit="flows",
            configured=float(n_flows),
            measured=float(n_single),
            error=float(n_flows - n_single),
            configured_text=f"{n_flows} flows",
            measured_text=f"{n_single} on one path",
            error_text=f"{n_flows - n_single} split",
            criterion="all flows on one path; every iperf3 data flow in the event log",
            status="pass" if n_flows > 0 and n_single == n_flows and all_data_logged else "fail",
            details={
                **common,
                "flows": {f"{k.addr_a}:{k.port_a}-{k.addr_b}:{k.port_b}": sorted(v) for k, v in crossed.items()},
                "data_flows": sorted(data_flows),
            },
        ),
        Check(
            id="ecmp.xor_hash",
            group="ecmp",
            name="ECMP: each flow on path (SA^DA^SP^DP^PT) mod 2",
            unit="flows",
            configured=float(n_single),
            measured=float(n_hash),
            error=float(n_single - n_hash),
            configured_text=f"{n_single} flows",
            measured_text=f"{n_hash} on hash path",
            error_text=f"{n_single - n_hash} off",
            criterion="all flows on the xor-hash path",
            status="pass" if n_single and n_hash == n_single else "fail",
            details=common,
        ),
        Check(
            id="ecmp.both_paths",
            group="ecmp",
            name="ECMP: both paths carry traffic (counters)",
            unit="share",
            configured=None,
            measured=min(shares.values()),
            error=None,
            configured_text="both used",
            measured_text=", ".join(f"{p} {shares[p]:.0%} ({flows_per_path.get(p, 0)} flows)" for p in PATHS),
            error_text="-",
            criterion=f"each path >= {min_share:.0%} of bytes",
            status="pass" if min(shares.values()) >= min_share else "fail",
            details={**common, "path_bytes": path_bytes, "flows_per_path": dict(flows_per_path),
                     "goodput_mbit": [r.goodput_bps / 1e6 for r in run.results]},
        ),
    ]


# ---------------------------------------------------------------------- WiFi

# Bytes an MPDU adds to its IP packet (netmodel::MPDU_OVERHEAD_BYTES; docs/emulator.md).
WIFI_MPDU_OVERHEAD_BYTES = 42


def wifi_saturated_rate_bps(wifi: Mapping[str, Any], packet_bytes: int = MTU_BYTES) -> float:
    """IP bit/s of a saturated WiFi link direction (`wifi` as the emulator reports it): full
    A-MPDUs of `packet_bytes` packets over the mean TXOP, no frame errors, no other stations
    (docs/emulator.md, "WiFi links")."""
    mpdu_bits = (packet_bytes + WIFI_MPDU_OVERHEAD_BYTES) * 8

    def airtime_ns(frames: int) -> float:
        return float(frames * mpdu_bits * 1e9 / wifi["phy_rate_bps"])

    frames = 1
    while (frames < wifi["max_ampdu_frames"] and (frames + 1) * mpdu_bits / 8 <= wifi["max_ampdu_bytes"]
           and airtime_ns(frames + 1) <= wifi["max_ampdu_duration_ns"]):
        frames += 1
    txop_ns = (wifi["difs_ns"] + wifi["cw_min"] / 2 * wifi["slot_ns"] + wifi["preamble_ns"] + airtime_ns(frames)
               + wifi["sifs_ns"] + wifi["block_ack_ns"])
    return float(frames * packet_bytes * 8 / (txop_ns / 1e9))


def _wifi_rate_check(lab: Lab, config: ValidationConfig, workdir: Path, frames: int) -> Check:
    limits = config.thresholds
    configure_links(lab, access={"delay_ns": ms_to_ns(config.rate_rtt_ms / 4)}, p0_forward={}, p0_reverse={})
    effective = lab.set_link("p0.forward", **ideal_link(wifi={"max_ampdu_frames": frames, "frame_error_rate": 0.0}))
    expected_bps = wifi_saturated_rate_bps(effective["p0.forward"]["wifi"])
    iperf, before, after = _iperf3_with_counters(lab, config, workdir / f"iperf3-wifi-{frames}.json")
    link_bps = _link_rate(before, after, "p0.forward")
    ratio = link_bps / expected_bps
    return Check(
        id=f"wifi.rate.ampdu{frames}",
        group="wifi",
        name=f"WiFi, A-MPDUs of up to {frames} frames: TCP on a saturated link (counters)",
        unit="Mbit/s",
        configured=expected_bps / 1e6,
        measured=link_bps / 1e6,
        error=ratio,
        configured_text=f"{expected_bps / 1e6:.1f} Mbit/s (model: full A-MPDUs, mean TXOP)",
        measured_text=f"{link_bps / 1e6:.1f} Mbit/s",
        error_text=f"{ratio:.1%}",
        criterion=f"{limits.goodput_min_ratio:.0%} <= ratio <= {limits.goodput_max_ratio:.0%}",
        status=_rate_status(ratio, expected_bps / 1e6, limits),
        details={"iperf3_goodput_mbit": iperf.goodput_bps / 1e6, "retransmits": iperf.retransmits,
                 "rtt_ms": config.rate_rtt_ms, "seconds": config.rate_seconds},
    )


def _wifi_retry_checks(lab: Lab, config: ValidationConfig, workdir: Path, error_rate: float, retries: int) -> list[Check]:
    configure_links(lab, access={}, p0_forward={}, p0_reverse={})
    label = f"fer{error_rate:g}.r{retries}"
    rtt_ms: dict[str, float] = {}
    for name, rate in (("clean", 0.0), ("errors", error_rate)):
        wifi = {"frame_error_rate": rate, "retry_limit": retries}
        lab.set_link(["p0.forward", "p0.reverse"], seed=config.seed, **ideal_link(wifi=wifi))
        irtt = run_irtt(lab, workdir, f"wifi-{label}-{name}", config.loss_probes)
        rtt_ms[name] = irtt.rtt_mean_ms
    residual = 100 * error_rate ** (retries + 1)
    confidence = config.thresholds.loss_confidence
    checks = [
        _loss_check(f"wifi.residual_loss.{direction}.{label}",
                    f"WiFi FER {error_rate:g}, {retries} retries: irtt {direction}stream loss (FER^(R+1))",
                    residual, lost, trials, confidence, "fail", group="wifi")
        for direction, lost, trials in (("up", irtt.lost_up, irtt.upstream_trials),
                                        ("down", irtt.lost_down, irtt.downstream_trials))
    ]
    # Every failed attempt costs its frame (and those behind it) at least one more TXOP: the
    # retries show as delay, never below the clean link's.
    added = rtt_ms["errors"] - rtt_ms["clean"]
    checks.append(Check(
        id=f"wifi.retry_delay.{label}", group="wifi",
        name=f"WiFi FER {error_rate:g}, {retries} retries: irtt mean RTT added by retries",
        unit="ms", configured=None, measured=added, error=None,
        configured_text=f"> 0 (clean {rtt_ms['clean']:.3f} ms)", measured_text=f"{added:+.3f} ms", error_text="-",
        criterion="mean RTT with frame errors > without", status="pass" if added > 0 else "fail",
        details={"rtt_mean_clean_ms": rtt_ms["clean"], "rtt_mean_errors_ms": rtt_ms["errors"]},
    ))
    return checks


def wifi_checks(lab: Lab, config: ValidationConfig, workdir: Path, step: StepCallback) -> list[Check]:
    checks: list[Check] = []
    for frames in config.wifi_ampdu_frames:
        step(f"WiFi A-MPDU {frames}")
        checks.append(_wifi_rate_check(lab, config, workdir, frames))
    for error_rate, retries in config.wifi_retries:
        step(f"WiFi FER {error_rate:g}, {retries} retries")
        checks += _wifi_retry_checks(lab, config, workdir, error_rate, retries)
    configure_links(lab, access={}, p0_forward={}, p0_reverse={})
    return checks
