//! Command-line options shared by `serve`, `load` and `bulk`: QUIC transport knobs and
//! per-connection instrumentation.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use web::instrument::{InstrumentOptions, MIN_INTERVAL};
use web::transport::{QuicOptions, TransportError};

/// QUIC transport options (docs/transport.md).
#[derive(Args, Debug, Clone)]
pub struct QuicArgs {
    /// QUIC congestion controller, NAME[:key=value,...]: cubic, reno, fast, sprout-ewma,
    /// sprout-ewma-sender, fixed:rate=R, bbr, gquic39, ... (`protolab-net cc list`;
    /// docs/congestion.md).
    #[arg(long, default_value = "cubic")]
    pub quic_cc: String,
    /// QUIC initial congestion window in bytes (default: the controller's, 10 packets; not
    /// with a controller's iw=).
    #[arg(long)]
    pub quic_initial_window: Option<u64>,
    /// Loss detection: packet reordering threshold (RFC 9002 kPacketThreshold; default 3).
    #[arg(long)]
    pub quic_packet_threshold: Option<u32>,
    /// Loss detection: time threshold as a multiple of the RTT (kTimeThreshold; default 1.125).
    #[arg(long)]
    pub quic_time_threshold: Option<f32>,
    /// Ask the peer to acknowledge only every N+1 ack-eliciting packets (ACK frequency
    /// extension; ACK decimation).
    #[arg(long)]
    pub quic_ack_eliciting_threshold: Option<u32>,
    /// With the ACK-frequency request: the peer's maximum ACK delay in milliseconds.
    #[arg(long)]
    pub quic_max_ack_delay_ms: Option<u64>,
    /// Flow control: every stream's receive window in bytes (default: quinn's 1.25 MB, which
    /// caps a stream at 1.25 MB per RTT).
    #[arg(long)]
    pub quic_stream_window: Option<u64>,
}

impl QuicArgs {
    /// The checked options (`--quic-*` names in errors).
    pub fn options(&self) -> anyhow::Result<QuicOptions> {
        let controller = cc::ControllerSpec::parse(&self.quic_cc).map_err(|e| anyhow::anyhow!("--quic-cc: {e}"))?;
        let options = QuicOptions {
            controller,
            initial_window: self.quic_initial_window,
            packet_threshold: self.quic_packet_threshold,
            time_threshold: self.quic_time_threshold,
            ack_eliciting_threshold: self.quic_ack_eliciting_threshold,
            max_ack_delay: self.quic_max_ack_delay_ms.map(Duration::from_millis),
            stream_window: self.quic_stream_window,
            ..QuicOptions::default()
        };
        // Checked here so that bad values are bad input, before anything starts.
        options.transport_config().map_err(|e| match e {
            TransportError::QuicOption { option, why } => anyhow::anyhow!("--quic-{}: {why}", option.replace('_', "-")),
            other => anyhow::anyhow!("--quic-*: {other}"),
        })?;
        Ok(options)
    }
}

/// Per-connection instrumentation (docs/samples.md).
#[derive(Args, Debug, Clone)]
pub struct InstrumentArgs {
    /// Write per-connection transport samples (TCP_INFO, MPTCP subflows, quinn stats) as NDJSON
    /// into this directory: <role>-<connection id>.ndjson.
    #[arg(long)]
    pub samples: Option<PathBuf>,
    /// Sampling interval in milliseconds (at least 1).
    #[arg(long, default_value_t = 10)]
    pub sample_interval_ms: u64,
    /// Write a qlog per QUIC connection into this directory: <role>-<connection id>.qlog.
    #[arg(long)]
    pub qlog: Option<PathBuf>,
}

/// Creates the instrumentation directories.
pub fn prepare(options: &InstrumentOptions) -> anyhow::Result<()> {
    options.prepare().map_err(|e| anyhow::anyhow!("--samples/--qlog: cannot create the directory: {e}"))
}

impl InstrumentArgs {
    /// The checked options. The directories are created later, by `prepare` once every other
    /// input is checked (bad input leaves nothing behind).
    pub fn options(&self) -> anyhow::Result<InstrumentOptions> {
        let interval = Duration::from_millis(self.sample_interval_ms);
        if interval < MIN_INTERVAL {
            bail!("--sample-interval-ms: {} is below the minimum of {} ms", self.sample_interval_ms, MIN_INTERVAL.as_millis());
        }
        Ok(InstrumentOptions { samples_dir: self.samples.clone(), interval, qlog_dir: self.qlog.clone() })
    }
}

/// The async runtime of a client command (`load`, `bulk`): two workers, as the machine's cores.
pub fn client_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context;
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("cannot start the async runtime")
}
