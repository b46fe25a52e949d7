//! FQ-CoDel (RFC 8290): packets hashed by 5-tuple into flow queues, served by deficit round
//! robin (a new-flows list before an old-flows list), CoDel on each flow queue, and on overflow a
//! drop from the head of the flow holding the most bytes.
//!
//! Left out: ECN marking, and Linux's batch drop (up to 64 packets at once from the fattest flow):
//! one packet at a time is dropped until the arrival fits.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use siphasher::sip::SipHasher13;

use crate::codel::{Codel, CodelQueue};
use crate::packet::FlowKey;
use crate::Nanos;

/// The second half of the flow hash's key ("fqcodel" in ASCII; the first half is the link's
/// index): any fixed value will do, the hash only has to spread flows and repeat across runs.
const FLOW_HASH_KEY: u64 = 0x0066_7163_6f64_656c;

/// A queued item: what the queue needs to know of a packet.
pub(crate) trait Queued {
    /// IP bytes.
    fn size(&self) -> u32;
    /// When it entered the queue.
    fn arrived(&self) -> Nanos;
    /// Its 5-tuple.
    fn flow(&self) -> &FlowKey;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Inactive,
    New,
    Old,
}

struct FlowQueue<T> {
    packets: VecDeque<T>,
    bytes: u64,
    deficit: i64,
    list: List,
    codel: Codel,
}

impl<T> Default for FlowQueue<T> {
    fn default() -> Self {
        FlowQueue { packets: VecDeque::new(), bytes: 0, deficit: 0, list: List::Inactive, codel: Codel::default() }
    }
}

/// The flow queues and their schedule. The link counts occupancy; this type only holds packets.
pub(crate) struct FqCodel<T> {
    flows: Vec<FlowQueue<T>>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    backlog_bytes: u64,
    hash_key: (u64, u64),
}

/// Parameters of one dequeue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FqParams {
    pub(crate) target: Nanos,
    pub(crate) interval: Nanos,
    pub(crate) quantum: u32,
}

struct FlowCodelView<'a, T> {
    flow: &'a mut FlowQueue<T>,
    backlog_bytes: &'a mut u64,
    dropped: &'a mut Vec<T>,
}

impl<T: Queued> CodelQueue for FlowCodelView<'_, T> {
    type Item = T;

    fn pop(&mut self, now: Nanos) -> Option<(T, Nanos, u64)> {
        let item = self.flow.packets.pop_front()?;
        let size = u64::from(item.size());
        self.flow.bytes -= size;
        *self.backlog_bytes -= size;
        let sojourn = now.saturating_sub(item.arrived());
        // As in Linux, CoDel's "is there more than one packet queued" test looks at the whole
        // backlog, not the flow's.
        Some((item, sojourn, *self.backlog_bytes))
    }

    fn drop_item(&mut self, item: T, _now: Nanos) {
        self.dropped.push(item);
    }
}

impl<T: Queued> FqCodel<T> {
    /// `flows` queues (at least 1); `key` keys the flow hash, so runs repeat.
    pub(crate) fn new(flows: u32, key: u64) -> Self {
        let flows = (0..flows.max(1)).map(|_| FlowQueue::default()).collect();
        FqCodel { flows, new_flows: VecDeque::new(), old_flows: VecDeque::new(), backlog_bytes: 0, hash_key: (key, FLOW_HASH_KEY) }
    }

    fn index(&self, flow: &FlowKey) -> usize {
        let mut hasher = SipHasher13::new_with_keys(self.hash_key.0, self.hash_key.1);
        flow.hash(&mut hasher);
        (hasher.finish() % self.flows.len() as u64) as usize
    }

    /// Queues `item` on its flow; a flow that was idle joins the new-flows list with one quantum.
    pub(crate) fn enqueue(&mut self, item: T, quantum: u32) {
        let index = self.index(item.flow());
        let flow = &mut self.flows[index];
        flow.bytes += u64::from(item.size());
        self.backlog_bytes += u64::from(item.size());
        flow.packets.push_back(item);
        if flow.list == List::Inactive {
            flow.list = List::New;
            flow.deficit = i64::from(quantum);
            self.new_flows.push_back(index);
        }
    }

    /// Removes the head packet of the flow with the most bytes queued (the overflow drop).
    pub(crate) fn drop_from_fattest(&mut self) -> Option<T> {
        let flow = self.flows.iter_mut().filter(|f| f.bytes > 0).max_by_key(|f| f.bytes)?;
        let item = flow.packets.pop_front()?;
        flow.bytes -= u64::from(item.size());
        self.backlog_bytes -= u64::from(item.size());
        Some(item)
    }

    /// The earliest arrival among the queued packets: when the link could start sending.
    pub(crate) fn earliest_arrival(&self) -> Option<Nanos> {
        self.new_flows.iter().chain(&self.old_flows).filter_map(|&i| self.flows[i].packets.front()).map(Queued::arrived).min()
    }

