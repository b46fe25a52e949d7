//! Flow counters and handshake labels on hand-built connections.

mod common;

use common::*;
use flows::{extract, Config, FlowRecord};

const MS: i64 = 1_000_000;

fn flows_of(packets: &[Pkt]) -> Vec<FlowRecord> {
    flows_with(packets, &Config::default())
}

fn flows_with(packets: &[Pkt], config: &Config) -> Vec<FlowRecord> {
    let x = extract(&pcap(101, packets, true, false), config);
    assert!(x.error.is_none(), "{:?}", x.error);
    assert_eq!(x.stats.packets, packets.len() as u64);
    x.flows
}

fn c(seq: u32, flags: &str, payload: &[u8]) -> Vec<u8> {
    tcp4(CLIENT, 40000, SERVER, 443, seq, flags, payload)
}

fn s(seq: u32, flags: &str, payload: &[u8]) -> Vec<u8> {
    tcp4(SERVER, 443, CLIENT, 40000, seq, flags, payload)
}

/// Handshake, data both ways, one retransmitted segment, FIN both ways.
#[test]
fn tcp_counters_flags_and_retransmission() {
    let data = [0xabu8; 100];
    let packets = vec![
        pkt(T0, c(1000, "S", &[])),
        pkt(T0 + MS, s(5000, "SA", &[])),
        pkt(T0 + 2 * MS, c(1001, "A", &[])),
        pkt(T0 + 3 * MS, c(1001, "PA", &data)),
        pkt(T0 + 4 * MS, c(1101, "PA", &data)),
        pkt(T0 + 250 * MS, c(1001, "PA", &data)), // the first segment again
        pkt(T0 + 260 * MS, s(5001, "PA", &[1u8; 300])),
        pkt(T0 + 270 * MS, c(1201, "FA", &[])),
        pkt(T0 + 280 * MS, s(5301, "FA", &[])),
        pkt(T0 + 290 * MS, c(1202, "A", &[])),
    ];
    let flows = flows_of(&packets);
    assert_eq!(flows.len(), 1);
    let f = &flows[0];
    assert_eq!((f.client_ip.to_string().as_str(), f.client_port), ("10.0.0.1", 40000));
    assert_eq!((f.server_ip.to_string().as_str(), f.server_port), ("10.0.1.2", 443));
    assert_eq!((f.source, f.transport), ("pcap", "tcp"));
    assert_eq!((f.first_ns, f.last_ns), (T0, T0 + 290 * MS));
    assert!((f.duration_s - 0.29).abs() < 1e-9);
    assert_eq!((f.c2s_packets, f.s2c_packets), (7, 3));
    // 40 bytes of IPv4 + TCP headers per packet.
    assert_eq!((f.c2s_bytes, f.s2c_bytes), (7 * 40 + 300, 3 * 40 + 300));
    assert_eq!((f.c2s_payload_bytes, f.s2c_payload_bytes), (300, 300));
    assert_eq!((f.c2s_retrans_bytes, f.s2c_retrans_bytes), (Some(100), Some(0)));
    assert_eq!((f.syn, f.fin, f.rst, f.ack), (2, 2, 0, true));
    // SYN 0x02 | ACK 0x10 | PSH 0x08 | FIN 0x01 both ways.
    assert_eq!((f.c2s_tcp_flags, f.s2c_tcp_flags), (Some(0x1b), Some(0x1b)));
    assert_eq!((f.protocol, f.alpn_source, f.sni.as_deref()), ("tcp-other", None, None));
}

/// A capture that starts with the SYN-ACK: the initiator is its receiver.
#[test]
fn syn_ack_first_names_the_client() {
    let packets = vec![pkt(T0, s(5000, "SA", &[])), pkt(T0 + MS, c(1001, "A", &[])), pkt(T0 + 2 * MS, s(5001, "R", &[]))];
    let f = &flows_of(&packets)[0];
    assert_eq!((f.client_port, f.server_port), (40000, 443));
    assert_eq!((f.c2s_packets, f.s2c_packets, f.syn, f.rst), (1, 2, 1, 1));
}

/// Idle timeout and port reuse both end a flow.
#[test]
fn idle_timeout_and_reuse_start_new_flows() {
    let packets = vec![
        pkt(T0, c(1, "S", &[])),
        pkt(T0 + 200_000 * MS, c(1, "S", &[])),
        pkt(T0 + 201_000 * MS, c(2, "FA", &[])),
        pkt(T0 + 202_000 * MS, c(9, "S", &[])),
    ];
    let flows = flows_of(&packets);
    assert_eq!(flows.len(), 3, "120 s timeout, then a SYN after a FIN");
    assert_eq!(flows.iter().map(|f| f.c2s_packets).collect::<Vec<_>>(), vec![1, 2, 1]);
    let long = Config { idle_timeout_ns: 300_000 * MS };
    assert_eq!(flows_with(&packets, &long).len(), 2);
}

