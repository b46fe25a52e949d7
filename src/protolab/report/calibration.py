"""Engine vs browser (docs/browser.md): per condition, page and mode, the median PLT of the
page-load engine and of Chromium, their ratio, and what explains a difference: how long the
network part of Chromium's load took (last object's last byte) against its load event, and how
many connections each opened. Pure: rows in, rows out."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

from protolab.report.stats import median

ENGINE, CHROMIUM = "engine", "chromium"
AGREEMENT = (0.85, 1.15)  # a ratio outside this band gets its reasons looked at


@dataclass(frozen=True)
class LoadRow:
    """One successful page load."""

    condition: Hashable
    page: str
    mode: str
    client: str
    plt_ms: float
    network_ms: float | None  # last object finished, ms since the root request
    connections: int | None


@dataclass(frozen=True)
class Calibration:
    condition: Hashable
    page: str
    mode: str
    engine_ms: float
    chromium_ms: float
    n_engine: int
    n_chromium: int
    chromium_network_ms: float | None
    engine_connections: float | None
    chromium_connections: float | None

    @property
    def ratio(self) -> float:
        """Chromium's median PLT over the engine's."""
        return self.chromium_ms / self.engine_ms

    @property
    def after_network_ms(self) -> float | None:
        """Chromium's load event after its last byte: parse, style, layout, script, load event."""
        return None if self.chromium_network_ms is None else self.chromium_ms - self.chromium_network_ms

    @property
    def agrees(self) -> bool:
        return AGREEMENT[0] <= self.ratio <= AGREEMENT[1]


def _median_or_none(values: list[float]) -> float | None:
    return median(values) if values else None


def calibrate(rows: Iterable[LoadRow]) -> list[Calibration]:
    """One row per (condition, page, mode) that both clients loaded, in first-seen order."""
    cells: dict[tuple[Hashable, str, str], dict[str, list[LoadRow]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        cells[(row.condition, row.page, row.mode)][row.client].append(row)
    out = []
    for (condition, page, mode), by_client in cells.items():
        engine, chromium = by_client.get(ENGINE, []), by_client.get(CHROMIUM, [])
        if not engine or not chromium:
            continue
        out.append(Calibration(
            condition=condition, page=page, mode=mode,
            engine_ms=median([r.plt_ms for r in engine]), chromium_ms=median([r.plt_ms for r in chromium]),
            n_engine=len(engine), n_chromium=len(chromium),
            chromium_network_ms=_median_or_none([r.network_ms for r in chromium if r.network_ms is not None]),
            engine_connections=_median_or_none([float(r.connections) for r in engine if r.connections is not None]),
            chromium_connections=_median_or_none([float(r.connections) for r in chromium if r.connections is not None]),
        ))
    return out


def per_mode(cells: Iterable[Calibration]) -> Mapping[tuple[Hashable, str], float]:
    """Geometric mean of the ratios over the pages, per (condition, mode)."""
    logs: dict[tuple[Hashable, str], list[float]] = defaultdict(list)
    for c in cells:
        logs[(c.condition, c.mode)].append(math.log(c.ratio))
    return {key: math.exp(sum(v) / len(v)) for key, v in logs.items()}
