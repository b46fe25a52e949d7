//! Samplers on loopback: TCP, MPTCP and QUIC connections moving data are sampled into NDJSON
//! files with a header and rows of plausible values (docs/samples.md).

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use web::instrument::{self, Role};
use web::transport::{tcp_connect, tcp_listen, TcpOptions};

fn read_ndjson(path: &Path) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap());
    let header = lines.next().expect("header line");
    (header, lines.collect())
}

fn mptcp_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/net/mptcp/enabled").map(|s| s.trim() == "1").unwrap_or(false)
}

/// Sends `n` bytes client -> server over a (MP)TCP loopback connection, sampling both ends.
async fn tcp_transfer(options: TcpOptions, n: usize, dir: &Path) -> (Value, Vec<Value>, Value, Vec<Value>) {
    let listener = tcp_listen("127.0.0.1:0".parse().unwrap(), &options).unwrap();
    let addr = listener.local_addr().unwrap();
    let interval = Duration::from_millis(1);
    let dir2 = dir.to_path_buf();
    let mptcp = options.mptcp;
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let sampler = instrument::spawn_tcp_sampler(&s, "c1", Role::Server, mptcp, interval, &dir2).unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        loop {
            let k = s.read(&mut buf).await.unwrap();
            if k == 0 {
                break;
            }
            got += k;
        }
        assert_eq!(got, n);
        let summary = sampler.stop().await.unwrap();
        assert!(summary.rows >= 1);
    });
    let mut c = tcp_connect(addr, &options).await.unwrap();
    let sampler = instrument::spawn_tcp_sampler(&c, "c1", Role::Client, mptcp, interval, dir).unwrap();
    assert_eq!(sampler.path(), dir.join("client-c1.ndjson"));
    let chunk = vec![1u8; 256 * 1024];
    let mut sent = 0;
    while sent < n {
        let k = chunk.len().min(n - sent);
        c.write_all(&chunk[..k]).await.unwrap();
        sent += k;
        // Give the sampler ticks during the transfer.
        tokio::time::sleep(Duration::from_micros(300)).await;
    }
    c.shutdown().await.unwrap();
    server.await.unwrap();
    let summary = sampler.stop().await.unwrap();
    assert!(summary.rows >= 2, "{summary:?}");
    drop(c);
    let (ch, crows) = read_ndjson(&dir.join("client-c1.ndjson"));
    let (sh, srows) = read_ndjson(&dir.join("server-c1.ndjson"));
    (ch, crows, sh, srows)
}

fn check_header(h: &Value, role: &str, transport: &str) {
    assert_eq!(h["schema"], "protolab.samples");
    assert_eq!(h["schema_version"], 2);
    assert_eq!(h["conn"], "c1");
    assert_eq!(h["role"], role);
    assert_eq!(h["transport"], transport);
    assert!(h["local"].as_str().unwrap().starts_with("127.0.0.1:"), "{h}");
    assert!(h["remote"].as_str().unwrap().starts_with("127.0.0.1:"), "{h}");
    assert_eq!(h["interval_ms"].as_f64().unwrap(), 1.0);
}

