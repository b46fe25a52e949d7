//! The real-time packet loop: reads packets from every host's TUN, moves them through the
//! model with nanosecond wake-ups (`epoll_pwait2`, timer slack 1 ns), writes them to the
//! destination TUN, and serves control requests between packets.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::num::NonZeroU64;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender};
use netmodel::{Delivered, Event, HostId, LinkId, Nanos, Network, Packet};
use rustix::event::{epoll, Timespec};
use serde_json::{json, Map, Value};
use tun_rs::SyncDevice;

use crate::params::LinkParams;
use crate::topology::{pins_for, Pin, RoutingMode, Topology};
use crate::writer::{self, CapturedPacket, PendingSummary, Writer};

/// Monotonic model clock paired with the Unix time at its zero.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    /// Unix ns at model time 0.
    pub start_unix_ns: u64,
}

impl Clock {
    /// A clock starting now.
    pub fn start() -> Self {
        let start_unix_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        Clock { start: Instant::now(), start_unix_ns }
    }
    /// Model time now.
    pub fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }
}

/// A reply to a control request; `pending` writers are joined by the control thread, off the loop.
pub struct Reply {
    /// The JSON reply.
    pub value: Value,
    /// Writers to wait for before replying, with the reply field to put their summary in.
    pub pending: Option<(String, PendingSummary)>,
}

impl Reply {
    fn ok(fields: Value) -> Reply {
        let mut value = json!({"ok": true});
        if let (Some(v), Value::Object(extra)) = (value.as_object_mut(), fields) {
            v.extend(extra);
        }
        Reply { value, pending: None }
    }
    /// An error reply.
    pub fn error(message: impl Into<String>) -> Reply {
        Reply { value: json!({"ok": false, "error": message.into()}), pending: None }
    }
}

/// A request from the control thread.
pub struct ControlMessage {
    /// The request object.
    pub request: Value,
    /// Where the reply goes.
    pub reply: Sender<Reply>,
}

#[derive(Debug, Default, Clone, serde::Serialize)]
struct LoopCounters {
    rx_packets: u64,
    tx_packets: u64,
    unroutable: u64,
    non_ipv4: u64,
    tx_errors: u64,
    timer_late_ns_max: u64,
    timer_late_ns_mean: u64,
    #[serde(skip)]
    late_sum: u128,
    #[serde(skip)]
    late_count: u64,
    pcap_dropped: u64,
    events_dropped: u64,
    rt_switches: u64,
    /// How late each delivered packet left compared with the model's delivery time.
    #[serde(skip)]
    delivery_lateness: crate::lateness::Lateness,
    delivery_late: Option<crate::lateness::LatenessSummary>,
    /// The delay compensation in force (set_delay_compensation), ns.
    delay_compensation_ns: u64,
}

const TOKEN_WAKE: u64 = u64::MAX - 1;
const TOKEN_SIGNAL: u64 = u64::MAX - 2;
const READ_BATCH: usize = 64;
const MAX_PACKET: usize = 65_536;

/// Limits busy-polling to a share of each window. At high packet rates the loop would spin
/// before every packet and never sleep: under SCHED_FIFO the kernel then throttles it (a 50 ms
/// freeze every second) and the endpoints lose the core. Beyond the budget the loop sleeps and
/// handles packets in small batches, which costs microseconds of precision, not throughput.
#[derive(Debug, Default)]
struct SpinBudget {
    window_start: Nanos,
    used: Nanos,
}

const SPIN_WINDOW_NS: Nanos = 100_000_000;
const SPIN_SHARE_PERCENT: Nanos = 30;

impl SpinBudget {
    /// How long the loop may spin before the next due packet.
    fn allowance(&mut self, now: Nanos, spin_ns: Nanos) -> Nanos {
        if now.saturating_sub(self.window_start) >= SPIN_WINDOW_NS {
            self.window_start = now;
            self.used = 0;
        }
        if self.used < SPIN_WINDOW_NS * SPIN_SHARE_PERCENT / 100 {
            spin_ns
        } else {
            0
        }
    }

    fn spent(&mut self, ns: Nanos) {
        self.used += ns;
    }
}

/// Decides when the loop may run under real-time scheduling. A SCHED_FIFO thread that needs
/// the whole core (about 1 Gbit/s of 1500-byte packets here) is throttled by the kernel: a 50 ms
/// freeze every second, far worse than sharing the core. So the loop drops to normal
/// scheduling while it is busy more than 80% of a 100 ms window and returns to real time once
/// it is below 50% again (real time matters when the loop is mostly waiting: then it is what
/// keeps other load from delaying its wake-ups).
#[derive(Debug, Default)]
struct LoopLoad {
    enabled: bool,
    window_start: Nanos,
    idle: Nanos,
    realtime: bool,
}

