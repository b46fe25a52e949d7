//! QUIC client Initial packets: the version from the long header, and the ClientHello from the
//! CRYPTO frames once the packet is decrypted with the Initial keys every observer can derive
//! from the Destination Connection ID (RFC 9001 §5.2; RFC 9369 §3.3.1 for version 2). Header
//! protection is AES-128-ECB and the payload AES-128-GCM, both from `ring`.

use ring::aead::quic::{HeaderProtectionKey, AES_128};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
use ring::hkdf;

use crate::stream::StreamBuf;
use crate::tls::{self, ClientHello, Parse};

/// QUIC version 1 (RFC 9000).
pub const V1: u32 = 0x0000_0001;
/// QUIC version 2 (RFC 9369).
pub const V2: u32 = 0x6b33_43cf;

/// The Initial salt and HKDF label prefix of a version whose Initials can be decrypted.
fn initial_params(version: u32) -> Option<(&'static [u8; 20], &'static str)> {
    const SALT_V1: [u8; 20] = [
        0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a,
    ];
    const SALT_V2: [u8; 20] = [
        0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9,
    ];
    // Drafts 29 to 32 (still sent by some old clients).
    const SALT_DRAFT29: [u8; 20] = [
        0xaf, 0xbf, 0xec, 0x28, 0x99, 0x93, 0xd2, 0x4c, 0x9e, 0x97, 0x86, 0xf1, 0x9c, 0x61, 0x11, 0xe0, 0x43, 0x90, 0xa8, 0x99,
    ];
    match version {
        V1 => Some((&SALT_V1, "quic")),
        V2 => Some((&SALT_V2, "quicv2")),
        0xff00_001d..=0xff00_0020 => Some((&SALT_DRAFT29, "quic")),
        _ => None,
    }
}

/// Whether a long-header version is QUIC's: known ones, IETF drafts, Google QUIC (Q0xx, T0xx)
/// and the reserved greasing pattern. Other UDP payloads with the long-header bit are not.
pub fn is_quic_version(version: u32) -> bool {
    initial_params(version).is_some()
        || version >> 8 == 0xff_0000
        || matches!(version >> 24, 0x51 | 0x54) && (version >> 16) & 0xff == 0x30
        || version & 0x0f0f_0f0f == 0x0a0a_0a0a
}

/// The version of a long-header packet (first byte with the form and fixed bits set).
pub fn long_header_version(datagram: &[u8]) -> Option<u32> {
    let first = *datagram.first()?;
    if first & 0xc0 != 0xc0 || datagram.len() < 5 {
        return None;
    }
    let v = u32::from_be_bytes([datagram[1], datagram[2], datagram[3], datagram[4]]);
    (v != 0).then_some(v)
}

/// Keys of one direction of the Initial packets.
struct InitialKeys {
    dcid: Vec<u8>,
    version: u32,
    key: LessSafeKey,
    iv: [u8; 12],
    hp: HeaderProtectionKey,
}

struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context.
fn expand_label(prk: &hkdf::Prk, label: &str, out: &mut [u8]) -> Option<()> {
    let len = (out.len() as u16).to_be_bytes();
    let label_len = [(6 + label.len()) as u8];
    let info: [&[u8]; 5] = [&len, &label_len, b"tls13 ", label.as_bytes(), &[0]];
    prk.expand(&info, Len(out.len())).ok()?.fill(out).ok()
}

impl InitialKeys {
    /// The client's Initial keys for a Destination Connection ID.
    fn client(version: u32, dcid: &[u8]) -> Option<InitialKeys> {
        let (salt, prefix) = initial_params(version)?;
        let initial = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(dcid);
        let mut client_secret = [0u8; 32];
        expand_label(&initial, "client in", &mut client_secret)?;
        let secret = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &client_secret);
        let (mut key, mut iv, mut hp) = ([0u8; 16], [0u8; 12], [0u8; 16]);
        expand_label(&secret, &format!("{prefix} key"), &mut key)?;
        expand_label(&secret, &format!("{prefix} iv"), &mut iv)?;
        expand_label(&secret, &format!("{prefix} hp"), &mut hp)?;
        Some(InitialKeys {
            dcid: dcid.to_vec(),
            version,
            key: LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &key).ok()?),
            iv,
            hp: HeaderProtectionKey::new(&AES_128, &hp).ok()?,
        })
    }
}

/// Reads a QUIC variable-length integer at `*pos`.
fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *buf.get(*pos)?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(*pos..*pos + len)?;
    let mut v = u64::from(first & 0x3f);
    for &b in &bytes[1..] {
        v = (v << 8) | u64::from(b);
    }
    *pos += len;
    Some(v)
}

/// What the client's Initial packets of one flow have shown so far.
#[derive(Default)]
pub struct QuicInspector {
    /// Version of the first long-header packet (then of the packet the ClientHello came in).
    pub version: Option<u32>,
    /// The ClientHello, once its CRYPTO frames were complete.
    pub hello: Option<ClientHello>,
    /// Keys of the first Initial's DCID; a later Initial (after a Retry or a server's new
    /// connection ID) may need keys of its own DCID, derived on the spot.
    keys: Option<InitialKeys>,
    crypto: StreamBuf,
    /// Datagrams looked at: the hello comes in the first few, so looking stops after a bound.
    seen: u8,
    /// Nothing more to learn.
    pub done: bool,
}

