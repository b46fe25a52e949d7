//! The bulk-transfer result document (`protolab-net bulk`, docs/bulk.md), with its protocols,
//! directions and interval rows.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::load::QuicConfig;
use crate::modes::{Protocol, Transport};
use crate::samples::InstrumentConfig;

/// Version of the result JSON.
pub const SCHEMA_VERSION: u32 = 1;

/// A name given for an option is not one of the known ones; says which option and what is known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{option}: {why}")]
pub struct UnknownName {
    /// The option (`--protocol`, `--direction`).
    pub option: &'static str,
    /// What was given and what is known.
    pub why: String,
}

/// What carries the bytes of a bulk transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BulkProtocol {
    /// The raw protocol on TCP (no HTTP; docs/bulk.md).
    Tcp,
    /// HTTP/1.1 over cleartext TCP.
    H1c,
    /// HTTP/1.1 over TLS.
    H1,
    /// HTTP/2 over TLS.
    H2,
    /// HTTP/3 over QUIC.
    H3,
}

impl BulkProtocol {
    const REGISTRY: &'static [(&'static str, BulkProtocol)] = &[
        ("tcp", BulkProtocol::Tcp),
        ("h1c", BulkProtocol::H1c),
        ("h1", BulkProtocol::H1),
        ("h2", BulkProtocol::H2),
        ("h3", BulkProtocol::H3),
    ];

    /// Known names, in registry order.
    pub fn names() -> Vec<&'static str> {
        Self::REGISTRY.iter().map(|(n, _)| *n).collect()
    }

    /// The protocol of that name.
    pub fn from_name(name: &str) -> Result<BulkProtocol, UnknownName> {
        Self::REGISTRY.iter().find(|(n, _)| *n == name).map(|(_, p)| *p).ok_or_else(|| UnknownName {
            option: "--protocol",
            why: format!("unknown protocol {name:?} (known: {})", Self::names().join(", ")),
        })
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        Self::REGISTRY.iter().find(|(_, p)| *p == self).map_or("tcp", |(n, _)| n)
    }

    /// The HTTP version, if any.
    pub fn http(self) -> Option<Protocol> {
        match self {
            BulkProtocol::Tcp => None,
            BulkProtocol::H1c => Some(Protocol::H1c),
            BulkProtocol::H1 => Some(Protocol::H1),
            BulkProtocol::H2 => Some(Protocol::H2),
            BulkProtocol::H3 => Some(Protocol::H3),
        }
    }
}

impl fmt::Display for BulkProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Who sends, in a bulk transfer and in a raw request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The server sends.
    Download,
    /// The client sends.
    Upload,
}

impl Direction {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Download => "download",
            Direction::Upload => "upload",
        }
    }

    /// The direction of that name (`download`, `upload`).
    pub fn from_name(name: &str) -> Result<Direction, UnknownName> {
        match name {
            "download" => Ok(Direction::Download),
            "upload" => Ok(Direction::Upload),
            _ => Err(UnknownName { option: "--direction", why: format!("unknown direction {name:?} (known: download, upload)") }),
        }
    }
}

/// Who paces a transfer at `rate_bps`: the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Pacing {
    /// Downloads: the server, asked by the request.
    Server,
    /// Uploads: the client.
    Client,
}

impl Pacing {
    /// The sender of `direction`.
    pub fn of(direction: Direction) -> Pacing {
        match direction {
            Direction::Download => Pacing::Server,
            Direction::Upload => Pacing::Client,
        }
    }
}

/// `kind` of a bulk result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum BulkKind {
    /// The only value.
    #[default]
    #[serde(rename = "bulk")]
    Bulk,
}

/// Outcome of a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BulkStatus {
    /// Every byte moved (byte count), or the transfer ran until its deadline (duration).
    Ok,
    /// The connection or the transfer failed.
    Failed,
    /// The run did not end within the timeout.
    Timeout,
}

