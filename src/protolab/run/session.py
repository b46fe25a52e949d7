"""The lab executor (docs/spec.md): one real lab per experiment, its servers, and what every run
shares.

`LabExecutor` builds the scenario's topology once (one `Lab`) and starts `protolab-net serve`
in each server host. Servers are started with the transport options of the run at hand and
restarted only when a run needs other options (a controller axis, say). For each run the
session sets every link of the scenario with the run's seed (so each run meets the same loss
draws as the other modes of its block), resets the emulator counters, starts the captures the
spec asks for, hands the run to its workload's executor, stops the captures and reads the
counters. The executors per workload (`protolab.run.executors.EXECUTORS`) are handed to
`LabExecutor`: they use the session, so the session does not import them.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protolab.errors import LabError, ToolError
from protolab.files import scratch_dir, write_text_atomically
from protolab.lab import Lab, find_binary
from protolab.lab.events import DocumentError, NotReady, await_event
from protolab.plan.experiment import Experiment
from protolab.run import provenance
from protolab.results.documents import parse_document
from protolab.results.generated.control_reply import Counters
from protolab.results.generated.event_listening import Listening
from protolab.results.generated.link_params import LinkParams
from protolab.results.record import RunRecord
from protolab.run.runner import PlannedRun
from protolab.scenarios import Condition, Context

# What one run of a workload does in a session, by the workload's name.
WorkloadExecutor = Callable[["LabSession", PlannedRun, Path], RunRecord]

SERVER_READY_TIMEOUT_S = 30.0
QUIET_WAIT_S = 5.0
SERVER_FILES_SETTLE_S = 1.0
SERVER_STOP_TIMEOUT_S = 5.0
# The server's extra address that MPTCP connections join as their second subflow (in the
# server side's subnet, outside the corpus networks).
MPTCP_SIGNAL_ADDRESS = "10.77.1.250"

# Transport options and the endpoint flags that carry them (both ends take the same flags).
TRANSPORT_FLAGS = {
    "tcp_cc": "--tcp-cc",
    "quic_cc": "--quic-cc",
    "quic_initial_window": "--quic-initial-window",
    "quic_packet_threshold": "--quic-packet-threshold",
    "quic_time_threshold": "--quic-time-threshold",
    "quic_ack_eliciting_threshold": "--quic-ack-eliciting-threshold",
    "quic_max_ack_delay_ms": "--quic-max-ack-delay-ms",
    "quic_stream_window": "--quic-stream-window",
}


# Transport options only one kind of endpoint takes, beside TRANSPORT_FLAGS: the servers (what a
# server writes) and the page-load engine.
ENDPOINT_TRANSPORT_FLAGS = {
    "server": {"tcp_notsent_lowat": "--tcp-notsent-lowat"},
    "load": {"quic_handshake_timeout_ms": "--quic-handshake-timeout-ms"},
}


def transport_argv(transport: dict[str, Any], quic_cc: str | None = None, endpoint: str | None = None) -> list[str]:
    """The endpoint flags of a run's transport options (`quic_cc` overrides the controller);
    with `endpoint` ("server", "load"), also the options only that kind of endpoint takes."""
    argv: list[str] = []
    flags = {**TRANSPORT_FLAGS, **ENDPOINT_TRANSPORT_FLAGS.get(endpoint or "", {})}
    for key, flag in flags.items():
        value = quic_cc if key == "quic_cc" and quic_cc is not None else transport.get(key)
        if value is not None:
            argv += [flag, str(value)]
    return argv


def _write_json(path: Path, value: Any) -> None:
    write_text_atomically(path, json.dumps(value, indent=2, sort_keys=True))


def write_pages(experiment: Experiment, results_dir: Path) -> dict[str, Path]:
    """Every page's manifest under RESULTS/pages/<name>.json (served and loaded from there)."""
    files: dict[str, Path] = {}
    for ref, page in experiment.pages.items():
        target = results_dir / "pages" / f"{page.name}.json"
        _copy_bodies(page.source, page.manifest, target.parent)
        _write_json(target, page.manifest)
        files[ref] = target.resolve()
    return files


def _copy_bodies(source: str, manifest: dict[str, Any], pages_dir: Path) -> None:
    """The recorded bodies of a manifest file (`objects[].body`, relative to it) beside its copy,
    so the results directory serves the same page on its own."""
    bodies = {o["body"] for o in manifest.get("objects", []) if isinstance(o, dict) and isinstance(o.get("body"), str)}
    if not bodies:
        return
    base = Path(source).parent
    for body in sorted(bodies):
        target = pages_dir / body
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(base / body, target)
        except OSError as exc:
            raise ToolError(f"manifest {source}: body {body}: cannot copy: {exc.strerror or exc}") from exc


