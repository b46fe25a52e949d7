//! The I/O of one bulk transfer: connection set-up through the client layer (`crate::client`:
//! raw TCP, HTTP/1.1 or HTTP/2 through hyper, HTTP/3 through quinn + h3), recorded stage by
//! stage, the transfer itself, the meter that counts bytes into the interval log, and the
//! result.

use std::convert::Infallible;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{Amount, Bulk, BulkKind, BulkProtocol, BulkResult, BulkStatus, ConnectionInfo, Direction, IntervalLog, IntervalRow, ServerCount, SCHEMA_VERSION};
use crate::body::{Block, PatternStream};
use crate::client::{self, finish_h3_request, H3RequestStream, Sender};
use crate::instrument::{self, SamplerHandle};
use crate::load::{Protocol, Transport};
use crate::raw::{self, RawRequest, REPLY_LEN, REPORT_LEN};
use crate::limits::{BYTES_SEED, MAX_BYTES_N};

const USER_AGENT: &str = concat!("protolab-bulk/", env!("CARGO_PKG_VERSION"));
/// Largest response body read whole (upload replies, error messages).
const SMALL_BODY: usize = 64 * 1024;
/// How long a QUIC endpoint may take to drain, so that the qlog file is complete.
const QUIC_DRAIN: Duration = Duration::from_secs(2);

/// The byte count of a transfer and its interval log, shared by the transfer, the upload body
/// and the ticker task. Time is read under the lock, so that observations reach the log in
/// time order.
pub(super) struct Meter {
    start: Instant,
    state: Mutex<MeterState>,
}

struct MeterState {
    log: IntervalLog,
    total: u64,
    progress: Option<UnboundedSender<IntervalRow>>,
}

impl MeterState {
    fn send(progress: &Option<UnboundedSender<IntervalRow>>, rows: &[IntervalRow]) {
        if let Some(tx) = progress {
            for r in rows {
                // A progress reader that went away does not stop the transfer.
                let _ = tx.send(r.clone());
            }
        }
    }
}

impl Meter {
    fn new(interval: Duration, progress: Option<UnboundedSender<IntervalRow>>) -> Meter {
        let start = Instant::now();
        let log = IntervalLog::new(interval, instrument::unix_ns());
        Meter { start, state: Mutex::new(MeterState { log, total: 0, progress }) }
    }

    fn lock(&self) -> MutexGuard<'_, MeterState> {
        // Nothing panics while holding the lock; if something did, the counts are still valid.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `n` more bytes moved now.
    fn add(&self, n: u64) {
        let mut s = self.lock();
        s.total += n;
        let t = self.start.elapsed();
        let total = s.total;
        let MeterState { log, progress, .. } = &mut *s;
        MeterState::send(progress, log.observe(t, total));
    }

    /// Closes the intervals that have ended; returns when the open one ends.
    fn tick(&self) -> Instant {
        let mut s = self.lock();
        let t = self.start.elapsed();
        let total = s.total;
        let MeterState { log, progress, .. } = &mut *s;
        MeterState::send(progress, log.observe(t, total));
        self.start + log.next_boundary()
    }

    fn total(&self) -> u64 {
        self.lock().total
    }

    /// The transfer ended at `end`: the last row, and every row.
    fn finish(&self, end: Instant) -> Vec<IntervalRow> {
        let mut s = self.lock();
        let total = s.total;
        let MeterState { log, progress, .. } = &mut *s;
        MeterState::send(progress, log.finish(end.saturating_duration_since(self.start), total));
        log.rows().to_vec()
    }
}

/// What one run holds, filled in as it goes; read by [`finish`] whatever happened.
struct Run<'a> {
    bulk: &'a Bulk,
    progress: Option<UnboundedSender<IntervalRow>>,
    connect_start: Instant,
    connect_start_unix_ns: u64,
    ready: Option<Instant>,
    meter: Option<Arc<Meter>>,
    start_unix_ns: Option<u64>,
    ticker: Option<JoinHandle<()>>,
    /// When the transfer ended (the deadline, the last byte, or the server's upload report).
    end: Option<Instant>,
    connection: Option<ConnectionInfo>,
    server: Option<ServerCount>,
    sampler: Option<SamplerHandle>,
    qlog: Option<PathBuf>,
    drivers: Vec<JoinHandle<()>>,
    quic: Option<(quinn::Endpoint, quinn::Connection)>,
}

