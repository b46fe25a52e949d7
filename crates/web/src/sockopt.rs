//! Kernel socket statistics: `TCP_INFO` of a TCP socket, and for MPTCP sockets the
//! connection-level `MPTCP_INFO` plus `TCP_INFO` and addresses of every subflow
//! (`SOL_MPTCP` options `MPTCP_TCPINFO` and `MPTCP_SUBFLOW_ADDRS`).
//!
//! Fields are read by offset from the bytes the kernel returns, bounded by the length it
//! reports: a field the running kernel does not fill (older kernel, shorter struct) reads as 0,
//! and a reply shorter than the classic `tcp_info` (up to `tcpi_total_retrans`) is an error.

// Why unsafe is allowed here: `TCP_INFO` and the `SOL_MPTCP` options are reachable only
// through getsockopt(2) with C buffers; neither socket2 nor rustix wraps them. The one unsafe
// call is in `getsockopt_into`, which hands the kernel a buffer it owns together with that
// buffer's true length, and afterwards reads only the prefix the kernel says it wrote.
#![allow(unsafe_code)]

use std::io;
use std::mem::{offset_of, size_of};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd};

/// `SOL_MPTCP` (include/linux/socket.h).
pub const SOL_MPTCP: libc::c_int = 284;
/// `MPTCP_INFO`: `struct mptcp_info`.
pub const MPTCP_INFO: libc::c_int = 1;
/// `MPTCP_TCPINFO`: `struct mptcp_subflow_data` followed by one `tcp_info` per subflow.
pub const MPTCP_TCPINFO: libc::c_int = 2;
/// `MPTCP_SUBFLOW_ADDRS`: `struct mptcp_subflow_data` followed by local/remote addresses.
pub const MPTCP_SUBFLOW_ADDRS: libc::c_int = 3;

/// Size of `struct mptcp_subflow_data` (four `u32`, 8-byte aligned).
const SUBFLOW_DATA_LEN: usize = 16;
/// Size of `struct mptcp_subflow_addrs`: two `__kernel_sockaddr_storage`.
const SUBFLOW_ADDRS_LEN: usize = 256;
/// Subflows asked for on the first try; the call is repeated with room for all if more exist.
const FIRST_SUBFLOW_GUESS: usize = 8;
/// Upper bound on subflows read (the kernel caps subflows at 8 per connection).
const MAX_SUBFLOWS: usize = 64;

