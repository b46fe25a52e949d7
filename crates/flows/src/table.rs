//! The flow table: one pass over packets, a hash map keyed by (the hash of) the canonical
//! 5-tuple (the lower endpoint first, so both directions meet in one entry). Counting a packet allocates nothing;
//! only a flow's first payload packets may (its handshake inspector).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::fingerprint::SynPrint;
use crate::inspect::{quic_candidate, Inspector, TcpInspector};
use crate::packet::{tcp_flags, Decoded, Transport};
use crate::record::{FlowRecord, Labels};

/// Canonical 5-tuple: endpoint `a` sorts before endpoint `b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowKey {
    a: [u8; 16],
    b: [u8; 16],
    port_a: u16,
    port_b: u16,
    udp: bool,
    v6: bool,
}

impl std::hash::Hash for FlowKey {
    /// Five machine words instead of the derived field-by-field (and length-prefixed) bytes:
    /// hashing is on every packet's path.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let word = |b: &[u8; 16], i: usize| u64::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]]);
        state.write_u64(word(&self.a, 0));
        state.write_u64(word(&self.a, 8));
        state.write_u64(word(&self.b, 0));
        state.write_u64(word(&self.b, 8));
        state.write_u64(
            u64::from(self.port_a) | u64::from(self.port_b) << 16 | u64::from(self.udp) << 32 | u64::from(self.v6) << 33,
        );
    }
}

impl FlowKey {
    /// The key of a packet and whether its source is endpoint `a`.
    fn of(p: &Decoded) -> (FlowKey, bool) {
        let src_first = (p.src, p.sport) <= (p.dst, p.dport);
        let (a, port_a, b, port_b) = if src_first { (p.src, p.sport, p.dst, p.dport) } else { (p.dst, p.dport, p.src, p.sport) };
        (FlowKey { a, b, port_a, port_b, udp: p.transport == Transport::Udp, v6: p.v6 }, src_first)
    }

    fn ip(&self, addr: &[u8; 16]) -> IpAddr {
        if self.v6 {
            IpAddr::V6(Ipv6Addr::from(*addr))
        } else {
            IpAddr::V4(Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3]))
        }
    }
}

/// `a` after `b` in sequence space.
fn seq_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Sequence bytes of one direction seen so far: everything below `max_end` except the holes
/// (gaps a jump ahead left behind, which a late segment may still fill without being a
/// retransmission at this capture point).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
struct SeqTrack {
    max_end: u32,
    holes: [(u32, u32); 2],
    started: bool,
    n_holes: u8,
}

impl SeqTrack {
    /// Records payload `[start, start + len)`; returns the bytes already seen.
    fn segment(&mut self, start: u32, len: u32) -> u32 {
        let end = start.wrapping_add(len);
        if !self.started {
            self.started = true;
            self.max_end = end;
            return 0;
        }
        if len == 0 {
            return 0;
        }
        if seq_after(start, self.max_end) {
            self.add_hole(self.max_end, start);
            self.max_end = end;
            return 0;
        }
        // The part below max_end was seen, except where it fills holes.
        let old_end = if seq_after(end, self.max_end) { self.max_end } else { end };
        let below = old_end.wrapping_sub(start);
        let filled = self.fill(start, old_end);
        if seq_after(end, self.max_end) {
            self.max_end = end;
        }
        below - filled
    }

    fn add_hole(&mut self, from: u32, to: u32) {
        if usize::from(self.n_holes) == self.holes.len() {
            // Forget the oldest hole: a late fill of it will count as a retransmission.
            self.holes.copy_within(1.., 0);
            self.n_holes -= 1;
        }
        self.holes[usize::from(self.n_holes)] = (from, to);
        self.n_holes += 1;
    }

