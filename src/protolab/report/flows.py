"""The report's flow characterization (000 Fig. 3.3) for experiments whose runs' flows are in
the store (`protolab traffic corpus`): CDFs of duration, packets, bytes and bytes per packet
per direction, H1 vs H2 vs H3, and the medians. Reads only the results store."""

from __future__ import annotations

from protolab.report import section as h
from protolab.report.section import Builder, Experiment
from protolab.traffic import characterize as ch

SOURCE = "(SELECT * FROM flows WHERE experiment_id = ?)"


def has_flows(b: Builder, exp: Experiment) -> bool:
    rows = b.store.query("SELECT count(*) AS n FROM flows WHERE experiment_id = ?", [exp.id])
    return bool(rows and rows[0]["n"])


def characterization(b: Builder, exp: Experiment, name: str) -> str:
    result = ch.characterize(b.store.con, SOURCE, "protocol", "ip", params=[exp.id])
    totals = b.store.query("SELECT count(*) AS flows, count(protocol) AS labelled, count(DISTINCT run_key) AS runs "
                           "FROM flows WHERE experiment_id = ?", [exp.id])[0]
    if not result["classes"]:
        return h.note(f"{totals['flows']} flows in the store, none labelled.")
    caption = (f"Flows of the client captures of {totals['runs']} runs (protolab traffic corpus), by the protocol "
               f"their connection spoke (the lab's truth): {totals['labelled']} of {totals['flows']} flows labelled; "
               "the rest are the closing packets of the previous run's connections. IP bytes. Compare 000 Fig. 3.3 "
               "(H1 vs H2 flows of a campus network).")
    html = b.figure(ch.figure(result, f"Flow characterization, {exp.name} (000 Fig. 3.3)"), name, caption)
    rows = [[h.esc(c), str(result["classes"][c]), *(h.num(v, 3 if "duration" in title else 0) for title, v in values)]
            for c, values in ch.median_table(result)]
    return html + h.table(["protocol", "flows", *(f"median {m.title.lower()}" for m in ch.METRICS)], rows,
                          numeric_from=1, css="data")
