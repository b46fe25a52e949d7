//! Sprout-EWMA's receiver feedback between the in-process server and a bulk client on loopback
//! (tests/common): with `sprout-ewma` on both ends the receiver's reports cross as QUIC datagrams
//! and the sender's window is set from them (its samples say how many it took and the rate).

mod common;

use std::time::Duration;

use common::Lab;
use serde_json::Value;
use web::bulk::{Amount, Bulk, BulkOptions, BulkProtocol, BulkStatus, Direction};
use web::instrument::InstrumentOptions;
use web::transport::QuicOptions;
use web::Limits;

fn sprout() -> QuicOptions {
    QuicOptions { controller: cc::ControllerSpec::parse("sprout-ewma").unwrap(), ..QuicOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_senders_window_comes_from_the_receivers_reports() {
    let lab = Lab::start_with(Limits::default(), sprout()).await;
    let dir = common::Scratch::new("feedback");
    // An upload: the client sends, the server's loop measures and reports every 20 ms tick, the
    // client's controller takes the reports. On loopback the minimum RTT is some 50 us, so the
    // window sits at its floor of two datagrams and each window waits for the server's delayed
    // acknowledgement: about 0.6 Mbit/s, some 3 s for these 250 kB.
    let options = BulkOptions {
        protocol: BulkProtocol::from_name("h3").unwrap(),
        direction: Direction::Upload,
        amount: Amount::Bytes(250_000),
        rate_bps: Some(8_000_000),
        server: lab.http.ip(),
        host: "localhost".into(),
        http_port: lab.http.port(),
        https_port: lab.https.port(),
        raw_port: lab.raw.port(),
        ca: Some(lab.material.ca_der.clone()),
        connect_timeout: Duration::from_secs(5),
        quic: sprout(),
        instrument: InstrumentOptions { samples_dir: Some(dir.clone()), interval: Duration::from_millis(5), qlog_dir: None },
        ..BulkOptions::default()
    };
    let started = std::time::Instant::now();
    let r = Bulk::new(options).unwrap().run().await;
    eprintln!("upload: {:?} ({:?} ms)", started.elapsed(), r.duration_ms);
    assert_eq!(r.status, BulkStatus::Ok, "{:?}", r.error);
    let conn = r.connection.as_ref().unwrap();
    let path = web::instrument::samples_path(&dir, web::instrument::Role::Client, &conn.conn_id);
    let text = std::fs::read_to_string(&path).unwrap();
    let rows: Vec<Value> = text.lines().skip(1).map(|l| serde_json::from_str(l).unwrap()).filter(|v: &Value| v["event"] == "sample").collect();
    let reports = rows.iter().filter_map(|r| r["cc_feedback_reports"].as_u64()).max().unwrap_or(0);
    // About 150 ticks of the upload carry data; allow for a busy machine.
    assert!(reports >= 10, "{reports} reports");
    // Each window is rate x (min RTT + min(100 ms, min RTT)) of the report applied (at least two
    // datagrams), give or take the microsecond rounding of the sampled min RTT.
    let fed: Vec<&Value> = rows.iter().filter(|r| r["cc_feedback_rate_bps"].as_u64().is_some()).collect();
    assert!(!fed.is_empty());
    let matching = fed
        .iter()
        .filter(|r| {
            let rate = r["cc_feedback_rate_bps"].as_u64().unwrap() as f64 / 8.0;
            let min_rtt = r["min_rtt_us"].as_u64().unwrap() as f64 / 1e6;
            let mtu = r["current_mtu"].as_u64().unwrap() as f64;
            let want = (rate * (min_rtt + min_rtt.min(0.1))).max(2.0 * mtu);
            let cwnd = r["cwnd"].as_u64().unwrap() as f64;
            (cwnd - want).abs() <= 0.01 * want + rate * 2e-6 + 2.0
        })
        .count();
    assert!(matching * 10 >= fed.len() * 8, "{matching} of {} rows match", fed.len());
    eprintln!("{reports} reports, {matching} of {} rows match", fed.len());
    lab.stop().await;
}
