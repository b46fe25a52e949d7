//! The coordinator of one page load: discovery timers, per-origin queues, connection pools and
//! schedulers. One task owns all state; connection set-ups and fetches run in their own tasks
//! and report back over a channel.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::Uri;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::fetch::{fetch, Fetched, Target};
use super::mode::{Pool, Protocol, Scheduler};
use super::{ConnectionResult, LoadKind, LoadResult, LoadStatus, Loader, ObjectResult, SubflowResult, SCHEMA_VERSION};
use crate::client::{self, Connected, Sender};

/// How often the MPTCP subflow count is read while a connection lives.
const SUBFLOW_POLL: Duration = Duration::from_millis(5);

/// How long the end of a load waits for QUIC endpoints to send their CONNECTION_CLOSE (the
/// draining period after it is not waited for).
const QUIC_CLOSE_GRACE: Duration = Duration::from_millis(20);

struct Obj {
    origin: usize,
    target: Target,
    parent: Option<usize>,
    children: Vec<usize>,
    delay: Duration,
    discovered: Option<Instant>,
    queued: Option<Instant>,
    queue_position: Option<u64>,
    started: Option<Instant>,
    first_byte: Option<Instant>,
    finished: Option<Instant>,
    conn: Option<usize>,
    status: Option<u16>,
    bytes: u64,
    error: Option<String>,
    resolved: bool,
    /// Its request went out on a connection that had already delivered a whole response.
    proven: bool,
    /// The error of a first attempt that was resent (see [`Engine::fetched`]).
    resent_after: Option<String>,
}

struct OriginState {
    hostname: String,
    queue: VecDeque<usize>,
    conns: Vec<usize>,
    /// Requests assigned so far (round-robin counter).
    assigned: u64,
    /// Requests queued so far.
    queued: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ConnState {
    Connecting,
    Ready,
    /// The peer closed it (HTTP/1.1 keep-alive ended), or an idle timeout did.
    Closed,
    Failed,
}

struct Conn {
    origin: usize,
    state: ConnState,
    sender: Option<Sender>,
    /// HTTP/1.1: a request is in flight.
    busy: bool,
    /// Multiplexed modes: requests assigned before the connection was ready.
    pending: VecDeque<usize>,
    /// Expected body bytes of every request assigned.
    assigned_bytes: u64,
    received: Arc<AtomicU64>,
    requests: u32,
    /// Responses received whole.
    delivered: u32,
    connect_start: Instant,
    tcp_connected: Option<Instant>,
    ready: Option<Instant>,
    local: Option<String>,
    remote: String,
    error: Option<String>,
    /// MPTCP: most subflows seen (initial included).
    subflows: Option<Arc<AtomicU8>>,
    mptcp_fd: Option<Arc<OwnedFd>>,
    drivers: Vec<tokio::task::JoinHandle<()>>,
    endpoint: Option<quinn::Endpoint>,
    conn_id: Option<String>,
    sampler: Option<crate::instrument::SamplerHandle>,
    samples_file: Option<String>,
    qlog_file: Option<String>,
    resumed: Option<bool>,
    zero_rtt: Option<Arc<AtomicU8>>,
}

impl Conn {
    /// Whether a ready connection is gone: its sender says so (HTTP/1.1, HTTP/2), or its
    /// driver task ended (the first driver is the HTTP connection's; HTTP/3's ends with the
    /// QUIC connection, e.g. at its idle timeout).
    fn gone(&self) -> bool {
        self.sender.as_ref().is_none_or(Sender::is_closed) || self.drivers.first().is_some_and(|d| d.is_finished())
    }

    /// Outstanding response bytes: assigned minus received.
    fn outstanding(&self) -> u64 {
        self.assigned_bytes.saturating_sub(self.received.load(Ordering::Relaxed))
    }
}

enum Event {
    /// A connection set-up ended (boxed: an established connection is large).
    Connected { conn: usize, result: Result<Box<Connected>, String>, at: Instant },
    Fetched { obj: usize, conn: usize, fetched: Fetched, sender: Sender },
}

struct Engine<'a> {
    loader: &'a Loader,
    start: Instant,
    objects: Vec<Obj>,
    origins: Vec<OriginState>,
    conns: Vec<Conn>,
    /// Discovery timers: (due, sequence, object).
    timers: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    timer_seq: u64,
    unresolved: usize,
    tx: mpsc::UnboundedSender<Event>,
    rx: mpsc::UnboundedReceiver<Event>,
    tasks: JoinSet<()>,
}

