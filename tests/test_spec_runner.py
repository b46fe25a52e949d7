"""Experiment specs, scenarios and the runner: validation (every error names the field), matrix
expansion, seeded interleaving, stable run keys, resume and failed runs with a fake executor, and
one small experiment end to end through the real emulator, server and page-load engine."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from awaiting import wait_until
from documents import counters, emulator_counters, link, link_counters, load_result, page_object
from typer.testing import CliRunner

from protolab.errors import ToolError
from protolab.plan.experiment import load_spec, parse_spec
from protolab.plan.spec import (
    MIN_BUFFER_BYTES,
    SpecError,
    parse_buffer,
)
from protolab.run.executors import EXECUTORS
from protolab.run.runner import (
    Events,
    PlannedRun,
    conditions,
    plan,
    run_experiment,
)
from protolab.run.session import LabExecutor, lab_topology
from protolab.scenarios import SCENARIOS, Condition
from protolab.results.generated.load_result import LoadResult
from protolab.results.record import RunRecord
from protolab.store import ResultsStore

REPO = Path(__file__).resolve().parents[1]

BASE = """
schema_version = 1
name = "t"
scenario = "wifi-loss"
seed = 7
repetitions = 2
[axes]
bandwidth_mbps = [7]
rtt_ms = [50]
loss_pct = [0, 2]
mode = ["h1", "h2", "h2-parallel:2", "h3"]
page = ["baidu", "wikipedia"]
"""


def spec(text: str = BASE, **replace: str) -> Any:
    for old, new in replace.items():
        text = text.replace(old, new)
    return parse_spec(text)


# ---------------------------------------------------------------------- specs


def test_recorded_fairness_runs_keep_their_keys() -> None:
    """Keys of fairness-004's runs as recorded in the full reproduction (2026-11-26): a scenario
    parameter added later leaves them unchanged at its neutral value (key_neutral_params)."""
    keys = sorted(run.key for run in plan(load_spec(REPO / "specs" / "fairness-004.toml")))
    assert len(keys) == 18
    assert keys[:2] == ["04587b9c85e49c0a", "1aa48a4939a5ff21"]


def test_a_key_neutral_parameter_enters_the_key_only_off_its_neutral_value() -> None:
    from protolab.run import runner

    class Scenario:
        key_neutral_params = {"servers": "two"}

    assert runner._key_scenario_params(Scenario, {"servers": "two", "bin_ms": 100}) == {"bin_ms": 100}
    assert runner._key_scenario_params(Scenario, {"servers": "one", "bin_ms": 100}) == {"servers": "one", "bin_ms": 100}


def test_shipped_specs_are_valid() -> None:
    names = set()
    for file in sorted((REPO / "specs").glob("*.toml")):
        experiment = load_spec(file)
        names.add(experiment.scenario.name)
        assert plan(experiment), file
    assert {"wifi-loss", "ecmp-congestion", "bw-rtt-grid", "single-object"} <= names


def test_demo_spec_matches_the_brief() -> None:
    experiment = load_spec(REPO / "specs" / "demo.toml")
    assert experiment.name == "demo" and experiment.scenario.name == "wifi-loss"
    assert experiment.axes["bandwidth_mbps"] == [7] and experiment.axes["rtt_ms"] == [50]
    assert experiment.axes["loss_pct"] == [0, 2]
    assert experiment.axes["mode"] == ["h1", "h2", "h2-parallel:2", "h3"]
    from protolab.corpus import DEMO_PAGES

    assert experiment.axes["page"] == list(DEMO_PAGES)
    assert experiment.spec.repetitions == 3
    # HTTP/3 also with 001's QUIC (gquic39); the TCP modes run once
    assert experiment.axes["quic_cc"] == ["cubic", "gquic39"]
    runs = plan(experiment)
    assert len(runs) == 2 * 3 * 4 * 5 + 2 * 3 * 5
    assert sorted({(r.params["mode"], r.params["quic_cc"]) for r in runs} - {(m, "cubic") for m in
                  ("h1", "h2", "h2-parallel:2", "h3")}) == [("h3", "gquic39")]


def test_scenario_defaults_fill_missing_axes() -> None:
    experiment = parse_spec('schema_version = 1\nscenario = "bw-rtt-grid"\n')
    assert experiment.axes["bandwidth_mbps"] == [0.2, 0.3, 0.6, 1, 1.7, 2.9, 5, 8.6, 14.6, 25]
    assert experiment.axes["rtt_ms"] == list(range(30, 301, 30))
    assert experiment.axes["buffer"] == ["1bdp"]
    assert len(conditions(experiment)) == 100
    single = parse_spec('schema_version = 1\nscenario = "single-object"\n')
    assert single.axes["mode"] == ["h1c", "h1", "h3"]
    assert single.pages["single-object"].size_bytes == 8_000_000
    assert single.axes["bandwidth_mbps"] == ["unlimited", 14] and single.axes["rtt_ms"] == [0]


BAD_SPECS: list[tuple[str, dict[str, str], str]] = [
    ("mode", {'"h2-parallel:2", "h3"': '"h2-parallel:2", "h4"'},
     'spec.toml: axes.mode[3]: unknown mode "h4" (known: h1c, h1, h2, h2-parallel:N, h2-mptcp, h3, h3-parallel:N)'),
    ("parallel without N", {'"h2-parallel:2"': '"h2-parallel"'}, "spec.toml: axes.mode[2]: mode \"h2-parallel\": "),
    ("parallel zero", {'"h2-parallel:2"': '"h2-parallel:0"'}, "spec.toml: axes.mode[2]: "),
    ("h2 with N", {'"h2", ': '"h2:3", '}, 'spec.toml: axes.mode[1]: mode "h2:3": h2 takes no connection count'),
    ("duplicate mode", {'"h2", ': '"h1", '}, 'spec.toml: axes.mode: value "h1" at [1] appears twice'),
    ("empty axis", {'page = ["baidu", "wikipedia"]': "page = []"}, "spec.toml: axes.page: an axis needs at least one value"),
    ("unknown key", {'seed = 7': 'seed = 7\ncolour = "red"'}, "spec.toml: colour: unknown key (known: schema_version, "),
    ("unknown transport key", {"[axes]": "[transport]\nbogus = 1\n[axes]"}, "spec.toml: transport.bogus: unknown key"),
    ("tcp cc", {"[axes]": '[transport]\ntcp_cc = "vegas"\n[axes]'},
     'spec.toml: transport.tcp_cc: unknown TCP congestion control "vegas" (known: cubic, reno, bbr)'),
    ("scheduler", {"[axes]": '[transport]\nscheduler = "random"\n[axes]'}, "spec.toml: transport.scheduler: unknown scheduler"),
    ("h1 connections", {"[axes]": "[transport]\nh1_connections = 0\n[axes]"}, "spec.toml: transport.h1_connections: "),
    ("buffer", {"[axes]": '[axes]\nbuffer = ["1bdp", "2xbdp"]'}, 'spec.toml: axes.buffer[1]: invalid buffer "2xbdp"'),
    ("buffer zero", {"[axes]": "[axes]\nbuffer = [0]"}, "spec.toml: axes.buffer[0]: invalid buffer 0"),
    ("loss", {"loss_pct = [0, 2]": "loss_pct = [0, 150]"}, "spec.toml: axes.loss_pct[1]: invalid loss 150.0"),
    ("bandwidth", {"bandwidth_mbps = [7]": "bandwidth_mbps = [-1]"}, "spec.toml: axes.bandwidth_mbps[0]: invalid bandwidth"),
    ("bandwidth word", {"bandwidth_mbps = [7]": 'bandwidth_mbps = ["fast"]'}, 'spec.toml: axes.bandwidth_mbps[0]: invalid bandwidth "fast"'),
    ("rtt", {"rtt_ms = [50]": "rtt_ms = [-5]"}, "spec.toml: axes.rtt_ms[0]: invalid RTT"),
    ("scenario", {'scenario = "wifi-loss"': 'scenario = "lte"'},
     f'spec.toml: scenario: unknown scenario "lte" (known: {", ".join(SCENARIOS)})'),
    ("quic cc name", {"[axes]": '[transport]\nquic_cc = "cubci"\n[axes]'},
     'spec.toml: transport.quic_cc: unknown congestion controller "cubci" (known: cubic, reno, fast, sprout-ewma, fixed,'),
    ("quic cc key", {"[axes]": '[axes]\nquic_cc = ["cubic", "cubic:gamma=2"]'},
     'spec.toml: axes.quic_cc[1]: cubic: unknown parameter "gamma" (accepted: c, cube_factor, beta, n, iw, hystart,'),
    ("quic cc value", {"[axes]": '[axes]\nquic_cc = ["cubic:beta=2"]'},
     'spec.toml: axes.quic_cc[0]: cubic: beta="2": a number in 0.05..1'),
    ("quic cc % rate, unlimited link", {"bandwidth_mbps = [7]": 'bandwidth_mbps = ["unlimited"]\nquic_cc = ["fixed:rate=50%"]'},
     'spec.toml: axes.quic_cc[0]: fixed:rate=50% gives a rate in % of the link, but the bandwidth axis has "unlimited"'),
    ("transport axis value", {"[axes]": "[axes]\nquic_packet_threshold = [3, 2]"},
     "spec.toml: axes.quic_packet_threshold[1]: Input should be greater than or equal to 3"),
    ("stream window", {"[axes]": "[transport]\nquic_stream_window = 1000\n[axes]"},
     "spec.toml: transport.quic_stream_window: Input should be greater than or equal to 1200"),
    ("transport twice", {"[axes]": '[transport]\nquic_cc = "bbr"\n[axes]\nquic_cc = ["cubic"]'},
     "spec.toml: axes.quic_cc: also set in [transport]; give it in one place"),
    ("sweep axis", {"[axes]": "[[sweeps]]\nloss_pct = [101]\n[axes]"}, "spec.toml: sweeps[0].loss_pct[0]: invalid loss 101.0"),
    ("no scenario", {'scenario = "wifi-loss"': ""}, "spec.toml: scenario: required key is missing"),
    ("schema", {"schema_version = 1": "schema_version = 2"}, "spec.toml: schema_version: unsupported schema_version 2"),
    ("params key", {"[axes]": "[params]\nbogus = 1\n[axes]"}, "spec.toml: params.bogus: unknown key (known: loss_directions)"),
    ("params value", {"[axes]": '[params]\nloss_directions = "sideways"\n[axes]'}, "spec.toml: params.loss_directions: "),
    ("extra axis", {"[axes]": "[axes]\ncongested = [true]"},
     'spec.toml: axes.congested: unknown axis for scenario "wifi-loss"'),
    ("page", {'"wikipedia"]': '"wikipedia", "myspace"]'}, 'spec.toml: axes.page[2]: unknown page "myspace"'),
    ("manifest path", {'"wikipedia"]': '"pages/missing.json"]'}, "spec.toml: axes.page[1]: manifest "),
    ("repetitions", {"repetitions = 2": "repetitions = 0"}, "spec.toml: repetitions: "),
    ("timeout", {"[axes]": "timeout_s = -1\n[axes]"}, "spec.toml: timeout_s: "),
    ("toml", {"[axes]": "[axes"}, "spec.toml: not valid TOML"),
    ("lab offload", {"[axes]": '[lab]\noffload = "on"\n[axes]'}, "spec.toml: lab.offload: Input should be a valid boolean"),
    ("lab key", {"[axes]": "[lab]\noffloads = true\n[axes]"},
     "spec.toml: lab.offloads: unknown key (known: offload, host_offload)"),
    ("host offload host", {"[axes]": "[lab.host_offload]\nservr = true\n[axes]"},
     'spec.toml: lab.host_offload.servr: scenario "wifi-loss" has no host "servr" (its hosts: client, server)'),
    ("host offload value", {"[axes]": "[lab.host_offload]\nserver = 1\n[axes]"},
     "spec.toml: lab.host_offload.server: Input should be a valid boolean"),
]


@pytest.mark.parametrize(("change", "expected"), [(c, e) for _, c, e in BAD_SPECS],
                         ids=[name for name, _, _ in BAD_SPECS])
def test_bad_specs_name_the_field(change: dict[str, str], expected: str) -> None:
    with pytest.raises(SpecError) as raised:
        spec(**change)
    assert expected in str(raised.value), str(raised.value)


def test_bad_ecmp_params_and_axis() -> None:
    text = 'schema_version = 1\nscenario = "ecmp-congestion"\n[axes]\ncongested = ["maybe"]\n'
    with pytest.raises(SpecError, match=r"spec.toml: axes.congested\[0\]: "):
        parse_spec(text)
    with pytest.raises(SpecError, match=r"spec.toml: params.cross_flows: "):
        parse_spec('schema_version = 1\nscenario = "ecmp-congestion"\n[params]\ncross_flows = 0\n')
    with pytest.raises(SpecError, match=r"spec.toml: params.path_buffer: invalid buffer"):
        parse_spec('schema_version = 1\nscenario = "ecmp-congestion"\n[params]\npath_buffer = "lots"\n')
    for bad in ('"lots"', "1.5", "0"):
        with pytest.raises(SpecError, match=r"spec.toml: params.cross_load"):
            parse_spec(f'schema_version = 1\nscenario = "ecmp-congestion"\n[params]\ncross_load = {bad}\n')
    paced = parse_spec('schema_version = 1\nscenario = "ecmp-congestion"\n[params]\ncross_load = 0.9\n')
    assert paced.params.cross_load == 0.9


def test_lab_offloads_per_host_win_over_the_flag_and_the_flag_over_the_spec() -> None:
    fairness = ('schema_version = 1\nscenario = "fairness"\n[params]\nworkload = "bulk"\n'
                '[axes]\nmode = ["tcp vs h3"]\n[lab]\noffload = false\n[lab.host_offload]\nserver = true\n')
    experiment = parse_spec(fairness)
    assert experiment.spec.lab.offload_for("server", False) is True
    assert experiment.spec.lab.offload_for("client", None) is False
    assert experiment.spec.lab.offload_for("client", True) is True
    topology, lab_offload = lab_topology(experiment, "x", [], None)
    assert {h["name"]: h.get("offload") for h in topology["hosts"]} == {
        "client": None, "client2": None, "server": True, "server2": None}
    assert lab_offload is False
    assert lab_topology(experiment, "x", [], True)[1] is True
    plain = parse_spec(fairness.split("[lab]")[0])
    assert plain.spec.lab.offload_for("server") is None and lab_topology(plain, "x", [], None)[1] is None
    assert all("offload" not in h for h in lab_topology(plain, "x", [], None)[0]["hosts"])


def test_spec_file_errors_name_the_file(tmp_path: Path) -> None:
    file = tmp_path / "exp.toml"
    file.write_text(BASE.replace('"h3"]', '"h4"]'))
    with pytest.raises(SpecError, match=r"^exp.toml: axes.mode\[3\]: unknown mode \"h4\""):
        load_spec(file)
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.toml")


def test_manifest_page_relative_to_spec(tmp_path: Path) -> None:
    from protolab.corpus import site_manifest

    manifest = site_manifest("google", seed=3)
    manifest["name"] = "mine"
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "mine.json").write_text(json.dumps(manifest))
    file = tmp_path / "exp.toml"
    file.write_text(BASE.replace('page = ["baidu", "wikipedia"]', 'page = ["pages/mine.json", "baidu"]'))
    experiment = load_spec(file)
    page = experiment.pages["pages/mine.json"]
    assert page.name == "mine" and page.manifest == manifest and page.source.endswith("mine.json")
    (tmp_path / "pages" / "bad.json").write_text("{not json")
    file.write_text(BASE.replace('page = ["baidu", "wikipedia"]', 'page = ["baidu", "pages/bad.json"]'))
    with pytest.raises(SpecError, match=r"exp.toml: axes.page\[1\]: manifest .*bad.json: \(document\): "):
        load_spec(file)


def test_buffers() -> None:
    assert parse_buffer("1bdp").bytes_for(7, 50) == 43750
    assert parse_buffer("0.5BDP").bytes_for(7, 50) == 21875
    assert parse_buffer(45000).bytes_for(7, 50) == 45000
    assert parse_buffer("1bdp").bytes_for(0.2, 30) == MIN_BUFFER_BYTES  # 750 B would drop every packet
    assert parse_buffer("1bdp").bytes_for(None, 0) is None  # unlimited link: default queue
    assert parse_buffer("default").bytes_for(7, 50) is None
    for bad in ("bdp", "-1bdp", "1.5", True, 2.5):
        with pytest.raises(ValueError):
            parse_buffer(bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- scenarios


def test_wifi_loss_links() -> None:
    experiment = spec()
    scenario = experiment.scenario
    lossy = Condition.from_axes({"bandwidth_mbps": 7, "rtt_ms": 50, "loss_pct": 2, "buffer": "1bdp"})
    links = scenario.links(experiment.params, lossy)
    for name in ("client.up", "client.down"):
        assert links[name]["rate_bps"] == 7_000_000
        assert links[name]["delay_ns"] == 25_000_000  # 50 ms RTT, half each way
        assert links[name]["loss"] == {"kind": "bernoulli", "p": 0.02}
        assert links[name]["queue"] == {"kind": "droptail", "bytes": 43750}
    for name in ("server.up", "server.down", "p0.forward", "p0.reverse"):
        assert links[name]["rate_bps"] is None and links[name]["loss"] is None
    clean = Condition.from_axes({"bandwidth_mbps": 7, "rtt_ms": 50, "loss_pct": 0, "buffer": "1bdp"})
    assert scenario.links(experiment.params, clean)["client.down"]["loss"] is None
    down_only = spec(**{"[axes]": '[params]\nloss_directions = "down"\n[axes]'})
    links = scenario.links(down_only.params, lossy)
    assert links["client.up"]["loss"] is None and links["client.down"]["loss"]["p"] == 0.02
    topology = scenario.topology("x", experiment.params, ["10.99.0.1", "10.99.4.1"], 1)
    server = next(h for h in topology["hosts"] if h["name"] == "server")
    assert server["addresses"] == ["10.99.0.1", "10.99.4.1"] and server["side"] == "right"


def test_ecmp_topology_and_links() -> None:
    experiment = parse_spec('schema_version = 1\nscenario = "ecmp-congestion"\n[axes]\npage = ["baidu"]\n')
    scenario, params = experiment.scenario, experiment.params
    assert experiment.axes["congested"] == [False, True]
    assert [c.extra("congested") for c in conditions(experiment)] == [False, True]
    topology = scenario.topology("x", params, ["10.99.0.1"], 1)
    assert topology["routing"] == {"mode": "ecmp-xor", "pins": [{"left": "xclient", "right": "xserver", "path": "p1"}]}
    assert [p["name"] for p in topology["paths"]] == ["p0", "p1"]
    links = scenario.links(params, conditions(experiment)[1])
    assert links["client.down"]["rate_bps"] == 10_000_000 and links["client.up"]["rate_bps"] == 10_000_000
    assert links["p1.reverse"]["rate_bps"] == 20_000_000 and links["p0.forward"]["delay_ns"] == 25_000_000
    assert params.cross_load == "greedy"
    assert scenario.busy(params, conditions(experiment)[1]) and not scenario.busy(params, conditions(experiment)[0])


def test_grid_and_single_object_links() -> None:
    grid = parse_spec('schema_version = 1\nscenario = "bw-rtt-grid"\n[axes]\npage = ["baidu"]\n')
    first = conditions(grid)[0]  # 0.2 Mbit/s, 30 ms
    links = grid.scenario.links(grid.params, first)
    assert links["p0.forward"]["rate_bps"] == 200_000 and links["p0.reverse"]["delay_ns"] == 15_000_000
    assert links["p0.forward"]["queue"]["bytes"] == MIN_BUFFER_BYTES
    single = parse_spec('schema_version = 1\nscenario = "single-object"\n')
    unlimited = conditions(single)[0]
    links = single.scenario.links(single.params, unlimited)
    assert links["p0.forward"]["rate_bps"] is None and links["p0.forward"]["delay_ns"] == 0
    assert links["p0.forward"]["queue"] == {"kind": "droptail", "packets": 1000}
    assert set(SCENARIOS) >= {"wifi-loss", "ecmp-congestion", "bw-rtt-grid", "single-object"}


# ---------------------------------------------------------------------- matrix, order, keys


def test_matrix_expansion_and_blocks() -> None:
    experiment = spec()
    runs = plan(experiment)
    assert len(runs) == 2 * 2 * 4 * 2  # conditions x repetitions x modes x pages
    assert [r.order_index for r in runs] == list(range(len(runs)))
    blocks: dict[tuple[int, int], list[PlannedRun]] = {}
    for run in runs:
        blocks.setdefault((run.condition_index, run.repetition), []).append(run)
    # blocks are contiguous, in condition-then-repetition order, each a full mode x page set
    assert list(blocks) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for block in blocks.values():
        pairs = {(r.mode, r.page.name) for r in block}
        assert len(block) == len(pairs) == 8
        assert len({r.link_seed for r in block}) == 1  # every protocol meets the same loss draws
    assert runs[0].params["loss_pct"] == 0 and runs[-1].params["loss_pct"] == 2
    seeds = {r.link_seed for r in runs}
    assert len(seeds) == 4
    for key in ("scenario", "bandwidth_mbps", "rtt_ms", "loss_pct", "buffer_bytes", "mode", "page", "repetition",
                "seed", "tcp_cc", "quic_cc", "order_index"):
        assert key in runs[0].params
    assert runs[0].params["buffer_bytes"] == 43750


def test_order_is_seeded_and_interleaved() -> None:
    first = [(r.mode, r.page.name, r.repetition) for r in plan(spec())]
    again = [(r.mode, r.page.name, r.repetition) for r in plan(spec())]
    assert first == again
    other_seed = [(r.mode, r.page.name, r.repetition) for r in plan(spec(**{"seed = 7": "seed = 8"}))]
    assert other_seed != first and sorted(other_seed) == sorted(first)
    runs = plan(spec())
    block_orders = []
    for start in range(0, len(runs), 8):
        block = runs[start:start + 8]
        modes = [r.mode for r in block]
        block_orders.append([(r.mode, r.page.name) for r in block])
        # interleaved: modes are not run one after the other in a fixed grouped order
        grouped = all(modes[i] == modes[i + 1] for i in range(0, 8, 2))
        assert not (grouped and modes == sorted(modes))
    assert len({tuple(o) for o in block_orders}) > 1  # repetitions get different orders


def test_run_keys_are_stable() -> None:
    runs = plan(spec())
    keys = [r.key for r in runs]
    assert len(set(keys)) == len(keys)
    assert keys == [r.key for r in plan(spec())]
    by_params = {(r.mode, r.page.name, r.repetition, r.params["loss_pct"]): r.key for r in runs}
    # adding a page or a repetition, or a longer timeout, does not change the keys of existing runs
    bigger = spec(**{'page = ["baidu", "wikipedia"]': 'page = ["baidu", "vk", "wikipedia"]',
                     "repetitions = 2": "repetitions = 3\ntimeout_s = 99"})
    bigger_keys = {(r.mode, r.page.name, r.repetition, r.params["loss_pct"]): r.key for r in plan(bigger)}
    assert all(bigger_keys[k] == v for k, v in by_params.items())
    # a change of what is measured changes them
    for change in ({"seed = 7": "seed = 9"}, {"[axes]": '[transport]\ntcp_cc = "bbr"\n[axes]'},
                   {"[axes]": "[axes]\nbuffer = [45000]"}):
        assert not set(keys) & {r.key for r in plan(spec(**change))}, change


# ---------------------------------------------------------------------- runner with a fake executor


def fake_load(run: PlannedRun) -> LoadResult:
    objects = run.page.manifest["objects"]
    return load_result(page=run.page.name, mode=run.mode, plt_ms=100.0 + run.order_index, connections=[],
                       objects=[page_object(o["origin"], o["path"], o["size"], parent=o.get("parent"), finished_ms=3.0)
                                for o in objects])


@dataclass
class FakeSession:
    executor: FakeExecutor

    def enter(self, condition: Condition) -> None:
        self.executor.log.append(("enter", condition.loss_pct))

    def leave(self, condition: Condition) -> None:
        self.executor.log.append(("leave", condition.loss_pct))

    def execute(self, run: PlannedRun, run_dir: Path) -> RunRecord:
        self.executor.executed.append(run.key)
        if len(self.executor.executed) == self.executor.interrupt_at:
            (run_dir / "partial").write_text("half")
            raise KeyboardInterrupt
        if run.key in self.executor.fail:
            raise ToolError("load exploded")
        page_load = fake_load(run)
        (run_dir / "result.json").write_text(page_load.model_dump_json())
        delivered = link_counters(enqueued=1, size=page_load.bytes + 1000)
        return RunRecord(run.key, dict(run.params), "ok", None, page_load=page_load,
                         link_config={"client.down": link(rate_bps=7_000_000)},
                         link_counters=counters({"client.down": delivered}, now_ns=5,
                                                emulator=emulator_counters(rx_packets=1)))


@dataclass
class FakeExecutor:
    fail: set[str] = field(default_factory=set)
    interrupt_at: int | None = None
    executed: list[str] = field(default_factory=list)
    log: list[tuple[str, float]] = field(default_factory=list)
    sessions: int = 0

    @contextlib.contextmanager
    def session(self, experiment: Any, results_dir: Path) -> Iterator[FakeSession]:
        self.sessions += 1
        self.log.append(("open", -1))
        try:
            yield FakeSession(self)
        finally:
            self.log.append(("close", -1))

    def provenance(self) -> dict[str, Any]:
        return {"fake": True}


def _rows(results: Path, sql: str) -> list[dict[str, Any]]:
    with ResultsStore(results, read_only=True) as store:
        return store.query(sql)


def test_runner_records_and_resumes(tmp_path: Path) -> None:
    experiment = spec()
    runs = plan(experiment)
    fake = FakeExecutor()
    summary = run_experiment(experiment, tmp_path, fake)
    assert (summary.total, summary.ok, summary.skipped) == (32, 32, 0)
    assert fake.executed == [r.key for r in runs]  # the planned, interleaved order
    assert fake.log[0] == ("open", -1) and fake.log[-1] == ("close", -1)
    assert [e for e in fake.log if e[0] in ("enter", "leave")] == [("enter", 0), ("leave", 0), ("enter", 2), ("leave", 2)]
    rows = _rows(tmp_path, "SELECT run_key, status, mode, page, order_index, artifacts_dir FROM runs ORDER BY order_index")
    assert [r["run_key"] for r in rows] == [r.key for r in runs]
    assert all(r["artifacts_dir"] == f"runs/{r['run_key']}" for r in rows)
    assert (tmp_path / "runs" / runs[0].key / "result.json").exists()
    assert (tmp_path / "runs" / runs[0].key / "run.json").exists()
    experiment_row = _rows(tmp_path, "SELECT id, name, spec, provenance FROM experiments")[0]
    assert experiment_row["id"] == "t" and json.loads(experiment_row["spec"])["scenario"] == "wifi-loss"
    # a second run of the same spec does nothing and opens no lab
    again = FakeExecutor()
    summary = run_experiment(spec(), tmp_path, again)
    assert summary.skipped == 32 and summary.executed == 0 and again.sessions == 0


def test_needed_keeps_only_the_runs_it_accepts_and_a_later_run_adds_the_rest(tmp_path: Path) -> None:
    """What `protolab reproduce` grows a round with: only the cells its undecided claims read."""
    experiment = spec()
    runs = plan(experiment)
    h2 = FakeExecutor()
    summary = run_experiment(experiment, tmp_path, h2, needed=lambda run: run.mode == "h2")
    wanted = [r.key for r in runs if r.mode == "h2"]
    assert 0 < len(wanted) < len(runs) and h2.executed == wanted
    assert (summary.total, summary.ok) == (len(wanted), len(wanted))
    rest = FakeExecutor()
    summary = run_experiment(spec(), tmp_path, rest)
    assert summary.skipped == len(wanted) and rest.executed == [r.key for r in runs if r.mode != "h2"]


def test_interrupt_then_resume(tmp_path: Path) -> None:
    experiment = spec()
    runs = plan(experiment)
    fake = FakeExecutor(interrupt_at=6)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(experiment, tmp_path, fake)
    assert fake.log[-1] == ("close", -1)  # the session (lab) was torn down
    recorded = {r["run_key"] for r in _rows(tmp_path, "SELECT run_key FROM runs")}
    assert recorded == {r.key for r in runs[:5]}
    assert not (tmp_path / "runs" / runs[5].key).exists()  # the partial run left nothing
    resumed = FakeExecutor()
    summary = run_experiment(spec(), tmp_path, resumed)
    assert summary.skipped == 5 and summary.ok == 27
    assert resumed.executed == [r.key for r in runs[5:]]


def test_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    experiment = spec()
    runs = plan(experiment)
    fake = FakeExecutor(fail={runs[3].key})
    summary = run_experiment(experiment, tmp_path, fake)
    assert (summary.ok, summary.failed) == (31, 1)
    failed = _rows(tmp_path, "SELECT run_key, status, error, plt_ms FROM runs WHERE status <> 'ok'")
    assert failed == [{"run_key": runs[3].key, "status": "failed", "error": "ToolError: load exploded", "plt_ms": None}]
    # a failed run counts as finished: a rerun skips it too
    assert run_experiment(spec(), tmp_path, FakeExecutor()).executed == 0


def test_retry_failed_reruns_failed_runs_keeping_their_attempts(tmp_path: Path) -> None:
    """`--retry-failed`: a run that failed (twice) is run again until it succeeds; the store holds
    its last attempt, run.json and RESULTS/attempts/<key>/<n> the earlier ones."""
    experiment = spec()
    runs = plan(experiment)
    broken = runs[3].key
    run_experiment(experiment, tmp_path, FakeExecutor(fail={broken}))
    assert run_experiment(spec(), tmp_path, FakeExecutor(), retry_failed=False).executed == 0
    from protolab.cli import app

    file = tmp_path / "spec.toml"
    file.write_text(BASE)
    for flags, expected in (([], "32 done, 0 to do"), (["--retry-failed"], "31 done, 1 to do")):
        shown = CliRunner().invoke(app, ["run", str(file), "--dry-run", "--results", str(tmp_path), *flags])
        assert shown.exit_code == 0 and expected in " ".join(shown.output.split()), shown.output
    again = FakeExecutor(fail={broken})
    summary = run_experiment(spec(), tmp_path, again, retry_failed=True)
    assert again.executed == [broken] and (summary.skipped, summary.failed) == (31, 1)
    fixed = FakeExecutor()
    summary = run_experiment(spec(), tmp_path, fixed, retry_failed=True)
    assert fixed.executed == [broken] and (summary.skipped, summary.ok) == (31, 1)
    assert _rows(tmp_path, f"SELECT status, error FROM runs WHERE run_key = '{broken}'") == [{"status": "ok", "error": None}]
    run_json = json.loads((tmp_path / "runs" / broken / "run.json").read_text())
    assert run_json["status"] == "ok" and run_json["attempt"] == 3
    earlier = run_json["previous_attempts"]
    assert [(a["status"], a["error"], a["artifacts_dir"]) for a in earlier] == [
        ("failed", "ToolError: load exploded", f"attempts/{broken}/1"),
        ("failed", "ToolError: load exploded", f"attempts/{broken}/2")]
    for attempt in earlier:
        kept = json.loads((tmp_path / attempt["artifacts_dir"] / "run.json").read_text())
        assert kept["status"] == "failed" and kept["started_unix_ns"] == attempt["started_unix_ns"]
    # the runs that were ok were never touched again, and keep no attempts
    other = json.loads((tmp_path / "runs" / runs[0].key / "run.json").read_text())
    assert other["attempt"] == 1 and other["previous_attempts"] == []
    assert sorted(p.name for p in (tmp_path / "attempts").iterdir()) == [broken]


def test_timeout_runs_are_retried(tmp_path: Path) -> None:
    experiment = spec(**{"loss_pct = [0, 2]": "loss_pct = [0]", "repetitions = 2": "repetitions = 1"})

    class TimeoutOnce(FakeExecutor):
        pass

    fake = TimeoutOnce()
    original = FakeSession.execute

    def timing_out(self: FakeSession, run: PlannedRun, run_dir: Path) -> RunRecord:
        outcome = original(self, run, run_dir)
        if run.order_index == 0:
            outcome.status, outcome.error = "timeout", "load timed out"
            assert outcome.page_load is not None
            outcome.page_load = outcome.page_load.model_copy(update={"status": "timeout"})
        return outcome

    FakeSession.execute = timing_out  # type: ignore[method-assign]
    try:
        summary = run_experiment(experiment, tmp_path, fake)
    finally:
        FakeSession.execute = original  # type: ignore[method-assign]
    assert summary.timeout == 1
    assert run_experiment(spec(**{"loss_pct = [0, 2]": "loss_pct = [0]", "repetitions = 2": "repetitions = 1"}),
                          tmp_path, FakeExecutor()).ok == 1


# ---------------------------------------------------------------------- CLI


def test_cli_run_bad_spec_and_dry_run(tmp_path: Path) -> None:
    from protolab.cli import app

    bad = tmp_path / "bad.toml"
    bad.write_text(BASE.replace('"h3"]', '"h4"]'))
    result = CliRunner().invoke(app, ["run", str(bad)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    good = tmp_path / "good.toml"
    good.write_text(BASE)
    result = CliRunner().invoke(app, ["run", str(good), "--dry-run", "--results", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "32 runs = 1 bandwidth_mbps x 1 rtt_ms x 2 loss_pct x 1 buffer conditions x 2 repetitions" in text
    assert "0 done, 32 to do" in text
    assert not (tmp_path / "r").exists()  # a dry run writes nothing


def test_cli_error_message_is_the_spec_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BASE.replace('"h3"]', '"h4"]'))
    completed = subprocess.run([sys.executable, "-m", "protolab", "run", str(bad)], capture_output=True, text=True, check=False,
                               env={"COLUMNS": "300", "PATH": "/usr/bin:/bin"})
    assert completed.returncode == 1
    assert 'bad.toml: axes.mode[3]: unknown mode "h4"' in completed.stderr
    assert "Traceback" not in completed.stderr


# ---------------------------------------------------------------------- end to end (real lab)


E2E_SPEC = """
schema_version = 1
name = "e2e"
scenario = "wifi-loss"
seed = 3
repetitions = 1
timeout_s = 30