/// Client datagrams inspected at most per flow.
const MAX_DATAGRAMS: u8 = 16;

impl QuicInspector {
    /// Takes one datagram the client sent. `scratch` is a reusable decryption buffer.
    pub fn client_datagram(&mut self, datagram: &[u8], scratch: &mut Vec<u8>) {
        if self.done {
            return;
        }
        self.seen += 1;
        if self.seen > MAX_DATAGRAMS {
            self.done = true;
            return;
        }
        let mut rest = datagram;
        // Coalesced packets: an Initial may be followed by 0-RTT or Handshake packets.
        while let Some(version) = long_header_version(rest) {
            if self.version.is_none() {
                self.version = Some(version);
            }
            match self.initial_packet(rest, version, scratch) {
                Some(next) if next < rest.len() => rest = &rest[next..],
                _ => break,
            }
            if self.done {
                break;
            }
        }
        if long_header_version(datagram).is_none() {
            // A short header: the handshake is over (or the flow did not start with one).
            self.done = true;
        }
    }

    /// Reads one long-header packet at the start of `pkt`; returns the offset of the next.
    fn initial_packet(&mut self, pkt: &[u8], version: u32, scratch: &mut Vec<u8>) -> Option<usize> {
        let first = pkt[0];
        let mut pos = 5;
        let dcid_len = usize::from(*pkt.get(pos)?);
        if dcid_len > 20 {
            return None;
        }
        let dcid = pkt.get(pos + 1..pos + 1 + dcid_len)?;
        pos += 1 + dcid_len;
        let scid_len = usize::from(*pkt.get(pos)?);
        if scid_len > 20 {
            return None;
        }
        pos += 1 + scid_len;
        // Unknown layout beyond the invariant header: the version is all there is.
        initial_params(version)?;
        let packet_type = (first >> 4) & 0x03;
        let (initial_type, retry_type) = if version == V2 { (1, 0) } else { (0, 3) };
        if packet_type == retry_type {
            return None; // no length field, and nothing to read
        }
        if packet_type == initial_type {
            let token_len = varint(pkt, &mut pos)? as usize;
            pos = pos.checked_add(token_len)?;
        }
        let length = varint(pkt, &mut pos)? as usize;
        let pn_offset = pos;
        let end = pn_offset.checked_add(length)?;
        if packet_type != initial_type {
            return Some(end); // 0-RTT or Handshake: other keys
        }
        if end > pkt.len() || length < 4 + 16 {
            return None;
        }
        let first_keys = self.keys.is_none();
        if first_keys {
            self.keys = InitialKeys::client(version, dcid);
        }
        let mut ok = self.keys.as_ref().is_some_and(|k| decrypt(k, pkt, pn_offset, end, scratch));
        let own = self.keys.as_ref().is_some_and(|k| k.dcid == dcid && k.version == version);
        if !ok && !first_keys && !own {
            ok = InitialKeys::client(version, dcid).is_some_and(|k| decrypt(&k, pkt, pn_offset, end, scratch));
        }
        if ok {
            self.version = Some(version);
            self.read_frames(scratch);
        }
        Some(end)
    }

    /// Collects CRYPTO frames from a decrypted Initial payload; reads the ClientHello when the
    /// stream holds it.
    fn read_frames(&mut self, plain: &[u8]) {
        let mut pos = 0;
        let mut grew = false;
        while pos < plain.len() {
            let Some(frame_type) = varint(plain, &mut pos) else { break };
            let ok = match frame_type {
                0x00 | 0x01 => Some(()), // PADDING, PING
                0x02 | 0x03 => (|| {
                    let _largest = varint(plain, &mut pos)?;
                    let _delay = varint(plain, &mut pos)?;
                    let count = varint(plain, &mut pos)?;
                    let _first = varint(plain, &mut pos)?;
                    for _ in 0..count.min(plain.len() as u64) {
                        varint(plain, &mut pos)?;
                        varint(plain, &mut pos)?;
                    }
                    if frame_type == 0x03 {
                        for _ in 0..3 {
                            varint(plain, &mut pos)?;
                        }
                    }
                    Some(())
                })(),
                0x06 => (|| {
                    let offset = varint(plain, &mut pos)?;
                    let len = varint(plain, &mut pos)? as usize;
                    let data = plain.get(pos..pos.checked_add(len)?)?;
                    pos += len;
                    grew |= self.crypto.insert(offset, data);
                    Some(())
                })(),
                0x1c | 0x1d => (|| {
                    varint(plain, &mut pos)?;
                    if frame_type == 0x1c {
                        varint(plain, &mut pos)?;
                    }
                    let len = varint(plain, &mut pos)? as usize;
                    pos = pos.checked_add(len)?;
                    Some(())
                })(),
                _ => None, // not allowed in Initial packets: stop reading this packet
            };
            if ok.is_none() {
                break;
            }
        }
        if grew {
            match tls::first_crypto_message(self.crypto.contiguous()) {
                Parse::Done(msg) => {
                    self.hello = tls::client_hello(msg);
                    self.done = true;
                }
                Parse::NotThis => self.done = true,
                Parse::NeedMore => {
                    if self.crypto.full() {
                        self.done = true;
                    }
                }
            }
        }
        if self.done {
            self.crypto = StreamBuf::default();
        }
    }
}

