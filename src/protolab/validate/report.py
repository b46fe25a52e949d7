"""The emulator validation's configuration, thresholds and result file (schema
`protolab.emulator_validation`): pure data, shared by the validation (protolab.validate.emulator),
the command line and whoever reads a validation.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from protolab import __version__
from protolab.files import write_text_atomically

SCHEMA = "protolab.emulator_validation"
# 2: checks name the emulator check of their level (`emulator_check`) and say where a failure
# lies (`attribution`); the report counts them (`attribution`). 3: emulator checks name the host
# check of their level (`host_check`: a real-time probe's wake-ups in the same minutes). 4: a
# timing level the host disturbed is measured again (`level_attempts`); each set-aside attempt is
# an `info` row (`<level>.set_aside.<n>`), counted in `set_aside`.
SCHEMA_VERSION = 4

# The check groups, in the order they run (protolab.validate.emulator holds what runs each).
GROUP_NAMES = ("delay", "jitter", "loss", "rate", "ecmp", "contention", "wifi")

Status = Literal["pass", "fail", "info"]
# Where a failed check's error lies: the emulator (its own ground truth missed its limit), or the
# tools and hosts around it (the emulator's check of the same level passed).
Attribution = Literal["emulator", "tools_host"]


class Thresholds(BaseModel):
    min_rtt_ms: float = 0.3
    # With the lab's path latency deducted (delay compensation); 0.5 without it.
    mean_rtt_ms: float = 0.1
    mean_rtt_uncompensated_ms: float = 0.5
    # Under contention (two CPU hogs): the RTT error's 99.9th percentile and maximum.
    contention_p999_ms: float = 1.0
    contention_max_ms: float = 5.0
    # The emulator's own delivery lateness per level (its counters, reset before the level):
    # the mean and the upper edge of the histogram bucket holding the 99.9th percentile.
    emulator_late_mean_ms: float = 0.05
    emulator_late_p999_ms: float = 1.0
    jitter_relative: float = 0.2
    loss_confidence: float = 0.99
    goodput_min_ratio: float = 0.90
    goodput_max_ratio: float = 1.01
    # Only a rate the machine may be unable to forward gets "info" instead of "fail" when short.
    info_only_rate_mbit: float = 1000
    ecmp_min_path_share: float = 0.05


class ValidationConfig(BaseModel):
    """The effective configuration; written into the result file."""

    model_config = ConfigDict(extra="forbid")

    quick: bool = False
    lab: str = Field("plvalidate", pattern=r"^[a-z0-9]{1,10}$")
    # The groups to run (GROUP_NAMES; all by default), always in GROUP_NAMES' order.
    groups: list[str] = list(GROUP_NAMES)
    seed: int = 1
    delays_ms: list[float] = [0, 5, 10, 25]
    delay_probes: int = 10_000
    delay_pings: int = 1000
    jitter_std_ms: list[float] = [1, 2]
    jitter_delay_ms: float = 10
    jitter_probes: int = 10_000
    loss_percent: list[float] = [0, 0.1, 0.5, 1, 2.5]
    loss_probes: int = 10_000
    loss_pings: int = 1500  # thesis 004 Table 6 sent 1500 pings per level
    rates_mbit: list[float] = [1, 10, 100, 1000]
    rate_rtt_ms: float = 40
    rate_seconds: int = 10
    rate_omit_seconds: int = 3
    ecmp_rate_mbit: float = 20
    ecmp_flows: int = 8
    ecmp_seconds: int = 8
    ecmp_access_delay_ms: float = 2.5
    # Deduct the lab's measured path latency from configured delays (docs/emulator.md).
    delay_compensation: bool = True
    # TUN segmentation offloads (docs/emulator.md); None: the emulator's default.
    offload: bool | None = None
    # Under contention: CPU hogs started beside the lab, probes at this delay per link.
    contention_hogs: int = 2
    contention_delay_ms: float = 5
    contention_probes: int = 10_000
    # WiFi links: A-MPDU frame limits (aggregation on, off) and (frame error rate, retry limit)
    # pairs; the residual loss is FER^(R+1).
    wifi_ampdu_frames: list[int] = [64, 1]
    wifi_retries: list[tuple[float, int]] = [(0.5, 1), (0.3, 7)]
    # Capture each delay level's irtt run on both hosts and split its delays at the emulator
    # (docs/validation.md, "The emulator or the tool?").
    decompose: bool = False
    # How often a timing level is measured at most when the host's probe shows the host held the
    # guest during it (protolab.validate.disturbance); 1: never again.
    level_attempts: int = Field(3, ge=1, le=10)
    thresholds: Thresholds = Thresholds()

    @classmethod
    def for_mode(cls, *, quick: bool, **overrides: Any) -> ValidationConfig:
        reduced: dict[str, Any] = {}
        if quick:
            reduced = {
                "delay_probes": 2000,
                "delay_pings": 200,
                "jitter_probes": 3000,
                "loss_probes": 3000,
                "loss_pings": 300,
                "rate_seconds": 4,
                "rate_omit_seconds": 2,
                "ecmp_seconds": 3,
                "contention_probes": 3000,
            }
        return cls(quick=quick, **{**reduced, **overrides})

    @field_validator("groups")
    @classmethod
    def _known_groups(cls, groups: list[str]) -> list[str]:
        unknown = [name for name in groups if name not in GROUP_NAMES]
        if unknown or not groups:
            raise ValueError(f"groups: {', '.join(unknown) or 'none given'}: choose from {', '.join(GROUP_NAMES)}")
        return [name for name in GROUP_NAMES if name in groups]

    def step_count(self) -> int:
        """The progress steps of the selected groups (one per level a group measures)."""
        steps = {"delay": len(self.delays_ms) + 1, "jitter": len(self.jitter_std_ms), "loss": len(self.loss_percent),
                 "rate": len(self.rates_mbit), "ecmp": 1, "contention": 1,
                 "wifi": len(self.wifi_ampdu_frames) + len(self.wifi_retries)}
        return sum(steps[name] for name in self.groups)


class Check(BaseModel):
    """One row of the validation table. Numbers are in `unit`; the *_text fields are for display."""

    id: str
    group: str
    name: str
    unit: str
    configured: float | None
    measured: float | None
    error: float | None
    configured_text: str
    measured_text: str
    error_text: str
    criterion: str
    status: Status
    details: dict[str, Any] = {}
    # End-to-end checks: the id of the emulator's own check for the same level, if there is one.
    emulator_check: str | None = None
    # The emulator's own checks: the id of the host's wake-up check of the same minutes, if any.
    host_check: str | None = None
    # Failed checks: where the error lies (protolab.validate.attribution); None when not known.
    attribution: Attribution | None = None


class ValidationReport(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    schema_name: str = Field(SCHEMA, alias="schema")
    schema_version: int = SCHEMA_VERSION
    protolab_version: str = __version__
    created_unix_ns: int
    duration_s: float
    config: ValidationConfig
    environment: dict[str, Any]
    topology: dict[str, Any]
    checks: list[Check]
    counters: dict[str, Any]
    summary: dict[str, int]
    # Failed checks by where their error lies: emulator, tools_host, unattributed.
    attribution: dict[str, int] = {}
    # Timing level attempts set aside because the host disturbed them (their rows are `info`).
    set_aside: int = 0
    ok: bool

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)


def write_report(report: ValidationReport, path: Path) -> None:
    write_text_atomically(path, report.to_json())


def load_report(path: Path) -> ValidationReport:
    return ValidationReport.model_validate(json.loads(path.read_text()))
