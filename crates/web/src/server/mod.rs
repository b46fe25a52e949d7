//! The multi-origin server (docs/server.md): h1c (and h2c with prior knowledge) on the HTTP
//! port, TLS with ALPN `h2` and `http/1.1` on the HTTPS port, and HTTP/3 (QUIC, ALPN `h3`) on
//! the same port number over UDP, on every listen address. TCP responses carry
//! `Alt-Svc: h3=":<port>"`.
//!
//! Serves manifest objects by (Host or :authority, path) and the synthetic endpoints
//! `GET /bytes?n=N[&rate=BPS]`, `POST /upload`, `GET /empty`. Everything else is 404. Both
//! transports go through the same routing code ([`handle`]). The raw bulk protocol
//! (`crate::raw`) has its own TCP port.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Body;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

use crate::body::{Block, ResponseBody};
use crate::instrument::{self, InstrumentOptions, Role};
use crate::manifest::valid_hostname;
use crate::ratelimit::RequestBucket;
use crate::rpm::endpoints as rpm;
use crate::site::Site;
pub use crate::transport::tcp_congestion_of;
use crate::transport::{tcp_listen, QuicOptions, TcpOptions, TransportError};

mod activity;
mod quic;

use activity::{Activity, ActivityIo, TrackedBody};
use quic::{quic_accept_loop, quic_server_config};

pub use crate::limits::{Limits, BYTES_SEED, MAX_BYTES_N};

/// Server failures (setup only: per-connection errors never end the server).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A listening socket could not be set up.
    #[error("cannot listen on {addr}: {error}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        error: io::Error,
    },
    /// A listening socket could not be set up as asked (congestion control, MPTCP, QUIC
    /// options).
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The instrumentation directories cannot be created.
    #[error("instrumentation: {0}")]
    Instrument(io::Error),
    /// Nothing to listen on.
    #[error("no listen address (give --listen or a manifest with origins)")]
    NoAddress,
    /// The TLS configuration cannot be used for QUIC.
    #[error("HTTP/3: {0}")]
    Quic(String),
}

/// Where and how to listen.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Addresses; each gets the HTTP and the HTTPS port.
    pub listen: Vec<IpAddr>,
    /// h1c port (80; 0 = any free port).
    pub http_port: u16,
    /// TLS port (443; 0 = any free port), on TCP; HTTP/3 listens on UDP with the same number.
    pub https_port: u16,
    /// TCP congestion control of every socket (`reno`, `cubic`, `bbr`); `None` = kernel default.
    pub tcp_congestion: Option<String>,
    /// `TCP_NOTSENT_LOWAT` of every TCP socket, bytes: how much not-yet-sent data the kernel
    /// holds per connection before the server stops writing (None: the kernel's default,
    /// unlimited). A low mark keeps a new response from queueing behind megabytes of data
    /// already committed to the socket (the responsiveness draft's advice for servers).
    pub tcp_notsent_lowat: Option<u32>,
    /// Listen with MPTCP sockets (`IPPROTO_MPTCP`): MPTCP clients get subflows as the
    /// namespace's `ip mptcp` endpoints allow; plain TCP clients still connect (fallback).
    pub mptcp: bool,
    /// QUIC transport of HTTP/3 connections (controller, initial window, loss detection, ACK
    /// frequency). Its idle timeout and stream limit come from `limits`.
    pub quic: QuicOptions,
    /// Per-connection samples and qlog (server side).
    pub instrument: InstrumentOptions,
    /// Port of the raw bulk protocol on TCP (`crate::raw`; 0 = any free port); `None` (the
    /// default here; `protolab-net serve` listens on 5300) = no raw listener.
    pub raw_port: Option<u16>,
    /// Limits.
    pub limits: Limits,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: Vec::new(),
            http_port: 80,
            https_port: 443,
            tcp_congestion: Some("cubic".into()),
            tcp_notsent_lowat: None,
            mptcp: false,
            quic: QuicOptions::default(),
            instrument: InstrumentOptions::default(),
            raw_port: None,
            limits: Limits::default(),
        }
    }
}

/// A view of a server's open connections (see [`Server::open_connections`]).
#[derive(Clone)]
pub struct OpenConnections {
    slots: Arc<Semaphore>,
    max: usize,
}

impl OpenConnections {
    /// Connections open now.
    pub fn count(&self) -> usize {
        self.max.saturating_sub(self.slots.available_permits())
    }
}

