"""Flow characterization, 000 Fig. 3.3 (`protolab traffic characterize`, and the report's section
for runs whose flows are in the store): per class (H1, H2, H3, ...), the CDFs of flow duration,
and per direction of packets, bytes and bytes per packet. docs/traffic.md, "Characterization".

The CDFs are computed by DuckDB as quantiles (values of the data, not interpolated) on a fixed
grid (0.5% steps, with the minimum and maximum), so a file of any size gives the same small
curves; drawing is separate from computing."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from protolab.traffic.duck import (
    TrafficError,
    atomic_output,
    console,
    describe_flows,
    duck_connect,
    fail,
    first_line,
    made_dir,
    sql_path,
)

SCHEMA = "protolab.traffic.characterization"
SCHEMA_VERSION = 1
BYTES_BASES = ("auto", "ip", "payload")
# Quantile grid of every CDF: 0, 0.005, ..., 1.
GRID = [i / 200 for i in range(201)]
# Class order of the curves: HTTP versions first, then the rest by name.
CLASS_ORDER = ("h1", "h2", "h3")
FIGURE = "fig3_3_characterization"


@dataclass(frozen=True)
class Metric:
    name: str
    title: str
    unit: str
    log_x: bool
    sql: Callable[[str], str]  # the value's SQL, given the bytes column prefix ("" or "payload_")


METRICS: list[Metric] = [
    Metric("duration_s", "Flow duration", "s", True, lambda b: "(last_ns - first_ns) / 1e9"),
    Metric("c2s_packets", "Packets, client to server", "packets", True, lambda b: "c2s_packets"),
    Metric("s2c_packets", "Packets, server to client", "packets", True, lambda b: "s2c_packets"),
    Metric("c2s_bytes", "Bytes, client to server", "bytes", True, lambda b: f"c2s_{b}bytes"),
    Metric("s2c_bytes", "Bytes, server to client", "bytes", True, lambda b: f"s2c_{b}bytes"),
    Metric("c2s_bytes_per_packet", "Bytes per packet, client to server", "bytes", False,
           lambda b: f"c2s_{b}bytes / nullif(c2s_packets, 0)"),
    Metric("s2c_bytes_per_packet", "Bytes per packet, server to client", "bytes", False,
           lambda b: f"s2c_{b}bytes / nullif(s2c_packets, 0)"),
]
REQUIRED = ("first_ns", "last_ns", "c2s_packets", "s2c_packets")


def bytes_basis(columns: Sequence[str], wanted: str = "auto", *, has_ip_bytes: bool = True) -> str:
    """"ip" or "payload": IP bytes when the source has them (a capture), else payload bytes
    (a Tstat import); an error naming the column when the wanted basis is missing."""
    ip = {"c2s_bytes", "s2c_bytes"} <= set(columns) and has_ip_bytes
    payload = {"c2s_payload_bytes", "s2c_payload_bytes"} <= set(columns)
    if wanted == "auto":
        if ip or payload:
            return "ip" if ip else "payload"
        raise TrafficError("field 'c2s_bytes' is missing (and no payload bytes either)")
    if wanted not in BYTES_BASES:
        raise TrafficError(f"--bytes {wanted}: expected one of {', '.join(BYTES_BASES)}")
    if not (ip if wanted == "ip" else payload):
        raise TrafficError(f"field '{'c2s_bytes' if wanted == 'ip' else 'c2s_payload_bytes'}' is missing "
                           f"or empty (--bytes {wanted})")
    return wanted


def class_order(classes: Sequence[str]) -> list[str]:
    return sorted(classes, key=lambda c: (CLASS_ORDER.index(c) if c in CLASS_ORDER else len(CLASS_ORDER), c))


def characterize(con: Any, source: str, label: str = "protocol", basis: str = "ip",
                 params: Sequence[Any] = ()) -> dict[str, Any]:
    """The characterization of the flows of the SQL relation `source` (with `params`), by the
    class in column `label` (flows without a label left out): per class the number of flows,
    and per metric the CDF (values at the quantiles of GRID) and the median."""
    prefix = "" if basis == "ip" else "payload_"
    label = '"' + label.replace('"', '""') + '"'
    grid = "[" + ", ".join(repr(q) for q in GRID) + "]"
    metrics: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for m in METRICS:
        rows = con.execute(
            f"SELECT {label}::VARCHAR AS c, count(v), quantile_disc(v, {grid}), median(v) FROM "
            f"(SELECT {label}, ({m.sql(prefix)})::DOUBLE AS v FROM {source}) "
            f"WHERE {label} IS NOT NULL AND v IS NOT NULL GROUP BY 1", list(params)).fetchall()
        curves = {}
        for c, n, values, median in rows:
            curves[c] = {"flows": int(n), "median": median, "values": [float(v) for v in values]}
            counts[c] = max(counts.get(c, 0), int(n))
        metrics[m.name] = {"title": m.title, "unit": m.unit, "by_class": {c: curves[c] for c in class_order(curves)}}
    return {"label": label.strip('"').replace('""', '"'), "bytes_basis": basis, "quantiles": GRID,
            "classes": {c: counts[c] for c in class_order(counts)}, "metrics": metrics}


def figure(result: dict[str, Any], title: str | None = None) -> Any:
    """000 Fig. 3.3 as one matplotlib Figure: duration, then per direction packets, bytes and
    bytes per packet (client to server on top, server to client below)."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    from protolab.report.figures import PALETTE, RC

    classes = list(result["classes"])
    colors = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(classes)}
    layout = [["duration_s", "c2s_packets", "c2s_bytes", "c2s_bytes_per_packet"],
              [None, "s2c_packets", "s2c_bytes", "s2c_bytes_per_packet"]]
    by_name = {m.name: m for m in METRICS}
    with rc_context(RC):
        fig = Figure(figsize=(13, 6))
        axes = fig.subplots(2, 4)
        for r, row in enumerate(layout):
            for col, name in enumerate(row):
                ax = axes[r][col]
                if name is None:
                    ax.axis("off")
                    lines = [f"{c}: {n} flows" for c, n in result["classes"].items()]
                    basis = "IP bytes" if result["bytes_basis"] == "ip" else "payload bytes"
                    ax.text(0.02, 0.95, "\n".join([*lines, "", f"bytes: {basis}"]), va="top", fontsize=9,
                            transform=ax.transAxes)
                    continue
                metric = result["metrics"][name]
                for c, curve in metric["by_class"].items():
                    ax.plot(curve["values"], result["quantiles"], color=colors[c], label=c, drawstyle="steps-post")
                if by_name[name].log_x and any(v > 0 for curve in metric["by_class"].values() for v in curve["values"]):
                    ax.set_xscale("symlog", linthresh=1e-3 if name == "duration_s" else 1)
                ax.set_ylim(0, 1.01)
                ax.set_xlabel(f"{metric['title'].lower()} ({metric['unit']})", fontsize=8)
                ax.set_ylabel("CDF", fontsize=8)
                ax.set_title(metric["title"], fontsize=9)
                ax.tick_params(labelsize=7)
        if classes:
            axes[0][0].legend(fontsize=8)
        fig.suptitle(title or f"Flow characterization by {result['label']} (000 Fig. 3.3)")
        fig.tight_layout()
    return fig


