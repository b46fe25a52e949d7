"""The browser speed test (docs/live.md, "The speed-test page"): a page served by
`protolab-net serve` as a manifest whose objects carry recorded bodies (docs/manifest.md,
`objects[].body`): `index.html`, `speedtest.js` and `style.css` of this directory.

```
from protolab.live.page import write_manifest, page_url
manifest = write_manifest(Path("site"), "speed.pl.test", "10.77.1.1")   # site/speedtest.json
url = page_url("speed.pl.test", coordinator="http://10.77.1.1:8090")
# https://speed.pl.test/#coordinator=http%3A%2F%2F10.77.1.1%3A8090&autostart=1
```

The page reads its parameters from the query string and the fragment. `protolab-net serve`
matches a path's query exactly, so a page it serves takes them after `#`; `queries` serves the
page at given query strings too (`/?coordinator=...`).

The manifest also declares the load origins `load1.<hostname>` .. `load<N>.<hostname>` at the
same address: the page opens each load-generating connection on its own origin (a browser
multiplexes every request to one origin over one connection; each origin has its own
certificate, so Chromium does not pool them). A browser must resolve them too:
`resolver_maps(hostname, address)` gives the `HOST=ADDR` pairs for the driver's `--map`.

or `python -m protolab.live.page --hostname speed.pl.test --address 10.77.1.1 --out site`.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

PAGE_DIR = Path(__file__).resolve().parent
MANIFEST_FILE = "speedtest.json"
BODIES_DIR = "speedtest.bodies"
RESULT_SCHEMA = "protolab.rpm.browser"
# Load origins `load1.<hostname>` .. : one per load-generating connection, up to the draft's MNP.
LOAD_ORIGINS = 16

# (path, file in this directory, content type, parent path); the root document first.
PAGE_OBJECTS: tuple[tuple[str, str, str, str | None], ...] = (
    ("/", "index.html", "text/html; charset=utf-8", None),
    ("/style.css", "style.css", "text/css; charset=utf-8", "/"),
    ("/speedtest.js", "speedtest.js", "text/javascript; charset=utf-8", "/"),
)

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def _check_hostname(hostname: str) -> None:
    # The server's rule (docs/manifest.md, origins[].hostname), checked here so the error names
    # the argument instead of a manifest field.
    try:
        ipaddress.ip_address(hostname)
    except ValueError:
        pass
    else:
        raise ValueError(f"hostname {hostname!r}: an IP literal is not a hostname")
    if len(hostname) > 253 or not all(_LABEL.match(label) for label in hostname.split(".")):
        raise ValueError(f"hostname {hostname!r}: lowercase DNS labels of a-z, 0-9 and '-' expected")


def _check_address(address: str) -> None:
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:
        raise ValueError(f"address {address!r}: an IPv4 address expected") from None
    if ip.is_unspecified or ip.is_multicast or ip == ipaddress.IPv4Address("255.255.255.255"):
        raise ValueError(f"address {address!r}: not an address a server can listen on")


def _check_query(query: str) -> None:
    if not query or len(query) > 2000 or any(not 0x21 <= ord(c) <= 0x7E for c in query) or "#" in query:
        raise ValueError(f"query {query!r}: printable ASCII without spaces or '#', at most 2000 characters")


def load_hostnames(hostname: str, load_origins: int = LOAD_ORIGINS) -> list[str]:
    """The page's load origins: `load1.<hostname>` .. `load<load_origins>.<hostname>`."""
    return [f"load{i}.{hostname}" for i in range(1, load_origins + 1)]


def resolver_maps(hostname: str, address: str, load_origins: int = LOAD_ORIGINS) -> list[str]:
    """`HOST=ADDR` for the page's origin and its load origins (the driver's `--map`)."""
    return [f"{host}={address}" for host in [hostname, *load_hostnames(hostname, load_origins)]]


