//! From a captured frame to what the flow table needs: addresses, ports, IP and payload
//! lengths, TCP sequence number and flags. Headers are decoded by `etherparse` in its lax mode,
//! so frames cut at the snap length still count with the lengths their IP headers declare.

use etherparse::{LaxIpSlice, TcpSlice, UdpSlice};

/// Link types with a decoder (LINKTYPE_* numbers).
pub mod linktype {
    /// BSD loopback: a 4-byte address family in host byte order.
    pub const NULL: i32 = 0;
    /// Ethernet II (with 802.1Q tags).
    pub const ETHERNET: i32 = 1;
    /// Raw IP on some BSDs (DLT_RAW's historical numbers).
    pub const RAW_BSD: i32 = 12;
    /// Raw IP on OpenBSD.
    pub const RAW_OPENBSD: i32 = 14;
    /// Raw IP (v4 or v6 by the version nibble): protolab's emulator writes this.
    pub const RAW: i32 = 101;
    /// OpenBSD loopback: a 4-byte address family in network byte order.
    pub const LOOP: i32 = 108;
    /// Linux cooked capture v1 (`tcpdump -i any` before libpcap 1.10).
    pub const LINUX_SLL: i32 = 113;
    /// Raw IPv4.
    pub const IPV4: i32 = 228;
    /// Raw IPv6.
    pub const IPV6: i32 = 229;
    /// Linux cooked capture v2.
    pub const LINUX_SLL2: i32 = 276;
}

/// Whether frames of this link type can be decoded.
pub fn link_supported(lt: i32) -> bool {
    use linktype::*;
    matches!(lt, NULL | ETHERNET | RAW_BSD | RAW_OPENBSD | RAW | LOOP | LINUX_SLL | IPV4 | IPV6 | LINUX_SLL2)
}

/// Transport protocol of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// TCP (IP protocol 6).
    Tcp,
    /// UDP (IP protocol 17).
    Udp,
}

impl Transport {
    /// "tcp" or "udp".
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
        }
    }
}

/// A decoded TCP or UDP packet. Addresses are 16 bytes; IPv4 uses the first 4 (with `v6` false).
#[derive(Debug, Clone, Copy)]
pub struct Decoded<'a> {
    pub v6: bool,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub sport: u16,
    pub dport: u16,
    pub transport: Transport,
    /// IP bytes as the IP header declares them (header included).
    pub ip_bytes: u32,
    /// Transport payload bytes as the headers declare them.
    pub payload_len: u32,
    /// The captured payload (shorter than `payload_len` in a cut frame).
    pub payload: &'a [u8],
    /// TCP sequence number (0 for UDP).
    pub seq: u32,
    /// TCP flags byte: FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10, URG 0x20, ECE 0x40, CWR 0x80.
    pub flags: u8,
    /// IPv4 TTL or IPv6 hop limit as captured.
    pub ttl: u8,
    /// TCP receive window as in the header (unscaled; 0 for UDP).
    pub window: u16,
    /// TCP options as in the header (empty for UDP).
    pub tcp_options: &'a [u8],
}

/// TCP flag bits as in the header's 14th byte.
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const ACK: u8 = 0x10;
}

/// Why a frame is not part of any flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Not IPv4 or IPv6 (ARP, LLDP, ...), or the link header is cut.
    NotIp,
    /// IP, but neither TCP nor UDP (ICMP, ...).
    OtherProtocol,
    /// An IP fragment: its transport header is in another frame, or spans several.
    Fragment,
    /// The IP or transport header is malformed or cut by the snap length.
    Malformed,
}

/// EtherTypes of IPv4 and IPv6.
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;

