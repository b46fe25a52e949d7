"""What one run does, per workload (`EXECUTORS`, by the workload's name, handed to `LabExecutor`):

- `page`: `protolab-net load` of one page in one mode in the client host;
- `bulk`: one `protolab-net bulk` transfer in the client host;
- `bulk-or-interop`: a bulk transfer, or for a mode `SERVER->CLIENT` an interop download of the
  same bytes (`protolab.run.interop`, the quic-vs-tcp-stacks scenario);
- `pair`: two clients at once, each with its own server, loading pages or running bulk flows,
  with the emulator's event log on: throughput per client over time, shares and Jain's index
  come from the deliveries at the bottleneck, not from the endpoints' own accounting.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from protolab.browser.modes import chromium_mode
from protolab.errors import LabError
from protolab.files import write_text_atomically
from protolab.interop import testcases
from protolab.measure import flows
from protolab.plan import controllers
from protolab.results import bulk as bulk_results
from protolab.results import load as load_results
from protolab.results.bulk import BulkTransfer
from protolab.results.documents import DocumentError, read_document
from protolab.results.generated.bulk_result import BulkResult
from protolab.results.generated.load_result import LoadResult
from protolab.results.generated.rpm_result import RpmResult
from protolab.results.record import RunRecord
from protolab.results.rpm import RpmContext
from protolab.results.samples import read_samples
from protolab.run.interop import run_interop
from protolab.run.runner import PlannedRun, derived_seed
from protolab.run.session import LabSession, Server, WorkloadExecutor, transport_argv
from protolab.scenarios.rpm import expected_loaded_rtt_ms
from protolab.scenarios.workloads import Side, parse_pair

LOAD_GRACE_S = 30.0  # beyond the client's own timeout before the runner gives up on it
CHROMIUM_GRACE_S = 45.0  # Chromium's start and shutdown on top of that
DURATION_GRACE_S = 30.0  # a duration-mode bulk transfer's timeout beyond its duration

Document = TypeVar("Document", bound=BaseModel)


def _client_cgroup(session: LabSession) -> Path | None:
    return session.scenario.cgroup(session.ctx, session.params, "client")


def _document(model: type[Document], path: Path) -> Document | None:
    """The result a client wrote, as its model; None when it wrote none. A result that does not
    match its schema is a failed run naming the file and field (DocumentError)."""
    if not path.exists():
        return None
    return read_document(model, path)


def _failure(completed_status: int | None, stderr: str, what: str) -> str:
    detail = stderr.strip()[-1500:] or "(no output)"
    program = "the Chromium driver" if what == "chromium" else f"protolab-net {what}"
    return f"{program} exited with status {completed_status}: {detail}"


def _instrument_argv(session: LabSession, run_dir: Path, qlog: bool = True) -> list[str]:
    """`--samples`/`--qlog` as the spec asks (`qlog` False: the client has no QUIC connection)."""
    spec = session.experiment.spec
    argv: list[str] = []
    if spec.artifacts.samples:
        argv += ["--samples", str((run_dir / "samples").resolve()),
                 "--sample-interval-ms", str(spec.artifacts.sample_interval_ms)]
    if spec.artifacts.qlog and qlog:
        argv += ["--qlog", str((run_dir / "qlog").resolve())]
    return argv


def _collect(session: LabSession, run_dir: Path, servers: Sequence[tuple[Server, Sequence[str], Sequence[str]]],
             record: RunRecord) -> None:
    """The server's samples and qlogs of the run's connections next to the client's, and the
    samples into the record."""
    spec = session.experiment.spec
    for server, sample_files, qlog_files in servers:
        if spec.artifacts.samples:
            session.take_server_files(sample_files, server, "samples", run_dir / "samples")
        if spec.artifacts.qlog:
            session.take_server_files(qlog_files, server, "qlog", run_dir / "qlog")
    if spec.artifacts.samples:
        record.samples = read_samples(run_dir / "samples")


# ---------------------------------------------------------------------- page loads


def load_argv(session: LabSession, run: PlannedRun, mode: str, manifest: Path, server: Server, out: Path,
              run_dir: Path, quic_cc: str | None = None) -> list[str]:
    spec = session.experiment.spec
    argv = [
        str(session.binary), "load", "--manifest", str(manifest), "--mode", mode,
        "--ca", str(server.tls_dir / "ca.pem"), "--out", str(out.resolve()),
        "--scheduler", str(run.transport["scheduler"]), "--h1-connections", str(run.transport["h1_connections"]),
        "--timeout-ms", str(int(spec.timeout_s * 1000)), *transport_argv(run.transport, quic_cc, endpoint="load"),
    ]
    if run.transport.get("warm") == "resumed":
        argv += ["--warm"]
    if session.scenario.seeded_source_ports(session.params):
        # Per run, not per repetition: the runs of one repetition share the link seed, and the
        # same port draws would find the previous run's connections still in TIME_WAIT.
        argv += ["--source-port-seed", str(derived_seed(run.link_seed, "source-ports", run.key))]
    return argv + _instrument_argv(session, run_dir)


def _run_client(session: LabSession, run: PlannedRun, run_dir: Path, argv: list[str], timeout_s: float,
                command: str, model: type[Document]) -> tuple[RunRecord, Document | None]:
    """One `protolab-net <command>` in the client host between the run's begin and end (link
    set, counters and captures); its stderr kept as `<command>.stderr`. The record is `failed`
    with the reason when the command wrote no result (`run_dir/result.json`, read as `model`)."""
    link_config, capture = session.begin(run, run_dir)
    try:
        completed = session.lab.run(session.scenario.client, argv, timeout=timeout_s, check=False,
                                    cgroup=_client_cgroup(session))
    finally:
        counters = session.end(capture)
    (run_dir / f"{command}.stderr").write_text(completed.stderr)
    record = RunRecord(run.key, dict(run.params), link_config=link_config, link_counters=counters)
    try:
        result = None if completed.returncode == 2 else _document(model, run_dir / "result.json")
    except DocumentError as exc:
        record.error = str(exc)
        return record, None
    if result is None:
        record.error = _failure(completed.returncode, completed.stderr or completed.stdout, command)
    return record, result


def chromium_argv(session: LabSession, run: PlannedRun, manifest: Path, server: Server, run_dir: Path,
                  profile: Path) -> list[str]:
    """The Chromium driver's command line for one cold load of the run's page (docs/browser.md)."""
    page = json.loads(manifest.read_text())
    root = next(o for o in page["objects"] if not o.get("parent"))
    mode = chromium_mode(run.mode)
    argv = [sys.executable, "-m", "protolab.browser.driver", "--url", f"{mode.scheme}://{root['origin']}{root['path']}",
            "--mode", run.mode, "--spki", (server.tls_dir / "spki.txt").read_text().strip(), "--manifest", str(manifest),
            "--profile", str(profile), "--out", str((run_dir / "result.json").resolve()),
            "--har", str((run_dir / "page.har").resolve()),
            "--timeout-ms", str(int(session.experiment.spec.timeout_s * 1000))]
    if run.transport.get("warm") == "resumed":
        argv += ["--warm"]
    for origin in page["origins"]:
        argv += ["--map", f"{origin['hostname']}={origin['address']}"]
    return ["mptcpize", "run", *argv] if mode.mptcpize else argv


def _load_with_chromium(session: LabSession, run: PlannedRun, run_dir: Path, server: Server,
                        timeout_s: float) -> tuple[RunRecord, LoadResult | None]:
    """One cold load in a fresh Chromium profile, removed afterwards (`pl-<lab>-chromium-*`
    under the temporary directory; `make cleanup` removes those of a killed run)."""
    assert run.page is not None
    profile = Path(tempfile.mkdtemp(prefix=f"pl-{session.lab.name or 'lab'}-chromium-"))
    try:
        argv = chromium_argv(session, run, session.pages[run.page.ref], server, run_dir, profile)
        return _run_client(session, run, run_dir, argv, timeout_s + CHROMIUM_GRACE_S, "chromium", LoadResult)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def run_page(session: LabSession, run: PlannedRun, run_dir: Path) -> RunRecord:
    assert run.page is not None, "a page-load run has a page"
    spec = session.experiment.spec
    server = session.server(session.scenario.server, run.transport, session.page_manifests())
    if run.transport.get("client") == "chromium":
        record, page_load = _load_with_chromium(session, run, run_dir, server, spec.timeout_s)
    else:
        argv = load_argv(session, run, run.mode, session.pages[run.page.ref], server, run_dir / "result.json", run_dir)
        record, page_load = _run_client(session, run, run_dir, argv, spec.timeout_s + LOAD_GRACE_S, "load", LoadResult)
    if page_load is None:
        return record
    record.page_load = page_load
    record.status = str(page_load.status)
    record.error = None if record.status == "ok" else (page_load.error or f"load status {record.status!r}")
    files = [(server, load_results.artifact_files(page_load, "samples"), load_results.artifact_files(page_load, "qlog"))]
    _collect(session, run_dir, files, record)
    return record


# ---------------------------------------------------------------------- bulk transfers


def bulk_argv(session: LabSession, run: PlannedRun, protocol: str, address: str, server: Server, out: Path,
              run_dir: Path, params: Any, quic_cc: str | None = None, duration_s: float | None = None) -> list[str]:
    spec = session.experiment.spec
    argv = [
        str(session.binary), "bulk", "--server", address, "--host", address, "--protocol", protocol,
        "--direction", getattr(params, "direction", "download"), "--interval-ms", str(getattr(params, "interval_ms", 100)),
        "--ca", str(server.tls_dir / "ca.pem"), "--out", str(out.resolve()), *transport_argv(run.transport, quic_cc),
    ]
    duration = duration_s if duration_s is not None else getattr(params, "duration_s", None)
    if duration is not None:
        argv += ["--duration-ms", str(int(duration * 1000))]
    else:
        argv += ["--bytes", str(params.bytes), "--timeout-ms", str(int(spec.timeout_s * 1000))]
    return argv + _instrument_argv(session, run_dir, qlog=protocol == "h3")


def _bulk_timeout(session: LabSession, params: Any, duration_s: float | None = None) -> float:
    duration = duration_s if duration_s is not None else getattr(params, "duration_s", None)
    return (duration + DURATION_GRACE_S if duration is not None else session.experiment.spec.timeout_s) + LOAD_GRACE_S


def run_bulk(session: LabSession, run: PlannedRun, run_dir: Path) -> RunRecord:
    params = session.params
    address = session.scenario.bulk_server_address(params)
    server = session.server(session.scenario.server, run.transport, listen=[address])
    argv = bulk_argv(session, run, run.mode, address, server, run_dir / "result.json", run_dir, params)
    record, result = _run_client(session, run, run_dir, argv, _bulk_timeout(session, params), "bulk", BulkResult)
    if result is None:
        return record
    record.bulk = [BulkTransfer(result)]
    record.status, record.error = bulk_results.bulk_status([result], [])
    files = [(server, bulk_results.artifact_files(result, "samples"), bulk_results.artifact_files(result, "qlog"))]
    _collect(session, run_dir, files, record)
    return record


def run_bulk_or_interop(session: LabSession, run: PlannedRun, run_dir: Path) -> RunRecord:
    """A bulk transfer, or (a stack pair as the mode) the interop stacks downloading one file of
    the transfer's bytes; protolab's server leaves the server host first, as the stack's server
    binds the same ports."""
    if "->" not in run.mode:
        return run_bulk(session, run, run_dir)
    session.stop_server(session.scenario.server)
    case = testcases.download(int(session.params.bytes), float(session.experiment.spec.timeout_s))
    return run_interop(session, run, run_dir, case)


# ---------------------------------------------------------------------- pairs


def _wait_all(session: LabSession, processes: Sequence[subprocess.Popen[bytes]], timeout_s: float) -> None:
    """Waits for every process; one still running at the deadline is stopped with its process
    group (and reaped)."""
    deadline = time.monotonic() + timeout_s
    for process in processes:
        remaining = max(0.1, deadline - time.monotonic())
        try:
            process.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            session.lab.stop(process)


def _side_cc(side: Side, run: PlannedRun) -> str | None:
    if side.quic_cc is None:
        return None
    return controllers.with_link_rate(side.quic_cc, run.condition.bandwidth_mbps)


def _second_manifest(session: LabSession, page_ref: str) -> Path:
    """The page as the second server serves it (protolab.scenarios.congestion.second_copy)."""
    from protolab.scenarios.congestion import second_copy

    page = session.experiment.pages[page_ref]
    target = session.workdir / "pages-second" / f"{page.name}.json"
    if not target.exists():
        write_text_atomically(target, json.dumps(second_copy(page.manifest), indent=2, sort_keys=True))
    return target


def run_pair(session: LabSession, run: PlannedRun, run_dir: Path) -> RunRecord:
    scenario, params = session.scenario, session.params
    kind = getattr(params, "workload", "page")
    sides = parse_pair(run.mode, kind)
    names = ("a", "b")
    servers: list[Server] = []
    addresses: list[str] = []
    # Each side's server: its own host (004 Fig. 15), or both in one host, each on its half of
    # the host's addresses (Fig. 13); a page server listens on its manifest's addresses.
    for index, (side, where) in enumerate(zip(sides, scenario.pair_servers(params), strict=True)):
        address = where.address(session.lab.addresses(where.host))
        addresses.append(address)
        if kind == "page":
            assert run.page is not None, "a page pair has a page"
            manifest = session.pages[run.page.ref] if index == 0 else _second_manifest(session, run.page.ref)
            servers.append(session.server(where.host, run.transport, [manifest], quic_cc=_side_cc(side, run),
                                          slot=where.slot))
        else:
            servers.append(session.server(where.host, run.transport, listen=[address], quic_cc=_side_cc(side, run),
                                          slot=where.slot))
    link_config, capture = session.begin(run, run_dir, events=True)
    processes: list[subprocess.Popen[bytes]] = []
    outputs: list[tuple[int, int, Path, Path]] = []  # side, flow, result, stderr
    try:
        for index, side in enumerate(sides):
            client = scenario.clients[index]
            for flow in range(side.flows):
                out = run_dir / f"side-{names[index]}-{flow}.json"
                err = run_dir / f"side-{names[index]}-{flow}.stderr"
                if kind == "page":
                    assert run.page is not None
                    manifest = session.pages[run.page.ref] if index == 0 else _second_manifest(session, run.page.ref)
                    argv = load_argv(session, run, side.mode, manifest, servers[index], out, run_dir, _side_cc(side, run))
                else:
                    argv = bulk_argv(session, run, side.mode, addresses[index], servers[index], out, run_dir, params,
                                     _side_cc(side, run), duration_s=getattr(params, "bulk_duration_s", None))
                with err.open("wb") as stderr:
                    processes.append(session.lab.spawn(client, argv, stdout=subprocess.DEVNULL, stderr=stderr,
                                                       cgroup=_client_cgroup(session)))
                outputs.append((index, flow, out, err))
        timeout = (session.experiment.spec.timeout_s + LOAD_GRACE_S if kind == "page"
                   else _bulk_timeout(session, params, getattr(params, "bulk_duration_s", None)))
        _wait_all(session, processes, timeout)
    finally:
        for process in processes:  # on an error or interrupt: nothing of this run stays behind
            session.lab.stop(process)
        counters = session.end(capture)
    record = RunRecord(run.key, dict(run.params), link_config=link_config, link_counters=counters)
    model: type[LoadResult] | type[BulkResult] = LoadResult if kind == "page" else BulkResult
    results: list[LoadResult | BulkResult | None] = []
    errors: list[str] = []
    per_side: dict[int, list[LoadResult | BulkResult]] = {0: [], 1: []}
    for (index, flow, out, err), process in zip(outputs, processes, strict=True):
        try:
            result = _document(model, out)
        except DocumentError as exc:
            result, why = None, str(exc)
        else:
            why = _failure(process.returncode, err.read_text(errors="replace"), "load" if kind == "page" else "bulk")
        results.append(result)
        if result is None:
            errors.append(f"side {names[index]} flow {flow}: {why}")
            continue
        per_side[index].append(result)
        if isinstance(result, BulkResult):
            record.bulk.append(BulkTransfer(result, side=names[index], flow=flow))
    record.status, record.error = bulk_results.bulk_status(results, errors)
    _summarize_pair(session, run, run_dir, sides, per_side, record)
    files: list[tuple[Server, Sequence[str], Sequence[str]]] = []
    for index, server in enumerate(servers):
        sample_files: list[str] = []
        qlog_files: list[str] = []
        for result in per_side[index]:
            artifacts = load_results.artifact_files if isinstance(result, LoadResult) else bulk_results.artifact_files
            sample_files += artifacts(result, "samples")  # type: ignore[arg-type]
            qlog_files += artifacts(result, "qlog")  # type: ignore[arg-type]
        files.append((server, sample_files, qlog_files))
    _collect(session, run_dir, files, record)
    return record


def _summarize_pair(session: LabSession, run: PlannedRun, run_dir: Path, sides: Sequence[Side],
                    per_side: dict[int, list[LoadResult | BulkResult]], record: RunRecord) -> None:
    params = session.params
    names = ("a", "b")
    download = getattr(params, "direction", "download") == "download"
    link = "p0.reverse" if download else "p0.forward"
    client_sides = {session.lab.address(session.scenario.clients[i]): names[i] for i in range(len(sides))}
    events = run_dir / "events.ndjson"
    bin_ms = float(getattr(params, "bin_ms", 100))
    try:
        bins, traffic = flows.fairness(events, link, client_sides, bin_ms) if download else ([], {})
    except flows.EventLogError as exc:
        raise LabError(str(exc)) from exc
    record.flow_bins = bins
    for index, side in enumerate(sides):
        results = per_side.get(index, [])
        plts = [r.plt_ms for r in results if isinstance(r, LoadResult) and r.plt_ms is not None]
        goodputs = [r.goodput_bps for r in results if isinstance(r, BulkResult) and r.goodput_bps is not None]
        statuses = sorted({str(r.status) for r in results}) or ["failed"]
        connections = sum(len(r.connections) for r in results if isinstance(r, LoadResult)) or len(results)
        record.sides.append({
            "side": names[index],
            "label": side.label(),
            "mode": side.mode,
            "flows": side.flows,
            "quic_cc": side.quic_cc or (run.transport.get("quic_cc") if side.quic else None),
            "client": session.scenario.clients[index],
            "address": session.lab.address(session.scenario.clients[index]),
            "status": "ok" if statuses == ["ok"] else ",".join(statuses),
            "plt_ms": plts[0] if len(plts) == 1 else None,
            "goodput_mbps": sum(goodputs) / 1e6 if goodputs and len(goodputs) == len(results) else None,
            "connections": connections,
            **traffic.get(names[index], {}),
        })
    write_text_atomically(run_dir / "pair.json", json.dumps({"sides": record.sides, "link": link, "bin_ms": bin_ms},
                                                           indent=2, sort_keys=True, default=str))


# ---------------------------------------------------------------------- rpm


def rpm_argv(session: LabSession, run: PlannedRun, address: str, server: Server, out: Path, params: Any) -> list[str]:
    return [
        str(session.binary), "rpm", "--server", address, "--host", address, "--protocol", run.mode,
        "--direction", params.direction, "--max-duration-s", str(params.max_duration_s),
        "--idle-probes", str(params.idle_probes), "--interval-s", str(params.interval_s), "--mps", str(params.mps),
        "--ca", str(server.tls_dir / "ca.pem"), "--out", str(out.resolve()), "--quiet",
        *transport_argv(run.transport),
    ]


def run_rpm(session: LabSession, run: PlannedRun, run_dir: Path) -> RunRecord:
    params = session.params
    address = session.scenario.bulk_server_address(params)
    server = session.server(session.scenario.server, run.transport, listen=[address])
    argv = rpm_argv(session, run, address, server, run_dir / "result.json", params)
    directions = 2 if params.direction == "both" else 1
    timeout = directions * (params.max_duration_s + DURATION_GRACE_S) + LOAD_GRACE_S
    record, result = _run_client(session, run, run_dir, argv, timeout, "rpm", RpmResult)
    if result is None:
        return record
    record.rpm = result
    record.rpm_context = _rpm_context(run, record)
    record.status = "ok" if result.status == "ok" else "failed"
    record.error = result.error
    return record


def _rpm_context(run: PlannedRun, record: RunRecord) -> RpmContext:
    """The bottleneck's queue, the loaded RTT a full buffer implies, and what each bottleneck
    direction delivered (rpm_results' derived columns)."""
    queue = str(run.params.get("queue", "droptail"))
    links = record.link_counters.links if record.link_counters is not None else {}
    return RpmContext(queue=queue, expected_loaded_rtt_ms=expected_loaded_rtt_ms(run.condition, queue),
                      delivered_bytes={name: counters.delivered_bytes for name, counters in links.items()})


EXECUTORS: dict[str, WorkloadExecutor] = {
    "page": run_page,
    "bulk": run_bulk,
    "pair": run_pair,
    "rpm": run_rpm,
    "interop": run_interop,
    "bulk-or-interop": run_bulk_or_interop,
}