impl Run<'_> {
    /// The connection is ready: the transfer starts now.
    fn begin(&mut self) -> Arc<Meter> {
        let now = Instant::now();
        self.ready.get_or_insert(now);
        let meter = Arc::new(Meter::new(self.bulk.options.interval, self.progress.clone()));
        self.start_unix_ns = Some(instrument::unix_ns());
        let m = meter.clone();
        self.ticker = Some(tokio::spawn(async move {
            loop {
                let next = m.tick();
                tokio::time::sleep_until(next).await;
            }
        }));
        self.meter = Some(meter.clone());
        meter
    }

    /// Duration mode: when the transfer stops.
    fn deadline(&self, meter: &Meter) -> Option<Instant> {
        match self.bulk.options.amount {
            Amount::Duration(d) => Some(meter.start + d),
            Amount::Bytes(_) => None,
        }
    }
}

pub(super) async fn run(bulk: &Bulk, progress: Option<UnboundedSender<IntervalRow>>) -> BulkResult {
    let mut run = Run {
        bulk,
        progress,
        connect_start: Instant::now(),
        connect_start_unix_ns: instrument::unix_ns(),
        ready: None,
        meter: None,
        start_unix_ns: None,
        ticker: None,
        end: None,
        connection: None,
        server: None,
        sampler: None,
        qlog: None,
        drivers: Vec::new(),
        quic: None,
    };
    let deadline = run.connect_start + bulk.timeout;
    let outcome = match tokio::time::timeout_at(deadline, transfer(&mut run)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err((BulkStatus::Failed, e)),
        Err(_) => {
            let ms = bulk.timeout.as_millis();
            let e = match &run.meter {
                Some(m) => format!("timeout after {ms} ms: {} bytes moved", m.total()),
                None => format!("timeout after {ms} ms while connecting to {}", bulk.addr),
            };
            Err((BulkStatus::Timeout, e))
        }
    };
    finish(run, outcome).await
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn finish(mut run: Run<'_>, outcome: Result<(), (BulkStatus, String)>) -> BulkResult {
    let now = Instant::now();
    if let Some(t) = run.ticker.take() {
        t.abort();
    }
    let (bytes, intervals, duration_ms, goodput_bps) = match &run.meter {
        Some(m) => {
            let end = run.end.unwrap_or(now);
            let rows = m.finish(end);
            let bytes = m.total();
            let d = end.saturating_duration_since(m.start);
            let goodput = (!d.is_zero()).then(|| bytes as f64 * 8.0 / d.as_secs_f64());
            (bytes, rows, Some(ms(d)), goodput)
        }
        None => (0, Vec::new(), None, None),
    };
    // The sampler takes its last sample while the connection is still open.
    let samples = match run.sampler.take() {
        Some(s) => {
            let path = s.path().display().to_string();
            let _ = s.stop().await;
            Some(path)
        }
        None => None,
    };
    if let Some((_, conn)) = &run.quic {
        conn.close(quinn::VarInt::from_u32(0), b"done");
    }
    for d in run.drivers.drain(..) {
        d.abort();
        let _ = d.await;
    }
    if let Some((endpoint, conn)) = run.quic.take() {
        drop(conn);
        if run.qlog.is_some() {
            // The qlog file is flushed when quinn drops the connection, after draining.
            let _ = tokio::time::timeout(QUIC_DRAIN, endpoint.wait_idle()).await;
        }
    }
    let (status, error) = match outcome {
        Ok(()) => (BulkStatus::Ok, None),
        Err((s, e)) => (s, Some(e)),
    };
    BulkResult {
        schema_version: SCHEMA_VERSION,
        kind: BulkKind::Bulk,
        config: run.bulk.config(),
        status,
        error,
        start_unix_ns: run.start_unix_ns.unwrap_or(run.connect_start_unix_ns),
        handshake_ms: run.ready.map(|r| ms(r.saturating_duration_since(run.connect_start))),
        bytes,
        duration_ms,
        goodput_bps,
        intervals,
        connection: run.connection,
        server: run.server,
        samples,
        qlog: run.qlog.map(|p| p.display().to_string()),
    }
}

async fn transfer(run: &mut Run<'_>) -> Result<(), String> {
    match run.bulk.options.protocol {
        BulkProtocol::Tcp => raw_transfer(run).await,
        BulkProtocol::H3 => h3_transfer(run).await,
        BulkProtocol::H1c | BulkProtocol::H1 | BulkProtocol::H2 => hyper_transfer(run).await,
    }
}

/// TCP (or MPTCP) to the server, recorded in the run, with a sampler if asked.
async fn connect_tcp(run: &mut Run<'_>) -> Result<TcpStream, String> {
    let bulk = run.bulk;
    let o = &bulk.options;
    let opened = bulk.connector.open_tcp(bulk.addr).await?;
    let mptcp_fallback = o.tcp.mptcp.then(|| crate::sockopt::mptcp_info(opened.stream.as_fd()).map(|i| i.fallback()).unwrap_or(true));
    run.connection = Some(ConnectionInfo {
        local: opened.local.map(|a| a.to_string()),
        remote: bulk.addr.to_string(),
        protocol: o.protocol,
        transport: if o.tcp.mptcp { Transport::Mptcp } else { Transport::Tcp },
        tcp_cc: crate::transport::tcp_congestion_of(&opened.stream).ok(),
        mptcp_fallback,
        conn_id: opened.conn_id,
    });
    run.sampler = opened.sampler;
    Ok(opened.stream)
}

/// A source of received bytes.
trait Chunks {
    /// The size of the next piece, or `None` at the end.
    async fn next(&mut self) -> Result<Option<usize>, String>;
}

struct RawChunks<'a> {
    tcp: &'a mut TcpStream,
    buf: Vec<u8>,
}

