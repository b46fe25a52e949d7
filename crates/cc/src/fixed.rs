//! A constant sending rate, whatever the network does (003's "limited" sender): the window is
//! the bytes in flight plus the tokens of a bucket filled at the rate. quinn paces from the
//! window and the smoothed RTT only, so the rate is shaped through the window: it opens by
//! exactly `rate x elapsed` bytes over time. Losses change nothing.

use std::time::{Duration, Instant};

use crate::window::minimum_window;
use crate::{Ack, Algorithm, State};

/// The bucket holds at most this much time's worth of tokens (or one RTT's, if longer): enough
/// to bridge the gaps between acknowledgements without losing rate, small enough that an idle
/// period does not turn into a long burst.
const BUCKET_TIME: Duration = Duration::from_millis(50);

/// Parameters of [`Fixed`].
#[derive(Debug, Clone, PartialEq)]
pub struct FixedConfig {
    /// The rate, bit/s (of QUIC packet bytes).
    pub rate_bps: u64,
    /// The first burst in bytes (default: one bucket).
    pub initial_window_bytes: Option<u64>,
}

/// The fixed-rate sender.
#[derive(Debug, Clone)]
pub struct Fixed {
    config: FixedConfig,
    mtu: u64,
    initial_window: u64,
    /// Bytes per second.
    rate: f64,
    tokens: f64,
    last: Instant,
    in_flight: u64,
    srtt: Option<Duration>,
}

impl Fixed {
    /// A sender at `config.rate_bps`, started at `now`.
    pub fn new(config: FixedConfig, now: Instant, mtu: u16) -> Fixed {
        let mtu = u64::from(mtu);
        let rate = config.rate_bps as f64 / 8.0;
        let bucket = (rate * BUCKET_TIME.as_secs_f64()).max(minimum_window(mtu) as f64);
        let initial_window = config.initial_window_bytes.unwrap_or(bucket as u64).max(minimum_window(mtu));
        Fixed { config, mtu, initial_window, rate, tokens: initial_window as f64, last: now, in_flight: 0, srtt: None }
    }

    fn bucket(&self) -> f64 {
        let time = self.srtt.map_or(BUCKET_TIME, |rtt| rtt.max(BUCKET_TIME));
        (self.rate * time.as_secs_f64()).max(minimum_window(self.mtu) as f64)
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + self.rate * elapsed).min(self.bucket().max(self.tokens));
    }

    /// The configured rate, bit/s.
    pub fn rate_bps(&self) -> u64 {
        self.config.rate_bps
    }
}

impl Algorithm for Fixed {
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        self.refill(now);
        self.tokens -= bytes as f64;
        self.in_flight += bytes;
    }

    fn on_ack(&mut self, ack: &Ack) {
        self.srtt = Some(ack.rtt.smoothed);
        self.refill(ack.now);
        self.in_flight = self.in_flight.saturating_sub(ack.bytes);
    }

    fn on_end_acks(&mut self, now: Instant, in_flight: u64, _app_limited: bool, _largest_acked: Option<u64>) {
        self.refill(now);
        self.in_flight = in_flight;
    }

    fn on_congestion_event(&mut self, now: Instant, _sent: Instant, _persistent: bool, lost_bytes: u64) {
        self.refill(now);
        self.in_flight = self.in_flight.saturating_sub(lost_bytes);
    }

    fn on_mtu_update(&mut self, mtu: u16) {
        self.mtu = u64::from(mtu);
    }

    fn window(&self) -> u64 {
        // Never 0: quinn's pacer divides by the window.
        (self.in_flight as f64 + self.tokens.max(0.0)).max(1.0) as u64
    }

    fn state(&self) -> State {
        State::CongestionAvoidance
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }
}
