"""Record and replay (docs/corpus.md): a real site (HTML, CSS with @import and a background,
JavaScript that inserts an image, a frame, PNG/JPEG/GIF images) served by nginx in a namespace,
recorded through headless Chromium, then replayed by `protolab-net serve` through the emulator
over h1, h2 and h3 to the engine and to Chromium."""

from __future__ import annotations

import io
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from awaiting import await_port
from conftest import run_protolab, toml_text
from peers.helpers import Netns

from protolab.corpus.record import (
    Recorded,
    Recording,
    replayable_headers,
    write_recording,
)

WWW, STATIC = "www.site.test", "static.site.test"
SITE = {WWW: "10.97.0.1", STATIC: "10.97.0.2"}
needs_tools = pytest.mark.skipif(not (Path("/usr/bin/chromium").exists() and shutil.which("nginx")),
                                 reason="chromium and nginx (Debian packages) are needed")


def _image(fmt: str, width: int, height: int, seed: int) -> bytes:
    from PIL import Image

    rng = random.Random(seed)
    img = Image.frombytes("RGB", (width, height), bytes(rng.randrange(256) for _ in range(width * height * 3)))
    out = io.BytesIO()
    (img.convert("P") if fmt == "GIF" else img).save(out, fmt)
    return out.getvalue()