/// The effective configuration of a transfer, carried into its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BulkConfig {
    /// Protocol.
    pub protocol: BulkProtocol,
    /// Who sends.
    pub direction: Direction,
    /// Byte count (null in duration mode).
    pub bytes: Option<u64>,
    /// Duration (null in byte-count mode), ms.
    pub duration_ms: Option<f64>,
    /// Application rate, bit/s (null = unpaced).
    pub rate_bps: Option<u64>,
    /// Who paces: `server` (downloads), `client` (uploads), null when unpaced.
    pub pacing: Option<Pacing>,
    /// The path downloaded instead of `/bytes` (null = `/bytes`).
    pub path: Option<String>,
    /// Log interval, ms.
    pub interval_ms: f64,
    /// Server address and port used.
    pub server: String,
    /// SNI / Host.
    pub host: String,
    /// `TCP_CONGESTION` asked for (null = namespace default; not used by h3).
    pub tcp_cc: Option<String>,
    /// MPTCP socket asked for.
    pub mptcp: bool,
    /// QUIC transport of h3 (controller, initial window, loss detection, ACK frequency).
    #[serde(flatten)]
    pub quic: QuicConfig,
    /// Samples and qlog.
    #[serde(flatten)]
    pub instrument: InstrumentConfig,
    /// Timeout of the run, ms.
    pub timeout_ms: u64,
    /// Connect timeout, ms.
    pub connect_timeout_ms: u64,
}

/// The connection of a bulk result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConnectionInfo {
    /// Local address.
    pub local: Option<String>,
    /// Remote address.
    pub remote: String,
    /// `tcp`, `h1c`, `h1`, `h2`, `h3`.
    pub protocol: BulkProtocol,
    /// `tcp`, `mptcp` or `quic`.
    pub transport: Transport,
    /// `TCP_CONGESTION` read back from the socket (TCP transports).
    pub tcp_cc: Option<String>,
    /// MPTCP: whether the connection fell back to plain TCP (the server does not speak MPTCP).
    pub mptcp_fallback: Option<bool>,
    /// The connection's id in sample and qlog file names, shared with the server's files
    /// (`<transport>-<client addr>-<server addr>`, docs/samples.md).
    pub conn_id: String,
}

/// What the server reported for an upload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerCount {
    /// Bytes it received.
    pub bytes: u64,
    /// Its receive time, ms (HTTP: from the request head to the end of the body; raw: from
    /// the request header to the last byte).
    pub duration_ms: f64,
}

/// One interval of a transfer's log (half-open, `[k x interval, (k+1) x interval)`; the last
/// one ends with the transfer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IntervalRow {
    /// End of the interval, ms since the transfer's start.
    pub t_ms: f64,
    /// End of the interval, Unix ns.
    pub t_unix_ns: u64,
    /// Bytes in the interval.
    pub bytes: u64,
    /// Bytes up to the end of the interval.
    pub total_bytes: u64,
    /// `bytes` x 8 / the interval's length (the last one may be shorter), bit/s.
    pub rate_bps: f64,
}

/// The result of one bulk transfer (docs/bulk.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BulkResult {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `bulk`.
    pub kind: BulkKind,
    /// Effective configuration.
    pub config: BulkConfig,
    /// Outcome.
    pub status: BulkStatus,
    /// What went wrong.
    pub error: Option<String>,
    /// Unix time the transfer started (request sent), ns; the connection attempt's start when
    /// no transfer began.
    pub start_unix_ns: u64,
    /// From the connection attempt to the connection being ready, ms.
    pub handshake_ms: Option<f64>,
    /// Bytes moved: received (download) or handed to the transport (upload).
    pub bytes: u64,
    /// From the start to the end of the transfer, ms.
    pub duration_ms: Option<f64>,
    /// `bytes` x 8 / duration, bit/s.
    pub goodput_bps: Option<f64>,
    /// Bytes per interval.
    pub intervals: Vec<IntervalRow>,
    /// The connection, once established.
    pub connection: Option<ConnectionInfo>,
    /// Uploads: the server's own count.
    pub server: Option<ServerCount>,
    /// The samples file written.
    pub samples: Option<String>,
    /// The qlog file written.
    pub qlog: Option<String>,
}

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    vec![crate::document::<BulkResult>("bulk-result")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in BulkProtocol::names() {
            let p = BulkProtocol::from_name(name).unwrap();
            assert_eq!(p.name(), name);
            assert_eq!(serde_json::to_value(p).unwrap(), name);
        }
        let e = BulkProtocol::from_name("quic").unwrap_err();
        assert_eq!(e.option, "--protocol");
        assert!(e.to_string().starts_with("--protocol: unknown protocol \"quic\"") && e.to_string().contains("tcp, h1c, h1, h2, h3"), "{e}");
        for d in [Direction::Download, Direction::Upload] {
            assert_eq!(Direction::from_name(d.name()), Ok(d));
            assert_eq!(serde_json::to_value(d).unwrap(), d.name());
        }
        assert_eq!(Direction::from_name("up").unwrap_err().option, "--direction");
        assert_eq!(Pacing::of(Direction::Upload), Pacing::Client);
    }
}
