"""Page corpus: Table I replicas, generated corpora, HAR import, manifest validation, CLI.

Everything here is fast and needs no root, except the `lab` tests at the end: the Rust server
accepting our manifests, and a HAR recorded by real Chromium loading a page from our server.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from awaiting import await_listening

from protolab.corpus import (
    DEMO_PAGES,
    SITES,
    get_site,
    site_manifest,
    validate_manifest,
)
from protolab.corpus.build import fit_sizes, type_of
from protolab.corpus.errors import CorpusError, HarError
from protolab.corpus.generate import generate_corpus, generated_page
from protolab.corpus.har import import_har, import_har_file
from protolab.corpus.manifest import check_manifest_files, load_manifest
from protolab.lab.watchdog import NamespaceWatchdog
from protolab.results.generated.event_listening import Listening

REPO = Path(__file__).resolve().parents[1]
PROTOLAB = Path(sys.executable).with_name("protolab")
CHROMIUM = Path("/usr/bin/chromium")


def _index(manifest: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["origin"], o["path"]): o for o in manifest["objects"]}


def _parent_key(obj: dict[str, Any]) -> tuple[str, str] | None:
    """(origin, path) of an object's parent: `/path` on its own origin or `//hostname/path`."""
    if "parent" not in obj:
        return None
    reference: str = obj["parent"]
    if reference.startswith("//"):
        host, _, path = reference[2:].partition("/")
        return host, "/" + path
    return obj["origin"], reference


# --- Table I ---------------------------------------------------------------------------------


def test_registry_matches_table_i() -> None:
    assert len(SITES) == 15
    for site in SITES.values():
        assert sum(site.counts.values()) == site.objects, site.name
        assert 1 <= site.origins <= 3
    assert SITES["baidu"].counts == {"html": 1, "css": 1, "js": 1, "img": 6, "other": 1}
    assert SITES["amazon"].size_kb == 3723 and SITES["sohu"].objects == 228
    assert all(name in SITES for name in DEMO_PAGES) and len(DEMO_PAGES) == 5
    sizes = [SITES[name].size_kb for name in DEMO_PAGES]
    assert sizes == sorted(sizes)  # small to large
    with pytest.raises(CorpusError, match="unknown site 'nope'"):
        get_site("nope")


@pytest.mark.parametrize("name", list(SITES))
def test_site_counts_sizes_and_origins(name: str) -> None:
    site = SITES[name]
    manifest = site_manifest(name)
    validate_manifest(manifest, f"{name}.json")
    counts = Counter(type_of(o["content_type"]) for o in manifest["objects"])
    assert {t: counts.get(t, 0) for t in site.counts} == site.counts
    assert sum(o["size"] for o in manifest["objects"]) == site.size_kb * 1000
    assert min(o["size"] for o in manifest["objects"]) >= 100
    assert manifest["schema_version"] == 1 and manifest["name"] == name and manifest["seed"] == 1
    hosts = [o["hostname"] for o in manifest["origins"]]
    assert hosts == [f"{h}.{name}.test" for h in ("www", "static", "img")][: site.origins]
    assert [o["address"] for o in manifest["origins"]] == [
        f"10.99.{site.index}.{k + 1}" for k in range(site.origins)
    ]
    used = {o["origin"] for o in manifest["objects"]}
    assert used == set(hosts)  # every origin serves something


