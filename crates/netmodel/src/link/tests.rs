//! Link behaviour on a virtual clock.

use super::*;
use crate::config::{JitterConfig, JitterDistribution, LossConfig, QueueConfig};
use crate::trace::DeliveryTrace;
use crate::{MS, SEC, US};
use std::sync::Arc;

fn pkt(size: u32, seq: u16) -> Packet<u16> {
    Packet::new(size, FlowKey::default(), seq, seq)
}

/// Runs the link until idle and returns (time, payload) of every delivered packet.
fn drain(link: &mut Link<u16>, events: &mut EventLog) -> Vec<(Nanos, u16)> {
    let mut out = Vec::new();
    while let Some(t) = link.next_event() {
        if let Some((time, p)) = link.step(t, events) {
            out.push((time, p.payload));
        }
    }
    out
}

fn link(config: LinkConfig) -> Link<u16> {
    Link::new(0, config, 1, 0).unwrap()
}

#[test]
fn fixed_rate_spaces_packets_exactly() {
    let mut l = link(LinkConfig::with_rate(10_000_000, 5 * MS));
    let mut ev = EventLog::default();
    for i in 0..10 {
        assert!(l.arrive(0, pkt(1500, i), &mut ev));
    }
    let out = drain(&mut l, &mut ev);
    assert_eq!(out.len(), 10);
    for (i, (t, seq)) in out.iter().enumerate() {
        assert_eq!(*seq as usize, i);
        // 1500 B at 10 Mbit/s = 1.2 ms each, plus 5 ms propagation.
        assert_eq!(*t, (i as u64 + 1) * 1_200_000 + 5 * MS);
    }
}

#[test]
fn idle_link_starts_at_arrival_and_mixed_sizes_add_up() {
    let mut l = link(LinkConfig::with_rate(8_000_000, 0)); // 1 byte per microsecond
    let mut ev = EventLog::default();
    l.arrive(0, pkt(1000, 0), &mut ev);
    l.arrive(100 * US, pkt(500, 1), &mut ev); // waits until 1000 us
    l.arrive(5 * MS, pkt(40, 2), &mut ev); // link idle again
    let out = drain(&mut l, &mut ev);
    assert_eq!(out, vec![(1000 * US, 0), (1500 * US, 1), (5040 * US, 2)]);
}

#[test]
fn long_run_rate_matches_configuration() {
    let rate = 7_000_000;
    let mut l = link(LinkConfig { queue: QueueConfig { limit: QueueLimit::Packets(100_000), ..Default::default() }, ..LinkConfig::with_rate(rate, 0) });
    let mut ev = EventLog::default();
    let n = 10_000u32;
    for i in 0..n {
        l.arrive(0, pkt(1500, i as u16), &mut ev);
    }
    let out = drain(&mut l, &mut ev);
    let last = out.last().unwrap().0 as f64 / SEC as f64;
    let achieved = f64::from(n) * 1500.0 * 8.0 / last;
    assert!((achieved - rate as f64).abs() / (rate as f64) < 1e-6, "achieved {achieved}");
}