    /// Removes `[start, end)` from the holes; returns how many bytes of it were holes.
    fn fill(&mut self, start: u32, end: u32) -> u32 {
        let mut filled = 0;
        let mut i = 0;
        while i < usize::from(self.n_holes) {
            let (hs, he) = self.holes[i];
            let os = if seq_after(start, hs) { start } else { hs };
            let oe = if seq_after(end, he) { he } else { end };
            if !seq_after(oe, os) {
                i += 1;
                continue;
            }
            filled += oe.wrapping_sub(os);
            let left = seq_after(os, hs).then_some((hs, os));
            let right = seq_after(he, oe).then_some((oe, he));
            match (left, right) {
                (Some(l), Some(r)) => {
                    self.holes[i] = l;
                    if usize::from(self.n_holes) < self.holes.len() {
                        self.holes[usize::from(self.n_holes)] = r;
                        self.n_holes += 1;
                    }
                    i += 1;
                }
                (Some(h), None) | (None, Some(h)) => {
                    self.holes[i] = h;
                    i += 1;
                }
                (None, None) => {
                    self.holes.copy_within(i + 1.., i);
                    self.n_holes -= 1;
                }
            }
        }
        filled
    }
}

/// Counters of one direction: 64 bytes, so a packet touches few cache lines.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
struct Dir {
    packets: u64,
    bytes: u64,
    payload: u64,
    retrans: u64,
    seq: SeqTrack,
    /// Sequence number after this direction's SYN: its first payload byte.
    syn_next: Option<u32>,
    flags: u8,
}

/// A flow being counted. Fields in the order of use: what every packet updates first, what
/// only the handshake and the end need last. (Not over-aligned: a vector of over-aligned
/// values cannot grow in place, it is copied on every doubling.)
#[repr(C)]
struct Flow {
    first_ns: i64,
    last_ns: i64,
    syn: u32,
    fin: u32,
    rst: u32,
    /// Whether the client is the key's endpoint `a`.
    client_is_a: bool,
    /// Inspection is over (read, impossible, or gave up).
    inspected: bool,
    dirs: [Dir; 2],
    key: FlowKey,
    inspector: Option<Inspector>,
    labels: Option<Box<Labels>>,
    /// TTL (hop limit) of the client's first packet.
    client_ttl: Option<u8>,
    /// The client's SYN, if the capture has it.
    syn_print: Option<Box<SynPrint>>,
}

/// A port servers listen on (IANA's system ports, below 1024), as opposed to a client's
/// ephemeral port.
fn is_service_port(port: u16) -> bool {
    port < 1024
}

impl Flow {
    fn new(key: FlowKey, p: &Decoded, src_is_a: bool, ts: i64) -> Flow {
        // The initiator sent the first packet if it is a SYN; a SYN-ACK's receiver initiated
        // (the capture missed the SYN). Without a handshake (TCP begun before the capture, or
        // UDP) the ports decide when one is a service port and the other is not; else the first
        // packet's sender is taken for the client.
        let handshake = p.transport == Transport::Tcp && p.flags & tcp_flags::SYN != 0;
        let syn_ack = p.flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN | tcp_flags::ACK;
        let src_is_client = if handshake { !syn_ack } else { !is_service_port(p.sport) || is_service_port(p.dport) };
        let client_is_a = src_is_client == src_is_a;
        Flow {
            key,
            client_is_a,
            first_ns: ts,
            last_ns: ts,
            dirs: [Dir::default(); 2],
            syn: 0,
            fin: 0,
            rst: 0,
            inspector: None,
            inspected: false,
            labels: None,
            client_ttl: None,
            syn_print: None,
        }
    }

    /// Whether the connection was closed (a FIN or RST seen): a new SYN starts a new flow.
    fn closed(&self) -> bool {
        self.fin > 0 || self.rst > 0
    }

    fn update(&mut self, p: &Decoded, src_is_a: bool, ts: i64, scratch: &mut Vec<u8>) {
        let dir = usize::from(src_is_a != self.client_is_a);
        self.first_ns = self.first_ns.min(ts);
        self.last_ns = self.last_ns.max(ts);
        let d = &mut self.dirs[dir];
        d.packets += 1;
        d.bytes += u64::from(p.ip_bytes);
        d.payload += u64::from(p.payload_len);
        if dir == 0 && self.client_ttl.is_none() {
            self.client_ttl = Some(p.ttl);
        }
        if p.transport == Transport::Tcp {
            d.flags |= p.flags;
            let syn = p.flags & tcp_flags::SYN != 0;
            self.syn += u32::from(syn);
            self.fin += u32::from(p.flags & tcp_flags::FIN != 0);
            self.rst += u32::from(p.flags & tcp_flags::RST != 0);
            let start = p.seq.wrapping_add(u32::from(syn));
            if syn && d.syn_next.is_none() {
                d.syn_next = Some(start);
                if dir == 0 {
                    self.syn_print = Some(Box::new(SynPrint::parse(p.window, p.tcp_options)));
                }
            }
            d.retrans += u64::from(d.seq.segment(start, p.payload_len));
            if !self.inspected && !p.payload.is_empty() {
                self.inspect_tcp(dir, start, p.payload);
            }
        } else if !self.inspected {
            self.inspect_udp(dir, p.payload, scratch);
        }
    }

