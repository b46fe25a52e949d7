//! One direction of a link: loss at arrival, a queue, a transmitter, delay and jitter.

use std::collections::VecDeque;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal, Pareto, Uniform};
use serde::Serialize;

use crate::codel::{Codel, CodelQueue};
use crate::config::{ConfigError, JitterConfig, JitterDistribution, LinkConfig, QueueKind, QueueLimit, Rate};
use crate::fq_codel::FqCodel;
use crate::loss::LossState;
use crate::packet::{FlowKey, Packet};
use crate::pie::Pie;
use crate::shaper::TokenBucket;
use crate::trace::TRACE_OPPORTUNITY_BYTES;
use crate::wifi::Station;
use crate::Nanos;
use in_flight::{InFlight, InFlightQueue};
use whole::Draining;
pub use whole::SegmentShape;

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropCause {
    /// The queue limit was reached (drop-tail arrival, or drop-head eviction).
    QueueFull,
    /// The configured random loss process.
    RandomLoss,
    /// The active queue management (CoDel, PIE, FQ-CoDel's CoDel).
    Aqm,
}

/// What happened to a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Entered the queue.
    Enqueue,
    /// Left the link (serialized and propagated).
    Deliver,
    /// Dropped.
    Drop(DropCause),
}

/// A per-packet event, as recorded in the ground-truth log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Model time.
    pub time: Nanos,
    /// What happened.
    pub kind: EventKind,
    /// Index of the link in its network.
    pub link: u32,
    /// 5-tuple of the packet.
    pub flow: FlowKey,
    /// IP bytes.
    pub size: u32,
    /// IP identification.
    pub ip_id: u16,
}

// The counters are a document of the contract (the emulator's `counters` reply): the model
// counts straight into that type.
pub use contract::control::{DropCounts, LinkCounters};

/// Counts `n` (packets or bytes) against the cause of a drop.
fn count_drop(counts: &mut DropCounts, cause: DropCause, n: u64) {
    match cause {
        DropCause::QueueFull => counts.queue_full += n,
        DropCause::RandomLoss => counts.random_loss += n,
        DropCause::Aqm => counts.aqm += n,
    }
}

/// Where recorded events go; recording is off unless enabled.
#[derive(Debug, Default)]
pub struct EventLog {
    /// Whether events are recorded.
    pub enabled: bool,
    /// Recorded events, drained by the owner.
    pub events: Vec<Event>,
}

impl EventLog {
    /// Records one event per wire segment of `packet`.
    fn record<P>(&mut self, time: Nanos, kind: EventKind, link: u32, packet: &Packet<P>) {
        if !self.enabled {
            return;
        }
        if packet.segments <= 1 {
            self.events.push(Event { time, kind, link, flow: packet.flow, size: packet.size, ip_id: packet.ip_id });
            return;
        }
        let flow = packet.flow;
        self.events.extend(packet.segment_sizes().map(|(size, ip_id)| Event { time, kind, link, flow, size, ip_id }));
    }
}

struct Waiting<P> {
    packet: Packet<P>,
    arrived: Nanos,
}

/// The serializer: when can the next packet start, and when does it finish.
#[derive(Debug, Clone, Default)]
struct Transmitter {
    /// Fixed rate: the link is busy until then.
    free_at: Nanos,
    /// Trace: time of the trace's opportunity 0.
    trace_epoch: Nanos,
    /// Trace: the next opportunity with bytes left.
    trace_index: u64,
    /// Trace: bytes left in that opportunity.
    trace_bytes_left: u32,
}

impl Transmitter {
    fn earliest_start(&self, rate: &Rate, t: Nanos) -> Nanos {
        match rate {
            // A WiFi link's station schedules its own transmissions (`Link::head_start`).
            Rate::Unlimited | Rate::Wifi(_) => t,
            Rate::BitsPerSecond(_) => t.max(self.free_at),
            Rate::Trace(trace) => {
                let current = self.trace_epoch + trace.opportunity_time(self.trace_index);
                if current >= t {
                    current
                } else {
                    self.trace_epoch + trace.opportunity_time(trace.first_index_at_or_after(t - self.trace_epoch))
                }
            }
        }
    }

