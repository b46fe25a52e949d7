//! The responsiveness test (RPM, draft-ietf-ippm-responsiveness) on loopback against the
//! in-process server (tests/common): the server's endpoints over h1, h2 and h3 (the
//! `/.well-known/nq` document names the request's authority, `/rpm/small` is one byte,
//! `/rpm/upload` counts a body), a whole test per protocol in both directions, bad options named
//! by flag, and a server that is not there ending in an error result, never a panic.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use common::Lab;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;
use web::instrument::InstrumentOptions;
use web::load::Protocol;
use web::rpm::algorithm::Parameters;
use web::rpm::endpoints::{ConfigUrls, CONFIG_PATH, LARGE_BYTES, LARGE_PATH, SMALL_PATH, UPLOAD_PATH};
use web::rpm::result::{ProbeKind, RpmResult, RpmStatus};
use web::rpm::{Directions, Rpm, RpmOptions};
use web::transport::{QuicOptions, TcpOptions};
use web::Limits;

// ------------------------------------------------------------------ a minimal client per protocol

/// One request's answer: status, headers, body.
type Answer = (http::Response<()>, Bytes);

enum Client {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
    H3 { endpoint: quinn::Endpoint, send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>, driver: tokio::task::JoinHandle<()> },
}

/// A connection to the lab's HTTPS port (SNI `host`) speaking `protocol`.
async fn connect(lab: &Lab, protocol: Protocol, host: &str) -> Client {
    match protocol {
        Protocol::H3 => {
            let tls = lab.material.client_config(&[b"h3"]).unwrap();
            let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
            let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
            endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
            let conn = tokio::time::timeout(Duration::from_secs(5), endpoint.connect(lab.h3, host).unwrap()).await.unwrap().unwrap();
            let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn)).await.unwrap();
            let driver = tokio::spawn(async move {
                let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
            });
            Client::H3 { endpoint, send, driver }
        }
        Protocol::H1 | Protocol::H2 => {
            let alpn: &[&[u8]] = if protocol == Protocol::H2 { &[b"h2"] } else { &[b"http/1.1"] };
            let connector = TlsConnector::from(Arc::new(lab.material.client_config(alpn).unwrap()));
            let tcp = TcpStream::connect(lab.https).await.unwrap();
            let tls = connector.connect(ServerName::try_from(host.to_string()).unwrap(), tcp).await.unwrap();
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn[0]));
            if protocol == Protocol::H2 {
                let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await.unwrap();
                tokio::spawn(conn);
                Client::H2(send)
            } else {
                let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
                tokio::spawn(conn);
                Client::H1(send)
            }
        }
        Protocol::H1c => unreachable!("the responsiveness test runs over TLS or QUIC"),
    }
}

impl Client {
    /// `method` of `https://{authority}{path}` (HTTP/1.1: origin form and a Host header).
    async fn send(&mut self, method: &str, authority: &str, path: &str, body: Bytes) -> Answer {
        let url = format!("https://{authority}{path}");
        match self {
            Client::H1(s) => {
                s.ready().await.unwrap();
                let req = http::Request::builder().method(method).uri(path).header("host", authority).body(Full::new(body)).unwrap();
                collect(s.send_request(req).await.unwrap()).await
            }
            Client::H2(s) => {
                s.ready().await.unwrap();
                let req = http::Request::builder().method(method).uri(url).body(Full::new(body)).unwrap();
                collect(s.send_request(req).await.unwrap()).await
            }
            Client::H3 { send, .. } => {
                let req = http::Request::builder().method(method).uri(url).body(()).unwrap();
                let mut stream = send.send_request(req).await.unwrap();
                for chunk in body.chunks(100_000) {
                    stream.send_data(Bytes::copy_from_slice(chunk)).await.unwrap();
                }
                // The server may stop the request side once it has what it needs (RFC 9114 §4.1).
                match stream.finish().await {
                    Ok(()) | Err(h3::error::StreamError::RemoteTerminate { .. }) => {}
                    Err(e) => panic!("finish: {e}"),
                }
                let response = stream.recv_response().await.unwrap();
                let mut got = BytesMut::new();
                while let Some(mut chunk) = stream.recv_data().await.unwrap() {
                    got.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
                }
                (response, got.freeze())
            }
        }
    }

