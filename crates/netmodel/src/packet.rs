//! Packets as the model sees them: a size, a flow key and an opaque payload.

use std::fmt;
use std::net::Ipv4Addr;

use crate::Nanos;

/// Why bytes could not be read as an IPv4 packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// Fewer bytes than an IPv4 header.
    #[error("packet of {0} bytes is shorter than an IPv4 header")]
    TooShort(usize),
    /// The version nibble is not 4.
    #[error("not an IPv4 packet (version {0})")]
    NotIpv4(u8),
    /// The header length field is impossible for the bytes given.
    #[error("invalid IPv4 header length {0}")]
    BadHeaderLength(usize),
}

/// The 5-tuple of a packet. Ports are 0 for protocols without ports and for non-first fragments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// IP protocol number.
    pub proto: u8,
}

impl Default for FlowKey {
    fn default() -> Self {
        FlowKey { src: Ipv4Addr::UNSPECIFIED, dst: Ipv4Addr::UNSPECIFIED, sport: 0, dport: 0, proto: 0 }
    }
}

impl FlowKey {
    /// The same flow seen from the other direction.
    pub fn reversed(&self) -> FlowKey {
        FlowKey { src: self.dst, dst: self.src, sport: self.dport, dport: self.sport, proto: self.proto }
    }

    /// A direction-independent form: the endpoint with the smaller (address, port) first.
    pub fn canonical(&self) -> FlowKey {
        if (self.src, self.sport) <= (self.dst, self.dport) {
            *self
        } else {
            self.reversed()
        }
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}->{}:{}/{}", self.src, self.sport, self.dst, self.dport, self.proto)
    }
}

/// A packet travelling through the model. `P` is whatever the driver needs to carry along
/// (the bytes in the emulator, `()` in tests).
///
/// A packet may stand for several wire segments sent back to back at the same moment (a GSO
/// super-packet the driver read whole): the model carries it whole only over links where every
/// segment's fate is the one it would have alone ([`crate::Link::takes_whole`]), counts and logs
/// it per segment, and splits it ([`Segmented`]) before any other link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<P> {
    /// IP bytes in bytes (what the rate and byte limits count): of all its segments together.
    pub size: u32,
    /// Wire segments it stands for (1: a single packet).
    pub segments: u32,
    /// IP bytes of each segment but the last (of a single packet: `size`).
    pub segment_size: u32,
    /// The 5-tuple.
    pub flow: FlowKey,
    /// The IPv4 identification field (for matching events with captures); the segments of a
    /// super-packet count up from it.
    pub ip_id: u16,
    /// Opaque payload.
    pub payload: P,
    /// Delay the links may still leave out, ns: the network's delay compensation, taken from
    /// the propagation delay of the link directions the packet crosses (see
    /// `Network::set_delay_compensation`).
    pub delay_credit: Nanos,
}

impl<P> Packet<P> {
    /// A packet with the given metadata.
    pub fn new(size: u32, flow: FlowKey, ip_id: u16, payload: P) -> Self {
        Packet { size, segments: 1, segment_size: size, flow, ip_id, payload, delay_credit: 0 }
    }

    /// A packet standing for `segments` wire segments (at least 1) of `segment_size` IP bytes
    /// each but the last, `size` in all, their IP ids counting up from `ip_id`.
    pub fn segmented(size: u32, segment_size: u32, segments: u32, flow: FlowKey, ip_id: u16, payload: P) -> Self {
        Packet { size, segments: segments.max(1), segment_size, flow, ip_id, payload, delay_credit: 0 }
    }

    /// The same packet with another payload.
    pub fn map<Q>(self, f: impl FnOnce(P) -> Q) -> Packet<Q> {
        let Packet { size, segments, segment_size, flow, ip_id, payload, delay_credit } = self;
        Packet { size, segments, segment_size, flow, ip_id, payload: f(payload), delay_credit }
    }

    /// Each segment's (IP bytes, IP id), in order.
    pub fn segment_sizes(&self) -> impl Iterator<Item = (u32, u16)> + '_ {
        let before_last = self.segments.saturating_sub(1);
        (0..self.segments).map(move |i| {
            let size = if i < before_last {
                self.segment_size
            } else {
                self.size.saturating_sub(self.segment_size.saturating_mul(before_last))
            };
            (size, self.ip_id.wrapping_add(i as u16))
        })
    }
}

/// A payload that can stand for several wire segments: how the model splits a packet carried
/// whole before a link where its segments' fates may differ.
pub trait Segmented: Sized {
    /// The payloads of the `segments` wire segments this payload stands for, in order, handed
    /// to `each`.
    fn split(self, segments: u32, each: &mut dyn FnMut(Self));
}

