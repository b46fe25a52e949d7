//! A packet's bytes as the emulator carries them through the model, and the pool their buffers
//! come from.
//!
//! With segmentation offloads the hosts' kernels leave the transport checksum to the "device"
//! (virtio-net `NEEDS_CSUM`: the checksum field holds only the pseudo-header sum). The emulator
//! forwards such packets as they are and hands the same duty on to the receiving TUN, so the
//! receiving kernel accepts them as a NIC with checksum offload would have delivered them; a
//! [`Frame`] remembers which packets are in that state, and their checksums are completed only
//! where a complete one is needed: in a capture, and on a host without offloads.
//!
//! Every read used to allocate a buffer per wire segment and free it after the write; the
//! [`FramePool`] recycles them instead (bounded, so a burst does not keep its memory forever).

/// Room of a pooled buffer: a wire segment (MTU 1500) with margin.
pub const SEGMENT_ROOM: usize = 2048;
/// Idle buffers the pool keeps at most (8 MB of segments); beyond that they are freed.
const POOL_CAP: usize = 4096;
/// Room of a datagram buffer: a 64 KB GSO packet and its virtio-net header.
pub const DATAGRAM_ROOM: usize = 65_536 + VNET_HEADER_LEN;
/// Idle datagram buffers the pool keeps at most (8 MB).
const DATAGRAM_POOL_CAP: usize = 128;

/// IP protocol numbers of the transports whose checksums and segmentation the emulator handles.
pub const PROTO_TCP: u8 = 6;
/// See [`PROTO_TCP`].
pub const PROTO_UDP: u8 = 17;
/// Where the checksum sits in a TCP and in a UDP header.
pub const TCP_CHECKSUM_OFFSET: usize = 16;
/// See [`TCP_CHECKSUM_OFFSET`].
pub const UDP_CHECKSUM_OFFSET: usize = 6;

/// An IPv4 packet travelling through the emulator: one wire segment, or a GSO super-packet
/// carried whole (see [`Frame::whole`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The IP packet; of a super-packet carried whole, the datagram as the sending device read
    /// it: its virtio-net header ([`VNET_HEADER_LEN`] bytes), then the IP packet.
    pub bytes: Vec<u8>,
    /// The TCP or UDP checksum holds only the pseudo-header sum (still to be completed over the
    /// transport header and payload, as a NIC with checksum offload would).
    pub partial_checksum: bool,
    /// The shape of a super-packet carried whole (checked when it was read); None for a wire
    /// segment.
    pub gso: Option<GsoShape>,
}

/// Length of the virtio-net header in front of every datagram on a TUN with offloads.
pub const VNET_HEADER_LEN: usize = 10;

/// The checked shape of a GSO super-packet: what its wire segments will be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GsoShape {
    /// Length of the IP header.
    pub ip_header: usize,
    /// IP and transport headers: what every segment repeats.
    pub headers: usize,
    /// IP protocol (TCP or UDP).
    pub proto: u8,
    /// Payload bytes of every segment but the last.
    pub gso_size: usize,
    /// Wire segments (at least 1).
    pub segments: usize,
    /// IP bytes of the super-packet.
    pub ip_len: usize,
}

impl GsoShape {
    /// IP bytes of each segment but the last.
    pub fn segment_size(&self) -> usize {
        self.headers + self.gso_size.min(self.ip_len - self.headers)
    }

    /// IP bytes of all segments together (each repeats the headers).
    pub fn wire_bytes(&self) -> usize {
        self.ip_len + (self.segments - 1) * self.headers
    }

    /// The segments as the model counts them (checked shapes fit 64 KB and 1024 segments).
    pub fn model_shape(&self) -> netmodel::SegmentShape {
        netmodel::SegmentShape {
            segments: self.segments as u32,
            segment_size: self.segment_size() as u32,
            size: self.wire_bytes() as u32,
        }
    }
}

