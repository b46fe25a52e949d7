"""The experiment runner: matrix, ordering, run keys, resume, and the lab executor (docs/spec.md).

An experiment (a validated spec) expands into conditions (every axis except mode and page),
each repeated `repetitions` times; a (condition, repetition) pair is a *block*, and inside a
block every (mode, page) pair runs once, in an order shuffled with a seed derived from the
spec's seed, the condition and the repetition, so slow drift of the machine favours no protocol.

Every run has a stable key: a hash of its parameters (scenario and its parameters, condition,
mode, page and its manifest digest, transport options, spec seed) and its repetition. The
store's finished keys are skipped, so running the same spec again resumes where it stopped.

The executor does the work of one run. `LabExecutor` builds the scenario's topology once (one
`Lab`), starts `protolab-net serve` once in the server host, and for each run: sets every link
of the scenario with the run's seed (so each run meets the same loss draws as the other modes of
its block), resets the emulator counters, runs `protolab-net load` in the client host, and
reads the counters. Tests use a fake executor with the same interface.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import random
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from protolab import provenance
from protolab.errors import LabError, ProtolabError, ToolError
from protolab.files import write_text_atomically
from protolab.lab import Lab, find_binary
from protolab.scenarios import Condition, Context
from protolab.spec import STANDARD_AXES, Experiment, Page, uses_mptcp
from protolab.store import ResultsStore, RunRecord

KEY_LENGTH = 16
SERVER_READY_TIMEOUT_S = 30.0
LOAD_GRACE_S = 30.0  # beyond the load's own --timeout-ms before the runner gives up on it
QUIET_WAIT_S = 5.0
SERVER_SAMPLES_SETTLE_S = 1.0
_CONDITION_AXES = ("bandwidth_mbps", "rtt_ms", "loss_pct", "buffer")
# The server's extra address that MPTCP connections join as their second subflow (in the
# server side's subnet, outside the corpus networks).
MPTCP_SIGNAL_ADDRESS = "10.77.1.250"


class RunnerError(ProtolabError):
    """The runner could not set up or carry on an experiment."""


# ---------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class PlannedRun:
    key: str
    condition: Condition
    condition_index: int
    repetition: int
    mode: str
    page: Page
    order_index: int
    link_seed: int
    params: dict[str, Any] = field(hash=False, compare=False)

    def label(self) -> str:
        return f"{self.mode} {self.page.name} | {self.condition.label()} | rep {self.repetition}"


def derived_seed(*parts: Any) -> int:
    """A 63-bit seed from the spec seed and a purpose; stable across Python versions and runs."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def run_key(key_params: dict[str, Any]) -> str:
    text = json.dumps(key_params, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


def conditions(experiment: Experiment) -> list[Condition]:
    """Every condition of the matrix, in axis order (bandwidth, RTT, loss, buffer, extras)."""
    names = [*_CONDITION_AXES, *experiment.extra_axes]
    product = itertools.product(*(experiment.axes[name] for name in names))
    return [Condition.from_axes(dict(zip(names, values, strict=True))) for values in product]


def plan(experiment: Experiment) -> list[PlannedRun]:
    """Every run of the experiment in execution order."""
    spec = experiment.spec
    transport = spec.transport.model_dump(mode="json")
    scenario_params = experiment.params.model_dump(mode="json")
    pairs = [(mode, experiment.pages[ref]) for mode in experiment.axes["mode"] for ref in experiment.axes["page"]]
    runs: list[PlannedRun] = []
    for index, condition in enumerate(conditions(experiment)):
        condition_params = condition.as_params()
        for repetition in range(spec.repetitions):
            block = list(pairs)
            random.Random(derived_seed(spec.seed, "order", condition_params, repetition)).shuffle(block)
            link_seed = derived_seed(spec.seed, "link", condition_params, repetition)
            for mode, page in block:
                key_params = {
                    "scenario": experiment.scenario.name,
                    "scenario_params": scenario_params,
                    "condition": condition_params,
                    "mode": mode,
                    "page": page.name,
                    "page_digest": page.digest,
                    "transport": transport,
                    "spec_seed": spec.seed,
                    "repetition": repetition,
                }
                params = {
                    "scenario": experiment.scenario.name,
                    **condition_params,
                    "mode": mode,
                    "page": page.name,
                    "repetition": repetition,
                    "seed": link_seed,
                    "tcp_cc": spec.transport.tcp_cc,
                    "quic_cc": spec.transport.quic_cc,
                    "order_index": len(runs),
                    "h1_connections": spec.transport.h1_connections,
                    "scheduler": spec.transport.scheduler,
                    "page_ref": page.ref,
                    "page_bytes": page.size_bytes,
                    "spec_seed": spec.seed,
                    "timeout_s": spec.timeout_s,
                }
                runs.append(PlannedRun(
                    key=run_key(key_params), condition=condition, condition_index=index, repetition=repetition,
                    mode=mode, page=page, order_index=len(runs), link_seed=link_seed, params=params,
                ))
    return runs


def estimate_s(run: PlannedRun) -> float:
    """A rough duration of a run (for the dry run and the demo's budget): handshakes and the
    dependency depth in RTTs, the bytes at the bottleneck rate (slowed by loss), set-up."""
    condition = run.condition
    rtt_s = condition.rtt_ms / 1e3
    size = run.page.size_bytes
    if condition.bandwidth_mbps is None:
        transfer = size * 8 / 2e9
    else:
        transfer = size * 8 / (condition.bandwidth_mbps * 1e6)
    if condition.loss_pct > 0:
        transfer *= 1 + condition.loss_pct  # 2% loss roughly triples a single connection
    return 0.6 + 8 * rtt_s + 1.15 * transfer


# ---------------------------------------------------------------------- executors


@dataclass
class RunOutcome:
    status: str  # ok | failed | timeout
    error: str | None
    page_load: dict[str, Any] | None = None
    link_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    link_counters: dict[str, Any] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)