/// A bound server, ready to run.
pub struct Server {
    http: Vec<TcpListener>,
    https: Vec<TcpListener>,
    quic: Vec<quinn::Endpoint>,
    raw: Vec<TcpListener>,
    ctx: Arc<Ctx>,
}

struct Ctx {
    site: Arc<Site>,
    bytes_block: Block,
    tls: TlsAcceptor,
    auto: auto::Builder<TokioExecutor>,
    h1: auto::Builder<TokioExecutor>,
    h2: auto::Builder<TokioExecutor>,
    limits: Limits,
    tcp: TcpOptions,
    quic: QuicOptions,
    /// quinn's server configuration (with qlog, a per-connection copy is made from it).
    quic_config: quinn::ServerConfig,
    instrument: InstrumentOptions,
    connections: Arc<Semaphore>,
    /// QUIC handshakes in progress (see `Limits::quic_handshakes_before_retry`).
    handshaking: Arc<std::sync::atomic::AtomicUsize>,
    epoch: Instant,
    /// `Alt-Svc` value per local address (the HTTP/3 port of that address).
    alt_svc: HashMap<IpAddr, HeaderValue>,
}

impl Server {
    /// Binds every listening socket. Must run inside a tokio runtime.
    pub fn bind(options: &ServeOptions, site: Arc<Site>, tls: rustls::ServerConfig) -> Result<Server, ServeError> {
        if options.listen.is_empty() {
            return Err(ServeError::NoAddress);
        }
        let mut listen_addrs = options.listen.clone();
        listen_addrs.sort();
        listen_addrs.dedup();
        let tcp = TcpOptions { congestion: options.tcp_congestion.clone(), mptcp: options.mptcp, rcvbuf: None, notsent_lowat: options.tcp_notsent_lowat, keepalive: None };
        let limits = options.limits.clone();
        let quic_config = quic_server_config(&tls, &limits, &options.quic, None)?;
        let mut http = Vec::new();
        let mut https = Vec::new();
        let mut quic = Vec::new();
        let mut raw = Vec::new();
        let mut alt_svc = HashMap::new();
        for ip in &listen_addrs {
            http.push(tcp_listen(SocketAddr::new(*ip, options.http_port), &tcp)?);
            if let Some(port) = options.raw_port {
                raw.push(tcp_listen(SocketAddr::new(*ip, port), &tcp)?);
            }
            let (tls_listener, udp) = listen_tcp_udp(*ip, options.https_port, &tcp)?;
            let addr = udp.local_addr().map_err(|error| ServeError::Listen { addr: SocketAddr::new(*ip, options.https_port), error })?;
            let endpoint = quinn::Endpoint::new(quinn::EndpointConfig::default(), Some(quic_config.clone()), udp, Arc::new(quinn::TokioRuntime))
                .map_err(|error| ServeError::Listen { addr, error })?;
            if let Some(v) = alt_svc_value(addr.port()) {
                alt_svc.insert(*ip, v);
            }
            https.push(tls_listener);
            quic.push(endpoint);
        }
        // Created once every socket is bound: a server that cannot start leaves no directories.
        options.instrument.prepare().map_err(ServeError::Instrument)?;
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .max_buf_size(limits.max_header_bytes.max(8192))
            .max_headers(limits.max_headers)
            .header_read_timeout(limits.handshake_timeout);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.max_concurrent_streams)
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
            .max_pending_accept_reset_streams(limits.max_pending_accept_reset_streams)
            .max_local_error_reset_streams(1024);
        let ctx = Ctx {
            site,
            bytes_block: Block::new(BYTES_SEED),
            tls: TlsAcceptor::from(Arc::new(tls)),
            h1: builder.clone().http1_only(),
            h2: builder.clone().http2_only(),
            auto: builder,
            connections: Arc::new(Semaphore::new(limits.max_connections)),
            handshaking: Arc::default(),
            limits,
            tcp,
            quic: options.quic.clone(),
            quic_config,
            instrument: options.instrument.clone(),
            epoch: Instant::now(),
            alt_svc,
        };
        Ok(Server { http, https, quic, raw, ctx: Arc::new(ctx) })
    }

    /// Bound HTTP/3 (UDP) addresses.
    pub fn h3_addrs(&self) -> Vec<SocketAddr> {
        self.quic.iter().filter_map(|e| e.local_addr().ok()).collect()
    }

    /// Bound h1c addresses (with the real port when 0 was asked).
    pub fn http_addrs(&self) -> Vec<SocketAddr> {
        self.http.iter().filter_map(|l| l.local_addr().ok()).collect()
    }

    /// Bound TLS addresses.
    pub fn https_addrs(&self) -> Vec<SocketAddr> {
        self.https.iter().filter_map(|l| l.local_addr().ok()).collect()
    }

    /// Bound raw-protocol addresses (empty without a raw port).
    pub fn raw_addrs(&self) -> Vec<SocketAddr> {
        self.raw.iter().filter_map(|l| l.local_addr().ok()).collect()
    }

    /// How many connections (TCP, QUIC and raw) the server holds open right now, also after
    /// `run` took the server (tests wait for it to settle before measuring memory).
    pub fn open_connections(&self) -> OpenConnections {
        OpenConnections { slots: self.ctx.connections.clone(), max: self.ctx.limits.max_connections }
    }

    /// The listening sockets (h1c, TLS, then raw), e.g. to inspect socket options.
    pub fn listeners(&self) -> impl Iterator<Item = &TcpListener> {
        self.http.iter().chain(self.https.iter()).chain(self.raw.iter())
    }

    /// Serves until `shutdown` completes; then closes every listener and connection.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let mut tasks = JoinSet::new();
        for l in self.http {
            tasks.spawn(accept_loop(l, self.ctx.clone(), false));
        }
        for l in self.https {
            tasks.spawn(accept_loop(l, self.ctx.clone(), true));
        }
        for e in &self.quic {
            tasks.spawn(quic_accept_loop(e.clone(), self.ctx.clone()));
        }
        let c = &self.ctx;
        let mut raw_config = crate::raw::RawConfig::new(&c.limits, c.connections.clone(), c.tcp.congestion.clone(), c.bytes_block.clone());
        raw_config.instrument = c.instrument.clone();
        for l in self.raw {
            tasks.spawn(crate::raw::serve_raw(l, raw_config.clone()));
        }
        shutdown.await;
        // Dropping an accept loop drops its JoinSet of connections, which aborts them.
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        for e in &self.quic {
            e.close(quinn::VarInt::from_u32(0), b"server shutting down");
        }
    }
}

