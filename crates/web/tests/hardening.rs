//! Hardening of the server on loopback (the in-process server of tests/common): malformed
//! requests beyond those of serve.rs, an HTTP/2 rapid-reset flood (HEADERS + RST_STREAM as fast
//! as the client can), slow clients (slowloris on every TCP entry point, slow readers of big
//! responses) and the request-rate limit (the server's memory across repeated abuse rounds is
//! tests/memory.rs, alone in its process). Limits are shortened so
//! every test ends within seconds; no test asserts a wall-clock time beyond generous deadlines
//! that only detect a hung server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use web::Limits;

mod common;
use common::abuse::*;
use common::Lab;

/// Sends raw bytes on the h1c port and returns the reply (up to the server's close).
async fn raw_h1(lab: &Lab, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(lab.http).await.unwrap();
    let _ = s.write_all(bytes).await;
    let (reply, closed) = drain(&mut s, Duration::from_secs(5)).await;
    let text = String::from_utf8_lossy(&reply).to_string();
    assert!(closed || text.starts_with("HTTP/1.1 "), "no reply and no close: {bytes:?}");
    text
}

fn status_line(reply: &str) -> &str {
    reply.lines().next().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_http1_requests_get_4xx_and_the_server_lives_on() {
    let lab = Lab::start(short_limits()).await;
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        ("bad method token", b"G(T / HTTP/1.1\r\nHost: www.a.test\r\n\r\n".to_vec(), &["400"]),
        ("no version", b"GET /\r\nHost: www.a.test\r\n\r\n".to_vec(), &["400"]),
        ("HTTP/9.9", b"GET / HTTP/9.9\r\nHost: www.a.test\r\n\r\n".to_vec(), &["400", "505"]),
        ("NUL in a header value", b"GET / HTTP/1.1\r\nHost: www.a.test\r\nX: a\x00b\r\n\r\n".to_vec(), &["400"]),
        ("space before colon", b"GET / HTTP/1.1\r\nHost : www.a.test\r\n\r\n".to_vec(), &["400"]),
        ("two content-lengths", b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde".to_vec(), &["400"]),
        ("content-length not a number", b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1e3\r\n\r\n".to_vec(), &["400"]),
        ("bad chunk size", b"POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n".to_vec(), &["400"]),
        (
            "chunk size overflow",
            b"POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\nabc\r\n".to_vec(),
            &["400"],
        ),
        ("101 header fields (limit 100)", {
            let mut r = b"GET / HTTP/1.1\r\nHost: www.a.test\r\n".to_vec();
            for i in 0..101 {
                r.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
            }
            r.extend_from_slice(b"\r\n");
            r
        }, &["431"]),
        ("40 KiB request target", format!("GET /{} HTTP/1.1\r\nHost: www.a.test\r\n\r\n", "a".repeat(40 * 1024)).into_bytes(), &["414", "431"]),
    ];
    for (what, bytes, statuses) in &cases {
        let reply = raw_h1(&lab, bytes).await;
        let line = status_line(&reply);
        // A close without a reply is acceptable for a malformed head, a wrong status is not.
        if !line.is_empty() {
            assert!(statuses.iter().any(|s| line.starts_with(&format!("HTTP/1.1 {s}"))), "{what}: {line:?}");
        }
    }
    // Content-Length and Transfer-Encoding together (request smuggling): refused, or answered
    // once with the body read as chunked and the connection closed (RFC 9112 §6.3): the bytes
    // behind the chunked body are never taken for a second request.
    let reply = raw_h1(
        &lab,
        b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .await;
    let line = status_line(&reply);
    assert!(line.starts_with("HTTP/1.1 400") || line.starts_with("HTTP/1.1 200"), "CL+TE: {line:?}");
    assert_eq!(reply.matches("HTTP/1.1 ").count(), 1, "CL+TE: a smuggled request was answered: {reply:?}");
    // A declared 10 GB upload whose body never comes: the body read idles out, nothing is buffered.
    let mut s = TcpStream::connect(lab.http).await.unwrap();
    s.write_all(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 10000000000\r\n\r\nabc").await.unwrap();
    let (_, closed) = drain(&mut s, Duration::from_secs(10)).await;
    assert!(closed, "an upload that stalls is closed by the idle timeout");
    // 2000 pipelined requests on one connection are all answered, in order.
    let mut s = TcpStream::connect(lab.http).await.unwrap();
    let mut pipelined = Vec::new();
    for i in 0..2000 {
        let close = if i == 1999 { "Connection: close\r\n" } else { "" };
        pipelined.extend_from_slice(format!("GET /empty HTTP/1.1\r\nHost: a\r\n{close}\r\n").as_bytes());
    }
    let writer = tokio::spawn(async move {
        s.write_all(&pipelined).await.unwrap();
        s
    });
    let mut s = writer.await.unwrap();
    let (reply, closed) = drain(&mut s, Duration::from_secs(20)).await;
    assert!(closed);
    assert_eq!(String::from_utf8_lossy(&reply).matches("HTTP/1.1 200 OK").count(), 2000);
    assert_serving(&lab).await;
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_http2_frames_end_only_their_connection() {
    let lab = Lab::start(short_limits()).await;
    let settings = frame(4, 0, 0, &[]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("bad preface", b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n".to_vec()),
        ("SETTINGS of 5 bytes", [PREFACE, &frame(4, 0, 0, &[0, 3, 0, 0, 0])].concat()),
        ("SETTINGS on a stream", [PREFACE, &frame(4, 0, 1, &[])].concat()),
        ("HEADERS on stream 0", [PREFACE, &settings, &frame(1, 0x4 | 0x1, 0, &[0x82])].concat()),
        ("even (server) stream id", [PREFACE, &settings, &frame(1, 0x4 | 0x1, 2, &[0x82])].concat()),
        ("garbage HPACK", [PREFACE, &settings, &frame(1, 0x4 | 0x1, 1, &[0xff; 64])].concat()),
        ("DATA on an idle stream", [PREFACE, &settings, &frame(0, 0, 7, b"hello")].concat()),
        ("WINDOW_UPDATE of 0", [PREFACE, &settings, &frame(8, 0, 0, &[0, 0, 0, 0])].concat()),
        ("window overflow", [PREFACE, &settings, &frame(8, 0, 0, &[0x7f, 0xff, 0xff, 0xff])].concat()),
        ("frame larger than SETTINGS_MAX_FRAME_SIZE", [PREFACE, &settings, &frame(6, 0, 0, &vec![0u8; 70000])].concat()),
        ("CONTINUATION without HEADERS", [PREFACE, &settings, &frame(9, 0x4, 1, &[0x82])].concat()),
    ];
    for (what, bytes) in &cases {
        // Both entry points: h2c with prior knowledge and h2 over TLS.
        let mut s = TcpStream::connect(lab.http).await.unwrap();
        let _ = s.write_all(bytes).await;
        let (_, closed) = drain(&mut s, Duration::from_secs(5)).await;
        assert!(closed, "h2c {what}: connection not closed");
        let mut t = tls(&lab, b"h2", "www.a.test").await;
        let _ = t.write_all(bytes).await;
        let (_, closed) = drain(&mut t, Duration::from_secs(5)).await;
        assert!(closed, "h2 {what}: connection not closed");
    }
    assert_serving(&lab).await;
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_flood_is_cut_off_and_others_are_served() {
    let lab = Arc::new(Lab::start(short_limits()).await);
    // A normal client keeps fetching over its own connections during the flood.
    let served = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let normal = {
        let (lab, served, stop) = (lab.clone(), served.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(probe(&lab, true, "/bytes?n=100000").await, (200, 100_000));
                served.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut total = 0;
    for round in 0..3 {
        let (sent, ended) = rapid_reset(&lab, 50_000).await;
        eprintln!("rapid reset round {round}: {sent} streams sent, ended by server: {ended}");
        assert!(ended, "round {round}: {sent} HEADERS+RST_STREAM and the server neither ended nor throttled the connection");
        assert!(sent < 50_000, "round {round}: the server let {sent} reset streams through");
        total += sent;
    }
    stop.store(true, Ordering::Relaxed);
    normal.await.unwrap();
    assert!(served.load(Ordering::Relaxed) >= 1, "the normal client was served during the flood");
    eprintln!("normal requests served during the floods: {} (flood streams: {total})", served.load(Ordering::Relaxed));
    assert_serving(&lab).await;
    Arc::try_unwrap(lab).ok().unwrap().stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_on_h1c_tls_and_h1_is_closed_by_the_head_timeout() {
    let lab = Arc::new(Lab::start(short_limits()).await);
    let limit = Duration::from_secs(8);
    let every = Duration::from_millis(150);
    let mut slow = tokio::task::JoinSet::new();
    let connected = Arc::new(AtomicU64::new(0));
    for i in 0..300 {
        let (lab, connected) = (lab.clone(), connected.clone());
        slow.spawn(async move {
            match i % 3 {
                // h1c: a request head that never ends.
                0 => {
                    let s = TcpStream::connect(lab.http).await.unwrap();
                    connected.fetch_add(1, Ordering::Relaxed);
                    ("h1c", trickle(s, SLOW_HEAD, SLOW_FIELD, every, limit).await)
                }
                // TLS: a handshake record that never completes.
                1 => {
                    let s = TcpStream::connect(lab.https).await.unwrap();
                    connected.fetch_add(1, Ordering::Relaxed);
                    ("tls handshake", trickle(s, &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01], &[0u8], every, limit).await)
                }
                // HTTP/1.1 over TLS: a request head that never ends.
                _ => {
                    let s = tls(&lab, b"http/1.1", "www.a.test").await;
                    connected.fetch_add(1, Ordering::Relaxed);
                    ("h1 over tls", trickle(s, SLOW_HEAD, SLOW_FIELD, every, limit).await)
                }
            }
        });
    }
    // A normal client is served while 300 slow clients are connected.
    common::wait_until("300 slow clients connected", Duration::from_secs(30), || connected.load(Ordering::Relaxed) == 300).await;
    for _ in 0..5 {
        assert_eq!(probe(&lab, false, "/").await, (200, 14000));
        assert_eq!(probe(&lab, true, "/static/none").await.0, 404);
    }
    while let Some(r) = slow.join_next().await {
        let (kind, closed) = r.unwrap();
        assert!(closed.is_some(), "{kind}: a slowloris client was still connected after {limit:?}");
    }
    assert_serving(&lab).await;
    Arc::try_unwrap(lab).ok().unwrap().stop().await;
}

/// HTTP/2 has no request-head timeout in hyper: a client that trickles a HEADERS frame moves
/// bytes all the time. The server counts bytes as progress only while a request is in flight,
/// so this client is idle and is closed by the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_on_h2_is_closed() {
    let lab = Lab::start(short_limits()).await;
    let mut first = PREFACE.to_vec();
    first.extend_from_slice(&frame(4, 0, 0, &[]));
    // HEADERS of 200 bytes on stream 1, END_HEADERS: payload trickled.
    first.extend_from_slice(&[0, 0, 200, 1, 0x4 | 0x1, 0, 0, 0, 1]);
    let t = tls(&lab, b"h2", "www.a.test").await;
    let closed = trickle(t, &first, &[0x40], Duration::from_millis(150), Duration::from_secs(8)).await;
    assert!(closed.is_some(), "an h2 client trickling a HEADERS frame was never closed");
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_of_big_responses_do_not_block_others_and_are_closed() {
    let lab = Lab::start(short_limits()).await;
    let mut stalled = Vec::new();
    for _ in 0..50 {
        stalled.push(stalled_reader(&lab, false).await);
    }
    // h2 slow readers: streams of 1 GB whose flow-control window we never open beyond the default.
    let mut h2_readers = Vec::new();
    for _ in 0..10 {
        let io = tls(&lab, b"h2", "www.a.test").await;
        let (mut client, conn) = h2::client::handshake(io).await.unwrap();
        let driver = tokio::spawn(conn);
        let mut responses = Vec::new();
        for _ in 0..10 {
            client = client.ready().await.unwrap();
            let (resp, _) = client.send_request(Request::get("https://www.a.test/bytes?n=1000000000").body(()).unwrap(), true).unwrap();
            responses.push(resp);
        }
        h2_readers.push((client, driver, responses));
    }
    // A trickle reader: reads 1 KiB every 100 ms (keeps the connection active).
    let mut trickler = TcpStream::connect(lab.http).await.unwrap();
    trickler.write_all(b"GET /bytes?n=1000000000 HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    let trickle_task = tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        for _ in 0..30 {
            if matches!(trickler.read(&mut buf).await, Ok(0) | Err(_)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    // Others are served, big bodies included.
    for _ in 0..5 {
        assert_eq!(probe(&lab, false, "/bytes?n=5000000").await, (200, 5_000_000));
        assert_eq!(probe(&lab, true, "/bytes?n=5000000").await, (200, 5_000_000));
    }
    // Readers that read nothing are closed by the idle timeout once their buffers are full
    // (idle 0.8 s + 1 s grace).
    assert_closed_by_server(stalled).await;
    for (client, driver, responses) in h2_readers {
        drop(responses);
        drop(client);
        let _ = tokio::time::timeout(Duration::from_secs(10), driver).await.expect("h2 slow reader connection not closed");
    }
    trickle_task.await.unwrap();
    assert_serving(&lab).await;
    lab.stop().await;
}

/// A connection that makes requests faster than `max_requests_per_second` gets 429 with
/// `retry-after` beyond the burst; other connections are not affected. (Counted, not timed: 30
/// requests sent back to back take far less than the second it takes to refill one token.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_rate_per_connection_is_limited() {
    let lab = Lab::start(Limits { max_requests_per_second: 1, max_request_burst: 5, ..Limits::default() }).await;
    for h2 in [true, false] {
        let mut statuses = Vec::new();
        if h2 {
            let io = tls(&lab, b"h2", "www.a.test").await;
            let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io)).await.unwrap();
            tokio::spawn(conn);
            for _ in 0..30 {
                let mut send = send.clone();
                let r = send.send_request(Request::get("https://www.a.test/s.css").body(Empty::<Bytes>::new()).unwrap()).await.unwrap();
                if r.status() == 429 {
                    assert!(r.headers()["retry-after"].to_str().unwrap().parse::<u64>().unwrap() >= 1);
                }
                statuses.push(r.status().as_u16());
            }
        } else {
            let io = TcpStream::connect(lab.http).await.unwrap();
            let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.unwrap();
            tokio::spawn(conn);
            for _ in 0..30 {
                send.ready().await.unwrap();
                let r = send.send_request(Request::get("/s.css").header("host", "www.a.test").body(Empty::<Bytes>::new()).unwrap()).await.unwrap();
                statuses.push(r.status().as_u16());
                r.into_body().collect().await.unwrap();
            }
        }
        let ok = statuses.iter().filter(|&&s| s == 200).count();
        let limited = statuses.iter().filter(|&&s| s == 429).count();
        assert_eq!(ok + limited, 30, "{statuses:?}");
        assert!((5..=6).contains(&ok), "h2={h2}: the burst of 5 (+1 refilled at most) passes: {statuses:?}");
        assert_eq!(&statuses[..5], &[200; 5]);
        // A new connection has its own bucket.
        assert_eq!(probe(&lab, h2, "/").await, (200, 14000));
    }
    lab.stop().await;
}
