//! `protolab-net`: the command line over the protolab crates.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand, ValueEnum};
use contract::events::{Listening, ListeningEvent, UnfitDocument};

mod bulk;
mod cc_cmd;
mod contract_cmd;
mod flows;
mod load;
mod manifest_cmd;
mod options;
mod rpm;

#[derive(Parser)]
#[command(name = "protolab-net", version, about = "protolab's network emulator and endpoints")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The userspace network emulator.
    #[command(subcommand)]
    Emu(EmuCommand),
    /// Serve page manifests and synthetic endpoints over h1c, TLS (h2, http/1.1) and HTTP/3; docs/server.md.
    Serve(ServeArgs),
    /// Load a page manifest from a cold start over h1c, h1, h2, h2-parallel:N, h2-mptcp, h3 or h3-parallel:N; docs/load.md.
    Load(load::LoadArgs),
    /// Download or upload N bytes, or for a duration, over raw TCP, h1c, h1, h2 or h3, optionally paced; docs/bulk.md.
    Bulk(bulk::BulkArgs),
    /// Flow records (Parquet or NDJSON) from a pcap/pcapng capture, labelled from TLS, QUIC and HTTP handshakes; docs/flows.md.
    Flows(flows::FlowsArgs),
    /// Responsiveness under working conditions (RPM, draft-ietf-ippm-responsiveness) over h1, h2 or h3; docs/rpm.md.
    Rpm(rpm::RpmArgs),
    /// The QUIC congestion controllers: list them, check a NAME[:key=value,...] spec; docs/congestion.md.
    #[command(subcommand)]
    Cc(cc_cmd::CcCommand),
    /// The page-load modes (h1c, h2-parallel:N, ...) and schedulers; `--json` for programs.
    Modes(contract_cmd::ModesArgs),
    /// Write the JSON Schema of every document protolab produces (results, sample rows, events, registries) into schemas/, or `--check` them.
    Schema(contract_cmd::SchemaArgs),
    /// Page manifests: check files against docs/manifest.md (Python asks this instead of keeping the rules).
    #[command(subcommand)]
    Manifest(manifest_cmd::ManifestCommand),
}

/// TCP congestion controls the lab uses.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum TcpCc {
    Reno,
    Cubic,
    Bbr,
}

impl TcpCc {
    fn name(self) -> &'static str {
        match self {
            TcpCc::Reno => "reno",
            TcpCc::Cubic => "cubic",
            TcpCc::Bbr => "bbr",
        }
    }
}

