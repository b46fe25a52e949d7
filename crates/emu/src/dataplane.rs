//! The packet loop's state: the model, the loop's counters and the open capture and event
//! writers. It has no devices and no clock: the loop (engine.rs) hands it the packets it read
//! and the time, and a function that writes a packet to a host; tests build it from a topology
//! alone. It changes only through [`Command`]s, which the control plane (control.rs) has
//! already checked and prepared (configurations built, trace files read, files opened), so
//! applying one is quick and cannot fail.

use contract::control::{EmulatorCounters, LatePass, LATE_PASSES_KEPT};
use netmodel::{Delivered, Event, HostId, LinkConfig, LinkCounters, LinkId, Nanos, Network, Packet, PathId, PathSelection};

use crate::frame::{Frame, FramePool, GsoShape, PROTO_TCP};
use crate::lateness::Lateness;
use crate::vnet;
use crate::writer::{CapturedPacket, PendingSummary, Writer};

/// A change or a question for the packet loop, checked by the control plane.
pub enum Command {
    /// The counters of every link direction and of the loop.
    ReadCounters,
    /// Zero every counter.
    ResetCounters,
    /// New configurations for link directions, all valid; `seed` restarts their random streams.
    Reconfigure {
        /// (link, its new configuration).
        links: Vec<(LinkId, LinkConfig)>,
        /// Seed of the links' random streams.
        seed: Option<u64>,
    },
    /// New path selection, pins resolved and checked.
    Route {
        /// Selection.
        selection: PathSelection,
        /// (left host, right host, path).
        pins: Vec<(HostId, HostId, PathId)>,
    },
    /// Capture a host's packets with this writer (its file is open).
    StartCapture {
        /// The host.
        host: HostId,
        /// Its writer.
        writer: Writer<CapturedPacket>,
    },
    /// Close a host's capture.
    StopCapture {
        /// The host.
        host: HostId,
    },
    /// Record packet events with this writer (its file is open).
    StartEvents(Writer<Vec<Event>>),
    /// Stop recording events.
    StopEvents,
    /// Deduct this many ns from every packet's propagation delays.
    CompensateDelay(Nanos),
    /// Stop forwarding; the loop ends.
    Shutdown,
}

/// What applying a [`Command`] gives back.
pub enum Outcome {
    /// Applied.
    Done,
    /// [`Command::ReadCounters`]: each link direction's counters (index = link id) and the loop's.
    Counters(Vec<LinkCounters>, EmulatorCounters),
    /// A writer told to finish: the control plane waits for it, off the loop.
    Finishing(PendingSummary),
    /// Not applied (the control plane's checks should make this impossible).
    Refused(String),
}

/// The loop's own counters (docs/control.md, `emulator`).
#[derive(Debug, Default)]
pub struct LoopCounters {
    rx_packets: u64,
    rx_super_packets: u64,
    rx_whole_super_packets: u64,
    rx_super_packet_pieces: u64,
    rx_malformed: u64,
    tx_packets: u64,
    unroutable: u64,
    non_ipv4: u64,
    tx_errors: u64,
    timer_late_ns_max: u64,
    late_sum: u128,
    late_count: u64,
    rt_switches: u64,
    /// How late each delivered packet left compared with the model's delivery time.
    delivery_lateness: Lateness,
    late_passes: Vec<LatePass>,
}

/// The model and everything the loop writes to.
/// How late one pass of the loop delivered (`DataPlane::forward_due`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassLateness {
    /// How late the latest packet left, ns (0 when none was due).
    pub latest_ns: Nanos,
    /// The wire segments that left more than `LATE_PASS_NS` late.
    pub late_segments: u64,
}

pub struct DataPlane {
    net: Network<Frame>,
    start_unix_ns: u64,
    counters: LoopCounters,
    pcaps: Vec<Option<Writer<CapturedPacket>>>,
    events: Option<Writer<Vec<Event>>>,
    delivered: Vec<Delivered<Frame>>,
    stopping: bool,
    /// Per host: whether its device takes a super-packet whole, for TCP and for UDP (set by
    /// the loop from the devices; none by default).
    takes_whole: Vec<[bool; 2]>,
    /// Buffers for the capture's copies of a super-packet's segments.
    capture_pool: FramePool,
}

