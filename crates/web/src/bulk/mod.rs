//! Bulk transfers (docs/bulk.md): download or upload N bytes, or for a duration, over raw TCP,
//! HTTP/1.1 (cleartext or TLS), HTTP/2 or HTTP/3, with a chosen congestion controller,
//! optionally at a fixed application sending rate, logging bytes per interval.
//!
//! [`Bulk::new`] checks everything that can be checked without the network (bad input);
//! [`Bulk::run`] then always produces a [`BulkResult`], whatever happens on the wire.
//!
//! Who paces with `rate_bps`: the sender. Downloads ask the server to pace (`GET
//! /bytes?n=N&rate=R`, or the raw protocol's rate field); uploads pace in the client.

pub mod log;
mod transfer;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tokio_rustls::rustls::pki_types::CertificateDer;

pub use log::{IntervalLog, IntervalRow};

use crate::client::{self, Connector, Sessions, Trust};
use crate::instrument::InstrumentOptions;
use crate::load::Protocol;
use crate::transport::{QuicOptions, TcpOptions};

/// Default interval of the log.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);
/// Smallest interval of the log.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);
/// Longest transfer by duration (a day).
pub const MAX_DURATION: Duration = Duration::from_secs(86_400);

/// Bad input: the transfer cannot start. Names the option.
#[derive(Debug, thiserror::Error)]
pub enum BulkError {
    /// An option is out of range or inconsistent.
    #[error("{option}: {why}")]
    Option {
        /// The option (`--protocol`, `--rate`, ...).
        option: &'static str,
        /// Why.
        why: String,
    },
}

fn bad(option: &'static str, why: impl Into<String>) -> BulkError {
    BulkError::Option { option, why: why.into() }
}

/// Who sends (also the raw protocol's direction, `crate::raw`).
pub use contract::bulk::Direction;
/// The result document and its parts (docs/bulk.md), defined in the contract crate
/// (`schemas/bulk-result.json`).
pub use contract::bulk::{BulkConfig, BulkKind, BulkProtocol, BulkResult, BulkStatus, ConnectionInfo, Pacing, ServerCount, SCHEMA_VERSION};

/// How much to move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// Exactly this many bytes.
    Bytes(u64),
    /// As many bytes as the path carries in this time.
    Duration(Duration),
}

/// How to transfer.
#[derive(Debug, Clone)]
pub struct BulkOptions {
    /// Protocol.
    pub protocol: BulkProtocol,
    /// Direction.
    pub direction: Direction,
    /// Bytes or duration.
    pub amount: Amount,
    /// The sender's application rate, bit/s; `None` = as fast as the transport goes.
    pub rate_bps: Option<u64>,
    /// HTTP downloads: request this path instead of `/bytes?n=N` (an object of a manifest, or a
    /// file of another server such as nginx or caddy); with a byte count, the response must be
    /// exactly that long. `None` = the synthetic endpoint.
    pub path: Option<String>,
    /// Interval of the log.
    pub interval: Duration,
    /// Server address.
    pub server: IpAddr,
    /// Hostname for SNI and `Host`/`:authority` (a hostname or an IP literal); empty = the
    /// server address.
    pub host: String,
    /// Port of cleartext HTTP/1.1 (`h1c`).
    pub http_port: u16,
    /// Port of TLS on TCP and of QUIC on UDP (`h1`, `h2`, `h3`).
    pub https_port: u16,
    /// Port of the raw protocol (`tcp`).
    pub raw_port: u16,
    /// TCP congestion control and MPTCP (every protocol but `h3`).
    pub tcp: TcpOptions,
    /// QUIC knobs (`h3`).
    pub quic: QuicOptions,
    /// The CA to trust (`h1`, `h2`, `h3`).
    pub ca: Option<CertificateDer<'static>>,
    /// Samples (`client-<conn id>.ndjson`: TCP_INFO or quinn stats) and qlog (`h3` only).
    pub instrument: InstrumentOptions,
    /// The whole run (connect + transfer) ends with status `timeout` after this long; `None`:
    /// 120 s for a byte count, the duration + 30 s for a duration.
    pub timeout: Option<Duration>,
    /// Connection set-up (TCP + TLS + HTTP, or QUIC + HTTP/3) fails after this long.
    pub connect_timeout: Duration,
}

