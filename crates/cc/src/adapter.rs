//! quinn's side: [`Adapter`] implements quinn's `Controller` over an [`Algorithm`] (or one of
//! quinn's own controllers, passed through) and keeps what the lab observes: the state, bytes
//! in flight, RTTs and the recent state transitions. [`Factory`] builds one per connection.
//!
//! `quinn::Connection::congestion_state()` returns a copy of the controller;
//! [`Adapter::downcast`] turns it back into an adapter to read its [`Snapshot`].

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn_proto::congestion::{BbrConfig, Controller, ControllerFactory, ControllerMetrics, CubicConfig as QuinnCubicConfig, NewRenoConfig};
use quinn_proto::RttEstimator;

use crate::cubic::Cubic;
use crate::fast::Fast;
use crate::fixed::Fixed;
use crate::registry::{Config, ControllerSpec, SpecError};
use crate::reno::Reno;
use crate::sprout::SproutEwma;
use crate::sprout_feedback::{FeedbackSlot, FeedbackStatus, SproutFeedback};
use crate::{Ack, Algorithm, RttSample, State};

/// Transitions kept for the samplers (they read every few milliseconds, so a few hundred
/// cover any realistic burst of changes).
pub const TRANSITIONS_KEPT: usize = 256;

/// quinn's pacer sends at 1.25 windows per smoothed RTT.
const QUINN_PACING_GAIN: f64 = 1.25;

/// A change of state, with the window at that moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transition {
    /// Sequence number (from 0) over the connection's life.
    pub seq: u64,
    /// When.
    pub at: Instant,
    /// The new state.
    pub state: State,
    /// The window, bytes.
    pub window: u64,
    /// ssthresh, bytes.
    pub ssthresh: Option<u64>,
    /// Bytes in flight at the last acknowledgement.
    pub bytes_in_flight: u64,
}

/// What a sampler reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The controller's name as configured (e.g. `gquic39`).
    pub controller: Arc<str>,
    /// The window, bytes.
    pub window: u64,
    /// ssthresh, bytes.
    pub ssthresh: Option<u64>,
    /// The state (`None` for quinn's controllers, which do not expose it, unless
    /// application-limited).
    pub state: Option<State>,
    /// Bytes in flight at the last acknowledgements.
    pub bytes_in_flight: u64,
    /// Smoothed RTT at the last acknowledgement.
    pub srtt: Option<Duration>,
    /// Minimum RTT at the last acknowledgement.
    pub min_rtt: Option<Duration>,
    /// The pacing rate, bit/s: quinn paces at 1.25 windows per smoothed RTT (BBR reports its own).
    pub pacing_rate_bps: Option<u64>,
    /// The last transitions (at most [`TRANSITIONS_KEPT`]), oldest first.
    pub transitions: Vec<Transition>,
    /// The peer's feedback, for a controller that takes it (`sprout-ewma`).
    pub feedback: Option<FeedbackStatus>,
}

enum Inner {
    Ours(Box<dyn Algorithm>),
    Quinn(Box<dyn Controller>),
}

impl Clone for Inner {
    fn clone(&self) -> Self {
        match self {
            Inner::Ours(a) => Inner::Ours(a.clone_box()),
            Inner::Quinn(c) => Inner::Quinn(c.clone_box()),
        }
    }
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Inner::Ours(a) => a.fmt(f),
            Inner::Quinn(_) => f.write_str("quinn controller"),
        }
    }
}

/// A controller as quinn sees it.
#[derive(Debug, Clone)]
pub struct Adapter {
    controller: Arc<str>,
    inner: Inner,
    in_flight: u64,
    app_limited: bool,
    srtt: Option<Duration>,
    min_rtt: Option<Duration>,
    state: Option<State>,
    transitions: VecDeque<Transition>,
    next_seq: u64,
}

impl Adapter {
    fn new(controller: Arc<str>, inner: Inner, now: Instant) -> Adapter {
        let mut adapter = Adapter {
            controller,
            inner,
            in_flight: 0,
            app_limited: false,
            srtt: None,
            min_rtt: None,
            state: None,
            transitions: VecDeque::new(),
            next_seq: 0,
        };
        adapter.observe(now);
        adapter
    }

