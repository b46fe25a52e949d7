"""`protolab measure`: the wild client (seed 003 §4.2.2, G3; docs/live.md "The wild client").

On a volunteer's machine it takes a token from a coordinator (`protolab serve-live`), runs one
test while the token holds the lock, uploads the result with the token, and goes on with the
next: a responsiveness test (`protolab-net rpm`) per protocol, a bulk transfer
(`protolab-net bulk`, h3) per congestion controller, and 003's limited tests (Table 4.1: bulk
transfers at a fixed rate, fractions of the best bulk goodput). The results are stored beside
the browser tests (`live_tests`, client `protolab-measure`); the token request carries the
host's metadata (OS, kernel, interfaces and their kind, `rmem_max` and 003's gate on it), which
the coordinator keeps in the test's meta.json.

It is Python, not a `protolab-net` subcommand, because the coordinator's JSON API and the
metadata are Python's already; the measurements themselves stay in `protolab-net`. One token per
test, not one for the whole run: each test holds the lock only while it loads the network, so a
browser user waits for one test, not for all of them.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from protolab.errors import ProtolabError

CLIENT_NAME = "protolab-measure"
# 003 §4.2.2: quic-go's wiki recommends a 2.5 MB receive buffer for high-bandwidth QUIC, and
# NesQUIC refuses to test a host whose net.core.rmem_max is below it (the buffer, not the path,
# would limit the result).
RMEM_MAX_GATE_BYTES = 2_500_000
PROTOCOLS = ("h1", "h2", "h3")
# The bulk and limited tests' envelope (the bulk result itself has no `schema`).
BULK_SCHEMA = "protolab.measure.bulk"
BULK_SCHEMA_VERSION = 1
# How long to keep asking for a token while other tests hold the lock.
DEFAULT_WAIT_S = 300.0


class MeasureError(ProtolabError):
    """The wild client cannot go on: the coordinator refused, the host failed the gate, a test
    produced no result."""


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _interface_kind(device: Path) -> str:
    """wifi, ethernet, tun, veth, bridge or other, from /sys/class/net/<name> (as the Rust
    client names them in its result's `client.interfaces`)."""
    uevent = _read(device / "uevent") or ""
    devtype = next((line.split("=", 1)[1] for line in uevent.splitlines() if line.startswith("DEVTYPE=")), "")
    if (device / "wireless").exists() or devtype == "wlan":
        return "wifi"
    if devtype == "bridge":
        return "bridge"
    if (device / "tun_flags").exists():
        return "tun"
    if devtype == "veth" or (device.name.startswith("veth") and not (device / "device").exists()):
        return "veth"
    return "ethernet" if (device / "device").exists() else "other"


def host_metadata(root: Path = Path("/")) -> dict[str, Any]:
    """What 003 §4.2.2 logs about the host: OS, kernel, the network interfaces by kind and
    net.core.rmem_max with the gate's verdict. `root` lets tests use a fake /proc and /sys."""
    os_release = _read(root / "etc/os-release") or ""
    pretty = next((line.split("=", 1)[1].strip('"') for line in os_release.splitlines()
                   if line.startswith("PRETTY_NAME=")), None)
    rmem_text = _read(root / "proc/sys/net/core/rmem_max")
    rmem_max = int(rmem_text) if rmem_text and rmem_text.isdigit() else None
    net = root / "sys/class/net"
    interfaces = [{"name": d.name, "kind": _interface_kind(d)}
                  for d in sorted(net.iterdir() if net.is_dir() else []) if d.name != "lo"]
    return {
        "client": CLIENT_NAME,
        "os": pretty,
        "kernel": _read(root / "proc/sys/kernel/osrelease") or platform.release(),
        "machine": platform.machine(),
        "interfaces": interfaces,
        "rmem_max": rmem_max,
        "rmem_max_gate": {"required_bytes": RMEM_MAX_GATE_BYTES,
                          "passed": rmem_max is not None and rmem_max >= RMEM_MAX_GATE_BYTES},
    }


def _post_json(url: str, body: dict[str, Any], timeout_s: float) -> tuple[int, dict[str, Any]]:
    """POST a JSON object; the status and the JSON answer (the coordinator answers JSON to
    refusals too)."""
    data = json.dumps(body, allow_nan=False).encode()
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"content-type": "application/json", "user-agent": CLIENT_NAME})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310 - the user's coordinator URL
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except ValueError:
            return exc.code, {"error": "not_json", "message": exc.reason}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise MeasureError(f"coordinator {url}: {getattr(exc, 'reason', exc)}") from exc


