//! The raw bulk protocol on TCP (docs/bulk.md, "The raw TCP protocol"): `protolab-net bulk
//! --protocol tcp` moves bytes with no HTTP, TLS or framing overhead, like iperf3 but with a
//! 32-byte request header and server-side pacing.
//!
//! Request (client to server, 32 bytes, integers big-endian):
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..4 | magic `PLRB` |
//! | 4 | version, 1 |
//! | 5 | direction: 0 download (the server sends), 1 upload (the client sends) |
//! | 6..8 | flags, 0 |
//! | 8..16 | byte count; `u64::MAX` = until the client closes (download) or until EOF (upload) |
//! | 16..24 | download: the server's sending rate in bit/s, 0 = unpaced; upload: 0 |
//! | 24..32 | reserved, 0 |
//!
//! Reply head (server to client, 8 bytes): magic, version, status (0 ok, 1 bad magic, 2
//! unsupported version, 3 bad field), two zero bytes. Download: the head, then the bytes
//! (a window of the `/bytes` block), then FIN. Upload: after the count (or EOF), the head and
//! a 16-byte report: bytes received, then nanoseconds from the end of the request header to the
//! last byte; then FIN. A bad request gets the head with its status and the connection closes.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::SockRef;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::body::{Block, PatternStream};
use crate::limits::Limits;

/// Who sends, in a raw request and in a bulk transfer (a document type: `contract::bulk`).
pub use contract::bulk::Direction;

/// Default port of the raw protocol: clear of iperf3's 5201 and of the second iperf3 server
/// the emulator validation runs on 5202 (src/protolab/validate/emulator.py), so all can share a host.
pub const DEFAULT_PORT: u16 = 5300;
/// `PLRB`.
pub const MAGIC: [u8; 4] = *b"PLRB";
/// Protocol version.
pub const VERSION: u8 = 1;
/// Request header length.
pub const REQUEST_LEN: usize = 32;
/// Reply head length.
pub const REPLY_LEN: usize = 8;
/// Upload report length (after the reply head).
pub const REPORT_LEN: usize = 16;
/// The byte count meaning "until closed".
pub const UNTIL_CLOSED: u64 = u64::MAX;

/// Reply status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawStatus {
    /// Accepted.
    Ok = 0,
    /// The first four bytes are not `PLRB`.
    BadMagic = 1,
    /// A version this server does not speak.
    BadVersion = 2,
    /// A field out of range (direction, flags, rate, reserved bytes).
    BadField = 3,
}

impl RawStatus {
    fn from_byte(b: u8) -> Option<RawStatus> {
        [RawStatus::Ok, RawStatus::BadMagic, RawStatus::BadVersion, RawStatus::BadField].into_iter().find(|s| *s as u8 == b)
    }

    /// What it means, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            RawStatus::Ok => "ok",
            RawStatus::BadMagic => "bad magic (not the protolab raw protocol)",
            RawStatus::BadVersion => "unsupported protocol version",
            RawStatus::BadField => "a request field is out of range",
        }
    }
}

/// A raw request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRequest {
    /// Who sends.
    pub direction: Direction,
    /// Bytes to move; `None` = until closed.
    pub bytes: Option<u64>,
    /// Download only: the server paces at this many bit/s.
    pub rate_bps: Option<u64>,
}

impl RawRequest {
    /// The 32-byte header.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[5] = match self.direction {
            Direction::Download => 0,
            Direction::Upload => 1,
        };
        b[8..16].copy_from_slice(&self.bytes.unwrap_or(UNTIL_CLOSED).to_be_bytes());
        b[16..24].copy_from_slice(&self.rate_bps.unwrap_or(0).to_be_bytes());
        b
    }

    /// Parses a header; the error is the status to answer with.
    pub fn decode(b: &[u8; REQUEST_LEN]) -> Result<RawRequest, RawStatus> {
        if b[0..4] != MAGIC {
            return Err(RawStatus::BadMagic);
        }
        if b[4] != VERSION {
            return Err(RawStatus::BadVersion);
        }
        let direction = match b[5] {
            0 => Direction::Download,
            1 => Direction::Upload,
            _ => return Err(RawStatus::BadField),
        };
        if b[6..8] != [0, 0] || b[24..32] != [0; 8] {
            return Err(RawStatus::BadField);
        }
        let word = |r: std::ops::Range<usize>| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[r]);
            u64::from_be_bytes(w)
        };
        let bytes = Some(word(8..16)).filter(|&n| n != UNTIL_CLOSED);
        let rate_bps = match (word(16..24), direction) {
            (0, _) => None,
            (_, Direction::Upload) => return Err(RawStatus::BadField),
            (r, Direction::Download) => Some(crate::pace::check_rate(r).map_err(|_| RawStatus::BadField)?),
        };
        Ok(RawRequest { direction, bytes, rate_bps })
    }
}

