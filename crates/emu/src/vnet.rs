//! A datagram read from a TUN device with segmentation offloads (a virtio-net header, then an IP
//! packet that may be a GSO super-packet) split into the wire segments the model sees.
//!
//! Pure (no device), so it is unit-tested and fuzzed (`fuzz/fuzz_targets/vnet_super_packet.rs`)
//! on bytes alone; [`crate::host_io::HostIo::read`] reads the datagram and hands it here. The
//! segmentation itself is tun-rs's `gso_split` (IP ids, lengths, sequence numbers, flags and
//! checksums per segment); this module decides what reaches it. tun-rs's own read path
//! (`recv_multiple`) is not used because it indexes past the packet when a checksum-only header
//! points its checksum field beyond the packet (a panic), and lets through super-packets whose
//! segments would not be the packets a 1500-byte wire carries (see [`Malformed`]).

use std::io;

use tun_rs::{VirtioNetHdr, VIRTIO_NET_HDR_GSO_TCPV4, VIRTIO_NET_HDR_GSO_TCPV6, VIRTIO_NET_HDR_GSO_UDP_L4, VIRTIO_NET_HDR_LEN};

/// The largest datagram a TUN read returns with offloads: a 64 KB GSO packet and its header.
pub const MAX_DATAGRAM: usize = 65_536 + VIRTIO_NET_HDR_LEN;
/// Room per wire segment: the TUN devices' MTU (1500) with margin. No segment is longer.
pub const SEGMENT_ROOM: usize = 2048;
/// Segments one super-packet may split into: 64 KB at TCP's smallest MSS (88 bytes) is 745.
pub const MAX_SEGMENTS: usize = 1024;

/// virtio-net header values tun-rs does not export (linux/virtio_net.h).
const GSO_NONE: u8 = 0;
const GSO_ECN: u8 = 0x80;
const F_NEEDS_CSUM: u8 = 1;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
/// IPv4 flags and fragment offset without DF: MF set or an offset means a fragment.
const IPV4_FRAGMENT_MASK: u16 = 0x3fff;

/// Why a datagram could not be split; the emulator drops it and counts `rx_malformed`.
#[derive(Debug, thiserror::Error)]
pub enum Malformed {
    #[error("datagram of {0} bytes carries no packet after the virtio-net header")]
    NoPacket(usize),
    #[error("checksum field (start {start}, offset {offset}) lies beyond the packet's {len} bytes")]
    ChecksumOutside { start: u16, offset: u16, len: usize },
    #[error("packet of {0} bytes is longer than a wire segment may be")]
    TooLong(usize),
    #[error("GSO type {gso_type:#04x} does not fit an IPv{version} packet")]
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
    #[error("segmentation: {0}")]
    Split(io::Error),
}

/// Where a read's wire segments go: one buffer per segment, reused read after read. Pages are
/// touched only as far as segments are written.
pub struct Segments {
    buffers: Vec<Vec<u8>>,
    sizes: Vec<usize>,
}

impl Segments {
    /// Room for the largest super-packet.
    pub fn new() -> Segments {
        Segments { buffers: vec![vec![0u8; SEGMENT_ROOM]; MAX_SEGMENTS], sizes: vec![0; MAX_SEGMENTS] }
    }

    /// No room at all (a loop whose devices run without offloads never splits).
    pub fn none() -> Segments {
        Segments { buffers: Vec::new(), sizes: Vec::new() }
    }

    /// Splits `datagram` (virtio-net header and packet; a checksum the kernel left to the device
    /// is completed in place) into wire segments; returns how many (at least 1).
    pub fn split(&mut self, datagram: &mut [u8]) -> Result<usize, Malformed> {
        if datagram.len() <= VIRTIO_NET_HDR_LEN {
            return Err(Malformed::NoPacket(datagram.len()));
        }
        let (head, packet) = datagram.split_at_mut(VIRTIO_NET_HDR_LEN);
        let header = VirtioNetHdr::decode(head).map_err(Malformed::Split)?;
        if header.gso_type == GSO_NONE {
            return self.single(header, packet);
        }
        let (header, is_v6) = gso_header(header, packet)?;
        tun_rs::gso_split(packet, header, &mut self.buffers[..], &mut self.sizes[..], 0, is_v6).map_err(Malformed::Split)
    }

    /// The segments of the last [`Segments::split`] that returned `count`.
    pub fn iter(&self, count: usize) -> impl Iterator<Item = &[u8]> {
        self.buffers.iter().zip(&self.sizes).take(count).map(|(buffer, &size)| &buffer[..size])
    }

