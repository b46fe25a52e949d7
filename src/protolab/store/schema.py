"""The schema of the results store (docs/store.md): every table as a list of (column, DuckDB
type, description). These lists are the single source of truth for the schema; docs/store.md
mirrors them, `protolab.store` creates, migrates, writes and reads the tables from them."""

from __future__ import annotations

from protolab.measure.conninfo import FIELDS as CONNECTION_INFO_FIELDS
from protolab.results.bulk import BULK_INTERVALS, BULK_TRANSFERS
from protolab.results.link import LINK_COLUMNS
from protolab.results.load import CONNECTIONS, OBJECTS, PAGE_LOADS
from protolab.results.rpm import RPM_COLUMNS
from protolab.results.samples import SAMPLE_COLUMNS
from protolab.traffic.schema import FINGERPRINT_COLUMNS, FLOW_COLUMNS

# 2: bulk transfers, pairs of clients, throughput bins, per-connection controller states, and
# controller columns of transport samples. 3: rpm_results (responsiveness tests). 4: flows (flow
# records of the runs' client captures, `protolab traffic corpus`). 5: the tables of documents
# (page_loads, objects, connections, bulk_transfers, bulk_intervals) take their columns from the
# documents (protolab.results placements, schemas/), which adds the fields that were dropped
# (objects.delay_ms, queue_position; connections.tcp_connect_ms, subflow_details, samples_file,
# qlog_file, ...); connections.idx is the result's `id` (was conn_id, an integer) and
# connections.conn_id the connection's name in sample files (joins transport_samples.conn).
# Older stores are migrated in place (columns added; 5 renames connections.conn_id to idx).
SCHEMA_VERSION = 5

Column = tuple[str, str, str]

RUN_KEY_COLUMNS: list[Column] = [
    ("experiment_id", "VARCHAR NOT NULL", "experiment the run belongs to (experiments.id)"),
    ("run_key", "VARCHAR NOT NULL", "stable id of the run (hash of its parameters and repetition)"),
]

# Parameters of a run that get typed columns in `runs`; the rest go to runs.params (JSON).
KNOWN_PARAMS: list[Column] = [
    ("scenario", "VARCHAR", "named scenario"),
    ("bandwidth_mbps", "DOUBLE", "bottleneck bandwidth axis, Mbit/s"),
    ("rtt_ms", "DOUBLE", "minimum RTT axis, ms"),
    ("loss_pct", "DOUBLE", "random loss axis, percent"),
    ("buffer_bytes", "BIGINT", "bottleneck buffer axis, bytes"),
    ("mode", "VARCHAR", "what the client ran: a page-load mode (h2-parallel:2), a bulk protocol (h3) or a pair (h3 vs h2)"),
    ("page", "VARCHAR", "page (manifest) name"),
    ("repetition", "INTEGER", "repetition index, from 0"),
    ("seed", "BIGINT", "seed of the run's random draws"),
    ("tcp_cc", "VARCHAR", "TCP congestion control"),
    ("quic_cc", "VARCHAR", "QUIC congestion controller as the spec wrote it (NAME[:key=value,...])"),
    ("client", "VARCHAR", "who loaded the page: engine (protolab-net load) or chromium (docs/browser.md)"),
    ("warm", "VARCHAR", "cold loads, or resumed: TLS sessions resumed and QUIC 0-RTT after a priming connection"),
    ("order_index", "INTEGER", "position of the run in the executed (interleaved) order"),
    ("worker", "VARCHAR", "the Dask worker that ran it (protolab run --cluster; NULL: run locally)"),
    ("workload", "VARCHAR", "what the run did: page (page load), bulk (bulk transfer) or pair (two clients)"),
]

