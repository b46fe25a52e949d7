"""A lab fleet for the live service (issue 23; docs/live.md, "Analyses (003 ch. 7)"): N tests (the
wild client, or for a seeded share the speed-test page in headless Chromium) against the
coordinator and measurement server inside the lab, each through an access link drawn from a
seeded space-filling design over rate, RTT, buffer and loss, so every test of the store has a
known truth.

One lab, two hosts: the server host runs `protolab-net serve` (the speed-test manifest, qlogs on)
and `protolab serve-live` (with `--qlog-dir` on the server's qlogs); the client host runs one
test at a time, `protolab live fleet-client` (an RPM test over `protolab-net rpm`, both
directions, under a token whose metadata names the test's "browser") or, for a page test, the
speed-test page in headless Chromium (`protolab.live.page.drive`), which takes its token and
uploads its result itself. Before each test the emulator's `client.up`/`client.down` get the
drawn conditions and their counters are reset;
after it the download direction's arrivals and drops are read. Each finished test is one line
of `DATA/fleet.jsonl` (its conditions, token, the counters, its wall time), which the analysis
joins by token; a fleet started again on the same DATA with the same seed skips the tests
already there (resumable).
"""

from __future__ import annotations

import json
import math
import secrets
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from protolab.errors import ProtolabError
from protolab.live.fleet_links import (
    CELLULAR,
    WIRED,
    AccessLink,
    download_drops_ms,
    draw_access_links,
    link_settings,
    trace_times,
    trace_window_rate_bps,
)

FLEET_FILE = "fleet.jsonl"
FAILED_FILE = "fleet-failed.jsonl"
FLEET_CLIENT = "protolab-fleet"
# The client kinds of a fleet test: the CLI wild client, or the speed-test page in Chromium.
CLI, PAGE = "cli", "page"
# The protocol Chromium is allowed per the design's drawn protocol: h3 forces QUIC on the lab's
# origins (003 Fig. 7.1b: recent Chrome and Firefox took QUIC every time), h2 disables QUIC (as
# Safari without its experimental flag). Chromium refuses QUIC through Alt-Svc to the lab's
# self-made root even when pinned by SPKI (docs/live.md, "Certificates"; checked: all h2), so
# QUIC is forced rather than discovered.
PAGE_MODES = {"h3": "h3", "h2": "h2"}
CLIENT_ADDRESS, SERVER_ADDRESS = "10.78.0.1", "10.78.1.1"
HOSTNAME = "speed.fleet.test"
COORDINATOR_PORT = 8090
ACCESS_LINKS = ("client.up", "client.down")

# The design's ranges. Rates and RTTs log-uniform (access links span orders of magnitude);
# buffers in BDPs of the drawn link; random loss 0 for LOSSLESS_SHARE of the tests (003 §7.4:
# half of its tests saw no loss), else log-uniform between the bounds.
RATE_MBPS = (2.0, 30.0)
RTT_MS = (10.0, 150.0)
QUEUE_BDP = (0.5, 4.0)
MIN_QUEUE_BYTES = 15_000  # ten full-size packets: a smaller drop-tail buffer starves any sender
LOSS = (1e-4, 1e-2)
LOSSLESS_SHARE = 0.4

