//! Connections of the responsiveness test over the client layer (`crate::client`): set-up
//! with its parts timed (TCP, TLS; or the QUIC handshake), small GETs (probes) and the
//! load-generating requests (an endless download or upload).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, Bytes};
use http::{Request, Uri};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use tokio::task::JoinHandle;

use crate::client::{finish_h3_request, Connector, Sender};
use crate::load::mode::Protocol;

const USER_AGENT: &str = concat!("protolab-rpm/", env!("CARGO_PKG_VERSION"));
/// Upload chunk: one shared buffer, cloned per frame (no copy).
const UPLOAD_CHUNK: usize = 64 * 1024;

fn upload_chunk() -> Bytes {
    static CHUNK: OnceLock<Bytes> = OnceLock::new();
    CHUNK.get_or_init(|| Bytes::from((0..UPLOAD_CHUNK).map(|i| (i * 131 % 251) as u8).collect::<Vec<u8>>())).clone()
}

/// A request body: none (GETs) or an endless upload counted into `sent` as hyper takes it
/// (accepted, not delivered: the goodput counts [`super::delivered`]'s bytes).
pub(crate) struct RpmBody {
    sent: Option<Arc<AtomicU64>>,
}

impl RpmBody {
    fn empty() -> RpmBody {
        RpmBody { sent: None }
    }
}

impl Body for RpmBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &self.sent {
            None => Poll::Ready(None),
            Some(sent) => {
                let chunk = upload_chunk();
                sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.sent.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.sent {
            None => SizeHint::with_exact(0),
            Some(_) => SizeHint::default(),
        }
    }
}

/// Where and how to connect; shared by every connection of a test.
pub(crate) struct Dialer {
    pub protocol: Protocol,
    pub addr: SocketAddr,
    /// SNI, certificate name and `Host`/`:authority` host.
    pub host: String,
    /// `host[:port]` for request URIs.
    pub authority: String,
    /// TLS without resumption (every handshake full), qlogs if asked.
    pub connector: Arc<Connector>,
}

/// An open connection.
pub(crate) struct RpmConn {
    pub sender: Sender<RpmBody>,
    /// TCP: a duplicate of the socket, for the stack's RTT estimate (HTTP/1.1 self probes).
    pub tcp_fd: Option<OwnedFd>,
    endpoint: Option<quinn::Endpoint>,
    /// QUIC: the connection, for its statistics (upload accounting).
    pub quic: Option<quinn::Connection>,
    drivers: Vec<JoinHandle<()>>,
    /// TCP handshake, or the QUIC handshake (with the HTTP/3 set-up), ms.
    pub connect_ms: f64,
    /// The TLS handshake over TCP, ms (TLS 1.3: one round trip, so no normalisation).
    pub tls_ms: Option<f64>,
}

impl Drop for RpmConn {
    fn drop(&mut self) {
        self.close();
    }
}

