//! The page-load result document (`protolab-net load`, docs/load.md): the effective
//! configuration, per-object and per-connection timings. Also the QUIC transport echo
//! ([`QuicConfig`]) that load and bulk results share.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::modes::{Protocol, Scheduler, Transport};
use crate::samples::InstrumentConfig;

/// Version of the result JSON. 2: `config` names its `client` (the engine, or Chromium with its
/// own configuration) and Chromium's extras sit in `browser`.
pub const SCHEMA_VERSION: u32 = 2;

/// `kind` of a page-load result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum LoadKind {
    /// The only value.
    #[default]
    #[serde(rename = "page_load")]
    PageLoad,
}

/// Outcome of a load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LoadStatus {
    /// Every object arrived with status 200 and the manifest's size.
    Ok,
    /// Some object failed.
    Failed,
    /// The load did not end within the timeout.
    Timeout,
}

/// The QUIC transport options as results record them (flattened into a result's `config`:
/// `quic_cc`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QuicConfig {
    /// The controller as given (`gquic39`, `cubic:c=0.8`).
    #[serde(rename = "quic_cc")]
    pub cc: String,
    /// The controller with every parameter (`cubic:c=0.4,cube_factor=1,beta=0.7,n=2,...`).
    #[serde(rename = "quic_cc_canonical")]
    pub cc_canonical: String,
    /// Initial window in bytes, if set apart from the controller (null = the controller's).
    #[serde(rename = "quic_initial_window")]
    pub initial_window: Option<u64>,
    /// Loss detection packet threshold (null = quinn's 3).
    #[serde(rename = "quic_packet_threshold")]
    pub packet_threshold: Option<u32>,
    /// Loss detection time threshold, RTT multiple (null = quinn's 1.125).
    #[serde(rename = "quic_time_threshold")]
    pub time_threshold: Option<f32>,
    /// ACK frequency asked of the peer: ack-eliciting threshold (null = not asked).
    #[serde(rename = "quic_ack_eliciting_threshold")]
    pub ack_eliciting_threshold: Option<u32>,
    /// ACK frequency asked of the peer: maximum ACK delay, ms (null = not asked).
    #[serde(rename = "quic_max_ack_delay_ms")]
    pub max_ack_delay_ms: Option<f64>,
    /// Flow control: every stream's receive window, bytes (null = quinn's 1.25 MB).
    #[serde(rename = "quic_stream_window", default)]
    pub stream_window: Option<u64>,
}

/// Who loaded the page, with the configuration it ran (`config.client` of a result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "client", rename_all = "lowercase")]
pub enum ClientConfig {
    /// protolab's page-load engine (`protolab-net load`).
    Engine(LoadConfig),
    /// Headless Chromium driven by `protolab.browser.driver` (docs/browser.md).
    Chromium(BrowserConfig),
}

impl ClientConfig {
    /// The mode the page was loaded in.
    pub fn mode(&self) -> &str {
        match self {
            ClientConfig::Engine(c) => &c.mode,
            ClientConfig::Chromium(c) => &c.mode,
        }
    }
}

/// The configuration of a Chromium load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserConfig {
    /// Manifest file as given (its objects are the expected ones).
    pub manifest: String,
    /// Page name from the manifest.
    pub page: Option<String>,
    /// Mode (one Chromium can be made to speak: h1c, h1, h2, h2-mptcp, h3).
    pub mode: String,
    /// The root URL loaded.
    pub url: Option<String>,
    /// Warm load: a first load, every connection closed, then the measured load.
    pub warm: bool,
    /// Time limit of the load, ms.
    pub timeout_ms: u64,
    /// `Browser.version` of the Chromium that ran (null: it did not start).
    pub chromium_version: Option<String>,
}

/// What only a browser load has (`browser` of a Chromium result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserExtras {
    /// The page's Navigation Timing entry (numbers and strings), ms since navigation start.
    pub navigation: std::collections::BTreeMap<String, serde_json::Value>,
    /// Manifest objects the browser never requested.
    pub not_requested: u64,
    /// Requests for URLs outside the manifest (e.g. `/favicon.ico`).
    pub extra_requests: Vec<ExtraRequest>,
}

/// A request a browser made for a URL outside the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExtraRequest {
    /// Its URL.
    pub url: String,
    /// HTTP status (null: no response).
    pub status: Option<u16>,
    /// Body bytes received.
    pub bytes: u64,
    /// Request sent, ms since the root request.
    pub started_ms: Option<f64>,
    /// Why it failed.
    pub error: Option<String>,
}

/// The effective configuration of an engine load, carried into its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadConfig {
    /// Manifest file as given.
    pub manifest: String,
    /// Page name from the manifest.
    pub page: String,
    /// Mode as written (`h2-parallel:2`; see the mode registry).
    pub mode: String,
    /// Request assignment in modes with several connections per origin.
    pub scheduler: Scheduler,
    /// HTTP/1.1 connection limit per origin.
    pub h1_connections: u32,
    /// Load timeout, ms.
    pub timeout_ms: u64,
    /// TCP connect timeout (TCP + TLS + HTTP set-up), ms.
    pub connect_timeout_ms: u64,
    /// QUIC handshake timeout (QUIC + HTTP/3 set-up), ms (absent in results from before it
    /// existed, when `connect_timeout_ms` bounded both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic_handshake_timeout_ms: Option<u64>,
    /// TCP congestion control (null = namespace default).
    pub tcp_cc: Option<String>,
    /// QUIC transport (controller, initial window, loss detection, ACK frequency).
    #[serde(flatten)]
    pub quic: QuicConfig,
    /// Cleartext port.
    pub http_port: u16,
    /// TLS / QUIC port.
    pub https_port: u16,
    /// HTTP/2 `SETTINGS_INITIAL_WINDOW_SIZE` sent.
    pub h2_stream_window: u32,
    /// HTTP/2 connection window announced.
    pub h2_connection_window: u32,
    /// Samples and qlog.
    #[serde(flatten)]
    pub instrument: InstrumentConfig,
    /// Seed of the source ports (null = the kernel's choice).
    pub source_port_seed: Option<u64>,
    /// `SO_RCVBUF` of TCP/MPTCP sockets, bytes (null = autotuned).
    pub tcp_rcvbuf: Option<usize>,
    /// Warm load: TLS sessions resumed, QUIC 0-RTT (`--warm`).
    pub warm: bool,
}

