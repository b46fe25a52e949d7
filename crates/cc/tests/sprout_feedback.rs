//! Sprout-EWMA's receiver feedback on a virtual clock: the receiver's estimate over netmodel's
//! Mahimahi trace link (kept busy by a greedy sender) follows a step of the trace's rate within
//! the time an EWMA of gain 1/8 at 20 ms ticks needs, the sender's window follows the reports
//! that cross back, and the whole loop (sender, bottleneck, receiver, reports) fills the link and
//! follows a step of its rate.

mod harness;

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cc::sprout_feedback::{EstimatorConfig, ReceiverEstimator, SproutFeedback, SproutFeedbackConfig};
use cc::{Ack, Algorithm, RttSample};
use netmodel::{DeliveryTrace, EventLog, FlowKey, Link, LinkConfig, Nanos, Packet, QueueConfig, QueueKind, QueueLimit, Rate, MS, SEC};

const PACKET: u32 = 1500;
const TICK_MS: u64 = 20;

/// A trace of `first_mbit` for its first half and `second_mbit` for its second, `half_s` each
/// (Mahimahi: one 1 500-byte opportunity per line; 12 Mbit/s = one per millisecond).
fn step_trace(first_per_ms: u64, second_every_ms: u64, half_ms: u64) -> DeliveryTrace {
    let mut times = Vec::new();
    for ms in 1..=half_ms {
        times.extend((0..first_per_ms).map(|_| ms));
    }
    times.extend((half_ms / second_every_ms + 1..=2 * half_ms / second_every_ms).map(|k| k * second_every_ms));
    DeliveryTrace::from_times_ms(times).expect("a valid trace")
}

/// The receiver's estimate (bit/s) at the end of every tick over `duration`, with the link
/// always backlogged.
fn estimates_over(trace: DeliveryTrace, duration: Nanos) -> Vec<(Nanos, f64)> {
    let config = LinkConfig {
        rate: Rate::Trace(Arc::new(trace)),
        queue: QueueConfig { kind: QueueKind::DropTail, limit: QueueLimit::Packets(100_000) },
        delay: 10 * MS,
        jitter: None,
        loss: None,
        shaper: None,
    };
    let mut link: Link<u64> = Link::new(0, config, 1, 0).expect("a valid link");
    let mut events = EventLog::default();
    let flow = FlowKey { src: Ipv4Addr::new(10, 0, 0, 2), dst: Ipv4Addr::new(10, 0, 0, 1), sport: 443, dport: 4000, proto: 17 };
    let t0 = Instant::now();
    let mut estimator = ReceiverEstimator::new(EstimatorConfig::default(), t0);
    let mut estimates = Vec::new();
    let mut sent = 0u64;
    let mut now: Nanos = 0;
    while now < duration {
        // Greedy: the queue never runs dry (at most 4 packets per opportunity millisecond).
        while link.counters().queue_packets < 200 {
            link.arrive(now, Packet::new(PACKET, flow, 0, sent), &mut events);
            sent += 1;
        }
        while let Some((_, packet)) = link.step(now, &mut events) {
            estimator.record(u64::from(packet.size));
        }
        now += 100_000;
        if now.is_multiple_of(TICK_MS * MS) {
            estimator.on_tick(t0 + Duration::from_nanos(now));
            estimates.push((now, estimator.rate_bps().unwrap_or(0.0)));
        }
    }
    estimates
}

/// The first tick after `from` at which the estimate is within `fraction` of the step from
/// `before` to `after`.
fn settled_after(estimates: &[(Nanos, f64)], from: Nanos, before: f64, after: f64, fraction: f64) -> Option<Nanos> {
    let step = (after - before).abs();
    estimates.iter().find(|(t, e)| *t > from && (e - after).abs() <= fraction * step).map(|(t, _)| t - from)
}

#[test]
fn the_receivers_estimate_follows_a_rate_step_of_the_trace() {
    // 12 Mbit/s for 2 s, then 6 Mbit/s for 2 s; the trace loops, so back to 12 at 4 s. The
    // link's 10 ms delay shifts the deliveries, and so the steps, by 10 ms.
    let estimates = estimates_over(step_trace(1, 2, 2000), 6 * SEC);
    let at = |t: Nanos| estimates.iter().find(|(s, _)| *s >= t).map_or(0.0, |(_, e)| *e);
    let (high, low) = (12e6, 6e6);
    assert!((at(2 * SEC) - high).abs() < 0.02 * high, "before the step: {:.3} Mbit/s", at(2 * SEC) / 1e6);
    assert!((at(4 * SEC) - low).abs() < 0.02 * low, "before the step back: {:.3} Mbit/s", at(4 * SEC) / 1e6);
    // After n ticks an EWMA of gain 1/8 has (7/8)^n of a step left: 10% after
    // ln(0.1) / ln(7/8) = 17.2 ticks, so at the 18th tick (360 ms), plus the tick the delay
    // splits; 30% after 9 ticks (180 ms) is not yet within 20%.
    let step_at = 2 * SEC + 10 * MS;
    for (from, before, after) in [(step_at, high, low), (step_at + 2 * SEC, low, high)] {
        let within_10 = settled_after(&estimates, from, before, after, 0.10).expect("the estimate settles");
        let within_20 = settled_after(&estimates, from, before, after, 0.20).expect("the estimate settles");
        eprintln!(
            "{:.0} -> {:.0} Mbit/s: within 20% of the step after {} ms, within 10% after {} ms",
            before / 1e6,
            after / 1e6,
            within_20 / MS,
            within_10 / MS
        );
        assert!((17 * TICK_MS * MS..=19 * TICK_MS * MS).contains(&within_10), "10%: {} ms", within_10 / MS);
        assert!(within_20 > 9 * TICK_MS * MS, "20%: {} ms", within_20 / MS);
    }
}

