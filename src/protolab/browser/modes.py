"""How Chromium is made to speak each page-load mode (docs/browser.md).

The modes are the binary's (`protolab.plan.modes`); what is Chromium's own is how to force each
HTTP version (its flags and URL scheme) and that a mode over MPTCP runs Chromium under
`mptcpize`. Modes with N connections per origin are the engine's: Chromium opens one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protolab.plan.modes import entry, registry


@dataclass(frozen=True)
class ChromiumMode:
    """Flags that force one protocol; `scheme` of the page URL; `mptcpize`: run Chromium
    under `mptcpize run` so its TCP sockets are MPTCP."""

    flags: tuple[str, ...]
    scheme: str = "https"
    mptcpize: bool = False
    force_quic: bool = False


# How Chromium is made to speak each HTTP version of the registry's modes.
PROTOCOL_FLAGS: dict[str, ChromiumMode] = {
    "h1c": ChromiumMode(("--disable-http2", "--disable-quic"), scheme="http"),
    "h1": ChromiumMode(("--disable-http2", "--disable-quic")),
    "h2": ChromiumMode(("--disable-quic",)),
    "h3": ChromiumMode(("--enable-quic",), force_quic=True),
}


def chromium_modes() -> list[str]:
    """The registry's modes Chromium can be made to speak (one connection per origin)."""
    return [m.name for m in registry().modes if not m.takes_count and str(m.protocol) in PROTOCOL_FLAGS]


# Flags of every load: no sandbox (root in a namespace), nothing in the background that would
# add requests or CPU load, no first-run UI.
COMMON_FLAGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                "--disable-component-update", "--disable-sync", "--disable-default-apps", "--mute-audio",
                "--disable-features=MediaRouter,OptimizationHints,Translate")


class UnsupportedMode(ValueError):
    """A mode Chromium cannot be made to speak."""


def chromium_mode(mode: str) -> ChromiumMode:
    found = entry(mode.partition(":")[0])
    if found is None or found.takes_count or str(found.protocol) not in PROTOCOL_FLAGS:
        why = ("Chromium opens one connection per origin for HTTP/2 and HTTP/3; N connections per origin "
               "are an engine mode") if found is not None and found.takes_count else "not a page-load mode"
        raise UnsupportedMode(f"mode {mode!r} cannot be loaded by Chromium ({why}); "
                              f"Chromium modes: {', '.join(chromium_modes())}")
    flags = PROTOCOL_FLAGS[str(found.protocol)]
    return ChromiumMode(flags.flags, scheme=flags.scheme, mptcpize=found.mptcp, force_quic=flags.force_quic)


def chromium_flags(mode: str, spki: str, maps: Sequence[str], force_quic: bool = True) -> list[str]:
    """Chromium's command-line flags for `mode`; `maps` are HOST=ADDR resolver rules. `spki`
    empty: no certificate is pinned (the trust store decides, e.g. a throwaway NSS db in $HOME).
    `force_quic=False`: HTTP/3 only where the server's Alt-Svc offers it, as for a user."""
    m = chromium_mode(mode)
    pairs = [item.split("=", 1) for item in maps]
    rules = ", ".join(f"MAP {host} {addr}" for host, addr in pairs)
    flags = [*COMMON_FLAGS, *m.flags, f"--host-resolver-rules={rules}"]
    if spki:
        flags.append(f"--ignore-certificate-errors-spki-list={spki}")
    if m.force_quic and force_quic:
        flags.append("--origin-to-force-quic-on=" + ",".join(f"{host}:443" for host, _ in pairs))
    return flags