[axes]
bandwidth_mbps = [20]
rtt_ms = [20]
loss_pct = [0, 2]
buffer = ["1bdp"]
mode = ["h1", "h3"]
page = ["baidu"]
"""


@pytest.mark.lab
def test_end_to_end_experiment(emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> None:
    file = tmp_path / "e2e.toml"
    file.write_text(E2E_SPEC)
    experiment = load_spec(file)
    results = tmp_path / "results"
    executor = LabExecutor(workloads=EXECUTORS, binary=emu_binary, lab_name=lab_name())
    summary = run_experiment(experiment, results, executor, Events())
    assert summary.total == 4
    runs = _rows(results, "SELECT * FROM runs ORDER BY order_index")
    assert [r["status"] for r in runs] == ["ok"] * 4, [r["error"] for r in runs]
    assert {(r["mode"], r["loss_pct"]) for r in runs} == {("h1", 0), ("h3", 0), ("h1", 2), ("h3", 2)}
    assert all(r["plt_ms"] > 0 and r["page"] == "baidu" and r["tcp_cc"] == "cubic" for r in runs)
    page_bytes = experiment.pages["baidu"].size_bytes
    loads = _rows(results, "SELECT run_key, status, bytes, n_objects FROM page_loads")
    assert len(loads) == 4 and all(r["bytes"] == page_bytes and r["n_objects"] == 10 for r in loads)
    links = _rows(results, "SELECT l.link, l.delivered_bytes, l.configured_loss_pct, l.configured_rate_mbps, "
                           "l.configured_delay_ms, r.loss_pct FROM link_counters l JOIN runs r USING (run_key) "
                           "WHERE l.link = 'client.down'")
    assert len(links) == 4
    for row in links:
        assert row["delivered_bytes"] > page_bytes  # headers, handshakes and IP overhead on top of the bodies
        assert row["configured_loss_pct"] == pytest.approx(row["loss_pct"])
        assert row["configured_rate_mbps"] == pytest.approx(20)
        assert row["configured_delay_ms"] == pytest.approx(10)
    for run in runs:
        assert (results / run["artifacts_dir"] / "result.json").exists()
    assert (results / "pages" / "baidu.json").exists()
    # resume: nothing left to do, no lab needed
    executor = LabExecutor(workloads=EXECUTORS, binary=emu_binary, lab_name=lab_name())
    assert run_experiment(load_spec(file), results, executor).executed == 0
    # the report reads the store
    completed = subprocess.run([sys.executable, "-m", "protolab", "report", str(results)],
                               capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    assert (results / "report" / "index.html").exists()


E2E_SAMPLES_SPEC = """
schema_version = 1
name = "e2e-samples"
scenario = "wifi-loss"
seed = 4
repetitions = 1
timeout_s = 30

