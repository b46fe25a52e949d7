//! Transport set-up shared by the server and the clients (through `crate::client`): TCP and
//! MPTCP sockets with a chosen congestion control, and QUIC transport configurations with a
//! chosen controller and the loss-detection and ACK-frequency knobs (docs/transport.md).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Transport set-up failures.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The congestion control is not offered by the kernel.
    #[error("TCP congestion control {name:?} cannot be set: {error} (available: {available})")]
    CongestionControl {
        /// Requested name.
        name: String,
        /// Why.
        error: io::Error,
        /// `/proc/sys/net/ipv4/tcp_available_congestion_control`.
        available: String,
    },
    /// MPTCP sockets are refused (kernel without MPTCP, or `net.mptcp.enabled = 0`).
    #[error("MPTCP socket refused: {0} (is net.mptcp.enabled = 1 in this namespace?)")]
    Mptcp(io::Error),
    /// Any other socket error.
    #[error("{op} {addr}: {error}")]
    Socket {
        /// What was tried.
        op: &'static str,
        /// Address.
        addr: SocketAddr,
        /// Why.
        error: io::Error,
    },
    /// A QUIC option out of range.
    #[error("QUIC option {option}: {why}")]
    QuicOption {
        /// Option name.
        option: &'static str,
        /// Why.
        why: String,
    },
}

/// TCP socket options.
#[derive(Debug, Clone, Default)]
pub struct TcpOptions {
    /// `TCP_CONGESTION` (`reno`, `cubic`, `bbr`); `None` = the namespace default.
    pub congestion: Option<String>,
    /// Open an MPTCP socket (`IPPROTO_MPTCP`) instead of TCP; subflows follow the namespace's
    /// `ip mptcp` endpoints and limits.
    pub mptcp: bool,
    /// `SO_RCVBUF` in bytes (the kernel doubles it, and receive-buffer autotuning stops);
    /// `None` = autotuned from `net.ipv4.tcp_rmem`.
    pub rcvbuf: Option<usize>,
    /// `TCP_NOTSENT_LOWAT` in bytes (set on a listener, accepted sockets inherit it); `None` =
    /// the kernel's default (`net.ipv4.tcp_notsent_lowat`, unlimited).
    pub notsent_lowat: Option<u32>,
    /// TCP keepalive: the first probe after this long without traffic, then one every as long
    /// (`TCP_KEEPIDLE`, `TCP_KEEPINTVL`); `None` = off.
    pub keepalive: Option<std::time::Duration>,
}

/// The kernel's available congestion controls, for error messages.
pub fn available_tcp_congestion() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").map(|s| s.trim().to_string()).unwrap_or_default()
}

fn new_socket(addr: SocketAddr, options: &TcpOptions) -> Result<Socket, TransportError> {
    let protocol = if options.mptcp { Protocol::MPTCP } else { Protocol::TCP };
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(protocol)).map_err(|error| {
        if options.mptcp {
            TransportError::Mptcp(error)
        } else {
            TransportError::Socket { op: "socket", addr, error }
        }
    })?;
    if let Some(cc) = &options.congestion {
        socket.set_tcp_congestion(cc.as_bytes()).map_err(|error| TransportError::CongestionControl {
            name: cc.clone(),
            error,
            available: available_tcp_congestion(),
        })?;
    }
    if let Some(bytes) = options.rcvbuf {
        socket.set_recv_buffer_size(bytes).map_err(|error| TransportError::Socket { op: "SO_RCVBUF", addr, error })?;
    }
    if let Some(bytes) = options.notsent_lowat {
        socket.set_tcp_notsent_lowat(bytes).map_err(|error| TransportError::Socket { op: "TCP_NOTSENT_LOWAT", addr, error })?;
    }
    if let Some(every) = options.keepalive {
        let keepalive = socket2::TcpKeepalive::new().with_time(every).with_interval(every);
        socket.set_tcp_keepalive(&keepalive).map_err(|error| TransportError::Socket { op: "SO_KEEPALIVE", addr, error })?;
    }
    socket.set_nonblocking(true).map_err(|error| TransportError::Socket { op: "set_nonblocking", addr, error })?;
    Ok(socket)
}