def tail(path: Path, limit: int = 1500) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    return text[-limit:]


@dataclass
class Server:
    """A running `protolab-net serve` in a server host."""

    host: str
    key: str  # what it was started with: another key means a restart
    process: subprocess.Popen[bytes]
    tls_dir: Path
    samples_dir: Path
    qlog_dir: Path
    slot: str | None = None  # which of several servers in one host (004 Fig. 13: both sides' in one)

    @property
    def name(self) -> str:
        return server_name(self.host, self.slot)


def server_name(host: str, slot: str | None) -> str:
    """A server's key in the session and its working directory's name: the host, or the host and
    slot when one host runs several servers at once (each its own TLS, samples and qlog dirs)."""
    return host if slot is None else f"{host}.{slot}"


@dataclass
class RunCapture:
    """The captures of one run."""

    pcap_hosts: list[str] = field(default_factory=list)
    events: Path | None = None


class LabSession:
    """A running lab with its servers: executes the runs of one experiment."""

    def __init__(self, experiment: Experiment, lab: Lab, binary: Path, pages: dict[str, Path], workdir: Path,
                 workloads: Mapping[str, WorkloadExecutor]) -> None:
        self.experiment = experiment
        self.workloads = workloads
        self.lab = lab
        self.binary = binary
        self.pages = pages
        self.workdir = workdir
        self.ctx = Context(lab=lab, workdir=workdir)
        self.scenario = experiment.scenario
        self.params = experiment.params
        self.workload = self.scenario.workload_for(self.params)
        self.mptcp = self.workload.mptcp(experiment.axes["mode"], self.params)
        self.servers: dict[str, Server] = {}
        self._busy = False

    # -- servers

    def server(self, host: str, transport: dict[str, Any], manifests: Sequence[Path] = (),
               listen: Sequence[str] = (), quic_cc: str | None = None, slot: str | None = None) -> Server:
        """The server of a host (of `slot` in it, when a host runs several), (re)started with these
        options when it runs with others."""
        spec = self.experiment.spec
        name = server_name(host, slot)
        base = self.workdir / name
        argv: list[str | Path] = [self.binary, "serve"]
        for manifest in manifests:
            argv += ["--manifest", manifest]
        for address in listen:
            argv += ["--listen", address]
        argv += ["--tls-dir", base / "tls", "--lab", self.lab.name or "lab",
                 *transport_argv(transport, quic_cc, endpoint="server")]
        if self.mptcp:
            argv += ["--mptcp"]  # MPTCP listeners also take plain TCP clients (they fall back)
        if spec.artifacts.samples:
            # The server samples every connection; each run takes its connections' files.
            argv += ["--samples", base / "samples", "--sample-interval-ms", str(spec.artifacts.sample_interval_ms)]
        if spec.artifacts.qlog:
            argv += ["--qlog", base / "qlog"]
        key = json.dumps([str(a) for a in argv])
        running = self.servers.get(name)
        if running is not None and running.key == key and running.process.poll() is None:
            return running
        if running is not None:
            self._stop_server(running)
        server = self._start_server(host, argv, key, base, slot)
        self.servers[name] = server
        return server

    def _start_server(self, host: str, argv: list[str | Path], key: str, base: Path, slot: str | None) -> Server:
        base.mkdir(parents=True, exist_ok=True)
        log, errors = base / "serve.stdout", base / "serve.stderr"
        with log.open("wb") as out, errors.open("wb") as err:
            process = self.lab.spawn(host, argv, stdout=out, stderr=err,
                                     cgroup=self.scenario.cgroup(self.ctx, self.params, "server"))
        try:
            await_event(process, log, Listening, lambda line: line.get("event") == "listening", SERVER_READY_TIMEOUT_S)
        except DocumentError as exc:
            self.lab.stop(process, timeout=SERVER_STOP_TIMEOUT_S)
            raise ToolError(f"protolab-net serve in host {host}: {exc}") from None
        except NotReady as exc:
            # A server that is only slow (a loaded machine) would bind later and hold the port
            # against every later run's server: stop it, and all it started, before going on.
            self.lab.stop(process, timeout=SERVER_STOP_TIMEOUT_S)
            why = (f"exited with status {exc.status} before listening" if exc.status is not None
                   else f"was not listening after {SERVER_READY_TIMEOUT_S:g} s (stopped)")
            raise ToolError(f"protolab-net serve in host {host} {why}: {tail(errors) or '(no output)'}") from None
        except BaseException:
            self.lab.stop(process, timeout=SERVER_STOP_TIMEOUT_S)
            raise
        return Server(host, key, process, base / "tls", base / "samples", base / "qlog", slot)

    def stop_server(self, host: str) -> None:
        """The host's protolab-net servers stopped, every slot's, if any run (an interop server
        needs its ports)."""
        for running in [s for s in self.servers.values() if s.host == host]:
            self._stop_server(running)

    def _stop_server(self, server: Server) -> None:
        self.lab.stop(server.process, timeout=SERVER_STOP_TIMEOUT_S)
        self.servers.pop(server.name, None)

    def page_manifests(self) -> list[Path]:
        return list(self.pages.values())

    # -- conditions

    def set_links(self, condition: Condition, seed: int | None) -> dict[str, LinkParams]:
        """The condition's links set; each link's parameters in force, as the emulator reports them."""
        effective: dict[str, LinkParams] = {}
        for name, params in self.scenario.run_links(self.params, condition, seed).items():
            for link, value in self.lab.set_link(name, seed=seed, **params).items():
                effective[link] = parse_document(LinkParams, value, f"set_link {link}: the emulator's reply")
        return effective

    def enter(self, condition: Condition) -> None:
        self.set_links(condition, None)
        self.scenario.enter(self.ctx, self.params, condition)
        self._busy = self.scenario.busy(self.params, condition)

    def leave(self, condition: Condition) -> None:
        self.scenario.leave(self.ctx, self.params, condition)
        self._busy = False

    # -- one run

    def begin(self, run: PlannedRun, run_dir: Path, *, events: bool = False) -> tuple[dict[str, LinkParams], RunCapture]:
        """Quiet links, the run's link parameters and seed, counters reset, captures started."""
        spec = self.experiment.spec
        if not self._busy:
            # Stragglers of the previous run (FINs, retransmissions) must not count in this one.
            with contextlib.suppress(LabError):
                self.lab.await_quiet(within=QUIET_WAIT_S)
        link_config = self.set_links(run.condition, run.link_seed)
        self.lab.reset_counters()
        capture = RunCapture()
        if spec.artifacts.pcap:
            # Every client and server: the sender's capture holds the transmissions a link
            # dropped (the loss analysis needs it), the receiver's what arrived.
            for host in self.capture_hosts():
                self.lab.pcap_start(host, (run_dir / f"{host}.pcap").resolve())
                capture.pcap_hosts.append(host)
        if events or spec.artifacts.events:
            capture.events = (run_dir / "events.ndjson").resolve()
            self.lab.events_start(capture.events)
        return link_config, capture

    def capture_hosts(self) -> list[str]:
        """The scenario's clients and the server hosts this lab has (004 Fig. 13's one-server
        fairness topology has no second server host)."""
        present = {entry.get("name") for entry in self.lab.topology.get("hosts", [])}
        return [h for h in (*self.scenario.clients, *self.scenario.servers) if h in present]

    def end(self, capture: RunCapture) -> Counters:
        """Captures stopped (even when the run failed); the emulator's counters."""
        for host in capture.pcap_hosts:
            with contextlib.suppress(LabError):
                self.lab.pcap_stop(host)
        if capture.events is not None:
            with contextlib.suppress(LabError):
                self.lab.events_stop()
        reply = {k: v for k, v in self.lab.counters().items() if k not in ("ok", "error")}
        return parse_document(Counters, reply, "the emulator's counters reply")

    def execute(self, run: PlannedRun, run_dir: Path) -> RunRecord:
        return self.workloads[self.workload.name](self, run, run_dir)

    def take_server_files(self, client_files: Sequence[str], server: Server, kind: str, directory: Path) -> None:
        """Moves the server's files (`kind` = "samples" or "qlog") of a run's connections next to
        the client's: both ends name a connection's files by the same connection id, so the
        server's file is the client's with the other role. The server ends a file when it sees
        the connection closed (soon after the run's end), so wait briefly for the files to stop
        growing."""
        source = server.samples_dir if kind == "samples" else server.qlog_dir
        files = [source / ("server-" + Path(f).name.removeprefix("client-")) for f in client_files]
        deadline = time.monotonic() + SERVER_FILES_SETTLE_S
        sizes: list[int] = []
        while time.monotonic() < deadline:
            now = [f.stat().st_size if f.exists() else -1 for f in files]
            if now == sizes:
                break
            sizes = now
            time.sleep(0.05)
        directory.mkdir(parents=True, exist_ok=True)
        for f in files:
            with contextlib.suppress(OSError):
                f.replace(directory / f.name)

    def close(self) -> None:
        for server in list(self.servers.values()):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                self._stop_server(server)


