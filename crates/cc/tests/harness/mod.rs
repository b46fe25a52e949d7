//! A closed loop on a virtual clock for the controllers: a greedy sender driven by one
//! `Algorithm`, netmodel's bottleneck link (rate, queue, delay), a receiver that acknowledges
//! every packet over a fixed-delay return path, an RFC 9002 RTT estimator, loss detection by
//! packet threshold (3) plus a probe timeout, and optional pacing at 1.25 windows per sRTT as
//! quinn paces. Time advances in fixed steps; nothing reads a clock.

#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use cc::{Ack, Algorithm, RttSample};
use netmodel::{EventLog, FlowKey, Link, LinkConfig, Nanos, Packet, QueueConfig, QueueKind, QueueLimit, Rate, MS};

/// Time step of the loop.
pub const STEP: Nanos = 20_000;
const PACKET_THRESHOLD: u64 = 3;

pub fn link(rate_bps: u64, one_way_delay_ms: u64, queue_bytes: u64) -> Link<u64> {
    let config = LinkConfig {
        rate: Rate::BitsPerSecond(rate_bps),
        queue: QueueConfig { kind: QueueKind::DropTail, limit: QueueLimit::Bytes(queue_bytes) },
        delay: one_way_delay_ms * MS,
        jitter: None,
        loss: None,
        shaper: None,
    };
    Link::new(0, config, 1, 0).expect("a valid link")
}

struct Sent {
    at: Nanos,
    bytes: u64,
}

/// Everything of one closed-loop run.
pub struct Sim {
    pub link: Link<u64>,
    pub events: EventLog,
    pub return_delay: Nanos,
    pub algorithm: Box<dyn Algorithm>,
    pub packet_bytes: u64,
    pub pacing: bool,
    pub t0: Instant,
    pub now: Nanos,
    next_pn: u64,
    sent: BTreeMap<u64, Sent>,
    in_flight: u64,
    largest_acked: Option<u64>,
    acks: VecDeque<(Nanos, u64)>,
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: Option<Duration>,
    next_send: Nanos,
    last_ack: Nanos,
    /// Every delivery at the receiver: (time, bytes).
    pub delivered: Vec<(Nanos, u64)>,
    /// Queue occupancy in packets, sampled every millisecond: (time, packets).
    pub queue: Vec<(Nanos, u64)>,
    pub lost_packets: u64,
}

impl Sim {
    /// `make` builds the controller for the loop's start (the zero of the virtual clock).
    pub fn new(link: Link<u64>, return_delay_ms: u64, packet_bytes: u64, make: impl FnOnce(Instant) -> Box<dyn Algorithm>) -> Sim {
        let t0 = Instant::now();
        Sim {
            link,
            events: EventLog::default(),
            return_delay: return_delay_ms * MS,
            algorithm: make(t0),
            packet_bytes,
            pacing: true,
            t0,
            now: 0,
            next_pn: 0,
            sent: BTreeMap::new(),
            in_flight: 0,
            largest_acked: None,
            acks: VecDeque::new(),
            srtt: None,
            rttvar: Duration::ZERO,
            min_rtt: None,
            next_send: 0,
            last_ack: 0,
            delivered: Vec::new(),
            queue: Vec::new(),
            lost_packets: 0,
        }
    }

    pub fn instant(&self, t: Nanos) -> Instant {
        self.t0 + Duration::from_nanos(t)
    }

    fn rtt_sample(&mut self, latest: Duration) -> RttSample {
        self.min_rtt = Some(self.min_rtt.map_or(latest, |m| m.min(latest)));
        match self.srtt {
            None => {
                self.srtt = Some(latest);
                self.rttvar = latest / 2;
            }
            Some(srtt) => {
                self.rttvar = (3 * self.rttvar + srtt.abs_diff(latest)) / 4;
                self.srtt = Some((7 * srtt + latest) / 8);
            }
        }
        RttSample { latest, smoothed: self.srtt.unwrap_or(latest), min: self.min_rtt.unwrap_or(latest) }
    }

    fn declare_lost(&mut self, pns: Vec<u64>) {
        let Some(&last) = pns.last() else { return };
        let last_sent = self.sent.get(&last).map_or(self.now, |s| s.at);
        let mut bytes = 0;
        for pn in pns {
            if let Some(s) = self.sent.remove(&pn) {
                bytes += s.bytes;
                self.in_flight -= s.bytes;
                self.lost_packets += 1;
            }
        }
        let now = self.instant(self.now);
        self.algorithm.on_congestion_event(now, self.instant(last_sent), false, bytes);
    }

