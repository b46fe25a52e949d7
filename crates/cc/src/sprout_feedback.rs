//! Sprout-EWMA with receiver feedback, as 002 §6.2 describes it: the *receiver* estimates the
//! throughput from the arrival of the data, smooths it with an EWMA (gain 1/8) and sends it back
//! to the sender (002: in a congestion-control frame; here in a QUIC datagram, [`RateReport`]),
//! whose window is then set from the latest report. Three parts, all without I/O:
//!
//! - [`ReceiverEstimator`]: fed the bytes that arrived, closed every tick (20 ms), it yields a
//!   [`RateReport`] per measurement;
//! - [`RateReport`]: the feedback message, 15 bytes, versioned; decoding untrusted bytes never
//!   panics ([`RateReport::decode`]);
//! - [`SproutFeedback`]: the sender's controller. It reads the latest report from a
//!   [`FeedbackSlot`] it shares (an `Arc`) with the connection's feedback task, which writes the
//!   peer's reports into it, and sets
//!
//!   `window = rate x (min RTT + target)`, `target = min(target cap, min RTT)` (002: δ =
//!   min(100 ms, min RTT)).
//!
//! 002 states the window as rate x δ. On its own that window can only shrink once the minimum
//! RTT exceeds δ (throughput = window / RTT <= rate x δ / min RTT < rate), so — as in Sprout,
//! whose forecast covers what the link delivers within the target *after* the packets already in
//! flight — δ is the queueing delay allowed on top of the minimum RTT. With δ = min(100 ms, min
//! RTT) the window is at most twice the estimated bandwidth-delay product: the headroom that lets
//! the estimate grow (the receiver only measures what the sender sends).
//!
//! Before the first report the window is the initial window; losses do not reduce the window
//! (the measured rate falls when the link does). A tick with almost nothing received (less than
//! [`MEASURABLE_BYTES`]: acknowledgements and feedback only) is no measurement: the span grows
//! by another tick, up to [`MAX_SPAN_TICKS`] ticks, after which it is dropped as idle and the
//! estimate holds. Sprout itself learns from the sender whether the link was idle; this receiver
//! cannot tell an outage from a sender with nothing to send, so it keeps its estimate over both.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::window::{initial_window, minimum_window, Recovery};
use crate::{Ack, Algorithm, State};

/// A span with fewer bytes is no measurement: acknowledgement-only packets and feedback datagrams
/// are about 50 bytes, a data packet about 1 200-1 450.
pub const MEASURABLE_BYTES: u64 = 1000;

/// A span without [`MEASURABLE_BYTES`] after this many ticks is idle and dropped (100 ms at 20 ms
/// ticks: the smallest rate measured is 1 000 bytes per 100 ms, 80 kbit/s).
pub const MAX_SPAN_TICKS: u32 = 5;

/// The largest rate a report may carry, bytes per second (100 Gbit/s); more is malformed.
pub const MAX_REPORT_RATE: u64 = 12_500_000_000;

/// Parameters of the receiver's estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EstimatorConfig {
    /// EWMA gain (002: 1/8).
    pub gain: f64,
    /// Length of a measurement (20 ms).
    pub tick: Duration,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        EstimatorConfig { gain: 0.125, tick: Duration::from_millis(20) }
    }
}

/// The receiver's throughput estimate: bytes received per tick, smoothed by an EWMA.
#[derive(Debug, Clone)]
pub struct ReceiverEstimator {
    config: EstimatorConfig,
    span_start: Instant,
    span_bytes: u64,
    /// Smoothed rate, bytes per second.
    rate: Option<f64>,
    seq: u32,
}

impl ReceiverEstimator {
    /// An estimator whose first tick starts at `now`.
    pub fn new(config: EstimatorConfig, now: Instant) -> ReceiverEstimator {
        ReceiverEstimator { config, span_start: now, span_bytes: 0, rate: None, seq: 0 }
    }

    /// `bytes` arrived since the previous call; they count in the span open now.
    pub fn record(&mut self, bytes: u64) {
        self.span_bytes = self.span_bytes.saturating_add(bytes);
    }

