//! A host's TUN device as the packet loop uses it, with or without segmentation offloads.
//!
//! With offloads (`IFF_VNET_HDR` and `TUNSETOFFLOAD` CSUM/TSO4/TSO6, plus USO4/USO6 where the
//! kernel accepts them; tun-rs sets them up) the host's kernel hands the emulator GSO
//! super-packets of up to 64 KB with a virtio-net header instead of one 1500-byte packet per
//! read. Reading splits a super-packet into its wire segments (sequence numbers, IP ids, lengths
//! as the kernel would have sent them: [`crate::vnet::split`]) straight into pooled buffers that become
//! the model's packets, so the model, the capture and the event log still see one packet per
//! wire segment. Writing queues the packets the model delivers per host and writes each run of
//! consecutive segments of a flow as one super-packet with one vectored write (the headers
//! built once, the segments' payloads written from their own buffers), then returns the
//! buffers to the pool.
//!
//! Transport checksums the sending kernel left partial stay partial (the receiving device is
//! asked to complete them, which for a local receiver means they are trusted as a NIC's would
//! be); they are completed for a host without offloads and in captures.

use tun_rs::SyncDevice;

use crate::frame::{Frame, FramePool};
use crate::vnet::{self, MAX_DATAGRAM, VNET_HEADER_LEN};

/// Delivered packets queued per host before they are written (runs coalesce within a batch).
pub const WRITE_BATCH: usize = 128;

/// Buffers shared by every host (the loop serves one host at a time): the read buffer, and the
/// pool the packets' buffers come from and return to.
#[derive(Debug)]
pub struct Buffers {
    raw: Vec<u8>,
    /// Packet buffers, recycled after each write.
    pub pool: FramePool,
}

impl Buffers {
    /// Room for the largest read.
    pub fn new() -> Buffers {
        Buffers { raw: vec![0u8; MAX_DATAGRAM], pool: FramePool::default() }
    }
}

impl Default for Buffers {
    fn default() -> Self {
        Buffers::new()
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

/// Delivered packets waiting to be written, and room for a super-packet's headers.
struct WriteBatch {
    frames: Vec<Frame>,
    headers: Vec<u8>,
    /// Whether the device takes UDP super-packets (USO).
    udp: bool,
    failed_packets: u64,
}

impl HostIo {
    /// The device; `offload` must be what it was built with.
    pub fn new(device: SyncDevice, offload: bool) -> HostIo {
        let batch = offload.then(|| WriteBatch {
            frames: Vec::with_capacity(WRITE_BATCH),
            headers: Vec::with_capacity(VNET_HEADER_LEN + 120),
            udp: device.udp_gso(),
            failed_packets: 0,
        });
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
    pub fn read(&self, buffers: &mut Buffers, mut each: impl FnMut(Frame)) -> Read {
        let Buffers { raw, pool } = buffers;
        let length = match self.device.recv(raw) {
            Ok(n) => n.min(raw.len()),
            // Would block, interrupted, or the device failed: nothing more now either way.
            Err(_) => return Read::Empty,
        };
        let datagram = &raw[..length];
        if self.offload.is_none() {
            let mut bytes = pool.take();
            bytes.extend_from_slice(datagram);
            each(Frame::complete(bytes));
            return Read::Segments(1);
        }
        match vnet::split(datagram, pool, each) {
            Ok(count) => Read::Segments(count),
            Err(_) => Read::Malformed,
        }
    }

    /// Sends `frame`: without offloads at once (false: the write failed), with them at the next
    /// [`HostIo::flush`] or when the batch is full (true). Its buffer goes back to `pool`.
    pub fn send(&mut self, mut frame: Frame, pool: &mut FramePool) -> bool {
        let Some(batch) = &mut self.offload else {
            // No device to finish the checksum here: a wire packet needs it whole.
            frame.complete_checksum();
            let written = self.device.send(&frame.bytes).is_ok();
            pool.give(frame.bytes);
            return written;
        };
        batch.frames.push(frame);
        if batch.frames.len() >= WRITE_BATCH {
            batch.write(&self.device, pool);
        }
        true
    }

    /// Writes the queued packets, coalescing consecutive segments of a flow; returns how many
    /// packets were in writes that failed since the last flush.
    pub fn flush(&mut self, pool: &mut FramePool) -> u64 {
        let Some(batch) = &mut self.offload else { return 0 };
        batch.write(&self.device, pool);
        std::mem::take(&mut batch.failed_packets)
    }
}

impl WriteBatch {
    fn write(&mut self, device: &SyncDevice, pool: &mut FramePool) {
        let failed = &mut self.failed_packets;
        vnet::for_each_write(&self.frames, self.udp, &mut self.headers, |pieces, packets| {
            if device.send_vectored(pieces).is_err() {
                *failed += packets as u64;
            }
        });
        for frame in self.frames.drain(..) {
            pool.give(frame.bytes);
        }
    }
}