/// Connects a TCP (or MPTCP) stream with `TCP_CONGESTION` set before the SYN and `TCP_NODELAY`.
pub async fn tcp_connect(addr: SocketAddr, options: &TcpOptions) -> Result<TcpStream, TransportError> {
    tcp_connect_from(addr, options, None).await
}

/// The kernel's ephemeral port range (`net.ipv4.ip_local_port_range`; Linux's default if
/// unreadable).
pub fn ephemeral_port_range() -> (u16, u16) {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut it = text.split_whitespace().filter_map(|v| v.parse::<u16>().ok());
    match (it.next(), it.next()) {
        (Some(low), Some(high)) if low <= high && low > 0 => (low, high),
        _ => (32768, 60999),
    }
}

/// [`tcp_connect`] from a chosen source port (bound before the SYN); `None` lets the kernel
/// choose. Linux's `connect()` picks even ports (odd ones are left to `bind`), so every
/// connection a client makes to one server port has the same 5-tuple parity; a chosen port
/// gives a flow hash such as ECMP's `SA^DA^SP^DP^PT mod 2` its randomness back.
pub async fn tcp_connect_from(addr: SocketAddr, options: &TcpOptions, source_port: Option<u16>) -> Result<TcpStream, TransportError> {
    let socket = new_socket(addr, options)?;
    if let Some(port) = source_port {
        let any: SocketAddr = match addr {
            SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, port).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, port).into(),
        };
        socket.bind(&any.into()).map_err(|error| TransportError::Socket { op: "bind", addr: any, error })?;
    }
    let std_stream: std::net::TcpStream = socket.into();
    let socket = TcpSocket::from_std_stream(std_stream);
    let stream = socket.connect(addr).await.map_err(|error| TransportError::Socket { op: "connect", addr, error })?;
    stream.set_nodelay(true).map_err(|error| TransportError::Socket { op: "set_nodelay", addr, error })?;
    Ok(stream)
}

/// A listening TCP (or MPTCP) socket with `TCP_CONGESTION` set before `listen` (accepted
/// sockets inherit it). Must run inside a tokio runtime.
pub fn tcp_listen(addr: SocketAddr, options: &TcpOptions) -> Result<TcpListener, TransportError> {
    let err = |op| move |error| TransportError::Socket { op, addr, error };
    let socket = new_socket(addr, options)?;
    socket.set_reuse_address(true).map_err(err("SO_REUSEADDR"))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true).map_err(err("IPV6_V6ONLY"))?;
    }
    socket.bind(&addr.into()).map_err(err("bind"))?;
    socket.listen(1024).map_err(err("listen"))?;
    TcpListener::from_std(socket.into()).map_err(err("register"))
}

/// The `TCP_CONGESTION` of a socket, as text (the kernel pads the name with NULs).
pub fn tcp_congestion_of<S: std::os::fd::AsFd>(socket: &S) -> io::Result<String> {
    let raw = SockRef::from(socket).tcp_congestion()?;
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    Ok(String::from_utf8_lossy(&raw[..end]).into_owned())
}

/// The QUIC congestion controller of a connection: a checked `NAME[:key=value,...]` spec of
/// the controller registry (`cc`, docs/congestion.md).
pub type QuicController = cc::ControllerSpec;

/// The default QUIC controller: our Cubic with its defaults.
pub fn default_quic_controller() -> QuicController {
    // "cubic" is the registry's first entry; its defaults are checked by cc's tests.
    cc::ControllerSpec::parse("cubic").expect("the cubic controller parses with its defaults")
}

