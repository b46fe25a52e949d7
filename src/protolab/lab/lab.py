"""The `Lab` context manager: one running `protolab-net emu` and the processes inside its hosts."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from protolab.errors import LabError, ToolError
from protolab.files import scratch_dir
from protolab.lab.binary import find_binary
from protolab.lab.control import ControlClient
from protolab.lab.events import DocumentError, NotReady, await_event
from protolab.measure.tools import parse_ping
from protolab.results.generated.event_ready import Ready

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 30.0
# Processes in a lab's hosts run at this nice value: ahead of other work on the machine (a
# build, a CPU hog), which would otherwise delay the endpoints' wake-ups by milliseconds.
LAB_NICE = -10
CALIBRATION_PROBES = 200
# A measured floor above this is not the lab's own latency (see calibrate_delay).
CALIBRATION_MAX_FLOOR_MS = 1.0
SHUTDOWN_TIMEOUT_S = 15.0
CLEANUP_TIMEOUT_S = 60.0
PROCESS_STOP_TIMEOUT_S = 3.0
# The contract says `emu run` exits with status 2 on an error before the ready line, having
# removed what it created. The safety-net cleanup must then not run: the error may be a name
# collision, and cleaning up by name would destroy the other, healthy lab.
EMU_STARTUP_ERROR_STATUS = 2


def _lab_name_of(topology: Mapping[str, Any] | Path) -> str | None:
    """Best effort: the lab name, known before the emulator answers (for the safety net)."""
    if isinstance(topology, Mapping):
        name = topology.get("lab")
        return name if isinstance(name, str) else None
    try:
        text = topology.read_text()
        data = json.loads(text) if text.lstrip().startswith("{") else tomllib.loads(text)
    except (OSError, ValueError):
        return None
    name = data.get("lab") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C back while tearing down, then deliver it: teardown must not be cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


def _signal_group(group: int, sig: signal.Signals) -> bool:
    """Send `sig` to a process group; False when no process of it is left."""
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        return False
    return True


def _stop_process(process: subprocess.Popen[Any], timeout: float = PROCESS_STOP_TIMEOUT_S) -> None:
    """Stop a process started in a session of its own (`start_new_session`: its pid is its
    process group) and everything it started: SIGTERM to the group, SIGKILL to the group after
    `timeout`, the leader reaped, and a last SIGKILL for any child that outlived it (a child
    still holding the server's socket makes the next server's bind fail). Only this group's
    processes are signalled, by its id."""
    group = process.pid
    if process.poll() is None:
        _signal_group(group, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(group, signal.SIGKILL)
            process.wait(timeout=timeout)
    # The leader is reaped; members of its group (its children) may remain. While any does,
    # the kernel does not hand its id to a new process, so this signals only them.
    deadline = time.monotonic() + timeout
    while _signal_group(group, signal.SIGKILL) and _group_has_live_members(group):
        if time.monotonic() >= deadline:
            log.warning("process group %d still has members after SIGKILL", group)
            return
        time.sleep(0.01)


def _group_has_live_members(group: int) -> bool:
    """Whether a process other than a zombie is in the group (zombies hold no sockets or files;
    they wait for their reaper, which may not be us)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # exited meanwhile
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ')'.
        fields = text[text.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[2] == str(group) and fields[0] != "Z":
            return True
    return False


# Public: scenarios stop their background processes (cross traffic) with it.
stop_process = _stop_process


class Lab:
    """A running emulator lab.

    ```
    with Lab(dumbbell("demo", ["client"], ["server"])) as lab:
        lab.run("client", ["ping", "-c", "3", lab.address("server")])
    ```

    Teardown always runs (also on exceptions and Ctrl-C): processes started with `spawn` are
    stopped, the emulator is asked to shut down, and `protolab-net emu cleanup --lab NAME`
    removes whatever may be left.
    """

    def __init__(
        self,
        topology: Mapping[str, Any] | Path,
        *,
        state_dir: Path | None = None,
        binary: str | os.PathLike[str] | None = None,
        ready_timeout: float = READY_TIMEOUT_S,
        emu_args: Sequence[str] = (),
        nice: int = LAB_NICE,
        offload: bool | None = None,
    ) -> None:
        """`emu_args` go to `protolab-net emu run` as they are (e.g. `["--spin-us", "0"]`);
        every process run in the lab's hosts gets `nice` (docs/emulator.md, "Under load");
        `offload` turns the TUN devices' segmentation offloads on or off (None: the binary's
        default; docs/emulator.md, "Segmentation offloads"); a host's own `offload` in the
        topology (`host(..., offload=...)`) wins over it."""
        self._topology_input = topology
        self.nice = nice
        self.delay_floor_ms: float | None = None  # the measured path latency (calibrate_delay)
        self._emu_args = list(emu_args)
        if offload is not None:
            self._emu_args += ["--offload", "on" if offload else "off"]
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self._binary_arg = binary
        self.ready_timeout = ready_timeout
        self.name: str | None = _lab_name_of(topology)
        self.binary: Path | None = None
        self.ready: Ready | None = None
        self.topology: dict[str, Any] = dict(topology) if isinstance(topology, Mapping) else {}
        self._process: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self._control: ControlClient | None = None
        self._spawned: list[subprocess.Popen[Any]] = []
        # Hosts added beside the emulator's (clients behind a NAT, protolab.lab.nat): name -> namespace.
        self._attached: dict[str, str] = {}
        self._owns_lab = False
        self._closed = False

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> Lab:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        # An exception is already on its way out: report teardown trouble, but never mask it.
        self._close_quietly()

    def start(self) -> None:
        """Build the lab; return when the emulator has printed its ready line."""
        self.binary = find_binary(self._binary_arg)
        self._workdir = scratch_dir("lab")
        try:
            topology_file = self._topology_file()
            self._launch(topology_file)
            self.ready = self._await_ready()
            self.name = self.ready.lab
            self._control = ControlClient(Path(self.ready.control))
            self._control.connect()
            normalized = self.info().get("topology")
            if isinstance(normalized, dict):
                self.topology = normalized
        except BaseException:
            self._close_quietly()
            raise

    def _topology_file(self) -> Path:
        assert self._workdir is not None  # start() created it just before
        if isinstance(self._topology_input, Mapping):
            target = self._workdir / f"{self.name or 'lab'}.topology.json"
            target.write_text(json.dumps(self._topology_input, indent=2))
            return target
        return Path(self._topology_input)

    def _launch(self, topology_file: Path) -> None:
        assert self._workdir is not None and self.binary is not None
        # The emulator ends with us, so even a SIGKILLed runner leaves no lab behind.
        argv = [str(self.binary), "emu", "run", "--topology", str(topology_file), "--owner-pid", str(os.getpid())]
        if self.state_dir is not None:
            argv += ["--state-dir", str(self.state_dir)]
        argv += self._emu_args
        # Files, not pipes: the emulator logs to stderr for its whole life and nobody must have
        # to drain it. Its own session, so a terminal's Ctrl-C reaches only us and the teardown
        # happens in order (spawned processes first, then the emulator).
        with (
            open(self._workdir / "emu.stdout", "wb") as stdout,
            open(self._workdir / "emu.stderr", "wb") as stderr,
        ):
            try:
                self._process = subprocess.Popen(
                    argv, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, start_new_session=True
                )
            except OSError as exc:
                raise LabError(f"cannot start {self.binary}: {exc}") from exc
        self._owns_lab = True

    def _await_ready(self) -> Ready:
        assert self._process is not None and self._workdir is not None
        try:
            return await_event(self._process, self._workdir / "emu.stdout", Ready, lambda line: "ready" in line,
                               self.ready_timeout)
        except DocumentError as exc:
            raise LabError(f"emulator printed an unexpected ready line: {exc}") from exc
        except NotReady as exc:
            if exc.status == EMU_STARTUP_ERROR_STATUS:
                self._owns_lab = False
            if exc.status is not None:
                raise LabError(f"protolab-net emu run exited with status {exc.status}: {self.emulator_stderr()}") from None
            raise LabError(
                f"protolab-net emu run was not ready after {self.ready_timeout:.0f} s: {self.emulator_stderr()}"
            ) from None

    def emulator_stderr(self, limit: int = 4000) -> str:
        """What the emulator wrote on stderr so far (tail), for error messages."""
        if self._workdir is None:
            return ""
        try:
            text = (self._workdir / "emu.stderr").read_text(errors="replace").strip()
        except OSError:
            return ""
        return text[-limit:] if text else "(no output on stderr)"

    def _close_quietly(self) -> None:
        try:
            self.close()
        except (LabError, OSError) as teardown_error:
            log.warning("lab %s teardown: %s", self.name, teardown_error)

    def close(self) -> None:
        """Tear everything down; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        with _sigint_deferred():
            try:
                self._stop_spawned()
            finally:
                try:
                    self._stop_emulator()
                finally:
                    try:
                        self._cleanup_leftovers()
                    finally:
                        self._remove_workdir()

    def _stop_spawned(self) -> None:
        for process in reversed(self._spawned):
            try:
                _stop_process(process)
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.warning("could not stop %s: %s", process.args, exc)

    def _stop_emulator(self) -> None:
        if self._control is not None:
            with contextlib.suppress(LabError):
                self._control.request({"cmd": "shutdown"})
            self._control.close()
        if self._process is None or self._process.poll() is not None:
            return
        try:
            self._process.wait(timeout=SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning("emulator of lab %s did not exit after shutdown; terminating it", self.name)
            _stop_process(self._process, timeout=SHUTDOWN_TIMEOUT_S)

    def _cleanup_leftovers(self) -> None:
        if not self._owns_lab or self.name is None or self.binary is None:
            return
        cleanup_lab(self.name, binary=self.binary, state_dir=self.state_dir)

    def _remove_workdir(self) -> None:
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)

    # ----------------------------------------------------------------- hosts

    @property
    def pid(self) -> int:
        return self._ready().pid

    @property
    def start_unix_ns(self) -> int:
        return self._ready().start_unix_ns

    def _ready(self) -> Ready:
        if self.ready is None:
            raise LabError("the lab is not running")
        return self.ready

    def attach_namespace(self, host: str, namespace: str) -> None:
        """Makes a namespace made beside the emulator's a host of the lab for `run` and `spawn`."""
        self._attached[host] = namespace

    def detach_namespace(self, host: str) -> None:
        self._attached.pop(host, None)

    def namespace(self, host: str) -> str:
        if host in self._attached:
            return self._attached[host]
        try:
            return self._ready().namespaces[host]
        except KeyError:
            raise LabError(f"lab {self.name} has no host {host!r}") from None

    def addresses(self, host: str) -> list[str]:
        for entry in self.topology.get("hosts", []):
            if entry.get("name") == host:
                return list(entry.get("addresses", []))
        raise LabError(f"lab {self.name} has no host {host!r}")

    def address(self, host: str) -> str:
        """The host's primary (source) address."""
        addresses = self.addresses(host)
        if not addresses:
            raise LabError(f"host {host!r} has no address")
        return addresses[0]

    def _in_namespace(self, host: str, argv: Sequence[str], cgroup: Path | None = None) -> list[str]:
        # nice execs ip, which execs the command: still one pid.
        command = [*(["nice", "-n", str(self.nice)] if self.nice else []),
                   "ip", "netns", "exec", self.namespace(host), *map(str, argv)]
        if cgroup is None:
            return command
        # Join the cgroup first: `ip netns exec` mounts a fresh /sys, which hides the cgroup
        # hierarchy. The shell writes its pid, then execs ip, which execs the command: one pid.
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup / "cgroup.procs"), *command]

    def run(
        self,
        host: str,
        argv: Sequence[str | os.PathLike[str]],
        *,
        timeout: float = 60.0,
        check: bool = True,
        input: str | None = None,
        cgroup: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command inside a host and capture its text output; with `cgroup` (a cgroup
        directory) the command runs in that cgroup."""
        command = self._in_namespace(host, [str(a) for a in argv], cgroup)
        try:
            completed = _run_in_own_group(command, timeout, input)
        except subprocess.TimeoutExpired as exc:
            raise ToolError(f"`{shlex.join(map(str, argv))}` in host {host} timed out after {timeout:g} s") from exc
        except OSError as exc:
            raise ToolError(f"cannot run {command[0]}: {exc}") from exc
        if check and completed.returncode != 0:
            detail = (completed.stderr.strip() or completed.stdout.strip())[-2000:]
            raise ToolError(
                f"`{shlex.join(map(str, argv))}` in host {host} exited with status {completed.returncode}: {detail}"
            )
        return completed

    def spawn(
        self,
        host: str,
        argv: Sequence[str | os.PathLike[str]],
        *,
        stdout: Any = subprocess.DEVNULL,
        stderr: Any = subprocess.DEVNULL,
        cgroup: Path | None = None,
        **popen_kwargs: Any,
    ) -> subprocess.Popen[Any]:
        """Start a background process inside a host (in `cgroup`, if given); the lab stops it at
        teardown."""
        command = self._in_namespace(host, [str(a) for a in argv], cgroup)
        # A session of its own: the process and whatever it starts form one process group,
        # which `stop` (and teardown) ends as a whole.
        popen_kwargs.setdefault("start_new_session", True)
        try:
            # `ip netns exec` execs the command, so the Popen pid is the command's own pid.
            process = subprocess.Popen(command, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, **popen_kwargs)
        except OSError as exc:
            raise ToolError(f"cannot start {command[0]}: {exc}") from exc
        self._spawned.append(process)
        return process

    def stop(self, process: subprocess.Popen[Any], timeout: float = PROCESS_STOP_TIMEOUT_S) -> None:
        """Stop a process started with `spawn`, with its process group, and reap it: when this
        returns, nothing it started runs (or holds its sockets) any more."""
        try:
            _stop_process(process, timeout)
        finally:
            if process.poll() is not None:
                with contextlib.suppress(ValueError):
                    self._spawned.remove(process)

    def enable_mptcp(self, client: str, server: str, signal_address: str, port: int = 443, subflows: int = 2) -> None:
        """Let MPTCP connections from `client` to `server` open `subflows` subflows.

        The server announces `signal_address` (one of its addresses, not an origin's) with
        `port` (ADD_ADDR); the client accepts the announcement and joins it, so an MPTCP
        connection gets a second subflow from the same client address to another server
        address: a different 5-tuple that ECMP may route over another path, as 001's ndiffports
        subflows were. Namespaces are the lab's own, so the settings go with the lab.
        """
        if signal_address not in self.addresses(server):
            raise LabError(f"MPTCP: {signal_address} is not an address of host {server!r}")
        extra = str(subflows - 1)
        self.run(server, ["ip", "mptcp", "limits", "set", "subflow", extra, "add_addr_accepted", "0"])
        self.run(server, ["ip", "mptcp", "endpoint", "flush"])
        self.run(server, ["ip", "mptcp", "endpoint", "add", signal_address, "dev", "pl0", "port", str(port), "signal"])
        self.run(client, ["ip", "mptcp", "limits", "set", "subflow", extra, "add_addr_accepted", extra])

    # ----------------------------------------------------------------- control

    def request(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if self._control is None:
            raise LabError("the lab is not running")
        return self._control.request(dict(request))

    def info(self) -> dict[str, Any]:
        return self.request({"cmd": "info"})

    def counters(self) -> dict[str, Any]:
        return self.request({"cmd": "counters"})

    def reset_counters(self) -> None:
        self.request({"cmd": "reset_counters"})

    def calibrate_delay(self, left: str, right: str, probes: int = CALIBRATION_PROBES) -> float:
        """Measures the lab's own round-trip latency between two hosts (reading from the TUN,
        the model, writing, the kernels' paths) with `probes` pings 2 ms apart, and sets the
        emulator's delay compensation to half of the mean (each direction deducts its half
        from the configured delays, docs/emulator.md, "Delay compensation"). Call it while
        the route between the two hosts has no configured delay, jitter or loss (as a lab
        starts); a floor above 1 ms is not the lab's and deducts nothing. Returns the measured
        floor in ms (also `delay_floor_ms`)."""
        self.request({"cmd": "set_delay_compensation", "ns": 0})
        argv = ["ping", "-q", "-n", "-c", str(probes), "-i", "0.002", "-W", "2", self.address(right)]
        result = parse_ping(self.run(left, argv, timeout=30 + probes * 0.01, check=False).stdout)
        if result.received < probes // 2 or not math.isfinite(result.rtt_mean_ms):
            raise LabError(f"delay calibration: {result.received} of {probes} pings from {left} to {right} answered")
        self.delay_floor_ms = result.rtt_mean_ms
        if result.rtt_mean_ms <= CALIBRATION_MAX_FLOOR_MS:
            self.request({"cmd": "set_delay_compensation", "ns": round(result.rtt_mean_ms * 1e6 / 2)})
        else:
            # Not the lab's own latency: the route has a configured delay (or the machine is
            # swamped). Deduct nothing rather than part of a configured delay.
            log.warning("delay calibration: %.3f ms between %s and %s is not a floor; no compensation",
                        result.rtt_mean_ms, left, right)
        return result.rtt_mean_ms

    def set_link(
        self, links: str | Sequence[str], *, seed: int | None = None, **params: Any
    ) -> dict[str, dict[str, Any]]:
        """Change link directions live (`params` as `link()` builds them: `rate_bps`,
        `delay_ns`, ...); a parameter given as None removes it (jitter, loss). Returns each
        link's parameters now in force, complete and in numbers (docs/control.md).

        `seed` restarts the links' random streams, so the packets that follow meet the same
        loss and jitter draws whatever crossed the links before (reproducible measurements).
        """
        target: str | list[str] = links if isinstance(links, str) else list(links)
        request: dict[str, Any] = {"cmd": "set_link", "link": target, "params": params}
        if seed is not None:
            request["seed"] = seed
        effective = self.request(request).get("params")
        if not isinstance(effective, dict):
            raise LabError(f"set_link {target}: the emulator's reply has no parameters")
        return effective

    def set_routing(self, mode: str, pins: Sequence[Mapping[str, str]] | None = None) -> None:
        """Change path selection; `pins=None` means no pins."""
        self.request({"cmd": "set_routing", "mode": mode, "pins": [dict(p) for p in pins or []]})

    def pcap_start(self, host: str, path: Path) -> None:
        self.request({"cmd": "pcap_start", "host": host, "path": str(path)})

    def pcap_stop(self, host: str) -> dict[str, Any]:
        """Close a capture; the reply carries `packets` and `dropped`."""
        return _writer_summary(self.request({"cmd": "pcap_stop", "host": host}), "capture", "packets")

    def events_start(self, path: Path) -> None:
        self.request({"cmd": "events_start", "path": str(path)})

    def events_stop(self) -> dict[str, Any]:
        """Close the event log; the reply carries `events` and `dropped`."""
        return _writer_summary(self.request({"cmd": "events_stop"}), "log", "events")

    def await_quiet(self, *, within: float = 10.0, poll: float = 0.05) -> None:
        """Wait until no packet is inside any link (waiting in its queue or propagating), e.g.
        before changing routing between tests, or before a run's captures stop."""
        deadline = time.monotonic() + within
        while True:
            links = self.counters().get("links", {}).values()
            inside = sum(link.get("queue_packets", 0) + link.get("in_flight_packets", 0) for link in links)
            if inside == 0:
                return
            if time.monotonic() >= deadline:
                raise LabError(f"lab {self.name}: {inside} packets still inside the links after {within:g} s")
            time.sleep(poll)

def _run_in_own_group(command: list[str], timeout: float, input: str | None) -> subprocess.CompletedProcess[str]:
    """`subprocess.run` with the command in a process group of its own, which is stopped as a
    whole when the time runs out or the caller is interrupted (subprocess.run would kill only
    the command, leaving what it started: a browser's renderers, say)."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except BaseException:  # the timeout, KeyboardInterrupt (also SIGTERM, cli.py): nothing may stay behind
            _stop_process(process)
            raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _writer_summary(reply: dict[str, Any], nested: str, count_field: str) -> dict[str, Any]:
    """Flatten the emulator's `{capture|log: {written, dropped}}` (docs/control.md) into
    `{packets|events, dropped}` for Python callers."""
    summary = dict(reply)
    inner = reply.get(nested)
    if count_field not in summary and isinstance(inner, dict):
        summary[count_field] = inner.get("written")
        summary.setdefault("dropped", inner.get("dropped"))
    return summary


def cleanup_lab(
    name: str, *, binary: str | os.PathLike[str] | None = None, state_dir: Path | None = None
) -> None:
    """`protolab-net emu cleanup --lab NAME`: remove what a dead lab left behind (idempotent)."""
    executable = Path(binary) if binary is not None else find_binary()
    argv = [str(executable), "emu", "cleanup", "--lab", name]
    if state_dir is not None:
        argv += ["--state-dir", str(state_dir)]
    try:
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=CLEANUP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError(f"protolab-net emu cleanup --lab {name} failed: {exc}") from exc
    if completed.returncode != 0:
        raise LabError(
            f"protolab-net emu cleanup --lab {name} exited with status {completed.returncode}: "
            f"{completed.stderr.strip()[-2000:]}"
        )
