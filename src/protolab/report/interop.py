"""The interop matrix (docs/interop.md): per test case, servers x clients with the verdicts of
their runs, and for the measurement case (goodput) the mean with its 95% Student-t interval
over the repetitions, as Markdown. `matrix_markdown` is pure (rows in, text out)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from protolab.interop.testcases import TESTCASES
from protolab.report import section as h
from protolab.report.stats import summarize

LEGEND = "✓ succeeded, ✗ failed, ? unsupported (the endpoint exited 127); one mark per run."
# A cell lists one mark per run.
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


@dataclass(frozen=True)
class CaseMatrix:
    """One test case's matrix: a row of cells per server, a column per client."""

    case: str
    unit: str
    link: str
    clients: list[str]
    rows: list[tuple[str, list[str]]]
    reasons: list[str]


MEASUREMENTS = tuple(name for name, case in TESTCASES.items() if case.measurement)


def matrices(rows: Sequence[Mapping[str, Any]], measurements: Iterable[str] = MEASUREMENTS) -> list[CaseMatrix]:
    measured = set(measurements)
    by_case: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_case[str(row["testcase"])].append(row)
    found: list[CaseMatrix] = []
    for case, case_rows in sorted(by_case.items()):
        servers = sorted({str(r["server"]) for r in case_rows})
        clients = sorted({str(r["client"]) for r in case_rows})
        cells: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
        for row in case_rows:
            cells[(str(row["server"]), str(row["client"]))].append(row)
        table = [(server, [_cell(cells.get((server, c), []), case in measured) or "–" for c in clients])
                 for server in servers]
        reasons = sorted({f"{r['server']}->{r['client']}: {r['reason']}" for r in case_rows
                          if r["verdict"] != "succeeded" and r["reason"]})
        found.append(CaseMatrix(case, " (goodput, Mbit/s: mean [95% CI])" if case in measured else "",
                                _condition(case_rows), clients, table, reasons))
    return found


def matrix_markdown(rows: Sequence[Mapping[str, Any]], measurements: Iterable[str] = MEASUREMENTS) -> str:
    """One table per test case: a row per server, a column per client."""
    parts: list[str] = []
    for m in matrices(rows, measurements):
        lines = [f"### {m.case}{m.unit}", "", f"Link: {m.link}.", "",
                 "| server \\ client | " + " | ".join(m.clients) + " |", "| --- |" + " --- |" * len(m.clients)]
        lines += [f"| {server} | " + " | ".join(cells) + " |" for server, cells in m.rows]
        if m.reasons:
            lines += ["", *(f"- {reason}" for reason in m.reasons)]
        parts.append("\n".join(lines))
    return "\n\n".join([LEGEND, *parts]) + "\n"


def section(b: Any, exp: Any, slug: str) -> str:
    """The report's section of an interop experiment (protolab.report.build)."""
    rows = b.store.query(QUERY.replace("ORDER BY", "WHERE i.experiment_id = ? ORDER BY"), [exp.id])
    if not rows:
        return h.note("no interop results")
    parts = [h.note(LEGEND)]
    for m in matrices(rows):
        parts.append(f"<h4>{h.esc(m.case + m.unit)}</h4>" + h.note(f"Link: {m.link}."))
        parts.append(h.table(["server \\ client", *m.clients],
                             [[h.esc(server), *(h.esc(c) for c in cells)] for server, cells in m.rows]))
        if m.reasons:
            parts.append("<ul>" + "".join(f"<li>{h.esc(r)}</li>" for r in m.reasons) + "</ul>")
    return "\n".join(parts)


def interop_matrix(results_dir: Path) -> str:
    from protolab.store import ResultsStore

    with ResultsStore(results_dir, read_only=True) as store:
        return matrix_markdown(store.query(QUERY))
