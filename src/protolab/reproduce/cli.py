"""`protolab reproduce FIGURE`: run a seed figure's spec (or its `--quick` variant), judge the
seed's claims on the results, print the paper's numbers beside ours with a verdict per claim,
and write RESULTS/reproduce.json."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from protolab import __version__
from protolab.console import console
from protolab.errors import ProtolabError
from protolab.files import write_text_atomically
from protolab.plan.experiment import Experiment, read_spec_data, spec_from_dict
from protolab.reproduce import shared_corpus
from protolab.reproduce.adaptive import Round, at_budget, needed_runs, run_adaptively
from protolab.reproduce.claims import (
    INCONCLUSIVE,
    INCONCLUSIVE_AT_BUDGET,
    NO_DATA,
    NOT_JUDGEABLE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Verdict,
    format_number,
)
from protolab.reproduce.data import recorded_repetitions, rows_of
from protolab.reproduce.figures import FIGURES, REGISTRY, Figure, merged
from protolab.reproduce.figures.base import claims_label
from protolab.run.cli import (
    REPO_ROOT,
    BinaryOption,
    LabOption,
    RetryFailedOption,
    dry_run,
    execute,
)
from protolab.run.runner import plan
from protolab.store import ResultsStore

SPECS_DIR = REPO_ROOT / "specs"
SCHEMA = "protolab.reproduce"
SCHEMA_VERSION = 2  # 2: a claim's reason and CI method, "inconclusive at budget", the adaptive rounds
VERDICT_STYLE = {REPRODUCED: "green", NOT_REPRODUCED: "bold red", INCONCLUSIVE: "yellow",
                 INCONCLUSIVE_AT_BUDGET: "bold yellow", NO_DATA: "dim", NOT_JUDGEABLE: "dim"}


def figure_named(name: str) -> Figure:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ProtolabError(f"no figure {name!r}; known: {', '.join(REGISTRY)} (protolab reproduce --list)") from None


def spec_data_of(figure: Figure, quick: bool, specs_dir: Path = SPECS_DIR) -> dict[str, Any]:
    """The figure's spec as data, with its quick overrides merged in when asked."""
    return _spec_data(figure, figure.spec, quick, specs_dir)


def _spec_data(figure: Figure, spec: str, quick: bool, specs_dir: Path) -> dict[str, Any]:
    data = read_spec_data(specs_dir / spec)
    return merged(data, figure.quick) if quick else data


def experiment_of(figure: Figure, quick: bool, specs_dir: Path = SPECS_DIR, repetitions: int | None = None) -> Experiment:
    """The figure's spec, with its quick overrides merged in when asked (and `repetitions`, when
    given, in place of the spec's: an adaptive round)."""
    return _experiment_from(figure, figure.spec, quick, specs_dir, repetitions)


def companion_experiments(figure: Figure, quick: bool, specs_dir: Path = SPECS_DIR,
                          repetitions: int | None = None) -> list[Experiment]:
    """The figure's companion specs (Figure.companions), with its quick overrides and repetitions."""
    return [_experiment_from(figure, spec, quick, specs_dir, repetitions) for spec in figure.companions]


def _experiment_from(figure: Figure, spec: str, quick: bool, specs_dir: Path, repetitions: int | None) -> Experiment:
    data = _spec_data(figure, spec, quick, specs_dir)
    if repetitions is not None:
        data = merged(data, {"repetitions": repetitions})
    return spec_from_dict(data, source=f"{spec}{' (quick)' if quick else ''}", path=specs_dir / spec)


def run_counts(results_dir: Path, experiment_id: str, companions: tuple[str, ...] = ()) -> dict[str, Any]:
    """The experiment's runs in the store (and its companions'): ok, failed (or timed out), and
    their summed duration (s)."""
    ids = [experiment_id, *companions]
    marks = ", ".join("?" for _ in ids)
    with ResultsStore(results_dir, read_only=True) as store:
        row = store.query("SELECT count(*) FILTER (WHERE status = 'ok') AS ok, count(*) FILTER (WHERE status <> 'ok') "
                          f"AS failed, sum(duration_s) AS duration_s FROM runs WHERE experiment_id IN ({marks})", ids)[0]
    return {"ok": int(row["ok"] or 0), "failed": int(row["failed"] or 0), "duration_s": row["duration_s"]}