/// `h3=":<port>"` (digits and punctuation only: always a valid header value).
fn alt_svc_value(port: u16) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("h3=\":{port}\"")).ok()
}

/// A UDP socket for QUIC (IPv6 sockets are IPv6-only, as the TCP listeners).
fn bind_udp(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// The TLS listener and the UDP socket of HTTP/3 on the same port of `ip`. With port 0 the
/// kernel picks the TCP port and the UDP socket takes the same number (a few tries if it is
/// taken on UDP).
fn listen_tcp_udp(ip: IpAddr, port: u16, options: &TcpOptions) -> Result<(TcpListener, std::net::UdpSocket), ServeError> {
    const TRIES: usize = 16;
    let mut last = None;
    for _ in 0..TRIES {
        let tcp = tcp_listen(SocketAddr::new(ip, port), options)?;
        let addr = tcp.local_addr().map_err(|error| ServeError::Listen { addr: SocketAddr::new(ip, port), error })?;
        match bind_udp(addr) {
            Ok(udp) => return Ok((tcp, udp)),
            Err(error) if port == 0 && error.kind() == io::ErrorKind::AddrInUse => last = Some((addr, error)),
            Err(error) => return Err(ServeError::Listen { addr, error }),
        }
    }
    let (addr, error) = last.unwrap_or((SocketAddr::new(ip, port), io::Error::from(io::ErrorKind::AddrInUse)));
    Err(ServeError::Listen { addr, error })
}

/// A connection's samples or qlog could not be written (disk full, directory removed): the
/// server says so and serves the connection without them.
fn report_skipped<T>(what: &str, conn_id: &str, error: io::Error) -> Option<T> {
    eprintln!("protolab-net serve: {what} of {conn_id}: {error}");
    None
}

async fn accept_loop(listener: TcpListener, ctx: Arc<Ctx>, tls: bool) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let (stream, peer) = crate::transport::accept_retrying(&listener, "accept").await;
        let Ok(permit) = ctx.connections.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        if let Some(cc) = &ctx.tcp.congestion {
            // Inherited from the listener already; set again so it holds whatever the kernel does.
            let _ = SockRef::from(&stream).set_tcp_congestion(cc.as_bytes());
        }
        let local = stream.local_addr().ok();
        // An MPTCP listener also accepts plain TCP clients (the socket falls back): name those
        // `tcp` as the client does, or the two ends' sample files would not pair up.
        let transport = if ctx.tcp.mptcp && !crate::sockopt::mptcp_fell_back(stream.as_fd()) { "mptcp" } else { "tcp" };
        let conn_id = instrument::connection_id(transport, Some(peer), local);
        let sampler = ctx.instrument.tcp_sampler(&stream, &conn_id, Role::Server, ctx.tcp.mptcp).unwrap_or_else(|e| report_skipped("samples", &conn_id, e));
        let ctx = ctx.clone();
        connections.spawn(async move {
            let _permit = permit;
            serve_connection(stream, peer, local, ctx, tls).await;
            if let Some(s) = sampler {
                let _ = s.stop().await;
            }
        });
    }
}


