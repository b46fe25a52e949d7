//! The WiFi link on a virtual clock: aggregate sizes, airtime, efficiency, retransmissions.

use super::*;
use crate::config::{LinkConfig, QueueConfig, QueueLimit, Rate};
use crate::link::{DropCause, EventKind, EventLog, Link};
use crate::packet::FlowKey;
use crate::{MS, SEC, US};

const PACKET: u32 = 1500;

fn lossless() -> WifiConfig {
    WifiConfig { frame_error_rate: 0.0, ..WifiConfig::default() }
}

/// No random backoff: channel access is exactly DIFS, so every time is known in advance.
fn fixed_access() -> WifiConfig {
    WifiConfig { cw_min: 0, cw_max: 0, ..lossless() }
}

fn wifi_link(wifi: WifiConfig, seed: u64) -> Link<u32> {
    let config = LinkConfig {
        rate: Rate::Wifi(wifi),
        queue: QueueConfig { limit: QueueLimit::Packets(1_000_000), ..QueueConfig::default() },
        ..LinkConfig::default()
    };
    Link::new(0, config, seed, 0).unwrap()
}

/// Runs the link until `until` (or idle) and returns (time, sequence number) of each delivery.
fn run_until(link: &mut Link<u32>, events: &mut EventLog, until: Nanos) -> Vec<(Nanos, u32)> {
    let mut out = Vec::new();
    while let Some(t) = link.next_event().filter(|&t| t <= until) {
        if let Some((time, packet)) = link.step(t, events) {
            out.push((time, packet.payload));
        }
    }
    out
}

fn send(link: &mut Link<u32>, events: &mut EventLog, now: Nanos, seq: u32) {
    assert!(link.arrive(now, Packet::new(PACKET, FlowKey::default(), seq as u16, seq), events));
}

/// Sizes of the A-MPDUs, as the receiver sees them: deliveries at the same instant.
fn aggregate_sizes(deliveries: &[(Nanos, u32)]) -> Vec<usize> {
    let mut sizes: Vec<usize> = Vec::new();
    let mut last = None;
    for &(time, _) in deliveries {
        if last == Some(time) {
            if let Some(size) = sizes.last_mut() {
                *size += 1;
            }
        } else {
            sizes.push(1);
        }
        last = Some(time);
    }
    sizes
}

fn backlog_aggregates(wifi: WifiConfig, backlog: u32) -> Vec<usize> {
    let mut link = wifi_link(wifi, 1);
    let mut events = EventLog::default();
    for seq in 0..backlog {
        send(&mut link, &mut events, 0, seq);
    }
    aggregate_sizes(&run_until(&mut link, &mut events, u64::MAX))
}

#[test]
fn aggregates_take_the_backlog_up_to_each_limit() {
    // Default 802.11n: 65 535 bytes hold 42 MPDUs of 1542 bytes (3.99 ms at 130 Mbit/s).
    assert_eq!(lossless().frames_per_full_ampdu(PACKET), 42);
    assert_eq!(backlog_aggregates(lossless(), 1), vec![1]);
    assert_eq!(backlog_aggregates(lossless(), 5), vec![5]);
    assert_eq!(backlog_aggregates(lossless(), 42), vec![42]);
    assert_eq!(backlog_aggregates(lossless(), 100), vec![42, 42, 16]);
    // The frame limit (the block-ACK window) when bytes and airtime allow more.
    let by_frames = WifiConfig { max_ampdu_bytes: 1 << 20, max_ampdu_duration: SEC, ..lossless() };
    assert_eq!(backlog_aggregates(by_frames, 150), vec![64, 64, 22]);
    // The airtime limit at MCS 0 (6.5 Mbit/s): 4 ms carry 3250 bytes, two MPDUs.
    let by_airtime = WifiConfig { phy_rate_bps: 6_500_000, ..lossless() };
    assert_eq!(by_airtime.frames_per_full_ampdu(PACKET), 2);
    assert_eq!(backlog_aggregates(by_airtime, 5), vec![2, 2, 1]);
    // No aggregation.
    let single = WifiConfig { max_ampdu_frames: 1, ..lossless() };
    assert_eq!(backlog_aggregates(single, 3), vec![1, 1, 1]);
}

/// Mean A-MPDU size when packets arrive every `gap`.
fn mean_aggregate_at(gap: Nanos) -> f64 {
    let mut link = wifi_link(lossless(), 3);
    let mut events = EventLog::default();
    let mut deliveries = Vec::new();
    for seq in 0..4000 {
        let now = u64::from(seq) * gap;
        deliveries.extend(run_until(&mut link, &mut events, now));
        send(&mut link, &mut events, now, seq);
    }
    deliveries.extend(run_until(&mut link, &mut events, u64::MAX));
    assert_eq!(deliveries.len(), 4000);
    let sizes = aggregate_sizes(&deliveries);
    sizes.iter().sum::<usize>() as f64 / sizes.len() as f64
}

