//! HTTP/3 on loopback: a quinn + h3 client trusting the lab's CA fetches manifest objects and the
//! synthetic endpoints over UDP on the HTTPS port; TCP responses advertise it with `Alt-Svc`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;
use web::body::Block;
use web::Limits;

mod common;
use common::Lab;

/// One HTTP/3 connection (SNI `server_name`).
struct H3Client {
    endpoint: quinn::Endpoint,
    /// The QUIC connection under h3 (its statistics).
    quic: quinn::Connection,
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    driver: tokio::task::JoinHandle<()>,
}

async fn h3_connect(lab: &Lab, server_name: &str) -> H3Client {
    h3_connect_with(lab, server_name, quinn::TransportConfig::default()).await
}

async fn h3_connect_with(lab: &Lab, server_name: &str, transport: quinn::TransportConfig) -> H3Client {
    let tls = lab.material.client_config(&[b"h3"]).unwrap();
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    endpoint.set_default_client_config(config);
    let conn = tokio::time::timeout(Duration::from_secs(5), endpoint.connect(lab.h3, server_name).unwrap()).await.unwrap().unwrap();
    let alpn = conn.handshake_data().unwrap().downcast::<quinn::crypto::rustls::HandshakeData>().unwrap().protocol;
    assert_eq!(alpn.as_deref(), Some(&b"h3"[..]));
    let quic = conn.clone();
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn)).await.unwrap();
    let driver = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    H3Client { endpoint, quic, send, driver }
}

/// Ends the request side. The server may stop it before our FIN once it has what it needs (it
/// drops a GET's empty body at once; quinn then sends STOP_SENDING, code 0): RFC 9114 §4.1, the
/// response still counts.
async fn finish(stream: &mut h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>) {
    match stream.finish().await {
        Ok(()) | Err(h3::error::StreamError::RemoteTerminate { .. }) => {}
        Err(e) => panic!("finish: {e}"),
    }
}

impl H3Client {
    async fn send(&mut self, method: &str, url: &str, body: Bytes) -> (http::Response<()>, Bytes) {
        let req = http::Request::builder().method(method).uri(url).body(()).unwrap();
        let mut stream = self.send.send_request(req).await.unwrap();
        if !body.is_empty() {
            // In pieces, as a client streaming an upload would.
            // A server that answers without the body (a 405) may stop the request side first:
            // RFC 9114 §4.1, the response still counts (as in `finish`).
            for chunk in body.chunks(100_000) {
                match stream.send_data(Bytes::copy_from_slice(chunk)).await {
                    Ok(()) => {}
                    Err(h3::error::StreamError::RemoteTerminate { .. }) => break,
                    Err(e) => panic!("send_data: {e}"),
                }
            }
        }
        finish(&mut stream).await;
        let response = stream.recv_response().await.unwrap();
        let mut got = BytesMut::new();
        while let Some(mut chunk) = stream.recv_data().await.unwrap() {
            got.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
        }
        (response, got.freeze())
    }

    async fn get(&mut self, url: &str) -> (http::Response<()>, Bytes) {
        self.send("GET", url, Bytes::new()).await
    }

    async fn close(self) {
        drop(self.send);
        self.endpoint.close(quinn::VarInt::from_u32(0), b"done");
        self.driver.abort();
    }
}

