"""Property tests for the Python readers of untrusted input (Hypothesis, bounded and derandomized).

Each reader gets inputs built from the project's own fixtures (tests/fixtures/seeds/, the Tstat
logs, the contract's sample files, specs/) and then broken: bytes flipped, inserted or cut,
fields deleted, values replaced by wrong types, huge or negative numbers and unicode. The
property is protolab's promise about bad input: the reader returns its model or raises its
domain error, and the message names the file (and the field where the format has fields);
never another exception. PROTOLAB_PROPERTY_EXAMPLES scales the example count (100 per property
by default) and PROTOLAB_PROPERTY_RANDOM=1 draws fresh examples, for a longer search.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protolab.analysis.cli import _analyze_file as analyze_file
from protolab.corpus.errors import CorpusError, HarError, ManifestError
from protolab.corpus.har import import_har, import_har_file
from protolab.corpus.manifest import load_manifest
from protolab.errors import ProtolabError, ToolError
from protolab.live.coordinator import Coordinator, LiveError, parse_client_metadata, parse_result
from protolab.live.store import row_for
from protolab.measure.qlog import QlogError, read_qlog
from protolab.measure.tools import parse_iperf3, parse_irtt, parse_ping
from protolab.plan.experiment import load_spec, parse_spec, spec_from_dict
from protolab.plan.spec import SpecError
from protolab.results.documents import DocumentError, read_document
from protolab.results.generated.sample_header import SampleHeader
from protolab.results.samples import read_samples_file
from protolab.scenarios import SCENARIOS
from protolab.traffic.tstat import TstatError, import_tstat, read_log

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
SEEDS = FIXTURES / "seeds"
SPEC_SEEDS = sorted((ROOT / "specs").glob("*.toml"))
TSTAT_SEEDS = sorted((FIXTURES / "tstat").iterdir())
SAMPLE_SEEDS = sorted((ROOT / "crates" / "contract" / "tests" / "fixtures").glob("samples-*.ndjson"))

EXAMPLES = int(os.environ.get("PROTOLAB_PROPERTY_EXAMPLES", "100"))
# Derandomized and without an example database: the same examples on every machine and run.
# PROTOLAB_PROPERTY_RANDOM=1 draws fresh examples instead (a longer search for new failures).
BOUNDED = settings(max_examples=EXAMPLES, deadline=None, database=None,
                   derandomize=os.environ.get("PROTOLAB_PROPERTY_RANDOM") != "1",
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------------- strategies

ODD_TEXT = st.sampled_from(["", " ", "\x00", "é", "\u202e", "²", "١٢", "🙂", "NaN", "-0", "1e309", "x" * 300])
ODD_NUMBER = st.sampled_from([0, -1, -(2**63), 2**63, 2**64 + 1, 10**40, 1e308, -1e308, 0.5, -0.0, 1e-320])
ODD_VALUE = st.one_of(
    st.none(), st.booleans(), ODD_NUMBER, ODD_TEXT, st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20), st.just([]), st.just({}), st.just([[[[]]]]), st.just({"": None}),
)


@st.composite
def mutated_bytes(draw: st.DrawFn, seed: bytes) -> bytes:
    """The seed with a few byte-level edits: flips, insertions of odd bytes, cuts, truncation."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        edit = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "duplicate", "nest"]))
        at = draw(st.integers(0, len(data)))
        if edit == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif edit == "insert":
            data[at:at] = draw(st.sampled_from([b"\x00", b"\xff", b"\xc3", b"\n", b"\x1e", b"\x1f\x8b", b"-", b".",
                                                b" ", b"9" * 30, "²".encode(), b"{", b"]", b'"', b"\\u0000"]))
        elif edit == "delete":
            del data[at:at + draw(st.integers(1, 40))]
        elif edit == "truncate":
            del data[at:]
        elif edit == "duplicate":
            data[at:at] = data[at:at + draw(st.integers(1, 200))]
        elif edit == "nest":  # deeper than Python's json and tomllib parsers recurse
            data[at:at] = draw(st.sampled_from([b"[", b'{"a":', b"{a=", b"[{}"])) * 100_000
    return bytes(data)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path (keys and indexes) into a JSON value, the root first."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*prefix, index))


