use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use tun_rs::{VirtioNetHdr, VIRTIO_NET_HDR_GSO_TCPV4, VIRTIO_NET_HDR_GSO_TCPV6, VIRTIO_NET_HDR_GSO_UDP_L4, VIRTIO_NET_HDR_LEN};

use super::*;

const CLIENT: [u8; 4] = [10, 77, 0, 1];
const SERVER: [u8; 4] = [10, 77, 1, 1];

/// A virtio-net header as the kernel writes it for a GSO packet; `hdr_len` is deliberately
/// wrong (the kernel's may cover the whole first packet; the split must not trust it).
fn gso(gso_type: u8, gso_size: u16, csum_start: u16, csum_offset: u16) -> VirtioNetHdr {
    VirtioNetHdr { flags: F_NEEDS_CSUM, gso_type, hdr_len: 0xffff, gso_size, csum_start, csum_offset }
}

fn datagram(header: VirtioNetHdr, packet: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0u8; VIRTIO_NET_HDR_LEN];
    header.encode(&mut bytes).unwrap();
    bytes.extend_from_slice(packet);
    bytes
}

/// An IPv4 TCP packet (ACK, PSH; FIN if asked) carrying `payload`, sequence number 1000.
fn tcp_v4(payload: &[u8], fin: bool) -> Vec<u8> {
    let builder = PacketBuilder::ipv4(CLIENT, SERVER, 64).tcp(40_000, 5201, 1000, 65_535).ack(7).psh();
    let builder = if fin { builder.fin() } else { builder };
    let mut packet = Vec::new();
    builder.write(&mut packet, payload).unwrap();
    packet
}

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

fn split(bytes: &mut [u8]) -> Result<Vec<Vec<u8>>, Malformed> {
    let mut segments = Segments::new();
    let count = segments.split(bytes)?;
    Ok(segments.iter(count).map(<[u8]>::to_vec).collect())
}

/// The TCP segments' (IP id, sequence number, FIN, PSH, payload), each checked to be a valid
/// IPv4 packet with valid IP and TCP checksums.
fn tcp_segments(segments: &[Vec<u8>]) -> Vec<(u16, u32, bool, bool, Vec<u8>)> {
    segments
        .iter()
        .map(|s| {
            let sliced = SlicedPacket::from_ip(s).unwrap();
            let Some(NetSlice::Ipv4(ip)) = sliced.net else { panic!("not IPv4") };
            let Some(TransportSlice::Tcp(tcp)) = sliced.transport else { panic!("not TCP") };
            let h = ip.header();
            assert_eq!(usize::from(h.total_len()), s.len());
            assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
            assert_eq!(tcp.calc_checksum_ipv4(CLIENT, SERVER).unwrap(), tcp.checksum());
            (h.identification(), tcp.sequence_number(), tcp.fin(), tcp.psh(), tcp.payload().to_vec())
        })
        .collect()
}

