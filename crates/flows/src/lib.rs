//! Flow records from packet captures (docs/flows.md).
//!
//! One pass over a pcap or pcapng capture yields one [`FlowRecord`] per bidirectional TCP or UDP
//! flow (the client is the initiator: the sender of the first packet, or of the SYN): times,
//! packets, IP and payload bytes and retransmitted bytes per direction, TCP flags, and labels
//! read from the handshake: TLS SNI, ALPN offer and choice, version; QUIC version, SNI and ALPN
//! from the client's Initial (decrypted with RFC 9001's initial secrets); the first cleartext
//! HTTP/1.x request line. From those a `protocol`: h1, h2, h3, tls-other, quic-other,
//! tcp-other or udp-other.
//!
//! The core is I/O-free: [`Extractor`] takes byte buffers (any split, so a reader can stream a
//! file through a fixed buffer) and never panics on untrusted bytes; a damaged capture stops
//! with an [`Error`] naming the byte offset, and the flows read until then are still
//! available. [`extract_file`] is the thin reader over it; [`output`] writes Parquet or NDJSON.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod capture;
mod error;
mod fingerprint;
mod http;
mod inspect;
pub mod output;
mod packet;
mod quic;
mod record;
mod stream;
mod table;
mod tls;

use std::io::Read;
use std::path::Path;

use serde::Serialize;

pub use capture::{CaptureParser, Packet, Step};
pub use error::{Error, Result};
pub use packet::{link_supported, linktype, Transport};
pub use record::{FlowRecord, SCHEMA, SCHEMA_VERSION};

use packet::Skip;
use table::FlowTable;

/// Extraction options.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// A flow without packets for this long ends; its 5-tuple's next packet starts a new flow.
    pub idle_timeout_ns: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config { idle_timeout_ns: 120_000_000_000 }
    }
}

/// What one pass saw.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    /// Capture format: "pcap" or "pcapng".
    pub format: Option<&'static str>,
    /// Bytes of the capture read (up to the error, if any).
    pub bytes: u64,
    /// Packets read.
    pub packets: u64,
    /// Packets counted in a flow.
    pub flow_packets: u64,
    /// Packets not IPv4/IPv6.
    pub skipped_not_ip: u64,
    /// IP packets neither TCP nor UDP.
    pub skipped_other_protocol: u64,
    /// IP fragments.
    pub skipped_fragments: u64,
    /// Packets with a malformed or cut IP or transport header.
    pub skipped_malformed: u64,
    /// pcapng packets on interfaces of an unsupported link type.
    pub skipped_link_type: u64,
    /// Flows.
    pub flows: u64,
}

/// The result of a pass: the flows, and the error that stopped it early, if any (then `flows`
/// holds what was read before it, every open flow ended at its last packet).
#[derive(Debug)]
pub struct Extraction {
    /// Flow records ordered by first packet.
    pub flows: Vec<FlowRecord>,
    /// Counters.
    pub stats: Stats,
    /// Why the capture could not be read to its end.
    pub error: Option<Error>,
}

/// One pass over a capture fed in buffers.
pub struct Extractor {
    parser: CaptureParser,
    table: FlowTable,
    stats: Stats,
    /// Bytes the next item needs, counted from the start of the unconsumed input.
    needed: usize,
}

impl Extractor {
    /// A pass with these options.
    pub fn new(config: &Config) -> Self {
        Extractor { parser: CaptureParser::new(), table: FlowTable::new(config.idle_timeout_ns), stats: Stats::default(), needed: 0 }
    }

    /// Reads every complete item at the start of `buf`, which must begin with the first byte
    /// not consumed by earlier calls; returns the bytes consumed. The caller keeps the rest and
    /// calls again with more appended (see [`Extractor::needed`]).
    pub fn feed(&mut self, buf: &[u8]) -> Result<usize> {
        let mut pos = 0;
        loop {
            match self.parser.next(&buf[pos..])? {
                Step::Packet { consumed, packet } => {
                    pos += consumed;
                    self.packet(&packet);
                }
                Step::Skip { consumed, unsupported_packet } => {
                    pos += consumed;
                    if unsupported_packet {
                        self.stats.packets += 1;
                        self.stats.skipped_link_type += 1;
                    }
                }
                Step::NeedMore { needed } => {
                    self.needed = needed;
                    self.stats.bytes = self.parser.offset();
                    return Ok(pos);
                }
            }
        }
    }