    async fn close(self) {
        if let Client::H3 { endpoint, send, driver } = self {
            drop(send);
            endpoint.close(quinn::VarInt::from_u32(0), b"done");
            driver.abort();
        }
    }
}

async fn collect(response: hyper::Response<hyper::body::Incoming>) -> Answer {
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (http::Response::from_parts(parts, ()), bytes)
}

const PROTOCOLS: [Protocol; 3] = [Protocol::H1, Protocol::H2, Protocol::H3];

// ------------------------------------------------------------------ (a) the server's endpoints

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_the_rpm_endpoints_on_every_protocol() {
    let lab = Lab::start(Limits::default()).await;
    let port = lab.https.port();
    for protocol in PROTOCOLS {
        for host in ["localhost", "www.a.test"] {
            let authority = format!("{host}:{port}");
            let mut c = connect(&lab, protocol, host).await;
            // The configuration document: parseable, every URL on the request's authority.
            let (r, body) = c.send("GET", &authority, CONFIG_PATH, Bytes::new()).await;
            assert_eq!(r.status(), 200, "{protocol:?} {authority}");
            assert_eq!(r.headers()["content-type"], "application/json");
            let urls = ConfigUrls::parse(&body).unwrap_or_else(|e| panic!("{protocol:?}: {e}: {body:?}"));
            assert_eq!(urls.small, format!("https://{authority}{SMALL_PATH}"), "{protocol:?}");
            assert_eq!(urls.large, format!("https://{authority}{LARGE_PATH}"), "{protocol:?}");
            assert_eq!(urls.upload, format!("https://{authority}{UPLOAD_PATH}"), "{protocol:?}");
            assert_eq!(urls.test_endpoint, None);
            // The older keys too (Apple's networkQuality, the Go client).
            let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(doc["urls"]["small_https_download_url"], urls.small.as_str());
            assert_eq!(doc["urls"]["https_upload_url"], urls.upload.as_str());

            // The small object: exactly one byte, open to cross-origin pages (and their timing).
            let (r, body) = c.send("GET", &authority, SMALL_PATH, Bytes::new()).await;
            assert_eq!(r.status(), 200, "{protocol:?}");
            assert_eq!(body.len(), 1, "{protocol:?}");
            assert_eq!(r.headers()["content-length"], "1");
            assert_eq!(r.headers()["cache-control"], "no-store");
            assert_eq!(r.headers()["access-control-allow-origin"], "*");
            assert_eq!(r.headers()["timing-allow-origin"], "*");
            // A cross-origin page's preflight of an upload.
            let (r, _) = c.send("OPTIONS", &authority, UPLOAD_PATH, Bytes::new()).await;
            assert_eq!(r.status(), 204, "{protocol:?}");
            assert!(r.headers()["access-control-allow-methods"].to_str().unwrap().contains("POST"));
            assert_eq!(r.headers()["access-control-allow-headers"], "content-type");
            // The large object (HEAD: its length, no body).
            let (r, body) = c.send("HEAD", &authority, LARGE_PATH, Bytes::new()).await;
            assert_eq!(r.status(), 200, "{protocol:?}");
            assert_eq!(r.headers()["content-length"], LARGE_BYTES.to_string().as_str());
            assert!(body.is_empty());

            // The upload sink counts a POSTed body.
            let n = 2_345_679;
            let (r, body) = c.send("POST", &authority, UPLOAD_PATH, Bytes::from(vec![5u8; n])).await;
            assert_eq!(r.status(), 200, "{protocol:?}");
            let reply: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(reply["bytes"], n as u64, "{protocol:?}");
            // Wrong methods.
            assert_eq!(c.send("GET", &authority, UPLOAD_PATH, Bytes::new()).await.0.status(), 405, "{protocol:?}");
            assert_eq!(c.send("POST", &authority, SMALL_PATH, Bytes::from_static(b"x")).await.0.status(), 405, "{protocol:?}");
            if protocol == Protocol::H1 {
                // hyper's HTTP/1.1 client may not reuse a connection after a 405 to a body.
                c.close().await;
                c = connect(&lab, protocol, host).await;
            }
            assert_eq!(c.send("POST", &authority, CONFIG_PATH, Bytes::from_static(b"x")).await.0.status(), 405, "{protocol:?}");
            c.close().await;
        }
    }
    lab.stop().await;
}

