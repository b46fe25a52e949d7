//! A token-bucket shaper like Linux's `tbf`: tokens (bytes) accrue at `rate` up to `burst`; a
//! packet may start only when the bucket holds its size, and takes that many tokens. So up to
//! `burst` bytes leave back to back at the link's own (line) rate, then the shaper's rate holds.
//! The bucket starts full. Exact integer arithmetic: tokens are counted in bit-nanoseconds per
//! second (bytes x 8 x 10^9), so a rate of r bit/s adds exactly r units per nanosecond.
//!
//! Left out: tbf's peak-rate bucket (`peakrate`/`mtu`).

use crate::config::ShaperConfig;
use crate::Nanos;

const UNITS_PER_BYTE: i128 = 8 * 1_000_000_000;

/// The bucket's state.
#[derive(Debug, Clone, Default)]
pub(crate) struct TokenBucket {
    /// Tokens at `updated`, in bit-nanoseconds per second; negative only if a packet larger
    /// than announced was sent (see [`TokenBucket::consume`]).
    tokens: i128,
    updated: Nanos,
    started: bool,
}

impl TokenBucket {
    fn tokens_at(&self, shaper: &ShaperConfig, t: Nanos) -> i128 {
        if !self.started {
            return i128::from(shaper.burst) * UNITS_PER_BYTE;
        }
        let capacity = i128::from(shaper.burst) * UNITS_PER_BYTE;
        let refill = i128::from(t.saturating_sub(self.updated)) * i128::from(shaper.rate);
        (self.tokens + refill).min(capacity.max(self.tokens))
    }

    /// The earliest time at or after `t` when `size` bytes may start.
    pub(crate) fn ready_at(&self, shaper: &ShaperConfig, t: Nanos, size: u32) -> Nanos {
        let missing = i128::from(size) * UNITS_PER_BYTE - self.tokens_at(shaper, t);
        if missing <= 0 {
            return t;
        }
        let rate = i128::from(shaper.rate.max(1));
        let wait = (missing + rate - 1) / rate;
        t.saturating_add(u64::try_from(wait).unwrap_or(u64::MAX))
    }

    /// Takes `size` bytes of tokens at `t` (a start time from [`TokenBucket::ready_at`]; if the
    /// queue sent another packet than the one announced, the bucket may go into debt, which the
    /// next packets repay).
    pub(crate) fn consume(&mut self, shaper: &ShaperConfig, t: Nanos, size: u32) {
        self.tokens = self.tokens_at(shaper, t) - i128::from(size) * UNITS_PER_BYTE;
        self.updated = t;
        self.started = true;
    }

    /// Back to a full bucket (the shaper was changed).
    pub(crate) fn reset(&mut self) {
        *self = TokenBucket::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;

    #[test]
    fn a_full_bucket_sends_at_once_then_waits_for_tokens() {
        // 8 Mbit/s = 1 byte per microsecond; burst 3000 bytes.
        let shaper = ShaperConfig { rate: 8_000_000, burst: 3000, limit: 50_000 };
        let mut bucket = TokenBucket::default();
        assert_eq!(bucket.ready_at(&shaper, 0, 1500), 0);
        bucket.consume(&shaper, 0, 1500);
        assert_eq!(bucket.ready_at(&shaper, 0, 1500), 0);
        bucket.consume(&shaper, 0, 1500);
        assert_eq!(bucket.ready_at(&shaper, 0, 1500), 1500 * 1000);
        assert_eq!(bucket.ready_at(&shaper, 10 * MS, 1500), 10 * MS);
        // Idle for long: never more than the burst.
        bucket.consume(&shaper, 1500 * 1000, 1500);
        assert_eq!(bucket.ready_at(&shaper, 100 * MS, 3000), 100 * MS);
        bucket.consume(&shaper, 100 * MS, 3000);
        assert_eq!(bucket.ready_at(&shaper, 100 * MS, 1000), 100 * MS + 1000 * 1000);
    }
}