#[test]
fn the_senders_window_follows_the_reports_across_a_step() {
    // The receiver's reports cross back (here: offered to the slot as the datagrams would be)
    // and the sender's window is rate x (min RTT + min(100 ms, min RTT)) of the newest one.
    let estimates = estimates_over(step_trace(1, 2, 2000), 3 * SEC);
    let t0 = Instant::now();
    let mut sender = SproutFeedback::new(&SproutFeedbackConfig::default(), 1200);
    let slot = sender.feedback_slot().expect("a slot");
    let min = Duration::from_millis(40);
    let rtt = RttSample { latest: min, smoothed: min, min };
    let mut windows = Vec::new();
    for (seq, (t, estimate)) in estimates.iter().enumerate() {
        let report = cc::sprout_feedback::RateReport { seq: seq as u32 + 1, rate_bytes_per_s: (*estimate / 8.0) as u64 };
        slot.offer(&report.encode()).expect("a valid report");
        let now = t0 + Duration::from_nanos(*t);
        sender.on_ack(&Ack { now, sent: now - min, bytes: 1200, app_limited: false, rtt });
        windows.push((*t, sender.window(), report.rate_bytes_per_s));
    }
    for (t, window, rate) in &windows {
        let want = (*rate as f64 * 0.080) as u64;
        assert!(window.abs_diff(want) <= 1, "at {} ms: window {window}, want {want}", t / MS);
    }
    let window_at = |t: Nanos| windows.iter().find(|(s, _, _)| *s >= t).map_or(0, |w| w.1);
    // 12 Mbit/s x 80 ms = 120 000 bytes before the step; 6 Mbit/s x 80 ms = 60 000 after.
    assert!(window_at(2 * SEC).abs_diff(120_000) < 2_400, "{}", window_at(2 * SEC));
    assert!(window_at(3 * SEC - TICK_MS * MS).abs_diff(60_000) < 1_800, "{}", window_at(3 * SEC - TICK_MS * MS));
}

/// The whole loop on a virtual clock: a greedy sender under `sprout-ewma` through netmodel's
/// bottleneck (tests/harness), the receiver's estimate over what the link delivers, each report
/// back to the sender's slot after the return path's delay.
fn closed_loop(before_mbit: u64, after_mbit: u64) -> (harness::Sim, f64) {
    const MBIT: u64 = 1_000_000;
    let one_way = 25;
    let link = harness::link(before_mbit * MBIT, one_way, 1000 * 1200);
    let mut s = harness::Sim::new(link, one_way, 1200, |_| Box::new(SproutFeedback::new(&SproutFeedbackConfig::default(), 1200)));
    let slot = s.algorithm.feedback_slot().expect("sprout-ewma takes feedback");
    let mut estimator = ReceiverEstimator::new(EstimatorConfig::default(), s.t0);
    let mut in_flight: VecDeque<(Nanos, [u8; cc::sprout_feedback::REPORT_LEN])> = VecDeque::new();
    let mut counted = 0;
    let mut estimate_after = 0.0;
    for ms in 1..=12_000u64 {
        if ms == 10_000 {
            let config = LinkConfig { rate: Rate::BitsPerSecond(after_mbit * MBIT), ..s.link.config().clone() };
            s.link.reconfigure(s.now, config, &mut EventLog::default()).expect("a valid link");
        }
        s.run_until(ms * MS);
        while in_flight.front().is_some_and(|(at, _)| *at <= s.now) {
            if let Some((_, report)) = in_flight.pop_front() {
                slot.offer(&report).expect("the receiver's reports are valid and in order");
            }
        }
        if ms.is_multiple_of(TICK_MS) {
            estimator.record(s.delivered[counted..].iter().map(|(_, bytes)| bytes).sum());
            counted = s.delivered.len();
            if let Some(report) = estimator.on_tick(s.instant(s.now)) {
                in_flight.push_back((s.now + one_way * MS, report.encode()));
            }
            if ms == 11_000 {
                estimate_after = estimator.rate_bps().unwrap_or(0.0);
            }
        }
    }
    (s, estimate_after)
}

#[test]
fn the_closed_loop_fills_the_link_and_follows_a_step() {
    for (before, after) in [(10u64, 5u64), (5, 10)] {
        let (s, estimate) = closed_loop(before, after);
        let steady = s.delivered_rate_bps(5 * SEC, 10 * SEC);
        let following = s.delivered_rate_bps(11 * SEC, 12 * SEC);
        // The window allows min RTT + min(100 ms, min RTT) = 100 ms of the rate: about 50 ms of
        // queue at 50 ms RTT, and no loss with a queue of 1 000 packets.
        let queued = s.mean_queue(5 * SEC, 10 * SEC) * 1200.0 * 8.0 / (before * 1_000_000) as f64;
        eprintln!(
            "closed loop {before} -> {after} Mbit/s: {:.2} delivered before the step, {:.2} 1-2 s after it; estimate {:.2} 1 s after; \
             {:.0} ms queued before; {} lost",
            steady / 1e6,
            following / 1e6,
            estimate / 1e6,
            queued * 1e3,
            s.lost_packets
        );
        let (want_before, want_after) = ((before * 1_000_000) as f64, (after * 1_000_000) as f64);
        assert!(steady > 0.95 * want_before, "{before} Mbit/s: {steady:.0}");
        assert!((following - want_after).abs() < 0.1 * want_after, "after {after} Mbit/s: {following:.0}");
        assert!((estimate - want_after).abs() < 0.1 * want_after, "estimate {estimate:.0}");
        assert!(queued > 0.02 && queued < 0.08, "{queued} s queued");
        assert_eq!(s.lost_packets, 0);
    }
}
