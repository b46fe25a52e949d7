//! Handshake inspection of a flow's first bytes: TLS hellos and cleartext HTTP request lines
//! on TCP, QUIC Initials on UDP. An inspector lives only until the handshake is read (or
//! cannot be); after that a flow costs nothing beyond its counters.

use crate::http;
use crate::quic::{self, QuicInspector};
use crate::record::Labels;
use crate::stream::{StreamBuf, LIMIT};
use crate::tls::{self, Parse};

/// Reads attempted per direction before giving up (bounds the work a trickle of one-byte
/// segments can cause: every attempt re-reads the kept prefix).
const MAX_ATTEMPTS: u16 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing read yet.
    Sniff,
    /// A TLS record started the stream.
    Tls,
    /// A request line may be starting.
    Http,
    /// Read, or not readable.
    Done,
}

struct Direction {
    /// Sequence number of the stream's first byte: after the SYN, else the first payload
    /// segment's (a capture that missed the handshake).
    start: Option<u32>,
    buf: StreamBuf,
    state: State,
    attempts: u16,
}

impl Direction {
    fn new(start: Option<u32>) -> Self {
        Direction { start, buf: StreamBuf::default(), state: State::Sniff, attempts: 0 }
    }
}

/// Inspection state of one TCP flow: client -> server (0) and server -> client (1).
pub struct TcpInspector {
    dirs: [Direction; 2],
}

impl TcpInspector {
    /// Starts inspection with each direction's first payload sequence number, where a SYN
    /// showed it.
    pub fn new(starts: [Option<u32>; 2]) -> Self {
        TcpInspector { dirs: [Direction::new(starts[0]), Direction::new(starts[1])] }
    }

    /// Takes a payload segment of direction `dir` (0 = client -> server); returns true when
    /// inspection is over for both directions.
    pub fn segment(&mut self, dir: usize, seq: u32, payload: &[u8], labels: &mut Labels) -> bool {
        let d = &mut self.dirs[dir];
        if d.state != State::Done && !payload.is_empty() {
            // Offsets relative to the stream start, with wrap-around.
            let start = *d.start.get_or_insert(seq);
            let rel = seq.wrapping_sub(start) as i32;
            let (offset, bytes) = if rel >= 0 {
                (rel as u64, payload)
            } else {
                let skip = rel.unsigned_abs() as usize;
                (0, payload.get(skip..).unwrap_or(&[]))
            };
            if offset == 0 && d.buf.is_empty() && !bytes.is_empty() {
                // The usual case: the first segment holds the whole hello or request line. It
                // is read in place, and copied only if more is needed.
                d.attempts += 1;
                if !read(&mut d.state, dir, bytes, false, labels) {
                    d.buf.insert(0, bytes);
                }
            } else if offset < LIMIT as u64 && d.buf.insert(offset, bytes) {
                d.attempts += 1;
                let (data, full) = (d.buf.contiguous(), d.buf.full());
                if read(&mut d.state, dir, data, full, labels) || d.attempts >= MAX_ATTEMPTS {
                    d.state = State::Done;
                }
            }
            if d.state == State::Done {
                d.buf = StreamBuf::default();
            }
        }
        // The server side only matters for TLS (its ServerHello).
        if self.dirs[0].state == State::Done && labels.client_hello.is_none() {
            self.dirs[1].state = State::Done;
        }
        self.dirs.iter().all(|d| d.state == State::Done)
    }
}

/// Reads the in-order start `data` of direction `dir`; returns whether the direction is done
/// (read, or not readable), after which `state` is `Done`.
fn read(state: &mut State, dir: usize, data: &[u8], full: bool, labels: &mut Labels) -> bool {
    if *state == State::Sniff {
        *state = match data.first() {
            Some(0x16) => State::Tls,
            Some(b'A'..=b'Z') if dir == 0 => State::Http,
            _ => State::Done,
        };
    }
    let done = match *state {
        State::Tls => match tls::first_handshake_message(data) {
            Parse::Done(msg) => {
                if dir == 0 {
                    labels.client_hello = tls::client_hello(&msg);
                } else {
                    labels.server_hello = tls::server_hello(&msg);
                }
                true
            }
            Parse::NotThis => true,
            Parse::NeedMore => full,
        },
        State::Http => match http::request(data, full) {
            Parse::Done(req) => {
                labels.request = Some(req);
                true
            }
            Parse::NotThis => true,
            Parse::NeedMore => full,
        },
        State::Sniff | State::Done => true,
    };
    if done {
        *state = State::Done;
    }
    done
}

/// Inspection state of a flow.
pub enum Inspector {
    /// A TCP flow.
    Tcp(Box<TcpInspector>),
    /// A UDP flow whose client started with a QUIC long header.
    Quic(Box<QuicInspector>),
}

/// Whether a UDP flow's first datagram from its client is worth QUIC inspection.
pub fn quic_candidate(datagram: &[u8]) -> bool {
    quic::long_header_version(datagram).is_some_and(quic::is_quic_version)
}