@pytest.mark.parametrize("name", list(SITES))
def test_site_tree(name: str) -> None:
    manifest = site_manifest(name)
    objects = _index(manifest)
    roots = [o for o in manifest["objects"] if "parent" not in o]
    assert len(roots) == 1 and roots[0]["path"] == "/" and roots[0]["origin"] == f"www.{name}.test"
    assert manifest["objects"][0] is roots[0]
    for obj in manifest["objects"]:
        key = _parent_key(obj)
        if key is None:
            continue
        parent = objects[key]  # parents exist
        ptype = type_of(parent["content_type"])
        otype = type_of(obj["content_type"])
        assert ptype in ("html", "css", "js"), obj  # only documents, styles and scripts discover
        if otype == "html":
            assert ptype == "html"  # iframes sit in the root or in other iframes
        if obj["content_type"] == "font/woff2":
            assert ptype == "css" or parent is roots[0]
        if otype == "css":
            assert ptype in ("html", "css")
        assert 0 <= obj.get("delay_ms", 0) <= 20
        # No cycles: the chain of parents reaches the root.
        seen, at = set(), obj
        while (k := _parent_key(at)) is not None:
            assert k not in seen
            seen.add(k)
            at = objects[k]
        assert at is roots[0]
    iframes = [o for o in manifest["objects"] if o["content_type"].startswith("text/html")][1:]
    assert len(iframes) == SITES[name].html - 1


def test_nested_iframes_and_their_children_resolve() -> None:
    manifest = site_manifest("yahoo")  # 16 HTML documents
    objects = _index(manifest)
    iframes = {k for k, o in objects.items() if o["content_type"].startswith("text/html") and "parent" in o}
    nested = [k for k in iframes if _parent_key(objects[k]) in iframes]
    assert nested, "yahoo should have iframes inside iframes"
    children = [o for o in manifest["objects"] if _parent_key(o) in iframes]
    assert children and all(_parent_key(o) in objects for o in children)


def test_determinism_and_seed() -> None:
    one = json.dumps(site_manifest("reddit", seed=7))
    assert one == json.dumps(site_manifest("reddit", seed=7))
    other = site_manifest("reddit", seed=8)
    assert json.dumps(other) != one
    assert sum(o["size"] for o in other["objects"]) == 470_000
    moved = site_manifest("reddit", seed=7, network="172.20.0.0/16")
    assert [o["address"] for o in moved["origins"]] == ["172.20.5.1", "172.20.5.2"]
    with pytest.raises(CorpusError, match="--network"):
        site_manifest("reddit", network="10.99.0.0/33")
    with pytest.raises(CorpusError, match="does not fit"):
        site_manifest("amazon", network="10.99.0.0/24")


def test_fit_sizes_exact_and_bounded() -> None:
    raw = [1.0, 1000.0, 5.0, 1e6, 3.0]
    sizes = fit_sizes(raw, 50_000, 100, 40_000)
    assert sum(sizes) == 50_000 and min(sizes) >= 100 and max(sizes) <= 40_000
    assert fit_sizes([1.0, 1.0, 1.0], 10, 1, 100) in ([4, 3, 3], [3, 4, 3], [3, 3, 4])
    with pytest.raises(CorpusError):
        fit_sizes([1.0, 2.0], 150, 100, 1000)


# --- generated corpus (002 Table 4.1) ---------------------------------------------------------


@pytest.fixture(scope="module")
def corpus500() -> list[dict[str, Any]]:
    return [page.manifest for page in generate_corpus(500, seed=1)]


def test_generator_matches_table_4_1(corpus500: list[dict[str, Any]]) -> None:
    addresses = [len(m["origins"]) for m in corpus500]
    objects = [len(m["objects"]) for m in corpus500]
    sizes = [o["size"] for m in corpus500 for o in m["objects"]]
    pages = [sum(o["size"] for o in m["objects"]) for m in corpus500]
    assert 1 <= min(addresses) and max(addresses) <= 66
    assert 2 <= min(objects) and max(objects) <= 680
    assert 53 <= min(sizes) and max(sizes) <= 43_000_000
    assert 15_000 <= min(pages) and max(pages) <= 51_000_000
    assert 22 * 0.8 <= statistics.median(addresses) <= 22 * 1.2
    assert 100 * 0.85 <= statistics.median(objects) <= 100 * 1.15
    assert 3000 * 0.75 <= statistics.median(sizes) <= 3000 * 1.25
    assert 1.2e6 * 0.8 <= statistics.median(pages) <= 1.2e6 * 1.2
    # The ranges are used, not just respected: the tails reach near the table's ends.
    assert max(objects) >= 500 and max(addresses) >= 50 and max(pages) >= 20e6


