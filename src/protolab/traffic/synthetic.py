"""Synthetic flows (`protolab traffic synth`): a seeded generator of flow records in the flow
schema (`protolab.traffic.schema`), made to exercise the parallel-connection detection and the
benchmarks at ISP scale (docs/traffic.md, "Synthetic flows").

Everything is one DuckDB query: `range()` numbers the *visits* (a client loading objects from
one domain), every random draw is a hash of (seed, visit, draw name) turned into a uniform
number, the visits are expanded into their connections with `unnest`, and the rows stream into
a Parquet file. Nothing is held in Python, so 200 M flows take bounded memory (DuckDB's
`memory_limit`; the temporary directory takes what does not fit). The same seed gives the same
flows with the same DuckDB version (its `hash` function is the generator).

The model (one day of traffic):

- **Visits.** A visit has a client, a domain, a protocol and a start time uniform over the day.
  Protocols: h2 55 %, h1 30 % (a third of them cleartext on port 80), h3 15 %.
- **Clients and domains.** `N / 400` clients (10.0.0.0/8), picked uniformly; `N / 2000`
  domains (at least 50) with a Zipf-like popularity (rank = floor(D^u): P(rank <= r) = ln r /
  ln D); a domain is served from one of `D / 3` server addresses (198.18.0.0/15 and up), so
  servers host several domains, as CDNs do. TLS and QUIC flows carry the domain as SNI.
- **Parallel connections.** A visit opens k connections to its server, the first at the
  visit's start, the others within seconds (exponential offsets, mean 0.4 s, capped at 3 s).
  k depends on the protocol: h2 1 (85 %), 2 (7 %), 3 (5 %), 4 (3 %) -- about a third of h2
  flows belong to multi-connection visits, as 000 Table 4.2 found; h1 1 (40 %), 2 (15 %),
  3 (10 %), 4 (10 %), 6 (25 %) -- browsers open up to six per origin; h3 1 (95 %), 2 (5 %).
- **Durations** log-normal: h2 and h3 median 12 s (sigma 1.6), h1 median 4 s (sigma 1.5),
  capped at 2 h. **Sizes** log-normal: server -> client payload median 40 kB (h2, h3) or
  15 kB (h1), sigma 2.0, capped at 2 GB; client -> server median 1.5 kB, sigma 1.0.
  Packets follow from the bytes (1400-byte segments plus handshake and ACKs); IP bytes add
  52 bytes per TCP packet (IPv4 + TCP with timestamps) or 28 per UDP packet.
- **Flags** (TCP): SYN 2, FIN 2, ACK; 3 % of connections end with a RST instead (FIN 1, RST 1).

`source` is `synthetic`, `alpn_source` is `synthetic` (the label is true by construction).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from protolab.traffic.duck import (
    TrafficError,
    atomic_output,
    duck_connect,
    sql_path,
)
from protolab.traffic.schema import FLOW_COLUMNS, SCHEMA, SCHEMA_VERSION

DAY_START_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
DAY_NS = 86_400 * 10**9
MAX_FLOWS = 10**10


@dataclass(frozen=True)
class SynthConfig:
    flows: int
    seed: int = 1
    clients: int | None = None  # default: flows // 400
    domains: int | None = None  # default: flows // 2000

    def resolved(self) -> tuple[int, int, int]:
        clients = self.clients or max(1, self.flows // 400)
        domains = self.domains or max(50, self.flows // 2000)
        servers = max(1, domains // 3)
        return clients, domains, servers


# Connections per visit, per protocol: (k, probability).
CONNECTIONS_PER_VISIT: dict[str, list[tuple[int, float]]] = {
    "h2": [(1, 0.85), (2, 0.07), (3, 0.05), (4, 0.03)],
    "h1": [(1, 0.40), (2, 0.15), (3, 0.10), (4, 0.10), (6, 0.25)],
    "h3": [(1, 0.95), (2, 0.05)],
}
PROTOCOL_SHARES: list[tuple[str, float]] = [("h2", 0.55), ("h1", 0.30), ("h3", 0.15)]


def mean_connections_per_visit() -> float:
    return sum(share * sum(k * p for k, p in CONNECTIONS_PER_VISIT[proto]) for proto, share in PROTOCOL_SHARES)


def _stream(seed: int, what: str) -> int:
    """A 64-bit constant per (seed, draw name): draws of different names are independent."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{what}".encode(), digest_size=8).digest(), "little")