/// The `TCP_INFO` fields protolab samples. Units as the kernel gives them, rates in bytes/s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// `tcpi_state` (1 = ESTABLISHED, 7 = CLOSE, ... as in `enum tcp_state`).
    pub state: u8,
    /// `tcpi_ca_state` (0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss).
    pub ca_state: u8,
    /// `tcpi_retransmits`: consecutive RTO retransmissions of the head segment.
    pub retransmits: u8,
    /// `tcpi_snd_cwnd`, in segments.
    pub cwnd: u32,
    /// `tcpi_snd_ssthresh`, in segments (a huge value = not yet set).
    pub ssthresh: u32,
    /// `tcpi_rtt`: smoothed RTT, microseconds.
    pub rtt_us: u32,
    /// `tcpi_rttvar`, microseconds.
    pub rttvar_us: u32,
    /// `tcpi_min_rtt`, microseconds.
    pub min_rtt_us: u32,
    /// `tcpi_total_retrans`: segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// `tcpi_lost`: segments currently considered lost.
    pub lost: u32,
    /// `tcpi_unacked`: segments in flight.
    pub unacked: u32,
    /// `tcpi_snd_mss`, bytes.
    pub snd_mss: u32,
    /// `tcpi_rcv_mss`, bytes.
    pub rcv_mss: u32,
    /// `tcpi_delivery_rate`, bytes per second.
    pub delivery_rate: u64,
    /// `tcpi_delivery_rate_app_limited`: the last delivery-rate sample was application-limited.
    pub delivery_rate_app_limited: bool,
    /// `tcpi_pacing_rate`, bytes per second (`u64::MAX` = unlimited).
    pub pacing_rate: u64,
    /// `tcpi_bytes_acked`.
    pub bytes_acked: u64,
    /// `tcpi_bytes_received`.
    pub bytes_received: u64,
    /// `tcpi_bytes_sent` (including retransmissions).
    pub bytes_sent: u64,
    /// `tcpi_bytes_retrans`.
    pub bytes_retrans: u64,
    /// `tcpi_notsent_bytes`: bytes queued but not yet sent.
    pub notsent_bytes: u32,
    /// `tcpi_rto`, microseconds.
    pub rto_us: u32,
    /// `tcpi_ato`, microseconds.
    pub ato_us: u32,
    /// `tcpi_last_data_sent`: milliseconds since data was last sent.
    pub last_data_sent_ms: u32,
    /// `tcpi_last_data_recv`: milliseconds since data was last received.
    pub last_data_recv_ms: u32,
    /// `tcpi_last_ack_recv`: milliseconds since an ACK was last received.
    pub last_ack_recv_ms: u32,
    /// `tcpi_max_pacing_rate`, bytes per second (`u64::MAX` = unlimited).
    pub max_pacing_rate: u64,
    /// `tcpi_segs_out`: segments sent (retransmissions and pure ACKs included).
    pub segs_out: u32,
    /// `tcpi_segs_in`: segments received.
    pub segs_in: u32,
    /// `tcpi_data_segs_out`: segments with data sent.
    pub data_segs_out: u32,
    /// `tcpi_data_segs_in`: segments with data received.
    pub data_segs_in: u32,
    /// `tcpi_dsack_dups`: duplicate segments the peer reported with DSACK (spurious retransmissions).
    pub dsack_dups: u32,
    /// How many bytes of `struct tcp_info` the kernel returned.
    pub info_len: usize,
}

/// `tcp_info` up to and including `tcpi_total_retrans`: what every kernel since 2.6 returns.
const TCP_INFO_MIN_LEN: usize = offset_of!(libc::tcp_info, tcpi_total_retrans) + 4;

/// `MPTCP_INFO` of an MPTCP connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MptcpInfo {
    /// `mptcpi_subflows`: additional subflows (the initial one is not counted).
    pub subflows: u8,
    /// `mptcpi_add_addr_signal`: ADD_ADDRs this end signalled.
    pub add_addr_signal: u8,
    /// `mptcpi_add_addr_accepted`: ADD_ADDRs from the peer accepted.
    pub add_addr_accepted: u8,
    /// `mptcpi_subflows_max`: the `ip mptcp limits` subflow limit.
    pub subflows_max: u8,
    /// `mptcpi_add_addr_signal_max`.
    pub add_addr_signal_max: u8,
    /// `mptcpi_add_addr_accepted_max`.
    pub add_addr_accepted_max: u8,
    /// `mptcpi_flags` (bit 0 = fallback to TCP, bit 1 = remote key received).
    pub flags: u32,
    /// `mptcpi_token`: the local connection token.
    pub token: u32,
    /// `mptcpi_write_seq`.
    pub write_seq: u64,
    /// `mptcpi_snd_una`.
    pub snd_una: u64,
    /// `mptcpi_rcv_nxt`.
    pub rcv_nxt: u64,
    /// `mptcpi_local_addr_used`: local addresses in use by subflows.
    pub local_addr_used: u8,
    /// `mptcpi_local_addr_max`.
    pub local_addr_max: u8,
    /// `mptcpi_csum_enabled`.
    pub csum_enabled: bool,
}

impl MptcpInfo {
    /// The connection fell back to plain TCP (the peer does not speak MPTCP).
    pub fn fallback(&self) -> bool {
        self.flags & 1 != 0
    }
}

/// `TCP_INFO` of one subflow of an MPTCP connection, with its addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubflowTcpInfo {
    /// Position in the kernel's subflow list (0 = the initial subflow).
    pub index: usize,
    /// Local address (`None` if the kernel did not report it).
    pub local: Option<SocketAddr>,
    /// Remote address.
    pub remote: Option<SocketAddr>,
    /// The subflow's `TCP_INFO`.
    pub tcp: TcpInfo,
}