def test_generated_manifests_valid_and_distinct(corpus500: list[dict[str, Any]], tmp_path: Path) -> None:
    addresses: set[str] = set()
    files = []
    for manifest in corpus500:
        files.append(tmp_path / f"{manifest['name']}.json")
        files[-1].write_text(json.dumps(manifest))
    assert check_manifest_files(files) == [None] * len(files)
    for manifest in corpus500:
        assert {o["origin"] for o in manifest["objects"]} == {o["hostname"] for o in manifest["origins"]}
        page_addresses = {o["address"] for o in manifest["origins"]}
        assert not page_addresses & addresses  # pages can be served together
        addresses |= page_addresses
    assert len({m["name"] for m in corpus500}) == 500


def test_generator_deterministic() -> None:
    first = [p.manifest for p in generate_corpus(5, seed=3)]
    assert first == [p.manifest for p in generate_corpus(5, seed=3)]
    assert first != [p.manifest for p in generate_corpus(5, seed=4)]
    with pytest.raises(CorpusError, match="--pages"):
        generate_corpus(0)
    with pytest.raises(CorpusError, match="does not fit"):
        generate_corpus(300, network="10.0.0.0/16")


def test_a_generated_page_by_name_is_that_page_of_every_corpus(corpus500: list[dict[str, Any]]) -> None:
    """Specs name generated pages (`page-017`) without files: the same manifest as in the corpus."""
    for name in ("page-001", "page-017", "page-500"):
        index = int(name[5:]) - 1
        assert generated_page(name) == corpus500[index]
    assert generated_page("page-003", seed=3) == generate_corpus(5, seed=3)[2].manifest
    for bad in ("page-000", "page-1", "page-0001", "baidu"):
        with pytest.raises(CorpusError, match="not a generated page name"):
            generated_page(bad)
    from protolab.plan.experiment import corpus_manifest

    assert corpus_manifest("page-017", seed=1) == corpus500[16]
    with pytest.raises(ValueError, match="page-001 ... page-999"):
        corpus_manifest("page-17", seed=1)


# --- HAR import -----------------------------------------------------------------------------------

T0 = "2026-11-21T10:00:00.000Z"


def _at(ms: float) -> str:
    seconds, millis = divmod(int(ms), 1000)
    return f"2026-11-21T10:00:{seconds:02d}.{millis:03d}Z"


def _entry(url: str, start: float, time: float, mime: str, size: int, *, initiator: Any = None,
           method: str = "GET", status: int = 200, ip: str | None = "203.0.113.7", page: str = "page_1",
           **response: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "pageref": page, "startedDateTime": _at(start), "time": time,
        "request": {"method": method, "url": url, "httpVersion": "h2", "headers": []},
        "response": {"status": status, "headers": [], "content": {"size": size, "mimeType": mime},
                     "bodySize": size, **response},
        "timings": {"send": 0, "wait": time / 2, "receive": time / 2},
    }
    if ip is not None:
        entry["serverIPAddress"] = ip
    if initiator is not None:
        entry["_initiator"] = initiator
    return entry


def _har(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"log": {"version": "1.2", "creator": {"name": "test", "version": "1"},
                    "pages": [{"id": "page_1", "startedDateTime": T0, "title": "x"}], "entries": entries}}