def lab_topology(experiment: Experiment, lab_name: str, addresses: Sequence[str],
                 offload_flag: bool | None = None) -> tuple[dict[str, Any], bool | None]:
    """The scenario's topology for the spec, and the lab-wide offloads to start it with.

    The lab-wide setting (`offload_flag`, the command line's, over the spec's `[lab] offload`)
    goes to the emulator's --offload; a host's own (`[lab.host_offload]`) into its topology
    entry, where it wins: a spec without per-host settings runs on any emulator build."""
    spec = experiment.spec
    topology = experiment.scenario.topology(lab_name, experiment.params, addresses, spec.seed)
    topology["tcp_congestion"] = spec.transport.tcp_cc
    for entry in topology["hosts"]:
        if entry["name"] in spec.lab.host_offload:
            entry["offload"] = spec.lab.host_offload[entry["name"]]
    return topology, offload_flag if offload_flag is not None else spec.lab.offload


class LabExecutor:
    """Runs an experiment in one real lab: the scenario's topology, its servers; each run by its
    workload's executor in `workloads` (`protolab.run.executors.EXECUTORS`)."""

    def __init__(self, *, workloads: Mapping[str, WorkloadExecutor], binary: str | Path | None = None,
                 lab_name: str | None = None, emu_args: Sequence[str] = (), delay_compensation: bool = True,
                 offload: bool | None = None) -> None:
        self.workloads = workloads
        self._binary_arg = binary
        self.lab_name = lab_name or "pr" + secrets.token_hex(3)
        self.emu_args = list(emu_args)
        # The command line's --offload/--no-offload: overrides the spec's lab-wide `[lab] offload`,
        # not its per-host settings (docs/spec.md, "Lab").
        self.offload = offload
        # Measure the lab's own path latency at start and deduct it (docs/emulator.md).
        self.delay_compensation = delay_compensation

    @property
    def binary(self) -> Path:
        return find_binary(self._binary_arg)

    def provenance(self) -> dict[str, Any]:
        env = provenance.environment({
            "protolab-net": [str(self.binary), "--version"],
            "iperf3": ["iperf3", "--version"],
        })
        env["offload_flag"] = self.offload  # --offload/--no-offload (None: not given)
        return env

    @contextlib.contextmanager
    def session(self, experiment: Experiment, results_dir: Path) -> Iterator[LabSession]:
        binary = self.binary
        pages = write_pages(experiment, results_dir)
        addresses = sorted({address for page in experiment.pages.values() for address in page.addresses})
        scenario = experiment.scenario
        mptcp = scenario.workload_for(experiment.params).mptcp(experiment.axes["mode"], experiment.params)
        if mptcp:
            addresses.append(MPTCP_SIGNAL_ADDRESS)
        spec = experiment.spec
        topology, lab_offload = lab_topology(experiment, self.lab_name, addresses, self.offload)
        workdir = scratch_dir("run")
        try:
            with Lab(topology, binary=binary, emu_args=self.emu_args, offload=lab_offload) as lab:
                # Links are as the topology made them (ideal) until the first run configures them.
                calibration: dict[str, Any] = {"delay_compensation": self.delay_compensation}
                if self.emu_args:
                    calibration["emu_args"] = self.emu_args
                # Each host's offloads as the emulator reports them in force (an emulator that
                # does not report them: as asked, None for the emulator's default).
                calibration["offload"] = {
                    entry["name"]: entry.get("offload", spec.lab.offload_for(entry["name"], self.offload))
                    for entry in lab.topology.get("hosts", [])}
                if self.delay_compensation:
                    floor = lab.calibrate_delay(scenario.client, scenario.server)
                    calibration.update(floor_rtt_ms=floor, compensation_ns=lab.info().get("delay_compensation_ns"),
                                       between=[scenario.client, scenario.server])
                _write_json(results_dir / "calibration.json", calibration)
                if mptcp:
                    lab.enable_mptcp(scenario.client, scenario.server, MPTCP_SIGNAL_ADDRESS)
                session = LabSession(experiment, lab, binary, pages, workdir, self.workloads)
                try:
                    scenario.start(session.ctx, experiment.params)
                    _write_json(results_dir / "topology.json", lab.topology)
                    yield session
                finally:
                    session.close()
                    scenario.stop(session.ctx, experiment.params)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