    fn inspect_tcp(&mut self, dir: usize, start: u32, payload: &[u8]) {
        let starts = [self.dirs[0].syn_next, self.dirs[1].syn_next];
        let inspector = self.inspector.get_or_insert_with(|| Inspector::Tcp(Box::new(TcpInspector::new(starts))));
        let Inspector::Tcp(tcp) = inspector else { return };
        let labels = self.labels.get_or_insert_with(Box::default);
        if tcp.segment(dir, start, payload, labels) {
            self.inspector = None;
            self.inspected = true;
        }
    }

    fn inspect_udp(&mut self, dir: usize, payload: &[u8], scratch: &mut Vec<u8>) {
        if self.inspector.is_none() {
            // Only a flow whose first datagram (from its client) is a QUIC long header.
            if dir != 0 || self.dirs[0].packets != 1 || !quic_candidate(payload) {
                self.inspected = true;
                return;
            }
            self.inspector = Some(Inspector::Quic(Box::default()));
        }
        if dir != 0 {
            return;
        }
        let Some(Inspector::Quic(q)) = &mut self.inspector else { return };
        q.client_datagram(payload, scratch);
        if q.done {
            let labels = self.labels.get_or_insert_with(Box::default);
            labels.quic_version = q.version;
            labels.quic_hello = q.hello.take();
            self.inspector = None;
            self.inspected = true;
        }
    }

    fn finish(mut self) -> FlowRecord {
        let key = &self.key;
        // An inspection cut short by the end of the flow still reports what it found.
        if let Some(Inspector::Quic(q)) = self.inspector.take() {
            let labels = self.labels.get_or_insert_with(Box::default);
            labels.quic_version = q.version;
            labels.quic_hello = q.hello;
        }
        let udp = key.udp;
        let labels = self.labels.map(|l| l.into_columns(udp)).unwrap_or_else(|| Labels::default().into_columns(udp));
        let (client, cport, server, sport) =
            if self.client_is_a { (&key.a, key.port_a, &key.b, key.port_b) } else { (&key.b, key.port_b, &key.a, key.port_a) };
        let [c, s] = self.dirs;
        let tcp = |v: u64| if udp { None } else { Some(v) };
        let flags = |v: u8| if udp { None } else { Some(v) };
        let syn = self.syn_print.map(|b| *b);
        FlowRecord {
            source: "pcap",
            transport: if udp { "udp" } else { "tcp" },
            client_ip: key.ip(client),
            client_port: cport,
            server_ip: key.ip(server),
            server_port: sport,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            duration_s: (self.last_ns - self.first_ns) as f64 / 1e9,
            c2s_packets: c.packets,
            s2c_packets: s.packets,
            c2s_bytes: c.bytes,
            s2c_bytes: s.bytes,
            c2s_payload_bytes: c.payload,
            s2c_payload_bytes: s.payload,
            c2s_retrans_bytes: tcp(c.retrans),
            s2c_retrans_bytes: tcp(s.retrans),
            syn: self.syn,
            fin: self.fin,
            rst: self.rst,
            ack: (c.flags | s.flags) & tcp_flags::ACK != 0,
            sni: labels.sni,
            alpn_offer: labels.alpn_offer,
            alpn_server: labels.alpn_server,
            alpn_source: labels.alpn_source,
            tls_version: labels.tls_version,
            quic_version: labels.quic_version,
            http_host: labels.http_host,
            protocol: labels.protocol,
            c2s_tcp_flags: flags(c.flags),
            s2c_tcp_flags: flags(s.flags),
            http_method: labels.http_method,
            http_path: labels.http_path,
            c2s_ttl: self.client_ttl,
            syn_window: syn.as_ref().map(|p| p.window),
            syn_wscale: syn.as_ref().and_then(|p| p.wscale),
            syn_mss: syn.as_ref().and_then(|p| p.mss),
            syn_tsval: syn.as_ref().and_then(|p| p.tsval),
            syn_options: syn.map(|p| p.options),
        }
    }
}

