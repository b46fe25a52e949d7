//! Bulk transfers on loopback against the in-process server (tests/common): every protocol and
//! direction moves exactly N bytes, duration mode stops at its deadline, application pacing
//! holds its rate, intervals add up, samples and qlog are written, and bad input or an
//! unreachable server end in clear errors, never a panic.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Lab, Scratch};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use web::bulk::{Amount, Bulk, BulkKind, BulkOptions, BulkProtocol, BulkResult, BulkStatus, Direction, Pacing};
use web::load::Transport;
use web::raw::{RawRequest, REPLY_LEN};
use web::instrument::InstrumentOptions;
use web::transport::TcpOptions;
use web::Limits;

const PROTOCOLS: [&str; 5] = ["tcp", "h1c", "h1", "h2", "h3"];

fn options(lab: &Lab, protocol: &str, direction: Direction, amount: Amount) -> BulkOptions {
    BulkOptions {
        protocol: BulkProtocol::from_name(protocol).unwrap(),
        direction,
        amount,
        server: lab.http.ip(),
        host: "localhost".into(),
        http_port: lab.http.port(),
        https_port: lab.https.port(),
        raw_port: lab.raw.port(),
        tcp: TcpOptions { congestion: Some("reno".into()), mptcp: false, rcvbuf: None, notsent_lowat: None, keepalive: None },
        ca: Some(lab.material.ca_der.clone()),
        connect_timeout: Duration::from_secs(5),
        ..BulkOptions::default()
    }
}

async fn run(o: BulkOptions) -> BulkResult {
    Bulk::new(o).unwrap().run().await
}

fn label(r: &BulkResult) -> String {
    format!("{} {}", r.config.protocol, r.config.direction.name())
}

/// What every result must satisfy: rows in time order that add up to the total.
fn check_intervals(r: &BulkResult) {
    let sum: u64 = r.intervals.iter().map(|i| i.bytes).sum();
    assert_eq!(sum, r.bytes, "{}: intervals add up", label(r));
    if let Some(last) = r.intervals.last() {
        assert_eq!(last.total_bytes, r.bytes, "{}", label(r));
    }
    for w in r.intervals.windows(2) {
        assert!(w[0].t_ms < w[1].t_ms && w[0].t_unix_ns < w[1].t_unix_ns, "{}: {:?}", label(r), r.intervals);
    }
    // Full intervals are exactly the interval long.
    let step = r.config.interval_ms;
    for (k, row) in r.intervals.iter().enumerate().take(r.intervals.len().saturating_sub(1)) {
        assert_eq!(row.t_ms, step * (k + 1) as f64, "{}", label(r));
    }
}