#[derive(Args)]
struct ServeArgs {
    /// Page manifest (JSON; docs/manifest.md). Repeatable; none = synthetic endpoints only.
    #[arg(long = "manifest")]
    manifests: Vec<PathBuf>,
    /// Address to listen on. Repeatable; default: every origin address of the manifests.
    #[arg(long = "listen")]
    listen: Vec<IpAddr>,
    /// Port of cleartext HTTP/1.1 (and HTTP/2 with prior knowledge).
    #[arg(long, default_value_t = 80)]
    http_port: u16,
    /// Port of TLS (ALPN h2 and http/1.1) on TCP and of HTTP/3 (QUIC, ALPN h3) on UDP.
    #[arg(long, default_value_t = 443)]
    https_port: u16,
    /// TCP congestion control of every socket (TCP_CONGESTION).
    #[arg(long, value_enum, default_value = "cubic")]
    tcp_cc: TcpCc,
    /// TCP_NOTSENT_LOWAT of every TCP socket in bytes: at most this much unsent data waits in
    /// the kernel per connection (default: the kernel's, unlimited); docs/rpm.md.
    #[arg(long)]
    tcp_notsent_lowat: Option<u32>,
    /// Directory the generated CA, certificates and SPKI hashes are written to (docs/tls.md).
    #[arg(long)]
    tls_dir: PathBuf,
    /// Lab name, used in the CA's name.
    #[arg(long, default_value = "lab")]
    lab: String,
    /// Certificates to present instead of generated ones: DIR/<hostname>.pem (chain, leaf
    /// first) and DIR/<hostname>.key.pem, for each origin that has both (e.g. from an ACME CA;
    /// docs/tls.md).
    #[arg(long)]
    cert_dir: Option<PathBuf>,
    /// Largest request head in bytes (at least 8192).
    #[arg(long, default_value_t = 32 * 1024)]
    max_header_bytes: usize,
    /// Concurrent streams per HTTP/2 connection and request streams per HTTP/3 connection.
    #[arg(long, default_value_t = 100)]
    max_concurrent_streams: u32,
    /// Close a connection after this many milliseconds without traffic.
    #[arg(long, default_value_t = 30_000)]
    idle_timeout_ms: u64,
    /// Close a connection whose TLS (or QUIC) handshake, or HTTP/1.1 request head, takes
    /// longer than this many milliseconds (nginx's 60 s).
    #[arg(long, default_value_t = 60_000)]
    handshake_timeout_ms: u64,
    /// Close a connection whose response cannot be written and whose client acknowledged
    /// nothing for this many milliseconds (nginx's send_timeout, 60 s).
    #[arg(long, default_value_t = 60_000)]
    send_timeout_ms: u64,
    /// Apply --send-timeout-ms even while the kernel retransmits (default: a response held up
    /// by the network is not idle; the kernel's retry limit ends a dead path).
    #[arg(long)]
    strict_send_timeout: bool,
    /// Port of the raw bulk protocol (protolab-net bulk --protocol tcp) on TCP; "off" = none.
    #[arg(long, default_value_t = RawPort(Some(web::raw::DEFAULT_PORT)), value_parser = parse_raw_port)]
    raw_port: RawPort,
    /// Most open connections; more are closed at once.
    #[arg(long, default_value_t = 4096)]
    max_connections: usize,
    /// Requests per second one connection may make (sustained; bursts up to the same number);
    /// beyond it: 429 with retry-after.
    #[arg(long, default_value_t = 10_000)]
    max_requests_per_second: u32,
    /// QUIC handshakes in progress beyond which a new connection from an unvalidated address
    /// gets a stateless Retry first (0: every one does); docs/server.md, "Limits".
    #[arg(long, default_value_t = 64)]
    quic_handshakes_before_retry: usize,
    /// Listen with MPTCP sockets (IPPROTO_MPTCP); plain TCP clients still connect.
    #[arg(long)]
    mptcp: bool,
    #[command(flatten)]
    quic: options::QuicArgs,
    #[command(flatten)]
    instrument: options::InstrumentArgs,
}

/// `--raw-port`: a port number, or `off`.
#[derive(Clone, Copy, Debug)]
struct RawPort(Option<u16>);

impl std::fmt::Display for RawPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(p) => write!(f, "{p}"),
            None => f.write_str("off"),
        }
    }
}

fn parse_raw_port(text: &str) -> Result<RawPort, String> {
    if text == "off" {
        return Ok(RawPort(None));
    }
    text.parse::<u16>().map(|p| RawPort(Some(p))).map_err(|_| format!("{text:?} is neither a port number nor \"off\""))
}

/// `--cpu-latency-us`: microseconds, or `off`.
#[derive(Clone, Copy, Debug)]
struct CpuLatency(Option<u32>);

fn parse_cpu_latency(text: &str) -> Result<CpuLatency, String> {
    if text == "off" {
        return Ok(CpuLatency(None));
    }
    text.parse::<u32>()
        .map(|us| CpuLatency(Some(us)))
        .map_err(|_| format!("{text:?} is neither a number of microseconds nor \"off\""))
}

