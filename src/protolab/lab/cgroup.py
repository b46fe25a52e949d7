"""A CPU limit for processes of a lab (the `cpu-limit` scenario): one cgroup with a CPU quota.

cgroup v2 (`cpu.max`) when the unified hierarchy has the cpu controller; else cgroup v1's cpu
controller (`cpu.cfs_quota_us` / `cpu.cfs_period_us`, the same CFS bandwidth control), which
is what hybrid systems such as this machine offer. Processes join by writing their pid into
`cgroup.procs` (`Lab.run(..., cgroup=limit.path)` does it before `ip netns exec`).
The cgroup is named after the lab (`pl-<lab>-cpu`) and removed with it.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from protolab.errors import LabError

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


class CpuLimit:
    """One cgroup whose members share `pct` percent of one core."""

    def __init__(self, name: str, root: Path = CGROUP_ROOT) -> None:
        unified = root / "cgroup.controllers"
        if unified.is_file() and "cpu" in unified.read_text().split():
            self.version, self.path = 2, root / name
        elif (root / "unified" / "cgroup.controllers").is_file() and "cpu" in (
                root / "unified" / "cgroup.controllers").read_text().split():
            self.version, self.path = 2, root / "unified" / name
        elif (root / "cpu" / "cpu.cfs_quota_us").is_file():
            self.version, self.path = 1, root / "cpu" / name
        else:
            raise LabError(f"no cgroup cpu controller under {root} (neither cgroup v2 cpu.max nor v1 cpu.cfs_quota_us)")
        self.name = name

    def create(self) -> None:
        try:
            self.path.mkdir(exist_ok=True)
        except OSError as exc:
            raise LabError(f"cannot create cgroup {self.path}: {exc}") from exc
        if self.version == 2:
            parent = self.path.parent / "cgroup.subtree_control"
            with contextlib.suppress(OSError):
                parent.write_text("+cpu")

    def set(self, pct: float) -> None:
        """At most `pct` percent of one core (100 or more: no limit)."""
        quota = round(PERIOD_US * pct / 100) if pct < 100 else None
        try:
            if self.version == 2:
                (self.path / "cpu.max").write_text(f"{quota if quota else 'max'} {PERIOD_US}")
            else:
                (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (self.path / "cpu.cfs_quota_us").write_text(str(quota if quota else -1))
        except OSError as exc:
            raise LabError(f"cannot set the CPU quota of cgroup {self.path}: {exc}") from exc

    def quota_pct(self) -> float | None:
        """The quota now in force, % of a core (None: unlimited)."""
        if self.version == 2:
            quota, period = (self.path / "cpu.max").read_text().split()
            return None if quota == "max" else 100 * int(quota) / int(period)
        quota = int((self.path / "cpu.cfs_quota_us").read_text())
        period = int((self.path / "cpu.cfs_period_us").read_text())
        return None if quota < 0 else 100 * quota / period

    def stat(self) -> dict[str, int]:
        """`cpu.stat`: periods, throttled periods, throttled time (v1 ns, v2 us; v2 also usage)."""
        stats: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for line in (self.path / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                with contextlib.suppress(ValueError):
                    stats[key] = int(value)
        return stats

    def remove(self) -> None:
        """Moves whatever is left to the parent and removes the cgroup (it must be empty)."""
        if not self.path.is_dir():
            return
        procs = self.path / "cgroup.procs"
        parent = self.path.parent / "cgroup.procs"
        for _ in range(50):
            with contextlib.suppress(OSError):
                for pid in procs.read_text().split():
                    with contextlib.suppress(OSError):
                        parent.write_text(pid)
                self.path.rmdir()
                return
            time.sleep(0.1)
        raise LabError(f"cannot remove cgroup {self.path} (processes still in it?)")
