//! The flow record: one row of the `protolab.flows` schema (src/protolab/traffic/schema.py,
//! docs/flows.md), and the rule that turns handshake labels into a `protocol`.

use std::net::IpAddr;

use serde::Serialize;

use crate::http::Request;
use crate::tls::{self, ClientHello, ServerHello};

/// Schema name written with every output.
pub const SCHEMA: &str = "protolab.flows";
/// Schema version; bumped when a column changes meaning.
pub const SCHEMA_VERSION: u32 = 1;

/// One bidirectional TCP or UDP flow; the client is the initiator. Field order is column order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowRecord {
    /// Where the row comes from: always "pcap" here.
    pub source: &'static str,
    /// "tcp" or "udp".
    pub transport: &'static str,
    /// The initiator's address.
    pub client_ip: IpAddr,
    /// The initiator's port.
    pub client_port: u16,
    /// The responder's address.
    pub server_ip: IpAddr,
    /// The responder's port.
    pub server_port: u16,
    /// First packet, Unix ns.
    pub first_ns: i64,
    /// Last packet, Unix ns.
    pub last_ns: i64,
    /// `last_ns - first_ns` in seconds.
    pub duration_s: f64,
    /// Packets client -> server.
    pub c2s_packets: u64,
    /// Packets server -> client.
    pub s2c_packets: u64,
    /// IP bytes client -> server (as the IP headers declare them).
    pub c2s_bytes: u64,
    /// IP bytes server -> client.
    pub s2c_bytes: u64,
    /// Transport payload bytes client -> server.
    pub c2s_payload_bytes: u64,
    /// Transport payload bytes server -> client.
    pub s2c_payload_bytes: u64,
    /// Payload bytes client -> server whose sequence range was seen before (TCP; None for UDP).
    pub c2s_retrans_bytes: Option<u64>,
    /// The same, server -> client.
    pub s2c_retrans_bytes: Option<u64>,
    /// SYN segments, both directions.
    pub syn: u32,
    /// FIN segments, both directions.
    pub fin: u32,
    /// RST segments, both directions.
    pub rst: u32,
    /// An ACK flag was seen.
    pub ack: bool,
    /// TLS or QUIC server name.
    pub sni: Option<String>,
    /// The client's ALPN offer, comma-separated, in order.
    pub alpn_offer: Option<String>,
    /// The server's ALPN choice where visible (TLS 1.2 and earlier ServerHello).
    pub alpn_server: Option<String>,
    /// What `protocol` rests on: "server", "client-offer", "request-line", or None.
    pub alpn_source: Option<&'static str>,
    /// TLS version: negotiated (ServerHello) when seen, else the highest the client offered.
    pub tls_version: Option<String>,
    /// QUIC version of the client's Initial, "0x" and 8 hex digits.
    pub quic_version: Option<String>,
    /// Cleartext HTTP/1.x: the first request's Host header.
    pub http_host: Option<String>,
    /// h1, h2, h3, tls-other, quic-other, tcp-other or udp-other.
    pub protocol: &'static str,
    /// Union of the TCP flags client -> server (header byte 13: FIN 1, SYN 2, RST 4, PSH 8,
    /// ACK 16, URG 32, ECE 64, CWR 128); None for UDP.
    pub c2s_tcp_flags: Option<u8>,
    /// The same, server -> client.
    pub s2c_tcp_flags: Option<u8>,
    /// Cleartext HTTP: the first request's method ("PRI" for the HTTP/2 preface).
    pub http_method: Option<String>,
    /// Cleartext HTTP: the first request's target.
    pub http_path: Option<String>,
    /// IP TTL (IPv6 hop limit) of the client's first packet at the capture point.
    pub c2s_ttl: Option<u8>,
    /// Receive window of the client's SYN (unscaled); None without a SYN in the capture.
    pub syn_window: Option<u16>,
    /// Window scale shift the client's SYN offered.
    pub syn_wscale: Option<u8>,
    /// MSS the client's SYN offered.
    pub syn_mss: Option<u16>,
    /// TSval of the client's SYN (its timestamp clock).
    pub syn_tsval: Option<u32>,
    /// Option kinds of the client's SYN in order (M, N, W, S, T, E, ?kind), comma-separated.
    pub syn_options: Option<String>,
}

/// Handshake findings of one flow.
#[derive(Debug, Default, Clone)]
pub struct Labels {
    /// From a TCP stream's ClientHello.
    pub client_hello: Option<ClientHello>,
    /// From a TCP stream's ServerHello.
    pub server_hello: Option<ServerHello>,
    /// QUIC version of the client's Initial.
    pub quic_version: Option<u32>,
    /// ClientHello from the QUIC Initial's CRYPTO frames.
    pub quic_hello: Option<ClientHello>,
    /// Cleartext HTTP request.
    pub request: Option<Request>,
}

