"""The report's fidelity section (docs/store.md, "Fidelity"): the delay error the emulator added
in each condition's runs, and the runs whose conditions were off by more than a tolerance. It
reads only the results store."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from protolab.analysis.fidelity import LATE_MAX_LIMIT_US, LATE_P999_LIMIT_US
from protolab.report import section as h
from protolab.report.section import Builder, Experiment

MAX_FLAGGED_ROWS = 100


def fidelity(b: Builder, exp: Experiment, name: str) -> str:
    rows = b.store.query("SELECT run_key, late_mean_us, late_p999_us, late_max_us, fidelity_flags FROM runs "
                         "WHERE experiment_id = ?", [exp.id])
    runs = {r.run_key: r for r in exp.runs}
    rows = [r for r in rows if r["run_key"] in runs]
    measured = [r for r in rows if r["late_mean_us"] is not None]
    if not measured:
        return h.note("No fidelity record: these runs predate it (the emulator's delivery lateness counters).")
    by_condition: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in measured:
        by_condition[runs[r["run_key"]].condition].append(r)
    order = {c: i for i, c in enumerate(exp.conditions)}
    table = []
    for cond in sorted(by_condition, key=lambda c: order.get(c, 0)):
        items = by_condition[cond]
        flagged = sum(1 for r in items if r["fidelity_flags"])
        table.append([h.esc(h.condition_label(exp, cond)), str(len(items)),
                      h.num(float(np.median([r["late_mean_us"] for r in items])), 1),
                      h.num(max(r["late_p999_us"] or 0.0 for r in items), 0),
                      h.num(max(r["late_max_us"] or 0.0 for r in items), 0),
                      f'<span class="{"bad" if flagged else "ok"}">{flagged}</span>'])
    caption = (f"The delay error the emulator added to every packet (release time minus the model's delivery time) "
               f"per condition: the median of the runs' means, the worst run's 99.9th percentile (an upper bound, the "
               f"histogram bucket's edge) and the worst maximum. A run is flagged when its p99.9 exceeds "
               f"{LATE_P999_LIMIT_US / 1000:g} ms or its maximum {LATE_MAX_LIMIT_US / 1000:g} ms, its random loss "
               f"leaves the 99.9% interval of the configured rate, or the emulator dropped packets or records.")
    parts = [f'<p class="caption">{h.esc(caption)}</p>',
             h.table(["condition", "runs", "mean error µs (median)", "p99.9 µs (worst, at most)", "max µs (worst)",
                      "flagged runs"], table, numeric_from=1, css="data")]
    flagged_rows = [r for r in rows if r["fidelity_flags"]]
    if flagged_rows:
        listed = [[h.esc(h.condition_label(exp, runs[r["run_key"]].condition)), h.esc(runs[r["run_key"]].mode),
                   f"<code>{h.esc(r['run_key'])}</code>", h.esc(r["fidelity_flags"])]
                  for r in flagged_rows[:MAX_FLAGGED_ROWS]]
        parts.append(h.table(["condition", "mode", "run", "flags"], listed, css="data"))
        if len(flagged_rows) > MAX_FLAGGED_ROWS:
            parts.append(h.note(f"... and {len(flagged_rows) - MAX_FLAGGED_ROWS} more flagged runs "
                                "(runs.fidelity_flags in the store)."))
    return "\n".join(parts)
