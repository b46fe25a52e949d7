//! A real capture: `protolab-net serve` on loopback and one `protolab-net bulk` download of
//! 3000 bytes each over h1c, h1 (TLS 1.3, rustls), h2 and h3 (QUIC v1, quinn), captured with
//! `tcpdump -i any` (Linux cooked v2) and converted to pcapng by Wireshark's editcap. The
//! expected counts are tshark's (`-z conv,tcp -z conv,udp`; its bytes are frame bytes, 20 more
//! per packet than IP bytes here); the labels are those tshark shows for the hellos.

use std::path::Path;

use flows::{extract_file, Config};

#[test]
fn loopback_downloads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/loopback-h1c-h1-h2-h3.pcapng");
    let x = extract_file(&path, &Config::default()).unwrap();
    assert!(x.error.is_none(), "{:?}", x.error);
    assert_eq!((x.stats.format, x.stats.packets, x.stats.flow_packets), (Some("pcapng"), 78, 78));
    let rows: Vec<_> = x
        .flows
        .iter()
        .map(|f| (f.transport, f.client_port, f.server_port, f.c2s_packets, f.s2c_packets, f.c2s_bytes, f.s2c_bytes))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("tcp", 51858, 18080, 6, 4, 526 - 6 * 20, 3479 - 4 * 20),
            ("tcp", 34140, 18443, 8, 6, 1011 - 8 * 20, 5040 - 6 * 20),
            ("tcp", 34156, 18443, 13, 12, 1535 - 13 * 20, 5546 - 12 * 20),
            ("udp", 42436, 18443, 16, 13, 9344 - 16 * 20, 9929 - 13 * 20),
        ]
    );
    let labels: Vec<_> = x.flows.iter().map(|f| (f.protocol, f.alpn_source, f.sni.as_deref(), f.alpn_offer.as_deref())).collect();
    assert_eq!(
        labels,
        vec![
            ("h1", Some("request-line"), None, None),
            ("h1", Some("client-offer"), Some("localhost"), Some("http/1.1")),
            ("h2", Some("client-offer"), Some("localhost"), Some("h2")),
            ("h3", Some("client-offer"), Some("localhost"), Some("h3")),
        ]
    );
    let h1c = &x.flows[0];
    assert_eq!((h1c.http_method.as_deref(), h1c.http_path.as_deref()), (Some("GET"), Some("/bytes?n=3000")));
    assert_eq!(h1c.http_host.as_deref(), Some("localhost:18080"));
    assert_eq!(x.flows[1].tls_version.as_deref(), Some("TLSv1.3"));
    assert_eq!(x.flows[3].quic_version.as_deref(), Some("0x00000001"));
    assert!(x.flows.iter().all(|f| f.c2s_retrans_bytes.unwrap_or(0) == 0 && f.s2c_retrans_bytes.unwrap_or(0) == 0));
}