fn target_uri(scheme: &str, host: &str, port: u16, default_port: u16, path: &str) -> Result<Uri, String> {
    let authority = if port == default_port { host.to_string() } else { format!("{host}:{port}") };
    Uri::builder()
        .scheme(scheme)
        .authority(authority.as_str())
        .path_and_query(path)
        .build()
        .map_err(|e| format!("request URI for //{host}{path}: {e}"))
}

fn ms(at: Option<Instant>, start: Instant) -> Option<f64> {
    at.map(|t| {
        if t >= start {
            t.duration_since(start).as_secs_f64() * 1000.0
        } else {
            -(start.duration_since(t).as_secs_f64() * 1000.0)
        }
    })
}

/// Total subflows of an MPTCP connection now (the initial subflow included).
fn read_subflows(fd: &OwnedFd) -> Option<u8> {
    let info = crate::sockopt::mptcp_info(fd.as_fd()).ok()?;
    Some(if info.fallback() { 1 } else { info.subflows.saturating_add(1) })
}

pub(super) async fn run(loader: &Loader) -> LoadResult {
    let (tx, rx) = mpsc::unbounded_channel();
    let start = Instant::now();
    let start_unix_ns = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)).unwrap_or(0);
    let mut engine = Engine::new(loader, start, tx, rx);
    let status = engine.run().await;
    // A last sample of every connection while it is still open, and the files flushed.
    for conn in &mut engine.conns {
        if let Some(sampler) = conn.sampler.take() {
            if let Err(e) = sampler.stop().await {
                conn.error.get_or_insert_with(|| format!("samples: {e}"));
            }
        }
    }
    // Close QUIC connections now and give the endpoints a moment to send CONNECTION_CLOSE, so
    // that servers see the end of the load at once instead of after their idle timeout.
    let mut closing = Vec::new();
    for conn in &mut engine.conns {
        if let Some(e) = conn.endpoint.take() {
            e.close(quinn::VarInt::from_u32(0), b"page loaded");
            closing.push(e);
        }
    }
    let _ = tokio::time::timeout(QUIC_CLOSE_GRACE, async {
        for e in &closing {
            e.wait_idle().await;
        }
    })
    .await;
    engine.finish(status, start_unix_ns)
}

