//! The server on loopback (127.0.0.1, ports chosen by the kernel) against hyper's client over
//! h1c, h1 (TLS) and h2 (TLS, ALPN), and against curl when it is installed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;
use web::{Limits, Manifest};

mod common;
use common::{Lab, PAGE};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Proto {
    H1c,
    H1,
    H2,
}

/// One connection of the given protocol to `host`; HTTP/1.1 connections that the server closed
/// (e.g. after a refused request whose body it did not read) are reopened before the next request.
struct Conn {
    proto: Proto,
    host: String,
    addr: SocketAddr,
    connector: TlsConnector,
    sender: Sender,
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

async fn connect(lab: &Lab, proto: Proto, host: &str) -> Conn {
    let addr = if proto == Proto::H1c { lab.http } else { lab.https };
    let alpn: &[&[u8]] = if proto == Proto::H2 { &[b"h2"] } else { &[b"http/1.1"] };
    let connector = TlsConnector::from(Arc::new(lab.material.client_config(alpn).unwrap()));
    let sender = open(proto, host, addr, &connector).await;
    Conn { proto, host: host.to_string(), addr, connector, sender }
}

async fn open(proto: Proto, host: &str, addr: SocketAddr, connector: &TlsConnector) -> Sender {
    let tcp = TcpStream::connect(addr).await.unwrap();
    if proto == Proto::H1c {
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.unwrap();
        tokio::spawn(conn);
        return Sender::H1(send);
    }
    let name = ServerName::try_from(if host.is_empty() { "localhost".to_string() } else { host.to_string() }).unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    let negotiated = tls.get_ref().1.alpn_protocol().map(|p| p.to_vec());
    if proto == Proto::H2 {
        assert_eq!(negotiated.as_deref(), Some(&b"h2"[..]));
        let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await.unwrap();
        tokio::spawn(conn);
        Sender::H2(send)
    } else {
        assert_eq!(negotiated.as_deref(), Some(&b"http/1.1"[..]));
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
        tokio::spawn(conn);
        Sender::H1(send)
    }
}

impl Conn {
    async fn send(&mut self, method: &str, host: &str, target: &str, body: Bytes) -> (Response<()>, Bytes) {
        let request = |uri: String| {
            Request::builder().method(method).uri(uri).header("host", host).body(Full::new(body.clone())).unwrap()
        };
        if let Sender::H1(s) = &mut self.sender {
            if s.ready().await.is_err() {
                self.sender = open(self.proto, &self.host, self.addr, &self.connector).await;
            }
        }
        let response = match &mut self.sender {
            Sender::H1(s) => s.send_request(request(target.to_string())).await.unwrap(),
            Sender::H2(s) => {
                let mut r = request(format!("https://{host}{target}"));
                r.headers_mut().remove("host");
                s.send_request(r).await.unwrap()
            }
        };
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (Response::from_parts(parts, ()), bytes)
    }

