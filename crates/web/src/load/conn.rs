//! One connection of the page-load engine: set-up (TCP or MPTCP + TLS + HTTP/1.1 or HTTP/2,
//! cleartext HTTP/1.1, QUIC + HTTP/3) and fetching one object over it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::body::Body;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

use super::mode::{Protocol, Transport};
use crate::instrument::{self, InstrumentOptions, Role, SamplerHandle};
use crate::transport::{tcp_connect_from, QuicOptions, TcpOptions, TransportError};

/// HTTP/2 initial stream window (`SETTINGS_INITIAL_WINDOW_SIZE`), as Chrome: 6 MiB.
pub const H2_STREAM_WINDOW: u32 = 6 * 1024 * 1024;
/// HTTP/2 connection window (raised by a `WINDOW_UPDATE` on stream 0), as Chrome: 15 MiB.
pub const H2_CONNECTION_WINDOW: u32 = 15 * 1024 * 1024;
/// HTTP/2 `SETTINGS_HEADER_TABLE_SIZE`, as Chrome.
const H2_HEADER_TABLE: u32 = 64 * 1024;
/// HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE`, as Chrome.
const H2_MAX_HEADER_LIST: u32 = 256 * 1024;

const USER_AGENT: &str = concat!("protolab-load/", env!("CARGO_PKG_VERSION"));

/// What every connection of one load shares.
pub(crate) struct Connector {
    pub protocol: Protocol,
    pub transport: Transport,
    pub tcp: TcpOptions,
    /// TLS with the mode's ALPN (TLS modes over TCP).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// QUIC client configuration (h3 modes).
    pub quic: Option<quinn::ClientConfig>,
    /// The QUIC options it was made from (a connection with a qlog gets its own transport).
    pub quic_options: QuicOptions,
    /// Samples and qlog per connection.
    pub instrument: InstrumentOptions,
    /// Source ports drawn from this seeded generator instead of the kernel's choice.
    pub source_ports: Option<SourcePorts>,
    /// QUIC: send the first requests as 0-RTT data when a resumable session allows it.
    pub early_data: bool,
}

/// Seeded source ports from the ephemeral range (`--source-port-seed`), so that a flow hash
/// over the 5-tuple spreads connections as it did before Linux chose even ports for connect().
pub(crate) struct SourcePorts {
    rng: std::sync::Mutex<rand_chacha::ChaCha8Rng>,
    range: (u16, u16),
}

/// Tries before giving up on finding a free source port.
const SOURCE_PORT_TRIES: usize = 32;

impl SourcePorts {
    pub fn new(seed: u64) -> SourcePorts {
        use rand::SeedableRng;
        SourcePorts { rng: std::sync::Mutex::new(rand_chacha::ChaCha8Rng::seed_from_u64(seed)), range: crate::transport::ephemeral_port_range() }
    }

    fn next(&self) -> u16 {
        use rand::Rng;
        // A poisoned lock only means another draw panicked, which random_range does not.
        match self.rng.lock() {
            Ok(mut rng) => rng.random_range(self.range.0..=self.range.1),
            Err(poisoned) => poisoned.into_inner().random_range(self.range.0..=self.range.1),
        }
    }
}

/// A request sender of an established connection; `B` is the request body type (bulk uploads
/// stream one; the page-load engine sends none).
pub(crate) enum Sender<B = Empty<Bytes>> {
    H1(http1::SendRequest<B>),
    H2(http2::SendRequest<B>),
    H3(h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>),
}

impl<B> Sender<B> {
    /// A sender for another concurrent request (HTTP/2 and HTTP/3); HTTP/1.1 has none.
    pub fn clone_multiplexed(&self) -> Option<Sender<B>> {
        match self {
            Sender::H1(_) => None,
            Sender::H2(s) => Some(Sender::H2(s.clone())),
            Sender::H3(s) => Some(Sender::H3(s.clone())),
        }
    }

    /// Whether the connection is known to be gone.
    pub fn is_closed(&self) -> bool {
        match self {
            Sender::H1(s) => s.is_closed(),
            Sender::H2(s) => s.is_closed(),
            Sender::H3(_) => false,
        }
    }
}