def characterize_file(flows: Path, out_dir: Path, label: str = "protocol", basis: str = "auto",
                      memory_limit: str = "4GB") -> dict[str, Any]:
    """`protolab traffic characterize`: characterization.json and the figure (PNG, SVG) in
    OUT_DIR, written only if everything succeeds; returns the summary."""
    import duckdb
    from matplotlib import rc_context

    from protolab.report.figures import RC

    with duckdb.connect() as probe:
        types = describe_flows(probe, flows)
    for name in (*REQUIRED, label):
        if name not in types:
            raise TrafficError(f"{flows}: field '{name}' is missing (a protolab.flows file has it)")
    source = f"read_parquet('{sql_path(flows)}')"
    targets = [out_dir / "characterization.json", out_dir / f"{FIGURE}.png", out_dir / f"{FIGURE}.svg"]
    with made_dir(out_dir), duck_connect(memory_limit=memory_limit, temp_directory=out_dir) as con:
        try:
            has_ip = "c2s_bytes" in types and con.execute(
                f"SELECT count(c2s_bytes) > 0 FROM {source}").fetchone()[0]
            chosen = bytes_basis(list(types), basis, has_ip_bytes=bool(has_ip))
            result = characterize(con, source, label, chosen)
        except TrafficError as exc:
            raise TrafficError(f"{flows}: {exc}") from None
        except duckdb.Error as exc:
            raise TrafficError(f"{flows}: {first_line(exc)}") from exc
        summary = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "input": str(flows), **result,
                   "files": [str(t) for t in targets]}
        with atomic_output(targets) as (tmp_json, tmp_png, tmp_svg):
            fig = figure(result)
            with rc_context(RC):
                fig.savefig(tmp_png, format="png", dpi=110)
                fig.savefig(tmp_svg, format="svg", metadata={"Date": None})
            tmp_json.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def median_table(result: dict[str, Any]) -> list[tuple[str, list[tuple[str, float | None]]]]:
    """Per class, the median of every metric (metric title, value)."""
    return [(c, [(result["metrics"][m.name]["title"],
                  result["metrics"][m.name]["by_class"].get(c, {}).get("median")) for m in METRICS])
            for c in result["classes"]]


def characterize_command(
    flows: Annotated[Path, typer.Argument(help="Flows (Parquet, protolab.flows schema).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for characterization.json and the figure.")],
    label: Annotated[str, typer.Option("--label", help="Column whose values are the classes.")] = "protocol",
    basis: Annotated[str, typer.Option("--bytes", help="auto (IP bytes if the file has them, else payload bytes), "
                                                       "ip or payload.")] = "auto",
    memory_limit: Annotated[str, typer.Option("--memory-limit", help="DuckDB's memory limit.")] = "4GB",
) -> None:
    """000 Fig. 3.3: CDFs of flow duration, packets, bytes and bytes per packet per direction, by
    class (H1 vs H2 vs H3), with the medians."""
    from rich import box
    from rich.table import Table

    try:
        summary = characterize_file(flows, out, label, basis, memory_limit)
    except TrafficError as exc:
        raise fail(exc) from None
    table = Table(title=f"Medians by {label} ({summary['bytes_basis']} bytes)", box=box.SIMPLE_HEAD)
    table.add_column(label)
    table.add_column("flows", justify="right")
    for m in METRICS:
        table.add_column(m.name, justify="right")
    for c, values in median_table(summary):
        table.add_row(c, str(summary["classes"][c]), *("-" if v is None else f"{v:.3g}" for _, v in values))
    con = console()
    con.print(table)
    con.print(f"wrote {out / 'characterization.json'} and {out / FIGURE}.png/.svg")


def register(app: Any) -> None:
    """Add `characterize` to the `protolab traffic` Typer app."""
    app.command("characterize")(characterize_command)
