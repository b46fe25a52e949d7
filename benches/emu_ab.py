"""A/B of two (or more) emulator binaries on one emulator row of benches/emu_throughput.py.

Run: .venv/bin/python benches/emu_ab.py --binary main=/path/to/protolab-net \
         --binary new=target/release/protolab-net [--row emulator-unshaped] [--rounds 3] [--seconds 4]

Each round runs the row once through a fresh lab of every binary in turn, then once through the
veth pair (benches/emu_throughput.py's namespaces), so that drift on a shared machine falls on
every binary alike. Per binary: the median Gbit/s (iperf3 goodput), its ratio to the veth pair's
median in the same run, and the median emulator CPU-seconds per Gbit delivered on the data link
(emu_throughput.py's "Accounting"); the median of the emulator's delivery lateness against its
model per transfer (mean, the 99.9th percentile's bucket bound, passes more than 1 ms late:
docs/control.md, `delivery_late`, `late_passes`); the emulator's `tx_errors` and `rx_malformed`,
which must stay 0. A comparison of binaries, not a target: emu_throughput.py holds the issue's targets.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))  # emu_throughput.py's lab and transfers
import emu_throughput as bench  # noqa: E402

from protolab.errors import ProtolabError  # noqa: E402
from protolab.files import write_text_atomically  # noqa: E402
from protolab.lab import Lab, dumbbell  # noqa: E402

console = Console(width=max(Console().width, 140))
LAB_NAME = "plab"


class BadBinaryOption(ProtolabError):
    """--binary was not NAME=PATH to an existing file, or --row named no emulator row."""


def parse_binaries(options: Sequence[str]) -> dict[str, Path]:
    """NAME=PATH options into an ordered mapping; at least one, names unique, files present."""
    binaries: dict[str, Path] = {}
    for option in options:
        name, sep, path = option.partition("=")
        if not sep or not name or not path:
            raise BadBinaryOption(f"--binary {option!r}: expected NAME=PATH")
        if name in binaries or name == "veth":
            raise BadBinaryOption(f"--binary {option!r}: the name {name!r} is taken")
        if not Path(path).is_file():
            raise BadBinaryOption(f"--binary {option!r}: no file at {path}")
        binaries[name] = Path(path)
    if not binaries:
        raise BadBinaryOption("--binary: give at least one NAME=PATH")
    return binaries


def _emulator_round(binary: Path, row: bench.Row, seconds: int, offload: bool | None) -> dict[str, Any]:
    with ExitStack() as stack:
        lab = stack.enter_context(Lab(dumbbell(LAB_NAME, ["client"], ["server"]), offload=offload, binary=binary))
        execs = [["ip", "netns", "exec", lab.namespace(h)] for h in ("client", "server")]
        stack.enter_context(bench._iperf3_server(execs[1], lab.address("server")))
        transfer, counters = bench._emulator_transfer(lab, row, execs[0], seconds)
    emulator = counters["emulator"]
    return {"gbit_per_s": transfer.iperf.goodput_bps / 1e9, "retransmits": transfer.iperf.retransmits,
            "emulator_cpu_s_per_gbit": transfer.accounting["emulator_cpu_s_per_gbit"],
            "emulator_cores": transfer.accounting["emulator_cores"],
            "machine_busy": transfer.accounting["machine_busy"],
            "tx_errors": emulator["tx_errors"], "rx_malformed": emulator["rx_malformed"],
            **delivery_lateness(emulator)}


def delivery_lateness(emulator: dict[str, Any]) -> dict[str, float | int | None]:
    """How late the emulator delivered against its model during one transfer (its counters are
    reset before it): the mean and the 99.9th percentile's bucket bound in µs, and its passes
    more than 1 ms late."""
    late = emulator["delivery_late"]
    p999 = late.get("p999_ns_at_most")
    return {"late_mean_us": late["mean_ns"] / 1e3, "late_p999_us_at_most": None if p999 is None else p999 / 1e3,
            "late_passes": len(emulator.get("late_passes") or [])}


def measure(binaries: dict[str, Path], row: bench.Row, rounds: int, seconds: int,
            offload: bool | None) -> dict[str, list[dict[str, Any]]]:
    """Every binary, then the veth pair, `rounds` times."""
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in [*binaries, "veth"]}
    veth_exec = [["ip", "netns", "exec", name] for name in bench.VETH_NAMESPACES]
    reference = next(r for r in bench.ROWS if r.name == (row.reference or "veth-reference"))
    with bench.veth_pair(), bench._iperf3_server(veth_exec[1], bench.VETH_ADDRESSES[1]):
        for round_number in range(rounds):
            for name, binary in binaries.items():
                samples[name].append(_emulator_round(binary, row, seconds, offload))
                console.print(f"round {round_number + 1}/{rounds} {name}: {json.dumps(samples[name][-1])}")
            veth = bench._veth_transfer(veth_exec[0], reference, seconds)
            samples["veth"].append({"gbit_per_s": veth.iperf.goodput_bps / 1e9, "machine_busy": veth.accounting["machine_busy"]})
            console.print(f"round {round_number + 1}/{rounds} veth: {samples['veth'][-1]['gbit_per_s']:.2f} Gbit/s")
    return samples


def summarise(samples: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per binary: medians, the ratio to the veth median, and the error counters' totals."""
    def median(rows: list[dict[str, Any]], key: str) -> float | None:
        values = [r[key] for r in rows if r.get(key) is not None]
        return statistics.median(values) if values else None

    veth = median(samples["veth"], "gbit_per_s")
    summary: dict[str, dict[str, Any]] = {}
    for name, rows in samples.items():
        gbit = median(rows, "gbit_per_s")
        summary[name] = {"gbit_per_s": gbit, "ratio_to_veth": gbit / veth if gbit is not None and veth else None,
                         "emulator_cpu_s_per_gbit": median(rows, "emulator_cpu_s_per_gbit"),
                         "late_mean_us": median(rows, "late_mean_us"),
                         "late_p999_us_at_most": median(rows, "late_p999_us_at_most"),
                         "late_passes": median(rows, "late_passes"),
                         "tx_errors": sum(r.get("tx_errors", 0) for r in rows),
                         "rx_malformed": sum(r.get("rx_malformed", 0) for r in rows)}
    return summary