/// The label fields of a record.
pub struct LabelColumns {
    pub sni: Option<String>,
    pub alpn_offer: Option<String>,
    pub alpn_server: Option<String>,
    pub alpn_source: Option<&'static str>,
    pub tls_version: Option<String>,
    pub quic_version: Option<String>,
    pub http_host: Option<String>,
    pub http_method: Option<String>,
    pub http_path: Option<String>,
    pub protocol: &'static str,
}

fn from_alpn(alpn: &str, quic: bool) -> Option<&'static str> {
    match alpn {
        "http/1.1" | "http/1.0" if !quic => Some("h1"),
        "h2" if !quic => Some("h2"),
        // h3 and its drafts (h3-29, ...).
        a if quic && (a == "h3" || a.starts_with("h3-")) => Some("h3"),
        _ => None,
    }
}

impl Labels {
    /// Turns findings into columns. The protocol rests on the server's ALPN choice when the
    /// ServerHello shows it; else on the client's first offered protocol (servers take the
    /// client's preference in practice; TLS 1.3 and QUIC encrypt the answer); else on a
    /// cleartext request line.
    pub fn into_columns(self, udp: bool) -> LabelColumns {
        let mut c = LabelColumns {
            sni: None,
            alpn_offer: None,
            alpn_server: None,
            alpn_source: None,
            tls_version: None,
            quic_version: self.quic_version.map(|v| format!("{v:#010x}")),
            http_host: None,
            http_method: None,
            http_path: None,
            protocol: if udp { "udp-other" } else { "tcp-other" },
        };
        let mut hello = if udp { self.quic_hello } else { self.client_hello };
        if let Some(ch) = &mut hello {
            c.sni = ch.sni.take();
            if !ch.alpn.is_empty() {
                c.alpn_offer = Some(ch.alpn.join(","));
            }
            c.tls_version = Some(tls::version_name(ch.max_version));
        }
        if udp {
            if self.quic_version.is_some() {
                c.protocol = "quic-other";
                if let Some(p) = hello.as_ref().and_then(|h| h.alpn.first()).and_then(|a| from_alpn(a, true)) {
                    c.protocol = p;
                    c.alpn_source = Some("client-offer");
                }
            }
            return c;
        }
        let mut server_hello = self.server_hello;
        if let Some(sh) = &mut server_hello {
            c.tls_version = Some(tls::version_name(sh.version));
            c.alpn_server = sh.alpn.take();
        }
        if let Some(ch) = &hello {
            c.protocol = "tls-other";
            let visible_server_choice = server_hello.as_ref().is_some_and(|sh| sh.version <= 0x0303);
            if let Some(chosen) = &c.alpn_server {
                if let Some(p) = from_alpn(chosen, false) {
                    c.protocol = p;
                }
                c.alpn_source = Some("server");
            } else if !visible_server_choice {
                // The choice is hidden (TLS 1.3) or the ServerHello was not seen: the offer.
                if let Some(p) = ch.alpn.first().and_then(|a| from_alpn(a, false)) {
                    c.protocol = p;
                    c.alpn_source = Some("client-offer");
                }
            }
            // A visible TLS 1.2 ServerHello without ALPN: the server chose none; tls-other.
        } else if let Some(req) = self.request {
            c.protocol = if req.h2_preface { "h2" } else { "h1" };
            c.alpn_source = Some("request-line");
            c.http_method = Some(req.method);
            c.http_path = Some(req.target);
            c.http_host = req.host;
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(alpn: &[&str]) -> ClientHello {
        ClientHello { sni: Some("a.test".into()), alpn: alpn.iter().map(|s| s.to_string()).collect(), max_version: 0x0304 }
    }

    #[test]
    fn protocol_rules() {
        let mut l = Labels { client_hello: Some(hello(&["h2", "http/1.1"])), ..Labels::default() };
        let c = l.clone().into_columns(false);
        assert_eq!((c.protocol, c.alpn_source), ("h2", Some("client-offer")));
        assert_eq!(c.alpn_offer.as_deref(), Some("h2,http/1.1"));
        l.server_hello = Some(ServerHello { version: 0x0303, alpn: Some("http/1.1".into()) });
        let c = l.clone().into_columns(false);
        assert_eq!((c.protocol, c.alpn_source, c.tls_version.as_deref()), ("h1", Some("server"), Some("TLSv1.2")));
        l.server_hello = Some(ServerHello { version: 0x0303, alpn: None });
        assert_eq!(l.clone().into_columns(false).protocol, "tls-other");
        l.server_hello = Some(ServerHello { version: 0x0304, alpn: None });
        assert_eq!(l.clone().into_columns(false).protocol, "h2");
        let q = Labels { quic_version: Some(1), quic_hello: Some(hello(&["h3"])), ..Labels::default() };
        let c = q.clone().into_columns(true);
        assert_eq!((c.protocol, c.quic_version.as_deref()), ("h3", Some("0x00000001")));
        let q = Labels { quic_version: Some(1), ..Labels::default() };
        assert_eq!(q.clone().into_columns(true).protocol, "quic-other");
        assert_eq!(Labels::default().into_columns(true).protocol, "udp-other");
        assert_eq!(Labels::default().into_columns(false).protocol, "tcp-other");
    }
}