/// One object of the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectResult {
    /// Origin hostname.
    pub origin: String,
    /// Path (with query).
    pub path: String,
    /// `//host/path` of the parent, null for the root.
    pub parent: Option<String>,
    /// Discovery delay from the manifest, ms.
    pub delay_ms: u64,
    /// Position in its origin's request queue (0 = first queued on that origin); the
    /// round-robin scheduler sends position i to the origin's connection i mod N.
    pub queue_position: Option<u64>,
    /// Id (`connections[].id`) of the connection it was assigned to.
    pub connection: Option<usize>,
    /// HTTP status.
    pub status: Option<u16>,
    /// Size from the manifest.
    pub expected_bytes: u64,
    /// Body bytes received.
    pub bytes: u64,
    /// Parent finished + delay, ms since the root request.
    pub discovered_ms: Option<f64>,
    /// Taken by the scheduler, ms.
    pub queued_ms: Option<f64>,
    /// Request sent, ms.
    pub started_ms: Option<f64>,
    /// Response head received, ms.
    pub first_byte_ms: Option<f64>,
    /// Body complete (or the fetch ended in error), ms.
    pub finished_ms: Option<f64>,
    /// Why it failed.
    pub error: Option<String>,
    /// Why its first attempt failed, when that attempt ended before any response byte on a
    /// connection that had already delivered a response: the request was then sent again, as
    /// browsers do (Chromium's `HttpNetworkTransaction::ShouldResendRequest`); the fields above
    /// describe the second attempt. Absent when it was sent once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resent_after: Option<String>,
}

/// One connection of the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConnectionResult {
    /// Index in `connections` (what `objects[].connection` refers to).
    pub id: usize,
    /// Origin hostname.
    pub origin: String,
    /// `h1c`, `h1`, `h2` or `h3`.
    pub protocol: Protocol,
    /// `tcp`, `mptcp` or `quic`.
    pub transport: Transport,
    /// Local address.
    pub local: Option<String>,
    /// Remote address.
    pub remote: String,
    /// When the connection attempt began, ms since the root request (null: the client did
    /// not say, as Chromium for a connection it opened before the page's requests).
    pub connect_start_ms: Option<f64>,
    /// TCP connect duration (TCP and MPTCP), ms.
    pub tcp_connect_ms: Option<f64>,
    /// Until the connection could carry requests (TCP + TLS + HTTP set-up, or QUIC + HTTP/3), ms.
    pub handshake_ms: Option<f64>,
    /// Requests sent on it.
    pub requests: u32,
    /// Response body bytes received on it.
    pub bytes: u64,
    /// MPTCP: most subflows seen at once, the initial one included (`mptcpi_subflows` + 1).
    pub subflows: Option<u8>,
    /// MPTCP: every subflow alive at the end of the load, with what it carried.
    pub subflow_details: Option<Vec<SubflowResult>>,
    /// Why the connection failed.
    pub error: Option<String>,
    /// Its id in sample and qlog file names: `<transport>-<client addr>-<server addr>`; the
    /// server's files of the same connection carry the same id (docs/samples.md).
    pub conn_id: Option<String>,
    /// Its samples file (`--samples`), when sampled.
    pub samples_file: Option<String>,
    /// Its qlog file (`--qlog`), for QUIC connections.
    pub qlog_file: Option<String>,
    /// Whether the TLS session was resumed (TLS over TCP: the handshake kind; QUIC: a session
    /// ticket was used). Null without TLS.
    pub resumed: Option<bool>,
    /// QUIC 0-RTT (`--warm`): whether the server accepted the early data; null when not tried.
    pub zero_rtt: Option<bool>,
}

/// One MPTCP subflow at the end of a load (from `MPTCP_TCPINFO` and `MPTCP_SUBFLOW_ADDRS`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SubflowResult {
    /// Local address.
    pub local: Option<String>,
    /// Remote address.
    pub remote: Option<String>,
    /// `tcpi_bytes_received`: bytes this subflow delivered to the client.
    pub bytes_received: u64,
    /// `tcpi_bytes_acked`: bytes the client sent on it that the server acknowledged.
    pub bytes_acked: u64,
    /// Smoothed RTT, microseconds.
    pub rtt_us: u32,
}

/// The result of one page load (docs/load.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadResult {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `page_load`.
    pub kind: LoadKind,
    /// Who loaded the page and its effective configuration.
    pub config: ClientConfig,
    /// Outcome.
    pub status: LoadStatus,
    /// Summary of what went wrong.
    pub error: Option<String>,
    /// Unix time of the root request, ns.
    pub start_unix_ns: u64,
    /// Page load time (last object finished), ms, when ok.
    pub plt_ms: Option<f64>,
    /// Body bytes received in all.
    pub bytes: u64,
    /// Every manifest object, in manifest order.
    pub objects: Vec<ObjectResult>,
    /// Every connection opened, in order of opening.
    pub connections: Vec<ConnectionResult>,
    /// A browser load's extras (absent for the engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser: Option<BrowserExtras>,
}

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    vec![crate::document::<LoadResult>("load-result")]
}
