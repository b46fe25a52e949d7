//! A dumbbell network: hosts with access links on two sides, bottleneck paths between them.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::Ipv4Addr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use siphasher::sip::SipHasher13;

use crate::config::{ConfigError, LinkConfig};
use crate::link::{Event, EventLog, Link, LinkCounters, SegmentShape};
use crate::packet::{FlowKey, Packet, Segmented};
use crate::Nanos;

/// Index of a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostId(pub u32);
/// Index of a bottleneck path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathId(pub u32);
/// Index of a link direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub u32);

/// Side of the dumbbell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Clients.
    Left,
    /// Servers.
    Right,
}

/// How a packet between the sides picks its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathSelection {
    /// `(SA ^ DA ^ SP ^ DP ^ PT) mod N`, the hash of 001 §IV-C1 (symmetric).
    EcmpXor,
    /// Keyed SipHash of the direction-independent 5-tuple, mod N.
    EcmpHash,
    /// Per packet, each direction cycles through the paths.
    RoundRobin,
}

/// A host of the topology.
#[derive(Debug, Clone)]
pub struct HostSpec {
    /// Unique name.
    pub name: String,
    /// Side.
    pub side: Side,
    /// IPv4 addresses, unique across the network.
    pub addresses: Vec<Ipv4Addr>,
    /// Host towards the core.
    pub up: LinkConfig,
    /// Core towards the host.
    pub down: LinkConfig,
}

/// A bottleneck path.
#[derive(Debug, Clone)]
pub struct PathSpec {
    /// Unique name.
    pub name: String,
    /// Left to right.
    pub forward: LinkConfig,
    /// Right to left.
    pub reverse: LinkConfig,
}

/// Everything needed to build a [`Network`].
#[derive(Debug, Clone)]
pub struct TopologySpec {
    /// Seed of every random draw.
    pub seed: u64,
    /// Hosts.
    pub hosts: Vec<HostSpec>,
    /// Paths between the sides.
    pub paths: Vec<PathSpec>,
    /// Path selection.
    pub selection: PathSelection,
    /// Fixed paths for (left host, right host) pairs.
    pub pins: Vec<(HostId, HostId, PathId)>,
}

/// Why a network could not be built or changed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NetworkError {
    /// A link parameter was refused.
    #[error("{link}.{source}")]
    Link {
        /// Link name (`client.up`, `p0.forward`, ...).
        link: String,
        /// The parameter error.
        source: ConfigError,
    },
    /// Two hosts carry the same address.
    #[error("address {0} is used twice")]
    DuplicateAddress(Ipv4Addr),
    /// Hosts on both sides but no path.
    #[error("hosts on both sides need at least one path")]
    NoPath,
    /// A pin does not name a left host, a right host and a path.
    #[error("pin {0}: {1}")]
    BadPin(usize, String),
    /// No such link.
    #[error("no link named {0:?}")]
    UnknownLink(String),
}

#[derive(Clone, Copy)]
struct Route {
    hops: [u32; 3],
    len: u8,
    next: u8,
    dst: HostId,
    /// The spread a rated link on this route may give a packet carried whole (0 unless every
    /// other link direction of the route only delays: behind a rated link the segments arrive
    /// bunched, and a second rate, a queue limit, loss or jitter would meet them at other times
    /// or in another order than alone).
    whole_spread: Nanos,
}

/// What the links carry: the driver's payload plus the route.
pub struct Transit<P> {
    route: Route,
    payload: P,
}

/// Every segment of a packet carried whole follows the same route.
impl<P: Segmented> Segmented for Transit<P> {
    fn split(self, segments: u32, each: &mut dyn FnMut(Self)) {
        let route = self.route;
        self.payload.split(segments, &mut |payload| each(Transit { route, payload }));
    }
}

/// A packet that reached its destination host.
#[derive(Debug)]
pub struct Delivered<P> {
    /// When it left the last link.
    pub time: Nanos,
    /// Destination host.
    pub host: HostId,
    /// The packet.
    pub packet: Packet<P>,
}

struct HostEntry {
    name: String,
    side: Side,
    up: u32,
    down: u32,
}

struct PathEntry {
    name: String,
    forward: u32,
    reverse: u32,
}

