"""The emulator's ground-truth event log (NDJSON, docs/control.md)."""

from __future__ import annotations

import ipaddress
import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, NamedTuple

TCP = 6


class FlowKey(NamedTuple):
    """A direction-independent 5-tuple: the lower (address, port) endpoint first."""

    addr_a: str
    port_a: int
    addr_b: str
    port_b: int
    proto: int


def flow_key(src: str, sport: int, dst: str, dport: int, proto: int) -> FlowKey:
    first, second = sorted([(ipaddress.IPv4Address(src), sport), (ipaddress.IPv4Address(dst), dport)])
    return FlowKey(str(first[0]), first[1], str(second[0]), second[1], proto)


def xor_path_index(src: str, dst: str, sport: int, dport: int, proto: int, paths: int) -> int:
    """The ecmp-xor choice of docs/topology.md: (SA ^ DA ^ SP ^ DP ^ PT) mod N."""
    value = int(ipaddress.IPv4Address(src)) ^ int(ipaddress.IPv4Address(dst)) ^ sport ^ dport ^ proto
    return value % paths


def paths_per_flow(lines: Iterable[str], path_names: Iterable[str], proto: int = TCP) -> dict[FlowKey, set[str]]:
    """For each flow of `proto`, the set of paths (by name) whose links it crossed."""
    wanted = set(path_names)
    crossed: dict[FlowKey, set[str]] = defaultdict(set)
    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        if "ev" not in event or event.get("proto") != proto:
            continue  # the header line, or another protocol
        path_name = str(event.get("link", "")).split(".", 1)[0]
        if path_name not in wanted:
            continue  # an access link
        key = flow_key(event["src"], int(event["sport"]), event["dst"], int(event["dport"]), proto)
        crossed[key].add(path_name)
    return dict(crossed)


def read_header(first_line: str) -> dict[str, Any]:
    header = json.loads(first_line)
    if not isinstance(header, dict) or header.get("schema") != "protolab.events":
        raise ValueError(f"not a protolab event log header: {first_line[:200]!r}")
    return header