#[test]
fn droptail_packet_limit_drops_arrivals_and_counts_them() {
    let mut config = LinkConfig::with_rate(1_000_000, 0);
    config.queue.limit = QueueLimit::Packets(3);
    let mut l = link(config);
    let mut ev = EventLog { enabled: true, events: Vec::new() };
    // First packet goes straight into service; three wait; the rest are dropped.
    let accepted: Vec<bool> = (0..6).map(|i| l.arrive(0, pkt(1000, i), &mut ev)).collect();
    assert_eq!(accepted, vec![true, true, true, true, false, false]);
    let c = l.counters();
    assert_eq!(c.dropped_packets.queue_full, 2);
    assert_eq!(c.dropped_bytes.queue_full, 2000);
    assert_eq!(c.queue_packets, 3);
    assert_eq!(c.max_queue_packets, 3);
    let drops = ev.events.iter().filter(|e| e.kind == EventKind::Drop(DropCause::QueueFull)).count();
    assert_eq!(drops, 2);
    let out = drain(&mut l, &mut ev);
    assert_eq!(out.iter().map(|o| o.1).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    assert_eq!(l.counters().delivered_packets, 4);
    assert_eq!(l.counters().queue_packets, 0);
}

#[test]
fn droptail_byte_limit() {
    let mut config = LinkConfig::with_rate(1_000_000, 0);
    config.queue.limit = QueueLimit::Bytes(3000);
    let mut l = link(config);
    let mut ev = EventLog::default();
    l.arrive(0, pkt(1500, 0), &mut ev); // in service
    assert!(l.arrive(0, pkt(1500, 1), &mut ev));
    assert!(l.arrive(0, pkt(1000, 2), &mut ev));
    assert!(!l.arrive(0, pkt(600, 3), &mut ev)); // 2500 + 600 > 3000
    assert!(l.arrive(0, pkt(500, 4), &mut ev)); // exactly 3000
    assert_eq!(l.counters().queue_bytes, 3000);
}

#[test]
fn drophead_evicts_oldest() {
    let mut config = LinkConfig::with_rate(1_000_000, 0);
    config.queue = QueueConfig { kind: QueueKind::DropHead, limit: QueueLimit::Packets(2) };
    let mut l = link(config);
    let mut ev = EventLog::default();
    for i in 0..5 {
        assert!(l.arrive(0, pkt(1000, i), &mut ev));
    }
    // 0 in service; 1 and 2 were evicted by 3 and 4.
    let out: Vec<u16> = drain(&mut l, &mut ev).into_iter().map(|o| o.1).collect();
    assert_eq!(out, vec![0, 3, 4]);
    assert_eq!(l.counters().dropped_packets.queue_full, 2);
}

#[test]
fn codel_controls_an_unresponsive_overload() {
    // 10 Mbit/s fed at 12 Mbit/s for 30 s. Drop-tail would build a queue of 5000 packets; CoDel
    // must keep it bounded, drop ("aqm") about the excess in the long run, wait one interval above
    // target before its first drop, and then drop ever faster (interval / sqrt(count)).
    let mut config = LinkConfig::with_rate(10_000_000, 0);
    config.queue = QueueConfig::codel(QueueLimit::Packets(10_000));
    let mut l = link(config);
    let mut ev = EventLog { enabled: true, events: Vec::new() };
    let gap = MS; // 1000 packets/s of 1500 B = 12 Mbit/s
    let seconds = 30u64;
    let mut first_above_target = None;
    for i in 0..seconds * 1000 {
        let now = i * gap;
        l.arrive(now, pkt(1500, (i % 65536) as u16), &mut ev);
        while let Some(t) = l.next_event().filter(|&t| t <= now) {
            if let Some((time, p)) = l.step(t, &mut ev) {
                let arrived = (i - (i % 65536)) + u64::from(p.payload);
                let arrived = if arrived > i { arrived - 65536 } else { arrived };
                let sojourn = time - arrived * gap - 1_200_000;
                if sojourn > 5 * MS && first_above_target.is_none() {
                    first_above_target = Some(time - 1_200_000);
                }
            }
        }
    }
    let c = l.counters();
    assert_eq!(c.dropped_packets.queue_full, 0);
    assert!(c.max_queue_packets < 400, "queue reached {}", c.max_queue_packets);
    let excess = seconds as f64 * (1000.0 - 10_000_000.0 / 12_000.0);
    let aqm = c.dropped_packets.aqm as f64;
    assert!((aqm - excess).abs() / excess < 0.1, "{aqm} drops, excess {excess}");
    let drops: Vec<Nanos> = ev.events.iter().filter(|e| e.kind == EventKind::Drop(DropCause::Aqm)).map(|e| e.time).collect();
    assert_eq!(drops.len() as u64, c.dropped_packets.aqm);
    let first_above = first_above_target.unwrap();
    // One packet time of slack: CoDel compares sojourn >= target at dequeue, the test > at delivery.
    assert!(drops[0] + 1_200_000 >= first_above + 100 * MS, "first drop {} before one interval above target {}", drops[0], first_above);
    let gaps: Vec<Nanos> = drops.windows(2).take(10).map(|w| w[1] - w[0]).collect();
    assert!(gaps[0] > gaps[9], "drop spacing must shrink: {gaps:?}");
    assert!(gaps[0] <= 100 * MS + 2 * MS && gaps[0] >= 100 * MS / 2, "first spacing {}", gaps[0]);
}

#[test]
fn codel_does_not_drop_below_target() {
    let mut config = LinkConfig::with_rate(10_000_000, 0);
    config.queue = QueueConfig::codel(QueueLimit::Packets(1000));
    let mut l = link(config);
    let mut ev = EventLog::default();
    // 8 Mbit/s offered to a 10 Mbit/s link: no standing queue, no drops.
    for i in 0..5000u64 {
        l.arrive(i * 1_500_000, pkt(1500, i as u16), &mut ev);
    }
    drain(&mut l, &mut ev);
    assert_eq!(l.counters().dropped_packets.total(), 0);
}

#[test]
fn trace_replay_delivers_at_opportunities() {
    // Opportunities at 1, 1, 4 ms; period 4 ms.
    let trace = Arc::new(DeliveryTrace::parse("1\n1\n4\n").unwrap());
    let mut l = link(LinkConfig { rate: Rate::Trace(trace), ..Default::default() });
    let mut ev = EventLog::default();
    for i in 0..5 {
        l.arrive(0, pkt(1500, i), &mut ev);
    }
    let times: Vec<Nanos> = drain(&mut l, &mut ev).into_iter().map(|o| o.0 / MS).collect();
    // Loop 2 starts at 4 ms: opportunities at 5, 5, 8.
    assert_eq!(times, vec![1, 1, 4, 5, 5]);
}

#[test]
fn trace_small_packets_share_and_large_span_opportunities() {
    let trace = Arc::new(DeliveryTrace::parse("2\n4\n6\n8\n").unwrap());
    let mut l = link(LinkConfig { rate: Rate::Trace(trace), ..Default::default() });
    let mut ev = EventLog::default();
    l.arrive(0, pkt(500, 0), &mut ev);
    l.arrive(0, pkt(1000, 1), &mut ev); // fills the first opportunity
    l.arrive(0, pkt(2000, 2), &mut ev); // 1500 at 4 ms, 500 at 6 ms
    l.arrive(0, pkt(1000, 3), &mut ev); // the rest of the 6 ms opportunity
    l.arrive(0, pkt(100, 4), &mut ev); // 8 ms
    let times: Vec<Nanos> = drain(&mut l, &mut ev).into_iter().map(|o| o.0 / MS).collect();
    assert_eq!(times, vec![2, 2, 6, 6, 8]);
}

#[test]
fn trace_unused_opportunities_are_lost() {
    let trace = Arc::new(DeliveryTrace::parse("1\n2\n3\n10\n").unwrap());
    let mut l = link(LinkConfig { rate: Rate::Trace(trace), ..Default::default() });
    let mut ev = EventLog::default();
    l.arrive(0, pkt(100, 0), &mut ev); // 1 ms, leaves 1400 B in that opportunity unused
    l.arrive(2500 * US, pkt(100, 1), &mut ev); // next opportunity at or after 2.5 ms: 3 ms
    l.arrive(12 * MS, pkt(100, 2), &mut ev); // second lap: 11, 12, 13, 20 -> 12 ms
    let times: Vec<Nanos> = drain(&mut l, &mut ev).into_iter().map(|o| o.0).collect();
    assert_eq!(times, vec![MS, 3 * MS, 12 * MS]);
}

fn jitter_link(dist: JitterDistribution, preserve_order: bool) -> Link<u16> {
    let mut config = LinkConfig::with_rate(100_000_000, 20 * MS);
    config.jitter = Some(JitterConfig { std: 2 * MS, dist, preserve_order });
    config.queue.limit = QueueLimit::Packets(100_000);
    link(config)
}

fn jitter_run(dist: JitterDistribution, preserve_order: bool) -> (Vec<(Nanos, u16)>, Vec<f64>) {
    let mut l = jitter_link(dist, preserve_order);
    let mut ev = EventLog::default();
    let gap = 500 * US;
    for i in 0..20_000u32 {
        l.arrive(u64::from(i) * gap, pkt(125, (i % 65536) as u16), &mut ev); // 10 us serialization
    }
    let out = drain(&mut l, &mut ev);
    let delays = out
        .iter()
        .map(|&(t, seq)| (t as f64 - (f64::from(seq) * gap as f64 + 10_000.0)) / MS as f64)
        .collect();
    (out, delays)
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
    (mean, var.sqrt())
}

#[test]
fn jitter_is_zero_mean_with_configured_std_and_may_reorder() {
    for dist in [JitterDistribution::Normal, JitterDistribution::Uniform, JitterDistribution::Pareto] {
        let (out, delays) = jitter_run(dist, false);
        let (mean, std) = mean_std(&delays);
        assert!((mean - 20.0).abs() < 0.1, "{dist:?}: mean {mean}");
        assert!((std - 2.0).abs() < 0.15, "{dist:?}: std {std}");
        let reordered = out.windows(2).filter(|w| w[1].1 < w[0].1).count();
        assert!(reordered > 0, "{dist:?}: no reordering");
        assert!(delays.iter().all(|&d| d >= 0.0));
    }
}

#[test]
fn preserve_order_never_reorders() {
    for dist in [JitterDistribution::Normal, JitterDistribution::Pareto] {
        let (out, delays) = jitter_run(dist, true);
        assert!(out.windows(2).all(|w| w[1].1 > w[0].1 || w[1].1 < 100 && w[0].1 > 60000));
        assert!(out.windows(2).all(|w| w[1].0 >= w[0].0));
        let (mean, _) = mean_std(&delays);
        assert!(mean >= 20.0, "{dist:?}: order preservation cannot lower the mean, got {mean}");
    }
}

#[test]
fn no_jitter_means_constant_delay() {
    let mut l = link(LinkConfig::with_rate(1_000_000_000, 25 * MS));
    let mut ev = EventLog::default();
    for i in 0..100u64 {
        l.arrive(i * MS, pkt(1250, i as u16), &mut ev);
    }
    for (t, seq) in drain(&mut l, &mut ev) {
        assert_eq!(t, u64::from(seq) * MS + 10 * US + 25 * MS);
    }
}

#[test]
fn loss_on_link_converges_and_is_counted() {
    let mut config = LinkConfig::default();
    config.loss = Some(LossConfig::Bernoulli { p: 0.01 });
    let mut l = link(config);
    let mut ev = EventLog::default();
    let n = 200_000u64;
    for i in 0..n {
        l.arrive(i, pkt(100, 0), &mut ev);
        drain(&mut l, &mut ev);
    }
    let c = l.counters();
    let rate = c.dropped_packets.random_loss as f64 / n as f64;
    assert!((rate - 0.01).abs() < 4.0 * (0.01 * 0.99 / n as f64).sqrt(), "rate {rate}");
    assert_eq!(c.delivered_packets + c.dropped_packets.random_loss, n);
}

#[test]
fn same_seed_same_losses() {
    let run = |seed| {
        let mut config = LinkConfig::default();
        config.loss = Some(LossConfig::Bernoulli { p: 0.1 });
        let mut l: Link<u16> = Link::new(0, config, seed, 3).unwrap();
        let mut ev = EventLog::default();
        (0..1000).map(|i| l.arrive(i, pkt(100, 0), &mut ev)).collect::<Vec<_>>()
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5), run(6));
}