/// Payloads that are tags (the model's tests number their packets): every segment carries a
/// copy.
macro_rules! segmented_by_copy {
    ($($tag:ty),*) => {$(
        impl Segmented for $tag {
            fn split(self, segments: u32, each: &mut dyn FnMut($tag)) {
                (0..segments).for_each(|_| each(self));
            }
        }
    )*};
}
segmented_by_copy!((), u16, u32, u64);

impl<P: Segmented> Packet<P> {
    /// This packet's wire segments as packets of their own, in order (itself if it is one).
    pub fn into_segments(self, mut each: impl FnMut(Packet<P>)) {
        if self.segments <= 1 {
            return each(self);
        }
        let sizes: Vec<(u32, u16)> = self.segment_sizes().collect();
        let Packet { flow, delay_credit, payload, .. } = self;
        let mut sizes = sizes.into_iter();
        payload.split(sizes.len() as u32, &mut |payload| {
            if let Some((size, ip_id)) = sizes.next() {
                each(Packet { size, segments: 1, segment_size: size, flow, ip_id, payload, delay_credit });
            }
        });
    }
}

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_SCTP: u8 = 132;

/// Reads the flow key and IP id of an IPv4 packet. Never panics on arbitrary bytes.
pub fn parse_ipv4(bytes: &[u8]) -> Result<(FlowKey, u16), PacketError> {
    let header = bytes.get(..20).ok_or(PacketError::TooShort(bytes.len()))?;
    let version = header[0] >> 4;
    if version != 4 {
        return Err(PacketError::NotIpv4(version));
    }
    let header_len = usize::from(header[0] & 0x0f) * 4;
    if header_len < 20 || header_len > bytes.len() {
        return Err(PacketError::BadHeaderLength(header_len));
    }
    let ip_id = u16::from_be_bytes([header[4], header[5]]);
    let fragment_offset = u16::from_be_bytes([header[6], header[7]]) & 0x1fff;
    let proto = header[9];
    let src = Ipv4Addr::new(header[12], header[13], header[14], header[15]);
    let dst = Ipv4Addr::new(header[16], header[17], header[18], header[19]);
    let has_ports = matches!(proto, PROTO_TCP | PROTO_UDP | PROTO_SCTP) && fragment_offset == 0;
    let (sport, dport) = match bytes.get(header_len..header_len + 4) {
        Some(p) if has_ports => (u16::from_be_bytes([p[0], p[1]]), u16::from_be_bytes([p[2], p[3]])),
        _ => (0, 0),
    };
    Ok((FlowKey { src, dst, sport, dport, proto }, ip_id))
}

impl Packet<Vec<u8>> {
    /// Builds a model packet from raw IPv4 bytes.
    pub fn from_ipv4(bytes: Vec<u8>) -> Result<Self, PacketError> {
        let (flow, ip_id) = parse_ipv4(&bytes)?;
        let size = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        Ok(Packet::new(size, flow, ip_id, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_packet() -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[4] = 0x12;
        p[5] = 0x34;
        p[9] = PROTO_TCP;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[20..22].copy_from_slice(&5201u16.to_be_bytes());
        p[22..24].copy_from_slice(&40000u16.to_be_bytes());
        p
    }

    #[test]
    fn parses_tcp_five_tuple() {
        let (flow, id) = parse_ipv4(&tcp_packet()).unwrap();
        assert_eq!(id, 0x1234);
        assert_eq!(flow.sport, 5201);
        assert_eq!(flow.dport, 40000);
        assert_eq!(flow.proto, 6);
        assert_eq!(flow.src, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(flow.canonical(), flow.reversed().canonical());
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        for len in 0..64 {
            for first in [0u8, 0x45, 0x4f, 0x41, 0x60, 0xff] {
                let mut p = vec![0xabu8; len];
                if let Some(b) = p.first_mut() {
                    *b = first;
                }
                let _ = parse_ipv4(&p);
            }
        }
        assert_eq!(parse_ipv4(&[0x60; 40]), Err(PacketError::NotIpv4(6)));
        assert_eq!(parse_ipv4(&[0x45; 10]), Err(PacketError::TooShort(10)));
    }

    #[test]
    fn fragments_have_no_ports() {
        let mut p = tcp_packet();
        p[7] = 10; // fragment offset 10
        let (flow, _) = parse_ipv4(&p).unwrap();
        assert_eq!((flow.sport, flow.dport), (0, 0));
    }
}
