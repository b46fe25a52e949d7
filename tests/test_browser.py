"""Chromium as a page-load client (docs/browser.md): spec checks, and real loads of a real page
through the emulator in every mode Chromium speaks, with the page's every discovery path
(stylesheets, @import, fonts, backgrounds, scripts inserting elements, frames, data), and a
runner killed in the middle of a browser load."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pytest
from awaiting import wait_until
from conftest import lab_namespaces, toml_text

from protolab.browser.modes import chromium_flags
from protolab.plan.experiment import SpecError, spec_from_dict

CHROMIUM = Path("/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")

WWW, STATIC = "www.rp.test", "static.rp.test"


def _page() -> dict[str, Any]:
    """Every way a page discovers an object, on two origins."""
    objects = [
        ("/", WWW, 9000, "text/html; charset=utf-8", None),
        ("/main.css", WWW, 4000, "text/css", "/"),
        ("/extra.css", STATIC, 2000, "text/css", f"//{WWW}/main.css"),  # @import
        ("/font.woff2", STATIC, 20000, "font/woff2", f"//{WWW}/main.css"),  # @font-face
        ("/bg.png", STATIC, 30000, "image/png", f"//{STATIC}/extra.css"),  # background
        ("/preload.woff2", STATIC, 15000, "font/woff2", f"//{WWW}/"),  # <link rel=preload>
        ("/app.js", WWW, 6000, "text/javascript", "/"),
        ("/data.json?v=1", WWW, 3000, "application/json", "/app.js"),  # data from a script
        ("/late.css", WWW, 1500, "text/css", "/app.js"),
        ("/late.jpg", STATIC, 25000, "image/jpeg", f"//{WWW}/late.css"),
        ("/script-font.woff2", STATIC, 12000, "font/woff2", f"//{WWW}/app.js"),
        ("/more.js", STATIC, 2500, "text/javascript", f"//{WWW}/app.js"),
        ("/anim.gif", STATIC, 8000, "image/gif", f"//{STATIC}/more.js"),
        ("/frame.html", WWW, 3000, "text/html", "/"),
        ("/in-frame.webp", STATIC, 10000, "image/webp", f"//{WWW}/frame.html"),
        ("/logo.svg", STATIC, 4000, "image/svg+xml", f"//{WWW}/"),
        ("/photo.jpg", STATIC, 60000, "image/jpeg", f"//{WWW}/"),
        ("/icon.ico", WWW, 1200, "image/x-icon", "/"),
    ]
    return {
        "schema_version": 1, "name": "realpage", "seed": 5,
        "origins": [{"hostname": WWW, "address": "10.98.0.1"}, {"hostname": STATIC, "address": "10.98.0.2"}],
        "objects": [{"path": p, "origin": o, "size": s, "content_type": t, **({"parent": parent} if parent else {})}
                    for p, o, s, t, parent in objects],
    }


def _spec(page: Path | str, modes: list[str], bandwidth_mbps: float = 20, **extra: Any) -> dict[str, Any]:
    return {
        "schema_version": 1, "name": "browser", "scenario": "wifi-loss", "seed": 1, "repetitions": 1,
        "timeout_s": 60,
        "axes": {"bandwidth_mbps": [bandwidth_mbps], "rtt_ms": [20], "loss_pct": [0], "buffer": ["1bdp"], "mode": modes,
                 "page": [str(page)]},
        "transport": {"client": "chromium"},
        **extra,
    }


def _protolab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "protolab", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_spec_refuses_what_chromium_cannot_do(tmp_path: Path) -> None:
    page = tmp_path / "p.json"
    page.write_text(json.dumps(_page()))
    with pytest.raises(SpecError, match=r"axes\.mode\[1\]: mode 'h2-parallel:2' cannot be loaded by Chromium"):
        spec_from_dict(_spec(page, ["h2", "h2-parallel:2"]), source="s.toml", path=tmp_path / "s.toml")
    with pytest.raises(SpecError, match=r"axes\.mode\[0\]: mode 'h3-parallel:3' cannot"):
        spec_from_dict({**_spec(page, ["h3-parallel:3"]), "transport": {}, "axes": {
            **_spec(page, ["h3-parallel:3"])["axes"], "client": ["engine", "chromium"]}},
            source="s.toml", path=tmp_path / "s.toml")
    bulk = {"schema_version": 1, "scenario": "cc-suite", "transport": {"client": "chromium"}}
    with pytest.raises(SpecError, match=r"transport\.client: client \"chromium\" loads pages"):
        spec_from_dict(bulk, source="b.toml", path=tmp_path / "b.toml")
    with pytest.raises(SpecError, match=r"transport\.client"):
        spec_from_dict({**_spec(page, ["h2"]), "transport": {"client": "firefox"}}, source="s.toml",
                       path=tmp_path / "s.toml")
    # the engine's QUIC handshake bound is not Chromium's to take
    with pytest.raises(SpecError, match=r"transport\.quic_handshake_timeout_ms: bounds protolab's page-load engine"):
        spec_from_dict({**_spec(page, ["h3"]), "transport": {"client": "chromium", "quic_handshake_timeout_ms": 60000}},
                       source="s.toml", path=tmp_path / "s.toml")
    engine = _spec(page, ["h3"])
    engine["transport"] = {"quic_handshake_timeout_ms": 60000}
    assert spec_from_dict(engine, source="s.toml", path=tmp_path / "s.toml")
    with pytest.raises(SpecError, match=r"b\.toml: transport\.quic_handshake_timeout_ms: bounds the page-load "
                                        r"engine's QUIC connections; scenario \"cc-suite\" runs a bulk workload"):
        spec_from_dict({**bulk, "transport": {"quic_handshake_timeout_ms": 60000}}, source="b.toml",
                       path=tmp_path / "b.toml")


def test_flags_force_the_protocol_of_each_mode() -> None:
    maps = [f"{WWW}=10.98.0.1", f"{STATIC}=10.98.0.2"]
    h3 = chromium_flags("h3", "AAA=", maps)
    assert f"--origin-to-force-quic-on={WWW}:443,{STATIC}:443" in h3
    assert f"--host-resolver-rules=MAP {WWW} 10.98.0.1, MAP {STATIC} 10.98.0.2" in h3
    assert "--disable-http2" in chromium_flags("h1", "AAA=", maps)
    assert "--disable-quic" in chromium_flags("h2", "AAA=", maps) and "--disable-http2" not in chromium_flags("h2", "A", maps)
    assert "--ignore-certificate-errors-spki-list=AAA=" in h3
    # No SPKI: nothing pinned (the trust store decides); QUIC not forced: only through Alt-Svc.
    trusting = chromium_flags("h3", "", maps, force_quic=False)
    assert "--enable-quic" in trusting
    assert not [f for f in trusting if f.startswith(("--ignore-certificate-errors-spki-list", "--origin-to-force-quic-on"))]


@pytest.mark.lab
@needs_chromium
def test_chromium_loads_every_object_of_a_real_page_in_every_mode(emu_binary: Path, tmp_path: Path) -> None:
    page = tmp_path / "realpage.json"
    page.write_text(json.dumps(_page()))
    spec = tmp_path / "browser.toml"
    modes = ["h1c", "h1", "h2", "h3"]
    spec.write_text(toml_text(_spec(page, modes)))
    results = tmp_path / "results"
    done = _protolab("run", str(spec), "--results", str(results))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    expected = {(o["origin"], o["path"]): o["size"] for o in _page()["objects"]}
    with duckdb.connect(str(results / "results.duckdb"), read_only=True) as con:
        runs = con.execute("SELECT run_key, mode, client, status, error, plt_ms, artifacts_dir FROM runs").fetchall()
        assert sorted(r[1] for r in runs) == sorted(modes)
        for key, mode, client, status, error, plt, artifacts in runs:
            assert (client, status, error) == ("chromium", "ok", None), (mode, error)
            objects = con.execute("SELECT origin, path, bytes, expected_bytes, http_status, finished_ms FROM objects "
                                  "WHERE run_key = ?", [key]).fetchall()
            got = {(o, p): (b, s) for o, p, b, _, s, _ in objects}
            # The browser found every object through the page itself, and read each to the end.
            assert got == {k: (size, 200) for k, size in expected.items()}, mode
            assert all(f is not None and f <= plt + 50 for *_, f in objects), (mode, plt)
            protocols = {p for (p,) in con.execute("SELECT protocol FROM connections WHERE run_key = ?", [key]).fetchall()}
            assert protocols == {mode}, (mode, protocols)
            har = json.loads((results / artifacts / "page.har").read_text())
            assert len(har["log"]["entries"]) >= len(expected)
    left = [p for p in Path(tempfile.gettempdir()).glob("pl-*-chromium-*")]
    assert not any(str(results) in str(p) for p in left)




def _chromium_pids(profile_prefix: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if profile_prefix in cmdline and "chromium" in cmdline:
            pids.append(int(proc.name))
    return pids


# Some of the page, far from all of it (3.7 MB): about 2 s of the 1 Mbit/s link.
MID_PAGE_BYTES = 250_000


def _path_bytes(binary: Path, lab: str) -> int:
    """Bytes the running lab's paths have delivered (both directions; 0 while it is not up)."""
    done = subprocess.run([str(binary), "emu", "ctl", "--lab", lab, '{"cmd": "counters"}'],
                          capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        return 0
    paths = json.loads(done.stdout).get("paths", {})
    return sum(d["delivered_bytes"] for p in paths.values() for d in (p["forward"], p["reverse"]))


@pytest.mark.lab
@needs_chromium
def test_a_runner_killed_during_a_browser_load_leaves_nothing(emu_binary: Path, lab_name: Any, tmp_path: Path) -> None:
    name = lab_name()
    spec = tmp_path / "slow.toml"
    spec.write_text(toml_text(_spec("amazon", ["h2"], bandwidth_mbps=1, timeout_s=120)))  # 3.7 MB: about 30 s
    prefix = f"pl-{name}-chromium-"
    runner = subprocess.Popen([sys.executable, "-m", "protolab", "run", str(spec), "--results", str(tmp_path / "r"),
                               "--lab", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _chromium_pids(prefix), what="Chromium started", within=90, process=runner)
        # In the middle of the 3.7 MB page at 1 Mbit/s: Chromium has received a part of it.
        started = _path_bytes(emu_binary, name)
        wait_until(lambda: _path_bytes(emu_binary, name) >= started + MID_PAGE_BYTES,
                   what=f"{MID_PAGE_BYTES} bytes of the page through the lab", within=60, process=runner)
        runner.kill()  # SIGKILL: no handler runs; the emulator sees its owner gone and cleans up
        runner.wait(timeout=10)
        wait_until(lambda: not (lab_namespaces(name) or _chromium_pids(prefix)
                                or list(Path(tempfile.gettempdir()).glob(f"{prefix}*"))),
                   what="the lab, its Chromium and its profile gone", within=30)
        assert lab_namespaces(name) == []
        assert _chromium_pids(prefix) == [], "no Chromium process of the lab is left"
        assert list(Path(tempfile.gettempdir()).glob(f"{prefix}*")) == [], "the profile directory is removed"
    finally:
        if runner.poll() is None:
            runner.kill()
        subprocess.run([str(emu_binary), "emu", "cleanup", "--lab", name], capture_output=True, check=False)


def test_calibration_pairs_engine_and_chromium_medians_per_page_and_mode() -> None:
    from protolab.report.calibration import LoadRow, calibrate, per_mode

    rows = [LoadRow(("7",), "vk", "h2", "engine", plt, 900.0, 2) for plt in (1000.0, 1100.0, 1200.0)]
    rows += [LoadRow(("7",), "vk", "h2", "chromium", plt, 1250.0, 3) for plt in (1300.0, 1320.0, 1500.0)]
    rows += [LoadRow(("7",), "amazon", "h2", "engine", 4000.0, None, 2),
             LoadRow(("7",), "amazon", "h2", "chromium", 4200.0, 4100.0, 4),
             LoadRow(("7",), "baidu", "h3", "engine", 300.0, None, 1)]  # no Chromium load: no row
    cells = calibrate(rows)
    assert [(c.page, c.mode) for c in cells] == [("vk", "h2"), ("amazon", "h2")]
    vk = cells[0]
    assert (vk.engine_ms, vk.chromium_ms, vk.n_engine, vk.n_chromium) == (1100.0, 1320.0, 3, 3)
    assert vk.ratio == pytest.approx(1.2) and not vk.agrees
    assert vk.after_network_ms == pytest.approx(70.0)
    assert (vk.engine_connections, vk.chromium_connections) == (2.0, 3.0)
    assert cells[1].agrees  # 1.05
    assert per_mode(cells)[(("7",), "h2")] == pytest.approx((1.2 * 1.05) ** 0.5)