# The "browsers" (label, User-Agent, chance the test runs over HTTP/3): 003 Fig. 7.1b saw recent
# Chrome and Firefox use QUIC always, Safari (an experimental flag) and apps' embedded browsers
# rarely. Here they label CLI tests; the label's protocol is the known truth of Fig. 7.1.
BROWSERS: tuple[tuple[str, str, float], ...] = (
    ("Chrome", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", 1.0),
    ("Firefox", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", 1.0),
    ("Safari", "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 (KHTML, like Gecko) "
     "Version/17.1 Safari/605.1.15", 0.0),
    ("embedded", "Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 "
     "Mobile Safari/537.36 Instagram 300.0.0.0", 0.5),
)


class FleetError(ProtolabError):
    """The fleet cannot go on: the lab or a server did not start, a test failed, its log is unreadable."""


class FleetTestFailed(FleetError):
    """One test's client failed (as a wild client can: a cellular outage outlasting its upload's
    time-out); the fleet records it in DATA/fleet-failed.jsonl and goes on."""


@dataclass(frozen=True)
class Conditions:
    """One test's access link (both directions alike) and client."""

    index: int
    rate_bps: int
    rtt_ms: float
    queue_bytes: int
    loss: float
    browser: str
    user_agent: str
    protocol: str
    # The access link's kind (live.fleet_links): wired (rate_bps), a cellular trace pair replayed
    # from trace_start_ms, or a WiFi hop with a mesh client's profile. For the latter two rate_bps
    # is the link's mean download capacity and the buffers are sized in BDPs of each direction's.
    link_kind: str = WIRED
    trace: str | None = None
    trace_start_ms: int | None = None
    wifi_client: str | None = None
    up_queue_bytes: int | None = None
    # CLI: `protolab live fleet-client`; PAGE: the speed-test page in headless Chromium.
    client: str = CLI

    @property
    def access_link(self) -> AccessLink:
        return AccessLink(self.link_kind, self.trace, self.trace_start_ms, self.wifi_client)


def _log_uniform(u: float, bounds: tuple[float, float]) -> float:
    low, high = bounds
    return math.exp(math.log(low) + u * (math.log(high) - math.log(low)))


def draw_clients(n: int, seed: int, page_share: float) -> list[str]:
    """N tests' client kinds: PAGE for a seeded share of them, CLI for the rest. A random stream of
    its own (the seed and 61), so the design's other draws are the same whatever the share; and a
    larger share keeps the smaller share's page tests (one uniform per test, below the share)."""
    import numpy as np

    if not 0.0 <= page_share <= 1.0:
        raise ValueError(f"page share {page_share!r}: between 0 and 1 expected")
    uniforms = np.random.default_rng([seed, 61]).random(n)
    return [PAGE if u < page_share else CLI for u in uniforms]


def draw_conditions(n: int, seed: int, page_share: float = 0.0) -> list[Conditions]:
    """N tests' conditions: a Latin hypercube (scipy's, seeded) over rate, RTT, buffer and loss,
    a browser and protocol per test from the same seed, and the client kind (`draw_clients`).
    The same (n, seed, page_share) gives the same list."""
    import numpy as np
    from scipy.stats import qmc

    if n < 1:
        return []
    points = qmc.LatinHypercube(d=4, seed=seed).random(n)
    rng = np.random.default_rng(seed)
    clients = draw_clients(n, seed, page_share)
    out = []
    for index, ((u_rate, u_rtt, u_queue, u_loss), link) in enumerate(zip(points, draw_access_links(n, seed), strict=True)):
        rtt_ms = round(_log_uniform(float(u_rtt), RTT_MS), 1)
        bdps = QUEUE_BDP[0] + u_queue * (QUEUE_BDP[1] - QUEUE_BDP[0])
        mean_rates = link.mean_rates_bps()
        down_bps, up_bps = mean_rates if mean_rates else (_log_uniform(float(u_rate), RATE_MBPS) * 1e6,) * 2
        queue_bytes, up_queue_bytes = (max(MIN_QUEUE_BYTES, round(rate / 8 * rtt_ms / 1e3 * bdps)) for rate in (down_bps, up_bps))
        loss = 0.0 if u_loss < LOSSLESS_SHARE else _log_uniform((u_loss - LOSSLESS_SHARE) / (1 - LOSSLESS_SHARE), LOSS)
        browser, user_agent, h3_chance = BROWSERS[int(rng.integers(len(BROWSERS)))]
        protocol = "h3" if rng.random() < h3_chance else "h2"
        out.append(Conditions(index, round(down_bps), rtt_ms, queue_bytes, round(loss, 6), browser, user_agent, protocol,
                              link.kind, link.trace, link.trace_start_ms, link.wifi_client,
                              None if link.kind == WIRED else up_queue_bytes, clients[index]))
    return out


def read_fleet_log(path: Path) -> list[dict[str, Any]]:
    """The finished tests of a fleet log (FleetError naming the file and line if one is broken;
    a last line cut short by a crash is ignored, as the test it was writing is run again)."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    entries = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                break
            raise FleetError(f"{path}: line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("index"), int) or not isinstance(entry.get("token"), str):
            raise FleetError(f"{path}: line {number}: a fleet entry needs an integer `index` and a string `token`")
        entries.append(entry)
    return entries


def link_truth(counters: dict[str, Any]) -> dict[str, int]:
    """From the emulator's counters over one test: the packets that arrived at the download
    direction (client.down) and were dropped there (arrivals are the enqueued ones plus those
    dropped before the queue: random loss, a full drop-tail queue), and the bytes the upload
    direction (client.up) delivered (the upload's data and the download's acknowledgements)."""
    links = counters.get("links", {})
    down = links.get("client.down", {})
    dropped = down.get("dropped_packets", {})
    before_queue = int(dropped.get("random_loss", 0)) + int(dropped.get("queue_full", 0))
    return {"down_arrived": int(down.get("enqueued_packets", 0)) + before_queue,
            "down_dropped": sum(int(v) for v in dropped.values()),
            "up_delivered_bytes": int(links.get("client.up", {}).get("delivered_bytes", 0))}


@dataclass
class FleetSettings:
    data_dir: Path
    tests: int
    seed: int = 1
    max_duration_s: float = 6.0
    binary: Path | None = None
    # The emulator's per-packet event log during each test, read for the download link's drops
    # (the true loss bursts) and then deleted: tens of MB per test (docs/live.md), hence an option.
    event_log: bool = False
    # The share of tests that load the speed-test page in headless Chromium (draw_clients).
    page_share: float = 0.0
    lab_name: str = field(default_factory=lambda: "fl" + secrets.token_hex(3))


def _wait_for_line(path: Path, prefix: str, process: Any, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        if any(line.startswith(prefix) for line in text.splitlines()):
            return
        if process.poll() is not None:
            raise FleetError(f"{prefix.split(':')[0]} exited with status {process.returncode}: {text[-1500:]}")
        time.sleep(0.1)
    raise FleetError(f"{path}: no line starting {prefix!r} within {within_s:g} s")


@contextmanager
def fleet_lab(settings: FleetSettings, workdir: Path) -> Iterator[tuple[Any, Path]]:
    """The lab with the measurement server and the coordinator running; (lab, CA file)."""
    from protolab.lab import Lab, dumbbell, find_binary, host
    from protolab.lab.events import DocumentError, NotReady, await_event
    from protolab.live.page import write_manifest
    from protolab.results.generated.event_listening import Listening

    binary = find_binary(settings.binary)
    topology = dumbbell(settings.lab_name, [host("client", "left", [CLIENT_ADDRESS])],
                        [host("server", "right", [SERVER_ADDRESS])], paths=1)
    qlog_dir = workdir / "qlog"
    qlog_dir.mkdir(parents=True, exist_ok=True)
    manifest = write_manifest(workdir / "site", HOSTNAME, SERVER_ADDRESS)
    with Lab(topology, binary=binary) as lab:
        serve_log = workdir / "serve.stdout"
        with serve_log.open("wb") as out, (workdir / "serve.stderr").open("wb") as err:
            server = lab.spawn("server", [binary, "serve", "--manifest", manifest, "--tls-dir", workdir / "tls",
                                          "--qlog", qlog_dir, "--lab", lab.name or "fleet"], stdout=out, stderr=err)
        try:
            await_event(server, serve_log, Listening, lambda line: line.get("event") == "listening", 60)
        except (NotReady, DocumentError) as exc:
            raise FleetError(f"protolab-net serve in the fleet's server host: {exc}") from None
        listen = f"{SERVER_ADDRESS}:{COORDINATOR_PORT}"
        coordinator_log = workdir / "serve-live.stderr"
        with coordinator_log.open("wb") as err:
            coordinator = lab.spawn("server", [sys.executable, "-m", "protolab", "serve-live", "--listen", listen,
                                               "--data", settings.data_dir, "--qlog-dir", qlog_dir,
                                               "--tests-per-address-per-hour", "0"], stderr=err)
        _wait_for_line(coordinator_log, f"protolab serve-live: listening on http://{listen}", coordinator, 60)
        yield lab, workdir / "tls" / "ca.pem"


def run_one(lab: Any, ca: Path, settings: FleetSettings, conditions: Conditions, workdir: Path) -> dict[str, Any]:
    """One test through its conditions; its fleet log entry."""
    set_access_link(lab, conditions, seed=settings.seed * 100_003 + conditions.index)
    lab.reset_counters()
    out = workdir / f"test-{conditions.index:04d}"
    events = out.with_suffix(".events.ndjson")
    if settings.event_log:
        lab.events_start(events)
    started, origin_ns = time.monotonic(), time.time_ns()
    run_client = run_page_client if conditions.client == PAGE else run_cli_client
    try:
        answer = run_client(lab, ca, settings, conditions, out)
    finally:
        # The counters and the event log are read whether or not the client succeeded, so a
        # failed test leaves no event log running into the next one.
        counters = lab.counters()
        wall_s = time.monotonic() - started
        drops = _event_log_drops(lab, events, origin_ns) if settings.event_log else {}
    return {**asdict(conditions), **answer, **link_truth(counters), **true_rates(conditions, wall_s), **drops,
            "wall_s": round(wall_s, 1), "seed": settings.seed, "page_share": settings.page_share}


def run_cli_client(lab: Any, ca: Path, settings: FleetSettings, conditions: Conditions, out: Path) -> dict[str, Any]:
    """The wild client's RPM test (`protolab live fleet-client`) in the client host: its token,
    where the coordinator stored it and how many server qlogs went with it."""
    from protolab.lab import find_binary

    argv = [sys.executable, "-m", "protolab", "live", "fleet-client", "--coordinator",
            f"http://{SERVER_ADDRESS}:{COORDINATOR_PORT}", "--server", SERVER_ADDRESS, "--host", HOSTNAME, "--ca", ca,
            "--protocol", conditions.protocol, "--user-agent", conditions.user_agent, "--index", str(conditions.index),
            "--max-duration-s", f"{settings.max_duration_s:g}", "--out", out, "--binary", find_binary(settings.binary)]
    done = lab.run("client", argv, timeout=4 * settings.max_duration_s + 120, check=False)
    if done.returncode != 0:
        raise FleetTestFailed(f"fleet test {conditions.index}: the client exited with {done.returncode}: {done.stderr[-2000:]}")
    answer = json.loads(done.stdout)
    return {"token": answer["token"], "stored": answer.get("stored"), "qlogs": answer.get("qlogs")}


def run_page_client(lab: Any, ca: Path, settings: FleetSettings, conditions: Conditions, out: Path) -> dict[str, Any]:
    """The speed-test page in headless Chromium in the client host (`protolab.live.page.drive`):
    it asks the coordinator for a token and uploads its result itself, as on the internet.
    QUIC forced or disabled per the drawn protocol (PAGE_MODES); the lab's certificates pinned
    by SPKI. Its token, and what Chromium used: its version and the result's protocols."""
    from protolab.lab import find_binary
    from protolab.live.page import page_url, resolver_maps

    coordinator = f"http://{SERVER_ADDRESS}:{COORDINATOR_PORT}"
    mode = PAGE_MODES[conditions.protocol]
    spki = (ca.parent / "spki.txt").read_text().strip()
    output = out.with_suffix(".page.json")
    url = page_url(HOSTNAME, coordinator=coordinator, params={"max_duration_s": f"{settings.max_duration_s:g}"})
    # The driver's --mode choices come from the binary's registry: it must find the same binary.
    argv = ["env", f"PROTOLAB_NET={find_binary(settings.binary)}", sys.executable, "-m", "protolab.live.page.drive",
            "--url", url, "--mode", mode, "--spki", spki,
            *(arg for m in resolver_maps(HOSTNAME, SERVER_ADDRESS) for arg in ("--map", m)),
            "--secure-origin", coordinator, "--out", output, "--timeout-s", f"{page_timeout_s(settings.max_duration_s):g}"]
    done = lab.run("client", argv, timeout=page_timeout_s(settings.max_duration_s) + 60, check=False)
    if done.returncode != 0 or not output.exists():
        raise FleetTestFailed(f"fleet test {conditions.index}: the page's driver exited with {done.returncode}: "
                              f"{done.stderr[-2000:]}")
    return page_answer(json.loads(output.read_text()), conditions.index, mode)


def page_timeout_s(max_duration_s: float) -> float:
    """How long a page test may take: two directions at their limit, the idle probes, the token
    (the page asks again for up to 30 s while a lock is held) and Chromium's start."""
    return 2 * max_duration_s + 60


def page_answer(driver: dict[str, Any], index: int, mode: str) -> dict[str, Any]:
    """The fleet entry's client part from the page driver's output (pure): FleetTestFailed unless
    the page finished and the coordinator took its upload."""
    upload = driver.get("upload") or {}
    result = driver.get("result") or {}
    if driver.get("state") != "done" or not upload.get("ok") or not isinstance(upload.get("token"), str):
        raise FleetTestFailed(f"fleet test {index}: the page ended {driver.get('state')!r} "
                              f"(error {driver.get('error')!r}, upload {upload!r})")
    return {"token": upload["token"], "stored": f"tests/{upload['token']}", "qlogs": None,
            "chromium": driver.get("chromium_version"), "page_mode": mode,
            "page_protocols": result.get("protocols"), "page_elapsed_s": driver.get("elapsed_s")}


def set_access_link(lab: Any, conditions: Conditions, seed: int) -> None:
    """The test's access link on client.down and client.up (one request when both are alike, as
    a wired link is: the same random stream as before the fleet had link kinds)."""
    settings = link_settings(conditions.access_link, rate_bps=conditions.rate_bps, rtt_ms=conditions.rtt_ms,
                             queue_bytes=conditions.queue_bytes, loss=conditions.loss,
                             up_queue_bytes=conditions.up_queue_bytes)
    if settings["client.down"] == settings["client.up"]:
        lab.set_link(list(ACCESS_LINKS), seed=seed, **settings["client.down"])
        return
    for name in ACCESS_LINKS:
        lab.set_link(name, seed=seed, **settings[name])


def true_rates(conditions: Conditions, wall_s: float) -> dict[str, float]:
    """The capacity the access link offered during the test, per direction: a wired link's rate,
    a WiFi hop's aggregated delivery (rate_bps), or a cellular trace's mean over the test's wall
    time from its replay's start, read from the trace file."""
    if conditions.link_kind != CELLULAR or conditions.trace is None:
        return {"true_down_bps": float(conditions.rate_bps), "true_up_bps": float(conditions.rate_bps)}
    from protolab.scenarios.cellular import TRACE_PAIRS, TRACES_DIR

    pair = TRACE_PAIRS[conditions.trace]
    out = {}
    for key, name in (("true_down_bps", pair.down), ("true_up_bps", pair.up)):
        times = trace_times(TRACES_DIR / name)
        out[key] = round(trace_window_rate_bps(times, times[-1], conditions.trace_start_ms or 0, wall_s * 1e3))
    return out


def _event_log_drops(lab: Any, events: Path, origin_ns: int) -> dict[str, Any]:
    """Stops the test's event log; the server's UDP packets client.down dropped (ms after the
    test's start) and the log's size, which is then deleted."""
    summary = lab.events_stop()
    try:
        with events.open() as lines:
            drops = download_drops_ms(lines, SERVER_ADDRESS, origin_ns)
        size = events.stat().st_size
    except (OSError, ValueError, KeyError) as exc:
        raise FleetError(f"{events}: cannot read the emulator's event log ({exc})") from None
    events.unlink()
    return {"down_drop_ms": drops, "event_log_bytes": size, "events_dropped": int(summary.get("dropped", 0))}


def _append_line(path: Path, entry: dict[str, Any]) -> None:
    with path.open("a") as log:
        log.write(json.dumps(entry) + "\n")
        log.flush()


def read_failed_log(path: Path) -> list[dict[str, Any]]:
    """DATA/fleet-failed.jsonl: one line per failed test (its conditions and the error)."""
    if not path.exists():
        return []
    entries = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            entry = json.loads(line) if line.strip() else None
        except json.JSONDecodeError as exc:
            raise FleetError(f"{path}: line {number}: not valid JSON ({exc.msg})") from None
        if entry is None:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("index"), int):
            raise FleetError(f"{path}: line {number}: a failed-test entry needs an integer `index`")
        entries.append(entry)
    return entries


def run_fleet(settings: FleetSettings, workdir: Path, say: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Runs the tests of the design that DATA/fleet.jsonl does not have yet; every entry, in order."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    log_path = settings.data_dir / FLEET_FILE
    done = read_fleet_log(log_path)
    seeds = {e.get("seed") for e in done}
    if done and seeds != {settings.seed}:
        raise FleetError(f"{log_path}: written with seed {sorted(seeds, key=str)}, not {settings.seed}; "
                         "use another --data or the same --seed")
    # A log from before page tests has no `page_share`: all its tests were the CLI's.
    shares = {float(e.get("page_share", 0.0)) for e in done}
    if done and shares != {settings.page_share}:
        raise FleetError(f"{log_path}: written with page share {sorted(shares)}, not {settings.page_share:g}; "
                         "use another --data or the same --page-share")
    finished = {e["index"] for e in done}
    failed_path = settings.data_dir / FAILED_FILE
    # A failed test is not rerun on resume: its conditions failed it once and would again.
    failed = {e["index"] for e in read_failed_log(failed_path)}
    todo = [c for c in draw_conditions(settings.tests, settings.seed, settings.page_share) if c.index not in finished | failed]
    say(f"fleet: {len(finished)} of {settings.tests} tests done, {len(failed)} failed, {len(todo)} to run")
    if not todo:
        return done
    started = time.monotonic()
    with fleet_lab(settings, workdir) as (lab, ca):
        for count, conditions in enumerate(todo, start=1):
            try:
                entry = run_one(lab, ca, settings, conditions, workdir)
            except FleetTestFailed as exc:
                _append_line(failed_path, {**asdict(conditions), "error": str(exc), "seed": settings.seed})
                failed.add(conditions.index)
                say(f"[{len(done)}/{settings.tests}] test {conditions.index} failed (recorded in {failed_path.name}): {exc}")
                continue
            _append_line(log_path, entry)
            done.append(entry)
            elapsed = time.monotonic() - started
            say(f"[{len(done)}/{settings.tests}] test {conditions.index}: {conditions.rate_bps / 1e6:.1f} Mbit/s, "
                f"{conditions.rtt_ms:g} ms, {conditions.queue_bytes} B, {conditions.link_kind}, loss {conditions.loss:.4%}, "
                f"{client_label(conditions)}: {entry['wall_s']:.0f} s; about {elapsed / count * (len(todo) - count):.0f} s left")
    return done


def client_label(conditions: Conditions) -> str:
    """How a test's client is named in the fleet's progress lines: `cli Chrome h3` (the CLI under a
    browser's label) or `page Chromium h3` (the page in Chromium, QUIC forced or off)."""
    if conditions.client == PAGE:
        return f"page Chromium {PAGE_MODES[conditions.protocol]}"
    return f"cli {conditions.browser} {conditions.protocol}"


def fleet_entries_by_token(entries: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["token"]: e for e in entries}