impl<'a> Engine<'a> {
    fn new(loader: &'a Loader, start: Instant, tx: mpsc::UnboundedSender<Event>, rx: mpsc::UnboundedReceiver<Event>) -> Engine<'a> {
        let m = &loader.manifest;
        let o = &loader.options;
        let origins: Vec<OriginState> =
            m.origins.iter().map(|o| OriginState { hostname: o.hostname.clone(), queue: VecDeque::new(), conns: Vec::new(), assigned: 0, queued: 0 }).collect();
        let (scheme, port, default_port) = match o.mode.protocol {
            Protocol::H1c => ("http", o.http_port, 80),
            _ => ("https", o.https_port, 443),
        };
        let mut objects: Vec<Obj> = m
            .objects
            .iter()
            .map(|ob| {
                let origin = m.origins.iter().position(|x| x.hostname == ob.origin).unwrap_or(0);
                let host = if port == default_port { ob.origin.clone() } else { format!("{}:{port}", ob.origin) };
                // A validated manifest has valid hostnames and paths; a URI that still does not
                // build fails that object at run time instead of panicking.
                let (uri, error) = match target_uri(scheme, &ob.origin, port, default_port, &ob.path) {
                    Ok(u) => (u, None),
                    Err(e) => (Uri::default(), Some(e)),
                };
                Obj {
                    origin,
                    target: Target { uri, host, expected: ob.size },
                    parent: None,
                    children: Vec::new(),
                    delay: Duration::from_millis(ob.delay_ms),
                    discovered: None,
                    queued: None,
                    queue_position: None,
                    started: None,
                    first_byte: None,
                    finished: None,
                    conn: None,
                    status: None,
                    bytes: 0,
                    error,
                    resolved: false,
                    proven: false,
                    resent_after: None,
                }
            })
            .collect();
        for (i, ob) in m.objects.iter().enumerate() {
            if let Some(Ok((host, path))) = ob.parent_key() {
                if let Some(p) = m.objects.iter().position(|x| x.origin == host && x.path == path) {
                    objects[i].parent = Some(p);
                    objects[p].children.push(i);
                }
            }
        }
        let unresolved = objects.len();
        Engine {
            loader,
            start,
            objects,
            origins,
            conns: Vec::new(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            unresolved,
            tx,
            rx,
            tasks: JoinSet::new(),
        }
    }

    async fn run(&mut self) -> LoadStatus {
        let deadline = self.start + self.loader.options.timeout;
        match self.objects.iter().position(|o| o.parent.is_none()) {
            Some(root) => {
                self.objects[root].discovered = Some(self.start);
                self.push_timer(self.start, root);
            }
            None => return LoadStatus::Failed,
        }
        // Objects no root reaches cannot exist in a validated manifest; fail them, never hang.
        let reachable = self.reachable();
        for i in 0..self.objects.len() {
            if !reachable[i] {
                self.fail(i, "not reachable from the root".into(), None);
            }
        }
        loop {
            self.fire_timers();
            for o in 0..self.origins.len() {
                self.dispatch(o);
            }
            if self.unresolved == 0 {
                return if self.objects.iter().all(|o| o.error.is_none()) { LoadStatus::Ok } else { LoadStatus::Failed };
            }
            if Instant::now() >= deadline {
                return LoadStatus::Timeout;
            }
            let next_timer = self.timers.peek().map(|Reverse((due, _, _))| *due).unwrap_or(deadline).min(deadline);
            tokio::select! {
                event = self.rx.recv() => {
                    if let Some(event) = event {
                        self.handle(event);
                    }
                    while let Ok(event) = self.rx.try_recv() {
                        self.handle(event);
                    }
                }
                _ = tokio::time::sleep_until(next_timer.into()) => {}
            }
            while self.tasks.try_join_next().is_some() {}
        }
    }

    fn reachable(&self) -> Vec<bool> {
        let mut seen = vec![false; self.objects.len()];
        let mut stack: Vec<usize> = self.objects.iter().enumerate().filter(|(_, o)| o.parent.is_none()).map(|(i, _)| i).take(1).collect();
        while let Some(i) = stack.pop() {
            if !std::mem::replace(&mut seen[i], true) {
                stack.extend(self.objects[i].children.iter().copied());
            }
        }
        seen
    }

    fn push_timer(&mut self, due: Instant, obj: usize) {
        self.timer_seq += 1;
        self.timers.push(Reverse((due, self.timer_seq, obj)));
    }

    /// Moves every object whose discovery time has come into its origin's queue.
    fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((due, _, obj))) = self.timers.peek().copied() {
            if due > now {
                break;
            }
            self.timers.pop();
            if self.objects[obj].resolved {
                continue;
            }
            if let Some(e) = self.objects[obj].error.clone() {
                self.fail(obj, e, None);
                continue;
            }
            self.objects[obj].queued = Some(now);
            let origin = self.objects[obj].origin;
            self.objects[obj].queue_position = Some(self.origins[origin].queued);
            self.origins[origin].queued += 1;
            self.origins[origin].queue.push_back(obj);
        }
    }

    fn dispatch(&mut self, origin: usize) {
        match self.loader.options.mode.pool {
            Pool::OnDemand => self.dispatch_on_demand(origin),
            Pool::Fixed(n) => self.dispatch_fixed(origin, n as usize),
        }
    }

    /// HTTP/1.1 like a browser: an idle connection takes the next request; otherwise a new
    /// connection is opened while requests outnumber connections being set up and the origin
    /// has fewer than the limit.
    fn dispatch_on_demand(&mut self, origin: usize) {
        let limit = self.loader.options.h1_connections as usize;
        while let Some(&obj) = self.origins[origin].queue.front() {
            let mut idle = None;
            for &c in &self.origins[origin].conns {
                let conn = &mut self.conns[c];
                if conn.state == ConnState::Ready && !conn.busy {
                    if conn.gone() {
                        conn.state = ConnState::Closed;
                        continue;
                    }
                    idle = Some(c);
                    break;
                }
            }
            if let Some(c) = idle {
                self.origins[origin].queue.pop_front();
                self.start_fetch(obj, c);
                continue;
            }
            let (mut connecting, mut live) = (0, 0);
            for &c in &self.origins[origin].conns {
                match self.conns[c].state {
                    ConnState::Connecting => {
                        connecting += 1;
                        live += 1;
                    }
                    ConnState::Ready => live += 1,
                    _ => {}
                }
            }
            if self.origins[origin].queue.len() > connecting && live < limit {
                self.open(origin);
                continue;
            }
            break;
        }
    }