#[test]
fn a_tcp_super_packet_becomes_its_wire_segments() {
    let data = payload(3000);
    let mut bytes = datagram(gso(VIRTIO_NET_HDR_GSO_TCPV4, 1448, 20, 16), &tcp_v4(&data, true));
    let segments = split(&mut bytes).unwrap();
    assert_eq!(segments.iter().map(Vec::len).collect::<Vec<_>>(), [1488, 1488, 144]);
    let tcp = tcp_segments(&segments);
    assert_eq!(tcp.iter().map(|t| t.0).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(tcp.iter().map(|t| t.1).collect::<Vec<_>>(), [1000, 2448, 3896]);
    // FIN and PSH only on the last segment.
    assert_eq!(tcp.iter().map(|t| (t.2, t.3)).collect::<Vec<_>>(), [(false, false), (false, false), (true, true)]);
    assert_eq!(tcp.into_iter().flat_map(|t| t.4).collect::<Vec<_>>(), data);
}

#[test]
fn a_udp_super_packet_becomes_datagrams_with_their_own_lengths_and_checksums() {
    let data = payload(2500);
    let mut packet = Vec::new();
    PacketBuilder::ipv4(CLIENT, SERVER, 64).udp(4433, 50_000).write(&mut packet, &data).unwrap();
    let mut bytes = datagram(gso(VIRTIO_NET_HDR_GSO_UDP_L4, 1200, 20, 6), &packet);
    let segments = split(&mut bytes).unwrap();
    assert_eq!(segments.iter().map(Vec::len).collect::<Vec<_>>(), [1228, 1228, 128]);
    let mut carried = Vec::new();
    for s in &segments {
        let sliced = SlicedPacket::from_ip(s).unwrap();
        let Some(TransportSlice::Udp(udp)) = sliced.transport else { panic!("not UDP") };
        assert_eq!(usize::from(udp.length()), s.len() - 20);
        assert_eq!(udp.to_header().calc_checksum_ipv4_raw(CLIENT, SERVER, udp.payload()).unwrap(), udp.checksum());
        carried.extend_from_slice(udp.payload());
    }
    assert_eq!(carried, data);
}

#[test]
fn an_ipv6_tcp_super_packet_splits_too() {
    let (src, dst) = ([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    let mut packet = Vec::new();
    PacketBuilder::ipv6(src, dst, 64).tcp(40_000, 443, 5, 1000).ack(1).write(&mut packet, &payload(2000)).unwrap();
    let mut bytes = datagram(gso(VIRTIO_NET_HDR_GSO_TCPV6, 1000, 40, 16), &packet);
    let segments = split(&mut bytes).unwrap();
    assert_eq!(segments.iter().map(Vec::len).collect::<Vec<_>>(), [1060, 1060]);
    let sliced = SlicedPacket::from_ip(&segments[1]).unwrap();
    let Some(TransportSlice::Tcp(tcp)) = sliced.transport else { panic!("not TCP") };
    assert_eq!(tcp.sequence_number(), 1005);
    assert_eq!(tcp.calc_checksum_ipv6(src, dst).unwrap(), tcp.checksum());
}

#[test]
fn a_packet_left_to_checksum_gets_its_checksum_completed() {
    let packet = tcp_v4(b"hello", false);
    // The kernel leaves the pseudo-header's sum in the field (CHECKSUM_PARTIAL).
    let pseudo = tun_rs::checksum(&[CLIENT, SERVER].concat(), u64::from(IPPROTO_TCP) + (packet.len() as u64 - 20));
    let mut partial = packet.clone();
    partial[36..38].copy_from_slice(&pseudo.to_be_bytes());
    let header = VirtioNetHdr { flags: F_NEEDS_CSUM, csum_start: 20, csum_offset: 16, ..VirtioNetHdr::default() };
    let segments = split(&mut datagram(header, &partial)).unwrap();
    assert_eq!(segments, [packet]);
}

#[test]
fn a_plain_packet_passes_unchanged() {
    let packet = tcp_v4(b"hello", false);
    assert_eq!(split(&mut datagram(VirtioNetHdr::default(), &packet)).unwrap(), [packet]);
}

/// tun-rs's own read path (`recv_multiple`, 2.8.16) indexes past the packet here: a
/// checksum-only header whose checksum field is not inside the packet (a panic in the loop).
#[test]
fn a_checksum_field_beyond_the_packet_is_malformed_not_a_panic() {
    let packet = tcp_v4(b"", false);
    for (start, offset) in [(20, 20), (20, 19), (0xffff, 0xffff), (40, 0)] {
        let header = VirtioNetHdr { flags: F_NEEDS_CSUM, csum_start: start, csum_offset: offset, ..VirtioNetHdr::default() };
        let result = split(&mut datagram(header, &packet));
        assert!(matches!(result, Err(Malformed::ChecksumOutside { len: 40, .. })), "{start}+{offset}: {result:?}");
    }
}

#[test]
fn nothing_longer_than_a_wire_segment_reaches_the_model() {
    // One "segment" of 3000 bytes: tun-rs checks only the first output buffer, which is larger.
    let mut bytes = datagram(gso(VIRTIO_NET_HDR_GSO_TCPV4, 4000, 20, 16), &tcp_v4(&payload(3000), false));
    assert!(matches!(split(&mut bytes), Err(Malformed::SegmentsTooLong(3040))));
    let mut bytes = datagram(VirtioNetHdr::default(), &tcp_v4(&payload(3000), false));
    assert!(matches!(split(&mut bytes), Err(Malformed::TooLong(3040))));
}

/// A change to a valid super-packet and its header.
type Change = dyn Fn(&mut Vec<u8>, &mut VirtioNetHdr);

#[test]
fn super_packets_whose_segments_would_not_be_valid_packets_are_malformed() {
    let packet = tcp_v4(&payload(3000), false);
    let header = gso(VIRTIO_NET_HDR_GSO_TCPV4, 1448, 20, 16);
    let cases: [(&str, Box<Change>); 8] = [
        ("checksum start inside the IP header", Box::new(|_, h| h.csum_start = 12)),
        ("checksum start past the IP header", Box::new(|_, h| h.csum_start = 24)),
        ("IP protocol UDP under TCP GSO", Box::new(|p, _| p[9] = 17)),
        ("a fragment", Box::new(|p, _| p[6] |= 0x20)),
        ("TCP GSO type for IPv6 on IPv4", Box::new(|_, h| h.gso_type = VIRTIO_NET_HDR_GSO_TCPV6)),
        ("ECN on UDP GSO", Box::new(|p, h| {
            p[9] = 17;
            h.gso_type = VIRTIO_NET_HDR_GSO_UDP_L4 | GSO_ECN;
        })),
        ("TCP data offset 4", Box::new(|p, _| p[32] = 0x40)),
        ("GSO size 0", Box::new(|_, h| h.gso_size = 0)),
    ];
    for (what, change) in cases {
        let (mut p, mut h) = (packet.clone(), header);
        change(&mut p, &mut h);
        assert!(split(&mut datagram(h, &p)).is_err(), "{what}");
    }
    // Headers only: a GSO packet that carries nothing would vanish without a count.
    assert!(matches!(split(&mut datagram(header, &tcp_v4(b"", false))), Err(Malformed::NoPayload)));
    assert!(matches!(split(&mut [0; VIRTIO_NET_HDR_LEN]), Err(Malformed::NoPacket(VIRTIO_NET_HDR_LEN))));
}