fn check_ok(r: &BulkResult) {
    assert_eq!(r.status, BulkStatus::Ok, "{}: {:?}", label(r), r.error);
    assert!(r.error.is_none());
    assert_eq!(r.kind, BulkKind::Bulk);
    assert_eq!(r.schema_version, 1);
    assert!(r.handshake_ms.unwrap() > 0.0);
    assert!(r.duration_ms.unwrap() > 0.0);
    check_intervals(r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_protocol_and_direction_moves_exactly_n_bytes() {
    let lab = Lab::start(Limits::default()).await;
    let n = 3_000_017;
    for protocol in PROTOCOLS {
        for direction in [Direction::Download, Direction::Upload] {
            let r = run(options(&lab, protocol, direction, Amount::Bytes(n))).await;
            check_ok(&r);
            assert_eq!(r.bytes, n, "{}", label(&r));
            let g = r.goodput_bps.unwrap();
            assert!((g - n as f64 * 8.0 / (r.duration_ms.unwrap() / 1e3)).abs() < 1.0);
            let c = r.connection.as_ref().unwrap();
            assert_eq!(c.protocol.name(), protocol);
            assert_eq!(c.remote.rsplit_once(':').unwrap().0, "127.0.0.1");
            assert!(c.local.as_deref().unwrap().starts_with("127.0.0.1:"), "{c:?}");
            if protocol == "h3" {
                assert_eq!((c.transport, c.tcp_cc.as_deref()), (Transport::Quic, None));
            } else {
                assert_eq!((c.transport, c.tcp_cc.as_deref()), (Transport::Tcp, Some("reno")));
            }
            match direction {
                // The server's own count matches.
                Direction::Upload => assert_eq!(r.server.unwrap().bytes, n, "{}", label(&r)),
                Direction::Download => assert!(r.server.is_none()),
            }
            assert_eq!(r.config.bytes, Some(n));
            assert_eq!(r.config.pacing, None);
        }
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_mode_stops_at_the_deadline() {
    let lab = Lab::start(Limits::default()).await;
    let d = Duration::from_millis(600);
    let paced = |protocol, direction| BulkOptions { rate_bps: Some(20_000_000), ..options(&lab, protocol, direction, Amount::Duration(d)) };
    let (a, b, c, e) = tokio::join!(
        run(paced("tcp", Direction::Download)),
        run(paced("h3", Direction::Download)),
        run(paced("h2", Direction::Upload)),
        run(paced("tcp", Direction::Upload)),
    );
    // And one unpaced, cut in the middle of a 10 GB response.
    let f = run(options(&lab, "h2", Direction::Download, Amount::Duration(Duration::from_millis(300)))).await;
    for r in [&a, &b, &c, &e, &f] {
        check_ok(r);
        let asked = r.config.duration_ms.unwrap();
        let took = r.duration_ms.unwrap();
        match r.config.direction {
            // Downloads stop counting exactly at the deadline.
            Direction::Download => assert_eq!(took, asked, "{}", label(r)),
            // Uploads end when the server has counted everything sent before the deadline.
            Direction::Upload => assert!(took >= asked && took < asked + 1000.0, "{}: {took}", label(r)),
        }
        assert!(r.bytes > 100_000, "{}: {}", label(r), r.bytes);
        if let Some(s) = r.server {
            assert_eq!(s.bytes, r.bytes);
        }
    }
    // 20 Mbit/s for 0.6 s = 1.5 MB: never more. The four paced transfers are polled by one
    // task here, and on a loaded machine their timers wake late by more than the bucket's two
    // quanta (10 ms), which costs rate: the tcp upload moved 0.92-1.20 MB while two experiments
    // ran beside the test (2026-11-27). The lower bound only says the pacer is not stalled (an
    // unpaced transfer moves hundreds of MB here); the next test holds the rate within 10%.
    for r in [&a, &b, &c, &e] {
        assert!((500_000..=1_600_000).contains(&r.bytes), "{}: {}", label(r), r.bytes);
    }
    lab.stop().await;
}

/// A paced 2 Mbit/s transfer of 2.5 s achieves 2 Mbit/s within 10%: downloads paced by the
/// server (raw protocol and `/bytes?rate=`), uploads by the client. The h2 download also
/// reports its rows as they close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paced_transfers_hold_their_rate() {
    let lab = Lab::start(Limits::default()).await;
    let rate = 2_000_000u64;
    let n = rate / 8 * 5 / 2;
    let paced = |protocol, direction| BulkOptions { rate_bps: Some(rate), ..options(&lab, protocol, direction, Amount::Bytes(n)) };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let with_progress = Bulk::new(paced("h2", Direction::Download)).unwrap();
    let (a, b, c, d) = tokio::join!(
        run(paced("tcp", Direction::Download)),
        with_progress.run_with_progress(tx),
        run(paced("h3", Direction::Upload)),
        run(paced("h1c", Direction::Upload)),
    );
    for r in [&a, &b, &c, &d] {
        check_ok(r);
        assert_eq!(r.bytes, n);
        let g = r.goodput_bps.unwrap();
        assert!((g - rate as f64).abs() < 0.1 * rate as f64, "{}: goodput {g}", label(r));
        assert_eq!(r.config.rate_bps, Some(rate));
        // Full intervals hold the rate too (25 kB per 100 ms): the median within 10%.
        let mut rates: Vec<f64> = r.intervals[..r.intervals.len() - 1].iter().map(|i| i.rate_bps).collect();
        assert!(rates.len() >= 20, "{}", label(r));
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        assert!((median - rate as f64).abs() < 0.1 * rate as f64, "{}: median interval rate {median}", label(r));
    }
    assert_eq!(a.config.pacing, Some(Pacing::Server));
    assert_eq!(c.config.pacing, Some(Pacing::Client));
    let mut streamed = Vec::new();
    while let Ok(row) = rx.try_recv() {
        streamed.push(row);
    }
    assert_eq!(streamed, b.intervals, "progress rows are the result's rows");
    lab.stop().await;
}

/// A scratch directory, removed when dropped (also when an assertion fails first).
fn tempdir(name: &str) -> Scratch {
    Scratch::new(&format!("bulk-{name}"))
}

fn read_ndjson(path: &Path) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap());
    let header = lines.next().expect("header line");
    (header, lines.collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_and_qlog_are_written_when_asked() {
    let lab = Lab::start(Limits::default()).await;
    let tcp_scratch = tempdir("tcp-samples");
    let tcp_dir = tcp_scratch.0.clone();
    let r = run(BulkOptions {
        instrument: InstrumentOptions { samples_dir: Some(tcp_dir.clone()), interval: Duration::from_millis(2), qlog_dir: None },
        rate_bps: Some(20_000_000),
        ..options(&lab, "h2", Direction::Download, Amount::Bytes(500_000))
    })
    .await;
    check_ok(&r);
    let conn = r.connection.as_ref().unwrap();
    assert_eq!(conn.conn_id, format!("tcp-{}-{}", conn.local.as_ref().unwrap(), conn.remote));
    let path = web::instrument::samples_path(&tcp_dir, web::instrument::Role::Client, &conn.conn_id);
    assert_eq!(r.samples.as_deref(), Some(path.to_str().unwrap()));
    let (header, rows) = read_ndjson(&path);
    assert_eq!(header["schema"], "protolab.samples");
    assert_eq!(header["role"], "client");
    assert_eq!(header["transport"], "tcp");
    assert_eq!(header["tcp_congestion"], "reno");
    assert!(rows.len() >= 10, "{} rows", rows.len());
    assert!(rows.last().unwrap()["bytes_received"].as_u64().unwrap() >= 500_000);

    let quic_scratch = tempdir("quic");
    let quic_dir = quic_scratch.0.clone();
    let r = run(BulkOptions {
        instrument: InstrumentOptions { samples_dir: Some(quic_dir.clone()), qlog_dir: Some(quic_dir.clone()), ..InstrumentOptions::default() },
        ..options(&lab, "h3", Direction::Upload, Amount::Bytes(2_000_000))
    })
    .await;
    check_ok(&r);
    let conn = r.connection.as_ref().unwrap();
    assert!(conn.conn_id.starts_with("quic-127.0.0.1:"), "{}", conn.conn_id);
    let (header, rows) = read_ndjson(&web::instrument::samples_path(&quic_dir, web::instrument::Role::Client, &conn.conn_id));
    assert_eq!(header["transport"], "quic");
    assert_eq!(header["quic_congestion"], "cubic");
    assert!(rows.last().unwrap()["udp_tx_bytes"].as_u64().unwrap() >= 2_000_000);
    let qlog_path = web::instrument::qlog_path(&quic_dir, web::instrument::Role::Client, &conn.conn_id);
    assert_eq!(r.qlog.as_deref(), Some(qlog_path.to_str().unwrap()));
    // qlog JSON-SEQ: every record after RS is JSON; the first carries the common time base.
    let qlog = std::fs::read_to_string(&qlog_path).unwrap();
    let records: Vec<Value> = qlog.split('\u{1e}').filter(|s| !s.trim().is_empty()).map(|s| serde_json::from_str(s.trim()).unwrap()).collect();
    assert!(records.len() > 100, "{} qlog records", records.len());
    assert!(records[0].to_string().contains("start_unix_ns="));
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mptcp_client_against_a_tcp_server_falls_back() {
    if std::fs::read_to_string("/proc/sys/net/mptcp/enabled").map(|s| s.trim() != "1").unwrap_or(true) {
        eprintln!("MPTCP disabled here; skipped");
        return;
    }
    let lab = Lab::start(Limits::default()).await;
    let mut o = options(&lab, "tcp", Direction::Download, Amount::Bytes(1_000_000));
    o.tcp.mptcp = true;
    let r = run(o).await;
    check_ok(&r);
    let c = r.connection.unwrap();
    assert_eq!((c.transport, c.mptcp_fallback), (Transport::Mptcp, Some(true)));
    lab.stop().await;
}

#[tokio::test]
async fn bad_input_is_refused_before_any_io() {
    let lab = Lab::start(Limits::default()).await;
    let e = BulkProtocol::from_name("h4").unwrap_err().to_string();
    assert!(e.contains("--protocol") && e.contains("h4"), "{e}");
    let bad = |o: BulkOptions| Bulk::new(o).err().map(|e| e.to_string()).unwrap_or_default();
    let e = bad(BulkOptions { rate_bps: Some(0), ..options(&lab, "h2", Direction::Download, Amount::Bytes(1)) });
    assert!(e.starts_with("--rate:"), "{e}");
    for protocol in ["h1", "h2", "h3"] {
        let e = bad(BulkOptions { ca: None, ..options(&lab, protocol, Direction::Upload, Amount::Bytes(1)) });
        assert!(e.starts_with("--ca:") && e.contains(protocol), "{e}");
    }
    // h1c and raw TCP need no CA.
    assert!(Bulk::new(BulkOptions { ca: None, ..options(&lab, "h1c", Direction::Upload, Amount::Bytes(1)) }).is_ok());
    assert!(Bulk::new(BulkOptions { ca: None, ..options(&lab, "tcp", Direction::Upload, Amount::Bytes(1)) }).is_ok());
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_or_wrong_servers_fail_with_clear_errors() {
    let lab = Lab::start(Limits::default()).await;
    // A port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let r = run(BulkOptions { raw_port: closed, ..options(&lab, "tcp", Direction::Download, Amount::Bytes(1000)) }).await;
    assert_eq!(r.status, BulkStatus::Failed);
    let e = r.error.as_deref().unwrap();
    assert!(e.contains("connect") && e.contains(&closed.to_string()) && e.contains("refused"), "{e}");
    assert!(r.connection.is_none() && r.handshake_ms.is_none() && r.intervals.is_empty() && r.bytes == 0);
    // QUIC to a UDP port with no server: the connect timeout.
    let r = run(BulkOptions {
        https_port: closed,
        connect_timeout: Duration::from_millis(300),
        ..options(&lab, "h3", Direction::Download, Amount::Bytes(1000))
    })
    .await;
    assert_eq!(r.status, BulkStatus::Failed);
    assert!(r.error.as_deref().unwrap().contains("no connection within 300 ms"), "{:?}", r.error);
    // The raw protocol sent to the HTTP port: the reply is not ours.
    let r = run(BulkOptions { raw_port: lab.http.port(), ..options(&lab, "tcp", Direction::Download, Amount::Bytes(1000)) }).await;
    assert_eq!(r.status, BulkStatus::Failed);
    assert!(r.error.as_deref().unwrap().contains("not a protolab raw reply"), "{:?}", r.error);
    // A run longer than its timeout: status timeout, with what moved so far.
    let r = run(BulkOptions {
        rate_bps: Some(1_000_000),
        timeout: Some(Duration::from_millis(400)),
        ..options(&lab, "h2", Direction::Download, Amount::Bytes(1_000_000))
    })
    .await;
    assert_eq!(r.status, BulkStatus::Timeout);
    let e = r.error.as_deref().unwrap();
    assert!(e.starts_with("timeout after 400 ms:") && e.contains(&format!("{} bytes", r.bytes)), "{e}");
    assert!(r.bytes > 0 && r.bytes < 1_000_000);
    check_intervals(&r);
    lab.stop().await;
}

async fn http_status(lab: &Lab, target: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(lab.http).await.unwrap();
    s.write_all(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.lines().next().unwrap_or_default().to_string();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().trim().to_string();
    format!("{status} | {body}")
}

#[tokio::test]
async fn server_checks_rate_and_raw_headers() {
    let lab = Lab::start(Limits::default()).await;
    for bad in ["rate=0", "rate=abc", "rate=999", "rate=100000000001", "rate="] {
        let r = http_status(&lab, &format!("/bytes?n=10&{bad}")).await;
        assert!(r.starts_with("HTTP/1.1 400") && r.contains("bit/s"), "{bad}: {r}");
    }
    let r = http_status(&lab, "/bytes?n=10&rate=1000000").await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    // Raw protocol: a bad header gets a status byte, then the connection closes.
    let mut header = RawRequest { direction: Direction::Download, bytes: Some(10), rate_bps: None }.encode();
    header[4] = 9;
    let mut s = tokio::net::TcpStream::connect(lab.raw).await.unwrap();
    s.write_all(&header).await.unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply.len(), REPLY_LEN);
    assert!(web::raw::check_reply_head(reply[..].try_into().unwrap()).unwrap_err().contains("version"));
    // Garbage shorter than a header, then close: the server just ends the connection.
    let mut s = tokio::net::TcpStream::connect(lab.raw).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    s.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await.unwrap().unwrap_or(0);
    assert_eq!(n, 0);
    lab.stop().await;
}

/// `path`: an HTTP download of a given object (here a manifest object; with nginx or caddy a
/// file) instead of `/bytes`; the byte count must match; bad combinations are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_is_downloaded_instead_of_bytes() {
    let lab = Lab::start(Limits::default()).await;
    for protocol in ["h1c", "h1", "h2", "h3"] {
        let r = run(BulkOptions {
            host: "static.a.test".into(),
            path: Some("/big.jpg".into()),
            ..options(&lab, protocol, Direction::Download, Amount::Bytes(2_500_000))
        })
        .await;
        check_ok(&r);
        assert_eq!(r.bytes, 2_500_000, "{protocol}");
        assert_eq!(r.config.path.as_deref(), Some("/big.jpg"));
        let wrong = run(BulkOptions {
            host: "static.a.test".into(),
            path: Some("/big.jpg".into()),
            ..options(&lab, protocol, Direction::Download, Amount::Bytes(2_500_001))
        })
        .await;
        assert_eq!(wrong.status, BulkStatus::Failed, "{protocol}");
        assert!(wrong.error.as_deref().unwrap().contains("2500000 of 2500001"), "{protocol}: {:?}", wrong.error);
        let missing = run(BulkOptions { path: Some("/nothing".into()), ..options(&lab, protocol, Direction::Download, Amount::Bytes(10)) }).await;
        assert_eq!(missing.status, BulkStatus::Failed);
        assert!(missing.error.as_deref().unwrap().contains("404"), "{protocol}: {:?}", missing.error);
    }
    for (bad, why) in [
        (BulkOptions { path: Some("/x".into()), ..options(&lab, "h2", Direction::Upload, Amount::Bytes(10)) }, "only HTTP downloads"),
        (BulkOptions { path: Some("/x".into()), ..options(&lab, "tcp", Direction::Download, Amount::Bytes(10)) }, "only HTTP downloads"),
        (BulkOptions { path: Some("/x".into()), rate_bps: Some(1_000_000), ..options(&lab, "h2", Direction::Download, Amount::Bytes(10)) }, "not paced"),
        (BulkOptions { path: Some("x y".into()), ..options(&lab, "h2", Direction::Download, Amount::Bytes(10)) }, "absolute"),
    ] {
        let e = Bulk::new(bad).err().unwrap().to_string();
        assert!(e.starts_with("--path: ") && e.contains(why), "{e}");
    }
    lab.stop().await;
}
