//! The HTTP/3 side of the server: quinn's configuration (with a per-connection qlog when
//! asked), the QUIC accept loop, and requests over h3 routed through the shared [`handle`].

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use tokio::task::JoinSet;
use tokio_rustls::rustls;

use super::{handle, report_skipped, too_many_requests, Ctx, Limits, ServeError};
use crate::instrument::{self, Role};
use crate::ratelimit::RequestBucket;
use crate::transport::QuicOptions;

/// quinn's server configuration: the TLS configuration's certificates and SNI selection with
/// ALPN `h3`, the QUIC options, the stream limit and the idle timeout, and a qlog stream when
/// one connection is to be logged.
pub(super) fn quic_server_config(tls: &rustls::ServerConfig, limits: &Limits, quic: &QuicOptions, qlog: Option<quinn::QlogStream>) -> Result<quinn::ServerConfig, ServeError> {
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    // QUIC needs early data off or unlimited: unlimited, so that warm loads (a resumed
    // session) can send their first requests as 0-RTT data.
    tls.max_early_data_size = u32::MAX;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(|e| ServeError::Quic(e.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(quic_transport(limits, quic, qlog)?));
    Ok(config)
}

fn quic_transport(limits: &Limits, quic: &QuicOptions, qlog: Option<quinn::QlogStream>) -> Result<quinn::TransportConfig, ServeError> {
    let mut transport = quic.transport_config()?;
    transport.max_concurrent_bidi_streams(quinn::VarInt::from_u32(limits.max_concurrent_streams));
    // Durations beyond 2^62 ms do not exist in practice; such a value means no timeout.
    transport.max_idle_timeout(quinn::IdleTimeout::try_from(limits.idle_timeout).ok());
    transport.qlog_stream(qlog);
    Ok(transport)
}

/// A copy of the QUIC server configuration whose transport writes a qlog of this connection,
/// when qlogs are asked for. A qlog that cannot be opened is reported and skipped.
fn qlog_config(ctx: &Ctx, conn_id: &str) -> Option<quinn::ServerConfig> {
    let (stream, _) = ctx.instrument.qlog(Role::Server, conn_id).unwrap_or_else(|e| report_skipped("qlog", conn_id, e))?;
    let mut config = ctx.quic_config.clone();
    // The options were checked when the server was bound; they cannot fail now.
    config.transport_config(Arc::new(quic_transport(&ctx.limits, &ctx.quic, Some(stream)).ok()?));
    Some(config)
}
/// One QUIC handshake in progress, counted in `Ctx::handshaking` until it completes, times out
/// or its connection ends (dropped).
struct HandshakeSlot(Arc<AtomicUsize>);

impl HandshakeSlot {
    fn take(count: &Arc<AtomicUsize>) -> HandshakeSlot {
        count.fetch_add(1, Ordering::Relaxed);
        HandshakeSlot(count.clone())
    }
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

type H3Connection = h3::server::Connection<h3_quinn::Connection, Bytes>;
type H3Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

pub(super) async fn quic_accept_loop(endpoint: quinn::Endpoint, ctx: Arc<Ctx>) {
    let bound_ip = endpoint.local_addr().ok().map(|a| a.ip()).filter(|ip| !ip.is_unspecified());
    let local_port = endpoint.local_addr().ok().map(|a| a.port());
    let mut connections = JoinSet::new();
    // Ends when the endpoint is closed.
    while let Some(incoming) = endpoint.accept().await {
        while connections.try_join_next().is_some() {}
        if !incoming.remote_address_validated() && incoming.may_retry() && ctx.handshaking.load(Ordering::Relaxed) >= ctx.limits.quic_handshakes_before_retry {
            // Stateless: nothing is kept until the client comes back with the Retry's token.
            // Cannot fail after may_retry(); a refused retry just drops the Initial.
            let _ = incoming.retry();
            continue;
        }
        let Ok(permit) = ctx.connections.clone().try_acquire_owned() else {
            incoming.refuse();
            continue;
        };
        let ctx = ctx.clone();
        let handshake_slot = HandshakeSlot::take(&ctx.handshaking);
        connections.spawn(async move {
            let _permit = permit;
            let local_ip = incoming.local_ip().or(bound_ip);
            let peer = incoming.remote_address();
            let local = local_ip.zip(local_port).map(|(ip, port)| SocketAddr::new(ip, port));
            let conn_id = instrument::connection_id("quic", Some(peer), local);
            let connecting = match qlog_config(&ctx, &conn_id) {
                Some(config) => incoming.accept_with(Arc::new(config)),
                None => incoming.accept(),
            };
            let Ok(mut connecting) = connecting else { return };
            // The ClientHello first (it may span several Initial packets): its transport
            // parameters carry the stream limits that the HTTP/3 set-up needs to open its
            // control streams at once.
            let Ok(Ok(_)) = tokio::time::timeout(ctx.limits.handshake_timeout, connecting.handshake_data()).await else { return };
            // Then 0.5-RTT: the connection serves at once, so that requests a resuming client
            // sent as 0-RTT data are answered before the handshake completes (a server always
            // gets Ok here). The handshake must still complete within its timeout, or the
            // connection is closed.
            let Ok((conn, established)) = connecting.into_0rtt() else { return };
            let (handshake_done, handshake) = tokio::sync::watch::channel(false);
            let watchdog = {
                let conn = conn.clone();
                let timeout = ctx.limits.handshake_timeout;
                // The future resolves when the handshake completes (to whether 0-RTT data was
                // accepted: false for a client that sent none) or the connection ends.
                tokio::spawn(async move {
                    match tokio::time::timeout(timeout, established).await {
                        Ok(_) => drop(handshake_done.send(true)),
                        Err(_) => conn.close(quinn::VarInt::from_u32(0), b"handshake timeout"),
                    }
                    drop(handshake_slot);
                })
            };
            let sampler = ctx
                .instrument
                .quic_sampler(&conn, &conn_id, Role::Server, &ctx.quic.controller.given)
                .unwrap_or_else(|e| report_skipped("samples", &conn_id, e));
            // Sprout-EWMA's feedback loop (sprout-ewma only), stopped with the connection's
            // service so that it does not keep the connection open.
            let feedback = crate::feedback::feedback_loop(&conn, &ctx.quic.controller).map(|f| (tokio::spawn(f), conn.clone()));
            serve_h3(conn, handshake, peer, local_ip, ctx).await;
            watchdog.abort();
            if let Some((f, conn)) = feedback {
                f.abort();
                crate::feedback::warn_without_reports(&conn, &conn_id);
            }
            if let Some(s) = sampler {
                let _ = s.stop().await;
            }
        });
    }
}

/// HTTP/3 over `conn`, from 0.5-RTT on; `handshake` turns true when the handshake completes.
async fn serve_h3(conn: quinn::Connection, mut handshake: tokio::sync::watch::Receiver<bool>, peer: SocketAddr, local_ip: Option<IpAddr>, ctx: Arc<Ctx>) {
    let mut builder = h3::server::builder();
    builder.max_field_section_size(ctx.limits.max_header_bytes as u64);
    let setup = async {
        let build = builder.build::<_, Bytes>(h3_quinn::Connection::new(conn));
        tokio::pin!(build);
        // Should the control streams still lack the client's stream limits, quinn would not
        // wake their opener when they arrive (it applies transport parameters without a
        // stream event): poll again once the handshake is done rather than at the timeout.
        let early = tokio::select! {
            built = &mut build => Some(built),
            _ = handshake.wait_for(|done| *done) => None,
        };
        match early {
            Some(built) => built,
            None => build.await,
        }
    };
    let Ok(Ok(mut h3c)) = tokio::time::timeout(ctx.limits.handshake_timeout, setup).await else { return };
    let h3c: &mut H3Connection = &mut h3c;
    let mut requests = JoinSet::new();
    let bucket = Arc::new(std::sync::Mutex::new(RequestBucket::new(ctx.limits.max_requests_per_second, ctx.limits.max_request_burst, Instant::now())));
    // Ends on GOAWAY, a connection error or the idle timeout (quinn closes the connection).
    while let Ok(Some(resolver)) = h3c.accept().await {
        while requests.try_join_next().is_some() {}
        let ctx = ctx.clone();
        let bucket = bucket.clone();
        requests.spawn(async move {
            // Malformed request heads end their own stream (h3 resets it).
            if let Ok((req, stream)) = resolver.resolve_request().await {
                let limited = bucket.lock().map(|mut b| b.take(Instant::now()).err()).unwrap_or(Some(Duration::from_secs(1)));
                serve_h3_request(req, stream, &ctx, local_ip, peer, limited).await;
            }
        });
    }
    // Dropping the h3 connection closes it: let the requests in flight finish first.
    while requests.join_next().await.is_some() {}
}

/// A request body read from an HTTP/3 request stream.
struct H3Body {
    recv: h3::server::RequestStream<h3_quinn::RecvStream, Bytes>,
}

impl Body for H3Body {
    type Data = Bytes;
    type Error = h3::error::StreamError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut().recv.poll_recv_data(cx) {
            Poll::Ready(Ok(Some(mut buf))) => Poll::Ready(Some(Ok(Frame::data(buf.copy_to_bytes(buf.remaining()))))),
            Poll::Ready(Ok(None)) => Poll::Ready(None),
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Request bodies of methods that carry none (GET, HEAD, ...) are read and discarded up to this
/// many bytes; more is a bad request.
const H3_IGNORED_BODY_LIMIT: usize = 64 * 1024;

async fn serve_h3_request(req: Request<()>, mut stream: H3Stream, ctx: &Ctx, local_ip: Option<IpAddr>, _peer: SocketAddr, limited: Option<Duration>) {
    if req.method() != Method::POST && req.method() != Method::PUT {
        // Wait for the end of the request (its FIN follows the HEADERS at once) before
        // answering: closing the receive side earlier makes quinn send STOP_SENDING, and a
        // client still finishing its request stream sees an error instead of the response.
        let drained = tokio::time::timeout(ctx.limits.handshake_timeout, async {
            let mut ignored = 0usize;
            while let Ok(Some(chunk)) = stream.recv_data().await {
                ignored += chunk.remaining();
                if ignored > H3_IGNORED_BODY_LIMIT {
                    return false;
                }
            }
            true
        })
        .await;
        if drained != Ok(true) {
            stream.stop_stream(h3::error::Code::H3_REQUEST_REJECTED);
            return;
        }
    }
    let (mut send, recv) = stream.split();
    let response = match limited {
        Some(wait) => too_many_requests(wait),
        None => handle(req.map(|()| H3Body { recv }), ctx, local_ip, true).await,
    };
    let (parts, mut body) = response.into_parts();
    if send.send_response(Response::from_parts(parts, ())).await.is_err() {
        return;
    }
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame;
        if let Ok(data) = frame.into_data() {
            if send_repolled(send.send_data(data)).await.is_err() {
                return;
            }
        }
    }
    let _ = send.finish().await;
}

/// How often a pending response write is polled again without a wake-up (see `send_repolled`).
const STRANDED_WRITE_REPOLL: Duration = Duration::from_secs(1);

/// Awaits a response write, polling it again every `STRANDED_WRITE_REPOLL`. quinn-proto 0.11.19
/// strands a writer that a STOP_SENDING finds blocked: the wake-up makes it write again, but a
/// write refused by connection-level flow control returns `Blocked` before the stream is checked
/// for the stop, and when the window reopens, a stream that is also at its own limit (which a
/// stopped stream never gets raised) is skipped without a wake-up. The writer then waits forever
/// and the client never gets its RESET_STREAM (seen in tests/h3.rs: 6 of 7 stopped downloads
/// reset, the seventh never, in 8 of 45 runs under two CPU hogs; none in 48 runs since, and in 4
/// of the 40 that were watched this repoll ended a stranded write). Polled again once the
/// connection has credit, the write returns `Stopped`, the stream is dropped and quinn resets it.
/// The same future is polled again, never dropped: h3 holds the data inside it.
async fn send_repolled<F: std::future::Future>(write: F) -> F::Output {
    tokio::pin!(write);
    loop {
        tokio::select! {
            done = &mut write => return done,
            _ = tokio::time::sleep(STRANDED_WRITE_REPOLL) => {}
        }
    }
}