/// TLS 1.3: the ClientHello spans two TCP segments that arrive out of order; the server's
/// choice is encrypted, so the label rests on the client's offer.
#[test]
fn tls13_client_hello_across_segments() {
    let hello = record(&client_hello("www.example.test", &["h2", "http/1.1"], &[0x0304, 0x0303], 1200));
    assert!(hello.len() > 1300);
    let (first, second) = hello.split_at(700);
    let server = record(&server_hello(Some(0x0304), None));
    let packets = vec![
        pkt(T0, c(1000, "S", &[])),
        pkt(T0 + MS, s(5000, "SA", &[])),
        pkt(T0 + 2 * MS, c(1001 + 700, "PA", second)),
        pkt(T0 + 3 * MS, c(1001, "A", first)),
        pkt(T0 + 4 * MS, s(5001, "PA", &server)),
    ];
    let f = &flows_of(&packets)[0];
    assert_eq!(f.sni.as_deref(), Some("www.example.test"));
    assert_eq!(f.alpn_offer.as_deref(), Some("h2,http/1.1"));
    assert_eq!(f.alpn_server, None);
    assert_eq!(f.tls_version.as_deref(), Some("TLSv1.3"));
    assert_eq!((f.protocol, f.alpn_source), ("h2", Some("client-offer")));
    assert_eq!(f.c2s_retrans_bytes, Some(0), "a late segment filling a hole is not a retransmission");
}

/// A ClientHello fragmented over two TLS records, in one segment, no SYN in the capture.
#[test]
fn client_hello_across_records_mid_capture() {
    let msg = client_hello("a.example", &["http/1.1"], &[], 10);
    let mut stream = record(&msg[..50]);
    stream.extend(record(&msg[50..]));
    let packets = vec![pkt(T0, c(77, "PA", &stream))];
    let f = &flows_of(&packets)[0];
    assert_eq!(f.sni.as_deref(), Some("a.example"));
    assert_eq!((f.protocol, f.alpn_source, f.tls_version.as_deref()), ("h1", Some("client-offer"), Some("TLSv1.2")));
}

/// TLS 1.2: the ServerHello shows the server's ALPN choice, which wins over the offer.
#[test]
fn tls12_server_hello_alpn() {
    for (chosen, protocol) in [("http/1.1", "h1"), ("h2", "h2"), ("spdy/3", "tls-other")] {
        let packets = vec![
            pkt(T0, c(1000, "S", &[])),
            pkt(T0 + MS, s(5000, "SA", &[])),
            pkt(T0 + 2 * MS, c(1001, "PA", &record(&client_hello("b.example", &["h2", "http/1.1"], &[], 0)))),
            pkt(T0 + 3 * MS, s(5001, "PA", &record(&server_hello(None, Some(chosen))))),
        ];
        let f = &flows_of(&packets)[0];
        assert_eq!(f.alpn_server.as_deref(), Some(chosen));
        assert_eq!(f.alpn_offer.as_deref(), Some("h2,http/1.1"));
        assert_eq!((f.protocol, f.alpn_source), (protocol, Some("server")));
        assert_eq!(f.tls_version.as_deref(), Some("TLSv1.2"));
    }
    // A TLS 1.2 server that answers without ALPN chose none: no HTTP label.
    let packets = vec![
        pkt(T0, c(1001, "PA", &record(&client_hello("b.example", &["h2"], &[], 0)))),
        pkt(T0 + MS, s(5001, "PA", &record(&server_hello(None, None)))),
    ];
    let f = &flows_of(&packets)[0];
    assert_eq!((f.protocol, f.alpn_source, f.alpn_server.as_deref()), ("tls-other", None, None));
}

/// Cleartext HTTP/1.1: the request line and Host, split over two segments; the HTTP/2 preface.
#[test]
fn http1_request_line_and_h2c_preface() {
    let request = b"GET /img/a.png?v=2 HTTP/1.1\r\nHost: www.example.test\r\nAccept: */*\r\n\r\n";
    let h = |seq: u32, payload: &[u8]| tcp4(CLIENT, 40001, SERVER, 80, seq, "PA", payload);
    let packets = vec![
        pkt(T0, tcp4(CLIENT, 40001, SERVER, 80, 99, "S", &[])),
        pkt(T0 + MS, h(100, &request[..10])),
        pkt(T0 + 2 * MS, h(110, &request[10..])),
        pkt(T0 + 3 * MS, tcp4(SERVER, 80, CLIENT, 40001, 7, "PA", b"HTTP/1.1 200 OK\r\n\r\n")),
    ];
    let f = &flows_of(&packets)[0];
    assert_eq!((f.protocol, f.alpn_source), ("h1", Some("request-line")));
    assert_eq!(f.http_method.as_deref(), Some("GET"));
    assert_eq!(f.http_path.as_deref(), Some("/img/a.png?v=2"));
    assert_eq!(f.http_host.as_deref(), Some("www.example.test"));
    assert_eq!(f.sni, None);

    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00\x00";
    let f = &flows_of(&[pkt(T0, h(1, preface))])[0];
    assert_eq!((f.protocol, f.alpn_source, f.http_method.as_deref()), ("h2", Some("request-line"), Some("PRI")));
}

