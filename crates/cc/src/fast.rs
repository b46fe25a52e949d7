//! FAST TCP (Jin, Wei, Low 2004), as 003's NesQUIC compared it: a delay-based controller that
//! keeps about `alpha` packets queued at the bottleneck. Once per RTT
//! `w <- min(2w, (1 - gamma) w + gamma (baseRTT / RTT * w + alpha))`, with baseRTT the minimum
//! RTT and RTT the mean of the last round's samples. Slow start doubles the window per RTT until
//! the estimated queue (w (1 - baseRTT/RTT)) exceeds alpha; a loss halves the window.

use std::time::{Duration, Instant};

use crate::window::{initial_window, minimum_window, Recovery, Rounds};
use crate::{Ack, Algorithm, State};

/// Parameters of [`Fast`].
#[derive(Debug, Clone, PartialEq)]
pub struct FastConfig {
    /// Packets kept queued at equilibrium.
    pub alpha: f64,
    /// Smoothing of the update, in (0, 1].
    pub gamma: f64,
    /// Initial window in packets.
    pub initial_window_packets: u32,
    /// Initial window in bytes, instead of packets.
    pub initial_window_bytes: Option<u64>,
}

impl Default for FastConfig {
    fn default() -> Self {
        FastConfig { alpha: 20.0, gamma: 0.5, initial_window_packets: 10, initial_window_bytes: None }
    }
}

/// FAST.
#[derive(Debug, Clone)]
pub struct Fast {
    config: FastConfig,
    mtu: u64,
    initial_window: u64,
    window: f64,
    ssthresh: Option<u64>,
    slow_start: bool,
    base_rtt: Option<Duration>,
    /// Sum and count of this round's RTT samples.
    round_rtt_sum: Duration,
    round_rtt_count: u32,
    round_app_limited: bool,
    rounds: Rounds,
    recovery: Recovery,
}

impl Fast {
    /// A controller for a connection whose datagrams are `mtu` bytes.
    pub fn new(config: FastConfig, mtu: u16) -> Fast {
        let mtu = u64::from(mtu);
        let initial_window = initial_window(config.initial_window_bytes, config.initial_window_packets, mtu);
        Fast {
            config,
            mtu,
            initial_window,
            window: initial_window as f64,
            ssthresh: None,
            slow_start: true,
            base_rtt: None,
            round_rtt_sum: Duration::ZERO,
            round_rtt_count: 0,
            round_app_limited: false,
            rounds: Rounds::default(),
            recovery: Recovery::default(),
        }
    }

    /// The minimum RTT seen.
    pub fn base_rtt(&self) -> Option<Duration> {
        self.base_rtt
    }

    fn floor(&self) -> f64 {
        minimum_window(self.mtu) as f64
    }

    /// The once-per-RTT update at the end of a round.
    fn update(&mut self) {
        let (Some(base), Some(count)) = (self.base_rtt, std::num::NonZeroU32::new(self.round_rtt_count)) else {
            return;
        };
        let rtt = self.round_rtt_sum / count.get();
        let (base, rtt) = (base.as_secs_f64(), rtt.as_secs_f64().max(1e-9));
        let alpha_bytes = self.config.alpha * self.mtu as f64;
        let w = self.window;
        if self.slow_start {
            // Estimated packets queued: w (1 - baseRTT/RTT).
            if w * (1.0 - base / rtt) > alpha_bytes {
                self.slow_start = false;
                self.ssthresh = Some(w as u64);
            } else {
                return;
            }
        }
        let gamma = self.config.gamma;
        let target = (1.0 - gamma) * w + gamma * (base / rtt * w + alpha_bytes);
        self.window = target.min(2.0 * w).max(self.floor());
    }
}

impl Algorithm for Fast {
    fn on_sent(&mut self, _now: Instant, _bytes: u64, last_packet_number: u64) {
        self.rounds.on_sent(last_packet_number);
    }

    fn on_ack(&mut self, ack: &Ack) {
        self.base_rtt = Some(self.base_rtt.map_or(ack.rtt.latest, |b| b.min(ack.rtt.latest)));
        self.round_rtt_sum += ack.rtt.latest;
        self.round_rtt_count += 1;
        self.round_app_limited |= ack.app_limited;
        if self.recovery.on_ack(ack.sent) || ack.app_limited {
            return;
        }
        if self.slow_start {
            self.window += ack.bytes as f64;
        }
    }

    fn on_end_acks(&mut self, _now: Instant, _in_flight: u64, _app_limited: bool, largest_acked: Option<u64>) {
        if !self.rounds.on_end_acks(largest_acked) {
            return;
        }
        if !self.round_app_limited && !self.recovery.active() {
            self.update();
        }
        self.round_rtt_sum = Duration::ZERO;
        self.round_rtt_count = 0;
        self.round_app_limited = false;
    }

    fn on_congestion_event(&mut self, now: Instant, sent: Instant, persistent: bool, _lost_bytes: u64) {
        if !self.recovery.on_congestion_event(now, sent) {
            return;
        }
        self.slow_start = false;
        self.window = (self.window / 2.0).max(self.floor());
        self.ssthresh = Some(self.window as u64);
        if persistent {
            self.recovery.reset();
            self.window = self.floor();
        }
    }

    fn on_mtu_update(&mut self, mtu: u16) {
        self.mtu = u64::from(mtu);
        self.window = self.window.max(self.floor());
    }

    fn window(&self) -> u64 {
        self.window as u64
    }

    fn ssthresh(&self) -> Option<u64> {
        self.ssthresh
    }

    fn state(&self) -> State {
        State::of_window(self.recovery.active(), self.slow_start)
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }
}
