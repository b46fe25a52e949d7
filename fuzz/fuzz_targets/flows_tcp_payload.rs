//! TLS ClientHello/ServerHello and HTTP/1.x request-line parsing in flows, over reassembled TCP:
//! the first byte picks the server port (443 or 80) and the segment size, the next four the
//! client's initial sequence number, the rest is the client's byte stream, sent in segments with
//! every third one retransmitted and every fourth one ahead of its predecessor; the server
//! answers each with the same bytes (so ServerHello parsing sees them too).
#![no_main]
#[path = "common/pcap.rs"]
mod pcap;

use flows::{extract, Config};
use libfuzzer_sys::fuzz_target;

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH_ACK: u8 = 0x18;

fuzz_target!(|data: &[u8]| {
    let [control, a, b, c, d, stream @ ..] = data else { return };
    let port = if control & 0x80 == 0 { 443 } else { 80 };
    let segment = usize::from(control & 0x7f).max(1) * 16;
    let client_isn = u32::from_be_bytes([*a, *b, *c, *d]);
    let server_isn = client_isn.rotate_left(16);

    let mut capture = pcap::Pcap::new();
    capture.tcp(true, port, client_isn, 0, SYN, &[]);
    capture.tcp(false, port, server_isn, client_isn.wrapping_add(1), SYN | ACK, &[]);
    let chunks: Vec<(u32, &[u8])> = stream
        .chunks(segment)
        .enumerate()
        .map(|(i, chunk)| (client_isn.wrapping_add(1).wrapping_add((i * segment) as u32), chunk))
        .collect();
    let mut order: Vec<usize> = (0..chunks.len()).collect();
    for i in (3..order.len()).step_by(4) {
        order.swap(i - 1, i);
    }
    for (n, &i) in order.iter().enumerate() {
        let (seq, chunk) = chunks[i];
        let server_seq = server_isn.wrapping_add(1).wrapping_add((i * segment) as u32);
        capture.tcp(true, port, seq, server_seq, PSH_ACK, chunk);
        if n % 3 == 2 {
            capture.tcp(true, port, seq, server_seq, PSH_ACK, chunk);
        }
        capture.tcp(false, port, server_seq, seq.wrapping_add(chunk.len() as u32), PSH_ACK, chunk);
    }
    let extraction = extract(&capture.into_bytes(), &Config::default());
    assert!(extraction.error.is_none(), "the synthetic capture is well formed: {:?}", extraction.error);
    assert_eq!(extraction.flows.len(), 1, "one connection, one flow");
});