    /// The tick ends at `now`: a report when the span since the last measurement holds a
    /// measurement (at least a tick long, at least [`MEASURABLE_BYTES`]).
    pub fn on_tick(&mut self, now: Instant) -> Option<RateReport> {
        let elapsed = now.saturating_duration_since(self.span_start);
        if elapsed < self.config.tick {
            return None;
        }
        if self.span_bytes < MEASURABLE_BYTES {
            if elapsed >= self.config.tick * MAX_SPAN_TICKS {
                self.span_start = now;
                self.span_bytes = 0;
            }
            return None;
        }
        let sample = self.span_bytes as f64 / elapsed.as_secs_f64();
        let gain = self.config.gain;
        let rate = self.rate.map_or(sample, |r| (1.0 - gain) * r + gain * sample);
        self.rate = Some(rate);
        self.span_start = now;
        self.span_bytes = 0;
        self.seq = self.seq.wrapping_add(1);
        Some(RateReport { seq: self.seq, rate_bytes_per_s: (rate.round() as u64).clamp(1, MAX_REPORT_RATE) })
    }

    /// The smoothed rate, bit/s.
    pub fn rate_bps(&self) -> Option<f64> {
        self.rate.map(|r| r * 8.0)
    }
}

/// Why feedback bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeedbackError {
    /// Not the length of a report of this version.
    #[error("Sprout-EWMA feedback: {len} bytes (a version-1 report has {REPORT_LEN})")]
    Length {
        /// The length received.
        len: usize,
    },
    /// Not a Sprout-EWMA report.
    #[error("Sprout-EWMA feedback: no \"SE\" tag")]
    Tag,
    /// A version this build does not read.
    #[error("Sprout-EWMA feedback: version {0} (this build reads version {REPORT_VERSION})")]
    Version(u8),
    /// A rate of zero or above [`MAX_REPORT_RATE`].
    #[error("Sprout-EWMA feedback: rate {0} bytes/s out of range (1..={MAX_REPORT_RATE})")]
    Rate(u64),
    /// Not newer than the report already held (reordered or repeated).
    #[error("Sprout-EWMA feedback: report {seq} is not newer than {held}")]
    Stale {
        /// The report's sequence number.
        seq: u32,
        /// The one held.
        held: u32,
    },
}

const REPORT_TAG: [u8; 2] = *b"SE";
/// The version of the report format.
pub const REPORT_VERSION: u8 = 1;
/// Bytes of an encoded report: tag (2), version (1), sequence number (4), rate (8), big-endian.
pub const REPORT_LEN: usize = 15;

/// One feedback message: the receiver's smoothed rate, numbered so that the sender keeps the
/// newest (datagrams may be reordered or lost; the newest report is all the sender needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateReport {
    /// Sequence number, from 1.
    pub seq: u32,
    /// The smoothed receiving rate, bytes per second.
    pub rate_bytes_per_s: u64,
}

impl RateReport {
    /// The report's bytes.
    pub fn encode(&self) -> [u8; REPORT_LEN] {
        let mut out = [0u8; REPORT_LEN];
        out[..2].copy_from_slice(&REPORT_TAG);
        out[2] = REPORT_VERSION;
        out[3..7].copy_from_slice(&self.seq.to_be_bytes());
        out[7..].copy_from_slice(&self.rate_bytes_per_s.to_be_bytes());
        out
    }

    /// A report from untrusted bytes.
    pub fn decode(bytes: &[u8]) -> Result<RateReport, FeedbackError> {
        if bytes.len() >= 3 && bytes[..2] == REPORT_TAG && bytes[2] != REPORT_VERSION {
            return Err(FeedbackError::Version(bytes[2]));
        }
        let exact: &[u8; REPORT_LEN] = bytes.try_into().map_err(|_| FeedbackError::Length { len: bytes.len() })?;
        if exact[..2] != REPORT_TAG {
            return Err(FeedbackError::Tag);
        }
        let mut seq = [0u8; 4];
        seq.copy_from_slice(&exact[3..7]);
        let mut rate = [0u8; 8];
        rate.copy_from_slice(&exact[7..]);
        let rate_bytes_per_s = u64::from_be_bytes(rate);
        if !(1..=MAX_REPORT_RATE).contains(&rate_bytes_per_s) {
            return Err(FeedbackError::Rate(rate_bytes_per_s));
        }
        Ok(RateReport { seq: u32::from_be_bytes(seq), rate_bytes_per_s })
    }
}