impl DataPlane {
    /// The state over `net`; model time 0 is Unix time `start_unix_ns`.
    pub fn new(net: Network<Frame>, start_unix_ns: u64) -> DataPlane {
        let pcaps = net.host_names().map(|_| None).collect();
        DataPlane {
            net,
            start_unix_ns,
            counters: LoopCounters::default(),
            pcaps,
            events: None,
            delivered: Vec::new(),
            stopping: false,
            takes_whole: Vec::new(),
            capture_pool: FramePool::default(),
        }
    }

    /// Whether `host`'s device takes super-packets whole, of TCP and of UDP.
    pub fn set_takes_whole(&mut self, host: usize, tcp: bool, udp: bool) {
        if self.takes_whole.len() <= host {
            self.takes_whole.resize(host + 1, [false, false]);
        }
        self.takes_whole[host] = [tcp, udp];
    }

    /// How many segments of a super-packet `ip` (of `shape`) read from `host`, at most, cross the
    /// model as one packet (1: it is split): where nothing captures either end and the receiving
    /// device takes super-packets, as many as its route carries whole (`Network::whole_segments`:
    /// all where it carries the super-packet whole).
    pub fn whole_segments(&self, host: usize, ip: &[u8], shape: &GsoShape) -> usize {
        let Ok((flow, _)) = netmodel::parse_ipv4(ip) else { return 1 };
        let Some(to) = self.net.host_of(flow.dst) else { return 1 };
        let to = to.0 as usize;
        let captured = |h: usize| self.pcaps.get(h).is_some_and(Option::is_some);
        let receiver_takes = self.takes_whole.get(to).is_some_and(|t| t[usize::from(shape.proto != PROTO_TCP)]);
        if !receiver_takes || captured(host) || captured(to) {
            return 1;
        }
        self.net.whole_segments(HostId(host as u32), &flow, shape.model_shape()) as usize
    }

    /// The model (read only: it changes through commands and packets).
    pub fn network(&self) -> &Network<Frame> {
        &self.net
    }

    /// When the model next has something due.
    pub fn next_wakeup(&self) -> Option<Nanos> {
        self.net.next_wakeup()
    }

    /// Whether forwarding should end (a `shutdown` request or a signal).
    pub fn stopping(&self) -> bool {
        self.stopping
    }

    /// Ends forwarding (a signal).
    pub fn stop(&mut self) {
        self.stopping = true;
    }

    /// A packet read from `host` at model time `now` (its buffer becomes the model's packet).
    pub fn ingest(&mut self, now: Nanos, host: usize, frame: Frame) {
        let segments = frame.gso.map_or(1, |shape| shape.segments);
        self.counters.rx_packets += segments as u64;
        self.capture(host, now, &frame);
        let packet = match (netmodel::parse_ipv4(frame.ip()), frame.gso) {
            (Err(_), _) => {
                self.counters.non_ipv4 += segments as u64;
                return;
            }
            (Ok((flow, ip_id)), None) => Packet::new(frame.bytes.len() as u32, flow, ip_id, frame),
            (Ok((flow, ip_id)), Some(shape)) => {
                let model = shape.model_shape();
                Packet::segmented(model.size, model.segment_size, model.segments, flow, ip_id, frame)
            }
        };
        if !self.net.send(now, HostId(host as u32), packet) {
            self.counters.unroutable += segments as u64;
        }
    }