[axes]
bandwidth_mbps = [20]
rtt_ms = [20]
loss_pct = [1]
mode = ["h2-mptcp", "h3"]
page = ["wikipedia"]

[artifacts]
samples = true
sample_interval_ms = 5
qlog = true
"""


@pytest.mark.lab
def test_end_to_end_samples_of_both_ends_and_mptcp(emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path) -> None:
    """With samples on, every connection of every run has client and server rows in the store;
    h2-mptcp runs get the lab's MPTCP set-up (two subflows) from the runner."""
    file = tmp_path / "e2e.toml"
    file.write_text(E2E_SAMPLES_SPEC)
    results = tmp_path / "results"
    executor = LabExecutor(workloads=EXECUTORS, binary=emu_binary, lab_name=lab_name())
    summary = run_experiment(load_spec(file), results, executor, Events())
    assert (summary.ok, summary.total) == (2, 2)
    conns = _rows(results, "SELECT r.mode, c.transport, c.subflows, c.bytes FROM connections c JOIN runs r USING (run_key)")
    assert {c["transport"] for c in conns if c["mode"] == "h2-mptcp"} == {"mptcp"}
    assert all(c["subflows"] == 2 for c in conns if c["mode"] == "h2-mptcp"), conns
    samples = _rows(results, "SELECT r.mode, s.conn, s.role, s.transport, s.subflow, s.event, s.cc_state, s.cwnd, "
                             "s.cwnd_bytes, s.rtt_us, s.fields FROM transport_samples s JOIN runs r USING (run_key)")
    for mode, transport in (("h2-mptcp", "mptcp"), ("h3", "quic")):
        mine = [s for s in samples if s["mode"] == mode]
        assert {s["role"] for s in mine} == {"client", "server"}, mode
        assert {s["transport"] for s in mine} == {transport}
        n_conns = sum(1 for c in conns if c["mode"] == mode)
        assert len({s["conn"] for s in mine if s["role"] == "server"}) == n_conns, mode
        periodic = [s for s in mine if s["event"] == "sample"]
        assert all(s["cwnd"] > 0 and s["rtt_us"] > 0 for s in periodic if s["role"] == "server")
        # Every row carries the controller's state; the window in bytes whatever the transport.
        assert all(s["cc_state"] is not None and s["cwnd_bytes"] >= s["cwnd"] for s in periodic), mode
    # The QUIC server (our Cubic) writes a row at each state change, starting in slow start.
    changes = [s for s in samples if s["mode"] == "h3" and s["role"] == "server" and s["event"] == "state"]
    assert changes and changes[0]["cc_state"] == "slow_start"
    assert {s["subflow"] for s in samples if s["mode"] == "h2-mptcp"} == {0, 1}
    # A page load's connections join their samples: connections.conn_id is the samples' conn.
    joined = _rows(results, "SELECT c.run_key, c.conn_id, count(DISTINCT s.role) AS roles FROM connections c "
                            "JOIN transport_samples s ON s.run_key = c.run_key AND s.conn = c.conn_id "
                            "GROUP BY c.run_key, c.conn_id")
    assert len(joined) == len(conns) and all(j["roles"] == 2 for j in joined), joined
    states = _rows(results, "SELECT r.mode, c.role, c.sender, c.frac_slow_start, c.frac_congestion_avoidance, "
                            "c.frac_application_limited, c.frac_recovery, c.frac_conservative_slow_start "
                            "FROM connection_states c JOIN runs r USING (run_key)")
    for mode in ("h2-mptcp", "h3"):
        senders = [s for s in states if s["mode"] == mode and s["sender"]]
        assert senders and all(s["role"] == "server" for s in senders), (mode, states)
        for s in senders:
            total = sum(s[k] for k in ("frac_slow_start", "frac_congestion_avoidance", "frac_application_limited",
                                       "frac_recovery", "frac_conservative_slow_start"))
            assert 0.0 < total <= 1.0 + 1e-9, s
    # qlog of both ends for the QUIC run, none for the MPTCP one
    for run in _rows(results, "SELECT mode, artifacts_dir FROM runs"):
        qlogs = sorted(p.name.split("-", 1)[0] for p in (results / run["artifacts_dir"] / "qlog").glob("*.qlog"))
        n_conns = sum(1 for c in conns if c["mode"] == run["mode"])
        assert qlogs == ([] if run["mode"] == "h2-mptcp" else ["client"] * n_conns + ["server"] * n_conns), (run, qlogs)


