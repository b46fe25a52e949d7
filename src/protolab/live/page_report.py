"""The page of `protolab live analyze` (docs/live.md, "Analyses (003 ch. 7)"): 003 ch. 7's figures
drawn from a live store with the report's helpers (`report.figures`: matplotlib figures saved as
SVG and PNG; `report.section`: the page's CSS and tables), each with its medians and shares and
003's numbers beside ours, and the recovered-against-true comparison of a lab fleet."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from protolab.files import write_text_atomically
from protolab.live.analysis import (
    CLI,
    DIRECTIONS,
    PAGE,
    SEED_003,
    LiveTest,
    factors,
    fig_7_1_tests,
    quic_usage_by_browser,
    recovered_vs_true,
    recovered_vs_true_by_client_and_link,
    summary,
    without_outliers,
)
from protolab.live.analyze import LoadedStore
from protolab.report.figures import PALETTE, RC, save_figure
from protolab.report.section import CSS, esc, num, table
from protolab.report.stats import ecdf

ALPHA = 0.35  # 003 draws its scatter plots at 20% opacity; a small fleet needs a little more to be seen

FLEET_STATEMENT = (
    "These distributions are those of the tests in this store. For a lab fleet they are the fleet's: "
    "its access links are drawn from a design chosen here (rates, RTTs, buffers, losses, browsers), "
    "not sampled from the internet's users, so medians and shares describe that design and are not "
    "estimates of what 003's volunteers, or any population of users, experience. Only the recovered-vs-true "
    "comparison, which holds per test, says something beyond the design: how well the analyses read the truth.")


def _figure(width: float, height: float, panels: int) -> tuple[Figure, list[Axes]]:
    with rc_context(RC):
        fig = Figure(figsize=(width, height), layout="constrained")
        axes = list(fig.subplots(1, panels, squeeze=False).flat)
    return fig, axes


def _cdf(ax: Axes, values: Sequence[float], label: str, color: str) -> None:
    xs, ys = ecdf(values)
    if xs.size:
        ax.step(np.concatenate([[xs[0]], xs]), np.concatenate([[0.0], ys]), where="post", color=color, label=label)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("CDF")


def quic_usage_figure(tests: Sequence[LiveTest]) -> Figure:
    """Fig. 7.1 from the page's tests when there are any (`fig_7_1_tests`)."""
    tests = fig_7_1_tests(tests)
    fig, (left, right) = _figure(10, 3.2, 2)
    shares = [100 * t.quic_share for t in tests if t.quic_share is not None]
    left.hist(shares, bins=np.linspace(0, 100, 11), color=PALETTE[0], edgecolor="black")
    left.set_xlabel("requests over HTTP/3 in a test (%)")
    left.set_ylabel("tests")
    left.set_title("(a) QUIC usage per test")
    usage = quic_usage_by_browser(tests)
    names = list(usage)
    bottom = np.zeros(len(names))
    for kind, color in (("none", PALETTE[1]), ("some", PALETTE[3]), ("all", PALETTE[2])):
        counts = np.array([usage[n][kind] for n in names], dtype=float)
        right.bar(names, counts, bottom=bottom, color=color, edgecolor="black", label=f"{kind} over HTTP/3")
        bottom += counts
    right.set_ylabel("tests")
    right.set_title("(b) QUIC usage per browser")
    right.legend(frameon=False, fontsize=8)
    return fig


def factor_figure(tests: Sequence[LiveTest]) -> Figure:
    fig, axes = _figure(12, 3.2, 4)
    for column, direction in enumerate(DIRECTIONS):
        values = factors(tests, direction)
        for ax, zoom in ((axes[column], False), (axes[2 + column], True)):
            _cdf(ax, [v for v in values if not zoom or v < 25], "ours", PALETTE[column])
            ax.axvline(3.0, color="gray", linestyle="--", linewidth=1, label="003's median (about 3)")
            ax.axvline(5.0, color="gray", linestyle=":", linewidth=1, label="5 (003: 30% above)")
            ax.set_xlabel("factor of increase R_U/R_L")
            ax.set_title(f"{direction}{', factors below 25' if zoom else ''}")
    axes[0].legend(frameon=False, fontsize=7)
    return fig


