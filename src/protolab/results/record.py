"""`RunRecord`: everything one run produced, and the rows it gives the store.

The executor of a workload fills the documents it collected (page load, bulk transfers, RPM
result, samples, link parameters and counters, pair summaries); the runner adds the run's
timing, its analysis and fidelity record. `rows()` is the only place where a run becomes rows:
the store converts the values to its column types and writes them, nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from protolab.results.bulk import BulkTransfer, bulk_rows
from protolab.results.documents import plain
from protolab.results.generated.control_reply import Counters
from protolab.results.generated.link_params import LinkParams
from protolab.results.generated.load_result import LoadResult
from protolab.results.generated.rpm_result import RpmResult
from protolab.results.link import link_rows
from protolab.results.load import load_rows
from protolab.results.rpm import RpmContext, rpm_rows
from protolab.results.samples import sample_store_rows

RUN_STATUSES = ("ok", "failed", "timeout")

Rows = dict[str, list[dict[str, Any]]]


@dataclass
class Fidelity:
    """The run's fidelity record (protolab.analysis.fidelity): delay error and what was off."""

    late_mean_us: float | None = None
    late_p999_us: float | None = None
    late_max_us: float | None = None
    flags: str | None = None


@dataclass
class RunRecord:
    """One run: what its executor collected and what the runner added (see the module docstring).

    `sides`, `flow_bins` and `connection_states` are summaries computed from the artifacts (pair
    fairness, throughput bins, controller states), already in their tables' shape; `analysis`
    is a `protolab.analysis.analyze.RunAnalysis` (QUIC_info/TCP_info, losses, overhead)."""

    run_key: str
    params: dict[str, Any]
    status: str = "failed"
    error: str | None = None
    started_unix_ns: int = 0
    duration_s: float = 0.0
    page_load: LoadResult | None = None
    bulk: list[BulkTransfer] = field(default_factory=list)
    rpm: RpmResult | None = None
    rpm_context: RpmContext = field(default_factory=RpmContext)
    link_config: dict[str, LinkParams] = field(default_factory=dict)
    link_counters: Counters | None = None
    samples: list[dict[str, Any]] = field(default_factory=list)
    sides: list[dict[str, Any]] = field(default_factory=list)
    flow_bins: list[dict[str, Any]] = field(default_factory=list)
    connection_states: list[dict[str, Any]] = field(default_factory=list)
    interop: list[dict[str, Any]] = field(default_factory=list)  # interop_results rows (protolab.run.interop)
    analysis: Any = None
    fidelity: Fidelity = field(default_factory=Fidelity)
    artifacts_dir: str | None = None

    def plt_ms(self) -> float | None:
        """The page load time of an ok page-load run."""
        return self.page_load.plt_ms if self.page_load is not None and self.status == "ok" else None

    def goodput_mbps(self) -> float | None:
        """The goodput of an ok single-client bulk run (its transfers summed), or of an ok
        interop run (the runner's goodput), Mbit/s."""
        if self.status == "ok" and self.interop:
            return self.interop[0].get("goodput_mbps")
        if self.status != "ok" or not self.bulk or any(t.side is not None for t in self.bulk):
            return None
        rates = [t.result.goodput_bps for t in self.bulk]
        known = [r for r in rates if r is not None]
        return sum(known) / 1e6 if len(known) == len(rates) else None

    def link_rows(self) -> list[dict[str, Any]]:
        return link_rows(self.link_config, self.link_counters, self.duration_s)

    def runs_row(self) -> dict[str, Any]:
        """The run's row in `runs`, its parameters as given (the store splits them into columns)."""
        emulator = self.link_counters.emulator if self.link_counters is not None else None
        return {
            "status": self.status, "error": self.error, "started_unix_ns": self.started_unix_ns,
            "duration_s": self.duration_s, "plt_ms": self.plt_ms(), "goodput_mbps": self.goodput_mbps(),
            "params": dict(self.params), "emulator_counters": plain(emulator),
            "late_mean_us": self.fidelity.late_mean_us, "late_p999_us": self.fidelity.late_p999_us,
            "late_max_us": self.fidelity.late_max_us, "fidelity_flags": self.fidelity.flags,
            "artifacts_dir": self.artifacts_dir,
        }

    def rows(self) -> Rows:
        """Every row of the run, by table (the run key is the store's to add)."""
        rows: Rows = {"runs": [self.runs_row()], "link_counters": self.link_rows(),
                      "transport_samples": sample_store_rows(self.samples), "pair_sides": list(self.sides),
                      "flow_bins": list(self.flow_bins), "connection_states": list(self.connection_states),
                      "interop_results": list(self.interop)}
        parts: list[Rows] = []
        if self.page_load is not None:
            parts.append(load_rows(self.page_load))
        parts += [bulk_rows(transfer) for transfer in self.bulk]
        if self.rpm is not None:
            parts.append({"rpm_results": rpm_rows(self.rpm, self.rpm_context)})
        parts += [{table: items} for table, items in analysis_rows(self.analysis)]
        for part in parts:
            for table, items in part.items():
                rows.setdefault(table, []).extend(items)
        return rows


def analysis_rows(analysis: Any) -> Iterable[tuple[str, list[dict[str, Any]]]]:
    """(table, rows) of a run's analysis (protolab.analysis.analyze.RunAnalysis), or none."""
    if analysis is None:
        return []
    return [(table, list(getattr(analysis, name))) for table, name in ANALYSIS_FIELDS.items()]


# The analysis tables and the RunAnalysis field that fills each.
ANALYSIS_FIELDS: Mapping[str, str] = {
    "connection_info": "connection_info", "loss_analysis": "losses", "loss_bursts": "loss_bursts",
    "overhead": "overhead", "analysis_notes": "notes"}
