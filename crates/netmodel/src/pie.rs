//! PIE (RFC 8033): a drop probability updated every `t_update` from the queue delay, applied at
//! enqueue.
//!
//! The queue delay is measured with timestamps (RFC 8033 §5.2's alternative to the departure
//! rate estimate, and Linux's default): it is the sojourn time of the last packet dequeued, and 0
//! once the queue has emptied. Time is an argument: the periodic update runs lazily, catching up
//! every `t_update` boundary that has passed before the next arrival or dequeue is decided, so
//! the result is what a timer would have computed.
//!
//! Left out: ECN marking, the optional derandomization of §5.1, and the departure-rate estimator.

use crate::config::MAX_PACKET_BYTES;
use crate::{Nanos, MS, SEC};

/// The update period, RFC 8033 §4.2 (T_UPDATE).
pub const PIE_T_UPDATE: Nanos = 15 * MS;
/// The RFC's alpha, in Hz: drop probability per second of delay above the target.
pub const PIE_ALPHA: f64 = 0.125;
/// The RFC's beta, in Hz: drop probability per second of delay growth since the last update.
pub const PIE_BETA: f64 = 1.25;
/// Updates caught up at most one by one; after a longer idle period the state is that of an
/// idle queue (the 2 % decay per update has long brought the probability to ~0).
const MAX_CATCH_UP_UPDATES: u32 = 10_000;

/// PIE state variables, named as in RFC 8033.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pie {
    drop_prob: f64,
    /// The latest queue delay estimate (current_qdelay).
    qdelay: Nanos,
    qdelay_old: Nanos,
    burst_allowance: Nanos,
    /// When the next periodic update is due (0: not started).
    next_update: Nanos,
}

/// The RFC's auto-tuning: the smaller the drop probability, the smaller its steps (§4.2).
fn auto_tuned(step: f64, drop_prob: f64) -> f64 {
    const SCALES: [(f64, f64); 6] = [(1e-6, 2048.0), (1e-5, 512.0), (1e-4, 128.0), (1e-3, 32.0), (1e-2, 8.0), (1e-1, 2.0)];
    SCALES.iter().find(|(below, _)| drop_prob < *below).map_or(step, |(_, divisor)| step / divisor)
}

fn seconds(t: Nanos) -> f64 {
    t as f64 / SEC as f64
}

impl Pie {
    /// Runs every periodic update due at or before `now` (`calculate_drop_prob`, RFC 8033 §4.2).
    pub(crate) fn catch_up(&mut self, now: Nanos, target: Nanos) {
        if self.next_update == 0 {
            self.next_update = now + PIE_T_UPDATE;
            return;
        }
        let mut updates = 0;
        while self.next_update <= now {
            if updates == MAX_CATCH_UP_UPDATES && self.qdelay == 0 {
                self.drop_prob = 0.0;
                self.qdelay_old = 0;
                self.burst_allowance = 0;
                let missed = (now - self.next_update) / PIE_T_UPDATE + 1;
                self.next_update += missed * PIE_T_UPDATE;
                break;
            }
            self.update(target);
            self.next_update += PIE_T_UPDATE;
            updates += 1;
        }
    }

    fn update(&mut self, target: Nanos) {
        let qdelay = seconds(self.qdelay);
        let step = PIE_ALPHA * (qdelay - seconds(target)) + PIE_BETA * (qdelay - seconds(self.qdelay_old));
        let mut step = auto_tuned(step, self.drop_prob);
        // Cap the increase once dropping is heavy, so a sudden burst does not overshoot (§4.2).
        if self.drop_prob >= 0.1 && step > 0.02 {
            step = 0.02;
        }
        self.drop_prob += step;
        // Decay when the queue has been empty for two updates (1 - 1/64 would do, the RFC says).
        if self.qdelay == 0 && self.qdelay_old == 0 {
            self.drop_prob *= 0.98;
        }
        self.drop_prob = self.drop_prob.clamp(0.0, 1.0);
        self.burst_allowance = self.burst_allowance.saturating_sub(PIE_T_UPDATE);
        self.qdelay_old = self.qdelay;
    }

    /// Decides an arrival at `now` (`enque` and `drop_early`, RFC 8033 §4.1/§5.1): true to drop.
    /// `queue_bytes` is the backlog before the arrival; `uniform` draws from [0, 1).
    pub(crate) fn drop_on_arrival(
        &mut self,
        now: Nanos,
        queue_bytes: u64,
        target: Nanos,
        max_burst: Nanos,
        uniform: impl FnOnce() -> f64,
    ) -> bool {
        self.catch_up(now, target);
        if self.drop_prob == 0.0 && self.qdelay < target / 2 && self.qdelay_old < target / 2 {
            self.burst_allowance = max_burst;
        }
        if self.burst_allowance > 0 {
            return false;
        }
        // Work-conserving safeguards: no early drop on a light or nearly empty queue.
        if (self.qdelay_old < target / 2 && self.drop_prob < 0.2) || queue_bytes <= 2 * MAX_PACKET_BYTES {
            return false;
        }
        uniform() < self.drop_prob
    }

    /// Records a dequeue at `now` of a packet that waited `sojourn`, leaving `packets_left` queued.
    pub(crate) fn on_dequeue(&mut self, now: Nanos, sojourn: Nanos, packets_left: u64, target: Nanos) {
        self.catch_up(now, target);
        self.qdelay = if packets_left == 0 { 0 } else { sojourn };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_tuning_scales_steps_by_the_probability_range() {
        assert_eq!(auto_tuned(1.0, 0.0), 1.0 / 2048.0);
        assert_eq!(auto_tuned(1.0, 5e-6), 1.0 / 512.0);
        assert_eq!(auto_tuned(1.0, 5e-3), 1.0 / 8.0);
        assert_eq!(auto_tuned(1.0, 0.05), 0.5);
        assert_eq!(auto_tuned(1.0, 0.5), 1.0);
    }

    #[test]
    fn one_update_follows_the_rfc_formula() {
        let mut pie = Pie { drop_prob: 0.5, qdelay: 35 * MS, qdelay_old: 30 * MS, ..Pie::default() };
        pie.update(15 * MS);
        // 0.125 * 0.020 + 1.25 * 0.005 = 0.00875, not auto-tuned above 0.1 and below the cap.
        assert!((pie.drop_prob - 0.50875).abs() < 1e-12, "{}", pie.drop_prob);
        let mut idle = Pie { drop_prob: 0.5, ..Pie::default() };
        idle.update(15 * MS);
        // Empty twice: the step -0.125*0.015 = -0.001875, then the 2 % decay.
        assert!((idle.drop_prob - (0.5 - 0.001875) * 0.98).abs() < 1e-12, "{}", idle.drop_prob);
    }

    #[test]
    fn a_long_idle_period_resets_without_looping_forever() {
        let mut pie = Pie { drop_prob: 0.3, next_update: PIE_T_UPDATE, ..Pie::default() };
        pie.catch_up(1_000_000 * SEC, 15 * MS);
        assert_eq!(pie.drop_prob, 0.0);
        assert!(pie.next_update > 1_000_000 * SEC && pie.next_update <= 1_000_000 * SEC + PIE_T_UPDATE);
    }
}
