"""Why two QUIC variants of one experiment differ (the demo's `h3` with protolab's Cubic against
`h3@gquic39`, 001's QUIC): the controllers' parameters as the runs recorded them
(`page_loads.config.quic_cc_canonical`) and the median PLTs measured in the experiment."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from protolab.report import section as h
from protolab.report.section import Builder, Experiment, Run, condition_label
from protolab.report.stats import median

FIRST_DATAGRAM_BYTES = 1200  # quinn's first datagram size: the unit of `iw` (docs/congestion.md)


@dataclass(frozen=True)
class Controller:
    """The parameters that set a Cubic window's start and its answer to a loss."""

    name: str
    initial_window_packets: int | None
    connections: int
    beta: float | None

    @property
    def beta_n(self) -> float | None:
        """The window's factor at a loss when emulating N connections: (N - 1 + beta) / N."""
        return None if self.beta is None else (self.connections - 1 + self.beta) / self.connections


def parse_controller(name: str, canonical: str | None) -> Controller:
    """`cubic:c=0.4,cube_factor=1,beta=0.7,n=2,iw=32,...` (the result's `quic_cc_canonical`) -> its parameters."""
    _, _, params = (canonical or "").partition(":")
    values = dict(item.partition("=")[::2] for item in params.split(",") if "=" in item)

    def number(key: str) -> float | None:
        try:
            return float(values[key])
        except (KeyError, ValueError):
            return None

    iw, n, beta = number("iw"), number("n"), number("beta")
    return Controller(name, int(iw) if iw is not None else None, int(n) if n is not None else 1, beta)


def variant_pairs(modes: Sequence[str]) -> list[tuple[str, str]]:
    """(`h3`, `h3@gquic39`) for every mode with its own QUIC controller whose plain mode also ran."""
    return [(mode.partition("@")[0], mode) for mode in modes if "@" in mode and mode.partition("@")[0] in modes]


def geometric_mean(values: Sequence[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v) and v > 0]
    return math.exp(sum(math.log(v) for v in finite) / len(finite)) if finite else None


def _controllers(builder: Builder, exp: Experiment, runs: Sequence[Run]) -> dict[str, Controller]:
    mode_of = {r.run_key: r for r in runs}
    found: dict[str, Controller] = {}
    for row in builder.store.query("SELECT run_key, config FROM page_loads WHERE experiment_id = ?", [exp.id]):
        run = mode_of.get(row["run_key"])
        if run is None or run.mode in found:
            continue
        config = json.loads(row["config"]) if isinstance(row["config"], str) else (row["config"] or {})
        found[run.mode] = parse_controller(str(config.get("quic_cc") or run.params.get("quic_cc")),
                                           config.get("quic_cc_canonical"))
    return found


def _describe(c: Controller) -> str:
    packets = c.initial_window_packets
    iw = (f"an initial window of {packets} packets ({packets * FIRST_DATAGRAM_BYTES:,} bytes)" if packets is not None
          else "an initial window not recorded")
    loss = (f"a loss shrinks its window to {c.beta_n:.2f} of itself" if c.beta_n is not None else
            "its answer to a loss not recorded")
    who = f"emulates {c.connections} Cubic connections" if c.connections > 1 else "is one Cubic connection"
    return f"<b>{h.esc(c.name)}</b> {who}: {iw}; {loss}"


