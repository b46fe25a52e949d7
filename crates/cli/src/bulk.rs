//! `protolab-net bulk`: one bulk transfer (docs/bulk.md).

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use web::bulk::{Amount, Bulk, BulkOptions, BulkProtocol, Direction};
use web::load;
use web::transport::TcpOptions;

use crate::load::{check_writable_dir, emit_result};
use crate::TcpCc;

#[derive(Args)]
#[command(group(clap::ArgGroup::new("amount").required(true).args(["bytes", "duration_ms"])))]
pub struct BulkArgs {
    /// Server address.
    #[arg(long)]
    server: IpAddr,
    /// Hostname for SNI and Host/:authority (default: the server address).
    #[arg(long)]
    host: Option<String>,
    /// tcp (the raw protocol), h1c, h1, h2 or h3.
    #[arg(long)]
    protocol: String,
    /// download (the server sends) or upload (the client sends).
    #[arg(long, default_value = "download")]
    direction: String,
    /// Move exactly this many bytes.
    #[arg(long)]
    bytes: Option<u64>,
    /// Move bytes for this many milliseconds.
    #[arg(long)]
    duration_ms: Option<u64>,
    /// The sender's application rate: bit/s as an integer, or with a unit (500kbit, 5mbit, 1gbit).
    #[arg(long)]
    rate: Option<String>,
    /// HTTP downloads: request this path instead of /bytes?n=N (e.g. a file of nginx or caddy);
    /// with --bytes N the response must be exactly N bytes.
    #[arg(long)]
    path: Option<String>,
    /// Interval of the byte log, ms.
    #[arg(long, default_value_t = 100)]
    interval_ms: u64,
    /// TCP congestion control of the client socket (every protocol but h3).
    #[arg(long, value_enum, default_value = "cubic")]
    tcp_cc: TcpCc,
    /// Open an MPTCP socket instead of TCP.
    #[arg(long)]
    mptcp: bool,
    /// SO_RCVBUF of the client socket in bytes (default: autotuned from net.ipv4.tcp_rmem).
    #[arg(long)]
    tcp_rcvbuf: Option<usize>,
    #[command(flatten)]
    quic: crate::options::QuicArgs,
    /// The lab's CA certificate (TLS_DIR/ca.pem or ca.der); h1, h2 and h3 need it.
    #[arg(long)]
    ca: Option<PathBuf>,
    /// Port of cleartext HTTP/1.1 (h1c).
    #[arg(long, default_value_t = 80)]
    http_port: u16,
    /// Port of TLS (TCP) and QUIC (UDP): h1, h2, h3.
    #[arg(long, default_value_t = 443)]
    https_port: u16,
    /// Port of the raw protocol (tcp).
    #[arg(long, default_value_t = web::raw::DEFAULT_PORT)]
    raw_port: u16,
    /// Where the result JSON goes (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    instrument: crate::options::InstrumentArgs,
    /// The run ends with status "timeout" after this many ms (default: 120000 for --bytes,
    /// the duration + 30000 for --duration-ms).
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Connection set-up fails after this many ms.
    #[arg(long, default_value_t = 10_000)]
    connect_timeout_ms: u64,
    /// Print every interval row as a JSON line on stderr as it closes.
    #[arg(long)]
    progress: bool,
}

/// `5000000`, `5mbit`, `1.5gbit`: bit/s.
fn parse_rate(text: &str) -> anyhow::Result<u64> {
    if text.trim().eq_ignore_ascii_case("unlimited") {
        bail!("--rate: omit --rate to send as fast as the transport goes");
    }
    contract::units::parse_rate(text, contract::units::Bare::BitsPerSecond).map_err(|e| anyhow::anyhow!("--rate: {e}"))
}

/// Checks the input (errors here are bad input: exit 2, no result file), runs the transfer,
/// writes the result. Exit 0 when ok, 1 when failed or timed out.
pub fn command(args: BulkArgs) -> anyhow::Result<ExitCode> {
    let protocol = BulkProtocol::from_name(&args.protocol)?;
    let direction = Direction::from_name(&args.direction)?;
    let quic = args.quic.options()?;
    let instrument = args.instrument.options()?;
    let rate_bps = args.rate.as_deref().map(parse_rate).transpose()?;
    let amount = match (args.bytes, args.duration_ms) {
        (Some(n), None) => Amount::Bytes(n),
        (None, Some(ms)) => Amount::Duration(Duration::from_millis(ms)),
        // clap's group makes exactly one of them present.
        _ => bail!("give exactly one of --bytes and --duration-ms"),
    };
    let ca = args.ca.as_deref().map(load::load_ca).transpose()?;
    if let Some(out) = &args.out {
        check_writable_dir(out)?;
    }
    let options = BulkOptions {
        protocol,
        direction,
        amount,
        rate_bps,
        path: args.path.clone(),
        interval: Duration::from_millis(args.interval_ms),
        server: args.server,
        host: args.host.clone().unwrap_or_default(),
        http_port: args.http_port,
        https_port: args.https_port,
        raw_port: args.raw_port,
        tcp: TcpOptions { congestion: Some(args.tcp_cc.name().to_string()), mptcp: args.mptcp, rcvbuf: args.tcp_rcvbuf, notsent_lowat: None, keepalive: None },
        quic,
        ca,
        instrument: instrument.clone(),
        timeout: args.timeout_ms.map(Duration::from_millis),
        connect_timeout: Duration::from_millis(args.connect_timeout_ms),
    };
    let bulk = Bulk::new(options)?;
    crate::options::prepare(&instrument)?;
    let runtime = crate::options::client_runtime()?;
    let result = runtime.block_on(async {
        if !args.progress {
            return bulk.run().await;
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let run = bulk.run_with_progress(tx);
        tokio::pin!(run);
        let print = |row: &web::bulk::IntervalRow| {
            if let Ok(line) = serde_json::to_string(row) {
                eprintln!("{line}");
            }
        };
        loop {
            tokio::select! {
                result = &mut run => {
                    // Rows are sent before the run returns: print the last ones.
                    while let Ok(row) = rx.try_recv() {
                        print(&row);
                    }
                    break result;
                }
                Some(row) = rx.recv() => print(&row),
            }
        }
    });
    // The transfer's tasks are aborted by the run; do not wait for stragglers.
    runtime.shutdown_timeout(Duration::from_millis(100));
    let json = serde_json::to_string_pretty(&result).context("cannot serialize the result")?;
    let status = serde_json::to_value(result.status).context("cannot serialize the status")?;
    emit_result("bulk", args.out.as_deref(), json, &status, result.error.as_deref())
}