def test_har_initiator_tree() -> None:
    root = "https://www.shop.test/"
    css = "https://static.shop.test/main.css"
    js = "https://static.shop.test/app.js?v=2"
    entries = [
        _entry(root, 0, 100, "text/html; charset=utf-8", 30_000),
        # Discovered while the HTML streams: starts before the root finished -> delay 0.
        _entry(css, 50, 40, "text/css", 8_000, initiator={"type": "parser", "url": root}),
        _entry(js, 60, 80, "text/javascript", 90_000, initiator={"type": "parser", "url": root}),
        _entry("https://static.shop.test/font.woff2", 120, 20, "font/woff2", 25_000,
               initiator={"type": "parser", "url": css}),
        # Script-initiated, found in the stack's call frames.
        _entry("https://api.shop.test/feed.json?p=1", 160, 30, "application/json", 2_000,
               initiator={"type": "script", "stack": {"callFrames": [{"url": "", "functionName": "x"},
                                                                     {"url": js}]}}, ip="2001:db8::1"),
        # Only the async parent stack names a script.
        _entry("https://img.shop.test/a.jpg#frag", 170, 30, "image/jpeg", 50_000,
               initiator={"type": "script", "stack": {"callFrames": [], "parent": {"callFrames": [{"url": js}]}}}),
    ]
    result = import_har(_har(entries), "shop.har", "shop")
    manifest = result.manifest
    validate_manifest(manifest, "shop.json")
    assert result.parents == Counter({"initiator": 5})
    assert not result.skipped and result.kept == 6 and result.entries == 6
    objects = {o["path"]: o for o in manifest["objects"]}
    assert "parent" not in objects["/"]
    assert objects["/main.css"]["parent"] == "//www.shop.test/" and "delay_ms" not in objects["/main.css"]
    assert objects["/font.woff2"]["parent"] == "/main.css" and objects["/font.woff2"]["delay_ms"] == 30
    assert objects["/feed.json?p=1"]["parent"] == "//static.shop.test/app.js?v=2"
    assert objects["/feed.json?p=1"]["delay_ms"] == 20  # 160 - (60 + 80)
    assert objects["/a.jpg"]["parent"] == "//static.shop.test/app.js?v=2"
    assert objects["/app.js?v=2"]["size"] == 90_000 and objects["/app.js?v=2"]["content_type"] == "text/javascript"
    origins = {o["hostname"]: o["address"] for o in manifest["origins"]}
    assert origins["www.shop.test"] == "203.0.113.7"
    assert origins["api.shop.test"] == "10.98.0.1"  # IPv6 server address: allocated from the network


def test_har_timing_fallback() -> None:
    entries = [
        _entry("http://www.news.test/", 0, 50, "text/html", 20_000),
        _entry("http://www.news.test/a.css", 55, 20, "text/css", 5_000),
        _entry("http://www.news.test/b.js", 56, 100, "application/javascript", 40_000),
        _entry("http://www.news.test/i.png", 80, 10, "image/png", 3_000),  # after a.css finished (75)
        _entry("http://www.news.test/j.png", 170, 10, "image/png", 3_000),  # after b.js finished (156)
        _entry("http://www.news.test/k.png", 30, 10, "image/png", 3_000),  # before anything finished
        # An initiator naming an entry that started later is ignored (no cycles): timing decides.
        _entry("http://www.news.test/l.png", 60, 10, "image/png", 3_000,
               initiator={"type": "parser", "url": "http://www.news.test/j.png"}),
    ]
    result = import_har(_har(entries), "news.har", "news", network="10.50.0.0/24")
    objects = {o["path"]: o for o in result.manifest["objects"]}
    assert objects["/k.png"]["parent"] == "/" and "delay_ms" not in objects["/k.png"]
    assert objects["/a.css"]["parent"] == "/" and objects["/a.css"]["delay_ms"] == 5
    assert objects["/i.png"]["parent"] == "/a.css" and objects["/i.png"]["delay_ms"] == 5
    assert objects["/j.png"]["parent"] == "/b.js" and objects["/j.png"]["delay_ms"] == 14
    assert objects["/l.png"]["parent"] == "/"
    assert result.parents["timing"] == 5 and result.parents["root (nothing finished before it)"] == 1
    assert [o["path"] for o in result.manifest["objects"]][:2] == ["/", "/k.png"]  # ordered by start
    validate_manifest(result.manifest, "news.json")


