//! The page-load engine (docs/load.md): loads a page manifest from a cold start over one of the
//! protocol modes (`h1c`, `h1`, `h2`, `h2-parallel:N`, `h2-mptcp`, `h3`, `h3-parallel:N`),
//! following its dependency tree, and reports per-object and per-connection timings.
//!
//! [`Loader::new`] checks everything that can be checked without the network (bad input);
//! [`Loader::run`] then always produces a [`LoadResult`], whatever happens on the wire.

mod engine;
mod fetch;
pub mod mode;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::CertificateDer;

pub use crate::client::{H2_CONNECTION_WINDOW, H2_STREAM_WINDOW};
/// The result document (docs/load.md), defined in the contract crate (`schemas/load-result.json`).
pub use contract::load::{ConnectionResult, LoadConfig, LoadKind, LoadResult, LoadStatus, ObjectResult, SubflowResult, SCHEMA_VERSION};
pub use mode::{Mode, Pool, Protocol, Scheduler, Transport};

use crate::client::{self, Connector, Sessions, Trust};
use crate::instrument::InstrumentOptions;
use crate::manifest::Manifest;
use crate::transport::{QuicOptions, TcpOptions};

/// Bad input: the load cannot start. Names the option or file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// An option is out of range or inconsistent.
    #[error("{option}: {why}")]
    Option {
        /// The option (`--mode`, `--h1-connections`, ...).
        option: &'static str,
        /// Why.
        why: String,
    },
    /// The CA certificate cannot be read.
    #[error("{path}: {why}")]
    Ca {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
}

/// How to load.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Protocol mode.
    pub mode: Mode,
    /// Request assignment in modes with several connections per origin.
    pub scheduler: Scheduler,
    /// Most HTTP/1.1 connections per origin (`h1c`, `h1`).
    pub h1_connections: u32,
    /// The whole load ends after this long (status `timeout`).
    pub timeout: Duration,
    /// One TCP connection attempt (TCP + TLS + HTTP set-up) ends after this long. Chromium's
    /// default, 240 s (`TransportConnectJob`): longer than the kernel's own SYN retries (about
    /// 127 s with `tcp_syn_retries` = 6), so that, as in the browser, the kernel decides when a
    /// connect fails. On a slow lossy link a SYN or the TLS handshake can take far longer than
    /// a fast network's few seconds (0.36 Mbit/s and a 1-BDP queue: lost SYNs are retried after
    /// 1, 3 and 7 s).
    pub connect_timeout: Duration,
    /// One QUIC connection attempt (QUIC + HTTP/3 set-up) ends after this long: Chromium's
    /// `kMaxTimeForCryptoHandshakeSecs`, 10 s (then Chromium falls back to TCP; the engine's
    /// `h3` modes measure QUIC alone, so the connection fails).
    pub quic_handshake_timeout: Duration,
    /// Port of cleartext HTTP/1.1 (`h1c`).
    pub http_port: u16,
    /// Port of TLS on TCP and of QUIC on UDP.
    pub https_port: u16,
    /// `TCP_CONGESTION` of every TCP/MPTCP socket; `None` = namespace default.
    pub tcp_cc: Option<String>,
    /// `SO_RCVBUF` of every TCP/MPTCP socket; `None` = autotuned.
    pub tcp_rcvbuf: Option<usize>,
    /// QUIC transport knobs (h3 modes).
    pub quic: QuicOptions,
    /// The CA to trust (every TLS mode needs it; `h1c` does not).
    pub ca: Option<CertificateDer<'static>>,
    /// The manifest as named by the user (`config.manifest` of the result).
    pub manifest_label: String,
    /// Per-connection samples and qlog (client side).
    pub instrument: InstrumentOptions,
    /// Draw TCP and UDP source ports from a generator with this seed instead of letting the
    /// kernel choose (docs/load.md: flow hashes and Linux's even connect() ports).
    pub source_port_seed: Option<u64>,
    /// A warm load: every origin primed first (see `Loader::prime`), so that the measured
    /// load resumes the TLS sessions and sends QUIC 0-RTT.
    pub warm: bool,
}