impl Default for BulkOptions {
    fn default() -> Self {
        BulkOptions {
            protocol: BulkProtocol::Tcp,
            direction: Direction::Download,
            amount: Amount::Bytes(10_000_000),
            rate_bps: None,
            path: None,
            interval: DEFAULT_INTERVAL,
            server: IpAddr::from([127, 0, 0, 1]),
            host: String::new(),
            http_port: 80,
            https_port: 443,
            raw_port: crate::raw::DEFAULT_PORT,
            tcp: TcpOptions::default(),
            quic: QuicOptions::default(),
            ca: None,
            instrument: InstrumentOptions::default(),
            timeout: None,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// A checked transfer, ready to run.
pub struct Bulk {
    options: BulkOptions,
    host: String,
    addr: SocketAddr,
    timeout: Duration,
    /// Connections of the protocol: TLS with its ALPN (h1, h2, h3), socket and QUIC options,
    /// instrumentation.
    connector: Connector,
}

/// A samples or qlog directory: missing is fine (the caller creates it before running, as the
/// CLI does once every option is checked), anything else than a directory is not.
fn check_dir(option: &'static str, dir: &Option<PathBuf>) -> Result<(), BulkError> {
    match dir {
        Some(d) if d.exists() && !d.is_dir() => Err(bad(option, format!("{} is not a directory", d.display()))),
        _ => Ok(()),
    }
}

impl Bulk {
    /// Checks the options and builds the TLS configuration. No network I/O.
    pub fn new(options: BulkOptions) -> Result<Bulk, BulkError> {
        let o = &options;
        match o.amount {
            Amount::Bytes(0) => return Err(bad("--bytes", "must be positive")),
            Amount::Bytes(n) if o.direction == Direction::Download && o.protocol != BulkProtocol::Tcp && n > crate::limits::MAX_BYTES_N => {
                return Err(bad("--bytes", format!("{n} is more than an HTTP download can ask for ({})", crate::limits::MAX_BYTES_N)));
            }
            Amount::Bytes(n) if n == crate::raw::UNTIL_CLOSED => return Err(bad("--bytes", format!("{n} is too large"))),
            Amount::Duration(d) if d.is_zero() || d > MAX_DURATION => {
                return Err(bad("--duration-ms", format!("{} ms is not from 1 ms to {} ms", d.as_millis(), MAX_DURATION.as_millis())));
            }
            _ => {}
        }
        if let Some(r) = o.rate_bps {
            crate::pace::check_rate(r).map_err(|e| bad("--rate", e))?;
        }
        if let Some(path) = &o.path {
            if o.direction != Direction::Download || o.protocol == BulkProtocol::Tcp {
                return Err(bad("--path", "only HTTP downloads request a path"));
            }
            if o.rate_bps.is_some() {
                return Err(bad("--path", "--rate is paced by protolab's /bytes endpoint; a path is not paced"));
            }
            if !path.starts_with('/') || path.parse::<http::uri::PathAndQuery>().is_err() {
                return Err(bad("--path", format!("{path:?} is not an absolute request path")));
            }
        }
        if o.interval < MIN_INTERVAL {
            return Err(bad("--interval-ms", format!("must be at least {} ms", MIN_INTERVAL.as_millis())));
        }
        if o.instrument.interval < crate::instrument::MIN_INTERVAL {
            return Err(bad("--sample-interval-ms", format!("must be at least {} ms", crate::instrument::MIN_INTERVAL.as_millis())));
        }
        if o.connect_timeout.is_zero() {
            return Err(bad("--connect-timeout-ms", "must be positive"));
        }
        let timeout = match (o.timeout, o.amount) {
            (Some(t), _) if t.is_zero() => return Err(bad("--timeout-ms", "must be positive")),
            (Some(t), Amount::Duration(d)) if t <= d => {
                return Err(bad("--timeout-ms", format!("{} ms is not longer than the duration ({} ms)", t.as_millis(), d.as_millis())));
            }
            (Some(t), _) => t,
            (None, Amount::Bytes(_)) => Duration::from_secs(120),
            (None, Amount::Duration(d)) => d + Duration::from_secs(30),
        };
        check_dir("--samples", &o.instrument.samples_dir)?;
        check_dir("--qlog", &o.instrument.qlog_dir)?;
        if o.instrument.qlog_dir.is_some() && o.protocol != BulkProtocol::H3 {
            return Err(bad("--qlog", format!("only HTTP/3 has a qlog, not {}", o.protocol)));
        }
        if o.tcp.mptcp && o.protocol == BulkProtocol::H3 {
            return Err(bad("--mptcp", "HTTP/3 runs over QUIC, not MPTCP"));
        }
        let host = if o.host.is_empty() { o.server.to_string() } else { o.host.trim_end_matches('.').to_ascii_lowercase() };
        let is_ip = host.parse::<IpAddr>().is_ok();
        if !is_ip && !crate::manifest::valid_hostname(&host) {
            return Err(bad("--host", format!("{:?} is neither a hostname nor an IP address", o.host)));
        }
        let tls = match o.protocol.http().filter(|p| p.alpn().is_some()) {
            None => None,
            Some(protocol) => {
                let Some(ca) = &o.ca else {
                    return Err(bad("--ca", format!("protocol {} uses TLS and needs the lab's CA", o.protocol)));
                };
                // No early data: a transfer has no earlier session to resume.
                Some(client::tls_config(Trust::Ca(ca), protocol, Sessions::Resume).map_err(|e| bad("--ca", e.to_string()))?)
            }
        };
        // A raw transfer uses the TCP stage alone: cleartext h1c stands for "no TLS" there.
        let protocol = o.protocol.http().unwrap_or(Protocol::H1c);
        let connector = Connector::new(protocol, tls, o.tcp.clone(), &o.quic)
            .map_err(|e| bad(e.option(), e.to_string()))?
            .with_instrument(o.instrument.clone());
        let port = match o.protocol {
            BulkProtocol::Tcp => o.raw_port,
            BulkProtocol::H1c => o.http_port,
            BulkProtocol::H1 | BulkProtocol::H2 | BulkProtocol::H3 => o.https_port,
        };
        if port == 0 {
            return Err(bad("--*-port", format!("port 0 for protocol {}", o.protocol)));
        }
        let addr = SocketAddr::new(o.server, port);
        Ok(Bulk { host, addr, timeout, connector, options })
    }

    /// The effective configuration.
    pub fn config(&self) -> BulkConfig {
        let o = &self.options;
        let (bytes, duration_ms) = match o.amount {
            Amount::Bytes(n) => (Some(n), None),
            Amount::Duration(d) => (None, Some(d.as_secs_f64() * 1e3)),
        };
        BulkConfig {
            protocol: o.protocol,
            direction: o.direction,
            bytes,
            duration_ms,
            rate_bps: o.rate_bps,
            pacing: o.rate_bps.map(|_| Pacing::of(o.direction)),
            path: o.path.clone(),
            interval_ms: o.interval.as_secs_f64() * 1e3,
            server: self.addr.to_string(),
            host: self.host.clone(),
            tcp_cc: if o.protocol == BulkProtocol::H3 { None } else { o.tcp.congestion.clone() },
            mptcp: o.tcp.mptcp,
            quic: o.quic.config(),
            instrument: o.instrument.config(),
            timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            connect_timeout_ms: u64::try_from(o.connect_timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Runs the transfer once. Never fails: problems on the wire end up in the result.
    pub async fn run(&self) -> BulkResult {
        transfer::run(self, None).await
    }

    /// Like [`Bulk::run`], sending every interval row to `progress` as soon as it closes.
    pub async fn run_with_progress(&self, progress: UnboundedSender<IntervalRow>) -> BulkResult {
        transfer::run(self, Some(progress)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_registry_round_trips() {
        for name in BulkProtocol::names() {
            assert_eq!(BulkProtocol::from_name(name).unwrap().name(), name);
        }
        let e = BulkProtocol::from_name("quic").unwrap_err().to_string();
        assert!(e.starts_with("--protocol: unknown protocol \"quic\"") && e.contains("tcp, h1c, h1, h2, h3"), "{e}");
        assert_eq!(Direction::from_name("upload").unwrap(), Direction::Upload);
        assert!(Direction::from_name("up").unwrap_err().to_string().contains("--direction"));
    }

    fn option_of(o: BulkOptions) -> String {
        match Bulk::new(o) {
            Err(BulkError::Option { option, .. }) => option.to_string(),
            Ok(_) => "ok".into(),
        }
    }

    #[test]
    fn bad_options_name_their_flag() {
        let base = BulkOptions::default;
        assert_eq!(option_of(base()), "ok");
        assert_eq!(option_of(BulkOptions { amount: Amount::Bytes(0), ..base() }), "--bytes");
        assert_eq!(option_of(BulkOptions { amount: Amount::Duration(Duration::ZERO), ..base() }), "--duration-ms");
        assert_eq!(option_of(BulkOptions { rate_bps: Some(0), ..base() }), "--rate");
        assert_eq!(option_of(BulkOptions { interval: Duration::from_micros(10), ..base() }), "--interval-ms");
        assert_eq!(option_of(BulkOptions { protocol: BulkProtocol::H2, ..base() }), "--ca");
        assert_eq!(option_of(BulkOptions { host: "a b".into(), ..base() }), "--host");
        assert_eq!(option_of(BulkOptions { raw_port: 0, ..base() }), "--*-port");
        assert_eq!(option_of(BulkOptions { amount: Amount::Duration(Duration::from_secs(5)), timeout: Some(Duration::from_secs(5)), ..base() }), "--timeout-ms");
        let samples = InstrumentOptions { samples_dir: Some("/proc/self/status".into()), ..InstrumentOptions::default() };
        assert_eq!(option_of(BulkOptions { instrument: samples, ..base() }), "--samples");
        let qlog = InstrumentOptions { qlog_dir: Some(std::env::temp_dir()), ..InstrumentOptions::default() };
        assert_eq!(option_of(BulkOptions { instrument: qlog, ..base() }), "--qlog");
        assert_eq!(
            option_of(BulkOptions { protocol: BulkProtocol::H1c, amount: Amount::Bytes(crate::limits::MAX_BYTES_N + 1), ..base() }),
            "--bytes"
        );
        // A raw download may ask for more than HTTP's limit.
        assert_eq!(option_of(BulkOptions { amount: Amount::Bytes(crate::limits::MAX_BYTES_N + 1), ..base() }), "ok");
    }

    #[test]
    fn config_states_who_paces() {
        let b = Bulk::new(BulkOptions { rate_bps: Some(5_000_000), direction: Direction::Upload, ..BulkOptions::default() }).unwrap();
        let c = b.config();
        assert_eq!(c.pacing, Some(Pacing::Client));
        assert_eq!(c.server, format!("127.0.0.1:{}", crate::raw::DEFAULT_PORT));
        assert_eq!(c.host, "127.0.0.1");
        assert_eq!(c.timeout_ms, 120_000);
    }
}
