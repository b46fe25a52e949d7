//! The link's glue to PIE, FQ-CoDel and the token-bucket shaper (their logic lives in
//! `crate::pie`, `crate::fq_codel` and `crate::shaper`).

use rand::Rng;

use super::{DropCause, EventLog, Link, Waiting};
use crate::config::QueueKind;
use crate::fq_codel::{FqCodel, FqParams, Queued};
use crate::packet::{FlowKey, Packet};
use crate::Nanos;

impl<P> Queued for Waiting<P> {
    fn size(&self) -> u32 {
        self.packet.size
    }
    fn arrived(&self) -> Nanos {
        self.arrived
    }
    fn flow(&self) -> &FlowKey {
        &self.packet.flow
    }
}

/// The flow queues a link with this queue kind needs (`None` unless FQ-CoDel). `hash_key` keys
/// the flow hash (the link's index: deterministic, and different per link).
pub(super) fn flow_queues_for<P>(kind: &QueueKind, hash_key: u64) -> Option<FqCodel<Waiting<P>>> {
    match *kind {
        QueueKind::FqCodel { flows, .. } => Some(FqCodel::new(flows, hash_key)),
        _ => None,
    }
}

pub(super) fn enqueue_flow<P>(fq: &mut FqCodel<Waiting<P>>, waiting: Waiting<P>, kind: &QueueKind) {
    let quantum = match *kind {
        QueueKind::FqCodel { quantum, .. } => quantum,
        _ => 1514,
    };
    fq.enqueue(waiting, quantum);
}

impl<P> Link<P> {
    /// PIE's early drop for an arrival at `now` (false for every other queue kind).
    pub(super) fn drops_early(&mut self, now: Nanos) -> bool {
        let QueueKind::Pie { target, max_burst } = self.config.queue.kind else { return false };
        let rng = &mut self.rng;
        self.pie.drop_on_arrival(now, self.counters.queue_bytes, target, max_burst, || rng.random::<f64>())
    }

    /// The size of the packet the queue would hand out next (FQ-CoDel: before CoDel decides).
    pub(super) fn next_queued_size(&self) -> Option<u32> {
        match &self.fq {
            Some(fq) => fq.next_size(),
            None => self.queue.front().map(|head| head.packet.size),
        }
    }

    /// When `size` bytes may start, given the transmitter allows `start`.
    pub(super) fn shaped_start(&self, start: Nanos, size: u32) -> Nanos {
        match &self.config.shaper {
            Some(shaper) => self.bucket.ready_at(shaper, start, size),
            None => start,
        }
    }

    pub(super) fn dequeue_pie(&mut self, now: Nanos, target: Nanos) -> Option<Packet<P>> {
        let waiting = self.pop_head()?;
        self.pie.on_dequeue(now, now.saturating_sub(waiting.arrived), self.counters.queue_packets, target);
        Some(waiting.packet)
    }

    pub(super) fn dequeue_fq(
        &mut self,
        now: Nanos,
        target: Nanos,
        interval: Nanos,
        quantum: u32,
        events: &mut EventLog,
    ) -> Option<Packet<P>> {
        let fq = self.fq.as_mut()?;
        let mut dropped = Vec::new();
        let next = fq.dequeue(now, FqParams { target, interval, quantum }, &mut dropped);
        for waiting in dropped.iter().chain(&next) {
            self.counters.queue_packets -= 1;
            self.counters.queue_bytes -= u64::from(waiting.packet.size);
        }
        for waiting in dropped {
            self.count_drop(now, DropCause::Aqm, &waiting.packet, events);
        }
        next.map(|w| w.packet)
    }

    /// Drops until the queue is within its limits: from the tail of a single queue, from the
    /// head of the fattest flow under FQ-CoDel (RFC 8290 §4.1).
    pub(super) fn trim_to_limit(&mut self, now: Nanos, events: &mut EventLog) {
        while !self.fits(0, 0) {
            let evicted = match &mut self.fq {
                Some(fq) => fq.drop_from_fattest(),
                None => self.queue.pop_back(),
            };
            let Some(w) = evicted else { break };
            self.counters.queue_packets -= 1;
            self.counters.queue_bytes -= u64::from(w.packet.size);
            self.count_drop(now, DropCause::QueueFull, &w.packet, events);
        }
    }

    /// Moves the queued packets into the container the new queue kind uses, oldest first.
    pub(super) fn switch_queue_container(&mut self) {
        let mut waiting: Vec<Waiting<P>> = self.queue.drain(..).collect();
        if let Some(fq) = &mut self.fq {
            waiting.extend(fq.drain_all());
        }
        waiting.sort_by_key(|w| w.arrived);
        self.fq = flow_queues_for(&self.config.queue.kind, u64::from(self.id));
        let kind = self.config.queue.kind;
        for w in waiting {
            match &mut self.fq {
                Some(fq) => enqueue_flow(fq, w, &kind),
                None => self.queue.push_back(w),
            }
        }
    }
}

#[cfg(test)]
mod tests;