def _hash(seed: int, what: str, key: str) -> str:
    """DuckDB's hash of one integer (a 64-bit mixing bijection) of the key XOR the draw's constant."""
    return f"hash(xor(({key})::UBIGINT, {_stream(seed, what)}::UBIGINT))"


def _u(seed: int, what: str, key: str) -> str:
    """A uniform number in [0, 1) (53 bits) for the row `key` and the draw `what`."""
    return f"(({_hash(seed, what, key)} >> 11)::DOUBLE / 9007199254740992.0)"


def _normal_pair(seed: int, what: str, key: str) -> tuple[str, str]:
    """Two independent standard normal draws (Box-Muller over two hashed uniforms)."""
    radius = f"sqrt(-2.0 * ln(1.0 - {_u(seed, what + '.r', key)}))"
    angle = f"(2.0 * pi() * {_u(seed, what + '.a', key)})"
    return f"({radius} * cos({angle}))", f"({radius} * sin({angle}))"


def _pick(u: str, table: list[tuple[Any, float]], quote: bool = False) -> str:
    """CASE over cumulative probabilities: the value whose band contains the uniform `u`."""
    parts, acc = [], 0.0
    for value, p in table[:-1]:
        acc += p
        parts.append(f"WHEN {u} < {acc!r} THEN {repr(str(value)) if quote else value}")
    last = table[-1][0]
    return f"(CASE {' '.join(parts)} ELSE {repr(str(last)) if quote else last} END)"


def _ipv4(expr: str) -> str:
    """Dotted quad of a 32-bit integer expression."""
    return (f"concat(({expr} >> 24) & 255, '.', ({expr} >> 16) & 255, '.', ({expr} >> 8) & 255, '.', "
            f"({expr}) & 255)")


def _visits_sql(cfg: SynthConfig, visits: int) -> str:
    """Visit number, protocol and number of connections of `visits` visits."""
    s = cfg.seed
    proto = _pick(_u(s, "proto", "v"), PROTOCOL_SHARES, quote=True)
    k_by_proto = " ".join(f"WHEN '{p}' THEN {_pick(_u(s, 'k', 'v'), table)}"
                          for p, table in CONNECTIONS_PER_VISIT.items())
    return (f"SELECT v, proto, (CASE proto {k_by_proto} END)::INTEGER AS k "
            f"FROM (SELECT range AS v, {proto} AS proto FROM range({visits}))")


