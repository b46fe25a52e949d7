"""Which failures are the emulator's: each end-to-end check (a tool's RTT) names the emulator's
own check of the same level (its delivery lateness, from its counters). A failed end-to-end
check whose emulator check passed lies in the tools and hosts (their kernels, TUN devices,
wake-ups); one whose emulator check failed too, and a failed emulator check itself, lie in the
emulator, unless the emulator check names a host check (a real-time probe's wake-ups in the
same minutes, protolab.validate.wakeups) that failed too: then the machine could not wake even
a real-time thread within the limit, and the level's failures lie in the host. Statuses are
never changed: a failure stays a failure, it only gets its place.

Pure: checks in, checks out.
"""

from __future__ import annotations

from collections.abc import Sequence

from protolab.validate.report import Attribution, Check

ATTRIBUTION_KEYS = ("emulator", "tools_host", "unattributed")


def _emulator_failure(emulator: Check, host_checks: dict[str, Check]) -> Attribution:
    """Where a failed emulator check's error lies: the host when its host check failed too."""
    host = host_checks.get(emulator.host_check or "")
    return "tools_host" if host is not None and host.status == "fail" else "emulator"


def attribution_of(check: Check, emulator_checks: dict[str, Check],
                   host_checks: dict[str, Check] | None = None) -> Attribution | None:
    """Where a check's failure lies; None for a check that did not fail or cannot be placed."""
    host_checks = host_checks or {}
    if check.status != "fail":
        return None
    if check.id in host_checks:
        return "tools_host"
    if check.id in emulator_checks:
        return _emulator_failure(check, host_checks)
    if check.emulator_check is None or check.emulator_check not in emulator_checks:
        return None
    emulator = emulator_checks[check.emulator_check]
    return _emulator_failure(emulator, host_checks) if emulator.status == "fail" else "tools_host"


def _named(checks: Sequence[Check], ids: set[str | None]) -> dict[str, Check]:
    return {check.id: check for check in checks if check.id in ids}


def host_late(checks: Sequence[Check]) -> bool:
    """Whether a host check named by an emulator check failed (the machine woke late)."""
    hosts = _named(checks, {check.host_check for check in checks})
    return any(check.status == "fail" for check in hosts.values())


def attribute(checks: Sequence[Check]) -> dict[str, int]:
    """Set every check's `attribution` and count the failures by it (ATTRIBUTION_KEYS)."""
    emulator_checks = _named(checks, {check.emulator_check for check in checks})
    host_checks = _named(checks, {check.host_check for check in checks})
    counts = dict.fromkeys(ATTRIBUTION_KEYS, 0)
    for check in checks:
        check.attribution = attribution_of(check, emulator_checks, host_checks)
        if check.status == "fail":
            counts[check.attribution or "unattributed"] += 1
    return counts


def failure_summary(failed: int, attribution: dict[str, int], *, woke_late: bool = False) -> str:
    """'N failed: K in the emulator, M in the tools/host, the emulator on time' (the parts that
    apply; `woke_late`: the host's real-time wake-ups missed the limit, said instead of "on
    time"); 'N failed' when none is placed."""
    if failed == 0:
        return "0 failed"
    emulator, tools = attribution.get("emulator", 0), attribution.get("tools_host", 0)
    unplaced = attribution.get("unattributed", 0)
    parts = []
    if emulator or tools:
        parts.append(f"{emulator} in the emulator")
        parts.append(f"{tools} in the tools/host")
    if unplaced and parts:
        parts.append(f"{unplaced} not attributed")
    if woke_late:
        parts.append("the host woke a real-time probe late")
    elif tools and not emulator:
        parts.append("the emulator on time")
    return f"{failed} failed" + (": " + ", ".join(parts) if parts else "")