/// Runs a hyper-util connection until it ends or idles out (then a graceful close with a
/// one-second grace). A macro because `auto::Connection`'s bounds are long to spell out.
macro_rules! drive {
    ($conn:expr, $activity:expr, $ctx:expr) => {{
        let mut conn = pin!($conn);
        let idled = tokio::select! {
            _ = conn.as_mut() => false,
            _ = $activity.idle($ctx.limits.idle_timeout, $ctx.limits.send_timeout, $ctx.limits.strict_send_timeout) => true,
        };
        if idled {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(1), conn).await;
        }
    }};
}

/// 429 with `retry-after` in whole seconds (at least 1).
fn too_many_requests(wait: Duration) -> Response<ResponseBody> {
    let mut r = text(StatusCode::TOO_MANY_REQUESTS, "too many requests on this connection");
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(wait.as_secs().max(1)));
    r
}

async fn serve_connection(stream: TcpStream, _peer: SocketAddr, local: Option<SocketAddr>, ctx: Arc<Ctx>, tls: bool) {
    // A duplicate of the socket for the idle timeout's look at TCP_INFO (none if the process
    // is out of descriptors: then only the connection's own reads and writes count).
    let socket = std::os::fd::AsFd::as_fd(&stream).try_clone_to_owned().ok();
    let activity = Activity::new(ctx.epoch, socket);
    let io = ActivityIo { inner: stream, activity: activity.clone() };
    let local_ip = local.map(|a| a.ip());
    let service_ctx = ctx.clone();
    let service_activity = activity.clone();
    let bucket = Arc::new(std::sync::Mutex::new(RequestBucket::new(ctx.limits.max_requests_per_second, ctx.limits.max_request_burst, Instant::now())));
    let service = service_fn(move |req| {
        let ctx = service_ctx.clone();
        let in_flight = service_activity.begin();
        // A poisoned lock means a panic in `take`, which does not panic; refuse the request then.
        let limited = bucket.lock().map(|mut b| b.take(Instant::now()).err()).unwrap_or(Some(Duration::from_secs(1)));
        async move {
            let mut r = match limited {
                Some(wait) => too_many_requests(wait),
                None => handle(req, &ctx, local_ip, tls).await,
            };
            if let Some(v) = local_ip.and_then(|ip| ctx.alt_svc.get(&ip)).or_else(|| ctx.alt_svc.values().next()) {
                r.headers_mut().insert(header::ALT_SVC, v.clone());
            }
            Ok::<_, Infallible>(r.map(|inner| TrackedBody { inner, _in_flight: in_flight }))
        }
    });
    if !tls {
        let conn = ctx.auto.serve_connection(TokioIo::new(io), service);
        drive!(conn, activity, ctx);
        return;
    }
    // The handshake ends at handshake_timeout (nginx's ssl_handshake_timeout), not at the idle
    // timeout: on a lossy link a handshake can make no progress for longer than 30 s (002's 1
    // Mbit/s, 30 ms cell: TLS connections completed after 36 s).
    let Ok(Ok(tls_stream)) = tokio::time::timeout(ctx.limits.handshake_timeout, ctx.tls.accept(io)).await else {
        return;
    };
    // ALPN decides the protocol; without ALPN a TLS client speaks HTTP/1.1 (RFC 7301).
    let h2 = tls_stream.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
    let builder = if h2 { &ctx.h2 } else { &ctx.h1 };
    let conn = builder.serve_connection(TokioIo::new(tls_stream), service);
    drive!(conn, activity, ctx);
}

