//! A host's TUN device as the packet loop uses it, with or without segmentation offloads.
//!
//! With offloads (`IFF_VNET_HDR` and `TUNSETOFFLOAD` CSUM/TSO4/TSO6, plus USO4/USO6 where the
//! kernel accepts them; tun-rs sets them up) the host's kernel hands the emulator GSO
//! super-packets of up to 64 KB with a virtio-net header instead of one 1500-byte packet per
//! read. A super-packet whose route takes it whole (the reader decides: [`Arrivals`]) stays in
//! the buffer it was read into and crosses the model as one packet standing for its segments;
//! any other is split into its wire segments (sequence numbers, IP ids, lengths as the kernel
//! would have sent them: [`crate::vnet::split`]) straight into pooled buffers that become the
//! model's packets. Writing queues the packets the model delivers per host and writes a
//! super-packet carried whole as it was read, and each run of consecutive segments of a flow as
//! one super-packet with one vectored write (the headers built once, the segments' payloads
//! written from their own buffers), then returns the buffers to the pool.
//!
//! Transport checksums the sending kernel left partial stay partial (the receiving device is
//! asked to complete them, which for a local receiver means they are trusted as a NIC's would
//! be); they are completed for a host without offloads and in captures.

use std::os::fd::AsFd;

use tun_rs::SyncDevice;

use crate::frame::{Frame, FramePool, GsoShape, PROTO_TCP, PROTO_UDP};
use crate::vnet::{self, MAX_DATAGRAM, VNET_HEADER_LEN};

/// Delivered packets queued per host before they are written (runs coalesce within a batch).
pub const WRITE_BATCH: usize = 128;

/// Buffers shared by every host (the loop serves one host at a time): the read buffer, and the
/// pool the packets' buffers come from and return to.
#[derive(Debug)]
pub struct Buffers {
    /// Empty, with room for the largest read (a super-packet carried whole takes it along, and
    /// a datagram buffer from the pool takes its place).
    raw: Vec<u8>,
    /// Packet buffers, recycled after each write.
    pub pool: FramePool,
}

impl Buffers {
    /// Room for the largest read.
    pub fn new() -> Buffers {
        let mut pool = FramePool::default();
        Buffers { raw: pool.take_datagram(), pool }
    }
}

/// Where a host's reads go: the packet loop's side of a read.
pub trait Arrivals {
    /// How many segments of the super-packet `ip` (its checked `shape`), at most, may cross the
    /// model as one packet: all (it crosses whole), fewer (it is cut into pieces of that many),
    /// or 1 (it is split into its segments).
    fn whole_segments(&self, ip: &[u8], shape: &GsoShape) -> usize;
    /// A packet read: a wire segment, a super-packet kept whole, or a piece of one.
    fn arrive(&mut self, frame: Frame);
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
    /// This many wire segments, handed on one by one (1 without offloads).
    Segments(usize),
    /// A super-packet of this many wire segments, handed on whole.
    Whole(usize),
    /// A super-packet of `segments` wire segments, handed on in `pieces` pieces.
    Pieces {
        /// Its wire segments.
        segments: usize,
        /// The pieces (a piece of one segment is that segment).
        pieces: usize,
    },
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

    /// Reads one datagram and hands it to `to`: whole if it is a super-packet `to` takes whole,
    /// in pieces if `to` takes fewer of its segments whole, else each of its wire segments.
    pub fn read(&self, buffers: &mut Buffers, to: &mut impl Arrivals) -> Read {
        let Buffers { raw, pool } = buffers;
        raw.clear();
        debug_assert!(raw.capacity() >= MAX_DATAGRAM);
        if rustix::io::read(self.device.as_fd(), rustix::buffer::spare_capacity(raw)).is_err() {
            // Would block, interrupted, or the device failed: nothing more now either way.
            return Read::Empty;
        }
        if self.offload.is_none() {
            let mut bytes = pool.take();
            bytes.extend_from_slice(raw);
            to.arrive(Frame::complete(bytes));
            return Read::Segments(1);
        }
        let shape = match vnet::super_packet_shape(raw) {
            Ok(shape) => shape,
            Err(_) => return Read::Malformed,
        };
        let most = shape.map_or(1, |shape| to.whole_segments(&raw[VNET_HEADER_LEN..], &shape));
        match shape {
            Some(shape) if most >= shape.segments => {
                // A large one keeps the read buffer (no copy); a small one, a copy of its own
                // size, so that what a long delay holds in flight is at most 4 times its bytes.
                let datagram = if raw.len() >= MAX_DATAGRAM / 4 {
                    std::mem::replace(raw, pool.take_datagram())
                } else {
                    raw.as_slice().to_vec()
                };
                to.arrive(Frame::whole(datagram, shape));
                Read::Whole(shape.segments)
            }
            Some(shape) if most >= 2 => {
                let pieces = vnet::split_pieces(raw, &shape, most, pool, |frame| to.arrive(frame));
                Read::Pieces { segments: shape.segments, pieces }
            }
            _ => match vnet::split(raw, pool, |frame| to.arrive(frame)) {
                Ok(count) => Read::Segments(count),
                Err(_) => Read::Malformed,
            },
        }
    }

    /// Whether a super-packet of this IP protocol may be written whole to this device.
    pub fn takes_whole(&self, proto: u8) -> bool {
        self.offload.as_ref().is_some_and(|batch| proto == PROTO_TCP || (proto == PROTO_UDP && batch.udp))
    }

    /// Sends `frame`: without offloads at once (false: the write failed), with them at the next
    /// [`HostIo::flush`] or when the batch is full (true). Its buffer goes back to `pool`.
    pub fn send(&mut self, frame: Frame, pool: &mut FramePool) -> bool {
        if frame.gso.is_some_and(|shape| !self.takes_whole(shape.proto)) {
            // A super-packet this device cannot take whole goes out as its segments.
            let mut segments = Vec::new();
            vnet::split_whole(frame, pool, |segment| segments.push(segment));
            let mut written = true;
            for segment in segments {
                written &= self.send(segment, pool);
            }
            return written;
        }
        let Some(batch) = &mut self.offload else {
            // No device to finish the checksum here: a wire packet needs it whole.
            let mut frame = frame;
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
