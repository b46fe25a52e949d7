//! Segmentation offloads on bytes alone: the virtio-net header in front of every datagram a TUN
//! device with offloads reads and writes, the split of a host's GSO super-packet into its wire
//! segments (straight into pooled buffers, transport checksums left partial as the host's kernel
//! left them), and the writes that carry delivered segments back (runs of one flow coalesced
//! into one super-packet, written as one vectored write: no coalescing copy, no checksum pass).
//!
//! Pure (no device): unit-tested here and fuzzed on the very functions the emulator runs
//! (`fuzz/fuzz_targets/vnet_super_packet.rs` for [`split`], `vnet_gro.rs` for [`for_each_write`]
//! read back through [`split`]). Every length and offset read from a datagram is checked before
//! use; a datagram that does not add up is [`Malformed`], never a panic. tun-rs only sets the
//! devices up: its read path (`recv_multiple`) indexes past the packet when a checksum-only
//! header points beyond it, and its split and GRO copy every segment twice and checksum it.

use std::io::IoSlice;

use crate::frame::{
    checksum_layout, complete_checksum_at, pseudo_header_sum, set_ipv4_header_checksum, Frame, FramePool, GsoShape,
    DATAGRAM_ROOM, PROTO_TCP, PROTO_UDP, SEGMENT_ROOM, TCP_CHECKSUM_OFFSET, UDP_CHECKSUM_OFFSET,
};
pub use crate::frame::VNET_HEADER_LEN;

const _: () = assert!(VNET_HEADER_LEN == tun_rs::VIRTIO_NET_HDR_LEN);
/// The largest datagram a TUN read returns with offloads: a 64 KB GSO packet and its header.
pub const MAX_DATAGRAM: usize = DATAGRAM_ROOM;

const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_UDP_L4: u8 = 5;
/// Set with TCPv4 when the first segment carries CWR (it stays on the first segment only).
const GSO_ECN: u8 = 0x80;
const GSO_TCPV4_ECN: u8 = GSO_TCPV4 | GSO_ECN;

const TCP_ACK: u8 = 0x10;
const TCP_PSH: u8 = 0x08;
const TCP_FIN: u8 = 0x01;
const TCP_CWR: u8 = 0x80;
/// Segments one super-packet may split into: 64 KB at TCP's smallest MSS (88 bytes) is 745.
const MAX_SEGMENTS: usize = 1024;
/// Segments one written super-packet carries at most (45 full-sized ones fill 64 KB).
const MAX_COALESCED: usize = 64;
const MAX_IP_PACKET: usize = 65_535;
/// IPv4 flags and fragment offset without DF: MF set or an offset means a fragment.
const IPV4_FRAGMENT_MASK: u16 = 0x3fff;

/// The legacy virtio-net header a TUN device with `IFF_VNET_HDR` reads and writes, in the host's
/// byte order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHeader {
    /// `NEEDS_CSUM`: complete the checksum at `csum_start + csum_offset`.
    pub flags: u8,
    /// None, TCPv4 or UDP (USO), possibly with the ECN bit.
    pub gso_type: u8,
    /// Length of the headers every segment repeats (the kernel's may cover more: not trusted).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the checksummed region starts (the transport header).
    pub csum_start: u16,
    /// Where in it the checksum field sits.
    pub csum_offset: u16,
}