def _scatter(ax: Axes, points: Sequence[tuple[float, float]], color: str, xlabel: str, title: str) -> None:
    if points:
        xs, ys = zip(*points, strict=True)
        ax.scatter(xs, ys, s=18, alpha=ALPHA, color=color, edgecolors="none")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("factor of increase R_U/R_L")
    ax.set_title(title)


def bandwidth_figure(tests: Sequence[LiveTest]) -> tuple[Figure, dict[str, tuple[int, int]]]:
    """Fig. 7.3 per direction; (kept, all) points per direction."""
    fig, axes = _figure(10, 3.2, 2)
    counts = {}
    for ax, (column, direction) in zip(axes, enumerate(DIRECTIONS), strict=True):
        points = [(s.capacity_bps / 1e6, f) for t in tests if (s := t.directions.get(direction)) is not None
                  and s.capacity_bps is not None and (f := t.factor(direction)) is not None]
        kept = without_outliers(points)
        counts[direction] = (len(kept), len(points))
        _scatter(ax, kept, PALETTE[column], f"measured {direction} capacity (Mbit/s)",
                 f"{direction} ({len(points) - len(kept)} outliers removed)")
    return fig, counts


def loss_figure(tests: Sequence[LiveTest]) -> Figure:
    fig, (left, right) = _figure(10, 3.2, 2)
    rates = [100 * r for t in tests if (r := t.loss_rate) is not None]
    _cdf(left, rates, "ours", PALETTE[0])
    left.set_xlabel("loss rate, server qlogs (%)")
    left.set_title("(a) loss rates")
    _cdf(right, [r for r in rates if r < 0.2], "ours", PALETTE[0])
    right.set_xlabel("loss rate (%)")
    right.set_title("(b) loss rates below 0.2%")
    return fig