@dataclass
class Coordinator:
    """The coordinator's API as the wild client uses it."""

    base_url: str
    timeout_s: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def token(self, metadata: dict[str, Any], wait_s: float) -> str:
        """A token holding the lock; while another test holds it, asks again after the
        `retry_after_s` the coordinator gives, for up to `wait_s`."""
        deadline = self.clock() + wait_s
        while True:
            status, answer = _post_json(f"{self.base_url}/api/token", metadata, self.timeout_s)
            if status == 200 and isinstance(answer.get("token"), str):
                return str(answer["token"])
            if status != 409 or self.clock() >= deadline:
                raise MeasureError(f"coordinator {self.base_url} refused a token ({status} "
                                   f"{answer.get('error')}): {answer.get('message')}")
            retry = answer.get("retry_after_s")
            pause = float(retry) if isinstance(retry, int | float) else 1.0
            self.sleep(min(max(pause, 0.5), max(deadline - self.clock(), 0.0), 10.0))

    def upload(self, token: str, result: dict[str, Any]) -> dict[str, Any]:
        """Uploads a test's result with its token; the coordinator's answer (stored, qlogs, summary)."""
        status, answer = _post_json(f"{self.base_url}/api/result/{token}", result, self.timeout_s)
        if status != 200:
            raise MeasureError(f"coordinator {self.base_url} refused the result ({status} "
                               f"{answer.get('error')}): {answer.get('message')}")
        return answer


