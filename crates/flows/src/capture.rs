//! pcap and pcapng records over byte buffers (no I/O): the caller hands in the unread bytes, the
//! parser returns one packet, a skipped block, or a request for more bytes. Framing and field
//! decoding is `pcap-parser`'s; this module adds absolute byte offsets, timestamp units,
//! interfaces and the checks that tell a truncated file from a corrupt one.

use pcap_parser::pcap::{parse_pcap_frame, parse_pcap_frame_be, parse_pcap_frame_modified, parse_pcap_header};
use pcap_parser::pcapng::{parse_block_be, parse_block_le, parse_sectionheaderblock, Block};

use crate::error::{Error, Result};
use crate::packet::link_supported;

/// Largest legacy pcap record accepted regardless of the file's snap length: tcpdump's maximum.
const MAX_SNAPLEN: u32 = 262_144;
/// Largest legacy pcap record whatever the snap length says: no link's frames come near it.
const MAX_RECORD: u32 = 16 << 20;
/// Largest pcapng block: larger lengths are corruption, not packets (and would make a reader
/// buffer gigabytes).
const MAX_BLOCK: u32 = 64 << 20;

const PCAPNG_SHB: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// One captured packet.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// Capture time, Unix ns.
    pub ts_ns: i64,
    /// Link type of the packet's interface (LINKTYPE_*).
    pub linktype: i32,
    /// The captured bytes (possibly cut at the snap length).
    pub data: &'a [u8],
    /// Offset of the packet's record or block in the file.
    pub offset: u64,
}

/// What [`CaptureParser::next`] found at the start of the buffer.
#[derive(Debug)]
pub enum Step<'a> {
    /// A packet, `consumed` bytes long with its record header.
    Packet {
        /// Bytes to drop from the front of the buffer.
        consumed: usize,
        /// The packet.
        packet: Packet<'a>,
    },
    /// A header or a block without a packet (or a packet on an interface that is skipped).
    Skip {
        /// Bytes to drop from the front of the buffer.
        consumed: usize,
        /// Whether a packet was skipped because its link type is not decoded.
        unsupported_packet: bool,
    },
    /// The buffer ends inside the next header, record or block: at least `needed` bytes.
    NeedMore {
        /// Bytes the buffer must hold, counted from its start.
        needed: usize,
    },
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    linktype: i32,
    /// Timestamp units per second (if_tsresol).
    units: u64,
    /// Seconds added to every timestamp (if_tsoffset).
    offset_s: i64,
}

#[derive(Debug)]
enum Format {
    /// Nothing read yet.
    Start,
    Pcap { big_endian: bool, modified: bool, nanos: bool, linktype: i32, snaplen: u32 },
    PcapNg { big_endian: bool, interfaces: Vec<Interface> },
}

/// Reads pcap or pcapng records one at a time from buffers the caller refills.
#[derive(Debug)]
pub struct CaptureParser {
    format: Format,
    /// Absolute offset of the first byte of the next buffer.
    offset: u64,
    /// Last packet time, for Simple Packet Blocks (which carry none).
    last_ts: i64,
}

impl Default for CaptureParser {
    fn default() -> Self {
        Self::new()
    }
}

impl CaptureParser {
    /// A parser positioned at the start of a file.
    pub fn new() -> Self {
        CaptureParser { format: Format::Start, offset: 0, last_ts: 0 }
    }