    /// An adapter around one of our algorithms (tests and simulations).
    pub fn with_algorithm(controller: &str, algorithm: Box<dyn Algorithm>, now: Instant) -> Adapter {
        Adapter::new(Arc::from(controller), Inner::Ours(algorithm), now)
    }

    /// The adapter inside a controller that quinn handed back
    /// (`quinn::Connection::congestion_state()`); `None` for any other controller.
    pub fn downcast(controller: Box<dyn Controller>) -> Option<Box<Adapter>> {
        controller.into_any().downcast::<Adapter>().ok()
    }

    /// What the lab observes now.
    pub fn snapshot(&self) -> Snapshot {
        let window = self.window_now();
        Snapshot {
            controller: self.controller.clone(),
            window,
            ssthresh: self.ssthresh_now(),
            state: self.state,
            bytes_in_flight: self.in_flight,
            srtt: self.srtt,
            min_rtt: self.min_rtt,
            pacing_rate_bps: self.pacing_rate_bps(window),
            transitions: self.transitions.iter().copied().collect(),
            feedback: self.algorithm().and_then(|a| a.feedback_status()),
        }
    }

    /// The slot through which the connection hands the peer's feedback to the controller, for
    /// a controller that takes feedback. quinn's copies of the controller
    /// (`congestion_state()`) share it with the controller quinn runs.
    pub fn feedback_slot(&self) -> Option<Arc<FeedbackSlot>> {
        self.algorithm().and_then(|a| a.feedback_slot())
    }

    /// The algorithm, when it is one of ours.
    pub fn algorithm(&self) -> Option<&dyn Algorithm> {
        match &self.inner {
            Inner::Ours(a) => Some(a.as_ref()),
            Inner::Quinn(_) => None,
        }
    }

    fn window_now(&self) -> u64 {
        match &self.inner {
            Inner::Ours(a) => a.window(),
            Inner::Quinn(c) => c.window(),
        }
    }

    fn ssthresh_now(&self) -> Option<u64> {
        match &self.inner {
            Inner::Ours(a) => a.ssthresh(),
            Inner::Quinn(c) => c.metrics().ssthresh,
        }
    }

    fn pacing_rate_bps(&self, window: u64) -> Option<u64> {
        if let Inner::Quinn(c) = &self.inner {
            if let Some(rate) = c.metrics().pacing_rate {
                return Some(rate);
            }
        }
        let srtt = self.srtt?.as_secs_f64();
        (srtt > 0.0).then(|| (window as f64 * 8.0 * QUINN_PACING_GAIN / srtt) as u64)
    }

    fn effective_state(&self) -> Option<State> {
        let base = match &self.inner {
            Inner::Ours(a) => Some(a.state()),
            Inner::Quinn(_) => None,
        };
        if self.app_limited && base != Some(State::Recovery) {
            return Some(State::ApplicationLimited);
        }
        base
    }

    /// Records a transition when the state changed.
    fn observe(&mut self, now: Instant) {
        let state = self.effective_state();
        if state == self.state {
            return;
        }
        self.state = state;
        if let Some(state) = state {
            if self.transitions.len() == TRANSITIONS_KEPT {
                self.transitions.pop_front();
            }
            self.transitions.push_back(Transition {
                seq: self.next_seq,
                at: now,
                state,
                window: self.window_now(),
                ssthresh: self.ssthresh_now(),
                bytes_in_flight: self.in_flight,
            });
            self.next_seq += 1;
        }
    }
}

