//! Per-connection samplers (docs/samples.md): `TCP_INFO` of TCP connections, `TCP_INFO` of
//! every subflow of MPTCP connections, quinn's path statistics of QUIC connections, written as
//! NDJSON with Unix-nanosecond timestamps, one file per connection and role:
//! `<dir>/<role>-<conn_id>.ndjson`. Also per-connection qlog files for QUIC.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use contract::modes::Transport;
use contract::samples::{CcState, MptcpSubflow, QuicSample, SampleEvent, SampleHeader, SamplesSchema, StateEvent, StateSample, TcpSample};
use serde::Serialize;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::sockopt::{self, TcpInfo};

/// `schema` of a samples file.
pub const SCHEMA: &str = SamplesSchema::NAME;
/// `schema_version` of a samples file; the header and rows are the contract's
/// (`contract::samples`, `schemas/sample-header.json`, ...).
pub use contract::samples::SCHEMA_VERSION;
/// Default sampling interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(10);
/// Smallest sampling interval accepted.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// The kernel's "ssthresh not set yet" (`TCP_INFINITE_SSTHRESH`).
const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// What to record per connection, shared by the server, the page-load engine and bulk
/// transfers. Nothing is recorded by default.
#[derive(Debug, Clone)]
pub struct InstrumentOptions {
    /// Write `TCP_INFO` / quinn samples here (`<role>-<conn_id>.ndjson`).
    pub samples_dir: Option<PathBuf>,
    /// Sampling interval (at least [`MIN_INTERVAL`]).
    pub interval: Duration,
    /// Write a qlog per QUIC connection here (`<role>-<conn_id>.qlog`).
    pub qlog_dir: Option<PathBuf>,
}

impl Default for InstrumentOptions {
    fn default() -> Self {
        InstrumentOptions { samples_dir: None, interval: DEFAULT_INTERVAL, qlog_dir: None }
    }
}

impl InstrumentOptions {
    /// Whether anything is recorded.
    pub fn any(&self) -> bool {
        self.samples_dir.is_some() || self.qlog_dir.is_some()
    }

    /// Creates the directories (before anything runs, so that a bad path is bad input).
    pub fn prepare(&self) -> io::Result<()> {
        for dir in [&self.samples_dir, &self.qlog_dir].into_iter().flatten() {
            std::fs::create_dir_all(dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        }
        Ok(())
    }

    /// A sampler of a TCP (or MPTCP) connection when samples are asked for
    /// ([`spawn_tcp_sampler`]).
    pub fn tcp_sampler(&self, stream: &impl AsFd, conn_id: &str, role: Role, mptcp: bool) -> io::Result<Option<SamplerHandle>> {
        self.samples_dir.as_ref().map(|dir| spawn_tcp_sampler(stream, conn_id, role, mptcp, self.interval, dir)).transpose()
    }

    /// A sampler of a QUIC connection when samples are asked for ([`spawn_quic_sampler`]).
    pub fn quic_sampler(&self, conn: &quinn::Connection, conn_id: &str, role: Role, controller: &str) -> io::Result<Option<SamplerHandle>> {
        self.samples_dir.as_ref().map(|dir| spawn_quic_sampler(conn, conn_id, role, controller, self.interval, dir)).transpose()
    }

    /// The qlog stream of one QUIC connection and its file, when qlogs are asked for.
    pub fn qlog(&self, role: Role, conn_id: &str) -> io::Result<Option<(quinn::QlogStream, PathBuf)>> {
        self.qlog_dir.as_ref().map(|dir| Ok((qlog_stream(dir, role, conn_id)?, qlog_path(dir, role, conn_id)))).transpose()
    }

    /// As results carry it (`config` of load and bulk results).
    pub fn config(&self) -> InstrumentConfig {
        InstrumentConfig {
            samples_dir: self.samples_dir.as_ref().map(|d| d.display().to_string()),
            sample_interval_ms: self.interval.as_secs_f64() * 1e3,
            qlog_dir: self.qlog_dir.as_ref().map(|d| d.display().to_string()),
        }
    }
}

/// [`InstrumentOptions`] in a result's `config` (flattened into it), defined in the contract crate.
pub use contract::samples::InstrumentConfig;

/// The id of a connection as both ends name it: transport, client address and server address
/// (`tcp-10.77.0.1:40002-10.77.1.1:443`, made file-safe in file names), so that the client's
/// and the server's files of one connection pair up.
pub fn connection_id(transport: &str, client: Option<SocketAddr>, server: Option<SocketAddr>) -> String {
    let show = |a: Option<SocketAddr>| a.map_or_else(|| "unknown".to_string(), |a| a.to_string());
    format!("{transport}-{}-{}", show(client), show(server))
}

/// Which end of the connection samples (`client`, `server`).
pub use contract::samples::Role;

/// Nanoseconds since the Unix epoch, now.
pub fn unix_ns() -> u64 {
    // A clock before 1970 is a misconfigured machine; 0 keeps the file parseable.
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)).unwrap_or(0)
}

