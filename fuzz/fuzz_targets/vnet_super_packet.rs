//! TUN reads with segmentation offloads: a virtio-net header and an IP packet or GSO
//! super-packet, split into wire segments by the emulator's own read path (`emu::vnet::split`,
//! into buffers from a pool reused as the emulator reuses it). Where the split succeeds: every
//! segment fits the segment room and a partial checksum is one the frame can place; a packet
//! that is not a super-packet comes out whole (only its checksum field may change); a
//! super-packet's segments, as a wire carries them (checksums completed), are each a valid IPv4
//! TCP/UDP packet per etherparse with valid IP and transport checksums, consecutive TCP sequence
//! numbers, FIN/PSH on the last segment only, parse in the model, and together carry exactly
//! the super-packet's payload. The path that carries a super-packet whole agrees with the split:
//! `vnet::super_packet_shape` accepts exactly the super-packets the split accepts, its segment
//! count, sizes and bytes are the split's (and so the model's per-segment sizes and IP ids,
//! `netmodel::Packet::segmented`), and splitting the whole frame later (`vnet::split_whole`)
//! gives the same segments, as do the pieces of 2, 3 and 9 segments it may be cut into
//! (`vnet::split_pieces`), each a super-packet the read accepts.
#![no_main]
use std::cell::RefCell;

use emu::frame::{checksum_layout, Frame, FramePool, SEGMENT_ROOM};
use emu::vnet::{self, VNET_HEADER_LEN};
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use libfuzzer_sys::fuzz_target;
use netmodel::Packet;

thread_local! {
    /// Reused like the emulator's, which recycles the buffers of earlier reads.
    static POOL: RefCell<FramePool> = RefCell::new(FramePool::default());
}

fuzz_target!(|data: &[u8]| {
    POOL.with_borrow_mut(|pool| {
        let mut frames = Vec::new();
        let shape = vnet::super_packet_shape(data);
        let Ok(count) = vnet::split(data, pool, |frame| frames.push(frame)) else {
            assert!(shape.is_err() || shape == Ok(None), "a shape for a super-packet the split refuses");
            return;
        };
        if let Ok(Some(shape)) = shape {
            check_carried_whole(data, shape, &frames, pool);
        } else {
            assert!(shape == Ok(None) && data[1] == 0, "the split took a super-packet the shape refuses");
        }
        assert_eq!(count, frames.len());
        assert!(!frames.is_empty());
        for frame in &frames {
            assert!(frame.bytes.len() <= SEGMENT_ROOM, "segment of {} bytes", frame.bytes.len());
            assert!(!frame.partial_checksum || checksum_layout(&frame.bytes).is_some(), "a partial checksum with no place");
        }
        let split: Vec<Vec<u8>> = frames.iter().map(|f| f.wire_copy()).collect();
        let (header, packet) = data.split_at(VNET_HEADER_LEN);
        if header[1] == 0 {
            let bytes: Vec<&[u8]> = frames.iter().map(|f| f.bytes.as_slice()).collect();
            check_whole(header, packet, &bytes);
        } else {
            let split: Vec<&[u8]> = split.iter().map(Vec::as_slice).collect();
            check_segments(packet, &split);
        }
        for frame in frames {
            pool.give(frame.bytes);
        }
    });
});

/// A packet without GSO: one segment, equal to the packet outside its checksum field.
fn check_whole(header: &[u8], packet: &[u8], split: &[&[u8]]) {
    assert_eq!(split.len(), 1);
    let segment = split[0];
    assert_eq!(segment.len(), packet.len());
    let field = if header[0] & 1 != 0 {
        let at = usize::from(u16::from_ne_bytes([header[6], header[7]])) + usize::from(u16::from_ne_bytes([header[8], header[9]]));
        at..at + 2
    } else {
        0..0
    };
    for (i, (a, b)) in segment.iter().zip(packet).enumerate() {
        assert!(a == b || field.contains(&i), "byte {i} changed outside the checksum field {field:?}");
    }
}