def synth_query(cfg: SynthConfig, visits_table: str, v_cut: int, j_cut: int) -> str:
    """The SELECT of the flows: every visit of `visits_table` (v, proto, k) before `v_cut`
    with its k connections, and the first `j_cut` connections of visit `v_cut`."""
    s = cfg.seed
    clients, domains, servers = cfg.resolved()
    cleartext = f"(proto = 'h1' AND {_u(s, 'clear', 'v')} < 0.3333)"
    # Zipf-like domain rank in [1, domains]; server address index from the domain.
    rank = f"least({domains}, floor(exp({_u(s, 'domain', 'v')} * ln({domains} + 1.0)))::BIGINT)"
    fk = "(v * 8 + j)"  # one key per connection (k <= 6 < 8)
    dur_median = "(CASE WHEN proto = 'h1' THEN 4.0 ELSE 12.0 END)"
    dur_sigma = "(CASE WHEN proto = 'h1' THEN 1.5 ELSE 1.6 END)"
    s2c_median = "(CASE WHEN proto = 'h1' THEN 15000.0 ELSE 40000.0 END)"
    offset_ns = (f"(CASE WHEN j = 0 THEN 0 ELSE least(3.0, -0.4 * ln(1.0 - {_u(s, 'offset', fk)})) "
                 f"* 1e9 END)::BIGINT")
    z_dur, z_s2c = _normal_pair(s, "dur-s2c", fk)
    z_c2s, _ = _normal_pair(s, "c2s", fk)
    duration_ns = f"least(7200.0, {dur_median} * exp({dur_sigma} * {z_dur})) * 1e9"
    s2c_payload = f"least(2e9, {s2c_median} * exp(2.0 * {z_s2c}))::BIGINT"
    c2s_payload = f"least(1e8, 1500.0 * exp(1.0 * {z_c2s}))::BIGINT"
    rst = f"(transport = 'tcp' AND {_u(s, 'rst', fk)} < 0.03)"
    return f"""
WITH visits2 AS (
    SELECT v, proto,
           (CASE WHEN v = {v_cut} THEN {j_cut} ELSE k END) AS k,
           {cleartext} AS clear,
           {_u(s, 'client', 'v')} AS u_client,
           {rank} AS drank,
           {DAY_START_NS} + ({_u(s, 'start', 'v')} * {DAY_NS})::BIGINT AS t0
    FROM {visits_table}
    WHERE v <= {v_cut}
), flows AS (
    SELECT v, proto, clear, u_client, drank, t0, unnest(range(k)) AS j,
           CASE WHEN proto = 'h3' THEN 'udp' ELSE 'tcp' END AS transport
    FROM visits2
), drawn AS (
    SELECT *,
           t0 + {offset_ns} AS first_ns,
           ({duration_ns})::BIGINT AS dur_ns,
           {s2c_payload} AS s2c_pl,
           {c2s_payload} AS c2s_pl,
           {rst} AS has_rst,
           (167772160 + 1 + floor(u_client * {clients})::BIGINT) AS client_int,
           (3323068416 + ({_hash(s, 'server', 'drank')} % {servers})::BIGINT) AS server_int,
           1024 + ({_hash(s, 'port', fk)} % 64000)::INTEGER AS client_port
    FROM flows
), counted AS (
    SELECT *,
           -- data segments of 1400 bytes; the client ACKs every other server segment
           (ceil(s2c_pl / 1400.0) + CASE WHEN transport = 'tcp' THEN 3 ELSE 2 END)::BIGINT AS s2c_pk,
           (ceil(c2s_pl / 1400.0) + ceil(s2c_pl / 2800.0) + CASE WHEN transport = 'tcp' THEN 3 ELSE 2 END)::BIGINT AS c2s_pk
    FROM drawn
)
SELECT
    'synthetic'::VARCHAR AS source,
    transport::VARCHAR AS transport,
    {_ipv4('client_int')}::VARCHAR AS client_ip,
    client_port::INTEGER AS client_port,
    {_ipv4('server_int')}::VARCHAR AS server_ip,
    (CASE WHEN clear THEN 80 ELSE 443 END)::INTEGER AS server_port,
    first_ns::BIGINT AS first_ns,
    (first_ns + dur_ns)::BIGINT AS last_ns,
    (dur_ns / 1e9)::DOUBLE AS duration_s,
    c2s_pk AS c2s_packets,
    s2c_pk AS s2c_packets,
    (c2s_pl + c2s_pk * CASE WHEN transport = 'tcp' THEN 52 ELSE 28 END)::BIGINT AS c2s_bytes,
    (s2c_pl + s2c_pk * CASE WHEN transport = 'tcp' THEN 52 ELSE 28 END)::BIGINT AS s2c_bytes,
    c2s_pl::BIGINT AS c2s_payload_bytes,
    s2c_pl::BIGINT AS s2c_payload_bytes,
    (CASE WHEN transport = 'tcp' THEN 0 END)::BIGINT AS c2s_retrans_bytes,
    (CASE WHEN transport = 'tcp' THEN 0 END)::BIGINT AS s2c_retrans_bytes,
    (CASE WHEN transport = 'tcp' THEN 2 END)::INTEGER AS syn,
    (CASE WHEN transport = 'tcp' THEN (CASE WHEN has_rst THEN 1 ELSE 2 END) END)::INTEGER AS fin,
    (CASE WHEN transport = 'tcp' THEN (CASE WHEN has_rst THEN 1 ELSE 0 END) END)::INTEGER AS rst,
    (CASE WHEN transport = 'tcp' THEN true END)::BOOLEAN AS ack,
    (CASE WHEN clear THEN NULL ELSE concat('d', drank, '.example') END)::VARCHAR AS sni,
    (CASE WHEN clear THEN NULL WHEN proto = 'h3' THEN 'h3' ELSE 'h2,http/1.1' END)::VARCHAR AS alpn_offer,
    (CASE WHEN clear OR proto = 'h3' THEN NULL WHEN proto = 'h2' THEN 'h2' ELSE 'http/1.1' END)::VARCHAR AS alpn_server,
    'synthetic'::VARCHAR AS alpn_source,
    (CASE WHEN clear THEN NULL ELSE 'TLSv1.3' END)::VARCHAR AS tls_version,
    (CASE WHEN proto = 'h3' THEN '0x00000001' END)::VARCHAR AS quic_version,
    (CASE WHEN clear THEN concat('d', drank, '.example') END)::VARCHAR AS http_host,
    proto::VARCHAR AS protocol
FROM counted
"""