impl RpmConn {
    /// Closes the connection (QUIC: an immediate CONNECTION_CLOSE; TCP: the drivers end).
    pub fn close(&self) {
        for d in &self.drivers {
            d.abort();
        }
        if let Some(e) = &self.endpoint {
            e.close(quinn::VarInt::from_u32(0), b"done");
        }
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn ms_between(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1e3
}

impl Dialer {
    /// A new connection, its parts timed.
    pub async fn connect(&self) -> Result<RpmConn, String> {
        let start = Instant::now();
        let connected = self.connector.connect(&self.host, self.addr).await?;
        let ready = Instant::now();
        Ok(RpmConn {
            sender: connected.sender,
            tcp_fd: connected.tcp_fd,
            endpoint: connected.endpoint,
            quic: connected.quic_conn,
            drivers: connected.drivers,
            // TCP: its handshake; QUIC: the handshake with the HTTP/3 set-up.
            connect_ms: ms_between(start, connected.tcp_connected.unwrap_or(ready)),
            tls_ms: connected.tls_handshake.map(|d| d.as_secs_f64() * 1e3),
        })
    }

    fn uri(&self, path: &str) -> Result<Uri, String> {
        let text = if self.protocol == Protocol::H1 { path.to_string() } else { format!("https://{}{path}", self.authority) };
        text.parse().map_err(|e| format!("request URI {text:?}: {e}"))
    }

    fn request(&self, method: http::Method, path: &str, body: RpmBody) -> Result<Request<RpmBody>, String> {
        let mut b = Request::builder().method(method).uri(self.uri(path)?).header(http::header::USER_AGENT, USER_AGENT);
        if self.protocol == Protocol::H1 {
            b = b.header(http::header::HOST, &self.authority);
        }
        if body.sent.is_some() {
            b = b.header(http::header::CONTENT_TYPE, "application/octet-stream");
        }
        b.body(body).map_err(|e| format!("request: {e}"))
    }

    /// A GET of `path` read to its end, every body chunk given to `on_data`; the time from
    /// sending the request to the last byte, ms.
    pub async fn get(&self, sender: &mut Sender<RpmBody>, path: &str, mut on_data: impl FnMut(&[u8])) -> Result<f64, String> {
        let start = Instant::now();
        let status = match sender {
            Sender::H1(s) => {
                s.ready().await.map_err(|e| format!("connection: {e}"))?;
                let resp = s.send_request(self.request(http::Method::GET, path, RpmBody::empty())?).await.map_err(|e| format!("request: {e}"))?;
                read_hyper(resp, &mut on_data).await?
            }
            Sender::H2(s) => {
                s.ready().await.map_err(|e| format!("connection: {e}"))?;
                let resp = s.send_request(self.request(http::Method::GET, path, RpmBody::empty())?).await.map_err(|e| format!("request: {e}"))?;
                read_hyper(resp, &mut on_data).await?
            }
            Sender::H3(s) => {
                let req = http::Request::get(self.uri(path)?).header(http::header::USER_AGENT, USER_AGENT).body(()).map_err(|e| format!("request: {e}"))?;
                let mut stream = s.send_request(req).await.map_err(|e| format!("request: {e}"))?;
                finish_h3_request(&mut stream).await?;
                let resp = stream.recv_response().await.map_err(|e| format!("response: {e}"))?;
                while let Some(mut chunk) = stream.recv_data().await.map_err(|e| format!("response body: {e}"))? {
                    while chunk.has_remaining() {
                        let n = chunk.chunk().len();
                        on_data(chunk.chunk());
                        chunk.advance(n);
                    }
                }
                resp.status().as_u16()
            }
        };
        if status != 200 {
            return Err(format!("GET {path}: HTTP status {status}"));
        }
        Ok(ms_since(start))
    }

    /// An endless upload to `path` (returns only on an error or the server's end).
    pub async fn upload(&self, sender: &mut Sender<RpmBody>, path: &str, sent: Arc<AtomicU64>) -> Result<(), String> {
        let body = RpmBody { sent: Some(sent.clone()) };
        let status = match sender {
            Sender::H1(s) => {
                s.ready().await.map_err(|e| format!("connection: {e}"))?;
                s.send_request(self.request(http::Method::POST, path, body)?).await.map_err(|e| format!("upload: {e}"))?.status().as_u16()
            }
            Sender::H2(s) => {
                s.ready().await.map_err(|e| format!("connection: {e}"))?;
                s.send_request(self.request(http::Method::POST, path, body)?).await.map_err(|e| format!("upload: {e}"))?.status().as_u16()
            }
            Sender::H3(s) => {
                let req = http::Request::post(self.uri(path)?)
                    .header(http::header::USER_AGENT, USER_AGENT)
                    .header(http::header::CONTENT_TYPE, "application/octet-stream")
                    .body(())
                    .map_err(|e| format!("request: {e}"))?;
                let mut stream = s.send_request(req).await.map_err(|e| format!("upload: {e}"))?;
                loop {
                    let chunk = upload_chunk();
                    let n = chunk.len() as u64;
                    stream.send_data(chunk).await.map_err(|e| format!("upload: {e}"))?;
                    sent.fetch_add(n, Ordering::Relaxed);
                }
            }
        };
        Err(format!("upload ended with HTTP status {status}"))
    }
}

async fn read_hyper(resp: hyper::Response<hyper::body::Incoming>, on_data: &mut impl FnMut(&[u8])) -> Result<u16, String> {
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("response body: {e}"))?;
        if let Some(d) = frame.data_ref() {
            on_data(d);
        }
    }
    Ok(status)
}
