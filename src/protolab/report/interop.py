"""The interop matrix (docs/interop.md): per test case, servers x clients with the verdicts of
their runs, and for the measurement case (goodput) the mean with its 95% Student-t interval
over the repetitions, as Markdown. `matrix_markdown` is pure (rows in, text out)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from protolab.report.stats import summarize

# The runner's letters: a cell lists one per run.
VERDICT_MARKS = {"succeeded": "✓", "failed": "✗", "unsupported": "?"}

QUERY = ("SELECT i.testcase, i.server, i.client, i.verdict, i.goodput_mbps, i.reason, r.bandwidth_mbps, r.rtt_ms, "
         "r.loss_pct FROM interop_results i JOIN runs r USING (experiment_id, run_key) "
         "ORDER BY i.testcase, i.server, i.client, r.repetition")


def _cell(rows: Sequence[Mapping[str, Any]], measurement: bool) -> str:
    marks = "".join(VERDICT_MARKS.get(str(r["verdict"]), "·") for r in rows)
    if not measurement:
        return marks
    summary = summarize([float(r["goodput_mbps"]) for r in rows
                         if r["verdict"] == "succeeded" and r["goodput_mbps"] is not None])
    if summary.n == 0:
        return marks
    interval = (f" [{summary.mean_ci_low:.2f}, {summary.mean_ci_high:.2f}]"
                if summary.mean_ci_low is not None and summary.mean_ci_high is not None else "")
    return f"{summary.mean:.2f}{interval} (n={summary.n}) {marks}"


def _condition(rows: Iterable[Mapping[str, Any]]) -> str:
    conditions = sorted({(r["bandwidth_mbps"], r["rtt_ms"], r["loss_pct"]) for r in rows}, key=str)
    return "; ".join(f"{bw:g} Mbit/s, {rtt:g} ms RTT, {loss:g}% loss" for bw, rtt, loss in conditions)


def matrix_markdown(rows: Sequence[Mapping[str, Any]], measurements: Iterable[str] = ("goodput",)) -> str:
    """One table per test case: a row per server, a column per client."""
    measured = set(measurements)
    by_case: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_case[str(row["testcase"])].append(row)
    parts: list[str] = []
    for case, case_rows in sorted(by_case.items()):
        servers = sorted({str(r["server"]) for r in case_rows})
        clients = sorted({str(r["client"]) for r in case_rows})
        cells: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
        for row in case_rows:
            cells[(str(row["server"]), str(row["client"]))].append(row)
        unit = " (goodput, Mbit/s: mean [95% CI])" if case in measured else ""
        lines = [f"### {case}{unit}", "", f"Link: {_condition(case_rows)}.", "",
                 "| server \\ client | " + " | ".join(clients) + " |", "| --- |" + " --- |" * len(clients)]
        for server in servers:
            lines.append(f"| {server} | " + " | ".join(_cell(cells.get((server, c), []), case in measured) or "–"
                                                     for c in clients) + " |")
        reasons = sorted({f"{r['server']}->{r['client']}: {r['reason']}" for r in case_rows
                          if r["verdict"] != "succeeded" and r["reason"]})
        if reasons:
            lines += ["", *(f"- {reason}" for reason in reasons)]
        parts.append("\n".join(lines))
    legend = "✓ succeeded, ✗ failed, ? unsupported (the endpoint exited 127); one mark per run."
    return "\n\n".join([legend, *parts]) + "\n"


def interop_matrix(results_dir: Path) -> str:
    from protolab.store import ResultsStore

    with ResultsStore(results_dir, read_only=True) as store:
        return matrix_markdown(store.query(QUERY))