/// getsockopt(2) into `buf`; returns the length the kernel wrote.
fn getsockopt_into(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int, buf: &mut [u8]) -> io::Result<usize> {
    let mut len: libc::socklen_t = libc::socklen_t::try_from(buf.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `fd` is a live descriptor for the borrow; `buf` is valid for writes of `len`
    // bytes (its own length) and the kernel writes at most `len` bytes, reporting how many.
    let rc = unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, buf.as_mut_ptr().cast::<libc::c_void>(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // The kernel never reports more than it was given; clamp anyway so a reply is never
    // trusted beyond the buffer.
    Ok((len as usize).min(buf.len()))
}

fn u8_at(b: &[u8], off: usize) -> u8 {
    b.get(off).copied().unwrap_or(0)
}
fn u16_at(b: &[u8], off: usize) -> u16 {
    b.get(off..off + 2).and_then(|s| s.try_into().ok()).map(u16::from_ne_bytes).unwrap_or(0)
}
fn u32_at(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4).and_then(|s| s.try_into().ok()).map(u32::from_ne_bytes).unwrap_or(0)
}
fn u64_at(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8).and_then(|s| s.try_into().ok()).map(u64::from_ne_bytes).unwrap_or(0)
}

/// Decodes the first `bytes.len()` bytes of a kernel `struct tcp_info`; fields beyond read 0.
fn parse_tcp_info(bytes: &[u8]) -> io::Result<TcpInfo> {
    if bytes.len() < TCP_INFO_MIN_LEN {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("TCP_INFO returned {} bytes, expected at least {TCP_INFO_MIN_LEN}", bytes.len())));
    }
    macro_rules! f32_ {
        ($field:ident) => {
            u32_at(bytes, offset_of!(libc::tcp_info, $field))
        };
    }
    macro_rules! f64_ {
        ($field:ident) => {
            u64_at(bytes, offset_of!(libc::tcp_info, $field))
        };
    }
    Ok(TcpInfo {
        state: u8_at(bytes, offset_of!(libc::tcp_info, tcpi_state)),
        ca_state: u8_at(bytes, offset_of!(libc::tcp_info, tcpi_ca_state)),
        retransmits: u8_at(bytes, offset_of!(libc::tcp_info, tcpi_retransmits)),
        cwnd: f32_!(tcpi_snd_cwnd),
        ssthresh: f32_!(tcpi_snd_ssthresh),
        rtt_us: f32_!(tcpi_rtt),
        rttvar_us: f32_!(tcpi_rttvar),
        min_rtt_us: f32_!(tcpi_min_rtt),
        total_retrans: f32_!(tcpi_total_retrans),
        lost: f32_!(tcpi_lost),
        unacked: f32_!(tcpi_unacked),
        snd_mss: f32_!(tcpi_snd_mss),
        rcv_mss: f32_!(tcpi_rcv_mss),
        delivery_rate: f64_!(tcpi_delivery_rate),
        // The byte after tcpi_snd_wscale/rcv_wscale holds tcpi_delivery_rate_app_limited in
        // its lowest bit (glibc's struct leaves it unnamed).
        delivery_rate_app_limited: u8_at(bytes, offset_of!(libc::tcp_info, tcpi_snd_rcv_wscale) + 1) & 1 == 1,
        pacing_rate: f64_!(tcpi_pacing_rate),
        bytes_acked: f64_!(tcpi_bytes_acked),
        bytes_received: f64_!(tcpi_bytes_received),
        bytes_sent: f64_!(tcpi_bytes_sent),
        bytes_retrans: f64_!(tcpi_bytes_retrans),
        notsent_bytes: f32_!(tcpi_notsent_bytes),
        rto_us: f32_!(tcpi_rto),
        ato_us: f32_!(tcpi_ato),
        last_data_sent_ms: f32_!(tcpi_last_data_sent),
        last_data_recv_ms: f32_!(tcpi_last_data_recv),
        last_ack_recv_ms: f32_!(tcpi_last_ack_recv),
        max_pacing_rate: f64_!(tcpi_max_pacing_rate),
        segs_out: f32_!(tcpi_segs_out),
        segs_in: f32_!(tcpi_segs_in),
        data_segs_out: f32_!(tcpi_data_segs_out),
        data_segs_in: f32_!(tcpi_data_segs_in),
        dsack_dups: f32_!(tcpi_dsack_dups),
        info_len: bytes.len(),
    })
}