    /// Multiplexed modes: all N connections open with the origin's first request; each queued
    /// request is assigned by the scheduler at once, and sent as soon as its connection is ready.
    fn dispatch_fixed(&mut self, origin: usize, n: usize) {
        if self.origins[origin].queue.is_empty() {
            return;
        }
        if self.origins[origin].conns.is_empty() {
            for _ in 0..n {
                self.open(origin);
            }
        }
        // A connection closed while idle (the QUIC or server idle timeout, 30 s: a slow load
        // can leave an origin idle that long) is replaced by a new one, as a browser opens a
        // new connection for a request to an origin whose pooled one is gone.
        let gone: Vec<usize> = self.origins[origin].conns.iter().copied().filter(|&c| self.conns[c].state == ConnState::Ready && self.conns[c].gone()).collect();
        for c in gone {
            self.conns[c].state = ConnState::Closed;
            self.origins[origin].conns.retain(|&x| x != c);
            self.open(origin);
        }
        while let Some(obj) = self.origins[origin].queue.pop_front() {
            let conns = &self.origins[origin].conns;
            let chosen = match self.loader.options.scheduler {
                Scheduler::RoundRobin => conns[(self.origins[origin].assigned % conns.len() as u64) as usize],
                Scheduler::LeastOutstanding => {
                    let usable = conns.iter().copied().filter(|&c| self.conns[c].state != ConnState::Failed);
                    // Fewest outstanding bytes; ties go to a ready connection, then the lowest id.
                    usable.min_by_key(|&c| (self.conns[c].outstanding(), self.conns[c].state != ConnState::Ready, c)).unwrap_or(conns[0])
                }
            };
            self.origins[origin].assigned += 1;
            self.objects[obj].conn = Some(chosen);
            let expected = self.objects[obj].target.expected;
            let conn = &mut self.conns[chosen];
            match conn.state {
                ConnState::Ready => {
                    conn.assigned_bytes += expected;
                    self.start_fetch(obj, chosen);
                }
                ConnState::Connecting => {
                    conn.assigned_bytes += expected;
                    conn.pending.push_back(obj);
                }
                ConnState::Failed | ConnState::Closed => {
                    let e = conn.error.clone().unwrap_or_else(|| "connection closed".into());
                    self.fail(obj, format!("connection {chosen}: {e}"), None);
                }
            }
        }
    }

    fn open(&mut self, origin: usize) {
        let id = self.conns.len();
        let addr = self.loader.addrs[origin];
        let mptcp = self.loader.options.mode.transport == super::Transport::Mptcp;
        self.conns.push(Conn {
            origin,
            state: ConnState::Connecting,
            sender: None,
            busy: false,
            pending: VecDeque::new(),
            assigned_bytes: 0,
            received: Arc::new(AtomicU64::new(0)),
            requests: 0,
            delivered: 0,
            connect_start: Instant::now(),
            tcp_connected: None,
            ready: None,
            local: None,
            remote: addr.to_string(),
            error: None,
            subflows: mptcp.then(|| Arc::new(AtomicU8::new(0))),
            mptcp_fd: None,
            drivers: Vec::new(),
            endpoint: None,
            conn_id: None,
            sampler: None,
            samples_file: None,
            qlog_file: None,
            resumed: None,
            zero_rtt: None,
        });
        self.origins[origin].conns.push(id);
        let connector = self.loader.connector.clone();
        let hostname = self.origins[origin].hostname.clone();
        let timeout = self.loader.set_up_timeout();
        let tx = self.tx.clone();
        self.tasks.spawn(async move {
            let result = client::within(timeout, addr, connector.connect(&hostname, addr)).await.map(Box::new);
            let _ = tx.send(Event::Connected { conn: id, result, at: Instant::now() });
        });
    }

