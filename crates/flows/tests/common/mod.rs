//! Hand-built packets, handshakes and capture files for the tests.
#![allow(dead_code)]

use etherparse::PacketBuilder;
use ring::aead::quic::{HeaderProtectionKey, AES_128};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
use ring::hkdf;

pub const CLIENT: [u8; 4] = [10, 0, 0, 1];
pub const SERVER: [u8; 4] = [10, 0, 1, 2];
pub const T0: i64 = 1_700_000_000_000_000_000;

/// A packet and its capture time.
#[derive(Clone, Debug)]
pub struct Pkt {
    pub ts_ns: i64,
    pub data: Vec<u8>,
}

pub fn pkt(ts_ns: i64, data: Vec<u8>) -> Pkt {
    Pkt { ts_ns, data }
}

/// A raw IPv4 TCP segment; `flags` is a string of S, A, F, R, P.
pub fn tcp4(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, seq: u32, flags: &str, payload: &[u8]) -> Vec<u8> {
    let mut b = PacketBuilder::ipv4(src, dst, 64).tcp(sport, dport, seq, 65535);
    for f in flags.chars() {
        b = match f {
            'S' => b.syn(),
            'A' => b.ack(1),
            'F' => b.fin(),
            'R' => b.rst(),
            'P' => b.psh(),
            _ => panic!("flag {f}"),
        };
    }
    let mut out = Vec::new();
    b.write(&mut out, payload).unwrap();
    out
}

/// A raw IPv6 TCP segment.
pub fn tcp6(src: [u8; 16], sport: u16, dst: [u8; 16], dport: u16, seq: u32, flags: &str, payload: &[u8]) -> Vec<u8> {
    let mut b = PacketBuilder::ipv6(src, dst, 64).tcp(sport, dport, seq, 65535);
    for f in flags.chars() {
        b = match f {
            'S' => b.syn(),
            'A' => b.ack(1),
            'F' => b.fin(),
            'R' => b.rst(),
            'P' => b.psh(),
            _ => panic!("flag {f}"),
        };
    }
    let mut out = Vec::new();
    b.write(&mut out, payload).unwrap();
    out
}

/// A raw IPv4 UDP datagram.
pub fn udp4(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ipv4(src, dst, 64).udp(sport, dport).write(&mut out, payload).unwrap();
    out
}

