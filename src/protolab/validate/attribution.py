"""Which failures are the emulator's: each end-to-end check (a tool's RTT) names the emulator's
own check of the same level (its delivery lateness, from its counters). A failed end-to-end
check whose emulator check passed lies in the tools and hosts (their kernels, TUN devices,
wake-ups); one whose emulator check failed too, and a failed emulator check itself, lie in the
emulator. Statuses are never changed: a failure stays a failure, it only gets its place.

Pure: checks in, checks out.
"""

from __future__ import annotations

from collections.abc import Sequence

from protolab.validate.report import Attribution, Check

ATTRIBUTION_KEYS = ("emulator", "tools_host", "unattributed")


def attribution_of(check: Check, emulator_checks: dict[str, Check]) -> Attribution | None:
    """Where a check's failure lies; None for a check that did not fail or cannot be placed."""
    if check.status != "fail":
        return None
    if check.id in emulator_checks:
        return "emulator"
    if check.emulator_check is None or check.emulator_check not in emulator_checks:
        return None
    return "emulator" if emulator_checks[check.emulator_check].status == "fail" else "tools_host"


def attribute(checks: Sequence[Check]) -> dict[str, int]:
    """Set every check's `attribution` and count the failures by it (ATTRIBUTION_KEYS)."""
    named = {check.emulator_check for check in checks if check.emulator_check is not None}
    emulator_checks = {check.id: check for check in checks if check.id in named}
    counts = dict.fromkeys(ATTRIBUTION_KEYS, 0)
    for check in checks:
        check.attribution = attribution_of(check, emulator_checks)
        if check.status == "fail":
            counts[check.attribution or "unattributed"] += 1
    return counts


def failure_summary(failed: int, attribution: dict[str, int]) -> str:
    """'N failed: K in the emulator, M in the tools/host, the emulator on time' (the parts that
    apply); 'N failed' when none is placed."""
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
    if tools and not emulator:
        parts.append("the emulator on time")
    return f"{failed} failed" + (": " + ", ".join(parts) if parts else "")