#[test]
fn aggregates_grow_with_the_offered_load() {
    // A packet per 1 ms finds the channel idle: one frame per TXOP. As arrivals come faster than
    // single-frame TXOPs (~285 us), the backlog builds between TXOPs and the aggregates grow,
    // until the link saturates (~120 Mbit/s, a packet per 100 us) and they reach the limit.
    let sizes: Vec<f64> = [1_000_000, 200_000, 120_000, 90_000].iter().map(|&gap| mean_aggregate_at(gap)).collect();
    assert!((sizes[0] - 1.0).abs() < 1e-9, "{sizes:?}");
    assert!(sizes.windows(2).all(|w| w[1] > w[0]), "mean aggregate sizes must grow: {sizes:?}");
    assert!(sizes[3] > 30.0, "a saturated link sends nearly full A-MPDUs: {sizes:?}");
}

#[test]
fn txop_airtime_is_overhead_plus_bytes_at_the_phy_rate() {
    let wifi = fixed_access();
    let mut link = wifi_link(wifi, 1);
    let mut events = EventLog::default();
    for seq in 0..50 {
        send(&mut link, &mut events, 0, seq);
    }
    let deliveries = run_until(&mut link, &mut events, u64::MAX);
    // 42 MPDUs of 1542 bytes: 518 112 bits at 130 Mbit/s = 3 985 477 ns (rounded).
    let first_data = 42 * 1542 * 8 * 1_000_000_000u64;
    assert_eq!(wifi.data_airtime(42 * 1542), (first_data + 65_000_000) / 130_000_000);
    assert_eq!(wifi.data_airtime(42 * 1542), 3_985_477);
    // First TXOP: DIFS, preamble, data; the A-MPDU arrives at the end of its data.
    let first = 34 * US + 40 * US + 3_985_477;
    assert!(deliveries[..42].iter().all(|&(t, _)| t == first), "{:?}", &deliveries[..2]);
    // Second: after SIFS + block ACK, DIFS again, preamble, 8 MPDUs.
    let second = first + 16 * US + 32 * US + 34 * US + 40 * US + wifi.data_airtime(8 * 1542);
    assert!(deliveries[42..].iter().all(|&(t, _)| t == second), "{:?}", &deliveries[42..44]);
    assert_eq!(wifi.txop_overhead(), 88 * US);
}

/// IP bit/s a link delivers with `backlog` packets queued from the start.
fn saturated_rate(wifi: WifiConfig, backlog: u32) -> f64 {
    let mut link = wifi_link(wifi, 5);
    let mut events = EventLog::default();
    for seq in 0..backlog {
        send(&mut link, &mut events, 0, seq);
    }
    let deliveries = run_until(&mut link, &mut events, u64::MAX);
    assert_eq!(deliveries.len(), backlog as usize);
    let last = deliveries.last().map_or(1, |d| d.0) as f64 / SEC as f64;
    f64::from(backlog) * f64::from(PACKET) * 8.0 / last
}

#[test]
fn saturated_rate_matches_the_efficiency_formula() {
    // Efficiency = frames x IP bits / (mean access + preamble + data + SIFS + block ACK).
    // Full A-MPDUs (42 frames): 504 000 bits per 4 174.98 us -> 120.7 Mbit/s, 92.9% of the PHY.
    let aggregated = lossless();
    let efficiency = aggregated.saturated_efficiency(PACKET);
    assert!((efficiency - 0.9286).abs() < 1e-3, "efficiency {efficiency}");
    let rate = saturated_rate(aggregated, 100_000);
    let expected = efficiency * 130e6;
    // The only randomness is the backoff (std 41 us per TXOP of ~4.2 ms, over 2400 TXOPs).
    assert!((rate - expected).abs() / expected < 0.005, "aggregated: {rate} vs {expected}");
    // Without aggregation every 1500-byte packet pays the whole overhead: 12 000 bits per
    // 284.4 us -> 42.2 Mbit/s, 32% of the PHY.
    let single = WifiConfig { max_ampdu_frames: 1, ..lossless() };
    let efficiency = single.saturated_efficiency(PACKET);
    assert!((efficiency - 0.3245).abs() < 1e-3, "efficiency {efficiency}");
    let rate = saturated_rate(single, 20_000);
    let expected = efficiency * 130e6;
    assert!((rate - expected).abs() / expected < 0.005, "single frames: {rate} vs {expected}");
}