def burst_figure(tests: Sequence[LiveTest]) -> Figure:
    fig, (left, right) = _figure(10, 3.2, 2)
    sizes = [s for t in tests for s in t.burst_sizes]
    for ax, limit, title in ((left, None, "(a) burst sizes"), (right, 50, "(b) burst sizes up to 50")):
        shown = [s for s in sizes if limit is None or s <= limit]
        top = max(shown, default=1)
        ax.hist(shown, bins=np.arange(0.5, top + 1.5, max(1, top // 50)), color=PALETTE[0], edgecolor="black",
                weights=np.full(len(shown), 1 / max(len(sizes), 1)))
        ax.set_xlabel("losses per burst (003 annex C)")
        ax.set_ylabel("share of bursts")
        ax.set_title(title)
    return fig


def spurious_figure(tests: Sequence[LiveTest]) -> Figure:
    """Fig. 7.6 for tests with the emulator's truth: the lower bound on spurious losses."""
    fig, (left, right) = _figure(10, 3.2, 2)
    points = [(100 * r, 100 * s) for t in tests if (s := t.spurious_lower_bound) is not None
              and (r := t.loss_rate) is not None]
    _cdf(left, [p[1] for p in points], "ours", PALETTE[0])
    left.set_xlabel("declared losses not dropped by the emulator (%)")
    left.set_title("(a) spurious losses, lower bound")
    if points:
        xs, ys = zip(*points, strict=True)
        right.scatter(xs, ys, s=18, alpha=ALPHA, color=PALETTE[0], edgecolors="none")
    right.set_xlabel("loss rate, server qlogs (%)")
    right.set_ylabel("spurious, lower bound (%)")
    right.set_title("(b) against the loss rate")
    return fig


def loss_factor_figure(tests: Sequence[LiveTest]) -> Figure:
    fig, axes = _figure(12, 3.2, 3)
    points = {d: [(100 * r, f) for t in tests if (r := t.loss_rate) is not None and (f := t.factor(d)) is not None]
              for d in DIRECTIONS}
    for ax, (column, direction) in zip(axes[:2], enumerate(DIRECTIONS), strict=True):
        _scatter(ax, without_outliers(points[direction]), PALETTE[column], "loss rate (%)",
                 f"{direction} (Fig. 7.7)")
    _scatter(axes[2], without_outliers([p for p in points["download"] if p[0] < 1.0]), PALETTE[0],
             "loss rate (%)", "download, loss below 1% (Fig. 7.8)")
    return fig


def idle_figure(tests: Sequence[LiveTest]) -> Figure:
    fig, axes = _figure(10, 3.2, 2)
    for ax, (column, direction) in zip(axes, enumerate(DIRECTIONS), strict=True):
        points = [(t.idle_latency_ms, f) for t in tests if t.idle_latency_ms is not None
                  and (f := t.factor(direction)) is not None]
        _scatter(ax, without_outliers(points), PALETTE[column], "idle latency (ms)", direction)
    return fig


def recovery_figure(tests: Sequence[LiveTest]) -> Figure:
    recoveries = [r for r in recovered_vs_true(tests) if r.pairs]
    fig, axes = _figure(3 * max(len(recoveries), 1), 3.2, max(len(recoveries), 1))
    for ax, (column, recovery) in zip(axes, enumerate(recoveries), strict=False):
        true, got = zip(*recovery.pairs, strict=True)
        ax.scatter(true, got, s=18, alpha=0.6, color=PALETTE[column % len(PALETTE)], edgecolors="none")
        top = max(max(true), max(got)) * 1.05 or 1.0
        ax.plot([0, top], [0, top], color="gray", linewidth=1, linestyle="--")
        ax.set_xlabel(f"true ({recovery.unit})")
        ax.set_ylabel(f"recovered ({recovery.unit})")
        ax.set_title(recovery.metric)
    return fig


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _ours_vs_003(stats: dict[str, Any]) -> str:
    """The medians and shares beside 003's (section/figure named)."""
    rows = [
        ("tests", str(stats["tests"]), "about 750", "tests"),
        ("median factor of increase, download", num(stats["median_factor_download"], 2), "about 3", "median_factor_download"),
        ("median factor of increase, upload", num(stats["median_factor_upload"], 2), "about 3", "median_factor_upload"),
        ("share of factors above 5 (both directions)", _pct(stats["share_factor_above_5"]), "30%", "share_factor_above_5"),
        ("share of tests with loss below 1%", _pct(stats["share_loss_below_1pct"]), "most", "share_loss_below_1pct"),
        ("share of tests without loss", _pct(stats["share_no_loss"]), "about half", "share_no_loss"),
        ("highest loss rate", num(stats["max_loss_pct"], 2) + "%", "19.22%", "max_loss_pct"),
        ("share of single-loss bursts", _pct(stats["share_single_loss_bursts"]), "about 40%", "share_single_loss_bursts"),
        ("share of bursts below 10 losses", _pct(stats["share_bursts_below_10"]), "more than 80%", "share_bursts_below_10"),
    ]
    return table(["quantity", "ours", "003", "003's source"],
                 [[esc(name), esc(ours), esc(theirs), esc(SEED_003[key][1])] for name, ours, theirs, key in rows],
                 numeric_from=1, css="data")


def _by_client_table(tests: Sequence[LiveTest]) -> str:
    """The chapter's medians per client kind: the page in a browser beside the CLI client."""
    kinds = [(kind, [t for t in tests if t.client_kind == kind]) for kind in (PAGE, CLI)]
    kinds = [(kind, group) for kind, group in kinds if group]
    stats = {kind: summary(group) for kind, group in kinds}
    idle = {kind: [ms for t in group if (ms := t.idle_latency_ms) is not None] for kind, group in kinds}
    rows = [["tests", *(str(stats[k]["tests"]) for k, _ in kinds)],
            ["median idle latency (ms)", *(num(_median_or_none(idle[k]), 1) for k, _ in kinds)],
            *([f"median factor of increase, {d}", *(f"{num(stats[k][f'median_factor_{d}'], 2)} "
                                                     f"(n={stats[k][f'n_factor_{d}']})" for k, _ in kinds)]
              for d in DIRECTIONS),
            ["median loss rate, server qlogs (%)", *(f"{num(stats[k]['median_loss_pct'], 2)} (n={stats[k]['n_loss']})"
                                                    for k, _ in kinds)],
            ["tests with all requests over HTTP/3", *(_pct(stats[k]["share_tests_all_h3"]) for k, _ in kinds)]]
    return table(["quantity", *(esc(k) for k, _ in kinds)], rows, numeric_from=1, css="data")


def _median_or_none(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if values else None


def _recovery_table(tests: Sequence[LiveTest]) -> str:
    """Per client kind (page, CLI) and access-link kind (wired, cellular trace, WiFi), each
    metric's errors over its tests."""
    rows = []
    for (client, kind), recoveries in recovered_vs_true_by_client_and_link(tests).items():
        for r in recoveries:
            s = r.stats()
            rows.append([esc(client), esc(kind), esc(r.metric), esc(r.unit), str(s["n"]), num(s["median_error"], 2),
                         num(s["median_abs_error"], 2), _pct(s["median_relative_error"]),
                         _pct(s["p90_abs_relative_error"]), esc(r.how)])
    return table(["client", "link", "metric", "unit", "tests", "median error", "median |error|",
                  "median relative error", "P90 |relative error|", "recovered against"], rows, numeric_from=4,
                 css="data")


class _Page:
    """Figures written into OUT/figures and the HTML parts, in order."""

    def __init__(self, out: Path) -> None:
        self.out, self.parts, self.count = out, [], 0

    def figure(self, fig: Figure, name: str, caption: str) -> None:
        self.count += 1
        svg = save_figure(fig, name, self.out / "figures", self.count)
        self.parts.append(f'<figure id="{esc(name)}"><div class="svg">{svg}</div><figcaption>{esc(caption)} '
                          f'<a href="figures/{esc(name)}.svg">SVG</a> · <a href="figures/{esc(name)}.png">PNG</a>'
                          "</figcaption></figure>")

    def add(self, html_text: str) -> None:
        self.parts.append(html_text)

    def text(self, text: str) -> None:
        self.parts.append(f"<p>{esc(text)}</p>")


def _sections(page: _Page, tests: Sequence[LiveTest], stats: dict[str, Any]) -> None:
    quic = summary(fig_7_1_tests(tests))
    source = ("the speed-test page's tests (a browser's protocols, from its Resource Timing)"
              if any(t.client_kind == PAGE for t in tests) else "all tests (no page tests: each CLI test's protocol)")
    figures: list[tuple[str, str, str, Callable[[Sequence[LiveTest]], Figure]]] = [
        ("Fig. 7.1: QUIC usage", "fig7-1-quic-usage", f"From {source}, {quic['tests']} tests. With all their "
         f"requests over HTTP/3: {_pct(quic['share_tests_all_h3'])}; with none: {_pct(quic['share_tests_no_h3'])}. "
         "003 §7.1: usage is on/off; recent Chrome and Firefox use QUIC every time.", quic_usage_figure),
        ("Fig. 7.2: the factor of increase R_U/R_L", "fig7-2-factor", f"Median download "
         f"{num(stats['median_factor_download'], 2)} (n={stats['n_factor_download']}), upload "
         f"{num(stats['median_factor_upload'], 2)} (n={stats['n_factor_upload']}); above 5: download "
         f"{_pct(stats['share_factor_above_5_download'])}, upload {_pct(stats['share_factor_above_5_upload'])}. "
         "003 §7.2: medians about 3 in both directions, 30% above 5.", factor_figure),
    ]
    for title, name, caption, draw in figures:
        page.add(f"<h2>{esc(title)}</h2>")
        page.figure(draw(tests), name, caption)
    page.add("<h2>Fig. 7.3: capacity and the factor of increase</h2>")
    fig, counts = bandwidth_figure(tests)
    page.figure(fig, "fig7-3-bandwidth", "Points with a z-score above 3 in either coordinate removed (003 §7.3); "
                + ", ".join(f"{d}: {k} of {n} kept" for d, (k, n) in counts.items())
                + ". 003: lower capacities (below 100 Mbit/s down, 25 up) had the larger increases.")
    later: list[tuple[str, str, str, Callable[[Sequence[LiveTest]], Figure]]] = [
        ("Fig. 7.4: loss rates from the server's qlogs", "fig7-4-losses", f"Tests with qlogs: {stats['n_loss']}; "
         f"median {num(stats['median_loss_pct'], 3)}%, below 1%: {_pct(stats['share_loss_below_1pct'])}, none: "
         f"{_pct(stats['share_no_loss'])}, highest {num(stats['max_loss_pct'], 2)}%. 003 §7.4: most below 1%, half "
         "without loss, highest 19.22%. Loss rate = packets declared lost over packets sent by the server "
         "(its download data and its acknowledgements).", loss_figure),
        ("Fig. 7.5: bursts of losses (003 annex C)", "fig7-5-bursts", f"{stats['bursts']} bursts; single losses "
         f"{_pct(stats['share_single_loss_bursts'])}, below 10: {_pct(stats['share_bursts_below_10'])}. 003 §7.4.1: "
         "about 40% single, more than 80% below 10. Losses closer than sRTT + RTT variance form one burst, dated "
         "when the lost packet was sent (docs/analysis.md).", burst_figure),
        ("Figs. 7.7, 7.8: losses and the factor of increase", "fig7-7-loss-factor", "z-score > 3 outliers removed. "
         "003 §7.4.3: with few losses the download latency grows (a loss-based controller, Cubic, at its server).",
         loss_factor_figure),
        ("Fig. 7.9: idle latency and the factor of increase", "fig7-9-idle", "z-score > 3 outliers removed. 003 §7.5: "
         "the largest increases come from low idle latencies.", idle_figure),
    ]
    for title, name, caption, draw in later[:2]:
        page.add(f"<h2>{esc(title)}</h2>")
        page.figure(draw(tests), name, caption)
    page.add("<h2>Fig. 7.6: spurious retransmissions</h2>")
    page.text("Not computed from the qlogs: quinn's log no acknowledgement frames, so a packet declared lost and "
              "acknowledged afterwards cannot be told from the server's qlogs (003 read quic-go's). For a fleet's "
              "tests the emulator counted the drops on the download link: declared losses beyond them are spurious, "
              "a lower bound (drops of acknowledgements count too).")
    if stats["n_spurious"]:
        page.figure(spurious_figure(tests), "fig7-6-spurious", f"Fleet tests with qlogs and losses: "
                    f"{stats['n_spurious']}; with spurious losses: {_pct(stats['share_tests_spurious'])}, at most "
                    f"{_pct(stats['max_spurious_lower_bound'])} of a test's losses. 003 §7.4.2: an on/off phenomenon, "
                    "high rates only at low loss rates.")
    for title, name, caption, draw in later[2:]:
        page.add(f"<h2>{esc(title)}</h2>")
        page.figure(draw(tests), name, caption)


def write_page(loaded: LoadedStore, out: Path, source: str) -> Path:
    """OUT/index.html with its figures; returns the page's path."""
    tests = loaded.tests
    stats = summary(tests)
    page = _Page(out)
    page.add(f"<h1>003 ch. 7 analyses of {esc(source)}</h1>")
    page.add(f'<p class="note"><b>Whose distribution.</b> {esc(FLEET_STATEMENT)}</p>')
    others = ", ".join(f"{n} {esc(s)}" for s, n in sorted(loaded.other_schemas.items())) or "none"
    page.text(f"{len(tests)} RPM tests analysed ({sum(1 for t in tests if t.truth)} with a fleet's truth); "
              f"other stored tests, not analysed here: {others}.")
    if loaded.skipped:
        page.add("<p>Left out (--skip-bad):</p><ul>" + "".join(f"<li>{esc(s)}</li>" for s in loaded.skipped) + "</ul>")
    page.add("<h2>Ours beside 003's</h2>")
    page.add(_ours_vs_003(stats))
    if len({t.client_kind for t in tests}) > 1:
        page.add("<h2>The page beside the CLI client</h2>")
        page.text("The speed-test page (headless Chromium: self probes only, its own timers) and the CLI client "
                  "(protolab-net rpm: foreign and self probes) measure differently; their medians apart.")
        page.add(_by_client_table(tests))
    _sections(page, tests, stats)
    if any(t.truth for t in tests):
        page.add("<h2>Recovered against true (the lab fleet)</h2>")
        page.add(_recovery_table(tests))
        page.figure(recovery_figure(tests), "recovered-vs-true", "Each test's recovered value against its truth; "
                    "the dashed line is equality.")
    document = (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(source)}: '
                f"003 ch. 7</title><style>{CSS}</style></head><body>\n" + "\n".join(page.parts) + "\n</body></html>\n")
    path = out / "index.html"
    write_text_atomically(path, document)
    return path