impl VnetHeader {
    /// The header at the start of `bytes`, if they are long enough.
    pub fn parse(bytes: &[u8]) -> Option<VnetHeader> {
        let b = bytes.get(..VNET_HEADER_LEN)?;
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Some(VnetHeader {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// The header's bytes.
    pub fn encode(&self) -> [u8; VNET_HEADER_LEN] {
        let mut b = [0u8; VNET_HEADER_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        for (i, value) in [self.hdr_len, self.gso_size, self.csum_start, self.csum_offset].into_iter().enumerate() {
            b[2 + 2 * i..4 + 2 * i].copy_from_slice(&value.to_ne_bytes());
        }
        b
    }

    /// The header for writing one packet: asks the receiving device to complete a partial
    /// checksum, or nothing at all.
    pub fn for_single(frame: &Frame) -> VnetHeader {
        match checksum_layout(&frame.bytes) {
            // The layout lies within a packet, so within 64 KB.
            Some((start, offset)) if frame.partial_checksum => VnetHeader {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_NONE,
                hdr_len: (start + offset + 2) as u16,
                gso_size: 0,
                csum_start: start as u16,
                csum_offset: offset as u16,
            },
            _ => VnetHeader::default(),
        }
    }
}

/// Why a datagram could not be split; the emulator drops it and counts `rx_malformed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("datagram of {0} bytes carries no packet after the virtio-net header")]
    NoPacket(usize),
    #[error("checksum field (start {start}, offset {offset}) lies beyond the packet's {len} bytes")]
    ChecksumOutside { start: u16, offset: u16, len: usize },
    #[error("packet of {0} bytes is longer than a wire segment may be")]
    TooLong(usize),
    #[error("GSO type {gso_type:#04x} does not fit an IPv{version} packet (only IPv4 TCP and UDP are split)")]
    GsoType { gso_type: u8, version: u8 },
    #[error("GSO size is zero")]
    ZeroGsoSize,
    #[error("IP header: {0}")]
    IpHeader(&'static str),
    #[error("transport header: {0}")]
    TransportHeader(&'static str),
    #[error("GSO packet carries no payload")]
    NoPayload,
    #[error("segments of {0} bytes would be longer than a wire segment may be")]
    SegmentsTooLong(usize),
    #[error("{0} segments are more than one super-packet may split into")]
    TooManySegments(usize),
}

/// Turns one datagram read from a device with offloads (virtio-net header first) into its wire
/// segments, each handed to `each` in a buffer from `pool`; returns how many (at least 1).
/// Nothing is handed on for a malformed datagram.
pub fn split(datagram: &[u8], pool: &mut FramePool, mut each: impl FnMut(Frame)) -> Result<usize, Malformed> {
    let (header, packet) = header_and_packet(datagram)?;
    if header.gso_type == GSO_NONE {
        each(single(header, packet, pool)?);
        return Ok(1);
    }
    let shape = check_super_packet(header, packet)?;
    Ok(split_super_packet(&shape, packet, pool, each))
}

/// The shape of a datagram that is a GSO super-packet, checked as [`split`] checks it (None:
/// a single packet, checked only when it is split).
pub fn super_packet_shape(datagram: &[u8]) -> Result<Option<GsoShape>, Malformed> {
    let (header, packet) = header_and_packet(datagram)?;
    if header.gso_type == GSO_NONE {
        return Ok(None);
    }
    check_super_packet(header, packet).map(Some)
}

fn header_and_packet(datagram: &[u8]) -> Result<(VnetHeader, &[u8]), Malformed> {
    match (VnetHeader::parse(datagram), datagram.get(VNET_HEADER_LEN..)) {
        (Some(header), Some(packet)) if !packet.is_empty() => Ok((header, packet)),
        _ => Err(Malformed::NoPacket(datagram.len())),
    }
}

/// Hands on a frame's wire segments: a super-packet carried whole split as [`split`] would
/// have split it when it was read (its buffer goes back to `pool`), any other frame as it is.
/// Returns how many.
pub fn split_whole(frame: Frame, pool: &mut FramePool, mut each: impl FnMut(Frame)) -> usize {
    let Some(shape) = frame.gso else {
        each(frame);
        return 1;
    };
    let count = split_super_packet(&shape, frame.ip(), pool, each);
    pool.give(frame.bytes);
    count
}

/// Cuts a checked super-packet (`datagram` as read, virtio-net header first, of `shape`) into
/// pieces of `most` segments (the last may have fewer), handed to `each` in order: each a
/// super-packet of its own to be carried whole, numbered as the segmentation of the whole would
/// number its segments (IP ids and sequence numbers counting on, CWR on the first piece only,
/// FIN and PSH on the last only), its transport checksum partial; a piece of one segment is
/// that segment (in a buffer from `pool`). Returns how many pieces.
pub fn split_pieces(datagram: &[u8], shape: &GsoShape, most: usize, pool: &mut FramePool, mut each: impl FnMut(Frame)) -> usize {
    let (Some(header), Some(packet)) = (VnetHeader::parse(datagram), datagram.get(VNET_HEADER_LEN..)) else { return 0 };
    let GsoShape { headers, gso_size, .. } = *shape;
    let Some(payload) = packet.get(headers..) else { return 0 };
    let whole = Whole::of(packet, shape);
    let piece_payload = most.max(1) * gso_size;
    let count = payload.len().div_ceil(piece_payload);
    for (i, data) in payload.chunks(piece_payload).enumerate() {
        let first_segment = i * most.max(1);
        let vnet = VnetHeader { gso_type: if i > 0 { header.gso_type & !GSO_ECN } else { header.gso_type }, ..header };
        let mut bytes = Vec::with_capacity(VNET_HEADER_LEN + headers + data.len());
        bytes.extend_from_slice(&vnet.encode());
        bytes.extend_from_slice(&packet[..headers]);
        bytes.extend_from_slice(data);
        whole.rewrite_part(&mut bytes[VNET_HEADER_LEN..], first_segment, i == 0, i + 1 == count);
        let piece = GsoShape { segments: data.len().div_ceil(gso_size), ip_len: headers + data.len(), ..*shape };
        let frame = Frame::whole(bytes, piece);
        if piece.segments > 1 {
            each(frame);
        } else {
            split_whole(frame, pool, &mut each);
        }
    }
    count
}

/// The model splits a super-packet it carries whole before a link where its segments' fates may
/// differ (rarely: the emulator reads one whole only when its route takes it whole), into
/// freshly allocated buffers that join the pool once written.
impl netmodel::Segmented for Frame {
    fn split(self, _segments: u32, each: &mut dyn FnMut(Frame)) {
        split_whole(self, &mut FramePool::default(), each);
    }
}

/// A datagram that is one packet already; its checksum stays partial if the kernel left it so
/// at the usual place, and is completed now otherwise (as the device would).
fn single(header: VnetHeader, packet: &[u8], pool: &mut FramePool) -> Result<Frame, Malformed> {
    if packet.len() > SEGMENT_ROOM {
        return Err(Malformed::TooLong(packet.len()));
    }
    let (start, offset) = (usize::from(header.csum_start), usize::from(header.csum_offset));
    let needs_checksum = header.flags & F_NEEDS_CSUM != 0;
    if needs_checksum && start + offset + 2 > packet.len() {
        let (start, offset) = (header.csum_start, header.csum_offset);
        return Err(Malformed::ChecksumOutside { start, offset, len: packet.len() });
    }
    let mut bytes = pool.take();
    bytes.extend_from_slice(packet);
    if !needs_checksum {
        return Ok(Frame::complete(bytes));
    }
    if checksum_layout(&bytes) == Some((start, offset)) {
        return Ok(Frame::partial(bytes));
    }
    complete_checksum_at(&mut bytes, start, offset);
    Ok(Frame::complete(bytes))
}

/// Checks that every segment of a super-packet will be a valid IPv4 TCP/UDP packet no longer
/// than a wire segment: the GSO type that of the IP protocol, no fragment, the checksum at the
/// transport header's checksum field, whole headers, a payload, and not too many segments.
fn check_super_packet(header: VnetHeader, packet: &[u8]) -> Result<GsoShape, Malformed> {
    if packet.len() > MAX_IP_PACKET {
        return Err(Malformed::TooLong(packet.len()));
    }
    // `split` hands on only a packet of at least one byte.
    let version = packet.first().map_or(0, |b| b >> 4);
    let (proto, checksum_offset) = match (header.gso_type, version) {
        (GSO_TCPV4 | GSO_TCPV4_ECN, 4) => (PROTO_TCP, TCP_CHECKSUM_OFFSET),
        (GSO_UDP_L4, 4) => (PROTO_UDP, UDP_CHECKSUM_OFFSET),
        (gso_type, version) => return Err(Malformed::GsoType { gso_type, version }),
    };
    if header.gso_size == 0 {
        return Err(Malformed::ZeroGsoSize);
    }
    let ip_header = ipv4_header_len(packet, proto)?;
    if usize::from(header.csum_start) != ip_header {
        return Err(Malformed::IpHeader("the checksum does not start where the IP header ends"));
    }
    if usize::from(header.csum_offset) != checksum_offset {
        return Err(Malformed::TransportHeader("the checksum offset is not the transport's checksum field"));
    }
    let transport_header = if proto == PROTO_TCP { tcp_header_len(packet, ip_header)? } else { 8 };
    let headers = ip_header + transport_header;
    if packet.len() <= headers {
        return Err(Malformed::NoPayload);
    }
    let (gso_size, payload) = (usize::from(header.gso_size), packet.len() - headers);
    let segment_len = headers + gso_size.min(payload);
    if segment_len > SEGMENT_ROOM {
        return Err(Malformed::SegmentsTooLong(segment_len));
    }
    let count = payload.div_ceil(gso_size);
    if count > MAX_SEGMENTS {
        return Err(Malformed::TooManySegments(count));
    }
    Ok(GsoShape { ip_header, headers, proto, gso_size, segments: count, ip_len: packet.len() })
}

/// The IPv4 header's length, once it is known to carry `proto` unfragmented.
fn ipv4_header_len(packet: &[u8], proto: u8) -> Result<usize, Malformed> {
    if packet.len() < 20 {
        return Err(Malformed::IpHeader("IPv4 packet shorter than its header"));
    }
    let len = usize::from(packet[0] & 0x0f) * 4;
    if len < 20 || packet.len() < len {
        return Err(Malformed::IpHeader("IPv4 header length out of range"));
    }
    if packet[9] != proto {
        return Err(Malformed::IpHeader("IPv4 protocol is not the GSO type's transport"));
    }
    if u16::from_be_bytes([packet[6], packet[7]]) & IPV4_FRAGMENT_MASK != 0 {
        return Err(Malformed::IpHeader("IPv4 fragment"));
    }
    Ok(len)
}

/// The TCP header's length from its data offset.
fn tcp_header_len(packet: &[u8], at: usize) -> Result<usize, Malformed> {
    let offset = packet.get(at + 12).ok_or(Malformed::TransportHeader("TCP header cut short"))?;
    let len = usize::from(offset >> 4) * 4;
    if len < 20 {
        return Err(Malformed::TransportHeader("TCP data offset below 5"));
    }
    if packet.len() < at + len {
        return Err(Malformed::TransportHeader("TCP header cut short"));
    }
    Ok(len)
}

/// Splits a checked GSO super-packet as the kernel's software segmentation would: each segment
/// gets the headers with its own IP total length, IP id (counting up) and header checksum, TCP
/// sequence number (FIN and PSH on the last segment only, CWR on the first only) or UDP length,
/// and a partial transport checksum (the pseudo-header sum of its own length). Returns how many.
fn split_super_packet(shape: &GsoShape, packet: &[u8], pool: &mut FramePool, mut each: impl FnMut(Frame)) -> usize {
    let GsoShape { headers, gso_size, .. } = *shape;
    let whole = Whole::of(packet, shape);
    let payload = &packet[headers..];
    let count = payload.len().div_ceil(gso_size);
    for (i, data) in payload.chunks(gso_size).enumerate() {
        let mut bytes = pool.take();
        bytes.extend_from_slice(&packet[..headers]);
        bytes.extend_from_slice(data);
        whole.rewrite_part(&mut bytes, i, i == 0, i + 1 == count);
        each(Frame::partial(bytes));
    }
    count
}

/// What the parts of a checked super-packet (its segments, or pieces of several) take from the
/// whole: its shape, first IP id and sequence number, and addresses.
struct Whole {
    shape: GsoShape,
    first_id: u16,
    first_seq: u32,
    addresses: [u8; 8],
}

impl Whole {
    /// The super-packet `packet` (IP bytes) of the checked `shape`.
    fn of(packet: &[u8], shape: &GsoShape) -> Whole {
        let transport = &packet[shape.ip_header..];
        let mut addresses = [0u8; 8];
        addresses.copy_from_slice(&packet[12..20]);
        Whole {
            shape: *shape,
            first_id: u16::from_be_bytes([packet[4], packet[5]]),
            first_seq: u32::from_be_bytes([transport[4], transport[5], transport[6], transport[7]]),
            addresses,
        }
    }

    /// Rewrites the headers copied from the whole in front of a part's payload (`bytes`: its IP
    /// packet), the part starting at segment `first_segment`, as the kernel's segmentation
    /// would: the IP total length, IP id (counting up) and header checksum, the TCP sequence
    /// number (CWR on the `first` part only, FIN and PSH on the `last` only) or UDP length, and a
    /// partial transport checksum (the pseudo-header sum of the part's own length).
    fn rewrite_part(&self, bytes: &mut [u8], first_segment: usize, first: bool, last: bool) {
        let GsoShape { ip_header, proto, gso_size, .. } = self.shape;
        // At most the checked super-packet's length, so within 64 KB.
        let total = bytes.len() as u16;
        let transport_len = total - ip_header as u16;
        let (ip, transport) = bytes.split_at_mut(ip_header);
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[4..6].copy_from_slice(&self.first_id.wrapping_add(first_segment as u16).to_be_bytes());
        set_ipv4_header_checksum(ip);
        let offset = if proto == PROTO_TCP {
            let seq = self.first_seq.wrapping_add((first_segment * gso_size) as u32);
            transport[4..8].copy_from_slice(&seq.to_be_bytes());
            if !first {
                transport[13] &= !TCP_CWR;
            }
            if !last {
                transport[13] &= !(TCP_FIN | TCP_PSH);
            }
            TCP_CHECKSUM_OFFSET
        } else {
            transport[4..6].copy_from_slice(&transport_len.to_be_bytes());
            UDP_CHECKSUM_OFFSET
        };
        let pseudo = pseudo_header_sum(&self.addresses, proto, transport_len);
        transport[offset..offset + 2].copy_from_slice(&pseudo.to_be_bytes());
    }
}

/// A packet that could open or join a written super-packet: IPv4 without options, not a
/// fragment, no longer than a wire segment, TCP carrying data with ACK (PSH allowed: it ends the
/// run), or UDP with data and its length right.
#[derive(Clone, Copy)]
struct Candidate<'a> {
    bytes: &'a [u8],
    headers: usize,
    payload: usize,
    proto: u8,
    ends_run: bool,
}

impl<'a> Candidate<'a> {
    fn of(frame: &'a Frame, udp: bool) -> Option<Candidate<'a>> {
        if frame.gso.is_some() {
            return None;
        }
        let bytes = frame.bytes.as_slice();
        let ip = bytes.get(..20)?;
        let length_ok = usize::from(u16::from_be_bytes([ip[2], ip[3]])) == bytes.len();
        if ip[0] != 0x45 || !length_ok || bytes.len() > SEGMENT_ROOM || ip[6] & 0x3f != 0 || ip[7] != 0 {
            return None;
        }
        let (headers, ends_run) = match ip[9] {
            PROTO_TCP => {
                let transport_header = usize::from(bytes.get(32)? >> 4) * 4;
                let flags = *bytes.get(33)?;
                if !(20..=60).contains(&transport_header) || (flags != TCP_ACK && flags != TCP_ACK | TCP_PSH) {
                    return None;
                }
                (20 + transport_header, flags & TCP_PSH != 0)
            }
            PROTO_UDP if udp && usize::from(u16::from_be_bytes([*bytes.get(24)?, *bytes.get(25)?])) == bytes.len() - 20 => {
                (28, false)
            }
            _ => return None,
        };
        let payload = bytes.len().checked_sub(headers).filter(|&n| n > 0)?;
        Some(Candidate { bytes, headers, payload, proto: ip[9], ends_run })
    }

    fn seq(&self) -> u32 {
        u32::from_be_bytes([self.bytes[24], self.bytes[25], self.bytes[26], self.bytes[27]])
    }

    /// Same flow and headers alike, so that the split on the far side gives back every segment as
    /// it was: TOS (ECN marks included), DF, TTL, protocol, addresses, ports, and for TCP the
    /// acknowledgement, header length, window, urgent pointer and options (all but the sequence
    /// number, flags and checksum).
    fn joins(&self, first: &Candidate<'_>) -> bool {
        let (a, b) = (self.bytes, first.bytes);
        let same_ip = a[1] == b[1] && a[6] >> 5 == b[6] >> 5 && a[8] == b[8] && a[9] == b[9] && a[12..20] == b[12..20];
        let same_transport = if self.proto == PROTO_TCP {
            self.headers == first.headers
                && a[20..24] == b[20..24]
                && a[28..33] == b[28..33]
                && a[34..36] == b[34..36]
                && a[38..self.headers] == b[38..first.headers]
        } else {
            a[20..24] == b[20..24]
        };
        same_ip && same_transport
    }
}

/// How many of `frames`, from the first, one written super-packet carries (at least 1): the
/// consecutive segments of one flow, in sequence, all of the first one's payload size but the
/// last (which may be shorter), the TCP ones with ACK only but the last (which may add PSH),
/// at most 64 KB in all. UDP segments coalesce only if the device takes USO (`udp`).
fn coalescible(frames: &[Frame], udp: bool) -> usize {
    let Some(first) = frames.first().and_then(|f| Candidate::of(f, udp)) else {
        return 1;
    };
    let (gso_size, mut total, mut previous) = (first.payload, first.bytes.len(), first);
    let mut count = 1;
    for frame in frames.iter().skip(1).take(MAX_COALESCED - 1) {
        if previous.ends_run || previous.payload < gso_size {
            break;
        }
        let Some(next) = Candidate::of(frame, udp) else { break };
        let in_sequence = next.proto != PROTO_TCP || next.seq() == previous.seq().wrapping_add(previous.payload as u32);
        if !next.joins(&first) || !in_sequence || next.payload > gso_size || total + next.payload > MAX_IP_PACKET {
            break;
        }
        total += next.payload;
        previous = next;
        count += 1;
    }
    count
}

/// Writes into `out` the virtio-net header and packet headers of the super-packet carrying
/// `run` (a run [`coalescible`] found, at least two frames): the first packet's headers with
/// the total length, IP checksum, PSH of the last segment, and the partial transport checksum
/// of the whole; the segments' payloads follow it in the write. Returns the headers' length in
/// the frames (where their payloads start).
fn super_packet_headers(run: &[Frame], out: &mut Vec<u8>) -> usize {
    out.clear();
    let Some(first) = run.first().and_then(|f| Candidate::of(f, true)) else { return 0 };
    let headers = first.headers;
    let total: usize = headers + run.iter().map(|f| f.bytes.len().saturating_sub(headers)).sum::<usize>();
    let (gso_type, offset) = if first.proto == PROTO_TCP { (GSO_TCPV4, TCP_CHECKSUM_OFFSET) } else { (GSO_UDP_L4, UDP_CHECKSUM_OFFSET) };
    let vnet = VnetHeader {
        flags: F_NEEDS_CSUM,
        gso_type,
        hdr_len: headers as u16,
        gso_size: first.payload as u16,
        csum_start: 20,
        csum_offset: offset as u16,
    };
    out.extend_from_slice(&vnet.encode());
    out.extend_from_slice(&first.bytes[..headers]);
    let packet = &mut out[VNET_HEADER_LEN..];
    // `coalescible` keeps the total within an IP packet.
    let (total, transport_len) = (total as u16, (total - 20) as u16);
    packet[2..4].copy_from_slice(&total.to_be_bytes());
    set_ipv4_header_checksum(&mut packet[..20]);
    if first.proto == PROTO_TCP {
        let last_flags = run.last().and_then(|f| f.bytes.get(33)).copied().unwrap_or(0);
        packet[33] |= last_flags & TCP_PSH;
    } else {
        packet[24..26].copy_from_slice(&transport_len.to_be_bytes());
    }
    let mut addresses = [0u8; 8];
    addresses.copy_from_slice(&packet[12..20]);
    let pseudo = pseudo_header_sum(&addresses, first.proto, transport_len);
    packet[20 + offset..22 + offset].copy_from_slice(&pseudo.to_be_bytes());
    headers
}

/// The writes that carry `frames` (delivered to one host with offloads, in order), each handed
/// to `write` as its pieces for one vectored write and the number of packets it carries: a run
/// of segments `coalescible` finds as one super-packet (virtio-net header and the headers
/// rewritten for the whole in `headers`, then each segment's payload from its own buffer),
/// anything else alone behind a virtio-net header asking for a partial checksum to be completed.
/// `udp`: the device takes UDP super-packets (USO).
pub fn for_each_write(frames: &[Frame], udp: bool, headers: &mut Vec<u8>, mut write: impl FnMut(&[IoSlice<'_>], usize)) {
    let mut start = 0;
    while let Some(rest) = frames.get(start..).filter(|rest| !rest.is_empty()) {
        let count = coalescible(rest, udp);
        if let Some(shape) = rest[0].gso {
            // Carried whole: written back as it was read, virtio-net header and all.
            write(&[IoSlice::new(&rest[0].bytes)], shape.segments);
        } else if count == 1 {
            let header = VnetHeader::for_single(&rest[0]).encode();
            write(&[IoSlice::new(&header), IoSlice::new(&rest[0].bytes)], 1);
        } else {
            let run = &rest[..count];
            let payload_at = super_packet_headers(run, headers);
            let mut slices = [IoSlice::new(&[]); MAX_COALESCED + 1];
            slices[0] = IoSlice::new(headers);
            for (slice, frame) in slices[1..].iter_mut().zip(run) {
                *slice = IoSlice::new(frame.bytes.get(payload_at..).unwrap_or_default());
            }
            write(&slices[..=count], count);
        }
        start += count;
    }
}

#[cfg(test)]
pub(crate) mod tests;
