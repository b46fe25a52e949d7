//! CUBIC (RFC 9438) with tunable C and beta, emulation of N connections (Chromium's rule, as
//! gQUIC did), a chosen initial window, optional HyStart++ (RFC 9406) and fast convergence.
//!
//! Windows are kept in bytes; the cubic function works in segments of the current maximum
//! datagram size, as RFC 9438 defines C (segments per second cubed).

use std::time::{Duration, Instant};

use crate::hystart::{Change, HyStart, HystartConfig, Phase};
use crate::window::{initial_window, minimum_window, Recovery, Rounds};
use crate::{Ack, Algorithm, State};

/// Parameters of [`Cubic`].
#[derive(Debug, Clone, PartialEq)]
pub struct CubicConfig {
    /// C, the scaling constant of the cubic function (RFC 9438: 0.4). 0 is the limit C -> 0:
    /// the cubic function stays flat and only the Reno-friendly estimate grows the window.
    pub c: f64,
    /// quic-go's (and Chromium's) `cubeFactor` as a multiple of its default, which is 1/C: K =
    /// cbrt(cube_factor x (W_max - cwnd) / C) while the curve keeps growing with C. 1 is RFC
    /// 9438's K; 2 (004's "CubeFactor 2") doubles K^3, so the curve starts below the cut window
    /// and the Reno-friendly estimate leads for longer; 0 (004's Fig. 22) makes K = 0: the
    /// target is W_max at once, and each RTT closes most of the gap to it (RFC 9438's per-ACK
    /// step, at most 1.5x per RTT): back within a few RTTs instead of K seconds.
    pub cube_factor: f64,
    /// beta, the multiplicative decrease factor of one connection (RFC 9438: 0.7).
    pub beta: f64,
    /// Connections emulated: beta_N = (N - 1 + beta) / N and the Reno-friendly
    /// alpha_N = 3 N^2 (1 - beta_N) / (1 + beta_N) (Chromium's CubicBytes; gQUIC used N = 2).
    pub connections: u32,
    /// Initial window in packets of the connection's first datagram size.
    pub initial_window_packets: u32,
    /// Initial window in bytes, instead of packets (`--quic-initial-window`).
    pub initial_window_bytes: Option<u64>,
    /// HyStart++ constants; `None` = standard slow start until the first loss.
    pub hystart: Option<HystartConfig>,
    /// Fast convergence (RFC 9438 §4.7): release bandwidth when W_max shrinks.
    pub fast_convergence: bool,
}

impl Default for CubicConfig {
    fn default() -> Self {
        CubicConfig {
            c: 0.4,
            cube_factor: 1.0,
            beta: 0.7,
            connections: 1,
            initial_window_packets: 10,
            initial_window_bytes: None,
            hystart: Some(HystartConfig::default()),
            fast_convergence: true,
        }
    }
}

impl CubicConfig {
    /// beta_N: the window after a congestion event is beta_N times the window before.
    pub fn beta_n(&self) -> f64 {
        let n = f64::from(self.connections.max(1));
        (n - 1.0 + self.beta) / n
    }

    /// alpha_N: the Reno-friendly additive increase, segments per RTT.
    pub fn alpha_n(&self) -> f64 {
        let n = f64::from(self.connections.max(1));
        let beta = self.beta_n();
        3.0 * n * n * (1.0 - beta) / (1.0 + beta)
    }
}

/// A congestion-avoidance epoch: what RFC 9438 computes at a congestion event (or when slow
/// start ends without one).
#[derive(Debug, Clone, Copy)]
struct Epoch {
    start: Instant,
    /// W_max in bytes.
    w_max: f64,
    /// The window at the start of the epoch, bytes.
    cwnd_epoch: f64,
    /// K in seconds; `None` when C = 0 (the curve is flat).
    k: Option<f64>,
    /// W_est, the Reno-friendly estimate, bytes.
    w_est: f64,
}

/// RFC 9438 CUBIC.
#[derive(Debug, Clone)]
pub struct Cubic {
    config: CubicConfig,
    mtu: u64,
    initial_window: u64,
    window: u64,
    ssthresh: Option<u64>,
    /// W_max of the last congestion event, bytes (kept across a persistent congestion).
    w_max: Option<f64>,
    epoch: Option<Epoch>,
    recovery: Recovery,
    rounds: Rounds,
    hystart: Option<HyStart>,
    srtt: Duration,
}

impl Cubic {
    /// A controller for a connection whose datagrams are `mtu` bytes.
    pub fn new(config: CubicConfig, mtu: u16) -> Cubic {
        let mtu = u64::from(mtu);
        let initial_window = initial_window(config.initial_window_bytes, config.initial_window_packets, mtu);
        let hystart = config.hystart.map(HyStart::new);
        Cubic {
            config,
            mtu,
            initial_window,
            window: initial_window,
            ssthresh: None,
            w_max: None,
            epoch: None,
            recovery: Recovery::default(),
            rounds: Rounds::default(),
            hystart,
            srtt: Duration::from_millis(333),
        }
    }

    /// The parameters.
    pub fn config(&self) -> &CubicConfig {
        &self.config
    }

    /// W_max of the current epoch, bytes.
    pub fn w_max(&self) -> Option<f64> {
        self.epoch.map(|e| e.w_max)
    }

    /// K of the current epoch, seconds (`None` without an epoch, or when C = 0).
    pub fn k(&self) -> Option<f64> {
        self.epoch.and_then(|e| e.k)
    }

    /// W_cubic(t) in bytes, `t` after the start of the current epoch.
    pub fn w_cubic(&self, t: Duration) -> Option<f64> {
        self.epoch.map(|e| self.cubic_at(&e, t.as_secs_f64()))
    }