/// A super-packet's segments.
fn check_segments(packet: &[u8], split: &[&[u8]]) {
    let mut payload = Vec::new();
    let mut next_seq = None;
    for (i, segment) in split.iter().enumerate() {
        let last = i + 1 == split.len();
        let sliced = SlicedPacket::from_ip(segment).unwrap_or_else(|e| panic!("segment {i}: {e}"));
        let addresses = match &sliced.net {
            Some(NetSlice::Ipv4(ip)) => {
                let h = ip.header();
                assert_eq!(usize::from(h.total_len()), segment.len(), "segment {i}: IPv4 total length");
                // Summed over the header's bytes: etherparse's header type drops the reserved flag.
                assert_eq!(ones_complement_sum(h.slice()), 0xffff, "segment {i}: IPv4 checksum");
                assert!(!ip.is_payload_fragmented(), "segment {i}: a fragment");
                assert!(Packet::from_ipv4(segment.to_vec()).is_ok(), "segment {i}: the model's parse");
                Addresses(h.source(), h.destination())
            }
            _ => panic!("segment {i}: not IPv4"),
        };
        match &sliced.transport {
            Some(TransportSlice::Tcp(tcp)) => {
                let Addresses(s, d) = addresses;
                let sum = tcp.calc_checksum_ipv4(s, d);
                assert_eq!(sum.ok(), Some(tcp.checksum()), "segment {i}: TCP checksum");
                if let Some(seq) = next_seq {
                    assert_eq!(tcp.sequence_number(), seq, "segment {i}: sequence number");
                }
                assert!(last || !(tcp.fin() || tcp.psh()), "segment {i}: FIN/PSH before the last segment");
                next_seq = Some(tcp.sequence_number().wrapping_add(tcp.payload().len() as u32));
                payload.extend_from_slice(tcp.payload());
            }
            Some(TransportSlice::Udp(udp)) => {
                assert_eq!(usize::from(udp.length()), udp.slice().len(), "segment {i}: UDP length");
                let header = udp.to_header();
                let Addresses(s, d) = addresses;
                let sum = header.calc_checksum_ipv4_raw(s, d, udp.payload());
                assert_eq!(sum.ok(), Some(udp.checksum()), "segment {i}: UDP checksum");
                payload.extend_from_slice(udp.payload());
            }
            _ => panic!("segment {i}: neither TCP nor UDP"),
        }
    }
    assert!(!payload.is_empty(), "segments without payload");
    assert_eq!(payload.as_slice(), &packet[packet.len() - payload.len()..], "payload differs from the super-packet's");
    assert_eq!(packet.len() - payload.len(), split[0].len() - first_payload_len(split[0]), "headers differ");
}

/// The payload length of a segment already checked to parse.
fn first_payload_len(segment: &[u8]) -> usize {
    match SlicedPacket::from_ip(segment).ok().and_then(|s| s.transport) {
        Some(TransportSlice::Tcp(tcp)) => tcp.payload().len(),
        Some(TransportSlice::Udp(udp)) => udp.payload().len(),
        _ => 0,
    }
}

/// A segment's source and destination, for its transport checksum.
#[derive(Clone, Copy)]
struct Addresses([u8; 4], [u8; 4]);

/// The one's complement sum of 16-bit words (RFC 1071); 0xffff over a header with a valid checksum.
fn ones_complement_sum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum >> 16) + (sum & 0xffff);
    }
    sum as u16
}

/// A super-packet carried whole instead: the same segments, sizes, IP ids and bytes.
fn check_carried_whole(data: &[u8], shape: emu::frame::GsoShape, frames: &[Frame], pool: &mut FramePool) {
    assert_eq!(shape.segments, frames.len());
    assert_eq!(shape.wire_bytes(), frames.iter().map(|f| f.bytes.len()).sum::<usize>());
    assert_eq!(shape.segment_size(), frames[0].bytes.len());
    let first = Packet::from_ipv4(frames[0].bytes.clone()).expect("the first segment parses");
    let model = Packet::segmented(shape.wire_bytes() as u32, shape.segment_size() as u32, shape.segments as u32, first.flow, first.ip_id, ());
    let split_sizes: Vec<(u32, u16)> = frames
        .iter()
        .map(|f| (f.bytes.len() as u32, u16::from_be_bytes([f.bytes[4], f.bytes[5]])))
        .collect();
    assert_eq!(model.segment_sizes().collect::<Vec<_>>(), split_sizes, "the model's sizes and IP ids");
    let mut later = Vec::new();
    vnet::split_whole(Frame::whole(data.to_vec(), shape), pool, |f| later.push(f));
    assert!(later == frames, "split later, the same segments");
    later.into_iter().for_each(|f| pool.give(f.bytes));
    // Cut into pieces of a few segments each: every piece a super-packet the read accepts (or
    // one segment), and the pieces split into the same segments.
    for most in [2, 3, 9] {
        let mut pieces = Vec::new();
        let count = vnet::split_pieces(data, &shape, most, pool, |f| pieces.push(f));
        assert_eq!(count, shape.segments.div_ceil(most), "pieces of {most}");
        let mut again = Vec::new();
        for piece in pieces {
            if let Some(piece_shape) = piece.gso {
                assert_eq!(vnet::super_packet_shape(&piece.bytes), Ok(Some(piece_shape)), "a piece the read accepts");
            }
            vnet::split_whole(piece, pool, |f| again.push(f));
        }
        assert!(again == frames, "pieces of {most} split into the same segments");
        again.into_iter().for_each(|f| pool.give(f.bytes));
    }
}