/// Removes header protection and decrypts `pkt[..end]` into `scratch` (the plaintext
/// frames); false if the packet does not authenticate with these keys.
fn decrypt(keys: &InitialKeys, pkt: &[u8], pn_offset: usize, end: usize, scratch: &mut Vec<u8>) -> bool {
    let Some(sample) = pkt.get(pn_offset + 4..pn_offset + 20) else { return false };
    let Ok(mask) = keys.hp.new_mask(sample) else { return false };
    let first = pkt[0] ^ (mask[0] & 0x0f);
    let pn_len = usize::from(first & 0x03) + 1;
    scratch.clear();
    scratch.extend_from_slice(&pkt[..end]);
    scratch[0] = first;
    let mut pn: u64 = 0;
    for i in 0..pn_len {
        scratch[pn_offset + i] ^= mask[1 + i];
        pn = (pn << 8) | u64::from(scratch[pn_offset + i]);
    }
    // Initial packet numbers are small (the first packets of a connection), so the
    // truncated number is the full one.
    let mut nonce = keys.iv;
    for (i, b) in pn.to_be_bytes().iter().enumerate() {
        nonce[4 + i] ^= b;
    }
    let header_len = pn_offset + pn_len;
    let (header, payload) = scratch.split_at_mut(header_len);
    let Ok(plain) = keys.key.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(&*header), payload) else {
        return false;
    };
    let plain_len = plain.len();
    // Keep only the plaintext in scratch.
    scratch.copy_within(header_len..header_len + plain_len, 0);
    scratch.truncate(plain_len);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.lines().filter(|l| !l.starts_with('#')).flat_map(|l| l.trim().chars()).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// RFC 9001 Appendix A.1: the client's Initial keys for DCID 0x8394c8f03e515708.
    #[test]
    fn rfc9001_initial_keys() {
        let k = InitialKeys::client(V1, &hex("8394c8f03e515708")).unwrap();
        assert_eq!(k.iv.to_vec(), hex("fa044b2f42a3fd3b46fb255c"));
        // The key and hp key are opaque in ring: check them through their effect. The header
        // protection mask of A.2's sample is given in A.2 (437b9aec36).
        let mask = k.hp.new_mask(&hex("d1b1c98dd7689fb8ec11d242b123dc9b")).unwrap();
        assert_eq!(mask.to_vec(), hex("437b9aec36"));
    }

    /// RFC 9001 Appendix A.2: the protected client Initial decrypts (the GCM tag checks, so
    /// every byte of key, nonce and header is right) to the appendix's CRYPTO frame.
    #[test]
    fn rfc9001_client_initial() {
        let packet = hex(include_str!("../tests/data/rfc9001_a2_client_initial.hex"));
        assert_eq!(packet.len(), 1200);
        let mut q = QuicInspector::default();
        let mut scratch = Vec::new();
        q.client_datagram(&packet, &mut scratch);
        assert!(q.done);
        assert_eq!(q.version, Some(V1));
        assert_eq!(&scratch[..10], &hex("060040f1010000ed0303")[..]);
        let hello = q.hello.expect("ClientHello");
        assert_eq!(hello.sni.as_deref(), Some("example.com"));
        assert_eq!(hello.alpn, vec!["alpn".to_string()]);
        assert_eq!(hello.max_version, 0x0304);
    }

    /// RFC 9369 Appendix A.2: the same Initial protected for QUIC version 2 (its salt, its
    /// "quicv2" labels, its Initial packet type).
    #[test]
    fn rfc9369_client_initial() {
        let packet = hex(include_str!("../tests/data/rfc9369_a2_client_initial.hex"));
        assert_eq!(packet.len(), 1200);
        let mut q = QuicInspector::default();
        q.client_datagram(&packet, &mut Vec::new());
        assert_eq!(q.version, Some(V2));
        let hello = q.hello.expect("ClientHello");
        assert_eq!(hello.sni.as_deref(), Some("example.com"));
        assert_eq!(hello.alpn, vec!["alpn".to_string()]);
    }

    #[test]
    fn damaged_initials_do_not_panic() {
        let packet = hex(include_str!("../tests/data/rfc9001_a2_client_initial.hex"));
        let mut scratch = Vec::new();
        for cut in 0..packet.len() {
            let mut q = QuicInspector::default();
            q.client_datagram(&packet[..cut], &mut scratch);
            assert!(q.hello.is_none());
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..2000 {
            let mut p = packet.clone();
            for _ in 0..1 + i % 4 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let at = (state % p.len() as u64) as usize;
                p[at] ^= (state >> 32) as u8 | 1;
            }
            let mut q = QuicInspector::default();
            q.client_datagram(&p, &mut scratch);
        }
    }
}
