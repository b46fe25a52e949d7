//! PIE, FQ-CoDel and the token-bucket shaper on a link, on a virtual clock.

use std::net::Ipv4Addr;

use super::super::*;
use crate::config::{QueueConfig, ShaperConfig};
use crate::{MS, US};

/// Packets carry their arrival time, so the delay they met can be read at delivery.
fn pkt(size: u32, flow: u16, arrived: Nanos) -> Packet<Nanos> {
    let key = FlowKey { src: Ipv4Addr::new(10, 0, 0, 1), dst: Ipv4Addr::new(10, 0, 0, 2), sport: flow, dport: 443, proto: 17 };
    Packet::new(size, key, flow, arrived)
}

/// A delivered packet: (flow, arrival, delivery, size).
type Delivery = (u16, Nanos, Nanos, u32);

/// Offers `arrivals` (time, flow, size; sorted by time) to the link and runs it until idle.
fn run(link: &mut Link<Nanos>, arrivals: &[(Nanos, u16, u32)], events: &mut EventLog) -> Vec<Delivery> {
    let mut out = Vec::new();
    for &(time, flow, size) in arrivals {
        step_until(link, Some(time), events, &mut out);
        link.arrive(time, pkt(size, flow, time), events);
    }
    step_until(link, None, events, &mut out);
    out
}

fn step_until(link: &mut Link<Nanos>, until: Option<Nanos>, events: &mut EventLog, out: &mut Vec<Delivery>) {
    while let Some(t) = link.next_event().filter(|&t| until.is_none_or(|u| t <= u)) {
        if let Some((time, p)) = link.step(t, events) {
            out.push((p.flow.sport, p.payload, time, p.size));
        }
    }
}

fn link(rate: u64, queue: QueueConfig) -> Link<Nanos> {
    Link::new(0, LinkConfig { queue, ..LinkConfig::with_rate(rate, 0) }, 1, 0).unwrap()
}

/// One flow of `size`-byte packets every `gap` from `start` until `end`.
fn constant_rate(flow: u16, size: u32, gap: Nanos, start: Nanos, end: Nanos) -> Vec<(Nanos, u16, u32)> {
    (0..).map(|i| start + i * gap).take_while(|&t| t < end).map(|t| (t, flow, size)).collect()
}

fn merged(mut flows: Vec<Vec<(Nanos, u16, u32)>>) -> Vec<(Nanos, u16, u32)> {
    let mut all: Vec<_> = flows.drain(..).flatten().collect();
    all.sort_by_key(|&(t, flow, _)| (t, flow));
    all
}

/// Queueing delay: time in the link minus the packet's own serialization.
fn queueing_delay(d: &Delivery, rate: u64) -> Nanos {
    d.2 - d.1 - LinkConfig::serialization_time(rate, d.3)
}

const RATE: u64 = 10_000_000;

#[test]
fn pie_holds_the_queue_delay_near_its_target_under_a_standing_overload() {
    // 10 Mbit/s fed at 12 Mbit/s (one 1500-byte packet per ms, unresponsive) for 40 s: drop-tail
    // would queue 1/6 of everything; PIE must drop about that excess early and keep the queue
    // delay near 15 ms. Judged over the last 30 s (PIE converges in a few seconds).
    let mut l = link(RATE, QueueConfig::pie(QueueLimit::Packets(100_000)));
    let mut ev = EventLog::default();
    let out = run(&mut l, &constant_rate(1, 1500, MS, 0, 40_000 * MS), &mut ev);
    let settled: Vec<f64> = out.iter().filter(|d| d.1 >= 10_000 * MS).map(|d| queueing_delay(d, RATE) as f64 / MS as f64).collect();
    let mean = settled.iter().sum::<f64>() / settled.len() as f64;
    assert!((mean - 15.0).abs() < 2.0, "mean queue delay {mean} ms, target 15 ms");
    let c = l.counters();
    assert_eq!(c.dropped_packets.queue_full, 0);
    let excess = 40.0 * (1000.0 - RATE as f64 / 12_000.0);
    let aqm = c.dropped_packets.aqm as f64;
    assert!((aqm - excess).abs() / excess < 0.1, "{aqm} early drops, excess {excess}");
}

