//! Packets carried whole: a packet standing for several wire segments (a GSO super-packet)
//! crosses a link as one where each segment's fate is the one it would meet alone.
//!
//! - Without a rate every segment finds the queue empty and leaves at once: the packet passes
//!   straight through, counted as its segments would be.
//! - At a fixed rate behind a drop-tail queue with room for all of its segments, every segment
//!   is admitted and serialized back to back, as alone. The packet waits in the queue as one
//!   entry counting all its segments; once it starts, the segments still waiting for the
//!   transmitter stay counted in the queue until the moment each would have started
//!   ([`Draining`]), so later arrivals meet the queue they would have met. The whole packet
//!   leaves when its last segment would have: each segment but the last leaves later than alone,
//!   by at most the packet's serialization spread, which the network bounds
//!   (`Network::set_whole_spread`). That delay is the one difference from its segments alone.

use super::{EventKind, EventLog, Link, Waiting};
use crate::config::{LinkConfig, QueueKind, Rate};
use crate::packet::{Packet, Segmented};
use crate::Nanos;

/// The wire segments a packet stands for: how many, the size of all but the last, the size of
/// all together (IP bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentShape {
    /// Wire segments.
    pub segments: u32,
    /// IP bytes of each segment but the last.
    pub segment_size: u32,
    /// IP bytes of all together.
    pub size: u32,
}

impl SegmentShape {
    /// The size of the last segment.
    fn last_size(&self) -> u32 {
        self.size.saturating_sub(self.segment_size.saturating_mul(self.segments.saturating_sub(1)))
    }
}

impl<P> Packet<P> {
    /// The wire segments this packet stands for.
    pub fn shape(&self) -> SegmentShape {
        SegmentShape { segments: self.segments, segment_size: self.segment_size, size: self.size }
    }
}

/// The segments of the packet being serialized whole that have not yet started: they still
/// count as queued.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Draining {
    /// Segments still counted in the queue.
    left: u32,
    /// When the next of them starts.
    next_start: Nanos,
    /// Serialization time of a full segment.
    step: Nanos,
    segment_size: u32,
    last_size: u32,
}

impl<P> Link<P> {
    /// Whether a packet of several wire segments (`shape`) may cross this link whole, its
    /// segments leaving no more than `spread` ns apart (see the module's documentation): no
    /// shaper, random loss, jitter, AQM or WiFi, and either no rate with room for one segment in
    /// the empty queue (drop-tail or drop-head), or a fixed rate, a drop-tail queue with room for
    /// every segment, and a serialization spread within `spread`.
    pub fn takes_whole(&self, shape: SegmentShape, spread: Nanos) -> bool {
        let c = &self.config;
        self.is_plain()
            && match c.rate {
                Rate::Unlimited => {
                    matches!(c.queue.kind, QueueKind::DropTail | QueueKind::DropHead)
                        && self.counters.queue_packets == 0
                        && self.fits(1, u64::from(shape.segment_size))
                }
                Rate::BitsPerSecond(bps) => {
                    let step = LinkConfig::serialization_time(bps, shape.segment_size);
                    c.queue.kind == QueueKind::DropTail
                        && step.saturating_mul(Nanos::from(shape.segments.saturating_sub(1))) <= spread
                        && self.fits(u64::from(shape.segments), u64::from(shape.size))
                }
                Rate::Trace(_) | Rate::Wifi(_) => false,
            }
    }

    /// How many segments, at most, of a packet of this `shape` the link would take whole now
    /// (1: none but alone), for cutting it into pieces it takes whole: all where it takes the
    /// packet whole, at a fixed rate as many as leave within `spread` and fit in the queue as
    /// full-sized segments.
    pub fn whole_segments(&self, shape: SegmentShape, spread: Nanos) -> u32 {
        let c = &self.config;
        if self.takes_whole(shape, spread) {
            return shape.segments;
        }
        if !self.is_plain() {
            return 1;
        }
        match c.rate {
            Rate::BitsPerSecond(bps) if c.queue.kind == QueueKind::DropTail => {
                let step = LinkConfig::serialization_time(bps, shape.segment_size).max(1);
                let by_spread = u32::try_from(spread / step).unwrap_or(u32::MAX).saturating_add(1);
                let mut most = shape.segments.min(by_spread);
                while most > 1 && !self.fits(u64::from(most), u64::from(most) * u64::from(shape.segment_size)) {
                    most -= 1;
                }
                most.max(1)
            }
            _ => 1,
        }
    }

    /// No shaper, random loss, jitter, AQM or WiFi.
    fn is_plain(&self) -> bool {
        let c = &self.config;
        c.shaper.is_none() && c.loss.is_none() && c.jitter.is_none() && self.fq.is_none() && self.wifi.is_none()
    }