/// An established connection.
pub(crate) struct Connected {
    pub sender: Sender,
    pub local: Option<SocketAddr>,
    /// When TCP connected (TCP modes), to report the TCP part of the handshake.
    pub tcp_connected: Option<Instant>,
    /// A duplicate of the MPTCP socket, to read `MPTCP_INFO` while the connection lives.
    pub mptcp_fd: Option<OwnedFd>,
    /// Tasks driving the connection; aborted when the load ends.
    pub drivers: Vec<JoinHandle<()>>,
    /// The QUIC endpoint (one UDP socket per connection, as a browser), closed at the end.
    pub endpoint: Option<quinn::Endpoint>,
    /// The connection's id in sample and qlog file names (`instrument::connection_id`).
    pub conn_id: String,
    /// The sampler of this connection, when samples are asked for.
    pub sampler: Option<SamplerHandle>,
    /// The qlog file, when qlogs are asked for.
    pub qlog: Option<std::path::PathBuf>,
    /// Whether the TLS session was resumed (TCP: rustls' handshake kind; QUIC: a session ticket
    /// was used for 0-RTT). None: not TLS.
    pub resumed: Option<bool>,
    /// QUIC 0-RTT: 1 once the server accepted the early data, 2 if it rejected it, 0 pending.
    pub zero_rtt: Option<Arc<AtomicU8>>,
}

impl Connector {
    /// Opens a connection to `addr` for origin `hostname` (SNI and certificate name).
    pub async fn connect(&self, hostname: &str, addr: SocketAddr) -> Result<Connected, String> {
        match self.transport {
            Transport::Quic => self.connect_quic(hostname, addr).await,
            Transport::Tcp | Transport::Mptcp => self.connect_tcp(hostname, addr).await,
        }
    }

    async fn connect_tcp(&self, hostname: &str, addr: SocketAddr) -> Result<Connected, String> {
        let tcp = self.tcp_connect(addr).await?;
        let tcp_connected = Some(Instant::now());
        let local = tcp.local_addr().ok();
        let conn_id = instrument::connection_id(self.transport.name(), local, Some(addr));
        let sampler = self
            .instrument
            .tcp_sampler(&tcp, &conn_id, Role::Client, self.transport == Transport::Mptcp)
            .map_err(|e| format!("samples of {conn_id}: {e}"))?;
        let mptcp_fd = match self.transport {
            Transport::Mptcp => Some(tcp.as_fd().try_clone_to_owned().map_err(|e| format!("dup of the MPTCP socket: {e}"))?),
            _ => None,
        };
        let Some(tls) = &self.tls else {
            let (sender, driver) = http_handshake(self.protocol, tcp).await?;
            return Ok(Connected { sender, local, tcp_connected, mptcp_fd, drivers: vec![driver], endpoint: None, conn_id, sampler, qlog: None, resumed: None, zero_rtt: None });
        };
        let stream = tls_connect(tls.clone(), self.protocol, hostname, addr, tcp).await?;
        let resumed = Some(stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed));
        let (sender, driver) = http_handshake(self.protocol, stream).await?;
        Ok(Connected { sender, local, tcp_connected, mptcp_fd, drivers: vec![driver], endpoint: None, conn_id, sampler, qlog: None, resumed, zero_rtt: None })
    }

    async fn tcp_connect(&self, addr: SocketAddr) -> Result<tokio::net::TcpStream, String> {
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

    async fn connect_quic(&self, hostname: &str, addr: SocketAddr) -> Result<Connected, String> {
        let Some(config) = &self.quic else {
            return Err("no QUIC configuration".into());
        };
        let endpoint = match &self.source_ports {
            None => quic_endpoint(addr, 0).map_err(|e| format!("UDP socket: {e}"))?,
            Some(ports) => {
                let mut bound = Err(format!("UDP socket: no free source port in {SOURCE_PORT_TRIES} tries"));
                for _ in 0..SOURCE_PORT_TRIES {
                    match quic_endpoint(addr, ports.next()) {
                        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
                        other => {
                            bound = other.map_err(|e| format!("UDP socket: {e}"));
                            break;
                        }
                    }
                }
                bound?
            }
        };
        let local = endpoint.local_addr().ok().filter(|a| !a.ip().is_unspecified());
        let conn_id = instrument::connection_id("quic", local, Some(addr));
        let mut config = config.clone();
        let mut qlog = None;
        if let Some((stream, path)) = self.instrument.qlog(Role::Client, &conn_id).map_err(|e| format!("qlog of {conn_id}: {e}"))? {
            let mut transport = self.quic_options.transport_config().map_err(|e| e.to_string())?;
            transport.qlog_stream(Some(stream));
            config.transport_config(Arc::new(transport));
            qlog = Some(path);
        }
        let q = quic_connect(endpoint, config, hostname, addr, self.early_data).await?;
        let sampler = self
            .instrument
            .quic_sampler(&q.conn, &conn_id, Role::Client, &self.quic_options.controller.given)
            .map_err(|e| format!("samples of {conn_id}: {e}"))?;
        Ok(Connected {
            sender: Sender::H3(q.sender),
            local: q.local,
            tcp_connected: None,
            mptcp_fd: None,
            drivers: vec![q.driver],
            endpoint: Some(q.endpoint),
            conn_id,
            sampler,
            qlog,
            resumed: Some(q.zero_rtt.is_some()),
            zero_rtt: q.zero_rtt,
        })
    }
}

