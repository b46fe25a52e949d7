//! Application pacing (docs/bulk.md, "Pacing"): a token bucket that lets a sender write at a
//! fixed rate in bits per second. Pure logic: time is an argument (a [`Duration`] since any
//! fixed origin), so the bucket is tested on a virtual clock; the I/O side sleeps with tokio
//! timers until [`Pacer::take`] says it may write.
//!
//! quinn's own pacer follows the congestion window (1.25 x cwnd per RTT) and TCP's follows the
//! kernel's; neither can hold a fixed rate, which 003's "limited" tests need. So the sending
//! application paces: the server for downloads (`GET /bytes?rate=`, the raw protocol's rate
//! field), the client for uploads.
//!
//! Tokens accrue at `rate / 8` bytes per second into a bucket of depth [`Pacer::burst`]. A
//! writer asks for up to `want` bytes: it gets every token available (at most `want`) as soon
//! as at least one quantum ([`Pacer::quantum`], or `want` if smaller) is there, else the time
//! to wait. The quantum is the rate's bytes in [`QUANTUM_TIME`] (at least [`MIN_QUANTUM`]), so
//! writers wake about every 5 ms whatever the rate; the bucket holds two quanta, so a late
//! timer (tokio's resolution is 1 ms) costs no rate, while a writer held up by flow control
//! never sends more than two quanta above the rate afterwards. Token accounting is in integer
//! units (1 byte = 8e9 units, a rate of r bit/s earns r units per nanosecond): no drift, however
//! long the transfer.

use std::time::Duration;

/// Lowest accepted rate, bit/s.
pub const MIN_RATE_BPS: u64 = 1_000;
/// Highest accepted rate, bit/s (100 Gbit/s).
pub const MAX_RATE_BPS: u64 = 100_000_000_000;
/// The time whose worth of bytes makes a quantum.
pub const QUANTUM_TIME: Duration = Duration::from_millis(5);
/// Smallest quantum, bytes (about one QUIC datagram's payload).
pub const MIN_QUANTUM: u64 = 1200;

/// Token units per byte: 8 bits x 1e9 ns.
const UNITS_PER_BYTE: u128 = 8_000_000_000;

/// Checks a rate in bit/s against [`MIN_RATE_BPS`]..=[`MAX_RATE_BPS`]; the error says why.
pub fn check_rate(rate_bps: u64) -> Result<u64, String> {
    if (MIN_RATE_BPS..=MAX_RATE_BPS).contains(&rate_bps) {
        Ok(rate_bps)
    } else {
        Err(format!("rate {rate_bps} bit/s is not from {MIN_RATE_BPS} to {MAX_RATE_BPS} bit/s"))
    }
}

/// A token bucket for one sender.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate_bps: u64,
    quantum: u64,
    burst: u64,
    /// Tokens, in units of 1/8e9 byte.
    credit: u128,
    /// Time of the last refill.
    last: Duration,
}

impl Pacer {
    /// A bucket for `rate_bps` (clamped to [`MIN_RATE_BPS`]..=[`MAX_RATE_BPS`]; callers check
    /// user input with [`check_rate`] first), holding one quantum at `now` so that the first
    /// write goes at once.
    pub fn new(rate_bps: u64, now: Duration) -> Pacer {
        let rate_bps = rate_bps.clamp(MIN_RATE_BPS, MAX_RATE_BPS);
        let per_quantum = u128::from(rate_bps) * QUANTUM_TIME.as_nanos() / UNITS_PER_BYTE;
        // At most 100 Gbit/s x 5 ms = 62.5 MB: always fits.
        let quantum = u64::try_from(per_quantum).unwrap_or(u64::MAX).max(MIN_QUANTUM);
        let burst = quantum.saturating_mul(2);
        Pacer { rate_bps, quantum, burst, credit: u128::from(quantum) * UNITS_PER_BYTE, last: now }
    }

    /// The rate, bit/s.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// The least a writer waits for (unless it wants less), bytes.
    pub fn quantum(&self) -> u64 {
        self.quantum
    }

