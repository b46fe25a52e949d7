//! `protolab-net flows`: flow records from a capture (docs/flows.md).
//!
//! Exit status: 0 when the whole capture was read; 1 when it is truncated or corrupt (with
//! `--keep-partial` the flows read before the damage were written); 2 for anything else that
//! stops the command (bad arguments, a file that cannot be opened or is not a capture, an
//! output that cannot be written). Output is written through a temporary file and renamed, so
//! no half-written file is ever seen.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use crate::load::check_writable_dir;

#[derive(Args)]
pub struct FlowsArgs {
    /// The capture: pcap or pcapng (Ethernet, Linux cooked SLL/SLL2, raw IP, BSD loopback).
    capture: PathBuf,
    /// Where the flow records go.
    #[arg(long)]
    out: PathBuf,
    /// Output format: parquet (the schema's, for the analysis) or ndjson (for reading).
    #[arg(long, value_enum, default_value = "parquet")]
    format: Format,
    /// On a truncated or corrupt capture, write the flows read before the damage (the exit
    /// status is still 1).
    #[arg(long)]
    keep_partial: bool,
    /// A flow without packets for this many seconds ends; its 5-tuple's next packet starts a
    /// new flow.
    #[arg(long, default_value_t = 120.0)]
    idle_timeout_s: f64,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    Parquet,
    Ndjson,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Parquet => "parquet",
            Format::Ndjson => "ndjson",
        }
    }
}

pub fn command(args: FlowsArgs) -> anyhow::Result<ExitCode> {
    // Up to ten years: beyond that no capture can tell the difference, and ns stay in i64.
    if !(args.idle_timeout_s.is_finite() && args.idle_timeout_s > 0.0 && args.idle_timeout_s <= 3.2e8) {
        bail!("--idle-timeout-s: {} is not a number of seconds in (0, 3.2e8]", args.idle_timeout_s);
    }
    check_writable_dir(&args.out)?;
    let config = ::flows::Config { idle_timeout_ns: (args.idle_timeout_s * 1e9).round() as i64 };
    let started = Instant::now();
    let extraction = ::flows::extract_file(&args.capture, &config)?;
    let extract_s = started.elapsed().as_secs_f64();
    let name = args.capture.display();
    let damaged = match &extraction.error {
        None => None,
        Some(e) if e.is_damaged_capture() => Some(e.to_string()),
        Some(e) => bail!("{name}: {e}"),
    };
    let stats = &extraction.stats;
    let rate = stats.packets as f64 / extract_s.max(1e-9);
    let summary = format!(
        "{} packets ({} in flows), {} flows in {extract_s:.2} s ({:.2} M packets/s)",
        stats.packets,
        stats.flow_packets,
        stats.flows,
        rate / 1e6
    );
    if let Some(error) = &damaged {
        if !args.keep_partial {
            eprintln!("protolab-net flows: {name}: {summary}; nothing written (--keep-partial keeps them)");
            eprintln!("error: {name}: {error}");
            return Ok(ExitCode::from(1));
        }
    }
    let metadata = serde_json::json!({
        "schema": ::flows::SCHEMA,
        "schema_version": ::flows::SCHEMA_VERSION,
        "source": "pcap",
        "generator": format!("protolab-net flows {}", env!("CARGO_PKG_VERSION")),
        "config": {
            "input": args.capture.display().to_string(),
            "input_absolute": std::fs::canonicalize(&args.capture).ok().map(|p| p.display().to_string()),
            "format": args.format.name(),
            "idle_timeout_s": args.idle_timeout_s,
            "keep_partial": args.keep_partial,
        },
        "capture": stats,
        "complete": damaged.is_none(),
        "error": damaged,
    });
    write_atomically(&args.out, |w| match args.format {
        Format::Parquet => ::flows::output::write_parquet(w, &extraction.flows, &metadata),
        Format::Ndjson => ::flows::output::write_ndjson(w, &extraction.flows, &metadata),
    })?;
    let total_s = started.elapsed().as_secs_f64();
    eprintln!("protolab-net flows: {name}: {summary}; {} written in {total_s:.2} s", args.out.display());
    if let Some(error) = damaged {
        eprintln!("error: {name}: {error} (the flows read before it were written: --keep-partial)");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `out` through a temporary file in its directory, renamed once complete; the
/// temporary file is removed when anything fails.
fn write_atomically(
    out: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> ::flows::Result<()>,
) -> anyhow::Result<()> {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "flows".into());
    let tmp = out.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    let result = (|| {
        let file = File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        write(&mut w).with_context(|| format!("cannot write {}", out.display()))?;
        w.flush().with_context(|| format!("cannot write {}", out.display()))?;
        std::fs::rename(&tmp, out).with_context(|| format!("cannot rename {} to {}", tmp.display(), out.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