/// The manifests served together, and the documents too small for all their references (each
/// warned about on stderr).
fn load_site(paths: &[PathBuf]) -> anyhow::Result<(web::Site, Vec<UnfitDocument>)> {
    let mut manifests = Vec::new();
    for path in paths {
        manifests.push((path.display().to_string(), web::Manifest::load(path)?));
    }
    let site = web::Site::new(&manifests)?;
    let unfit: Vec<UnfitDocument> = site
        .unfit()
        .iter()
        .map(|(file, u)| {
            eprintln!(
                "warning: {file}: {}{}: {} bytes hold references to {} of its {} children; the browser will not request the others",
                u.key.0, u.key.1, u.size, u.referenced, u.children
            );
            UnfitDocument {
                file: file.clone(),
                origin: u.key.0.clone(),
                path: u.key.1.clone(),
                size: u.size,
                referenced: u.referenced,
                children: u.children,
            }
        })
        .collect();
    Ok((site, unfit))
}

/// The server's options from the command line.
fn serve_options(args: &ServeArgs, listen: Vec<IpAddr>, quic: web::transport::QuicOptions, instrument: web::instrument::InstrumentOptions) -> web::ServeOptions {
    web::ServeOptions {
        listen,
        http_port: args.http_port,
        https_port: args.https_port,
        tcp_congestion: Some(args.tcp_cc.name().to_string()),
        tcp_notsent_lowat: args.tcp_notsent_lowat,
        mptcp: args.mptcp,
        quic,
        instrument,
        raw_port: args.raw_port.0,
        limits: web::Limits {
            max_header_bytes: args.max_header_bytes,
            max_concurrent_streams: args.max_concurrent_streams,
            idle_timeout: Duration::from_millis(args.idle_timeout_ms),
            handshake_timeout: Duration::from_millis(args.handshake_timeout_ms),
            send_timeout: Duration::from_millis(args.send_timeout_ms),
            strict_send_timeout: args.strict_send_timeout,
            max_connections: args.max_connections,
            max_requests_per_second: args.max_requests_per_second,
            max_request_burst: args.max_requests_per_second,
            quic_handshakes_before_retry: args.quic_handshakes_before_retry,
            ..web::Limits::default()
        },
    }
}

fn serve_command(args: ServeArgs) -> anyhow::Result<()> {
    if args.max_header_bytes < 8192 {
        bail!("--max-header-bytes: {} is less than 8192", args.max_header_bytes);
    }
    if args.max_requests_per_second == 0 {
        bail!("--max-requests-per-second: must be at least 1");
    }
    if args.handshake_timeout_ms == 0 || args.idle_timeout_ms == 0 || args.send_timeout_ms == 0 {
        bail!("--handshake-timeout-ms, --idle-timeout-ms and --send-timeout-ms: must be at least 1");
    }
    let quic = args.quic.options()?;
    let quic_cc_canonical = quic.controller.canonical();
    let instrument = args.instrument.options()?;
    let (site, unfit) = load_site(&args.manifests)?;
    let mut listen = args.listen.clone();
    if listen.is_empty() {
        listen = site.origins().values().copied().collect();
        listen.sort();
        listen.dedup();
    }
    if listen.is_empty() {
        bail!("nothing to listen on: give --listen or a manifest with origins");
    }
    let mut origins: Vec<(String, Vec<IpAddr>)> = site.origins().iter().map(|(h, a)| (h.clone(), vec![*a])).collect();
    origins.sort();
    let mut default_sans = vec!["localhost".to_string()];
    default_sans.extend(listen.iter().filter(|a| !a.is_unspecified()).map(IpAddr::to_string));
    let material = web::TlsMaterial::generate(&args.lab, &origins, &default_sans)?;
    let loaded = match &args.cert_dir {
        Some(dir) => web::tls::load_cert_dir(dir, &origins.iter().map(|(h, _)| h.clone()).collect::<Vec<_>>())?,
        None => Vec::new(),
    };
    for l in &loaded {
        eprintln!("protolab-net serve: {} presents the certificate from {}", l.name, args.cert_dir.as_deref().unwrap_or(Path::new("")).display());
    }
    let tls = material.server_config_with(&[b"h2", b"http/1.1"], &loaded)?;
    let options = serve_options(&args, listen, quic, instrument);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let server = web::Server::bind(&options, Arc::new(site), tls)?;
        // Written once every socket is bound: a server that cannot start leaves no files.
        material.write(&args.tls_dir)?;
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        let addrs = |list: &[std::net::SocketAddr]| list.iter().map(ToString::to_string).collect::<Vec<_>>();
        let listening = Listening {
            event: ListeningEvent::Listening,
            http: addrs(&server.http_addrs()),
            https: addrs(&server.https_addrs()),
            h3: addrs(&server.h3_addrs()),
            raw: addrs(&server.raw_addrs()),
            tcp_cc: args.tcp_cc.name().to_string(),
            mptcp: args.mptcp,
            quic_cc: args.quic.quic_cc.clone(),
            quic_cc_canonical,
            tls_dir: args.tls_dir.display().to_string(),
            spki: material.spki_list(),
            real_page_unfit: unfit,
        };
        println!("{}", serde_json::to_string(&listening)?);
        server
            .run(async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            })
            .await;
        anyhow::Ok(())
    })
}

