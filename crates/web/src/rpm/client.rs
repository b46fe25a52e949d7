//! The responsiveness test's client (`protolab-net rpm`): discovery, idle probes, then per
//! direction the draft's loop of load-generating connections, foreign and self probes and
//! stability checks ([`super::algorithm`] does the arithmetic).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::rustls;

use super::algorithm::{responsiveness, Parameters, ProbeTimes, Stages, Verdict};
use super::conn::{Dialer, RpmBody, RpmConn};
use super::delivered::{DeliveredAccount, TransportCounters};
use super::endpoints::{ConfigUrls, LARGE_PATH, SMALL_PATH, UPLOAD_PATH};
use super::result::{self, ClientInfo, Confidences, DirectionResult, IdleResult, Interval, IntervalState, Probe, ProbeKind, RpmConfig, RpmResult, RpmStatus};
use crate::client::{self, Connector, Sender, Sessions, Trust};
use crate::instrument::InstrumentOptions;
use crate::load::mode::Protocol;
use crate::transport::{QuicOptions, TcpOptions};

/// Bad options, named by flag.
#[derive(Debug, thiserror::Error)]
#[error("{option}: {message}")]
pub struct RpmError {
    /// The flag.
    pub option: &'static str,
    /// What is wrong.
    pub message: String,
}

fn bad(option: &'static str, message: impl Into<String>) -> RpmError {
    RpmError { option, message: message.into() }
}

/// Which directions to test (sequentially).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directions {
    /// The server sends.
    Download,
    /// The client sends.
    Upload,
    /// Download, then upload.
    Both,
}

impl Directions {
    /// By name.
    pub fn from_name(name: &str) -> Result<Directions, RpmError> {
        match name {
            "download" => Ok(Directions::Download),
            "upload" => Ok(Directions::Upload),
            "both" => Ok(Directions::Both),
            other => Err(bad("--direction", format!("{other:?} is not download, upload or both"))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Directions::Download => "download",
            Directions::Upload => "upload",
            Directions::Both => "both",
        }
    }

    fn list(self) -> &'static [Dir] {
        match self {
            Directions::Download => &[Dir::Download],
            Directions::Upload => &[Dir::Upload],
            Directions::Both => &[Dir::Download, Dir::Upload],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Download,
    Upload,
}

impl Dir {
    fn name(self) -> &'static str {
        match self {
            Dir::Download => "download",
            Dir::Upload => "upload",
        }
    }
}

/// Everything `protolab-net rpm` takes.
#[derive(Debug, Clone)]
pub struct RpmOptions {
    /// Server: an IP address or a DNS name.
    pub server: String,
    /// Hostname for SNI and `Host` (default: the server).
    pub host: Option<String>,
    /// h1, h2 or h3.
    pub protocol: Protocol,
    /// Directions.
    pub directions: Directions,
    /// TLS (TCP) and QUIC (UDP) port.
    pub port: u16,
    /// The lab's CA (DER); None: the Mozilla roots (webpki-roots), for servers in the wild.
    pub ca: Option<rustls::pki_types::CertificateDer<'static>>,
    /// The draft's parameters.
    pub params: Parameters,
    /// Time limit per direction.
    pub max_duration: Duration,
    /// Idle probe pairs before the first direction (0: none).
    pub idle_probes: usize,
    /// The configuration document's path or URL; None: the default paths, no discovery.
    pub config: Option<String>,
    /// TCP options (congestion control).
    pub tcp: TcpOptions,
    /// QUIC options (controller, ...).
    pub quic: QuicOptions,
    /// qlogs (h3).
    pub instrument: InstrumentOptions,
    /// Bound on each connection set-up and each probe.
    pub probe_timeout: Duration,
}

/// A checked test, ready to run.
pub struct Rpm {
    options: RpmOptions,
    connector: Arc<Connector>,
    host: String,
}

/// Most probes in flight at once: on a badly bloated path foreign probes take seconds, and the
/// probes must not become the load.
const MAX_PROBES_IN_FLIGHT: usize = 64;

impl Rpm {
    /// Checks the options and builds the TLS configuration. No network I/O.
    pub fn new(options: RpmOptions) -> Result<Rpm, RpmError> {
        options.params.check().map_err(|(name, m)| RpmError { option: flag_of(name), message: m })?;
        if options.protocol == Protocol::H1c {
            return Err(bad("--protocol", "the responsiveness test runs over TLS or QUIC: h1, h2 or h3"));
        }
        if options.max_duration < Duration::from_secs_f64(options.params.interval_s) {
            return Err(bad("--max-duration-s", "shorter than one interval"));
        }
        if options.port == 0 {
            return Err(bad("--port", "must not be 0"));
        }
        let host = options.host.clone().unwrap_or_else(|| options.server.clone()).trim_end_matches('.').to_ascii_lowercase();
        if host.parse::<IpAddr>().is_err() && !crate::manifest::valid_hostname(&host) {
            return Err(bad("--host", format!("{host:?} is neither a hostname nor an IP address")));
        }
        if let Some(c) = &options.config {
            if !(c.starts_with('/') || c.starts_with("https://") || c.starts_with("http://")) {
                return Err(bad("--config", format!("{c:?} is neither a path (/...) nor a URL")));
            }
        }
        let trust = options.ca.as_ref().map_or(Trust::WebPki, Trust::Ca);
        // Every probe measures a full handshake, as the draft's foreign probes mean to.
        let tls = client::tls_config(trust, options.protocol, Sessions::Full).map_err(|e| bad("--ca", e.to_string()))?;
        // The test writes qlogs (docs/rpm.md), no samples.
        let instrument = InstrumentOptions { samples_dir: None, ..options.instrument.clone() };
        let connector = Connector::new(options.protocol, Some(tls), options.tcp.clone(), &options.quic)
            .map_err(|e| bad(e.option(), e.to_string()))?
            .with_instrument(instrument);
        Ok(Rpm { options, connector: Arc::new(connector), host })
    }