    /// The size of the packet the schedule would pick next (before CoDel's decisions).
    pub(crate) fn next_size(&self) -> Option<u32> {
        let first_with = |list: &VecDeque<usize>| list.iter().find_map(|&i| self.flows[i].packets.front());
        first_with(&self.new_flows).or_else(|| first_with(&self.old_flows)).map(Queued::size)
    }

    /// Takes every queued packet out, oldest first (when the link changes discipline).
    pub(crate) fn drain_all(&mut self) -> Vec<T> {
        let mut all: Vec<T> = self.flows.iter_mut().flat_map(|f| f.packets.drain(..)).collect();
        all.sort_by_key(Queued::arrived);
        for flow in &mut self.flows {
            *flow = FlowQueue::default();
        }
        self.new_flows.clear();
        self.old_flows.clear();
        self.backlog_bytes = 0;
        all
    }

    fn list_mut(&mut self, new: bool) -> &mut VecDeque<usize> {
        if new {
            &mut self.new_flows
        } else {
            &mut self.old_flows
        }
    }

    /// The DRR schedule with CoDel per flow (RFC 8290 §4.2); CoDel's drops go to `dropped`.
    pub(crate) fn dequeue(&mut self, now: Nanos, params: FqParams, dropped: &mut Vec<T>) -> Option<T> {
        loop {
            let (index, from_new) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (i, true),
                (None, Some(&i)) => (i, false),
                (None, None) => return None,
            };
            let flow = &mut self.flows[index];
            if flow.deficit <= 0 {
                flow.deficit += i64::from(params.quantum);
                flow.list = List::Old;
                self.list_mut(from_new).pop_front();
                self.old_flows.push_back(index);
                continue;
            }
            let mut codel = std::mem::take(&mut flow.codel);
            let item = codel.dequeue(
                &mut FlowCodelView { flow, backlog_bytes: &mut self.backlog_bytes, dropped },
                now,
                params.target,
                params.interval,
            );
            let flow = &mut self.flows[index];
            flow.codel = codel;
            let Some(item) = item else {
                // An emptied new flow goes to the old list (so it cannot jump the queue by
                // going idle and back), unless there is no old flow to be fair to.
                self.list_mut(from_new).pop_front();
                let flow = &mut self.flows[index];
                if from_new && !self.old_flows.is_empty() {
                    flow.list = List::Old;
                    self.old_flows.push_back(index);
                } else {
                    flow.list = List::Inactive;
                }
                continue;
            };
            flow.deficit -= i64::from(item.size());
            return Some(item);
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    struct Item(u32, Nanos, FlowKey);
    impl Queued for Item {
        fn size(&self) -> u32 {
            self.0
        }
        fn arrived(&self) -> Nanos {
            self.1
        }
        fn flow(&self) -> &FlowKey {
            &self.2
        }
    }

    fn flow(port: u16) -> FlowKey {
        FlowKey { src: Ipv4Addr::new(10, 0, 0, 1), dst: Ipv4Addr::new(10, 0, 0, 2), sport: port, dport: 443, proto: 6 }
    }

    const PARAMS: FqParams = FqParams { target: 5_000_000, interval: 100_000_000, quantum: 1514 };

    #[test]
    fn a_new_flow_is_served_before_old_ones_and_quanta_alternate() {
        let mut fq = FqCodel::new(1024, 1);
        for _ in 0..4 {
            fq.enqueue(Item(1500, 0, flow(1)), 1514);
        }
        let mut dropped = Vec::new();
        assert_eq!(fq.dequeue(0, PARAMS, &mut dropped).map(|i| i.2.sport), Some(1));
        fq.enqueue(Item(100, 0, flow(2)), 1514);
        let order: Vec<u16> = std::iter::from_fn(|| fq.dequeue(0, PARAMS, &mut dropped)).map(|i| i.2.sport).collect();
        // Flow 1 spent its quantum on 1 packet of 1500 (deficit 14 > 0: one more), flow 2 is new.
        assert_eq!(order, vec![1, 2, 1, 1]);
        assert!(dropped.is_empty());
    }

    #[test]
    fn overflow_drops_from_the_fattest_flow() {
        let mut fq = FqCodel::new(1024, 1);
        for _ in 0..5 {
            fq.enqueue(Item(1500, 0, flow(1)), 1514);
        }
        fq.enqueue(Item(100, 0, flow(2)), 1514);
        let dropped = fq.drop_from_fattest().unwrap();
        assert_eq!((dropped.2.sport, fq.flows[fq.index(&flow(1))].packets.len()), (1, 4));
        assert_eq!(fq.backlog_bytes, 4 * 1500 + 100);
        assert_eq!(fq.drain_all().len(), 5);
        assert!(fq.drop_from_fattest().is_none());
    }
}
