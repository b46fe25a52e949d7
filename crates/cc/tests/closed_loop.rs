//! The controllers in a closed loop on a virtual clock (tests/harness): a greedy sender through
//! netmodel's bottleneck link. What each must do: fill the link (Cubic, NewReno), keep about
//! alpha packets queued (FAST), hold its rate (fixed), follow a change of the link's rate
//! (Sprout-EWMA).

mod harness;

use std::time::Instant;

use cc::cubic::{Cubic, CubicConfig};
use cc::fast::{Fast, FastConfig};
use cc::fixed::{Fixed, FixedConfig};
use cc::reno::{Reno, RenoConfig};
use cc::sprout::{SproutConfig, SproutEwma};
use cc::Algorithm;
use harness::{link, Sim};
use netmodel::{EventLog, LinkConfig, Rate, SEC};

const PACKET: u64 = 1200;
const MBIT: u64 = 1_000_000;

/// A link of `rate_mbit` with `rtt_ms` of RTT (half each way) and a queue of `queue_bytes`.
fn sim(rate_mbit: u64, rtt_ms: u64, queue_bytes: u64, make: impl FnOnce(Instant) -> Box<dyn Algorithm>) -> Sim {
    Sim::new(link(rate_mbit * MBIT, rtt_ms / 2, queue_bytes), rtt_ms / 2, PACKET, make)
}

fn bdp(rate_mbit: u64, rtt_ms: u64) -> u64 {
    rate_mbit * MBIT / 8 * rtt_ms / 1000
}

#[test]
fn loss_based_controllers_fill_the_link() {
    let mtu = PACKET as u16;
    for (name, algorithm) in [
        ("cubic", Box::new(Cubic::new(CubicConfig::default(), mtu)) as Box<dyn Algorithm>),
        ("cubic without hystart", Box::new(Cubic::new(CubicConfig { hystart: None, ..CubicConfig::default() }, mtu))),
        ("gquic39", Box::new(Cubic::new(CubicConfig { connections: 2, initial_window_packets: 32, ..CubicConfig::default() }, mtu))),
        ("reno", Box::new(Reno::new(RenoConfig::default(), mtu))),
    ] {
        let mut s = sim(10, 50, bdp(10, 50), |_| algorithm);
        s.run_until(20 * SEC);
        let rate = s.delivered_rate_bps(2 * SEC, 20 * SEC);
        eprintln!("{name}: {:.2} Mbit/s, {} lost", rate / 1e6, s.lost_packets);
        assert!(rate > 0.9 * 10e6, "{name}: {rate:.0} bit/s");
        assert!(s.lost_packets > 0, "{name}: a full 1-BDP queue drops");
    }
}

#[test]
fn fast_keeps_about_alpha_packets_queued() {
    for alpha in [10.0, 20.0] {
        let config = FastConfig { alpha, ..FastConfig::default() };
        let mut s = sim(10, 40, 1000 * PACKET, |_| Box::new(Fast::new(config, PACKET as u16)));
        s.run_until(30 * SEC);
        let queued = s.mean_queue(15 * SEC, 30 * SEC);
        eprintln!("fast alpha {alpha}: {queued:.2} packets queued, {:.2} Mbit/s", s.delivered_rate_bps(15 * SEC, 30 * SEC) / 1e6);
        assert!((queued - alpha).abs() < 0.25 * alpha, "alpha {alpha}: {queued:.1} packets queued");
        // Without losses the link stays busy.
        assert_eq!(s.lost_packets, 0, "alpha {alpha}");
        let rate = s.delivered_rate_bps(15 * SEC, 30 * SEC);
        assert!(rate > 0.97 * 10e6, "alpha {alpha}: {rate:.0}");
    }
}

#[test]
fn fixed_holds_its_rate() {
    for (rate_mbit, link_mbit) in [(5, 10), (2, 10), (8, 50)] {
        let config = FixedConfig { rate_bps: rate_mbit * MBIT, initial_window_bytes: None };
        let mut s = sim(link_mbit, 40, bdp(link_mbit, 40), |t0| Box::new(Fixed::new(config, t0, PACKET as u16)));
        s.run_until(12 * SEC);
        let rate = s.delivered_rate_bps(2 * SEC, 12 * SEC);
        let want = (rate_mbit * MBIT) as f64;
        eprintln!("fixed {rate_mbit} Mbit/s over {link_mbit}: {:.4} Mbit/s", rate / 1e6);
        assert!((rate - want).abs() < 0.02 * want, "{rate_mbit} Mbit/s over {link_mbit}: {rate:.0}");
    }
    // Above the link's rate it does not back off: the queue fills and drops.
    let over = FixedConfig { rate_bps: 11 * MBIT, initial_window_bytes: None };
    let mut s = sim(10, 40, bdp(10, 40), |t0| Box::new(Fixed::new(over, t0, PACKET as u16)));
    s.run_until(10 * SEC);
    assert!(s.lost_packets > 100, "{} lost", s.lost_packets);
    assert!(s.delivered_rate_bps(2 * SEC, 10 * SEC) > 0.97 * 10e6);
}

fn set_rate(s: &mut Sim, rate_mbit: u64) {
    let config = LinkConfig { rate: Rate::BitsPerSecond(rate_mbit * MBIT), ..s.link.config().clone() };
    let mut events = EventLog::default();
    s.link.reconfigure(s.now, config, &mut events).expect("a valid link");
}

#[test]
fn sprout_ewma_follows_a_rate_step_within_a_second() {
    for (before, after) in [(10, 5), (5, 10)] {
        let mut s = sim(before, 50, 1000 * PACKET, |t0| Box::new(SproutEwma::new(SproutConfig::default(), t0, PACKET as u16)));
        s.run_until(10 * SEC);
        let steady = s.delivered_rate_bps(5 * SEC, 10 * SEC);
        assert!(steady > 0.95 * (before * MBIT) as f64, "{before} Mbit/s before the step: {steady:.0}");
        set_rate(&mut s, after);
        s.run_until(11 * SEC);
        let want = (after * MBIT) as f64;
        let estimate = rate_of(&*s.algorithm);
        eprintln!("sprout {before} -> {after}: estimate {:.2} Mbit/s 1 s after the step", estimate / 1e6);
        assert!((estimate - want).abs() < 0.15 * want, "{before} -> {after}: estimate {estimate:.0} one second after the step");
        s.run_until(12 * SEC);
        let delivered = s.delivered_rate_bps(11 * SEC, 12 * SEC);
        eprintln!("sprout {before} -> {after}: delivered {:.2} Mbit/s in the second after", delivered / 1e6);
        assert!((delivered - want).abs() < 0.15 * want, "{before} -> {after}: delivered {delivered:.0}");
    }
}

/// Sprout-EWMA's estimate, read through its window: window = rate x (min RTT + target).
fn rate_of(algorithm: &dyn Algorithm) -> f64 {
    let horizon = 0.050 + 0.100;
    algorithm.window() as f64 * 8.0 / horizon
}