/// IPv6 over Ethernet.
#[test]
fn ipv6_flow() {
    let a = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let b = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let packets = vec![
        pkt(T0, ethernet(&tcp6(a, 5555, b, 80, 1, "S", &[]))),
        pkt(T0 + MS, ethernet(&tcp6(b, 80, a, 5555, 1, "SA", &[]))),
        pkt(T0 + 2 * MS, ethernet(&tcp6(a, 5555, b, 80, 2, "PA", b"HEAD / HTTP/1.0\r\n\r\n"))),
    ];
    let x = extract(&pcap(1, &packets, false, false), &Config::default());
    assert!(x.error.is_none());
    let f = &x.flows[0];
    assert_eq!(f.client_ip.to_string(), "2001:db8::1");
    assert_eq!(f.c2s_bytes, 2 * 60 + 19);
    assert_eq!((f.protocol, f.http_method.as_deref()), ("h1", Some("HEAD")));
}

fn q(payload: &[u8]) -> Vec<u8> {
    udp4(CLIENT, 50000, SERVER, 443, payload)
}

/// RFC 9001 Appendix A.2's client Initial, decrypted: version, SNI and ALPN offer ("alpn" is
/// not h3, so the flow is quic-other).
#[test]
fn quic_rfc9001_client_initial() {
    let initial = rfc9001_client_initial();
    let packets = vec![pkt(T0, q(&initial)), pkt(T0 + 30 * MS, udp4(SERVER, 443, CLIENT, 50000, &[0x55; 200]))];
    let f = &flows_of(&packets)[0];
    assert_eq!(f.transport, "udp");
    assert_eq!(f.quic_version.as_deref(), Some("0x00000001"));
    assert_eq!(f.sni.as_deref(), Some("example.com"));
    assert_eq!(f.alpn_offer.as_deref(), Some("alpn"));
    assert_eq!(f.tls_version.as_deref(), Some("TLSv1.3"));
    assert_eq!((f.protocol, f.alpn_source), ("quic-other", None));
    assert_eq!((f.c2s_bytes, f.s2c_bytes), (1228, 228));
    assert_eq!((f.c2s_payload_bytes, f.s2c_payload_bytes), (1200, 200));
    assert_eq!((f.c2s_retrans_bytes, f.c2s_tcp_flags, f.syn, f.ack), (None, None, 0, false));
}

/// A ClientHello offering h3, too long for one Initial: its CRYPTO frames come in two packets,
/// the second first.
#[test]
fn quic_h3_hello_across_initials() {
    let hello = client_hello("h3.example.test", &["h3", "h3-29"], &[0x0304], 1500);
    let dcid = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];
    let one = quic_v1_initial(&dcid, 0, 0, &hello[..1000]);
    let two = quic_v1_initial(&dcid, 1, 1000, &hello[1000..]);
    let packets = vec![pkt(T0, q(&two)), pkt(T0 + MS, q(&one)), pkt(T0 + 20 * MS, udp4(SERVER, 443, CLIENT, 50000, &[0xc0; 100]))];
    let f = &flows_of(&packets)[0];
    assert_eq!(f.sni.as_deref(), Some("h3.example.test"));
    assert_eq!(f.alpn_offer.as_deref(), Some("h3,h3-29"));
    assert_eq!((f.protocol, f.alpn_source, f.quic_version.as_deref()), ("h3", Some("client-offer"), Some("0x00000001")));
}

/// UDP that is not QUIC stays udp-other; a QUIC flow seen only from its short headers too.
#[test]
fn other_udp() {
    let dns = [0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 3, b'w', b'w', b'w', 0, 0, 1, 0, 1];
    let f = &flows_of(&[pkt(T0, udp4(CLIENT, 5353, SERVER, 53, &dns))])[0];
    assert_eq!((f.protocol, f.quic_version.as_deref()), ("udp-other", None));
    let short = [0x40u8; 60];
    let f = &flows_of(&[pkt(T0, q(&short))])[0];
    assert_eq!((f.protocol, f.quic_version.as_deref()), ("udp-other", None));
    // A long header of an unknown QUIC-like version is not taken for QUIC.
    let mut odd = vec![0xc0, 0x12, 0x34, 0x56, 0x78];
    odd.extend([0u8; 40]);
    assert_eq!(flows_of(&[pkt(T0, q(&odd))])[0].protocol, "udp-other");
    // Google QUIC's version tag marks QUIC even when it cannot be decrypted.
    let mut gquic = vec![0xc3, b'Q', b'0', b'5', b'0'];
    gquic.extend([0u8; 1200]);
    let f = &flows_of(&[pkt(T0, q(&gquic))])[0];
    assert_eq!((f.protocol, f.quic_version.as_deref()), ("quic-other", Some("0x51303530")));
}
