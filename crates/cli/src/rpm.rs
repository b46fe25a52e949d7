//! `protolab-net rpm`: responsiveness under working conditions (draft-ietf-ippm-responsiveness)
//! against protolab's server or one in the wild (docs/rpm.md).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use web::load::{self, Protocol};
use web::rpm::algorithm::Parameters;
use web::rpm::{Directions, Rpm, RpmOptions};
use web::transport::TcpOptions;

use crate::load::{check_writable_dir, emit_result};
use crate::TcpCc;

#[derive(Args)]
pub struct RpmArgs {
    /// Server: an IP address or a DNS name.
    #[arg(long)]
    server: String,
    /// Hostname for SNI and Host/:authority (default: the server).
    #[arg(long)]
    host: Option<String>,
    /// h1 (HTTP/1.1 over TLS), h2 or h3.
    #[arg(long, default_value = "h2")]
    protocol: String,
    /// download, upload, or both (download, then upload).
    #[arg(long, default_value = "both")]
    direction: String,
    /// Port of TLS (TCP) and QUIC (UDP).
    #[arg(long, default_value_t = 443)]
    port: u16,
    /// The lab's CA certificate (TLS_DIR/ca.pem or ca.der); without it the Mozilla roots are
    /// trusted (servers in the wild).
    #[arg(long)]
    ca: Option<PathBuf>,
    /// The configuration document: a path on the server or a URL (only its path is used; the
    /// connection goes to --server). Its URLs' paths are requested.
    #[arg(long, default_value = "/.well-known/nq")]
    config: String,
    /// Skip discovery: request /rpm/small, /rpm/large and /rpm/upload.
    #[arg(long)]
    no_discovery: bool,
    /// MAD: intervals in the moving averages.
    #[arg(long, default_value_t = 4)]
    mad: usize,
    /// ID: interval duration in seconds (draft-08: 1; the repository's -09 text: 5).
    #[arg(long, default_value_t = 1.0)]
    interval_s: f64,
    /// TMP: percent of the probe times the single-sided trimmed mean keeps.
    #[arg(long, default_value_t = 95.0)]
    tmp: f64,
    /// SDT: standard deviation tolerance, percent.
    #[arg(long, default_value_t = 5.0)]
    sdt: f64,
    /// INP: load-generating connections at the start.
    #[arg(long, default_value_t = 1)]
    inp: usize,
    /// INC: connections added per interval while goodput is not stable.
    #[arg(long, default_value_t = 1)]
    inc: usize,
    /// MNP: most load-generating connections.
    #[arg(long, default_value_t = 16)]
    mnp: usize,
    /// MPS: most probe pairs (foreign + self) per second.
    #[arg(long, default_value_t = 100.0)]
    mps: f64,
    /// PTC: most of the capacity the probes may use, percent.
    #[arg(long, default_value_t = 5.0)]
    ptc: f64,
    /// Time limit per direction, seconds.
    #[arg(long, default_value_t = 20.0)]
    max_duration_s: f64,
    /// Idle probe pairs before the first direction (0: none).
    #[arg(long, default_value_t = 10)]
    idle_probes: usize,
    /// Bound on each connection set-up and each probe, ms.
    #[arg(long, default_value_t = 10_000)]
    probe_timeout_ms: u64,
    /// TCP congestion control (h1, h2).
    #[arg(long, value_enum, default_value = "cubic")]
    tcp_cc: TcpCc,
    #[command(flatten)]
    quic: crate::options::QuicArgs,
    #[command(flatten)]
    instrument: crate::options::InstrumentArgs,
    /// Where the result JSON goes (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    quiet: bool,
}

fn protocol(name: &str) -> anyhow::Result<Protocol> {
    match name {
        "h1" => Ok(Protocol::H1),
        "h2" => Ok(Protocol::H2),
        "h3" => Ok(Protocol::H3),
        other => anyhow::bail!("--protocol: {other:?} is not h1, h2 or h3"),
    }
}

/// Checks the input (exit 2 on bad input, no result file), runs the test, writes the result and
/// a summary on stderr. Exit 0 when ok, 1 when the test failed.
pub fn command(args: RpmArgs) -> anyhow::Result<ExitCode> {
    let ca = args.ca.as_deref().map(load::load_ca).transpose()?;
    if let Some(out) = &args.out {
        check_writable_dir(out)?;
    }
    if !(args.max_duration_s.is_finite() && args.max_duration_s > 0.0 && args.max_duration_s <= 600.0) {
        anyhow::bail!("--max-duration-s: {} is not in (0, 600]", args.max_duration_s);
    }
    let instrument = args.instrument.options()?;
    let params = Parameters { mad: args.mad, interval_s: args.interval_s, tmp: args.tmp, sdt: args.sdt, inp: args.inp, inc: args.inc, mnp: args.mnp, mps: args.mps, ptc: args.ptc };
    let options = RpmOptions {
        server: args.server.clone(),
        host: args.host.clone(),
        protocol: protocol(&args.protocol)?,
        directions: Directions::from_name(&args.direction)?,
        port: args.port,
        ca,
        params,
        max_duration: Duration::from_secs_f64(args.max_duration_s),
        idle_probes: args.idle_probes,
        config: (!args.no_discovery).then(|| args.config.clone()),
        tcp: TcpOptions { congestion: Some(args.tcp_cc.name().to_string()), mptcp: false, rcvbuf: None, notsent_lowat: None, keepalive: None },
        quic: args.quic.options()?,
        instrument: instrument.clone(),
        probe_timeout: Duration::from_millis(args.probe_timeout_ms.max(1)),
    };
    let rpm = Rpm::new(options)?;
    crate::options::prepare(&instrument)?;
    let runtime = crate::options::client_runtime()?;
    let quiet = args.quiet;
    let progress = move |line: String| {
        if !quiet {
            eprintln!("{line}");
        }
    };
    let result = runtime.block_on(rpm.run(&progress));
    runtime.shutdown_timeout(Duration::from_millis(100));
    if !quiet {
        summary(&result);
    }
    let json = serde_json::to_string_pretty(&result).context("cannot serialize the result")?;
    let status = serde_json::to_value(result.status).context("cannot serialize the status")?;
    emit_result("rpm", args.out.as_deref(), json, &status, result.error.as_deref())
}

fn summary(r: &web::rpm::result::RpmResult) {
    let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.1} ms"));
    let n = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.0}"));
    eprintln!("== {} {} ({})", r.protocol, r.config.server, r.config.host);
    if let Some(i) = &r.idle {
        eprintln!("idle      latency {}  RPM {}", ms(i.latency_ms), n(i.rpm));
    }
    for (name, d) in &r.directions {
        let confidence = serde_json::to_string(&d.confidence).unwrap_or_default();
        let p90 = d.responsiveness.and_then(|r| r.p90);
        eprintln!(
            "{name:<9} capacity {:.2} Mbit/s  RPM {} (draft; latency mean {}; P90 {} / {})  loaded latency {}  {} connections  confidence {confidence}",
            d.capacity_bps.unwrap_or(0.0) / 1e6,
            n(d.rpm),
            n(d.rpm_latency_mean),
            n(p90.map(|p| p.rpm)),
            n(p90.map(|p| p.rpm_latency_mean)),
            ms(d.loaded_latency_ms),
            d.load_connections,
        );
    }
}
