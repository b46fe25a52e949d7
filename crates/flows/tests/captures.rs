//! Capture formats and link types, damaged and random input (errors with offsets, never a
//! panic), the streaming reader, and the Parquet and NDJSON outputs.

mod common;

use std::io::Read;

use common::*;
use flows::{extract, extract_reader, output, Config, Error, FlowRecord};

const MS: i64 = 1_000_000;

/// One TLS connection, one cleartext HTTP connection and one QUIC flow, as raw IPv4 packets.
fn scenario() -> Vec<Pkt> {
    let c = |seq, flags: &str, p: &[u8]| tcp4(CLIENT, 40000, SERVER, 443, seq, flags, p);
    let s = |seq, flags: &str, p: &[u8]| tcp4(SERVER, 443, CLIENT, 40000, seq, flags, p);
    let hello = record(&client_hello("www.example.test", &["h2", "http/1.1"], &[0x0304], 600));
    vec![
        pkt(T0, c(1000, "S", &[])),
        pkt(T0 + MS, s(5000, "SA", &[])),
        pkt(T0 + 2 * MS, c(1001, "PA", &hello[..300])),
        pkt(T0 + 3 * MS, c(1301, "PA", &hello[300..])),
        pkt(T0 + 4 * MS, s(5001, "PA", &record(&server_hello(Some(0x0304), None)))),
        pkt(T0 + 5 * MS, tcp4(CLIENT, 40001, SERVER, 80, 1, "PA", b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")),
        pkt(T0 + 6 * MS, udp4(CLIENT, 50000, SERVER, 443, &rfc9001_client_initial())),
        pkt(T0 + 7 * MS, c(1000 + hello.len() as u32 + 1, "FA", &[])),
        pkt(T0 + 8 * MS, s(5000, "RA", &[])),
    ]
}

fn labels(flows: &[FlowRecord]) -> Vec<(&'static str, Option<String>)> {
    flows.iter().map(|f| (f.protocol, f.sni.clone())).collect()
}

fn expected() -> Vec<(&'static str, Option<String>)> {
    vec![("h2", Some("www.example.test".into())), ("h1", None), ("quic-other", Some("example.com".into()))]
}

fn ok(bytes: &[u8]) -> Vec<FlowRecord> {
    let x = extract(bytes, &Config::default());
    assert!(x.error.is_none(), "{:?}", x.error);
    x.flows
}

#[test]
fn pcap_and_pcapng_variants_agree() {
    let packets = scenario();
    let reference = ok(&pcap(101, &packets, false, false));
    assert_eq!(labels(&reference), expected());
    for (name, bytes) in [
        ("pcap ns", pcap(101, &packets, true, false)),
        ("pcap big-endian", pcap(101, &packets, false, true)),
        ("pcapng us", pcapng(101, &packets, None)),
        ("pcapng ns", pcapng(101, &packets, Some(9))),
    ] {
        assert_eq!(ok(&bytes), reference, "{name}");
    }
}

#[test]
fn link_types_agree() {
    let packets = scenario();
    let reference = ok(&pcap(101, &packets, false, false));
    let wrap = |f: fn(&[u8]) -> Vec<u8>| packets.iter().map(|p| pkt(p.ts_ns, f(&p.data))).collect::<Vec<_>>();
    for (linktype, wrapped) in [(1, wrap(ethernet)), (113, wrap(sll)), (276, wrap(sll2)), (228, packets.clone())] {
        assert_eq!(ok(&pcap(linktype, &wrapped, false, false)), reference, "link type {linktype}");
        assert_eq!(ok(&pcapng(linktype as u16, &wrapped, None)), reference, "pcapng link type {linktype}");
    }
}

#[test]
fn unsupported_and_foreign_input() {
    let x = extract(&pcap(147, &scenario(), false, false), &Config::default());
    assert!(matches!(x.error, Some(Error::UnsupportedLinkType { linktype: 147 })), "{:?}", x.error);
    for junk in [&b"hello, world, this is not a capture"[..], b"\x00\x00\x00\x00\x00\x00\x00\x00"] {
        let x = extract(junk, &Config::default());
        let e = x.error.expect("an error");
        assert!(matches!(e, Error::UnknownFormat { .. }), "{e}");
        assert_eq!(e.offset(), Some(0));
    }
    let x = extract(b"", &Config::default());
    assert!(matches!(x.error, Some(Error::Truncated { offset: 0, .. })));
    // pcapng packets on an unsupported interface are skipped and counted.
    let x = extract(&pcapng(147, &scenario(), None), &Config::default());
    assert!(x.error.is_none());
    assert_eq!((x.stats.packets, x.stats.skipped_link_type, x.flows.len()), (9, 9, 0));
}

/// Every cut of a capture: the error names the header, record or block the cut falls in, and
/// the flows before it are kept; a cut between blocks is a clean end.
#[test]
fn truncated_at_every_offset() {
    let packets = scenario();
    for (format, bytes, mut boundaries, overhead) in [
        ("pcap", pcap(101, &packets, false, false), vec![24usize], 16usize),
        // pcapng: SHB (28 bytes), IDB (20), then EPBs of 32 bytes + data padded to 4.
        ("pcapng", pcapng(101, &packets, None), vec![28, 48], 32),
    ] {
        let first_packet = boundaries.len() - 1;
        for p in &packets {
            let padded = if format == "pcapng" { p.data.len().div_ceil(4) * 4 } else { p.data.len() };
            boundaries.push(boundaries.last().unwrap() + overhead + padded);
        }
        assert_eq!(*boundaries.last().unwrap(), bytes.len());
        for cut in 0..bytes.len() {
            let x = extract(&bytes[..cut], &Config::default());
            let packets_before = boundaries[first_packet..].iter().filter(|&&b| b <= cut).count().saturating_sub(1);
            assert_eq!(x.stats.packets as usize, packets_before, "{format} cut {cut}");
            if boundaries.contains(&cut) {
                assert!(x.error.is_none(), "{format} cut {cut}: {:?}", x.error);
                continue;
            }
            let e = x.error.unwrap_or_else(|| panic!("{format} cut at {cut}: no error"));
            let offset = boundaries.iter().rev().find(|&&b| b <= cut).copied().unwrap_or(0) as u64;
            assert!(matches!(e, Error::Truncated { .. }), "{format} cut {cut}: {e}");
            assert_eq!(e.offset(), Some(offset), "{format} cut {cut}: {e}");
            assert!(e.to_string().contains(&format!("at byte {offset}")), "{e}");
        }
    }
}

#[test]
fn corrupt_records_give_their_offset() {
    let packets = scenario();
    let mut bytes = pcap(101, &packets, false, false);
    let second = 24 + 16 + packets[0].data.len();
    bytes[second + 8..second + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let x = extract(&bytes, &Config::default());
    let e = x.error.expect("corrupt");
    assert!(matches!(e, Error::Corrupt { offset, .. } if offset == second as u64), "{e}");
    assert_eq!((x.stats.packets, x.flows.len()), (1, 1), "the flow of the first packet is kept");

    // A snap length of 4 GiB does not make a 2 GiB record plausible (nor make a reader buffer it).
    bytes[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = extract_reader(&mut &bytes[..], &Config::default(), "x").error.expect("corrupt");
    assert!(matches!(e, Error::Corrupt { offset, .. } if offset == second as u64), "{e}");

    let mut ng = pcapng(101, &packets, None);
    ng[48 + 4..48 + 8].copy_from_slice(&13u32.to_le_bytes());
    let e = extract(&ng, &Config::default()).error.expect("corrupt");
    assert!(matches!(e, Error::Corrupt { offset: 48, .. }), "{e}");
    assert!(e.is_damaged_capture());
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for i in 0..3000 {
        let len = rng.below(3000);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if i % 3 == 1 && bytes.len() >= 4 {
            bytes[..4].copy_from_slice(&[0xd4, 0xc3, 0xb2, 0xa1]);
        } else if i % 3 == 2 && bytes.len() >= 4 {
            bytes[..4].copy_from_slice(&[0x0a, 0x0d, 0x0d, 0x0a]);
        }
        let x = extract(&bytes, &Config::default());
        assert!(x.error.is_some() || x.stats.packets == 0 || bytes.len() >= 24);
    }
}

/// Well-framed captures of random frames, every link type: nothing to decode is fine, a panic
/// is not.
#[test]
fn random_frames_never_panic() {
    let mut rng = Rng(77);
    for linktype in [0u32, 1, 12, 101, 108, 113, 228, 229, 276] {
        let packets: Vec<Pkt> = (0..400)
            .map(|i| {
                let mut data: Vec<u8> = (0..rng.below(1600)).map(|_| rng.next() as u8).collect();
                // Steer a share of the frames into the IP and transport decoders.
                let ip_at = match linktype {
                    1 => 14,
                    113 => 16,
                    276 => 20,
                    0 | 108 => 4,
                    _ => 0,
                };
                if data.len() > ip_at + 40 && i % 2 == 0 {
                    data[ip_at] = if i % 4 == 0 { 0x45 } else { 0x60 };
                    if linktype == 1 {
                        data[12..14].copy_from_slice(if i % 4 == 0 { &[8, 0] } else { &[0x86, 0xdd] });
                    }
                    data[ip_at + 9] = if i % 8 == 0 { 17 } else { 6 };
                    data[ip_at + 6] = if i % 8 == 0 { 17 } else { 6 };
                }
                pkt(T0 + i as i64 * MS, data)
            })
            .collect();
        let x = extract(&pcap(linktype, &packets, false, false), &Config::default());
        assert!(x.error.is_none(), "{:?}", x.error);
        assert_eq!(x.stats.packets, 400);
    }
}

/// A valid capture with a few bytes changed, many times over.
#[test]
fn mutated_captures_never_panic() {
    let bytes = pcap(101, &scenario(), false, false);
    let ng = pcapng(101, &scenario(), Some(9));
    let mut rng = Rng(4242);
    for i in 0..3000 {
        let mut b = if i % 2 == 0 { bytes.clone() } else { ng.clone() };
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(b.len());
            b[at] = rng.next() as u8;
        }
        let _ = extract(&b, &Config::default());
    }
}

/// A reader that hands out a few bytes at a time.
struct Trickle<'a>(&'a [u8], usize);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.1 = self.1 % 7 + 1;
        let n = self.1.min(self.0.len()).min(buf.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn streaming_reader_matches_in_memory() {
    for bytes in [pcap(101, &scenario(), false, false), pcapng(1, &scenario().into_iter().map(|p| pkt(p.ts_ns, ethernet(&p.data))).collect::<Vec<_>>(), None)] {
        let whole = extract(&bytes, &Config::default());
        let streamed = extract_reader(&mut Trickle(&bytes, 0), &Config::default(), "trickle");
        assert!(streamed.error.is_none(), "{:?}", streamed.error);
        assert_eq!(streamed.flows, whole.flows);
        assert_eq!(streamed.stats, whole.stats);
        let cut = &bytes[..bytes.len() - 5];
        let (a, b) = (extract(cut, &Config::default()), extract_reader(&mut Trickle(cut, 0), &Config::default(), "t"));
        assert_eq!(a.error.map(|e| e.to_string()), b.error.map(|e| e.to_string()));
        assert_eq!(a.flows, b.flows);
    }
}

#[test]
fn parquet_output_reads_back() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;

    let flows = ok(&pcap(101, &scenario(), false, false));
    let meta = serde_json::json!({"schema": flows::SCHEMA, "schema_version": flows::SCHEMA_VERSION, "config": {"input": "x.pcap"}});
    let mut out = Vec::new();
    output::write_parquet(&mut out, &flows, &meta).unwrap();
    let reader = SerializedFileReader::new(bytes::Bytes::from(out)).unwrap();
    let file = reader.metadata().file_metadata();
    assert_eq!(file.num_rows(), 3);
    let kv = file.key_value_metadata().unwrap();
    let entry = kv.iter().find(|k| k.key == "protolab.flows").expect("schema metadata");
    let value: serde_json::Value = serde_json::from_str(entry.value.as_deref().unwrap()).unwrap();
    assert_eq!(value["schema_version"], 1);
    let names: Vec<&str> = file.schema_descr().columns().iter().map(|c| c.name()).collect();
    assert_eq!(names, output::COLUMNS);
    let rows: Vec<_> = reader.get_row_iter(None).unwrap().map(|r| r.unwrap()).collect();
    let col = |n: &str| output::COLUMNS.iter().position(|c| *c == n).unwrap();
    assert_eq!(rows[0].get_string(col("protocol")).unwrap(), "h2");
    assert_eq!(rows[0].get_string(col("sni")).unwrap(), "www.example.test");
    assert_eq!(rows[0].get_int(col("client_port")).unwrap(), 40000);
    assert_eq!(rows[0].get_long(col("first_ns")).unwrap(), T0);
    assert_eq!(rows[0].get_long(col("c2s_retrans_bytes")).unwrap(), 0);
    assert!(rows[2].get_long(col("c2s_retrans_bytes")).is_err(), "NULL for UDP");
    assert_eq!(rows[2].get_string(col("quic_version")).unwrap(), "0x00000001");
    assert!(rows[1].get_string(col("sni")).is_err(), "NULL without TLS");

    let mut empty = Vec::new();
    output::write_parquet(&mut empty, &[], &meta).unwrap();
    let reader = SerializedFileReader::new(bytes::Bytes::from(empty)).unwrap();
    assert_eq!(reader.metadata().file_metadata().num_rows(), 0);
}

#[test]
fn ndjson_output() {
    let flows = ok(&pcap(101, &scenario(), false, false));
    let meta = serde_json::json!({"schema": "protolab.flows", "schema_version": 1});
    let mut out = Vec::new();
    output::write_ndjson(&mut out, &flows, &meta).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0], meta);
    let keys: Vec<&String> = lines[1].as_object().unwrap().keys().collect();
    let mut expected: Vec<&str> = output::COLUMNS.to_vec();
    expected.sort();
    let mut keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
    keys.sort();
    assert_eq!(keys, expected);
    assert_eq!(lines[1]["client_ip"], "10.0.0.1");
    assert_eq!(lines[3]["protocol"], "quic-other");
}