impl Chunks for RawChunks<'_> {
    async fn next(&mut self) -> Result<Option<usize>, String> {
        match self.tcp.read(&mut self.buf).await {
            Ok(0) => Ok(None),
            Ok(n) => Ok(Some(n)),
            Err(e) => Err(format!("receive: {e}")),
        }
    }
}

struct HyperChunks(Incoming);

impl Chunks for HyperChunks {
    async fn next(&mut self) -> Result<Option<usize>, String> {
        loop {
            match self.0.frame().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(format!("response body: {e}")),
                Some(Ok(frame)) => {
                    if let Some(d) = frame.data_ref() {
                        return Ok(Some(d.len()));
                    }
                    // Trailers: no bytes.
                }
            }
        }
    }
}

struct H3Chunks<'a>(&'a mut H3RequestStream);

impl Chunks for H3Chunks<'_> {
    async fn next(&mut self) -> Result<Option<usize>, String> {
        match self.0.recv_data().await {
            Ok(Some(mut b)) => {
                let n = b.remaining();
                b.advance(n);
                Ok(Some(n))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(format!("response body: {e}")),
        }
    }
}

/// How receiving ended.
enum Received {
    /// The sender ended the stream.
    End,
    /// The duration was up.
    Deadline,
}

/// Counts received bytes until the end of the stream or the deadline, and records the end.
async fn receive(run: &mut Run<'_>, src: &mut impl Chunks, meter: &Meter) -> Result<Received, String> {
    let deadline = run.deadline(meter);
    loop {
        let next = match deadline {
            Some(d) => match tokio::time::timeout_at(d, src.next()).await {
                Ok(r) => r,
                Err(_) => {
                    run.end = Some(d);
                    return Ok(Received::Deadline);
                }
            },
            None => src.next().await,
        };
        match next? {
            Some(n) => meter.add(n as u64),
            None => {
                run.end = Some(Instant::now());
                return Ok(Received::End);
            }
        }
    }
}

/// Checks a finished download against what was asked.
fn check_download(ended: Received, got: u64, expected: u64, duration_mode: bool) -> Result<(), String> {
    match ended {
        Received::Deadline => Ok(()),
        Received::End if got == expected => Ok(()),
        Received::End if duration_mode => Err(format!("the server ended the transfer before the deadline, after {got} bytes")),
        Received::End => Err(format!("the server ended the transfer after {got} of {expected} bytes")),
    }
}

