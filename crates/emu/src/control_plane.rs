//! The control plane: reads typed requests ([`Request`], docs/control.md), checks them against
//! the lab, does their slow work (building link configurations, reading trace files, creating
//! capture and event-log files, waiting for writers to finish) and sends the packet loop
//! [`Command`]s that only need applying. It runs on the control socket's threads, never on the
//! packet loop.
//!
//! Every change goes through here, so the control plane holds the authoritative copy of the
//! lab's link parameters, routing, delay compensation and open writers; a refused request
//! changes none of them, nor the loop.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use contract::control::{
    CaptureStopped, Counters, DelayCompensation, Done, EventsStart, Info, LinksSet, LogStopped, Nothing, PathCounters,
    PcapStart, Reply, Request, SetLink, SetRouting, Started, WriterSummary, MAX_DELAY_COMPENSATION_NS,
};
use netmodel::{HostId, LinkId, Network};

use crate::dataplane::{Command, Outcome};
use crate::clock::Clock;
use crate::params::link_config;
use crate::topology::{path_selection, pins_for, Topology};
use crate::writer::{self, PendingSummary};

/// Carries commands to the packet loop and brings back what applying them gave.
pub trait PacketLoop {
    /// Applies `command` on the loop; an error when the loop does not answer.
    fn call(&mut self, command: Command) -> Result<Outcome, String>;
}

/// A reply, or a writer to wait for before replying (waited for without holding the control
/// plane, so other connections are not held up by a disk).
#[allow(clippy::large_enum_variant)] // one short-lived value per request
pub enum Answer {
    /// The reply.
    Now(Reply),
    /// Wait for the writer, then reply with its summary.
    AfterWriter(PendingSummary, fn(WriterSummary) -> Done),
}

impl Answer {
    /// The reply, once any writer is done.
    pub fn finish(self) -> Reply {
        match self {
            Answer::Now(reply) => reply,
            Answer::AfterWriter(pending, done) => Reply::done(done(pending.wait())),
        }
    }
}

/// The lab as the control plane knows it, and the way to its packet loop.
pub struct ControlPlane<L> {
    topology: Topology,
    link_names: Arc<Vec<String>>,
    host_names: Vec<String>,
    paths: Vec<(String, LinkId, LinkId)>,
    clock: Clock,
    spin_ns: u64,
    rt_priority: Arc<AtomicI32>,
    cpu_latency_us: Option<u32>,
    delay_compensation_ns: u64,
    whole_spread_ns: u64,
    capturing: Vec<bool>,
    logging_events: bool,
    packet_loop: L,
}

type Handled = Result<Answer, String>;

impl<L: PacketLoop> ControlPlane<L> {
    /// The control plane of a lab built from `topology` as `net` (before the loop takes it).
    /// `rt_priority` is the loop's real-time priority in force (the loop updates it).
    pub fn new<P>(topology: Topology, net: &Network<P>, clock: Clock, spin_ns: u64, rt_priority: Arc<AtomicI32>, packet_loop: L) -> Self {
        let link_names = (0..net.link_count()).map(|i| net.link_name(LinkId(i as u32)).to_string()).collect();
        let host_names: Vec<String> = net.host_names().map(str::to_string).collect();
        ControlPlane {
            paths: net.paths().map(|(name, f, r)| (name.to_string(), f, r)).collect(),
            capturing: vec![false; host_names.len()],
            host_names,
            link_names: Arc::new(link_names),
            delay_compensation_ns: net.delay_compensation(),
            whole_spread_ns: net.whole_spread(),
            topology,
            clock,
            spin_ns,
            rt_priority,
            cpu_latency_us: None,
            logging_events: false,
            packet_loop,
        }
    }

    /// The link parameters and routing now in force.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The way to the packet loop (to look at it in tests).
    pub fn packet_loop(&self) -> &L {
        &self.packet_loop
    }