class Session(Protocol):
    def enter(self, condition: Condition) -> None: ...

    def leave(self, condition: Condition) -> None: ...

    def execute(self, run: PlannedRun, run_dir: Path) -> RunOutcome: ...


class Executor(Protocol):
    def session(self, experiment: Experiment, results_dir: Path) -> contextlib.AbstractContextManager[Session]: ...

    def provenance(self) -> dict[str, Any]: ...


def _write_json(path: Path, value: Any) -> None:
    write_text_atomically(path, json.dumps(value, indent=2, sort_keys=True))


def write_pages(experiment: Experiment, results_dir: Path) -> dict[str, Path]:
    """Every page's manifest under RESULTS/pages/<name>.json (served and loaded from there)."""
    files: dict[str, Path] = {}
    for ref, page in experiment.pages.items():
        target = results_dir / "pages" / f"{page.name}.json"
        _write_json(target, page.manifest)
        files[ref] = target.resolve()
    return files


def _tail(path: Path, limit: int = 1500) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    return text[-limit:]


class LabSession:
    """A running lab with its page server: executes runs of one experiment."""

    def __init__(self, experiment: Experiment, lab: Lab, binary: Path, pages: dict[str, Path], workdir: Path) -> None:
        self.experiment = experiment
        self.lab = lab
        self.binary = binary
        self.pages = pages
        self.tls_dir = workdir / "tls"
        self.ctx = Context(lab=lab, workdir=workdir)
        self.scenario = experiment.scenario
        self.params = experiment.params
        self.mptcp = uses_mptcp(experiment.axes["mode"])
        self.server_samples = workdir / "server-samples"
        self.server_qlog = workdir / "server-qlog"
        self._busy = False

    # -- set-up

    def start_server(self) -> None:
        spec = self.experiment.spec
        argv: list[str | Path] = [self.binary, "serve"]
        for manifest in self.pages.values():
            argv += ["--manifest", manifest]
        argv += ["--tls-dir", self.tls_dir, "--tcp-cc", spec.transport.tcp_cc, "--lab", self.lab.name or "lab"]
        argv += ["--quic-cc", spec.transport.quic_cc]
        if self.mptcp:
            # MPTCP listeners also take plain TCP clients (they fall back to TCP).
            argv += ["--mptcp"]
        if spec.artifacts.samples:
            # The server samples every connection; each run takes its connections' files.
            argv += ["--samples", self.server_samples,
                     "--sample-interval-ms", str(spec.artifacts.sample_interval_ms)]
        if spec.artifacts.qlog:
            argv += ["--qlog", self.server_qlog]
        log = self.ctx.workdir / "serve.stdout"
        errors = self.ctx.workdir / "serve.stderr"
        with log.open("wb") as out, errors.open("wb") as err:
            process = self.lab.spawn(self.scenario.server, argv, stdout=out, stderr=err)
        deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
        while True:
            text = log.read_text(errors="replace")
            for line in text.splitlines():
                with contextlib.suppress(json.JSONDecodeError):
                    event = json.loads(line)
                    if isinstance(event, dict) and event.get("event") == "listening":
                        return
            if process.poll() is not None:
                raise ToolError(
                    f"protolab-net serve exited with status {process.returncode} before listening: "
                    f"{_tail(errors) or '(no output)'}"
                )
            if time.monotonic() > deadline:
                raise ToolError(f"protolab-net serve was not listening after {SERVER_READY_TIMEOUT_S:g} s: "
                                f"{_tail(errors) or '(no output)'}")
            time.sleep(0.05)

    # -- conditions

    def _set_links(self, condition: Condition, seed: int | None) -> dict[str, dict[str, Any]]:
        effective: dict[str, dict[str, Any]] = {}
        for name, params in self.scenario.links(self.params, condition).items():
            reply = self.lab.set_link(name, seed=seed, **params)
            # What was asked (None = removed, e.g. no loss) completed by the emulator's effective values.
            effective[name] = {**params, **((reply.get("params") or {}).get(name) or {})}
        return effective

    def enter(self, condition: Condition) -> None:
        self._set_links(condition, None)
        self.scenario.enter(self.ctx, self.params, condition)
        self._busy = self.scenario.busy(self.params, condition)

    def leave(self, condition: Condition) -> None:
        self.scenario.leave(self.ctx, self.params, condition)
        self._busy = False

    # -- one run

    def execute(self, run: PlannedRun, run_dir: Path) -> RunOutcome:
        spec = self.experiment.spec
        if not self._busy:
            # Stragglers of the previous load (FINs, retransmissions) must not count in this one.
            with contextlib.suppress(LabError):
                self.lab.await_quiet(within=QUIET_WAIT_S)
        link_config = self._set_links(run.condition, run.link_seed)
        self.lab.reset_counters()
        client = self.scenario.client
        capture = spec.artifacts.pcap
        if capture:
            self.lab.pcap_start(client, (run_dir / "client.pcap").resolve())
        result_file = run_dir / "result.json"
        argv: list[str | Path] = [
            self.binary, "load", "--manifest", self.pages[run.page.ref], "--mode", run.mode,
            "--ca", self.tls_dir / "ca.pem", "--out", result_file.resolve(),
            "--scheduler", spec.transport.scheduler, "--h1-connections", str(spec.transport.h1_connections),
            "--timeout-ms", str(int(spec.timeout_s * 1000)),
            "--tcp-cc", spec.transport.tcp_cc, "--quic-cc", spec.transport.quic_cc,
        ]
        if self.scenario.seeded_source_ports(self.params):
            argv += ["--source-port-seed", str(run.link_seed)]
        if spec.artifacts.samples:
            argv += ["--samples", (run_dir / "samples").resolve(),
                     "--sample-interval-ms", str(spec.artifacts.sample_interval_ms)]
        if spec.artifacts.qlog:
            argv += ["--qlog", (run_dir / "qlog").resolve()]
        try:
            completed = self.lab.run(client, argv, timeout=spec.timeout_s + LOAD_GRACE_S, check=False)
        finally:
            if capture:
                with contextlib.suppress(LabError):
                    self.lab.pcap_stop(client)
        counters = self.lab.counters()
        (run_dir / "load.stderr").write_text(completed.stderr)
        outcome = RunOutcome("failed", None, link_config=link_config, link_counters=counters)
        if completed.returncode == 2 or not result_file.exists():
            detail = (completed.stderr.strip() or completed.stdout.strip())[-1500:] or "(no output)"
            outcome.error = f"protolab-net load exited with status {completed.returncode}: {detail}"
            return outcome
        try:
            page_load = json.loads(result_file.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            outcome.error = f"{result_file}: unreadable load result: {exc}"
            return outcome
        outcome.page_load = page_load
        status = page_load.get("status")
        outcome.status = status if status in ("ok", "failed", "timeout") else "failed"
        outcome.error = page_load.get("error") if outcome.status != "ok" else None
        if outcome.status != "ok" and not outcome.error:
            outcome.error = f"load status {status!r}"
        if spec.artifacts.samples:
            self._take_server_files(page_load, "samples_file", self.server_samples, run_dir / "samples")
            outcome.samples = read_samples(run_dir / "samples")
        if spec.artifacts.qlog:
            self._take_server_files(page_load, "qlog_file", self.server_qlog, run_dir / "qlog")
        return outcome

    def _take_server_files(self, page_load: dict[str, Any], field: str, source: Path, directory: Path) -> None:
        """Moves the server's files (samples or qlogs) of this load's connections next to the
        client's: both ends name a connection's files by the same connection id, so the
        server's file is the client's (`connections[].samples_file`, `qlog_file`) with the
        other role. The server ends a file when it sees the connection closed (soon after the
        load's end), so wait briefly for the files to stop growing."""
        client_files = [c.get(field) for c in page_load.get("connections") or [] if isinstance(c, dict)]
        files = [source / ("server-" + Path(f).name.removeprefix("client-")) for f in client_files if isinstance(f, str)]
        deadline = time.monotonic() + SERVER_SAMPLES_SETTLE_S
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


def read_samples(directory: Path) -> list[dict[str, Any]]:
    """Every sample row (a line with `t_unix_ns`) of the samples files under a directory
    (docs/samples.md), with its file header's `conn`, `role` and `transport`; TCP's `retrans`
    is the store's `retransmits`."""
    samples: list[dict[str, Any]] = []
    if not directory.is_dir():
        return samples
    for file in sorted(directory.rglob("*.ndjson")):
        header: dict[str, Any] = {}
        for line in file.read_text(errors="replace").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(line)
                if not isinstance(value, dict):
                    continue
                if value.get("schema") == "protolab.samples":
                    header = {k: value.get(k) for k in ("conn", "role", "transport")}
                elif isinstance(value.get("t_unix_ns"), int):
                    row = {**header, **value}
                    if "retrans" in row:
                        row["retransmits"] = row.pop("retrans")
                    samples.append(row)
    return samples


class LabExecutor:
    """Runs an experiment in one real lab: the scenario's topology, one page server."""

    def __init__(self, *, binary: str | Path | None = None, lab_name: str | None = None,
                 emu_args: Sequence[str] = ()) -> None:
        self._binary_arg = binary
        self.lab_name = lab_name or "pr" + secrets.token_hex(3)
        self.emu_args = list(emu_args)

    @property
    def binary(self) -> Path:
        return find_binary(self._binary_arg)

    def provenance(self) -> dict[str, Any]:
        return provenance.environment({
            "protolab-net": [str(self.binary), "--version"],
            "iperf3": ["iperf3", "--version"],
        })

    @contextlib.contextmanager
    def session(self, experiment: Experiment, results_dir: Path) -> Iterator[LabSession]:
        binary = self.binary
        pages = write_pages(experiment, results_dir)
        addresses = sorted({address for page in experiment.pages.values() for address in page.addresses})
        mptcp = uses_mptcp(experiment.axes["mode"])
        if mptcp:
            addresses.append(MPTCP_SIGNAL_ADDRESS)
        spec = experiment.spec
        topology = experiment.scenario.topology(self.lab_name, experiment.params, addresses, spec.seed)
        topology["tcp_congestion"] = spec.transport.tcp_cc
        workdir = Path(tempfile.mkdtemp(prefix="protolab-run-"))
        try:
            with Lab(topology, binary=binary, emu_args=self.emu_args) as lab:
                if mptcp:
                    lab.enable_mptcp(experiment.scenario.client, experiment.scenario.server, MPTCP_SIGNAL_ADDRESS)
                session = LabSession(experiment, lab, binary, pages, workdir)
                session.start_server()
                experiment.scenario.start(session.ctx, experiment.params)
                _write_json(results_dir / "topology.json", lab.topology)
                yield session
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------------- the loop


class Events:
    """Progress callbacks of `run_experiment` (no-ops here; the CLI draws a Rich progress bar)."""

    def planned(self, total: int, todo: int, estimate_s: float) -> None: ...

    def starting(self, run: PlannedRun) -> None: ...

    def finished(self, run: PlannedRun, record: RunRecord) -> None: ...

    def note(self, text: str) -> None: ...


@dataclass
class Summary:
    experiment_id: str
    results_dir: Path
    total: int
    skipped: int
    ok: int = 0
    failed: int = 0
    timeout: int = 0
    duration_s: float = 0.0

    @property
    def executed(self) -> int:
        return self.ok + self.failed + self.timeout


def experiment_provenance(executor: Executor, experiment: Experiment) -> dict[str, Any]:
    env = executor.provenance()
    env["spec_file"] = str(experiment.path) if experiment.path else None
    env["scenario"] = experiment.scenario.describe()
    return env


def run_experiment(
    experiment: Experiment,
    results_dir: Path,
    executor: Executor,
    events: Events | None = None,
) -> Summary:
    """Run every unfinished run of the experiment; record each in RESULTS/results.duckdb.

    A run that fails is recorded with its error and the sweep goes on. Ctrl-C (KeyboardInterrupt)
    stops at once: the lab is torn down, the run in progress is not recorded (its directory is
    removed) and the exception propagates; running the same spec again resumes.
    """
    events = events or Events()
    results_dir.mkdir(parents=True, exist_ok=True)
    runs = plan(experiment)
    experiment_id = experiment.name
    started = time.monotonic()
    with ResultsStore(results_dir) as store:
        store.upsert_experiment(experiment_id, experiment.name, experiment.spec_dict(),
                                experiment_provenance(executor, experiment))
        finished = store.finished_run_keys(experiment_id)
        todo = [run for run in runs if run.key not in finished]
        summary = Summary(experiment_id, results_dir, total=len(runs), skipped=len(runs) - len(todo))
        events.planned(len(runs), len(todo), sum(estimate_s(run) for run in todo))
        if not todo:
            return summary
        with executor.session(experiment, results_dir) as session:
            current: Condition | None = None
            try:
                for run in todo:
                    if run.condition != current:
                        if current is not None:
                            session.leave(current)
                        current = None
                        events.note(f"condition: {run.condition.label()}")
                        session.enter(run.condition)
                        current = run.condition
                    record = _execute_one(session, run, results_dir, events)
                    store.record_run(experiment_id, record)
                    setattr(summary, record.status, getattr(summary, record.status) + 1)
                    events.finished(run, record)
            finally:
                if current is not None:
                    with contextlib.suppress(ProtolabError):
                        session.leave(current)
    summary.duration_s = time.monotonic() - started
    return summary


def _execute_one(session: Session, run: PlannedRun, results_dir: Path, events: Events) -> RunRecord:
    relative = Path("runs") / run.key
    run_dir = results_dir / relative
    shutil.rmtree(run_dir, ignore_errors=True)  # leftovers of an interrupted attempt
    run_dir.mkdir(parents=True)
    events.starting(run)
    started_ns = time.time_ns()
    started = time.monotonic()
    try:
        outcome = session.execute(run, run_dir)
    except KeyboardInterrupt:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    except (ProtolabError, OSError, subprocess.SubprocessError) as exc:
        outcome = RunOutcome("failed", f"{type(exc).__name__}: {exc}")
    duration = time.monotonic() - started
    _write_json(run_dir / "run.json", {
        "schema_version": 1, "kind": "run", "run_key": run.key, "params": run.params,
        "status": outcome.status, "error": outcome.error, "started_unix_ns": started_ns,
        "duration_s": duration, "link_config": outcome.link_config, "link_counters": outcome.link_counters,
    })
    return RunRecord(
        run_key=run.key,
        params=dict(run.params),
        status=outcome.status,
        error=outcome.error,
        started_unix_ns=started_ns,
        duration_s=duration,
        page_load=outcome.page_load,
        link_config=outcome.link_config,
        link_counters=outcome.link_counters,
        samples=outcome.samples,
        artifacts_dir=str(relative),
    )


__all__ = [
    "STANDARD_AXES",
    "Events",
    "LabExecutor",
    "LabSession",
    "PlannedRun",
    "RunOutcome",
    "RunnerError",
    "Summary",
    "conditions",
    "derived_seed",
    "estimate_s",
    "plan",
    "run_experiment",
    "run_key",
]
