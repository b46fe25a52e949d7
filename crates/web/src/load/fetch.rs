//! Fetching one object of the page-load engine over a connection of the client layer
//! (`crate::client`), timed: request sent, first byte, last byte.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::{http1, http2};

use crate::client::{finish_h3_request, Sender};

const USER_AGENT: &str = concat!("protolab-load/", env!("CARGO_PKG_VERSION"));

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

/// How long an idle HTTP/1.1 connection may take to accept the next request. It is ready at
/// once when its last response is complete (the engine only gives it a request then), so a
/// longer wait means the connection is stuck. A browser checks a pooled socket before reusing
/// it (Chromium: `IsConnectedAndIdle`); here the request fails before it is sent, and the
/// engine resends it on another connection. (Added for a load that hung at 0.364 Mbit/s; that
/// hang was later traced to a connection the server had dropped silently, which the 45-s TCP
/// keepalive catches: docs/load.md.)
const H1_READY_WAIT: Duration = Duration::from_secs(5);

async fn fetch_hyper1(s: &mut http1::SendRequest<Empty<Bytes>>, t: &Target, received: &AtomicU64, out: &mut Fetched) -> Result<(), String> {
    match tokio::time::timeout(H1_READY_WAIT, s.ready()).await {
        Ok(ready) => ready.map_err(|e| format!("connection: {e}"))?,
        Err(_) => return Err(format!("connection: not ready for a new request within {} s", H1_READY_WAIT.as_secs())),
    }
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