    /// Answers one request line (JSON); a refusal names the field and changes nothing.
    pub fn handle_line(&mut self, line: &str) -> Answer {
        let request = serde_json::from_str::<serde_json::Value>(line)
            .map_err(|e| format!("invalid JSON: {e}"))
            .and_then(Request::from_value);
        match request {
            Ok(request) => self.handle(request),
            Err(e) => Answer::Now(Reply::refused(e)),
        }
    }

    /// Answers one request.
    pub fn handle(&mut self, request: Request) -> Answer {
        let handled = match request {
            Request::Info => Ok(self.info()),
            Request::Counters => self.counters(),
            Request::ResetCounters => self.run(Command::ResetCounters),
            Request::SetLink(set) => self.set_link(set),
            Request::SetRouting(routing) => self.set_routing(routing),
            Request::PcapStart(start) => self.pcap_start(start),
            Request::PcapStop(stop) => self.pcap_stop(&stop.host),
            Request::EventsStart(start) => self.events_start(start),
            Request::EventsStop => self.events_stop(),
            Request::SetDelayCompensation(set) => self.set_delay_compensation(set.ns),
            Request::Shutdown => self.run(Command::Shutdown),
        };
        handled.unwrap_or_else(|e| Answer::Now(Reply::refused(e)))
    }

    /// Sends a command that has nothing to report.
    fn apply(&mut self, command: Command) -> Result<(), String> {
        match self.packet_loop.call(command)? {
            Outcome::Done => Ok(()),
            Outcome::Refused(e) => Err(e),
            Outcome::Counters(..) | Outcome::Finishing(_) => Err("the packet loop answered out of turn".into()),
        }
    }

    fn run(&mut self, command: Command) -> Handled {
        self.apply(command)?;
        Ok(done(Done::Nothing(Nothing {})))
    }

    /// The CPU wake-up latency bound the emulator holds, µs (None: none), for `info`.
    pub fn set_cpu_latency_us(&mut self, microseconds: Option<u32>) {
        self.cpu_latency_us = microseconds;
    }

    fn info(&self) -> Answer {
        done(Done::Info(Info {
            lab: self.topology.lab.clone(),
            pid: std::process::id(),
            spin_ns: self.spin_ns,
            rt_priority: self.rt_priority.load(Ordering::Relaxed),
            cpu_latency_us: self.cpu_latency_us,
            delay_compensation_ns: self.delay_compensation_ns,
            whole_spread_ns: self.whole_spread_ns,
            start_unix_ns: self.clock.start_unix_ns,
            now_ns: self.clock.start_unix_ns + self.clock.now(),
            topology: serde_json::to_value(&self.topology).unwrap_or_default(),
        }))
    }

    fn counters(&mut self) -> Handled {
        let (links, emulator) = match self.packet_loop.call(Command::ReadCounters)? {
            Outcome::Counters(links, emulator) => (links, emulator),
            Outcome::Refused(e) => return Err(e),
            Outcome::Done | Outcome::Finishing(_) => return Err("the packet loop answered out of turn".into()),
        };
        let of = |id: LinkId| links.get(id.0 as usize).copied().unwrap_or_default();
        let paths = self.paths.iter().map(|(name, f, r)| (name.clone(), PathCounters { forward: of(*f), reverse: of(*r) }));
        Ok(done(Done::Counters(Counters {
            now_ns: self.clock.start_unix_ns + self.clock.now(),
            links: self.link_names.iter().zip(&links).map(|(name, c)| (name.clone(), *c)).collect(),
            paths: paths.collect(),
            emulator,
        })))
    }

    /// Checks every change (trace files read here) before the loop applies any.
    fn set_link(&mut self, set: SetLink) -> Handled {
        if set.link.is_empty() {
            return Err("link: give a link name or a list of names".into());
        }
        let mut params = BTreeMap::new();
        let mut configs = Vec::new();
        for name in &set.link {
            let unknown = || format!("link: no link named {name:?}");
            let id = self.link_names.iter().position(|n| n == name).ok_or_else(unknown)?;
            let next = self.topology.link_params(name).ok_or_else(unknown)?.patched(&set.params);
            let config = link_config(&next, &self.topology.base_dir).map_err(|(f, m)| format!("params.{f}: {m}"))?;
            configs.push((LinkId(id as u32), config));
            params.insert(name.clone(), next);
        }
        self.apply(Command::Reconfigure { links: configs, seed: set.seed })?;
        for (name, next) in &params {
            if let Some(slot) = self.topology.link_params_mut(name) {
                *slot = next.clone();
            }
        }
        Ok(done(Done::LinksSet(LinksSet { link: set.link, params })))
    }

