//! HyStart++ (RFC 9406): leave slow start when the RTT rises, through a conservative slow
//! start (CSS) that goes back to slow start if the rise was spurious. Every constant is a
//! parameter (000 ch. 6 shows the defaults exiting too early under WiFi delay variation).

use std::time::Duration;

/// HyStart++ constants (RFC 9406 §4.3, with its recommended values as defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HystartConfig {
    /// MIN_RTT_THRESH: the smallest RTT rise that ends slow start (4 ms).
    pub min_rtt_thresh: Duration,
    /// MAX_RTT_THRESH: the largest (16 ms).
    pub max_rtt_thresh: Duration,
    /// MIN_RTT_DIVISOR: the threshold is the last round's minimum RTT divided by this (8).
    pub min_rtt_divisor: u32,
    /// N_RTT_SAMPLE: RTT samples a round needs before it is compared (8).
    pub n_rtt_sample: u32,
    /// CSS_GROWTH_DIVISOR: CSS grows the window this many times slower than slow start (4).
    pub css_growth_divisor: u32,
    /// CSS_ROUNDS: rounds of CSS before congestion avoidance (5).
    pub css_rounds: u32,
}

impl Default for HystartConfig {
    fn default() -> Self {
        HystartConfig {
            min_rtt_thresh: Duration::from_millis(4),
            max_rtt_thresh: Duration::from_millis(16),
            min_rtt_divisor: 8,
            n_rtt_sample: 8,
            css_growth_divisor: 4,
            css_rounds: 5,
        }
    }
}

/// Where HyStart++ is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Standard slow start, watching the RTT.
    SlowStart,
    /// Conservative slow start, for `rounds` complete rounds so far.
    Css {
        /// Rounds completed in CSS.
        rounds: u32,
    },
    /// Slow start is over (congestion avoidance, or a loss ended it).
    Done,
}

/// What an event changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The RTT rose by the threshold: slow start became CSS.
    EnterCss,
    /// In CSS the RTT fell below the baseline: the exit was spurious, back to slow start.
    ResumeSlowStart,
    /// CSS lasted its rounds: congestion avoidance, with ssthresh = cwnd.
    EnterCongestionAvoidance,
}

/// The HyStart++ state machine, fed with RTT samples and round starts.
#[derive(Debug, Clone)]
pub struct HyStart {
    config: HystartConfig,
    phase: Phase,
    last_round_min: Option<Duration>,
    current_round_min: Option<Duration>,
    samples: u32,
    css_baseline: Option<Duration>,
}

