"""Real peers in a network namespace (docs/peers.md).

Each test or bench run creates one namespace `pl-r3-<id>` with `lo` up and the origin addresses
on `lo`, starts servers inside it (our `protolab-net serve`, nginx, caddy) with their own config,
pid and log files in a temporary directory, runs clients inside it (`ip netns exec`), and
removes everything it created on exit: processes by pid, then the namespace.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from awaiting import NotReady, await_listening, await_port

from protolab.lab.watchdog import NamespaceWatchdog
from protolab.results.generated.event_listening import Listening

REPO = Path(__file__).resolve().parents[2]
NET = Path(os.environ.get("PROTOLAB_NET", REPO / "target" / "release" / "protolab-net"))
TEMPLATES = Path(__file__).parent
CHROMIUM = "/usr/bin/chromium"

WWW = "www.x.test"
STATIC = "static.x.test"
ADDRESSES = {WWW: "10.99.0.1", STATIC: "10.99.0.2"}
CORS = {"access-control-allow-origin": "*", "timing-allow-origin": "*"}


class PeerError(RuntimeError):
    """A peer did not start or misbehaved."""


def has_subcommand(name: str) -> bool:
    """Whether the built protolab-net has the subcommand (`load`, `bulk` are being written)."""
    if not NET.exists():
        return False
    done = subprocess.run([str(NET), name, "--help"], capture_output=True, text=True, check=False)
    return done.returncode == 0


@dataclass
class Netns:
    """A network namespace with `lo` up and addresses on it. Use as a context manager."""

    addresses: Sequence[str] = tuple(ADDRESSES.values())
    name: str = field(default_factory=lambda: "pl-r3-" + secrets.token_hex(3))
    procs: list[subprocess.Popen[Any]] = field(default_factory=list)
    _watchdog: NamespaceWatchdog | None = field(default=None, repr=False)

    def __enter__(self) -> Netns:
        self._watchdog = NamespaceWatchdog([self.name])  # a killed test run leaves no namespace
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        try:
            subprocess.run(["ip", "-n", self.name, "link", "set", "lo", "up"], check=True)
            for a in self.addresses:
                subprocess.run(["ip", "-n", self.name, "addr", "add", f"{a}/32", "dev", "lo"], check=True)
            # The seeds used cubic; set it explicitly (the kernel default here is bbr).
            self.run(["sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=cubic"])
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cmd(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *map(str, argv)]

    def run(self, argv: Sequence[str], timeout: float = 120, check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.cmd(argv), capture_output=True, text=True, timeout=timeout, check=False, **kw)
        if check and done.returncode != 0:
            raise PeerError(f"{' '.join(map(str, argv))}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        return done

    def popen(self, argv: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        p = subprocess.Popen(self.cmd(argv), **kw)
        self.procs.append(p)
        return p

    def stop(self, p: subprocess.Popen[Any], sig: int = signal.SIGTERM) -> None:
        """Stops one process we started (by its pid), SIGKILL after 5 s."""
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def close(self) -> None:
        for p in reversed(self.procs):
            self.stop(p)
        self.procs.clear()
        subprocess.run(["ip", "netns", "delete", self.name], capture_output=True, check=False)
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None


# --- manifests -----------------------------------------------------------------------------

def page_manifest(path: Path, objects: Sequence[tuple[str, str, int, str]], name: str = "peers", seed: int = 7,
                  origins: dict[str, str] | None = None, cors: bool = True) -> dict[str, Any]:
    """Writes a manifest: objects are (origin, path, size, content_type); the first is the root,
    every other object's parent is the root (all discovered at once)."""
    origins = origins or ADDRESSES
    root_origin, root_path = objects[0][0], objects[0][1]
    objs: list[dict[str, Any]] = []
    for i, (origin, p, size, ctype) in enumerate(objects):
        o: dict[str, Any] = {"path": p, "origin": origin, "size": size, "content_type": ctype}
        if i > 0:
            o["parent"] = root_path if origin == root_origin else f"//{root_origin}{root_path}"
        if cors and i > 0:
            o["headers"] = dict(CORS)
        objs.append(o)
    m = {"schema_version": 1, "name": name, "seed": seed,
         "origins": [{"hostname": h, "address": a} for h, a in origins.items()], "objects": objs}
    path.write_text(json.dumps(m, indent=1))
    return m