    fn config(&self, addr: Option<SocketAddr>, discovery: String, paths: &Paths) -> RpmConfig {
        let o = &self.options;
        RpmConfig {
            server: addr.map_or_else(|| format!("{}:{}", o.server, o.port), |a| a.to_string()),
            host: self.host.clone(),
            protocol: o.protocol,
            direction: o.directions.name().into(),
            direction_order: o.directions.list().iter().map(|d| d.name().to_string()).collect(),
            parameters: o.params,
            max_duration_s: o.max_duration.as_secs_f64(),
            idle_probes: o.idle_probes,
            discovery,
            paths: [paths.small.clone(), paths.large.clone(), paths.upload.clone()],
            tcp_cc: o.tcp.congestion.clone(),
            quic_cc: o.quic.controller.given.clone(),
            draft: result::DRAFT.into(),
        }
    }

    /// Runs the test; `progress` gets one line per interval. Failures are in the result.
    pub async fn run(&self, progress: &(dyn Fn(String) + Sync)) -> RpmResult {
        let started_unix_ns = crate::instrument::unix_ns();
        let mut out = RpmResult {
            schema: result::SCHEMA,
            schema_version: result::SCHEMA_VERSION,
            tool: concat!("protolab-net ", env!("CARGO_PKG_VERSION")).to_string(),
            started_unix_ns,
            protocol: self.options.protocol,
            config: self.config(None, "not run".into(), &Paths::default()),
            client: client_info(),
            idle: None,
            directions: BTreeMap::new(),
            status: RpmStatus::Ok,
            error: None,
        };
        let addr = match self.resolve().await {
            Ok(a) => a,
            Err(e) => return failed(out, e),
        };
        let dialer = Arc::new(Dialer {
            protocol: self.options.protocol,
            addr,
            host: self.host.clone(),
            authority: if addr.port() == 443 { self.host.clone() } else { format!("{}:{}", self.host, addr.port()) },
            connector: self.connector.clone(),
        });
        let (paths, discovery) = match self.discover(&dialer).await {
            Ok(x) => x,
            Err(e) => {
                out.config = self.config(Some(addr), "failed".into(), &Paths::default());
                return failed(out, e);
            }
        };
        out.config = self.config(Some(addr), discovery, &paths);
        let ctx = Ctx { dialer, paths, params: self.options.params, probe_timeout: self.options.probe_timeout };
        if self.options.idle_probes > 0 {
            match idle(&ctx, self.options.idle_probes).await {
                Ok(i) => {
                    progress(format!("idle: {} probe pairs, latency {}", i.probes.len() / 2, fmt_ms(i.latency_ms)));
                    out.idle = Some(i);
                }
                Err(e) => return failed(out, format!("idle probes: {e}")),
            }
        }
        for &dir in self.options.directions.list() {
            let r = run_direction(&ctx, dir, self.options.max_duration, progress).await;
            let all_failed = r.intervals.iter().all(|i| i.connections == 0);
            let first_error = r.errors.first().cloned();
            out.directions.insert(dir.name().into(), r);
            if all_failed {
                return failed(out, format!("{}: no load-generating connection: {}", dir.name(), first_error.unwrap_or_default()));
            }
        }
        out
    }