    fn set_routing(&mut self, routing: SetRouting) -> Handled {
        let mode = routing.mode.unwrap_or(self.topology.routing.mode);
        let pins = routing.pins.unwrap_or_else(|| self.topology.routing.pins.clone());
        let resolved = pins_for(&self.topology, &pins).map_err(|(f, m)| format!("{}: {m}", f.trim_start_matches("routing.")))?;
        self.apply(Command::Route { selection: path_selection(mode), pins: resolved })?;
        self.topology.routing.mode = mode;
        self.topology.routing.pins = pins;
        Ok(done(Done::Nothing(Nothing {})))
    }

    fn host(&self, name: &str) -> Result<usize, String> {
        self.host_names.iter().position(|h| h == name).ok_or_else(|| format!("host: no host named {name:?}"))
    }

    fn pcap_start(&mut self, start: PcapStart) -> Handled {
        let host = self.host(&start.host)?;
        if self.capturing[host] {
            return Err("host: a capture is already running on this host".into());
        }
        let writer = writer::pcap(&start.path).map_err(|e| format!("path: {e}"))?;
        self.apply(Command::StartCapture { host: HostId(host as u32), writer })?;
        self.capturing[host] = true;
        Ok(done(Done::Started(Started { path: start.path })))
    }

    fn pcap_stop(&mut self, host_name: &str) -> Handled {
        let host = self.host(host_name)?;
        if !self.capturing[host] {
            return Err("host: no capture is running on this host".into());
        }
        let pending = self.finishing(Command::StopCapture { host: HostId(host as u32) })?;
        self.capturing[host] = false;
        Ok(Answer::AfterWriter(pending, |capture| Done::CaptureStopped(CaptureStopped { capture })))
    }

    fn events_start(&mut self, start: EventsStart) -> Handled {
        if self.logging_events {
            return Err("the event log is already running".into());
        }
        let (lab, names) = (&self.topology.lab, self.link_names.clone());
        let writer = writer::event_log(&start.path, lab, self.clock.start_unix_ns, names).map_err(|e| format!("path: {e}"))?;
        self.apply(Command::StartEvents(writer))?;
        self.logging_events = true;
        Ok(done(Done::Started(Started { path: start.path })))
    }

    fn events_stop(&mut self) -> Handled {
        if !self.logging_events {
            return Err("the event log is not running".into());
        }
        let pending = self.finishing(Command::StopEvents)?;
        self.logging_events = false;
        Ok(Answer::AfterWriter(pending, |log| Done::LogStopped(LogStopped { log })))
    }

    /// Sends a command that takes a writer out of the loop.
    fn finishing(&mut self, command: Command) -> Result<PendingSummary, String> {
        match self.packet_loop.call(command)? {
            Outcome::Finishing(pending) => Ok(pending),
            Outcome::Refused(e) => Err(e),
            Outcome::Done | Outcome::Counters(..) => Err("the packet loop answered out of turn".into()),
        }
    }

    /// Packets sent from now on cross the network `ns` faster than configured, out of the
    /// links' propagation delays (the lab measures its own path latency, docs/emulator.md).
    fn set_delay_compensation(&mut self, ns: u64) -> Handled {
        if ns > MAX_DELAY_COMPENSATION_NS {
            return Err(format!("ns: {ns} is more than 10 ms; a path latency that large is not the emulator's"));
        }
        self.apply(Command::CompensateDelay(ns))?;
        self.delay_compensation_ns = ns;
        Ok(done(Done::DelayCompensation(DelayCompensation { delay_compensation_ns: ns })))
    }
}

fn done(done: Done) -> Answer {
    Answer::Now(Reply::done(done))
}

#[cfg(test)]
mod tests;
