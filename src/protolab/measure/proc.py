"""Readers of Linux's CPU and memory accounting text (/proc/stat, /proc/PID/stat, /proc/PID/status).

Pure: the callers read the files; these parse the text and compute shares between two readings.
Used by the emulator benchmark (the machine's and the emulator's CPU) and by the validation (the
CPU time the hypervisor took from the guest, its *steal*, beside the checks under contention).
"""

from __future__ import annotations

from dataclasses import dataclass

from protolab.errors import ToolError

# /proc/stat's `cpu` line, in its order (proc(5)); guest and guest_nice follow but are already
# counted inside user and nice, so they are left out of the total.
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class MachineCpu:
    """The clock ticks of all CPUs since boot, by kind (fields the kernel omits read as 0)."""

    user: int = 0
    nice: int = 0
    system: int = 0
    idle: int = 0
    iowait: int = 0
    irq: int = 0
    softirq: int = 0
    steal: int = 0

    @property
    def total(self) -> int:
        return sum(getattr(self, name) for name in CPU_FIELDS)

    @property
    def busy(self) -> int:
        """Everything but idle and iowait (steal included: the guest wanted to run then)."""
        return self.total - self.idle - self.iowait


def machine_cpu(proc_stat_text: str, source: str = "/proc/stat") -> MachineCpu:
    """The `cpu` line (all CPUs) of /proc/stat."""
    for line in proc_stat_text.splitlines():
        fields = line.split()
        if not fields or fields[0] != "cpu":
            continue
        try:
            values = [int(value) for value in fields[1:1 + len(CPU_FIELDS)]]
        except ValueError as exc:
            raise ToolError(f"{source}: the `cpu` line has a field that is not a number: {line!r}") from exc
        if len(values) < 5:
            raise ToolError(f"{source}: the `cpu` line has {len(values)} fields, fewer than the 5 up to iowait")
        return MachineCpu(**dict(zip(CPU_FIELDS, values, strict=False)))
    raise ToolError(f"{source}: no `cpu` line")


def machine_ticks(proc_stat_text: str, source: str = "/proc/stat") -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs: idle counts idle and iowait; the total stops at steal."""
    cpu = machine_cpu(proc_stat_text, source)
    return cpu.busy, cpu.total


def cpu_shares(before: MachineCpu, after: MachineCpu) -> dict[str, float | None]:
    """Between two readings, each kind's share of all CPU time (`steal`: the share the hypervisor
    ran something else while this guest's vCPUs wanted to run); None when no tick passed."""
    total = after.total - before.total
    if total <= 0:
        return {name: None for name in (*CPU_FIELDS, "busy")}
    shares: dict[str, float | None] = {name: (getattr(after, name) - getattr(before, name)) / total
                                       for name in CPU_FIELDS}
    shares["busy"] = (after.busy - before.busy) / total
    return shares


def process_cpu_ticks(stat_text: str, source: str) -> int:
    """utime + stime (clock ticks, all the process's threads) from a /proc/PID/stat line."""
    # comm (field 2) may hold spaces and parentheses: the fields after the last ')' start at
    # state (field 3), so utime and stime (fields 14 and 15) are the 12th and 13th of them.
    closing = stat_text.rfind(")")
    fields = stat_text[closing + 1:].split() if closing >= 0 else []
    try:
        return int(fields[11]) + int(fields[12])
    except (IndexError, ValueError) as exc:
        raise ToolError(f"{source}: no utime and stime (fields 14 and 15) in {stat_text[:120]!r}") from exc


def status_bytes(status_text: str, field: str, source: str) -> int:
    """A memory field of /proc/PID/status (`VmRSS:    1234 kB`) in bytes."""
    for line in status_text.splitlines():
        key, _, value = line.partition(":")
        if key != field:
            continue
        parts = value.split()
        if len(parts) != 2 or parts[1] != "kB" or not parts[0].isdigit():
            raise ToolError(f"{source}: {field} is {value.strip()!r}, not a number of kB")
        return int(parts[0]) * 1024
    raise ToolError(f"{source}: no {field} line")


def peak_share(readings: list[MachineCpu], field: str) -> float | None:
    """The largest share of one kind (e.g. `steal`) between consecutive readings: a short burst
    that the whole run's share averages away. None with fewer than two readings or no ticks."""
    peaks = [cpu_shares(before, after)[field] for before, after in zip(readings, readings[1:], strict=False)]
    known = [share for share in peaks if share is not None]
    return max(known) if known else None