INTERRUPT_SPEC = """
schema_version = 1
name = "interrupted"
scenario = "wifi-loss"
seed = 5
repetitions = 4
timeout_s = 30

[axes]
bandwidth_mbps = [20]
rtt_ms = [20]
loss_pct = [0]
mode = ["h1", "h2", "h3"]
page = ["baidu"]
"""


@pytest.mark.lab
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_tears_down_and_a_rerun_resumes(emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path,
                                               sig: signal.Signals) -> None:
    """SIGINT to `protolab run` (what Ctrl-C sends) or SIGTERM (what `kill` and `timeout` send):
    exit 130, the lab's namespaces and processes are gone, the run in progress is not recorded;
    the same command again does only the rest."""
    from conftest import lab_namespaces

    file = tmp_path / "spec.toml"
    file.write_text(INTERRUPT_SPEC)
    results = tmp_path / "results"
    name = lab_name()
    argv = [sys.executable, "-m", "protolab", "run", str(file), "--results", str(results), "--lab", name,
            "--binary", str(emu_binary)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Interrupt once a few runs have a directory (3 of 12 started).
    wait_until(lambda: len(list((results / "runs").glob("*"))) >= 3 or proc.poll() is not None,
               what="3 runs started", within=120)
    assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "interrupted" in out and "Traceback" not in out, out
    assert lab_namespaces(name) == []
    leftovers = subprocess.run(["pgrep", "-f", f"pl-{name}-|--lab {name}"], capture_output=True, text=True, check=False)
    assert leftovers.stdout.strip() == "", leftovers.stdout
    recorded = {r["run_key"] for r in _rows(results, "SELECT run_key FROM runs")}
    assert 1 <= len(recorded) < 12
    # Every recorded run has its directory; an interrupted one left none.
    assert {p.name for p in (results / "runs").iterdir()} == recorded
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"resuming: {len(recorded)} of 12 runs already recorded" in done.stdout
    assert len(_rows(results, "SELECT run_key FROM runs WHERE status = 'ok'")) == 12