/// The network model. Feed packets with [`Network::send`], collect them with [`Network::poll`],
/// and wake up at [`Network::next_wakeup`].
pub struct Network<P> {
    links: Vec<Link<Transit<P>>>,
    link_names: Vec<String>,
    hosts: Vec<HostEntry>,
    paths: Vec<PathEntry>,
    by_address: HashMap<Ipv4Addr, HostId>,
    selection: PathSelection,
    pins: HashMap<(HostId, HostId), PathId>,
    round_robin: [u64; 2],
    hash_key: (u64, u64),
    events: EventLog,
    delay_compensation: Nanos,
    /// How far apart the segments of a packet carried whole may leave a rated link (0: such a
    /// link splits every packet of several segments).
    whole_spread: Nanos,
    /// Each link's [`Link::next_event`] (`NEVER`: nothing pending), refreshed after every change
    /// of that link: `poll` takes the earliest of them per event, and computing them afresh for
    /// every link at every event was the model's largest cost at 10 Gbit/s.
    next_events: Vec<Nanos>,
}

/// A link with nothing pending, in [`Network`]'s `next_events`.
const NEVER: Nanos = Nanos::MAX;

impl<P> Network<P> {
    /// Builds the network; every parameter is checked first.
    pub fn new(spec: TopologySpec) -> Result<Self, NetworkError> {
        let mut links = Vec::new();
        let mut link_names = Vec::new();
        let mut add_link = |name: String, config: &LinkConfig| -> Result<u32, NetworkError> {
            let id = links.len() as u32;
            let link = Link::new(id, config.clone(), spec.seed, u64::from(id))
                .map_err(|source| NetworkError::Link { link: name.clone(), source })?;
            links.push(link);
            link_names.push(name);
            Ok(id)
        };
        let mut hosts = Vec::new();
        let mut by_address = HashMap::new();
        for (i, h) in spec.hosts.iter().enumerate() {
            for &a in &h.addresses {
                if by_address.insert(a, HostId(i as u32)).is_some() {
                    return Err(NetworkError::DuplicateAddress(a));
                }
            }
            let up = add_link(format!("{}.up", h.name), &h.up)?;
            let down = add_link(format!("{}.down", h.name), &h.down)?;
            hosts.push(HostEntry { name: h.name.clone(), side: h.side, up, down });
        }
        let mut paths = Vec::new();
        for p in &spec.paths {
            let forward = add_link(format!("{}.forward", p.name), &p.forward)?;
            let reverse = add_link(format!("{}.reverse", p.name), &p.reverse)?;
            paths.push(PathEntry { name: p.name.clone(), forward, reverse });
        }
        let both_sides = [Side::Left, Side::Right].iter().all(|s| hosts.iter().any(|h| h.side == *s));
        if both_sides && paths.is_empty() {
            return Err(NetworkError::NoPath);
        }
        let mut key_rng = ChaCha8Rng::seed_from_u64(spec.seed);
        key_rng.set_stream(u64::MAX);
        let mut network = Network {
            links,
            link_names,
            hosts,
            paths,
            by_address,
            selection: spec.selection,
            pins: HashMap::new(),
            round_robin: [0, 0],
            hash_key: (key_rng.random(), key_rng.random()),
            events: EventLog::default(),
            delay_compensation: 0,
            whole_spread: 0,
            next_events: Vec::new(),
        };
        network.refresh_all();
        network.set_routing(spec.selection, &spec.pins)?;
        Ok(network)
    }

    /// Changes path selection and pins.
    pub fn set_routing(&mut self, selection: PathSelection, pins: &[(HostId, HostId, PathId)]) -> Result<(), NetworkError> {
        let mut table = HashMap::new();
        for (i, &(left, right, path)) in pins.iter().enumerate() {
            let side = |h: HostId| self.hosts.get(h.0 as usize).map(|e| e.side);
            if side(left) != Some(Side::Left) {
                return Err(NetworkError::BadPin(i, "the first host must be a left host".into()));
            }
            if side(right) != Some(Side::Right) {
                return Err(NetworkError::BadPin(i, "the second host must be a right host".into()));
            }
            if path.0 as usize >= self.paths.len() {
                return Err(NetworkError::BadPin(i, "no such path".into()));
            }
            table.insert((left, right), path);
        }
        self.selection = selection;
        self.pins = table;
        Ok(())
    }

