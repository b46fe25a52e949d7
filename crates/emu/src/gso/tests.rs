use super::*;
use crate::frame::tests::{checksums_verify, tcp_packet};
use crate::frame::ones_complement_sum;

/// A TCP super-packet as a host's kernel hands it over with TSO: virtio-net header, one IP/TCP
/// header for all of `payload` (`flags` on it), the checksum field holding the pseudo-header
/// sum of the whole.
fn tcp_super_packet(payload: &[u8], gso_size: u16, flags: u8) -> Vec<u8> {
    let mut packet = tcp_packet(payload);
    packet[4..6].copy_from_slice(&0x1000u16.to_be_bytes());
    packet[24..28].copy_from_slice(&0xffff_f000u32.to_be_bytes());
    packet[28..32].copy_from_slice(&77u32.to_be_bytes());
    packet[33] = flags;
    make_partial(&mut packet, 20 + TCP_CHECKSUM_OFFSET);
    let header = VnetHeader { flags: F_NEEDS_CSUM, gso_type: GSO_TCPV4, hdr_len: 40, gso_size, csum_start: 20, csum_offset: 16 };
    [header.encode().as_slice(), packet.as_slice()].concat()
}

/// Rewrites the IP header checksum and puts the pseudo-header sum into the checksum at `at`.
fn make_partial(packet: &mut [u8], at: usize) {
    set_ipv4_header_checksum(&mut packet[..20]);
    let mut addresses = [0u8; 8];
    addresses.copy_from_slice(&packet[12..20]);
    let pseudo = pseudo_header_sum(&addresses, packet[9], (packet.len() - 20) as u16);
    packet[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
}

fn udp_super_packet(payload_len: usize, gso_size: u16) -> Vec<u8> {
    let mut packet = crate::testkit::udp([10, 0, 0, 1], [10, 0, 0, 2], (28 + payload_len) as u16);
    for (i, b) in packet[28..].iter_mut().enumerate() {
        *b = i as u8;
    }
    make_partial(&mut packet, 26);
    let header = VnetHeader { flags: F_NEEDS_CSUM, gso_type: GSO_UDP_L4, hdr_len: 28, gso_size, csum_start: 20, csum_offset: 6 };
    [header.encode().as_slice(), packet.as_slice()].concat()
}

fn split_all(datagram: &[u8]) -> Result<Vec<Frame>, Malformed> {
    let mut frames = Vec::new();
    let mut pool = FramePool::default();
    let count = split(datagram, &mut pool, |f| frames.push(f))?;
    assert_eq!(count, frames.len());
    Ok(frames)
}

fn payload_bytes(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

#[test]
fn a_tcp_super_packet_splits_into_wire_segments() {
    let payload = payload_bytes(2500);
    let frames = split_all(&tcp_super_packet(&payload, 1000, TCP_ACK | TCP_PSH | TCP_FIN)).unwrap();
    let sizes: Vec<usize> = frames.iter().map(|f| f.bytes.len()).collect();
    assert_eq!(sizes, [1040, 1040, 540]);
    let mut rebuilt = Vec::new();
    for (i, frame) in frames.iter().enumerate() {
        let b = &frame.bytes;
        assert!(frame.partial_checksum, "the checksum stays for the receiving device");
        assert_eq!(usize::from(u16::from_be_bytes([b[2], b[3]])), b.len(), "IP total length");
        assert_eq!(u16::from_be_bytes([b[4], b[5]]), 0x1000 + i as u16, "IP ids count up");
        assert_eq!(ones_complement_sum(&b[..20], 0), 0xffff, "IP header checksum");
        let seq = u32::from_be_bytes([b[24], b[25], b[26], b[27]]);
        assert_eq!(seq, 0xffff_f000u32.wrapping_add(1000 * i as u32), "sequence numbers wrap");
        assert_eq!(b[33], if i == 2 { TCP_ACK | TCP_PSH | TCP_FIN } else { TCP_ACK }, "FIN and PSH on the last only");
        assert!(!checksums_verify(b));
        assert!(checksums_verify(&frame.wire_copy()), "completes to a valid checksum");
        rebuilt.extend_from_slice(&b[40..]);
    }
    assert_eq!(rebuilt, payload);
}

#[test]
fn cwr_stays_on_the_first_segment() {
    let mut datagram = tcp_super_packet(&payload_bytes(300), 100, TCP_ACK | TCP_CWR);
    datagram[1] = GSO_TCPV4 | GSO_ECN;
    let flags: Vec<u8> = split_all(&datagram).unwrap().iter().map(|f| f.bytes[33]).collect();
    assert_eq!(flags, [TCP_ACK | TCP_CWR, TCP_ACK, TCP_ACK]);
}

#[test]
fn a_udp_super_packet_splits_into_datagrams() {
    let frames = split_all(&udp_super_packet(2500, 1200)).unwrap();
    let udp_lengths: Vec<u16> = frames.iter().map(|f| u16::from_be_bytes([f.bytes[24], f.bytes[25]])).collect();
    assert_eq!(udp_lengths, [1208, 1208, 108]);
    assert!(frames.iter().all(|f| checksums_verify(&f.wire_copy())));
}

#[test]
fn single_packets_keep_or_complete_their_checksum() {
    let complete = tcp_packet(b"hello");
    let plain = [VnetHeader::default().encode().as_slice(), complete.as_slice()].concat();
    assert_eq!(split_all(&plain).unwrap(), [Frame::complete(complete.clone())]);
    let mut partial = complete.clone();
    make_partial(&mut partial, 36);
    let header = VnetHeader { flags: F_NEEDS_CSUM, csum_start: 20, csum_offset: 16, ..VnetHeader::default() };
    let frames = split_all(&[header.encode().as_slice(), partial.as_slice()].concat()).unwrap();
    assert_eq!(frames, [Frame { bytes: partial.clone(), partial_checksum: true }]);
    assert_eq!(frames[0].wire_copy(), complete);
    // A checksum the kernel asks for somewhere unusual is completed at once.
    let odd = VnetHeader { flags: F_NEEDS_CSUM, csum_start: 24, csum_offset: 2, ..VnetHeader::default() };
    let frames = split_all(&[odd.encode().as_slice(), partial.as_slice()].concat()).unwrap();
    assert!(!frames[0].partial_checksum);
    let expected = !ones_complement_sum(&partial[24..], 0);
    assert_eq!(frames[0].bytes[26..28], expected.to_be_bytes());
    let beyond = VnetHeader { flags: F_NEEDS_CSUM, csum_start: 40, csum_offset: 16, ..VnetHeader::default() };
    assert!(split_all(&[beyond.encode().as_slice(), partial.as_slice()].concat()).is_err());
}

#[test]
fn malformed_datagrams_are_refused_without_panicking() {
    let good = tcp_super_packet(&payload_bytes(3000), 1000, TCP_ACK);
    let with = |at: usize, value: u8| {
        let mut d = good.clone();
        d[at] = value;
        d
    };
    let zero_gso = with(4, 0).iter().enumerate().map(|(i, &b)| if i == 5 { 0 } else { b }).collect::<Vec<u8>>();
    for (bad, why) in [
        (good[..5].to_vec(), "no header"),
        (good[..VNET_HEADER_LEN + 30].to_vec(), "cut short"),
        (good[..VNET_HEADER_LEN + 40].to_vec(), "no payload"),
        (zero_gso, "gso size 0"),
        (with(1, 4), "TCPv6"),
        (with(1, 9), "unknown GSO type"),
        (with(VNET_HEADER_LEN, 0x65), "not IPv4"),
        (with(VNET_HEADER_LEN + 9, PROTO_UDP), "protocol disagrees"),
        (with(VNET_HEADER_LEN + 7, 1), "a fragment"),
        (with(VNET_HEADER_LEN + 32, 0x20), "TCP header of 8 bytes"),
        (with(6, 24), "checksum start is not the transport header"),
        (with(8, 6), "checksum offset of UDP on TCP"),
    ] {
        assert!(split_all(&bad).is_err(), "{why}");
    }
    let tiny_segments = {
        let mut d = tcp_super_packet(&payload_bytes(3000), 1, TCP_ACK);
        d[4..6].copy_from_slice(&1u16.to_ne_bytes());
        d
    };
    assert!(split_all(&tiny_segments).is_err(), "more than 1024 segments");
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

#[test]
fn split_segments_coalesce_back_into_the_super_packet() {
    let datagram = tcp_super_packet(&payload_bytes(2500), 1000, TCP_ACK | TCP_PSH);
    let frames = split_all(&datagram).unwrap();
    assert_eq!(coalescible(&frames, false), 3);
    let mut headers = Vec::new();
    let start = super_packet_headers(&frames, &mut headers);
    assert_eq!(start, 40);
    let mut written = headers.clone();
    for f in &frames {
        written.extend_from_slice(&f.bytes[start..]);
    }
    assert_eq!(written, datagram, "the same header, bytes and partial checksum as the kernel sent");
    let udp = split_all(&udp_super_packet(2500, 1200)).unwrap();
    assert_eq!((coalescible(&udp, false), coalescible(&udp, true)), (1, 3));
    super_packet_headers(&udp, &mut headers);
    let mut written = headers.clone();
    for f in &udp {
        written.extend_from_slice(&f.bytes[28..]);
    }
    assert_eq!(written, udp_super_packet(2500, 1200));
}

#[test]
fn runs_end_where_a_receiver_could_not_merge() {
    let frames = split_all(&tcp_super_packet(&payload_bytes(5000), 1000, TCP_ACK)).unwrap();
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
    let ack_only = [Frame::complete(tcp_packet(b""))];
    assert_eq!(coalescible(&ack_only, false), 1);
    assert_eq!(coalescible(&[], false), 1);
}

#[test]
fn a_run_holds_at_most_an_ip_packet() {
    let frames: Vec<Frame> = (0..3)
        .flat_map(|_| split_all(&tcp_super_packet(&payload_bytes(30_000), 1000, TCP_ACK)).unwrap())
        .collect();
    // The three super-packets repeat the same sequence numbers: only the first one's 30 run.
    assert_eq!(coalescible(&frames, false), 30);
    let contiguous: Vec<Frame> = split_all(&tcp_super_packet(&payload_bytes(65_000), 1000, TCP_ACK)).unwrap();
    assert_eq!(contiguous.len(), 65);
    assert_eq!(coalescible(&contiguous, false), 64, "at most 64 segments");
    let big = split_all(&tcp_super_packet(&payload_bytes(65_400), 1400, TCP_ACK)).unwrap();
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