/// A connection id made safe for a file name: anything outside `[A-Za-z0-9._-]` becomes `_`.
pub fn file_safe(conn_id: &str) -> String {
    let s: String = conn_id.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        "conn".to_string()
    } else {
        s
    }
}

/// The samples file of a connection: `<dir>/<role>-<conn_id>.ndjson`.
pub fn samples_path(dir: &Path, role: Role, conn_id: &str) -> PathBuf {
    dir.join(format!("{}-{}.ndjson", role.as_str(), file_safe(conn_id)))
}

/// What a sampler wrote.
#[derive(Debug, Clone)]
pub struct SamplerSummary {
    /// The file.
    pub path: PathBuf,
    /// Sample rows written (for MPTCP one per subflow per tick).
    pub rows: u64,
}

/// A running sampler. It samples every interval until [`SamplerHandle::stop`], until the
/// handle is dropped, or until the connection is closed; it always takes a last sample and
/// flushes the file before it ends.
///
/// A TCP sampler holds a duplicate of the socket's descriptor (so it never reads a reused
/// descriptor number) and a QUIC sampler a `quinn::Connection` handle: either keeps the
/// connection open, so drop or stop the handle together with the connection.
#[derive(Debug)]
pub struct SamplerHandle {
    path: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<io::Result<u64>>>,
}

impl SamplerHandle {
    /// The samples file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes a last sample, flushes and closes the file.
    pub async fn stop(mut self) -> io::Result<SamplerSummary> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let rows = match self.task.take() {
            Some(task) => task.await.map_err(|e| io::Error::other(format!("sampler task: {e}")))??,
            None => 0,
        };
        Ok(SamplerSummary { path: self.path.clone(), rows })
    }
}

impl Drop for SamplerHandle {
    fn drop(&mut self) {
        // The task notices, takes its last sample and ends on its own.
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Writes the header and spawns the loop that calls `sample` every `interval`; `sample`
/// writes its rows and returns `true` once the connection is closed.
fn spawn_sampler<F>(path: PathBuf, header: SampleHeader, interval: Duration, mut sample: F) -> io::Result<SamplerHandle>
where
    F: FnMut(&mut BufWriter<File>) -> io::Result<bool> + Send + 'static,
{
    let interval = interval.max(MIN_INTERVAL);
    let file = File::create(&path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let mut out = BufWriter::with_capacity(64 * 1024, file);
    serde_json::to_writer(&mut out, &header)?;
    out.write_all(b"\n")?;
    out.flush()?;
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut rows = 0u64;
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = &mut stop_rx => {
                    // Stopped (or the handle dropped): the last sample.
                    let _ = sample(&mut out);
                    rows += 1;
                    break;
                }
                _ = ticker.tick() => {
                    // Flushed every row: readers (the runner) see a file that is current, and a
                    // file that stopped growing belongs to a connection that is closed.
                    let sampled = sample(&mut out).and_then(|closed| out.flush().map(|()| closed));
                    match sampled {
                        Ok(false) => rows += 1,
                        // Closed, or the socket is gone: that row was the last one.
                        Ok(true) | Err(_) => break,
                    }
                }
            }
        }
        out.flush()?;
        Ok(rows)
    });
    Ok(SamplerHandle { path, stop: Some(stop_tx), task: Some(task) })
}

