"""The reproduction atlas: one self-contained HTML page over every figure of the registry
(`protolab reproduce --all` writes it after running them, `--atlas` rebuilds it from results
already there).

Per figure: the seed's numbers as transcribed (with their section), ours drawn the way the seed
drew them (reproduce.drawings) from the figure's results store, the verdict on every claim with
its interval (read from the figure's reproduce.json, so the atlas never re-judges), the
explanations of claims that do not hold, the spec, the runs and the wall time; entries that
cannot run here, with the reason and the entry that answers the same question. At the top, the
count of claims reproduced, not reproduced (explained or not) and inconclusive.

Everything is inlined (SVG drawings, CSS): the page needs no network and no other file.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure as MplFigure

from protolab import __version__
from protolab.errors import ProtolabError
from protolab.files import write_text_atomically
from protolab.reproduce.claims import (
    INCONCLUSIVE,
    INCONCLUSIVE_AT_BUDGET,
    NO_DATA,
    NOT_JUDGEABLE,
    NOT_REPRODUCED,
    PROTOLAB,
    REPRODUCED,
    SEED,
)
from protolab.reproduce.data import load_spans, rows_of, server_windows
from protolab.reproduce.drawings import DrawingInput, claims_figure, drawing_for
from protolab.reproduce.figures import Figure
from protolab.reproduce.figures.base import claims_label
from protolab.reproduce.windows import summed_window_timeline
from protolab.report.figures import save_figure
from protolab.store import ResultsStore

SCHEMA = "protolab.reproduce"
NOT_REPRODUCED_EXPLAINED = "not reproduced (explained)"
OUTCOMES = (REPRODUCED, NOT_REPRODUCED_EXPLAINED, NOT_REPRODUCED, INCONCLUSIVE, INCONCLUSIVE_AT_BUDGET, NO_DATA,
            NOT_JUDGEABLE)
OUTCOME_CLASS = {REPRODUCED: "ok", NOT_REPRODUCED_EXPLAINED: "explained", NOT_REPRODUCED: "bad",
                 INCONCLUSIVE: "unsure", INCONCLUSIVE_AT_BUDGET: "unsure", NO_DATA: "none",
                 NOT_JUDGEABLE: "none"}


class AtlasError(ProtolabError):
    """A reproduce.json the atlas cannot read."""


def results_dir_of(root: Path, figure: Figure, quick: bool) -> Path:
    """Where `protolab reproduce` puts a figure's results under `root` (results/reproduce)."""
    return root / f"{figure.id}{'-quick' if quick else ''}"