#[derive(Subcommand)]
enum EmuCommand {
    /// Build a lab from a topology file and forward packets until stopped.
    Run {
        /// Topology file (TOML or JSON; docs/topology.md).
        #[arg(long)]
        topology: PathBuf,
        /// Where lab state (control socket, pid) lives.
        #[arg(long, default_value = emu::state::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// Do not start the watchdog that cleans up after a SIGKILL.
        #[arg(long)]
        no_watchdog: bool,
        /// Stop (and clean up) when this process ends: the runner that started the lab.
        #[arg(long)]
        owner_pid: Option<i32>,
        /// Busy-poll this many microseconds before each due packet (precise timing on VMs; 0 = never).
        #[arg(long, default_value_t = 100)]
        spin_us: u64,
        /// SCHED_FIFO priority of the packet loop, 1-99, so other load cannot delay packets (0 = off).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i32).range(0..=99))]
        rt_priority: i32,
        /// Hold the CPUs' wake-up latency at or below this many microseconds while the lab runs
        /// (/dev/cpu_dma_latency: idle CPUs poll instead of halting, so the loop's timers fire on
        /// time on a VM; docs/emulator.md), or `off`.
        #[arg(long, default_value = "0", value_parser = parse_cpu_latency)]
        cpu_latency_us: CpuLatency,
        /// Segmentation offloads on the TUN devices: read and write 64 KB GSO super-packets, the
        /// model still sees every wire segment (docs/emulator.md). A host's own `offload` in the
        /// topology wins over this.
        #[arg(long, default_value = "off", value_parser = ["on", "off"])]
        offload: String,
        /// With offloads: a link with a fixed rate carries a super-packet whole (or in pieces) when
        /// its segments would leave that link at most this many microseconds apart; each then
        /// leaves with the last (docs/emulator.md, "Rated links"; e.g. 100 for 10 Gbit/s). 0 = every
        /// segment at its own time.
        #[arg(long, default_value_t = emu::DEFAULT_WHOLE_SPREAD_US)]
        whole_spread_us: u64,
    },
    /// Validate a topology file; print it normalized as JSON.
    Check {
        /// Topology file.
        #[arg(long)]
        topology: PathBuf,
    },
    /// Remove what a crashed or killed lab left behind (all labs without --lab).
    Cleanup {
        /// Lab name.
        #[arg(long)]
        lab: Option<String>,
        /// State directory.
        #[arg(long, default_value = emu::state::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
    /// List labs present on this machine.
    List {
        /// State directory.
        #[arg(long, default_value = emu::state::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
    /// Send one control request (a JSON object) to a running lab and print the reply.
    Ctl {
        /// Lab name.
        #[arg(long)]
        lab: String,
        /// State directory.
        #[arg(long, default_value = emu::state::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// The request, e.g. '{"cmd":"counters"}'.
        request: String,
    },
    /// Internal: wait for the emulator to end and clean up after it.
    #[command(hide = true)]
    Watchdog {
        #[arg(long)]
        lab: String,
        #[arg(long)]
        state_dir: PathBuf,
    },
}

fn emu_command(command: EmuCommand) -> anyhow::Result<()> {
    match command {
        EmuCommand::Run { topology, state_dir, no_watchdog, owner_pid, spin_us, rt_priority, cpu_latency_us, offload, whole_spread_us } => {
            let offload = offload == "on";
            let watchdog = !no_watchdog;
            let cpu_latency_us = cpu_latency_us.0;
            emu::run(&emu::RunOptions { topology, state_dir, watchdog, spin_us, rt_priority, cpu_latency_us, owner_pid, offload, whole_spread_us })?;
        }
        EmuCommand::Check { topology } => {
            let (topology, _) = emu::check(&topology)?;
            println!("{}", serde_json::to_string_pretty(&topology)?);
        }
        EmuCommand::Cleanup { lab, state_dir } => {
            let labs = match lab {
                Some(l) => vec![l],
                None => emu::state::list_labs(&state_dir),
            };
            for lab in labs {
                if lab.contains('/') || lab.contains('-') || lab.is_empty() {
                    bail!("--lab: {lab:?} is not a lab name");
                }
                let report = emu::state::cleanup_lab(&state_dir, &lab)?;
                println!("{}", serde_json::to_string(&report)?);
            }
        }
        EmuCommand::List { state_dir } => {
            for lab in emu::state::list_labs(&state_dir) {
                println!("{lab}");
            }
        }
        EmuCommand::Ctl { lab, state_dir, request } => {
            let value: serde_json::Value = serde_json::from_str(&request).context("the request is not valid JSON")?;
            let socket = emu::state::LabState::new(&state_dir, &lab).control();
            let reply = emu::control::request(&socket, &value).with_context(|| format!("cannot reach lab {lab:?} at {}", socket.display()))?;
            println!("{reply}");
            if reply.get("ok") != Some(&serde_json::Value::Bool(true)) {
                bail!("the request failed");
            }
        }
        EmuCommand::Watchdog { lab, state_dir } => {
            emu::watchdog(&state_dir, &lab)?;
        }
    }
    Ok(())
}

/// Raises the soft limit on open files to the hard one, as Go's runtime does at start-up. A server
/// holds two descriptors per TCP connection (the socket and a duplicate it reads `TCP_INFO` from,
/// docs/server.md) for up to `--max-connections` (4096) connections, and a page load opens up to
/// six TCP connections per origin: under Debian's default soft limit of 1024 the 500th or so
/// connection would fail with EMFILE. Left alone when the limit cannot be read as a number.
fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    if let Rlimit { current: Some(current), maximum: Some(maximum) } = getrlimit(Resource::Nofile) {
        if current < maximum {
            // Failing leaves the soft limit as it was, which is what the process had anyway.
            let _ = setrlimit(Resource::Nofile, Rlimit { current: Some(maximum), maximum: Some(maximum) });
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    raise_open_file_limit();
    let result = match cli.command {
        Command::Emu(c) => emu_command(c),
        Command::Serve(args) => serve_command(args),
        Command::Load(args) => match load::command(args) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Command::Bulk(args) => match bulk::command(args) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Command::Flows(args) => match flows::command(args) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Command::Rpm(args) => match rpm::command(args) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Command::Cc(c) => cc_cmd::command(c),
        Command::Modes(args) => contract_cmd::modes(args),
        Command::Schema(args) => match contract_cmd::schema(args) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Command::Manifest(c) => match manifest_cmd::command(c) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