    /// Number of link directions.
    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// Name of a link direction (`client.up`, `p0.forward`, ...).
    pub fn link_name(&self, id: LinkId) -> &str {
        self.link_names.get(id.0 as usize).map_or("?", String::as_str)
    }

    /// Looks a link direction up by name.
    pub fn link_id(&self, name: &str) -> Option<LinkId> {
        self.link_names.iter().position(|n| n == name).map(|i| LinkId(i as u32))
    }

    /// A link direction.
    pub fn link(&self, id: LinkId) -> Option<&Link<Transit<P>>> {
        self.links.get(id.0 as usize)
    }

    /// Counters of every link direction, with names.
    pub fn counters(&self) -> impl Iterator<Item = (&str, LinkCounters)> {
        self.link_names.iter().map(String::as_str).zip(self.links.iter().map(Link::counters))
    }

    /// Path names with their (forward, reverse) link ids.
    pub fn paths(&self) -> impl Iterator<Item = (&str, LinkId, LinkId)> {
        self.paths.iter().map(|p| (p.name.as_str(), LinkId(p.forward), LinkId(p.reverse)))
    }

    /// Host names in id order.
    pub fn host_names(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().map(|h| h.name.as_str())
    }

    /// The host owning an address.
    pub fn host_of(&self, address: Ipv4Addr) -> Option<HostId> {
        self.by_address.get(&address).copied()
    }

    /// Every packet sent from now on crosses the network `ns` faster than configured, taken
    /// from the propagation delay (and jitter) of the link directions on its route, never
    /// below zero on any of them: the driver deducts its own constant path latency (reading,
    /// writing, waking the endpoints) so that what the endpoints see matches the configuration.
    pub fn set_delay_compensation(&mut self, ns: Nanos) {
        self.delay_compensation = ns;
    }

    /// Lets a packet of several wire segments cross a link with a fixed rate whole when its
    /// segments would leave that link at most `ns` apart (see [`Link::takes_whole`]): each
    /// segment then leaves with the last, up to `ns` later than alone. 0 (the default) keeps
    /// every segment's own departure time: rated links split such packets.
    pub fn set_whole_spread(&mut self, ns: Nanos) {
        self.whole_spread = ns;
    }

    /// The spread [`Network::set_whole_spread`] allows, ns.
    pub fn whole_spread(&self) -> Nanos {
        self.whole_spread
    }

    /// The current delay compensation, ns.
    pub fn delay_compensation(&self) -> Nanos {
        self.delay_compensation
    }

    /// Zeroes every counter.
    pub fn reset_counters(&mut self) {
        self.links.iter_mut().for_each(Link::reset_counters);
        self.refresh_all();
    }

    /// Recomputes every link's next event.
    fn refresh_all(&mut self) {
        self.next_events = self.links.iter().map(|l| l.next_event().unwrap_or(NEVER)).collect();
    }

    /// Recomputes link `i`'s next event after it changed.
    fn refresh(&mut self, i: usize) {
        if let (Some(slot), Some(link)) = (self.next_events.get_mut(i), self.links.get(i)) {
            *slot = link.next_event().unwrap_or(NEVER);
        }
    }

    /// Restarts a link direction's random stream from `seed` (its stream number stays its index).
    pub fn reseed(&mut self, id: LinkId, seed: u64) {
        if let Some(link) = self.links.get_mut(id.0 as usize) {
            link.reseed(seed, u64::from(id.0));
        }
        self.refresh(id.0 as usize);
    }

