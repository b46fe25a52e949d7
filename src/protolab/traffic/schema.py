"""The flow schema every flow source maps into (`protolab-net flows` on a capture, a Tstat
import, the lab's labelled corpus): one row per bidirectional TCP or UDP flow, the client being
the flow's initiator. Sources that cannot know a column leave it NULL (e.g. Tstat has payload
bytes, not IP bytes). docs/traffic.md lists the columns; `FLOW_COLUMNS` is the single source of
truth for names and types (DuckDB types)."""

from __future__ import annotations

SCHEMA = "protolab.flows"
SCHEMA_VERSION = 1

# (column, DuckDB type, meaning)
FLOW_COLUMNS: list[tuple[str, str, str]] = [
    ("source", "VARCHAR", "where the row comes from: pcap, tstat, lab or synthetic"),
    ("transport", "VARCHAR", "tcp or udp"),
    ("client_ip", "VARCHAR", "the initiator's address"),
    ("client_port", "INTEGER", "the initiator's port"),
    ("server_ip", "VARCHAR", "the responder's address"),
    ("server_port", "INTEGER", "the responder's port"),
    ("first_ns", "BIGINT", "first packet, Unix ns"),
    ("last_ns", "BIGINT", "last packet, Unix ns"),
    ("duration_s", "DOUBLE", "last - first, s"),
    ("c2s_packets", "BIGINT", "packets client -> server"),
    ("s2c_packets", "BIGINT", "packets server -> client"),
    ("c2s_bytes", "BIGINT", "IP bytes client -> server (NULL if unknown)"),
    ("s2c_bytes", "BIGINT", "IP bytes server -> client (NULL if unknown)"),
    ("c2s_payload_bytes", "BIGINT", "transport payload bytes client -> server"),
    ("s2c_payload_bytes", "BIGINT", "transport payload bytes server -> client"),
    ("c2s_retrans_bytes", "BIGINT", "retransmitted payload bytes client -> server (TCP)"),
    ("s2c_retrans_bytes", "BIGINT", "retransmitted payload bytes server -> client (TCP)"),
    ("syn", "INTEGER", "SYN segments seen (both directions)"),
    ("fin", "INTEGER", "FIN segments seen (both directions)"),
    ("rst", "INTEGER", "RST segments seen (both directions)"),
    ("ack", "BOOLEAN", "an ACK flag was seen"),
    ("sni", "VARCHAR", "TLS or QUIC server name"),
    ("alpn_offer", "VARCHAR", "the client's ALPN offer, comma-separated, in order"),
    ("alpn_server", "VARCHAR", "the server's ALPN choice where visible (TLS 1.2 ServerHello; Tstat's bitmask)"),
    ("alpn_source", "VARCHAR", "what `protocol` rests on: server, client-offer, request-line, lab, or NULL"),
    ("tls_version", "VARCHAR", "TLS version of the handshake"),
    ("quic_version", "VARCHAR", "QUIC version (hex) of the client's Initial"),
    ("http_host", "VARCHAR", "cleartext HTTP/1.1: the first request's Host"),
    ("protocol", "VARCHAR", "h1, h2, h3, tls-other, quic-other, tcp-other or udp-other"),
]
# The client's fingerprint (protolab-net flows only; NULL elsewhere): what tells apart hosts
# behind one NAT (protolab.traffic.nat). Not part of FLOW_COLUMNS: Tstat imports and the
# synthetic generator do not carry it, and readers take it when present.
FINGERPRINT_COLUMNS: list[tuple[str, str, str]] = [
    ("c2s_ttl", "INTEGER", "TTL (hop limit) of the client's first packet"),
    ("syn_window", "INTEGER", "receive window of the client's SYN"),
    ("syn_wscale", "INTEGER", "window scale of the client's SYN"),
    ("syn_mss", "INTEGER", "MSS of the client's SYN"),
    ("syn_tsval", "BIGINT", "TSval of the client's SYN"),
    ("syn_options", "VARCHAR", "option kinds of the client's SYN in order (M,S,T,N,W, ...)"),
]

PROTOCOLS = ("h1", "h2", "h3", "tls-other", "quic-other", "tcp-other", "udp-other")