#[test]
fn pie_burst_allowance_lets_a_short_burst_through() {
    // 10x the link rate for 140 ms into an idle queue: within the 150 ms allowance nothing is
    // dropped early; without an allowance the probability has grown enough to drop some.
    let burst = constant_rate(1, 1500, 120 * US, 0, 140 * MS);
    let early_drops = |max_burst: Nanos| {
        let queue = QueueConfig { kind: QueueKind::Pie { target: 15 * MS, max_burst }, limit: QueueLimit::Packets(100_000) };
        let mut l = link(RATE, queue);
        run(&mut l, &burst, &mut EventLog::default());
        l.counters().dropped_packets.aqm
    };
    assert_eq!(early_drops(150 * MS), 0);
    assert!(early_drops(0) > 0, "without an allowance PIE drops within the burst");
    // A longer overload outlasts the allowance: the early drops start after it.
    let mut l = link(RATE, QueueConfig::pie(QueueLimit::Packets(100_000)));
    let mut ev = EventLog { enabled: true, events: Vec::new() };
    run(&mut l, &constant_rate(1, 1500, 120 * US, 0, 1000 * MS), &mut ev);
    let first = ev.events.iter().find(|e| e.kind == EventKind::Drop(DropCause::Aqm)).map(|e| e.time);
    assert!(first.is_some_and(|t| t >= 150 * MS), "first early drop at {first:?}");
}

#[test]
fn fq_codel_keeps_a_sparse_flow_s_delay_near_zero_beside_a_bulk_flow() {
    // A bulk flow at 12 Mbit/s into 10 Mbit/s fills its queue; a ping-sized packet every 10 ms
    // (flow 2) waits for the bulk packet being serialized (1.2 ms at most), and at worst for one
    // more: when the bulk flow's accumulated deficit (14 bytes a round) lets it send two packets
    // while the sparse flow still sits on the old list.
    let arrivals = merged(vec![constant_rate(1, 1500, MS, 0, 10_000 * MS), constant_rate(2, 100, 10 * MS, 5 * US, 10_000 * MS)]);
    let mut l = link(RATE, QueueConfig::fq_codel(QueueLimit::Packets(10_240)));
    let out = run(&mut l, &arrivals, &mut EventLog::default());
    let worst = |flow: u16, from: Nanos| out.iter().filter(|d| d.0 == flow && d.1 >= from).map(|d| queueing_delay(d, RATE)).max().unwrap();
    let sparse: Vec<Nanos> = out.iter().filter(|d| d.0 == 2).map(|d| queueing_delay(d, RATE)).collect();
    let sparse_mean = sparse.iter().sum::<Nanos>() / sparse.len() as Nanos;
    assert!(sparse_mean < 1_200 * US, "sparse flow's mean delay {sparse_mean} ns");
    let sparse_worst = worst(2, 0);
    assert!(sparse_worst <= 2 * 1_200 * US, "sparse flow waited up to {sparse_worst} ns");
    // The bulk flow does queue (CoDel lets its delay sit above the 5 ms target between drops).
    assert!(worst(1, 1000 * MS) > 5 * MS, "bulk flow's delay {}", worst(1, 1000 * MS));
    assert_eq!(out.iter().filter(|d| d.0 == 2).count(), 1000, "no sparse packet is lost");
    // The same mix through one CoDel queue: the sparse flow waits behind the bulk backlog.
    let mut single = link(RATE, QueueConfig::codel(QueueLimit::Packets(10_240)));
    let out = run(&mut single, &arrivals, &mut EventLog::default());
    let shared: Vec<Nanos> = out.iter().filter(|d| d.0 == 2 && d.1 >= 1000 * MS).map(|d| queueing_delay(d, RATE)).collect();
    let mean_shared = shared.iter().sum::<Nanos>() / shared.len() as Nanos;
    assert!(mean_shared > 3 * MS, "one CoDel queue: sparse flow's mean delay {mean_shared} ns");
}

#[test]
fn fq_codel_shares_the_link_equally_between_two_bulk_flows() {
    // Two unresponsive flows, each offering the whole link rate, one in 1500-byte and one in
    // 500-byte packets: deficit round robin shares bytes, not packets.
    let end = 5_000 * MS;
    let arrivals = merged(vec![constant_rate(1, 1500, 1200 * US, 0, end), constant_rate(2, 500, 400 * US, 0, end)]);
    let mut l = link(RATE, QueueConfig::fq_codel(QueueLimit::Packets(10_240)));
    let out = run(&mut l, &arrivals, &mut EventLog::default());
    let bytes = |flow: u16| out.iter().filter(|d| d.0 == flow && d.2 <= end).map(|d| u64::from(d.3)).sum::<u64>() as f64;
    let (a, b) = (bytes(1), bytes(2));
    assert!((a - b).abs() / (a + b) < 0.02, "flow 1 got {a} bytes, flow 2 {b}");
    let link_bytes = RATE as f64 / 8.0 * 5.0;
    assert!((a + b) / link_bytes > 0.99, "the link stays busy: {} of {link_bytes}", a + b);
}