/// Chromium's TCP keepalive (`kTCPKeepAliveSeconds`, 45 s): a server that dropped a connection
/// silently (a socket it closed with unacknowledged data, which the kernel then gave up) answers
/// the probe with a reset, and the request waiting on it fails and is resent
/// ([`LoadOptions`], docs/load.md) instead of waiting for the load's timeout.
pub const CHROMIUM_TCP_KEEPALIVE: Duration = Duration::from_secs(45);

/// Chromium's TCP connect timeout (see [`LoadOptions::connect_timeout`]).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(240);

/// Chromium's QUIC handshake timeout (see [`LoadOptions::quic_handshake_timeout`]).
pub const DEFAULT_QUIC_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Most priming connections per origin of a warm load: rustls keeps up to 8 TLS 1.3 tickets
/// per server, so more would not resume more connections.
pub const PRIME_MAX_CONNECTIONS: u32 = 8;

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            mode: Mode { base: "h2", protocol: Protocol::H2, transport: Transport::Tcp, pool: Pool::Fixed(1) },
            scheduler: Scheduler::RoundRobin,
            h1_connections: 6,
            timeout: Duration::from_secs(60),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            quic_handshake_timeout: DEFAULT_QUIC_HANDSHAKE_TIMEOUT,
            http_port: 80,
            https_port: 443,
            tcp_cc: None,
            tcp_rcvbuf: None,
            quic: QuicOptions::default(),
            ca: None,
            manifest_label: String::new(),
            instrument: InstrumentOptions::default(),
            source_port_seed: None,
            warm: false,
        }
    }
}

/// Reads a CA certificate, PEM (`ca.pem`) or DER (`ca.der`).
pub fn load_ca(path: &Path) -> Result<CertificateDer<'static>, LoadError> {
    let err = |why: String| LoadError::Ca { path: path.display().to_string(), why };
    let bytes = std::fs::read(path).map_err(|e| err(format!("cannot read: {e}")))?;
    if bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        CertificateDer::from_pem_slice(&bytes).map_err(|e| err(format!("no PEM certificate: {e}")))
    } else if bytes.first() == Some(&0x30) {
        Ok(CertificateDer::from(bytes))
    } else {
        Err(err("neither a PEM nor a DER certificate".into()))
    }
}

/// A checked load, ready to run.
pub struct Loader {
    manifest: Manifest,
    options: LoadOptions,
    connector: Arc<Connector>,
    addrs: Vec<SocketAddr>,
}

impl Loader {
    /// Checks the options against the manifest and builds the TLS and QUIC configurations.
    /// No network I/O.
    pub fn new(manifest: Manifest, options: LoadOptions) -> Result<Loader, LoadError> {
        if options.h1_connections == 0 || options.h1_connections > 64 {
            return Err(LoadError::Option { option: "--h1-connections", why: format!("{} is not from 1 to 64", options.h1_connections) });
        }
        if options.timeout.is_zero() {
            return Err(LoadError::Option { option: "--timeout-ms", why: "must be positive".into() });
        }
        if options.connect_timeout.is_zero() {
            return Err(LoadError::Option { option: "--connect-timeout-ms", why: "must be positive".into() });
        }
        if options.quic_handshake_timeout.is_zero() {
            return Err(LoadError::Option { option: "--quic-handshake-timeout-ms", why: "must be positive".into() });
        }
        let protocol = options.mode.protocol;
        let tls = match (protocol.alpn(), &options.ca) {
            (None, _) => None,
            (Some(_), None) => return Err(LoadError::Option { option: "--ca", why: format!("mode {} uses TLS and needs the lab's CA", options.mode) }),
            (Some(_), Some(ca)) => {
                // QUIC early data needs a session to resume: only warm loads (after a priming
                // connection) send it.
                let sessions = if protocol == Protocol::H3 && options.warm { Sessions::ResumeWithEarlyData } else { Sessions::Resume };
                Some(client::tls_config(Trust::Ca(ca), protocol, sessions).map_err(|e| LoadError::Option { option: "--ca", why: e.to_string() })?)
            }
        };
        let tcp = TcpOptions {
            congestion: options.tcp_cc.clone(),
            mptcp: options.mode.transport == Transport::Mptcp,
            rcvbuf: options.tcp_rcvbuf,
            notsent_lowat: None,
            keepalive: Some(CHROMIUM_TCP_KEEPALIVE),
        };
        let connector = Connector::new(protocol, tls, tcp, &options.quic)
            .map_err(|e| LoadError::Option { option: e.option(), why: e.to_string() })?
            .with_instrument(options.instrument.clone())
            .with_source_port_seed(options.source_port_seed);
        let port = if protocol == Protocol::H1c { options.http_port } else { options.https_port };
        let addrs = manifest.origins.iter().map(|o| SocketAddr::new(o.address.into(), port)).collect();
        Ok(Loader { manifest, options, connector: Arc::new(connector), addrs })
    }