/// What an upload sends: the `/bytes` block, paced if asked, cut at the deadline.
fn upload_source(run: &Run<'_>, meter: &Meter) -> PatternStream {
    let o = &run.bulk.options;
    let size = match o.amount {
        Amount::Bytes(n) => n,
        Amount::Duration(_) => raw::UNTIL_CLOSED,
    };
    let mut source = PatternStream::new(&Block::new(BYTES_SEED), 0, size);
    if let Some(rate) = o.rate_bps {
        source = source.paced(rate);
    }
    if let Some(d) = run.deadline(meter) {
        source = source.until(d);
    }
    source
}

fn check_upload(sent: u64, server: u64) -> Result<(), String> {
    if sent == server {
        Ok(())
    } else {
        Err(format!("the server received {server} of the {sent} bytes sent"))
    }
}

async fn raw_transfer(run: &mut Run<'_>) -> Result<(), String> {
    let bulk = run.bulk;
    let o = &bulk.options;
    let mut tcp = client::within(o.connect_timeout, bulk.addr, connect_tcp(run)).await?;
    let request = RawRequest {
        direction: o.direction,
        bytes: match o.amount {
            Amount::Bytes(n) => Some(n),
            Amount::Duration(_) => None,
        },
        rate_bps: if o.direction == Direction::Download { o.rate_bps } else { None },
    };
    let meter = run.begin();
    tcp.write_all(&request.encode()).await.map_err(|e| format!("send the request: {e}"))?;
    match o.direction {
        Direction::Download => {
            let mut head = [0u8; REPLY_LEN];
            tcp.read_exact(&mut head).await.map_err(|e| format!("read the reply: {e}"))?;
            raw::check_reply_head(&head)?;
            let ended = receive(run, &mut RawChunks { tcp: &mut tcp, buf: vec![0u8; 256 * 1024] }, &meter).await?;
            let expected = request.bytes.unwrap_or(raw::UNTIL_CLOSED);
            check_download(ended, meter.total(), expected, request.bytes.is_none())
        }
        Direction::Upload => {
            let mut source = upload_source(run, &meter);
            while let Some(chunk) = source.next_chunk().await {
                tcp.write_all(&chunk).await.map_err(|e| format!("send: {e}"))?;
                meter.add(chunk.len() as u64);
            }
            // End of data for "until closed"; harmless after a byte count.
            tcp.shutdown().await.map_err(|e| format!("shutdown: {e}"))?;
            let mut reply = [0u8; REPLY_LEN + REPORT_LEN];
            tcp.read_exact(&mut reply).await.map_err(|e| format!("read the server's report: {e}"))?;
            run.end = Some(Instant::now());
            let mut head = [0u8; REPLY_LEN];
            head.copy_from_slice(&reply[..REPLY_LEN]);
            raw::check_reply_head(&head)?;
            let mut report = [0u8; REPORT_LEN];
            report.copy_from_slice(&reply[REPLY_LEN..]);
            let report = raw::UploadReport::decode(&report);
            run.server = Some(ServerCount { bytes: report.bytes, duration_ms: report.duration_ns as f64 / 1e6 });
            check_upload(meter.total(), report.bytes)
        }
    }
}

/// A request body: none (downloads) or a [`PatternStream`] counted into the meter as hyper
/// takes it (uploads).
struct BulkBody {
    source: Option<PatternStream>,
    meter: Option<Arc<Meter>>,
    /// A byte-count upload: its exact length (`content-length`); else chunked.
    exact: bool,
}

impl Body for BulkBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let Some(source) = &mut this.source else { return Poll::Ready(None) };
        match source.poll_chunk(cx) {
            Poll::Ready(Some(chunk)) => {
                if let Some(m) = &this.meter {
                    m.add(chunk.len() as u64);
                }
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.source.as_ref().is_none_or(|s| s.remaining() == 0)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.source {
            None => SizeHint::with_exact(0),
            Some(s) if self.exact => SizeHint::with_exact(s.remaining()),
            Some(_) => SizeHint::default(),
        }
    }
}

/// `host[:port]` (IPv6 literals in brackets; the port only when it is not the scheme's).
fn authority(bulk: &Bulk, default_port: u16) -> String {
    let host = if bulk.host.contains(':') { format!("[{}]", bulk.host) } else { bulk.host.clone() };
    if bulk.addr.port() == default_port {
        host
    } else {
        format!("{host}:{}", bulk.addr.port())
    }
}