/// `TCP_INFO` of a TCP socket (on an MPTCP socket: of its first subflow).
pub fn tcp_info(fd: BorrowedFd<'_>) -> io::Result<TcpInfo> {
    let mut buf = [0u8; size_of::<libc::tcp_info>()];
    let len = getsockopt_into(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut buf)?;
    parse_tcp_info(&buf[..len])
}

/// Whether a socket runs as plain TCP although opened (or accepted) as MPTCP: its peer does not
/// speak MPTCP. A plain TCP socket, or a kernel that cannot say, counts as fallen back.
pub fn mptcp_fell_back(fd: BorrowedFd<'_>) -> bool {
    mptcp_info(fd).map(|i| i.fallback()).unwrap_or(true)
}

/// `MPTCP_INFO` of an MPTCP socket. Fails with `EOPNOTSUPP` on a plain TCP socket; on an MPTCP
/// socket that fell back to TCP, recent kernels answer with [`MptcpInfo::fallback`] set.
pub fn mptcp_info(fd: BorrowedFd<'_>) -> io::Result<MptcpInfo> {
    // struct mptcp_info is 48 bytes today; leave room for growth.
    let mut buf = [0u8; 128];
    let len = getsockopt_into(fd, SOL_MPTCP, MPTCP_INFO, &mut buf)?;
    let b = &buf[..len];
    // Everything up to mptcpi_rcv_nxt has existed since MPTCP_INFO was introduced (5.16).
    if b.len() < 40 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("MPTCP_INFO returned {} bytes, expected at least 40", b.len())));
    }
    Ok(MptcpInfo {
        subflows: u8_at(b, 0),
        add_addr_signal: u8_at(b, 1),
        add_addr_accepted: u8_at(b, 2),
        subflows_max: u8_at(b, 3),
        add_addr_signal_max: u8_at(b, 4),
        add_addr_accepted_max: u8_at(b, 5),
        flags: u32_at(b, 8),
        token: u32_at(b, 12),
        write_seq: u64_at(b, 16),
        snd_una: u64_at(b, 24),
        rcv_nxt: u64_at(b, 32),
        local_addr_used: u8_at(b, 40),
        local_addr_max: u8_at(b, 41),
        csum_enabled: u8_at(b, 42) != 0,
    })
}

/// One `SOL_MPTCP` call that returns `struct mptcp_subflow_data` + an array; returns the
/// element size the kernel used and the elements it copied. Grows the buffer when the
/// connection has more subflows than fit.
fn subflow_array(fd: BorrowedFd<'_>, name: libc::c_int, elem_len: usize) -> io::Result<(usize, Vec<Vec<u8>>)> {
    let mut room = FIRST_SUBFLOW_GUESS;
    loop {
        let mut buf = vec![0u8; SUBFLOW_DATA_LEN + room * elem_len];
        buf[0..4].copy_from_slice(&(SUBFLOW_DATA_LEN as u32).to_ne_bytes()); // size_subflow_data
        // num_subflows and size_kernel must be 0 on input; size_user = our element size.
        buf[12..16].copy_from_slice(&u32::try_from(elem_len).unwrap_or(u32::MAX).to_ne_bytes());
        let len = getsockopt_into(fd, SOL_MPTCP, name, &mut buf)?;
        if len < SUBFLOW_DATA_LEN {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("SOL_MPTCP option {name} returned {len} bytes, shorter than its header")));
        }
        let num = u32_at(&buf, 4) as usize;
        let size_user = u32_at(&buf, 12) as usize;
        if size_user == 0 || size_user > elem_len {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("SOL_MPTCP option {name}: element size {size_user}")));
        }
        let copied = ((len - SUBFLOW_DATA_LEN) / size_user).min(num);
        if copied < num && room < MAX_SUBFLOWS {
            room = num.min(MAX_SUBFLOWS);
            continue;
        }
        let elems = (0..copied).map(|i| buf[SUBFLOW_DATA_LEN + i * size_user..SUBFLOW_DATA_LEN + (i + 1) * size_user].to_vec()).collect();
        return Ok((size_user, elems));
    }
}