    /// Depth of the bucket, bytes.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    fn refill(&mut self, now: Duration) {
        // A clock that goes backwards (or two callers with different readings) earns nothing.
        if now > self.last {
            let earned = u128::from(self.rate_bps).saturating_mul((now - self.last).as_nanos());
            self.credit = self.credit.saturating_add(earned).min(u128::from(self.burst) * UNITS_PER_BYTE);
            self.last = now;
        }
    }

    /// Whole bytes available at `now`.
    pub fn available(&mut self, now: Duration) -> u64 {
        self.refill(now);
        u64::try_from(self.credit / UNITS_PER_BYTE).unwrap_or(u64::MAX)
    }

    /// Asks to write up to `want` bytes at `now`: `Ok(n)` with `1 <= n <= want` bytes that may
    /// be written now (taken from the bucket), or `Err(t)`, the time at which the next attempt
    /// will succeed. `want == 0` gives `Ok(0)`.
    pub fn take(&mut self, now: Duration, want: u64) -> Result<u64, Duration> {
        if want == 0 {
            return Ok(0);
        }
        let available = self.available(now);
        let need = want.min(self.quantum);
        if available >= need {
            let n = available.min(want);
            self.credit -= u128::from(n) * UNITS_PER_BYTE;
            return Ok(n);
        }
        let missing = u128::from(need) * UNITS_PER_BYTE - self.credit;
        // Round up: at `now + wait` the tokens are there.
        let wait_ns = missing.div_ceil(u128::from(self.rate_bps));
        Err(now.max(self.last) + Duration::from_nanos(u64::try_from(wait_ns).unwrap_or(u64::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn quantum_and_burst_follow_the_rate() {
        let p = Pacer::new(2_000_000, Duration::ZERO);
        assert_eq!(p.quantum(), 1250); // 2 Mbit/s x 5 ms
        assert_eq!(p.burst(), 2500);
        assert_eq!(Pacer::new(100_000, Duration::ZERO).quantum(), MIN_QUANTUM);
        assert_eq!(Pacer::new(1_000_000_000, Duration::ZERO).quantum(), 625_000);
        assert_eq!(Pacer::new(0, Duration::ZERO).rate_bps(), MIN_RATE_BPS);
        assert_eq!(Pacer::new(u64::MAX, Duration::ZERO).rate_bps(), MAX_RATE_BPS);
    }

    #[test]
    fn first_quantum_goes_at_once_then_waits_are_exact() {
        let mut p = Pacer::new(8_000_000, Duration::ZERO); // 1 byte per microsecond
        assert_eq!(p.quantum(), 5000);
        assert_eq!(p.take(Duration::ZERO, 64 * 1024), Ok(5000));
        // 5000 more bytes take exactly 5 ms.
        assert_eq!(p.take(Duration::ZERO, 64 * 1024), Err(ms(5)));
        assert_eq!(p.take(ms(4), 64 * 1024), Err(ms(5)));
        assert_eq!(p.take(ms(5), 64 * 1024), Ok(5000));
        // A late wake-up gets everything that accrued (up to the burst), so no rate is lost.
        assert_eq!(p.take(ms(12), 64 * 1024), Ok(7000));
        // Idle for long: the bucket caps at the burst.
        assert_eq!(p.take(ms(1000), 64 * 1024), Ok(10_000));
        // Small wants need only themselves.
        assert_eq!(p.take(ms(1000), 10), Err(ms(1000) + Duration::from_micros(10)));
        assert_eq!(p.take(ms(1000) + Duration::from_micros(10), 10), Ok(10));
        assert_eq!(p.take(ms(2000), 0), Ok(0));
    }

    /// A writer that always wants 64 KiB and wakes exactly when told (plus a fixed timer lag)
    /// sends at the rate: after T, between rate x T - quantum and rate x T + quantum.
    #[test]
    fn long_run_holds_the_rate() {
        for (rate, lag_us) in [(2_000_000u64, 0u64), (2_000_000, 1000), (50_000_000, 700), (3_333_333, 1500), (1_000, 0)] {
            let mut p = Pacer::new(rate, Duration::ZERO);
            let mut now = Duration::ZERO;
            let mut sent: u64 = 0;
            let end = Duration::from_secs(10);
            let mut writes = 0;
            while now < end {
                match p.take(now, 64 * 1024) {
                    Ok(n) => {
                        sent += n;
                        writes += 1;
                    }
                    Err(at) => now = at + Duration::from_micros(lag_us),
                }
            }
            let ideal = rate as f64 / 8.0 * now.as_secs_f64();
            let q = p.quantum() as f64;
            assert!((sent as f64) <= ideal + q + 1.0, "rate {rate} lag {lag_us}: sent {sent}, ideal {ideal}");
            assert!((sent as f64) >= ideal - q - 1.0, "rate {rate} lag {lag_us}: sent {sent}, ideal {ideal}");
            assert!(writes > 0);
        }
    }

    #[test]
    fn time_going_backwards_earns_nothing() {
        let mut p = Pacer::new(8_000_000, ms(100));
        assert_eq!(p.take(ms(100), 5000), Ok(5000));
        assert_eq!(p.take(ms(50), 5000), Err(ms(105)));
        assert_eq!(p.available(ms(50)), 0);
        assert_eq!(p.take(ms(105), 5000), Ok(5000));
    }

    #[test]
    fn rates_are_checked() {
        assert!(check_rate(0).is_err());
        assert!(check_rate(999).is_err());
        assert_eq!(check_rate(2_000_000), Ok(2_000_000));
        assert!(check_rate(MAX_RATE_BPS + 1).unwrap_err().contains("100000000000"));
    }
}
