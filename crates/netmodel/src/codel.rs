//! CoDel (RFC 8289) dequeue logic, independent of the queue it runs on.

use crate::config::MAX_PACKET_BYTES;
use crate::Nanos;

/// What CoDel needs from the queue it controls.
pub(crate) trait CodelQueue {
    type Item;
    /// Removes the head; returns it with its sojourn time and the bytes left queued behind it.
    fn pop(&mut self, now: Nanos) -> Option<(Self::Item, Nanos, u64)>;
    /// Drops a packet CoDel decided to drop.
    fn drop_item(&mut self, item: Self::Item, now: Nanos);
}

/// CoDel state variables, named as in RFC 8289.
#[derive(Debug, Clone, Default)]
pub(crate) struct Codel {
    first_above_time: Nanos,
    drop_next: Nanos,
    count: u32,
    last_count: u32,
    dropping: bool,
}

fn control_law(t: Nanos, interval: Nanos, count: u32) -> Nanos {
    t + (interval as f64 / f64::from(count.max(1)).sqrt()) as Nanos
}

impl Codel {
    fn do_dequeue<Q: CodelQueue>(&mut self, queue: &mut Q, now: Nanos, target: Nanos, interval: Nanos) -> (Option<Q::Item>, bool) {
        let Some((item, sojourn, bytes_left)) = queue.pop(now) else {
            self.first_above_time = 0;
            return (None, false);
        };
        let mut ok_to_drop = false;
        if sojourn < target || bytes_left <= MAX_PACKET_BYTES {
            self.first_above_time = 0;
        } else if self.first_above_time == 0 {
            self.first_above_time = now + interval;
        } else if now >= self.first_above_time {
            ok_to_drop = true;
        }
        (Some(item), ok_to_drop)
    }

    /// Dequeues the next packet to transmit at `now`, dropping as CoDel decides.
    pub(crate) fn dequeue<Q: CodelQueue>(&mut self, queue: &mut Q, now: Nanos, target: Nanos, interval: Nanos) -> Option<Q::Item> {
        let (mut item, mut ok_to_drop) = self.do_dequeue(queue, now, target, interval);
        if item.is_none() {
            self.dropping = false;
            return None;
        }
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next {
                if let Some(dropped) = item.take() {
                    queue.drop_item(dropped, now);
                }
                self.count += 1;
                (item, ok_to_drop) = self.do_dequeue(queue, now, target, interval);
                if !ok_to_drop {
                    self.dropping = false;
                } else {
                    self.drop_next = control_law(self.drop_next, interval, self.count);
                }
            }
        } else if ok_to_drop {
            if let Some(dropped) = item.take() {
                queue.drop_item(dropped, now);
            }
            (item, _) = self.do_dequeue(queue, now, target, interval);
            self.dropping = true;
            let delta = self.count.saturating_sub(self.last_count);
            self.count = if delta > 1 && now.saturating_sub(self.drop_next) < 16 * interval { delta } else { 1 };
            self.drop_next = control_law(now, interval, self.count);
            self.last_count = self.count;
        }
        item
    }
}