const LOAD_WINDOW_NS: Nanos = 100_000_000;

impl LoopLoad {
    fn idle(&mut self, ns: Nanos) {
        self.idle += ns;
    }

    /// At the end of a window: Some(wanted real-time state) if it should change.
    fn decide(&mut self, now: Nanos) -> Option<bool> {
        let elapsed = now.saturating_sub(self.window_start);
        if !self.enabled || elapsed < LOAD_WINDOW_NS {
            return None;
        }
        let busy_percent = 100 - (self.idle.min(elapsed) * 100 / elapsed);
        self.window_start = now;
        self.idle = 0;
        let wanted = if busy_percent > 80 { false } else if busy_percent < 50 { true } else { self.realtime };
        (wanted != self.realtime).then(|| {
            self.realtime = wanted;
            wanted
        })
    }
}

/// The packet loop and its state.
pub struct Engine {
    net: Network<Vec<u8>>,
    topology: Topology,
    tuns: Vec<SyncDevice>,
    epoll: OwnedFd,
    wake: Arc<OwnedFd>,
    signal: OwnedFd,
    requests: Receiver<ControlMessage>,
    clock: Clock,
    counters: LoopCounters,
    pcaps: Vec<Option<Writer<CapturedPacket>>>,
    events: Option<Writer<Vec<Event>>>,
    link_names: Arc<Vec<String>>,
    delivered: Vec<Delivered<Vec<u8>>>,
    stopping: bool,
    spin_ns: Nanos,
    spin_budget: SpinBudget,
    load: LoopLoad,
    rt_priority: i32,
    rt_active: bool,
}