    /// Serializes `size` bytes starting at `start` (from `earliest_start`); returns the finish time.
    fn transmit(&mut self, rate: &Rate, start: Nanos, size: u32) -> Nanos {
        match rate {
            Rate::Unlimited | Rate::Wifi(_) => start,
            Rate::BitsPerSecond(bps) => {
                self.free_at = start + LinkConfig::serialization_time(*bps, size);
                self.free_at
            }
            Rate::Trace(trace) => {
                if self.trace_epoch + trace.opportunity_time(self.trace_index) < start {
                    // Opportunities before `start` went unused: they are lost, as in Mahimahi.
                    self.trace_index = trace.first_index_at_or_after(start - self.trace_epoch);
                    self.trace_bytes_left = TRACE_OPPORTUNITY_BYTES;
                }
                let mut remaining = size.max(1);
                loop {
                    let take = remaining.min(self.trace_bytes_left);
                    remaining -= take;
                    self.trace_bytes_left -= take;
                    let finish = self.trace_epoch + trace.opportunity_time(self.trace_index);
                    if self.trace_bytes_left == 0 {
                        self.trace_index += 1;
                        self.trace_bytes_left = TRACE_OPPORTUNITY_BYTES;
                    }
                    if remaining == 0 {
                        return finish;
                    }
                }
            }
        }
    }

    fn restart(&mut self, now: Nanos) {
        self.free_at = self.free_at.max(now);
        self.trace_epoch = now;
        self.trace_index = 0;
        self.trace_bytes_left = TRACE_OPPORTUNITY_BYTES;
    }
}

/// One direction of a link. `P` is the payload the driver carries with each packet.
pub struct Link<P> {
    id: u32,
    config: LinkConfig,
    queue: VecDeque<Waiting<P>>,
    transmitter: Transmitter,
    in_flight: InFlightQueue<P>,
    next_seq: u64,
    last_delivery: Nanos,
    codel: Codel,
    pie: Pie,
    /// The flow queues, iff the queue kind is FQ-CoDel (then `queue` stays empty).
    fq: Option<FqCodel<Waiting<P>>>,
    bucket: TokenBucket,
    loss: LossState,
    rng: ChaCha8Rng,
    counters: LinkCounters,
    /// The WiFi station, while the rate is [`Rate::Wifi`].
    wifi: Option<Station<P>>,
    /// The segments of a packet carried whole that wait for the transmitter.
    draining: Draining,
}

fn jitter_offset(jitter: &JitterConfig, rng: &mut ChaCha8Rng) -> f64 {
    let std = jitter.std as f64;
    if std <= 0.0 {
        return 0.0;
    }
    // The parameters are finite and positive here, so the constructors cannot fail.
    match jitter.dist {
        JitterDistribution::Normal => Normal::new(0.0, std).map(|d| d.sample(rng)).unwrap_or(0.0),
        JitterDistribution::Uniform => {
            let half_width = std * 3f64.sqrt();
            Uniform::new_inclusive(-half_width, half_width).map(|d| d.sample(rng)).unwrap_or(0.0)
        }
        JitterDistribution::Pareto => {
            // Shape 3: mean = 1.5 x_m, std = x_m * sqrt(3) / 2.
            let scale = 2.0 * std / 3f64.sqrt();
            Pareto::new(scale, 3.0).map(|d| d.sample(rng) - 1.5 * scale).unwrap_or(0.0)
        }
    }
}

struct CodelAdapter<'a, P> {
    link: &'a mut Link<P>,
    events: &'a mut EventLog,
}

impl<P> CodelQueue for CodelAdapter<'_, P> {
    type Item = Packet<P>;

    fn pop(&mut self, now: Nanos) -> Option<(Packet<P>, Nanos, u64)> {
        let waiting = self.link.pop_head()?;
        Some((waiting.packet, now.saturating_sub(waiting.arrived), self.link.counters.queue_bytes))
    }

    fn drop_item(&mut self, packet: Packet<P>, now: Nanos) {
        self.link.count_drop(now, DropCause::Aqm, &packet, self.events);
    }
}