/// The reply head for `status`.
pub fn reply_head(status: RawStatus) -> [u8; REPLY_LEN] {
    let mut b = [0u8; REPLY_LEN];
    b[0..4].copy_from_slice(&MAGIC);
    b[4] = VERSION;
    b[5] = status as u8;
    b
}

/// Checks a reply head: `Ok` or why not.
pub fn check_reply_head(b: &[u8; REPLY_LEN]) -> Result<(), String> {
    if b[0..4] != MAGIC || b[4] != VERSION {
        return Err(format!("not a protolab raw reply (first bytes {:02x?})", &b[..5]));
    }
    match RawStatus::from_byte(b[5]) {
        Some(RawStatus::Ok) => Ok(()),
        Some(s) => Err(format!("the server refused the request: {}", s.describe())),
        None => Err(format!("unknown reply status {}", b[5])),
    }
}

/// What the server says it received in an upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadReport {
    /// Bytes received.
    pub bytes: u64,
    /// From the end of the request header to the last byte, ns.
    pub duration_ns: u64,
}

impl UploadReport {
    /// The 16-byte report.
    pub fn encode(&self) -> [u8; REPORT_LEN] {
        let mut b = [0u8; REPORT_LEN];
        b[0..8].copy_from_slice(&self.bytes.to_be_bytes());
        b[8..16].copy_from_slice(&self.duration_ns.to_be_bytes());
        b
    }

    /// Parses a report (every 16 bytes are a valid report).
    pub fn decode(b: &[u8; REPORT_LEN]) -> UploadReport {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[0..8]);
        let bytes = u64::from_be_bytes(w);
        w.copy_from_slice(&b[8..16]);
        UploadReport { bytes, duration_ns: u64::from_be_bytes(w) }
    }
}

/// What the raw listeners of one server share.
#[derive(Debug, Clone)]
pub struct RawConfig {
    /// Time for the request header to arrive.
    pub handshake_timeout: Duration,
    /// A read or write that makes no progress for this long ends the connection.
    pub idle_timeout: Duration,
    /// Open connections (shared with the HTTP listeners); none free = close at once.
    pub connections: Arc<Semaphore>,
    /// Set again on each accepted socket (the listener's is inherited already).
    pub tcp_congestion: Option<String>,
    /// What downloads send.
    pub block: Block,
    /// Per-connection samples, as the HTTP listeners take them.
    pub instrument: crate::instrument::InstrumentOptions,
}

impl RawConfig {
    /// The configuration of a server with these limits.
    pub fn new(limits: &Limits, connections: Arc<Semaphore>, tcp_congestion: Option<String>, block: Block) -> RawConfig {
        RawConfig {
            handshake_timeout: limits.handshake_timeout,
            idle_timeout: limits.idle_timeout,
            connections,
            tcp_congestion,
            block,
            instrument: crate::instrument::InstrumentOptions::default(),
        }
    }
}

/// Accepts raw connections on `listener` until the task is dropped (which aborts every
/// connection). Per-connection errors never end it.
pub async fn serve_raw(listener: TcpListener, config: RawConfig) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let (stream, peer) = crate::transport::accept_retrying(&listener, "raw accept").await;
        let Ok(permit) = config.connections.clone().try_acquire_owned() else { continue };
        let _ = stream.set_nodelay(true);
        if let Some(cc) = &config.tcp_congestion {
            let _ = SockRef::from(&stream).set_tcp_congestion(cc.as_bytes());
        }
        // Named as the client names it (protolab-net bulk --protocol tcp), so the files pair up.
        let conn_id = crate::instrument::connection_id("tcp", Some(peer), stream.local_addr().ok());
        let sampler = config.instrument.tcp_sampler(&stream, &conn_id, crate::instrument::Role::Server, false).unwrap_or_else(|e| {
            eprintln!("protolab-net serve: samples of {conn_id}: {e}");
            None
        });
        let config = config.clone();
        connections.spawn(async move {
            let _permit = permit;
            // Errors (peer gone, idle, bad request) end this connection only.
            let _ = serve_connection(stream, &config).await;
            if let Some(s) = sampler {
                let _ = s.stop().await;
            }
        });
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what}: timed out"))
}

/// An I/O step bounded by `limit`.
async fn within<T>(limit: Duration, what: &str, f: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
    tokio::time::timeout(limit, f).await.map_err(|_| timed_out(what))?
}

