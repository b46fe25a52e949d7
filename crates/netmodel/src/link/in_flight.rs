//! The packets a link direction has sent and not yet delivered, in delivery order.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use crate::packet::Packet;
use crate::Nanos;

/// A packet propagating: it leaves the link at `deliver_at`; `seq` orders equal times by
/// transmission.
pub(super) struct InFlight<P> {
    pub(super) deliver_at: Nanos,
    pub(super) seq: u64,
    pub(super) packet: Packet<P>,
}

impl<P> InFlight<P> {
    fn key(&self) -> (Nanos, u64) {
        (self.deliver_at, self.seq)
    }
}

impl<P> PartialEq for InFlight<P> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<P> Eq for InFlight<P> {}
impl<P> PartialOrd for InFlight<P> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<P> Ord for InFlight<P> {
    // Reversed: BinaryHeap is a max-heap and the earliest delivery must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// Packets in flight, earliest `(deliver_at, seq)` first. Without jitter a link delivers in the
/// order it sends, so almost every packet joins the back of a FIFO; only one that would leave
/// before the FIFO's last (jitter, a shorter delay after a reconfiguration, a smaller delay
/// credit) goes to a heap. Taking the earlier head of the two gives exactly the order of one
/// heap, without its cost per packet at 10 Gbit/s (a sift through hundreds of packets in flight).
pub(super) struct InFlightQueue<P> {
    in_order: VecDeque<InFlight<P>>,
    out_of_order: BinaryHeap<InFlight<P>>,
    /// Wire segments in both (a packet carried whole counts each of its segments).
    segments: usize,
}

impl<P> Default for InFlightQueue<P> {
    fn default() -> Self {
        InFlightQueue { in_order: VecDeque::new(), out_of_order: BinaryHeap::new(), segments: 0 }
    }
}

impl<P> InFlightQueue<P> {
    /// Adds a packet; its `seq` must exceed every earlier one's.
    pub(super) fn push(&mut self, flight: InFlight<P>) {
        self.segments += flight.packet.segments as usize;
        if self.in_order.back().is_none_or(|last| last.deliver_at <= flight.deliver_at) {
            self.in_order.push_back(flight);
        } else {
            self.out_of_order.push(flight);
        }
    }

    /// When the next packet leaves.
    pub(super) fn next_delivery(&self) -> Option<Nanos> {
        match (self.in_order.front(), self.out_of_order.peek()) {
            (Some(a), Some(b)) => Some(a.deliver_at.min(b.deliver_at)),
            (a, b) => a.or(b).map(|f| f.deliver_at),
        }
    }

    /// Takes the next packet to leave.
    pub(super) fn pop(&mut self) -> Option<InFlight<P>> {
        let from_heap = match (self.in_order.front(), self.out_of_order.peek()) {
            (Some(a), Some(b)) => b.key() < a.key(),
            (None, Some(_)) => true,
            _ => false,
        };
        let flight = if from_heap { self.out_of_order.pop() } else { self.in_order.pop_front() }?;
        self.segments -= flight.packet.segments as usize;
        Some(flight)
    }

    /// Wire segments in flight.
    pub(super) fn len(&self) -> usize {
        self.segments
    }

    /// Whether none is in flight.
    pub(super) fn is_empty(&self) -> bool {
        self.in_order.is_empty() && self.out_of_order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Packet;

    fn flight(deliver_at: Nanos, seq: u64) -> InFlight<()> {
        let packet = Packet::new(100, Default::default(), seq as u16, ());
        InFlight { deliver_at, seq, packet }
    }

    #[test]
    fn leaves_in_the_order_of_one_heap() {
        // Times as jitter gives them: mostly rising, some earlier than the last, some equal.
        let times = [10, 20, 20, 15, 30, 5, 30, 31, 29, 29, 40, 40, 12, 50];
        let mut queue = InFlightQueue::default();
        let mut heap = BinaryHeap::new();
        for (seq, &t) in times.iter().enumerate() {
            queue.push(flight(t, seq as u64));
            heap.push(flight(t, seq as u64));
            if seq % 4 == 3 {
                // Interleave takes with arrivals, as a link does.
                assert_eq!(queue.next_delivery(), heap.peek().map(|f| f.deliver_at));
                assert_eq!(queue.pop().map(|f| f.key()), heap.pop().map(|f| f.key()));
            }
        }
        assert_eq!(queue.len(), heap.len());
        while let Some(expected) = heap.pop() {
            assert_eq!(queue.next_delivery(), Some(expected.deliver_at));
            assert_eq!(queue.pop().map(|f| f.key()), Some(expected.key()));
        }
        assert!(queue.is_empty() && queue.pop().is_none() && queue.next_delivery().is_none());
    }
}
