"""What a run does in the client host(s), as a scenario declares it: its *workload*.

The `mode` axis means what the workload runs: a page-load mode (`page`), a bulk protocol
(`bulk`), or a pair of clients running at the same time (`pair`, e.g. `h3@gquic39 vs h2`). The
runner looks the executor up by the workload's name; this module only describes and checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from protolab.plan import controllers
from protolab.plan.modes import check_mode, uses_mptcp

# Bulk transfers (docs/bulk.md): the raw protocol on TCP, HTTP/1.1 cleartext or TLS, HTTP/2, HTTP/3.
BULK_PROTOCOLS: dict[str, str] = {
    "tcp": "raw TCP, no HTTP (like iperf3)",
    "h1c": "HTTP/1.1 cleartext",
    "h1": "HTTP/1.1 over TLS",
    "h2": "HTTP/2 over TLS",
    "h3": "HTTP/3 over QUIC",
}
MAX_FLOWS = 16


def check_bulk_protocol(value: str) -> str:
    if value not in BULK_PROTOCOLS:
        raise ValueError(f"unknown bulk protocol {value!r} (known: {', '.join(BULK_PROTOCOLS)})")
    return value


@dataclass(frozen=True)
class Side:
    """One client of a pair: what it runs, with how many parallel flows (bulk), and an optional
    QUIC controller of its own (`@cc`, else the run's `quic_cc`)."""

    mode: str
    flows: int = 1
    quic_cc: str | None = None

    def label(self) -> str:
        text = self.mode + (f"*{self.flows}" if self.flows > 1 else "")
        return text + (f"@{self.quic_cc}" if self.quic_cc else "")

    @property
    def quic(self) -> bool:
        return self.mode.partition(":")[0] in ("h3", "h3-parallel")


_SIDE = re.compile(r"^(?P<mode>[^@*]+?)(?:\*(?P<flows>\d+))?(?:@(?P<cc>.+))?$")


def parse_side(text: str, kind: str) -> Side:
    """`h3`, `h2-parallel:2`, `tcp*2`, `h3@gquic39`, `h3*2@cubic:c=0.8` -> a checked Side."""
    match = _SIDE.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r}: expected MODE[*FLOWS][@QUIC_CC]")
    mode = match.group("mode").strip()
    mode = check_mode(mode) if kind == "page" else check_bulk_protocol(mode)
    flows = int(match.group("flows") or 1)
    if match.group("flows") is not None and kind == "page":
        raise ValueError(f"{text!r}: *N flows are for bulk transfers; a page load's connections follow its mode")
    if not 1 <= flows <= MAX_FLOWS:
        raise ValueError(f"{text!r}: flows must be in 1..{MAX_FLOWS}")
    cc = match.group("cc")
    if cc is not None:
        cc = cc.strip()
        try:
            controllers.check(cc)
        except controllers.ControllerError as exc:
            raise ValueError(f"{text!r}: {exc}") from None
    side = Side(mode, flows, cc)
    if cc is not None and not side.quic:
        raise ValueError(f"{text!r}: @{cc}: a QUIC controller for a mode that does not run QUIC")
    return side


def parse_pair(value: str, kind: str) -> tuple[Side, Side]:
    parts = re.split(r"\s+vs\s+", value.strip())
    if len(parts) != 2:
        raise ValueError(f"{value!r}: a pair is \"A vs B\" (e.g. \"h3@gquic39 vs h2\")")
    return parse_side(parts[0], kind), parse_side(parts[1], kind)


def pair_label(sides: tuple[Side, Side]) -> str:
    return f"{sides[0].label()} vs {sides[1].label()}"


class Workload:
    """What runs in the client host(s) during one run."""

    name: ClassVar[str]
    description: ClassVar[str]

    def uses_pages(self, params: Any) -> bool:
        return False

    def check_mode(self, value: str, params: Any) -> str:
        """The value normalized; raise ValueError with what is accepted."""
        raise NotImplementedError

    def mptcp(self, modes: Iterable[str], params: Any) -> bool:
        """Whether a mode needs MPTCP listeners and the lab's MPTCP set-up."""
        return False


class PageLoads(Workload):
    name = "page"
    description = "page loads (protolab-net load)"

    def uses_pages(self, params: Any) -> bool:
        return True

    def check_mode(self, value: str, params: Any) -> str:
        return check_mode(value)

    def mptcp(self, modes: Iterable[str], params: Any) -> bool:
        return uses_mptcp(modes)


class BulkTransfers(Workload):
    name = "bulk"
    description = "bulk transfers (protolab-net bulk)"

    def check_mode(self, value: str, params: Any) -> str:
        return check_bulk_protocol(value)


class Pairs(Workload):
    """Two clients behind one bottleneck, each with its own server, started together. The
    scenario's `params.workload` says whether the sides load pages or run bulk transfers."""

    name = "pair"
    description = "two clients at once"

    def uses_pages(self, params: Any) -> bool:
        return getattr(params, "workload", "page") == "page"

    def check_mode(self, value: str, params: Any) -> str:
        return pair_label(parse_pair(value, getattr(params, "workload", "page")))

    def mptcp(self, modes: Iterable[str], params: Any) -> bool:
        kind = getattr(params, "workload", "page")
        return kind == "page" and uses_mptcp(side.mode for m in modes for side in parse_pair(m, kind))


# Responsiveness tests (docs/rpm.md): over TLS or QUIC.
RPM_PROTOCOLS: dict[str, str] = {"h1": "HTTP/1.1 over TLS", "h2": "HTTP/2 over TLS", "h3": "HTTP/3 over QUIC"}


class RpmTests(Workload):
    name = "rpm"
    description = "responsiveness tests (protolab-net rpm)"

    def check_mode(self, value: str, params: Any) -> str:
        if value not in RPM_PROTOCOLS:
            raise ValueError(f"unknown RPM protocol {value!r} (known: {', '.join(RPM_PROTOCOLS)})")
        return value


PAGE_LOADS = PageLoads()
BULK_TRANSFERS = BulkTransfers()
PAIRS = Pairs()
RPM_TESTS = RpmTests()
WORKLOADS: dict[str, Workload] = {w.name: w for w in (PAGE_LOADS, BULK_TRANSFERS, PAIRS, RPM_TESTS)}
