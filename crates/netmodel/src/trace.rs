//! Mahimahi-format delivery traces.
//!
//! One line per delivery opportunity: a millisecond timestamp at which the link may deliver
//! [`TRACE_OPPORTUNITY_BYTES`] bytes. Timestamps are non-decreasing; repeated timestamps mean
//! several opportunities in the same millisecond. The trace loops with period = the last
//! timestamp, as Mahimahi's link shell does.

use crate::{Nanos, MS};

/// Bytes one delivery opportunity carries (Mahimahi's MTU-sized opportunity).
pub const TRACE_OPPORTUNITY_BYTES: u32 = 1500;

/// The latest timestamp a trace may hold, in ms (about 11.6 days; Mahimahi's traces last
/// minutes). The period in ns, times the laps of any run, then stays far inside a u64.
pub const MAX_TRACE_MS: u64 = 1_000_000_000;

/// Why a trace was refused; `line` is 1-based (0 for the trace as a whole).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct TraceError {
    /// Offending line (0: the whole trace).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// A parsed delivery trace, replayed from `start` (ns from the trace's beginning; 0 unless
/// [`DeliveryTrace::starting_at`] moved it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryTrace {
    times_ms: Vec<u64>,
    /// Where the replay starts, ns into the trace (less than the period).
    start: Nanos,
    /// The trace's index of the first opportunity at or after `start`.
    start_index: u64,
}