/// The IP packet inside a frame. Link headers are fixed-size with the EtherType (or address
/// family) at a fixed place, so they are read here; etherparse reads everything from IP on
/// (its whole-frame slicer builds a large struct per frame, which costs more than the rest).
fn ip_of(linktype: i32, data: &[u8]) -> Result<&[u8], Skip> {
    let be16 = |at: usize| -> Result<u16, Skip> {
        Ok(u16::from_be_bytes([*data.get(at).ok_or(Skip::NotIp)?, *data.get(at + 1).ok_or(Skip::NotIp)?]))
    };
    match linktype {
        linktype::ETHERNET => {
            let mut at = 12;
            let mut ethertype = be16(at)?;
            // 802.1Q / 802.1ad tags (up to three).
            for _ in 0..3 {
                if !matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) {
                    break;
                }
                at += 4;
                ethertype = be16(at)?;
            }
            by_ethertype(ethertype, &data[at + 2..])
        }
        linktype::RAW | linktype::RAW_BSD | linktype::RAW_OPENBSD | linktype::IPV4 | linktype::IPV6 => Ok(data),
        linktype::LINUX_SLL => by_ethertype(be16(14)?, &data[16..]),
        linktype::LINUX_SLL2 => {
            let ethertype = be16(0)?;
            by_ethertype(ethertype, data.get(20..).ok_or(Skip::NotIp)?)
        }
        linktype::NULL | linktype::LOOP => {
            let fam: [u8; 4] = data.get(..4).ok_or(Skip::NotIp)?.try_into().map_err(|_| Skip::NotIp)?;
            // AF_INET is 2 everywhere; AF_INET6 is 24, 28 or 30 depending on the BSD. The byte
            // order is the capturing host's, so both are tried.
            let family = match u32::from_le_bytes(fam) {
                f @ (2 | 24 | 28 | 30) => f,
                _ => u32::from_be_bytes(fam),
            };
            match family {
                2 | 24 | 28 | 30 => Ok(&data[4..]),
                _ => Err(Skip::NotIp),
            }
        }
        _ => Err(Skip::NotIp),
    }
}

fn by_ethertype(ethertype: u16, rest: &[u8]) -> Result<&[u8], Skip> {
    match ethertype {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Ok(rest),
        _ => Err(Skip::NotIp),
    }
}

/// Decodes one frame of the given link type.
pub fn decode(linktype: i32, data: &[u8]) -> Result<Decoded<'_>, Skip> {
    let ip = ip_of(linktype, data)?;
    let (sliced, _) = LaxIpSlice::from_slice(ip).map_err(|_| Skip::Malformed)?;
    let (v6, src, dst, ip_bytes, header_bytes, payload, ttl) = match &sliced {
        LaxIpSlice::Ipv4(ip) => {
            let h = ip.header();
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src[..4].copy_from_slice(&h.source());
            dst[..4].copy_from_slice(&h.destination());
            let hdr = span(h.slice(), ip.payload().payload);
            // A sender-side capture with segmentation offload may show total length 0.
            let total = match u32::from(h.total_len()) {
                0 => (hdr + ip.payload().payload.len()) as u32,
                t => t,
            };
            (false, src, dst, total, hdr as u32, ip.payload(), h.ttl())
        }
        LaxIpSlice::Ipv6(ip) => {
            let h = ip.header();
            let hdr = span(h.slice(), ip.payload().payload);
            let total = match u32::from(h.payload_length()) {
                0 => (hdr + ip.payload().payload.len()) as u32,
                p => 40 + p,
            };
            (true, h.source(), h.destination(), total, hdr as u32, ip.payload(), h.hop_limit())
        }
    };
    if payload.fragmented {
        return Err(Skip::Fragment);
    }
    let after_ip = ip_bytes.saturating_sub(header_bytes);
    match payload.ip_number.0 {
        6 => {
            let tcp = TcpSlice::from_slice(payload.payload).map_err(|_| Skip::Malformed)?;
            let hdr = tcp.header_slice();
            Ok(Decoded {
                v6,
                src,
                dst,
                sport: tcp.source_port(),
                dport: tcp.destination_port(),
                transport: Transport::Tcp,
                ip_bytes,
                payload_len: after_ip.saturating_sub(hdr.len() as u32),
                payload: tcp.payload(),
                seq: tcp.sequence_number(),
                flags: hdr[13],
                ttl,
                window: tcp.window_size(),
                // The header past its fixed 20 bytes (the slice is at least that long).
                tcp_options: hdr.get(20..).unwrap_or(&[]),
            })
        }
        17 => {
            let udp = UdpSlice::from_slice_lax(payload.payload).map_err(|_| Skip::Malformed)?;
            let declared = match u32::from(udp.length()) {
                l if l >= 8 => l - 8,
                _ => after_ip.saturating_sub(8),
            };
            Ok(Decoded {
                v6,
                src,
                dst,
                sport: udp.source_port(),
                dport: udp.destination_port(),
                transport: Transport::Udp,
                ip_bytes,
                payload_len: declared,
                payload: udp.payload(),
                seq: 0,
                flags: 0,
                ttl,
                window: 0,
                tcp_options: &[],
            })
        }
        _ => Err(Skip::OtherProtocol),
    }
}

/// Bytes from the start of `header` to the start of `payload` (both slices of one frame): the
/// IP header with its options and extension headers.
fn span(header: &[u8], payload: &[u8]) -> usize {
    (payload.as_ptr() as usize).saturating_sub(header.as_ptr() as usize)
}