def test_har_skips_are_counted() -> None:
    root = "https://www.x.test/"
    entries = [
        _entry("http://x.test/", 0, 10, "text/html", 0, status=301),
        _entry(root, 10, 50, "text/html", 10_000),
        _entry("https://www.x.test/log", 70, 5, "application/json", 10, method="POST"),
        _entry("data:image/png;base64,AAAA", 71, 0, "image/png", 4),
        _entry("blob:https://www.x.test/1234", 72, 0, "image/png", 4),
        _entry("https://www.x.test/gone.png", 73, 5, "image/png", 0, status=0),
        _entry("https://www.x.test/missing.png", 74, 5, "text/html", 300, status=404),
        _entry("https://www.x.test/a.png", 75, 5, "image/png", 1_000),
        _entry("http://www.x.test/a.png", 76, 5, "image/png", 1_000),  # same host and path
        _entry("https://www.x.test/b.png", 77, 5, "image/png", 1_000, page="page_2"),
        _entry("https://www.x.test/empty.gif", 78, 5, "image/gif", 0, bodySize=-1),
        _entry("https://www.x.test/t.gif", 79, 5, "image/gif", -1, bodySize=-1, _transferSize=180),
        _entry("https://www.x.test/bytes?n=5", 80, 5, "application/octet-stream", 5),
        _entry("https://www.x.test:8443/c.png", 81, 5, "image/png", 700),
        _entry("https://www.x.test/cached.js", 82, 1, "text/javascript", 9_000, status=304),
    ]
    result = import_har(_har(entries), "x.har", "x")
    validate_manifest(result.manifest, "x.json")
    assert result.entries == 15 and result.kept == 6
    assert result.skipped == Counter({
        "redirect (3xx, no body)": 1, "not a GET request": 1, "data:, blob: or other non-HTTP URL": 2,
        "failed (status 0, no response)": 1, "error status (4xx/5xx)": 1,
        "duplicate of an earlier entry (same host and path)": 1, "belongs to another page of the HAR": 1,
        "path reserved for the server's synthetic endpoints": 1,
    })
    objects = {o["path"]: o for o in result.manifest["objects"]}
    assert objects["/empty.gif"]["size"] == 1 and objects["/t.gif"]["size"] == 180
    warnings = "\n".join(result.warnings)
    assert "log.entries[10]: no body size" in warnings
    assert "log.entries[11]: size from _transferSize" in warnings
    assert "www.x.test:8443: non-default port dropped" in warnings
    assert "log.entries[12]: /bytes?n=5 skipped" in warnings
    assert "1 entries came from the browser cache" in warnings


def test_har_size_sources() -> None:
    def headers(*pairs: tuple[str, str]) -> list[dict[str, str]]:
        return [{"name": n, "value": v} for n, v in pairs]

    entries = [
        _entry("https://www.z.test/", 0, 10, "text/html", 5_000),
        # Uncompressed: content-length is the body, whatever content.size says (Chromium reports
        # some text bodies by their decoded text length).
        _entry("https://www.z.test/a.css", 20, 5, "text/css", 146_348, bodySize=93_441,
               headers=headers(("Content-Length", "93357"))),
        # Compressed: content.size is the decoded body, what the lab serves.
        _entry("https://www.z.test/b.js", 21, 5, "text/javascript", 80_000, bodySize=20_000,
               headers=headers(("content-encoding", "br"), ("content-length", "20000"))),
        _entry("https://www.z.test/c.png", 22, 5, "image/png", -1, bodySize=3_000),
    ]
    objects = {o["path"]: o for o in import_har(_har(entries), "z.har", "z").manifest["objects"]}
    assert [objects[p]["size"] for p in ("/a.css", "/b.js", "/c.png")] == [93_357, 80_000, 3_000]