def companion_names(figure: Figure, specs_dir: Path = SPECS_DIR) -> tuple[str, ...]:
    """The experiment names of the figure's companion specs (their rows' `experiment` tag)."""
    return tuple(str(read_spec_data(specs_dir / spec)["name"]) for spec in figure.companions)


def figure_rows(store: ResultsStore, figure: Figure, experiment_id: str,
                companions: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The rows the figure's claims read: its experiment's and, with companions, theirs too,
    each row tagged with the experiment it came from (`experiment`)."""
    if not companions:
        return rows_of(store, figure.source, experiment_id)
    return [{**row, "experiment": name} for name in (experiment_id, *companions)
            for row in rows_of(store, figure.source, name)]


def judge(figure: Figure, results_dir: Path, experiment_id: str, budget: int = 0) -> tuple[list[Verdict], int]:
    """The verdict on every claim, from the runs in the store; (verdicts, rows judged). With a
    `budget`, a claim still inconclusive after a run that reached it is "inconclusive at budget"
    (what --evaluate-only says after an adaptive run)."""
    if not (results_dir / "results.duckdb").exists():
        raise ProtolabError(f"{results_dir}: no results.duckdb to judge (run without --evaluate-only first)")
    with ResultsStore(results_dir, read_only=True) as store:
        rows = figure_rows(store, figure, experiment_id, companion_names(figure))
        repetitions = recorded_repetitions(store, experiment_id)
    verdicts = [claim.check(rows) for claim in figure.claims]
    if budget > 0 and repetitions is not None and repetitions >= budget:
        verdicts = at_budget(verdicts, repetitions)
    return verdicts, len(rows)


def verdict_document(figure: Figure, quick: bool, experiment: Experiment, verdicts: list[Verdict], rows: int,
                     rounds: list[Round] | None = None, budget: int = 0, runs: dict[str, Any] | None = None,
                     wall_time_s: float | None = None) -> dict[str, Any]:
    """reproduce.json; `rounds` the adaptive rounds, `runs` as run_counts gives them, `wall_time_s`
    the command's time on the figure, running and judging (--evaluate-only: `keep_earlier_rounds`)."""
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "protolab_version": __version__,
        "figure": {"id": figure.id, "title": figure.title, "seed": figure.seed, "spec": figure.spec, "note": figure.note,
                   "companions": list(figure.companions)},
        "quick": quick,
        "quick_overrides": figure.quick if quick else {},
        "experiment": experiment.name,
        "rows": rows,
        "paper": [{"what": what, "value": value} for what, value in figure.paper],
        "claims": [v.to_dict() for v in verdicts],
        "reproduced": sum(v.outcome == REPRODUCED for v in verdicts),
        "inconclusive_at_budget": sum(v.outcome == INCONCLUSIVE_AT_BUDGET for v in verdicts),
        "budget": budget,
        "rounds": [r.to_dict() for r in rounds or []],
        "runs": runs or {},
        "wall_time_s": wall_time_s,
    }


def verdict_table(figure: Figure, verdicts: list[Verdict]) -> Table:
    table = Table(title=f"{figure.id}: {figure.title} ({figure.seed})", box=box.SIMPLE_HEAD)
    for column, justify in [("claim", "left"), ("paper", "left"), ("expected", "right"), ("ours [95% CI]", "right"),
                            ("n", "right"), ("verdict", "left"), ("why", "left")]:
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for v in verdicts:
        e = v.estimate
        interval = f"[{format_number(e.low)}, {format_number(e.high)}]" if e is not None and e.has_interval else "[no CI]"
        ours = "-" if e is None else f"{format_number(e.value)} {interval}"
        style = VERDICT_STYLE.get(v.outcome, "")
        table.add_row(escape(v.claim.attributed()), escape(v.claim.paper), v.claim.expected(), escape(ours),
                      "-" if e is None else str(e.n), f"[{style}]{v.label()}[/]", escape(v.reason))
    return table


def planned_runs(figure: Figure, quick: bool) -> int:
    """The runs a figure makes: the spec's plan, or the NAT corpus' page loads (rounds x clients)."""
    experiment = experiment_of(figure, quick)
    if figure.after_run == "nat-corpus":
        from protolab.traffic.nat_corpus import CLIENTS

        return experiment.spec.repetitions * len(CLIENTS)
    return len(plan(experiment))