impl DeliveryTrace {
    /// Parses Mahimahi trace text. Blank lines are ignored.
    pub fn parse(text: &str) -> Result<Self, TraceError> {
        let mut times_ms = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let t: u64 = line.parse().map_err(|_| TraceError {
                line: i + 1,
                message: format!("{line:?} is not a millisecond timestamp"),
            })?;
            if t > MAX_TRACE_MS {
                return Err(TraceError { line: i + 1, message: format!("timestamp {t} is beyond {MAX_TRACE_MS} ms") });
            }
            if let Some(&prev) = times_ms.last() {
                if t < prev {
                    return Err(TraceError { line: i + 1, message: format!("timestamp {t} is before {prev}") });
                }
            }
            times_ms.push(t);
        }
        Self::from_times_ms(times_ms)
    }

    /// Builds a trace from timestamps in milliseconds.
    pub fn from_times_ms(times_ms: Vec<u64>) -> Result<Self, TraceError> {
        match times_ms.last() {
            None => Err(TraceError { line: 0, message: "the trace has no delivery opportunity".into() }),
            Some(0) => Err(TraceError { line: 0, message: "the last timestamp must be greater than 0".into() }),
            Some(&last) if last > MAX_TRACE_MS => {
                Err(TraceError { line: 0, message: format!("timestamp {last} is beyond {MAX_TRACE_MS} ms") })
            }
            Some(_) if times_ms.windows(2).any(|w| w[1] < w[0]) => {
                Err(TraceError { line: 0, message: "timestamps must not decrease".into() })
            }
            Some(_) => Ok(DeliveryTrace { times_ms, start: 0, start_index: 0 }),
        }
    }

    /// The same trace replayed from `offset` into it (wrapped by the period): opportunity 0 is
    /// then the first at or after `offset`, and times count from `offset`. Repetitions that
    /// start at different offsets see different parts of a long trace.
    pub fn starting_at(&self, offset: Nanos) -> DeliveryTrace {
        let mut shifted = DeliveryTrace { times_ms: self.times_ms.clone(), start: 0, start_index: 0 };
        shifted.start = offset % shifted.period();
        shifted.start_index = shifted.raw_first_index_at_or_after(shifted.start);
        shifted
    }

    /// Where the replay starts, ns into the trace.
    pub fn start(&self) -> Nanos {
        self.start
    }

    /// Loop period.
    pub fn period(&self) -> Nanos {
        self.times_ms.last().copied().unwrap_or(1) * MS
    }

    /// Opportunities per loop.
    pub fn opportunities_per_period(&self) -> usize {
        self.times_ms.len()
    }

    /// Mean capacity in bit/s.
    pub fn mean_rate_bps(&self) -> f64 {
        self.times_ms.len() as f64 * f64::from(TRACE_OPPORTUNITY_BYTES) * 8.0 / (self.period() as f64 / 1e9)
    }

    /// Time of opportunity number `index` (counting across loops), relative to the replay's start.
    pub fn opportunity_time(&self, index: u64) -> Nanos {
        // Opportunities from `start_index` on lie at or after `start`: no underflow.
        self.raw_opportunity_time(index + self.start_index) - self.start
    }

    /// Index of the first opportunity at or after `t` (relative to the replay's start).
    pub fn first_index_at_or_after(&self, t: Nanos) -> u64 {
        // At or after `start`, so at or after `start_index`.
        self.raw_first_index_at_or_after(t + self.start) - self.start_index
    }

    /// Time of opportunity `index` counted from the trace's beginning.
    fn raw_opportunity_time(&self, index: u64) -> Nanos {
        let len = self.times_ms.len() as u64;
        let (lap, pos) = (index / len, (index % len) as usize);
        lap * self.period() + self.times_ms[pos] * MS
    }

    /// Index of the first opportunity at or after `t`, both from the trace's beginning.
    fn raw_first_index_at_or_after(&self, t: Nanos) -> u64 {
        let len = self.times_ms.len() as u64;
        let lap = t / self.period();
        // The previous lap's last opportunity falls exactly on this lap's start, so look there too.
        for l in [lap.saturating_sub(1), lap, lap + 1] {
            let base = l * self.period();
            let pos = self.times_ms.partition_point(|&ms| base + ms * MS < t) as u64;
            if pos < len {
                return l * len + pos;
            }
        }
        (lap + 2) * len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let t = DeliveryTrace::parse("1\n1\n3\n\n5\n").unwrap();
        assert_eq!(t.period(), 5 * MS);
        assert_eq!(t.opportunities_per_period(), 4);
        assert_eq!(DeliveryTrace::parse("1\n3\n2\n").unwrap_err().line, 3);
        assert_eq!(DeliveryTrace::parse("1\nx\n").unwrap_err().line, 2);
        assert!(DeliveryTrace::parse("").is_err());
        assert!(DeliveryTrace::parse("0\n0\n").is_err());
    }

    #[test]
    fn refuses_timestamps_whose_period_overflows_nanoseconds() {
        // A timestamp past 2^64 ns (about 18e12 ms) overflowed the period in ns: a panic in debug
        // builds, a wrapped or zero period in release (found for the fuzz target `trace`).
        let huge = "18446744073709551\n";
        let e = DeliveryTrace::parse(huge).expect_err("a timestamp beyond the bound is refused");
        assert_eq!(e.line, 1);
        assert!(e.message.contains("18446744073709551"), "{e}");
        assert!(DeliveryTrace::from_times_ms(vec![1, MAX_TRACE_MS + 1]).is_err());
        let longest = DeliveryTrace::parse(&format!("1\n{MAX_TRACE_MS}\n")).expect("the bound itself is accepted");
        // Lap 500's last opportunity: the period in ns, times laps, stays far inside u64.
        let late = longest.opportunity_time(1_001);
        assert_eq!(late, 501 * longest.period());
        assert_eq!(longest.first_index_at_or_after(late), 1_001);
    }

    #[test]
    fn opportunities_loop() {
        let t = DeliveryTrace::parse("0\n2\n4\n").unwrap();
        let times: Vec<_> = (0..7).map(|i| t.opportunity_time(i) / MS).collect();
        assert_eq!(times, vec![0, 2, 4, 4, 6, 8, 8]);
        assert_eq!(t.first_index_at_or_after(3 * MS), 2);
        assert_eq!(t.first_index_at_or_after(4 * MS), 2);
        assert_eq!(t.first_index_at_or_after(4 * MS + 1), 4);
        assert_eq!(t.first_index_at_or_after(8 * MS), 5);
        assert!((t.mean_rate_bps() - 3.0 * 1500.0 * 8.0 / 0.004).abs() < 1e-6);
    }

    #[test]
    fn starting_at_an_offset_shifts_the_replay() {
        // Opportunities at 0, 2, 4 ms (period 4 ms; 4 and the next lap's 0 coincide).
        let t = DeliveryTrace::parse("0\n2\n4\n").unwrap().starting_at(3 * MS);
        assert_eq!(t.start(), 3 * MS);
        let times: Vec<_> = (0..5).map(|i| t.opportunity_time(i) / MS).collect();
        // From 3 ms on: 4, 4 (next lap's 0), 6, 8, 8 ms, i.e. 1, 1, 3, 5, 5 after the start.
        assert_eq!(times, vec![1, 1, 3, 5, 5]);
        assert_eq!(t.first_index_at_or_after(2 * MS), 2);
        assert_eq!(t.first_index_at_or_after(0), 0);
        assert_eq!(t.period(), 4 * MS);
        let wrapped = DeliveryTrace::parse("0\n2\n4\n").unwrap().starting_at(7 * MS);
        assert_eq!(wrapped, t, "offsets wrap by the period");
        assert_ne!(DeliveryTrace::parse("0\n2\n4\n").unwrap(), t, "a moved start is another rate (the link restarts)");
    }
}