def read_document(path: Path) -> dict[str, Any] | None:
    """A figure's reproduce.json, or None when there is none."""
    if not path.exists():
        return None
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise AtlasError(f"{path}: not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise AtlasError(f"{path}: field schema: expected {SCHEMA!r}")
    if not isinstance(document.get("claims"), list):
        raise AtlasError(f"{path}: field claims: expected a list")
    return document


def claim_outcome(figure: Figure, claim: dict[str, Any]) -> str:
    """The claim's verdict, "not reproduced" split by whether the registry explains it."""
    verdict = str(claim.get("verdict", NO_DATA))
    if verdict == NOT_REPRODUCED and any(e.claim in ("", claim.get("statement")) for e in figure.explanations):
        return NOT_REPRODUCED_EXPLAINED
    return verdict


@dataclass
class Entry:
    """One figure of the atlas: the registry's entry, its reproduce.json (None: not run) and
    our drawings as inline SVG."""

    figure: Figure
    document: dict[str, Any] | None = None
    drawings: list[str] = field(default_factory=list)

    def outcomes(self) -> Counter[str]:
        claims = self.document["claims"] if self.document else []
        return Counter(claim_outcome(self.figure, c) for c in claims)


def _timelines(store: ResultsStore, experiment: str, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The summed-window timeline of each mode's first repetition (what the cwnd drawing shows)."""
    windows = server_windows(store, experiment)
    spans = load_spans(store, experiment)
    first: dict[str, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r.get("repetition") or 0, reverse=True):
        first[row.get("mode")] = row
    return {r["run_key"]: summed_window_timeline(windows[r["run_key"]], *spans[r["run_key"]])
            for r in first.values() if r["run_key"] in windows and r["run_key"] in spans}


def ours(figure: Figure, results_dir: Path, experiment: str) -> MplFigure | None:
    """Our side of the figure from its results store (None: no store, or nothing to draw)."""
    drawing = drawing_for(figure)
    if drawing is None or not (results_dir / "results.duckdb").exists():
        return None
    with ResultsStore(results_dir, read_only=True) as store:
        rows = rows_of(store, figure.source, experiment)
        timelines = _timelines(store, experiment, rows) if figure.source == "cwnd" else {}
    return drawing(DrawingInput(figure, rows, timelines))


def collect(figures: Sequence[Figure], root: Path, quick: bool, figures_dir: Path) -> list[Entry]:
    """Every figure's entry: its reproduce.json under `root` and our drawings (saved as SVG and
    PNG into `figures_dir` too, and inlined)."""
    entries = []
    for figure in figures:
        entry = Entry(figure)
        results_dir = results_dir_of(root, figure, quick)
        if not figure.not_runnable:
            entry.document = read_document(results_dir / "reproduce.json")
        if entry.document is not None:
            # A passive figure's runs live in the corpus it shares with the others (shared_corpus).
            store_dir = results_dir / str(entry.document.get("data_dir") or ".")
            drawn = [ours(figure, store_dir, str(entry.document.get("experiment", ""))),
                     claims_figure(entry.document["claims"])]
            for kind, fig in zip(("ours", "claims"), drawn):
                if fig is not None:
                    index = len(entries) * 2 + len(entry.drawings)
                    entry.drawings.append(save_figure(fig, f"{figure.id}-{kind}", figures_dir, index))
        entries.append(entry)
    return entries


def _e(value: Any) -> str:
    return html.escape(str(value))


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def _expected(expected: dict[str, Any]) -> str:
    low, high = expected.get("low"), expected.get("high")
    if low is not None and high is not None:
        return f"{low:g} .. {high:g}"
    if low is not None:
        return f"&gt; {low:g}"
    return f"&lt; {high:g}" if high is not None else "any"


def summary_html(entries: Sequence[Entry]) -> str:
    """The totals over every claim, then one row per figure."""
    totals: Counter[str] = Counter()
    rows = []
    for entry in entries:
        f, doc = entry.figure, entry.document
        counts = entry.outcomes()
        totals.update(counts)
        if f.not_runnable:
            status = "not runnable here" + (f'; instead: <a href="#{_e(f.substitute)}">{_e(f.substitute)}</a>'
                                            if f.substitute else "")
        elif doc is None:
            status = "not run yet"
        else:
            status = ", ".join(f'<span class="{OUTCOME_CLASS[o]}">{counts[o]} {_e(o)}</span>' for o in OUTCOMES if counts[o])
        runs = (doc or {}).get("runs") or {}
        rows.append(f'<tr><td><a href="#{_e(f.id)}">{_e(f.id)}</a></td><td>{_e(f.seed)}</td><td>{_e(claims_label(f))}</td>'
                    f'<td>{status}</td><td>{_e(runs.get("ok", "-"))}</td><td>{_duration(runs.get("duration_s"))}</td>'
                    f'<td>{_duration((doc or {}).get("wall_time_s"))}</td></tr>')
    judged = sum(totals.values())
    cells = "".join(f'<td class="{OUTCOME_CLASS[o]}">{totals[o]}</td>' for o in OUTCOMES)
    heads = "".join(f"<th>{_e(o)}</th>" for o in OUTCOMES)
    return (f"<h2>Summary</h2><table><tr><th>claims judged</th>{heads}</tr><tr><td>{judged}</td>{cells}</tr></table>"
            "<table><tr><th>figure</th><th>seed</th><th>claims</th><th>verdicts</th><th>runs ok</th><th>runs' time</th>"
            "<th>wall time (last command)</th></tr>"
            + "".join(rows) + "</table>")


def _claims_table(entry: Entry) -> str:
    rows = []
    for claim in (entry.document or {}).get("claims", []):
        e = claim.get("estimate")
        ours_text = "-" if not e else f"{_number(e['value'])} [{_number(e['ci_low'])}, {_number(e['ci_high'])}]"
        outcome = claim_outcome(entry.figure, claim)
        whose = claim.get("whose", SEED)  # documents before the field were the seed's claims only
        tag = '<span class="whose">protolab\'s</span> ' if whose == PROTOLAB else ""
        rows.append(f"<tr><td>{tag}{_e(claim.get('statement'))}</td><td>{_e(claim.get('paper'))}</td>"
                    f"<td>{_expected(claim.get('expected') or {})}</td><td>{ours_text}</td>"
                    f"<td>{_e(e['n']) if e else '-'}</td><td class=\"{OUTCOME_CLASS.get(outcome, '')}\">{_e(outcome)}</td>"
                    f"<td>{_e(claim.get('reason') or '')}</td></tr>")
    return ("<table><tr><th>claim</th><th>paper</th><th>expected</th><th>ours [95% CI]</th><th>n</th><th>verdict</th>"
            "<th>why</th></tr>"
            + "".join(rows) + "</table>")


def _run_facts(document: dict[str, Any]) -> str:
    runs = document.get("runs") or {}
    overrides = document.get("quick_overrides") or {}
    facts = [f"spec <code>specs/{_e(document['figure'].get('spec'))}</code>"
             + (f" with the quick overrides <code>{_e(json.dumps(overrides))}</code>" if overrides else ""),
             f"experiment <code>{_e(document.get('experiment'))}</code>"
             + "".join(f", with <code>specs/{_e(spec)}</code>" for spec in document["figure"].get("companions") or []),
             f"runs: {_e(runs.get('ok', '-'))} ok, {_e(runs.get('failed', 0))} failed; {_e(document.get('rows'))} rows judged",
             f"wall time {_duration(document.get('wall_time_s'))} (runs {_duration(runs.get('duration_s'))})"]
    return "<ul>" + "".join(f"<li>{fact}</li>" for fact in facts) + "</ul>"


def entry_html(entry: Entry) -> str:
    f = entry.figure
    parts = [f'<section id="{_e(f.id)}"><h2>{_e(f.id)}: {_e(f.title)}</h2><p class="seed">{_e(f.seed)}</p>']
    if f.paper:
        parts.append("<h3>The seed (transcribed)</h3><table><tr><th>what</th><th>the seed's number or finding</th></tr>"
                     + "".join(f"<tr><td>{_e(w)}</td><td>{_e(v)}</td></tr>" for w, v in f.paper) + "</table>")
    if f.note:
        parts.append(f'<p class="note">{_e(f.note)}</p>')
    if f.not_runnable:
        instead = f' Instead: <a href="#{_e(f.substitute)}">{_e(f.substitute)}</a>.' if f.substitute else ""
        parts.append(f'<p class="none">Not runnable here: {_e(f.not_runnable)}.{instead}</p>')
    elif entry.document is None:
        parts.append(f"<p class=\"none\">Not run yet: <code>protolab reproduce {_e(f.id)}</code>.</p>")
    else:
        parts.append("<h3>Ours</h3>" + "".join(f'<div class="fig">{svg}</div>' for svg in entry.drawings))
        parts.append("<h3>Verdicts</h3>" + _claims_table(entry) + _run_facts(entry.document))
    if f.explanations:
        parts.append("<h3>Explanations</h3><ul>" + "".join(
            f"<li><b>{_e(x.claim or 'the figure')}</b>: {_e(x.cause)} <i>{_e(x.evidence)}</i>"
            + (f" <code>{_e(x.command)}</code>" if x.command else "") + "</li>" for x in f.explanations) + "</ul>")
    return "".join(parts) + "</section>"


STYLE = """body{font-family:sans-serif;max-width:70em;margin:1em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;font-size:90%;text-align:left}
.ok{color:#1a7f37}.bad{color:#b31d28;font-weight:bold}.explained{color:#9a4d00}.unsure{color:#8a6d00}.none{color:#777}
.seed,.note{color:#555}.whose{color:#555;font-size:85%;border:1px solid #aaa;border-radius:3px;padding:0 .2em}section{border-top:2px solid #ddd;margin-top:2em}.fig svg{max-width:100%;height:auto}"""


def render(entries: Sequence[Entry], quick: bool, generated: datetime | None = None) -> str:
    """The atlas page."""
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    variant = "quick variants (--quick)" if quick else "full specs"
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>protolab reproduction atlas</title>"
            f"<style>{STYLE}</style></head><body><h1>Reproduction atlas</h1>"
            f"<p>Every result figure and table of the seeds in <code>protolab reproduce</code>: {variant}; "
            f"protolab {_e(__version__)}, {when}. Verdicts as each figure's reproduce.json records them.</p>"
            + summary_html(entries) + "".join(entry_html(e) for e in entries) + "</body></html>\n")


def build(figures: Sequence[Figure], root: Path, quick: bool) -> Path:
    """Write `root/atlas[-quick].html` from the figures' results under `root`; its path."""
    name = f"atlas{'-quick' if quick else ''}"
    entries = collect(figures, root, quick, root / f"{name}-figures")
    out = root / f"{name}.html"
    write_text_atomically(out, render(entries, quick))
    return out