@st.composite
def mutated_json(draw: st.DrawFn, seed: Any) -> Any:
    """The seed document with a few fields deleted, retyped or replaced by odd values."""
    doc = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        if not path:
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        key = path[-1]
        action = draw(st.sampled_from(["replace", "replace", "delete", "wrap"]))
        if action == "delete" and isinstance(parent, dict):
            del parent[key]
        elif action == "wrap":
            parent[key] = [parent[key]]
        else:
            # A copy: st.just() hands out one shared object, and a later edit must not change it.
            parent[key] = copy.deepcopy(draw(ODD_VALUE))
    return doc


def mutated_json_bytes(seed: bytes) -> st.SearchStrategy[bytes]:
    """A JSON seed file broken byte by byte, or field by field and written again."""
    return st.one_of(mutated_bytes(seed), mutated_json(json.loads(seed)).map(lambda doc: json.dumps(doc).encode()))


# ---------------------------------------------------------------------- the property


def refuses_cleanly(read: Callable[[], Any], error: type[ProtolabError], *names: str) -> Any:
    """`read()`'s value, or None when it raised `error` with every one of `names` in its message.
    Any other exception fails the test (pytest shows it with the minimal example)."""
    try:
        return read()
    except error as exc:
        message = str(exc)
        for name in names:
            assert name in message, f"{type(exc).__name__} does not name {name!r}: {message}"
        assert message.strip(), "empty error message"
        return None


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    # Module-scoped: Hypothesis runs many examples per test function, each overwrites its file.
    with tempfile.TemporaryDirectory(prefix="protolab-prop-") as directory:
        yield Path(directory)


# ---------------------------------------------------------------------- spec (TOML)


@BOUNDED
@given(data=st.data())
def test_spec_text_mutations(emu_binary: Path, data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(SPEC_SEEDS)).read_bytes()
    text = data.draw(mutated_bytes(seed)).decode("utf-8", errors="replace")
    refuses_cleanly(lambda: parse_spec(text, source="fuzz.toml"), SpecError, "fuzz.toml")


@BOUNDED
@given(data=st.data())
def test_spec_file_mutations(emu_binary: Path, scratch: Path, data: st.DataObject) -> None:
    # From the file, as `protolab run` reads it: bytes that are not UTF-8 included.
    seed = data.draw(st.sampled_from(SPEC_SEEDS))
    path = scratch / seed.name
    path.write_bytes(data.draw(mutated_bytes(seed.read_bytes())))
    refuses_cleanly(lambda: load_spec(path), SpecError, seed.name)


@BOUNDED
@given(data=st.data())
def test_spec_field_mutations(emu_binary: Path, data: st.DataObject) -> None:
    seed = tomllib.loads(data.draw(st.sampled_from(SPEC_SEEDS)).read_text())
    doc = data.draw(mutated_json(seed))
    if not isinstance(doc, dict):
        return
    refuses_cleanly(lambda: spec_from_dict(doc, source="fuzz.toml"), SpecError, "fuzz.toml: ")


def _mostly(usual: list[Any], odd: list[Any], weight: int = 3) -> st.SearchStrategy[Any]:
    """One of `usual` `weight` times in `weight + 1`, else one of `odd`: odd documents that still
    get past the first checks, so that the later stages are reached too."""
    return st.one_of(*[st.sampled_from(usual)] * weight, st.sampled_from(odd))