async fn serve_connection(mut stream: TcpStream, config: &RawConfig) -> io::Result<()> {
    let mut header = [0u8; REQUEST_LEN];
    within(config.handshake_timeout, "request header", stream.read_exact(&mut header)).await?;
    let request = match RawRequest::decode(&header) {
        Ok(r) => r,
        Err(status) => {
            within(config.idle_timeout, "reply", stream.write_all(&reply_head(status))).await?;
            return stream.shutdown().await;
        }
    };
    match request.direction {
        Direction::Download => {
            within(config.idle_timeout, "reply", stream.write_all(&reply_head(RawStatus::Ok))).await?;
            let mut source = PatternStream::new(&config.block, 0, request.bytes.unwrap_or(UNTIL_CLOSED));
            if let Some(rate) = request.rate_bps {
                source = source.paced(rate);
            }
            while let Some(chunk) = source.next_chunk().await {
                // Until closed: this fails once the client has closed, which ends the transfer.
                within(config.idle_timeout, "send", stream.write_all(&chunk)).await?;
            }
            stream.shutdown().await
        }
        Direction::Upload => {
            let start = Instant::now();
            let mut last = start;
            let mut received: u64 = 0;
            let limit = request.bytes.unwrap_or(UNTIL_CLOSED);
            let mut buf = vec![0u8; 256 * 1024];
            while received < limit {
                // Never read past the count: bytes beyond it are not this transfer's.
                let want = usize::try_from(limit - received).unwrap_or(usize::MAX).min(buf.len());
                let n = within(config.idle_timeout, "receive", stream.read(&mut buf[..want])).await?;
                if n == 0 {
                    break;
                }
                received += n as u64;
                last = Instant::now();
            }
            let report = UploadReport { bytes: received, duration_ns: u64::try_from((last - start).as_nanos()).unwrap_or(u64::MAX) };
            let mut reply = [0u8; REPLY_LEN + REPORT_LEN];
            reply[..REPLY_LEN].copy_from_slice(&reply_head(RawStatus::Ok));
            reply[REPLY_LEN..].copy_from_slice(&report.encode());
            within(config.idle_timeout, "report", stream.write_all(&reply)).await?;
            stream.shutdown().await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        for r in [
            RawRequest { direction: Direction::Download, bytes: Some(12345), rate_bps: Some(2_000_000) },
            RawRequest { direction: Direction::Download, bytes: None, rate_bps: None },
            RawRequest { direction: Direction::Upload, bytes: Some(0), rate_bps: None },
            RawRequest { direction: Direction::Upload, bytes: None, rate_bps: None },
        ] {
            let b = r.encode();
            assert_eq!(&b[0..5], b"PLRB\x01");
            assert_eq!(RawRequest::decode(&b), Ok(r));
        }
        let b = RawRequest { direction: Direction::Download, bytes: Some(0x0102), rate_bps: Some(0x0a0b0c) }.encode();
        assert_eq!(&b[8..24], &[0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0x0a, 0x0b, 0x0c]);
    }

    #[test]
    fn bad_requests_get_a_status() {
        let good = RawRequest { direction: Direction::Download, bytes: Some(10), rate_bps: None }.encode();
        let with = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            RawRequest::decode(&b)
        };
        assert_eq!(with(0, b'X'), Err(RawStatus::BadMagic));
        assert_eq!(with(4, 2), Err(RawStatus::BadVersion));
        assert_eq!(with(5, 2), Err(RawStatus::BadField));
        assert_eq!(with(7, 1), Err(RawStatus::BadField));
        assert_eq!(with(31, 1), Err(RawStatus::BadField));
        // A rate for an upload, and rates out of range.
        let mut up = RawRequest { direction: Direction::Upload, bytes: Some(10), rate_bps: None }.encode();
        up[23] = 1;
        assert_eq!(RawRequest::decode(&up), Err(RawStatus::BadField));
        assert_eq!(with(23, 1), Err(RawStatus::BadField)); // 1 bit/s
        assert_eq!(with(16, 0xff), Err(RawStatus::BadField));
    }

    #[test]
    fn replies_and_reports() {
        assert_eq!(check_reply_head(&reply_head(RawStatus::Ok)), Ok(()));
        let e = check_reply_head(&reply_head(RawStatus::BadField)).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        assert!(check_reply_head(b"HTTP/1.1").unwrap_err().contains("not a protolab raw reply"));
        let mut h = reply_head(RawStatus::Ok);
        h[5] = 200;
        assert!(check_reply_head(&h).unwrap_err().contains("200"));
        let r = UploadReport { bytes: 1 << 40, duration_ns: 123_456_789 };
        assert_eq!(UploadReport::decode(&r.encode()), r);
    }
}
