use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};

use super::*;
use crate::frame::ones_complement_sum;
use crate::frame::tests::{checksums_verify, tcp_packet};

const CLIENT: [u8; 4] = [10, 77, 0, 1];
const SERVER: [u8; 4] = [10, 77, 1, 1];

/// A virtio-net header as the kernel writes it for a GSO packet; `hdr_len` is deliberately
/// wrong (the kernel's may cover the whole first packet; the split must not trust it).
fn gso(gso_type: u8, gso_size: u16, csum_start: u16, csum_offset: u16) -> VnetHeader {
    VnetHeader { flags: F_NEEDS_CSUM, gso_type, hdr_len: 0xffff, gso_size, csum_start, csum_offset }
}

fn datagram(header: VnetHeader, packet: &[u8]) -> Vec<u8> {
    [header.encode().as_slice(), packet].concat()
}

/// An IPv4 TCP packet (ACK, PSH; FIN if asked) carrying `payload`, sequence number 1000.
fn tcp_v4(payload: &[u8], fin: bool) -> Vec<u8> {
    let builder = PacketBuilder::ipv4(CLIENT, SERVER, 64).tcp(40_000, 5201, 1000, 65_535).ack(7).psh();
    let builder = if fin { builder.fin() } else { builder };
    let mut packet = Vec::new();
    builder.write(&mut packet, payload).unwrap();
    packet
}

pub(crate) fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// The frames a datagram splits into, each from a fresh pool.
fn split_all(datagram: &[u8]) -> Result<Vec<Frame>, Malformed> {
    let mut frames = Vec::new();
    let count = split(datagram, &mut FramePool::default(), |f| frames.push(f))?;
    assert_eq!(count, frames.len());
    Ok(frames)
}