    /// Whether the link only delays (no rate and nothing of [`Link::is_plain`]): segments that
    /// reach it bunched leave it as they came, meeting nothing that counts arrivals.
    pub fn is_delay_only(&self) -> bool {
        self.is_plain() && matches!(self.config.rate, Rate::Unlimited)
    }

    /// A packet of several segments, which [`Link::takes_whole`] allowed, arrives at `now` (the
    /// link advanced to `now`).
    pub(super) fn arrive_whole(&mut self, now: Nanos, packet: Packet<P>, events: &mut EventLog) -> bool {
        events.record(now, EventKind::Enqueue, self.id, &packet);
        let shape = packet.shape();
        let starts_now = self.queue.is_empty() && self.transmitter.earliest_start(&self.config.rate, now) <= now;
        let c = &mut self.counters;
        c.enqueued_packets += u64::from(shape.segments);
        c.enqueued_bytes += u64::from(shape.size);
        if matches!(self.config.rate, Rate::Unlimited) {
            // Each segment enters the empty queue and leaves at once.
            c.max_queue_packets = c.max_queue_packets.max(c.queue_packets + 1);
            c.max_queue_bytes = c.max_queue_bytes.max(c.queue_bytes + u64::from(shape.segment_size));
            let finish = self.transmitter.transmit(&self.config.rate, now, shape.size);
            self.propagate(finish, packet);
            return true;
        }
        // The high-water mark the segments would reach one after another: on an idle link the
        // first starts at once (alone for a moment) and the others queue behind it.
        let (most_packets, most_bytes) = if starts_now {
            let rest = u64::from(shape.size - shape.segment_size);
            (u64::from(shape.segments - 1).max(1), rest.max(u64::from(shape.segment_size)))
        } else {
            (u64::from(shape.segments), u64::from(shape.size))
        };
        c.max_queue_packets = c.max_queue_packets.max(c.queue_packets + most_packets);
        c.max_queue_bytes = c.max_queue_bytes.max(c.queue_bytes + most_bytes);
        c.queue_packets += u64::from(shape.segments);
        c.queue_bytes += u64::from(shape.size);
        self.queue.push_back(Waiting { packet, arrived: now });
        self.advance(now, events);
        true
    }

    /// A packet of several segments starts at `start` (it left the queue): its segments are
    /// serialized back to back, those after the first stay counted in the queue until each
    /// starts, and the packet leaves when the last is through. Returns when that is.
    pub(super) fn transmit_whole(&mut self, start: Nanos, shape: SegmentShape) -> Nanos {
        let mut finish = start;
        for size in std::iter::repeat_n(shape.segment_size, shape.segments as usize - 1).chain([shape.last_size()]) {
            let at = self.transmitter.earliest_start(&self.config.rate, finish);
            finish = self.transmitter.transmit(&self.config.rate, at, size);
        }
        let step = match self.config.rate {
            Rate::BitsPerSecond(bps) => LinkConfig::serialization_time(bps, shape.segment_size),
            _ => 0,
        };
        let c = &mut self.counters;
        c.queue_packets += u64::from(shape.segments - 1);
        c.queue_bytes += u64::from(shape.size - shape.segment_size);
        self.draining = Draining {
            left: shape.segments - 1,
            next_start: start + step,
            step,
            segment_size: shape.segment_size,
            last_size: shape.last_size(),
        };
        self.settle_draining(start);
        finish
    }

    /// Takes the segments of the packet in transmission that would have started by `now` out
    /// of the queue.
    pub(super) fn settle_draining(&mut self, now: Nanos) {
        let d = &mut self.draining;
        while d.left > 0 && d.next_start <= now {
            d.left -= 1;
            let size = if d.left == 0 { d.last_size } else { d.segment_size };
            self.counters.queue_packets -= 1;
            self.counters.queue_bytes -= u64::from(size);
            d.next_start += d.step;
        }
    }

    /// Segments of the packet in transmission still counted as queued (they are in flight in
    /// the model already).
    pub(super) fn draining_segments(&self) -> u32 {
        self.draining.left
    }
}

impl<P: Segmented> Link<P> {
    /// Splits every packet waiting whole in the queue into its segments, in place (before a
    /// reconfiguration, or when the event log starts: from then on each segment's fate and
    /// events are its own).
    pub fn split_waiting(&mut self) {
        if self.queue.iter().all(|w| w.packet.segments <= 1) {
            return;
        }
        let mut split = std::collections::VecDeque::with_capacity(self.queue.len());
        for Waiting { packet, arrived } in self.queue.drain(..) {
            packet.into_segments(|segment| split.push_back(Waiting { packet: segment, arrived }));
        }
        self.queue = split;
    }
}