    /// Offers `frame` to `host`'s capture, if one runs: each wire segment, checksums complete.
    fn capture(&mut self, host: usize, now: Nanos, frame: &Frame) {
        let Some(Some(w)) = self.pcaps.get_mut(host) else { return };
        let time = self.start_unix_ns + now;
        if frame.gso.is_none() {
            return w.offer((time, frame.wire_copy()), 1);
        }
        // A super-packet read whole before the capture started: split a copy.
        let mut segments = Vec::new();
        vnet::split_whole(frame.clone(), &mut self.capture_pool, |segment| segments.push(segment));
        for segment in segments {
            w.offer((time, segment.wire_copy()), 1);
            self.capture_pool.give(segment.bytes);
        }
    }

    /// Delivers every packet due by `now` through `send(host, packet)` (false: the write failed)
    /// and hands the recorded events to the event writer. Returns how late the pass was.
    pub fn forward_due(&mut self, now: Nanos, mut send: impl FnMut(usize, Frame) -> bool) -> PassLateness {
        self.net.poll(now, &mut self.delivered);
        let mut delivered = std::mem::take(&mut self.delivered);
        let mut pass = PassLateness::default();
        for d in delivered.drain(..) {
            let segments = u64::from(d.packet.segments);
            let late = now.saturating_sub(d.time);
            pass.latest_ns = pass.latest_ns.max(late);
            if late > contract::control::LATE_PASS_NS {
                pass.late_segments += segments;
            }
            self.counters.delivery_lateness.record_many(late, segments);
            let host = d.host.0 as usize;
            self.capture(host, now, &d.packet.payload);
            if send(host, d.packet.payload) {
                self.counters.tx_packets += segments;
            } else {
                self.counters.tx_errors += segments;
            }
        }
        self.delivered = delivered;
        let events: Vec<Event> = self.net.drain_events().collect();
        if let (false, Some(w)) = (events.is_empty(), &mut self.events) {
            let n = events.len() as u64;
            w.offer(events, n);
        }
        pass
    }

    /// The pass at `now` (`forward_due`'s result), on `cpu`: kept if it is a late pass (beyond
    /// `LATE_PASS_NS`) and fewer than `LATE_PASSES_KEPT` are kept.
    pub fn record_late_pass(&mut self, now: Nanos, pass: PassLateness, cpu: Option<u32>) {
        let passes = &mut self.counters.late_passes;
        if pass.latest_ns > contract::control::LATE_PASS_NS && passes.len() < LATE_PASSES_KEPT {
            passes.push(LatePass {
                at_unix_ns: self.start_unix_ns + now,
                late_ns: pass.latest_ns,
                packets: pass.late_segments,
                cpu,
            });
        }
    }

    /// One TUN read gave `segments` wire segments (more than one: a GSO super-packet).
    pub fn count_read(&mut self, segments: usize) {
        if segments > 1 {
            self.counters.rx_super_packets += 1;
        }
    }

    /// A TUN read gave a super-packet that crosses the model whole.
    pub fn count_whole_read(&mut self) {
        self.counters.rx_whole_super_packets += 1;
    }

    /// A TUN read gave a super-packet cut into `pieces` that each cross the model whole.
    pub fn count_pieces(&mut self, pieces: usize) {
        self.counters.rx_super_packet_pieces += pieces as u64;
    }

    /// A TUN read gave a datagram that could not be split into wire segments (dropped).
    pub fn count_malformed(&mut self) {
        self.counters.rx_malformed += 1;
    }

    /// Writes that failed after [`DataPlane::forward_due`] handed the packets on.
    pub fn count_tx_errors(&mut self, failed: u64) {
        self.counters.tx_errors += failed;
    }

    /// The loop woke `late` ns after a packet was due.
    pub fn record_timer_lateness(&mut self, late: Nanos) {
        let c = &mut self.counters;
        c.timer_late_ns_max = c.timer_late_ns_max.max(late);
        c.late_sum += u128::from(late);
        c.late_count += 1;
    }

    /// The loop changed between real-time and normal scheduling.
    pub fn count_rt_switch(&mut self) {
        self.counters.rt_switches += 1;
    }