def test_har_ip_literal_host_and_order() -> None:
    entries = [
        _entry("http://10.1.2.3/img.png", 20, 5, "image/png", 500, ip=None),
        _entry("http://10.1.2.3/", 0, 10, "text/html", 4_000, ip=None),
    ]
    result = import_har(_har(entries), "ip.har", "ip")
    assert result.manifest["origins"] == [{"hostname": "ip-10-1-2-3.har.test", "address": "10.1.2.3"}]
    assert result.manifest["objects"][0]["path"] == "/"  # sorted by start time
    assert result.manifest["objects"][1]["parent"] == "/"


BAD_HARS: list[tuple[str, Any, str]] = [
    ("not object", [], "(document): a HAR file is a JSON object"),
    ("no log", {"x": 1}, "log: missing"),
    ("no entries", {"log": {"version": "1.2"}}, "log.entries: missing or not a list"),
    ("entry type", {"log": {"entries": [3]}}, "log.entries[0]: must be an object"),
    ("bad url", _har([_entry("https://www.a.test/", 0, 1, "text/html", 1)] * 3
                     + [_entry("not a url", 5, 1, "text/html", 1)]), "log.entries[3].request.url: "),
    ("no host", _har([_entry("https:///x", 0, 1, "text/html", 1)]), "log.entries[0].request.url: "),
    ("bad port", _har([_entry("https://a.test:99999/", 0, 1, "text/html", 1)]), "log.entries[0].request.url: "),
    ("bad host", _har([_entry("https://a_b.test/", 0, 1, "text/html", 1)]),
     "log.entries[0].request.url: cannot be served (origins[0].hostname: \"a_b.test\" is not a hostname"),
    ("long path", _har([_entry("https://a.test/", 0, 1, "text/html", 1),
                        _entry("https://a.test/" + "x" * 2048, 2, 1, "text/html", 1)]),
     "log.entries[1].request.url: cannot be served (objects[1].path: "),
    ("bad date", {"log": {"entries": [{"startedDateTime": "yesterday"}]}},
     "log.entries[0].startedDateTime: 'yesterday' is not an ISO 8601"),
    ("no response", {"log": {"entries": [{"startedDateTime": T0, "request": {"url": "https://a.test/"}}]}},
     "log.entries[0].response: missing"),
    ("status type", _har([_entry("https://a.test/", 0, 1, "text/html", 1, status="200")]),  # type: ignore[arg-type]
     "log.entries[0].response.status: "),
    ("all skipped", _har([_entry("https://a.test/", 0, 1, "text/html", 1, status=500)]),
     "log.entries: no entry can be served"),
]


@pytest.mark.parametrize(("har", "expected"), [(h, e) for _, h, e in BAD_HARS], ids=[n for n, _, _ in BAD_HARS])
def test_bad_har(har: Any, expected: str) -> None:
    with pytest.raises(HarError) as info:
        import_har(har, "page.har", "page")
    assert str(info.value).startswith(f"page.har: {expected}")


def test_har_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "page.har"
    bad.write_text("<html>")
    with pytest.raises(HarError, match=r"page.har: \(document\): not JSON"):
        import_har_file(bad)
    good = tmp_path / "shop.har"
    good.write_text(json.dumps(_har([_entry("https://www.a.test/", 0, 1, "text/html", 100)])))
    assert import_har_file(good).manifest["name"] == "shop"


# --- CLI ------------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PROTOLAB), *args], check=False, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


def test_cli_list_build_generate_import(tmp_path: Path) -> None:
    listing = _cli("corpus", "list")
    assert listing.returncode == 0 and "sohu" in listing.stdout and "3723" in listing.stdout
    built = _cli("corpus", "build", "all", "--out", str(tmp_path / "t1"), "--seed", "3")
    assert built.returncode == 0, built.stderr
    assert sorted(p.stem for p in (tmp_path / "t1").glob("*.json")) == sorted(SITES)
    assert json.loads((tmp_path / "t1" / "vk.json").read_text()) == site_manifest("vk", seed=3)
    generated = _cli("corpus", "generate", "--pages", "4", "--seed", "2", "--out", str(tmp_path / "gen"))
    assert generated.returncode == 0, generated.stderr
    assert json.loads((tmp_path / "gen" / "page-002.json").read_text()) == generate_corpus(4, 2)[1].manifest
    har = tmp_path / "in.har"
    har.write_text(json.dumps(_har([_entry("https://www.a.test/", 0, 1, "text/html", 100),
                                    _entry("https://www.a.test/x", 5, 1, "text/css", 10, method="POST")])))
    imported = _cli("corpus", "import-har", str(har), "--out", str(tmp_path / "a.json"), "--name", "a")
    assert imported.returncode == 0, imported.stderr
    assert "skipped 1: not a GET request" in imported.stdout
    assert load_manifest(tmp_path / "a.json").name == "a"