def compare(builder: Builder, exp: Experiment, name: str) -> str:
    """Per condition and page the median PLT of each QUIC variant, their ratio, and what sets them apart."""
    pairs = variant_pairs(exp.modes)
    if not pairs:
        return h.note("One QUIC controller per protocol: nothing to compare.")
    ok = [r for r in exp.runs if r.status == "ok" and r.plt_ms is not None]
    controllers = _controllers(builder, exp, ok)
    cells: dict[tuple[tuple[Any, ...], str, str], list[float]] = defaultdict(list)
    for run in ok:
        cells[(run.condition, run.page, run.mode)].append(run.plt_ms)  # type: ignore[arg-type]
    reference = "h2" if "h2" in exp.modes else None
    parts = []
    for plain, variant in pairs:
        described = [controllers[m] for m in (plain, variant) if m in controllers]
        parts.append("<p>" + "; ".join(_describe(c) for c in described) + ".</p>")
        rows, findings = [], []
        by_loss: dict[Any, float] = {}
        for condition in exp.conditions:
            ratios = []
            for page in exp.pages:
                a = median(cells.get((condition, page, plain), []))
                b = median(cells.get((condition, page, variant), []))
                ref = median(cells.get((condition, page, reference), [])) if reference else math.nan
                if not (math.isfinite(a) and math.isfinite(b)):
                    continue
                ratios.append(b / a)
                rows.append([h.esc(condition_label(exp, condition)), h.esc(page), h.num(ref, 0), h.num(a, 0),
                             h.num(b, 0), f"{b / a:.2f}", f"{a / ref:.2f}" if math.isfinite(ref) else "-",
                             f"{b / ref:.2f}" if math.isfinite(ref) else "-"])
            mean = geometric_mean(ratios)
            if mean is not None and "loss_pct" in exp.varying and len(exp.varying) == 1:
                by_loss[condition[0]] = mean
            if mean is not None:
                findings.append(f"<li>{h.esc(condition_label(exp, condition))}: {h.esc(variant)} needs "
                                f"{mean:.2f} x the median PLT of {h.esc(plain)} (geometric mean over {len(ratios)} "
                                f"pages; from {min(ratios):.2f} to {max(ratios):.2f}).</li>")
        parts.append(f"<ul>{''.join(findings)}</ul>" + _why(controllers.get(plain), controllers.get(variant)) +
                     _with_loss(by_loss, variant, plain))
        ref_head = [f"{reference} ms", f"{plain} / {reference}", f"{variant} / {reference}"] if reference else \
            ["-", "-", "-"]
        parts.append(h.table(["condition", "page", ref_head[0], f"{plain} ms", f"{variant} ms",
                              f"{variant} / {plain}", ref_head[1], ref_head[2]], rows, numeric_from=2, css="data"))
    return "\n".join(parts)


def _why(plain: Controller | None, variant: Controller | None) -> str:
    if plain is None or variant is None:
        return ""
    reasons = []
    if (plain.initial_window_packets or 0) != (variant.initial_window_packets or 0):
        reasons.append("the first round trips: a page of a few hundred kB needs fewer of them with the larger initial "
                       "window, with or without loss")
    if plain.beta_n is not None and variant.beta_n is not None and plain.beta_n != variant.beta_n:
        reasons.append("every loss: under random loss the window is cut again and again, and the smaller cut "
                       f"({1 - variant.beta_n:.0%} for {variant.name} against {1 - plain.beta_n:.0%}) keeps more "
                       "bytes in flight (001 §V-A, Fig. 3: gQUIC 39's window stays about twice H2's under 2% loss, "
                       "from its 32-segment initial window, its two-connection emulation and its faster recovery)")
    if not reasons:
        return "<p>The two controllers record the same initial window and loss response.</p>"
    return ("<p>Why they differ: " + "; and ".join(reasons) + ". Where the ratio is near 1 the load was limited by "
            "something else (the page's dependency depth, or the link's rate once both windows have grown).</p>")


def _with_loss(by_loss: dict[Any, float], variant: str, plain: str) -> str:
    """Whether the gap grows with the loss rate: then the loss response, not the start, makes it."""
    if len(by_loss) < 2:
        return ""
    low, high = min(by_loss, key=h.sort_key), max(by_loss, key=h.sort_key)
    grows = by_loss[high] < by_loss[low] - 0.05
    verdict = ("grows with the loss: most of it comes with the losses, not from the larger start alone" if grows else
               "does not grow with the loss: it comes from the start (the initial window), not from the losses")
    return (f"<p>Measured: the ratio {h.esc(variant)} / {h.esc(plain)} is {by_loss[low]:.2f} at {low:g}% loss and "
            f"{by_loss[high]:.2f} at {high:g}% loss; the gap {verdict}.</p>")
