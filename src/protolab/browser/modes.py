"""How Chromium is made to speak each page-load mode (docs/browser.md). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ChromiumMode:
    """Flags that force one protocol; `scheme` of the page URL; `mptcpize`: run Chromium
    under `mptcpize run` so its TCP sockets are MPTCP."""

    flags: tuple[str, ...]
    scheme: str = "https"
    mptcpize: bool = False
    force_quic: bool = False


CHROMIUM_MODES: dict[str, ChromiumMode] = {
    "h1c": ChromiumMode(("--disable-http2", "--disable-quic"), scheme="http"),
    "h1": ChromiumMode(("--disable-http2", "--disable-quic")),
    "h2": ChromiumMode(("--disable-quic",)),
    "h2-mptcp": ChromiumMode(("--disable-quic",), mptcpize=True),
    "h3": ChromiumMode(("--enable-quic",), force_quic=True),
}

# Flags of every load: no sandbox (root in a namespace), nothing in the background that would
# add requests or CPU load, no first-run UI.
COMMON_FLAGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                "--disable-component-update", "--disable-sync", "--disable-default-apps", "--mute-audio",
                "--disable-features=MediaRouter,OptimizationHints,Translate")


class UnsupportedMode(ValueError):
    """A mode Chromium cannot be made to speak."""


def chromium_mode(mode: str) -> ChromiumMode:
    try:
        return CHROMIUM_MODES[mode]
    except KeyError:
        why = ("Chromium opens one connection per origin for HTTP/2 and HTTP/3; N parallel connections "
               "are an engine mode") if "parallel" in mode else "not a page-load mode"
        raise UnsupportedMode(f"mode {mode!r} cannot be loaded by Chromium ({why}); "
                              f"Chromium modes: {', '.join(CHROMIUM_MODES)}") from None


def chromium_flags(mode: str, spki: str, maps: Sequence[str]) -> list[str]:
    """Chromium's command-line flags for `mode`; `maps` are HOST=ADDR resolver rules."""
    m = chromium_mode(mode)
    pairs = [item.split("=", 1) for item in maps]
    rules = ", ".join(f"MAP {host} {addr}" for host, addr in pairs)
    flags = [*COMMON_FLAGS, *m.flags, f"--host-resolver-rules={rules}", f"--ignore-certificate-errors-spki-list={spki}"]
    if m.force_quic:
        flags.append("--origin-to-force-quic-on=" + ",".join(f"{host}:443" for host, _ in pairs))
    return flags