/// QUIC transport knobs; `None` keeps quinn's default.
#[derive(Debug, Clone)]
pub struct QuicOptions {
    /// Congestion controller.
    pub controller: QuicController,
    /// Initial congestion window in bytes (default: the controller's, 10 packets); the
    /// controller's `iw` parameter says the same in packets, so not both.
    pub initial_window: Option<u64>,
    /// Loss detection: packet reordering threshold (RFC 9002 kPacketThreshold, default 3).
    pub packet_threshold: Option<u32>,
    /// Loss detection: time threshold as a multiple of the RTT (kTimeThreshold, default 9/8).
    pub time_threshold: Option<f32>,
    /// Initial RTT estimate before the first sample (default 333 ms).
    pub initial_rtt: Option<Duration>,
    /// Request ACK frequency from the peer (draft-ietf-quic-ack-frequency): ACK every
    /// `ack_eliciting_threshold + 1` ack-eliciting packets.
    pub ack_eliciting_threshold: Option<u32>,
    /// With the ACK-frequency request: the peer's maximum ACK delay.
    pub max_ack_delay: Option<Duration>,
    /// Idle timeout (default 30 s).
    pub idle_timeout: Option<Duration>,
    /// Maximum concurrent bidirectional streams the peer may open.
    pub max_concurrent_bidi_streams: Option<u32>,
    /// Flow control: the receive window of every stream in bytes (quinn's default is
    /// [`QUINN_STREAM_WINDOW`], 1.25 MB: one stream carries at most that per RTT).
    pub stream_window: Option<u64>,
}

/// quinn's default stream receive window (its `TransportConfig::default`: 12.5 MB/s over an
/// expected 100 ms RTT): a download's bytes in flight stop there, whatever the congestion
/// window, so above 100 ms RTT a stream is capped at 1.25 MB per RTT (12.5 Mbit/s at 800 ms).
pub const QUINN_STREAM_WINDOW: u64 = 1_250_000;
/// quinn's default send window (unacknowledged bytes a sender keeps): 8 stream windows.
const QUINN_SEND_WINDOW: u64 = 8 * QUINN_STREAM_WINDOW;
/// The smallest stream window accepted: one full-sized datagram's payload.
const MIN_STREAM_WINDOW: u64 = 1200;

impl Default for QuicOptions {
    fn default() -> Self {
        QuicOptions {
            controller: default_quic_controller(),
            initial_window: None,
            packet_threshold: None,
            time_threshold: None,
            initial_rtt: None,
            ack_eliciting_threshold: None,
            max_ack_delay: None,
            idle_timeout: None,
            max_concurrent_bidi_streams: None,
            stream_window: None,
        }
    }
}

impl QuicOptions {
    /// These options with the controller profile's transport knobs (`bquic`'s ACK decimation
    /// and time threshold, `cc::registry::TransportDefaults`) filled in where an option is
    /// unset: an explicit option wins over the profile.
    pub fn with_profile_defaults(&self) -> QuicOptions {
        let profile = self.controller.transport_defaults();
        QuicOptions {
            time_threshold: self.time_threshold.or(profile.time_threshold),
            ack_eliciting_threshold: self.ack_eliciting_threshold.or(profile.ack_eliciting_threshold),
            max_ack_delay: self.max_ack_delay.or(profile.max_ack_delay),
            ..self.clone()
        }
    }

    /// quinn's transport configuration for these options (with the profile's knobs).
    pub fn transport_config(&self) -> Result<quinn::TransportConfig, TransportError> {
        self.with_profile_defaults().own_transport_config()
    }

