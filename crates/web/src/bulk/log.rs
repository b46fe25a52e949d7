//! The interval log of a bulk transfer: bytes per fixed interval, as rows. Pure: time is an
//! argument (a [`Duration`] since the transfer's start), tested on a virtual clock.
//!
//! Intervals are half-open, `[k x interval, (k+1) x interval)`. Bytes counted at time `t`
//! belong to the interval containing `t`: an observation first closes every interval that ended
//! at or before `t` (with the count seen before it), then records its count. The last row
//! ([`IntervalLog::finish`]) is the partial interval up to the end of the transfer, so the rows
//! always add up to the total.

use std::time::Duration;

/// One interval (a row of the bulk result, `contract::bulk`).
pub use contract::bulk::IntervalRow;

/// Turns (time, cumulative bytes) observations into rows.
#[derive(Debug, Clone)]
pub struct IntervalLog {
    interval: Duration,
    start_unix_ns: u64,
    /// End of the interval now open.
    next: Duration,
    /// Latest time observed (observations never go back in time).
    now: Duration,
    /// Latest time the count grew.
    counted_at: Duration,
    /// Count at the latest observation.
    last_total: u64,
    /// Count at the end of the last row.
    row_total: u64,
    rows: Vec<IntervalRow>,
    finished: bool,
}

impl IntervalLog {
    /// A log of `interval` (at least 1 µs) starting at `start_unix_ns`.
    pub fn new(interval: Duration, start_unix_ns: u64) -> IntervalLog {
        let interval = interval.max(Duration::from_micros(1));
        IntervalLog { interval, start_unix_ns, next: interval, now: Duration::ZERO, counted_at: Duration::ZERO, last_total: 0, row_total: 0, rows: Vec::new(), finished: false }
    }

    /// When the interval now open ends (since the start).
    pub fn next_boundary(&self) -> Duration {
        self.next
    }

    /// Every row so far.
    pub fn rows(&self) -> &[IntervalRow] {
        &self.rows
    }

    /// Takes the rows out.
    pub fn into_rows(self) -> Vec<IntervalRow> {
        self.rows
    }

    fn row(&self, end: Duration, len: Duration, bytes: u64) -> IntervalRow {
        let secs = len.as_secs_f64();
        IntervalRow {
            t_ms: end.as_secs_f64() * 1e3,
            t_unix_ns: self.start_unix_ns.saturating_add(u64::try_from(end.as_nanos()).unwrap_or(u64::MAX)),
            bytes,
            total_bytes: self.row_total + bytes,
            rate_bps: if secs > 0.0 { bytes as f64 * 8.0 / secs } else { 0.0 },
        }
    }

    /// Closes every interval ending before `t` (`inclusive`: at or before).
    fn close_until(&mut self, t: Duration, inclusive: bool) {
        while self.next < t || (inclusive && self.next == t) {
            let bytes = self.last_total - self.row_total;
            let row = self.row(self.next, self.interval, bytes);
            self.row_total = self.last_total;
            self.rows.push(row);
            self.next += self.interval;
        }
    }

    /// `total` bytes have been counted by time `t`. Returns the rows this closed. Times before
    /// the latest observation count as the latest; a smaller total than before is ignored.
    pub fn observe(&mut self, t: Duration, total: u64) -> &[IntervalRow] {
        let before = self.rows.len();
        if !self.finished {
            self.now = self.now.max(t);
            self.close_until(self.now, true);
            if total > self.last_total {
                self.last_total = total;
                self.counted_at = self.now;
            }
        }
        &self.rows[before..]
    }