/// Raw IP bytes behind an Ethernet II header.
pub fn ethernet(ip: &[u8]) -> Vec<u8> {
    let ethertype: u16 = if ip[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
    let mut out = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    out.extend_from_slice(&ethertype.to_be_bytes());
    out.extend_from_slice(ip);
    out
}

/// Raw IP bytes behind a Linux cooked (SLL v1) header.
pub fn sll(ip: &[u8]) -> Vec<u8> {
    let proto: u16 = if ip[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
    let mut out = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0];
    out.extend_from_slice(&proto.to_be_bytes());
    out.extend_from_slice(ip);
    out
}

/// Raw IP bytes behind a Linux cooked v2 (SLL2) header.
pub fn sll2(ip: &[u8]) -> Vec<u8> {
    let proto: u16 = if ip[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
    let mut out = proto.to_be_bytes().to_vec();
    out.extend_from_slice(&[0, 0, 0, 0, 0, 3, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
    out.extend_from_slice(ip);
    out
}

/// A legacy pcap file.
pub fn pcap(linktype: u32, packets: &[Pkt], nanos: bool, big_endian: bool) -> Vec<u8> {
    let w32 = |v: u32| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
    let w16 = |v: u16| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut out = Vec::new();
    out.extend_from_slice(&w32(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    out.extend_from_slice(&w16(2));
    out.extend_from_slice(&w16(4));
    out.extend_from_slice(&w32(0));
    out.extend_from_slice(&w32(0));
    out.extend_from_slice(&w32(262_144));
    out.extend_from_slice(&w32(linktype));
    for p in packets {
        let secs = (p.ts_ns / 1_000_000_000) as u32;
        let frac = (p.ts_ns % 1_000_000_000) as u32;
        out.extend_from_slice(&w32(secs));
        out.extend_from_slice(&w32(if nanos { frac } else { frac / 1000 }));
        out.extend_from_slice(&w32(p.data.len() as u32));
        out.extend_from_slice(&w32(p.data.len() as u32));
        out.extend_from_slice(&p.data);
    }
    out
}

fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    while !body.len().is_multiple_of(4) {
        body.push(0);
    }
    let len = (body.len() + 12) as u32;
    let mut out = kind.to_le_bytes().to_vec();
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&len.to_le_bytes());
    out
}

/// A little-endian pcapng file: section header, one interface (with `if_tsresol` when given;
/// microseconds otherwise), an enhanced packet block per packet.
pub fn pcapng(linktype: u16, packets: &[Pkt], tsresol: Option<u8>) -> Vec<u8> {
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    let mut out = block(0x0a0d_0d0a, &shb);
    let mut idb = linktype.to_le_bytes().to_vec();
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&262_144u32.to_le_bytes());
    if let Some(r) = tsresol {
        idb.extend_from_slice(&9u16.to_le_bytes());
        idb.extend_from_slice(&1u16.to_le_bytes());
        idb.extend_from_slice(&[r, 0, 0, 0]);
        idb.extend_from_slice(&[0, 0, 0, 0]);
    }
    out.extend(block(1, &idb));
    let units: u64 = match tsresol {
        Some(r) => 10u64.pow(u32::from(r)),
        None => 1_000_000,
    };
    for p in packets {
        let ts = (p.ts_ns as u128 * units as u128 / 1_000_000_000) as u64;
        let mut epb = 0u32.to_le_bytes().to_vec();
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ts as u32).to_le_bytes());
        epb.extend_from_slice(&(p.data.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(p.data.len() as u32).to_le_bytes());
        epb.extend_from_slice(&p.data);
        out.extend(block(6, &epb));
    }
    out
}

fn u24(n: usize) -> [u8; 3] {
    [(n >> 16) as u8, (n >> 8) as u8, n as u8]
}

fn ext(kind: u16, data: &[u8]) -> Vec<u8> {
    let mut out = kind.to_be_bytes().to_vec();
    out.extend_from_slice(&(data.len() as u16).to_be_bytes());
    out.extend_from_slice(data);
    out
}

fn alpn_ext(protocols: &[&str]) -> Vec<u8> {
    let mut list = Vec::new();
    for p in protocols {
        list.push(p.len() as u8);
        list.extend_from_slice(p.as_bytes());
    }
    let mut data = (list.len() as u16).to_be_bytes().to_vec();
    data.extend(list);
    ext(16, &data)
}

/// A ClientHello handshake message (type and length included): SNI, ALPN, supported_versions
/// (a GREASE value first) and a key share of `key_share` bytes to make it as long as needed.
pub fn client_hello(sni: &str, alpn: &[&str], versions: &[u16], key_share: usize) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7u8; 32]);
    body.push(32);
    body.extend_from_slice(&[9u8; 32]);
    body.extend_from_slice(&[0, 6, 0x13, 0x01, 0x13, 0x02, 0x13, 0x03]);
    body.extend_from_slice(&[1, 0]);
    let mut exts = Vec::new();
    let mut name = vec![0];
    name.extend_from_slice(&(sni.len() as u16).to_be_bytes());
    name.extend_from_slice(sni.as_bytes());
    let mut sni_data = (name.len() as u16).to_be_bytes().to_vec();
    sni_data.extend(name);
    exts.extend(ext(0, &sni_data));
    if !alpn.is_empty() {
        exts.extend(alpn_ext(alpn));
    }
    if !versions.is_empty() {
        let mut v = vec![(2 * versions.len() + 2) as u8, 0x0a, 0x0a];
        for x in versions {
            v.extend_from_slice(&x.to_be_bytes());
        }
        exts.extend(ext(43, &v));
    }
    let mut ks = ((key_share + 4) as u16).to_be_bytes().to_vec();
    ks.extend_from_slice(&[0, 0x1d]);
    ks.extend_from_slice(&(key_share as u16).to_be_bytes());
    ks.extend(std::iter::repeat_n(0x42, key_share));
    exts.extend(ext(51, &ks));
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend(exts);
    let mut msg = vec![1];
    msg.extend_from_slice(&u24(body.len()));
    msg.extend(body);
    msg
}