    fn own_transport_config(&self) -> Result<quinn::TransportConfig, TransportError> {
        let mut transport = quinn::TransportConfig::default();
        if let Some(w) = self.initial_window {
            if w < 2 * 1200 {
                return Err(TransportError::QuicOption { option: "initial_window", why: format!("{w} bytes is below two 1200-byte datagrams") });
            }
        }
        let factory = cc::Factory::for_spec(&self.controller, self.initial_window)
            .map_err(|e| TransportError::QuicOption { option: "initial_window", why: e.to_string() })?;
        transport.congestion_controller_factory(factory);
        crate::feedback::enable_datagrams(&mut transport, &self.controller);
        if let Some(t) = self.packet_threshold {
            if t < 3 {
                return Err(TransportError::QuicOption { option: "packet_threshold", why: format!("{t} is below RFC 9002's minimum of 3") });
            }
            transport.packet_threshold(t);
        }
        if let Some(t) = self.time_threshold {
            if !(t.is_finite() && t >= 1.0) {
                return Err(TransportError::QuicOption { option: "time_threshold", why: format!("{t} must be a finite number >= 1 (RTT multiple)") });
            }
            transport.time_threshold(t);
        }
        if let Some(rtt) = self.initial_rtt {
            transport.initial_rtt(rtt);
        }
        if self.ack_eliciting_threshold.is_some() || self.max_ack_delay.is_some() {
            let mut ack = quinn::AckFrequencyConfig::default();
            // The peer still acknowledges an out-of-order packet at once (RFC 9000 §13.2.1, as
            // Chromium's ACK decimation did): quinn's default under ACK frequency (2) holds the
            // ACK of a late packet up to the max ACK delay, which the sender's time threshold
            // then counts as a loss (tests/quic_knobs.rs).
            ack.reordering_threshold(quinn::VarInt::from_u32(1));
            if let Some(n) = self.ack_eliciting_threshold {
                ack.ack_eliciting_threshold(quinn::VarInt::from_u32(n));
            }
            if let Some(d) = self.max_ack_delay {
                ack.max_ack_delay(Some(d));
            }
            transport.ack_frequency_config(Some(ack));
        }
        if let Some(idle) = self.idle_timeout {
            // Durations beyond 2^62 ms do not exist in practice; such a value means no timeout.
            transport.max_idle_timeout(quinn::IdleTimeout::try_from(idle).ok());
        }
        if let Some(n) = self.max_concurrent_bidi_streams {
            transport.max_concurrent_bidi_streams(quinn::VarInt::from_u32(n));
        }
        if let Some(bytes) = self.stream_window {
            let window = quinn::VarInt::from_u64(bytes)
                .ok()
                .filter(|_| bytes >= MIN_STREAM_WINDOW)
                .ok_or_else(|| TransportError::QuicOption { option: "stream_window", why: format!("{bytes} bytes is not in {MIN_STREAM_WINDOW}..2^62") })?;
            transport.stream_receive_window(window);
            // The sender must be allowed to keep a whole window unacknowledged, or its send
            // window caps the stream instead.
            transport.send_window(bytes.max(QUINN_SEND_WINDOW));
        }
        Ok(transport)
    }

    /// The QUIC options as results record them (`config.quic` of load and bulk results): the
    /// effective ones, a profile's transport knobs included.
    pub fn config(&self) -> QuicConfig {
        let effective = self.with_profile_defaults();
        effective.own_config()
    }

    fn own_config(&self) -> QuicConfig {
        QuicConfig {
            cc: self.controller.given.clone(),
            cc_canonical: self.controller.canonical(),
            initial_window: self.initial_window,
            packet_threshold: self.packet_threshold,
            time_threshold: self.time_threshold,
            ack_eliciting_threshold: self.ack_eliciting_threshold,
            max_ack_delay_ms: self.max_ack_delay.map(|d| d.as_secs_f64() * 1e3),
            stream_window: self.stream_window,
        }
    }
}