/// The request target: `/bytes?n=N[&rate=R]` for downloads (N = the count, or the server's
/// largest for a duration) or the path asked for, `/upload` for uploads.
fn target(bulk: &Bulk) -> String {
    let o = &bulk.options;
    match o.direction {
        Direction::Upload => "/upload".to_string(),
        Direction::Download if o.path.is_some() => o.path.clone().unwrap_or_default(),
        Direction::Download => {
            let n = match o.amount {
                Amount::Bytes(n) => n,
                Amount::Duration(_) => MAX_BYTES_N,
            };
            match o.rate_bps {
                Some(r) => format!("/bytes?n={n}&rate={r}"),
                None => format!("/bytes?n={n}"),
            }
        }
    }
}

/// Bytes a download asks for.
fn requested(bulk: &Bulk) -> u64 {
    match bulk.options.amount {
        Amount::Bytes(n) => n,
        Amount::Duration(_) => MAX_BYTES_N,
    }
}

fn error_text(status: StatusCode, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        format!("HTTP status {}", status.as_u16())
    } else {
        format!("HTTP status {}: {}", status.as_u16(), text.chars().take(200).collect::<String>())
    }
}

/// The server's `/upload` reply: `{"bytes": B, "duration_ns": D}`.
fn upload_reply(body: &[u8]) -> Result<ServerCount, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("the server's upload reply is not JSON: {e}"))?;
    let bytes = v.get("bytes").and_then(serde_json::Value::as_u64).ok_or("the server's upload reply has no \"bytes\"")?;
    let duration_ns = v.get("duration_ns").and_then(serde_json::Value::as_u64).unwrap_or(0);
    Ok(ServerCount { bytes, duration_ms: duration_ns as f64 / 1e6 })
}

async fn read_small_hyper(mut body: Incoming) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("response body: {e}"))?;
        if let Some(d) = frame.data_ref() {
            out.extend_from_slice(&d[..d.len().min(SMALL_BODY - out.len())]);
            if out.len() >= SMALL_BODY {
                break;
            }
        }
    }
    Ok(out)
}

async fn connect_hyper(run: &mut Run<'_>) -> Result<Sender<BulkBody>, String> {
    let tcp = connect_tcp(run).await?;
    let http = run.bulk.connector.http_over_tcp(&run.bulk.host, run.bulk.addr, tcp).await?;
    run.drivers.push(http.driver);
    Ok(http.sender)
}

async fn hyper_transfer(run: &mut Run<'_>) -> Result<(), String> {
    let bulk = run.bulk;
    let o = &bulk.options;
    let Some(http) = o.protocol.http() else { return Err(format!("{} is not HTTP", o.protocol)) };
    let mut sender = client::within(o.connect_timeout, bulk.addr, connect_hyper(run)).await?;
    let meter = run.begin();
    let (method, body) = match o.direction {
        Direction::Download => (Method::GET, BulkBody { source: None, meter: None, exact: true }),
        Direction::Upload => {
            let source = upload_source(run, &meter);
            (Method::POST, BulkBody { source: Some(source), meter: Some(meter.clone()), exact: matches!(o.amount, Amount::Bytes(_)) })
        }
    };
    let (scheme, default_port) = if http == Protocol::H1c { ("http", 80) } else { ("https", 443) };
    let authority = authority(bulk, default_port);
    let path = target(bulk);
    let uri = match &sender {
        // HTTP/1.1: origin-form target with Host.
        Sender::H1(_) => path.parse::<Uri>(),
        _ => format!("{scheme}://{authority}{path}").parse::<Uri>(),
    }
    .map_err(|e| format!("request URI for {authority}{path}: {e}"))?;
    let mut builder = Request::builder().method(method).uri(uri).header(http::header::USER_AGENT, USER_AGENT);
    if matches!(sender, Sender::H1(_)) {
        builder = builder.header(http::header::HOST, authority.as_str());
    }
    let request = builder.body(body).map_err(|e| format!("request: {e}"))?;
    let response = match &mut sender {
        Sender::H1(s) => {
            s.ready().await.map_err(|e| format!("connection: {e}"))?;
            s.send_request(request).await
        }
        Sender::H2(s) => {
            s.ready().await.map_err(|e| format!("connection: {e}"))?;
            s.send_request(request).await
        }
        Sender::H3(_) => return Err("HTTP/3 over TCP".into()),
    }
    .map_err(|e| format!("request: {e}"))?;
    let status = response.status();
    if status != StatusCode::OK {
        let body = read_small_hyper(response.into_body()).await.unwrap_or_default();
        return Err(error_text(status, &body));
    }
    match o.direction {
        Direction::Download => {
            let ended = receive(run, &mut HyperChunks(response.into_body()), &meter).await?;
            check_download(ended, meter.total(), requested(bulk), matches!(o.amount, Amount::Duration(_)))
        }
        Direction::Upload => {
            let body = read_small_hyper(response.into_body()).await?;
            run.end = Some(Instant::now());
            let count = upload_reply(&body)?;
            run.server = Some(count);
            check_upload(meter.total(), count.bytes)
        }
    }
}