    /// Absolute offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Which format the file has, once its header is read ("pcap", "pcapng").
    pub fn format_name(&self) -> Option<&'static str> {
        match self.format {
            Format::Start => None,
            Format::Pcap { .. } => Some("pcap"),
            Format::PcapNg { .. } => Some("pcapng"),
        }
    }

    /// Reads the next item from `buf`, which must start at [`CaptureParser::offset`]. After a
    /// `Packet` or `Skip`, the caller drops `consumed` bytes before the next call.
    pub fn next<'a>(&mut self, buf: &'a [u8]) -> Result<Step<'a>> {
        let step = match self.format {
            Format::Start => self.header(buf)?,
            Format::Pcap { big_endian, modified, nanos, linktype, snaplen } => {
                self.pcap_record(buf, big_endian, modified, nanos, linktype, snaplen)?
            }
            Format::PcapNg { .. } => self.pcapng_block(buf)?,
        };
        match &step {
            Step::Packet { consumed, packet } => {
                self.offset += *consumed as u64;
                self.last_ts = packet.ts_ns;
            }
            Step::Skip { consumed, .. } => self.offset += *consumed as u64,
            Step::NeedMore { .. } => {}
        }
        Ok(step)
    }

    /// The error for a file that ends while `NeedMore { needed }` was pending with `available`
    /// bytes left; `None` when nothing was left (a clean end).
    pub fn end_error(&self, available: usize, needed: usize) -> Option<Error> {
        if available == 0 && !matches!(self.format, Format::Start) {
            return None;
        }
        let what = match self.format {
            Format::Start => "capture file header",
            Format::Pcap { .. } => "packet record",
            Format::PcapNg { .. } => "pcapng block",
        };
        Some(Error::Truncated { offset: self.offset, what, needed: needed as u64, available: available as u64 })
    }

    fn header<'a>(&mut self, buf: &'a [u8]) -> Result<Step<'a>> {
        if buf.len() < 4 {
            return Ok(Step::NeedMore { needed: 24 });
        }
        if buf[..4] == PCAPNG_SHB {
            return self.pcapng_block(buf);
        }
        match parse_pcap_header(buf) {
            Ok((rest, h)) => {
                let big_endian = h.is_bigendian();
                let modified = h.is_modified_format();
                let linktype = h.network.0;
                if h.version_major != 2 {
                    return Err(Error::Corrupt { offset: 0, reason: format!("pcap version {}.{} (expected 2.x)", h.version_major, h.version_minor) });
                }
                if !link_supported(linktype) {
                    return Err(Error::UnsupportedLinkType { linktype });
                }
                self.format = Format::Pcap { big_endian, modified, nanos: h.is_nanosecond_precision(), linktype, snaplen: h.snaplen };
                Ok(Step::Skip { consumed: buf.len() - rest.len(), unsupported_packet: false })
            }
            Err(e) if e.is_incomplete() => Ok(Step::NeedMore { needed: 24 }),
            Err(_) => Err(Error::UnknownFormat { magic: hex_prefix(buf) }),
        }
    }

    fn pcap_record<'a>(&mut self, buf: &'a [u8], big_endian: bool, modified: bool, nanos: bool, linktype: i32, snaplen: u32) -> Result<Step<'a>> {
        let header_len = if modified { 24 } else { 16 };
        if buf.len() < header_len {
            return Ok(Step::NeedMore { needed: header_len });
        }
        let word = |at: usize| {
            let b = [buf[at], buf[at + 1], buf[at + 2], buf[at + 3]];
            if big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) }
        };
        let caplen = word(8);
        // A record longer than the snap length is corrupt, but snap lengths are only trusted up
        // to MAX_RECORD: a file that claims 4 GiB must not make a reader buffer 4 GiB.
        if caplen > snaplen.clamp(MAX_SNAPLEN, MAX_RECORD) {
            return Err(Error::Corrupt {
                offset: self.offset,
                reason: format!("packet record of {caplen} bytes, more than the snap length {snaplen}"),
            });
        }
        let needed = header_len + caplen as usize;
        if buf.len() < needed {
            return Ok(Step::NeedMore { needed });
        }
        let parsed = match (modified, big_endian) {
            (false, false) => parse_pcap_frame(buf),
            (false, true) => parse_pcap_frame_be(buf),
            (true, false) => parse_pcap_frame_modified(buf),
            (true, true) => {
                return Err(Error::Corrupt { offset: 0, reason: "big-endian \"modified\" pcap is not supported".into() });
            }
        };
        let (rest, frame) = parsed.map_err(|e| Error::Corrupt { offset: self.offset, reason: format!("packet record: {e:?}") })?;
        let frac_ns = if nanos { u64::from(frame.ts_usec) } else { u64::from(frame.ts_usec) * 1000 };
        if frac_ns >= 1_000_000_000 {
            return Err(Error::Corrupt { offset: self.offset, reason: format!("packet record: fractional timestamp {} out of range", frame.ts_usec) });
        }
        let ts_ns = i64::from(frame.ts_sec) * 1_000_000_000 + frac_ns as i64;
        Ok(Step::Packet { consumed: buf.len() - rest.len(), packet: Packet { ts_ns, linktype, data: frame.data, offset: self.offset } })
    }

    fn pcapng_block<'a>(&mut self, buf: &'a [u8]) -> Result<Step<'a>> {
        if buf.len() < 12 {
            return Ok(Step::NeedMore { needed: 12 });
        }
        let is_shb = buf[..4] == PCAPNG_SHB;
        // A section header states its own byte order (its magic at bytes 8..12); other blocks
        // follow the current section's.
        let big_endian = if is_shb {
            match [buf[8], buf[9], buf[10], buf[11]] {
                [0x1a, 0x2b, 0x3c, 0x4d] => true,
                [0x4d, 0x3c, 0x2b, 0x1a] => false,
                _ => return Err(self.corrupt_or_unknown("section header: bad byte-order magic", buf)),
            }
        } else {
            match &self.format {
                Format::PcapNg { big_endian, .. } => *big_endian,
                _ => return Err(Error::UnknownFormat { magic: hex_prefix(buf) }),
            }
        };
        let len_bytes = [buf[4], buf[5], buf[6], buf[7]];
        let block_len = if big_endian { u32::from_be_bytes(len_bytes) } else { u32::from_le_bytes(len_bytes) };
        if block_len < 12 || block_len % 4 != 0 || block_len > MAX_BLOCK {
            return Err(self.corrupt_or_unknown(&format!("block length {block_len}"), buf));
        }
        if buf.len() < block_len as usize {
            return Ok(Step::NeedMore { needed: block_len as usize });
        }
        let block_bytes = &buf[..block_len as usize];
        let parsed = if is_shb {
            parse_sectionheaderblock(block_bytes).map(|(r, b)| (r, Block::SectionHeader(b)))
        } else if big_endian {
            parse_block_be(block_bytes)
        } else {
            parse_block_le(block_bytes)
        };
        let block = match parsed {
            Ok((_, block)) => block,
            Err(e) => return Err(self.corrupt_or_unknown(&format!("pcapng block: {e:?}"), buf)),
        };
        let consumed = block_len as usize;
        let skip = Step::Skip { consumed, unsupported_packet: false };
        match block {
            Block::SectionHeader(shb) => {
                if shb.major_version != 1 {
                    return Err(self.corrupt_or_unknown(&format!("pcapng version {}.{}", shb.major_version, shb.minor_version), buf));
                }
                self.format = Format::PcapNg { big_endian, interfaces: Vec::new() };
                Ok(skip)
            }
            Block::InterfaceDescription(idb) => {
                let units = idb.ts_resolution().ok_or_else(|| Error::Corrupt {
                    offset: self.offset,
                    reason: format!("interface description: timestamp resolution {:#x}", idb.if_tsresol),
                })?;
                if let Format::PcapNg { interfaces, .. } = &mut self.format {
                    interfaces.push(Interface { linktype: idb.linktype.0, units, offset_s: idb.if_tsoffset });
                }
                Ok(skip)
            }
            Block::EnhancedPacket(epb) => {
                let iface = self.interface(epb.if_id)?;
                if !link_supported(iface.linktype) {
                    return Ok(Step::Skip { consumed, unsupported_packet: true });
                }
                let raw = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                let ts_ns = ts_to_ns(raw, iface.units, iface.offset_s);
                Ok(Step::Packet { consumed, packet: Packet { ts_ns, linktype: iface.linktype, data: cut(epb.data, epb.caplen), offset: self.offset } })
            }
            Block::SimplePacket(spb) => {
                let iface = self.interface(0)?;
                if !link_supported(iface.linktype) {
                    return Ok(Step::Skip { consumed, unsupported_packet: true });
                }
                // Simple packet blocks carry no time: they take the previous packet's.
                Ok(Step::Packet { consumed, packet: Packet { ts_ns: self.last_ts, linktype: iface.linktype, data: cut(spb.data, spb.origlen), offset: self.offset } })
            }
            _ => Ok(skip),
        }
    }

    fn interface(&self, id: u32) -> Result<Interface> {
        match &self.format {
            Format::PcapNg { interfaces, .. } => interfaces.get(id as usize).copied().ok_or_else(|| Error::Corrupt {
                offset: self.offset,
                reason: format!("packet block on interface {id}, but the section describes {} interfaces", interfaces.len()),
            }),
            _ => Err(Error::Corrupt { offset: self.offset, reason: "packet block before a section header".into() }),
        }
    }

    /// At byte 0 a malformed section header means "not a pcapng file"; later, corruption.
    fn corrupt_or_unknown(&self, reason: &str, buf: &[u8]) -> Error {
        if matches!(self.format, Format::Start) {
            Error::UnknownFormat { magic: hex_prefix(buf) }
        } else {
            Error::Corrupt { offset: self.offset, reason: reason.to_string() }
        }
    }
}