def render(summary: dict[str, dict[str, Any]]) -> Table:
    table = Table("binary", "Gbit/s (median)", "vs veth", "emu CPU s/Gbit", "late mean µs", "late p99.9 µs ≤",
                  "late passes", "tx_errors", "rx_malformed")
    for name, s in summary.items():
        table.add_row(name, bench._number(s["gbit_per_s"], ".2f"), bench._number(s["ratio_to_veth"], ".3f"),
                      bench._number(s["emulator_cpu_s_per_gbit"], ".3f"), bench._number(s["late_mean_us"], ".1f"),
                      bench._number(s["late_p999_us_at_most"], ".0f"), bench._number(s["late_passes"], "g"),
                      str(s["tx_errors"]), str(s["rx_malformed"]))
    return table


def main(
    binary: Annotated[list[str], typer.Option(help="NAME=PATH of a protolab-net binary; repeat for each.")],
    row: Annotated[str, typer.Option(help="The emulator row of emu_throughput.py to run.")] = "emulator-unshaped",
    rounds: Annotated[int, typer.Option(min=1, help="Alternating rounds; the median counts.")] = 3,
    seconds: Annotated[int, typer.Option(min=1, help="Measured seconds per transfer (after 2 s omitted).")] = 4,
    offload: Annotated[bool, typer.Option("--offload/--no-offload", help="The TUN segmentation offloads.")] = True,
    out: Annotated[Path, typer.Option(help="Result JSON.")] = bench.REPO_ROOT / "target" / "bench" / "emu_ab.json",
) -> None:
    try:
        binaries = parse_binaries(binary)
        chosen = next((r for r in bench.ROWS if r.name == row and r.through_emulator), None)
        if chosen is None:
            raise BadBinaryOption(f"--row {row!r}: not an emulator row of emu_throughput.py")
        load_before = os.getloadavg()
        samples = measure(binaries, chosen, rounds, seconds, offload)
    except ProtolabError as exc:
        console.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
        raise typer.Exit(1) from exc
    summary = summarise(samples)
    console.print(render(summary))
    report = {"created_unix_ns": time.time_ns(), "row": row, "rounds": rounds, "seconds": seconds, "offload": offload,
              "binaries": {name: str(path) for name, path in binaries.items()},
              "load_average": {"before": list(load_before), "after": list(os.getloadavg())},
              "summary": summary, "samples": samples}
    write_text_atomically(out, json.dumps(report, indent=2))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    typer.run(main)
