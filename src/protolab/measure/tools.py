"""Parsers for the outputs of irtt, iperf3 and ping."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from protolab.errors import ToolError
from protolab.files import parse_json

NS_PER_MS = 1e6


def _ms(stats: dict[str, Any], section: str, field: str) -> float:
    """A duration statistic of irtt (ns) in ms; NaN when irtt had no sample for it."""
    value = stats.get(section, {}).get(field)
    return value / NS_PER_MS if isinstance(value, int | float) else math.nan


class IrttResult(BaseModel):
    """What the validation needs from `irtt client -o FILE` (times in ms)."""

    packets_sent: int
    server_packets_received: int
    packets_received: int
    lost_up: int
    lost_down: int
    lost_unknown: int
    rtt_min_ms: float
    rtt_mean_ms: float
    rtt_median_ms: float
    rtt_max_ms: float
    rtt_std_ms: float
    send_delay_mean_ms: float
    send_delay_std_ms: float
    receive_delay_mean_ms: float
    receive_delay_std_ms: float
    ipdv_rtt_mean_ms: float
    ipdv_send_mean_ms: float
    timer_miss_percent: float
    # From the probes' RTTs (nearest rank); NaN without replies.
    rtt_p99_ms: float = math.nan
    rtt_p999_ms: float = math.nan

    @property
    def upstream_trials(self) -> int:
        """Probes whose fate upstream is known (irtt cannot tell for the last unanswered ones)."""
        return self.packets_sent - self.lost_unknown

    @property
    def downstream_trials(self) -> int:
        """Replies the server sent whose fate is known."""
        return self.upstream_trials - self.lost_up


# What a tool's JSON of an unexpected shape raises while it is read: a missing key, a value of
# another type (AttributeError: .get on a list), a number that is not one (ValueError, also
# pydantic's ValidationError and NestedTooDeeply).
_SHAPE_ERRORS = (KeyError, IndexError, TypeError, AttributeError, ValueError)


def parse_irtt(text: str) -> IrttResult:
    try:
        return _irtt_result(parse_json(text))
    except _SHAPE_ERRORS as exc:
        raise ToolError(f"irtt output is not irtt JSON: {exc!r}"[:500]) from exc


def _irtt_result(data: Any) -> IrttResult:
    stats = data["stats"]
    round_trips = data.get("round_trips") or []
    # Per-probe loss classification: irtt learns from the server's receive window which
    # direction lost a probe; "true" means it could not tell (no later reply came back).
    lost = [str(rt.get("lost", "false")) for rt in round_trips]
    rtts = sorted(rt["delay"]["rtt"] / 1e6 for rt in round_trips
                  if isinstance(rt, dict) and isinstance(rt.get("delay"), dict)
                  and isinstance(rt["delay"].get("rtt"), int | float))
    return IrttResult(
        packets_sent=stats.get("packets_sent", 0),
        server_packets_received=stats.get("server_packets_received", 0),
        packets_received=stats.get("packets_received", 0),
        lost_up=lost.count("true_up"),
        lost_down=lost.count("true_down"),
        lost_unknown=lost.count("true"),
        rtt_min_ms=_ms(stats, "rtt", "min"),
        rtt_mean_ms=_ms(stats, "rtt", "mean"),
        rtt_median_ms=_ms(stats, "rtt", "median"),
        rtt_max_ms=_ms(stats, "rtt", "max"),
        rtt_std_ms=_ms(stats, "rtt", "stddev"),
        send_delay_mean_ms=_ms(stats, "send_delay", "mean"),
        send_delay_std_ms=_ms(stats, "send_delay", "stddev"),
        receive_delay_mean_ms=_ms(stats, "receive_delay", "mean"),
        receive_delay_std_ms=_ms(stats, "receive_delay", "stddev"),
        ipdv_rtt_mean_ms=_ms(stats, "ipdv_round_trip", "mean"),
        ipdv_send_mean_ms=_ms(stats, "ipdv_send", "mean"),
        timer_miss_percent=float(stats.get("timer_miss_percent", 0.0)),
        rtt_p99_ms=nearest_rank(rtts, 0.99),
        rtt_p999_ms=nearest_rank(rtts, 0.999),
    )


def nearest_rank(sorted_values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile `fraction` of ascending values; NaN for none."""
    if not sorted_values:
        return math.nan
    return sorted_values[min(len(sorted_values) - 1, math.ceil(fraction * len(sorted_values)) - 1)]


class IperfResult(BaseModel):
    """iperf3 -J client output, summed over streams."""

    goodput_bps: float  # receiver side: payload bytes that arrived, per second
    sender_bps: float
    received_bytes: int
    received_seconds: float
    retransmits: int
    congestion: str | None
    streams: list[tuple[int, int]]  # (local port, remote port) of each data stream


def parse_iperf3(text: str) -> IperfResult:
    try:
        data = parse_json(text)
    except ValueError as exc:
        raise ToolError(f"iperf3 output is not JSON: {exc}") from exc
    if isinstance(data, dict) and data.get("error"):
        raise ToolError(f"iperf3: {data['error']}")
    try:
        return _iperf_result(data)
    except _SHAPE_ERRORS as exc:
        raise ToolError(f"iperf3 JSON is not iperf3's -J output: {exc!r}"[:500]) from exc


def _iperf_result(data: Any) -> IperfResult:
    end = data["end"]
    received = end["sum_received"]
    sent = end["sum_sent"]
    connected = data["start"].get("connected", [])
    return IperfResult(
        goodput_bps=float(received["bits_per_second"]),
        sender_bps=float(sent["bits_per_second"]),
        received_bytes=int(received["bytes"]),
        received_seconds=float(received["seconds"]),
        retransmits=int(sent.get("retransmits", 0)),
        congestion=end.get("sender_tcp_congestion"),
        streams=[(int(c["local_port"]), int(c["remote_port"])) for c in connected],
    )


class PingResult(BaseModel):
    transmitted: int
    received: int
    rtt_min_ms: float
    rtt_mean_ms: float
    rtt_max_ms: float
    rtt_mdev_ms: float

    @property
    def lost(self) -> int:
        return self.transmitted - self.received


_PING_COUNTS = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")
_PING_RTT = re.compile(
    r"(?:rtt|round-trip) min/avg/max(?:/mdev|/stddev)? = ([\d.]+)/([\d.]+)/([\d.]+)(?:/([\d.]+))? ms"
)


def parse_ping(text: str) -> PingResult:
    counts = _PING_COUNTS.search(text)
    if counts is None:
        raise ToolError(f"ping output has no summary line: {text[-300:]!r}")
    rtt = _PING_RTT.search(text)
    try:  # [\d.]+ also matches "1.2.3"
        values = [float(v) if v else math.nan for v in rtt.groups()] if rtt else [math.nan] * 4
    except ValueError:
        raise ToolError(f"ping output has an unreadable rtt line: {rtt.group(0)!r}") from None
    return PingResult(
        transmitted=int(counts.group(1)),
        received=int(counts.group(2)),
        rtt_min_ms=values[0],
        rtt_mean_ms=values[1],
        rtt_max_ms=values[2],
        rtt_mdev_ms=values[3],
    )
