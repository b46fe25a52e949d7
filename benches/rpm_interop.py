"""RPM interop: an independent client (goresponsiveness, the draft authors' Go client, built from
its public source) against our server, beside our own client, on the same emulated links
(docs/rpm.md, "Interop").

Run: .venv/bin/python benches/rpm_interop.py --go-client PATH [--bdp 1,4] [--out FILE.json]

Build the Go client once: `git clone https://github.com/network-quality/goresponsiveness && cd
goresponsiveness && go build -o networkQuality .` (Go modules from the module proxy).

Per buffer (drop-tail, in BDPs of the 20 Mbit/s x 40 ms access link of the speed-test lab),
one lab: `protolab-net serve` with the speed-test page's manifest in the server host, then in
the client host `networkQuality -url https://speed.pl.test/.well-known/nq -connect-to SERVER`
(h2 over TCP and TLS, download then upload, its own defaults) and `protolab-net rpm --protocol
h2 --direction both`. The Go client prints one final RPM over both directions by its formula
(latencies averaged) at P90 and by trimmed mean; ours gives both formulas per direction.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))  # the speed-test lab's helpers are shared with the tests

from test_live_browser import HOSTNAME, SERVER_ADDRESS, speedtest_topology, start_server  # noqa: E402

from protolab.lab import Lab, find_binary  # noqa: E402
from protolab.live.page import write_manifest  # noqa: E402

GO_FINAL = re.compile(r"^Final RPM:\s+(\d+) \((P\d+|Single-Sided [\d.]+% Trimmed Mean)\)", re.MULTILINE)
GO_THROUGHPUT = re.compile(r"^(Download|Upload)[^\n]*?([\d.]+) Mbps", re.MULTILINE)


def go_summary(stdout: str) -> dict[str, Any]:
    """The Go client's final RPMs (P90 and trimmed mean) and capacities from its text output."""
    finals = {("p90" if kind.startswith("P") else "trimmed_mean"): int(value) for value, kind in GO_FINAL.findall(stdout)}
    capacity = {direction.lower(): float(mbps) for direction, mbps in GO_THROUGHPUT.findall(stdout)}
    return {"rpm": finals, "capacity_mbps": capacity}


def ours_summary(result: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, d in result.get("directions", {}).items():
        r = d.get("responsiveness") or {}
        p90 = r.get("p90") or {}
        out[name] = {"capacity_mbps": (d.get("capacity_bps") or 0) / 1e6, "rpm_draft": d.get("rpm"),
                     "rpm_latency_mean": d.get("rpm_latency_mean"), "p90_draft": p90.get("rpm"),
                     "p90_latency_mean": p90.get("rpm_latency_mean"), "foreign_rpm": r.get("foreign_rpm"),
                     "self_ms": r.get("tm_http_self_ms"), "confidence": d.get("confidence", {}).get("rpm")}
    return out


def one_buffer(go_client: Path, binary: Path, bdp: float, work: Path) -> dict[str, Any]:
    manifest_file = write_manifest(work / "site", HOSTNAME, SERVER_ADDRESS)
    with Lab(speedtest_topology("t" + secrets.token_hex(4), queue_bdp=bdp), binary=binary) as lab:
        served = start_server(lab, binary, manifest_file, work / "server")
        go = lab.run("client", [go_client, "-url", f"https://{HOSTNAME}/.well-known/nq", "-connect-to",
                                SERVER_ADDRESS], timeout=120, check=False)
        (work / "go.txt").write_text(go.stdout + go.stderr)
        out = work / "ours.json"
        lab.run("client", [binary, "rpm", "--server", SERVER_ADDRESS, "--host", HOSTNAME, "--ca",
                           served.tls_dir / "ca.pem", "--protocol", "h2", "--direction", "both", "--out", out,
                           "--quiet"], timeout=120, check=False)
    return {"bdp": bdp, "go": go_summary(go.stdout), "go_exit": go.returncode,
            "ours": ours_summary(json.loads(out.read_text())) if out.exists() else None}


def main(
    go_client: Annotated[Path, typer.Option("--go-client", exists=True, dir_okay=False,
                                            help="goresponsiveness's networkQuality binary.")],
    bdp: Annotated[str, typer.Option("--bdp", help="Drop-tail buffers, in BDPs.")] = "1,4",
    out: Annotated[Path | None, typer.Option("--out", help="Write the rows as JSON here.")] = None,
    work: Annotated[Path, typer.Option("--work", file_okay=False, help="Where the raw outputs go.")] = Path(
        "target/rpm-interop"),
) -> None:
    binary = find_binary()
    rows = []
    for value in (float(b) for b in bdp.split(",")):
        row = one_buffer(go_client, binary, value, work / f"{value:g}bdp")
        rows.append(row)
        print(json.dumps(row), flush=True)
    if out:
        out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    typer.run(main)
