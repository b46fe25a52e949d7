//! Abusive clients shared by the hardening tests (tests/hardening.rs) and the memory test
//! (tests/memory.rs, alone in its process so that its RSS readings see no other test).
#![allow(dead_code)] // each test file uses its own subset

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;
use web::Limits;

use super::Lab;

/// Short limits: header/handshake reads end after 600 ms, idle connections and responses the
/// client does not read after 800 ms.
pub fn short_limits() -> Limits {
    Limits {
        handshake_timeout: Duration::from_millis(600),
        idle_timeout: Duration::from_millis(800),
        send_timeout: Duration::from_millis(800),
        ..Limits::default()
    }
}

pub async fn tls(lab: &Lab, alpn: &[u8], host: &str) -> TlsStream<TcpStream> {
    let connector = TlsConnector::from(Arc::new(lab.material.client_config(&[alpn]).unwrap()));
    let tcp = TcpStream::connect(lab.https).await.unwrap();
    let s = connector.connect(ServerName::try_from(host.to_string()).unwrap(), tcp).await.unwrap();
    assert_eq!(s.get_ref().1.alpn_protocol(), Some(alpn));
    s
}

/// One GET over a fresh connection of hyper's client (h2 over TLS, or h1c); returns status and
/// body length once the client's side of the connection has ended too (no task of it is left:
/// tests/memory.rs counts the heap). Panics (test failure) when that takes more than 10 s.
pub async fn probe(lab: &Lab, h2: bool, target: &str) -> (u16, usize) {
    let fut = async {
        let (r, conn) = if h2 {
            let io = tls(lab, b"h2", "www.a.test").await;
            let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io)).await.unwrap();
            let conn = tokio::spawn(conn);
            (send.send_request(Request::get(format!("https://www.a.test{target}")).body(Empty::<Bytes>::new()).unwrap()).await.unwrap(), conn)
        } else {
            let io = TcpStream::connect(lab.http).await.unwrap();
            let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.unwrap();
            let conn = tokio::spawn(conn);
            (send.send_request(Request::get(target).header("host", "www.a.test").body(Empty::<Bytes>::new()).unwrap()).await.unwrap(), conn)
        };
        let status = r.status().as_u16();
        let length = r.into_body().collect().await.unwrap().to_bytes().len();
        // The request handle is gone (dropped with its block above): the connection ends.
        let _ = conn.await;
        (status, length)
    };
    tokio::time::timeout(Duration::from_secs(10), fut).await.expect("a normal client was not served, or its connection did not end, within 10 s")
}

pub async fn assert_serving(lab: &Lab) {
    assert_eq!(probe(lab, false, "/").await, (200, 14000));
    assert_eq!(probe(lab, true, "/").await, (200, 14000));
}

/// Everything the server sends until it closes the connection (or `limit` elapses: then
/// `closed` is false).
pub async fn drain<S: AsyncRead + Unpin>(s: &mut S, limit: Duration) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    let deadline = Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline.into(), s.read(&mut buf)).await {
            Err(_) => return (out, false),
            Ok(Ok(0)) | Ok(Err(_)) => return (out, true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// An HTTP/2 frame: 9-byte header and payload.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Opens an HTTP/2 connection with the h2 crate and sends HEADERS + RST_STREAM pairs as fast as
/// it can, up to `max_streams`. Returns (streams sent, whether the server ended the connection).
pub async fn rapid_reset(lab: &Lab, max_streams: u64) -> (u64, bool) {
    let io = tls(lab, b"h2", "www.a.test").await;
    let (mut client, conn) = h2::client::Builder::new().handshake::<_, Bytes>(io).await.unwrap();
    let driver = tokio::spawn(conn);
    let mut sent = 0u64;
    let mut ended = false;
    let deadline = Instant::now() + Duration::from_secs(15);
    while sent < max_streams && Instant::now() < deadline {
        client = match tokio::time::timeout(Duration::from_secs(5), client.clone().ready()).await {
            Ok(Ok(c)) => c,
            Ok(Err(_)) => {
                ended = true;
                break;
            }
            Err(_) => break, // throttled: no stream credit for 5 s
        };
        let req = Request::get("https://www.a.test/static/none").body(()).unwrap();
        let req = if sent % 2 == 0 { req } else { Request::get("https://www.a.test/bytes?n=1000000").body(()).unwrap() };
        match client.send_request(req, true) {
            Ok((response, mut stream)) => {
                stream.send_reset(h2::Reason::CANCEL);
                drop(response);
                sent += 1;
            }
            Err(_) => {
                ended = true;
                break;
            }
        }
        if sent % 256 == 0 {
            tokio::task::yield_now().await;
        }
    }
    drop(client);
    // The connection task ends with the server's GOAWAY (an error) or when we drop our side.
    let outcome = tokio::time::timeout(Duration::from_secs(5), driver).await;
    if let Ok(Ok(Err(e))) = &outcome {
        ended |= e.is_go_away() || e.is_io() || e.reason().is_some();
    }
    (sent, ended)
}

/// A slow client: sends `first`, then one byte of `rest` every `every`, until the server closes
/// the connection or `limit` elapses. Returns whether the server closed it, and when.
pub async fn trickle<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, first: &[u8], rest: &[u8], every: Duration, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    if s.write_all(first).await.is_err() {
        return Some(start.elapsed());
    }
    let mut i = 0;
    let mut buf = [0u8; 4096];
    while start.elapsed() < limit {
        // Read (answers are drained) for `every`, then write one more byte.
        match tokio::time::timeout(every, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => continue,
            Err(_) => {}
        }
        let byte = rest[i % rest.len()];
        i += 1;
        if s.write_all(&[byte]).await.is_err() || s.flush().await.is_err() {
            return Some(start.elapsed());
        }
    }
    None
}

pub const SLOW_HEAD: &[u8] = b"GET / HTTP/1.1\r\nHost: www.a.test\r\n";

pub const SLOW_FIELD: &[u8] = b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";

/// A client that requests a big response and does not read it; returned once the server's end
/// of the connection is established (see `closed_by_server`).
pub async fn stalled_reader(lab: &Lab, h2: bool) -> TcpStream {
    assert!(!h2);
    let mut s = TcpStream::connect(lab.http).await.unwrap();
    s.write_all(b"GET /bytes?n=1000000000 HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    super::wait_until("the server's end of a stalled reader established", SERVER_GIVES_UP, || {
        tcp_states().get(&ends_seen_by_server(&s)) == Some(&TCP_ESTABLISHED)
    })
    .await;
    s
}