fn opt_ssthresh(v: u32) -> Option<u32> {
    (v < TCP_INFINITE_SSTHRESH).then_some(v)
}

fn opt_rate_bps(bytes_per_s: u64) -> Option<u64> {
    (bytes_per_s != u64::MAX).then(|| bytes_per_s.saturating_mul(8))
}

/// A controller's state as sample rows name it.
pub fn cc_state(state: cc::State) -> CcState {
    match state {
        cc::State::SlowStart => CcState::SlowStart,
        cc::State::ConservativeSlowStart => CcState::ConservativeSlowStart,
        cc::State::CongestionAvoidance => CcState::CongestionAvoidance,
        cc::State::Recovery => CcState::Recovery,
        cc::State::ApplicationLimited => CcState::ApplicationLimited,
    }
}

/// The controller state of a TCP sender, from `TCP_INFO` (docs/samples.md): CWR, Recovery and
/// Loss are recovery; otherwise application-limited when the last delivery-rate sample was,
/// slow start below ssthresh, congestion avoidance above.
pub fn tcp_controller_state(i: &TcpInfo) -> cc::State {
    match i.ca_state {
        2..=4 => cc::State::Recovery,
        _ if i.delivery_rate_app_limited => cc::State::ApplicationLimited,
        _ if i.ssthresh >= TCP_INFINITE_SSTHRESH || i.cwnd < i.ssthresh => cc::State::SlowStart,
        _ => cc::State::CongestionAvoidance,
    }
}

/// One sample row of `TCP_INFO`.
pub fn tcp_row(t_unix_ns: u64, i: &TcpInfo) -> TcpSample {
    TcpSample {
        t_unix_ns,
        event: SampleEvent::Sample,
        cc_state: cc_state(tcp_controller_state(i)),
        app_limited: i.delivery_rate_app_limited,
        bytes_in_flight: u64::from(i.unacked) * u64::from(i.snd_mss),
        state: i.state,
        ca_state: i.ca_state,
        cwnd: i.cwnd,
        ssthresh: opt_ssthresh(i.ssthresh),
        rtt_us: i.rtt_us,
        rttvar_us: i.rttvar_us,
        min_rtt_us: i.min_rtt_us,
        retrans: i.total_retrans,
        lost: i.lost,
        unacked: i.unacked,
        snd_mss: i.snd_mss,
        delivery_rate_bps: opt_rate_bps(i.delivery_rate),
        pacing_rate_bps: opt_rate_bps(i.pacing_rate),
        bytes_acked: i.bytes_acked,
        bytes_received: i.bytes_received,
        bytes_sent: i.bytes_sent,
        bytes_retrans: i.bytes_retrans,
        notsent_bytes: i.notsent_bytes,
        rto_us: i.rto_us,
        ato_us: i.ato_us,
        rcv_mss: i.rcv_mss,
        last_data_sent_ms: i.last_data_sent_ms,
        last_data_recv_ms: i.last_data_recv_ms,
        last_ack_recv_ms: i.last_ack_recv_ms,
        max_pacing_rate_bps: opt_rate_bps(i.max_pacing_rate),
        segs_out: i.segs_out,
        segs_in: i.segs_in,
        data_segs_out: i.data_segs_out,
        data_segs_in: i.data_segs_in,
        dsack_dups: i.dsack_dups,
        subflow: None,
    }
}

/// TCP states after which the sampler stops: TIME_WAIT, CLOSE, LAST_ACK, CLOSING (this end
/// has closed its side; nothing more of interest happens).
fn tcp_closed(state: u8) -> bool {
    matches!(state, 6 | 7 | 9 | 11)
}

fn write_row(out: &mut BufWriter<File>, row: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, row)?;
    out.write_all(b"\n")
}