    async fn resolve(&self) -> Result<SocketAddr, String> {
        let port = self.options.port;
        if let Ok(ip) = self.options.server.parse::<IpAddr>() {
            return Ok(SocketAddr::new(ip, port));
        }
        let found = tokio::net::lookup_host((self.options.server.as_str(), port)).await.map_err(|e| format!("resolve {}: {e}", self.options.server))?;
        let all: Vec<SocketAddr> = found.collect();
        all.iter().find(|a| a.is_ipv4()).or(all.first()).copied().ok_or_else(|| format!("resolve {}: no address", self.options.server))
    }

    /// The three paths: from the configuration document (its URLs' paths; the connection goes
    /// to the server given), or the defaults.
    async fn discover(&self, dialer: &Dialer) -> Result<(Paths, String), String> {
        let Some(config) = &self.options.config else {
            return Ok((Paths::default(), "default paths".into()));
        };
        let path = if config.starts_with('/') { config.clone() } else { url_path(config)? };
        let mut conn = tokio::time::timeout(self.options.probe_timeout, dialer.connect())
            .await
            .map_err(|_| "discovery: connection timed out".to_string())?
            .map_err(|e| format!("discovery: {e}"))?;
        let mut body = Vec::new();
        let mut too_big = false;
        dialer
            .get(&mut conn.sender, &path, |d| {
                if body.len() + d.len() > 65_536 {
                    too_big = true;
                } else {
                    body.extend_from_slice(d);
                }
            })
            .await
            .map_err(|e| format!("discovery ({path}): {e}"))?;
        if too_big {
            return Err(format!("discovery ({path}): the document is larger than 64 KiB"));
        }
        let urls = ConfigUrls::parse(&body).map_err(|e| format!("discovery ({path}): {e}"))?;
        let paths = Paths { small: url_path(&urls.small)?, large: url_path(&urls.large)?, upload: url_path(&urls.upload)? };
        Ok((paths, format!("{path} (urls of {})", url_host(&urls.small).unwrap_or_default())))
    }
}

fn flag_of(param: &str) -> &'static str {
    match param {
        "mad" => "--mad",
        "interval" => "--interval-s",
        "tmp" => "--tmp",
        "sdt" => "--sdt",
        "inp" => "--inp",
        "inc" => "--inc",
        "mnp" => "--mnp",
        "mps" => "--mps",
        _ => "--ptc",
    }
}

fn failed(mut out: RpmResult, error: String) -> RpmResult {
    out.status = RpmStatus::Error;
    out.error = Some(error);
    out
}

fn fmt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1} ms"))
}

fn url_path(url: &str) -> Result<String, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    Ok(uri.path_and_query().map_or_else(|| "/".to_string(), |p| p.as_str().to_string()))
}

fn url_host(url: &str) -> Option<String> {
    url.parse::<http::Uri>().ok()?.host().map(str::to_string)
}