def list_table() -> Table:
    """Figure, seed, spec, claims and runs (quick / full); the title on a line of its own.
    Entries that cannot run here say why, and which entry answers the same question."""
    table = Table(box=box.SIMPLE_HEAD)
    for column, justify in [("figure", "left"), ("seed / what", "left"), ("spec", "left"), ("claims", "right"),
                            ("runs quick/full", "right")]:
        table.add_column(column, justify=justify, no_wrap=column == "figure")  # type: ignore[arg-type]
    for figure in FIGURES:
        what = f"{figure.seed}: {figure.title}"
        if figure.not_runnable:
            instead = f"; instead: {figure.substitute}" if figure.substitute else ""
            table.add_row(figure.id, escape(f"{what}\nnot runnable here: {figure.not_runnable}{instead}"), "-",
                          claims_label(figure), "[dim]not runnable[/]")
            continue
        quick, full = (planned_runs(figure, q) for q in (True, False))
        table.add_row(figure.id, escape(what), figure.spec, claims_label(figure), f"{quick}/{full}")
    return table


def run_round(figure: Figure, quick: bool, repetitions: int, claims: list[Claim] | None, results_dir: Path,
              binary: Path | None, lab: str | None, retry_failed_before: datetime | None = None) -> None:
    """One round of adaptive repetitions: the spec at `repetitions`, only the cells the
    undecided `claims` read (None: every cell). `retry_failed_before` (UTC, the invocation's
    start) runs the runs that failed before it again, in every round: a later round's cells
    hold earlier failures too, and a run failing in this invocation is not retried at once."""
    experiment = experiment_of(figure, quick, repetitions=repetitions)
    if figure.after_run == "nat-corpus":
        build_nat_corpus(experiment, results_dir, binary, lab)
        return
    needed = None if claims is None else needed_runs(claims, plan(experiment))
    retry = {"retry_failed": retry_failed_before is not None, "failed_since": retry_failed_before}
    execute(experiment, results_dir, console, binary=binary, lab=lab, needed=needed, **retry)
    for companion in companion_experiments(figure, quick, repetitions=repetitions):
        # Every cell: the claims' filters name the experiment, which no planned run carries.
        execute(companion, results_dir, console, binary=binary, lab=lab, needed=None, **retry)
    if figure.after_run == "corpus":
        build_flow_corpus(results_dir, binary)


def build_flow_corpus(results_dir: Path, binary: Path | None) -> None:
    """The labelled flows of every captured run into RESULTS/flows.parquet and the store (what
    the passive figures analyse; the same as `protolab traffic corpus RESULTS`), unless they
    were built from the same captures already (shared_corpus.corpus_fingerprint)."""
    from protolab.lab.binary import find_binary
    from protolab.traffic.corpus import binary_stamp, build_corpus

    extractor = find_binary(binary)
    fingerprint = shared_corpus.corpus_fingerprint(results_dir, binary_stamp(extractor))
    if shared_corpus.corpus_is_current(results_dir, fingerprint):
        console.print(f"corpus: {escape(str(results_dir / 'flows.parquet'))} is up to date (same captures)")
        return
    summary = build_corpus(results_dir, results_dir / "flows.parquet", extractor)
    write_text_atomically(results_dir / shared_corpus.FINGERPRINT_FILE, fingerprint)
    balance = ", ".join(f"{label} {count}" for label, count in summary["class_balance"].items())
    console.print(f"corpus: {summary['runs']} runs, {summary['flows']} flows, {summary['labelled_flows']} "
                  f"labelled ({escape(balance)})")


def build_nat_corpus(experiment: Experiment, results_dir: Path, binary: Path | None, lab: str | None) -> None:
    """The NAT corpus into RESULTS (its flows into the store) instead of the spec's runs: the
    spec gives its pages, modes, link, seed and, as repetitions, its rounds (docs/traffic.md, "NAT")."""
    from protolab.lab.binary import find_binary
    from protolab.traffic.nat_corpus import build_nat_corpus as build

    axes = experiment.axes
    summary = build(results_dir, find_binary(binary), rounds=experiment.spec.repetitions, pages=axes["page"],
                    modes=axes["mode"], seed=experiment.spec.seed, rate_mbps=axes["bandwidth_mbps"][0],
                    rtt_ms=axes["rtt_ms"][0], experiment_id=experiment.name, lab_name=lab or "natcorpus",
                    progress=lambda line: console.print(escape(line), style="dim"))
    console.print(f"NAT corpus: {summary['loads_ok']}/{len(summary['loads'])} loads ok, flows per client "
                  f"{escape(str(summary['flows_per_client']))}")