// ------------------------------------------------------------------ the client

fn options(server: SocketAddr, protocol: Protocol) -> RpmOptions {
    RpmOptions {
        server: server.ip().to_string(),
        host: Some("localhost".into()),
        protocol,
        directions: Directions::Both,
        port: server.port(),
        ca: None,
        params: Parameters { interval_s: 0.5, ..Parameters::default() },
        max_duration: Duration::from_secs(3),
        idle_probes: 3,
        config: Some(CONFIG_PATH.into()),
        tcp: TcpOptions { congestion: Some("reno".into()), ..TcpOptions::default() },
        quic: QuicOptions::default(),
        instrument: InstrumentOptions::default(),
        probe_timeout: Duration::from_secs(5),
    }
}

fn lab_options(lab: &Lab, protocol: Protocol) -> RpmOptions {
    RpmOptions { ca: Some(lab.material.ca_der.clone()), ..options(lab.https, protocol) }
}

/// Runs the test, its progress lines collected.
async fn run(rpm: &Rpm) -> (RpmResult, Vec<String>) {
    let lines = std::sync::Mutex::new(Vec::new());
    let progress = |line: String| lines.lock().unwrap().push(line);
    let result = rpm.run(&progress).await;
    (result, lines.into_inner().unwrap())
}

// ------------------------------------------------------------------ (b) a whole test per protocol

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_in_both_directions_over_h1_h2_and_h3() {
    let lab = Lab::start(Limits::default()).await;
    // One protocol after the other: at loopback speed each test alone keeps both cores busy.
    for protocol in PROTOCOLS {
        let name = format!("{protocol:?}").to_lowercase();
        let rpm = Rpm::new(lab_options(&lab, protocol)).unwrap();
        let started = Instant::now();
        let (r, lines) = run(&rpm).await;
        let took = started.elapsed();
        assert_eq!(r.status, RpmStatus::Ok, "{name}: {:?}", r.error);
        assert!(r.error.is_none());
        assert_eq!(r.protocol, protocol);
        // Two directions of at most 3 s each, plus the idle probes and discovery.
        assert!(took < Duration::from_secs(12), "{name}: took {took:?}");
        assert!(r.config.discovery.contains("/.well-known/nq"), "{name}: {}", r.config.discovery);
        assert!(r.config.discovery.contains("localhost"), "{name}: {}", r.config.discovery);
        assert_eq!(r.config.paths, [SMALL_PATH.to_string(), LARGE_PATH.to_string(), UPLOAD_PATH.to_string()]);
        assert_eq!(r.config.server, lab.https.to_string());
        assert_eq!((r.config.host.as_str(), r.config.direction.as_str(), r.config.idle_probes), ("localhost", "both", 3));

        let idle = r.idle.as_ref().expect("idle probes ran");
        assert_eq!(idle.probes.len(), 6, "{name}: 3 pairs");
        assert!(idle.probes.iter().all(|p| p.error.is_none()), "{name}: {:?}", idle.probes);
        let latency = idle.latency_ms.unwrap();
        assert!(latency > 0.0 && latency.is_finite(), "{name}: {latency}");
        assert!((idle.rpm.unwrap() * latency - 60_000.0).abs() < 1e-6 * 60_000.0);
        assert!(idle.http_median_ms.unwrap() > 0.0);

        assert_eq!(r.directions.keys().map(String::as_str).collect::<Vec<_>>(), ["download", "upload"], "{name}");
        for (dir, d) in &r.directions {
            let what = format!("{name} {dir}");
            assert!(d.bytes > 0, "{what}");
            assert!(!d.intervals.is_empty(), "{what}");
            assert!(d.intervals.len() <= 6, "{what}: at most 3 s of 0.5 s intervals, {}", d.intervals.len());
            // The intervals count what moved before the last one ended; the total, up to the end.
            assert!(d.intervals.iter().map(|i| i.bytes).sum::<u64>() <= d.bytes, "{what}");
            assert!(d.duration_s > 0.0 && d.duration_s < 3.5, "{what}: {}", d.duration_s);
            assert!(d.capacity_bps.unwrap() > 0.0, "{what}");
            assert!(d.load_connections >= 1, "{what}");
            let foreign: Vec<_> = d.probes.iter().filter(|p| p.kind == ProbeKind::Foreign).collect();
            let selfp: Vec<_> = d.probes.iter().filter(|p| p.kind == ProbeKind::SelfProbe).collect();
            assert!(!foreign.is_empty() && !selfp.is_empty(), "{what}: {:?}", d.probes);
            assert_eq!(foreign.len() + selfp.len(), d.probes.len(), "{what}: only foreign and self probes");
            if protocol == Protocol::H1 {
                // Foreign probes are complete; self probes carry the TCP stack's RTT estimate.
                assert!(foreign.iter().any(|p| p.error.is_none()), "{what}: {foreign:?}");
                assert!(selfp.iter().any(|p| p.error.is_none() && p.http_ms.is_some()), "{what}: {selfp:?}");
            } else {
                assert!(d.probes.iter().all(|p| p.error.is_none()), "{what}: {:?}", d.probes.iter().filter(|p| p.error.is_some()).collect::<Vec<_>>());
            }
            for p in &foreign {
                if p.error.is_none() {
                    assert!(p.connect_ms.unwrap() > 0.0 && p.http_ms.unwrap() > 0.0, "{what}: {p:?}");
                    // TLS over TCP has its own handshake term; QUIC's is inside the connect time.
                    assert_eq!(p.tls_ms.is_some(), protocol != Protocol::H3, "{what}: {p:?}");
                }
            }
            if let Some(rpm) = d.rpm {
                assert!(rpm > 0.0 && rpm.is_finite(), "{what}: {rpm}");
                assert!((d.loaded_latency_ms.unwrap() * rpm - 60_000.0).abs() < 1e-6 * 60_000.0, "{what}");
            }
        }
        // One progress line per interval, plus the idle line.
        let intervals: usize = r.directions.values().map(|d| d.intervals.len()).sum();
        assert_eq!(lines.len(), intervals + 1, "{name}: {lines:?}");
        assert!(lines[0].starts_with("idle: 3 probe pairs"), "{name}: {lines:?}");

        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["schema"], "protolab.rpm");
        assert_eq!(json["schema_version"], 1);
        assert_eq!(json["status"], "ok");
        assert_eq!(json["config"]["parameters"]["interval_s"], 0.5);
        assert!(json["directions"]["download"]["intervals"].as_array().is_some_and(|a| !a.is_empty()));
    }
    lab.stop().await;
}