def small_page(path: Path) -> dict[str, Any]:
    """The page of the browser and curl tests: an HTML root and 12 objects on two origins,
    30 B to 1.5 MB."""
    objs = [(WWW, "/", 20_000, "text/html; charset=utf-8"),
            (WWW, "/site.css", 9_000, "text/css"),
            (WWW, "/app.js", 120_000, "text/javascript"),
            (WWW, "/tiny.txt", 30, "text/plain")]
    objs += [(STATIC, f"/img/{i}.jpg", 10_000 * (i + 1) ** 2, "image/jpeg") for i in range(8)]
    objs.append((STATIC, "/big.bin", 1_500_000, "application/octet-stream"))
    return page_manifest(path, objs)


def amazon_like(path: Path, seed: int = 3) -> dict[str, Any]:
    """64 objects, 3.7 MB (3 723 kB), two origins: the shape of 001 Table I's amazon row
    (5 html, 2 css, 14 js, 41 img, 2 other). Sizes are a fixed geometric spread."""
    kinds = ["text/html"] * 5 + ["text/css"] * 2 + ["text/javascript"] * 14 + ["image/jpeg"] * 41 + ["font/woff2"] * 2
    total = 3_723_000
    weights = [1.06 ** i for i in range(63)]
    scale = (total - 40_000) / sum(weights)
    sizes = [max(200, int(w * scale)) for w in weights]
    sizes[-1] += (total - 40_000) - sum(sizes)
    objs = [(WWW, "/", 40_000, "text/html; charset=utf-8")]
    for i, (size, ctype) in enumerate(zip(sizes, kinds[1:], strict=True)):
        origin = WWW if i % 3 == 0 else STATIC
        objs.append((origin, f"/o/{i}", size, ctype))
    return page_manifest(path, objs, name="amazon-like", seed=seed, cors=False)


def manifest_urls(m: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(o["origin"], o["path"], o["size"]) for o in m["objects"]]


# --- our server ----------------------------------------------------------------------------

@dataclass
class Served:
    proc: subprocess.Popen[str]
    ready: Listening
    tls_dir: Path


def serve(ns: Netns, manifests: Sequence[Path], tls_dir: Path, extra: Sequence[str] = ()) -> Served:
    """Starts `protolab-net serve` in the namespace and waits for its `listening` line."""
    argv: list[str] = [str(NET), "serve", "--tls-dir", str(tls_dir), "--lab", "r3"]
    for m in manifests:
        argv += ["--manifest", str(m)]
    argv += list(extra)
    p = ns.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = await_listening(p)
    except NotReady as exc:
        raise PeerError(str(exc)) from None
    return Served(p, ready, tls_dir)


def curl_args(tls_dir: Path, ports: Sequence[int] = (80, 443)) -> list[str]:
    """curl options that reach the origins of ADDRESSES by name (on `ports`) with our CA."""
    args = ["-sS", "--max-time", "60", "--cacert", str(tls_dir / "ca.pem")]
    for host, addr in ADDRESSES.items():
        for port in ports:
            args += ["--resolve", f"{host}:{port}:{addr}"]
    return args


def export_bodies(ns: Netns, m: dict[str, Any], tls_dir: Path, root: Path) -> None:
    """Writes every object of the manifest to root/<hostname><path>, fetched from our running
    server over h1c (the exact generated bytes)."""
    for origin, p, size in manifest_urls(m):
        dest = root / origin / (p.lstrip("/") or "index.html")
        dest.parent.mkdir(parents=True, exist_ok=True)
        ns.run(["curl", *curl_args(tls_dir), "--http1.1", "-o", dest, f"http://{origin}{p}"])
        if dest.stat().st_size != size:
            raise PeerError(f"{origin}{p}: exported {dest.stat().st_size} bytes, expected {size}")
    for d in [root, *root.rglob("*")]:
        d.chmod(0o755 if d.is_dir() else 0o644)