/// The request paths of the three URLs.
#[derive(Debug, Clone)]
struct Paths {
    small: String,
    large: String,
    upload: String,
}

impl Default for Paths {
    fn default() -> Self {
        Paths { small: SMALL_PATH.into(), large: LARGE_PATH.into(), upload: UPLOAD_PATH.into() }
    }
}

struct Ctx {
    dialer: Arc<Dialer>,
    paths: Paths,
    params: Parameters,
    probe_timeout: Duration,
}

/// A load-generating connection as the probes see it.
struct Loaded {
    /// HTTP/2, HTTP/3: a handle for requests multiplexed on it.
    sender: Option<Sender<RpmBody>>,
    /// TCP: the socket, for the RTT estimate (HTTP/1.1).
    tcp_fd: Option<Arc<std::os::fd::OwnedFd>>,
}

impl Clone for Loaded {
    fn clone(&self) -> Self {
        Loaded { sender: self.sender.as_ref().and_then(Sender::clone_multiplexed), tcp_fd: self.tcp_fd.clone() }
    }
}

/// A foreign probe: a new connection, its set-up timed, then one small GET.
async fn foreign_probe(ctx: &Ctx, t0: Instant) -> Probe {
    let attempt = async {
        let mut conn = ctx.dialer.connect().await?;
        let http = ctx.dialer.get(&mut conn.sender, &ctx.paths.small, |_| {}).await?;
        Ok::<_, String>((conn.connect_ms, conn.tls_ms, http))
    };
    let (connect_ms, tls_ms, http_ms, error) = match tokio::time::timeout(ctx.probe_timeout, attempt).await {
        Ok(Ok((c, t, h))) => (Some(c), t, Some(h), None),
        Ok(Err(e)) => (None, None, None, Some(e)),
        Err(_) => (None, None, None, Some(format!("no answer within {} ms", ctx.probe_timeout.as_millis()))),
    };
    Probe { t_s: t0.elapsed().as_secs_f64(), kind: ProbeKind::Foreign, connect_ms, tls_ms, http_ms, error }
}

/// A self probe on `loaded`: a small GET multiplexed on it, or (HTTP/1.1) its smoothed RTT.
async fn self_probe(ctx: &Ctx, loaded: &Loaded, t0: Instant) -> Probe {
    let (http_ms, error) = match (&loaded.sender, &loaded.tcp_fd) {
        (Some(sender), _) => {
            let Some(mut sender) = sender.clone_multiplexed() else {
                return Probe { t_s: t0.elapsed().as_secs_f64(), kind: ProbeKind::SelfProbe, connect_ms: None, tls_ms: None, http_ms: None, error: Some("HTTP/1.1 cannot multiplex".into()) };
            };
            match tokio::time::timeout(ctx.probe_timeout, ctx.dialer.get(&mut sender, &ctx.paths.small, |_| {})).await {
                Ok(Ok(ms)) => (Some(ms), None),
                Ok(Err(e)) => (None, Some(e)),
                Err(_) => (None, Some(format!("no answer within {} ms", ctx.probe_timeout.as_millis()))),
            }
        }
        (None, Some(fd)) => match crate::sockopt::tcp_info(fd.as_fd()) {
            Ok(i) => (Some(f64::from(i.rtt_us) / 1e3), None),
            Err(e) => (None, Some(format!("TCP_INFO: {e}"))),
        },
        (None, None) => (None, Some("no load-generating connection to probe".into())),
    };
    Probe { t_s: t0.elapsed().as_secs_f64(), kind: ProbeKind::SelfProbe, connect_ms: None, tls_ms: None, http_ms, error }
}

fn probe_times<'a>(probes: impl Iterator<Item = &'a Probe>) -> ProbeTimes {
    let mut t = ProbeTimes::default();
    for p in probes.filter(|p| p.error.is_none()) {
        match p.kind {
            ProbeKind::Foreign => {
                t.connect.extend(p.connect_ms);
                t.tls.extend(p.tls_ms);
                t.http_foreign.extend(p.http_ms);
            }
            ProbeKind::SelfProbe => t.http_self.extend(p.http_ms),
        }
    }
    t
}

