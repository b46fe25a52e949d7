//! How late packets leave the emulator compared with the model's schedule: a fixed-edge
//! histogram (1-2-5 steps from 1 µs to 100 ms), the mean and the maximum. Pure: the loop
//! passes each delivered packet's lateness in.

use contract::control::DeliveryLateness;
use netmodel::Nanos;

/// Upper edges (inclusive) of the buckets, ns; one more bucket holds everything above.
pub const EDGES_NS: [Nanos; 16] = [
    1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000,
    20_000_000, 50_000_000, 100_000_000,
];

/// Lateness of delivered packets: release time minus the model's delivery time.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Lateness {
    counts: [u64; EDGES_NS.len() + 1],
    sum_ns: u128,
    max_ns: Nanos,
    packets: u64,
}

impl Lateness {
    /// Counts one packet `late_ns` late.
    pub fn record(&mut self, late_ns: Nanos) {
        self.record_many(late_ns, 1);
    }

    /// Counts `packets` packets `late_ns` late each (the segments of a super-packet).
    pub fn record_many(&mut self, late_ns: Nanos, packets: u64) {
        let bucket = EDGES_NS.iter().position(|&edge| late_ns <= edge).unwrap_or(EDGES_NS.len());
        self.counts[bucket] += packets;
        self.sum_ns += u128::from(late_ns) * u128::from(packets);
        self.max_ns = self.max_ns.max(late_ns);
        self.packets += packets;
    }

    /// The smallest bucket edge at or below which at least `fraction` of the packets lie (the
    /// maximum when that is the last bucket); None without packets.
    pub fn quantile_at_most(&self, fraction: f64) -> Option<Nanos> {
        if self.packets == 0 {
            return None;
        }
        let wanted = (fraction * self.packets as f64).ceil() as u64;
        let mut seen = 0;
        for (i, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= wanted.max(1) {
                return Some(EDGES_NS.get(i).copied().unwrap_or(self.max_ns).min(self.max_ns));
            }
        }
        Some(self.max_ns)
    }

    /// The summary for the counters reply (docs/control.md).
    pub fn summary(&self) -> DeliveryLateness {
        DeliveryLateness {
            packets: self.packets,
            mean_ns: if self.packets > 0 { (self.sum_ns / u128::from(self.packets)) as u64 } else { 0 },
            max_ns: self.max_ns,
            p99_ns_at_most: self.quantile_at_most(0.99),
            p999_ns_at_most: self.quantile_at_most(0.999),
            buckets: self
                .counts
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| (EDGES_NS.get(i).copied(), c))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_has_no_quantiles() {
        let s = Lateness::default().summary();
        assert_eq!((s.packets, s.mean_ns, s.max_ns, s.p99_ns_at_most, s.buckets.len()), (0, 0, 0, None, 0));
    }

    #[test]
    fn buckets_mean_max_and_quantiles() {
        let mut l = Lateness::default();
        for _ in 0..990 {
            l.record(3_000); // bucket <= 5 µs
        }
        for _ in 0..9 {
            l.record(700_000); // <= 1 ms
        }
        l.record(21_000_000); // <= 50 ms
        let s = l.summary();
        assert_eq!(s.packets, 1000);
        assert_eq!(s.max_ns, 21_000_000);
        assert_eq!(s.mean_ns, (990 * 3_000 + 9 * 700_000 + 21_000_000) / 1000);
        assert_eq!(s.p99_ns_at_most, Some(5_000));
        assert_eq!(s.p999_ns_at_most, Some(1_000_000));
        assert_eq!(l.quantile_at_most(1.0), Some(21_000_000)); // the max, not the bucket's edge
        assert_eq!(s.buckets, vec![(Some(5_000), 990), (Some(1_000_000), 9), (Some(50_000_000), 1)]);
    }

    #[test]
    fn edges_are_inclusive_and_overflow_goes_last() {
        let mut l = Lateness::default();
        l.record(1_000);
        l.record(0);
        l.record(200_000_000);
        assert_eq!(l.summary().buckets, vec![(Some(1_000), 2), (None, 1)]);
        assert_eq!(l.quantile_at_most(0.5), Some(1_000));
    }
}
