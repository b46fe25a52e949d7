"""The NAT corpus (`protolab traffic nat-corpus`; docs/traffic.md, "NAT"): page loads of generated
pages by several emulated clients at once, four of them behind one NAT gateway
(protolab.lab.nat) and two with addresses of their own, captured at the server, each flow
labelled with its real client. The clients' stacks differ as devices' do (`CLIENTS`: Linux,
Windows-, macOS-like, via sysctls). Truth: the gateway's conntrack table (public port -> the
client's private address) for the flows behind the NAT, the address for the others. The
corpus is what protolab.traffic.nat is measured on: session precision/recall per real client
with and without the NAT handling (`protolab reproduce 000-s4.2.3`)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from protolab.corpus.generate import generated_page
from protolab.errors import ProtolabError
from protolab.files import write_text_atomically
from protolab.lab.binary import find_binary
from protolab.lab.events import NotReady, await_event
from protolab.lab.lab import Lab
from protolab.lab.nat import OS_PROFILES, Mapping4, NatClient, NatSite
from protolab.lab.topology import dumbbell, host, link, mbps_to_bps, ms_to_ns, path
from protolab.results.generated.event_listening import Listening
from protolab.store import ResultsStore
from protolab.traffic.nat import evaluate, nat_flows

NAT_CORPUS_SCHEMA = "protolab.traffic.nat-corpus"
NAT_CORPUS_SCHEMA_VERSION = 1
MODES = ("h1", "h2", "h2-parallel:2", "h3")
PAGES = ("page-001", "page-002", "page-003", "page-004")
GATEWAY = "gw"
SERVER = "server"
SERVER_READY_TIMEOUT_S = 30.0
LOAD_TIMEOUT_S = 60.0
# The bottleneck every client shares (between the clients and the capture at the server).
RATE_MBPS = 50.0
RTT_MS = 20.0
# How long after a round's start its clients begin, at most (spread: overlapping, not aligned).
START_SPREAD_S = 3.0


@dataclass(frozen=True)
class CorpusClient:
    name: str
    profile: str  # a key of OS_PROFILES
    behind_nat: bool


CLIENTS = (
    CorpusClient("a", "linux", True),
    CorpusClient("b", "windows", True),
    CorpusClient("c", "macos", True),
    CorpusClient("e", "linux", True),  # a second Linux: told apart from a only by its clock
    CorpusClient("direct", "linux", False),
    CorpusClient("direct2", "windows", False),
)


class NatCorpusError(ProtolabError):
    """The NAT corpus could not be made (lab, server, loads or flow extraction)."""


def _topology(lab: str, server_addresses: list[str], rate_mbps: float, rtt_ms: float) -> dict[str, Any]:
    left = [host(GATEWAY, "left", ["10.77.0.1"])]
    left += [host(c.name, "left", [f"10.77.0.{i + 2}"], sysctls=OS_PROFILES[c.profile])
             for i, c in enumerate(c for c in CLIENTS if not c.behind_nat)]
    direction = link(rate_bps=mbps_to_bps(rate_mbps), delay_ns=ms_to_ns(rtt_ms / 2))
    return dumbbell(lab, left, [host(SERVER, "right", server_addresses)], [path("p0", direction, direction)])


def _pages(out: Path, names: Sequence[str], seed: int) -> list[Path]:
    """The generated pages (`page-001`, ...; docs/corpus.md) as manifest files under OUT/pages."""
    pages_dir = out / "pages"
    pages_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for name in names:
        target = pages_dir / f"{name}.json"
        write_text_atomically(target, json.dumps(generated_page(name, seed), indent=2))
        files.append(target.resolve())
    return files


def _start_server(lab: Lab, binary: Path, pages: list[Path], work: Path) -> Path:
    argv: list[str | Path] = [binary, "serve", "--tls-dir", work / "tls", "--lab", lab.name or "lab"]
    for page in pages:
        argv += ["--manifest", page]
    stdout, stderr = work / "serve.stdout", work / "serve.stderr"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = lab.spawn(SERVER, argv, stdout=out, stderr=err)
    try:
        await_event(process, stdout, Listening, lambda line: line.get("event") == "listening", SERVER_READY_TIMEOUT_S)
    except NotReady:
        raise NatCorpusError(f"protolab-net serve did not listen: {stderr.read_text(errors='replace')[-800:]}") from None
    return work / "tls" / "ca.pem"


@dataclass
class Round:
    """One round: what each client loaded, and when the round ran (Unix ns)."""

    index: int
    loads: list[dict[str, Any]]
    start_ns: int = 0
    end_ns: int = 0
    mappings: list[Mapping4] = field(default_factory=list)

    @property
    def run_key(self) -> str:
        return f"nat-r{self.index:03d}"


def _round(lab: Lab, binary: Path, ca: Path, pages: list[Path], modes: tuple[str, ...], rng: random.Random,
           out: Path, index: int) -> Round:
    """Every client loads a page in a mode, starting at a random moment of the spread."""
    plan = [{"client": c.name, "page": rng.choice(pages).stem, "mode": rng.choice(modes),
             "delay_s": round(rng.uniform(0.0, START_SPREAD_S), 3)} for c in CLIENTS]

    def load(entry: dict[str, Any]) -> None:
        time.sleep(entry["delay_s"])
        result = out / "loads" / f"r{index:03d}-{entry['client']}.json"
        argv = [binary, "load", "--manifest", out / "pages" / f"{entry['page']}.json", "--mode", entry["mode"],
                "--ca", ca, "--out", result, "--timeout-ms", str(int(LOAD_TIMEOUT_S * 1000))]
        done = lab.run(entry["client"], argv, timeout=LOAD_TIMEOUT_S + 15, check=False)
        entry["ok"] = done.returncode == 0
        entry["result"] = str(result)

    started = time.time_ns()
    threads = [threading.Thread(target=load, args=(entry,)) for entry in plan]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Round(index, plan, started, time.time_ns())


def truth_rows(rounds: list[Round], addresses: dict[str, str], public_address: str) -> list[list[Any]]:
    """Per connection of every load: the round, its client, whether behind the NAT, the 5-tuple
    the server saw (the NAT's public port from the gateway's conntrack) and its protocol."""
    behind = {c.name for c in CLIENTS if c.behind_nat}
    rows = []
    for r in rounds:
        public = {(m.transport, m.private_ip, m.private_port, m.server_ip, m.server_port): m.public_port
                  for m in r.mappings}
        for entry in r.loads:
            path = Path(entry.get("result", ""))
            if not path.is_file():
                continue
            for conn in json.loads(path.read_text()).get("connections", []):
                local, remote = conn.get("local"), conn.get("remote")
                if not local or not remote:
                    continue
                (lip, _, lport), (sip, _, sport) = local.rpartition(":"), remote.rpartition(":")
                transport = "udp" if conn.get("transport") == "quic" else "tcp"
                client = entry["client"]
                if client in behind:
                    port = public.get((transport, lip, int(lport), sip, int(sport)))
                    ip = public_address
                else:
                    port, ip = int(lport), addresses[client]
                if port is None:
                    continue
                rows.append([r.run_key, r.start_ns, r.end_ns, client, client in behind, transport, ip, port, sip,
                             int(sport), conn.get("protocol"), conn.get("transport")])
    return rows


def _label(binary: Path, pcap: Path, out: Path, truth: list[list[Any]], experiment_id: str) -> tuple[Path, dict[str, int]]:
    """The server capture's flows, each with its round (`run_key`), real client and protocol
    from the truth (Parquet, in the store's `flows` columns)."""
    import duckdb

    raw = out / "server-flows.parquet"
    done = subprocess.run([str(binary), "flows", str(pcap), "--out", str(raw), "--format", "parquet"],
                          capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise NatCorpusError(f"{pcap}: protolab-net flows exited with status {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()[-800:]}")
    con = duckdb.connect()
    con.execute("CREATE TABLE truth (run_key VARCHAR, start_ns BIGINT, end_ns BIGINT, real_client VARCHAR, "
                "behind_nat BOOLEAN, transport VARCHAR, client_ip VARCHAR, client_port INTEGER, server_ip VARCHAR, "
                "server_port INTEGER, truth_protocol VARCHAR, truth_transport VARCHAR)")
    con.executemany("INSERT INTO truth VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", truth)
    target = out / "nat-flows.parquet"
    # A flow is its connection if the 5-tuple matches and it began within its round (a second of
    # slack on either side: the capture's clock is the emulator's, the round's this process's).
    con.execute(f"""
        COPY (
            SELECT '{experiment_id}' AS experiment_id, coalesce(t.run_key, 'nat-unmatched') AS run_key,
                   f.* EXCLUDE (protocol), f.protocol AS handshake_protocol,
                   CASE t.truth_protocol WHEN 'h1c' THEN 'h1' ELSE t.truth_protocol END AS protocol,
                   t.truth_protocol, t.truth_transport, t.real_client, t.behind_nat
            FROM read_parquet('{raw}') f
            LEFT JOIN truth t ON t.transport = f.transport AND t.client_ip = f.client_ip
                AND t.client_port = f.client_port AND t.server_ip = f.server_ip AND t.server_port = f.server_port
                AND f.first_ns BETWEEN t.start_ns - 1000000000 AND t.end_ns + 1000000000
            ORDER BY f.first_ns
        ) TO '{target}' (FORMAT PARQUET)""")
    counts = dict(con.execute(f"SELECT coalesce(real_client, 'unlabelled'), count(*) FROM read_parquet('{target}') "
                              "GROUP BY 1 ORDER BY 1").fetchall())
    con.close()
    raw.unlink(missing_ok=True)
    return target, counts


def build_nat_corpus(out: Path, binary: Path, *, rounds: int = 8, pages: Sequence[str] = PAGES,
                     modes: Sequence[str] = MODES, seed: int = 1, rate_mbps: float = RATE_MBPS,
                     rtt_ms: float = RTT_MS, experiment_id: str = "nat-corpus", lab_name: str = "natcorpus",
                     record: bool = True, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Runs the lab; writes OUT/nat-flows.parquet (every flow of the server's capture with its
    round, real client and protocol) and, with `record`, puts it in OUT's results store (table
    `flows`, experiment `experiment_id`); OUT/nat-flows.parquet.json holds the loads, the labels
    and the evaluation of protolab.traffic.nat on the corpus. Returns that summary."""
    say = progress or (lambda _line: None)
    rng = random.Random(f"protolab/nat-corpus/{seed}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "loads").mkdir(exist_ok=True)
    page_files = _pages(out, pages, seed)
    origins = sorted({o["address"] for p in page_files for o in json.loads(p.read_text())["origins"]})
    started = time.monotonic()
    work = out / "server"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    done: list[Round] = []
    with Lab(_topology(lab_name, origins, rate_mbps, rtt_ms), binary=binary) as lab:
        ca = _start_server(lab, binary, page_files, work)
        nat_clients = [NatClient(c.name, OS_PROFILES[c.profile]) for c in CLIENTS if c.behind_nat]
        with NatSite(lab, GATEWAY, nat_clients) as site:
            addresses = {c.name: site.address(c.name) if c.behind_nat else lab.address(c.name) for c in CLIENTS}
            pcap = (out / "server.pcap").resolve()
            lab.pcap_start(SERVER, pcap)
            for index in range(rounds):
                say(f"round {index + 1}/{rounds}")
                this = _round(lab, binary, ca, page_files, tuple(modes), rng, out, index)
                this.mappings = site.mappings()
                done.append(this)
            lab.await_quiet(within=30.0)
            captured = lab.pcap_stop(SERVER)
            public = lab.address(GATEWAY)
    target, counts = _label(binary, pcap, out, truth_rows(done, addresses, public), experiment_id)
    stored = None
    if record:
        with ResultsStore(out) as store:
            stored = store.replace_flows(target)
    summary = _summary(target, counts, done, captured, seed, time.monotonic() - started)
    summary["stored_flows"] = stored
    write_text_atomically(out / "nat-flows.parquet.json", json.dumps(summary, indent=2))
    return summary


def evaluate_corpus(flows_file: Path, **options: Any) -> dict[str, Any]:
    """protolab.traffic.nat.evaluate on a NAT corpus file (its labelled flows)."""
    import duckdb

    con = duckdb.connect()
    try:
        cursor = con.execute(f"SELECT * FROM read_parquet('{flows_file}') WHERE real_client IS NOT NULL "
                             "ORDER BY first_ns")
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    except duckdb.Error as exc:
        raise NatCorpusError(f"{flows_file}: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    for i, row in enumerate(rows):
        # Sessions are keyed by what a passive observer sees: the handshake's protocol.
        row["row"], row["protocol"] = i, row["handshake_protocol"]
    flows = nat_flows(rows)
    truth = {i: str(row["real_client"]) for i, row in enumerate(rows)}
    result = evaluate(flows, truth, **options)
    result["nat_clients"] = sorted({str(r["real_client"]) for r in rows if r["behind_nat"]})
    return result


def _summary(target: Path, counts: dict[str, int], rounds: list[Round], captured: dict[str, Any], seed: int,
             wall_s: float) -> dict[str, Any]:
    loads = [{"round": r.index, **{k: v for k, v in entry.items() if k != "result"}} for r in rounds for entry in r.loads]
    return {
        "schema": NAT_CORPUS_SCHEMA, "schema_version": NAT_CORPUS_SCHEMA_VERSION, "out": str(target),
        "rounds": len(rounds), "seed": seed, "wall_s": round(wall_s, 1),
        "clients": [{"name": c.name, "profile": c.profile, "behind_nat": c.behind_nat} for c in CLIENTS],
        "loads": loads, "loads_ok": sum(bool(entry.get("ok")) for entry in loads), "packets": captured.get("packets"),
        "flows_per_client": counts,
        "evaluation": evaluate_corpus(target),
    }


def register(app: typer.Typer) -> None:
    """Adds `nat-corpus` to the `protolab traffic` command group."""
    console, errors = Console(), Console(stderr=True)

    @app.command("nat-corpus")
    def nat_corpus_command(
        out: Annotated[Path, typer.Argument(help="Directory for the corpus (nat-flows.parquet and its .json).")],
        rounds: Annotated[int, typer.Option(help="Rounds: every client loads one page per round.", min=1)] = 8,
        pages: Annotated[int, typer.Option(help="Generated pages to load from (page-001...).", min=1, max=99)] = 4,
        seed: Annotated[int, typer.Option(help="Seed of the pages and the clients' choices.")] = 1,
        binary: Annotated[Path | None, typer.Option("--binary", help="protolab-net to use.")] = None,
    ) -> None:
        """Clients behind a NAT and beside it load generated pages at once; the server's capture,
        each flow labelled with its real client, and the NAT-aware detection measured on it."""
        try:
            names = [f"page-{i:03d}" for i in range(1, pages + 1)]
            summary = build_nat_corpus(out, find_binary(binary), rounds=rounds, pages=names, seed=seed,
                                       progress=lambda line: errors.print(line, style="dim"))
        except ProtolabError as exc:
            errors.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        result = summary["evaluation"]
        console.print(f"{summary['loads_ok']}/{len(summary['loads'])} loads ok; flows per client: "
                      f"{summary['flows_per_client']}")
        for name in ("without", "with"):
            part = result[name]
            console.print(f"{name} NAT handling: session precision {part['precision']:.3f}, recall {part['recall']:.3f}, "
                          f"parallel share {part['parallel_share']:.3f} (truth {result['true_parallel_share']:.3f})")
        console.print(f"wrote {escape(str(summary['out']))} and its .json")