/// A hasher for keys that are already hashes.
#[derive(Default)]
struct Passthrough(u64);

impl std::hash::Hasher for Passthrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed; this keeps any other use correct, if slow.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// All flows of a capture: those still open and those ended.
pub struct FlowTable {
    /// Keys are hashed with a key chosen per run (a crafted capture cannot aim at collisions).
    hasher: ahash::RandomState,
    /// Open flows: the key's 64-bit hash -> slot in `slots`. Entries are 16 bytes, a third of
    /// what an index holding the keys would need, so far more of it stays in cache; the slot's
    /// own key rules out a collision.
    index: HashMap<u64, u32, std::hash::BuildHasherDefault<Passthrough>>,
    /// The rare keys whose hash another open flow already has: key -> slot.
    collided: HashMap<FlowKey, u32, ahash::RandomState>,
    slots: Vec<Option<Flow>>,
    /// Slots of ended flows, reused.
    free: Vec<u32>,
    ended: Vec<FlowRecord>,
    idle_timeout_ns: i64,
    next_sweep_ns: Option<i64>,
    /// Reused decryption buffer of QUIC inspection.
    scratch: Vec<u8>,
    /// Tests: every key hashes alike, so every flow after the first takes the collision path.
    #[cfg(test)]
    all_collide: bool,
}

/// A free slot (a new one at the end if none was freed).
fn take_slot(free: &mut Vec<u32>, slots: &mut Vec<Option<Flow>>) -> usize {
    match free.pop() {
        Some(s) => s as usize,
        None => {
            slots.push(None);
            slots.len() - 1
        }
    }
}

impl FlowTable {
    /// An empty table; a flow without packets for `idle_timeout_ns` ends.
    pub fn new(idle_timeout_ns: i64) -> Self {
        FlowTable {
            hasher: ahash::RandomState::new(),
            index: HashMap::default(),
            collided: HashMap::with_hasher(ahash::RandomState::new()),
            slots: Vec::new(),
            free: Vec::new(),
            ended: Vec::new(),
            idle_timeout_ns: idle_timeout_ns.max(1),
            next_sweep_ns: None,
            scratch: Vec::new(),
            #[cfg(test)]
            all_collide: false,
        }
    }

    fn hash(&self, key: &FlowKey) -> u64 {
        #[cfg(test)]
        if self.all_collide {
            return 7;
        }
        self.hasher.hash_one(key)
    }

    /// The slot of `key`'s flow, a fresh one if it has none.
    fn slot(&mut self, key: &FlowKey) -> usize {
        use std::collections::hash_map::Entry;
        let hash = self.hash(key);
        match self.index.entry(hash) {
            Entry::Occupied(e) => {
                let slot = *e.get() as usize;
                if self.slots[slot].as_ref().is_some_and(|f| f.key == *key) {
                    return slot;
                }
            }
            Entry::Vacant(e) => {
                // A key that collided with a flow which has ended since takes the free entry.
                let moved = if self.collided.is_empty() { None } else { self.collided.remove(key) };
                let slot = moved.map_or_else(|| take_slot(&mut self.free, &mut self.slots), |s| s as usize);
                e.insert(slot as u32);
                return slot;
            }
        }
        match self.collided.entry(*key) {
            Entry::Occupied(e) => *e.get() as usize,
            Entry::Vacant(e) => {
                let slot = take_slot(&mut self.free, &mut self.slots);
                e.insert(slot as u32);
                slot
            }
        }
    }

