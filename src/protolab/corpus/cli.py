"""`protolab corpus ...`: list, build, generate and import page manifests (docs/corpus.md).

Errors are CorpusError (a ProtolabError); the main app's error boundary prints them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from protolab.console import console
from protolab.corpus.build import TYPES
from protolab.corpus.errors import CorpusError
from protolab.corpus.manifest import load_manifest, write_manifests

corpus_app = typer.Typer(name="corpus", help="Page manifests: Table I replicas, generated corpora, HAR import, recording.",
                         no_args_is_help=True, add_completion=False, rich_markup_mode=None)

SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the page model and of the bodies.", min=0)]


@corpus_app.command("list")
def list_sites() -> None:
    """The 15 pages of 001 Table I: objects per type, size, origins."""
    from protolab.corpus.build import AddressPlan
    from protolab.corpus.table1 import DEFAULT_NETWORK, DEMO_PAGES, SITES

    plan = AddressPlan.parse(DEFAULT_NETWORK)
    table = Table(title="001 Table I pages", box=box.SIMPLE_HEAD,
                  caption="size in kB of 1000 B; * = demo page")
    table.add_column("site", justify="left")
    for column in (*TYPES, "objects", "size kB", "origins", "addresses"):
        table.add_column(column, justify="right")
    for site in SITES.values():
        first = plan.address(site.index, 0)
        addresses = first if site.origins == 1 else f"{first}-{site.origins}"
        mark = "*" if site.name in DEMO_PAGES else ""
        table.add_row(f"{site.name}{mark}", *(str(site.counts[t]) for t in TYPES), str(site.objects),
                      str(site.size_kb), str(site.origins), addresses)
    console.print(table)


@corpus_app.command("build")
def build(
    name: Annotated[str, typer.Argument(help="Site of Table I, or 'all', or 'demo' (the five demo pages).")],
    out: Annotated[Path, typer.Option("--out", help="Directory for <name>.json.")],
    seed: SeedOption = 1,
    network: Annotated[str, typer.Option("--network", help="IPv4 network of the origin addresses "
                                         "(page i, origin k -> host i*256+k+1).")] = "10.99.0.0/16",
) -> None:
    """Write the manifest of a Table I page (or all of them)."""
    from protolab.corpus.build import AddressPlan
    from protolab.corpus.table1 import DEMO_PAGES, SITES, get_site, site_manifest

    plan = AddressPlan.parse(network)
    names = {"all": tuple(SITES), "demo": DEMO_PAGES}.get(name) or (get_site(name).name,)
    manifests = {out / f"{n}.json": site_manifest(n, seed, plan) for n in names}
    write_manifests(manifests)
    for path, manifest in manifests.items():
        total = sum(o["size"] for o in manifest["objects"])
        console.print(f"wrote {escape(str(path))}: {len(manifest['objects'])} objects, {total} bytes, "
                      f"{len(manifest['origins'])} origins")


@corpus_app.command("generate")
def generate(
    pages: Annotated[int, typer.Option("--pages", help="Number of pages.", min=1)],
    out: Annotated[Path, typer.Option("--out", help="Directory for page-NNN.json.")],
    seed: SeedOption = 1,
    network: Annotated[str, typer.Option("--network", help="IPv4 network of the origin addresses "
                                         "(page i, origin k -> host i*256+k+1).")] = "10.128.0.0/9",
) -> None:
    """Write a corpus shaped like 002 Table 4.1 (objects, sizes, server addresses)."""
    import statistics

    from protolab.corpus.generate import generate_corpus

    corpus = generate_corpus(pages, seed, network)
    write_manifests({out / f"{p.shape.name}.json": p.manifest for p in corpus})
    table = Table(title=f"{pages} pages in {escape(str(out))}", box=box.SIMPLE_HEAD)
    for column in ("", "min", "median", "max"):
        table.add_column(column, justify="right")
    rows = {
        "server addresses": [len(p.manifest["origins"]) for p in corpus],
        "objects": [len(p.manifest["objects"]) for p in corpus],
        "object size (B)": [o["size"] for p in corpus for o in p.manifest["objects"]],
        "page size (B)": [p.shape.total_bytes for p in corpus],
    }
    for label, values in rows.items():
        table.add_row(label, str(min(values)), f"{statistics.median(values):.10g}", str(max(values)))
    console.print(table)


@corpus_app.command("import-har")
def import_har(
    file: Annotated[Path, typer.Argument(help="HAR 1.2 file (Chrome DevTools or Playwright export).")],
    out: Annotated[Path, typer.Option("--out", help="Manifest file to write.")],
    name: Annotated[str | None, typer.Option("--name", help="Page name (default: the file's stem).")] = None,
    seed: SeedOption = 1,
    network: Annotated[str, typer.Option("--network", help="IPv4 network for origins without a usable "
                                         "IPv4 serverIPAddress.")] = "10.98.0.0/16",
) -> None:
    """Convert a HAR to a manifest; skipped entries and warnings are reported."""
    from protolab.corpus.har import import_har_file

    result = import_har_file(file, name=name, seed=seed, network=network)
    write_manifests({out: result.manifest})
    manifest = result.manifest
    total = sum(o["size"] for o in manifest["objects"])
    console.print(f"wrote {escape(str(out))}: {result.kept} of {result.entries} entries as objects, "
                  f"{total} bytes, {len(manifest['origins'])} origins")
    _report_import(result)


def _report_import(result: object) -> None:
    from protolab.corpus.har import HarImport

    assert isinstance(result, HarImport)
    for how, count in sorted(result.parents.items()):
        console.print(f"  parent from {how}: {count}")
    for reason, count in sorted(result.skipped.items()):
        console.print(f"  skipped {count}: {reason}")
    for warning in result.warnings:
        console.print(f"  [yellow]warning:[/] {escape(warning)}")


@corpus_app.command("record")
def record(
    url: Annotated[str, typer.Argument(help="The page to record (http or https).")],
    out: Annotated[Path, typer.Option("--out", help="Directory for NAME.json, NAME.bodies/ and NAME.record.json.")],
    name: Annotated[str, typer.Option("--name", help="Page name.")] = "recorded",
    maps: Annotated[list[str] | None, typer.Option("--map", help="HOST=ADDRESS: resolve HOST to ADDRESS "
                                                   "(Chromium's host resolver rules; repeatable).")] = None,
    spki: Annotated[str | None, typer.Option("--spki", help="Trust certificates with these SPKI hashes "
                                             "(comma-separated), e.g. a local test server's.")] = None,
    network: Annotated[str, typer.Option("--network", help="IPv4 network for origins without a usable "
                                         "IPv4 server address.")] = "10.98.0.0/16",
    timeout_s: Annotated[float, typer.Option("--timeout-s", help="Give up if the page has not loaded.", min=1)] = 60.0,
    settle_ms: Annotated[int, typer.Option("--settle-ms", help="Keep recording this long after the load event.",
                                           min=0)] = 1000,
    chromium: Annotated[str, typer.Option("--chromium", help="The browser.")] = "/usr/bin/chromium",
) -> None:
    """Record a page with headless Chromium: every response's body and headers, and the tree."""
    from protolab.corpus.record import record as run_record

    result = run_record(url, out, name, maps=maps or [], spki=spki, network=network, timeout_s=timeout_s,
                        settle_s=settle_ms / 1000.0, chromium=chromium)
    manifest = result.imported.manifest
    console.print(f"wrote {escape(str(result.manifest_file))}: {result.imported.kept} of {result.imported.entries} "
                  f"responses as objects, {result.bodies} recorded bodies ({result.body_bytes} bytes), "
                  f"{len(manifest['origins'])} origins; the recording in {escape(str(result.record_file))}")
    _report_import(result.imported)


@corpus_app.command("validate")
def validate(files: Annotated[list[Path], typer.Argument(help="Manifest files.")]) -> None:
    """Check manifests against docs/manifest.md."""
    for file in files:
        manifest = load_manifest(file)
        console.print(f"{escape(str(file))}: ok ({len(manifest.objects)} objects, {manifest.total_size()} bytes)")


__all__ = ["CorpusError", "corpus_app"]