#[test]
fn reconfigure_shrinks_queue_and_changes_rate() {
    let mut config = LinkConfig::with_rate(1_000_000, 0);
    config.queue.limit = QueueLimit::Packets(10);
    let mut l = link(config.clone());
    let mut ev = EventLog::default();
    for i in 0..11 {
        l.arrive(0, pkt(1000, i), &mut ev);
    }
    config.queue.limit = QueueLimit::Packets(4);
    config.rate = Rate::BitsPerSecond(8_000_000);
    l.reconfigure(0, config, &mut ev).unwrap();
    assert_eq!(l.counters().dropped_packets.queue_full, 6);
    let out = drain(&mut l, &mut ev);
    // Packet 0 finishes at the old rate (8 ms), then 1 ms each at 8 Mbit/s.
    assert_eq!(out.iter().map(|o| o.0 / US).collect::<Vec<_>>(), vec![8000, 9000, 10000, 11000, 12000]);
    let mut bad = LinkConfig::default();
    bad.queue.limit = QueueLimit::Packets(0);
    assert_eq!(l.reconfigure(0, bad, &mut ev).unwrap_err().field, "queue.packets");
}


#[test]
fn reseed_repeats_the_draws() {
    let mut config = LinkConfig::default();
    config.loss = Some(LossConfig::Bernoulli { p: 0.2 });
    let mut l = link(config);
    let mut ev = EventLog::default();
    let mut outcome = |l: &mut Link<u16>| (0..500).map(|i| l.arrive(i, pkt(100, 0), &mut ev)).collect::<Vec<_>>();
    l.reseed(77, 1);
    let first = outcome(&mut l);
    let _ = outcome(&mut l);
    l.reseed(77, 1);
    assert_eq!(outcome(&mut l), first);
}