    /// HyStart++'s phase, if it is on.
    pub fn hystart_phase(&self) -> Option<Phase> {
        self.hystart.as_ref().map(HyStart::phase)
    }

    fn cubic_at(&self, epoch: &Epoch, t: f64) -> f64 {
        match epoch.k {
            Some(k) => self.config.c * (t - k).powi(3) * self.mtu as f64 + epoch.w_max,
            None => epoch.cwnd_epoch,
        }
    }

    fn in_slow_start(&self) -> bool {
        self.ssthresh.is_none_or(|s| self.window < s)
    }

    fn new_epoch(&self, now: Instant, w_max: f64) -> Epoch {
        let cwnd = self.window as f64;
        let k = (self.config.c > 0.0)
            .then(|| (self.config.cube_factor * (w_max - cwnd).max(0.0) / self.mtu as f64 / self.config.c).cbrt());
        Epoch { start: now, w_max, cwnd_epoch: cwnd, k, w_est: cwnd }
    }

    /// Slow start is over without a congestion event (HyStart++, or ssthresh reached after a
    /// persistent congestion): RFC 9438 §4.10 starts the epoch at the current window.
    fn enter_congestion_avoidance(&mut self, now: Instant) {
        self.ssthresh = Some(self.window);
        if let Some(h) = &mut self.hystart {
            h.finish();
        }
        let w_max = self.w_max.unwrap_or(0.0).max(self.window as f64);
        self.epoch = Some(self.new_epoch(now, w_max));
    }

    fn congestion_avoidance(&mut self, ack: &Ack) {
        let epoch = match self.epoch {
            Some(e) => e,
            None => {
                let e = self.new_epoch(ack.now, self.window as f64);
                self.epoch = Some(e);
                e
            }
        };
        let cwnd = self.window as f64;
        let t = ack.now.saturating_duration_since(epoch.start).as_secs_f64();
        let rtt = self.srtt.as_secs_f64();
        // W_est grows by alpha segments per window acknowledged; alpha becomes 1 once W_est
        // reaches the window before the last reduction (RFC 9438 §4.3).
        let alpha = if epoch.w_est >= epoch.w_max { 1.0 } else { self.config.alpha_n() };
        let w_est = epoch.w_est + alpha * self.mtu as f64 * ack.bytes as f64 / cwnd;
        let new_cwnd = if self.cubic_at(&epoch, t) < w_est {
            // Reno-friendly region.
            w_est.max(cwnd)
        } else {
            let target = self.cubic_at(&epoch, t + rtt).clamp(cwnd, 1.5 * cwnd);
            cwnd + (target - cwnd) / cwnd * ack.bytes as f64
        };
        self.epoch = Some(Epoch { w_est, ..epoch });
        self.window = (new_cwnd.round() as u64).max(minimum_window(self.mtu));
    }
}

impl Algorithm for Cubic {
    fn on_sent(&mut self, _now: Instant, _bytes: u64, last_packet_number: u64) {
        self.rounds.on_sent(last_packet_number);
    }

    fn on_ack(&mut self, ack: &Ack) {
        self.srtt = ack.rtt.smoothed;
        if self.recovery.on_ack(ack.sent) {
            return;
        }
        if self.in_slow_start() {
            let mut divisor = 1;
            if let Some(h) = &mut self.hystart {
                // Entering or leaving CSS only changes the growth divisor.
                let _ = h.on_rtt_sample(ack.rtt.latest);
                divisor = h.growth_divisor();
            }
            if ack.app_limited {
                return;
            }
            self.window += ack.bytes / divisor;
            if self.ssthresh.is_some_and(|s| self.window >= s) {
                self.enter_congestion_avoidance(ack.now);
            }
        } else if !ack.app_limited {
            self.congestion_avoidance(ack);
        }
    }

    fn on_end_acks(&mut self, now: Instant, _in_flight: u64, _app_limited: bool, largest_acked: Option<u64>) {
        if !self.rounds.on_end_acks(largest_acked) {
            return;
        }
        let slow_start = self.in_slow_start();
        if let Some(h) = &mut self.hystart {
            if slow_start && h.on_round_start() == Some(Change::EnterCongestionAvoidance) {
                self.enter_congestion_avoidance(now);
            }
        }
    }

    fn on_congestion_event(&mut self, now: Instant, sent: Instant, persistent: bool, _lost_bytes: u64) {
        if !self.recovery.on_congestion_event(now, sent) {
            return;
        }
        if let Some(h) = &mut self.hystart {
            h.finish();
        }
        let cwnd = self.window as f64;
        let beta = self.config.beta_n();
        // Fast convergence: a W_max lower than the last one means a new flow is competing.
        let w_max = match self.w_max {
            Some(last) if self.config.fast_convergence && cwnd < last => cwnd * (1.0 + beta) / 2.0,
            _ => cwnd,
        };
        self.w_max = Some(w_max);
        let floor = minimum_window(self.mtu);
        let reduced = ((cwnd * beta) as u64).max(floor);
        self.ssthresh = Some(reduced);
        self.window = reduced;
        self.epoch = Some(self.new_epoch(now, w_max));
        if persistent {
            // RFC 9002 §7.6.2: the window collapses to the minimum; slow start up to ssthresh.
            self.recovery.reset();
            self.window = floor;
            self.epoch = None;
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
        match State::of_window(self.recovery.active(), self.in_slow_start()) {
            State::SlowStart if matches!(self.hystart_phase(), Some(Phase::Css { .. })) => State::ConservativeSlowStart,
            state => state,
        }
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }
}