    /// Takes the events recorded so far.
    pub fn drain_events(&mut self) -> std::vec::Drain<'_, Event> {
        self.events.events.drain(..)
    }

    /// The path a packet of `flow` from `from` to `to` takes (both hosts on different sides).
    pub fn select_path(&mut self, from: HostId, to: HostId, flow: &FlowKey) -> PathId {
        if let Some(path) = self.fixed_path(from, to, flow) {
            return path;
        }
        let from_left = self.hosts[from.0 as usize].side == Side::Left;
        let n = self.paths.len().max(1) as u64;
        let counter = &mut self.round_robin[usize::from(!from_left)];
        *counter += 1;
        PathId(((*counter - 1) % n) as u32)
    }

    /// The path every packet of `flow` from `from` to `to` takes: pinned or hashed (None:
    /// round robin, where each packet takes the next).
    fn fixed_path(&self, from: HostId, to: HostId, flow: &FlowKey) -> Option<PathId> {
        let from_left = self.hosts[from.0 as usize].side == Side::Left;
        let pair = if from_left { (from, to) } else { (to, from) };
        if let Some(&path) = self.pins.get(&pair) {
            return Some(path);
        }
        let n = self.paths.len().max(1) as u64;
        let index = match self.selection {
            PathSelection::EcmpXor => {
                let hash = u32::from(flow.src)
                    ^ u32::from(flow.dst)
                    ^ u32::from(flow.sport)
                    ^ u32::from(flow.dport)
                    ^ u32::from(flow.proto);
                u64::from(hash) % n
            }
            PathSelection::EcmpHash => {
                let mut hasher = SipHasher13::new_with_keys(self.hash_key.0, self.hash_key.1);
                flow.canonical().hash(&mut hasher);
                hasher.finish() % n
            }
            PathSelection::RoundRobin => return None,
        };
        Some(PathId(index as u32))
    }

    /// The path between the sides every packet of `flow` from `from` to `to` takes: `Some(None)`
    /// for hosts on one side, `Some(path)` pinned or hashed, None under round robin.
    fn known_path(&self, from: HostId, to: HostId, flow: &FlowKey) -> Option<Option<PathId>> {
        if self.hosts[from.0 as usize].side == self.hosts[to.0 as usize].side {
            return Some(None);
        }
        self.fixed_path(from, to, flow).map(Some)
    }

    /// The link directions from `from` to `to` over `path` (None: the hosts are on one side).
    fn hops(&self, from: HostId, to: HostId, path: Option<PathId>) -> ([u32; 3], u8) {
        let (src, dst) = (&self.hosts[from.0 as usize], &self.hosts[to.0 as usize]);
        match path.and_then(|p| self.paths.get(p.0 as usize)).filter(|_| src.side != dst.side) {
            Some(p) => ([src.up, if src.side == Side::Left { p.forward } else { p.reverse }, dst.down], 3),
            None => ([src.up, dst.down, 0], 2),
        }
    }

    /// The earliest time at which [`Network::poll`] has something to do.
    pub fn next_wakeup(&self) -> Option<Nanos> {
        self.next_events.iter().copied().min().filter(|&t| t != NEVER)
    }

    /// Whether a packet of several wire segments (`shape`) of `flow` sent by `from` now would
    /// cross every link direction of its route whole as the links are now (see
    /// [`Link::takes_whole`]): not while events are recorded (each segment's are, in order),
    /// never over round-robin paths. A driver splits other packets itself before sending; one
    /// that meets a fuller queue on its way is split there.
    pub fn carries_whole(&self, from: HostId, flow: &FlowKey, shape: SegmentShape) -> bool {
        if self.events.enabled || from.0 as usize >= self.hosts.len() {
            return false;
        }
        let Some(to) = self.host_of(flow.dst) else { return false };
        let Some(path) = self.known_path(from, to, flow) else { return false };
        let (hops, len) = self.hops(from, to, path);
        let spread = self.whole_spread_on(&hops[..usize::from(len)]);
        hops[..usize::from(len)].iter().all(|&l| self.links[l as usize].takes_whole(shape, spread))
    }

    /// How many segments, at most, of a packet of several (`shape`) of `flow` sent by `from` now
    /// every link direction of its route would carry whole as the links are now (1: none; all
    /// exactly where [`Network::carries_whole`]; see [`Link::whole_segments`]): a driver may
    /// send the packet in pieces of this many segments. 1 while events are recorded and over round-robin paths.
    pub fn whole_segments(&self, from: HostId, flow: &FlowKey, shape: SegmentShape) -> u32 {
        if self.events.enabled || from.0 as usize >= self.hosts.len() {
            return 1;
        }
        let Some(to) = self.host_of(flow.dst) else { return 1 };
        let Some(path) = self.known_path(from, to, flow) else { return 1 };
        let (hops, len) = self.hops(from, to, path);
        let spread = self.whole_spread_on(&hops[..usize::from(len)]);
        hops[..usize::from(len)].iter().map(|&l| self.links[l as usize].whole_segments(shape, spread)).min().unwrap_or(1)
    }

    /// The spread a packet carried whole may get on a route over these link directions: the
    /// network's, if all but at most one of them only delay.
    fn whole_spread_on(&self, hops: &[u32]) -> Nanos {
        let others = hops.iter().filter(|&&l| !self.links[l as usize].is_delay_only()).count();
        if others <= 1 {
            self.whole_spread
        } else {
            0
        }
    }
}