/// A real client (quinn + h3, the lab's CA) completes a handshake and gets www.a.test's root
/// page (14000 bytes) intact: whatever the test threw at the server left it serving.
async fn assert_real_client_served(lab: &Lab) {
    let mut client = h3_connect(lab, "www.a.test").await;
    let (r, body) = client.get(&format!("https://www.a.test:{}/", lab.h3.port())).await;
    assert_eq!(r.status(), 200, "a real client's GET / after the test's traffic");
    assert_eq!(body.len(), 14000, "www.a.test's root page in full");
    assert!(body[..] == lab.expected("www.a.test", "/")[..], "www.a.test's root page: body differs");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_manifest_objects_over_h3() {
    let lab = Lab::start(Limits::default()).await;
    let port = lab.h3.port();
    for host in ["www.a.test", "static.a.test"] {
        let mut client = h3_connect(&lab, host).await;
        for o in lab.manifest.objects.iter().filter(|o| o.origin == host) {
            let (r, body) = client.get(&format!("https://{host}:{port}{}", o.path)).await;
            assert_eq!(r.status(), 200, "{host}{}", o.path);
            assert_eq!(body.len() as u64, o.size, "{host}{}", o.path);
            assert!(body[..] == lab.expected(host, &o.path)[..], "{host}{}: body differs", o.path);
            assert_eq!(r.headers()["content-type"], o.content_type.as_str());
            assert_eq!(r.headers()["content-length"], o.size.to_string().as_str());
            for (k, v) in &o.headers {
                assert_eq!(r.headers()[k.as_str()], v.as_str());
            }
            // No Alt-Svc over HTTP/3 itself.
            assert!(r.headers().get("alt-svc").is_none());
        }
        let (r, body) = client.send("HEAD", &format!("https://{host}:{port}/bytes?n=77"), Bytes::new()).await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-length"], "77");
        assert!(body.is_empty());
        client.close().await;
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_404_405_and_synthetic_endpoints() {
    let lab = Lab::start(Limits::default()).await;
    let port = lab.h3.port();
    let mut client = h3_connect(&lab, "www.a.test").await;
    let url = |host: &str, target: &str| format!("https://{host}:{port}{target}");
    assert_eq!(client.get(&url("www.a.test", "/nothing")).await.0.status(), 404);
    assert_eq!(client.get(&url("www.a.test", "/big.jpg")).await.0.status(), 404);
    assert_eq!(client.get(&url("static.a.test", "/app.js")).await.0.status(), 404);
    assert_eq!(client.get(&url("elsewhere.test", "/")).await.0.status(), 404);
    assert_eq!(client.send("POST", &url("www.a.test", "/"), Bytes::from_static(b"x")).await.0.status(), 405);

    let block = Block::new(web::server::BYTES_SEED);
    for n in [0u64, 1, 65536, 3_000_001] {
        let (r, body) = client.get(&url("www.a.test", &format!("/bytes?n={n}"))).await;
        assert_eq!(r.status(), 200);
        assert_eq!(body.len() as u64, n, "/bytes?n={n}");
        assert!(body[..] == block.expected(0, n)[..], "/bytes?n={n}: body differs");
        assert_eq!(r.headers()["cache-control"], "no-store");
    }
    assert_eq!(client.get(&url("www.a.test", "/bytes?n=x")).await.0.status(), 400);
    let (r, body) = client.get(&url("www.a.test", "/empty")).await;
    assert_eq!(r.status(), 200);
    assert!(body.is_empty());

    let (r, body) = client.send("POST", &url("www.a.test", "/upload"), Bytes::from(vec![9u8; 1_234_567])).await;
    assert_eq!(r.status(), 200);
    let reply: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(reply["bytes"], 1_234_567);
    assert!(reply["duration_ns"].as_u64().is_some());
    assert_eq!(client.get(&url("www.a.test", "/upload")).await.0.status(), 405);

    // Concurrent requests on one connection.
    let mut streams = Vec::new();
    for _ in 0..8 {
        let req = http::Request::builder().uri(url("static.a.test", "/app.js?v=2")).body(()).unwrap();
        let mut s = client.send.send_request(req).await.unwrap();
        finish(&mut s).await;
        streams.push(s);
    }
    for mut s in streams {
        assert_eq!(s.recv_response().await.unwrap().status(), 200);
        let mut n = 0;
        while let Some(chunk) = s.recv_data().await.unwrap() {
            n += chunk.remaining();
        }
        assert_eq!(n, 70000);
    }
    client.close().await;
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_idle_connections_are_closed() {
    let lab = Lab::start(Limits { idle_timeout: Duration::from_millis(300), ..Limits::default() }).await;
    let client = h3_connect(&lab, "www.a.test").await;
    let started = std::time::Instant::now();
    // The driver ends when the server's idle timeout closes the connection.
    tokio::time::timeout(Duration::from_secs(3), client.driver).await.expect("closed by the idle timeout").unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_responses_advertise_h3() {
    let lab = Lab::start(Limits::default()).await;
    let connector = TlsConnector::from(Arc::new(lab.material.client_config(&[b"h2"]).unwrap()));
    let tcp = TcpStream::connect(lab.https).await.unwrap();
    let tls = connector.connect(ServerName::try_from("www.a.test").unwrap(), tcp).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    let expected = format!("h3=\":{}\"", lab.h3.port());
    for target in ["/", "/nothing"] {
        let r = send.send_request(Request::builder().uri(format!("https://www.a.test{target}")).body(Full::new(Bytes::new())).unwrap()).await.unwrap();
        assert_eq!(r.headers()["alt-svc"], expected.as_str(), "{target}");
        let _ = r.into_body().collect().await.unwrap();
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_survives_garbage_datagrams() {
    let lab = Lab::start(Limits::default()).await;
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    // Not QUIC, a truncated long header, a long header with a huge length, and a 1200-byte
    // Initial-looking packet full of junk.
    let mut initial = vec![0xc0u8, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0x44, 0xd0];
    initial.resize(1200, 0xab);
    for d in [&b"hello"[..], &[0xc0, 0, 0, 0, 1, 20][..], &[0xc3, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff][..], &initial[..]] {
        socket.send_to(d, lab.h3).await.unwrap();
    }
    // No pause: the server's UDP socket queues datagrams in their order of arrival, so it reads
    // the garbage before the handshake below.
    assert_real_client_served(&lab).await;
    lab.stop().await;
}

/// A browser that aborts its downloads sends STOP_SENDING on each response stream and keeps the
/// connection for its next requests (RFC 9000 §3.5: the server must answer every STOP_SENDING
/// with RESET_STREAM, which also returns the unsent data's flow-control credit). Seven stopped
/// 8 GB downloads must leave the connection serving: a small GET afterwards is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_stopped_downloads_leave_the_connection_serving() {
    let lab = Lab::start(Limits::default()).await;
    // Chromium's receive windows: 15 MB per connection, 6 MB per stream.
    let mut transport = quinn::TransportConfig::default();
    transport.receive_window(quinn::VarInt::from_u32(15 * 1024 * 1024)).stream_receive_window(quinn::VarInt::from_u32(6 * 1024 * 1024));
    let mut client = h3_connect_with(&lab, "localhost", transport).await;
    const DOWNLOADS: usize = 7;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let received: Arc<Vec<AtomicU64>> = Arc::new((0..DOWNLOADS).map(|_| AtomicU64::new(0)).collect());
    let mut readers = Vec::new();
    for i in 0..DOWNLOADS {
        let req = http::Request::get("https://localhost/rpm/large").body(()).unwrap();
        let mut stream = client.send.send_request(req).await.unwrap();
        finish(&mut stream).await;
        let (stopped, received) = (stopped.clone(), received.clone());
        // Read as a browser does, until the page aborts the download: then STOP_SENDING.
        readers.push(tokio::spawn(async move {
            let response = stream.recv_response().await.unwrap();
            assert_eq!(response.status(), 200);
            // Checked between chunks: h3-quinn cannot stop a stream while a read is pending.
            while !*stopped.borrow() {
                match stream.recv_data().await {
                    Ok(Some(mut c)) => {
                        received[i].fetch_add(c.remaining() as u64, Ordering::Relaxed);
                        c.advance(c.remaining());
                    }
                    other => panic!("download ended early: {:?}", other.err()),
                }
            }
            // Dropped, not `stop_sending`: h3-quinn 0.0.10 may still hold the stream inside a
            // read it started ahead, and then panics in stop_sending (seen under CPU load).
            // quinn sends STOP_SENDING for a receive stream dropped before its end.
            drop(stream);
        }));
    }
    // Stopped in the middle: every download has had more than its stream window (so the
    // connection's window has been in use by all of them).
    let mid_download = 6 * 1024 * 1024;
    common::wait_until("every download past its stream window", Duration::from_secs(30), || {
        received.iter().all(|r| r.load(Ordering::Relaxed) > mid_download)
    })
    .await;
    stop.send(true).unwrap();
    for r in readers {
        r.await.unwrap();
    }
    // The server answers each STOP_SENDING with RESET_STREAM (quinn resets a stopped send stream
    // when the server's writer sees the error and drops it). A writer that the stop found blocked
    // by connection-level flow control used to wait forever (6 of 7 resets, in 8 of 45 runs under
    // two CPU hogs): the server now polls such a write again (server/quic.rs, `send_repolled`),
    // within a second of the window reopening.
    common::wait_until("every stopped download reset by the server", Duration::from_secs(30), || {
        client.quic.stats().frame_rx.reset_stream >= DOWNLOADS as u64
    })
    .await;
    let (response, body) = tokio::time::timeout(Duration::from_secs(5), client.get("https://localhost/rpm/small"))
        .await
        .expect("the connection answers after its downloads were stopped");
    assert_eq!(response.status(), 200);
    assert_eq!(body.len(), 1);
    client.close().await;
}

/// The first datagram the server answers a fresh client Initial with (the Initial is built by
/// quinn-proto's client state machine, sent from a plain UDP socket, never continued).
async fn first_answer_to_an_initial(lab: &Lab) -> Vec<u8> {
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(lab.material.client_config(&[b"h3"]).unwrap()).unwrap();
    let mut endpoint = quinn_proto::Endpoint::new(Arc::new(quinn_proto::EndpointConfig::default()), None, false, None);
    let now = std::time::Instant::now();
    let (_, mut conn) = endpoint.connect(now, quinn_proto::ClientConfig::new(Arc::new(crypto)), lab.h3, "www.a.test").unwrap();
    let mut datagram = Vec::new();
    // the Initial is the datagram's first `size` bytes
    let transmit = conn.poll_transmit(now, 1, &mut datagram).expect("a client Initial");
    datagram.truncate(transmit.size);
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(&datagram, lab.h3).await.unwrap();
    let mut answer = vec![0u8; 65536];
    let n = tokio::time::timeout(Duration::from_secs(5), socket.recv(&mut answer)).await.expect("an answer").unwrap();
    answer.truncate(n);
    answer
}

/// Long header packet types of QUIC v1 (RFC 9000 §17.2): the long-header bit and the type in
/// bits 4-5 of the first byte; the fixed bit (0x40) is left out, since quinn greases it (RFC 9287).
const PACKET_KIND: u8 = 0xb0;
const LONG_INITIAL: u8 = 0x80;
const LONG_RETRY: u8 = 0xb0;

/// Handshake floods (docs/server.md, "Limits"): beyond `quic_handshakes_before_retry`
/// handshakes in progress, an Initial from an unvalidated address gets a stateless Retry, and
/// a real client answers it and is served; below it the server answers with its handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_handshakes_beyond_the_limit_get_a_retry_and_real_clients_still_connect() {
    let lab = Lab::start(Limits { quic_handshakes_before_retry: 0, ..Limits::default() }).await;
    let answer = first_answer_to_an_initial(&lab).await;
    assert_eq!(answer[0] & PACKET_KIND, LONG_RETRY, "a Retry, not the handshake");
    // A Retry is smaller than the Initial it answers: no amplification at all.
    assert!(answer.len() < 200, "Retry of {} bytes", answer.len());
    assert_real_client_served(&lab).await;
    lab.stop().await;

    let lab = Lab::start(Limits::default()).await;
    let answer = first_answer_to_an_initial(&lab).await;
    assert_eq!(answer[0] & PACKET_KIND, LONG_INITIAL, "the server's Initial (no Retry below the limit)");
    lab.stop().await;
}
