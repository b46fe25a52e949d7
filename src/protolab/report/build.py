"""Build the HTML report of a results directory from its store (never from raw artifacts)."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from protolab.errors import ProtolabError
from protolab.measure.stats import clopper_pearson
from protolab.plan.spec import CONDITION_COLUMNS
from protolab.report import analysis as ga
from protolab.report import calibration as cal
from protolab.report import fidelity as fid
from protolab.report import figures
from protolab.report import flows as flows_report
from protolab.report import interop as interop_report
from protolab.report import rpm as rpm_report
from protolab.report import section as h
from protolab.report import quic_controllers as qc
from protolab.report import transport as tr
from protolab.report import waterfall as wf
from protolab.report.section import CSS, NO_PAGE, Builder, Experiment, Run, condition_label, fmt_param, mode_sort_key
from protolab.report.stats import CI_LEVEL, improvement_pct, median, speedup, summarize
from protolab.store import KNOWN_PARAMS, SCHEMA_VERSION, ResultsStore

CONDITION_FIELDS = ("scenario", *CONDITION_COLUMNS, "tcp_cc", "quic_cc", "client",
                    "warm")
PRIMARY_CONDITIONS = ("scenario", *CONDITION_COLUMNS[:3], "tcp_cc", "quic_cc", "client", "warm")
PAGE_FIELDS = {"page_ref", "page_bytes", "page_digest"}  # describe the page, shown with the pages
NOT_CONDITIONS = {"mode", "page", "repetition", "seed", "order_index", "workload", "transport_axes",
                  "quic_cc_resolved"}
MAX_PANELS = 12
MAX_SPEEDUP_PANELS = 6
MAX_HEATMAPS = 8
MAX_POOLED_PAGES = 15  # more pages than this: box plots pool the pages


class ReportError(ProtolabError):
    """The report cannot be built (no store, no experiment, bad option)."""


# ---------------------------------------------------------------------------------------------
# Loading


def _json(text: Any) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def load_experiment(store: ResultsStore, row: dict[str, Any]) -> Experiment:
    known = [name for name, _, _ in KNOWN_PARAMS]
    rows = store.query(
        "SELECT r.*, p.bytes AS page_bytes, p.n_connections AS n_connections FROM runs r "
        "LEFT JOIN page_loads p ON p.experiment_id = r.experiment_id AND p.run_key = r.run_key "
        "WHERE r.experiment_id = ? ORDER BY r.order_index NULLS LAST, r.run_key", [row["id"]])
    runs: list[Run] = []
    for r in rows:
        params = {name: r[name] for name in known}
        extra = _json(r["params"]) or {}
        if isinstance(extra, dict):
            params.update(extra)
        runs.append(Run(run_key=r["run_key"], status=r["status"], error=r["error"], plt_ms=r["plt_ms"],
                        mode=str(r["mode"] or "?"), page=str(r["page"] or NO_PAGE), repetition=r["repetition"],
                        params=params, n_connections=r["n_connections"], page_bytes=r["page_bytes"],
                        goodput_mbps=r.get("goodput_mbps")))
    h.controller_modes(runs)
    exp = Experiment(id=row["id"], name=row["name"] or row["id"], spec=_json(row["spec"]),
                     provenance=_json(row["provenance"]), created=row["created"], updated=row["updated"], runs=runs)
    extra_keys = sorted({k for run in runs for k in run.params} - set(known))
    candidates = [*CONDITION_FIELDS, *[k for k in extra_keys if k not in NOT_CONDITIONS]]
    varying: list[str] = []
    for name in candidates:
        values = {json.dumps(run.params.get(name), sort_keys=True, default=str) for run in runs}
        if len(values) > 1:
            varying.append(name)
        elif runs and runs[0].params.get(name) is not None and name not in PAGE_FIELDS:
            exp.fixed[name] = runs[0].params.get(name)
    # A parameter that follows from the page or the mode (page_bytes, page_ref) is no condition;
    # nor is a secondary one that the other conditions determine (a buffer of 1 BDP in bytes on
    # the bandwidth x RTT grid, or buffer_bytes next to the buffer's label).
    varying = [name for name in varying if not h.determined(runs, name, ("mode", "page"))]
    # A controller built from scenario axes (cubic-tuning's c and beta) goes first: the axes
    # are the dimensions the spec wrote.
    removable = [n for n in ("quic_cc", "tcp_cc") if n in varying and any(
        e in varying for e in extra_keys)] + [n for n in varying if n not in PRIMARY_CONDITIONS]
    for name in removable:
        if name in varying and h.determined(runs, name, [n for n in varying if n != name]):
            varying.remove(name)
    exp.varying = varying
    for run in runs:
        run.condition = tuple(h.hashable(run.params.get(name)) for name in exp.varying)
    exp.conditions = sorted({run.condition for run in runs}, key=lambda c: tuple(h.sort_key(v) for v in c))
    exp.modes = sorted({run.mode for run in runs}, key=mode_sort_key)
    sizes: dict[str, list[int]] = defaultdict(list)
    for run in runs:
        if run.status == "ok" and run.page_bytes is not None:
            sizes[run.page].append(run.page_bytes)
    expected = {r["page"]: r["size"] for r in store.query(
        "SELECT r.page, max(s.size) AS size FROM runs r JOIN (SELECT run_key, sum(expected_bytes) AS size "
        "FROM objects WHERE experiment_id = ? GROUP BY run_key) s ON s.run_key = r.run_key "
        "WHERE r.experiment_id = ? GROUP BY r.page", [row["id"], row["id"]])}
    pages = {run.page for run in runs}
    for page in pages:
        if sizes.get(page):
            exp.page_size[page] = int(np.median(sizes[page]))
        elif expected.get(page) is not None:
            exp.page_size[page] = int(expected[page])
        else:
            declared = [r.params.get("page_bytes") for r in runs if r.page == page]
            if declared and isinstance(declared[0], int):
                exp.page_size[page] = declared[0]
    exp.pages = sorted(pages, key=lambda p: (exp.page_size.get(p, 0), p))
    return exp


# ---------------------------------------------------------------------------------------------
# Formatting


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        out: list[tuple[str, str]] = []
        for key, sub in value.items():
            out.extend(_flatten(sub, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list):
        return [(prefix, json.dumps(value, default=str))]
    return [(prefix, "-" if value is None else str(value))]


PROVENANCE_FIRST = ("protolab_version", "git.commit", "git.dirty", "kernel", "cpu_model", "cpus", "machine", "python")


# ---------------------------------------------------------------------------------------------
# Sections


class ReportBuilder(Builder):
    def experiment_section(self, exp: Experiment) -> str:
        slug = re.sub(r"[^A-Za-z0-9_-]+", "-", exp.id).strip("-") or "experiment"
        parts = [f'<section class="experiment" id="exp-{h.esc(slug)}">',
                 f"<h2>Experiment {h.esc(exp.name)}</h2>", self.header(exp)]
        transport = [
            ("cwnd", "Congestion windows over time", partial(tr.cwnd_timeline, self)),
            ("states", "Controller states per connection", partial(tr.controller_states, self)),
            ("losses", "Losses against the emulator's ground truth", partial(ga.ground_truth, self)),
            ("overhead", "Overhead factor", partial(ga.overhead, self)),
        ]
        pages: list[tuple[str, str, Callable[[Experiment, str], str]]] = [
            ("plt", "Page load time per protocol and condition", self.boxplots),
            ("speedup", "Speed-up versus the baseline", self.speedups),
            ("heatmaps", "Improvement over the bandwidth x RTT grid", self.heatmaps),
            ("cdf", "CDF of page load time", self.cdfs),
            ("connections", "Connections and bytes per connection", self.connections),
            ("waterfall", "Waterfalls: each object on its connection",
             partial(wf.section, self, requested=self.waterfall_runs)),
            ("cells", "Statistics per cell", self.cell_table),
        ]
        by_workload: dict[str, list[tuple[str, str, Callable[[Experiment, str], str]]]] = {
            "page": [*pages, *transport],
            "bulk": [("throughput", "Throughput per protocol and condition", partial(tr.throughput, self)),
                     ("goodput-time", "Throughput over time", partial(tr.throughput_timeline, self)), *transport,
                     ("determinants", "Throughput determinants", partial(ga.determinants, self))],
            "rpm": [("rpm", "Responsiveness under working conditions (RPM)", partial(rpm_report.responsiveness, self))],
            "interop": [("interop", "Interop matrix: servers x clients per test case",
                         partial(interop_report.section, self))],
            "pair": [("fairness", "Shares of the bottleneck and Jain's index", partial(tr.fairness, self)),
                     ("share-time", "Throughput per side over time", partial(tr.share_timeline, self)), *transport],
        }
        if qc.variant_pairs(exp.modes):
            by_workload["page"].insert(1, ("quic-controllers", "Why the QUIC variants differ",
                                           partial(qc.compare, self)))
        if "client" in exp.varying:
            by_workload["page"].insert(1, ("engine-vs-browser", "Engine vs browser", self.engine_vs_browser))
        if flows_report.has_flows(self, exp):
            by_workload["page"].append(("flows", "Flow characterization (000 Fig. 3.3)",
                                        partial(flows_report.characterization, self)))
        sections = [*by_workload[tr.workload_of(exp)],
                    ("failed", "Failed runs", self.failed_table),
                    ("links", "Achieved versus configured link conditions", self.link_table),
                    ("fidelity", "Fidelity: the emulator's delay error and flagged runs", partial(fid.fidelity, self))]
        for key, title, method in sections:
            parts.append(f'<h3 id="{h.esc(slug)}-{key}">{h.esc(title)}</h3>')
            parts.append(method(exp, f"{slug}-{key}"))
        parts.append("</section>")
        return "\n".join(parts)

    def header(self, exp: Experiment) -> str:
        counts: dict[str, int] = defaultdict(int)
        for run in exp.runs:
            counts[run.status] += 1
        status = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no runs"
        rows = [
            ("id", h.esc(exp.id)), ("created (UTC)", h.esc(exp.created)), ("updated (UTC)", h.esc(exp.updated)),
            ("runs", h.esc(status)),
            ("modes", h.esc(", ".join(exp.modes))),
            ("pages (by size)", h.esc(", ".join(f"{p} ({exp.page_size[p] / 1000:,.0f} kB)" if p in exp.page_size
                                                else p for p in exp.pages if p != NO_PAGE) or "none")),
            ("varying", h.esc(", ".join(exp.varying) or "none")),
            ("fixed", h.esc(", ".join(fmt_param(k, v) for k, v in exp.fixed.items()) or "none")),
        ]
        out = [h.table(["", ""], rows, css="kv")]
        prov = _flatten(exp.provenance) if isinstance(exp.provenance, dict) else []
        if prov:
            ordered = sorted(prov, key=lambda kv: (PROVENANCE_FIRST.index(kv[0]) if kv[0] in PROVENANCE_FIRST
                                                   else len(PROVENANCE_FIRST), kv[0]))
            first = [(f"<b>{h.esc(k)}</b>", h.esc(v)) for k, v in ordered if k in PROVENANCE_FIRST]
            rest = [(h.esc(k), h.esc(v)) for k, v in ordered if k not in PROVENANCE_FIRST]
            out.append("<h4>Provenance</h4>" + h.table(["field", "value"], first + rest, css="kv"))
        else:
            out.append(h.note("No provenance recorded for this experiment."))
        spec = json.dumps(exp.spec, indent=2, sort_keys=True, default=str) if exp.spec is not None else "none"
        out.append(f"<details><summary>Experiment spec</summary><pre>{h.esc(spec)}</pre></details>")
        return "\n".join(out)

    def _ok(self, exp: Experiment) -> list[Run]:
        return [r for r in exp.runs if r.status == "ok" and r.plt_ms is not None and math.isfinite(r.plt_ms)]

    def _capped(self, exp: Experiment, conditions: Sequence[tuple[Any, ...]], cap: int) -> tuple[list[tuple[Any, ...]], str]:
        if len(conditions) <= cap:
            return list(conditions), ""
        return list(conditions[:cap]), h.note(
            f"{len(conditions)} conditions: the figure shows the first {cap}; the tables below list all of them.")

    def boxplots(self, exp: Experiment, name: str) -> str:
        ok = self._ok(exp)
        if not ok:
            return h.note("No successful page loads: nothing to plot.")
        pooled = len(exp.pages) > MAX_POOLED_PAGES
        conditions = [c for c in exp.conditions if any(r.condition == c for r in ok)]
        shown, note = self._capped(exp, conditions, MAX_PANELS)
        panels = []
        for cond in shown:
            cells: dict[tuple[str, str], list[float]] = defaultdict(list)
            for run in ok:
                if run.condition == cond:
                    cells[("all pages" if pooled else run.page, run.mode)].append(run.plt_ms / 1000)  # type: ignore[operator]
            panels.append((condition_label(exp, cond), dict(cells)))
        fig = figures.plt_boxplots(panels, exp.pages, exp.modes, pooled)
        where = "pages pooled" if pooled else "pages ordered by size, smallest left"
        caption = (f"PLT of successful loads per protocol, one panel per condition ({where}). Boxes: quartiles; "
                   "whiskers: 1.5 IQR; diamond: mean.")
        return note + self.figure(fig, name, caption)

    def resolve_baseline(self, exp: Experiment) -> tuple[str | None, str]:
        if len(exp.modes) < 2:
            return None, "Only one protocol mode: no baseline to compare with."
        if self.baseline is not None and self.baseline in exp.modes:
            return self.baseline, ""
        fallback = "h2" if "h2" in exp.modes else exp.modes[0]
        if self.baseline is not None:
            return fallback, f"Baseline {self.baseline} has no runs in this experiment; using {fallback}."
        return fallback, ""

    def speedups(self, exp: Experiment, name: str) -> str:
        baseline, note = self.resolve_baseline(exp)
        if baseline is None:
            return h.note(note)
        ok = self._ok(exp)
        others = [m for m in exp.modes if m != baseline]
        plts: dict[tuple[Any, ...], dict[tuple[str, str], list[float]]] = defaultdict(lambda: defaultdict(list))
        for run in ok:
            plts[run.condition][(run.page, run.mode)].append(run.plt_ms / 1000)  # type: ignore[operator]
        conditions = [c for c in exp.conditions if c in plts]
        if not conditions:
            return h.note("No successful page loads: nothing to compare.")
        shown, cap_note = self._capped(exp, conditions, MAX_SPEEDUP_PANELS)
        panels = []
        for cond in shown:
            cells = {}
            for page in exp.pages:
                base = median(plts[cond].get((page, baseline), []))
                for mode in others:
                    other = median(plts[cond].get((page, mode), []))
                    cells[(page, mode)] = (speedup(base, other), base - other)
            panels.append((condition_label(exp, cond), cells))
        fig = figures.speedup_figure(panels, exp.pages, others, baseline, exp.modes)
        caption = (f"Speed-up of each protocol versus {baseline} per page (pages ordered by total size, smallest "
                   f"left): top, median PLT({baseline}) / median PLT(protocol), above 1 is faster; bottom, "
                   f"median PLT({baseline}) - median PLT(protocol) in seconds, above 0 is faster.")
        return (h.note(note) if note else "") + cap_note + self.figure(fig, name, caption)

    def heatmaps(self, exp: Experiment, name: str) -> str:
        ok = self._ok(exp)
        bws: list[float] = sorted({float(r.params["bandwidth_mbps"]) for r in ok
                                   if r.params.get("bandwidth_mbps") is not None})
        rtts: list[float] = sorted({float(r.params["rtt_ms"]) for r in ok if r.params.get("rtt_ms") is not None})
        if len(bws) < 2 or len(rtts) < 2:
            return h.note("The runs do not span more than one bandwidth and more than one RTT: no heat maps.")
        baseline, note = self.resolve_baseline(exp)
        if baseline is None:
            return h.note(note)
        # Fields fixed by the cell (e.g. a buffer of 1 BDP) do not split the grid into groups.
        per_cell: dict[str, dict[tuple[Any, Any], set[Any]]] = defaultdict(lambda: defaultdict(set))
        for run in ok:
            for fname, value in zip(exp.varying, run.condition):
                per_cell[fname][(run.params.get("bandwidth_mbps"), run.params.get("rtt_ms"))].add(value)
        rest_fields = [f for f in exp.varying if f not in ("bandwidth_mbps", "rtt_ms")
                       and any(len(values) > 1 for values in per_cell[f].values())]
        idx = [exp.varying.index(f) for f in rest_fields]
        groups: dict[tuple[Any, ...], dict[tuple[float, float, str], list[float]]] = defaultdict(lambda: defaultdict(list))
        for run in ok:
            rest = tuple(run.condition[i] for i in idx)
            bw, rtt = run.params.get("bandwidth_mbps"), run.params.get("rtt_ms")
            if bw is not None and rtt is not None:
                groups[rest][(float(bw), float(rtt), run.mode)].append(run.plt_ms)  # type: ignore[arg-type]
        panels = []
        for rest in sorted(groups, key=lambda c: tuple(h.sort_key(v) for v in c)):
            cells = groups[rest]
            rest_label = ", ".join(fmt_param(f, v) for f, v in zip(rest_fields, rest))
            for mode in exp.modes:
                if mode == baseline:
                    continue
                grid = np.full((len(rtts), len(bws)), np.nan)
                for i, rtt in enumerate(rtts):
                    for j, bw in enumerate(bws):
                        grid[i, j] = improvement_pct(median(cells.get((bw, rtt, baseline), [])),
                                                     median(cells.get((bw, rtt, mode), [])))
                title = f"{mode} vs {baseline}" + (f" ({rest_label})" if rest_label else "")
                panels.append((title, grid))
        cap_note = ""
        if len(panels) > MAX_HEATMAPS:
            cap_note = h.note(f"{len(panels)} heat maps: showing the first {MAX_HEATMAPS}.")
            panels = panels[:MAX_HEATMAPS]
        fig = figures.heatmap_figure(panels, bws, rtts)
        caption = (f"% improvement of the median PLT of each protocol over {baseline} in every bandwidth x RTT cell: "
                   f"100 x (median({baseline}) - median(protocol)) / median({baseline}), medians over all successful "
                   "loads of the cell (pages pooled). Green: faster than the baseline; red: slower; grey: no data.")
        return (h.note(note) if note else "") + cap_note + self.figure(fig, name, caption)

    def cdfs(self, exp: Experiment, name: str) -> str:
        ok = self._ok(exp)
        if not ok:
            return h.note("No successful page loads: nothing to plot.")
        conditions = [c for c in exp.conditions if any(r.condition == c for r in ok)]
        shown, note = self._capped(exp, conditions, MAX_PANELS)
        panels = []
        for cond in shown:
            by_mode: dict[str, list[float]] = defaultdict(list)
            for run in ok:
                if run.condition == cond:
                    by_mode[run.mode].append(run.plt_ms / 1000)  # type: ignore[operator]
            panels.append((condition_label(exp, cond), dict(by_mode)))
        fig = figures.cdf_figure(panels, exp.modes)
        return note + self.figure(fig, name, "Empirical CDF of PLT per protocol, all pages pooled, one panel per "
                                  "condition.")

    def connections(self, exp: Experiment, name: str) -> str:
        ok = [r for r in self._ok(exp) if r.n_connections is not None]
        if not ok:
            return h.note("No page-load results with connections recorded.")
        counts: dict[tuple[str, str], list[int]] = defaultdict(list)
        for run in ok:
            counts[(run.page, run.mode)].append(run.n_connections)  # type: ignore[arg-type]
        conn_rows = self.store.query(
            "SELECT run_key, bytes FROM connections WHERE experiment_id = ? ORDER BY run_key, idx", [exp.id])
        by_run: dict[str, list[int]] = defaultdict(list)
        for row in conn_rows:
            by_run[row["run_key"]].append(row["bytes"] or 0)
        per_cell: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
        for run in ok:
            values = sorted(by_run.get(run.run_key, []), reverse=True)
            total = sum(values)
            if total > 0:
                per_cell[(run.page, run.mode)].append([v / total for v in values])
        shares: dict[tuple[str, str], list[float]] = {}
        for cell, lists in per_cell.items():
            width = max(len(x) for x in lists)
            padded = np.array([x + [0.0] * (width - len(x)) for x in lists])
            shares[cell] = list(padded.mean(axis=0))
        fig = figures.connections_figure(exp.pages, exp.modes, {k: float(np.median(v)) for k, v in counts.items()},
                                         shares)
        caption = ("Left: median number of connections per page load. Right: share of the page's response bytes "
                   "carried by each connection, connections ranked by bytes within a load (darkest = largest), "
                   "mean over loads. Successful loads, all conditions pooled.")
        return self.figure(fig, name, caption)

    def cell_table(self, exp: Experiment, name: str) -> str:
        if not exp.runs:
            return h.note("No runs.")
        cells: dict[tuple[tuple[Any, ...], str, str], list[Run]] = defaultdict(list)
        for run in exp.runs:
            cells[(run.condition, run.page, run.mode)].append(run)
        order = {c: i for i, c in enumerate(exp.conditions)}
        page_order = {p: i for i, p in enumerate(exp.pages)}
        mode_order = {m: i for i, m in enumerate(exp.modes)}
        rows = []
        for (cond, page, mode) in sorted(cells, key=lambda k: (order[k[0]], page_order[k[1]], mode_order[k[2]])):
            runs = cells[(cond, page, mode)]
            s = summarize([r.plt_ms for r in runs if r.status == "ok" and r.plt_ms is not None])
            failed = sum(1 for r in runs if r.status != "ok")
            ci = (f"{h.num(s.ci_low)} – {h.num(s.ci_high)} <small>({s.ci_coverage:.1%})</small>"
                  if s.ci_low is not None and s.ci_coverage is not None else "n/a")
            mean_ci = (f"{h.num(s.mean_ci_low)} – {h.num(s.mean_ci_high)}"
                       if s.mean_ci_low is not None and s.mean_ci_high is not None else "n/a")
            rows.append([h.esc(condition_label(exp, cond)), h.esc(page), h.esc(mode), str(s.n), str(failed),
                         h.num(s.median), h.num(s.mean), h.num(s.q1), h.num(s.q3), mean_ci, ci])
        caption = (f"PLT in ms of successful loads per condition x page x protocol. Q1/Q3: linear interpolation. "
                   f"CI of mean: Student-t {CI_LEVEL:.0%} interval (n >= 2). "
                   f"CI of median: distribution-free {CI_LEVEL:.0%} interval from order statistics "
                   "(binomial, exact coverage in brackets); n/a when n < 6, where no such interval exists.")
        return (f'<p class="caption">{h.esc(caption)}</p>' +
                h.table(["condition", "page", "mode", "n ok", "n failed", "median", "mean", "Q1", "Q3",
                         f"{CI_LEVEL:.0%} CI of mean", f"{CI_LEVEL:.0%} CI of median"], rows,
                        numeric_from=3, css="data"))

    def engine_vs_browser(self, exp: Experiment, name: str) -> str:
        """Median PLT of the engine and of Chromium per condition x page x mode (docs/browser.md)."""
        at = exp.varying.index("client")
        network = {r["run_key"]: r["net"] for r in self.store.query(
            "SELECT run_key, max(finished_ms) AS net FROM objects WHERE experiment_id = ? GROUP BY run_key", [exp.id])}
        rows = [cal.LoadRow(condition=run.condition[:at] + run.condition[at + 1:], page=run.page, mode=run.mode,
                            client=str(run.params.get("client")), plt_ms=run.plt_ms,
                            network_ms=network.get(run.run_key), connections=run.n_connections)
                for run in exp.runs if run.status == "ok" and run.plt_ms is not None]
        cells = cal.calibrate(rows)
        if not cells:
            return h.note("No page and mode loaded successfully by both the engine and Chromium.")
        others = [n for n in exp.varying if n != "client"]

        def label(condition: tuple[Any, ...]) -> str:
            return ", ".join(fmt_param(n, v) for n, v in zip(others, condition, strict=True)) or "all runs"

        table = [[h.esc(label(c.condition)), h.esc(c.page), h.esc(c.mode), h.num(c.engine_ms, 0),
                  h.num(c.chromium_ms, 0), f"{c.ratio:.2f}" + ("" if c.agrees else " *"),
                  h.num(c.chromium_network_ms, 0), h.num(c.after_network_ms, 0), h.num(c.engine_connections, 0),
                  h.num(c.chromium_connections, 0), f"{c.n_engine}/{c.n_chromium}"] for c in cells]
        summary = [[h.esc(label(cond)), h.esc(mode), f"{ratio:.2f}"]
                   for (cond, mode), ratio in cal.per_mode(cells).items()]
        caption = ("Median PLT (ms) of the page-load engine and of Chromium on the same page, link and protocol; "
                   "ratio = Chromium / engine (* outside 0.85-1.15). Chromium's network end: its last object's last "
                   "byte (ms since the root request); after network: its load event minus that (parse, style, layout, "
                   "script, load event). Connections: median per load (Chromium keeps separate pools for CORS "
                   "requests).")
        return (f'<p class="caption">{h.esc(caption)}</p>' +
                h.table(["condition", "page", "mode", "engine", "Chromium", "ratio", "Chromium network end",
                         "after network", "engine conns", "Chromium conns", "n"], table, numeric_from=3, css="data") +
                '<p class="caption">Ratio per mode: geometric mean over the pages.</p>' +
                h.table(["condition", "mode", "ratio"], summary, numeric_from=2, css="data"))

    def failed_table(self, exp: Experiment, name: str) -> str:
        failed = [r for r in exp.runs if r.status != "ok"]
        if not failed:
            return h.note("Every run succeeded.")
        rows = []
        for run in failed:
            error = run.error or ""
            short = error if len(error) <= 300 else error[:300] + "…"
            rows.append([f"<code>{h.esc(run.run_key[:16])}</code>", h.esc(condition_label(exp, run.condition)),
                         h.esc(run.page), h.esc(run.mode), h.esc(run.repetition), h.esc(run.status),
                         f'<span title="{h.esc(error)}">{h.esc(short)}</span>'])
        return h.table(["run", "condition", "page", "mode", "rep", "status", "error"], rows, css="data")

    def link_table(self, exp: Experiment, name: str) -> str:
        rows = self.store.query("SELECT * FROM link_counters WHERE experiment_id = ?", [exp.id])
        if not rows:
            return h.note("No link counters recorded.")
        cond_of = {r.run_key: r.condition for r in exp.runs}
        groups: dict[tuple[tuple[Any, ...], str], list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            if row["run_key"] in cond_of:
                groups[(cond_of[row["run_key"]], row["link"])].append(row)
        order = {c: i for i, c in enumerate(exp.conditions)}
        table = []
        for (cond, link) in sorted(groups, key=lambda k: (order.get(k[0], 0), k[1])):
            items = groups[(cond, link)]
            arrived = sum(r["arrived_packets"] or 0 for r in items)
            if arrived == 0 and all(r["configured_rate_mbps"] is None and not r["configured_loss_pct"] for r in items):
                continue  # an idle ideal link says nothing
            lost = sum(r["dropped_random_loss_packets"] or 0 for r in items)
            drops = lost + sum((r["dropped_queue_full_packets"] or 0) + (r["dropped_aqm_packets"] or 0) for r in items)
            rates = [r["achieved_rate_mbps"] for r in items if r["achieved_rate_mbps"] is not None]
            cfg_rate = _distinct(r["configured_rate_mbps"] for r in items)
            cfg_delay = _distinct(r["configured_delay_ms"] for r in items)
            cfg_loss = _distinct(r["configured_loss_pct"] for r in items)
            if arrived > 0:
                low, high = clopper_pearson(lost, arrived, 0.95)
                achieved = f"{100 * lost / arrived:.3f} <small>[{100 * low:.3f}, {100 * high:.3f}]</small>"
                target = cfg_loss[0] if len(cfg_loss) == 1 else None
                check = ("-" if target is None else
                         ('<span class="ok">inside</span>' if 100 * low <= target <= 100 * high
                          else '<span class="bad">outside</span>'))
                drop_pct = f"{100 * drops / arrived:.3f}"
            else:
                achieved, check, drop_pct = "-", "-", "-"
            peak = max(rates) if rates else None
            util = (f"{100 * peak / cfg_rate[0]:.0f}%" if peak is not None and len(cfg_rate) == 1 and cfg_rate[0]
                    else "-")
            table.append([h.esc(condition_label(exp, cond)), f"<code>{h.esc(link)}</code>", str(len(items)),
                          _fmt_values(cfg_rate, 3), h.num(float(np.mean(rates)) if rates else None, 3), h.num(peak, 3),
                          util, _fmt_values(cfg_delay, 1), _fmt_values(cfg_loss, 3), achieved, check, drop_pct,
                          f"{arrived:,}"])
        if not table:
            return h.note("The link counters show no traffic.")
        caption = ("Per condition and link direction, pooled over the condition's runs. Achieved rate: delivered IP "
                   "bytes x 8 / run duration (a mean throughput, not the capacity); peak: the largest run mean; "
                   "peak/configured in the next column. Achieved loss: random-loss drops / arrived packets, with "
                   "its 95% Clopper-Pearson interval; 'inside' when the configured loss lies in it. Drops: every "
                   "cause (random loss, queue full, AQM).")
        return (f'<p class="caption">{h.esc(caption)}</p>' +
                h.table(["condition", "link", "runs", "configured Mbit/s", "achieved Mbit/s (mean)", "peak Mbit/s",
                         "peak/configured", "configured delay ms", "configured loss %", "achieved loss % [95% CI]",
                         "loss check", "drops % (all causes)", "arrived packets"], table, numeric_from=2, css="data"))


def _distinct(values: Iterable[Any]) -> list[Any]:
    return sorted({v for v in values if v is not None}, key=h.sort_key)


def _fmt_values(values: Sequence[Any], digits: int) -> str:
    if not values:
        return "-"
    return ", ".join(f"{v:.{digits}f}".rstrip("0").rstrip(".") if isinstance(v, float) else h.esc(v) for v in values)


# ---------------------------------------------------------------------------------------------

def build_report(results_dir: Path, out_dir: Path | None = None, baseline: str | None = None,
                 experiments: Sequence[str] | None = None, waterfalls: Sequence[str] = ()) -> Path:
    """Write `<out_dir>/index.html` and `<out_dir>/figures/*`; returns the HTML path. `waterfalls`:
    run keys (or unique prefixes) whose waterfalls are drawn besides the chosen ones."""
    results_dir = Path(results_dir)
    out_dir = Path(out_dir) if out_dir is not None else results_dir / "report"
    with ResultsStore(results_dir, read_only=True) as store:
        rows = store.query("SELECT * FROM experiments ORDER BY created, id")
        if experiments:
            known = {r["id"] for r in rows}
            missing = [e for e in experiments if e not in known]
            if missing:
                raise ReportError(f"{store.path}: no experiment {', '.join(missing)} "
                                  f"(recorded: {', '.join(sorted(known)) or 'none'})")
            rows = [r for r in rows if r["id"] in set(experiments)]
        if not rows:
            raise ReportError(f"{store.path}: the store holds no experiment yet")
        loaded = [load_experiment(store, row) for row in rows]
        if baseline is not None and not any(baseline in e.modes for e in loaded):
            modes = sorted({m for e in loaded for m in e.modes}, key=mode_sort_key)
            raise ReportError(f"--baseline: no runs with mode {baseline!r} (modes: {', '.join(modes) or 'none'})")
        try:
            wf.check_requested(loaded, waterfalls)
        except wf.WaterfallError as exc:
            raise ReportError(str(exc)) from exc
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReportError(f"{out_dir}: cannot create the report directory ({exc})") from exc
        builder = ReportBuilder(store, out_dir, baseline)
        builder.waterfall_runs = list(waterfalls)
        body = [builder.experiment_section(exp) for exp in loaded]
        connections = ga.connections_page(store, loaded, out_dir)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    title = "protolab report: " + ", ".join(e.name for e in loaded)
    nav = "".join(f'<li><a href="#exp-{h.esc(re.sub(r"[^A-Za-z0-9_-]+", "-", e.id).strip("-") or "experiment")}">'
                  f"{h.esc(e.name)}</a> ({len(e.runs)} runs)</li>" for e in loaded)
    document = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{h.esc(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{CSS}</style></head>
<body>
<h1>{h.esc(title)}</h1>
<p>Generated {h.esc(generated)} from <code>{h.esc(results_dir.resolve() / "results.duckdb")}</code>
(store schema version {SCHEMA_VERSION}); figures also in <code>figures/</code> as SVG and PNG.</p>
<nav><ul>{nav}</ul></nav>
{'<p><a href="connections.html">QUIC_info and TCP_info of every connection</a></p>' if connections else ''}
{"".join(body)}
</body></html>
"""
    index = out_dir / "index.html"
    try:
        index.write_text(document, encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"{index}: cannot write the report ({exc})") from exc
    return index
