"""Emulator validation: thesis 004 §6.1 (delay and loss with ping), tightened and extended.

Real tools run inside the lab's namespaces (irtt, ping, iperf3) and their measurements are
compared with the configured link parameters:

- delay:  per-link one-way delay d on both access links (RTT = 4d), min and mean RTT
- jitter: normal jitter on one path direction, RTT standard deviation (and IPDV)
- loss:   Bernoulli loss on both path directions, irtt's upstream/downstream loss vs an exact
          99% Clopper-Pearson interval
- rate:   TCP (cubic) goodput through a rate-limited path with a 1-BDP drop-tail queue
- ECMP:   two paths, ecmp-xor; every TCP flow stays on one path (ground-truth event log)
- WiFi:   a WiFi path direction (docs/emulator.md): the rate TCP gets with and without frame
          aggregation against the model's saturated rate; the residual loss after link-layer
          retries against p^(R+1); retries turned into delay (RTT up, no loss)

One lab serves every check; link parameters change live between them. The checks live in
`timing` (delay, jitter, contention) and `traffic` (loss, rate, ECMP, WiFi), the lab and tool
plumbing in `plumbing`.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from protolab.files import scratch_dir
from protolab.lab import Lab
from protolab.validate.attribution import attribute
from protolab.validate.disturbance import is_set_aside
from protolab.validate.plumbing import CLIENT, SERVER, StepCallback, environment, start_servers, validation_topology
from protolab.validate.report import SCHEMA, Check, ValidationConfig, ValidationReport
from protolab.validate.timing import contention_checks, delay_checks, jitter_checks
from protolab.validate.traffic import ecmp_checks, loss_checks, rate_checks, wifi_checks

CheckGroup = Callable[[Lab, ValidationConfig, Path, StepCallback], list[Check]]
# What runs each group (report.GROUP_NAMES names them, in order).
CHECK_GROUPS: dict[str, CheckGroup] = {
    "delay": delay_checks,
    "jitter": jitter_checks,
    "loss": loss_checks,
    "rate": rate_checks,
    "ecmp": ecmp_checks,
    "contention": contention_checks,
    "wifi": wifi_checks,
}


# ---------------------------------------------------------------------- entry point


@contextmanager
def _workdir() -> Iterator[Path]:
    workdir = scratch_dir("validate")
    try:
        yield workdir
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_validation(
    config: ValidationConfig,
    *,
    binary: str | os.PathLike[str] | None = None,
    state_dir: Path | None = None,
    step: StepCallback = lambda text: None,
) -> ValidationReport:
    started_ns = time.time_ns()
    started = time.monotonic()
    checks: list[Check] = []
    counters: dict[str, Any] = {}
    with _workdir() as workdir, Lab(validation_topology(config), state_dir=state_dir, binary=binary,
                                    offload=config.offload) as lab:
        if config.delay_compensation:
            lab.calibrate_delay(CLIENT, SERVER)
        start_servers(lab, workdir)
        for group in config.groups:
            checks += CHECK_GROUPS[group](lab, config, workdir, step)
            counters[group] = lab.counters()
        topology = lab.topology
        env = environment(lab.binary)
    attribution = attribute(checks)
    counted = Counter(check.status for check in checks)
    summary: dict[str, int] = {status: counted.get(status, 0) for status in ("pass", "fail", "info")}
    return ValidationReport(
        schema=SCHEMA,
        created_unix_ns=started_ns,
        duration_s=time.monotonic() - started,
        config=config,
        environment=env,
        topology=topology,
        checks=checks,
        counters=counters,
        summary=summary,
        attribution=attribution,
        set_aside=sum(is_set_aside(check) for check in checks),
        ok=summary["fail"] == 0,
    )