/// Idle latency: `n` probe pairs one after the other on an unloaded path; the self probes use
/// one idle connection (HTTP/1.1 too: on an idle connection a request is possible).
async fn idle(ctx: &Ctx, n: usize) -> Result<IdleResult, String> {
    let t0 = Instant::now();
    let mut conn = tokio::time::timeout(ctx.probe_timeout, ctx.dialer.connect()).await.map_err(|_| "connection timed out".to_string())??;
    let mut probes = Vec::with_capacity(2 * n);
    for _ in 0..n {
        probes.push(foreign_probe(ctx, t0).await);
        let p = match tokio::time::timeout(ctx.probe_timeout, ctx.dialer.get(&mut conn.sender, &ctx.paths.small, |_| {})).await {
            Ok(Ok(ms)) => Probe { t_s: t0.elapsed().as_secs_f64(), kind: ProbeKind::SelfProbe, connect_ms: None, tls_ms: None, http_ms: Some(ms), error: None },
            Ok(Err(e)) => Probe { t_s: t0.elapsed().as_secs_f64(), kind: ProbeKind::SelfProbe, connect_ms: None, tls_ms: None, http_ms: None, error: Some(e) },
            Err(_) => Probe { t_s: t0.elapsed().as_secs_f64(), kind: ProbeKind::SelfProbe, connect_ms: None, tls_ms: None, http_ms: None, error: Some("timed out".into()) },
        };
        probes.push(p);
    }
    let times = probe_times(probes.iter());
    let responsiveness = responsiveness(&times, ctx.params.tmp);
    let mut self_ms = times.http_self.clone();
    self_ms.sort_by(f64::total_cmp);
    let http_median_ms = (!self_ms.is_empty()).then(|| self_ms[self_ms.len() / 2]);
    if responsiveness.is_none() {
        let first = probes.iter().find_map(|p| p.error.clone()).unwrap_or_default();
        return Err(format!("no complete probe pair: {first}"));
    }
    Ok(IdleResult {
        latency_ms: responsiveness.map(|r| 60_000.0 / r.rpm),
        rpm: responsiveness.map(|r| r.rpm),
        http_median_ms,
        responsiveness,
        probes,
    })
}

/// Where an upload connection's transport counters are read.
enum CounterSource {
    /// TCP: a duplicate of the socket (`TCP_INFO`).
    Tcp(std::os::fd::OwnedFd),
    /// QUIC: the connection (quinn's statistics).
    Quic(quinn::Connection),
}

impl CounterSource {
    fn of(conn: &RpmConn) -> Result<CounterSource, String> {
        if let Some(q) = &conn.quic {
            return Ok(CounterSource::Quic(q.clone()));
        }
        let fd = conn.tcp_fd.as_ref().ok_or("upload: the connection has neither a TCP socket nor a QUIC connection to count delivered bytes")?;
        fd.try_clone().map(CounterSource::Tcp).map_err(|e| format!("upload: duplicate the socket: {e}"))
    }

    fn read(&self) -> Result<TransportCounters, String> {
        match self {
            CounterSource::Tcp(fd) => crate::sockopt::tcp_info(fd.as_fd()).map(|i| TransportCounters::Tcp { bytes_acked: i.bytes_acked }).map_err(|e| format!("TCP_INFO: {e}")),
            CounterSource::Quic(c) => {
                let stats = c.stats();
                Ok(TransportCounters::Quic { sent_bytes: stats.udp_tx.bytes, lost_bytes: stats.path.lost_bytes, cwnd: stats.path.cwnd })
            }
        }
    }
}

/// An upload connection's delivered bytes (docs/rpm.md, [`super::delivered`]).
struct UploadMeter {
    source: CounterSource,
    account: DeliveredAccount,
}

impl UploadMeter {
    fn start(conn: &RpmConn) -> Result<UploadMeter, String> {
        let source = CounterSource::of(conn)?;
        let account = DeliveredAccount::new(source.read()?);
        Ok(UploadMeter { source, account })
    }

