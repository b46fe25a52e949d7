"""Per-run waterfalls of page loads (as WebPageTest draws them): one row per object, grouped by the
connection that carried it, with the connection's set-up (TCP connect, TLS or the QUIC handshake)
on its first row, then per object the wait in the client's queue, the wait for the first byte
and the receiving of the body. Built from the store's `objects` and `connections` (docs/store.md),
for the engine's loads and Chromium's alike.

Which runs: per condition x protocol, the run with the median PLT (the lower median for an even
count) of one page, the page of median size among the pages with successful loads; `protolab
report --waterfall RUN_KEY` adds any run (a unique prefix of its key is enough)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from protolab.errors import ProtolabError
from protolab.report.figures import RC
from protolab.report import section as h
from protolab.report.section import Builder, Experiment, Run, condition_label

MAX_WATERFALLS = 12  # chosen runs per experiment; requested ones are always drawn
NO_CONNECTION = -1   # objects the result assigns to no connection (failed before one was chosen)


class WaterfallError(ProtolabError):
    """A requested waterfall names no run, or more than one."""


@dataclass(frozen=True)
class Setup:
    """A connection's set-up on the load's clock (ms since the root request)."""

    start_ms: float
    connect_ms: float | None   # TCP connect (TCP and MPTCP); None for QUIC
    handshake_ms: float        # until the connection could carry requests (TCP + TLS, or QUIC)
    placed: bool               # True: the client gave no start; drawn to end at the first request


@dataclass(frozen=True)
class Row:
    """One object: when it was queued, requested, got its first byte and its last."""

    label: str
    connection: int
    queued_ms: float | None
    started_ms: float | None
    first_byte_ms: float | None
    finished_ms: float | None
    failed: bool


@dataclass(frozen=True)
class Lane:
    """A connection and the objects it carried, in request order."""

    connection: int
    label: str
    setup: Setup | None
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Waterfall:
    run_key: str
    title: str
    plt_ms: float | None
    lanes: tuple[Lane, ...]

    @property
    def received(self) -> int:
        """Objects with a receiving bar (first and last byte known)."""
        return sum(1 for lane in self.lanes for row in lane.rows
                   if row.first_byte_ms is not None and row.finished_ms is not None)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _setup(conn: dict[str, Any], first_request_ms: float | None) -> Setup | None:
    handshake = _number(conn.get("handshake_ms"))
    if handshake is None:
        return None
    connect = _number(conn.get("tcp_connect_ms"))
    start = _number(conn.get("connect_start_ms"))
    if start is not None:
        return Setup(start, connect, handshake, placed=False)
    if first_request_ms is None:
        return None
    # Chromium does not say when it began a connection: its set-up ends before its first request.
    return Setup(max(first_request_ms - handshake, 0.0), connect, handshake, placed=True)


def _row_label(obj: dict[str, Any], origins: int) -> str:
    path = str(obj.get("path") or "?")
    label = f"{obj.get('origin') or '?'}{path}" if origins > 1 else path
    return label if len(label) <= 48 else label[:22] + "…" + label[-25:]


def layout(run_key: str, title: str, plt_ms: float | None, objects: Sequence[dict[str, Any]],
           connections: Sequence[dict[str, Any]]) -> Waterfall:
    """The waterfall of one load from its `objects` and `connections` rows: lanes in the order of
    their first request, objects within a lane by request time (unrequested ones last)."""
    origins = len({o.get("origin") for o in objects})
    by_conn: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for obj in objects:
        conn = obj.get("connection")
        by_conn[int(conn) if conn is not None else NO_CONNECTION].append(obj)
    conn_rows = {int(c["idx"]): c for c in connections if c.get("idx") is not None}

    def request_time(obj: dict[str, Any]) -> float:
        started = _number(obj.get("started_ms"))
        return started if started is not None else math.inf

    lanes = []
    for conn, objs in by_conn.items():
        objs = sorted(objs, key=lambda o: (request_time(o), o.get("idx") or 0))
        rows = tuple(Row(label=_row_label(o, origins), connection=conn, queued_ms=_number(o.get("queued_ms")),
                         started_ms=_number(o.get("started_ms")), first_byte_ms=_number(o.get("first_byte_ms")),
                         finished_ms=_number(o.get("finished_ms")), failed=o.get("error") is not None)
                     for o in objs)
        info = conn_rows.get(conn, {})
        first = min((r.started_ms for r in rows if r.started_ms is not None), default=None)
        label = ("no connection" if conn == NO_CONNECTION else
                 f"#{conn} {info.get('protocol') or '?'} {info.get('origin') or ''}".strip())
        lanes.append(Lane(conn, label, _setup(info, first) if info else None, rows))
    lanes.sort(key=lambda lane: (lane.connection == NO_CONNECTION,
                                 min((r.started_ms for r in lane.rows if r.started_ms is not None), default=math.inf),
                                 lane.connection))
    return Waterfall(run_key, title, plt_ms, tuple(lanes))


CONNECT_COLOR = "#f5a623"   # WebPageTest's connect orange
TLS_COLOR = "#b05cc6"       # and its TLS purple (QUIC's handshake too)
QUEUED_COLOR = "#9a9a9a"
# Connection colours: the report's palette without its red (failures are red crosses), orange and
# purple (the connect and TLS segments).
CONNECTION_PALETTE = ["#1f77b4", "#2ca02c", "#17becf", "#8c564b", "#bcbd22", "#7f7f7f", "#e377c2"]
BAR_HEIGHT = 0.62


def draw(waterfall: Waterfall, last_ms: float | None = None) -> Figure:
    """The waterfall as a figure: time (s) across up to `last_ms` (default: its own last event), one
    row per object top-down; every receiving bar carries the gid `wf-receive-<n>` (the SVG's
    element ids), so a reader can count them."""
    n_rows = sum(len(lane.rows) for lane in waterfall.lanes)
    with rc_context(RC):
        fig = Figure(figsize=(11, 1.3 + 0.19 * n_rows), layout="constrained")
        ax = fig.subplots()
        y, received = 0, 0
        labels: list[str] = []
        for lane_index, lane in enumerate(waterfall.lanes):
            color = ("#c00000" if lane.connection == NO_CONNECTION
                     else CONNECTION_PALETTE[lane_index % len(CONNECTION_PALETTE)])
            top = y
            if lane_index % 2 == 0:
                ax.axhspan(top - 0.5, top + len(lane.rows) - 0.5, color="#eef2f7", zorder=0, linewidth=0)
            ax.text(1.0, top - 0.45, lane.label, transform=ax.get_yaxis_transform(), ha="right", va="top",
                    fontsize=7, color=color, zorder=5)
            if lane.setup is not None:
                _draw_setup(ax, lane.setup, top)
            for row in lane.rows:
                received += _draw_row(ax, row, y, color, received)
                labels.append(row.label)
                y += 1
        if waterfall.plt_ms is not None:
            ax.axvline(waterfall.plt_ms / 1000, color="black", linestyle="--", linewidth=0.9)
        ax.set_yticks(range(len(labels)), labels, fontsize=6.5)
        ax.set_ylim(len(labels) - 0.5, -0.9)
        # room on the right for the connections' labels
        ax.set_xlim(0, 1.2 * (last_ms or last_event_ms(waterfall)) / 1000)
        ax.set_xlabel("time since the root request (s)")
        ax.grid(axis="y", visible=False)
        ax.set_title(waterfall.title)
        handles = [Patch(facecolor=CONNECT_COLOR, label="TCP connect"),
                   Patch(facecolor=TLS_COLOR, label="TLS / QUIC handshake"),
                   Line2D([], [], color=QUEUED_COLOR, linewidth=1.5, label="queued in the client"),
                   Patch(facecolor=CONNECTION_PALETTE[0], alpha=0.3, label="waiting for the first byte"),
                   Patch(facecolor=CONNECTION_PALETTE[0], label="receiving"),
                   Line2D([], [], color="black", linestyle="--", label="PLT")]
        fig.legend(handles=handles, loc="outside upper center", ncols=len(handles), frameon=False)
    return fig


def last_event_ms(waterfall: Waterfall) -> float:
    times = [t for lane in waterfall.lanes for row in lane.rows
             for t in (row.queued_ms, row.started_ms, row.first_byte_ms, row.finished_ms) if t is not None]
    return max([*times, waterfall.plt_ms or 0.0, 1.0])


def _draw_setup(ax: Any, setup: Setup, y: int) -> None:
    hatch = "////" if setup.placed else None
    edge = 0.5 if setup.placed else 0.0  # matplotlib draws no hatch on a patch without an edge
    tls_start = setup.start_ms + (setup.connect_ms or 0.0)
    if setup.connect_ms is not None:
        ax.barh(y, setup.connect_ms / 1000, left=setup.start_ms / 1000, height=BAR_HEIGHT, color=CONNECT_COLOR,
                hatch=hatch, edgecolor="white", linewidth=edge, zorder=3)
    tls = setup.handshake_ms - (setup.connect_ms or 0.0)
    if tls > 0:
        ax.barh(y, tls / 1000, left=tls_start / 1000, height=BAR_HEIGHT, color=TLS_COLOR, hatch=hatch,
                edgecolor="white", linewidth=edge, zorder=3)


def _draw_row(ax: Any, row: Row, y: int, color: str, received: int) -> int:
    """Draw one object's row; 1 when it got a receiving bar."""
    if row.queued_ms is not None and row.started_ms is not None and row.started_ms > row.queued_ms:
        ax.hlines(y, row.queued_ms / 1000, row.started_ms / 1000, color=QUEUED_COLOR, linewidth=1.2, zorder=2)
    if row.started_ms is not None and row.first_byte_ms is not None:
        ax.barh(y, (row.first_byte_ms - row.started_ms) / 1000, left=row.started_ms / 1000, height=BAR_HEIGHT,
                color=color, alpha=0.3, linewidth=0, zorder=3)
    drew = 0
    if row.first_byte_ms is not None and row.finished_ms is not None:
        bars = ax.barh(y, max(row.finished_ms - row.first_byte_ms, 0.0) / 1000, left=row.first_byte_ms / 1000,
                       height=BAR_HEIGHT, color=color, linewidth=0, zorder=4)
        bars.patches[0].set_gid(f"wf-receive-{received + 1}")
        drew = 1
    if row.failed:
        at = next((t for t in (row.finished_ms, row.first_byte_ms, row.started_ms, row.queued_ms) if t is not None),
                  0.0)
        ax.plot([at / 1000], [y], marker="x", color="#c00000", markersize=5, zorder=5)
    return drew