def _site(root: Path) -> dict[tuple[str, str], bytes]:
    """The site's files, by (host, path as requested)."""
    files = {
        (WWW, "/"): b"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>recorded</title>
<link rel="stylesheet" href="/style.css">
<script src="/app.js"></script>
</head><body><h1>A recorded page</h1>
<img src="//static.site.test/logo.png" alt="logo">
<iframe src="/frame.html" width="60" height="60"></iframe>
</body></html>
""",
        (WWW, "/style.css"): b'@import url("//static.site.test/theme.css");\n'
                             b'body { background: url("//static.site.test/bg.jpg"); }\n',
        (STATIC, "/theme.css"): b"h1 { color: #336; font-family: sans-serif; }\n",
        (WWW, "/app.js"): b'var i = new Image();\ni.src = "//static.site.test/photo.png";\n'
                          b"document.documentElement.appendChild(i);\n",
        (WWW, "/frame.html"): b'<!DOCTYPE html><html><body><img src="//static.site.test/inframe.gif"></body></html>\n',
        (STATIC, "/logo.png"): _image("PNG", 120, 60, 1),
        (STATIC, "/bg.jpg"): _image("JPEG", 160, 160, 2),
        (STATIC, "/photo.png"): _image("PNG", 100, 80, 3),
        (STATIC, "/inframe.gif"): _image("GIF", 40, 40, 4),
    }
    for (host, path), body in files.items():
        target = root / host / ("index.html" if path == "/" else path.lstrip("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    return files


NGINX = """daemon off;
user root;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 256; }}
http {{
    types {{ text/html html; text/css css; text/javascript js; image/png png; image/jpeg jpg; image/gif gif; }}
    access_log {work}/access.log;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
{servers}
}}
"""


def _nginx(ns: Netns, work: Path, root: Path) -> None:
    servers = "\n".join(f"    server {{ listen {addr}:80; server_name {host}; root {root / host}; }}"
                        for host, addr in SITE.items())
    work.mkdir(parents=True, exist_ok=True)
    (work / "nginx.conf").write_text(NGINX.format(work=work, servers=servers))
    process = ns.popen(["nginx", "-c", work / "nginx.conf", "-p", work], stdout=subprocess.DEVNULL,
                       stderr=(work / "stderr.log").open("w"))
    for addr in SITE.values():
        await_port(ns.name, 80, address=addr, process=process, stderr_file=work / "stderr.log")


def test_headers_that_are_not_replayed() -> None:
    kept = replayable_headers({"cache-control": "max-age=60", "content-type": "text/html", "date": "x",
                               "content-length": "5", "etag": '"a"\n"b"', "alt-svc": "h3=\":443\"",
                               "x-bad": "line\x00break"})
    assert kept == {"cache-control": "max-age=60", "etag": '"a"'}


def test_a_recording_becomes_a_manifest_with_its_bodies(tmp_path: Path) -> None:
    def request(url: str, body: bytes | None, parent: str | None, status: int = 200, t: float = 0.0) -> Recorded:
        return Recorded(url=url, method="GET", sent=t, wall=1_700_000_000 + t, status=status,
                        headers={"content-type": "text/css" if url.endswith(".css") else "text/html",
                                 "cache-control": "no-cache"},
                        mime="text/css" if url.endswith(".css") else "text/html", remote="10.97.0.1",
                        finished=t + 0.01, body=body, initiator={"type": "parser", "url": parent} if parent else {})

    rec = Recording("http://www.site.test/", [
        request("http://www.site.test/", b"<html>root</html>", None),
        request("http://www.site.test/a.css", b"body{}", "http://www.site.test/", t=0.02),
        request("http://www.site.test/favicon.ico", None, None, status=404, t=0.5),
    ], {"loadEventEnd": 42.5}, "156.0")
    result = write_recording(rec, tmp_path, "p", "10.98.0.0/16")
    manifest = json.loads((tmp_path / "p.json").read_text())
    objects = {o["path"]: o for o in manifest["objects"]}
    assert set(objects) == {"/", "/a.css"}
    assert objects["/a.css"]["parent"] == "/" and objects["/a.css"]["headers"] == {"cache-control": "no-cache"}
    assert (tmp_path / objects["/"]["body"]).read_bytes() == b"<html>root</html>"
    assert objects["/"]["size"] == len(b"<html>root</html>")
    assert manifest["origins"] == [{"hostname": "www.site.test", "address": "10.97.0.1"}]
    described = json.loads((tmp_path / "p.record.json").read_text())
    assert described["plt_ms"] == 42.5 and described["bodies"] == 2 and described["skipped"]
    assert result.bodies == 2 and not list(tmp_path.glob(".record-*"))
    subprocess.run([sys.executable, "-m", "protolab", "corpus", "validate", str(tmp_path / "p.json")], check=True,
                   capture_output=True)


@pytest.mark.lab
@needs_tools
def test_record_a_local_site_and_replay_it_over_h1_h2_h3(emu_binary: Path, tmp_path: Path) -> None:
    root = tmp_path / "site"
    files = _site(root)
    recorded = tmp_path / "recorded"
    with Netns(addresses=list(SITE.values())) as ns:
        _nginx(ns, tmp_path / "nginx", root)
        argv = [sys.executable, "-m", "protolab", "corpus", "record", f"http://{WWW}/", "--out", str(recorded),
                "--name", "site"]
        for host, addr in SITE.items():
            argv += ["--map", f"{host}={addr}"]
        done = ns.run(argv, timeout=120)
    assert "wrote" in done.stdout, done.stdout + done.stderr
    manifest = json.loads((recorded / "site.json").read_text())
    objects = {(o["origin"], o["path"]): o for o in manifest["objects"]}
    assert set(objects) == set(files), "every file of the site, nothing else (the favicon 404 is skipped)"
    for key, body in files.items():
        o = objects[key]
        assert o["size"] == len(body) and (recorded / o["body"]).read_bytes() == body, key
    assert objects[(STATIC, "/theme.css")]["parent"] == f"//{WWW}/style.css"
    assert objects[(STATIC, "/inframe.gif")]["parent"] == f"//{WWW}/frame.html"
    # An image a script inserts while the page parses: Chromium names the parser (the document)
    # as its initiator, not the script.
    assert objects[(STATIC, "/photo.png")]["parent"] in (f"//{WWW}/app.js", f"//{WWW}/")
    recording = json.loads((recorded / "site.record.json").read_text())
    assert recording["plt_ms"] > 0

    spec = tmp_path / "replay.toml"
    spec.write_text(toml_text({
        "schema_version": 1, "name": "replay", "scenario": "wifi-loss", "repetitions": 1, "timeout_s": 60,
        "axes": {"bandwidth_mbps": [50], "rtt_ms": [10], "loss_pct": [0], "buffer": ["1bdp"], "mode": ["h1", "h2", "h3"],
                 "page": [str(recorded / "site.json")], "client": ["engine", "chromium"]},
    }))
    results = tmp_path / "results"
    run = run_protolab("run", spec, "--results", results)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as con:
        runs = con.execute("SELECT run_key, mode, client, status, error, plt_ms FROM runs").fetchall()
        assert len(runs) == 6
        for key, mode, client, status, error, plt in runs:
            assert (status, error) == ("ok", None), (mode, client)
            got = {(o, p): (b, s) for o, p, b, s in con.execute(
                "SELECT origin, path, bytes, http_status FROM objects WHERE run_key = ?", [key]).fetchall()}
            assert got == {k: (len(v), 200) for k, v in files.items()}, (mode, client)
            protocols = {p for (p,) in con.execute("SELECT protocol FROM connections WHERE run_key = ?", [key]).fetchall()}
            assert protocols == {mode}, (mode, client, protocols)
            assert plt > 0
    # The results directory replays on its own: the bodies were copied beside its copy of the page.
    copied = json.loads((results / "pages" / "site.json").read_text())
    assert all((results / "pages" / o["body"]).is_file() for o in copied["objects"])