    /// The delivered bytes now (a failed reading keeps the last count).
    fn delivered(&mut self) -> u64 {
        match self.source.read() {
            Ok(now) => self.account.update(now),
            Err(_) => self.account.delivered(),
        }
    }
}

/// One load-generating connection: connect, register with the probes (and, uploading, with
/// the delivered-bytes meters), then request the large object (or upload) again and again
/// until aborted.
async fn load_connection(ctx: Arc<Ctx>, dir: Dir, moved: Arc<AtomicU64>, pool: Arc<Mutex<Vec<Loaded>>>, meters: Arc<Mutex<Vec<UploadMeter>>>) -> Result<(), String> {
    let mut conn = tokio::time::timeout(ctx.probe_timeout, ctx.dialer.connect()).await.map_err(|_| "connection timed out".to_string())??;
    if dir == Dir::Upload {
        let meter = UploadMeter::start(&conn)?;
        if let Ok(mut m) = meters.lock() {
            m.push(meter);
        }
    }
    let loaded = Loaded { sender: conn.sender.clone_multiplexed(), tcp_fd: conn.tcp_fd.as_ref().and_then(|f| f.try_clone().ok()).map(Arc::new) };
    if let Ok(mut p) = pool.lock() {
        p.push(loaded);
    }
    let sender = &mut conn.sender;
    loop {
        match dir {
            Dir::Download => {
                let m = moved.clone();
                ctx.dialer
                    .get(sender, &ctx.paths.large, move |d| {
                        m.fetch_add(d.len() as u64, Ordering::Relaxed);
                    })
                    .await?;
            }
            Dir::Upload => ctx.dialer.upload(sender, &ctx.paths.upload, moved.clone()).await?,
        }
    }
}

/// The load-generating connections of one direction and the bytes they moved.
struct Load {
    ctx: Arc<Ctx>,
    dir: Dir,
    /// Downloads: the bytes read. Uploads: the bytes the stacks accepted (not the goodput).
    moved: Arc<AtomicU64>,
    /// Uploads: each connection's delivered bytes, the goodput.
    meters: Arc<Mutex<Vec<UploadMeter>>>,
    /// The connections the probes can use (registered once connected).
    pool: Arc<Mutex<Vec<Loaded>>>,
    tasks: JoinSet<Result<(), String>>,
}

impl Load {
    fn new(ctx: Arc<Ctx>, dir: Dir) -> Load {
        Load { ctx, dir, moved: Arc::new(AtomicU64::new(0)), meters: Arc::new(Mutex::new(Vec::new())), pool: Arc::new(Mutex::new(Vec::new())), tasks: JoinSet::new() }
    }

    /// Starts `n` more connections.
    fn spawn(&mut self, n: usize) {
        for _ in 0..n {
            self.tasks.spawn(load_connection(self.ctx.clone(), self.dir, self.moved.clone(), self.pool.clone(), self.meters.clone()));
        }
    }

    /// Why each connection that ended since the last call ended.
    fn collect_ended(&mut self, errors: &mut Vec<String>) {
        while let Some(done) = self.tasks.try_join_next() {
            errors.push(match done {
                Ok(Ok(())) => "ended".to_string(),
                Ok(Err(e)) => e,
                Err(e) => format!("task: {e}"),
            });
        }
    }

    /// Connections running and registered with the probes.
    fn connections(&self) -> usize {
        self.pool.lock().map(|p| p.len()).unwrap_or(0).min(self.tasks.len())
    }

    /// The goodput's bytes so far: read (downloads) or delivered (uploads, every connection
    /// that ever uploaded, ended ones included).
    fn bytes(&self) -> u64 {
        match self.dir {
            Dir::Download => self.moved.load(Ordering::Relaxed),
            Dir::Upload => self.meters.lock().map(|mut m| m.iter_mut().map(UploadMeter::delivered).sum()).unwrap_or(0),
        }
    }