fn check_tcp_rows(rows: &[Value], sender: bool, n: u64) {
    assert!(rows.len() >= 2, "{} rows", rows.len());
    let mut last_t = 0;
    for r in rows {
        let t = r["t_unix_ns"].as_u64().unwrap();
        assert!(t >= last_t, "timestamps do not go back");
        // After 2020 and before 2100.
        assert!(t > 1_577_836_800_000_000_000 && t < 4_102_444_800_000_000_000);
        last_t = t;
        let cwnd = r["cwnd"].as_u64().unwrap();
        assert!((1..100_000).contains(&cwnd), "{r}");
        let rtt = r["rtt_us"].as_u64().unwrap();
        assert!(rtt < 1_000_000, "loopback RTT below 1 s: {r}");
        for k in ["ssthresh", "rttvar_us", "min_rtt_us", "retrans", "lost", "delivery_rate_bps", "pacing_rate_bps", "bytes_acked", "bytes_in_flight"] {
            assert!(r.get(k).is_some(), "{k} in {r}");
        }
        assert_eq!(r["event"], "sample");
        let state = r["cc_state"].as_str().unwrap();
        assert!(cc::State::ALL.iter().any(|s| s.as_str() == state), "{r}");
    }
    let last = rows.last().unwrap();
    if sender {
        assert!(last["bytes_acked"].as_u64().unwrap() >= n, "{last}");
        assert!(rows.iter().any(|r| r["rtt_us"].as_u64().unwrap() > 0));
    } else {
        assert!(last["bytes_received"].as_u64().unwrap() >= n, "{last}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_connection_is_sampled_on_both_ends() {
    let dir = tempdir("tcp");
    let n = 20_000_000;
    let (ch, crows, sh, srows) = tcp_transfer(TcpOptions { congestion: Some("reno".into()), mptcp: false, rcvbuf: None, notsent_lowat: None, keepalive: None }, n, &dir).await;
    check_header(&ch, "client", "tcp");
    check_header(&sh, "server", "tcp");
    assert_eq!(ch["tcp_congestion"], "reno");
    // A TCP socket's header says there is no MPTCP fallback (null), and names no QUIC controller.
    assert!(ch.get("mptcp_fallback").is_some_and(Value::is_null) && ch.get("quic_congestion").is_none(), "{ch}");
    check_tcp_rows(&crows, true, n as u64);
    check_tcp_rows(&srows, false, n as u64);
    assert!(crows.iter().all(|r| r.get("subflow").is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mptcp_connection_is_sampled_per_subflow() {
    if !mptcp_enabled() {
        eprintln!("skipping: net.mptcp.enabled is not 1 in this namespace");
        return;
    }
    let dir = tempdir("mptcp");
    let n = 10_000_000;
    let (ch, crows, sh, srows) = tcp_transfer(TcpOptions { congestion: None, mptcp: true, rcvbuf: None, notsent_lowat: None, keepalive: None }, n, &dir).await;
    check_header(&ch, "client", "mptcp");
    check_header(&sh, "server", "mptcp");
    assert_eq!(ch["mptcp_fallback"], false);
    check_tcp_rows(&crows, true, n as u64);
    check_tcp_rows(&srows, false, n as u64);
    for r in crows.iter().chain(&srows) {
        assert_eq!(r["subflow"], 0, "one subflow without ip mptcp endpoints: {r}");
        assert!(r["local"].as_str().unwrap().starts_with("127.0.0.1:"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampler_stops_when_the_connection_closes() {
    let dir = tempdir("closed");
    let listener = tcp_listen("127.0.0.1:0".parse().unwrap(), &TcpOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let c = tcp_connect(addr, &TcpOptions::default()).await.unwrap();
    let (mut s, _) = listener.accept().await.unwrap();
    let sampler = instrument::spawn_tcp_sampler(&s, "c1", Role::Server, false, Duration::from_millis(2), &dir).unwrap();
    drop(c);
    // The peer's FIN: read EOF, then close our side -> LAST_ACK/CLOSE.
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).await.unwrap(), 0);
    s.shutdown().await.unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(5), sampler.stop()).await.unwrap().unwrap();
    let (_, rows) = read_ndjson(&summary.path);
    assert!(!rows.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quic_connection_is_sampled_and_qlogged() {
    let dir = tempdir("quic");
    let material = web::TlsMaterial::generate("test", &[], &["localhost".into()]).unwrap();
    let mut server_tls = material.server_config(&[b"bulk"]).unwrap();
    server_tls.max_early_data_size = 0;
    let server_crypto = quinn::crypto::rustls::QuicServerConfig::try_from(server_tls).unwrap();
    let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(server_crypto));
    // The server sends with protolab's Cubic, whose state the sampler reads.
    let options = web::transport::QuicOptions { controller: cc::ControllerSpec::parse("cubic").unwrap(), ..Default::default() };
    server_config.transport_config(Arc::new(options.transport_config().unwrap()));
    let server = quinn::Endpoint::server(server_config, "127.0.0.1:0".parse().unwrap()).unwrap();
    let saddr = server.local_addr().unwrap();
    let n: usize = 5_000_000;
    let sdir = dir.clone();
    let st = tokio::spawn(async move {
        let conn = server.accept().await.unwrap().await.unwrap();
        let sampler = instrument::spawn_quic_sampler(&conn, "c1", Role::Server, "cubic", Duration::from_millis(1), &sdir).unwrap();
        let (mut send, _recv) = conn.accept_bi().await.unwrap();
        let chunk = vec![3u8; 64 * 1024];
        let mut sent = 0;
        while sent < n {
            let k = chunk.len().min(n - sent);
            send.write_all(&chunk[..k]).await.unwrap();
            sent += k;
        }
        send.finish().unwrap();
        let _ = conn.closed().await;
        sampler.stop().await.unwrap()
    });
    let client_tls = material.client_config(&[b"bulk"]).unwrap();
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(client_tls).unwrap();
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.qlog_stream(Some(instrument::qlog_stream(&dir, Role::Client, "c1").unwrap()));
    config.transport_config(Arc::new(transport));
    let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let conn = endpoint.connect_with(config, saddr, "localhost").unwrap().await.unwrap();
    let sampler = instrument::spawn_quic_sampler(&conn, "c1", Role::Client, "cubic", Duration::from_millis(1), &dir).unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(b"go").await.unwrap();
    let got = recv.read_to_end(n + 1).await.unwrap();
    assert_eq!(got.len(), n);
    conn.close(0u32.into(), b"done");
    let client_summary = sampler.stop().await.unwrap();
    let server_summary = st.await.unwrap();
    endpoint.wait_idle().await;
    assert!(client_summary.rows >= 1 && server_summary.rows >= 2);
    let (h, rows) = read_ndjson(&dir.join("server-c1.ndjson"));
    assert_eq!(h["transport"], "quic");
    assert_eq!(h["quic_congestion"], "cubic");
    assert!(h.get("mptcp_fallback").is_none() && h.get("tcp_congestion").is_none(), "TCP fields in a QUIC header: {h}");
    assert!(h["remote"].as_str().unwrap().starts_with("127.0.0.1:"));
    let (transitions, rows): (Vec<Value>, Vec<Value>) = rows.into_iter().partition(|r| r["event"] == "state");
    // The controller starts in slow start; its state changes are rows of their own, in time order.
    assert!(!transitions.is_empty(), "a row at the first state");
    assert_eq!(transitions[0]["cc_state"], "slow_start", "{}", transitions[0]);
    for r in &rows {
        assert_eq!(r["event"], "sample");
        let state = r["cc_state"].as_str().unwrap();
        assert!(cc::State::ALL.iter().any(|s| s.as_str() == state), "{r}");
        assert!(r["bytes_in_flight"].as_u64().is_some(), "{r}");
        assert!(r.get("ssthresh").is_some() && r.get("pacing_rate_bps").is_some(), "{r}");
    }
    let last = rows.last().unwrap();
    assert!(last["udp_tx_bytes"].as_u64().unwrap() >= n as u64, "{last}");
    for r in &rows {
        let cwnd = r["cwnd"].as_u64().unwrap();
        assert!(cwnd >= 2400, "{r}");
        assert!(r["rtt_us"].as_u64().unwrap() < 1_000_000);
        for k in ["congestion_events", "lost_packets", "lost_bytes", "sent_packets", "udp_rx_bytes"] {
            assert!(r.get(k).is_some(), "{k} in {r}");
        }
    }
    // qlog: JSON-SEQ (RS-prefixed records), with the header carrying the start time.
    let qlog = std::fs::read_to_string(dir.join("client-c1.qlog")).unwrap();
    assert!(qlog.contains("start_unix_ns="), "{}", &qlog[..qlog.len().min(500)]);
    assert!(qlog.matches('\u{1e}').count() > 10, "qlog has events");
}

fn tempdir(name: &str) -> common::Scratch {
    common::Scratch::new(&format!("instrument-{name}"))
}