/// Decodes a `struct sockaddr_storage` (IPv4 or IPv6); anything else is `None`.
fn parse_sockaddr(b: &[u8]) -> Option<SocketAddr> {
    let family = libc::c_int::from(u16_at(b, 0));
    let port = u16::from_be_bytes([u8_at(b, 2), u8_at(b, 3)]);
    match family {
        libc::AF_INET => {
            let ip: [u8; 4] = b.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port)))
        }
        libc::AF_INET6 => {
            let ip: [u8; 16] = b.get(8..24)?.try_into().ok()?;
            Some(SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port, u32_at(b, 4), u32_at(b, 24))))
        }
        _ => None,
    }
}

/// `TCP_INFO` and addresses of every subflow of an MPTCP connection, in the kernel's order.
/// The two options are read one after the other; if a subflow appears or disappears in
/// between, addresses are left out (`None`) rather than attached to the wrong subflow.
pub fn mptcp_subflow_tcp_infos(fd: BorrowedFd<'_>) -> io::Result<Vec<SubflowTcpInfo>> {
    let (_, infos) = subflow_array(fd, MPTCP_TCPINFO, size_of::<libc::tcp_info>())?;
    let addrs = match subflow_array(fd, MPTCP_SUBFLOW_ADDRS, SUBFLOW_ADDRS_LEN) {
        Ok((SUBFLOW_ADDRS_LEN, addrs)) if addrs.len() == infos.len() => addrs,
        _ => Vec::new(),
    };
    infos
        .iter()
        .enumerate()
        .map(|(index, raw)| {
            let (local, remote) = match addrs.get(index) {
                Some(a) => (parse_sockaddr(&a[..128]), parse_sockaddr(&a[128..])),
                None => (None, None),
            };
            Ok(SubflowTcpInfo { index, local, remote, tcp: parse_tcp_info(raw)? })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    fn mptcp_enabled() -> bool {
        std::fs::read_to_string("/proc/sys/net/mptcp/enabled").map(|s| s.trim() == "1").unwrap_or(false)
    }

    /// A connected (client, server) pair over loopback, after moving `n` bytes client->server.
    fn pair(protocol: socket2::Protocol, n: usize) -> (std::net::TcpStream, std::net::TcpStream) {
        pair_of(protocol, protocol, n)
    }

    /// A loopback connection from a `client` socket to a `listener` socket, `n` bytes sent.
    fn pair_of(client: socket2::Protocol, listener: socket2::Protocol, n: usize) -> (std::net::TcpStream, std::net::TcpStream) {
        use socket2::{Domain, Socket, Type};
        let protocol = client;
        let l = Socket::new(Domain::IPV4, Type::STREAM, Some(listener)).unwrap();
        l.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
        l.listen(4).unwrap();
        let addr = l.local_addr().unwrap();
        let c = Socket::new(Domain::IPV4, Type::STREAM, Some(protocol)).unwrap();
        c.connect(&addr).unwrap();
        let (s, _) = l.accept().unwrap();
        let (mut c, mut s): (std::net::TcpStream, std::net::TcpStream) = (c.into(), s.into());
        let data = vec![7u8; n];
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; n];
            s.read_exact(&mut got).unwrap();
            s
        });
        c.write_all(&data).unwrap();
        let s = reader.join().unwrap();
        (c, s)
    }

    #[test]
    fn tcp_info_of_loopback_connection() {
        let (c, s) = pair(socket2::Protocol::TCP, 1_000_000);
        let ci = tcp_info(c.as_fd()).unwrap();
        let si = tcp_info(s.as_fd()).unwrap();
        assert_eq!(ci.state, 1, "ESTABLISHED");
        assert!(ci.info_len >= TCP_INFO_MIN_LEN);
        assert!(ci.cwnd >= 2, "{ci:?}");
        assert!(ci.rtt_us > 0 && ci.rtt_us < 1_000_000, "{ci:?}");
        assert!(ci.snd_mss > 0);
        // All data was read by the server, hence acknowledged.
        assert_eq!(ci.bytes_acked, 1_000_000 + 1, "bytes_acked counts the SYN: {ci:?}");
        assert_eq!(si.bytes_received, 1_000_000, "{si:?}");
        assert!(ci.delivery_rate > 0);
        // A plain TCP socket has no MPTCP options.
        assert!(mptcp_info(c.as_fd()).is_err());
    }

    #[test]
    fn short_tcp_info_is_rejected_and_missing_fields_are_zero() {
        assert!(parse_tcp_info(&[0u8; 10]).is_err());
        let mut b = vec![0u8; TCP_INFO_MIN_LEN];
        b[offset_of!(libc::tcp_info, tcpi_snd_cwnd)..][..4].copy_from_slice(&10u32.to_ne_bytes());
        let i = parse_tcp_info(&b).unwrap();
        assert_eq!(i.cwnd, 10);
        assert_eq!(i.delivery_rate, 0);
        assert_eq!(i.bytes_acked, 0);
    }

    #[test]
    fn sockaddr_parsing() {
        let mut b = [0u8; 128];
        b[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&443u16.to_be_bytes());
        b[4..8].copy_from_slice(&[10, 0, 0, 1]);
        assert_eq!(parse_sockaddr(&b), Some("10.0.0.1:443".parse().unwrap()));
        assert_eq!(parse_sockaddr(&[0u8; 128]), None);
        assert_eq!(parse_sockaddr(&[]), None);
    }

    #[test]
    fn mptcp_info_of_loopback_connection() {
        if !mptcp_enabled() {
            eprintln!("skipping: net.mptcp.enabled is not 1 in this namespace");
            return;
        }
        let (c, s) = pair(socket2::Protocol::MPTCP, 500_000);
        for sock in [&c, &s] {
            let info = mptcp_info(sock.as_fd()).unwrap();
            assert!(!info.fallback(), "both ends speak MPTCP: {info:?}");
            // Without `ip mptcp endpoint`s there is only the initial subflow.
            assert_eq!(info.subflows, 0, "{info:?}");
            let subs = mptcp_subflow_tcp_infos(sock.as_fd()).unwrap();
            assert_eq!(subs.len(), 1, "{subs:?}");
            assert_eq!(subs[0].index, 0);
            assert_eq!(subs[0].tcp.state, 1);
            assert!(subs[0].tcp.cwnd >= 2 && subs[0].tcp.rtt_us > 0, "{subs:?}");
            assert_eq!(subs[0].local, Some(sock.local_addr().unwrap()), "{subs:?}");
            assert_eq!(subs[0].remote, Some(sock.peer_addr().unwrap()), "{subs:?}");
        }
        let subs = mptcp_subflow_tcp_infos(c.as_fd()).unwrap();
        assert!(subs[0].tcp.bytes_acked >= 500_000, "{subs:?}");
        // TCP_INFO on the MPTCP socket itself describes the first subflow.
        assert!(tcp_info(c.as_fd()).unwrap().cwnd >= 2);
        assert!(!mptcp_fell_back(c.as_fd()) && !mptcp_fell_back(s.as_fd()));
    }

    #[test]
    fn a_plain_tcp_client_of_an_mptcp_listener_falls_back() {
        if !mptcp_enabled() {
            eprintln!("skipping: net.mptcp.enabled is not 1 in this namespace");
            return;
        }
        // What the server sees when an H1 or H2 client connects to its MPTCP listener.
        let (c, s) = pair_of(socket2::Protocol::TCP, socket2::Protocol::MPTCP, 10_000);
        assert!(mptcp_fell_back(s.as_fd()));
        assert!(mptcp_fell_back(c.as_fd()), "a plain TCP socket");
    }
}