    /// The transfer ended at `t` with `total` bytes: closes the intervals before `t` and adds
    /// the last, partial one (if it is empty in time but not in bytes, its bytes go to the row
    /// before, so that no row has a zero length). Returns the rows this added or changed.
    /// Later calls do nothing.
    ///
    /// A `t` before the latest count moves to that count's time, so no byte is left out; a `t`
    /// before a boundary that an observation without new bytes (a tick) already closed adds no
    /// row: the last row may end a little after `t`.
    pub fn finish(&mut self, t: Duration, total: u64) -> &[IntervalRow] {
        let before = self.rows.len();
        if self.finished {
            return &self.rows[before..];
        }
        self.finished = true;
        let t = self.counted_at.max(t);
        self.close_until(t, false);
        let total = self.last_total.max(total);
        let bytes = total - self.row_total;
        let open_start = self.next - self.interval;
        let mut from = before;
        if t > open_start && (bytes > 0 || t > self.now) {
            let row = self.row(t, t - open_start, bytes);
            self.rows.push(row);
        } else if bytes > 0 {
            // t == open_start: the bytes counted at exactly t join the interval ending at t.
            match self.rows.pop() {
                Some(prev) => {
                    self.row_total -= prev.bytes;
                    let row = self.row(open_start, self.interval, prev.bytes + bytes);
                    self.rows.push(row);
                    from = before - 1;
                }
                None => {
                    let row = self.row(t, Duration::ZERO, bytes);
                    self.rows.push(row);
                }
            }
        }
        self.row_total = total;
        self.last_total = total;
        &self.rows[from..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn bytes(rows: &[IntervalRow]) -> Vec<u64> {
        rows.iter().map(|r| r.bytes).collect()
    }

    #[test]
    fn bytes_land_in_the_interval_they_were_counted_in() {
        let mut log = IntervalLog::new(ms(100), 1_000_000_000);
        assert!(log.observe(ms(10), 1000).is_empty());
        assert!(log.observe(ms(99), 3000).is_empty());
        // Counted exactly at 100 ms: the second interval; the first closes with 3000.
        let closed = log.observe(ms(100), 3500).to_vec();
        assert_eq!(bytes(&closed), vec![3000]);
        assert_eq!(closed[0].t_ms, 100.0);
        assert_eq!(closed[0].t_unix_ns, 1_100_000_000);
        assert_eq!(closed[0].rate_bps, 3000.0 * 8.0 / 0.1);
        // A gap: intervals with no observation are closed empty.
        let closed = log.observe(ms(450), 9000).to_vec();
        assert_eq!(bytes(&closed), vec![500, 0, 0]);
        assert_eq!(closed.iter().map(|r| r.t_ms).collect::<Vec<_>>(), vec![200.0, 300.0, 400.0]);
        assert_eq!(closed[2].total_bytes, 3500);
        assert_eq!(log.next_boundary(), ms(500));
        // The end: the partial interval [400, 475).
        let last = log.finish(ms(475), 9100).to_vec();
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].bytes, 5600);
        assert_eq!(last[0].total_bytes, 9100);
        assert_eq!(last[0].t_ms, 475.0);
        assert!((last[0].rate_bps - 5600.0 * 8.0 / 0.075).abs() < 1e-6);
        let rows = log.rows();
        assert_eq!(rows.iter().map(|r| r.bytes).sum::<u64>(), 9100);
        assert!(log.finish(ms(600), 10_000).is_empty());
        assert!(log.observe(ms(700), 10_000).is_empty());
    }

    #[test]
    fn ticks_without_bytes_close_intervals_with_zero() {
        let mut log = IntervalLog::new(ms(10), 0);
        log.observe(ms(5), 100);
        log.observe(ms(10), 100); // the tick at the boundary
        log.observe(ms(20), 100);
        log.observe(ms(25), 150);
        assert_eq!(bytes(log.rows()), vec![100, 0]);
        log.finish(ms(30), 150);
        assert_eq!(bytes(log.rows()), vec![100, 0, 50]);
        assert_eq!(log.rows()[2].t_ms, 30.0);
    }