@dataclass
class RpmRun:
    """How to run `protolab-net rpm` against the test server."""

    binary: Path
    server: str
    host: str | None = None
    port: int = 443
    ca: Path | None = None
    direction: str = "download"
    max_duration_s: float = 10.0
    extra: Sequence[str] = field(default_factory=tuple)

    def argv(self, protocol: str, out: Path, qlog_dir: Path) -> list[str]:
        argv = [str(self.binary), "rpm", "--server", self.server, "--port", str(self.port), "--protocol", protocol,
                "--direction", self.direction, "--max-duration-s", f"{self.max_duration_s:g}", "--out", str(out),
                "--quiet"]
        if self.host:
            argv += ["--host", self.host]
        if self.ca:
            argv += ["--ca", str(self.ca)]
        if protocol == "h3":
            argv += ["--qlog", str(qlog_dir)]
        return [*argv, *self.extra]

    def run(self, protocol: str, workdir: Path) -> dict[str, Any]:
        """One test; its result (a failed test's result too: status error, as protolab-net wrote it)."""
        out = workdir / f"rpm-{protocol}.json"
        qlog_dir = workdir / f"qlog-{protocol}"
        qlog_dir.mkdir(parents=True, exist_ok=True)
        timeout = 2 * self.max_duration_s * (2 if self.direction == "both" else 1) + 60
        try:
            done = subprocess.run(self.argv(protocol, out, qlog_dir), capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MeasureError(f"protolab-net rpm --protocol {protocol}: {exc}") from exc
        if not out.exists():
            raise MeasureError(f"protolab-net rpm --protocol {protocol} wrote no result "
                               f"(exit {done.returncode}): {done.stderr[-2000:]}")
        return dict(json.loads(out.read_text()))


@dataclass
class BulkRun:
    """How to run `protolab-net bulk` against the test server: h3 uploads, because the client
    chooses the controller only of what it sends (a download follows the server's controller,
    docs/bulk.md), where 003's server switched controllers on the client's request."""

    binary: Path
    server: str
    host: str | None = None
    port: int = 443
    ca: Path | None = None
    duration_s: float = 3.0

    def argv(self, controller: str, rate_bps: float | None, out: Path, qlog_dir: Path) -> list[str]:
        argv = [str(self.binary), "bulk", "--server", self.server, "--protocol", "h3", "--direction", "upload",
                "--duration-ms", str(round(self.duration_s * 1000)), "--quic-cc", controller,
                "--https-port", str(self.port), "--qlog", str(qlog_dir), "--out", str(out)]
        if rate_bps is not None:
            argv += ["--rate", str(round(rate_bps))]
        if self.host:
            argv += ["--host", self.host]
        if self.ca:
            argv += ["--ca", str(self.ca)]
        return argv

    def run(self, name: str, controller: str, rate_bps: float | None, workdir: Path) -> dict[str, Any]:
        """One transfer; its result (`protolab-net bulk`'s document, failed ones too)."""
        out = workdir / f"{name}.json"
        qlog_dir = workdir / f"qlog-{name}"
        try:
            done = subprocess.run(self.argv(controller, rate_bps, out, qlog_dir), capture_output=True, text=True,
                                  timeout=self.duration_s + 90, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MeasureError(f"protolab-net bulk {name}: {exc}") from exc
        if not out.exists():
            raise MeasureError(f"protolab-net bulk {name} wrote no result (exit {done.returncode}): {done.stderr[-2000:]}")
        return dict(json.loads(out.read_text()))


@dataclass
class BulkPlan:
    """003's tests set: a bulk transfer per controller, then limited transfers at `fractions`
    of the best goodput of the `reference` controller's bulk transfers (003: BBR)."""

    controllers: Sequence[str] = ("cubic", "bbr")
    fractions: Sequence[float] = (0.5, 1.1)
    reference: str = "bbr"


def bulk_envelope(test: str, controller: str, result: dict[str, Any], rate_bps: float | None = None,
                  fraction: float | None = None) -> dict[str, Any]:
    """What the coordinator stores for a bulk or limited test: the test's arguments (003 Table
    4.1: test name, controller, rate, way) around `protolab-net bulk`'s result."""
    return {"schema": BULK_SCHEMA, "schema_version": BULK_SCHEMA_VERSION, "test": test, "protocol": "h3",
            "direction": "upload", "controller": controller, "rate_bps": rate_bps, "fraction": fraction,
            "goodput_bps": result.get("goodput_bps"), "status": result.get("status"), "result": result}


def limited_rates(bulk: Sequence[dict[str, Any]], plan: BulkPlan) -> list[tuple[float, float]]:
    """(fraction, rate bit/s) of each limited test: the fractions of the reference controller's
    best bulk goodput (003 §4.2.2: "the magnitude of the user bandwidth"). None without one."""
    goodputs = [b["goodput_bps"] for b in bulk if b["controller"] == plan.reference and b.get("goodput_bps")]
    if not goodputs:
        return []
    best = max(goodputs)
    return [(fraction, fraction * best) for fraction in plan.fractions]


def _bulk_tests(coordinator: Coordinator, bulk: BulkRun, plan: BulkPlan, workdir: Path, metadata: dict[str, Any],
                wait_s: float, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """The bulk transfers per controller, then the limited ones, each under its own token."""
    answers = []
    envelopes: list[dict[str, Any]] = []
    for controller in plan.controllers:
        token = coordinator.token({**metadata, "protocol": "h3", "test": "bulk", "controller": controller}, wait_s)
        envelopes.append(bulk_envelope("bulk", controller, bulk.run(f"bulk-{controller}", controller, None, workdir)))
        answers.append(coordinator.upload(token, envelopes[-1]))
        say(f"bulk {controller}: {_mbps(envelopes[-1]['goodput_bps'])}, stored {answers[-1].get('stored')}")
    for fraction, rate in limited_rates(envelopes, plan):
        token = coordinator.token({**metadata, "protocol": "h3", "test": "limited", "rate_bps": rate}, wait_s)
        result = bulk.run(f"limited-{fraction:g}", plan.reference, rate, workdir)
        answers.append(coordinator.upload(token, bulk_envelope("limited", plan.reference, result, rate, fraction)))
        say(f"limited {fraction:g} x ({_mbps(rate)}): {_mbps(result.get('goodput_bps'))}, stored {answers[-1].get('stored')}")
    return answers


def _mbps(bps: Any) -> str:
    return f"{bps / 1e6:.2f} Mbit/s" if isinstance(bps, int | float) else "-"


def measure(coordinator: Coordinator, rpm: RpmRun, protocols: Sequence[str], workdir: Path, *,
            bulk: BulkRun | None = None, plan: BulkPlan | None = None,
            wait_s: float = DEFAULT_WAIT_S, enforce_gate: bool = True,
            say: Callable[[str], None] = lambda line: None, root: Path = Path("/")) -> list[dict[str, Any]]:
    """Runs and uploads one RPM test per protocol, then (with `bulk`) the bulk and limited tests
    of `plan`, each under its own token; the coordinator's answers, in order. Refuses a host
    below 003's rmem_max gate unless `enforce_gate` is off."""
    metadata = host_metadata(root)
    gate = metadata["rmem_max_gate"]
    if enforce_gate and not gate["passed"]:
        raise MeasureError(f"net.core.rmem_max is {metadata['rmem_max']} bytes, below the {RMEM_MAX_GATE_BYTES} a "
                           "fast QUIC transfer needs (003 §4.2.2); raise it (sysctl -w net.core.rmem_max=...) "
                           "or pass --no-rmem-gate to measure anyway")
    workdir.mkdir(parents=True, exist_ok=True)
    answers = []
    for protocol in protocols:
        token = coordinator.token({**metadata, "protocol": protocol, "test": "rpm"}, wait_s)
        say(f"{protocol}: token {token[:8]}..., running protolab-net rpm")
        result = rpm.run(protocol, workdir)
        answer = coordinator.upload(token, result)
        summary = answer.get("summary") or {}
        say(f"{protocol}: stored {answer.get('stored')} (RPM {summary.get('download_rpm') or summary.get('upload_rpm')}, "
            f"status {result.get('status')})")
        answers.append(answer)
    if bulk is not None:
        answers += _bulk_tests(coordinator, bulk, plan or BulkPlan(), workdir, metadata, wait_s, say)
    return answers


def _protocols(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in PROTOCOLS]
    if not names or unknown:
        raise typer.BadParameter(f"expected a comma-separated list of {', '.join(PROTOCOLS)}, got {text!r}",
                                 param_hint="--protocols")
    return names


def _names(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _fractions(text: str) -> list[float]:
    try:
        values = [float(p) for p in _names(text)]
    except ValueError:
        values = [-1.0]
    if any(not 0 < v <= 10 for v in values):
        raise typer.BadParameter(f"expected comma-separated fractions in (0, 10], got {text!r}",
                                 param_hint="--limited-fractions")
    return values


def measure_command(
    coordinator: Annotated[str, typer.Option("--coordinator", metavar="URL",
                                             help="The coordinator's base URL (protolab serve-live), e.g. http://host:8090.")],
    server: Annotated[str, typer.Option("--server", help="The test server's address or name (protolab-net serve).")],
    host: Annotated[str | None, typer.Option("--host", help="Hostname for SNI and Host (default: --server).")] = None,
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="The server's TLS and QUIC port.")] = 443,
    ca: Annotated[Path | None, typer.Option("--ca", exists=True, dir_okay=False,
                                            help="The server's CA (PEM); default: the Mozilla roots.")] = None,
    protocols: Annotated[str, typer.Option("--protocols", help="RPM tests to run, in order.")] = "h1,h2,h3",
    direction: Annotated[str, typer.Option("--direction", help="download, upload or both.")] = "download",
    max_duration_s: Annotated[float, typer.Option("--max-duration-s", min=1.0,
                                                  help="Time limit per direction of each test.")] = 10.0,
    out: Annotated[Path, typer.Option("--out", file_okay=False,
                                      help="Where the results and client qlogs are kept.")] = Path("measure-results"),
    wait_s: Annotated[float, typer.Option("--wait-s", min=0.0,
                                          help="How long to keep asking while other tests hold the lock.")] = DEFAULT_WAIT_S,
    rmem_gate: Annotated[bool, typer.Option("--rmem-gate/--no-rmem-gate",
                                            help="Refuse to run below 003's rmem_max gate (2.5 MB).")] = True,
    binary: Annotated[Path | None, typer.Option("--binary", help="The protolab-net binary.")] = None,
    controllers: Annotated[str, typer.Option("--controllers",
                                             help="Bulk h3 uploads, one per QUIC controller (protolab-net cc list); "
                                                  "empty: no bulk or limited tests.")] = "cubic,bbr",
    bulk_duration_s: Annotated[float, typer.Option("--bulk-duration-s", min=0.5,
                                                   help="Duration of each bulk and limited transfer.")] = 3.0,
    limited_fractions: Annotated[str, typer.Option("--limited-fractions",
                                                   help="Limited tests: rates as fractions of the reference "
                                                        "controller's bulk goodput (003: 0.3,0.5,0.8,0.9,1,1.1).")] = "0.5,1.1",
    reference_controller: Annotated[str, typer.Option("--reference-controller",
                                                      help="Whose bulk goodput sets the limited rates; "
                                                           "also their controller.")] = "bbr",
) -> None:
    """The wild client: take a token from a coordinator, run protolab-net rpm per protocol, upload
    each result with the host's metadata; the coordinator stores them beside the browser tests."""
    from protolab.lab.binary import find_binary

    if direction not in ("download", "upload", "both"):
        raise typer.BadParameter(f"expected download, upload or both, got {direction!r}", param_hint="--direction")
    names = _names(controllers)
    if names and reference_controller not in names:
        raise typer.BadParameter(f"{reference_controller!r} is not among --controllers {controllers!r}",
                                 param_hint="--reference-controller")
    executable = find_binary(binary)
    rpm = RpmRun(executable, server, host, port, ca, direction, max_duration_s)
    bulk = BulkRun(executable, server, host, port, ca, bulk_duration_s) if names else None
    plan = BulkPlan(names, _fractions(limited_fractions), reference_controller)
    answers = measure(Coordinator(coordinator.rstrip("/")), rpm, _protocols(protocols), out, bulk=bulk, plan=plan,
                      wait_s=wait_s, enforce_gate=rmem_gate, say=lambda line: print(line, file=sys.stderr, flush=True))
    typer.echo(json.dumps([{"token": a.get("token"), "stored": a.get("stored"), "summary": a.get("summary")}
                           for a in answers], indent=2))