    /// Counts one packet captured at `ts` (Unix ns).
    pub fn packet(&mut self, ts: i64, p: &Decoded) {
        let (key, src_is_a) = FlowKey::of(p);
        let timeout = self.idle_timeout_ns;
        let slot = self.slot(&key);
        let entry = &mut self.slots[slot];
        match entry {
            Some(flow) => {
                let pure_syn = p.transport == Transport::Tcp && p.flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN;
                if ts.saturating_sub(flow.last_ns) > timeout || (pure_syn && flow.closed()) {
                    let old = std::mem::replace(flow, Flow::new(key, p, src_is_a, ts));
                    self.ended.push(old.finish());
                }
            }
            None => *entry = Some(Flow::new(key, p, src_is_a, ts)),
        }
        if let Some(flow) = entry {
            flow.update(p, src_is_a, ts, &mut self.scratch);
        }
        // Flows idle for longer than the timeout end in sweeps, once per timeout of capture
        // time, so a long capture does not keep every flow it ever saw in the table.
        match self.next_sweep_ns {
            None => self.next_sweep_ns = Some(ts.saturating_add(timeout)),
            Some(next) if ts >= next => {
                self.sweep(ts);
                self.next_sweep_ns = Some(ts.saturating_add(timeout));
            }
            Some(_) => {}
        }
    }

    fn sweep(&mut self, now: i64) {
        let timeout = self.idle_timeout_ns;
        let slots = &mut self.slots;
        let (ended, free) = (&mut self.ended, &mut self.free);
        let mut keep = |slot: &mut u32| {
            let idle = slots[*slot as usize].as_ref().is_none_or(|f| now.saturating_sub(f.last_ns) > timeout);
            if idle {
                if let Some(flow) = slots[*slot as usize].take() {
                    ended.push(flow.finish());
                }
                free.push(*slot);
            }
            !idle
        };
        self.index.retain(|_, slot| keep(slot));
        self.collided.retain(|_, slot| keep(slot));
    }