#[test]
fn a_lost_frame_comes_back_one_txop_later_with_the_frames_behind_it() {
    // Every frame of the first TXOP fails; then the channel is clean: the retry goes first in the
    // next A-MPDU, and the receiver hands everything on together, in sequence.
    let mut link = wifi_link(WifiConfig { frame_error_rate: 1.0, ..fixed_access() }, 1);
    let mut events = EventLog { enabled: true, events: Vec::new() };
    for seq in 0..3 {
        send(&mut link, &mut events, 0, seq);
    }
    let first_start = 34 * US;
    assert_eq!(link.next_event(), Some(first_start));
    assert!(link.step(first_start, &mut events).is_none());
    let config = LinkConfig { rate: Rate::Wifi(fixed_access()), ..link.config().clone() };
    link.reconfigure(first_start, config, &mut events).unwrap();
    assert_eq!(link.counters().in_flight_packets, 3, "held for a retry");
    for seq in 3..5 {
        send(&mut link, &mut events, 100 * US, seq);
    }
    let deliveries = run_until(&mut link, &mut events, u64::MAX);
    let wifi = fixed_access();
    let failed_txop = wifi.preamble + wifi.data_airtime(3 * 1542) + wifi.sifs + wifi.block_ack;
    let second = first_start + failed_txop + wifi.difs + wifi.preamble + wifi.data_airtime(5 * 1542);
    assert_eq!(deliveries, (0..5).map(|seq| (second, seq)).collect::<Vec<_>>());
    assert_eq!(link.counters().dropped_packets.random_loss, 0, "a retried frame is not lost");
    assert!(link.is_idle());
}

#[test]
fn the_receiver_releases_frames_in_sequence_and_losses_become_delay_bursts() {
    let wifi = WifiConfig { frame_error_rate: 0.2, ..lossless() };
    let mut link = wifi_link(wifi, 9);
    let mut events = EventLog::default();
    let mut deliveries = Vec::new();
    let gap = 150 * US; // 80 Mbit/s offered: aggregates of a few frames
    for seq in 0..5000 {
        let now = u64::from(seq) * gap;
        deliveries.extend(run_until(&mut link, &mut events, now));
        send(&mut link, &mut events, now, seq);
    }
    let sent_at = |seq: u32| u64::from(seq) * gap;
    deliveries.extend(run_until(&mut link, &mut events, u64::MAX));
    let order: Vec<u32> = deliveries.iter().map(|d| d.1).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "in sequence");
    let lost = link.counters().dropped_packets.random_loss;
    // 0.2^8 = 2.6e-6 per packet: no residual loss in 5000 packets, only delay.
    assert_eq!((deliveries.len() as u64, lost), (5000, 0));
    let delays: Vec<Nanos> = deliveries.iter().map(|d| d.0 - sent_at(d.1)).collect();
    let clean = {
        let mut link = wifi_link(lossless(), 9);
        let mut events = EventLog::default();
        let mut out = Vec::new();
        for seq in 0..5000 {
            let now = sent_at(seq);
            out.extend(run_until(&mut link, &mut events, now));
            send(&mut link, &mut events, now, seq);
        }
        out.extend(run_until(&mut link, &mut events, u64::MAX));
        out.iter().map(|d| d.0 - sent_at(d.1)).max().unwrap_or(0)
    };
    let late = delays.iter().filter(|&&d| d > clean).count();
    // Every failed frame (~20%) holds itself and the frames behind it for at least one TXOP.
    assert!(late > 1000, "{late} of 5000 packets later than the lossless link's worst {clean} ns");
    assert!(delays.iter().max() > Some(&(2 * clean)), "delay bursts of several TXOPs");
}

fn residual_loss(frame_error_rate: f64, retry_limit: u32, packets: u32) -> f64 {
    let wifi = WifiConfig { frame_error_rate, retry_limit, ..WifiConfig::default() };
    let mut link = wifi_link(wifi, 21);
    let mut events = EventLog { enabled: true, events: Vec::new() };
    for seq in 0..packets {
        send(&mut link, &mut events, 0, seq);
    }
    let delivered = run_until(&mut link, &mut events, u64::MAX).len() as u64;
    let counters = link.counters();
    assert_eq!(delivered + counters.dropped_packets.random_loss, u64::from(packets), "each packet delivered or lost");
    let drop_events = events.events.iter().filter(|e| e.kind == EventKind::Drop(DropCause::RandomLoss)).count() as u64;
    assert_eq!(drop_events, counters.dropped_packets.random_loss);
    counters.dropped_packets.random_loss as f64 / f64::from(packets)
}