impl<P: Segmented> Network<P> {
    /// Replaces a link direction's configuration at `now`.
    pub fn reconfigure(&mut self, now: Nanos, id: LinkId, config: LinkConfig) -> Result<(), NetworkError> {
        let name = self.link_name(id).to_string();
        let link = self.links.get_mut(id.0 as usize).ok_or_else(|| NetworkError::UnknownLink(name.clone()))?;
        // The new configuration may give the waiting segments different fates.
        link.split_waiting();
        let result = link.reconfigure(now, config, &mut self.events).map_err(|source| NetworkError::Link { link: name, source });
        self.refresh(id.0 as usize);
        result
    }

    /// Turns the per-packet event record on or off.
    /// Packets waiting whole in a queue are split, so that each segment's events are logged;
    /// one already in transmission is logged per segment, every segment leaving with the last.
    pub fn record_events(&mut self, enabled: bool) {
        if enabled {
            self.links.iter_mut().for_each(Link::split_waiting);
        }
        self.events.enabled = enabled;
    }



    /// A packet leaves host `from` at `now`. Returns false if no host has its destination
    /// address (the packet is discarded). Call [`Network::poll`] afterwards. A packet of several
    /// segments is carried whole as far as the links allow and split from there.
    pub fn send(&mut self, now: Nanos, from: HostId, packet: Packet<P>) -> bool {
        let Some(to) = self.host_of(packet.flow.dst) else { return false };
        if from.0 as usize >= self.hosts.len() {
            return false;
        }
        let path = match self.known_path(from, to, &packet.flow) {
            Some(path) => path,
            None if packet.segments > 1 => {
                // Round robin sends each segment on the next path.
                packet.into_segments(|segment| {
                    self.send(now, from, segment);
                });
                return true;
            }
            None => Some(self.select_path(from, to, &packet.flow)),
        };
        let (hops, len) = self.hops(from, to, path);
        let whole_spread = self.whole_spread_on(&hops[..usize::from(len)]);
        let route = Route { hops, len, next: 0, dst: to, whole_spread };
        let mut packet = packet.map(|payload| Transit { route, payload });
        packet.delay_credit = self.delay_compensation;
        self.enter(hops[0] as usize, now, packet);
        true
    }

    /// A packet arrives at link direction `link`: whole if it is one packet or the link takes
    /// it whole, else segment by segment.
    fn enter(&mut self, link: usize, now: Nanos, packet: Packet<Transit<P>>) {
        let spread = packet.payload.route.whole_spread;
        let whole = packet.segments <= 1 || (!self.events.enabled && self.links[link].takes_whole(packet.shape(), spread));
        if whole {
            self.links[link].arrive(now, packet, &mut self.events);
        } else {
            let (links, events) = (&mut self.links, &mut self.events);
            packet.into_segments(|segment| {
                links[link].arrive(now, segment, events);
            });
        }
        self.refresh(link);
    }

    /// Processes every event due at or before `now` in time order; packets that reached their
    /// destination host are appended to `out`.
    pub fn poll(&mut self, now: Nanos, out: &mut Vec<Delivered<P>>) {
        loop {
            // The earliest event, the lowest link index first among equals.
            let next = self.next_events.iter().enumerate().map(|(i, &t)| (t, i)).min();
            let Some((t, i)) = next.filter(|&(t, _)| t <= now && t != NEVER) else { return };
            let stepped = self.links[i].step(t, &mut self.events);
            self.refresh(i);
            let Some((time, mut packet)) = stepped else { continue };
            let route = &mut packet.payload.route;
            route.next += 1;
            if route.next < route.len {
                let hop = route.hops[usize::from(route.next)] as usize;
                self.enter(hop, time, packet);
            } else {
                let host = route.dst;
                out.push(Delivered { time, host, packet: packet.map(|t| t.payload) });
            }
        }
    }
}

#[cfg(test)]
mod tests;