def keep_earlier_rounds(document: dict[str, Any], path: Path) -> None:
    """A rejudging (--evaluate-only) keeps the rounds and the wall time of the run that made the
    runs, from the figure's earlier reproduce.json of the same figure and variant (None without
    one: runs made by `protolab run`, an unreadable file); the judging's own time goes to
    `judging_s`."""
    document["judging_s"], document["wall_time_s"] = document["wall_time_s"], None
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if (not isinstance(earlier, dict) or earlier.get("schema") != SCHEMA
            or (earlier.get("figure") or {}).get("id") != document["figure"]["id"] or earlier.get("quick") != document["quick"]):
        return
    document["wall_time_s"] = earlier.get("wall_time_s")
    document["rounds"] = earlier.get("rounds") or []


def reproduce_figure(chosen: Figure, quick: bool, results_dir: Path, *, evaluate_only: bool, budget: int | None,
                     binary: Path | None, lab: str | None, retry_failed: bool = False,
                     data_dir: Path | None = None) -> dict[str, Any]:
    """Run a figure (unless `evaluate_only`) in adaptive rounds until its claims decide or its
    budget is spent, judge it, print the verdicts, write and return its reproduce.json (in
    `results_dir`; the runs and their store in `data_dir`, by default the same directory)."""
    started = time.monotonic()
    figure_dir, results_dir = results_dir, data_dir or results_dir
    experiment = experiment_of(chosen, quick)
    retry_failed_before = datetime.now(UTC).replace(tzinfo=None) if retry_failed else None
    rounds: list[Round] = []
    budget = budget if budget is not None else chosen.quick_budget if quick else chosen.budget
    if evaluate_only:
        verdicts, rows = judge(chosen, results_dir, experiment.name, budget)
    else:
        outcome = run_adaptively(
            experiment.spec.repetitions, budget,
            run=lambda repetitions, claims: run_round(chosen, quick, repetitions, claims, results_dir, binary, lab,
                                                      retry_failed_before),
            judge=lambda: judge(chosen, results_dir, experiment.name), progress=lambda text: console.print(escape(text)))
        verdicts, rows, rounds = outcome.verdicts, outcome.rows, outcome.rounds
    console.print(verdict_table(chosen, verdicts))
    for what, value in chosen.paper:
        console.print(f"  paper: {escape(what)}: {escape(value)}", highlight=False)
    if chosen.note:
        console.print(f"  note: {escape(chosen.note)}", style="dim", highlight=False)
    out = figure_dir / "reproduce.json"
    document = verdict_document(chosen, quick, experiment, verdicts, rows, rounds, budget,
                                run_counts(results_dir, experiment.name, companion_names(chosen)),
                                time.monotonic() - started)
    if evaluate_only:
        keep_earlier_rounds(document, out)
    if figure_dir != results_dir:  # the atlas draws ours from the store there
        document["data_dir"] = os.path.relpath(results_dir, figure_dir)
        figure_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomically(out, json.dumps(document, indent=2) + "\n")
    done = sum(v.outcome == REPRODUCED for v in verdicts)
    at_budget_count = sum(v.outcome == INCONCLUSIVE_AT_BUDGET for v in verdicts)
    console.print(f"{done} of {len(verdicts)} claims reproduced"
                  f"{f', {at_budget_count} inconclusive at budget' if at_budget_count else ''}; verdicts in {out}")
    return document