def median_page(exp: Experiment, ok: Sequence[Run]) -> str | None:
    """The page of median size (the smaller of the two middle ones) among pages with successful loads."""
    pages = [p for p in exp.pages if any(r.page == p for r in ok)]
    return pages[(len(pages) - 1) // 2] if pages else None


def choose_runs(exp: Experiment) -> tuple[str | None, list[Run]]:
    """Per condition x mode, the successful run of the median page with the median PLT."""
    ok = [r for r in exp.runs if r.status == "ok" and r.plt_ms is not None and r.page != h.NO_PAGE]
    page = median_page(exp, ok)
    chosen = []
    for condition in exp.conditions:
        for mode in exp.modes:
            cell = sorted((r for r in ok if r.page == page and r.condition == condition and r.mode == mode),
                          key=lambda r: (r.plt_ms, r.run_key))
            if cell:
                chosen.append(cell[(len(cell) - 1) // 2])
    return page, chosen


def find_runs(exp: Experiment, requested: Sequence[str]) -> list[Run]:
    """The experiment's runs named by `requested` (full keys or unique prefixes); keys of other
    experiments are left to them."""
    found = []
    for key in requested:
        matches = [r for r in exp.runs if r.run_key.startswith(key)]
        if len(matches) > 1:
            raise WaterfallError(f"--waterfall {key}: {len(matches)} runs of experiment {exp.id} start with it "
                                 f"({', '.join(r.run_key for r in matches[:4])}, ...); give more of the key")
        found.extend(matches)
    return found


def check_requested(experiments: Sequence[Experiment], requested: Sequence[str]) -> None:
    for key in requested:
        if not any(r.run_key.startswith(key) for exp in experiments for r in exp.runs):
            raise WaterfallError(f"--waterfall {key}: no run of the reported experiments has this key")


def load(builder: Builder, exp: Experiment, run: Run, title: str) -> Waterfall:
    objects = builder.store.query(
        "SELECT idx, origin, path, connection, queued_ms, started_ms, first_byte_ms, finished_ms, error "
        "FROM objects WHERE experiment_id = ? AND run_key = ? ORDER BY idx", [exp.id, run.run_key])
    connections = builder.store.query(
        "SELECT idx, origin, protocol, connect_start_ms, tcp_connect_ms, handshake_ms "
        "FROM connections WHERE experiment_id = ? AND run_key = ? ORDER BY idx", [exp.id, run.run_key])
    return layout(run.run_key, title, run.plt_ms, objects, connections)


def _title(exp: Experiment, run: Run) -> str:
    client = run.params.get("client")
    who = f", {client}" if client and client != "engine" else ""
    plt = f"PLT {run.plt_ms / 1000:.2f} s" if run.plt_ms is not None else run.status
    return (f"{run.mode}{who} · {run.page} · {condition_label(exp, run.condition)} · rep {run.repetition} · "
            f"{plt} · run {run.run_key[:12]}")


CAPTION = (
    "per condition and protocol the run with the median PLT (the lower median for an even count). One row per "
    "object, grouped by connection (shaded bands, in the order of their first request); on a connection's first row "
    "its set-up: TCP connect (orange) and TLS (purple), or the QUIC handshake (purple; Chromium gives TCP connect "
    "and TLS as one; hatched where the client gave no start time, drawn to end at the connection's first request). "
    "Per object: queued in the client (grey line), request sent to first byte (light), first to last byte (dark); "
    "red cross: failed. Dashed line: PLT. The runs of one condition share a time axis. "
    "<code>protolab report --waterfall RUN_KEY</code> draws any run.")


def section(builder: Builder, exp: Experiment, name: str, requested: Sequence[str] = ()) -> str:
    """The waterfalls of the chosen runs and of the requested ones (`--waterfall`)."""
    page, chosen = choose_runs(exp)
    extra = [r for r in find_runs(exp, requested) if r not in chosen]
    if not chosen and not extra:
        return h.note("No successful page load with objects recorded: no waterfall.")
    parts = []
    note = ""
    if len(chosen) > MAX_WATERFALLS:
        note = h.note(f"{len(chosen)} condition x protocol cells: waterfalls of the first {MAX_WATERFALLS}; "
                      "protolab report --waterfall RUN_KEY draws any other run.")
        chosen = chosen[:MAX_WATERFALLS]
    if chosen:
        parts.append(f'<p class="caption">Page {h.esc(page)} (the page of median size): {CAPTION}</p>' + note)
    loaded = [(run, load(builder, exp, run, _title(exp, run))) for run in [*chosen, *extra]]
    # The chosen runs of a condition share one time axis, so the protocols compare at a glance.
    common: dict[tuple[Any, ...], float] = defaultdict(float)
    for run, w in loaded:
        if run in chosen and w.lanes:
            common[run.condition] = max(common[run.condition], last_event_ms(w))
    for index, (run, waterfall) in enumerate(loaded):
        if not waterfall.lanes:
            parts.append(h.note(f"Run {run.run_key}: no objects recorded."))
            continue
        caption = ("Requested with --waterfall. " if run in extra else "") + (
            f"Waterfall of run {run.run_key}: {waterfall.received} objects received on "
            f"{sum(1 for lane in waterfall.lanes if lane.connection != NO_CONNECTION)} connections.")
        figure = draw(waterfall, common[run.condition] if run in chosen else None)
        parts.append(builder.figure(figure, f"{name}-{index + 1}", caption))
    return "\n".join(parts)