/// A ServerHello handshake message: legacy version 0x0303, supported_versions when given (TLS
/// 1.3), ALPN when given.
pub fn server_hello(supported_version: Option<u16>, alpn: Option<&str>) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&[5u8; 32]);
    body.push(32);
    body.extend_from_slice(&[9u8; 32]);
    body.extend_from_slice(&[0xc0, 0x2f, 0]);
    let mut exts = Vec::new();
    if let Some(v) = supported_version {
        exts.extend(ext(43, &v.to_be_bytes()));
    }
    if let Some(a) = alpn {
        exts.extend(alpn_ext(&[a]));
    }
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend(exts);
    let mut msg = vec![2];
    msg.extend_from_slice(&u24(body.len()));
    msg.extend(body);
    msg
}

/// Handshake messages in one TLS record.
pub fn record(msg: &[u8]) -> Vec<u8> {
    let mut out = vec![0x16, 3, 1];
    out.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    out.extend_from_slice(msg);
    out
}

struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn expand(prk: &hkdf::Prk, label: &str, n: usize) -> Vec<u8> {
    let len = (n as u16).to_be_bytes();
    let label_len = [(6 + label.len()) as u8];
    let info: [&[u8]; 5] = [&len, &label_len, b"tls13 ", label.as_bytes(), &[0]];
    let mut out = vec![0; n];
    prk.expand(&info, Len(n)).unwrap().fill(&mut out).unwrap();
    out
}

fn varint2(v: usize) -> [u8; 2] {
    [0x40 | (v >> 8) as u8, v as u8]
}

/// A protected QUIC v1 client Initial (RFC 9001 §5) carrying `crypto` at CRYPTO offset
/// `offset`, padded to a 1200-byte datagram; the test's own sealing, the inverse of the
/// library's opening.
pub fn quic_v1_initial(dcid: &[u8], pn: u8, offset: usize, crypto: &[u8]) -> Vec<u8> {
    let salt = [
        0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a,
    ];
    let initial = hkdf::Salt::new(hkdf::HKDF_SHA256, &salt).extract(dcid);
    let client = expand(&initial, "client in", 32);
    let secret = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &client);
    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &expand(&secret, "quic key", 16)).unwrap());
    let iv = expand(&secret, "quic iv", 12);
    let hp = HeaderProtectionKey::new(&AES_128, &expand(&secret, "quic hp", 16)).unwrap();

    let mut frames = vec![0x06];
    frames.extend_from_slice(&varint2(offset));
    frames.extend_from_slice(&varint2(crypto.len()));
    frames.extend_from_slice(crypto);
    let mut header = vec![0xc0, 0, 0, 0, 1, dcid.len() as u8];
    header.extend_from_slice(dcid);
    header.extend_from_slice(&[0, 0]); // no SCID, no token
    let fixed = header.len() + 2 + 1 + 16;
    if fixed + frames.len() < 1200 {
        frames.resize(1200 - fixed, 0); // PADDING
    }
    header.extend_from_slice(&varint2(1 + frames.len() + 16));
    let pn_offset = header.len();
    header.push(pn);
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&iv);
    nonce[11] ^= pn;
    let mut payload = frames;
    key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(&header), &mut payload).unwrap();
    let mut packet = header;
    packet.extend(payload);
    let mask = hp.new_mask(&packet[pn_offset + 4..pn_offset + 20]).unwrap();
    packet[0] ^= mask[0] & 0x0f;
    packet[pn_offset] ^= mask[1];
    packet
}

/// The RFC 9001 Appendix A.2 client Initial.
pub fn rfc9001_client_initial() -> Vec<u8> {
    let text = include_str!("../data/rfc9001_a2_client_initial.hex");
    let hex: String = text.lines().filter(|l| !l.starts_with('#')).flat_map(|l| l.trim().chars()).collect();
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

/// A small deterministic generator (xorshift64*) for the fuzz-style tests.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