@st.composite
def odd_spec(draw: st.DrawFn) -> dict[str, Any]:
    """A spec of the right shape with odd values: axis values at and past their limits, odd
    modes, pages and transport settings, and a design or sweeps now and then."""
    number = st.one_of(st.floats(0.001, 1e3), st.integers(1, 10**3), st.integers(1, 10**3),
                       st.sampled_from([0, -1, 0.0001, 1e9, 2**63, 1e308, 100, 100.0001]))
    axes: dict[str, Any] = {}
    for name, values in [("bandwidth_mbps", st.one_of(number, st.just("unlimited"), st.just("1Gbit"))),
                         ("rtt_ms", number), ("loss_pct", number),
                         ("buffer", st.one_of(number, st.sampled_from(["1bdp", "0bdp", "-1bdp", "1e400bdp", "nanbdp",
                                                                        "infbdp", "default", "bdp", "0.5BDP"]))),
                         ("mode", st.sampled_from(["h1", "h2", "h3", "h2-parallel:2", "h2-parallel:0", "h3@nope",
                                                   "h2-parallel:99999", "h2-parallel:x", "h3@gquic39", "H1", "",
                                                   "mptcp"])),
                         ("page", st.sampled_from(["baidu", "vk", "", "nope", "../etc/passwd", "ü"])),
                         ("client", st.sampled_from(["engine", "chromium", "x"])),
                         ("warm", st.sampled_from(["cold", "resumed", "warm"])),
                         ("quic_cc", st.sampled_from(["cubic", "reno", "bbr", "gquic39", "cubic:c=0.8", "cubic:c=-1",
                                                      "x"])),
                         ("congested", st.one_of(st.booleans(), st.just("yes"))), ("cpu_pct", number)]:
        if draw(st.booleans()):
            axes[name] = draw(st.lists(values, min_size=draw(_mostly([1], [0], 9)), max_size=3))
    spec: dict[str, Any] = {"schema_version": draw(_mostly([1], [0, 2, "1"], 9)),
                            "name": draw(_mostly(["odd"], ["", "a/b", "ü" * 200], 9)),
                            "scenario": draw(st.sampled_from(sorted(SCENARIOS) + ["nope"])),
                            "seed": draw(_mostly([1, 7, 2**32], [0, -1, 2**63, 2**64], 9)),
                            "repetitions": draw(_mostly([1, 3], [0, -1, 10**6], 9)), "axes": axes}
    if draw(st.booleans()):
        spec["sweeps"] = [{"mode": draw(st.lists(st.sampled_from(["h1", "h3", "x"]), max_size=2))}]
    if draw(st.booleans()):
        low, high = draw(number), draw(number)
        spec["design"] = {"kind": draw(st.sampled_from(["lhs", "sobol", "grid", "x"])),
                          "points": draw(st.sampled_from([1, 8, 0, 10**9])),
                          "ranges": {draw(st.sampled_from(["rtt_ms", "buffer", "loss_pct", "mode", "x"])): [low, high]},
                          "log": draw(st.lists(st.sampled_from(["rtt_ms", "buffer"]), max_size=2))}
    return spec


@BOUNDED
@given(doc=odd_spec())
def test_spec_odd_documents(emu_binary: Path, doc: dict[str, Any]) -> None:
    # emu_binary: resolving modes asks protolab-net for its registry.
    experiment = refuses_cleanly(lambda: spec_from_dict(doc, source="odd.toml"), SpecError, "odd.toml: ")
    if experiment is not None:
        assert experiment.name == doc["name"]


# ---------------------------------------------------------------------- HAR

HAR_SEED = json.loads((SEEDS / "page.har").read_text())


@BOUNDED
@given(doc=mutated_json(HAR_SEED))
def test_har_field_mutations(emu_binary: Path, doc: Any) -> None:
    # A manifest the lab cannot serve is refused by protolab-net's check (HarError naming the
    # entry); an address plan that runs out is a CorpusError naming the host.
    try:
        refuses_cleanly(lambda: import_har(doc, "fuzz.har", "fuzz"), HarError, "fuzz.har: ")
    except CorpusError as exc:
        assert not isinstance(exc, HarError)
        assert "no free address" in str(exc)


@BOUNDED
@given(raw=mutated_bytes((SEEDS / "page.har").read_bytes()))
def test_har_file_mutations(emu_binary: Path, scratch: Path, raw: bytes) -> None:
    path = scratch / "page.har"
    path.write_bytes(raw)
    refuses_cleanly(lambda: import_har_file(path), HarError, str(path))