/// Samples `TCP_INFO` of a TCP connection (with `mptcp`, `TCP_INFO` of each subflow, one row
/// per subflow with `"subflow": k`) every `interval` into `<dir>/<role>-<conn_id>.ndjson`.
/// Must run inside a tokio runtime.
pub fn spawn_tcp_sampler(stream: &impl AsFd, conn_id: &str, role: Role, mptcp: bool, interval: Duration, dir: &Path) -> io::Result<SamplerHandle> {
    let fd: OwnedFd = stream.as_fd().try_clone_to_owned()?;
    let sock = socket2::SockRef::from(&fd);
    let local = sock.local_addr().ok().and_then(|a| a.as_socket());
    let remote = sock.peer_addr().ok().and_then(|a| a.as_socket());
    let congestion = crate::transport::tcp_congestion_of(&fd).ok();
    // An MPTCP socket whose peer does not speak MPTCP falls back to TCP.
    let mptcp_active = mptcp && !sockopt::mptcp_fell_back(fd.as_fd());
    let header = SampleHeader {
        schema: SamplesSchema::Samples,
        schema_version: SCHEMA_VERSION,
        conn: conn_id.to_string(),
        role,
        transport: if mptcp { Transport::Mptcp } else { Transport::Tcp },
        mptcp_fallback: Some(mptcp.then_some(!mptcp_active)),
        local: local.map(|a| a.to_string()),
        remote: remote.map(|a| a.to_string()),
        interval_ms: interval.max(MIN_INTERVAL).as_secs_f64() * 1e3,
        tcp_congestion: Some(congestion),
        quic_congestion: None,
        start_unix_ns: unix_ns(),
    };
    let path = samples_path(dir, role, conn_id);
    spawn_sampler(path, header, interval, move |out| {
        let t = unix_ns();
        if mptcp_active {
            let subs = sockopt::mptcp_subflow_tcp_infos(fd.as_fd())?;
            // The MPTCP connection is closed when no subflow is left or all are closing.
            let closed = subs.iter().all(|s| tcp_closed(s.tcp.state));
            for s in &subs {
                let subflow = MptcpSubflow {
                    subflow: u32::try_from(s.index).unwrap_or(u32::MAX),
                    local: s.local.map(|a| a.to_string()),
                    remote: s.remote.map(|a| a.to_string()),
                };
                write_row(out, &TcpSample { subflow: Some(subflow), ..tcp_row(t, &s.tcp) })?;
            }
            Ok(closed)
        } else {
            let info = sockopt::tcp_info(fd.as_fd())?;
            write_row(out, &tcp_row(t, &info))?;
            Ok(tcp_closed(info.state))
        }
    })
}

/// One sample row of quinn's connection statistics, with the controller's state when it is
/// one of protolab's ([`cc::Adapter`]).
pub fn quic_row(t_unix_ns: u64, s: &quinn::ConnectionStats, controller: Option<&cc::Snapshot>) -> QuicSample {
    QuicSample {
        t_unix_ns,
        event: SampleEvent::Sample,
        cc_state: controller.and_then(|c| c.state).map(cc_state),
        ssthresh: controller.and_then(|c| c.ssthresh),
        bytes_in_flight: controller.map(|c| c.bytes_in_flight),
        pacing_rate_bps: controller.and_then(|c| c.pacing_rate_bps),
        cc_feedback_reports: controller.and_then(|c| c.feedback).map(|f| f.reports),
        cc_feedback_rate_bps: controller.and_then(|c| c.feedback).and_then(|f| f.rate_bps),
        cwnd: s.path.cwnd,
        rtt_us: u64::try_from(s.path.rtt.as_micros()).unwrap_or(u64::MAX),
        min_rtt_us: u64::try_from(s.path.min_rtt.as_micros()).unwrap_or(u64::MAX),
        congestion_events: s.path.congestion_events,
        lost_packets: s.path.lost_packets,
        lost_bytes: s.path.lost_bytes,
        sent_packets: s.path.sent_packets,
        current_mtu: s.path.current_mtu,
        udp_tx_bytes: s.udp_tx.bytes,
        udp_rx_bytes: s.udp_rx.bytes,
        udp_tx_datagrams: s.udp_tx.datagrams,
        udp_rx_datagrams: s.udp_rx.datagrams,
    }
}