def reproduce_all(quick: bool, root: Path, *, evaluate_only: bool, budget: int | None, binary: Path | None,
                  lab: str | None, retry_failed: bool = False) -> None:
    """Every runnable figure, one after the other (a figure that fails is reported and skipped),
    then the atlas. The passive figures (after_run "corpus") of one spec share one corpus
    (reproduce.shared_corpus): built by the first, reused by the others."""
    from protolab.reproduce import atlas

    failed = []
    for figure in FIGURES:
        if figure.not_runnable:
            continue
        results_dir = atlas.results_dir_of(root, figure, quick)
        data_dir = (shared_corpus.shared_dir(root, spec_data_of(figure, quick), quick)
                    if figure.after_run == "corpus" else results_dir)
        if evaluate_only and not (data_dir / "results.duckdb").exists():
            console.print(f"{figure.id}: no results in {data_dir}; skipped", style="dim")
            continue
        try:
            reproduce_figure(figure, quick, results_dir, evaluate_only=evaluate_only, budget=budget, binary=binary,
                             lab=lab, retry_failed=retry_failed, data_dir=data_dir)
        except ProtolabError as exc:
            failed.append(figure.id)
            console.print(f"{figure.id}: {escape(str(exc))}", style="bold red")
    console.print(f"atlas: {atlas.build(FIGURES, root, quick)}")
    if failed:
        raise ProtolabError(f"figures that failed: {', '.join(failed)} (the atlas shows their last verdicts, if any)")


def reproduce_command(
    figure: Annotated[str | None, typer.Argument(help="Figure id (protolab reproduce --list).")] = None,
    list_flag: Annotated[bool, typer.Option("--list", help="List the figures and exit.")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="The reduced variant (fewer pages, repetitions, points).")] = False,
    results: Annotated[Path | None, typer.Option("--results", help="Results directory (default: results/reproduce/FIGURE[-quick]; "
                                                 "with --all or --atlas: the directory holding every figure's, results/reproduce).")] = None,
    evaluate_only: Annotated[bool, typer.Option("--evaluate-only", help="Judge the runs already in RESULTS; run nothing.")] = False,
    all_flag: Annotated[bool, typer.Option("--all", help="Every runnable figure, then the atlas (RESULTS/atlas[-quick].html).")] = False,
    atlas_flag: Annotated[bool, typer.Option("--atlas", help="Only (re)build the atlas from the figures' reproduce.json in RESULTS.")] = False,
    dry_run_flag: Annotated[bool, typer.Option("--dry-run", help="Print the run matrix and exit.")] = False,
    budget: Annotated[int | None, typer.Option(
        "--budget", min=0, help="Most repetitions per cell while claims are undecided (default: the figure's budget, "
                                "--list; 0: the spec's repetitions only).")] = None,
    binary: BinaryOption = None,
    lab: LabOption = None,
    retry_failed: RetryFailedOption = False,
) -> None:
    """Reproduce a seed figure or table: run its spec, then judge the seed's claims (paper vs ours, with CIs)."""
    if list_flag:
        console.print(list_table())
        return
    if atlas_flag or all_flag:
        root = results if results is not None else Path("results") / "reproduce"
        if atlas_flag:
            from protolab.reproduce import atlas

            console.print(f"atlas: {atlas.build(FIGURES, root, quick)}")
        else:
            reproduce_all(quick, root, evaluate_only=evaluate_only, budget=budget, binary=binary, lab=lab,
                          retry_failed=retry_failed)
        return
    if figure is None:
        raise ProtolabError("name a figure (protolab reproduce --list shows them), or --all")
    chosen = figure_named(figure)
    if chosen.not_runnable:
        instead = f"; {chosen.substitute} answers the same question here" if chosen.substitute else ""
        raise ProtolabError(f"{chosen.id} cannot run here: {chosen.not_runnable}{instead}")
    results_dir = results if results is not None else Path("results") / "reproduce" / f"{chosen.id}{'-quick' if quick else ''}"
    if dry_run_flag:
        dry_run(experiment_of(chosen, quick), results_dir, console, retry_failed)
        return
    reproduce_figure(chosen, quick, results_dir, evaluate_only=evaluate_only, budget=budget, binary=binary, lab=lab,
                     retry_failed=retry_failed)


def scenarios_command() -> None:
    """List the scenarios: name, seed, what they set up, and their default axes."""
    from protolab.scenarios import SCENARIOS

    table = Table(title="Scenarios (docs/scenarios.md)", box=box.SIMPLE_HEAD)
    for column in ("scenario", "seed", "what", "default axes"):
        table.add_column(column)
    for name, scenario in SCENARIOS.items():
        axes = "; ".join(f"{axis}={values}" for axis, values in scenario.default_axes.items()
                         if values and not (axis == "page" and len(values) > 5))
        pages = scenario.default_axes.get("page") or []
        if len(pages) > 5:
            axes += f"; page=({len(pages)} pages)"
        table.add_row(name, escape(scenario.source), escape(scenario.description), escape(axes))
    console.print(table)