impl Frame {
    /// A packet whose checksums are complete (or that has none to complete).
    pub fn complete(bytes: Vec<u8>) -> Frame {
        Frame { bytes, partial_checksum: false, gso: None }
    }

    /// A packet whose transport checksum holds only the pseudo-header sum.
    pub fn partial(bytes: Vec<u8>) -> Frame {
        Frame { bytes, partial_checksum: true, gso: None }
    }

    /// A super-packet carried whole: `datagram` as the device read it (virtio-net header
    /// first), `shape` what checking it gave.
    pub fn whole(datagram: Vec<u8>, shape: GsoShape) -> Frame {
        Frame { bytes: datagram, partial_checksum: true, gso: Some(shape) }
    }

    /// The IP packet.
    pub fn ip(&self) -> &[u8] {
        let start = if self.gso.is_some() { VNET_HEADER_LEN } else { 0 };
        self.bytes.get(start..).unwrap_or_default()
    }

    /// Completes the transport checksum in place, if it is partial.
    pub fn complete_checksum(&mut self) {
        if self.partial_checksum {
            complete_transport_checksum(&mut self.bytes);
            self.partial_checksum = false;
        }
    }

    /// A copy with complete checksums (what a wire would carry: for the capture).
    pub fn wire_copy(&self) -> Vec<u8> {
        let mut bytes = self.bytes.clone();
        if self.partial_checksum {
            complete_transport_checksum(&mut bytes);
        }
        bytes
    }
}

/// Where the transport checksum of an IPv4 TCP or UDP packet starts and sits: (IP header
/// length, offset of the checksum field in the transport header). None for anything else or a
/// packet too short to hold the field.
pub fn checksum_layout(bytes: &[u8]) -> Option<(usize, usize)> {
    let first = *bytes.first()?;
    if first >> 4 != 4 {
        return None;
    }
    let ip_header = usize::from(first & 0x0f) * 4;
    let offset = match *bytes.get(9)? {
        PROTO_TCP => TCP_CHECKSUM_OFFSET,
        PROTO_UDP => UDP_CHECKSUM_OFFSET,
        _ => return None,
    };
    (ip_header >= 20 && bytes.len() >= ip_header + offset + 2).then_some((ip_header, offset))
}

/// Completes a partial checksum: the sum from the transport header to the end, the field's
/// pseudo-header sum included, complemented. Leaves anything but IPv4 TCP/UDP alone.
fn complete_transport_checksum(bytes: &mut [u8]) {
    if let Some((start, offset)) = checksum_layout(bytes) {
        complete_checksum_at(bytes, start, offset);
    }
}

/// Completes the checksum at `start + offset` over `bytes[start..]`, the field's current value
/// (the pseudo-header sum) included. The caller has checked that the field lies within `bytes`.
pub fn complete_checksum_at(bytes: &mut [u8], start: usize, offset: usize) {
    let Some(region) = bytes.get_mut(start..) else { return };
    let mut checksum = !ones_complement_sum(region, 0);
    if checksum == 0 && offset == UDP_CHECKSUM_OFFSET {
        // In UDP a zero checksum means "none"; its ones' complement twin stands in.
        checksum = 0xffff;
    }
    if let Some(field) = region.get_mut(offset..offset + 2) {
        field.copy_from_slice(&checksum.to_be_bytes());
    }
}