impl<P> Link<P> {
    /// A link direction with its own random stream (`seed`, `stream`).
    pub fn new(id: u32, config: LinkConfig, seed: u64, stream: u64) -> Result<Self, ConfigError> {
        config.validate()?;
        let fq = aqm::flow_queues_for(&config.queue.kind, u64::from(id));
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        let wifi = match &config.rate {
            Rate::Wifi(wifi) => Some(Station::new(wifi, 0, &mut rng)),
            _ => None,
        };
        Ok(Link {
            id,
            config,
            queue: VecDeque::new(),
            transmitter: Transmitter { trace_bytes_left: TRACE_OPPORTUNITY_BYTES, ..Transmitter::default() },
            in_flight: InFlightQueue::default(),
            next_seq: 0,
            last_delivery: 0,
            codel: Codel::default(),
            pie: Pie::default(),
            fq,
            bucket: TokenBucket::default(),
            loss: LossState::default(),
            rng,
            counters: LinkCounters::default(),
            wifi,
            draining: Draining::default(),
        })
    }

    /// The link's index in its network.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Current configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Current counters, with the packets propagating now (on WiFi also those the station
    /// holds for a retransmission or for the receiver's reorder buffer).
    pub fn counters(&self) -> LinkCounters {
        let held = self.wifi.as_ref().map_or(0, Station::held);
        let in_flight = self.in_flight.len().saturating_sub(self.draining_segments() as usize);
        LinkCounters { in_flight_packets: (in_flight + held) as u64, ..self.counters }
    }

    /// Zeroes the counters (occupancy stays: it is a state, not a count).
    pub fn reset_counters(&mut self) {
        self.counters = LinkCounters {
            queue_packets: self.counters.queue_packets,
            queue_bytes: self.counters.queue_bytes,
            max_queue_packets: self.counters.queue_packets,
            max_queue_bytes: self.counters.queue_bytes,
            ..LinkCounters::default()
        };
    }

    /// Packets queued or in flight.
    pub fn is_idle(&self) -> bool {
        self.counters.queue_packets == 0 && self.in_flight.is_empty() && self.wifi.as_ref().is_none_or(|w| w.held() == 0)
    }

    fn pop_head(&mut self) -> Option<Waiting<P>> {
        let waiting = self.queue.pop_front()?;
        self.counters.queue_packets -= u64::from(waiting.packet.segments);
        self.counters.queue_bytes -= u64::from(waiting.packet.size);
        Some(waiting)
    }

    fn count_drop(&mut self, now: Nanos, cause: DropCause, packet: &Packet<P>, events: &mut EventLog) {
        count_drop(&mut self.counters.dropped_packets, cause, u64::from(packet.segments));
        count_drop(&mut self.counters.dropped_bytes, cause, u64::from(packet.size));
        events.record(now, EventKind::Drop(cause), self.id, packet);
    }

    fn fits(&self, extra_packets: u64, extra_bytes: u64) -> bool {
        let within_shaper = self.config.shaper.is_none_or(|s| self.counters.queue_bytes + extra_bytes <= s.limit);
        within_shaper
            && match self.config.queue.limit {
                QueueLimit::Packets(n) => self.counters.queue_packets + extra_packets <= u64::from(n),
                QueueLimit::Bytes(b) => self.counters.queue_bytes + extra_bytes <= b,
            }
    }

    /// A packet arrives at `now`. Returns false if it was dropped on arrival. A packet of
    /// several segments must be one [`Link::takes_whole`] allows (with the spread the caller
    /// accepts).
    pub fn arrive(&mut self, now: Nanos, packet: Packet<P>, events: &mut EventLog) -> bool {
        self.advance(now, events);
        if packet.segments > 1 {
            return self.arrive_whole(now, packet, events);
        }
        if let Some(loss) = self.config.loss {
            if self.loss.lose_next(&loss, &mut self.rng) {
                self.count_drop(now, DropCause::RandomLoss, &packet, events);
                return false;
            }
        }
        let size = u64::from(packet.size);
        if self.config.queue.kind == QueueKind::DropHead {
            while !self.fits(1, size) {
                let Some(evicted) = self.pop_head() else { break };
                self.count_drop(now, DropCause::QueueFull, &evicted.packet, events);
            }
        }
        if self.drops_early(now) {
            self.count_drop(now, DropCause::Aqm, &packet, events);
            return false;
        }
        // FQ-CoDel takes every arrival and then drops from the fattest flow.
        if self.fq.is_none() && !self.fits(1, size) {
            self.count_drop(now, DropCause::QueueFull, &packet, events);
            return false;
        }
        events.record(now, EventKind::Enqueue, self.id, &packet);
        let c = &mut self.counters;
        c.enqueued_packets += 1;
        c.enqueued_bytes += size;
        c.queue_packets += 1;
        c.queue_bytes += size;
        let waiting = Waiting { packet, arrived: now };
        match &mut self.fq {
            Some(fq) => aqm::enqueue_flow(fq, waiting, &self.config.queue.kind),
            None => self.queue.push_back(waiting),
        }
        self.trim_to_limit(now, events);
        let c = &mut self.counters;
        c.max_queue_packets = c.max_queue_packets.max(c.queue_packets);
        c.max_queue_bytes = c.max_queue_bytes.max(c.queue_bytes);
        self.advance(now, events);
        true
    }

