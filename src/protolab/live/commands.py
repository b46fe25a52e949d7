"""`protolab live ...` (docs/live.md, "Analyses (003 ch. 7)"): `analyze` draws 003 ch. 7's
analyses of a live store into a page; `fleet` runs a lab fleet of wild-client tests (and, for a
share of them, the speed-test page in headless Chromium) with known truth into a store; `fleet-client` is the fleet's one test, run inside the lab's client host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from protolab.console import console

live_app = typer.Typer(help="Analyses of the live service's store and a lab fleet to test them on.",
                       no_args_is_help=True, rich_markup_mode=None)


@live_app.command("analyze")
def analyze_command(
    data: Annotated[Path, typer.Argument(help="The live store (serve-live's --data directory).", file_okay=False)],
    out: Annotated[Path | None, typer.Option("--out", file_okay=False,
                                             help="Where the page goes (default: DATA/analysis).")] = None,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Leave out (and list) tests that cannot be read, "
                                                              "instead of stopping at the first.")] = False,
) -> None:
    """003 ch. 7 (Figs. 7.1-7.9) from what the service stored, with 003's numbers beside ours and,
    for a lab fleet's tests, what each analysis recovered against the truth."""
    from protolab.live.analyze import load_store
    from protolab.live.page_report import write_page

    loaded = load_store(data, skip_bad=skip_bad)
    page = write_page(loaded, out or data / "analysis", str(data))
    console.print(f"{len(loaded.tests)} RPM tests analysed"
                  + (f", {len(loaded.skipped)} skipped" if loaded.skipped else "") + f": {page}")


@live_app.command("fleet")
def fleet_command(
    data: Annotated[Path, typer.Option("--data", file_okay=False, help="The store the fleet's coordinator writes "
                                                                      "(and DATA/fleet.jsonl, the truth).")],
    tests: Annotated[int, typer.Option("--tests", min=1, help="How many tests the design has.")] = 20,
    seed: Annotated[int, typer.Option("--seed", help="The design's seed (a resumed fleet needs the same).")] = 1,
    max_duration_s: Annotated[float, typer.Option("--max-duration-s", min=2.0,
                                                  help="protolab-net rpm's limit per direction.")] = 6.0,
    workdir: Annotated[Path | None, typer.Option("--workdir", file_okay=False,
                                                 help="Server files, qlogs, client outputs (default: DATA/fleet-work).")] = None,
    binary: Annotated[Path | None, typer.Option("--binary", help="protolab-net (default: $PROTOLAB_NET, the build).")] = None,
    event_log: Annotated[bool, typer.Option("--event-log", help="The emulator's event log per test, for the true loss "
                                                               "bursts (tens of MB per test while it runs).")] = False,
    page_share: Annotated[float, typer.Option(
        "--page-share", min=0.0, max=1.0,
        help="The share of tests (seeded, drawn on a stream of their own) that load the speed-test page in headless "
             "Chromium instead of running the CLI client; QUIC forced for a drawn h3, off for h2. A resumed fleet "
             "needs the same.")] = 0.0,
) -> None:
    """N RPM tests (the wild client, or the speed-test page in Chromium for --page-share of them)
    through access links drawn from a seeded design; resumable."""
    from protolab.live.fleet import CLI, PAGE, FleetSettings, run_fleet

    settings = FleetSettings(data, tests, seed, max_duration_s, binary, event_log, page_share=page_share)
    entries = run_fleet(settings, workdir or data / "fleet-work", say=console.print)
    for kind in (CLI, PAGE):
        walls = sorted(e["wall_s"] for e in entries if e.get("client", CLI) == kind)
        if walls:
            console.print(f"fleet: {len(walls)} {kind} tests in {data}; wall time per test {walls[len(walls) // 2]:.0f} s "
                          f"median ({walls[0]:.0f}-{walls[-1]:.0f} s)")


@live_app.command("fleet-client", hidden=True)
def fleet_client_command(
    coordinator: Annotated[str, typer.Option("--coordinator")],
    server: Annotated[str, typer.Option("--server")],
    host: Annotated[str, typer.Option("--host")],
    ca: Annotated[Path, typer.Option("--ca")],
    protocol: Annotated[str, typer.Option("--protocol")],
    user_agent: Annotated[str, typer.Option("--user-agent")],
    index: Annotated[int, typer.Option("--index")],
    max_duration_s: Annotated[float, typer.Option("--max-duration-s")],
    out: Annotated[Path, typer.Option("--out")],
    binary: Annotated[Path, typer.Option("--binary")],
) -> None:
    """One fleet test (in the lab's client host): a token whose metadata carries the test's
    user agent and fleet index, an RPM test in both directions, its upload; the answer on stdout."""
    from protolab.live.fleet import FLEET_CLIENT
    from protolab.live.measure import Coordinator, RpmRun, host_metadata

    api = Coordinator(coordinator)
    metadata = {**host_metadata(), "client": FLEET_CLIENT, "user_agent": user_agent, "fleet_index": index,
                "protocol": protocol, "test": "rpm"}
    token = api.token(metadata, wait_s=60)
    out.mkdir(parents=True, exist_ok=True)
    result = RpmRun(binary, server, host, ca=ca, direction="both", max_duration_s=max_duration_s).run(protocol, out)
    answer = api.upload(token, result)
    print(json.dumps({**answer, "token": token}))