    async fn stop(&mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Launches probe pairs (foreign and self, on a random load-generating connection) at the rate
/// in `rate_bits` per second, at most [`MAX_PROBES_IN_FLIGHT`] probes at once; results go to `probe_tx`.
fn spawn_probe_launcher(ctx: Arc<Ctx>, pool: Arc<Mutex<Vec<Loaded>>>, rate_bits: Arc<AtomicU64>, probe_tx: mpsc::UnboundedSender<Probe>, t0: Instant) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let in_flight = Arc::new(Semaphore::new(MAX_PROBES_IN_FLIGHT));
        let mut probes = JoinSet::new();
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(crate::instrument::unix_ns());
        loop {
            let rate = f64::from_bits(rate_bits.load(Ordering::Relaxed)).max(0.1);
            tokio::time::sleep(Duration::from_secs_f64(1.0 / rate)).await;
            let target = pool.lock().ok().and_then(|p| (!p.is_empty()).then(|| p[rng.random_range(0..p.len())].clone()));
            let Some(target) = target else { continue };
            let Ok(permit) = in_flight.clone().try_acquire_many_owned(2) else { continue };
            let (ctx, tx) = (ctx.clone(), probe_tx.clone());
            probes.spawn(async move {
                let (f, s) = tokio::join!(foreign_probe(&ctx, t0), self_probe(&ctx, &target, t0));
                let _ = tx.send(f);
                let _ = tx.send(s);
                drop(permit);
            });
            while probes.try_join_next().is_some() {}
        }
    })
}

/// Ends the stages' next interval, in which the load moved `bytes`: its record and the verdict.
fn end_interval(stages: &mut Stages, p: &Parameters, bytes: u64, probes: &[Probe], connections: usize) -> (Interval, Verdict) {
    let index = stages.intervals();
    let end_s = (index + 1) as f64 * p.interval_s;
    let from_s = end_s - p.mad as f64 * p.interval_s;
    let window = probe_times(probes.iter().filter(|pr| pr.t_s > from_s));
    let verdict = stages.end_interval(bytes, &window);
    let capacity = stages.capacity_bps();
    let responsiveness = if verdict == Verdict::Ramping { None } else { stages.responsiveness.last().copied().filter(|_| stages.saturated_at.is_some()) };
    let state = match verdict {
        Verdict::Ramping => IntervalState::Ramping,
        Verdict::Saturated => IntervalState::Saturated,
        Verdict::Done => IntervalState::Done,
    };
    let completed = probes.iter().filter(|pr| pr.t_s > end_s - p.interval_s && pr.t_s <= end_s).count();
    let interval = Interval {
        index,
        t_s: end_s,
        bytes,
        goodput_bps: bytes as f64 * 8.0 / p.interval_s,
        moving_goodput_bps: capacity.unwrap_or(0.0),
        connections,
        probes: completed,
        probe_rate: p.probe_rate(capacity),
        state,
        responsiveness,
    };
    (interval, verdict)
}

/// The progress line of an interval.
fn progress_line(dir: Dir, i: &Interval) -> String {
    format!(
        "{:<8} {:>5.1} s  {:>9.2} Mbit/s (moving {:>8.2})  {:>2} conns  {:>4} probes  {}{}",
        dir.name(),
        i.t_s,
        i.goodput_bps / 1e6,
        i.moving_goodput_bps / 1e6,
        i.connections,
        i.probes,
        i.state,
        i.responsiveness.map_or_else(String::new, |r| format!("  RPM {:.0}", r.rpm)),
    )
}