    fn start_fetch(&mut self, obj: usize, c: usize) {
        let conn = &mut self.conns[c];
        let sender = match &conn.sender {
            Some(s) => match s.clone_multiplexed() {
                Some(clone) => Some(clone),
                None => {
                    conn.busy = true;
                    if self.loader.options.mode.pool == Pool::OnDemand {
                        conn.assigned_bytes += self.objects[obj].target.expected;
                    }
                    conn.sender.take()
                }
            },
            None => None,
        };
        let Some(sender) = sender else {
            self.fail(obj, format!("connection {c}: no request sender"), None);
            return;
        };
        conn.requests += 1;
        self.objects[obj].conn = Some(c);
        self.objects[obj].proven = conn.delivered > 0;
        let target = Target { uri: self.objects[obj].target.uri.clone(), host: self.objects[obj].target.host.clone(), expected: self.objects[obj].target.expected };
        let received = conn.received.clone();
        let tx = self.tx.clone();
        self.tasks.spawn(async move {
            let (fetched, sender) = fetch(sender, target, received).await;
            let _ = tx.send(Event::Fetched { obj, conn: c, fetched, sender });
        });
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Connected { conn: c, result, at } => self.connected(c, result.map(|connected| *connected), at),
            Event::Fetched { obj, conn: c, fetched, sender } => self.fetched(obj, c, fetched, sender),
        }
    }

    fn connected(&mut self, c: usize, result: Result<Connected, String>, at: Instant) {
        let origin = self.conns[c].origin;
        match result {
            Ok(connected) => {
                let conn = &mut self.conns[c];
                conn.state = ConnState::Ready;
                conn.ready = Some(at);
                conn.tcp_connected = connected.tcp_connected;
                conn.local = connected.local.map(|a| a.to_string());
                conn.sender = Some(connected.sender);
                conn.drivers = connected.drivers;
                conn.endpoint = connected.endpoint;
                conn.conn_id = Some(connected.conn_id);
                conn.samples_file = connected.sampler.as_ref().map(|s| s.path().display().to_string());
                conn.sampler = connected.sampler;
                conn.qlog_file = connected.qlog.map(|p| p.display().to_string());
                conn.resumed = connected.resumed;
                conn.zero_rtt = connected.zero_rtt;
                if let (Some(fd), Some(count)) = (connected.tcp_fd, conn.subflows.clone()) {
                    let fd = Arc::new(fd);
                    conn.mptcp_fd = Some(fd.clone());
                    conn.drivers.push(tokio::spawn(async move {
                        loop {
                            if let Some(n) = read_subflows(&fd) {
                                count.fetch_max(n, Ordering::Relaxed);
                            }
                            tokio::time::sleep(SUBFLOW_POLL).await;
                        }
                    }));
                }
                let pending: Vec<usize> = conn.pending.drain(..).collect();
                for obj in pending {
                    self.start_fetch(obj, c);
                }
            }
            Err(e) => {
                let conn = &mut self.conns[c];
                conn.state = ConnState::Failed;
                conn.ready = None;
                conn.error = Some(e.clone());
                let pending: Vec<usize> = conn.pending.drain(..).collect();
                for obj in pending {
                    self.fail(obj, format!("connection {c}: {e}"), None);
                }
                // HTTP/1.1: with no other connection alive or coming, the origin's queue fails.
                let alive = self.origins[origin].conns.iter().any(|&x| matches!(self.conns[x].state, ConnState::Connecting | ConnState::Ready));
                if !alive {
                    let queued: Vec<usize> = self.origins[origin].queue.drain(..).collect();
                    for obj in queued {
                        self.fail(obj, format!("connection {c}: {e}"), None);
                    }
                }
            }
        }
    }

    fn fetched(&mut self, obj: usize, c: usize, fetched: Fetched, sender: Sender) {
        let conn = &mut self.conns[c];
        if let (Some(fd), Some(count)) = (&conn.mptcp_fd, &conn.subflows) {
            if let Some(n) = read_subflows(fd) {
                count.fetch_max(n, Ordering::Relaxed);
            }
        }
        if matches!(sender, Sender::H1(_)) {
            conn.busy = false;
            if sender.is_closed() || fetched.error.is_some() {
                // After an error the HTTP/1.1 connection is in an unknown state: not reused.
                conn.state = ConnState::Closed;
            } else {
                conn.sender = Some(sender);
            }
        }
        let o = &mut self.objects[obj];
        o.started = fetched.started;
        o.first_byte = fetched.first_byte;
        o.finished = Some(fetched.finished);
        o.status = fetched.status;
        o.bytes = fetched.bytes;
        match fetched.error {
            Some(e) if fetched.first_byte.is_none() && self.objects[obj].proven && self.objects[obj].resent_after.is_none() => self.resend(obj, e),
            Some(e) => self.fail(obj, e, Some(fetched.finished)),
            None => {
                self.conns[c].delivered += 1;
                self.objects[obj].resolved = true;
                self.unresolved -= 1;
                let children = self.objects[obj].children.clone();
                for child in children {
                    let due = fetched.finished + self.objects[child].delay;
                    self.objects[child].discovered = Some(due);
                    self.push_timer(due, child);
                }
            }
        }
    }

    /// Sends a request again whose first attempt failed before any response byte on a
    /// connection that had already delivered a response, once, as Chromium does
    /// (`HttpNetworkTransaction::ShouldResendRequest`): a reused keep-alive connection can be
    /// closed by the server's idle timeout just as the request goes out, which tells nothing
    /// about the page. It goes back to the front of its origin's queue (keeping its queue
    /// position), and the dispatcher gives it to a live or new connection.
    fn resend(&mut self, obj: usize, error: String) {
        let o = &mut self.objects[obj];
        o.resent_after = Some(error);
        o.started = None;
        o.first_byte = None;
        o.finished = None;
        o.status = None;
        o.bytes = 0;
        o.conn = None;
        o.proven = false;
        let origin = o.origin;
        self.origins[origin].queue.push_front(obj);
    }

    /// Marks an object failed and every descendant as never requested.
    fn fail(&mut self, obj: usize, error: String, finished: Option<Instant>) {
        if self.objects[obj].resolved {
            return;
        }
        let o = &mut self.objects[obj];
        o.error = Some(error);
        if finished.is_some() {
            o.finished = finished;
        }
        o.resolved = true;
        self.unresolved -= 1;
        let key = format!("//{}{}", self.origins[self.objects[obj].origin].hostname, self.loader.manifest.objects[obj].path);
        let children = self.objects[obj].children.clone();
        for child in children {
            self.fail(child, format!("not requested: parent {key} failed"), None);
        }
    }

    fn finish(mut self, status: LoadStatus, start_unix_ns: u64) -> LoadResult {
        let timeout_ms = self.loader.options.timeout.as_millis();
        if status == LoadStatus::Timeout {
            self.mark_timed_out(timeout_ms);
        }
        // Last subflow reading, then stop everything this load started.
        let subflow_details = self.read_subflows();
        self.stop();
        let objects = self.object_results();
        let connections = self.connection_results(subflow_details);
        let plt_ms = if status == LoadStatus::Ok { objects.iter().filter_map(|o| o.finished_ms).reduce(f64::max) } else { None };
        LoadResult {
            schema_version: SCHEMA_VERSION,
            kind: LoadKind::PageLoad,
            config: contract::load::ClientConfig::Engine(self.loader.config()),
            status,
            error: load_error(status, &objects, timeout_ms),
            start_unix_ns,
            plt_ms,
            bytes: objects.iter().map(|o| o.bytes).sum(),
            objects,
            connections,
            browser: None,
        }
    }

    /// Says why each object left unresolved at the timeout is incomplete.
    fn mark_timed_out(&mut self, timeout_ms: u128) {
        for o in self.objects.iter_mut().filter(|o| !o.resolved) {
            o.error = Some(if o.started.is_some() {
                format!("timeout after {timeout_ms} ms: response incomplete")
            } else if o.queued.is_some() {
                format!("timeout after {timeout_ms} ms: queued, never sent")
            } else {
                format!("timeout after {timeout_ms} ms: not yet discovered")
            });
        }
    }

    /// Per connection, its MPTCP subflows as the kernel reports them now (None without MPTCP);
    /// the subflow count is raised to what is read.
    fn read_subflows(&self) -> Vec<Option<Vec<SubflowResult>>> {
        let mut subflow_details = Vec::with_capacity(self.conns.len());
        for conn in &self.conns {
            let mut details = None;
            if let (Some(fd), Some(count)) = (&conn.mptcp_fd, &conn.subflows) {
                if let Some(n) = read_subflows(fd) {
                    count.fetch_max(n, Ordering::Relaxed);
                }
                details = crate::sockopt::mptcp_subflow_tcp_infos(fd.as_fd()).ok().map(|subs| {
                    subs.iter()
                        .map(|s| SubflowResult {
                            local: s.local.map(|a| a.to_string()),
                            remote: s.remote.map(|a| a.to_string()),
                            bytes_received: s.tcp.bytes_received,
                            bytes_acked: s.tcp.bytes_acked,
                            rtt_us: s.tcp.rtt_us,
                        })
                        .collect()
                });
            }
            subflow_details.push(details);
        }
        subflow_details
    }

    /// Stops every task, connection driver and QUIC endpoint this load started.
    fn stop(&mut self) {
        self.tasks.abort_all();
        for conn in &mut self.conns {
            conn.sender = None;
            for d in conn.drivers.drain(..) {
                d.abort();
            }
            if let Some(e) = conn.endpoint.take() {
                e.close(quinn::VarInt::from_u32(0), b"page loaded");
            }
        }
    }

    fn object_results(&self) -> Vec<ObjectResult> {
        let start = self.start;
        let m = &self.loader.manifest;
        self.objects
            .iter()
            .zip(&m.objects)
            .map(|(o, mo)| ObjectResult {
                origin: mo.origin.clone(),
                path: mo.path.clone(),
                parent: o.parent.map(|p| format!("//{}{}", m.objects[p].origin, m.objects[p].path)),
                delay_ms: mo.delay_ms,
                queue_position: o.queue_position,
                connection: o.conn,
                status: o.status,
                expected_bytes: mo.size,
                bytes: o.bytes,
                discovered_ms: ms(o.discovered, start),
                queued_ms: ms(o.queued, start),
                started_ms: ms(o.started, start),
                first_byte_ms: ms(o.first_byte, start),
                finished_ms: ms(o.finished, start),
                error: o.error.clone(),
                resent_after: o.resent_after.clone(),
            })
            .collect()
    }

    fn connection_results(&self, subflow_details: Vec<Option<Vec<SubflowResult>>>) -> Vec<ConnectionResult> {
        let start = self.start;
        let protocol = self.loader.options.mode.protocol;
        let transport = self.loader.options.mode.transport;
        self.conns
            .iter()
            .zip(subflow_details)
            .enumerate()
            .map(|(id, (c, subflow_details))| ConnectionResult {
                id,
                origin: self.origins[c.origin].hostname.clone(),
                protocol,
                transport,
                local: c.local.clone(),
                remote: c.remote.clone(),
                connect_start_ms: ms(Some(c.connect_start), start),
                tcp_connect_ms: c.tcp_connected.map(|t| t.duration_since(c.connect_start).as_secs_f64() * 1000.0),
                handshake_ms: c.ready.map(|t| t.duration_since(c.connect_start).as_secs_f64() * 1000.0),
                requests: c.requests,
                bytes: c.received.load(Ordering::Relaxed),
                subflows: c.subflows.as_ref().map(|s| s.load(Ordering::Relaxed)).filter(|&n| n > 0),
                subflow_details,
                error: c.error.clone(),
                conn_id: c.conn_id.clone(),
                samples_file: c.samples_file.clone(),
                qlog_file: c.qlog_file.clone(),
                resumed: c.resumed,
                zero_rtt: c.zero_rtt.as_ref().and_then(|v| match v.load(Ordering::Relaxed) {
                    1 => Some(true),
                    2 => Some(false),
                    _ => None,
                }),
            })
            .collect()
    }
}

/// The load's error: the timeout, or the first failed object (None when it loaded).
fn load_error(status: LoadStatus, objects: &[ObjectResult], timeout_ms: u128) -> Option<String> {
    let failed: Vec<&ObjectResult> = objects.iter().filter(|o| o.error.is_some()).collect();
    match status {
        LoadStatus::Ok => None,
        LoadStatus::Timeout => Some(format!("timeout after {timeout_ms} ms: {} of {} objects incomplete", failed.len(), objects.len())),
        LoadStatus::Failed => Some(match failed.first() {
            Some(f) => format!("{} of {} objects failed; first: //{}{}: {}", failed.len(), objects.len(), f.origin, f.path, f.error.as_deref().unwrap_or("")),
            None => "no root object".into(),
        }),
    }
}