    /// A packet that is not a super-packet: its checksum completed if asked, copied whole.
    fn single(&mut self, header: VirtioNetHdr, packet: &mut [u8]) -> Result<usize, Malformed> {
        if packet.len() > SEGMENT_ROOM {
            return Err(Malformed::TooLong(packet.len()));
        }
        if header.flags & F_NEEDS_CSUM != 0 {
            complete_checksum(packet, header.csum_start, header.csum_offset)?;
        }
        let room = self.buffers.first_mut().and_then(|buffer| buffer.get_mut(..packet.len()));
        let (Some(room), Some(size)) = (room, self.sizes.first_mut()) else {
            return Err(Malformed::TooLong(packet.len()));
        };
        room.copy_from_slice(packet);
        *size = packet.len();
        Ok(1)
    }
}

impl Default for Segments {
    fn default() -> Segments {
        Segments::new()
    }
}

/// Completes a checksum the kernel left to the device (CHECKSUM_PARTIAL): the one's complement
/// sum from `start` to the end of the packet, seeded with the pseudo-header sum the kernel left
/// in the field, written at `start + offset`.
fn complete_checksum(packet: &mut [u8], start: u16, offset: u16) -> Result<(), Malformed> {
    let from = usize::from(start);
    let at = from + usize::from(offset);
    let seed = match packet.get(at..at + 2) {
        Some(&[high, low]) => u16::from_be_bytes([high, low]),
        _ => return Err(Malformed::ChecksumOutside { start, offset, len: packet.len() }),
    };
    packet[at..at + 2].fill(0);
    let sum = !tun_rs::checksum(&packet[from..], u64::from(seed));
    // As the kernel does (CSUM_MANGLED_0): a zero UDP checksum would mean "none".
    let sum = if sum == 0 { 0xffff } else { sum };
    packet[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    Ok(())
}

/// Checks a GSO super-packet's headers and returns the virtio-net header with the header length
/// tun-rs splits at (the IP and transport headers, from the packet itself: the kernel's may
/// cover more) and whether the packet is IPv6.
fn gso_header(mut header: VirtioNetHdr, packet: &[u8]) -> Result<(VirtioNetHdr, bool), Malformed> {
    if header.gso_size == 0 {
        return Err(Malformed::ZeroGsoSize);
    }
    let version = packet.first().map_or(0, |b| b >> 4);
    let protocol = match (header.gso_type & !GSO_ECN, version, header.gso_type & GSO_ECN != 0) {
        (VIRTIO_NET_HDR_GSO_TCPV4, 4, _) | (VIRTIO_NET_HDR_GSO_TCPV6, 6, _) => IPPROTO_TCP,
        (VIRTIO_NET_HDR_GSO_UDP_L4, 4 | 6, false) => IPPROTO_UDP,
        _ => return Err(Malformed::GsoType { gso_type: header.gso_type, version }),
    };
    let ip_len = ip_header_len(packet, version, protocol)?;
    // Segments carry their transport header where the IP header says it is.
    if usize::from(header.csum_start) != ip_len {
        return Err(Malformed::IpHeader("the checksum does not start where the IP header ends"));
    }
    let transport_len = if protocol == IPPROTO_UDP { 8 } else { tcp_header_len(packet, ip_len)? };
    let headers_len = ip_len + transport_len;
    if packet.len() <= headers_len {
        return Err(Malformed::NoPayload);
    }
    let segment_len = headers_len + usize::from(header.gso_size).min(packet.len() - headers_len);
    if segment_len > SEGMENT_ROOM {
        return Err(Malformed::SegmentsTooLong(segment_len));
    }
    // Both lengths are at most 60 + 60 here.
    header.hdr_len = headers_len as u16;
    Ok((header, version == 6))
}

/// The IP header's length, once it is known to carry `protocol` unfragmented (IPv6 extension
/// headers are not split: the emulator forwards IPv4 only).
fn ip_header_len(packet: &[u8], version: u8, protocol: u8) -> Result<usize, Malformed> {
    if version == 6 {
        if packet.len() < 40 {
            return Err(Malformed::IpHeader("IPv6 packet shorter than its header"));
        }
        if packet[6] != protocol {
            return Err(Malformed::IpHeader("IPv6 next header is not the GSO type's transport"));
        }
        return Ok(40);
    }
    if packet.len() < 20 {
        return Err(Malformed::IpHeader("IPv4 packet shorter than its header"));
    }
    let len = usize::from(packet[0] & 0x0f) * 4;
    if len < 20 || packet.len() < len {
        return Err(Malformed::IpHeader("IPv4 header length out of range"));
    }
    if packet[9] != protocol {
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

#[cfg(test)]
mod tests;
