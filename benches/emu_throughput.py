"""Emulator throughput benchmark: single-flow TCP (cubic) through the emulator vs a veth pair.

Run: .venv/bin/python benches/emu_throughput.py [--seconds 10] [--out FILE.json]

Three measurements in one run, each an iperf3 TCP transfer between two namespaces:
  1. through the emulator, no shaping (ideal links),
  2. through the emulator shaped at 1 Gbit/s (1-BDP drop-tail queue, 1 ms RTT),
  3. through a plain veth pair (namespaces pl-bench-a / pl-bench-b): the reference.
The table gives Gbit/s, the ratio to the veth reference, and pass/fail against the targets.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from protolab import __version__
from protolab.errors import ProtolabError, ToolError
from protolab.lab import Lab, dumbbell, gbit, ideal_link, ms
from protolab.measure.tools import IperfResult, parse_iperf3

SCHEMA = "protolab.bench.emu_throughput"
SCHEMA_VERSION = 1
VETH_NAMESPACES = ("pl-bench-a", "pl-bench-b")
VETH_ADDRESSES = ("10.77.250.1", "10.77.250.2")
LAB_NAME = "plbench"
IPERF_PORT = 5201
SHAPED_RATE_GBIT = 1.0
SHAPED_RTT_MS = 1.0
TARGETS_GBIT = {"emulator-unshaped": 2.0, "emulator-shaped-1g": 0.9}
REPO_ROOT = Path(__file__).resolve().parents[1]

console = Console()


def _run(argv: Sequence[str], *, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        completed = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError(f"`{' '.join(argv)}` failed: {exc}") from exc
    if check and completed.returncode != 0:
        raise ToolError(f"`{' '.join(argv)}` exited {completed.returncode}: {completed.stderr.strip()}")
    return completed


def _iperf3_client_argv(server: str, seconds: int) -> list[str]:
    # -C sets cubic per socket: a non-initial namespace may not make cubic its default
    # unless cubic is in net.ipv4.tcp_allowed_congestion_control.
    return ["iperf3", "-c", server, "-p", str(IPERF_PORT), "-t", str(seconds), "-O", "2", "-C", "cubic", "-J"]


def _await_listener(netns_exec: list[str], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if _run([*netns_exec, "ss", "-Htln", f"sport = :{IPERF_PORT}"]).stdout.strip():
            return
        time.sleep(0.1)
    raise ToolError(f"iperf3 server did not start listening within {within:g} s")


# --------------------------------------------------------------------------- veth reference


def _delete_veth_namespaces() -> None:
    existing = _run(["ip", "netns", "list"]).stdout.split()
    for name in VETH_NAMESPACES:
        if name in existing:  # only ours, by exact name
            _run(["ip", "netns", "del", name], check=False)


@contextmanager
def veth_pair() -> Iterator[None]:
    """Two namespaces joined by a veth pair, removed afterwards (also on Ctrl-C)."""
    _delete_veth_namespaces()  # left over from an interrupted earlier run
    try:
        a, b = VETH_NAMESPACES
        for name in VETH_NAMESPACES:
            _run(["ip", "netns", "add", name])
            _run(["ip", "-n", name, "link", "set", "lo", "up"])
        _run(["ip", "link", "add", "plb0", "netns", a, "type", "veth", "peer", "name", "plb0", "netns", b])
        for name, address in zip(VETH_NAMESPACES, VETH_ADDRESSES, strict=True):
            _run(["ip", "-n", name, "addr", "add", f"{address}/30", "dev", "plb0"])
            _run(["ip", "-n", name, "link", "set", "plb0", "up"])
        yield
    finally:
        _delete_veth_namespaces()


def measure_veth(seconds: int) -> IperfResult:
    with veth_pair():
        server_exec = ["ip", "netns", "exec", VETH_NAMESPACES[1]]
        server = subprocess.Popen([*server_exec, "iperf3", "-s", "-B", VETH_ADDRESSES[1], "-p", str(IPERF_PORT)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _await_listener(server_exec)
            client = _run(["ip", "netns", "exec", VETH_NAMESPACES[0], *_iperf3_client_argv(VETH_ADDRESSES[1], seconds)],
                          timeout=seconds + 60)
            return parse_iperf3(client.stdout)
        finally:
            server.terminate()
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


# --------------------------------------------------------------------------- emulator


def measure_emulator(seconds: int) -> tuple[dict[str, IperfResult], dict[str, object]]:
    """Unshaped and shaped transfers through one lab; also the counters after the shaped one."""
    results: dict[str, IperfResult] = {}
    with Lab(dumbbell(LAB_NAME, ["client"], ["server"])) as lab:
        server = lab.address("server")
        lab.spawn("server", ["iperf3", "-s", "-B", server, "-p", str(IPERF_PORT)])
        _await_listener(["ip", "netns", "exec", lab.namespace("server")])

        def transfer() -> IperfResult:
            completed = lab.run("client", _iperf3_client_argv(server, seconds), timeout=seconds + 60)
            return parse_iperf3(completed.stdout)

        results["emulator-unshaped"] = transfer()
        bdp_bytes = round(SHAPED_RATE_GBIT * 1e9 * SHAPED_RTT_MS / 1e3 / 8)
        lab.set_link(["client.up", "client.down", "server.up", "server.down"],
                     **ideal_link(delay=ms(SHAPED_RTT_MS / 4)))
        lab.set_link("p0.forward", **ideal_link(rate=gbit(SHAPED_RATE_GBIT), queue_bytes=bdp_bytes))
        results["emulator-shaped-1g"] = transfer()
        counters = lab.counters()
    return results, counters


# --------------------------------------------------------------------------- report


def build_report(seconds: int) -> dict[str, object]:
    emulator, counters = measure_emulator(seconds)
    veth = measure_veth(seconds)
    reference_gbit = veth.goodput_bps / 1e9
    rows = []
    for name, result in [*emulator.items(), ("veth-reference", veth)]:
        measured = result.goodput_bps / 1e9
        target = TARGETS_GBIT.get(name)
        rows.append({
            "name": name,
            "gbit_per_s": measured,
            "ratio_to_veth": measured / reference_gbit if reference_gbit else None,
            "target_gbit_per_s": target,
            "status": "reference" if target is None else ("pass" if measured >= target else "fail"),
            "retransmits": result.retransmits,
            "sender_gbit_per_s": result.sender_bps / 1e9,
        })
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "protolab_version": __version__,
        "created_unix_ns": time.time_ns(),
        "config": {"seconds": seconds, "omit_seconds": 2, "congestion": "cubic", "shaped_rate_gbit": SHAPED_RATE_GBIT,
                   "shaped_rtt_ms": SHAPED_RTT_MS, "shaped_queue": "droptail, 1 BDP in bytes"},
        "machine": {"kernel": platform.release(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "iperf3": _run(["iperf3", "--version"]).stdout.splitlines()[0]},
        "results": rows,
        "shaped_counters": counters,
        "ok": all(row["status"] != "fail" for row in rows),
    }


def render(report: dict[str, object]) -> Table:
    table = Table(title="Emulator throughput (single TCP flow, cubic)")
    for column in ("measurement", "Gbit/s", "vs veth", "target", "result"):
        table.add_column(column, justify="left" if column == "measurement" else "right")
    for row in report["results"]:  # type: ignore[attr-defined]
        style = {"pass": "green", "fail": "bold red"}.get(row["status"], "dim")
        target = f">= {row['target_gbit_per_s']:g}" if row["target_gbit_per_s"] is not None else "-"
        table.add_row(row["name"], f"{row['gbit_per_s']:.2f}", f"{row['ratio_to_veth']:.3f}", target,
                      f"[{style}]{row['status']}[/]")
    return table


def main(
    seconds: Annotated[int, typer.Option(help="Measured seconds per transfer (after 2 s omitted).")] = 10,
    out: Annotated[Path, typer.Option(help="Result JSON.")] = REPO_ROOT / "target" / "bench" / "emu_throughput.json",
) -> None:
    try:
        report = build_report(seconds)
    except ProtolabError as exc:
        console.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
        raise typer.Exit(1) from exc
    console.print(render(report))
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False, suffix=".partial") as partial:
        json.dump(report, partial, indent=2)
    Path(partial.name).replace(out)
    console.print(f"wrote {out}")
    if not report["ok"]:
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