def _cut(con: Any, flows: int, block: int = 1 << 20) -> tuple[int, int]:
    """The visit v_cut and the number j_cut of its connections (1..k) at which the running
    count of connections, in visit order, reaches `flows`."""
    import numpy as np

    sums = con.execute(f"SELECT v // {block} AS b, sum(k) FROM visits GROUP BY b ORDER BY b").fetchall()
    before = 0
    for b, total in sums:
        if before + total >= flows:
            got = con.execute(f"SELECT v, k FROM visits WHERE v // {block} = {b} ORDER BY v").fetchnumpy()
            running = before + np.cumsum(got["k"])
            i = int(np.searchsorted(running, flows))  # first visit whose running count reaches it
            return int(got["v"][i]), int(flows - (running[i] - got["k"][i]))
        before += total
    raise TrafficError(f"{flows} flows: the visits table is too short (a bug: please report)")


def synthesize(cfg: SynthConfig, out: Path | str, *, memory_limit: str = "4GB", threads: int | None = None,
               temp_directory: Path | str | None = None) -> dict[str, Any]:
    """Write `cfg.flows` synthetic flows to `out` (Parquet, atomically). Returns a summary."""
    if cfg.flows < 1 or cfg.flows > MAX_FLOWS:
        raise TrafficError(f"--flows {cfg.flows}: expected 1 to {MAX_FLOWS}")
    if cfg.seed < 0:
        raise TrafficError(f"--seed {cfg.seed}: expected a non-negative integer")
    out = Path(out)
    names = [c for c, _, _ in FLOW_COLUMNS]
    started = time.perf_counter()
    clients, domains, servers = cfg.resolved()
    with atomic_output([out]) as (tmp,), duck_connect(memory_limit=memory_limit, threads=threads,
                                                         temp_directory=temp_directory or out.parent) as con:
        # The visits first, as a table: DuckDB scans a table in parallel (a range() in one thread).
        visits = int(cfg.flows / mean_connections_per_visit() + 24 * (cfg.flows ** 0.5) + 64)
        con.execute(f"CREATE TEMP TABLE visits AS {_visits_sql(cfg, visits)}")
        v_cut, j_cut = _cut(con, cfg.flows)
        meta = (f"KV_METADATA {{schema: '{SCHEMA}', schema_version: '{SCHEMA_VERSION}', "
                f"generator: 'protolab traffic synth', seed: '{cfg.seed}'}}")
        con.execute(f"COPY (SELECT {', '.join(names)} FROM ({synth_query(cfg, 'visits', v_cut, j_cut)})) "
                    f"TO '{sql_path(tmp)}' (FORMAT parquet, COMPRESSION zstd, {meta})")
        written = con.execute(f"SELECT count(*) FROM read_parquet('{sql_path(tmp)}')").fetchone()[0]
        if written != cfg.flows:
            raise TrafficError(f"{out}: generated {written} flows instead of {cfg.flows} (a bug: please report)")
    elapsed = time.perf_counter() - started
    return {"flows": cfg.flows, "seed": cfg.seed, "clients": clients, "domains": domains, "servers": servers,
            "file": str(out), "bytes": out.stat().st_size, "seconds": round(elapsed, 3)}


# ----------------------------------------------------------------------------------------------
# Command line (registered on `protolab traffic` by protolab.traffic.cli)


def synth_command(
    flows: Annotated[int, typer.Option("--flows", "-n", min=1, max=MAX_FLOWS, help="Number of flows.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output Parquet file (protolab.flows schema).")],
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of every random draw.")] = 1,
    memory_limit: Annotated[str, typer.Option("--memory-limit", help="DuckDB's memory limit.")] = "4GB",
) -> None:
    """Synthetic flows for the benchmarks: visits with parallel connections, log-normal sizes and
    durations, an H1/H2/H3 mix (docs/traffic.md, "Synthetic flows")."""
    from rich.markup import escape

    from protolab.traffic.duck import console, fail

    try:
        summary = synthesize(SynthConfig(flows=flows, seed=seed), out, memory_limit=memory_limit)
    except TrafficError as exc:
        raise fail(exc) from None
    console().print(f"{summary['flows']} flows (seed {seed}; {summary['clients']} clients, {summary['domains']} "
                    f"domains on {summary['servers']} servers) in {summary['seconds']:.1f} s; wrote "
                    f"{escape(str(out))} ({summary['bytes'] / 1e6:.1f} MB)")


def register(app: Any) -> None:
    """Add `synth` to the `protolab traffic` Typer app."""
    app.command("synth")(synth_command)
