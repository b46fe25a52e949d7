//! `protolab-net load`: the page-load engine (docs/load.md).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use web::load::{self, LoadOptions, Loader, Mode, Scheduler};

use crate::TcpCc;

#[derive(Args)]
pub struct LoadArgs {
    /// Page manifest (JSON; docs/manifest.md).
    #[arg(long)]
    manifest: PathBuf,
    /// h1c, h1, h2, h2-parallel:N, h2-mptcp, h3, h3-parallel:N.
    #[arg(long)]
    mode: String,
    /// The lab's CA certificate (TLS_DIR/ca.pem or ca.der); every mode but h1c needs it.
    #[arg(long)]
    ca: Option<PathBuf>,
    /// Where the result JSON goes (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Request assignment with several connections per origin: round-robin or least-outstanding.
    #[arg(long, default_value = "round-robin")]
    scheduler: String,
    /// Most HTTP/1.1 connections per origin (h1c, h1).
    #[arg(long, default_value_t = 6)]
    h1_connections: u32,
    /// The load ends with status "timeout" after this many milliseconds.
    #[arg(long, default_value_t = 60_000)]
    timeout_ms: u64,
    /// A TCP connection attempt (TCP, TLS, HTTP set-up) fails after this many milliseconds
    /// (Chromium's 240 s: the kernel's SYN retries decide first).
    #[arg(long, default_value_t = 240_000)]
    connect_timeout_ms: u64,
    /// A QUIC connection attempt (handshake, HTTP/3 set-up) fails after this many milliseconds
    /// (Chromium's 10 s).
    #[arg(long, default_value_t = 10_000)]
    quic_handshake_timeout_ms: u64,
    /// Port of cleartext HTTP/1.1.
    #[arg(long, default_value_t = 80)]
    http_port: u16,
    /// Port of TLS (TCP) and QUIC (UDP).
    #[arg(long, default_value_t = 443)]
    https_port: u16,
    /// TCP congestion control of every TCP/MPTCP socket.
    #[arg(long, value_enum, default_value = "cubic")]
    tcp_cc: TcpCc,
    /// SO_RCVBUF of every TCP/MPTCP socket in bytes (default: autotuned from net.ipv4.tcp_rmem).
    #[arg(long)]
    tcp_rcvbuf: Option<usize>,
    /// Draw TCP and UDP source ports from a generator with this seed instead of the kernel's
    /// choice (Linux's connect() takes even ports only, which fixes the parity of a flow hash).
    #[arg(long)]
    source_port_seed: Option<u64>,
    /// A warm load: first prime every origin (as many connections as the load may open to it,
    /// up to 8, each with a request for /empty, then closed), so the measured load resumes the
    /// TLS sessions and sends its first QUIC requests as 0-RTT data.
    #[arg(long)]
    warm: bool,
    #[command(flatten)]
    quic: crate::options::QuicArgs,
    #[command(flatten)]
    instrument: crate::options::InstrumentArgs,
}

/// Checks the input (errors here are bad input: exit 2, no result file), runs the load, writes
/// the result. Exit 0 when ok, 1 when failed or timed out.
pub fn command(args: LoadArgs) -> anyhow::Result<ExitCode> {
    let mode = Mode::parse(&args.mode).map_err(|e| anyhow::anyhow!("--mode: {e}"))?;
    let scheduler = Scheduler::parse(&args.scheduler).map_err(|e| anyhow::anyhow!("--scheduler: {e}"))?;
    let quic = args.quic.options()?;
    let manifest = web::Manifest::load(&args.manifest)?;
    let ca = match &args.ca {
        Some(path) => Some(load::load_ca(path)?),
        None => None,
    };
    if let Some(out) = &args.out {
        check_writable_dir(out)?;
    }
    let options = LoadOptions {
        mode,
        scheduler,
        h1_connections: args.h1_connections,
        timeout: Duration::from_millis(args.timeout_ms),
        connect_timeout: Duration::from_millis(args.connect_timeout_ms),
        quic_handshake_timeout: Duration::from_millis(args.quic_handshake_timeout_ms),
        http_port: args.http_port,
        https_port: args.https_port,
        tcp_cc: Some(args.tcp_cc.name().to_string()),
        tcp_rcvbuf: args.tcp_rcvbuf,
        quic,
        ca,
        manifest_label: args.manifest.display().to_string(),
        instrument: args.instrument.options()?,
        source_port_seed: args.source_port_seed,
        warm: args.warm,
    };
    let instrument = options.instrument.clone();
    let loader = Loader::new(manifest, options)?;
    crate::options::prepare(&instrument)?;
    let runtime = crate::options::client_runtime()?;
    let result = runtime.block_on(loader.run());
    // Connections are aborted by the engine; do not wait for stragglers.
    runtime.shutdown_timeout(Duration::from_millis(100));
    let json = serde_json::to_string_pretty(&result).context("cannot serialize the result")?;
    let status = serde_json::to_value(result.status).context("cannot serialize the status")?;
    emit_result("load", args.out.as_deref(), json, &status, result.error.as_deref())
}

/// Writes a result document (to `out` atomically, else to stdout); when the status is not
/// `ok`, says why on stderr. Exit 0 for `ok`, else 1.
pub(crate) fn emit_result(command: &str, out: Option<&Path>, mut json: String, status: &serde_json::Value, error: Option<&str>) -> anyhow::Result<ExitCode> {
    json.push('\n');
    match out {
        Some(out) => write_atomically(out, json.as_bytes())?,
        None => std::io::stdout().write_all(json.as_bytes()).context("cannot write the result to stdout")?,
    }
    if status.as_str() != Some("ok") {
        if let Some(e) = error {
            eprintln!("protolab-net {command}: {}: {e}", status.as_str().unwrap_or_default());
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--out` must name a file in an existing directory (checked before anything runs).
pub(crate) fn check_writable_dir(out: &Path) -> anyhow::Result<()> {
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        bail!("--out: {}: directory {} does not exist", out.display(), dir.display());
    }
    if out.is_dir() {
        bail!("--out: {} is a directory", out.display());
    }
    Ok(())
}

/// Writes `out` through a temporary file in the same directory, so that no half-written
/// result is ever seen.
fn write_atomically(out: &Path, data: &[u8]) -> anyhow::Result<()> {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "result.json".into());
    let tmp = out.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    std::fs::write(&tmp, data).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, out).with_context(|| format!("cannot rename {} to {}", tmp.display(), out.display()))?;
    Ok(())
}