    /// Ends every flow; returns all records, ordered by first packet (then by 5-tuple, so the
    /// order does not depend on the hash map's).
    pub fn finish(mut self) -> Vec<FlowRecord> {
        let mut records = std::mem::take(&mut self.ended);
        records.reserve(self.index.len() + self.collided.len());
        // In slab order: a sequential walk, not one cache miss per flow.
        records.extend(std::mem::take(&mut self.slots).into_iter().flatten().map(Flow::finish));
        // Records are large: sort by a small key, then move each record once.
        records.sort_by_cached_key(|r| (r.first_ns, r.client_ip, r.client_port, r.server_ip, r.server_port, r.transport));
        records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmissions_and_holes() {
        let mut t = SeqTrack::default();
        assert_eq!(t.segment(1000, 100), 0); // [1000, 1100)
        assert_eq!(t.segment(1100, 100), 0); // [1100, 1200)
        assert_eq!(t.segment(1100, 100), 100); // repeated
        assert_eq!(t.segment(1150, 100), 50); // half old
        assert_eq!(t.segment(1400, 100), 0); // hole [1250, 1400)
        assert_eq!(t.segment(1250, 100), 0); // fills part of it
        assert_eq!(t.segment(1250, 150), 100); // the rest of it, 100 seen before
        assert_eq!(t.segment(1000, 500), 500);
        assert_eq!(t.segment(1500, 0), 0);
    }

    /// Keys whose hashes collide still get flows of their own, which end like any other.
    #[test]
    fn colliding_hashes() {
        let packet = |sport: u16, seq: u32| Decoded {
            v6: false,
            src: [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            dst: [10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            sport,
            dport: 80,
            transport: Transport::Tcp,
            ip_bytes: 140,
            payload_len: 100,
            payload: &[],
            seq,
            flags: tcp_flags::ACK,
            ttl: 64,
            window: 0,
            tcp_options: &[],
        };
        for sweep in [false, true] {
            let mut t = FlowTable::new(1_000);
            t.all_collide = true;
            for (i, port) in [1000u16, 1001, 1002, 1000, 1001, 1000].into_iter().enumerate() {
                t.packet(i as i64, &packet(port, 100 * i as u32));
            }
            assert_eq!((t.index.len(), t.collided.len()), (1, 2));
            if sweep {
                t.packet(10_000, &packet(1003, 0)); // later than the timeout: a sweep ends the others
                assert_eq!((t.ended.len(), t.free.len(), t.index.len(), t.collided.len()), (3, 3, 0, 1));
                t.packet(10_001, &packet(1003, 100)); // still the same flow
                t.packet(10_002, &packet(1004, 0));
                assert_eq!((t.index.len(), t.collided.len()), (1, 1));
            }
            let flows = t.finish();
            let per_port: Vec<(u16, u64)> = flows.iter().map(|f| (f.client_port, f.c2s_packets)).collect();
            let mut expected = vec![(1000, 3), (1001, 2), (1002, 1)];
            if sweep {
                expected.extend([(1003, 2), (1004, 1)]);
            }
            assert_eq!(per_port, expected);
        }
    }

    /// A flow whose handshake the capture missed gets its client from the ports.
    #[test]
    fn mid_connection_flows_are_oriented_by_ports() {
        let packet = |sport: u16, dport: u16, flags: u8, transport: Transport| Decoded {
            v6: false,
            src: [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            dst: [10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            sport,
            dport,
            transport,
            ip_bytes: 52,
            payload_len: 0,
            payload: &[],
            seq: 1,
            flags,
            ttl: 64,
            window: 0,
            tcp_options: &[],
        };
        let cases = [
            (packet(443, 50_000, tcp_flags::ACK | tcp_flags::FIN, Transport::Tcp), 50_000, 443),
            (packet(50_000, 443, tcp_flags::ACK, Transport::Tcp), 50_000, 443),
            (packet(443, 50_000, 0, Transport::Udp), 50_000, 443),
            (packet(443, 50_000, tcp_flags::SYN, Transport::Tcp), 443, 50_000), // a SYN decides
            (packet(443, 50_000, tcp_flags::SYN | tcp_flags::ACK, Transport::Tcp), 50_000, 443),
            (packet(40_000, 50_000, tcp_flags::ACK, Transport::Tcp), 40_000, 50_000), // no service port
            (packet(443, 80, tcp_flags::ACK, Transport::Tcp), 443, 80), // two service ports
        ];
        for (p, client, server) in cases {
            let mut t = FlowTable::new(1_000);
            t.packet(0, &p);
            let flows = t.finish();
            assert_eq!((flows[0].client_port, flows[0].server_port), (client, server), "{:?}", (p.sport, p.dport, p.flags));
        }
    }

    #[test]
    fn wraps_around() {
        let mut t = SeqTrack::default();
        assert_eq!(t.segment(u32::MAX - 49, 100), 0);
        assert_eq!(t.segment(50, 10), 0);
        assert_eq!(t.segment(u32::MAX - 9, 20), 20);
    }

    /// The client's SYN gives the flow its fingerprint; the server's SYN-ACK does not.
    #[test]
    fn client_syn_fingerprint() {
        let options = [2, 4, 5, 180, 1, 3, 3, 8, 1, 1, 4, 2];
        let packet = |client: bool, flags: u8, ttl: u8| Decoded {
            v6: false,
            src: if client { [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] } else { [10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] },
            dst: if client { [10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] } else { [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] },
            sport: if client { 50_000 } else { 443 },
            dport: if client { 443 } else { 50_000 },
            transport: Transport::Tcp,
            ip_bytes: 52,
            payload_len: 0,
            payload: &[],
            seq: 1,
            flags,
            ttl,
            window: if client { 65_535 } else { 1_000 },
            tcp_options: if client { &options } else { &[] },
        };
        let mut t = FlowTable::new(1_000);
        t.packet(0, &packet(true, tcp_flags::SYN, 127));
        t.packet(1, &packet(false, tcp_flags::SYN | tcp_flags::ACK, 64));
        t.packet(2, &packet(true, tcp_flags::ACK, 126));
        let flows = t.finish();
        let f = &flows[0];
        assert_eq!((f.c2s_ttl, f.syn_window, f.syn_wscale, f.syn_mss, f.syn_tsval), (Some(127), Some(65_535), Some(8), Some(1460), None));
        assert_eq!(f.syn_options.as_deref(), Some("M,N,W,N,N,S"));
    }
}