    /// Bytes the unconsumed input must hold for the next item to be read.
    pub fn needed(&self) -> usize {
        self.needed
    }

    fn packet(&mut self, packet: &Packet<'_>) {
        self.stats.packets += 1;
        match packet::decode(packet.linktype, packet.data) {
            Ok(p) => {
                self.stats.flow_packets += 1;
                self.table.packet(packet.ts_ns, &p);
            }
            Err(Skip::NotIp) => self.stats.skipped_not_ip += 1,
            Err(Skip::OtherProtocol) => self.stats.skipped_other_protocol += 1,
            Err(Skip::Fragment) => self.stats.skipped_fragments += 1,
            Err(Skip::Malformed) => self.stats.skipped_malformed += 1,
        }
    }

    /// Ends the pass at the end of the input, with `rest` bytes left unconsumed: they are a
    /// truncated item unless there are none.
    pub fn finish(self, rest: usize) -> Extraction {
        let error = self.parser.end_error(rest, self.needed);
        self.end(error)
    }

    /// Ends the pass after `error` (from [`Extractor::feed`] or from reading the input).
    pub fn fail(self, error: Error) -> Extraction {
        self.end(Some(error))
    }

    fn end(mut self, error: Option<Error>) -> Extraction {
        self.stats.format = self.parser.format_name();
        self.stats.bytes = self.parser.offset();
        let flows = self.table.finish();
        self.stats.flows = flows.len() as u64;
        Extraction { flows, stats: self.stats, error }
    }
}

/// One pass over a capture held in memory.
pub fn extract(bytes: &[u8], config: &Config) -> Extraction {
    let mut x = Extractor::new(config);
    match x.feed(bytes) {
        Ok(consumed) => x.finish(bytes.len() - consumed),
        Err(e) => x.fail(e),
    }
}

/// Buffer the file reader starts with; it grows only for a record larger than half of it.
/// Small enough to stay in the core's L2 cache between the kernel's copy and the parse
/// (measured: 4 MiB buffers cost about 10% more time).
const READ_CHUNK: usize = 256 << 10;

/// One pass over a capture file, read through a bounded buffer. An error opening the file is
/// returned as such; errors after that are in the [`Extraction`] with the flows read so far.
pub fn extract_file(path: &Path, config: &Config) -> Result<Extraction> {
    let mut file =
        std::fs::File::open(path).map_err(|e| Error::Io { context: format!("cannot open {}", path.display()), error: e })?;
    Ok(extract_reader(&mut file, config, &path.display().to_string()))
}

/// One pass over a capture from any reader (`name` is used in I/O error messages).
pub fn extract_reader(input: &mut dyn Read, config: &Config, name: &str) -> Extraction {
    let mut x = Extractor::new(config);
    let mut buf = vec![0u8; READ_CHUNK];
    let (mut start, mut end) = (0usize, 0usize);
    loop {
        // Make room: move the unconsumed tail to the front, and grow for a large record.
        if start > 0 && (end == buf.len() || start > buf.len() / 2) {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        let want = x.needed().max(READ_CHUNK / 2);
        if buf.len() - start < want {
            buf.resize(start + want, 0);
        }
        let n = loop {
            match input.read(&mut buf[end..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return x.fail(Error::Io { context: format!("cannot read {name}"), error: e }),
            }
        };
        if n == 0 {
            return x.finish(end - start);
        }
        end += n;
        match x.feed(&buf[start..end]) {
            Ok(consumed) => start += consumed,
            Err(e) => return x.fail(e),
        }
    }
}
