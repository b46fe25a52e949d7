//! Transport sample files (docs/samples.md): NDJSON, a [`SampleHeader`] line and then rows —
//! [`TcpSample`] (`TCP_INFO`; MPTCP: one per subflow), [`QuicSample`] (quinn's statistics) and,
//! in QUIC files, a [`StateSample`] at every state change of the controller — plus the
//! [`InstrumentConfig`] that load and bulk results echo.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::modes::Transport;

/// `schema_version` of a samples file (2: rows carry `event`, `state`, ssthresh, bytes in
/// flight and pacing rate for every transport, and QUIC files have a row at every state change).
pub const SCHEMA_VERSION: u32 = 2;

/// `schema` of a samples file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum SamplesSchema {
    /// The only value.
    #[default]
    #[serde(rename = "protolab.samples")]
    Samples,
}

impl SamplesSchema {
    /// `protolab.samples`.
    pub const NAME: &'static str = "protolab.samples";
}

/// Which end of the connection samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The end that opened the connection.
    Client,
    /// The end that accepted it.
    Server,
}

impl Role {
    /// `client` or `server`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

/// A congestion controller's state (docs/congestion.md): for TCP derived from `TCP_INFO`, for
/// QUIC reported by protolab's controllers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CcState {
    /// Exponential growth (RFC 9002 slow start).
    SlowStart,
    /// HyStart++'s conservative slow start (RFC 9406 §4.2).
    ConservativeSlowStart,
    /// Congestion avoidance (or, for rate and delay based controllers, their steady state).
    CongestionAvoidance,
    /// Recovery: from a congestion event until a packet sent after it is acknowledged.
    Recovery,
    /// The application did not fill the window (the controller was not the limit).
    ApplicationLimited,
}

/// The first line of a samples file: which connection, which end, how it was sampled.
///
/// TCP and MPTCP headers carry `mptcp_fallback` and `tcp_congestion` (either may be null);
/// QUIC headers carry `quic_congestion` instead, and neither of the other two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SampleHeader {
    /// `protolab.samples`.
    pub schema: SamplesSchema,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The connection id, shared by both ends (`tcp-10.77.0.1:40002-10.99.0.1:443`).
    pub conn: String,
    /// Which end wrote the file.
    pub role: Role,
    /// `tcp`, `mptcp` or `quic`.
    pub transport: Transport,
    /// TCP and MPTCP files only: for an MPTCP socket, whether the peer did not speak MPTCP and
    /// the connection runs as plain TCP; null for a TCP socket.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub mptcp_fallback: Option<Option<bool>>,
    /// Local address.
    pub local: Option<String>,
    /// Remote address.
    pub remote: Option<String>,
    /// Sampling interval, ms.
    pub interval_ms: f64,
    /// TCP and MPTCP files only: the socket's `TCP_CONGESTION` (null if unreadable).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub tcp_congestion: Option<Option<String>>,
    /// QUIC files only: the congestion controller as configured (`cubic`, `gquic39`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic_congestion: Option<String>,
    /// When sampling began, Unix ns.
    pub start_unix_ns: u64,
}

/// A field that may be absent (`None`) or present and null (`Some(None)`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// `event` of a periodic row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum SampleEvent {
    /// The only value.
    #[default]
    #[serde(rename = "sample")]
    Sample,
}

/// `event` of a controller's state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum StateEvent {
    /// The only value.
    #[default]
    #[serde(rename = "state")]
    State,
}