    async fn get(&mut self, host: &str, target: &str) -> (Response<()>, Bytes) {
        self.send("GET", host, target, Bytes::new()).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_manifest_objects_over_h1c_h1_and_h2() {
    let lab = Lab::start(Limits::default()).await;
    for proto in [Proto::H1c, Proto::H1, Proto::H2] {
        for host in ["www.a.test", "static.a.test"] {
            let mut conn = connect(&lab, proto, host).await;
            for o in lab.manifest.objects.iter().filter(|o| o.origin == host) {
                let (r, body) = conn.get(host, &o.path).await;
                assert_eq!(r.status(), 200, "{proto:?} {host}{}", o.path);
                assert_eq!(body.len() as u64, o.size, "{proto:?} {host}{}", o.path);
                assert!(body[..] == lab.expected(host, &o.path)[..], "{proto:?} {host}{}: body differs", o.path);
                assert_eq!(r.headers()["content-type"], o.content_type.as_str());
                assert_eq!(r.headers()["content-length"], o.size.to_string().as_str());
                for (k, v) in &o.headers {
                    assert_eq!(r.headers()[k.as_str()], v.as_str());
                }
            }
            // HEAD: headers of GET, no body.
            let (r, body) = conn.send("HEAD", "www.a.test", "/", Bytes::new()).await;
            assert_eq!(r.status(), 200);
            assert_eq!(r.headers()["content-length"], "14000");
            assert!(body.is_empty());
        }
    }
    // Bodies differ between objects (different offsets).
    assert_ne!(lab.expected("www.a.test", "/")[..100], lab.expected("static.a.test", "/big.jpg")[..100]);
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_and_hosts_are_404() {
    let lab = Lab::start(Limits::default()).await;
    for proto in [Proto::H1c, Proto::H2] {
        let mut conn = connect(&lab, proto, "www.a.test").await;
        assert_eq!(conn.get("www.a.test", "/nothing").await.0.status(), 404);
        // An object of the other origin.
        assert_eq!(conn.get("www.a.test", "/big.jpg").await.0.status(), 404);
        // The query is part of the object's identity.
        assert_eq!(conn.get("static.a.test", "/app.js").await.0.status(), 404);
        assert_eq!(conn.get("static.a.test", "/app.js?v=2").await.0.status(), 200);
        assert_eq!(conn.get("elsewhere.test", "/").await.0.status(), 404);
        // No filesystem behind the server.
        assert_eq!(conn.get("www.a.test", "/../../etc/passwd").await.0.status(), 404);
        // Wrong method on an object.
        assert_eq!(conn.send("POST", "www.a.test", "/", Bytes::from_static(b"x")).await.0.status(), 405);
    }
    // By IP literal: 127.0.0.1 carries two origins, so the host is ambiguous: 404.
    let mut conn = connect(&lab, Proto::H1c, "").await;
    assert_eq!(conn.get("127.0.0.1", "/").await.0.status(), 404);
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthetic_endpoints() {
    let lab = Lab::start(Limits::default()).await;
    for proto in [Proto::H1c, Proto::H1, Proto::H2] {
        let mut conn = connect(&lab, proto, "localhost").await;
        for n in [0u64, 1, 65536, 3_000_001] {
            let (r, body) = conn.get("localhost", &format!("/bytes?n={n}")).await;
            assert_eq!(r.status(), 200);
            assert_eq!(body.len() as u64, n, "{proto:?} /bytes?n={n}");
            assert_eq!(r.headers()["cache-control"], "no-store");
            assert_eq!(r.headers()["content-length"], n.to_string().as_str());
        }
        assert_eq!(conn.get("localhost", "/bytes").await.0.status(), 400);
        assert_eq!(conn.get("localhost", "/bytes?n=-1").await.0.status(), 400);
        assert_eq!(conn.get("localhost", "/bytes?n=10000000001").await.0.status(), 400);
        let (r, _) = conn.send("POST", "localhost", "/bytes?n=5", Bytes::new()).await;
        assert_eq!(r.status(), 405);
        assert_eq!(r.headers()["allow"], "GET, HEAD");

        let (r, body) = conn.get("localhost", "/empty").await;
        assert_eq!(r.status(), 200);
        assert!(body.is_empty());

        let payload = Bytes::from(vec![7u8; 5_000_123]);
        let (r, body) = conn.send("POST", "localhost", "/upload", payload).await;
        assert_eq!(r.status(), 200);
        let reply: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(reply["bytes"], 5_000_123, "{proto:?}");
        assert!(reply["duration_ns"].as_u64().is_some());
        assert_eq!(conn.get("localhost", "/upload").await.0.status(), 405);
    }
    lab.stop().await;
}

/// Reads whatever the server sends until it closes (bounded by a timeout).
async fn read_until_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_garbage_and_refuses_oversized_headers() {
    let lab = Lab::start(Limits::default()).await;
    // Garbage on the cleartext port: 400 and close.
    let mut s = TcpStream::connect(lab.http).await.unwrap();
    s.write_all(b"\x00\xff\x16GARBAGE \r\n\r\n\xde\xad\xbe\xef").await.unwrap();
    let reply = read_until_close(&mut s).await;
    assert!(reply.starts_with(b"HTTP/1.1 400"), "{:?}", String::from_utf8_lossy(&reply));
    // Garbage on the TLS port: the handshake fails, the connection closes.
    let mut s = TcpStream::connect(lab.https).await.unwrap();
    s.write_all(&[0x16, 0x03, 0x01, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8]).await.unwrap();
    let _ = s.shutdown().await;
    let reply = read_until_close(&mut s).await;
    assert!(!reply.starts_with(b"HTTP"));
    // Half a request, then close.
    let mut s = TcpStream::connect(lab.http).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: www.a").await.unwrap();
    drop(s);

    // A 64 KiB header over h1: 431 (limit 32 KiB).
    let mut s = TcpStream::connect(lab.http).await.unwrap();
    let big = "a".repeat(64 * 1024);
    let request = format!("GET / HTTP/1.1\r\nHost: www.a.test\r\nX-Big: {big}\r\n\r\n");
    let _ = s.write_all(request.as_bytes()).await;
    let reply = read_until_close(&mut s).await;
    assert!(reply.starts_with(b"HTTP/1.1 431"), "{:?}", String::from_utf8_lossy(&reply[..reply.len().min(200)]));

    // Over h2: the stream is refused (an error or a 431), the connection's other streams live on.
    let mut conn = connect(&lab, Proto::H2, "www.a.test").await;
    if let Sender::H2(send) = &mut conn.sender {
        let r = Request::builder().uri("https://www.a.test/").header("x-big", big.as_str()).body(Full::new(Bytes::new())).unwrap();
        if let Ok(response) = send.send_request(r).await {
            assert_eq!(response.status(), 431);
        }
    }
    // Still serving, on both ports.
    let mut conn = connect(&lab, Proto::H1c, "www.a.test").await;
    assert_eq!(conn.get("www.a.test", "/").await.0.status(), 200);
    let mut conn = connect(&lab, Proto::H2, "www.a.test").await;
    assert_eq!(conn.get("www.a.test", "/").await.0.status(), 200);
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed() {
    // A connection that sends nothing: over TLS the handshake timeout ends it (the idle timeout
    // no longer races the handshake), over cleartext the idle timeout.
    let limits = Limits { idle_timeout: Duration::from_millis(300), handshake_timeout: Duration::from_millis(300), ..Limits::default() };
    let lab = Lab::start(limits).await;
    for addr in [lab.http, lab.https] {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await.expect("closed by the server").unwrap_or(0);
        assert_eq!(n, 0);
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_manifest_file_names_file_and_field() {
    let dir = common::Scratch::new("web-test");
    let path = dir.join("page.json");
    std::fs::write(&path, PAGE.replace(r#""parent": "/","#, r#""parent": "/x.css","#)).unwrap();
    let e = Manifest::load(&path).unwrap_err().to_string();
    assert_eq!(e, format!("{}: objects[1].parent: no object \"/x.css\"", path.display()));
    let e = Manifest::load(&dir.join("absent.json")).unwrap_err().to_string();
    assert!(e.contains("absent.json: (file): cannot read"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_fetches_over_h1c_h1_and_h2() {
    if std::process::Command::new("curl").arg("--version").output().is_err() {
        eprintln!("curl not installed: skipped");
        return;
    }
    let lab = Lab::start(Limits::default()).await;
    let dir = common::Scratch::new("web-curl");
    lab.material.write(&dir).unwrap();
    let ca = dir.join("ca.pem");
    let cases = [
        ("--http1.1", format!("http://www.a.test:{}/", lab.http.port()), "1.1", 14000),
        ("--http1.1", format!("https://static.a.test:{}/big.jpg", lab.https.port()), "1.1", 2_500_000),
        ("--http2", format!("https://static.a.test:{}/big.jpg", lab.https.port()), "2", 2_500_000),
        ("--http2", format!("https://www.a.test:{}/bytes?n=1234567", lab.https.port()), "2", 1_234_567),
    ];
    for (flag, url, version, size) in cases {
        let args: Vec<String> = vec![
            "-sS".into(),
            "--max-time".into(),
            "20".into(),
            flag.into(),
            "--cacert".into(),
            ca.display().to_string(),
            "--resolve".into(),
            format!("www.a.test:{}:127.0.0.1", lab.http.port()),
            "--resolve".into(),
            format!("www.a.test:{}:127.0.0.1", lab.https.port()),
            "--resolve".into(),
            format!("static.a.test:{}:127.0.0.1", lab.https.port()),
            "-o".into(),
            "/dev/null".into(),
            "-w".into(),
            "%{http_code} %{http_version} %{size_download}".into(),
            url.clone(),
        ];
        let out = tokio::task::spawn_blocking(move || std::process::Command::new("curl").args(&args).output().unwrap()).await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(stdout, format!("200 {version} {size}"), "curl {flag} {url}: {}", String::from_utf8_lossy(&out.stderr));
    }
    lab.stop().await;
}