fn reply(status: StatusCode, body: ResponseBody) -> Response<ResponseBody> {
    let len = hyper::body::Body::size_hint(&body).exact().unwrap_or(0);
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r.headers_mut().insert(header::SERVER, HeaderValue::from_static("protolab"));
    r.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    r
}

fn text(status: StatusCode, message: &str) -> Response<ResponseBody> {
    let mut r = reply(status, ResponseBody::full(Bytes::from(format!("{message}\n"))));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

fn method_not_allowed(allow: &'static str) -> Response<ResponseBody> {
    let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    r.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// HEAD gets the GET headers (with the GET content-length) and no body.
fn head_of(mut r: Response<ResponseBody>, is_head: bool) -> Response<ResponseBody> {
    if is_head {
        *r.body_mut() = ResponseBody::Empty;
    }
    r
}

/// The hostname a request is for: `:authority` / absolute URI, else `Host`; lowercased, port and
/// trailing dot removed. IP literals and missing hosts map to the only origin at that address.
fn request_host<B>(req: &Request<B>, site: &Site, local_ip: Option<IpAddr>) -> Option<String> {
    let raw = req
        .uri()
        .authority()
        .map(|a| a.host().to_string())
        .or_else(|| {
            let h = req.headers().get(header::HOST)?.to_str().ok()?;
            let auth: http::uri::Authority = h.parse().ok()?;
            Some(auth.host().to_string())
        });
    let host = raw.map(|h| h.trim_end_matches('.').to_ascii_lowercase());
    match host {
        Some(h) if valid_hostname(&h) => Some(h),
        Some(h) => {
            let ip: IpAddr = h.trim_start_matches('[').trim_end_matches(']').parse().ok()?;
            site.sole_origin_at(ip).map(str::to_string)
        }
        None => site.sole_origin_at(local_ip?).map(str::to_string),
    }
}

/// The routes, shared by every transport (hyper's `Incoming` on TCP, [`H3Body`] on QUIC);
/// `secure`: the request came over TLS or QUIC.
async fn handle<B>(req: Request<B>, ctx: &Ctx, local_ip: Option<IpAddr>, secure: bool) -> Response<ResponseBody>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Display,
{
    let is_head = req.method() == Method::HEAD;
    let is_get = req.method() == Method::GET || is_head;
    if req.method() == Method::OPTIONS && rpm::is_endpoint(req.uri().path()) {
        return preflight();
    }
    let path = req.uri().path();
    match path {
        "/upload" => return upload_sink(req).await,
        // The responsiveness endpoints answer cross-origin fetches: a browser test page spreads
        // its load over several origins (one connection each), as the draft's client does.
        rpm::UPLOAD_PATH => return cross_origin(upload_sink(req).await),
        _ => {}
    }
    let synthetic = matches!(path, "/bytes" | "/empty" | rpm::CONFIG_PATH | rpm::SMALL_PATH | rpm::LARGE_PATH);
    if synthetic && !is_get {
        return method_not_allowed("GET, HEAD");
    }
    match path {
        "/bytes" => bytes_response(req.uri().query(), ctx, is_head),
        "/empty" => {
            let mut r = reply(StatusCode::OK, ResponseBody::Empty);
            r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        rpm::CONFIG_PATH => rpm_config_response(&req, secure, is_head),
        rpm::SMALL_PATH | rpm::LARGE_PATH => {
            let n = if path == rpm::SMALL_PATH { 1 } else { rpm::LARGE_BYTES };
            let mut r = reply(StatusCode::OK, ResponseBody::pattern(&ctx.bytes_block, 0, n));
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
            r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            cross_origin(head_of(r, is_head))
        }
        _ => object_response(&req, ctx, local_ip, is_get, is_head),
    }
}

/// `GET /bytes?n=N[&rate=R]`: N generated bytes, optionally paced at R bit/s.
fn bytes_response(query: Option<&str>, ctx: &Ctx, is_head: bool) -> Response<ResponseBody> {
    let param = |name: &str| query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix(name)));
    let n = match param("n=") {
        None => return text(StatusCode::BAD_REQUEST, "/bytes needs ?n=<bytes>"),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n <= MAX_BYTES_N => n,
            _ => return text(StatusCode::BAD_REQUEST, &format!("n must be an integer from 0 to {MAX_BYTES_N}")),
        },
    };
    // Optional application pacing of the body (docs/bulk.md, "Pacing").
    let rate = match param("rate=") {
        None => None,
        Some(v) => match v.parse::<u64>().map_err(|_| format!("rate {v:?} is not an integer")).and_then(crate::pace::check_rate) {
            Ok(r) => Some(r),
            Err(e) => return text(StatusCode::BAD_REQUEST, &format!("{e} (rate= is in bit/s)")),
        },
    };
    let body = match rate {
        Some(r) => ResponseBody::paced(&ctx.bytes_block, 0, n, r),
        None => ResponseBody::pattern(&ctx.bytes_block, 0, n),
    };
    let mut r = reply(StatusCode::OK, body);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    head_of(r, is_head)
}