#[test]
fn fq_codel_overflow_drops_from_the_fattest_flow() {
    // A 20-packet limit, a burst of 40 bulk packets, then one sparse packet: the bulk flow loses
    // its head packets, the sparse packet is kept.
    let mut arrivals = constant_rate(1, 1500, US, 0, 40 * US);
    arrivals.push((40 * US, 2, 100));
    let mut l = link(RATE, QueueConfig::fq_codel(QueueLimit::Packets(20)));
    let mut ev = EventLog { enabled: true, events: Vec::new() };
    let out = run(&mut l, &arrivals, &mut ev);
    assert!(out.iter().any(|d| d.0 == 2));
    let dropped_flows: Vec<u16> =
        ev.events.iter().filter(|e| e.kind == EventKind::Drop(DropCause::QueueFull)).map(|e| e.flow.sport).collect();
    assert_eq!(dropped_flows.len(), 20, "41 arrivals, 1 in service, 20 queued");
    assert!(dropped_flows.iter().all(|&f| f == 1));
    assert_eq!(l.counters().max_queue_packets, 20);
}

#[test]
fn shaper_sends_its_burst_at_line_rate_then_holds_its_rate_and_drops_beyond_its_limit() {
    // 100 Mbit/s line, tbf 10 Mbit/s with a 15000-byte bucket and a 50 kB limit (003's buffer).
    let shaper = ShaperConfig { rate: 10_000_000, burst: 15_000, limit: 50_000 };
    let config = LinkConfig { shaper: Some(shaper), ..LinkConfig::with_rate(100_000_000, 0) };
    let mut l = Link::new(0, config, 1, 0).unwrap();
    let mut ev = EventLog::default();
    let out = run(&mut l, &[(0, 1, 1500); 60], &mut ev);
    // One packet in service, 33 x 1500 = 49500 bytes wait; the other 26 are dropped.
    assert_eq!(out.len(), 34);
    assert_eq!(l.counters().dropped_packets.queue_full, 26);
    let gaps: Vec<Nanos> = out.windows(2).map(|w| w[1].2 - w[0].2).collect();
    // The bucket (15000 bytes, refilled by 150 bytes per 120 us packet) passes 11 packets at
    // 100 Mbit/s (120 us apart) ...
    assert!(gaps[..10].iter().all(|&g| g == 120 * US), "{gaps:?}");
    // ... then the shaper's rate holds: 1500 bytes per 1.2 ms.
    assert!(gaps[10..].iter().all(|&g| g == 1200 * US), "{gaps:?}");
}

#[test]
fn switching_between_one_queue_and_flow_queues_keeps_the_packets() {
    let mut l = link(RATE, QueueConfig::default());
    let mut ev = EventLog::default();
    for i in 0..6 {
        l.arrive(0, pkt(1500, 1 + i % 2, 0), &mut ev);
    }
    let fq = LinkConfig { queue: QueueConfig::fq_codel(QueueLimit::Packets(100)), ..l.config().clone() };
    l.reconfigure(0, fq, &mut ev).unwrap();
    assert_eq!(l.counters().queue_packets, 5);
    let back = LinkConfig { queue: QueueConfig::pie(QueueLimit::Packets(3)), ..l.config().clone() };
    l.reconfigure(0, back, &mut ev).unwrap();
    assert_eq!((l.counters().queue_packets, l.counters().dropped_packets.queue_full), (3, 2));
    let out = run(&mut l, &[], &mut ev);
    assert_eq!(out.len(), 4);
    assert!(l.is_idle());
}

#[test]
fn under_a_light_load_no_queue_kind_adds_delay() {
    // Packets of four flows, never two in the link at once: every kind delivers each packet
    // after exactly its serialization.
    let arrivals: Vec<(Nanos, u16, u32)> = (0..2000u64).map(|i| (i * 1500 * US + (i * 7919 % 200) * US, (i % 4) as u16, 1500)).collect();
    for queue in [QueueConfig::default(), QueueConfig::codel(QueueLimit::Packets(100)), QueueConfig::pie(QueueLimit::Packets(100)), QueueConfig::fq_codel(QueueLimit::Packets(100))] {
        let mut l = link(RATE, queue);
        let out = run(&mut l, &arrivals, &mut EventLog::default());
        assert_eq!(out.len(), arrivals.len(), "{queue:?}");
        assert!(out.iter().all(|d| queueing_delay(d, RATE) == 0), "{queue:?}");
    }
}
