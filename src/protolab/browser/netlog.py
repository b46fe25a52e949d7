"""What Chromium's NetLog (`--log-net-log`) says about each connection's TLS session: resumed or
full handshake, and for QUIC whether 0-RTT was attempted and accepted; the local address of
TCP connections. Pure: parses a NetLog document, no I/O.

A connection's NetLog source id is the `connectionId` the DevTools protocol reports for its
responses (the socket for HTTP/1.1 and HTTP/2, the QUIC session for HTTP/3), so the driver's
connections (docs/browser.md) are annotated by id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class SessionFacts:
    """One connection's facts from the NetLog."""

    resumed: bool | None = None  # TLS session resumed (QUIC: a session ticket used for 0-RTT)
    zero_rtt: bool | None = None  # QUIC 0-RTT accepted (False: rejected; None: not attempted)
    local: str | None = None  # local address of a TCP connection


def _names(table: Any) -> dict[int, str]:
    return {v: k for k, v in table.items()} if isinstance(table, dict) else {}


def session_facts(netlog: Any) -> dict[int, SessionFacts]:
    """The facts per NetLog source id. A document that is not a NetLog (or one cut short
    before its events) gives no facts rather than an error: they are extras of a load."""
    if not isinstance(netlog, dict) or not isinstance(netlog.get("events"), list):
        return {}
    constants = netlog.get("constants") or {}
    types = _names(constants.get("logEventTypes"))
    phases = _names(constants.get("logEventPhase"))
    facts: dict[int, SessionFacts] = {}
    for event in netlog["events"]:
        if not isinstance(event, dict):
            continue
        kind = types.get(event.get("type"))
        params = event.get("params") if isinstance(event.get("params"), dict) else {}
        source = event.get("source") if isinstance(event.get("source"), dict) else {}
        sid = source.get("id")
        if not isinstance(sid, int):
            continue
        phase = phases.get(event.get("phase"))
        if kind == "SSL_CONNECT" and phase == "PHASE_END" and "is_resumed" in params:
            facts.setdefault(sid, SessionFacts()).resumed = bool(params["is_resumed"])
        elif kind == "TCP_CONNECT" and phase == "PHASE_END" and isinstance(params.get("local_address"), str):
            facts.setdefault(sid, SessionFacts()).local = params["local_address"]
        elif kind == "QUIC_SESSION_ZERO_RTT_STATE" and isinstance(params.get("state"), str):
            state = params["state"]
            f = facts.setdefault(sid, SessionFacts())
            f.resumed = state != "NotAttempted"
            f.zero_rtt = True if "Succeeded" in state else (False if "Rejected" in state else None)
    return facts


def annotate(connections: list[dict[str, Any]], facts: dict[int, SessionFacts]) -> None:
    """Sets `resumed`, `zero_rtt` and a missing `local` of each connection from `facts`."""
    for conn in connections:
        f = facts.get(conn.get("id"))  # type: ignore[arg-type]
        if f is None:
            continue
        conn["resumed"] = f.resumed
        conn["zero_rtt"] = f.zero_rtt
        if conn.get("local") is None and f.local is not None:
            conn["local"] = f.local
