//! A client connection over QUIC: quinn's configuration (TLS with ALPN `h3`, the transport
//! options), one endpoint (UDP socket) per connection bound to the route's source address and a
//! seeded port if asked, the handshake (0-RTT when allowed), the ALPN check and the HTTP/3
//! set-up, with the connection's qlog and sampler.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::task::JoinHandle;
use tokio_rustls::rustls;

use super::ports::SOURCE_PORT_TRIES;
use super::tls::check_alpn;
use super::{ClientSetupError, Connector};
use crate::instrument::{self, Role, SamplerHandle};
use crate::load::mode::Protocol;
use crate::transport::QuicOptions;

/// What every QUIC connection of a client shares: quinn's configuration and the options it was
/// made from (a connection with a qlog gets a transport of its own).
#[derive(Clone)]
pub(crate) struct QuicSetup {
    config: quinn::ClientConfig,
    options: QuicOptions,
}

impl QuicSetup {
    /// quinn's client configuration over `tls` (whose session store it shares) with the
    /// transport of `options`.
    pub fn new(tls: &rustls::ClientConfig, options: &QuicOptions) -> Result<QuicSetup, ClientSetupError> {
        let transport = options.transport_config()?;
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls.clone()).map_err(|e| ClientSetupError::TlsForQuic(e.to_string()))?;
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(Arc::new(transport));
        Ok(QuicSetup { config, options: options.clone() })
    }

    /// The configuration of one connection: the shared one, or one whose transport writes `qlog`.
    fn for_connection(&self, qlog: Option<quinn::QlogStream>) -> Result<quinn::ClientConfig, String> {
        let mut config = self.config.clone();
        if let Some(stream) = qlog {
            let mut transport = self.options.transport_config().map_err(|e| e.to_string())?;
            transport.qlog_stream(Some(stream));
            config.transport_config(Arc::new(transport));
        }
        Ok(config)
    }
}

/// A bound endpoint with the configuration of the connection it is for.
pub(crate) struct QuicOpened {
    endpoint: quinn::Endpoint,
    config: quinn::ClientConfig,
    /// The connection's id in sample and qlog file names (`instrument::connection_id`).
    pub conn_id: String,
    /// The qlog file, when qlogs are asked for.
    pub qlog: Option<PathBuf>,
}

/// An established QUIC connection with its HTTP/3 session.
pub(crate) struct QuicConnected {
    /// The client endpoint (one UDP socket per connection); close it when done.
    pub endpoint: quinn::Endpoint,
    pub conn: quinn::Connection,
    pub sender: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    /// Drives the HTTP/3 connection.
    pub driver: JoinHandle<()>,
    /// The endpoint's bound address (the route's source address).
    pub local: Option<SocketAddr>,
    /// 0-RTT was attempted: 1 once the server accepted the early data, 2 if it rejected it, 0
    /// pending.
    pub zero_rtt: Option<Arc<AtomicU8>>,
    pub conn_id: String,
    /// The sampler of this connection, when samples are asked for.
    pub sampler: Option<SamplerHandle>,
    pub qlog: Option<PathBuf>,
}

impl Connector {
    /// An endpoint for a connection to `addr` (source ports as the connector says), its
    /// connection id, and its configuration with a qlog if qlogs are asked for.
    pub(crate) fn open_quic(&self, addr: SocketAddr) -> Result<QuicOpened, String> {
        let Some(setup) = &self.quic else {
            return Err("no QUIC configuration".into());
        };
        let endpoint = self.bind_endpoint(addr)?;
        let local = endpoint.local_addr().ok().filter(|a| !a.ip().is_unspecified());
        let conn_id = instrument::connection_id("quic", local, Some(addr));
        let (stream, qlog) = match self.instrument.qlog(Role::Client, &conn_id).map_err(|e| format!("qlog of {conn_id}: {e}"))? {
            Some((stream, path)) => (Some(stream), Some(path)),
            None => (None, None),
        };
        let config = setup.for_connection(stream)?;
        Ok(QuicOpened { endpoint, config, conn_id, qlog })
    }

    fn bind_endpoint(&self, addr: SocketAddr) -> Result<quinn::Endpoint, String> {
        let Some(ports) = &self.source_ports else {
            return quic_endpoint(addr, 0).map_err(|e| format!("UDP socket: {e}"));
        };
        for _ in 0..SOURCE_PORT_TRIES {
            match quic_endpoint(addr, ports.next()) {
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
                other => return other.map_err(|e| format!("UDP socket: {e}")),
            }
        }
        Err(format!("UDP socket: no free source port in {SOURCE_PORT_TRIES} tries"))
    }

    /// The QUIC handshake from `opened` to `addr` (SNI `hostname`; 0-RTT if the connector
    /// allows early data and a session can be resumed), the HTTP/3 set-up, then the sampler.
    pub(crate) async fn quic_handshake(&self, opened: QuicOpened, hostname: &str, addr: SocketAddr) -> Result<QuicConnected, String> {
        let QuicOpened { endpoint, config, conn_id, qlog } = opened;
        let feedback_controller = self.quic.as_ref().map(|setup| &setup.options.controller);
        let h3 = quic_connect(endpoint, config, hostname, addr, self.early_data, feedback_controller).await?;
        let controller = self.quic.as_ref().map_or("", |setup| setup.options.controller.given.as_str());
        let sampler = self.instrument.quic_sampler(&h3.conn, &conn_id, Role::Client, controller).map_err(|e| format!("samples of {conn_id}: {e}"))?;
        let H3Session { endpoint, conn, sender, driver, local, zero_rtt } = h3;
        Ok(QuicConnected { endpoint, conn, sender, driver, local, zero_rtt, conn_id, sampler, qlog })
    }
}