TABLES: dict[str, list[Column]] = {
    "meta": [
        ("schema_version", "INTEGER NOT NULL", "schema version of this database (SCHEMA_VERSION)"),
        ("created", "TIMESTAMP NOT NULL", "when the database was created (UTC)"),
        ("protolab_version", "VARCHAR", "protolab version that created it"),
    ],
    "experiments": [
        ("id", "VARCHAR PRIMARY KEY", "experiment id (chosen by the runner, stable across resumes)"),
        ("name", "VARCHAR", "experiment name from the spec"),
        ("spec", "JSON", "the effective experiment spec"),
        ("provenance", "JSON", "provenance: versions, git commit, kernel, CPU, sysctls, tools"),
        ("created", "TIMESTAMP NOT NULL", "first time the experiment was recorded (UTC)"),
        ("updated", "TIMESTAMP NOT NULL", "last time it was recorded (UTC)"),
    ],
    "runs": [
        *RUN_KEY_COLUMNS,
        ("status", "VARCHAR NOT NULL", "ok, failed or timeout"),
        ("error", "VARCHAR", "why the run failed, if it did"),
        ("started_unix_ns", "BIGINT", "when the run started (Unix ns)"),
        ("duration_s", "DOUBLE", "wall-clock duration of the run, s"),
        ("plt_ms", "DOUBLE", "page load time, ms (page_load.plt_ms when the run is ok, else NULL)"),
        ("goodput_mbps", "DOUBLE", "bulk runs: goodput of the transfer, Mbit/s (ok runs; NULL otherwise)"),
        *KNOWN_PARAMS,
        ("params", "JSON", "the run's other parameters (extra axes), name -> value"),
        ("emulator_counters", "JSON", "the emulator loop counters of the counters reply (docs/control.md)"),
        ("late_mean_us", "DOUBLE", "fidelity: mean delay error (packet delivery lateness) of the run, µs"),
        ("late_p999_us", "DOUBLE", "fidelity: 99.9th percentile of the delay error, at most this, µs"),
        ("late_max_us", "DOUBLE", "fidelity: largest delay error, µs"),
        ("fidelity_flags", "VARCHAR", "fidelity: what was off by more than its tolerance (NULL: nothing)"),
        ("artifacts_dir", "VARCHAR", "raw artifacts of the run, relative to the results directory"),
        ("recorded", "TIMESTAMP NOT NULL", "when this record was written (UTC)"),
    ],
    "page_loads": [*RUN_KEY_COLUMNS, *PAGE_LOADS.column_specs()],
    "objects": [*RUN_KEY_COLUMNS, *OBJECTS.column_specs()],
    "connections": [*RUN_KEY_COLUMNS, *CONNECTIONS.column_specs()],
    "transport_samples": [*RUN_KEY_COLUMNS, *SAMPLE_COLUMNS],
    "bulk_transfers": [*RUN_KEY_COLUMNS, *BULK_TRANSFERS.column_specs()],
    "bulk_intervals": [*RUN_KEY_COLUMNS, *BULK_INTERVALS.column_specs()],
    "rpm_results": [*RUN_KEY_COLUMNS, *RPM_COLUMNS],
    # One row per flow of a run's client capture (`protolab traffic corpus`, docs/traffic.md): the
    # columns of the flow schema, `protocol` being the lab's truth.
    "flows": [
        *RUN_KEY_COLUMNS,
        *[c for c in FLOW_COLUMNS if c[0] != "protocol"],
        ("handshake_protocol", "VARCHAR", "the extractor's label from the handshake (ALPN, QUIC Initial, request line)"),
        ("protocol", "VARCHAR", "the label: the protocol the run's connection with this 5-tuple spoke (h1c counted as "
                                "h1); NULL if no connection of the run matches (another run's closing packets)"),
        ("truth_protocol", "VARCHAR", "that connection's protocol as the load result gives it (h1c, h1, h2, h3)"),
        ("truth_transport", "VARCHAR", "that connection's transport (tcp, quic)"),
        # The NAT corpus (`protolab traffic nat-corpus`, docs/traffic.md "NAT"); NULL elsewhere.
        *FINGERPRINT_COLUMNS,
        ("real_client", "VARCHAR", "NAT corpus: the client host that opened the flow (the truth behind the address)"),
        ("behind_nat", "BOOLEAN", "NAT corpus: the client sits behind the NAT gateway (its flows show the gateway's address)"),
    ],
    "pair_sides": [
        *RUN_KEY_COLUMNS,
        ("side", "VARCHAR NOT NULL", "a (first client) or b"),
        ("label", "VARCHAR", "what the side ran, as in the pair (h3@gquic39, tcp*2)"),
        ("mode", "VARCHAR", "page-load mode or bulk protocol"),
        ("flows", "INTEGER", "parallel bulk flows of the side"),
        ("quic_cc", "VARCHAR", "QUIC controller of the side's server (QUIC sides)"),
        ("client", "VARCHAR", "client host"),
        ("address", "VARCHAR", "the client's address (in the connection ids of its samples)"),
        ("status", "VARCHAR", "ok, or the statuses of its loads or transfers"),
        ("plt_ms", "DOUBLE", "page load time of the side, ms (page workload)"),
        ("goodput_mbps", "DOUBLE", "sum of the side's bulk goodputs, Mbit/s (bulk workload)"),
        ("connections", "INTEGER", "connections the side opened"),
        ("bytes", "BIGINT", "IP bytes delivered to the client at the bottleneck (event log)"),
        ("packets", "BIGINT", "IP packets delivered to the client at the bottleneck (event log)"),
        ("first_ms", "DOUBLE", "first delivery to the side, ms after the run's first delivery"),
        ("last_ms", "DOUBLE", "last delivery, same time base"),
        ("common_bytes", "BIGINT", "IP bytes delivered to the side in that interval"),
        ("common_s", "DOUBLE", "length of the interval where both sides received, s"),
        ("common_mbps", "DOUBLE", "throughput of the side in that interval, Mbit/s"),
        ("share", "DOUBLE", "the side's share of the two throughputs in that interval"),
        ("jain", "DOUBLE", "Jain's fairness index of the two throughputs in that interval"),
    ],
    "interop_results": [
        *RUN_KEY_COLUMNS,
        ("testcase", "VARCHAR", "the interop test case (protolab.interop.testcases; docs/interop.md)"),
        ("server", "VARCHAR", "the server's stack"),
        ("client", "VARCHAR", "the client's stack"),
        ("server_version", "VARCHAR", "what was built of the server's stack (.stacks/<name>/version.txt)"),
        ("client_version", "VARCHAR", "what was built of the client's stack"),
        ("verdict", "VARCHAR", "succeeded, failed or unsupported (an endpoint exited 127), judged like the runner"),
        ("reason", "VARCHAR", "why the verdict is not succeeded"),
        ("files", "INTEGER", "files the server offered in /www"),
        ("files_intact", "INTEGER", "of those, files in /downloads byte for byte"),
        ("bytes", "BIGINT", "bytes of the offered files"),
        ("handshakes", "INTEGER", "QUIC handshakes: distinct SCIDs of the server's Initial packets (server capture)"),
        ("quic_versions", "VARCHAR", "versions of the server's Initial packets, comma-separated hex"),
        ("retries", "INTEGER", "Retry packets the server sent"),
        ("handshake_ms", "DOUBLE", "client capture: client's first Initial to the server's first 1-RTT packet, ms"),
        ("completion_ms", "DOUBLE", "client capture: client's first Initial to the server's last 1-RTT packet, ms"),
        ("goodput_mbps", "DOUBLE", "bytes x 8 over the span of the server's 1-RTT packets at the client (the runner's goodput), Mbit/s"),
        ("client_status", "INTEGER", "the client's exit status; NULL: killed at the case's timeout"),
        ("server_status", "INTEGER", "the server's exit status if it ended before the client; NULL: still running (as it should)"),
        ("keylog", "BOOLEAN", "an endpoint wrote TLS keys to SSLKEYLOGFILE (kept in the run's interop/<role>/)"),
        ("qlogs", "INTEGER", "qlog files the endpoints wrote to QLOGDIR; NULL where a stack writes none"),
        ("max_cwnd_bytes", "BIGINT", "largest congestion window in the server's qlogs (recovery:metrics_updated); "
                                     "NULL where the stack's qlog does not give it"),
        ("max_bytes_in_flight", "BIGINT", "largest bytes in flight in the server's qlogs; NULL where not given"),
    ],
    "flow_bins": [
        *RUN_KEY_COLUMNS,
        ("side", "VARCHAR", "a or b"),
        ("flow", "VARCHAR", "one flow of the side (\"tcp 10.77.1.1:443>10.77.0.1:40002\"); NULL: the side's total"),
        ("bin", "INTEGER", "bin index from the run's first delivery"),
        ("t_ms", "DOUBLE", "start of the bin, ms"),
        ("bytes", "BIGINT", "IP bytes delivered to the side in the bin (bottleneck, event log)"),
        ("packets", "BIGINT", "packets delivered"),
        ("mbps", "DOUBLE", "bytes x 8 / bin length, Mbit/s"),
    ],
    "connection_states": [
        *RUN_KEY_COLUMNS,
        ("conn", "VARCHAR", "connection id"),
        ("role", "VARCHAR", "client or server"),
        ("subflow", "INTEGER", "MPTCP subflow (NULL otherwise)"),
        ("transport", "VARCHAR", "tcp, mptcp or quic"),
        ("controller", "VARCHAR", "congestion controller of this end"),
        ("sender", "BOOLEAN", "this end sent more bytes than the other (the server of a download)"),
        ("rows", "INTEGER", "sample and state rows"),
        ("start_unix_ns", "BIGINT", "first row"),
        ("duration_ms", "DOUBLE", "first to last row, ms"),
        ("frac_slow_start", "DOUBLE", "share of the time in slow start"),
        ("frac_conservative_slow_start", "DOUBLE", "share of the time in HyStart++'s conservative slow start"),
        ("frac_congestion_avoidance", "DOUBLE", "share of the time in congestion avoidance"),
        ("frac_recovery", "DOUBLE", "share of the time in recovery"),
        ("frac_application_limited", "DOUBLE", "share of the time application-limited"),
        ("frac_unknown", "DOUBLE", "share of the time with no state (controllers that do not report one)"),
        ("slow_start_exit_ms", "DOUBLE", "first move out of slow start (to CSS, CA or recovery), ms after the first row"),
        ("cwnd_at_exit_bytes", "BIGINT", "window at that moment, bytes"),
        ("mean_cwnd_bytes", "DOUBLE", "mean window over the samples, bytes"),
        ("max_cwnd_bytes", "BIGINT", "largest window, bytes"),
        ("mean_rtt_ms", "DOUBLE", "mean smoothed RTT, ms"),
        ("p90_rtt_ms", "DOUBLE", "90th percentile of the smoothed RTT, ms"),
        ("min_rtt_ms", "DOUBLE", "minimum RTT, ms"),
        ("retransmits", "BIGINT", "TCP: segments retransmitted"),
        ("lost_packets", "BIGINT", "QUIC: packets declared lost"),
        ("bytes_sent", "BIGINT", "bytes this end sent (UDP payload or TCP bytes_sent)"),
    ],
    "connection_info": [
        *RUN_KEY_COLUMNS,
        ("conn", "VARCHAR", "connection id"),
        ("role", "VARCHAR", "client or server"),
        ("transport", "VARCHAR", "tcp, mptcp or quic"),
        ("source", "VARCHAR", "what the row comes from: qlog, samples or both"),
        *CONNECTION_INFO_FIELDS,
    ],
    "loss_analysis": [
        *RUN_KEY_COLUMNS,
        ("conn", "VARCHAR", "connection id"),
        ("role", "VARCHAR", "the sending end analysed"),
        ("transport", "VARCHAR", "tcp or quic"),
        ("source", "VARCHAR", "qlog and/or samples"),
        ("detected", "BIGINT", "losses the sender detected (QUIC packets declared lost; TCP segments retransmitted)"),
        ("burst_threshold_ms", "DOUBLE", "sRTT + RTT variance: losses closer than this form a burst (003 annex C)"),
        ("detected_bursts", "BIGINT", "bursts of detected losses, each dated when the lost packet was sent"),
        ("detected_mean_burst", "DOUBLE", "mean size of those bursts"),
        ("detected_max_burst", "BIGINT", "largest"),
        ("detected_single_loss_bursts", "BIGINT", "bursts of one loss"),
        ("detected_mean_burst_003", "DOUBLE", "mean burst size with each loss dated when it was declared (003's listing)"),
        ("spurious_tshark", "BIGINT", "TCP: retransmissions tshark calls spurious (from the capture alone)"),
        ("ground_truth", "BOOLEAN", "the emulator's event log was there: the columns below are filled"),
        ("datagrams", "BIGINT", "datagrams (segments) of the flow the sender sent"),
        ("true_losses", "BIGINT", "packets the emulator dropped (QUIC: packets; TCP: sequence numbers with a dropped transmission)"),
        ("censored_losses", "BIGINT", ("true losses of packets sent in the last sRTT + 4 RTT variance before the flow's "
                                       "last transmission: too late to detect, left out of precision and recall")),
        ("true_positives", "BIGINT", "detected losses that were dropped (censored packets left out)"),
        ("precision", "DOUBLE", "true positives / detected (censored packets left out)"),
        ("recall", "DOUBLE", "true positives / true losses (censored packets left out)"),
        ("spurious", "BIGINT", "detected losses (retransmissions) whose original was delivered"),
        ("true_bursts", "BIGINT", "bursts of true losses (same threshold, at the drops' times)"),
        ("true_mean_burst", "DOUBLE", "mean size of those bursts"),
        ("true_max_burst", "BIGINT", "largest"),
        ("true_single_loss_bursts", "BIGINT", "bursts of one loss"),
        ("detected_mean_run", "DOUBLE", "QUIC: mean run of consecutive packet numbers declared lost"),
        ("true_mean_run", "DOUBLE", "QUIC: mean run of consecutive packet numbers dropped (a burst in send order)"),
        ("unmatched_datagrams", "BIGINT", "QUIC: datagrams the qlog's packets did not account for"),
        ("unmatched_packets", "BIGINT", "QUIC: packets of the qlog left after the last datagram"),
        ("drops_by_cause", "JSON", "the flow's drops per cause (random_loss, queue_full)"),
    ],
    "loss_bursts": [
        *RUN_KEY_COLUMNS,
        ("conn", "VARCHAR", "connection id"),
        ("role", "VARCHAR", "the sending end"),
        ("kind", "VARCHAR", "detected or true"),
        ("size", "BIGINT", "losses in the burst"),
    ],
    "overhead": [
        *RUN_KEY_COLUMNS,
        ("protocol", "VARCHAR", "the bulk protocol or the page-load mode"),
        ("link", "VARCHAR", "where the wire bytes were counted (the client's downlink)"),
        ("wire_bytes", "BIGINT", "IP bytes the emulator delivered to the client during the run"),
        ("app_bytes", "BIGINT", "application bytes received (body bytes of the transfer or the page)"),
        ("factor", "DOUBLE", "wire_bytes / app_bytes (003's overhead compensation factor)"),
    ],
    "analysis_notes": [
        *RUN_KEY_COLUMNS,
        ("file", "VARCHAR", "the artifact (or connection) the note is about"),
        ("note", "VARCHAR", "what could not be analysed and why"),
    ],
    "link_counters": [*RUN_KEY_COLUMNS, *LINK_COLUMNS],
}

ANALYSIS_TABLES = ("connection_info", "loss_analysis", "loss_bursts", "overhead", "analysis_notes")
RUN_TABLES = ("runs", "page_loads", "objects", "connections", "transport_samples", "bulk_transfers", "bulk_intervals",
              "pair_sides", "flow_bins", "connection_states", "rpm_results", "flows", "interop_results", *ANALYSIS_TABLES,
              "link_counters")
PRIMARY_KEYS = {"runs": "PRIMARY KEY (experiment_id, run_key)"}