    #[test]
    fn ending_exactly_on_a_boundary() {
        // The final bytes counted at exactly 200 ms join the interval ending there.
        let mut log = IntervalLog::new(ms(100), 0);
        log.observe(ms(50), 10);
        log.observe(ms(150), 30);
        log.observe(ms(200), 45);
        assert_eq!(bytes(log.rows()), vec![10, 20]);
        log.finish(ms(200), 45);
        assert_eq!(bytes(log.rows()), vec![10, 35]);
        assert_eq!(log.rows()[1].total_bytes, 45);
        assert_eq!(log.rows()[1].rate_bps, 35.0 * 8.0 / 0.1);
        // Finish at the boundary with nothing new: no zero-length row.
        let mut log = IntervalLog::new(ms(100), 0);
        log.observe(ms(50), 10);
        log.observe(ms(100), 10);
        log.finish(ms(100), 10);
        assert_eq!(bytes(log.rows()), vec![10]);
        // Ending at once.
        let mut log = IntervalLog::new(ms(100), 0);
        log.finish(Duration::ZERO, 7);
        assert_eq!(bytes(log.rows()), vec![7]);
        assert_eq!(log.rows()[0].rate_bps, 0.0);
        let mut log = IntervalLog::new(ms(100), 0);
        log.finish(Duration::ZERO, 0);
        assert!(log.rows().is_empty());
    }

    #[test]
    fn out_of_order_observations_do_not_break_the_sum() {
        let mut log = IntervalLog::new(ms(10), 0);
        log.observe(ms(15), 100);
        log.observe(ms(12), 90); // late and smaller: ignored
        log.observe(ms(31), 300);
        log.finish(ms(5), 310); // before the latest count: ends there
        let rows = log.rows();
        assert_eq!(rows.iter().map(|r| r.bytes).sum::<u64>(), 310);
        assert_eq!(rows.last().unwrap().total_bytes, 310);
        assert_eq!(rows.last().unwrap().t_ms, 31.0);
        for w in rows.windows(2) {
            assert!(w[0].t_ms < w[1].t_ms);
        }
    }

    /// The ticker closed the last boundary just after the end of a duration-mode transfer:
    /// no empty tail row after it.
    #[test]
    fn a_tick_after_the_end_adds_no_tail() {
        let mut log = IntervalLog::new(ms(100), 0);
        log.observe(ms(150), 10);
        log.observe(ms(199), 20);
        log.observe(ms(200) + Duration::from_micros(300), 20); // the tick
        assert_eq!(bytes(log.rows()), vec![0, 20]);
        assert!(log.finish(ms(200), 20).is_empty());
        assert_eq!(log.rows().len(), 2);
        // But a real end after the tick gets its (empty) row: the time waited is part of it.
        let mut log = IntervalLog::new(ms(100), 0);
        log.observe(ms(150), 10);
        log.observe(ms(200) + Duration::from_micros(300), 10);
        log.finish(ms(230), 10);
        assert_eq!(bytes(log.rows()), vec![0, 10, 0]);
        assert_eq!(log.rows()[2].t_ms, 230.0);
    }

    /// A virtual-clock transfer at a steady 1 MB/s, 1000 bytes counted every millisecond (at
    /// 0.5 ms, 1.5 ms, ...) for 1.05 s: every full interval carries 100 kB (8 Mbit/s), the last
    /// 50 kB in 50 ms.
    #[test]
    fn steady_rate_gives_steady_rows() {
        let mut log = IntervalLog::new(ms(100), 0);
        for k in 1..=1050u64 {
            log.observe(ms(k) - Duration::from_micros(500), k * 1000);
        }
        log.finish(ms(1050), 1_050_000);
        let rows = log.rows();
        assert_eq!(rows.len(), 11);
        for r in &rows[..10] {
            assert_eq!(r.bytes, 100_000);
            assert_eq!(r.rate_bps, 8_000_000.0);
        }
        assert_eq!(rows[10].bytes, 50_000);
        assert_eq!(rows[10].rate_bps, 8_000_000.0);
    }
}