/// TLS over a connected TCP stream with SNI `hostname`, requiring the ALPN of `protocol`.
pub(crate) async fn tls_connect(
    tls: Arc<rustls::ClientConfig>,
    protocol: Protocol,
    hostname: &str,
    addr: SocketAddr,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, String> {
    let name = ServerName::try_from(hostname.to_string()).map_err(|e| format!("{hostname:?} is not a TLS server name: {e}"))?;
    let stream = TlsConnector::from(tls).connect(name, tcp).await.map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
    let negotiated = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    check_alpn(protocol, negotiated.as_deref(), addr)?;
    Ok(stream)
}

/// The HTTP/2 (`protocol` H2) or HTTP/1.1 client handshake over `io`, with Chrome's HTTP/2
/// windows; the connection is driven by a spawned task (the returned handle).
pub(crate) async fn http_handshake<T, B>(protocol: Protocol, io: T) -> Result<(Sender<B>, JoinHandle<()>), String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    B: Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = TokioIo::new(io);
    if protocol == Protocol::H2 {
        let (sender, conn) = http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(H2_STREAM_WINDOW)
            .initial_connection_window_size(H2_CONNECTION_WINDOW)
            .adaptive_window(false)
            .header_table_size(H2_HEADER_TABLE)
            .max_header_list_size(H2_MAX_HEADER_LIST)
            .handshake(io)
            .await
            .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
        let driver = tokio::spawn(async move {
            // Errors reach the requests in flight; nothing else to do with them here.
            let _ = conn.await;
        });
        Ok((Sender::H2(sender), driver))
    } else {
        let (sender, conn) = http1::Builder::new().handshake(io).await.map_err(|e| format!("HTTP/1.1 handshake: {e}"))?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok((Sender::H1(sender), driver))
    }
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
    /// 0-RTT was attempted: whether the server accepted it (see [`Connected::zero_rtt`]).
    pub zero_rtt: Option<Arc<AtomicU8>>,
}

/// A client endpoint (one UDP socket) for a connection to `addr`, bound to the source address
/// the route to `addr` picks and to `port` (0: the kernel's choice), so that results and
/// samples name the local address as TCP connections do.
pub(crate) fn quic_endpoint(addr: SocketAddr, port: u16) -> std::io::Result<quinn::Endpoint> {
    let ip = route_source(addr).unwrap_or(match addr {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    });
    quinn::Endpoint::client(SocketAddr::new(ip, port))
}

/// QUIC from `endpoint` to `addr` with `config` (ALPN `h3` required), then the HTTP/3 set-up.
/// On failure the endpoint is closed.
pub(crate) async fn quic_connect(
    endpoint: quinn::Endpoint,
    config: quinn::ClientConfig,
    hostname: &str,
    addr: SocketAddr,
    early_data: bool,
) -> Result<QuicConnected, String> {
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
        let driver = tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok::<_, String>((conn, sender, driver))
    }
    .await;
    match result {
        Ok((conn, sender, driver)) => {
            let local = endpoint.local_addr().ok().filter(|a| !a.ip().is_unspecified());
            Ok(QuicConnected { endpoint, conn, sender, driver, local, zero_rtt })
        }
        Err(e) => {
            endpoint.close(quinn::VarInt::from_u32(0), b"");
            Err(e)
        }
    }
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

fn check_alpn(protocol: Protocol, negotiated: Option<&[u8]>, addr: SocketAddr) -> Result<(), String> {
    let want = protocol.alpn();
    if want.is_some() && negotiated != want {
        let shown = |p: Option<&[u8]>| p.map_or_else(|| "none".to_string(), |p| format!("{:?}", String::from_utf8_lossy(p)));
        return Err(format!("{addr} negotiated ALPN {}, the mode needs {}", shown(negotiated), shown(want)));
    }
    Ok(())
}

/// What to request.
pub(crate) struct Target {
    /// `scheme://authority/path` (HTTP/2 and HTTP/3 use it whole; HTTP/1.1 the path and `Host`).
    pub uri: Uri,
    /// `Host` header value.
    pub host: String,
    /// Expected body size.
    pub expected: u64,
}

/// The outcome of one fetch.
pub(crate) struct Fetched {
    pub started: Option<Instant>,
    pub first_byte: Option<Instant>,
    pub finished: Instant,
    pub status: Option<u16>,
    pub bytes: u64,
    pub error: Option<String>,
}