// ------------------------------------------------------------------ (c) bad options

#[test]
fn bad_options_name_the_flag() {
    let server: SocketAddr = "127.0.0.1:4433".parse().unwrap();
    let good = || options(server, Protocol::H2);
    assert!(Rpm::new(good()).is_ok());
    let cases: Vec<(RpmOptions, &str)> = vec![
        (RpmOptions { params: Parameters { mad: 1, ..Parameters::default() }, ..good() }, "--mad"),
        (RpmOptions { protocol: Protocol::H1c, ..good() }, "--protocol"),
        (RpmOptions { port: 0, ..good() }, "--port"),
        (RpmOptions { config: Some("nq".into()), ..good() }, "--config"),
        (RpmOptions { config: Some("ftp://localhost/nq".into()), ..good() }, "--config"),
        (RpmOptions { params: Parameters { interval_s: 0.0, ..Parameters::default() }, ..good() }, "--interval-s"),
        (RpmOptions { params: Parameters { inp: 4, mnp: 2, ..Parameters::default() }, ..good() }, "--mnp"),
        (RpmOptions { params: Parameters { ptc: 0.0, ..Parameters::default() }, ..good() }, "--ptc"),
        (RpmOptions { max_duration: Duration::from_millis(100), ..good() }, "--max-duration-s"),
        (RpmOptions { host: Some("not a host!".into()), ..good() }, "--host"),
    ];
    for (o, flag) in cases {
        let e = match Rpm::new(o) {
            Ok(_) => panic!("{flag}: accepted"),
            Err(e) => e,
        };
        assert_eq!(e.option, flag, "{e}");
        assert!(e.to_string().starts_with(&format!("{flag}: ")), "{e}");
        assert!(!e.message.is_empty(), "{e}");
    }
    // The URL forms of --config are accepted.
    for config in ["https://localhost/.well-known/nq", "http://x.test:8080/nq", "/elsewhere"] {
        assert!(Rpm::new(RpmOptions { config: Some(config.into()), ..good() }).is_ok(), "{config}");
    }
    assert_eq!(Directions::from_name("sideways").unwrap_err().option, "--direction");
}