impl HyStart {
    /// A HyStart++ in slow start.
    pub fn new(config: HystartConfig) -> HyStart {
        HyStart { config, phase: Phase::SlowStart, last_round_min: None, current_round_min: None, samples: 0, css_baseline: None }
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The constants.
    pub fn config(&self) -> &HystartConfig {
        &self.config
    }

    /// The RTT rise that ends slow start, given the last round's minimum RTT (RFC 9406:
    /// `max(MIN_RTT_THRESH, min(lastRoundMinRTT / MIN_RTT_DIVISOR, MAX_RTT_THRESH))`).
    pub fn threshold(&self, last_round_min: Duration) -> Duration {
        let divided = last_round_min / self.config.min_rtt_divisor.max(1);
        divided.min(self.config.max_rtt_thresh).max(self.config.min_rtt_thresh)
    }

    /// The divisor of window growth in the current phase (1 in slow start, CSS_GROWTH_DIVISOR
    /// in CSS).
    pub fn growth_divisor(&self) -> u64 {
        match self.phase {
            Phase::Css { .. } => u64::from(self.config.css_growth_divisor.max(1)),
            _ => 1,
        }
    }

    /// A new round started.
    pub fn on_round_start(&mut self) -> Option<Change> {
        if self.phase == Phase::Done {
            return None;
        }
        self.last_round_min = self.current_round_min;
        self.current_round_min = None;
        self.samples = 0;
        if let Phase::Css { rounds } = self.phase {
            let rounds = rounds + 1;
            if rounds >= self.config.css_rounds {
                self.phase = Phase::Done;
                return Some(Change::EnterCongestionAvoidance);
            }
            self.phase = Phase::Css { rounds };
        }
        None
    }

    /// An RTT sample of an acknowledgement in slow start or CSS.
    pub fn on_rtt_sample(&mut self, rtt: Duration) -> Option<Change> {
        if self.phase == Phase::Done {
            return None;
        }
        self.current_round_min = Some(self.current_round_min.map_or(rtt, |m| m.min(rtt)));
        self.samples = self.samples.saturating_add(1);
        if self.samples < self.config.n_rtt_sample {
            return None;
        }
        let current = self.current_round_min?;
        match self.phase {
            Phase::SlowStart => {
                let last = self.last_round_min?;
                if current >= last + self.threshold(last) {
                    self.css_baseline = Some(current);
                    self.phase = Phase::Css { rounds: 0 };
                    return Some(Change::EnterCss);
                }
                None
            }
            Phase::Css { .. } => {
                if self.css_baseline.is_some_and(|baseline| current < baseline) {
                    self.css_baseline = None;
                    self.phase = Phase::SlowStart;
                    return Some(Change::ResumeSlowStart);
                }
                None
            }
            Phase::Done => None,
        }
    }

    /// Slow start ended for another reason (a loss, or the window reached ssthresh).
    pub fn finish(&mut self) {
        self.phase = Phase::Done;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Feeds one round of `n` samples at `rtt`; returns the changes.
    fn round(h: &mut HyStart, n: u32, rtt: Duration) -> Vec<Change> {
        let mut changes: Vec<Change> = h.on_round_start().into_iter().collect();
        for _ in 0..n {
            changes.extend(h.on_rtt_sample(rtt));
        }
        changes
    }

    #[test]
    fn threshold_is_clamped_eighth_of_min_rtt() {
        let h = HyStart::new(HystartConfig::default());
        assert_eq!(h.threshold(ms(20)), ms(4), "20/8 = 2.5 ms, raised to the 4 ms floor");
        assert_eq!(h.threshold(ms(80)), ms(10));
        assert_eq!(h.threshold(ms(400)), ms(16), "50 ms, capped at 16 ms");
    }

    #[test]
    fn stays_in_slow_start_while_rtt_is_flat_and_below_threshold() {
        let mut h = HyStart::new(HystartConfig::default());
        for r in 0..20 {
            // 80 ms +- 9 ms: below the 10 ms threshold.
            let rtt = if r % 2 == 0 { ms(80) } else { ms(89) };
            assert!(round(&mut h, 10, rtt).is_empty(), "round {r}");
        }
        assert_eq!(h.phase(), Phase::SlowStart);
    }

    #[test]
    fn leaves_slow_start_when_round_min_rtt_rises_by_threshold() {
        let mut h = HyStart::new(HystartConfig::default());
        round(&mut h, 10, ms(80));
        assert_eq!(round(&mut h, 10, ms(90)), vec![Change::EnterCss], "80 + 10 ms");
        assert_eq!(h.phase(), Phase::Css { rounds: 0 });
        assert_eq!(h.growth_divisor(), 4);
    }

    #[test]
    fn needs_enough_samples_in_the_round() {
        let mut h = HyStart::new(HystartConfig::default());
        round(&mut h, 10, ms(80));
        assert!(round(&mut h, 7, ms(120)).is_empty(), "7 < N_RTT_SAMPLE");
        assert_eq!(h.phase(), Phase::SlowStart);
    }

    #[test]
    fn css_resumes_slow_start_on_spurious_exit_and_ends_after_its_rounds() {
        let mut h = HyStart::new(HystartConfig::default());
        round(&mut h, 10, ms(80));
        assert_eq!(round(&mut h, 10, ms(95)), vec![Change::EnterCss]);
        assert_eq!(round(&mut h, 10, ms(85)), vec![Change::ResumeSlowStart], "below the 95 ms baseline");
        assert_eq!(h.phase(), Phase::SlowStart);
        // Rise again (85 -> 100), then stay high for CSS_ROUNDS rounds.
        assert_eq!(round(&mut h, 10, ms(100)), vec![Change::EnterCss]);
        let mut all = Vec::new();
        for _ in 0..5 {
            all.extend(round(&mut h, 10, ms(100)));
        }
        assert_eq!(all, vec![Change::EnterCongestionAvoidance]);
        assert_eq!(h.phase(), Phase::Done);
    }

    #[test]
    fn tuned_thresholds_tolerate_larger_rises() {
        let tuned = HystartConfig { min_rtt_thresh: ms(16), max_rtt_thresh: ms(64), ..HystartConfig::default() };
        let mut h = HyStart::new(tuned);
        round(&mut h, 10, ms(40));
        assert!(round(&mut h, 10, ms(54)).is_empty(), "14 ms rise < 16 ms floor");
        assert_eq!(round(&mut h, 10, ms(71)), vec![Change::EnterCss], "the round's minimum 71 >= 54 + 16");
    }
}