    /// Applies a checked command at model time `now`.
    pub fn apply(&mut self, now: Nanos, command: Command) -> Outcome {
        match command {
            Command::ReadCounters => {
                let links = (0..self.net.link_count()).filter_map(|i| self.net.link(LinkId(i as u32))).map(|l| l.counters());
                Outcome::Counters(links.collect(), self.emulator_counters())
            }
            Command::ResetCounters => {
                self.net.reset_counters();
                self.counters = LoopCounters::default();
                Outcome::Done
            }
            Command::Reconfigure { links, seed } => self.reconfigure(now, links, seed),
            Command::Route { selection, pins } => match self.net.set_routing(selection, &pins) {
                Ok(()) => Outcome::Done,
                Err(e) => Outcome::Refused(e.to_string()),
            },
            Command::StartCapture { host, writer } => match self.pcaps.get_mut(host.0 as usize) {
                Some(slot @ None) => {
                    *slot = Some(writer);
                    Outcome::Done
                }
                Some(Some(_)) => Outcome::Refused("host: a capture is already running on this host".into()),
                None => Outcome::Refused(format!("host: no host {}", host.0)),
            },
            Command::StopCapture { host } => finishing(self.pcaps.get_mut(host.0 as usize).and_then(Option::take)),
            Command::StartEvents(writer) => {
                if self.events.is_some() {
                    return Outcome::Refused("the event log is already running".into());
                }
                self.events = Some(writer);
                self.net.record_events(true);
                Outcome::Done
            }
            Command::StopEvents => {
                self.net.record_events(false);
                finishing(self.events.take())
            }
            Command::CompensateDelay(ns) => {
                self.net.set_delay_compensation(ns);
                Outcome::Done
            }
            Command::Shutdown => {
                self.stopping = true;
                Outcome::Done
            }
        }
    }

    fn reconfigure(&mut self, now: Nanos, links: Vec<(LinkId, LinkConfig)>, seed: Option<u64>) -> Outcome {
        for (id, config) in links {
            // Every configuration passed the model's validation on the control side, which is
            // the only way this can fail.
            if let Err(e) = self.net.reconfigure(now, id, config) {
                return Outcome::Refused(e.to_string());
            }
            if let Some(seed) = seed {
                self.net.reseed(id, seed);
            }
        }
        Outcome::Done
    }

    fn emulator_counters(&self) -> EmulatorCounters {
        let c = &self.counters;
        EmulatorCounters {
            rx_packets: c.rx_packets,
            rx_super_packets: c.rx_super_packets,
            rx_whole_super_packets: c.rx_whole_super_packets,
            rx_super_packet_pieces: c.rx_super_packet_pieces,
            rx_malformed: c.rx_malformed,
            tx_packets: c.tx_packets,
            unroutable: c.unroutable,
            non_ipv4: c.non_ipv4,
            tx_errors: c.tx_errors,
            timer_late_ns_max: c.timer_late_ns_max,
            timer_late_ns_mean: if c.late_count > 0 { (c.late_sum / u128::from(c.late_count)) as u64 } else { 0 },
            pcap_dropped: self.pcaps.iter().flatten().map(Writer::dropped).sum(),
            events_dropped: self.events.as_ref().map_or(0, Writer::dropped),
            rt_switches: c.rt_switches,
            delivery_late: c.delivery_lateness.summary(),
            late_passes: c.late_passes.clone(),
            delay_compensation_ns: self.net.delay_compensation(),
        }
    }

    /// Closes every writer and waits for them (at the end of a run).
    pub fn finish_writers(&mut self) {
        for w in self.pcaps.iter_mut().filter_map(Option::take) {
            w.finish().wait();
        }
        if let Some(w) = self.events.take() {
            w.finish().wait();
        }
    }
}

/// The outcome of taking a writer out of its slot: it finishes, off the loop.
fn finishing<T: Send + 'static>(taken: Option<Writer<T>>) -> Outcome {
    taken.map_or(Outcome::Refused("nothing is being written".into()), |w| Outcome::Finishing(w.finish()))
}

#[cfg(test)]
mod tests;