/// The segments as a wire carries them (checksums completed).
fn wire(frames: &[Frame]) -> Vec<Vec<u8>> {
    frames.iter().map(Frame::wire_copy).collect()
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

/// Rewrites the IP header checksum and puts the pseudo-header sum into the checksum at `at`
/// (as a sending kernel leaves a packet for the device).
fn make_partial(packet: &mut [u8], at: usize) {
    set_ipv4_header_checksum(&mut packet[..20]);
    let mut addresses = [0u8; 8];
    addresses.copy_from_slice(&packet[12..20]);
    let pseudo = pseudo_header_sum(&addresses, packet[9], (packet.len() - 20) as u16);
    packet[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
}

/// A TCP super-packet as a host's kernel hands it over with TSO: one IP/TCP header for all of
/// `data` (`flags` on it), IP id 0x1000, a sequence number about to wrap, the checksum field
/// holding the pseudo-header sum of the whole.
pub(crate) fn tcp_super_packet(data: &[u8], gso_size: u16, flags: u8) -> Vec<u8> {
    let mut packet = tcp_packet(data);
    packet[4..6].copy_from_slice(&0x1000u16.to_be_bytes());
    packet[24..28].copy_from_slice(&0xffff_f000u32.to_be_bytes());
    packet[28..32].copy_from_slice(&77u32.to_be_bytes());
    packet[33] = flags;
    make_partial(&mut packet, 20 + TCP_CHECKSUM_OFFSET);
    datagram(VnetHeader { hdr_len: 40, ..gso(GSO_TCPV4, gso_size, 20, 16) }, &packet)
}

fn udp_super_packet(payload_len: usize, gso_size: u16) -> Vec<u8> {
    let mut packet = crate::testkit::udp([10, 0, 0, 1], [10, 0, 0, 2], (28 + payload_len) as u16);
    for (i, b) in packet[28..].iter_mut().enumerate() {
        *b = i as u8;
    }
    make_partial(&mut packet, 26);
    datagram(VnetHeader { hdr_len: 28, ..gso(GSO_UDP_L4, gso_size, 20, 6) }, &packet)
}

#[test]
fn a_tcp_super_packet_becomes_its_wire_segments() {
    let data = payload(3000);
    let bytes = datagram(gso(GSO_TCPV4, 1448, 20, 16), &tcp_v4(&data, true));
    let frames = split_all(&bytes).unwrap();
    assert!(frames.iter().all(|f| f.partial_checksum), "the checksum stays for the receiving device");
    let segments = wire(&frames);
    assert_eq!(segments.iter().map(Vec::len).collect::<Vec<_>>(), [1488, 1488, 144]);
    let tcp = tcp_segments(&segments);
    assert_eq!(tcp.iter().map(|t| t.0).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(tcp.iter().map(|t| t.1).collect::<Vec<_>>(), [1000, 2448, 3896]);
    // FIN and PSH only on the last segment.
    assert_eq!(tcp.iter().map(|t| (t.2, t.3)).collect::<Vec<_>>(), [(false, false), (false, false), (true, true)]);
    assert_eq!(tcp.into_iter().flat_map(|t| t.4).collect::<Vec<_>>(), data);
}

#[test]
fn sequence_numbers_wrap_and_ip_ids_count_on_from_the_first() {
    let data = payload(2500);
    let frames = split_all(&tcp_super_packet(&data, 1000, TCP_ACK | TCP_PSH | TCP_FIN)).unwrap();
    assert_eq!(frames.iter().map(|f| f.bytes.len()).collect::<Vec<_>>(), [1040, 1040, 540]);
    let mut rebuilt = Vec::new();
    for (i, frame) in frames.iter().enumerate() {
        let b = &frame.bytes;
        assert_eq!(u16::from_be_bytes([b[4], b[5]]), 0x1000 + i as u16, "IP ids count up");
        assert_eq!(ones_complement_sum(&b[..20], 0), 0xffff, "IP header checksum");
        let seq = u32::from_be_bytes([b[24], b[25], b[26], b[27]]);
        assert_eq!(seq, 0xffff_f000u32.wrapping_add(1000 * i as u32), "sequence numbers wrap");
        assert_eq!(b[33], if i == 2 { TCP_ACK | TCP_PSH | TCP_FIN } else { TCP_ACK }, "FIN and PSH on the last only");
        assert!(!checksums_verify(b), "partial until completed");
        assert!(checksums_verify(&frame.wire_copy()), "completes to a valid checksum");
        rebuilt.extend_from_slice(&b[40..]);
    }
    assert_eq!(rebuilt, data);
}

#[test]
fn cwr_stays_on_the_first_segment() {
    let mut bytes = tcp_super_packet(&payload(300), 100, TCP_ACK | TCP_CWR);
    bytes[1] = GSO_TCPV4 | GSO_ECN;
    let flags: Vec<u8> = split_all(&bytes).unwrap().iter().map(|f| f.bytes[33]).collect();
    assert_eq!(flags, [TCP_ACK | TCP_CWR, TCP_ACK, TCP_ACK]);
}

#[test]
fn a_udp_super_packet_becomes_datagrams_with_their_own_lengths_and_checksums() {
    let data = payload(2500);
    let mut packet = Vec::new();
    PacketBuilder::ipv4(CLIENT, SERVER, 64).udp(4433, 50_000).write(&mut packet, &data).unwrap();
    let bytes = datagram(gso(GSO_UDP_L4, 1200, 20, 6), &packet);
    let segments = wire(&split_all(&bytes).unwrap());
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

/// The model forwards IPv4 only: an IPv6 super-packet is dropped whole, unsplit.
#[test]
fn an_ipv6_super_packet_is_not_split() {
    let (src, dst) = ([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    let mut packet = Vec::new();
    PacketBuilder::ipv6(src, dst, 64).tcp(40_000, 443, 5, 1000).ack(1).write(&mut packet, &payload(2000)).unwrap();
    let bytes = datagram(gso(tun_rs::VIRTIO_NET_HDR_GSO_TCPV6, 1000, 40, 16), &packet);
    assert_eq!(split_all(&bytes), Err(Malformed::GsoType { gso_type: 4, version: 6 }));
}

#[test]
fn a_packet_left_to_checksum_stays_so_and_completes_to_the_full_checksum() {
    let packet = tcp_v4(b"hello", false);
    let mut partial = packet.clone();
    // The kernel leaves the pseudo-header's sum in the field (CHECKSUM_PARTIAL).
    make_partial(&mut partial, 36);
    let header = VnetHeader { flags: F_NEEDS_CSUM, csum_start: 20, csum_offset: 16, ..VnetHeader::default() };
    let frames = split_all(&datagram(header, &partial)).unwrap();
    assert_eq!(frames, [Frame::partial(partial.clone())]);
    assert_eq!(wire(&frames), [packet]);
    // A checksum the kernel asks for somewhere unusual is completed at once.
    let odd = VnetHeader { flags: F_NEEDS_CSUM, csum_start: 24, csum_offset: 2, ..VnetHeader::default() };
    let frames = split_all(&datagram(odd, &partial)).unwrap();
    assert!(!frames[0].partial_checksum);
    assert_eq!(frames[0].bytes[26..28], (!ones_complement_sum(&partial[24..], 0)).to_be_bytes());
}

#[test]
fn a_plain_packet_passes_unchanged() {
    let packet = tcp_v4(b"hello", false);
    assert_eq!(split_all(&datagram(VnetHeader::default(), &packet)).unwrap(), [Frame::complete(packet)]);
}

/// tun-rs's own read path (`recv_multiple`, 2.8.16) indexes past the packet here: a
/// checksum-only header whose checksum field is not inside the packet (a panic in the loop).
#[test]
fn a_checksum_field_beyond_the_packet_is_malformed_not_a_panic() {
    let packet = tcp_v4(b"", false);
    for (start, offset) in [(20, 20), (20, 19), (0xffff, 0xffff), (40, 0)] {
        let header = VnetHeader { flags: F_NEEDS_CSUM, csum_start: start, csum_offset: offset, ..VnetHeader::default() };
        let result = split_all(&datagram(header, &packet));
        assert!(matches!(result, Err(Malformed::ChecksumOutside { len: 40, .. })), "{start}+{offset}: {result:?}");
    }
}

#[test]
fn nothing_longer_than_a_wire_segment_reaches_the_model() {
    let bytes = datagram(gso(GSO_TCPV4, 4000, 20, 16), &tcp_v4(&payload(3000), false));
    assert_eq!(split_all(&bytes), Err(Malformed::SegmentsTooLong(3040)));
    let bytes = datagram(VnetHeader::default(), &tcp_v4(&payload(3000), false));
    assert_eq!(split_all(&bytes), Err(Malformed::TooLong(3040)));
    // 3000 segments of one byte: more than 64 KB at TCP's smallest MSS would give.
    let mut tiny = tcp_super_packet(&payload(3000), 1, TCP_ACK);
    tiny[4..6].copy_from_slice(&1u16.to_ne_bytes());
    assert_eq!(split_all(&tiny), Err(Malformed::TooManySegments(3000)));
}

/// A change to a valid super-packet and its header.
type Change = dyn Fn(&mut Vec<u8>, &mut VnetHeader);

#[test]
fn super_packets_whose_segments_would_not_be_valid_packets_are_malformed() {
    let packet = tcp_v4(&payload(3000), false);
    let header = gso(GSO_TCPV4, 1448, 20, 16);
    let cases: [(&str, Box<Change>); 11] = [
        ("checksum start inside the IP header", Box::new(|_, h| h.csum_start = 12)),
        ("checksum start past the IP header", Box::new(|_, h| h.csum_start = 24)),
        ("checksum offset of UDP on TCP", Box::new(|_, h| h.csum_offset = 6)),
        ("IP protocol UDP under TCP GSO", Box::new(|p, _| p[9] = 17)),
        ("a fragment", Box::new(|p, _| p[6] |= 0x20)),
        ("TCP GSO type for IPv6 on IPv4", Box::new(|_, h| h.gso_type = tun_rs::VIRTIO_NET_HDR_GSO_TCPV6)),
        ("an unknown GSO type", Box::new(|_, h| h.gso_type = 9)),
        ("not IPv4", Box::new(|p, _| p[0] = 0x65)),
        ("ECN on UDP GSO", Box::new(|p, h| {
            p[9] = 17;
            h.gso_type = GSO_UDP_L4 | GSO_ECN;
        })),
        ("TCP data offset 4", Box::new(|p, _| p[32] = 0x40)),
        ("GSO size 0", Box::new(|_, h| h.gso_size = 0)),
    ];
    for (what, change) in cases {
        let (mut p, mut h) = (packet.clone(), header);
        change(&mut p, &mut h);
        assert!(split_all(&datagram(h, &p)).is_err(), "{what}");
    }
    // Headers only: a GSO packet that carries nothing would vanish without a count.
    assert_eq!(split_all(&datagram(header, &tcp_v4(b"", false))), Err(Malformed::NoPayload));
    assert_eq!(split_all(&[0; VNET_HEADER_LEN]), Err(Malformed::NoPacket(VNET_HEADER_LEN)));
    assert_eq!(split_all(&[0; 5]), Err(Malformed::NoPacket(5)));
    let cut = datagram(header, &packet[..30]);
    assert!(split_all(&cut).is_err(), "cut inside the TCP header");
    // Any bytes at all: an answer, never a panic.
    for len in 0..80 {
        for fill in [0u8, 0x01, 0x05, 0x45, 0xff] {
            let mut d = vec![fill; len];
            if len > 1 {
                d[1] = fill % 6;
            }
            let _ = split_all(&d);
        }
    }
}

/// Every write `for_each_write` makes of `frames`: its bytes and how many packets it carries.
fn writes(frames: &[Frame], udp: bool) -> Vec<(Vec<u8>, usize)> {
    let mut written = Vec::new();
    for_each_write(frames, udp, &mut Vec::new(), |pieces, count| written.push((pieces.iter().flat_map(|p| p.to_vec()).collect(), count)));
    written
}

#[test]
fn split_segments_are_written_back_as_the_super_packet() {
    let bytes = tcp_super_packet(&payload(2500), 1000, TCP_ACK | TCP_PSH);
    let frames = split_all(&bytes).unwrap();
    assert_eq!(writes(&frames, false), [(bytes, 3)], "the same header, bytes and partial checksum as the kernel sent");
    let udp_bytes = udp_super_packet(2500, 1200);
    let udp = split_all(&udp_bytes).unwrap();
    assert_eq!(writes(&udp, true), [(udp_bytes, 3)]);
    // Without USO each datagram goes alone, asking the device to complete its checksum.
    let alone = writes(&udp, false);
    assert_eq!(alone.iter().map(|w| w.1).collect::<Vec<_>>(), [1, 1, 1]);
    for ((bytes, _), frame) in alone.iter().zip(&udp) {
        assert_eq!(split_all(bytes).unwrap(), std::slice::from_ref(frame), "read back, the same partial packet");
    }
}

#[test]
fn a_packet_between_segments_splits_the_run_and_every_write_reads_back() {
    let mut frames = split_all(&tcp_super_packet(&payload(5000), 1000, TCP_ACK)).unwrap();
    let ack = Frame::complete(tcp_packet(b""));
    frames.insert(3, ack.clone());
    let written = writes(&frames, false);
    assert_eq!(written.iter().map(|w| w.1).collect::<Vec<_>>(), [3, 1, 2]);
    assert_eq!(written[1].0, datagram(VnetHeader::default(), &ack.bytes), "a complete packet asks for nothing");
    let read_back: Vec<Frame> = written.iter().flat_map(|(bytes, _)| split_all(bytes).unwrap()).collect();
    assert_eq!(read_back, frames);
}

#[test]
fn runs_end_where_a_segment_would_not_come_back_the_same() {
    let frames = split_all(&tcp_super_packet(&payload(5000), 1000, TCP_ACK)).unwrap();
    let changed = |i: usize, at: usize, value: u8| {
        let mut f = frames.clone();
        f[i].bytes[at] = value;
        f
    };
    assert_eq!(coalescible(&frames, false), 5);
    assert_eq!(coalescible(&changed(2, 1, 0x03), false), 2, "an ECN mark (TOS) differs");
    assert_eq!(coalescible(&changed(2, 8, 63), false), 2, "TTL differs");
    assert_eq!(coalescible(&changed(2, 23, 1), false), 2, "another flow");
    assert_eq!(coalescible(&changed(2, 31, 78), false), 2, "another acknowledgement");
    assert_eq!(coalescible(&changed(2, 35, 1), false), 2, "another window");
    assert_eq!(coalescible(&changed(2, 27, 1), false), 2, "a gap in sequence");
    assert_eq!(coalescible(&changed(1, 33, TCP_ACK | TCP_PSH), false), 2, "PSH ends a run");
    assert_eq!(coalescible(&changed(1, 33, TCP_ACK | TCP_FIN), false), 1, "FIN never joins");
    assert_eq!(coalescible(&changed(0, 33, TCP_ACK | 0x02), false), 1, "nor SYN");
    let mut shorter = frames.clone();
    shorter[1].bytes.truncate(500);
    shorter[1].bytes[2..4].copy_from_slice(&500u16.to_be_bytes());
    assert_eq!(coalescible(&shorter, false), 2, "a shorter segment ends a run");
    let mut reordered = frames.clone();
    reordered.swap(1, 2);
    assert_eq!(coalescible(&reordered, false), 1);
    assert_eq!(coalescible(&[Frame::complete(tcp_packet(b""))], false), 1);
    assert_eq!(coalescible(&[], false), 1);
    let mut udp = split_all(&udp_super_packet(2500, 1200)).unwrap();
    udp[1].bytes[25] ^= 1;
    assert_eq!(coalescible(&udp, true), 1, "a UDP length that is not the datagram's");
}

#[test]
fn a_run_holds_at_most_an_ip_packet() {
    let frames: Vec<Frame> = (0..3).flat_map(|_| split_all(&tcp_super_packet(&payload(30_000), 1000, TCP_ACK)).unwrap()).collect();
    // The three super-packets repeat the same sequence numbers: only the first one's 30 run.
    assert_eq!(coalescible(&frames, false), 30);
    let contiguous = split_all(&tcp_super_packet(&payload(65_000), 1000, TCP_ACK)).unwrap();
    assert_eq!(contiguous.len(), 65);
    assert_eq!(coalescible(&contiguous, false), 64, "at most 64 segments");
    let big = split_all(&tcp_super_packet(&payload(65_400), 1400, TCP_ACK)).unwrap();
    assert_eq!(coalescible(&big, false), 47, "65,440 bytes in all (the last segment is shorter) fit");
    // 47 full segments would not (65,840 bytes): the run stops at 46.
    let mut full: Vec<Frame> = big[..46].to_vec();
    let mut extra = big[45].clone();
    let seq = u32::from_be_bytes([extra.bytes[24], extra.bytes[25], extra.bytes[26], extra.bytes[27]]) + 1400;
    extra.bytes[24..28].copy_from_slice(&seq.to_be_bytes());
    full.push(extra);
    assert_eq!(coalescible(&full, false), 46);
}

#[test]
fn single_writes_ask_the_device_for_partial_checksums_only() {
    let complete = Frame::complete(tcp_packet(b"x"));
    assert_eq!(VnetHeader::for_single(&complete), VnetHeader::default());
    let partial = Frame { partial_checksum: true, ..complete };
    let header = VnetHeader::for_single(&partial);
    assert_eq!((header.flags, header.gso_type, header.csum_start, header.csum_offset), (F_NEEDS_CSUM, GSO_NONE, 20, 16));
    assert_eq!(VnetHeader::parse(&header.encode()), Some(header));
}

#[test]
fn a_super_packet_carried_whole_is_written_as_read_and_splits_as_it_would_have_at_the_read() {
    let bytes = tcp_super_packet(&payload(4000), 1448, TCP_ACK | TCP_PSH);
    let segments = split_all(&bytes).unwrap();
    let shape = super_packet_shape(&bytes).unwrap().expect("a super-packet");
    assert_eq!((shape.segments, shape.segment_size()), (3, segments[0].bytes.len()));
    assert_eq!(shape.wire_bytes(), segments.iter().map(|f| f.bytes.len()).sum::<usize>());
    let whole = Frame::whole(bytes.clone(), shape);
    assert_eq!(whole.ip(), &bytes[VNET_HEADER_LEN..]);
    // Written between two plain packets: alone, byte for byte as the kernel handed it over.
    let ack = Frame::complete(tcp_packet(b""));
    let written = writes(&[ack.clone(), whole.clone(), ack.clone()], false);
    assert_eq!(written.iter().map(|w| w.1).collect::<Vec<_>>(), [1, 3, 1]);
    assert_eq!(written[1].0, bytes);
    // Split later (by the model, or for a device that cannot take it), it gives the read's segments.
    let mut pool = FramePool::default();
    let mut split_later = Vec::new();
    assert_eq!(split_whole(whole.clone(), &mut pool, |f| split_later.push(f)), 3);
    assert_eq!(split_later, segments);
    let mut by_model = Vec::new();
    netmodel::Segmented::split(whole, 3, &mut |f| by_model.push(f));
    assert_eq!(by_model, segments);
    // A plain packet is no super-packet, and passes through split_whole as it is.
    assert_eq!(super_packet_shape(&datagram(VnetHeader::default(), &ack.bytes)), Ok(None));
    let mut alone = Vec::new();
    assert_eq!(split_whole(ack.clone(), &mut pool, |f| alone.push(f)), 1);
    assert_eq!(alone, [ack]);
}

#[test]
fn a_super_packet_cut_into_pieces_gives_the_segments_of_the_whole() {
    // TCP with CWR on the first segment and FIN and PSH on the last, 31 segments of 1448 and a
    // short one; a UDP one of 10 datagrams of 1200 bytes and a short one.
    let mut cwr = tcp_super_packet(&payload(31 * 1448 + 500), 1448, TCP_ACK | TCP_PSH | TCP_FIN | TCP_CWR);
    cwr[1] = GSO_TCPV4_ECN;
    let mut udp = Vec::new();
    PacketBuilder::ipv4(CLIENT, SERVER, 64).udp(4433, 50_000).write(&mut udp, &payload(10 * 1200 + 77)).unwrap();
    let udp = datagram(gso(GSO_UDP_L4, 1200, 20, 6), &udp);
    for bytes in [cwr, udp] {
        let segments = split_all(&bytes).unwrap();
        let shape = super_packet_shape(&bytes).unwrap().expect("a super-packet");
        for most in [1, 2, 3, 7, 9, segments.len() - 1, segments.len()] {
            let mut pieces = Vec::new();
            let count = split_pieces(&bytes, &shape, most, &mut FramePool::default(), |f| pieces.push(f));
            assert_eq!(count, segments.len().div_ceil(most), "most {most}");
            assert_eq!(pieces.len(), count);
            let mut again = Vec::new();
            for (i, piece) in pieces.iter().enumerate() {
                let expected = most.min(segments.len() - i * most);
                match piece.gso {
                    Some(piece_shape) => {
                        assert_eq!(piece_shape.segments, expected, "most {most}, piece {i}");
                        // A valid super-packet in its own right, as the read checks one.
                        assert_eq!(super_packet_shape(&piece.bytes), Ok(Some(piece_shape)));
                        let vnet = VnetHeader::parse(&piece.bytes).unwrap();
                        assert_eq!(vnet.gso_type & GSO_ECN != 0, i == 0 && bytes[1] & GSO_ECN != 0, "ECN on the first piece only");
                    }
                    None => assert_eq!(expected, 1, "most {most}, piece {i}: a single segment"),
                }
                split_whole(piece.clone(), &mut FramePool::default(), |f| again.push(f));
            }
            assert_eq!(again, segments, "most {most}: the pieces split into the whole's segments");
        }
    }
}
