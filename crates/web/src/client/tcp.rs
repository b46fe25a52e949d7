//! A client connection over TCP (or MPTCP): the socket with its options from a seeded source
//! port if asked, the connection's instrumentation hooks, then TLS and the HTTP/1.1 or HTTP/2
//! handshake over it.

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use hyper::body::Body;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::rustls;

use super::http::{http_handshake, Sender};
use super::ports::SOURCE_PORT_TRIES;
use super::tls::tls_connect;
use super::Connector;
use crate::instrument::{self, Role, SamplerHandle};
use crate::load::mode::Transport;
use crate::transport::{tcp_connect_from, TransportError};

/// A connected TCP (or MPTCP) socket with its instrumentation.
pub(crate) struct TcpOpened {
    pub stream: TcpStream,
    /// When TCP connected, to report the TCP part of the handshake.
    pub connected_at: Instant,
    pub local: Option<SocketAddr>,
    /// The connection's id in sample file names (`instrument::connection_id`).
    pub conn_id: String,
    /// The sampler of this connection, when samples are asked for.
    pub sampler: Option<SamplerHandle>,
    /// A duplicate of the socket, to read `TCP_INFO` or `MPTCP_INFO` while the connection lives.
    pub fd: OwnedFd,
}

/// HTTP over an established TCP connection.
pub(crate) struct HttpOverTcp<B> {
    pub sender: Sender<B>,
    /// Drives the HTTP connection.
    pub driver: JoinHandle<()>,
    /// Whether the TLS session was resumed (rustls' handshake kind); None without TLS.
    pub resumed: Option<bool>,
    /// How long the TLS handshake took; None without TLS.
    pub tls_handshake: Option<Duration>,
}

impl Connector {
    /// TCP (or MPTCP) to `addr` with the connector's socket options and source ports, with a
    /// sampler if samples are asked for.
    pub(crate) async fn open_tcp(&self, addr: SocketAddr) -> Result<TcpOpened, String> {
        let stream = self.tcp_connect(addr).await?;
        let connected_at = Instant::now();
        let local = stream.local_addr().ok();
        let conn_id = instrument::connection_id(self.transport.name(), local, Some(addr));
        let mptcp = self.transport == Transport::Mptcp;
        let sampler = self.instrument.tcp_sampler(&stream, &conn_id, Role::Client, mptcp).map_err(|e| format!("samples of {conn_id}: {e}"))?;
        let carrier = if mptcp { "MPTCP" } else { "TCP" };
        let fd = stream.as_fd().try_clone_to_owned().map_err(|e| format!("dup of the {carrier} socket: {e}"))?;
        Ok(TcpOpened { stream, connected_at, local, conn_id, sampler, fd })
    }

    async fn tcp_connect(&self, addr: SocketAddr) -> Result<TcpStream, String> {
        let Some(ports) = &self.source_ports else {
            return tcp_connect_from(addr, &self.tcp, None).await.map_err(|e| e.to_string());
        };
        for _ in 0..SOURCE_PORT_TRIES {
            match tcp_connect_from(addr, &self.tcp, Some(ports.next())).await {
                Err(TransportError::Socket { op: "bind" | "connect", error, .. }) if error.kind() == std::io::ErrorKind::AddrInUse => continue,
                other => return other.map_err(|e| e.to_string()),
            }
        }
        Err(format!("connect to {addr}: no free source port in {SOURCE_PORT_TRIES} tries"))
    }

    /// TLS (when the protocol has it) with SNI `hostname`, then the HTTP handshake, over `tcp`
    /// connected to `addr`.
    pub(crate) async fn http_over_tcp<B>(&self, hostname: &str, addr: SocketAddr, tcp: TcpStream) -> Result<HttpOverTcp<B>, String>
    where
        B: Body + Send + Unpin + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let Some(tls) = &self.tls else {
            let (sender, driver) = http_handshake(self.protocol, tcp).await?;
            return Ok(HttpOverTcp { sender, driver, resumed: None, tls_handshake: None });
        };
        let tls_start = Instant::now();
        let stream = tls_connect(tls.clone(), self.protocol, hostname, addr, tcp).await?;
        let tls_handshake = Some(tls_start.elapsed());
        let resumed = Some(stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed));
        let (sender, driver) = http_handshake(self.protocol, stream).await?;
        Ok(HttpOverTcp { sender, driver, resumed, tls_handshake })
    }
}
