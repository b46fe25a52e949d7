//! TUN writes with segmentation offloads: the packets the model delivers to a host in one pass,
//! written as the emulator writes them (`emu::vnet::for_each_write`: runs of one flow coalesced
//! into a super-packet, anything else alone), with no device. Every write must fit one TUN
//! write, carry the packets it says, and read back through the emulator's own read path
//! (`emu::vnet::split`) as exactly those packets, up to the IPv4 id and the checksums (which
//! the split numbers afresh and the device completes). Input: a flags byte (bit 0: the device
//! takes UDP super-packets, as with USO; bit 1: the TCP/UDP packets' checksums are left partial,
//! as a sending kernel with offloads leaves them), then packets, each behind its length (u16,
//! big-endian), at most a write batch of them; those the model would not parse, and those longer
//! than a read ever gives (a wire segment), are left out.
#![no_main]
use std::cell::RefCell;

use emu::frame::{checksum_layout, pseudo_header_sum, Frame, FramePool, SEGMENT_ROOM};
use emu::host_io::WRITE_BATCH;
use emu::vnet::{self, MAX_DATAGRAM};
use libfuzzer_sys::fuzz_target;
use netmodel::Packet;

thread_local! {
    /// The read side's pool, reused as the emulator reuses it.
    static POOL: RefCell<FramePool> = RefCell::new(FramePool::default());
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, mut rest)) = data.split_first() else { return };
    let mut frames = Vec::new();
    while rest.len() >= 2 && frames.len() < WRITE_BATCH {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let packet = &rest[2..2 + len];
        // Only what the model parsed reaches a write (IPv4).
        if len <= SEGMENT_ROOM && Packet::from_ipv4(packet.to_vec()).is_ok() {
            frames.push(frame(packet, flags & 2 != 0));
        }
        rest = &rest[2 + len..];
    }
    let mut writes = Vec::new();
    vnet::for_each_write(&frames, flags & 1 != 0, &mut Vec::new(), |pieces, count| {
        writes.push((pieces.iter().flat_map(|p| p.to_vec()).collect::<Vec<u8>>(), count));
    });
    assert_eq!(writes.iter().map(|w| w.1).sum::<usize>(), frames.len(), "every packet written once");
    POOL.with_borrow_mut(|pool| {
        let mut next = 0;
        for (i, (bytes, count)) in writes.iter().enumerate() {
            assert!(bytes.len() <= MAX_DATAGRAM, "write {i}: {} bytes", bytes.len());
            let mut read = Vec::new();
            let split = vnet::split(bytes, pool, |f| read.push(f));
            let split = split.unwrap_or_else(|e| panic!("write {i}: the read path refuses it: {e}"));
            assert_eq!(split, *count, "write {i}: segments read back");
            for (k, segment) in read.iter().enumerate() {
                let sent = &frames[next + k];
                assert!(same_but_ids_and_checksums(&segment.wire_copy(), &sent.wire_copy()), "write {i}: segment {k} differs from the packet sent");
            }
            next += count;
            read.into_iter().for_each(|f| pool.give(f.bytes));
        }
    });
});

/// The packet as the model delivers it: with its checksum as given, or left partial (the
/// pseudo-header sum in the field, as a sending kernel with offloads leaves it).
fn frame(packet: &[u8], partial: bool) -> Frame {
    let mut bytes = packet.to_vec();
    match checksum_layout(&bytes) {
        Some((start, offset)) if partial && bytes.len() - start <= usize::from(u16::MAX) => {
            let mut addresses = [0u8; 8];
            addresses.copy_from_slice(&bytes[12..20]);
            let pseudo = pseudo_header_sum(&addresses, bytes[9], (bytes.len() - start) as u16);
            bytes[start + offset..start + offset + 2].copy_from_slice(&pseudo.to_be_bytes());
            Frame::partial(bytes)
        }
        _ => Frame::complete(bytes),
    }
}

/// Whether `read` is `sent` outside the IPv4 id and header checksum and the transport checksum
/// (a coalesced segment's is the device's to complete; a packet sent with a wrong one comes back
/// with a right one).
fn same_but_ids_and_checksums(read: &[u8], sent: &[u8]) -> bool {
    let transport_checksum = checksum_layout(sent).map(|(start, offset)| start + offset);
    let skipped = |j: usize| matches!(j, 4 | 5 | 10 | 11) || transport_checksum.is_some_and(|at| j == at || j == at + 1);
    read.len() == sent.len() && read.iter().zip(sent).enumerate().all(|(j, (a, b))| a == b || skipped(j))
}
