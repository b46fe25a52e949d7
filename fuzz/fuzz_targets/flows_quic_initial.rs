//! QUIC Initial parsing in flows (header protection, decryption with the initial secrets,
//! CRYPTO reassembly, the ClientHello's SNI and ALPN): the input is a list of client datagrams
//! to port 443, each a 2-byte big-endian length then its bytes (the rest is the last one).
#![no_main]
#[path = "common/pcap.rs"]
mod pcap;

use flows::{extract, Config};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut capture = pcap::Pcap::new();
    let mut rest = data;
    while !rest.is_empty() {
        let (len, body) = match rest {
            [hi, lo, body @ ..] => (usize::from(u16::from_be_bytes([*hi, *lo])), body),
            _ => (rest.len(), rest),
        };
        let (datagram, after) = body.split_at(len.min(body.len()));
        capture.udp_from_client(443, datagram);
        rest = after;
    }
    let extraction = extract(&capture.into_bytes(), &Config::default());
    assert!(extraction.error.is_none(), "the synthetic capture is well formed: {:?}", extraction.error);
    assert!(extraction.flows.len() <= 1, "one 5-tuple, one flow");
});