async fn run_direction(ctx: &Ctx, dir: Dir, max_duration: Duration, progress: &(dyn Fn(String) + Sync)) -> DirectionResult {
    let p = ctx.params;
    let ctx = Arc::new(Ctx { dialer: ctx.dialer.clone(), paths: ctx.paths.clone(), params: p, probe_timeout: ctx.probe_timeout });
    let t0 = Instant::now();
    let id = Duration::from_secs_f64(p.interval_s);
    let mut load = Load::new(ctx.clone(), dir);
    load.spawn(p.inp);
    let mut opened = p.inp;
    // Probes: pairs launched at `rate` per second, results through a channel.
    let rate_bits = Arc::new(AtomicU64::new(p.probe_rate(None).to_bits()));
    let (probe_tx, mut probe_rx) = mpsc::unbounded_channel::<Probe>();
    let launcher = spawn_probe_launcher(ctx.clone(), load.pool.clone(), rate_bits.clone(), probe_tx, t0);
    let mut stages = Stages::new(p);
    let mut intervals = Vec::new();
    let mut probes: Vec<Probe> = Vec::new();
    let mut errors = Vec::new();
    let mut last_total = 0u64;
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::from_std(t0 + id), id);
    loop {
        ticker.tick().await;
        while let Ok(pr) = probe_rx.try_recv() {
            probes.push(pr);
        }
        load.collect_ended(&mut errors);
        let total = load.bytes();
        let (interval, verdict) = end_interval(&mut stages, &p, total - last_total, &probes, load.connections());
        last_total = total;
        rate_bits.store(interval.probe_rate.to_bits(), Ordering::Relaxed);
        progress(progress_line(dir, &interval));
        intervals.push(interval);
        if verdict == Verdict::Done || t0.elapsed() + Duration::from_millis(1) >= max_duration {
            break;
        }
        if verdict == Verdict::Ramping && opened < p.mnp {
            let n = p.inc.min(p.mnp - opened);
            load.spawn(n);
            opened += n;
        }
        // A connection that failed is replaced, within MNP.
        let lost = opened.saturating_sub(load.tasks.len());
        if lost > 0 && verdict != Verdict::Ramping {
            load.spawn(lost);
        }
    }
    launcher.abort();
    load.stop().await;
    while let Ok(pr) = probe_rx.try_recv() {
        probes.push(pr);
    }
    // The last MAD intervals' probes: the window the stages would have used at the end.
    let from_s = (stages.intervals() as f64 - p.mad as f64) * p.interval_s;
    let (final_r, rpm_confidence) = stages.final_responsiveness(&probe_times(probes.iter().filter(|pr| pr.t_s > from_s)));
    let load_connections = intervals.last().map_or(0, |i| i.connections);
    DirectionResult {
        capacity_bps: stages.capacity_bps(),
        rpm: final_r.map(|r| r.rpm),
        loaded_latency_ms: final_r.map(|r| 60_000.0 / r.rpm),
        rpm_latency_mean: final_r.and_then(|r| r.rpm_latency_mean),
        responsiveness: final_r,
        confidence: Confidences { capacity: stages.capacity_confidence(), rpm: rpm_confidence },
        load_connections,
        load_connections_max: intervals.iter().map(|i| i.connections).max(),
        bytes: load.bytes(),
        duration_s: t0.elapsed().as_secs_f64(),
        saturated_at: stages.saturated_at,
        intervals,
        probes,
        errors,
    }
}

/// The client machine: OS, kernel, network interfaces by kind (`/sys/class/net`).
fn client_info() -> ClientInfo {
    let os = std::fs::read_to_string("/etc/os-release").ok().and_then(|s| {
        s.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=")).map(|v| v.trim_matches('"').to_string())
    });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string());
    let mut interfaces = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/sys/class/net") {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name == "lo" {
                continue;
            }
            let path = entry.path();
            let uevent = std::fs::read_to_string(path.join("uevent")).unwrap_or_default();
            let devtype = uevent.lines().find_map(|l| l.strip_prefix("DEVTYPE=")).unwrap_or("");
            let kind = if path.join("wireless").exists() || devtype == "wlan" {
                "wifi"
            } else if devtype == "bridge" {
                "bridge"
            } else if std::fs::read_to_string(path.join("tun_flags")).is_ok() {
                "tun"
            } else if devtype == "veth" || std::fs::read_link(path.join("device")).is_err() && name.starts_with("veth") {
                "veth"
            } else if path.join("device").exists() {
                "ethernet"
            } else {
                "other"
            };
            interfaces.push(result::InterfaceInfo { name, kind: kind.to_string() });
        }
    }
    interfaces.sort_by(|a, b| a.name.cmp(&b.name));
    ClientInfo { os, kernel, interfaces }
}