/// A pcapng timestamp in `units` per second, plus `offset_s` seconds, as Unix ns (saturating:
/// absurd values give absurd but finite times, never an overflow).
fn ts_to_ns(raw: u64, units: u64, offset_s: i64) -> i64 {
    let units = u128::from(units.max(1));
    let raw = u128::from(raw);
    let ns = (raw / units) * 1_000_000_000 + (raw % units) * 1_000_000_000 / units;
    let ns = i64::try_from(ns).unwrap_or(i64::MAX);
    ns.saturating_add(offset_s.saturating_mul(1_000_000_000))
}

/// A block's packet bytes without the padding: the first `len` bytes (all if fewer).
fn cut(data: &[u8], len: u32) -> &[u8] {
    &data[..data.len().min(len as usize)]
}

fn hex_prefix(buf: &[u8]) -> String {
    let n = buf.len().min(8);
    if n == 0 {
        return "nothing (empty file)".to_string();
    }
    buf[..n].iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_units() {
        assert_eq!(ts_to_ns(1_500_000, 1_000_000, 0), 1_500_000_000);
        assert_eq!(ts_to_ns(3, 2, 0), 1_500_000_000);
        assert_eq!(ts_to_ns(7, 1_000_000_000, 10), 10_000_000_007);
        assert_eq!(ts_to_ns(u64::MAX, 1, 0), i64::MAX);
    }
}