// ------------------------------------------------------------------ (d) no server

/// A loopback port nothing listens on (TCP and UDP): bound by the kernel, then released.
fn closed_port() -> u16 {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind(("127.0.0.1", port)).ok();
    drop((tcp, udp));
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_gives_an_error_result() {
    let port = closed_port();
    let server: SocketAddr = ([127, 0, 0, 1], port).into();
    let base = |protocol| RpmOptions { probe_timeout: Duration::from_millis(800), ..options(server, protocol) };
    let cases = [
        // Discovery's connection is refused (TCP) or never answered (QUIC).
        ("h2 discovery", base(Protocol::H2)),
        ("h3 discovery", base(Protocol::H3)),
        // No discovery: the idle probes fail.
        ("h1 idle", RpmOptions { config: None, ..base(Protocol::H1) }),
        // No discovery, no idle probes: no load-generating connection opens.
        ("h2 load", RpmOptions { config: None, idle_probes: 0, directions: Directions::Download, max_duration: Duration::from_secs(1), ..base(Protocol::H2) }),
    ];
    for (what, o) in cases {
        let started = Instant::now();
        let (r, _) = run(&Rpm::new(o).unwrap()).await;
        assert!(started.elapsed() < Duration::from_secs(5), "{what}: took {:?}", started.elapsed());
        assert_eq!(r.status, RpmStatus::Error, "{what}");
        let e = r.error.clone().unwrap_or_default();
        assert!(!e.is_empty(), "{what}: no error message");
        eprintln!("{what}: {e}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!((json["schema"].as_str(), json["status"].as_str()), (Some("protolab.rpm"), Some("error")), "{what}");
        match what {
            "h2 discovery" | "h3 discovery" => {
                // TCP: the refusal with the address; QUIC: no answer within the probe timeout.
                assert!(e.contains(&format!("127.0.0.1:{port}")) && e.contains("refused") || e.contains("discovery: connection timed out"), "{what}: {e}");
                assert_eq!(r.config.discovery, "failed", "{what}");
                assert!(r.idle.is_none() && r.directions.is_empty(), "{what}");
            }
            "h1 idle" => {
                assert!(e.starts_with("idle probes: "), "{what}: {e}");
                assert!(r.directions.is_empty(), "{what}");
            }
            _ => {
                assert!(e.contains("no load-generating connection"), "{what}: {e}");
                let d = &r.directions["download"];
                assert_eq!(d.bytes, 0);
                assert!(!d.errors.is_empty(), "{what}");
            }
        }
    }
}