@st.composite
def odd_har(draw: st.DrawFn) -> dict[str, Any]:
    """A HAR that is well formed but odd: unusual URLs, methods, statuses, times and sizes."""
    hosts = _mostly(["a.test", "www.shop.test", "img.shop.test"],
                    ["xn--bcher-kva.test", "bücher.test", "[2001:db8::1]", "203.0.113.9", "a.test:8443", "localhost",
                     "a..test", "-a.test", "x" * 70 + ".test", "a.test:0", "a.test:99999"])
    paths = _mostly(["/", "/a.css", "/app.js?v=2", "/img/1.png"],
                    ["/a b.js", "/%zz", "/?q=1&r=%E2%82%AC", "/é.png", "//x", "/" + "p" * 3000, "", "/#f", "/\x00"])
    entries = []
    for _ in range(draw(st.integers(1, 6))):
        url = draw(_mostly(["https://", "http://"], ["data:", "ws://", "https:///", ""])) + draw(hosts) + draw(paths)
        size = draw(st.one_of(st.integers(0, 10**6), st.sampled_from([-1, 0, 2**31, 2**63, 10**30])))
        time_ms = draw(st.one_of(st.floats(0, 1e5), st.sampled_from([-1, 0, 1e12, 0.001])))
        entry: dict[str, Any] = {
            "startedDateTime": draw(_mostly(
                ["2026-11-21T10:00:00.000Z", "2026-11-21T10:00:00.250+02:00"],
                ["2026-11-21T10:00:00", "2026-02-30T10:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z",
                 "2026-11-21T10:00:00.1234567890Z", "2026-11-21t10:00:00z"])),
            "time": time_ms,
            "request": {"method": draw(_mostly(["GET"], ["POST", "HEAD", "OPTIONS", "get", "CONNECT", ""])),
                        "url": url, "headers": []},
            "response": {"status": draw(_mostly([200], [204, 206, 301, 304, 404, 0, -1, 999])),
                         "headers": draw(_mostly([[]], [[{"name": "Content-Length", "value": "-5"}],
                                                        [{"name": "content-type", "value": "text/html\r\nX: y"}],
                                                        [{"name": 3, "value": None}], [None]])),
                         "content": {"size": size, "mimeType": draw(_mostly(
                             ["text/html", "image/png", "text/css"],
                             ["", "application/x-\u0000", "text/css; charset=é", "a" * 500]))},
                         "bodySize": size},
            "timings": {"send": -1, "wait": time_ms, "receive": 0},
            "serverIPAddress": draw(_mostly(["203.0.113.7", "198.51.100.2"],
                                            ["127.0.0.1", "0.0.0.0", "2001:db8::1", "[::1]", "x", "255.255.255.255"])),
        }
        if entries and draw(st.booleans()):
            entry["_initiator"] = {"type": "parser", "url": draw(st.sampled_from(entries))["request"]["url"]}
        entries.append(entry)
    return {"log": {"version": "1.2", "pages": [{"id": "page_1"}], "entries": entries}}


@BOUNDED
@given(har=odd_har())
def test_har_odd_documents(emu_binary: Path, har: dict[str, Any]) -> None:
    try:
        result = refuses_cleanly(lambda: import_har(har, "odd.har", "odd"), HarError, "odd.har: ")
    except CorpusError as exc:
        assert not isinstance(exc, HarError)
        assert "no free address" in str(exc)
        return
    if result is not None:
        assert 0 < result.kept <= result.entries
        assert len(result.manifest["objects"]) == result.kept


# ---------------------------------------------------------------------- page manifests

MANIFEST_SEED = (SEEDS / "page.manifest.json").read_bytes()


@BOUNDED
@given(raw=mutated_json_bytes(MANIFEST_SEED))
def test_manifest_mutations(emu_binary: Path, scratch: Path, raw: bytes) -> None:
    # protolab-net checks the manifest, the pydantic model types it: they must agree.
    path = scratch / "page.json"
    path.write_bytes(raw)
    try:
        load_manifest(path)
    except ManifestError as exc:
        assert str(exc).startswith(f"{path}: "), str(exc)
        assert "accepted by protolab-net, but not by the model" not in str(exc)


# ---------------------------------------------------------------------- Tstat


@BOUNDED
@given(data=st.data())
def test_tstat_log_mutations(scratch: Path, data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(TSTAT_SEEDS))
    raw = seed.read_bytes()
    if data.draw(st.booleans()):  # Tstat logs are often gzipped: break the compressed stream too
        raw = gzip.compress(raw, mtime=0)
    path = scratch / seed.name
    path.write_bytes(data.draw(mutated_bytes(raw)))
    refuses_cleanly(lambda: list(read_log(path)), TstatError, str(path))


@st.composite
def tstat_odd_cell(draw: st.DrawFn) -> tuple[Path, int, int, str]:
    """A seed log, a data line, a column and an odd but whitespace-free value for that cell."""
    seed = draw(st.sampled_from(TSTAT_SEEDS))
    lines = seed.read_text().splitlines()
    line = draw(st.integers(1, len(lines) - 1))
    column = draw(st.integers(0, len(lines[line].split()) - 1))
    value = draw(st.one_of(
        st.sampled_from(["-1", "9" * 40, "9" * 5000, "1e999999999", "1E-999999999", "²", "١٢", "1.²", "0x10",
                         "Infinity", "NaN", "-0", "1_000", "+5", "::1", "256.1.1.1", "fe80::1%eth0", "٣.٥"]),
        st.text(st.characters(blacklist_categories=["Zs", "Zl", "Zp", "Cc", "Cs"]), min_size=1, max_size=8),
    ))
    return seed, line, column, value