/// A client endpoint (one UDP socket) for a connection to `addr`, bound to the source address
/// the route to `addr` picks and to `port` (0: the kernel's choice), so that results and
/// samples name the local address as TCP connections do.
fn quic_endpoint(addr: SocketAddr, port: u16) -> std::io::Result<quinn::Endpoint> {
    let ip = route_source(addr).unwrap_or(match addr {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    });
    quinn::Endpoint::client(SocketAddr::new(ip, port))
}

/// The source address the kernel would use towards `addr` (a connected UDP socket sends
/// nothing; `connect` only picks the route).
fn route_source(addr: SocketAddr) -> Option<IpAddr> {
    let any: SocketAddr = match addr {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = std::net::UdpSocket::bind(any).ok()?;
    socket.connect(addr).ok()?;
    socket.local_addr().ok().map(|a| a.ip()).filter(|ip| !ip.is_unspecified())
}

/// A QUIC connection with its HTTP/3 session, before instrumentation.
struct H3Session {
    endpoint: quinn::Endpoint,
    conn: quinn::Connection,
    sender: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    driver: JoinHandle<()>,
    local: Option<SocketAddr>,
    zero_rtt: Option<Arc<AtomicU8>>,
}

/// QUIC from `endpoint` to `addr` with `config` (ALPN `h3` required), then the HTTP/3 set-up;
/// the task driving HTTP/3 also runs the connection's Sprout-EWMA feedback loop when
/// `controller` takes feedback (`crate::feedback`). On failure the endpoint is closed.
async fn quic_connect(
    endpoint: quinn::Endpoint,
    config: quinn::ClientConfig,
    hostname: &str,
    addr: SocketAddr,
    early_data: bool,
    controller: Option<&cc::ControllerSpec>,
) -> Result<H3Session, String> {
    let mut zero_rtt = None;
    let result = async {
        let connecting = endpoint.connect_with(config, addr, hostname).map_err(|e| format!("QUIC connect to {addr}: {e}"))?;
        let conn = if early_data {
            match connecting.into_0rtt() {
                Ok((conn, accepted)) => {
                    // The connection carries requests at once; the server's verdict comes later.
                    let verdict = Arc::new(AtomicU8::new(0));
                    let set = verdict.clone();
                    tokio::spawn(async move {
                        set.store(if accepted.await { 1 } else { 2 }, Ordering::Relaxed);
                    });
                    zero_rtt = Some(verdict);
                    conn
                }
                // No session to resume: a full handshake.
                Err(connecting) => connecting.await.map_err(|e| format!("QUIC handshake with {addr}: {e}"))?,
            }
        } else {
            connecting.await.map_err(|e| format!("QUIC handshake with {addr}: {e}"))?
        };
        // With 0-RTT the handshake is still under way: the ALPN is the resumed session's,
        // which offered h3 only, and a server that picks another fails the handshake.
        if zero_rtt.is_none() {
            let negotiated = conn
                .handshake_data()
                .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
                .and_then(|d| d.protocol);
            check_alpn(Protocol::H3, negotiated.as_deref(), addr)?;
        }
        let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(conn.clone())).await.map_err(|e| format!("HTTP/3 setup: {e}"))?;
        let feedback = controller.and_then(|c| crate::feedback::feedback_loop(&conn, c));
        let driver = tokio::spawn(async move {
            let drive = std::future::poll_fn(|cx| driver.poll_close(cx));
            match feedback {
                // Both end with the connection; aborting the driver stops both.
                Some(feedback) => tokio::select! {
                    _ = drive => {}
                    () = feedback => {}
                },
                None => drop(drive.await),
            }
        });
        Ok::<_, String>((conn, sender, driver))
    }
    .await;
    match result {
        Ok((conn, sender, driver)) => {
            let local = endpoint.local_addr().ok().filter(|a| !a.ip().is_unspecified());
            Ok(H3Session { endpoint, conn, sender, driver, local, zero_rtt })
        }
        Err(e) => {
            endpoint.close(quinn::VarInt::from_u32(0), b"");
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_to_loopback_starts_at_loopback() {
        assert_eq!(route_source("127.0.0.1:443".parse().unwrap()), Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }

    #[test]
    fn a_setup_checks_the_transport_options() {
        let tls = crate::client::tls_config(crate::client::Trust::WebPki, Protocol::H3, crate::client::Sessions::Resume).unwrap();
        assert!(QuicSetup::new(&tls, &QuicOptions::default()).is_ok());
        let bad = QuicOptions { packet_threshold: Some(1), ..Default::default() };
        let e = QuicSetup::new(&tls, &bad).err().unwrap();
        assert_eq!(e.option(), "--quic-*");
        assert!(e.to_string().contains("packet_threshold"), "{e}");
    }
}