/// Samples quinn's statistics of a QUIC connection every `interval` into
/// `<dir>/<role>-<conn_id>.ndjson`; `controller` names the congestion controller for the
/// header. Must run inside a tokio runtime.
pub fn spawn_quic_sampler(conn: &quinn::Connection, conn_id: &str, role: Role, controller: &str, interval: Duration, dir: &Path) -> io::Result<SamplerHandle> {
    let conn = conn.clone();
    let header = SampleHeader {
        schema: SamplesSchema::Samples,
        schema_version: SCHEMA_VERSION,
        conn: conn_id.to_string(),
        role,
        transport: Transport::Quic,
        mptcp_fallback: None,
        local: conn.local_ip().map(|ip| ip.to_string()),
        remote: Some(conn.remote_address().to_string()),
        interval_ms: interval.max(MIN_INTERVAL).as_secs_f64() * 1e3,
        tcp_congestion: None,
        quic_congestion: Some(controller.to_string()),
        start_unix_ns: unix_ns(),
    };
    let path = samples_path(dir, role, conn_id);
    let mut next_transition = 0u64;
    spawn_sampler(path, header, interval, move |out| {
        let closed = conn.close_reason().is_some();
        let (now, t) = (Instant::now(), unix_ns());
        let snapshot = cc::Adapter::downcast(conn.congestion_state()).map(|a| a.snapshot());
        if let Some(snapshot) = &snapshot {
            // A row at every state change since the last sample, on the same time base.
            let first_new = next_transition;
            for transition in snapshot.transitions.iter().filter(|tr| tr.seq >= first_new) {
                let ago = u64::try_from(now.saturating_duration_since(transition.at).as_nanos()).unwrap_or(u64::MAX);
                write_row(out, &transition_row(t.saturating_sub(ago), transition))?;
                next_transition = transition.seq + 1;
            }
        }
        write_row(out, &quic_row(t, &conn.stats(), snapshot.as_ref()))?;
        Ok(closed)
    })
}

/// A row of a QUIC controller's state change (`"event": "state"`).
pub fn transition_row(t_unix_ns: u64, transition: &cc::Transition) -> StateSample {
    StateSample {
        t_unix_ns,
        event: StateEvent::State,
        cc_state: cc_state(transition.state),
        cwnd: transition.window,
        ssthresh: transition.ssthresh,
        bytes_in_flight: transition.bytes_in_flight,
    }
}

/// The qlog file of a QUIC connection: `<dir>/<role>-<conn_id>.qlog` (qlog JSON-SEQ).
pub fn qlog_path(dir: &Path, role: Role, conn_id: &str) -> PathBuf {
    dir.join(format!("{}-{}.qlog", role.as_str(), file_safe(conn_id)))
}