/// What a [`FeedbackSlot`] holds: the newest report and counts of what was offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotState {
    /// The newest accepted report.
    pub latest: Option<RateReport>,
    /// Reports accepted.
    pub accepted: u64,
    /// Messages refused (malformed or stale).
    pub refused: u64,
}

/// The channel from a connection's feedback task to its sender's controller: the task offers the
/// peer's messages, the controller reads the newest report. The controller creates it and quinn's
/// copies of the controller share it (`Arc`).
#[derive(Debug, Default)]
pub struct FeedbackSlot {
    state: Mutex<SlotState>,
}

impl FeedbackSlot {
    /// Decodes `bytes` and keeps the report if it is newer than the one held.
    pub fn offer(&self, bytes: &[u8]) -> Result<RateReport, FeedbackError> {
        // A poisoned lock only means another thread panicked while holding it; the counts and
        // the report are plain values, still consistent.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let report = RateReport::decode(bytes).and_then(|report| match state.latest {
            Some(held) if report.seq <= held.seq => Err(FeedbackError::Stale { seq: report.seq, held: held.seq }),
            _ => Ok(report),
        });
        match report {
            Ok(report) => {
                state.latest = Some(report);
                state.accepted += 1;
            }
            Err(_) => state.refused += 1,
        }
        report
    }

    /// What the slot holds now.
    pub fn state(&self) -> SlotState {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Parameters of [`SproutFeedback`] (and of the receiver's estimate its connection runs).
#[derive(Debug, Clone, PartialEq)]
pub struct SproutFeedbackConfig {
    /// The receiver's estimate.
    pub estimator: EstimatorConfig,
    /// The cap of the target delay: target = min(cap, min RTT) (002: 100 ms).
    pub target_cap: Duration,
    /// Initial window in packets (until the first report).
    pub initial_window_packets: u32,
    /// Initial window in bytes, instead of packets.
    pub initial_window_bytes: Option<u64>,
}

impl Default for SproutFeedbackConfig {
    fn default() -> Self {
        SproutFeedbackConfig {
            estimator: EstimatorConfig::default(),
            target_cap: Duration::from_millis(100),
            initial_window_packets: 10,
            initial_window_bytes: None,
        }
    }
}

/// What a sender's controller has made of the feedback, for samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedbackStatus {
    /// Reports the slot accepted.
    pub reports: u64,
    /// Messages the slot refused.
    pub refused: u64,
    /// The rate of the report the window was last set from, bit/s.
    pub rate_bps: Option<u64>,
}

/// Sprout-EWMA's sender: the window from the receiver's reports.
#[derive(Debug, Clone)]
pub struct SproutFeedback {
    target_cap: Duration,
    mtu: u64,
    initial_window: u64,
    window: u64,
    min_rtt: Option<Duration>,
    slot: Arc<FeedbackSlot>,
    /// The report the window was last set from, and the minimum RTT it was set at.
    applied: Option<(RateReport, Duration)>,
    recovery: Recovery,
}

impl SproutFeedback {
    /// A controller for a connection whose datagrams are `mtu` bytes, with a fresh slot.
    pub fn new(config: &SproutFeedbackConfig, mtu: u16) -> SproutFeedback {
        let mtu = u64::from(mtu);
        let initial_window = initial_window(config.initial_window_bytes, config.initial_window_packets, mtu);
        SproutFeedback {
            target_cap: config.target_cap,
            mtu,
            initial_window,
            window: initial_window,
            min_rtt: None,
            slot: Arc::new(FeedbackSlot::default()),
            applied: None,
            recovery: Recovery::default(),
        }
    }

    /// The window of a rate (bytes/s) at a minimum RTT: rate x (min RTT + min(cap, min RTT)).
    pub fn window_for(rate_bytes_per_s: u64, min_rtt: Duration, target_cap: Duration, mtu: u64) -> u64 {
        let horizon = (min_rtt + target_cap.min(min_rtt)).as_secs_f64();
        ((rate_bytes_per_s as f64 * horizon) as u64).max(minimum_window(mtu))
    }

    /// Applies the newest report, once the minimum RTT is known.
    fn refresh(&mut self) {
        let (Some(min_rtt), Some(report)) = (self.min_rtt, self.slot.state().latest) else { return };
        if self.applied == Some((report, min_rtt)) {
            return;
        }
        self.window = Self::window_for(report.rate_bytes_per_s, min_rtt, self.target_cap, self.mtu);
        self.applied = Some((report, min_rtt));
    }
}

impl Algorithm for SproutFeedback {
    fn on_sent(&mut self, _now: Instant, _bytes: u64, _last_packet_number: u64) {
        self.refresh();
    }

    fn on_ack(&mut self, ack: &Ack) {
        self.min_rtt = Some(ack.rtt.min);
        self.recovery.on_ack(ack.sent);
        self.refresh();
    }

    fn on_end_acks(&mut self, _now: Instant, _in_flight: u64, _app_limited: bool, _largest_acked: Option<u64>) {
        self.refresh();
    }

    fn on_congestion_event(&mut self, now: Instant, sent: Instant, persistent: bool, _lost_bytes: u64) {
        self.recovery.on_congestion_event(now, sent);
        if persistent {
            self.recovery.reset();
        }
    }

    fn on_mtu_update(&mut self, mtu: u16) {
        self.mtu = u64::from(mtu);
        self.window = self.window.max(minimum_window(self.mtu));
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn state(&self) -> State {
        State::of_window(self.recovery.active(), self.applied.is_none())
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }

    fn feedback_slot(&self) -> Option<Arc<FeedbackSlot>> {
        Some(self.slot.clone())
    }

    fn feedback_status(&self) -> Option<FeedbackStatus> {
        let state = self.slot.state();
        Some(FeedbackStatus {
            reports: state.accepted,
            refused: state.refused,
            rate_bps: self.applied.map(|(report, _)| report.rate_bytes_per_s.saturating_mul(8)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CloneAlgorithm, RttSample};

    #[test]
    fn a_report_round_trips_and_bad_bytes_are_refused() {
        let report = RateReport { seq: 7, rate_bytes_per_s: 1_250_000 };
        let bytes = report.encode();
        assert_eq!(bytes.len(), REPORT_LEN);
        assert_eq!(RateReport::decode(&bytes), Ok(report));
        for len in 0..bytes.len() {
            assert_eq!(RateReport::decode(&bytes[..len]), Err(FeedbackError::Length { len }), "{len} bytes");
        }
        let mut long = bytes.to_vec();
        long.push(0);
        assert_eq!(RateReport::decode(&long), Err(FeedbackError::Length { len: 16 }));
        let mut other = bytes;
        other[2] = 2;
        assert_eq!(RateReport::decode(&other), Err(FeedbackError::Version(2)));
        other = bytes;
        other[0] = b'X';
        assert_eq!(RateReport::decode(&other), Err(FeedbackError::Tag));
        let zero = RateReport { seq: 1, rate_bytes_per_s: 0 }.encode();
        assert_eq!(RateReport::decode(&zero), Err(FeedbackError::Rate(0)));
        let huge = RateReport { seq: 1, rate_bytes_per_s: u64::MAX }.encode();
        assert_eq!(RateReport::decode(&huge), Err(FeedbackError::Rate(u64::MAX)));
        // Every byte pattern of a pseudo-random walk decodes or is refused, never panics.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 20) as usize;
            let noise: Vec<u8> = (0..len).map(|i| (x >> (i % 8 * 8)) as u8).collect();
            let _ = RateReport::decode(&noise);
        }
    }

    #[test]
    fn the_slot_keeps_the_newest_report_and_counts_the_rest() {
        let slot = FeedbackSlot::default();
        assert!(slot.offer(&RateReport { seq: 2, rate_bytes_per_s: 100 }.encode()).is_ok());
        assert_eq!(slot.offer(&RateReport { seq: 1, rate_bytes_per_s: 999 }.encode()), Err(FeedbackError::Stale { seq: 1, held: 2 }));
        assert_eq!(slot.offer(&RateReport { seq: 2, rate_bytes_per_s: 999 }.encode()), Err(FeedbackError::Stale { seq: 2, held: 2 }));
        assert!(slot.offer(b"garbage").is_err());
        assert_eq!(slot.state(), SlotState { latest: Some(RateReport { seq: 2, rate_bytes_per_s: 100 }), accepted: 1, refused: 3 });
    }

    #[test]
    fn idle_and_ack_only_ticks_are_no_measurement() {
        let t0 = Instant::now();
        let tick = Duration::from_millis(20);
        let mut e = ReceiverEstimator::new(EstimatorConfig::default(), t0);
        e.record(50_000);
        assert_eq!(e.on_tick(t0 + tick / 2), None, "a tick not yet over");
        let first = e.on_tick(t0 + tick).expect("a measurement");
        assert_eq!(first, RateReport { seq: 1, rate_bytes_per_s: 2_500_000 });
        // Acknowledgements only (60 bytes a tick) for 100 ms: dropped as idle, the estimate holds.
        for k in 2..=6 {
            e.record(60);
            assert_eq!(e.on_tick(t0 + tick * k), None);
        }
        assert_eq!(e.rate_bps(), Some(20_000_000.0));
        // A slow link: one 1 200-byte packet every 48 ms is measured over the spans that hold one.
        let start = t0 + tick * 6;
        let mut reports = Vec::new();
        for k in 1..=60u32 {
            let now = start + tick * k;
            let packets_before = |t: Duration| t.as_millis() as u64 / 48;
            let arrived = packets_before(tick * k) - packets_before(tick * (k - 1));
            e.record(arrived * 1200);
            reports.extend(e.on_tick(now));
        }
        assert!(reports.len() >= 20, "{} measurements", reports.len());
        let rate = e.rate_bps().unwrap_or(0.0);
        // 1 200 bytes / 48 ms = 200 kbit/s; the estimate decays towards it from 20 Mbit/s.
        assert!(rate < 20_000_000.0 * 0.875f64.powi(20) + 400_000.0, "{rate}");
    }

    fn ack(now: Instant, min_rtt_ms: u64) -> Ack {
        let min = Duration::from_millis(min_rtt_ms);
        Ack { now, sent: now - min, bytes: 1200, app_limited: false, rtt: RttSample { latest: min, smoothed: min, min } }
    }

    #[test]
    fn the_window_follows_the_reports() {
        let t0 = Instant::now();
        let mut s = SproutFeedback::new(&SproutFeedbackConfig::default(), 1200);
        let slot = s.feedback_slot().expect("a slot");
        assert_eq!(s.window(), 12_000, "the initial window before any report");
        assert_eq!(s.state(), State::SlowStart);
        s.on_ack(&ack(t0, 50));
        assert_eq!(s.window(), 12_000, "no report yet");
        // 10 Mbit/s at 50 ms: target = min(100, 50) = 50 ms, window = 1.25 MB/s x 100 ms.
        slot.offer(&RateReport { seq: 1, rate_bytes_per_s: 1_250_000 }.encode()).unwrap();
        s.on_end_acks(t0, 0, false, None);
        assert_eq!(s.window(), 125_000);
        assert_eq!(s.state(), State::CongestionAvoidance);
        // Half the rate: half the window, at the next event (a send).
        slot.offer(&RateReport { seq: 2, rate_bytes_per_s: 625_000 }.encode()).unwrap();
        s.on_sent(t0, 1200, 1);
        assert_eq!(s.window(), 62_500);
        // A stale and a malformed message change nothing.
        assert!(slot.offer(&RateReport { seq: 1, rate_bytes_per_s: 9_000_000 }.encode()).is_err());
        assert!(slot.offer(&[0xff; 3]).is_err());
        s.on_sent(t0, 1200, 2);
        assert_eq!(s.window(), 62_500);
        // Losses do not cut the window.
        s.on_congestion_event(t0, t0, false, 12_000);
        assert_eq!((s.window(), s.state()), (62_500, State::Recovery));
        // At 300 ms the target is capped at 100 ms: 625 kB/s x 400 ms.
        s.on_ack(&ack(t0 + Duration::from_secs(1), 300));
        assert_eq!(s.window(), 250_000);
        // A tiny rate: two datagrams at least.
        slot.offer(&RateReport { seq: 3, rate_bytes_per_s: 1 }.encode()).unwrap();
        s.on_sent(t0, 1200, 3);
        assert_eq!(s.window(), 2400);
        let status = s.feedback_status().unwrap();
        assert_eq!(status, FeedbackStatus { reports: 3, refused: 2, rate_bps: Some(8) });
        // quinn's copies of the controller share the slot.
        let copy = s.clone_box();
        assert!(Arc::ptr_eq(&copy.feedback_slot().unwrap(), &slot));
    }

    /// The window of a sender that always has data, on a virtual clock: it paces its window over
    /// each minimum RTT across an unlimited link (half the RTT each way); the receiver's estimator
    /// ticks every millisecond of virtual time, its reports reach the sender half an RTT later.
    /// Returns the window at each millisecond.
    fn closed_loop_windows(config: &SproutFeedbackConfig, min_rtt_ms: u64, millis: u64) -> Vec<u64> {
        use std::collections::VecDeque;
        let t0 = Instant::now();
        let one_way = Duration::from_millis(min_rtt_ms / 2);
        let mut sender = SproutFeedback::new(config, 1200);
        let slot = sender.feedback_slot().expect("a slot");
        let mut receiver = ReceiverEstimator::new(config.estimator, t0);
        let mut data: VecDeque<(Instant, u64)> = VecDeque::new();
        let mut reports: VecDeque<(Instant, RateReport)> = VecDeque::new();
        let mut windows = Vec::new();
        for ms in 0..millis {
            let now = t0 + Duration::from_millis(ms);
            sender.on_ack(&ack(now, min_rtt_ms));
            while data.front().is_some_and(|(at, _)| *at <= now) {
                receiver.record(data.pop_front().map_or(0, |(_, bytes)| bytes));
            }
            reports.extend(receiver.on_tick(now).map(|report| (now + one_way, report)));
            while reports.front().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, report)) = reports.pop_front() {
                    slot.offer(&report.encode()).unwrap();
                }
            }
            sender.on_sent(now, 0, ms);
            data.push_back((now + one_way, sender.window() / min_rtt_ms));
            windows.push(sender.window());
        }
        windows
    }

    #[test]
    fn the_window_grows_at_most_by_the_horizon_over_the_min_rtt_per_round_trip() {
        // 002-fig6-4's divergence (docs/reproduce.md): the receiver only measures what the sender
        // sends, so a round trip's window is at most the last one's delivery rate x the horizon,
        // (min RTT + target) / min RTT times the last window: at 300 ms with 002's target
        // (min(100 ms, min RTT)) 1.33x, where slow start doubles. The EWMA's lag (gain 1/8 a
        // 20 ms tick) slows it further.
        let growth_per_round_trip = |target_ms: u64| {
            let config = SproutFeedbackConfig { target_cap: Duration::from_millis(target_ms), ..Default::default() };
            let windows = closed_loop_windows(&config, 300, 4600);
            // Ten round trips, past the first reports.
            (windows[4500] as f64 / windows[1500] as f64).powf(0.1)
        };
        let default = growth_per_round_trip(100);
        assert!((1.15..=400.0 / 300.0).contains(&default), "{default}");
        // With the target at the min RTT the horizon is two min RTTs: up to 2x a round trip.
        let min_rtt_target = growth_per_round_trip(300);
        assert!((1.5..=2.0).contains(&min_rtt_target), "{min_rtt_target}");
    }
}
