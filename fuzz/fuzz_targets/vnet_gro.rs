//! TUN writes with segmentation offloads: the packets the model delivers in one pass, queued as
//! the emulator queues them (`emu::host_io::queue_for_write`) and coalesced by tun-rs's GRO as
//! `send_multiple` does before it writes (no device). Every super-packet GRO builds must fit one
//! TUN write, be one the emulator's own read path splits back (`emu::vnet`, which checks each
//! segment's headers), and each of its segments must be one of the packets queued (up to the
//! IPv4 id, which the split numbers afresh, and the checksums, which it recomputes). Input: a
//! flags byte (bit 0: UDP GRO, as with USO), then packets, each behind its length (u16,
//! big-endian), at most a write batch of them; those the model would not parse are left out.
#![no_main]
use std::cell::RefCell;

use emu::host_io::{queue_for_write, WRITE_BATCH, WRITE_ROOM};
use emu::vnet::Segments;
use libfuzzer_sys::fuzz_target;
use netmodel::Packet;
use tun_rs::{GROTable, VirtioNetHdr, VIRTIO_NET_HDR_LEN};

thread_local! {
    /// The read side's buffers, reused as the emulator reuses them.
    static SEGMENTS: RefCell<Segments> = RefCell::new(Segments::new());
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, mut rest)) = data.split_first() else { return };
    let mut packets = Vec::new();
    while rest.len() >= 2 && packets.len() < WRITE_BATCH {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let packet = &rest[2..2 + len];
        // Only what the model parsed reaches a write: IPv4 (tun-rs's GRO ignores the IPv6 flow
        // label, so it would merge segments of different IPv6 flows; the emulator drops IPv6).
        if Packet::from_ipv4(packet.to_vec()).is_ok() {
            packets.push(packet);
        }
        rest = &rest[2 + len..];
    }
    let mut buffers: Vec<Vec<u8>> = packets
        .iter()
        .map(|p| {
            let mut buffer = Vec::with_capacity(WRITE_ROOM);
            queue_for_write(&mut buffer, p);
            buffer
        })
        .collect();
    let mut gro = GROTable::default();
    if gro.apply_gro(&mut buffers, VIRTIO_NET_HDR_LEN, flags & 1 != 0).is_err() {
        return;
    }
    SEGMENTS.with_borrow_mut(|segments| check(&packets, &buffers, segments));
});

/// Checks the buffers GRO left against the packets queued in them.
fn check(packets: &[&[u8]], buffers: &[Vec<u8>], segments: &mut Segments) {
    for (i, buffer) in buffers.iter().enumerate() {
        assert!(buffer.len() <= VIRTIO_NET_HDR_LEN + 65_535, "buffer {i}: {} bytes for one write", buffer.len());
        let header = VirtioNetHdr::decode(buffer).expect("every buffer starts with a header");
        if header.gso_type == 0 {
            continue;
        }
        let count = segments
            .split(&mut buffer.clone())
            .unwrap_or_else(|e| panic!("buffer {i}: GRO built a super-packet the read path rejects: {e}"));
        assert!(count >= 2, "buffer {i}: a super-packet of {count} segment");
        // GRO appends and prepends segments of a flow; it must not invent any.
        let transport_checksum = usize::from(header.csum_start) + usize::from(header.csum_offset);
        for (k, segment) in segments.iter(count).enumerate() {
            let found = packets.iter().any(|p| same_but_ids_and_checksums(segment, p, transport_checksum));
            assert!(found, "buffer {i}: segment {k} is none of the packets queued");
        }
    }
}

/// Whether `segment` is `packet` outside the IPv4 id and checksum and the transport checksum.
fn same_but_ids_and_checksums(segment: &[u8], packet: &[u8], transport_checksum: usize) -> bool {
    let ipv4 = segment.first().is_some_and(|b| b >> 4 == 4);
    let skipped = |j: usize| (ipv4 && matches!(j, 4 | 5 | 10 | 11)) || j == transport_checksum || j == transport_checksum + 1;
    segment.len() == packet.len() && segment.iter().zip(packet).enumerate().all(|(j, (a, b))| a == b || skipped(j))
}
