//! The client connection layer of the page-load engine (`load`), bulk transfers (`bulk`) and
//! the responsiveness test (`rpm`): one way from an address to an HTTP request sender.
//!
//! A client builds one `Connector` for all its connections: the rustls configuration from
//! [`tls_config`] (trusted roots, the protocol's ALPN from `Protocol::alpn`, what to do with
//! sessions), the TCP socket options, the QUIC transport options, the instrumentation (samples,
//! qlogs) and seeded source ports. A connection goes through stages, each usable alone:
//!
//! - over TCP: `Connector::open_tcp` connects a TCP or MPTCP socket (options set before the
//!   SYN, source port seeded if asked) and attaches the connection's id, sampler and a duplicate
//!   of the socket (for `TCP_INFO`/`MPTCP_INFO`); `Connector::http_over_tcp` runs TLS (SNI,
//!   the ALPN required) and the HTTP/1.1 or HTTP/2 handshake (Chrome's HTTP/2 windows);
//! - over QUIC: `Connector::open_quic` binds one UDP endpoint per connection (the route's
//!   source address, a seeded port if asked) and prepares quinn's configuration with the
//!   connection's qlog; `Connector::quic_handshake` does the handshake (0-RTT when allowed and
//!   a session can be resumed), checks ALPN `h3`, sets up HTTP/3 and attaches the sampler.
//!
//! `Connector::connect` runs every stage and times them; bulk transfers run them one by one,
//! to record the connection as soon as it exists. What a client then requests (and how it
//! reads responses) stays with the client.

mod http;
mod ports;
mod quic;
mod tcp;
mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::AtomicU8;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hyper::body::Body;
use tokio::task::JoinHandle;
use tokio_rustls::rustls;

pub use self::http::{H2_CONNECTION_WINDOW, H2_STREAM_WINDOW};
pub(crate) use self::http::{finish_h3_request, H3RequestStream, Sender};
use self::ports::SourcePorts;
pub(crate) use self::quic::QuicConnected;
use self::quic::QuicSetup;
pub use self::tls::{tls_config, Sessions, Trust};
use crate::instrument::{InstrumentOptions, SamplerHandle};
use crate::load::mode::{Protocol, Transport};
use crate::transport::{QuicOptions, TcpOptions, TransportError};

/// A client set-up that cannot work; [`ClientSetupError::option`] names the option at fault.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientSetupError {
    /// A QUIC transport option out of range.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The TLS configuration does not suit QUIC (no TLS 1.3 suite QUIC can use).
    #[error("TLS configuration unusable for QUIC: {0}")]
    TlsForQuic(String),
    /// QUIC without a TLS configuration.
    #[error("QUIC needs TLS")]
    NoTlsForQuic,
}

impl ClientSetupError {
    /// The command-line option to blame.
    pub fn option(&self) -> &'static str {
        match self {
            ClientSetupError::Transport(_) => "--quic-*",
            ClientSetupError::TlsForQuic(_) => "--ca",
            ClientSetupError::NoTlsForQuic => "--mode",
        }
    }
}

/// What every connection of one client shares (see the module documentation).
pub(crate) struct Connector {
    /// HTTP version.
    protocol: Protocol,
    /// QUIC for h3, else MPTCP or TCP as the TCP options say.
    transport: Transport,
    tcp: TcpOptions,
    /// TLS with the protocol's ALPN (None: cleartext).
    tls: Option<Arc<rustls::ClientConfig>>,
    /// quinn's configuration (h3).
    quic: Option<QuicSetup>,
    /// Samples and qlog per connection.
    instrument: InstrumentOptions,
    /// Source ports drawn from this seeded generator instead of the kernel's choice.
    source_ports: Option<SourcePorts>,
    /// QUIC: send the first requests as 0-RTT data when a resumable session allows it (as the
    /// TLS configuration says, see [`Sessions`]).
    early_data: bool,
}