    /// How long one connection attempt may take: the QUIC handshake timeout in QUIC modes, the
    /// TCP connect timeout otherwise.
    pub(crate) fn set_up_timeout(&self) -> Duration {
        if self.options.mode.transport == Transport::Quic {
            self.options.quic_handshake_timeout
        } else {
            self.options.connect_timeout
        }
    }

    /// The effective configuration.
    pub fn config(&self) -> LoadConfig {
        let o = &self.options;
        LoadConfig {
            manifest: o.manifest_label.clone(),
            page: self.manifest.name.clone(),
            mode: o.mode.to_string(),
            scheduler: o.scheduler,
            h1_connections: o.h1_connections,
            timeout_ms: o.timeout.as_millis() as u64,
            connect_timeout_ms: o.connect_timeout.as_millis() as u64,
            quic_handshake_timeout_ms: Some(o.quic_handshake_timeout.as_millis() as u64),
            tcp_cc: o.tcp_cc.clone(),
            quic: o.quic.config(),
            http_port: o.http_port,
            https_port: o.https_port,
            h2_stream_window: H2_STREAM_WINDOW,
            h2_connection_window: H2_CONNECTION_WINDOW,
            instrument: o.instrument.config(),
            source_port_seed: o.source_port_seed,
            tcp_rcvbuf: o.tcp_rcvbuf,
            warm: o.warm,
        }
    }

    /// Loads the page once: from a cold start, or warm (`warm`: after priming every origin's
    /// TLS session). Never fails: problems on the wire end up in the result (`status`, `error`,
    /// per object and per connection; a failed priming connection fails nothing, its origin
    /// just loads cold).
    pub async fn run(&self) -> LoadResult {
        if self.options.warm {
            self.prime().await;
        }
        engine::run(self).await
    }

    /// Primes every origin: as many concurrent connections as the measured load may open to it
    /// (up to [`PRIME_MAX_CONNECTIONS`]), each with one request for `/empty` read to the end (so
    /// the client has the server's session tickets), then closed. A TLS 1.3 ticket resumes one
    /// connection and servers send a few per connection (ours and nginx's: 2), so one priming
    /// connection per measured one leaves a ticket for each. Not measured, not instrumented,
    /// kernel-chosen source ports; the session store is the measured load's.
    async fn prime(&self) {
        let connector = Arc::new(self.connector.unmeasured());
        let per_origin = match self.options.mode.pool {
            mode::Pool::OnDemand => self.options.h1_connections,
            mode::Pool::Fixed(n) => n,
        }
        .min(PRIME_MAX_CONNECTIONS);
        let scheme = if self.options.mode.protocol == Protocol::H1c { "http" } else { "https" };
        let mut primers = tokio::task::JoinSet::new();
        for (origin, addr) in self.manifest.origins.iter().zip(&self.addrs) {
            for _ in 0..per_origin {
                let (connector, hostname, addr, timeout) = (connector.clone(), origin.hostname.clone(), *addr, self.set_up_timeout());
                primers.spawn(async move {
                    let Ok(connected) = client::within(timeout, addr, connector.connect(&hostname, addr)).await else { return };
                    if let Ok(uri) = format!("{scheme}://{hostname}/empty").parse() {
                        let target = fetch::Target { uri, host: hostname, expected: 0 };
                        let _ = tokio::time::timeout(timeout, fetch::fetch(connected.sender, target, Arc::new(AtomicU64::new(0)))).await;
                    }
                    for driver in connected.drivers {
                        driver.abort();
                    }
                    if let Some(endpoint) = connected.endpoint {
                        endpoint.close(quinn::VarInt::from_u32(0), b"primed");
                        let _ = tokio::time::timeout(Duration::from_millis(200), endpoint.wait_idle()).await;
                    }
                });
            }
        }
        while primers.join_next().await.is_some() {}
    }
}
