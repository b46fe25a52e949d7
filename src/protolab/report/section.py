"""What every section of the report is built from: the experiments as loaded from the store
(`Experiment`, `Run`), their labels and order, the HTML helpers, and the `Builder` the sections
draw with (its store and figure writing). A leaf of the report: `build` and every section module
import it, it imports none of them."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protolab.errors import LabError
from protolab.plan import modes
from protolab.report import figures
from protolab.store import ResultsStore

NO_PAGE = "-"  # runs that load no page (bulk transfers)


@dataclass
class Run:
    run_key: str
    status: str
    error: str | None
    plt_ms: float | None
    mode: str
    page: str
    repetition: int | None
    params: dict[str, Any]
    condition: tuple[Any, ...] = ()
    n_connections: int | None = None
    page_bytes: int | None = None
    goodput_mbps: float | None = None


@dataclass
class Experiment:
    id: str
    name: str
    spec: Any
    provenance: Any
    created: Any
    updated: Any
    runs: list[Run]
    varying: list[str] = field(default_factory=list)
    fixed: dict[str, Any] = field(default_factory=dict)
    modes: list[str] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    page_size: dict[str, int] = field(default_factory=dict)
    conditions: list[tuple[Any, ...]] = field(default_factory=list)


def sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (2, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value))
    return (1, str(value))


def mode_sort_key(mode: str) -> tuple[int, str]:
    """Modes in the registry's order (the binary's `protolab-net modes`), N ascending, a mode with
    its own QUIC controller (`h3@gquic39`, see `controller_modes`) right after the mode; bulk
    protocols and pairs, which are no page-load modes, after them by name."""
    base, at, controller = mode.partition("@") if " vs " not in mode else (mode, "", "")
    _, _, n = base.partition(":")
    try:
        rank = modes.order_of(base)
    except LabError:
        rank = 0  # no binary to ask: by name alone
    return (rank, (f"{int(n):06d}" if n.isdigit() else (n or base)) + at + controller)


def controller_modes(runs: Sequence[Run]) -> None:
    """Page loads whose QUIC controller varies only over the HTTP/3 runs (the TCP modes ran with one
    value, as in the demo: h3 with cubic and with gquic39): an HTTP/3 run with another controller
    than the TCP modes' becomes mode `h3@<controller>` (the pair syntax), so the two QUIC variants
    are compared as protocols side by side instead of splitting every figure into conditions."""
    if not runs or any(run.page == NO_PAGE or " vs " in run.mode for run in runs):
        return
    tcp = {run.params.get("quic_cc") for run in runs if not _is_quic(run.mode)}
    quic = {run.params.get("quic_cc") for run in runs if _is_quic(run.mode)}
    if len(tcp) != 1 or None in tcp or not quic - tcp:
        return  # one controller throughout, or the TCP runs do not say which (nothing to compare with)
    reference = next(iter(tcp))
    for run in runs:
        controller = run.params.get("quic_cc")
        if _is_quic(run.mode) and controller is not None and controller != reference and "@" not in run.mode:
            run.mode = f"{run.mode}@{controller}"


def _is_quic(mode: str) -> bool:
    return mode.startswith("h3")


def determined(runs: Sequence[Run], name: str, by: Sequence[str]) -> bool:
    """Whether the value of parameter `name` is a function of the parameters `by` over the runs."""
    seen: dict[tuple[Any, ...], Any] = {}
    for run in runs:
        key = tuple(hashable(run.mode if f == "mode" else run.page if f == "page" else run.params.get(f))
                    for f in by)
        value = hashable(run.params.get(name))
        if seen.setdefault(key, value) != value:
            return False
    return True


def hashable(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


# How a run parameter reads in labels; others read `name=value`.
PARAM_FORMATS = {
    "bandwidth_mbps": "{:g} Mbit/s",
    "rtt_ms": "RTT {:g} ms",
    "loss_pct": "loss {:g}%",
    "buffer_bytes": "buffer {} B",
    "buffer": "buffer {}",
    "tcp_cc": "TCP {}",
    "quic_cc": "QUIC {}",
    "client": "client {}",
    "warm": "{} loads",
    "scenario": "{}",
}


def fmt_param(name: str, value: Any) -> str:
    if value is None:
        return f"{name} -"
    template = PARAM_FORMATS.get(name)
    return template.format(value) if template else f"{name}={value}"


def condition_label(exp: Experiment, condition: tuple[Any, ...], skip: Iterable[str] = ()) -> str:
    parts = [fmt_param(name, value) for name, value in zip(exp.varying, condition) if name not in set(skip)]
    return ", ".join(parts) or "all runs"


def num(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:,.{digits}f}"


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric_from: int = 99, css: str = "") -> str:
    """An HTML table; cells are already escaped HTML."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(f'<td class="num">{c}</td>' if i >= numeric_from else f"<td>{c}</td>"
                        for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


class Builder:
    """The store a report reads and the figures it writes; `build.ReportBuilder` adds the sections."""

    def __init__(self, store: ResultsStore, out_dir: Path, baseline: str | None) -> None:
        self.store = store
        self.out_dir = out_dir
        self.figures_dir = out_dir / "figures"
        self.baseline = baseline
        self.figure_count = 0
        self.figure_files: list[Path] = []
        self.waterfall_runs: list[str] = []  # `--waterfall RUN_KEY`: runs drawn besides the chosen ones

    def figure(self, fig: Any, name: str, caption: str) -> str:
        self.figure_count += 1
        svg = figures.save_figure(fig, name, self.figures_dir, self.figure_count)
        self.figure_files += [self.figures_dir / f"{name}.svg", self.figures_dir / f"{name}.png"]
        return (f'<figure id="{esc(name)}"><div class="svg">{svg}</div><figcaption>{esc(caption)} '
                f'<a href="figures/{esc(name)}.svg">SVG</a> · <a href="figures/{esc(name)}.png">PNG</a>'
                "</figcaption></figure>")


CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1300px;
       color: #222; background: #fff; padding: 0 16px; }
h1 { font-size: 1.6em; border-bottom: 3px solid #1f77b4; padding-bottom: 6px; }
h2 { font-size: 1.35em; margin-top: 2em; background: #eef4fa; padding: 6px 10px; border-left: 5px solid #1f77b4; }
h3 { font-size: 1.1em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; vertical-align: top; }
th { background: #f0f0f0; }
table.data tbody tr:nth-child(even) { background: #fafafa; }
table.kv td:first-child { font-weight: 600; background: #f7f7f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
figure { margin: 12px 0 24px; }
figure .svg svg { max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #444; }
.note { color: #7a5a00; background: #fff8e0; border: 1px solid #f0dc9a; padding: 6px 10px; }
.caption { font-size: 0.85em; color: #444; }
.ok { color: #1a7f1a; font-weight: 600; } .bad { color: #c00; font-weight: 600; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 0.8em; }
nav ul { columns: 2; font-size: 0.9em; }
"""