/// The responsiveness configuration document, naming this server as the request reached it
/// (cross-origin; 400 without a host).
fn rpm_config_response<B>(req: &Request<B>, secure: bool, is_head: bool) -> Response<ResponseBody> {
    let authority = req.uri().authority().map(|a| a.as_str().to_string()).or_else(|| {
        req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).and_then(|h| h.parse::<http::uri::Authority>().ok()).map(|a| a.as_str().to_string())
    });
    let Some(authority) = authority else {
        return text(StatusCode::BAD_REQUEST, "the configuration document names this server: send a Host");
    };
    let doc = rpm::config_document(if secure { "https" } else { "http" }, &authority);
    let mut r = reply(StatusCode::OK, ResponseBody::full(Bytes::from(doc)));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    cross_origin(head_of(r, is_head))
}

/// A manifest object, by host and request target: its body and headers (404 if none).
fn object_response<B>(req: &Request<B>, ctx: &Ctx, local_ip: Option<IpAddr>, is_get: bool, is_head: bool) -> Response<ResponseBody> {
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let found = request_host(req, &ctx.site, local_ip).and_then(|h| ctx.site.object(&h, target));
    let Some(object) = found else {
        return text(StatusCode::NOT_FOUND, "not found");
    };
    if !is_get {
        return method_not_allowed("GET, HEAD");
    }
    let Some(block) = ctx.site.block(object.seed) else {
        // Site::new creates a block for every seed it stores; kept as a 500, not a panic.
        return text(StatusCode::INTERNAL_SERVER_ERROR, "no body block");
    };
    let body = match &object.document {
        Some(document) => ResponseBody::full(document.clone()),
        None => ResponseBody::pattern(block, object.offset, object.size),
    };
    let mut r = reply(StatusCode::OK, body);
    r.headers_mut().insert(header::CONTENT_TYPE, object.content_type.clone());
    for (name, value) in &object.headers {
        r.headers_mut().append(name.clone(), value.clone());
    }
    // Cross-origin fonts and script-inserted objects of a real page need CORS.
    if !r.headers().contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN) {
        r.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    }
    head_of(r, is_head)
}

/// `access-control-allow-origin: *` on a response, and `timing-allow-origin: *` so that a
/// cross-origin test page sees the Resource Timing of its probes.
fn cross_origin(mut r: Response<ResponseBody>) -> Response<ResponseBody> {
    r.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    r.headers_mut().insert(HeaderName::from_static("timing-allow-origin"), HeaderValue::from_static("*"));
    r
}

/// The CORS preflight of a responsiveness endpoint (a page that streams its upload or watches
/// its progress sends one): 204 allowing GET, HEAD, POST, PUT with any content type.
fn preflight() -> Response<ResponseBody> {
    let mut r = cross_origin(reply(StatusCode::NO_CONTENT, ResponseBody::Empty));
    r.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, HEAD, POST, PUT"));
    r.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("content-type"));
    r.headers_mut().insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    r
}

/// The upload sink (`/upload`, the responsiveness test's upload URL): reads and discards the
/// body, answers with the byte count and the time it took.
async fn upload_sink<B>(req: Request<B>) -> Response<ResponseBody>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Display,
{
    if req.method() != Method::POST && req.method() != Method::PUT {
        return method_not_allowed("POST, PUT");
    }
    let start = Instant::now();
    let mut body = req.into_body();
    let mut received: u64 = 0;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => {
                if let Some(d) = f.data_ref() {
                    received += d.len() as u64;
                }
            }
            Err(e) => return text(StatusCode::BAD_REQUEST, &format!("upload body: {e}")),
        }
    }
    let elapsed = start.elapsed();
    let json = serde_json::json!({
        "bytes": received,
        "duration_ns": elapsed.as_nanos() as u64,
        "duration_s": elapsed.as_secs_f64(),
    });
    let mut r = reply(StatusCode::OK, ResponseBody::full(Bytes::from(format!("{json}\n"))));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