    fn head_start(&self) -> Option<Nanos> {
        let head = match &self.fq {
            Some(fq) => fq.earliest_arrival().zip(fq.next_size()),
            None => self.queue.front().map(|head| (head.arrived, head.packet.size)),
        };
        if let Some(station) = &self.wifi {
            return station.next_start(head.map(|(arrived, _)| arrived));
        }
        let (arrived, size) = head?;
        let start = self.transmitter.earliest_start(&self.config.rate, arrived);
        Some(self.shaped_start(start, size))
    }

    /// The next moment something happens on this link (a transmission starts or a packet leaves).
    pub fn next_event(&self) -> Option<Nanos> {
        let delivery = self.in_flight.next_delivery();
        match (self.head_start(), delivery) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Starts every transmission due at or before `now`.
    pub fn advance(&mut self, now: Nanos, events: &mut EventLog) {
        while let Some(start) = self.head_start().filter(|&s| s <= now) {
            self.start_transmission(start, events);
        }
        self.settle_draining(now);
    }

    /// Takes the next packet to transmit from the queue, through its discipline.
    fn dequeue(&mut self, start: Nanos, events: &mut EventLog) -> Option<Packet<P>> {
        match self.config.queue.kind {
            QueueKind::CoDel { target, interval } => {
                let mut codel = std::mem::take(&mut self.codel);
                let packet = codel.dequeue(&mut CodelAdapter { link: self, events }, start, target, interval);
                self.codel = codel;
                packet
            }
            QueueKind::Pie { target, .. } => self.dequeue_pie(start, target),
            QueueKind::FqCodel { target, interval, quantum, .. } => self.dequeue_fq(start, target, interval, quantum, events),
            QueueKind::DropTail | QueueKind::DropHead => self.pop_head().map(|w| w.packet),
        }
    }

    fn start_transmission(&mut self, start: Nanos, events: &mut EventLog) {
        if self.wifi.is_some() {
            return self.start_txop(start, events);
        }
        self.settle_draining(start);
        let Some(packet) = self.dequeue(start, events) else { return };
        if let Some(shaper) = &self.config.shaper {
            self.bucket.consume(shaper, start, packet.size);
        }
        let finish = if packet.segments > 1 {
            self.transmit_whole(start, packet.shape())
        } else {
            self.transmitter.transmit(&self.config.rate, start, packet.size)
        };
        self.propagate(finish, packet);
    }

    /// One WiFi TXOP at `start`: an A-MPDU of the frames to send again and of queued packets.
    fn start_txop(&mut self, start: Nanos, events: &mut EventLog) {
        let (Rate::Wifi(config), Some(mut station)) = (self.config.rate.clone(), self.wifi.take()) else { return };
        let mut aggregate = station.begin_txop(&config);
        while self.next_queued_size().is_some_and(|size| aggregate.has_room(&config, size)) {
            let Some(packet) = self.dequeue(start, events) else { break };
            if !station.add_new(&config, &mut aggregate, packet) {
                break;
            }
        }
        let outcome = station.finish_txop(&config, aggregate, start, &mut self.rng);
        self.wifi = Some(station);
        for packet in outcome.dropped {
            self.count_drop(start, DropCause::RandomLoss, &packet, events);
        }
        for packet in outcome.released {
            self.propagate(outcome.received_at, packet);
        }
    }

    /// A packet that finished its transmission at `finish` propagates (delay, jitter).
    fn propagate(&mut self, finish: Nanos, mut packet: Packet<P>) {
        let mut delay = self.config.delay;
        if let Some(jitter) = self.config.jitter {
            let total = self.config.delay as f64 + jitter_offset(&jitter, &mut self.rng);
            delay = total.max(0.0).round() as Nanos;
        }
        // The driver's delay compensation comes out of the propagation delay, never below 0.
        let credit = packet.delay_credit.min(delay);
        packet.delay_credit -= credit;
        let mut deliver_at = finish + delay - credit;
        if self.config.jitter.is_some_and(|j| j.preserve_order) {
            deliver_at = deliver_at.max(self.last_delivery);
        }
        self.last_delivery = self.last_delivery.max(deliver_at);
        self.in_flight.push(InFlight { deliver_at, seq: self.next_seq, packet });
        self.next_seq += 1;
    }

    /// Processes this link's next event if it is due at or before `now`; returns a packet that
    /// left the link, with the time it left.
    pub fn step(&mut self, now: Nanos, events: &mut EventLog) -> Option<(Nanos, Packet<P>)> {
        // A packet carried whole may leave only once all its segments have started.
        self.settle_draining(now);
        let start = self.head_start().filter(|&s| s <= now);
        let delivery = self.in_flight.next_delivery().filter(|&d| d <= now);
        match (start, delivery) {
            (Some(s), d) if d.is_none_or(|d| s <= d) => {
                self.start_transmission(s, events);
                None
            }
            (_, Some(_)) => {
                let f = self.in_flight.pop()?;
                self.counters.delivered_packets += u64::from(f.packet.segments);
                self.counters.delivered_bytes += u64::from(f.packet.size);
                events.record(f.deliver_at, EventKind::Deliver, self.id, &f.packet);
                Some((f.deliver_at, f.packet))
            }
            _ => None,
        }
    }

    /// Restarts the link's random stream (loss, jitter) from `seed` and `stream`, and the loss
    /// chain from its good state: the next packets meet the same draws as after any other
    /// reseed with the same values.
    pub fn reseed(&mut self, seed: u64, stream: u64) {
        self.rng = ChaCha8Rng::seed_from_u64(seed);
        self.rng.set_stream(stream);
        self.loss = LossState::default();
        if let (Rate::Wifi(config), Some(station)) = (&self.config.rate, &mut self.wifi) {
            station.redraw(config, &mut self.rng);
        }
    }

    /// Replaces the configuration at `now`. Queued packets stay; those beyond a smaller limit are
    /// dropped from the tail as `queue_full`.
    pub fn reconfigure(&mut self, now: Nanos, config: LinkConfig, events: &mut EventLog) -> Result<(), ConfigError> {
        config.validate()?;
        self.advance(now, events);
        let rate_changed = self.config.rate != config.rate;
        let loss_kind_changed = std::mem::discriminant(&self.config.loss) != std::mem::discriminant(&config.loss);
        let queue_kind_changed = self.config.queue.kind != config.queue.kind;
        let shaper_changed = self.config.shaper != config.shaper;
        self.config = config;
        if shaper_changed {
            self.bucket.reset();
        }
        if rate_changed {
            self.transmitter.restart(now);
        }
        if loss_kind_changed {
            self.loss = LossState::default();
        }
        if queue_kind_changed {
            self.codel = Codel::default();
            self.pie = Pie::default();
            self.switch_queue_container();
        }
        self.switch_station(now);
        self.trim_to_limit(now, events);
        Ok(())
    }
}

impl<P> Link<P> {
    /// Keeps the WiFi station in step with the rate: a station starts when the link becomes WiFi
    /// (new values of a WiFi link apply from its next TXOP), and when it stops being WiFi what
    /// the station held propagates from `now`, in sequence.
    fn switch_station(&mut self, now: Nanos) {
        match (&self.config.rate, self.wifi.is_some()) {
            (Rate::Wifi(config), false) => self.wifi = Some(Station::new(config, now, &mut self.rng)),
            (Rate::Wifi(_), true) => {}
            (_, true) => {
                for packet in self.wifi.take().map(Station::into_held).unwrap_or_default() {
                    self.propagate(now, packet);
                }
            }
            (_, false) => {}
        }
    }
}

mod aqm;
mod in_flight;
mod whole;
#[cfg(test)]
mod tests;