/// A cellular trace of the project (data/traces/cellular, Verizon LTE, 140 s, ~5 Mbit/s).
const VERIZON_DOWN: &str = include_str!("../../../../data/traces/cellular/Verizon-LTE-short.down");

/// Opportunities of `text` (a Mahimahi trace read independently of `DeliveryTrace`) that fall in
/// [from_ms, to_ms) of the looped trace.
fn opportunities_between(text: &str, from_ms: u64, to_ms: u64) -> u64 {
    let times: Vec<u64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    let period = *times.last().unwrap();
    (0..=to_ms / period)
        .flat_map(|lap| times.iter().map(move |t| t + lap * period))
        .filter(|t| (from_ms..to_ms).contains(t))
        .count() as u64
}

/// Saturates a trace link started at `offset_ms` with `size`-byte packets for `seconds` and
/// returns the bytes delivered in each 1 s window.
fn saturated_bytes_per_second(offset_ms: u64, size: u32, seconds: u64) -> Vec<u64> {
    let trace = DeliveryTrace::parse(VERIZON_DOWN).unwrap().starting_at(offset_ms * MS);
    let queue = QueueConfig { limit: QueueLimit::Packets(100_000), ..Default::default() };
    let mut l = link(LinkConfig { rate: Rate::Trace(Arc::new(trace)), queue, ..Default::default() });
    let mut ev = EventLog::default();
    // More than the trace offers in `seconds` (its busiest second has 1398 opportunities).
    let packets = 2_000 * seconds * 1500 / u64::from(size);
    for i in 0..packets {
        assert!(l.arrive(0, pkt(size, i as u16), &mut ev));
    }
    let mut per_second = vec![0u64; seconds as usize];
    while let Some(t) = l.next_event() {
        if t >= seconds * SEC {
            break;
        }
        if let Some((time, _)) = l.step(t, &mut ev) {
            if let Some(bucket) = per_second.get_mut((time / SEC) as usize) {
                *bucket += u64::from(size);
            }
        }
    }
    per_second
}

#[test]
fn saturated_trace_link_delivers_the_traces_rate_each_second() {
    // Tolerance: with 1500-byte packets each opportunity carries exactly one packet, so every
    // 1 s window delivers exactly the trace's opportunities in it; with 1200-byte packets a
    // packet may span two opportunities, so a window may differ by one packet.
    for (offset_ms, size, tolerance) in [(0, 1500, 0), (37_000, 1500, 0), (130_000, 1200, 1200)] {
        let delivered = saturated_bytes_per_second(offset_ms, size, 20);
        for (second, bytes) in delivered.iter().enumerate() {
            let from = offset_ms + second as u64 * 1000;
            let offered = opportunities_between(VERIZON_DOWN, from, from + 1000) * 1500;
            assert!(
                bytes.abs_diff(offered) <= tolerance,
                "offset {offset_ms} ms, second {second}: delivered {bytes} B, trace offers {offered} B"
            );
        }
        let total: u64 = delivered.iter().sum();
        assert!(total > 20 * 1_000_000 / 8, "the window saw the trace's multi-Mbit/s rate: {total} B");
    }
}
