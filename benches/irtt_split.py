"""The emulator or the tool? irtt's delays split at the emulator (docs/validation.md).

Run: .venv/bin/python benches/irtt_split.py [--delays 0,5,25] [--probes 10000] [--no-contention]
                                             [--out FILE.json]

The validation's delay group (and, unless turned off, its contention group) with `--decompose`:
both hosts' captures give, per irtt probe, when the emulator read each datagram and when it
delivered it, so each one-way delay splits into the sender's host, the emulator and the
receiver's host (protolab.validate.decomposition). The table gives, per level, irtt's mean RTT
error beyond its veth reference, the emulator's share (its time beyond the model's delays, from
the captures), the hosts' share, the emulator's own counters (delivery lateness) and the load
average, which on a shared machine says how quiet the run was.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from protolab.files import write_text_atomically
from protolab.lab import Lab
from protolab.validate.plumbing import CLIENT, SERVER, start_servers, validation_topology
from protolab.validate.report import Check, ValidationConfig
from protolab.validate.timing import contention_checks, delay_checks

console = Console(width=160)


def _row(table: Table, level: str, checks: dict[str, Check], split_id: str, mean_id: str, late_id: str) -> None:
    split, late = checks[split_id].details, checks[late_id].details["delivery_late"]
    end_to_end = checks[mean_id].error if mean_id in checks else None
    tail = "hosts_beyond_reference_ms" not in split
    prefix = "tail_" if tail else ""
    hosts = split["tail_hosts_ms"] if tail else split["hosts_beyond_reference_ms"]
    table.add_row(level, "-" if end_to_end is None else f"{end_to_end:+.3f}", f"{split[prefix + 'emulator_excess_ms']:+.3f}",
                  f"{hosts:+.3f}", f"{split[prefix + 'client_host_ms']:.3f} / {split[prefix + 'server_host_ms']:.3f}",
                  f"{late['mean_ns'] / 1e3:.1f} / {(late['p999_ns_at_most'] or 0) / 1e3:.0f}",
                  f"{split['matched']}/{split['probes']}")


def main(
    delays: Annotated[str, typer.Option(help="Delays per link, ms, comma-separated.")] = "0,5,25",
    probes: Annotated[int, typer.Option(help="irtt probes per level.")] = 10_000,
    contention: Annotated[bool, typer.Option(help="Also the contention group (two CPU hogs).")] = True,
    binary: Annotated[Path | None, typer.Option(help="protolab-net binary.")] = None,
    out: Annotated[Path | None, typer.Option(help="Write every check as JSON here.")] = None,
) -> None:
    config = ValidationConfig(lab="plsplit", delays_ms=[float(d) for d in delays.split(",")], delay_probes=probes,
                              contention_probes=probes, decompose=True)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="protolab-split-") as name, \
            Lab(validation_topology(config), binary=binary) as lab:
        workdir = Path(name)
        lab.calibrate_delay(CLIENT, SERVER)
        start_servers(lab, workdir)
        found = delay_checks(lab, config, workdir, console.log)
        if contention:
            found += contention_checks(lab, config, workdir, console.log)
    load_after = os.getloadavg()
    checks = {check.id: check for check in found}
    table = Table(title=f"irtt's RTT error split at the emulator (ms; load average {load_before[0]:.1f} before, "
                        f"{load_after[0]:.1f} after)")
    table.caption = ("means: error beyond irtt's veth reference = emulator + hosts (the hosts' time beyond the "
                     "reference and the delay compensation); slowest 0.1%: the p99.9 error, and the two shares' "
                     "means over those probes (hosts: their whole time)")
    for column in ("level", "end-to-end error", "emulator", "hosts", "client / server host",
                   "lateness mean / p99.9 µs (counters)", "matched"):
        table.add_column(column, justify="right")
    for delay in config.delays_ms:
        _row(table, f"{delay:g} ms/link (mean)", checks, f"delay.irtt.split.{delay:g}ms", f"delay.irtt.mean.{delay:g}ms",
             f"delay.emulator.{delay:g}ms")
    if contention:
        _row(table, "2 hogs (slowest 0.1%)", checks, "contention.irtt.split", "contention.irtt.p99.9",
             "contention.emulator")
    console.print(table)
    if out is not None:
        document = {"load_average": {"before": load_before, "after": load_after},
                    "checks": [check.model_dump() for check in found]}
        write_text_atomically(out, json.dumps(document, indent=2))


if __name__ == "__main__":
    typer.run(main)
