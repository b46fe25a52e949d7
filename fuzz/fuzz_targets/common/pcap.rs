#![allow(dead_code)] // each target uses the part it needs
//! Synthetic pcap captures (LINKTYPE_IPV4) that carry fuzz bytes as transport payloads, so the
//! handshake parsers behind the capture reader (TLS, QUIC Initial, HTTP request line) see the
//! fuzzer's bytes at once instead of after it has learnt pcap, IP and TCP.

/// Client and server of every synthetic flow.
pub const CLIENT: [u8; 4] = [10, 0, 0, 1];
pub const SERVER: [u8; 4] = [10, 0, 0, 2];
pub const CLIENT_PORT: u16 = 50_000;

const LINKTYPE_IPV4: u32 = 228;
/// Keeps an IPv4 packet's total length within its 16-bit field.
pub const MAX_PAYLOAD: usize = 65_000;

/// A pcap file being written.
pub struct Pcap {
    bytes: Vec<u8>,
    packets: u32,
}

impl Pcap {
    pub fn new() -> Pcap {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        bytes.extend_from_slice(&2u16.to_le_bytes());
        bytes.extend_from_slice(&4u16.to_le_bytes());
        bytes.extend_from_slice(&[0; 8]); // time zone, sigfigs
        bytes.extend_from_slice(&262_144u32.to_le_bytes());
        bytes.extend_from_slice(&LINKTYPE_IPV4.to_le_bytes());
        Pcap { bytes, packets: 0 }
    }

    fn ipv4(&mut self, src: [u8; 4], dst: [u8; 4], protocol: u8, transport: &[u8]) {
        let total = 20 + transport.len();
        let mut packet = vec![0x45, 0];
        packet.extend_from_slice(&(total as u16).to_be_bytes());
        packet.extend_from_slice(&(self.packets as u16).to_be_bytes());
        packet.extend_from_slice(&[0x40, 0, 64, protocol, 0, 0]); // DF, TTL, no checksum
        packet.extend_from_slice(&src);
        packet.extend_from_slice(&dst);
        packet.extend_from_slice(transport);
        self.packets += 1;
        self.bytes.extend_from_slice(&self.packets.to_le_bytes()); // one packet a second
        self.bytes.extend_from_slice(&0u32.to_le_bytes());
        self.bytes.extend_from_slice(&(packet.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(&(packet.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(&packet);
    }

    /// A UDP datagram from the client to `port` (payload cut at [`MAX_PAYLOAD`]).
    pub fn udp_from_client(&mut self, port: u16, payload: &[u8]) {
        let payload = &payload[..payload.len().min(MAX_PAYLOAD)];
        let mut udp = Vec::with_capacity(8 + payload.len());
        udp.extend_from_slice(&CLIENT_PORT.to_be_bytes());
        udp.extend_from_slice(&port.to_be_bytes());
        udp.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(payload);
        self.ipv4(CLIENT, SERVER, 17, &udp);
    }

    /// A TCP segment; `to_server` picks the direction (payload cut at [`MAX_PAYLOAD`]).
    pub fn tcp(&mut self, to_server: bool, port: u16, seq: u32, ack: u32, flags: u8, payload: &[u8]) {
        let payload = &payload[..payload.len().min(MAX_PAYLOAD)];
        let (sport, dport) = if to_server { (CLIENT_PORT, port) } else { (port, CLIENT_PORT) };
        let mut tcp = Vec::with_capacity(20 + payload.len());
        tcp.extend_from_slice(&sport.to_be_bytes());
        tcp.extend_from_slice(&dport.to_be_bytes());
        tcp.extend_from_slice(&seq.to_be_bytes());
        tcp.extend_from_slice(&ack.to_be_bytes());
        tcp.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        tcp.extend_from_slice(payload);
        let (src, dst) = if to_server { (CLIENT, SERVER) } else { (SERVER, CLIENT) };
        self.ipv4(src, dst, 6, &tcp);
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}
