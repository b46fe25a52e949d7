//! Sprout-EWMA estimated at the sender (`sprout-ewma-sender`; 002's own version, with the
//! receiver's feedback, is [`crate::sprout_feedback`], `sprout-ewma`), after Winstein et al.:
//! the sender measures the delivered rate over ticks of `tick` (20 ms), smooths it with an EWMA
//! of gain `gain` (1/8), and sets the window to what that rate delivers within the minimum RTT
//! plus a `target` queueing delay (100 ms).
//!
//! 002 states the window as rate x target delay. On its own that window can only shrink once
//! the minimum RTT exceeds the target (throughput = window / RTT <= rate), so the target is
//! the delay the window allows *on top of* the minimum RTT, as in Sprout itself, where the
//! forecast covers what can be delivered within the target after the packets in flight.
//! Losses do not reduce the window: the delivered rate already falls when the link does.

use std::time::{Duration, Instant};

use crate::window::{initial_window, minimum_window, Recovery};
use crate::{Ack, Algorithm, State};

/// Parameters of [`SproutEwma`].
#[derive(Debug, Clone, PartialEq)]
pub struct SproutConfig {
    /// EWMA gain.
    pub gain: f64,
    /// Queueing delay allowed on top of the minimum RTT.
    pub target: Duration,
    /// Length of a rate measurement.
    pub tick: Duration,
    /// Initial window in packets (until the first estimate).
    pub initial_window_packets: u32,
    /// Initial window in bytes, instead of packets.
    pub initial_window_bytes: Option<u64>,
}

impl Default for SproutConfig {
    fn default() -> Self {
        SproutConfig {
            gain: 0.125,
            target: Duration::from_millis(100),
            tick: Duration::from_millis(20),
            initial_window_packets: 10,
            initial_window_bytes: None,
        }
    }
}

/// Sprout-EWMA.
#[derive(Debug, Clone)]
pub struct SproutEwma {
    config: SproutConfig,
    mtu: u64,
    initial_window: u64,
    window: u64,
    tick_start: Instant,
    tick_bytes: u64,
    tick_app_limited: bool,
    /// The smoothed delivered rate, bytes per second.
    rate: Option<f64>,
    min_rtt: Option<Duration>,
    recovery: Recovery,
}

impl SproutEwma {
    /// A controller for a connection whose datagrams are `mtu` bytes, started at `now`.
    pub fn new(config: SproutConfig, now: Instant, mtu: u16) -> SproutEwma {
        let mtu = u64::from(mtu);
        let initial_window = initial_window(config.initial_window_bytes, config.initial_window_packets, mtu);
        SproutEwma {
            config,
            mtu,
            initial_window,
            window: initial_window,
            tick_start: now,
            tick_bytes: 0,
            tick_app_limited: false,
            rate: None,
            min_rtt: None,
            recovery: Recovery::default(),
        }
    }

    /// The smoothed delivered rate, bit/s.
    pub fn rate_bps(&self) -> Option<f64> {
        self.rate.map(|r| r * 8.0)
    }

    /// Closes the tick (or ticks: a long gap is one measurement over its whole length).
    fn close_tick(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.tick_start);
        if elapsed < self.config.tick {
            return;
        }
        if !self.tick_app_limited {
            let sample = self.tick_bytes as f64 / elapsed.as_secs_f64();
            let gain = self.config.gain;
            self.rate = Some(self.rate.map_or(sample, |r| (1.0 - gain) * r + gain * sample));
        }
        self.tick_start = now;
        self.tick_bytes = 0;
        self.tick_app_limited = false;
        if let (Some(rate), Some(min_rtt)) = (self.rate, self.min_rtt) {
            let horizon = (min_rtt + self.config.target).as_secs_f64();
            self.window = ((rate * horizon) as u64).max(minimum_window(self.mtu));
        }
    }
}

impl Algorithm for SproutEwma {
    fn on_ack(&mut self, ack: &Ack) {
        self.min_rtt = Some(ack.rtt.min);
        self.recovery.on_ack(ack.sent);
        self.close_tick(ack.now);
        self.tick_bytes += ack.bytes;
        self.tick_app_limited |= ack.app_limited;
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
        State::of_window(self.recovery.active(), self.rate.is_none())
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }
}