impl Connector {
    /// Connections speaking `protocol` with `tls` (None: cleartext, refused for h3), over QUIC
    /// for h3 (with `quic`'s transport), else over MPTCP or TCP as `tcp` says; QUIC sends 0-RTT
    /// data when `tls` allows early data. No instrumentation and kernel-chosen source ports
    /// until the `with_` methods say otherwise.
    pub fn new(protocol: Protocol, tls: Option<rustls::ClientConfig>, tcp: TcpOptions, quic: &QuicOptions) -> Result<Connector, ClientSetupError> {
        let transport = match protocol {
            Protocol::H3 => Transport::Quic,
            _ if tcp.mptcp => Transport::Mptcp,
            _ => Transport::Tcp,
        };
        let quic = match (transport, &tls) {
            (Transport::Quic, Some(tls)) => Some(QuicSetup::new(tls, quic)?),
            (Transport::Quic, None) => return Err(ClientSetupError::NoTlsForQuic),
            _ => None,
        };
        Ok(Connector {
            protocol,
            transport,
            tcp,
            early_data: tls.as_ref().is_some_and(|c| c.enable_early_data),
            tls: tls.map(Arc::new),
            quic,
            instrument: InstrumentOptions::default(),
            source_ports: None,
        })
    }

    /// Samples and qlogs per connection as `instrument` asks.
    pub fn with_instrument(mut self, instrument: InstrumentOptions) -> Connector {
        self.instrument = instrument;
        self
    }

    /// Source ports drawn by a generator seeded with `seed` (None: the kernel's choice).
    pub fn with_source_port_seed(mut self, seed: Option<u64>) -> Connector {
        self.source_ports = seed.map(SourcePorts::new);
        self
    }

    /// A connector for connections that are not measured but share this one's TLS sessions
    /// (priming them): no instrumentation, kernel-chosen source ports, no early data.
    pub fn unmeasured(&self) -> Connector {
        Connector {
            protocol: self.protocol,
            transport: self.transport,
            tcp: self.tcp.clone(),
            tls: self.tls.clone(),
            quic: self.quic.clone(),
            instrument: InstrumentOptions::default(),
            source_ports: None,
            early_data: false,
        }
    }

    /// Opens a connection to `addr` for origin `hostname` (SNI and certificate name), every
    /// stage of the module documentation in turn.
    pub async fn connect<B>(&self, hostname: &str, addr: SocketAddr) -> Result<Connected<B>, String>
    where
        B: Body + Send + Unpin + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if self.transport == Transport::Quic {
            let opened = self.open_quic(addr)?;
            return Ok(Connected::over_quic(self.quic_handshake(opened, hostname, addr).await?));
        }
        let tcp = self.open_tcp(addr).await?;
        let http = self.http_over_tcp(hostname, addr, tcp.stream).await?;
        Ok(Connected {
            sender: http.sender,
            local: tcp.local,
            tcp_connected: Some(tcp.connected_at),
            tls_handshake: http.tls_handshake,
            tcp_fd: Some(tcp.fd),
            drivers: vec![http.driver],
            endpoint: None,
            quic_conn: None,
            conn_id: tcp.conn_id,
            sampler: tcp.sampler,
            qlog: None,
            resumed: http.resumed,
            zero_rtt: None,
        })
    }
}

/// An established connection, ready for requests.
pub(crate) struct Connected<B = Empty<Bytes>> {
    pub sender: Sender<B>,
    pub local: Option<SocketAddr>,
    /// When TCP connected (TCP modes), to report the TCP part of the handshake.
    pub tcp_connected: Option<Instant>,
    /// TLS over TCP: how long its handshake took.
    pub tls_handshake: Option<Duration>,
    /// TCP: a duplicate of the socket, to read `TCP_INFO` or `MPTCP_INFO` while it lives.
    pub tcp_fd: Option<OwnedFd>,
    /// Tasks driving the connection; abort them when done.
    pub drivers: Vec<JoinHandle<()>>,
    /// The QUIC endpoint (one UDP socket per connection, as a browser); close it when done.
    pub endpoint: Option<quinn::Endpoint>,
    /// QUIC: the connection, for its statistics (the RPM client's upload accounting).
    pub quic_conn: Option<quinn::Connection>,
    /// The connection's id in sample and qlog file names (`instrument::connection_id`).
    pub conn_id: String,
    /// The sampler of this connection, when samples are asked for.
    pub sampler: Option<SamplerHandle>,
    /// The qlog file, when qlogs are asked for.
    pub qlog: Option<PathBuf>,
    /// Whether the TLS session was resumed (TCP: rustls' handshake kind; QUIC: a session ticket
    /// was used for 0-RTT). None: not TLS.
    pub resumed: Option<bool>,
    /// QUIC 0-RTT: 1 once the server accepted the early data, 2 if it rejected it, 0 pending.
    pub zero_rtt: Option<Arc<AtomicU8>>,
}