/// QUIC and HTTP/3 to the server, recorded in the run (the qlog file as soon as it exists),
/// with a sampler if asked.
async fn connect_h3(run: &mut Run<'_>) -> Result<h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>, String> {
    let bulk = run.bulk;
    let opened = bulk.connector.open_quic(bulk.addr)?;
    run.qlog = opened.qlog.clone();
    let q = bulk.connector.quic_handshake(opened, &bulk.host, bulk.addr).await?;
    run.connection = Some(ConnectionInfo {
        local: q.local.map(|a| a.to_string()),
        remote: bulk.addr.to_string(),
        protocol: bulk.options.protocol,
        transport: Transport::Quic,
        tcp_cc: None,
        mptcp_fallback: None,
        conn_id: q.conn_id,
    });
    run.drivers.push(q.driver);
    run.sampler = q.sampler;
    run.quic = Some((q.endpoint, q.conn));
    Ok(q.sender)
}

async fn read_small_h3(stream: &mut H3RequestStream) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(mut b) = stream.recv_data().await.map_err(|e| format!("response body: {e}"))? {
        while b.has_remaining() && out.len() < SMALL_BODY {
            let chunk = b.chunk();
            let n = chunk.len().min(SMALL_BODY - out.len());
            out.extend_from_slice(&chunk[..n]);
            b.advance(n);
        }
        if out.len() >= SMALL_BODY {
            break;
        }
    }
    Ok(out)
}

async fn h3_transfer(run: &mut Run<'_>) -> Result<(), String> {
    let bulk = run.bulk;
    let o = &bulk.options;
    let mut sender = client::within(o.connect_timeout, bulk.addr, connect_h3(run)).await?;
    let meter = run.begin();
    let method = if o.direction == Direction::Upload { Method::POST } else { Method::GET };
    let uri = format!("https://{}{}", authority(bulk, 443), target(bulk));
    let request = Request::builder()
        .method(method)
        .uri(uri.as_str())
        .header(http::header::USER_AGENT, USER_AGENT)
        .body(())
        .map_err(|e| format!("request {uri}: {e}"))?;
    let mut stream = sender.send_request(request).await.map_err(|e| format!("request: {e}"))?;
    if o.direction == Direction::Upload {
        let mut source = upload_source(run, &meter);
        while let Some(chunk) = source.next_chunk().await {
            let n = chunk.len() as u64;
            stream.send_data(chunk).await.map_err(|e| format!("send: {e}"))?;
            meter.add(n);
        }
    }
    finish_h3_request(&mut stream).await?;
    let response = stream.recv_response().await.map_err(|e| format!("response: {e}"))?;
    if response.status() != StatusCode::OK {
        let body = read_small_h3(&mut stream).await.unwrap_or_default();
        return Err(error_text(response.status(), &body));
    }
    match o.direction {
        Direction::Download => {
            // At the deadline the stream is dropped (quinn then sends STOP_SENDING) and the
            // connection closed. Not `stop_sending`: after a `recv_data` cut by the deadline,
            // h3-quinn 0.0.10 panics in it (its stream is still inside the cancelled read).
            let ended = receive(run, &mut H3Chunks(&mut stream), &meter).await?;
            check_download(ended, meter.total(), requested(bulk), matches!(o.amount, Amount::Duration(_)))
        }
        Direction::Upload => {
            let body = read_small_h3(&mut stream).await?;
            run.end = Some(Instant::now());
            let count = upload_reply(&body)?;
            run.server = Some(count);
            check_upload(meter.total(), count.bytes)
        }
    }
}
