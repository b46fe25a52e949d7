//! I/O-free network model for protolab.
//!
//! Time is an argument everywhere (nanoseconds on an arbitrary monotonic axis): the model never
//! reads a clock, never sleeps and never touches a socket, so every behaviour can be tested
//! deterministically on a virtual clock, and the real-time driver (`protolab-emu`) stays thin.
//!
//! * [`Link`]: one direction of a link — loss at arrival, a queue (drop-tail, drop-head, CoDel,
//!   PIE, FQ-CoDel), an optional token-bucket shaper, a transmitter (fixed rate, Mahimahi trace,
//!   WiFi aggregation, or unlimited), propagation delay and jitter.
//! * [`Network`]: hosts on two sides of a dumbbell, access links, 1..N bottleneck paths, and the
//!   path selection (ECMP by flow hash, pins, round robin).
//!
//! All randomness comes from per-link ChaCha streams derived from one seed.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod codel;
mod config;
mod fq_codel;
mod link;
mod loss;
mod network;
mod packet;
mod pie;
mod shaper;
mod trace;
mod wifi;

pub use config::{
    ConfigError, JitterConfig, JitterDistribution, LinkConfig, LossConfig, QueueConfig, QueueKind,
    QueueLimit, Rate, ShaperConfig, MAX_FQ_FLOWS,
};
pub use link::{DropCause, DropCounts, Event, EventKind, EventLog, Link, LinkCounters, SegmentShape};
pub use network::{
    Delivered, HostId, HostSpec, LinkId, Network, NetworkError, PathId, PathSelection, PathSpec, Side, Transit,
    TopologySpec,
};
pub use packet::{parse_ipv4, FlowKey, Packet, PacketError, Segmented};
pub use trace::{DeliveryTrace, TraceError, TRACE_OPPORTUNITY_BYTES};
pub use wifi::{WifiConfig, MPDU_OVERHEAD_BYTES};

/// Nanoseconds on the model's time axis.
pub type Nanos = u64;

/// One millisecond in [`Nanos`].
pub const MS: Nanos = 1_000_000;
/// One microsecond in [`Nanos`].
pub const US: Nanos = 1_000;
/// One second in [`Nanos`].
pub const SEC: Nanos = 1_000_000_000;
