//! NewReno (RFC 9002 §7) with emulation of N connections: the window grows by N segments per
//! window acknowledged and shrinks to beta_N = (N - 1 + 1/2) / N of itself at a congestion
//! event (N Reno flows, one of which saw the loss).

use std::time::Instant;

use crate::window::{initial_window, minimum_window, Recovery};
use crate::{Ack, Algorithm, State};

/// Reno's decrease factor for one connection.
pub const BETA: f64 = 0.5;

/// Parameters of [`Reno`].
#[derive(Debug, Clone, PartialEq)]
pub struct RenoConfig {
    /// Connections emulated.
    pub connections: u32,
    /// Initial window in packets of the connection's first datagram size.
    pub initial_window_packets: u32,
    /// Initial window in bytes, instead of packets.
    pub initial_window_bytes: Option<u64>,
}

impl Default for RenoConfig {
    fn default() -> Self {
        RenoConfig { connections: 1, initial_window_packets: 10, initial_window_bytes: None }
    }
}

impl RenoConfig {
    /// beta_N.
    pub fn beta_n(&self) -> f64 {
        let n = f64::from(self.connections.max(1));
        (n - 1.0 + BETA) / n
    }
}

/// NewReno.
#[derive(Debug, Clone)]
pub struct Reno {
    config: RenoConfig,
    mtu: u64,
    initial_window: u64,
    window: u64,
    ssthresh: Option<u64>,
    /// Bytes acknowledged in congestion avoidance not yet turned into window growth.
    acked: u64,
    recovery: Recovery,
}

impl Reno {
    /// A controller for a connection whose datagrams are `mtu` bytes.
    pub fn new(config: RenoConfig, mtu: u16) -> Reno {
        let mtu = u64::from(mtu);
        let initial_window = initial_window(config.initial_window_bytes, config.initial_window_packets, mtu);
        Reno { config, mtu, initial_window, window: initial_window, ssthresh: None, acked: 0, recovery: Recovery::default() }
    }

    fn in_slow_start(&self) -> bool {
        self.ssthresh.is_none_or(|s| self.window < s)
    }
}

impl Algorithm for Reno {
    fn on_ack(&mut self, ack: &Ack) {
        if self.recovery.on_ack(ack.sent) || ack.app_limited {
            return;
        }
        if self.in_slow_start() {
            self.window += ack.bytes;
            return;
        }
        // N segments per window of acknowledged bytes.
        self.acked += ack.bytes * u64::from(self.config.connections.max(1));
        while self.acked >= self.window {
            self.acked -= self.window;
            self.window += self.mtu;
        }
    }

    fn on_congestion_event(&mut self, now: Instant, sent: Instant, persistent: bool, _lost_bytes: u64) {
        if !self.recovery.on_congestion_event(now, sent) {
            return;
        }
        let floor = minimum_window(self.mtu);
        let reduced = ((self.window as f64 * self.config.beta_n()) as u64).max(floor);
        self.ssthresh = Some(reduced);
        self.window = reduced;
        self.acked = 0;
        if persistent {
            self.recovery.reset();
            self.window = floor;
        }
    }

    fn on_mtu_update(&mut self, mtu: u16) {
        self.mtu = u64::from(mtu);
        self.window = self.window.max(minimum_window(self.mtu));
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn ssthresh(&self) -> Option<u64> {
        self.ssthresh
    }

    fn state(&self) -> State {
        State::of_window(self.recovery.active(), self.in_slow_start())
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }
}