    fn process_acks(&mut self) {
        let mut acked = Vec::new();
        while let Some(&(at, pn)) = self.acks.front() {
            if at > self.now {
                break;
            }
            self.acks.pop_front();
            acked.push(pn);
        }
        if acked.is_empty() {
            return;
        }
        self.last_ack = self.now;
        let now = self.instant(self.now);
        for pn in acked {
            let Some(sent) = self.sent.remove(&pn) else { continue };
            self.in_flight -= sent.bytes;
            self.largest_acked = Some(self.largest_acked.map_or(pn, |l| l.max(pn)));
            let rtt = self.rtt_sample(Duration::from_nanos(self.now - sent.at));
            let ack = Ack { now, sent: self.instant(sent.at), bytes: sent.bytes, app_limited: false, rtt };
            self.algorithm.on_ack(&ack);
        }
        if let Some(largest) = self.largest_acked {
            let lost: Vec<u64> = self.sent.range(..largest.saturating_sub(PACKET_THRESHOLD - 1)).map(|(pn, _)| *pn).collect();
            self.declare_lost(lost);
        }
        self.algorithm.on_end_acks(now, self.in_flight, false, self.largest_acked);
    }

    fn probe_timeout(&mut self) {
        let srtt = self.srtt.unwrap_or(Duration::from_millis(333));
        let pto = (srtt + 4 * self.rttvar).as_nanos() as Nanos * 2;
        if self.in_flight > 0 && self.now.saturating_sub(self.last_ack) > pto {
            let all: Vec<u64> = self.sent.keys().copied().collect();
            self.declare_lost(all);
            self.last_ack = self.now;
        }
    }

    fn send(&mut self) {
        loop {
            let window = self.algorithm.window();
            if self.in_flight + self.packet_bytes > window || (self.pacing && self.now < self.next_send) {
                return;
            }
            let pn = self.next_pn;
            self.next_pn += 1;
            let flow = FlowKey { src: Ipv4Addr::new(10, 0, 0, 2), dst: Ipv4Addr::new(10, 0, 0, 1), sport: 443, dport: 4000, proto: 17 };
            let bytes = self.packet_bytes;
            self.link.arrive(self.now, Packet::new(bytes as u32, flow, 0, pn), &mut self.events);
            self.sent.insert(pn, Sent { at: self.now, bytes });
            self.in_flight += bytes;
            let now = self.instant(self.now);
            self.algorithm.on_sent(now, bytes, pn);
            if self.pacing {
                if let Some(srtt) = self.srtt {
                    // quinn: 1.25 windows per smoothed RTT.
                    let rate = 1.25 * window.max(1) as f64 / srtt.as_secs_f64();
                    self.next_send = self.now + (bytes as f64 / rate * 1e9) as Nanos;
                }
            }
        }
    }

    /// Runs until `until` (ns on the virtual clock).
    pub fn run_until(&mut self, until: Nanos) {
        while self.now < until {
            while let Some((at, packet)) = self.link.step(self.now, &mut self.events) {
                self.delivered.push((at, u64::from(packet.size)));
                self.acks.push_back((at + self.return_delay, packet.payload));
            }
            self.process_acks();
            self.probe_timeout();
            self.send();
            if self.now % MS == 0 {
                self.queue.push((self.now, self.link.counters().queue_packets));
            }
            self.now += STEP;
        }
    }

    /// Bytes delivered to the receiver in [from, to), as bit/s.
    pub fn delivered_rate_bps(&self, from: Nanos, to: Nanos) -> f64 {
        let bytes: u64 = self.delivered.iter().filter(|(t, _)| *t >= from && *t < to).map(|(_, b)| b).sum();
        bytes as f64 * 8.0 / ((to - from) as f64 / 1e9)
    }

    /// Mean queue occupancy in packets over [from, to).
    pub fn mean_queue(&self, from: Nanos, to: Nanos) -> f64 {
        let samples: Vec<u64> = self.queue.iter().filter(|(t, _)| *t >= from && *t < to).map(|(_, q)| *q).collect();
        samples.iter().sum::<u64>() as f64 / samples.len().max(1) as f64
    }
}