# --- nginx and caddy -----------------------------------------------------------------------

def _render(template: str, **values: str) -> str:
    text = (TEMPLATES / template).read_text()
    return re.sub(r"@(\w+)@", lambda mo: values[mo.group(1)], text)


def start_nginx(ns: Netns, work: Path, site_root: Path, tls_dir: Path, origins: dict[str, str] | None = None,
                http_port: int = 80, https_port: int = 443) -> subprocess.Popen[Any]:
    """nginx (h1c on http_port, TLS h1/h2 on https_port) serving site_root/<hostname>/ for every
    origin."""
    origins = origins or ADDRESSES
    work.mkdir(parents=True, exist_ok=True)
    servers = []
    for host, addr in origins.items():
        servers.append(_render("nginx-server.conf.in", ADDR=addr, HOST=host, ROOT=str(site_root / host),
                               HTTP_PORT=str(http_port), HTTPS_PORT=str(https_port),
                               CERT=str(tls_dir / "certs" / f"{host}.pem"), KEY=str(tls_dir / "certs" / f"{host}.key.pem")))
    conf = _render("nginx.conf.in", WORK=str(work), SERVERS="\n".join(servers))
    (work / "nginx.conf").write_text(conf)
    p = ns.popen(["nginx", "-c", work / "nginx.conf", "-p", work], stdout=subprocess.DEVNULL,
                 stderr=open(work / "stderr.log", "w"))
    for addr in origins.values():
        try:
            await_port(ns.name, https_port, address=addr, process=p, stderr_file=work / "stderr.log")
        except NotReady as exc:
            error_log = (work / "error.log").read_text() if (work / "error.log").exists() else ""
            raise PeerError(f"nginx did not start: {exc} {error_log}") from None
    return p


def start_caddy(ns: Netns, work: Path, site_root: Path, tls_dir: Path, origins: dict[str, str] | None = None,
                http_port: int = 80, https_port: int = 443) -> subprocess.Popen[Any]:
    """caddy (h1, h2 on TCP https_port, h3 on UDP https_port) serving site_root/<hostname>/
    for every origin."""
    origins = origins or ADDRESSES
    work.mkdir(parents=True, exist_ok=True)
    sites = []
    for host, addr in origins.items():
        sites.append(_render("caddy-site.in", ADDR=addr, HOST=host, ROOT=str(site_root / host), WORK=str(work),
                             HTTPS_PORT=str(https_port),
                             CERT=str(tls_dir / "certs" / f"{host}.pem"), KEY=str(tls_dir / "certs" / f"{host}.key.pem")))
    (work / "Caddyfile").write_text(_render("Caddyfile.in", WORK=str(work), SITES="\n".join(sites),
                                                    HTTP_PORT=str(http_port), HTTPS_PORT=str(https_port)))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "XDG_DATA_HOME": str(work / "data"),
           "XDG_CONFIG_HOME": str(work / "config")}
    p = ns.popen(["caddy", "run", "--config", work / "Caddyfile", "--adapter", "caddyfile"], env=env,
                 stdout=subprocess.DEVNULL, stderr=open(work / "caddy.log", "w"))
    for addr in origins.values():
        try:
            await_port(ns.name, https_port, address=addr, process=p, stderr_file=work / "caddy.log")
            await_port(ns.name, https_port, address=addr, udp=True, process=p, stderr_file=work / "caddy.log")
        except NotReady as exc:
            raise PeerError(f"caddy did not start: {exc}") from None
    return p


# --- protolab-net load ---------------------------------------------------------------------

def load(ns: Netns, manifest: Path, mode: str, ca: Path, out: Path, extra: Sequence[str] = ()) -> dict[str, Any]:
    done = ns.run([NET, "load", "--manifest", manifest, "--mode", mode, "--ca", ca, "--out", out, *extra],
                  check=False, timeout=120)
    if not out.exists():
        raise PeerError(f"protolab-net load --mode {mode}: exit {done.returncode}, no result: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    result["_exit"] = done.returncode
    result["_stderr"] = done.stderr[-2000:]
    return result


@contextmanager
def workdir(prefix: str = "pl-r3-") -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