def test_cli_errors_are_messages(tmp_path: Path) -> None:
    unknown = _cli("corpus", "build", "nope", "--out", str(tmp_path))
    assert unknown.returncode == 1 and "unknown site 'nope'" in unknown.stderr
    assert "Traceback" not in unknown.stderr and not list(tmp_path.iterdir())
    bad = tmp_path / "bad.har"
    bad.write_text('{"log": {"entries": [{"startedDateTime": "2026-11-21T10:00:00Z", "request": {}, '
                   '"response": {"status": 200}}]}}')
    result = _cli("corpus", "import-har", str(bad), "--out", str(tmp_path / "m.json"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "bad.har: log.entries[0].request.url: missing" in result.stderr
    assert not (tmp_path / "m.json").exists()


# --- lab: the Rust server and real Chromium -------------------------------------------------------


class _Namespace:
    """A network namespace pl-p1-<tag>-<pid> with the given addresses on its loopback."""

    def __init__(self, tag: str, addresses: set[str]) -> None:
        self.name = f"pl-p1-{tag}-{os.getpid()}"
        self._watchdog = NamespaceWatchdog([self.name])  # a killed test run leaves no namespace
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        try:
            subprocess.run(["ip", "-n", self.name, "link", "set", "lo", "up"], check=True)
            for address in sorted(addresses):
                subprocess.run(["ip", "-n", self.name, "addr", "add", f"{address}/32", "dev", "lo"], check=True)
        except BaseException:
            self.delete()
            raise

    def exec(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.name, *args]

    def delete(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], check=False)
        self._watchdog.stop()


def _start_server(ns: _Namespace, binary: Path, manifests: list[Path], tls: Path) -> tuple[subprocess.Popen[str], Listening]:
    args = [str(binary), "serve", "--tls-dir", str(tls)]
    for manifest in manifests:
        args += ["--manifest", str(manifest)]
    server = subprocess.Popen(ns.exec(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        return server, await_listening(server)
    except BaseException:
        _stop(server)
        raise


def _stop(server: subprocess.Popen[str]) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=10)


def _run_group(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a command in its own process group; on timeout kill that group (the browser and
    Playwright's driver with it), so nothing outlives the test."""
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        err += f"\n(killed after {timeout} s)"
    return subprocess.CompletedProcess(args, process.returncode, out, err)


@pytest.mark.lab
def test_rust_server_accepts_generated_manifests(emu_binary: Path, tmp_path: Path) -> None:
    manifests = {**{f"{n}.json": site_manifest(n) for n in SITES},
                 **{f"{p.shape.name}.json": p.manifest for p in generate_corpus(6, seed=5)}}
    paths = []
    addresses = set()
    for name, manifest in manifests.items():
        path = tmp_path / name
        path.write_text(json.dumps(manifest))
        paths.append(path)
        addresses |= {o["address"] for o in manifest["origins"]}
    ns = _Namespace("srv", addresses)
    try:
        server, event = _start_server(ns, emu_binary, paths, tmp_path / "tls")
        _stop(server)
    finally:
        ns.delete()
    assert len(event.https) == len(addresses)


# Runs inside the namespace: loads the root in Chromium, then requests every other object from
# the page with fetch(), following the manifest's tree and delays (the generated bodies are
# not real HTML, so the browser itself discovers nothing), while Playwright records the HAR.
_RECORDER = r"""
import json, sys
from playwright.sync_api import sync_playwright

manifest_path, spki, har_path = sys.argv[1:4]
manifest = json.load(open(manifest_path))
rules = ", ".join(f"MAP {o['hostname']} {o['address']}" for o in manifest["origins"])
def key(origin, path):
    return f"https://{origin}{path}"
def parent_url(obj):
    ref = obj["parent"]
    return "https:" + ref if ref.startswith("//") else key(obj["origin"], ref)
tree = [{"url": key(o["origin"], o["path"]), "parent": parent_url(o) if "parent" in o else None,
         "delay": o.get("delay_ms", 0)} for o in manifest["objects"]]
root = next(t for t in tree if t["parent"] is None)
WALK = '''async (tree) => {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const kids = (url) => tree.filter((t) => t.parent === url);
  const load = async (t) => {
    await sleep(t.delay);
    const response = await fetch(t.url, {cache: "no-store"});
    await response.arrayBuffer();
    await Promise.all(kids(t.url).map(load));
  };
  await Promise.all(kids(tree.find((t) => t.parent === null).url).map(load));
  return tree.length;
}'''
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
        "--no-sandbox", f"--ignore-certificate-errors-spki-list={spki}", f"--host-resolver-rules={rules}"])
    context = browser.new_context(record_har_path=har_path, record_har_content="omit")
    page = context.new_page()
    page.goto(root["url"], wait_until="load")
    print(page.evaluate(WALK, tree))
    context.close()
    browser.close()
"""


@pytest.mark.lab
def test_import_har_recorded_by_chromium(emu_binary: Path, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed (/usr/bin/chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")
    served = site_manifest("twitter")  # 16 objects, 2 origins, iframes
    for obj in served["objects"]:  # the page's fetch() reads objects of both origins
        obj["headers"]["access-control-allow-origin"] = "*"
    manifest_path = tmp_path / "twitter.json"
    manifest_path.write_text(json.dumps(served))
    har_path = tmp_path / "twitter.har"
    ns = _Namespace("har", {o["address"] for o in served["origins"]})
    try:
        server, event = _start_server(ns, emu_binary, [manifest_path], tmp_path / "tls")
        try:
            recorder = _run_group(ns.exec(sys.executable, "-c", _RECORDER, str(manifest_path), event.spki,
                                          str(har_path)), timeout=180)
        finally:
            _stop(server)
    finally:
        ns.delete()
    assert recorder.returncode == 0, recorder.stderr[-3000:]
    assert recorder.stdout.strip() == str(len(served["objects"]))

    result = import_har_file(har_path, name="twitter")
    imported = result.manifest
    validate_manifest(imported, "imported twitter.json")
    assert result.kept == len(served["objects"]), (result.skipped, result.warnings)

    def view(m: dict[str, Any]) -> dict[tuple[str, str], tuple[int, str]]:
        return {(o["origin"], o["path"]): (o["size"], o["content_type"]) for o in m["objects"]}

    assert view(imported) == view(served)
    assert imported["origins"] == served["origins"]  # serverIPAddress kept
    # A sensible tree: the served root is the root, and every object's parent is an HTML, CSS or
    # JS object that finished before it was requested, no earlier than its true parent finished.
    assert imported["objects"][0]["path"] == "/" and imported["objects"][0]["origin"] == "www.twitter.test"
    objects = _index(imported)
    truth = _index(served)
    for obj in imported["objects"][1:]:
        parent = objects[_parent_key(obj)]  # type: ignore[index]
        assert type_of(parent["content_type"]) in ("html", "css", "js")
    agree = sum(_parent_key(o) == _parent_key(truth[(o["origin"], o["path"])]) for o in imported["objects"][1:])
    assert result.parents["timing"] + result.parents["root (nothing finished before it)"] == len(served["objects"]) - 1
    print(f"parents agreeing with the served tree: {agree} of {len(served['objects']) - 1}")
    assert agree >= 1
