//! protolab's QUIC congestion controllers (docs/congestion.md).
//!
//! Every controller is pure logic: time is an argument (`std::time::Instant`, which tests move
//! forward by hand), nothing reads a clock, touches a socket or sleeps. They implement
//! [`Algorithm`], a copy of quinn's `Controller` interface in which the RTT estimator (which
//! only quinn can construct) is replaced by a plain [`RttSample`]; [`adapter::Adapter`] plugs
//! an algorithm into quinn and records what the lab observes (state, bytes in flight, state
//! transitions).
//!
//! Controllers are looked up by name with parameters, `NAME[:key=value,...]`, in one registry
//! ([`registry`]): `cubic` (RFC 9438 with HyStart++ and N-connection emulation), `reno`
//! (NewReno), `fast` (FAST TCP), `sprout-ewma` (002 §6.2: the receiver's rate estimate fed
//! back to the sender, [`sprout_feedback`]), `sprout-ewma-sender` (the same estimate made by
//! the sender from its acknowledgements, [`sprout`]), `fixed` (a constant rate), quinn's own
//! `bbr` (and `quinn-cubic`, `quinn-newreno`) passed through, and profiles such as `gquic39`
//! (= `cubic:n=2,iw=32`) and `bquic` (000's BQUIC, which also carries transport knobs:
//! `registry::TransportDefaults`).
#![deny(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sprout_feedback::{FeedbackSlot, FeedbackStatus};

pub mod adapter;
pub mod cubic;
pub mod fast;
pub mod fixed;
pub mod hystart;
pub mod registry;
pub mod reno;
pub mod sprout;
pub mod sprout_feedback;
mod window;

pub use adapter::{Adapter, Factory, Snapshot, Transition};
pub use registry::{ControllerSpec, SpecError, REGISTRY};

/// quinn's smallest datagram (RFC 9000's 1200 bytes), the unit of windows before the path MTU
/// is known.
pub const BASE_DATAGRAM_SIZE: u64 = 1200;

/// The phase a controller is in, as samples and reports name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Exponential growth (RFC 9002 slow start).
    SlowStart,
    /// HyStart++'s conservative slow start (RFC 9406 §4.2).
    ConservativeSlowStart,
    /// Congestion avoidance (or, for rate and delay based controllers, their steady state).
    CongestionAvoidance,
    /// Recovery: from a congestion event until a packet sent after it is acknowledged.
    Recovery,
    /// The application did not fill the window at the last acknowledgements (the controller
    /// was not the limit).
    ApplicationLimited,
}

impl State {
    /// The state of a window-based controller: recovery first, then slow start or not.
    pub fn of_window(recovery: bool, slow_start: bool) -> State {
        if recovery {
            State::Recovery
        } else if slow_start {
            State::SlowStart
        } else {
            State::CongestionAvoidance
        }
    }

    /// Every state, in the order reports list them.
    pub const ALL: [State; 5] =
        [State::SlowStart, State::ConservativeSlowStart, State::CongestionAvoidance, State::Recovery, State::ApplicationLimited];

    /// The name in samples and in the store (`slow_start`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            State::SlowStart => "slow_start",
            State::ConservativeSlowStart => "conservative_slow_start",
            State::CongestionAvoidance => "congestion_avoidance",
            State::Recovery => "recovery",
            State::ApplicationLimited => "application_limited",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// RTT information at an acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttSample {
    /// This packet's RTT: acknowledgement time minus send time (including the peer's ACK
    /// delay; quinn's estimator does not expose its latest sample).
    pub latest: Duration,
    /// The smoothed RTT (RFC 9002).
    pub smoothed: Duration,
    /// The minimum RTT seen on the path.
    pub min: Duration,
}

/// One acknowledged packet.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    /// When the acknowledgement arrived.
    pub now: Instant,
    /// When the packet was sent.
    pub sent: Instant,
    /// Its size in bytes.
    pub bytes: u64,
    /// Whether the sender was application-limited before this acknowledgement.
    pub app_limited: bool,
    /// RTT estimates at this acknowledgement.
    pub rtt: RttSample,
}

/// A congestion controller without I/O: quinn's `Controller` with plain RTT values.
///
/// Windows are in bytes. The `mtu` is quinn's current maximum datagram size, the controller's
/// segment size.
pub trait Algorithm: Send + Sync + fmt::Debug + CloneAlgorithm {
    /// Packets were sent: `bytes` in total, the last with packet number `last_packet_number`.
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        let _ = (now, bytes, last_packet_number);
    }

    /// One packet was acknowledged.
    fn on_ack(&mut self, ack: &Ack);

    /// A batch of acknowledgements (all with the same `now`) is complete.
    fn on_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool, largest_acked: Option<u64>) {
        let _ = (now, in_flight, app_limited, largest_acked);
    }

    /// Packets sent at or before `sent` were declared lost (or ECN-marked).
    fn on_congestion_event(&mut self, now: Instant, sent: Instant, persistent: bool, lost_bytes: u64);

    /// The path's maximum datagram size changed.
    fn on_mtu_update(&mut self, mtu: u16);

    /// Bytes that may be in flight.
    fn window(&self) -> u64;

    /// The slow-start threshold in bytes, once set.
    fn ssthresh(&self) -> Option<u64> {
        None
    }

    /// The phase the controller is in (application-limited is decided by the adapter).
    fn state(&self) -> State;

    /// The initial window in bytes.
    fn initial_window(&self) -> u64;

    /// The slot through which the connection hands the peer's feedback to this controller
    /// (Sprout-EWMA with receiver feedback); `None` for controllers that take none.
    fn feedback_slot(&self) -> Option<Arc<FeedbackSlot>> {
        None
    }

    /// What the controller has made of the peer's feedback, for samples.
    fn feedback_status(&self) -> Option<FeedbackStatus> {
        None
    }
}

/// A boxed copy of an algorithm; every `Clone` algorithm has it.
pub trait CloneAlgorithm {
    /// A copy of the controller.
    fn clone_box(&self) -> Box<dyn Algorithm>;
}

impl<T: Algorithm + Clone + 'static> CloneAlgorithm for T {
    fn clone_box(&self) -> Box<dyn Algorithm> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn Algorithm> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}