@BOUNDED
@given(cell=tstat_odd_cell())
def test_tstat_odd_values(scratch: Path, cell: tuple[Path, int, int, str]) -> None:
    seed, line, column, value = cell
    lines = seed.read_text().splitlines()
    fields = lines[line].split()
    fields[column] = value
    lines[line] = " ".join(fields)
    path = scratch / seed.name
    path.write_text("\n".join(lines) + "\n")
    refuses_cleanly(lambda: list(read_log(path)), TstatError, str(path), f"line {line + 1}")


@settings(BOUNDED, max_examples=max(1, EXAMPLES // 4))
@given(cell=tstat_odd_cell())
def test_tstat_import_odd_values(scratch: Path, cell: tuple[Path, int, int, str]) -> None:
    # The whole import: every value read_log accepts must also fit the Parquet file's columns.
    seed, line, column, value = cell
    lines = seed.read_text().splitlines()
    fields = lines[line].split()
    fields[column] = value
    lines[line] = " ".join(fields)
    path = scratch / seed.name
    path.write_text("\n".join(lines) + "\n")
    out = scratch / "flows.parquet"
    out.unlink(missing_ok=True)
    report = refuses_cleanly(lambda: import_tstat([path], out), TstatError, str(path), f"line {line + 1}")
    assert out.exists() == (report is not None)  # refused: no partial output


# ---------------------------------------------------------------------- qlog


@BOUNDED
@given(raw=mutated_bytes((SEEDS / "trace.sqlog").read_bytes()))
def test_qlog_byte_mutations(scratch: Path, raw: bytes) -> None:
    path = scratch / "trace.sqlog"
    path.write_bytes(raw)
    refuses_cleanly(lambda: read_qlog(path), QlogError, str(path))


QLOG_RECORDS = [json.loads(r) for r in (SEEDS / "trace.sqlog").read_text().split("\x1e") if r.strip()]


@BOUNDED
@given(records=mutated_json(QLOG_RECORDS))
def test_qlog_field_mutations(scratch: Path, records: list[Any]) -> None:
    path = scratch / "trace.sqlog"
    path.write_text("".join("\x1e" + json.dumps(r) + "\n" for r in records))
    trace = refuses_cleanly(lambda: read_qlog(path), QlogError, str(path))
    if trace is not None:
        assert all(isinstance(e.time_ms, float) and isinstance(e.data, dict) for e in trace.events)
        # What `protolab analyze FILE.sqlog` does with a trace it read: QUIC_info and loss bursts.
        refuses_cleanly(lambda: analyze_file(path, as_json=True), ProtolabError, str(path))


@st.composite
def odd_qlog_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Well-formed qlog events with odd contents: the names protolab reads, odd data values."""
    names = ["transport:packet_sent", "transport:packet_received", "recovery:packet_lost",
             "recovery:metrics_updated", "recovery:congestion_state_updated", "transport:parameters_set", "x:y"]
    value = st.one_of(ODD_VALUE, st.integers(-5, 10**6), st.floats(0, 1e6))
    events = []
    for _ in range(draw(st.integers(0, 8))):
        data = draw(st.dictionaries(st.sampled_from(["header", "congestion_window", "bytes_in_flight", "smoothed_rtt",
                                                     "latest_rtt", "min_rtt", "rtt_variance", "ssthresh", "new",
                                                     "old", "raw", "frames", "packet_type", "trigger"]),
                                    value, max_size=5))
        if draw(st.booleans()):
            data["header"] = draw(st.dictionaries(st.sampled_from(["packet_type", "packet_number", "length"]),
                                                  value, max_size=3))
        events.append({"time": draw(st.one_of(st.floats(-1, 1e9, allow_nan=False), st.integers(-1, 2**70))),
                       "name": draw(st.sampled_from(names)), "data": data})
    return events


@BOUNDED
@given(events=odd_qlog_events())
def test_qlog_odd_events(scratch: Path, events: list[dict[str, Any]]) -> None:
    path = scratch / "trace.sqlog"
    path.write_text("".join("\x1e" + json.dumps(r) + "\n" for r in [QLOG_RECORDS[0], *events]))
    assert len(read_qlog(path).events) == len(events)
    refuses_cleanly(lambda: analyze_file(path, as_json=True), ProtolabError, str(path))


# ---------------------------------------------------------------------- sample files


@BOUNDED
@given(data=st.data())
def test_samples_byte_mutations(scratch: Path, data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(SAMPLE_SEEDS))
    path = scratch / seed.name
    path.write_bytes(data.draw(mutated_bytes(seed.read_bytes())))
    refuses_cleanly(lambda: read_samples_file(path), DocumentError, str(path))


@BOUNDED
@given(data=st.data())
def test_samples_field_mutations(scratch: Path, data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(SAMPLE_SEEDS))
    records = [json.loads(line) for line in seed.read_text().splitlines()]
    records = data.draw(mutated_json(records))
    path = scratch / seed.name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    rows = refuses_cleanly(lambda: read_samples_file(path), DocumentError, str(path))
    if rows is not None:
        assert all(isinstance(row, dict) and "cwnd_bytes" in row for row in rows)
        # What `protolab analyze FILE.ndjson` does with the rows: TCP_info or QUIC_info.
        refuses_cleanly(lambda: analyze_file(path, as_json=True), ProtolabError, str(path))


# ---------------------------------------------------------------------- live uploads

RESULT_SEED = (SEEDS / "rpm-result.json").read_bytes()
CLIENT_SEED = (SEEDS / "client-metadata.json").read_bytes()


def _stores(result: Any, client: Any) -> None:
    """What the coordinator does with an accepted upload: its table row must build."""
    row = row_for("t" * 43, {"client": client, "issued_unix_ns": 1, "uploaded_unix_ns": 2}, result, "x.json")
    json.dumps(row)


@BOUNDED
@given(body=mutated_json_bytes(RESULT_SEED))
def test_live_result_uploads(body: bytes) -> None:
    parsed = refuses_cleanly(lambda: parse_result(body), LiveError, "result")
    if parsed is not None:
        text, result = parsed
        assert json.loads(text) == result
        _stores(result, {})


@BOUNDED
@given(body=mutated_json_bytes(CLIENT_SEED))
def test_live_client_metadata(body: bytes) -> None:
    client = refuses_cleanly(lambda: parse_client_metadata(body), LiveError, "client metadata")
    if client is not None:
        _stores(json.loads(RESULT_SEED), client)


class _Clock:
    """Monotonic seconds that move only when the test says so (lock expiry without waiting)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def coordinator(scratch: Path) -> Iterator[tuple[Coordinator, _Clock, list[str]]]:
    clock, lines = _Clock(), []
    live = Coordinator(scratch / "live", lock_timeout_s=60, max_upload_bytes=1 << 16, clock=clock, log=lines.append)
    yield live, clock, lines
    live.close()


@settings(BOUNDED, max_examples=max(1, EXAMPLES // 2))
@given(client=st.one_of(st.just(CLIENT_SEED), mutated_bytes(CLIENT_SEED)),
       body=mutated_json_bytes(RESULT_SEED))
def test_live_upload_stores_all_or_nothing(coordinator: tuple[Coordinator, _Clock, list[str]], client: bytes,
                                           body: bytes) -> None:
    # The coordinator end to end: a refused token request or upload leaves no file behind; an
    # accepted upload is stored whole and recorded in the table.
    live, clock, lines = coordinator
    clock.now += 61  # the previous example's lock (if refused, still held) has expired
    before = sorted(p.name for p in live.tests_dir.iterdir())
    issued = refuses_cleanly(lambda: live.issue_token(client), LiveError, "client metadata")
    if issued is None:
        return
    token = issued["token"]
    response = refuses_cleanly(lambda: live.submit_result(token, body), LiveError, "result")
    after = sorted(p.name for p in live.tests_dir.iterdir())
    if response is None:
        assert after == before
        return
    assert after == sorted([*before, token])
    assert json.loads((live.tests_dir / token / "result.json").read_text()) == json.loads(body)
    assert response["recorded"], lines[-1:]


# ---------------------------------------------------------------------- tool outputs
# Not files users hand in, but text protolab reads from irtt, iperf3 and ping, whose versions
# vary: an output of another shape must be a ToolError, not a traceback in the validation.

TOOL_PARSERS = {"irtt_client.json": parse_irtt, "iperf3_client.json": parse_iperf3, "ping_ok.txt": parse_ping}


@BOUNDED
@given(data=st.data())
def test_tool_output_mutations(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(TOOL_PARSERS)))
    seed = (FIXTURES / name).read_bytes()
    raw = data.draw(mutated_json_bytes(seed) if name.endswith(".json") else mutated_bytes(seed))
    refuses_cleanly(lambda: TOOL_PARSERS[name](raw.decode("utf-8", errors="replace")), ToolError)


# ---------------------------------------------------------------------- regressions
# The minimal failing examples the properties above found, kept as explicit tests.


def _tstat_with(scratch: Path, seed_name: str, cells: dict[int, str], line: int = 1) -> Path:
    """A copy of a seed Tstat log with cells (0-based column -> value) of one data line replaced."""
    lines = (FIXTURES / "tstat" / seed_name).read_text().splitlines()
    fields = lines[line].split()
    for column, value in cells.items():
        fields[column] = value
    lines[line] = " ".join(fields)
    path = scratch / seed_name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("seed_name", "cells", "expected"), [
    # 5000 digits: int() refused them with Python's ValueError (the digit limit), uncaught.
    ("log_udp_complete", {2: "9" * 5000}, r"line 2: column 'c_first_abs' \(column 3\) '9{40}\.\.\.' is out of range"),
    # decimal.Overflow when scaled to ns.
    ("log_udp_complete", {2: "1e999999999"}, r"column 'c_first_abs' .*'1e999999999' is out of range"),
    # Unicode digits: "²".isdigit() is True, int("²") raises ValueError.
    ("log_udp_complete", {2: "²"}, r"column 'c_first_abs' .*'²' is not a number"),
    # int() took Arabic-Indic digits as 12: Tstat writes ASCII only.
    ("log_udp_complete", {1: "١٢"}, r"column 'c_port' .*'١٢' is not an integer"),
    # Each value fits BIGINT, first + durat does not: a DuckDB error at the Parquet write before.
    ("log_udp_complete", {2: "9223372036854", 3: "1000"}, r"line 2: last_ns = \d+ is beyond the flow schema's range"),
    # SYN counts fit BIGINT, their sum does not fit the INTEGER column.
    ("log_tcp_complete", {12: str(2**31), 26: "1"}, r"line 2: syn = 2147483649 is beyond the flow schema's range"),
])
def test_tstat_regressions(scratch: Path, seed_name: str, cells: dict[int, str], expected: str) -> None:
    path = _tstat_with(scratch, seed_name, cells)
    out = scratch / "flows.parquet"
    out.unlink(missing_ok=True)
    with pytest.raises(TstatError, match=expected) as caught:
        import_tstat([path], out)
    assert str(path) in str(caught.value)
    assert not out.exists()


def test_tstat_unicode_digit_in_header(scratch: Path) -> None:
    # "c_port:²" passed isdigit() and int("²") raised ValueError.
    path = scratch / "log_tcp_complete"
    text = (FIXTURES / "tstat" / "log_tcp_complete").read_text()
    path.write_text(text.replace("c_port:2 ", "c_port:² ", 1))
    with pytest.raises(TstatError, match=r"line 1: header column 2 is 'c_port:²'"):
        list(read_log(path))


def test_tstat_corrupt_gzip_stream(scratch: Path) -> None:
    # Damage past the gzip header surfaces as zlib.error, which is not an OSError.
    raw = bytearray(gzip.compress((FIXTURES / "tstat" / "log_tcp_complete").read_bytes(), mtime=0))
    raw[40:48] = b"\xff" * 8
    path = scratch / "log_tcp_complete.gz"
    path.write_bytes(bytes(raw))
    with pytest.raises(TstatError, match=r"cannot read"):
        list(read_log(path))


@pytest.mark.parametrize(("client", "shown"), [(None, "None"), (3, "3"), ("chromium", '"chromium"')])
def test_spec_scenario_axis_not_a_list(client: Any, shown: str) -> None:
    # A scenario axis is an extra key the model does not type: None or a number raised TypeError
    # in resolve(), and a string became the list of its characters.
    doc = {"schema_version": 1, "name": "x", "scenario": "wifi-loss", "axes": {"page": ["baidu"], "client": client}}
    with pytest.raises(SpecError, match=rf"^x\.toml: axes\.client: an axis is a list of values, got {shown}"):
        spec_from_dict(doc, source="x.toml")


def test_spec_sweep_axis_not_a_list() -> None:
    text = ('schema_version = 1\nname = "x"\nscenario = "wifi-loss"\n'
            '[axes]\npage = ["baidu"]\n[[sweeps]]\nclient = "engine"\n')
    with pytest.raises(SpecError, match=r'^x\.toml: sweeps\[0\]\.client: an axis is a list of values, got "engine"'):
        parse_spec(text, source="x.toml")


DEEP_JSON = "[" * 100_000


@pytest.mark.parametrize(("name", "read", "error"), [
    ("page.har", lambda path: import_har_file(path), HarError),
    ("trace.sqlog", lambda path: read_qlog(path), QlogError),
    ("document.json", lambda path: read_document(SampleHeader, path), DocumentError),
])
def test_json_nested_too_deeply(emu_binary: Path, scratch: Path, name: str, read: Callable[[Path], Any],
                                error: type[ProtolabError]) -> None:
    # json.loads raises RecursionError (not a ValueError) for 100,000 nested arrays. (A page
    # manifest is parsed by protolab-net first, which refuses it.)
    path = scratch / name
    path.write_text(DEEP_JSON + "\n")
    with pytest.raises(error, match=r"nested too deeply") as caught:
        read(path)
    assert str(path) in str(caught.value)


def test_samples_line_nested_too_deeply_is_skipped(scratch: Path) -> None:
    # A sample file's unreadable lines are skipped (a killed sampler cuts the last one short).
    seed = SAMPLE_SEEDS[0].read_text().splitlines()
    path = scratch / "samples.ndjson"
    path.write_text("\n".join([seed[0], DEEP_JSON, *seed[1:]]) + "\n")
    assert len(read_samples_file(path)) == len(seed) - 1


def test_spec_nested_too_deeply(scratch: Path) -> None:
    # tomllib recurses too: RecursionError before.
    path = scratch / "deep.toml"
    path.write_text("a = " + "[" * 100_000)
    with pytest.raises(SpecError, match=r"^deep\.toml: not valid TOML: nested too deeply"):
        load_spec(path)


def test_spec_not_utf8(scratch: Path) -> None:
    # read_text() raised UnicodeDecodeError, which is a ValueError, not the OSError caught.
    path = scratch / "latin1.toml"
    path.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(SpecError, match=r"^latin1\.toml: not UTF-8 text"):
        load_spec(path)


@pytest.mark.parametrize(("parse", "text", "expected"), [
    # A list where an object was expected: AttributeError (.get) before.
    (parse_irtt, '{"stats": [], "round_trips": []}', r"not irtt JSON: AttributeError"),
    (parse_irtt, '{"stats": {"packets_sent": "many"}}', r"(?s)not irtt JSON: .*packets_sent"),
    (parse_iperf3, "[]", r"not iperf3's -J output: TypeError"),
    (parse_iperf3, '{"start": {}, "end": {"sum_received": {"bits_per_second": "fast"}, "sum_sent": {}}}',
     r"not iperf3's -J output: ValueError"),
    # [\d.]+ matched "1.2.3", float() raised ValueError.
    (parse_ping, "3 packets transmitted, 3 received\nrtt min/avg/max/mdev = 1.2.3/2/3/4 ms", r"unreadable rtt line"),
])
def test_tool_output_regressions(parse: Callable[[str], Any], text: str, expected: str) -> None:
    with pytest.raises(ToolError, match=expected):
        parse(text)


@pytest.mark.parametrize(("where", "value", "expected"), [
    # Found by PROTOLAB_PROPERTY_RANDOM=1: an axis value skipped the [transport] field's 500-character
    # limit, went to `protolab-net cc check` as an argument and failed as LabError "Argument list too long".
    ("axes", "cubic:c=" + "1" * 300_000, r"axes\.quic_cc\[0\]: String should have at most 500 characters"),
    # A NUL byte in the argument: ValueError("embedded null byte") from subprocess.
    ("axes", "cubic\x00", r"axes\.quic_cc\[0\]: a controller spec has no control characters"),
    ("transport", "cubic\x00", r"transport\.quic_cc: a controller spec has no control characters"),
])
def test_spec_controller_regressions(emu_binary: Path, where: str, value: str, expected: str) -> None:
    doc: dict[str, Any] = {"schema_version": 1, "name": "x", "scenario": "wifi-loss", "axes": {"page": ["baidu"]}}
    if where == "axes":
        doc["axes"]["quic_cc"] = [value]
    else:
        doc["transport"] = {"quic_cc": value}
    with pytest.raises(SpecError, match=rf"^x\.toml: {expected}"):
        spec_from_dict(doc, source="x.toml")


def test_spec_transport_axis_keeps_the_field_limits(emu_binary: Path) -> None:
    # [transport] quic_initial_window is at least 2400 bytes, as an axis too (this one was already
    # checked on main: its limits sit inside the Optional; quic_cc's sat in the field's metadata).
    doc = {"schema_version": 1, "name": "x", "scenario": "wifi-loss",
           "axes": {"page": ["baidu"], "quic_initial_window": [12000, 1]}}
    expected = r"^x\.toml: axes\.quic_initial_window\[1\]: Input should be greater than or equal to 2400"
    with pytest.raises(SpecError, match=expected):
        spec_from_dict(doc, source="x.toml")