impl Engine {
    /// Prepares the loop over the hosts' TUN devices (index = host id).
    pub fn new(
        net: Network<Vec<u8>>,
        topology: Topology,
        tuns: Vec<SyncDevice>,
        wake: Arc<OwnedFd>,
        signal: OwnedFd,
        requests: Receiver<ControlMessage>,
        clock: Clock,
    ) -> std::io::Result<Engine> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        for (i, tun) in tuns.iter().enumerate() {
            epoll::add(&epoll, tun.as_fd(), epoll::EventData::new_u64(i as u64), epoll::EventFlags::IN)?;
        }
        epoll::add(&epoll, wake.as_fd(), epoll::EventData::new_u64(TOKEN_WAKE), epoll::EventFlags::IN)?;
        epoll::add(&epoll, signal.as_fd(), epoll::EventData::new_u64(TOKEN_SIGNAL), epoll::EventFlags::IN)?;
        let link_names = Arc::new((0..net.link_count()).map(|i| net.link_name(LinkId(i as u32)).to_string()).collect());
        let pcaps = tuns.iter().map(|_| None).collect();
        Ok(Engine {
            net,
            topology,
            tuns,
            epoll,
            wake,
            signal,
            requests,
            clock,
            counters: LoopCounters::default(),
            pcaps,
            events: None,
            link_names,
            delivered: Vec::new(),
            stopping: false,
            spin_ns: 0,
            spin_budget: SpinBudget::default(),
            load: LoopLoad::default(),
            rt_priority: 0,
            rt_active: false,
        })
    }

    /// Busy-polls for the last `spin_ns` before each due packet (0: never spin).
    pub fn set_spin(&mut self, spin_ns: Nanos) {
        self.spin_ns = spin_ns;
    }

    fn set_realtime(&mut self, realtime: bool) {
        if realtime == self.rt_active {
            return;
        }
        if realtime {
            self.rt_active = crate::realtime::make_current_thread_realtime(self.rt_priority).is_ok();
        } else {
            crate::realtime::make_current_thread_normal();
            self.rt_active = false;
        }
        self.counters.rt_switches += 1;
    }

    /// Runs the loop under SCHED_FIFO at this priority (0: normal scheduling).
    pub fn set_rt_priority(&mut self, priority: i32) {
        self.rt_priority = priority;
    }

    /// Runs until a signal or a `shutdown` request.
    pub fn run(&mut self) -> std::io::Result<()> {
        if self.rt_priority > 0 {
            match crate::realtime::make_current_thread_realtime(self.rt_priority) {
                Ok(()) => {
                    self.rt_active = true;
                    self.load.enabled = true;
                    self.load.realtime = true;
                }
                Err(e) => eprintln!("warning: real-time scheduling refused ({e}); packet timing may suffer under load"),
            }
        }
        // The default 50 us timer slack would blur every wake-up; ask for the precise timer.
        let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
        let mut ready = Vec::with_capacity(64);
        let mut buf = vec![0u8; MAX_PACKET];
        while !self.stopping {
            let due = self.net.next_wakeup();
            let before = self.clock.now();
            // Sleep until `spin_ns` before the due time, then poll without blocking: a sleeping
            // thread wakes tens of microseconds late on a VM, a polling one within a microsecond.
            let spin = self.spin_budget.allowance(before, self.spin_ns);
            let mut spinning = false;
            let timeout = due.map(|d| {
                let until_due = d.saturating_sub(before);
                let sleep = until_due.saturating_sub(spin);
                spinning = sleep == 0 && until_due > 0;
                Timespec { tv_sec: (sleep / 1_000_000_000) as i64, tv_nsec: (sleep % 1_000_000_000) as i64 }
            });
            if spinning {
                // Let the endpoints sharing this core run first.
                std::thread::yield_now();
            }
            ready.clear();
            match epoll::wait(&self.epoll, rustix::buffer::spare_capacity(&mut ready), timeout.as_ref()) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let woke = self.clock.now();
            if spinning {
                self.spin_budget.spent(woke - before);
            } else {
                self.load.idle(woke - before);
            }
            if let Some(realtime) = self.load.decide(woke) {
                self.set_realtime(realtime);
            }
            if let Some(d) = due.filter(|&d| d <= woke) {
                self.record_lateness(woke - d);
            } else if ready.is_empty() {
                continue;
            }
            for event in &ready {
                match event.data.u64() {
                    TOKEN_WAKE => self.serve_requests(),
                    TOKEN_SIGNAL => {
                        let mut byte = [0u8; 16];
                        let _ = rustix::io::read(self.signal.as_fd(), &mut byte);
                        self.stopping = true;
                    }
                    i => self.read_host(i as usize, &mut buf),
                }
            }
            self.forward_due();
        }
        Ok(())
    }

    fn record_lateness(&mut self, late: Nanos) {
        let c = &mut self.counters;
        c.timer_late_ns_max = c.timer_late_ns_max.max(late);
        c.late_sum += u128::from(late);
        c.late_count += 1;
    }

    fn read_host(&mut self, host: usize, buf: &mut [u8]) {
        for _ in 0..READ_BATCH {
            let n = match self.tuns[host].recv(buf) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => return,
                Err(_) => return,
            };
            let now = self.clock.now();
            self.counters.rx_packets += 1;
            let bytes = buf[..n].to_vec();
            if let Some(w) = &mut self.pcaps[host] {
                w.offer((self.clock.start_unix_ns + now, bytes.clone()), 1);
            }
            match Packet::from_ipv4(bytes) {
                Ok(packet) => {
                    if !self.net.send(now, HostId(host as u32), packet) {
                        self.counters.unroutable += 1;
                    }
                }
                Err(_) => self.counters.non_ipv4 += 1,
            }
        }
    }

    fn forward_due(&mut self) {
        let now = self.clock.now();
        self.net.poll(now, &mut self.delivered);
        for d in self.delivered.drain(..) {
            self.counters.delivery_lateness.record(now.saturating_sub(d.time));
            let host = d.host.0 as usize;
            if let Some(w) = &mut self.pcaps[host] {
                w.offer((self.clock.start_unix_ns + now, d.packet.payload.clone()), 1);
            }
            match self.tuns[host].send(&d.packet.payload) {
                Ok(_) => self.counters.tx_packets += 1,
                Err(_) => self.counters.tx_errors += 1,
            }
        }
        let events: Vec<Event> = self.net.drain_events().collect();
        if !events.is_empty() {
            if let Some(w) = &mut self.events {
                let n = events.len() as u64;
                w.offer(events, n);
            }
        }
    }

    fn serve_requests(&mut self) {
        let mut counter = [0u8; 8];
        let _ = rustix::io::read(self.wake.as_fd(), &mut counter);
        while let Ok(message) = self.requests.try_recv() {
            // Bring the model up to date first so that changes apply at the right moment.
            self.forward_due();
            let reply = self.handle(&message.request);
            let _ = message.reply.send(reply);
        }
    }

    fn handle(&mut self, request: &Value) -> Reply {
        let cmd = request.get("cmd").and_then(Value::as_str).unwrap_or("");
        let handler: fn(&mut Engine, &Value) -> Result<Reply, String> = match cmd {
            "info" => Engine::cmd_info,
            "counters" => Engine::cmd_counters,
            "reset_counters" => Engine::cmd_reset_counters,
            "set_link" => Engine::cmd_set_link,
            "set_routing" => Engine::cmd_set_routing,
            "pcap_start" => Engine::cmd_pcap_start,
            "pcap_stop" => Engine::cmd_pcap_stop,
            "events_start" => Engine::cmd_events_start,
            "events_stop" => Engine::cmd_events_stop,
            "shutdown" => Engine::cmd_shutdown,
            "set_delay_compensation" => Engine::cmd_set_delay_compensation,
            "" => return Reply::error("request has no \"cmd\""),
            other => return Reply::error(format!("unknown cmd {other:?}")),
        };
        handler(self, request).unwrap_or_else(Reply::error)
    }

    fn cmd_info(&mut self, _: &Value) -> Result<Reply, String> {
        Ok(Reply::ok(json!({
            "lab": self.topology.lab,
            "pid": std::process::id(),
            "spin_ns": self.spin_ns,
            "delay_compensation_ns": self.net.delay_compensation(),
            "rt_priority": if self.rt_active { self.rt_priority } else { 0 },
            "start_unix_ns": self.clock.start_unix_ns,
            "now_ns": self.clock.start_unix_ns + self.clock.now(),
            "topology": self.topology,
        })))
    }

    fn cmd_counters(&mut self, _: &Value) -> Result<Reply, String> {
        let links: Map<String, Value> =
            self.net.counters().map(|(name, c)| (name.to_string(), serde_json::to_value(c).unwrap_or(Value::Null))).collect();
        let paths: BTreeMap<&str, Value> = self
            .net
            .paths()
            .map(|(name, f, r)| {
                let counters = |id| links.get(self.net.link_name(id)).cloned().unwrap_or(Value::Null);
                (name, json!({"forward": counters(f), "reverse": counters(r)}))
            })
            .collect();
        let mut c = self.counters.clone();
        c.timer_late_ns_mean = if c.late_count > 0 { (c.late_sum / u128::from(c.late_count)) as u64 } else { 0 };
        c.pcap_dropped = self.pcaps.iter().flatten().map(Writer::dropped).sum();
        c.events_dropped = self.events.as_ref().map_or(0, Writer::dropped);
        c.delivery_late = Some(c.delivery_lateness.summary());
        c.delay_compensation_ns = self.net.delay_compensation();
        Ok(Reply::ok(json!({
            "now_ns": self.clock.start_unix_ns + self.clock.now(),
            "links": links,
            "paths": paths,
            "emulator": c,
        })))
    }

    fn cmd_reset_counters(&mut self, _: &Value) -> Result<Reply, String> {
        self.net.reset_counters();
        self.counters = LoopCounters::default();
        Ok(Reply::ok(json!({})))
    }

    fn cmd_set_link(&mut self, request: &Value) -> Result<Reply, String> {
        let names: Vec<String> = match request.get("link") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a.iter().map(|v| v.as_str().map(str::to_string).ok_or("link: names must be strings")).collect::<Result<_, _>>()?,
            _ => return Err("link: give a link name or a list of names".into()),
        };
        let changes = request.get("params").and_then(Value::as_object).ok_or("params: must be an object")?;
        let seed = match request.get("seed") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or("seed: must be a non-negative integer")?),
        };
        // Validate every change before applying any, so a bad request changes nothing.
        let mut planned = Vec::new();
        for name in &names {
            let id = self.net.link_id(name).ok_or_else(|| format!("link: no link named {name:?}"))?;
            let current = self.topology.link_params_mut(name).ok_or_else(|| format!("link: no link named {name:?}"))?;
            let mut merged = serde_json::to_value(&*current).map_err(|e| e.to_string())?;
            if let Some(m) = merged.as_object_mut() {
                for (k, v) in changes {
                    if v.is_null() {
                        m.remove(k);
                    } else {
                        m.insert(k.clone(), v.clone());
                    }
                }
                if changes.contains_key("rate") {
                    m.remove("trace");
                }
                if changes.contains_key("trace") {
                    m.remove("rate");
                }
            }
            let params: LinkParams = serde_path_to_error::deserialize(merged).map_err(|e| format!("params.{}: {}", e.path(), e.inner()))?;
            let config = params.to_config(&self.topology.base_dir).map_err(|(f, m)| format!("params.{f}: {m}"))?;
            planned.push((name.clone(), id, params, config));
        }
        let now = self.clock.now();
        let mut effective = Map::new();
        for (name, id, params, config) in planned {
            self.net.reconfigure(now, id, config).map_err(|e| e.to_string())?;
            if let Some(seed) = seed {
                self.net.reseed(id, seed);
            }
            effective.insert(name.clone(), serde_json::to_value(&params).unwrap_or(Value::Null));
            if let Some(slot) = self.topology.link_params_mut(&name) {
                *slot = params;
            }
        }
        Ok(Reply::ok(json!({"link": names, "params": effective})))
    }

    fn cmd_set_routing(&mut self, request: &Value) -> Result<Reply, String> {
        let mode: RoutingMode = match request.get("mode") {
            None => self.topology.routing.mode,
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("mode: {e}"))?,
        };
        let pins: Vec<Pin> = match request.get("pins") {
            None => self.topology.routing.pins.clone(),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("pins: {e}"))?,
        };
        let resolved = pins_for(&self.topology, &pins).map_err(|(f, m)| format!("{}: {m}", f.trim_start_matches("routing.")))?;
        self.net.set_routing(mode.into(), &resolved).map_err(|e| e.to_string())?;
        self.topology.routing.mode = mode;
        self.topology.routing.pins = pins;
        Ok(Reply::ok(json!({})))
    }

    fn host_index(&self, request: &Value) -> Result<usize, String> {
        let host = request.get("host").and_then(Value::as_str).ok_or("host: missing")?;
        self.net.host_names().position(|h| h == host).ok_or_else(|| format!("host: no host named {host:?}"))
    }

    fn path_arg(request: &Value) -> Result<PathBuf, String> {
        request.get("path").and_then(Value::as_str).map(PathBuf::from).ok_or_else(|| "path: missing".to_string())
    }

    fn cmd_pcap_start(&mut self, request: &Value) -> Result<Reply, String> {
        let host = self.host_index(request)?;
        let path = Self::path_arg(request)?;
        if self.pcaps[host].is_some() {
            return Err("host: a capture is already running on this host".into());
        }
        self.pcaps[host] = Some(writer::pcap(&path)?);
        Ok(Reply::ok(json!({"path": path})))
    }

    fn cmd_pcap_stop(&mut self, request: &Value) -> Result<Reply, String> {
        let host = self.host_index(request)?;
        let w = self.pcaps[host].take().ok_or("host: no capture is running on this host")?;
        Ok(Reply { pending: Some(("capture".into(), w.finish())), ..Reply::ok(json!({})) })
    }

    fn cmd_events_start(&mut self, request: &Value) -> Result<Reply, String> {
        let path = Self::path_arg(request)?;
        if self.events.is_some() {
            return Err("the event log is already running".into());
        }
        self.events = Some(writer::event_log(&path, &self.topology.lab, self.clock.start_unix_ns, self.link_names.clone())?);
        self.net.record_events(true);
        Ok(Reply::ok(json!({"path": path})))
    }

    fn cmd_events_stop(&mut self, _: &Value) -> Result<Reply, String> {
        self.forward_due();
        self.net.record_events(false);
        let w = self.events.take().ok_or("the event log is not running")?;
        Ok(Reply { pending: Some(("log".into(), w.finish())), ..Reply::ok(json!({})) })
    }

    /// `{"cmd": "set_delay_compensation", "ns": N}`: packets sent from now on cross the
    /// network N ns faster than configured, out of the links' propagation delays (the lab
    /// measures its own path latency and deducts it, docs/emulator.md).
    fn cmd_set_delay_compensation(&mut self, request: &Value) -> Result<Reply, String> {
        let ns = request.get("ns").and_then(Value::as_u64).ok_or("ns: expected a non-negative integer (nanoseconds)")?;
        if ns > 10_000_000 {
            return Err(format!("ns: {ns} is more than 10 ms; a path latency that large is not the emulator's"));
        }
        self.net.set_delay_compensation(ns);
        Ok(Reply::ok(json!({"delay_compensation_ns": ns})))
    }

    fn cmd_shutdown(&mut self, _: &Value) -> Result<Reply, String> {
        self.stopping = true;
        Ok(Reply::ok(json!({})))
    }

    /// Closes every writer (waiting for them) at the end of a run.
    pub fn finish_writers(&mut self) {
        for w in self.pcaps.iter_mut().filter_map(Option::take) {
            w.finish().wait();
        }
        if let Some(w) = self.events.take() {
            w.finish().wait();
        }
    }
}