impl Controller for Adapter {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        match &mut self.inner {
            Inner::Ours(a) => a.on_sent(now, bytes, last_packet_number),
            Inner::Quinn(c) => c.on_sent(now, bytes, last_packet_number),
        }
    }

    fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool, rtt: &RttEstimator) {
        self.srtt = Some(rtt.get());
        self.min_rtt = Some(rtt.min());
        match &mut self.inner {
            Inner::Ours(a) => {
                let sample = RttSample { latest: now.saturating_duration_since(sent), smoothed: rtt.get(), min: rtt.min() };
                a.on_ack(&Ack { now, sent, bytes, app_limited, rtt: sample });
            }
            Inner::Quinn(c) => c.on_ack(now, sent, bytes, app_limited, rtt),
        }
        self.observe(now);
    }

    fn on_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool, largest_packet_num_acked: Option<u64>) {
        self.in_flight = in_flight;
        self.app_limited = app_limited;
        match &mut self.inner {
            Inner::Ours(a) => a.on_end_acks(now, in_flight, app_limited, largest_packet_num_acked),
            Inner::Quinn(c) => c.on_end_acks(now, in_flight, app_limited, largest_packet_num_acked),
        }
        self.observe(now);
    }

    fn on_congestion_event(&mut self, now: Instant, sent: Instant, is_persistent_congestion: bool, lost_bytes: u64) {
        match &mut self.inner {
            Inner::Ours(a) => a.on_congestion_event(now, sent, is_persistent_congestion, lost_bytes),
            Inner::Quinn(c) => c.on_congestion_event(now, sent, is_persistent_congestion, lost_bytes),
        }
        self.observe(now);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        match &mut self.inner {
            Inner::Ours(a) => a.on_mtu_update(new_mtu),
            Inner::Quinn(c) => c.on_mtu_update(new_mtu),
        }
    }

    fn window(&self) -> u64 {
        self.window_now()
    }

    fn metrics(&self) -> ControllerMetrics {
        let window = self.window_now();
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = window;
        metrics.ssthresh = self.ssthresh_now();
        metrics.pacing_rate = self.pacing_rate_bps(window);
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        match &self.inner {
            Inner::Ours(a) => a.initial_window(),
            Inner::Quinn(c) => c.initial_window(),
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Builds an [`Adapter`] per connection from a checked configuration ([`Factory::for_spec`]).
#[derive(Debug)]
pub struct Factory {
    controller: Arc<str>,
    config: Config,
    initial_window_bytes: Option<u64>,
}

impl Factory {
    /// The factory of a checked spec; `initial_window_bytes` overrides the initial window (an
    /// error when the spec sets `iw` too).
    pub fn for_spec(spec: &ControllerSpec, initial_window_bytes: Option<u64>) -> Result<Arc<Factory>, SpecError> {
        let config = spec.config_with_initial_window(initial_window_bytes)?;
        Ok(Arc::new(Factory { controller: Arc::from(spec.name), config, initial_window_bytes }))
    }

    /// The controller's name as configured.
    pub fn controller(&self) -> &str {
        &self.controller
    }

    /// A fresh adapter, as quinn's `build` makes one.
    pub fn adapter(&self, now: Instant, mtu: u16) -> Adapter {
        let inner = match &self.config {
            Config::Cubic(c) => Inner::Ours(Box::new(Cubic::new(c.clone(), mtu))),
            Config::Reno(c) => Inner::Ours(Box::new(Reno::new(c.clone(), mtu))),
            Config::Fast(c) => Inner::Ours(Box::new(Fast::new(c.clone(), mtu))),
            Config::Sprout(c) => Inner::Ours(Box::new(SproutEwma::new(c.clone(), now, mtu))),
            Config::SproutFeedback(c) => Inner::Ours(Box::new(SproutFeedback::new(c, mtu))),
            Config::Fixed(c) => Inner::Ours(Box::new(Fixed::new(c.clone(), now, mtu))),
            Config::QuinnBbr => {
                let mut c = BbrConfig::default();
                if let Some(w) = self.initial_window_bytes {
                    c.initial_window(w);
                }
                Inner::Quinn(Arc::new(c).build(now, mtu))
            }
            Config::QuinnCubic => {
                let mut c = QuinnCubicConfig::default();
                if let Some(w) = self.initial_window_bytes {
                    c.initial_window(w);
                }
                Inner::Quinn(Arc::new(c).build(now, mtu))
            }
            Config::QuinnNewReno => {
                let mut c = NewRenoConfig::default();
                if let Some(w) = self.initial_window_bytes {
                    c.initial_window(w);
                }
                Inner::Quinn(Arc::new(c).build(now, mtu))
            }
        };
        Adapter::new(self.controller.clone(), inner, now)
    }
}

impl ControllerFactory for Factory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(self.adapter(now, current_mtu))
    }
}