def manifest(hostname: str, address: str, *, name: str = "speedtest", seed: int = 1,
             bodies_dir: str = BODIES_DIR, queries: Sequence[str] = (),
             load_origins: int = LOAD_ORIGINS) -> dict[str, Any]:
    """The page's manifest: the page's origin with the three files as recorded bodies under
    `bodies_dir` (relative to the manifest's directory), sizes those of the files in this
    package; the page also at `/?<query>` for each of `queries` (URL-encoded query strings,
    without `?`); and `load_origins` load origins at the same address, without objects (the
    page uses the server's responsiveness endpoints there)."""
    _check_hostname(hostname)
    _check_address(address)
    if not 0 <= load_origins <= 64:
        raise ValueError(f"load_origins {load_origins}: 0 to 64 expected")
    for load in load_hostnames(hostname, load_origins):
        _check_hostname(load)
    for query in queries:
        _check_query(query)
    listed = [*PAGE_OBJECTS, *((f"/?{q}", "index.html", PAGE_OBJECTS[0][2], "/") for q in dict.fromkeys(queries))]
    objects = []
    for path, file, content_type, parent in listed:
        entry: dict[str, Any] = {
            "path": path, "origin": hostname, "size": (PAGE_DIR / file).stat().st_size,
            "content_type": content_type, "headers": {"cache-control": "no-store"}, "body": f"{bodies_dir}/{file}",
        }
        if parent is not None:
            entry["parent"] = parent
        objects.append(entry)
    origins = [{"hostname": host, "address": address} for host in [hostname, *load_hostnames(hostname, load_origins)]]
    return {"schema_version": 1, "name": name, "seed": seed, "origins": origins, "objects": objects}


def write_manifest(directory: Path, hostname: str, address: str, *, name: str = "speedtest",
                   queries: Sequence[str] = (), load_origins: int = LOAD_ORIGINS) -> Path:
    """Writes `speedtest.json` and its bodies (`speedtest.bodies/`) into `directory`, ready for
    `protolab-net serve --manifest`; returns the manifest's path."""
    directory = Path(directory)
    page = manifest(hostname, address, name=name, queries=queries, load_origins=load_origins)
    bodies = directory / BODIES_DIR
    bodies.mkdir(parents=True, exist_ok=True)
    for _, file, _, _ in PAGE_OBJECTS:
        shutil.copyfile(PAGE_DIR / file, bodies / file)
    target = directory / MANIFEST_FILE
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(page, indent=2) + "\n")
    tmp.replace(target)
    return target


def page_query(*, coordinator: str | None = None, autostart: bool = True,
               params: Mapping[str, Any] | None = None) -> str:
    """The page's parameters as a URL-encoded string: `coordinator` (an http(s) base URL),
    `autostart=1`, and the test's parameters (`max_duration_s`, `mps`, ... see speedtest.js)."""
    query: dict[str, Any] = {}
    if coordinator:
        query["coordinator"] = coordinator
    if autostart:
        query["autostart"] = "1"
    query.update(params or {})
    return urlencode(query)


def page_url(hostname: str, *, scheme: str = "https", coordinator: str | None = None, autostart: bool = True,
             params: Mapping[str, Any] | None = None) -> str:
    """The page's URL with its parameters (`page_query`) in the fragment, which the server
    never sees (it matches a path's query exactly)."""
    query = page_query(coordinator=coordinator, autostart=autostart, params=params)
    return f"{scheme}://{hostname}/" + (f"#{query}" if query else "")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m protolab.live.page",
                                description="Write the speed-test page's manifest (speedtest.json) and bodies.")
    p.add_argument("--hostname", required=True, help="the page's origin hostname")
    p.add_argument("--address", required=True, help="the IPv4 address protolab-net serve listens on for it")
    p.add_argument("--out", required=True, type=Path, help="directory to write into")
    p.add_argument("--name", default="speedtest")
    p.add_argument("--query", action="append", default=[],
                   help="also serve the page at /?QUERY (URL-encoded, e.g. coordinator=http%%3A%%2F%%2F10.77.1.1%%3A8090)")
    p.add_argument("--load-origins", type=int, default=LOAD_ORIGINS,
                   help="load origins load1.HOSTNAME .. loadN.HOSTNAME at the same address (default %(default)s)")
    p.add_argument("--coordinator", default=None,
                   help="also serve the page at /?coordinator=URL and /?coordinator=URL&autostart=1")
    a = p.parse_args(argv)
    queries = list(a.query)
    if a.coordinator:
        queries += [page_query(coordinator=a.coordinator, autostart=False), page_query(coordinator=a.coordinator)]
    try:
        target = write_manifest(a.out, a.hostname, a.address, name=a.name, queries=queries,
                                load_origins=a.load_origins)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(target)
    return 0