/// Fetches one object; body bytes are added to `received` as they arrive. Gives the sender back
/// (HTTP/1.1 reuses it for the next request).
pub(crate) async fn fetch(mut sender: Sender, target: Target, received: Arc<AtomicU64>) -> (Fetched, Sender) {
    let mut out = Fetched { started: None, first_byte: None, finished: Instant::now(), status: None, bytes: 0, error: None };
    let result = match &mut sender {
        Sender::H1(s) => fetch_hyper1(s, &target, &received, &mut out).await,
        Sender::H2(s) => fetch_hyper2(s, &target, &received, &mut out).await,
        Sender::H3(s) => fetch_h3(s, &target, &received, &mut out).await,
    };
    out.finished = Instant::now();
    out.error = match result {
        Err(e) => Some(e),
        Ok(()) => match out.status {
            Some(200) if out.bytes == target.expected => None,
            Some(200) => Some(format!("size mismatch: got {} bytes, the manifest says {}", out.bytes, target.expected)),
            Some(s) => Some(format!("HTTP status {s}")),
            None => Some("no response".into()),
        },
    };
    (out, sender)
}

fn request(uri: Uri, host: Option<&str>) -> Result<Request<Empty<Bytes>>, String> {
    let mut b = Request::get(uri).header(http::header::USER_AGENT, USER_AGENT).header(http::header::ACCEPT, "*/*");
    if let Some(h) = host {
        b = b.header(http::header::HOST, h);
    }
    b.body(Empty::new()).map_err(|e| format!("request: {e}"))
}

async fn read_hyper_body(
    response: hyper::Response<hyper::body::Incoming>,
    received: &AtomicU64,
    out: &mut Fetched,
) -> Result<(), String> {
    out.first_byte = Some(Instant::now());
    out.status = Some(response.status().as_u16());
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("response body: {e}"))?;
        if let Some(data) = frame.data_ref() {
            out.bytes += data.len() as u64;
            received.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
    }
    Ok(())
}

async fn fetch_hyper1(s: &mut http1::SendRequest<Empty<Bytes>>, t: &Target, received: &AtomicU64, out: &mut Fetched) -> Result<(), String> {
    s.ready().await.map_err(|e| format!("connection: {e}"))?;
    let path = t.uri.path_and_query().map_or("/", |p| p.as_str());
    let uri: Uri = path.parse().map_err(|e| format!("request target {path:?}: {e}"))?;
    let req = request(uri, Some(&t.host))?;
    out.started = Some(Instant::now());
    let response = s.send_request(req).await.map_err(|e| format!("request: {e}"))?;
    read_hyper_body(response, received, out).await
}

async fn fetch_hyper2(s: &mut http2::SendRequest<Empty<Bytes>>, t: &Target, received: &AtomicU64, out: &mut Fetched) -> Result<(), String> {
    s.ready().await.map_err(|e| format!("connection: {e}"))?;
    let req = request(t.uri.clone(), None)?;
    out.started = Some(Instant::now());
    let response = s.send_request(req).await.map_err(|e| format!("request: {e}"))?;
    read_hyper_body(response, received, out).await
}

async fn fetch_h3(
    s: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    t: &Target,
    received: &AtomicU64,
    out: &mut Fetched,
) -> Result<(), String> {
    let req = http::Request::get(t.uri.clone())
        .header(http::header::USER_AGENT, USER_AGENT)
        .header(http::header::ACCEPT, "*/*")
        .body(())
        .map_err(|e| format!("request: {e}"))?;
    out.started = Some(Instant::now());
    let mut stream = s.send_request(req).await.map_err(|e| format!("request: {e}"))?;
    finish_h3_request(&mut stream).await?;
    let response = stream.recv_response().await.map_err(|e| format!("response: {e}"))?;
    out.first_byte = Some(Instant::now());
    out.status = Some(response.status().as_u16());
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| format!("response body: {e}"))? {
        let n = chunk.remaining();
        chunk.advance(n);
        out.bytes += n as u64;
        received.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// Ends the request side of an HTTP/3 request stream. A server that answers without reading
/// the rest of the request may stop the stream before the client's FIN (RFC 9114 §4.1: the
/// response still counts). protolab's server does so for every GET: it drops the empty body at
/// once, and quinn then sends STOP_SENDING with code 0. So a stop by the peer is no error here;
/// the response (and, for uploads, the server's byte count) decides.
pub(crate) async fn finish_h3_request(stream: &mut h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>) -> Result<(), String> {
    match stream.finish().await {
        Ok(()) | Err(h3::error::StreamError::RemoteTerminate { .. }) => Ok(()),
        Err(e) => Err(format!("request: {e}")),
    }
}

/// A connect attempt bounded by `timeout`.
pub(crate) async fn connect_within(connector: &Connector, hostname: &str, addr: SocketAddr, timeout: Duration) -> Result<Connected, String> {
    match tokio::time::timeout(timeout, connector.connect(hostname, addr)).await {
        Ok(r) => r,
        Err(_) => Err(format!("connect to {addr}: no connection within {} ms", timeout.as_millis())),
    }
}