/// A generous bound on the server's closing of a connection that makes no progress (idle
/// timeout, then a graceful close with a one-second grace): only a server that never closes it
/// exceeds it.
pub const SERVER_GIVES_UP: Duration = Duration::from_secs(30);

/// `st` of an established socket in /proc/net/tcp (include/net/tcp_states.h).
const TCP_ESTABLISHED: u8 = 1;

/// The (local, remote) addresses of the server's end of a client's loopback connection.
fn ends_seen_by_server(client: &TcpStream) -> (SocketAddr, SocketAddr) {
    (client.peer_addr().unwrap(), client.local_addr().unwrap())
}

/// The kernel's TCP sockets of this network namespace (IPv4, /proc/net/tcp), by (local,
/// remote) address, with their state. Both ends of a loopback connection are there, so a client
/// sees when the server has closed its end without reading (which would let the server write).
pub fn tcp_states() -> HashMap<(SocketAddr, SocketAddr), u8> {
    fn address(hex: &str) -> Option<SocketAddr> {
        let (ip, port) = hex.split_once(':')?;
        // The address as the kernel's u32 in network order, printed in host order.
        let ip = Ipv4Addr::from(u32::from_str_radix(ip, 16).ok()?.to_ne_bytes());
        Some(SocketAddr::from((ip, u16::from_str_radix(port, 16).ok()?)))
    }
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            Some(((address(fields.get(1)?)?, address(fields.get(2)?)?), u8::from_str_radix(fields.get(3)?, 16).ok()?))
        })
        .collect()
}

/// Waits until the server has closed every stalled reader (reading earlier would let it write
/// again), then reads each to its end: closed, before most of its 1 GB response.
pub async fn assert_closed_by_server(stalled: Vec<TcpStream>) {
    super::wait_until("every stalled reader closed by the server", SERVER_GIVES_UP, || {
        let states = tcp_states();
        stalled.iter().all(|s| closed_by_server(&states, s))
    })
    .await;
    for mut s in stalled {
        let (got, closed) = drain(&mut s, Duration::from_secs(10)).await;
        assert!(closed, "a stalled reader was not closed");
        assert!(got.len() < 100_000_000, "a stalled reader got {} bytes", got.len());
    }
}

/// Whether the server has closed its end of `client`'s connection (established once, as
/// `stalled_reader` made sure: any other state, or none, is a close), given `tcp_states()`.
pub fn closed_by_server(states: &HashMap<(SocketAddr, SocketAddr), u8>, client: &TcpStream) -> bool {
    states.get(&ends_seen_by_server(client)) != Some(&TCP_ESTABLISHED)
}

pub fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// One round of abuse: a rapid-reset flood, 90 slowloris clients, 20 stalled readers, 200
/// normal requests; returns when the server has closed every abusive connection.
pub async fn abuse_round(lab: &Arc<Lab>) {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..90 {
        let lab = lab.clone();
        tasks.spawn(async move {
            let every = Duration::from_millis(100);
            let limit = Duration::from_secs(8);
            let closed = if i % 2 == 0 {
                trickle(TcpStream::connect(lab.http).await.unwrap(), SLOW_HEAD, SLOW_FIELD, every, limit).await
            } else {
                trickle(tls(&lab, b"http/1.1", "www.a.test").await, SLOW_HEAD, SLOW_FIELD, every, limit).await
            };
            assert!(closed.is_some());
        });
    }
    let mut stalled = Vec::new();
    for _ in 0..20 {
        stalled.push(stalled_reader(lab, false).await);
    }
    let (_, ended) = rapid_reset(lab, 50_000).await;
    assert!(ended);
    for i in 0..100 {
        assert_eq!(probe(lab, i % 2 == 0, "/").await, (200, 14000));
    }
    assert_closed_by_server(stalled).await;
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
}