/// The 16-bit ones' complement sum of `bytes` (big-endian words, an odd last byte padded with
/// zero) added to `initial`, folded.
pub fn ones_complement_sum(bytes: &[u8], initial: u16) -> u16 {
    // Summing 32-bit words and folding at the end gives the same result as 16-bit words, since
    // 2^16 = 1 modulo 2^16 - 1; a u64 cannot overflow for any packet size.
    let mut sum = u64::from(initial);
    let mut words = bytes.chunks_exact(4);
    for w in &mut words {
        sum += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let mut rest = words.remainder().chunks(2);
    for pair in &mut rest {
        sum += u64::from(u16::from_be_bytes([pair[0], pair.get(1).copied().unwrap_or(0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The IPv4 pseudo-header sum of a transport segment of `length` bytes, folded but not
/// complemented: what a partial checksum field holds.
pub fn pseudo_header_sum(addresses: &[u8; 8], proto: u8, length: u16) -> u16 {
    let mut tail = [0u8; 4];
    tail[1] = proto;
    tail[2..4].copy_from_slice(&length.to_be_bytes());
    ones_complement_sum(&tail, ones_complement_sum(addresses, 0))
}

/// Rewrites an IPv4 header's checksum (`header`: exactly the header).
pub fn set_ipv4_header_checksum(header: &mut [u8]) {
    if header.len() < 20 {
        return;
    }
    header[10] = 0;
    header[11] = 0;
    let checksum = !ones_complement_sum(header, 0);
    header[10..12].copy_from_slice(&checksum.to_be_bytes());
}

/// Recycled packet buffers, shared by every host's reads and writes: segment-sized ones, and
/// datagram-sized ones that super-packets carried whole were read into.
#[derive(Debug, Default)]
pub struct FramePool {
    free: Vec<Vec<u8>>,
    free_datagrams: Vec<Vec<u8>>,
}

impl FramePool {
    /// An empty buffer with room for a wire segment.
    pub fn take(&mut self) -> Vec<u8> {
        self.free.pop().unwrap_or_else(|| Vec::with_capacity(SEGMENT_ROOM))
    }

    /// An empty buffer with room for the largest datagram a read returns.
    pub fn take_datagram(&mut self) -> Vec<u8> {
        self.free_datagrams.pop().unwrap_or_else(|| Vec::with_capacity(DATAGRAM_ROOM))
    }

    /// Returns a buffer once its packet has been written. Only segment-sized and datagram-sized
    /// buffers are kept, at most [`POOL_CAP`] and [`DATAGRAM_POOL_CAP`] of them.
    pub fn give(&mut self, mut bytes: Vec<u8>) {
        let capacity = bytes.capacity();
        let (list, cap) = if (SEGMENT_ROOM..=2 * SEGMENT_ROOM).contains(&capacity) {
            (&mut self.free, POOL_CAP)
        } else if (DATAGRAM_ROOM..=2 * DATAGRAM_ROOM).contains(&capacity) {
            (&mut self.free_datagrams, DATAGRAM_POOL_CAP)
        } else {
            return;
        };
        if list.len() < cap {
            bytes.clear();
            list.push(bytes);
        }
    }

    /// Idle buffers held.
    pub fn idle(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An IPv4/TCP packet from 10.0.0.1:5201 to 10.0.0.2:40000 with `payload`, checksums
    /// complete.
    pub(crate) fn tcp_packet(payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((40 + payload.len()) as u16).to_be_bytes());
        p[8] = 64;
        p[9] = PROTO_TCP;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[20..22].copy_from_slice(&5201u16.to_be_bytes());
        p[22..24].copy_from_slice(&40000u16.to_be_bytes());
        p[32] = 5 << 4;
        p[33] = 0x10;
        p.extend_from_slice(payload);
        set_ipv4_header_checksum(&mut p[..20]);
        let mut addresses = [0u8; 8];
        addresses.copy_from_slice(&p[12..20]);
        let pseudo = pseudo_header_sum(&addresses, PROTO_TCP, (20 + payload.len()) as u16);
        p[36..38].copy_from_slice(&pseudo.to_be_bytes());
        complete_checksum_at(&mut p, 20, TCP_CHECKSUM_OFFSET);
        p
    }

    /// Whether the IP header and transport checksums of an IPv4 TCP/UDP packet verify.
    pub(crate) fn checksums_verify(p: &[u8]) -> bool {
        let ip_header = usize::from(p[0] & 0x0f) * 4;
        let mut addresses = [0u8; 8];
        addresses.copy_from_slice(&p[12..20]);
        let pseudo = pseudo_header_sum(&addresses, p[9], (p.len() - ip_header) as u16);
        ones_complement_sum(&p[..ip_header], 0) == 0xffff && ones_complement_sum(&p[ip_header..], pseudo) == 0xffff
    }

    #[test]
    fn sums_match_the_rfc_1071_example() {
        // RFC 1071, section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        assert_eq!(ones_complement_sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7], 0), 0xddf2);
        // An odd length pads with zero; the sum is the same from any split into 32-bit words.
        assert_eq!(ones_complement_sum(&[0xf2, 0x03, 0xf4], 0), ones_complement_sum(&[0xf2, 0x03, 0xf4, 0x00], 0));
        assert_eq!(ones_complement_sum(&[0xff, 0xff, 0x00, 0x01], 0), 0x0001);
    }

    #[test]
    fn a_partial_checksum_completes_to_the_full_one() {
        let complete = tcp_packet(b"some payload bytes, odd length");
        assert!(checksums_verify(&complete));
        let mut partial = complete.clone();
        let mut addresses = [0u8; 8];
        addresses.copy_from_slice(&partial[12..20]);
        let pseudo = pseudo_header_sum(&addresses, PROTO_TCP, (partial.len() - 20) as u16);
        partial[36..38].copy_from_slice(&pseudo.to_be_bytes());
        let mut frame = Frame::partial(partial);
        assert!(!checksums_verify(&frame.bytes));
        assert_eq!(frame.wire_copy(), complete);
        frame.complete_checksum();
        assert_eq!(frame, Frame::complete(complete));
    }

    #[test]
    fn only_ipv4_tcp_and_udp_have_a_checksum_layout() {
        let tcp = tcp_packet(b"x");
        assert_eq!(checksum_layout(&tcp), Some((20, TCP_CHECKSUM_OFFSET)));
        let mut udp = tcp.clone();
        udp[9] = PROTO_UDP;
        assert_eq!(checksum_layout(&udp), Some((20, UDP_CHECKSUM_OFFSET)));
        let mut icmp = tcp.clone();
        icmp[9] = 1;
        assert_eq!(checksum_layout(&icmp), None);
        assert_eq!(checksum_layout(&tcp[..37]), None, "too short for the field");
        assert_eq!(checksum_layout(&[0x60; 60]), None);
        assert_eq!(checksum_layout(&[]), None);
        // Completing leaves what it cannot place alone.
        let mut short = Frame::partial(vec![0x45; 30]);
        short.complete_checksum();
        assert_eq!(short.bytes, vec![0x45; 30]);
    }

    #[test]
    fn the_pool_recycles_segment_buffers_up_to_its_cap() {
        let mut pool = FramePool::default();
        let mut buffer = pool.take();
        assert!(buffer.is_empty() && buffer.capacity() >= SEGMENT_ROOM);
        buffer.extend_from_slice(&[1, 2, 3]);
        let address = buffer.as_ptr();
        pool.give(buffer);
        let again = pool.take();
        assert_eq!((again.as_ptr(), again.len()), (address, 0), "the same buffer, emptied");
        pool.give(Vec::with_capacity(16 * 1024));
        pool.give(Vec::new());
        assert_eq!(pool.idle(), 0, "only segment-sized buffers are kept");
        let datagram = pool.take_datagram();
        assert!(datagram.capacity() >= DATAGRAM_ROOM);
        let address = datagram.as_ptr();
        pool.give(datagram);
        let again = pool.take_datagram();
        assert_eq!((pool.idle(), again.as_ptr()), (0, address), "datagram buffers are kept apart");
        for _ in 0..POOL_CAP + 10 {
            pool.give(Vec::with_capacity(SEGMENT_ROOM));
        }
        assert_eq!(pool.idle(), POOL_CAP);
    }
}