/// A qlog stream writing to `<dir>/<role>-<conn_id>.qlog`, for
/// `quinn::TransportConfig::qlog_stream` of one connection. qlog event times are
/// milliseconds since the connection's start; the trace's description carries that start as
/// `start_unix_ns=<ns>` so qlog and samples share a time base.
pub fn qlog_stream(dir: &Path, role: Role, conn_id: &str) -> io::Result<quinn::QlogStream> {
    let path = qlog_path(dir, role, conn_id);
    let file = File::create(&path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let mut config = quinn::QlogConfig::default();
    config
        .writer(Box::new(BufWriter::new(file)))
        .title(Some(format!("protolab {} {}", role.as_str(), conn_id)))
        .description(Some(format!("start_unix_ns={}", unix_ns())))
        .start_time(std::time::Instant::now());
    config.into_stream().ok_or_else(|| io::Error::other(format!("{}: qlog stream could not start", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(ca_state: u8, cwnd: u32, ssthresh: u32, app_limited: bool) -> TcpInfo {
        TcpInfo { ca_state, cwnd, ssthresh, delivery_rate_app_limited: app_limited, ..TcpInfo::default() }
    }

    #[test]
    fn tcp_state_from_tcp_info() {
        use cc::State::*;
        assert_eq!(tcp_controller_state(&info(0, 10, TCP_INFINITE_SSTHRESH, false)), SlowStart, "ssthresh unset");
        assert_eq!(tcp_controller_state(&info(0, 10, 20, false)), SlowStart);
        assert_eq!(tcp_controller_state(&info(0, 20, 20, false)), CongestionAvoidance);
        assert_eq!(tcp_controller_state(&info(1, 30, 20, false)), CongestionAvoidance, "Disorder is not recovery yet");
        for ca in [2, 3, 4] {
            assert_eq!(tcp_controller_state(&info(ca, 30, 20, true)), Recovery, "CWR, Recovery, Loss");
        }
        assert_eq!(tcp_controller_state(&info(0, 30, 20, true)), ApplicationLimited);
        let row = tcp_row(1, &TcpInfo { unacked: 3, snd_mss: 1448, ..info(0, 10, 20, false) });
        assert_eq!((row.cc_state, row.bytes_in_flight), (CcState::SlowStart, 3 * 1448));
    }

    /// The keys of a JSON object in the order they are written.
    fn keys(row: &impl Serialize) -> Vec<String> {
        struct Keys(Vec<String>);
        impl<'de> serde::Deserialize<'de> for Keys {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = Keys;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("an object")
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                        let mut keys = Vec::new();
                        while let Some(k) = map.next_key::<String>()? {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            keys.push(k);
                        }
                        Ok(Keys(keys))
                    }
                }
                d.deserialize_map(V)
            }
        }
        serde_json::from_str::<Keys>(&serde_json::to_string(row).unwrap()).unwrap().0
    }

    /// The rows have exactly the keys, in the order, that the untyped rows of samples schema
    /// version 2 had.
    #[test]
    fn rows_keep_their_keys_and_order() {
        const TCP: [&str; 35] = [
            "t_unix_ns", "event", "cc_state", "app_limited", "bytes_in_flight", "state", "ca_state", "cwnd", "ssthresh", "rtt_us",
            "rttvar_us", "min_rtt_us", "retrans", "lost", "unacked", "snd_mss", "delivery_rate_bps", "pacing_rate_bps", "bytes_acked",
            "bytes_received", "bytes_sent", "bytes_retrans", "notsent_bytes", "rto_us", "ato_us", "rcv_mss", "last_data_sent_ms",
            "last_data_recv_ms", "last_ack_recv_ms", "max_pacing_rate_bps", "segs_out", "segs_in", "data_segs_out", "data_segs_in",
            "dsack_dups",
        ];
        let row = tcp_row(7, &TcpInfo { delivery_rate: u64::MAX, pacing_rate: 1000, ..info(0, 10, TCP_INFINITE_SSTHRESH, false) });
        assert_eq!(keys(&row), TCP);
        assert_eq!((row.ssthresh, row.delivery_rate_bps, row.pacing_rate_bps), (None, None, Some(8000)));
        let subflow = MptcpSubflow { subflow: 1, local: Some("10.0.0.1:1".into()), remote: None };
        let mptcp = keys(&TcpSample { subflow: Some(subflow), ..row });
        assert_eq!(mptcp[..TCP.len()], TCP);
        assert_eq!(mptcp[TCP.len()..], ["subflow", "local", "remote"]);
        let quic = quic_row(7, &quinn::ConnectionStats::default(), None);
        assert_eq!(
            keys(&quic),
            [
                "t_unix_ns", "event", "cc_state", "ssthresh", "bytes_in_flight", "pacing_rate_bps", "cwnd", "rtt_us", "min_rtt_us",
                "congestion_events", "lost_packets", "lost_bytes", "sent_packets", "current_mtu", "udp_tx_bytes", "udp_rx_bytes",
                "udp_tx_datagrams", "udp_rx_datagrams",
            ]
        );
        let line = serde_json::to_string(&quic).unwrap();
        assert!(line.starts_with(r#"{"t_unix_ns":7,"event":"sample","cc_state":null,"ssthresh":null,"bytes_in_flight":null,"#), "{line}");
        let transition = cc::Transition {
            seq: 0,
            at: Instant::now(),
            state: cc::State::ConservativeSlowStart,
            window: 12_000,
            ssthresh: None,
            bytes_in_flight: 1200,
        };
        assert_eq!(
            serde_json::to_string(&transition_row(9, &transition)).unwrap(),
            r#"{"t_unix_ns":9,"event":"state","cc_state":"conservative_slow_start","cwnd":12000,"ssthresh":null,"bytes_in_flight":1200}"#
        );
    }
}