#[test]
fn residual_loss_is_the_frame_error_rate_to_the_attempts() {
    let packets = 20_000;
    for (p, retries) in [(0.5, 0), (0.5, 2), (0.3, 1)] {
        let expected = f64::powi(p, retries as i32 + 1);
        let measured = residual_loss(p, retries, packets);
        let sd = (expected * (1.0 - expected) / f64::from(packets)).sqrt();
        assert!((measured - expected).abs() < 4.0 * sd, "p={p} R={retries}: {measured} vs {expected}");
    }
    assert_eq!(residual_loss(0.05, 7, 5000), 0.0, "0.05^8 = 4e-11");
}

#[test]
fn contention_delay_varies_per_txop_and_grows_with_other_stations() {
    // Single packets far apart: delay = access + preamble + one MPDU's airtime.
    let delays = |wifi: WifiConfig| -> Vec<f64> {
        let mut link = wifi_link(wifi, 4);
        let mut events = EventLog::default();
        let mut out = Vec::new();
        for seq in 0..5000u32 {
            let now = u64::from(seq) * 50 * MS;
            send(&mut link, &mut events, now, seq);
            out.extend(run_until(&mut link, &mut events, now + 49 * MS).into_iter().map(|(t, _)| (t - now) as f64));
        }
        out
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let fixed = (40 * US + lossless().data_airtime(1542)) as f64;
    let alone = delays(lossless());
    let expected = lossless().mean_access_time() + fixed;
    assert!((mean(&alone) - expected).abs() < 2_000.0, "{} vs {expected}", mean(&alone));
    let (lo, hi) = alone.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &d| (lo.min(d), hi.max(d)));
    assert_eq!((lo, hi), (34_000.0 + fixed, 34_000.0 + 15.0 * 9_000.0 + fixed), "backoff spans 0..=15 slots");
    // Half the time another station sends first (2 ms), geometrically: one extra TXOP + DIFS on
    // average (the number of deferrals has variance q/(1-q)^2 = 2; 4 standard errors allowed).
    let crowded = delays(WifiConfig { contention_probability: 0.5, ..lossless() });
    let deferral = (2 * MS + 34 * US) as f64;
    let expected = expected + 0.5 / 0.5 * deferral;
    let tolerance = 4.0 * 2f64.sqrt() * deferral / (crowded.len() as f64).sqrt();
    assert!((mean(&crowded) - expected).abs() < tolerance, "{} vs {expected} +- {tolerance}", mean(&crowded));
}

#[test]
fn a_seed_fixes_every_draw() {
    let run = |seed: u64| {
        let mut link = wifi_link(WifiConfig { frame_error_rate: 0.3, contention_probability: 0.2, ..WifiConfig::default() }, seed);
        let mut events = EventLog::default();
        let mut out = Vec::new();
        for seq in 0..2000 {
            let now = u64::from(seq) * 100 * US;
            out.extend(run_until(&mut link, &mut events, now));
            send(&mut link, &mut events, now, seq);
        }
        out.extend(run_until(&mut link, &mut events, u64::MAX));
        out
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

#[test]
fn leaving_wifi_hands_on_what_the_station_held() {
    let mut link = wifi_link(WifiConfig { frame_error_rate: 1.0, ..fixed_access() }, 1);
    let mut events = EventLog::default();
    for seq in 0..4 {
        send(&mut link, &mut events, 0, seq);
    }
    assert!(link.step(34 * US, &mut events).is_none()); // the TXOP fails: 4 frames held
    let config = LinkConfig { rate: Rate::Unlimited, ..link.config().clone() };
    link.reconfigure(MS, config, &mut events).unwrap();
    assert_eq!(run_until(&mut link, &mut events, u64::MAX), (0..4).map(|s| (MS, s)).collect::<Vec<_>>());
}

#[test]
fn refuses_bad_values_naming_the_field() {
    let field = |wifi: WifiConfig| {
        LinkConfig { rate: Rate::Wifi(wifi), ..LinkConfig::default() }.validate().unwrap_err().field
    };
    assert_eq!(field(WifiConfig { phy_rate_bps: 0, ..WifiConfig::default() }), "wifi.phy_rate_bps");
    assert_eq!(field(WifiConfig { max_ampdu_frames: 0, ..WifiConfig::default() }), "wifi.max_ampdu_frames");
    assert_eq!(field(WifiConfig { difs: 0, ..WifiConfig::default() }), "wifi.difs");
    assert_eq!(field(WifiConfig { cw_min: 31, cw_max: 15, ..WifiConfig::default() }), "wifi.cw_min");
    assert_eq!(field(WifiConfig { frame_error_rate: 1.5, ..WifiConfig::default() }), "wifi.frame_error_rate");
    assert_eq!(field(WifiConfig { contention_probability: 1.0, ..WifiConfig::default() }), "wifi.contention_probability");
    assert!(WifiConfig::default().validate().is_ok());
}