impl<B> Connected<B> {
    fn over_quic(q: QuicConnected) -> Connected<B> {
        Connected {
            sender: Sender::H3(q.sender),
            local: q.local,
            tcp_connected: None,
            tls_handshake: None,
            tcp_fd: None,
            drivers: vec![q.driver],
            endpoint: Some(q.endpoint),
            quic_conn: Some(q.conn),
            conn_id: q.conn_id,
            sampler: q.sampler,
            qlog: q.qlog,
            resumed: Some(q.zero_rtt.is_some()),
            zero_rtt: q.zero_rtt,
        }
    }
}

/// A connection set-up (`set_up`, to `addr`) bounded by `timeout`.
pub(crate) async fn within<T>(timeout: Duration, addr: SocketAddr, set_up: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    match tokio::time::timeout(timeout, set_up).await {
        Ok(r) => r,
        Err(_) => Err(format!("connect to {addr}: no connection within {} ms", timeout.as_millis())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls(protocol: Protocol, sessions: Sessions) -> Option<rustls::ClientConfig> {
        Some(tls_config(Trust::WebPki, protocol, sessions).unwrap())
    }

    #[test]
    fn the_protocol_and_socket_options_choose_the_transport() {
        let quic = QuicOptions::default();
        let h3 = Connector::new(Protocol::H3, tls(Protocol::H3, Sessions::Resume), TcpOptions::default(), &quic).unwrap();
        assert_eq!(h3.transport, Transport::Quic);
        assert!(h3.quic.is_some());
        let mptcp = TcpOptions { mptcp: true, ..Default::default() };
        let h2 = Connector::new(Protocol::H2, tls(Protocol::H2, Sessions::Resume), mptcp, &quic).unwrap();
        assert_eq!((h2.transport, h2.quic.is_none()), (Transport::Mptcp, true));
        let h1c = Connector::new(Protocol::H1c, None, TcpOptions::default(), &quic).unwrap();
        assert_eq!((h1c.transport, h1c.tls.is_none()), (Transport::Tcp, true));
        let e = Connector::new(Protocol::H3, None, TcpOptions::default(), &quic).err().unwrap();
        assert_eq!((e.option(), e.to_string().as_str()), ("--mode", "QUIC needs TLS"));
    }

    #[test]
    fn early_data_follows_the_sessions_and_unmeasured_connections_send_none() {
        let quic = QuicOptions::default();
        let warm = Connector::new(Protocol::H3, tls(Protocol::H3, Sessions::ResumeWithEarlyData), TcpOptions::default(), &quic)
            .unwrap()
            .with_instrument(InstrumentOptions { qlog_dir: Some("/tmp".into()), ..Default::default() })
            .with_source_port_seed(Some(1));
        assert!(warm.early_data && warm.source_ports.is_some() && warm.instrument.any());
        let primer = warm.unmeasured();
        assert!(!primer.early_data && primer.source_ports.is_none() && !primer.instrument.any());
        // The same TLS configuration, hence the same session store.
        assert!(Arc::ptr_eq(primer.tls.as_ref().unwrap(), warm.tls.as_ref().unwrap()));
        let cold = Connector::new(Protocol::H3, tls(Protocol::H3, Sessions::Resume), TcpOptions::default(), &quic).unwrap();
        assert!(!cold.early_data);
    }
}