/// [`QuicOptions`] in a result's `config` (flattened into it: `quic_cc`, ...), defined in the
/// contract crate.
pub use contract::load::QuicConfig;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_controller_builds_a_transport() {
        for entry in cc::REGISTRY {
            let spec = if entry.name == "fixed" { "fixed:rate=5mbit".to_string() } else { entry.name.to_string() };
            let options = QuicOptions { controller: cc::ControllerSpec::parse(&spec).unwrap(), ..Default::default() };
            assert!(options.transport_config().is_ok(), "{spec}");
        }
        let twice = QuicOptions { controller: cc::ControllerSpec::parse("gquic39").unwrap(), initial_window: Some(20_000), ..Default::default() };
        let err = twice.transport_config().unwrap_err().to_string();
        assert!(err.contains("initial window is set twice"), "{err}");
    }

    #[test]
    fn quic_options_are_checked() {
        let bad = QuicOptions { packet_threshold: Some(1), ..Default::default() };
        assert!(bad.transport_config().is_err());
        let bad = QuicOptions { time_threshold: Some(0.5), ..Default::default() };
        assert!(bad.transport_config().is_err());
        let bad = QuicOptions { initial_window: Some(100), ..Default::default() };
        assert!(bad.transport_config().is_err());
        for window in [100, 1 << 62] {
            let bad = QuicOptions { stream_window: Some(window), ..Default::default() };
            let err = bad.transport_config().unwrap_err().to_string();
            assert!(err.contains("stream_window"), "{err}");
        }
        let wide = QuicOptions { stream_window: Some(16_000_000), ..Default::default() };
        assert!(wide.transport_config().is_ok());
        assert_eq!(wide.config().stream_window, Some(16_000_000));
        let good = QuicOptions {
            controller: cc::ControllerSpec::parse("bbr").unwrap(),
            initial_window: Some(100_000),
            packet_threshold: Some(10),
            time_threshold: Some(1.5),
            ack_eliciting_threshold: Some(9),
            max_ack_delay: Some(Duration::from_millis(25)),
            ..Default::default()
        };
        assert!(good.transport_config().is_ok());
    }

    #[test]
    fn a_profile_sets_transport_knobs_that_options_override() {
        let bquic = QuicOptions { controller: cc::ControllerSpec::parse("bquic").unwrap(), ..Default::default() };
        let recorded = bquic.config();
        assert_eq!((recorded.ack_eliciting_threshold, recorded.max_ack_delay_ms, recorded.time_threshold), (Some(9), Some(25.0), Some(1.5)));
        assert!(bquic.transport_config().is_ok());
        let overridden = QuicOptions { time_threshold: Some(2.0), ack_eliciting_threshold: Some(3), ..bquic };
        let recorded = overridden.config();
        assert_eq!((recorded.ack_eliciting_threshold, recorded.max_ack_delay_ms, recorded.time_threshold), (Some(3), Some(25.0), Some(2.0)));
        let plain = QuicOptions::default().config();
        assert_eq!((plain.ack_eliciting_threshold, plain.max_ack_delay_ms, plain.time_threshold), (None, None, None));
    }

    #[tokio::test]
    async fn tcp_connect_sets_congestion_control() {
        let listener = tcp_listen("127.0.0.1:0".parse().unwrap(), &TcpOptions { congestion: Some("reno".into()), mptcp: false, rcvbuf: None, notsent_lowat: None, keepalive: None }).unwrap();
        let addr = listener.local_addr().unwrap();
        let stream = tcp_connect(addr, &TcpOptions { congestion: Some("reno".into()), mptcp: false, rcvbuf: None, notsent_lowat: None, keepalive: None }).await.unwrap();
        assert_eq!(tcp_congestion_of(&stream).unwrap(), "reno");
        let err = tcp_connect(addr, &TcpOptions { congestion: Some("nosuchcc".into()), mptcp: false, rcvbuf: None, notsent_lowat: None, keepalive: None }).await.unwrap_err();
        assert!(err.to_string().contains("nosuchcc"), "{err}");
        let kept = TcpOptions { keepalive: Some(std::time::Duration::from_secs(45)), ..TcpOptions::default() };
        let stream = tcp_connect(addr, &kept).await.unwrap();
        let socket = socket2::SockRef::from(&stream);
        assert!(socket.keepalive().unwrap());
        assert_eq!((socket.tcp_keepalive_time().unwrap().as_secs(), socket.tcp_keepalive_interval().unwrap().as_secs()), (45, 45));
        assert!(!socket2::SockRef::from(&tcp_connect(addr, &TcpOptions::default()).await.unwrap()).keepalive().unwrap());
    }
}

/// The next connection on `listener`. Accept errors (EMFILE, ENOBUFS, ECONNABORTED...) never
/// end a server: each is reported (`what` names the listener) and accepting resumes after a
/// short pause.
pub async fn accept_retrying(listener: &TcpListener, what: &str) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => {
                eprintln!("protolab-net serve: {what} on {:?}: {e}", listener.local_addr().ok());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
