//! A host's TUN device as the packet loop uses it, with or without segmentation offloads.
//!
//! With offloads (`IFF_VNET_HDR` and `TUNSETOFFLOAD` CSUM/TSO4/TSO6, plus USO4/USO6 where the
//! kernel accepts them; tun-rs sets them up) the host's kernel hands the emulator GSO
//! super-packets of up to 64 KB with a virtio-net header instead of one 1500-byte packet per
//! read. Reading splits a super-packet into its wire segments (sequence numbers, IP ids, lengths
//! and checksums as the kernel would have sent them: [`crate::vnet`], pure, around tun-rs's
//! `gso_split`), so the model, the capture and the event log still see one packet per wire
//! segment. Writing queues the packets the model delivers and hands each host's batch to
//! tun-rs's GRO, which coalesces consecutive segments of a flow back into one super-packet per
//! write.

use tun_rs::{GROTable, SyncDevice, VIRTIO_NET_HDR_LEN};

use crate::vnet::{Segments, MAX_DATAGRAM};

/// Delivered packets queued per host before they are written (GRO works within a batch).
pub const WRITE_BATCH: usize = 128;
/// Capacity of a queued packet's buffer: GRO coalesces a flow's segments into the first one's
/// buffer only when it can hold a whole super-packet (and leaves it alone otherwise). Pages are
/// touched only as far as they are written, so at most WRITE_BATCH * 64 KB per host is resident.
pub const WRITE_ROOM: usize = 2 * VIRTIO_NET_HDR_LEN + 65_536;

/// Reusable buffers for reading, shared by every host (the loop reads one host at a time).
pub struct ReadBuffers {
    raw: Vec<u8>,
    segments: Segments,
}

impl ReadBuffers {
    /// Buffers for the largest read (a whole super-packet) and, with offloads, its segments.
    pub fn new(offload: bool) -> ReadBuffers {
        let segments = if offload { Segments::new() } else { Segments::none() };
        ReadBuffers { raw: vec![0u8; MAX_DATAGRAM], segments }
    }
}

/// What one read gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// Nothing more to read now.
    Empty,
    /// This many wire segments, handed on (1 without offloads).
    Segments(usize),
    /// A datagram the emulator could not split (a malformed virtio header or super-packet);
    /// dropped.
    Malformed,
}

/// One host's device.
pub struct HostIo {
    device: SyncDevice,
    offload: Option<WriteBatch>,
}

/// Delivered packets waiting to be written, each behind room for the virtio-net header.
struct WriteBatch {
    gro: GROTable,
    packets: Vec<Vec<u8>>,
    queued: usize,
    failed_writes: u64,
}

impl HostIo {
    /// The device; `offload` must be what it was built with.
    pub fn new(device: SyncDevice, offload: bool) -> HostIo {
        let batch = offload.then(|| WriteBatch { gro: GROTable::default(), packets: Vec::new(), queued: 0, failed_writes: 0 });
        HostIo { device, offload: batch }
    }

    /// The device (for epoll).
    pub fn device(&self) -> &SyncDevice {
        &self.device
    }

    /// Whether the device runs with segmentation offloads.
    pub fn offload(&self) -> bool {
        self.offload.is_some()
    }

    /// Reads one datagram and hands each of its wire segments to `each`.
    pub fn read(&self, buffers: &mut ReadBuffers, mut each: impl FnMut(&[u8])) -> Read {
        let ReadBuffers { raw, segments } = buffers;
        // Would block, interrupted, or the device failed: nothing was consumed.
        let Ok(len) = self.device.recv(raw) else { return Read::Empty };
        if self.offload.is_none() {
            each(&raw[..len]);
            return Read::Segments(1);
        }
        match segments.split(&mut raw[..len]) {
            Ok(count) => {
                segments.iter(count).for_each(each);
                Read::Segments(count)
            }
            // The datagram has been consumed; the model never sees it.
            Err(_) => Read::Malformed,
        }
    }

    /// Sends `packet`: without offloads at once (false: the write failed), with them at the next
    /// [`HostIo::flush`] or when the batch is full (true).
    pub fn send(&mut self, packet: &[u8]) -> bool {
        let Some(batch) = &mut self.offload else {
            return self.device.send(packet).is_ok();
        };
        if batch.queued == batch.packets.len() {
            batch.packets.push(Vec::with_capacity(WRITE_ROOM));
        }
        queue_for_write(&mut batch.packets[batch.queued], packet);
        batch.queued += 1;
        if batch.queued >= WRITE_BATCH {
            batch.write(&self.device);
        }
        true
    }

    /// Writes the queued packets, coalescing consecutive segments of a flow; returns how many
    /// batches failed since the last flush (tun-rs reports a batch's last error only, so a
    /// failed batch counts once).
    pub fn flush(&mut self) -> u64 {
        let Some(batch) = &mut self.offload else { return 0 };
        batch.write(&self.device);
        std::mem::take(&mut batch.failed_writes)
    }
}

/// Puts `packet` in a write buffer (of [`WRITE_ROOM`] capacity) as tun-rs's GRO expects it:
/// behind a zero virtio-net header (no offload asked for; GRO rewrites it for what it coalesces).
pub fn queue_for_write(buffer: &mut Vec<u8>, packet: &[u8]) {
    buffer.clear();
    buffer.resize(VIRTIO_NET_HDR_LEN, 0);
    buffer.extend_from_slice(packet);
}

impl WriteBatch {
    fn write(&mut self, device: &SyncDevice) {
        if self.queued == 0 {
            return;
        }
        let result = device.send_multiple(&mut self.gro, &mut self.packets[..self.queued], VIRTIO_NET_HDR_LEN);
        self.queued = 0;
        self.failed_writes += u64::from(result.is_err());
    }
}
