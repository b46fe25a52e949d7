"""One corpus for every passive entry under `protolab reproduce --all` (reproduce.shared_corpus):
the passive figures share one results directory keyed by their spec's configuration, and the
flow corpus in it is built once and rebuilt only when its captures change."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from protolab.reproduce import atlas, cli, shared_corpus
from protolab.reproduce.figures import FIGURES, seed000_passive

PASSIVE = [f for f in seed000_passive.FIGURES if not f.not_runnable]


def test_the_config_key_ignores_key_order_and_follows_every_value() -> None:
    spec = {"name": "traffic-corpus", "axes": {"page": ["a", "b"], "rtt_ms": [20]}, "seed": 1}
    same = {"seed": 1, "axes": {"rtt_ms": [20], "page": ["a", "b"]}, "name": "traffic-corpus"}
    assert shared_corpus.config_key(spec) == shared_corpus.config_key(same)
    assert shared_corpus.config_key(spec) != shared_corpus.config_key({**spec, "seed": 2})
    assert shared_corpus.config_key(spec) != shared_corpus.config_key({**spec, "axes": {"page": ["a"], "rtt_ms": [20]}})
    root = Path("/r")
    assert shared_corpus.shared_dir(root, spec, False) == root / "corpus" / f"traffic-corpus-{shared_corpus.config_key(spec)}"
    assert shared_corpus.shared_dir(root, spec, True).name.startswith("traffic-corpus-quick-")


@pytest.mark.parametrize("quick", [False, True])
def test_every_passive_figure_gets_the_same_corpus_directory(quick: bool) -> None:
    dirs = {shared_corpus.shared_dir(Path("r"), cli.spec_data_of(f, quick), quick) for f in PASSIVE}
    assert len(dirs) == 1
    other = shared_corpus.shared_dir(Path("r"), cli.spec_data_of(PASSIVE[0], not quick), not quick)
    assert other not in dirs  # the quick corpus is another configuration


def test_reproduce_all_runs_the_passive_figures_on_one_corpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[tuple[str, Path, Path | None]] = []

    def fake_reproduce(figure: Any, quick: bool, results_dir: Path, **kwargs: Any) -> dict[str, Any]:
        calls.append((figure.id, results_dir, kwargs.get("data_dir")))
        return {}

    monkeypatch.setattr(cli, "reproduce_figure", fake_reproduce)
    monkeypatch.setattr(atlas, "build", lambda figures, root, quick: root / "atlas.html")
    cli.reproduce_all(True, tmp_path, evaluate_only=False, budget=None, binary=None, lab=None)
    passive_ids = {f.id for f in PASSIVE}
    shared = {data_dir for figure_id, _, data_dir in calls if figure_id in passive_ids}
    assert len(shared) == 1 and next(iter(shared)).parent == tmp_path / "corpus"
    assert {figure_id for figure_id, _, _ in calls} == {f.id for f in FIGURES if not f.not_runnable}
    for figure_id, results_dir, data_dir in calls:
        assert results_dir == tmp_path / f"{figure_id}-quick"  # each keeps its own reproduce.json
        if figure_id not in passive_ids:
            assert data_dir == results_dir


def _capture(results: Path, key: str, payload: bytes) -> Path:
    pcap = results / "runs" / key / "client.pcap"
    pcap.parent.mkdir(parents=True, exist_ok=True)
    pcap.write_bytes(payload)
    return pcap


def test_the_corpus_is_built_once_and_again_only_when_its_captures_change(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    from protolab.lab import binary as lab_binary
    from protolab.traffic import corpus

    extractor = tmp_path / "protolab-net"
    extractor.write_bytes(b"binary")
    builds: list[int] = []

    def fake_build(results: Path, out: Path, binary: Path, **_: Any) -> dict[str, Any]:
        builds.append(len(list((results / "runs").glob("*/client.pcap"))))
        out.write_bytes(b"parquet")
        return {"runs": builds[-1], "flows": 0, "labelled_flows": 0, "class_balance": {}}

    monkeypatch.setattr(corpus, "build_corpus", fake_build)
    monkeypatch.setattr(lab_binary, "find_binary", lambda _binary=None: extractor)
    results = tmp_path / "corpus"
    _capture(results, "run-a", b"a")
    cli.build_flow_corpus(results, None)
    cli.build_flow_corpus(results, None)  # nothing changed: reused
    assert builds == [1]
    _capture(results, "run-b", b"b")  # an adaptive round added a run
    cli.build_flow_corpus(results, None)
    cli.build_flow_corpus(results, None)
    assert builds == [1, 2]
    pcap = _capture(results, "run-a", b"a, again")  # a run made again
    os.utime(pcap, ns=(pcap.stat().st_atime_ns, pcap.stat().st_mtime_ns + 10**9))
    cli.build_flow_corpus(results, None)
    assert builds == [1, 2, 2]
    extractor.write_bytes(b"another binary")  # another extractor: its flow records may differ
    cli.build_flow_corpus(results, None)
    assert builds == [1, 2, 2, 2]
    (results / "flows.parquet").unlink()  # the corpus itself gone
    cli.build_flow_corpus(results, None)
    assert len(builds) == 5


def test_the_atlas_draws_a_passive_figure_from_the_shared_corpus(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    figure = next(f for f in PASSIVE if f.id == "000-fig3.4")
    figure_dir = tmp_path / "000-fig3.4"
    figure_dir.mkdir()
    document = {"schema": cli.SCHEMA, "claims": [], "experiment": "traffic-corpus", "data_dir": "../corpus/x"}
    (figure_dir / "reproduce.json").write_text(json.dumps(document))
    seen: list[Path] = []
    monkeypatch.setattr(atlas, "ours", lambda _figure, store_dir, _experiment: seen.append(store_dir))
    atlas.collect([figure], tmp_path, False, tmp_path / "figures")
    assert seen == [figure_dir / "../corpus/x"]
    (figure_dir / "reproduce.json").write_text(json.dumps({**document, "data_dir": None}))
    atlas.collect([figure], tmp_path, False, tmp_path / "figures")
    assert seen[1] == figure_dir / "."  # a figure with its own runs
