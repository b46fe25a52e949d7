//! The JSON result of `protolab-net rpm` (schema `protolab.rpm`, docs/rpm.md).

use serde::Serialize;

use super::algorithm::{Confidence, Parameters, Responsiveness};

/// Schema name of the result.
pub const SCHEMA: &str = "protolab.rpm";
/// Its version.
pub const SCHEMA_VERSION: u32 = 1;
/// The draft text the defaults follow.
pub const DRAFT: &str = "draft-ietf-ippm-responsiveness-08";

/// One probe.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// Completion, seconds since the stage began.
    pub t_s: f64,
    /// `foreign` (a new connection) or `self` (on a load-generating connection; HTTP/1.1: the
    /// TCP stack's smoothed RTT of that connection, `http_ms` then is that RTT).
    pub kind: &'static str,
    /// Foreign: TCP handshake, or the QUIC handshake, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<f64>,
    /// Foreign over TCP: TLS handshake, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ms: Option<f64>,
    /// The GET of the small object, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_ms: Option<f64>,
    /// Why the probe failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One interval of a direction.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    /// Index from 0.
    pub index: usize,
    /// End, seconds since the direction began.
    pub t_s: f64,
    /// Bytes moved in it by the load-generating connections.
    pub bytes: u64,
    /// bytes / ID, bit/s.
    pub goodput_bps: f64,
    /// The draft's moving-average aggregate goodput, bit/s.
    pub moving_goodput_bps: f64,
    /// Load-generating connections open at its end.
    pub connections: usize,
    /// Probes completed in it.
    pub probes: usize,
    /// The probe pairs per second allowed (MPS, lowered by PTC).
    pub probe_rate: f64,
    /// `ramping`, `saturated` or `done`.
    pub state: &'static str,
    /// Responsiveness over the last MAD intervals (from saturation on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub responsiveness: Option<Responsiveness>,
}

/// Confidence in the two results of a direction.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Confidences {
    /// Of the capacity.
    pub capacity: Confidence,
    /// Of the RPM.
    pub rpm: Confidence,
}

/// One direction's result.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionResult {
    /// Capacity: the last moving-average goodput, bit/s (HTTP payload).
    pub capacity_bps: Option<f64>,
    /// Responsiveness, round trips per minute.
    pub rpm: Option<f64>,
    /// 60000 / RPM: the round-trip time the RPM stands for, ms.
    pub loaded_latency_ms: Option<f64>,
    /// The trimmed means and partial RPMs behind `rpm`.
    pub responsiveness: Option<Responsiveness>,
    /// Draft §"Confidence of Test-Results".
    pub confidence: Confidences,
    /// Load-generating connections at the end.
    pub load_connections: usize,
    /// Payload bytes the load-generating connections moved.
    pub bytes: u64,
    /// The direction's duration, s.
    pub duration_s: f64,
    /// Interval at which goodput saturated.
    pub saturated_at: Option<usize>,
    /// Every interval.
    pub intervals: Vec<Interval>,
    /// Every probe.
    pub probes: Vec<Probe>,
    /// Errors of load-generating connections (the draft aborts; this client records them and
    /// lets the next interval add a connection).
    pub errors: Vec<String>,
}

/// Idle latency: probes on an unloaded path.
#[derive(Debug, Clone, Serialize)]
pub struct IdleResult {
    /// 60000 / idle RPM, ms.
    pub latency_ms: Option<f64>,
    /// The draft's formula over the idle probes.
    pub rpm: Option<f64>,
    /// Median of the self probes' HTTP times (LibreSpeed's "ping"), ms.
    pub http_median_ms: Option<f64>,
    /// The trimmed means.
    pub responsiveness: Option<Responsiveness>,
    /// Every probe.
    pub probes: Vec<Probe>,
}

/// Where the client ran.
#[derive(Debug, Clone, Serialize)]
pub struct ClientInfo {
    /// `/etc/os-release` PRETTY_NAME.
    pub os: Option<String>,
    /// Kernel release.
    pub kernel: Option<String>,
    /// Network interfaces other than loopback, with their kind.
    pub interfaces: Vec<InterfaceInfo>,
}

/// One network interface.
#[derive(Debug, Clone, Serialize)]
pub struct InterfaceInfo {
    /// Name.
    pub name: String,
    /// `wifi`, `ethernet`, `tun`, `veth`, `bridge`, `other`.
    pub kind: String,
}

/// The effective configuration.
#[derive(Debug, Clone, Serialize)]
pub struct RpmConfig {
    /// Server address and port.
    pub server: String,
    /// Hostname (SNI, Host).
    pub host: String,
    /// h1, h2, h3.
    pub protocol: &'static str,
    /// download, upload, both (sequential).
    pub direction: &'static str,
    /// The draft's parameters.
    pub parameters: Parameters,
    /// Time limit per direction, s.
    pub max_duration_s: f64,
    /// Idle probe pairs.
    pub idle_probes: usize,
    /// Where the URLs came from: `/.well-known/nq` (its URL) or `default paths`.
    pub discovery: String,
    /// The three URLs' paths used.
    pub paths: [String; 3],
    /// TCP congestion control (h1, h2); None: the system's default.
    pub tcp_cc: Option<String>,
    /// QUIC controller (h3).
    pub quic_cc: String,
    /// The draft version the defaults follow.
    pub draft: &'static str,
}

/// The whole result.
#[derive(Debug, Clone, Serialize)]
pub struct RpmResult {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `protolab-net` version.
    pub tool: String,
    /// Start, Unix ns.
    pub started_unix_ns: u64,
    /// h1, h2, h3.
    pub protocol: &'static str,
    /// The configuration.
    pub config: RpmConfig,
    /// The client machine.
    pub client: ClientInfo,
    /// Idle latency.
    pub idle: Option<IdleResult>,
    /// Per direction that ran: `download`, `upload`.
    pub directions: std::collections::BTreeMap<&'static str, DirectionResult>,
    /// `ok`, `error`.
    pub status: &'static str,
    /// What failed (discovery, every connection...).
    pub error: Option<String>,
}