/// One sample of `TCP_INFO` (for MPTCP, of one subflow: `subflow`, `local` and `remote` are
/// added). Windows are in segments; rates in bit/s, null when the kernel says unlimited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TcpSample {
    /// Sample time, Unix ns.
    pub t_unix_ns: u64,
    /// Always `sample` (the kernel's state changes are seen at the sampling interval only).
    pub event: SampleEvent,
    /// From `TCP_INFO`: `recovery` when `ca_state` is CWR, Recovery or Loss; otherwise
    /// `application_limited` when the last delivery-rate sample was, `slow_start` while
    /// `cwnd < ssthresh` (or ssthresh unset), else `congestion_avoidance`.
    pub cc_state: CcState,
    /// `tcpi_delivery_rate_app_limited`.
    pub app_limited: bool,
    /// `unacked` x `snd_mss`, bytes.
    pub bytes_in_flight: u64,
    /// `tcpi_state` (1 ESTABLISHED ...).
    pub state: u8,
    /// `tcpi_ca_state` (0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss).
    pub ca_state: u8,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Slow-start threshold, segments (null until set).
    pub ssthresh: Option<u32>,
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// RTT variation, µs.
    pub rttvar_us: u32,
    /// Minimum RTT, µs.
    pub min_rtt_us: u32,
    /// `tcpi_total_retrans`: segments retransmitted so far.
    pub retrans: u32,
    /// `tcpi_lost`.
    pub lost: u32,
    /// `tcpi_unacked`: segments in flight.
    pub unacked: u32,
    /// Sender MSS, bytes.
    pub snd_mss: u32,
    /// The kernel's delivery-rate estimate, bit/s.
    pub delivery_rate_bps: Option<u64>,
    /// Pacing rate, bit/s (null = unlimited).
    pub pacing_rate_bps: Option<u64>,
    /// Bytes acknowledged (counts the SYN).
    pub bytes_acked: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Bytes retransmitted.
    pub bytes_retrans: u64,
    /// Bytes written by the application, not yet sent.
    pub notsent_bytes: u32,
    /// Retransmission timeout, µs.
    pub rto_us: u32,
    /// Delayed-ACK timeout, µs.
    pub ato_us: u32,
    /// Receiver-side MSS estimate, bytes.
    pub rcv_mss: u32,
    /// ms since the last data sent.
    pub last_data_sent_ms: u32,
    /// ms since the last data received.
    pub last_data_recv_ms: u32,
    /// ms since the last ACK received.
    pub last_ack_recv_ms: u32,
    /// `tcpi_max_pacing_rate`, bit/s (null = unlimited).
    pub max_pacing_rate_bps: Option<u64>,
    /// Segments sent.
    pub segs_out: u32,
    /// Segments received.
    pub segs_in: u32,
    /// Segments sent with data.
    pub data_segs_out: u32,
    /// Segments received with data.
    pub data_segs_in: u32,
    /// DSACK blocks received: spurious retransmissions as the peer reports them.
    pub dsack_dups: u32,
    /// MPTCP: which subflow the row describes.
    #[serde(flatten)]
    pub subflow: Option<MptcpSubflow>,
}

/// The subflow of an MPTCP sample row (`MPTCP_TCPINFO`, `MPTCP_SUBFLOW_ADDRS`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MptcpSubflow {
    /// Subflow index (0 = the initial one).
    pub subflow: u32,
    /// Its local address.
    pub local: Option<String>,
    /// Its remote address.
    pub remote: Option<String>,
}

/// One sample of quinn's path statistics and, for protolab's controllers, the controller.
/// Windows and ssthresh are in bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QuicSample {
    /// Sample time, Unix ns.
    pub t_unix_ns: u64,
    /// Always `sample`.
    pub event: SampleEvent,
    /// The controller's state (null for quinn's own controllers).
    pub cc_state: Option<CcState>,
    /// Slow-start threshold, bytes (null until set or unknown).
    pub ssthresh: Option<u64>,
    /// Bytes in flight at the last acknowledgements (null for quinn's own controllers).
    pub bytes_in_flight: Option<u64>,
    /// Pacing rate, bit/s: quinn paces at 1.25 windows per smoothed RTT (BBR reports its own).
    pub pacing_rate_bps: Option<u64>,
    /// `sprout-ewma`: the peer's feedback reports the controller accepted so far (absent for
    /// other controllers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc_feedback_reports: Option<u64>,
    /// `sprout-ewma`: the receiving rate of the peer's report the window was last set from, bit/s
    /// (absent before the first report and for other controllers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc_feedback_rate_bps: Option<u64>,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Smoothed RTT, µs.
    pub rtt_us: u64,
    /// Minimum RTT, µs.
    pub min_rtt_us: u64,
    /// Congestion events so far.
    pub congestion_events: u64,
    /// Packets lost so far.
    pub lost_packets: u64,
    /// Bytes lost so far.
    pub lost_bytes: u64,
    /// Packets sent so far.
    pub sent_packets: u64,
    /// Path MTU in use.
    pub current_mtu: u16,
    /// UDP bytes sent.
    pub udp_tx_bytes: u64,
    /// UDP bytes received.
    pub udp_rx_bytes: u64,
    /// UDP datagrams sent.
    pub udp_tx_datagrams: u64,
    /// UDP datagrams received.
    pub udp_rx_datagrams: u64,
}

/// A QUIC controller's state change, written with the next sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StateSample {
    /// When the state changed, Unix ns.
    pub t_unix_ns: u64,
    /// Always `state`.
    pub event: StateEvent,
    /// The new state.
    pub cc_state: CcState,
    /// The window at that moment, bytes.
    pub cwnd: u64,
    /// ssthresh at that moment, bytes.
    pub ssthresh: Option<u64>,
    /// Bytes in flight at that moment.
    pub bytes_in_flight: u64,
}

/// What a load or bulk transfer recorded per connection, as its result's `config` carries it
/// (flattened into it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstrumentConfig {
    /// Samples directory (null = no samples).
    pub samples_dir: Option<String>,
    /// Sampling interval, ms.
    pub sample_interval_ms: f64,
    /// qlog directory (null = no qlog).
    pub qlog_dir: Option<String>,
}

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    vec![
        crate::document::<SampleHeader>("sample-header"),
        crate::document::<TcpSample>("tcp-sample"),
        crate::document::<QuicSample>("quic-sample"),
        crate::document::<StateSample>("state-sample"),
    ]
}
