//! The arithmetic of the responsiveness test (draft-ietf-ippm-responsiveness, "Test
//! Parameters", "Aggregating the Measurements", "Final Algorithm", "Confidence of
//! Test-Results"), free of I/O and clocks: the caller feeds it per-interval byte counts and
//! probe times and asks what the draft concludes. Tested on fixed data.

/// The draft's parameters, the responsiveness figures and the confidence levels are document
/// types (`contract::rpm`): the result carries them.
pub use contract::rpm::{Combined, Confidence, Parameters, Percentile90, Responsiveness, FOREIGN_PROBE_BYTES, SELF_PROBE_BYTES};

/// Mean of the lowest `keep_percent` of `values` (the draft's single-sided trimmed mean: the
/// largest values are the outliers of a latency sample). At least one value is kept.
pub fn trimmed_mean(values: &[f64], keep_percent: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let keep = ((v.len() as f64 * keep_percent / 100.0).ceil() as usize).clamp(1, v.len());
    Some(v[..keep].iter().sum::<f64>() / keep as f64)
}

/// The `p`th percentile of `values` by the nearest-rank method (the smallest value with at
/// least `p` percent of the values at or below it). None without a finite value.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// Population standard deviation.
fn std_dev(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt()
}

/// The draft's stability test: the standard deviation of the last `mad` values is below `sdt`
/// percent of the last one. Fewer than `mad` values are never stable.
pub fn is_stable(values: &[f64], mad: usize, sdt: f64) -> bool {
    if values.len() < mad {
        return false;
    }
    let window = &values[values.len() - mad..];
    let current = window[mad - 1];
    current > 0.0 && std_dev(window) < sdt / 100.0 * current
}

/// The times of the probes of one aggregation window, milliseconds.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProbeTimes {
    /// Foreign probes: TCP handshake (or, over QUIC, the QUIC handshake).
    pub connect: Vec<f64>,
    /// Foreign probes: TLS handshake normalised to one round trip (TLS over TCP only).
    pub tls: Vec<f64>,
    /// Foreign probes: the HTTP GET of the small object.
    pub http_foreign: Vec<f64>,
    /// Self probes: the HTTP GET of the small object on a load-generating connection (or the
    /// TCP stack's RTT estimate where requests cannot be multiplexed: HTTP/1.1).
    pub http_self: Vec<f64>,
}

/// The draft's formulas over `probes`, with the trimmed mean keeping `tmp` percent, and beside
/// them goresponsiveness's (latencies averaged, converted once) and both over the 90th
/// percentiles. None when a term has no probe. QUIC's handshake stands in for TCP's, and has
/// no separate TLS term (TLS is inside it), so it takes the TCP-only formula.
pub fn responsiveness(probes: &ProbeTimes, tmp: f64) -> Option<Responsiveness> {
    let connect = trimmed_mean(&probes.connect, tmp)?;
    let http_foreign = trimmed_mean(&probes.http_foreign, tmp)?;
    let http_self = trimmed_mean(&probes.http_self, tmp)?;
    let mut r = Responsiveness::from_means(connect, trimmed_mean(&probes.tls, tmp), http_foreign, http_self)?;
    r.p90 = percentile_90(probes);
    Some(r)
}

/// Both formulas over the 90th percentile of each term.
fn percentile_90(probes: &ProbeTimes) -> Option<Percentile90> {
    let connect_ms = percentile(&probes.connect, 90.0)?;
    let tls_ms = percentile(&probes.tls, 90.0);
    let http_foreign_ms = percentile(&probes.http_foreign, 90.0)?;
    let http_self_ms = percentile(&probes.http_self, 90.0)?;
    let c = Combined::of(connect_ms, tls_ms, http_foreign_ms, http_self_ms)?;
    Some(Percentile90 { connect_ms, tls_ms, http_foreign_ms, http_self_ms, rpm: c.draft_rpm, rpm_latency_mean: c.latency_mean_rpm })
}

/// What the algorithm says at the end of an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Keep adding load: goodput is not stable yet.
    Ramping,
    /// Goodput is stable (saturated); keep probing until responsiveness is stable.
    Saturated,
    /// Both stable: the test is over.
    Done,
}

/// The state of one direction's test, interval by interval.
#[derive(Debug, Clone)]
pub struct Stages {
    params: Parameters,
    /// Bytes moved per interval.
    interval_bytes: Vec<u64>,
    /// Moving-average aggregate goodput after each interval, bit/s.
    pub moving_goodput_bps: Vec<f64>,
    /// Interval index at which goodput saturation was declared.
    pub saturated_at: Option<usize>,
    /// Responsiveness after each interval from saturation on.
    pub responsiveness: Vec<Responsiveness>,
    /// Whether responsiveness reached stability.
    pub done: bool,
}

impl Stages {
    /// A new test with these parameters.
    pub fn new(params: Parameters) -> Stages {
        Stages { params, interval_bytes: Vec::new(), moving_goodput_bps: Vec::new(), saturated_at: None, responsiveness: Vec::new(), done: false }
    }

    /// The end of an interval with `bytes` moved in it and `window` the probes of the last MAD
    /// intervals (completed ones). Returns the verdict.
    pub fn end_interval(&mut self, bytes: u64, window: &ProbeTimes) -> Verdict {
        let p = self.params;
        self.interval_bytes.push(bytes);
        let recent = &self.interval_bytes[self.interval_bytes.len().saturating_sub(p.mad)..];
        // "divided by MAD times ID": the first intervals' averages are low on purpose, so
        // that saturation is not declared before MAD intervals have run.
        let average = recent.iter().sum::<u64>() as f64 * 8.0 / (p.mad as f64 * p.interval_s);
        self.moving_goodput_bps.push(average);
        if self.saturated_at.is_none() {
            if is_stable(&self.moving_goodput_bps, p.mad, p.sdt) {
                self.saturated_at = Some(self.interval_bytes.len() - 1);
            } else {
                return Verdict::Ramping;
            }
        }
        if let Some(r) = responsiveness(window, p.tmp) {
            self.responsiveness.push(r);
            let rpms: Vec<f64> = self.responsiveness.iter().map(|r| r.rpm).collect();
            if is_stable(&rpms, p.mad, p.sdt) {
                self.done = true;
                return Verdict::Done;
            }
        }
        Verdict::Saturated
    }

    /// Intervals ended so far.
    pub fn intervals(&self) -> usize {
        self.interval_bytes.len()
    }

    /// The capacity: the last moving-average goodput, bit/s.
    pub fn capacity_bps(&self) -> Option<f64> {
        self.moving_goodput_bps.last().copied()
    }

    /// Confidence in the capacity.
    pub fn capacity_confidence(&self) -> Confidence {
        Confidence::of(self.moving_goodput_bps.len(), self.params.mad, self.saturated_at.is_some())
    }

    /// Confidence in the responsiveness.
    pub fn rpm_confidence(&self) -> Confidence {
        Confidence::of(self.responsiveness.len(), self.params.mad, self.done)
    }

    /// The direction's answer at its end, `last_window` being the probes of its last MAD
    /// intervals: the last responsiveness computed after saturation, with its confidence; if
    /// goodput never saturated, the responsiveness of `last_window` (the load at its highest)
    /// labelled [`Confidence::Speculative`] rather than no number at all.
    pub fn final_responsiveness(&self, last_window: &ProbeTimes) -> (Option<Responsiveness>, Confidence) {
        if self.saturated_at.is_none() {
            if let Some(r) = responsiveness(last_window, self.params.tmp) {
                return (Some(r), Confidence::Speculative);
            }
        }
        (self.responsiveness.last().copied(), self.rpm_confidence())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn trimmed_mean_drops_the_top_share() {
        let mut v: Vec<f64> = (1..=20).map(f64::from).collect();
        // 95% of 20 = 19 kept: 1..=19.
        assert!(close(trimmed_mean(&v, 95.0).unwrap(), 10.0));
        v.push(10_000.0); // 21 values: ceil(19.95) = 20 kept, the outlier dropped
        assert!(close(trimmed_mean(&v, 95.0).unwrap(), 10.5));
        assert!(close(trimmed_mean(&[7.0], 95.0).unwrap(), 7.0));
        assert_eq!(trimmed_mean(&[], 95.0), None);
        assert!(close(trimmed_mean(&[3.0, 1.0, 2.0], 100.0).unwrap(), 2.0));
        assert_eq!(trimmed_mean(&[f64::NAN], 95.0), None);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        assert_eq!(percentile(&v, 90.0), Some(9.0));
        assert_eq!(percentile(&v, 100.0), Some(10.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[5.0, 1.0], 90.0), Some(5.0));
        assert_eq!(percentile(&[], 90.0), None);
    }

    /// Self probes twenty times slower than foreign ones: a full drop-tail buffer behind the
    /// load (foreign probes on new connections, whose first packets the queue delays too, are
    /// made fast here on purpose to isolate the formulas).
    fn bloated_probes() -> ProbeTimes {
        let foreign: Vec<f64> = (0..10).map(|i| 38.0 + f64::from(i % 5)).collect(); // 38..42, mean 40
        let slow: Vec<f64> = (0..10).map(|i| 1800.0 + 100.0 * f64::from(i % 5)).collect(); // 1800..2200, mean 2000
        ProbeTimes { connect: foreign.clone(), tls: foreign.clone(), http_foreign: foreign, http_self: slow }
    }

    #[test]
    fn the_two_formulas_differ_several_fold_when_self_probes_wait() {
        let r = responsiveness(&bloated_probes(), 100.0).unwrap();
        assert!(close(r.foreign_rpm, 60_000.0 / 40.0)); // 1500
        assert!(close(r.self_rpm, 60_000.0 / 2000.0)); // 30
        // The draft: the mean of the RPMs, dominated by the fast foreign probes.
        assert!(close(r.rpm, (1500.0 + 30.0) / 2.0)); // 765
        // goresponsiveness / networkQuality: the mean of the latencies, converted once.
        let latency_mean = r.rpm_latency_mean.unwrap();
        assert!(close(latency_mean, 60_000.0 / ((40.0 + 2000.0) / 2.0))); // 58.8
        assert!(r.rpm / latency_mean > 12.0, "{} vs {latency_mean}", r.rpm);
        // Equal latencies: the two agree.
        let even = ProbeTimes { http_self: vec![40.0; 10], ..bloated_probes() };
        let e = responsiveness(&even, 100.0).unwrap();
        assert!(close(e.rpm, 1500.0) && close(e.rpm_latency_mean.unwrap(), 1500.0));
    }

    #[test]
    fn p90_beside_the_trimmed_mean() {
        let r = responsiveness(&bloated_probes(), 95.0).unwrap();
        // 95% of 10 values keeps ceil(9.5) = 10: the trimmed means are the plain means.
        assert!(close(r.tm_http_self_ms, 2000.0));
        let p90 = r.p90.unwrap();
        // Nearest rank 9 of 10: the second largest. Foreign 42, self 2200.
        assert_eq!((p90.connect_ms, p90.tls_ms, p90.http_foreign_ms, p90.http_self_ms), (42.0, Some(42.0), 42.0, 2200.0));
        assert!(close(p90.rpm, (60_000.0 / 42.0 + 60_000.0 / 2200.0) / 2.0));
        assert!(close(p90.rpm_latency_mean, 60_000.0 / ((42.0 + 2200.0) / 2.0)));
        assert!(p90.rpm_latency_mean < r.rpm_latency_mean.unwrap());
    }

    #[test]
    fn stability_needs_mad_values_within_sdt() {
        assert!(!is_stable(&[100.0, 100.0, 100.0], 4, 5.0));
        assert!(is_stable(&[100.0, 100.0, 100.0, 100.0], 4, 5.0));
        // std of [90, 100, 100, 100] = 4.33 < 5
        assert!(is_stable(&[1.0, 90.0, 100.0, 100.0, 100.0], 4, 5.0));
        // std of [80, 100, 100, 100] = 8.66 > 5
        assert!(!is_stable(&[80.0, 100.0, 100.0, 100.0], 4, 5.0));
        assert!(!is_stable(&[0.0, 0.0, 0.0, 0.0], 4, 5.0));
    }

    #[test]
    fn responsiveness_follows_the_drafts_formulas() {
        let probes = ProbeTimes { connect: vec![40.0], tls: vec![50.0], http_foreign: vec![60.0], http_self: vec![200.0] };
        let r = responsiveness(&probes, 95.0).unwrap();
        assert!(close(r.foreign_rpm, 60_000.0 / 50.0));
        assert!(close(r.self_rpm, 300.0));
        assert!(close(r.rpm, (1200.0 + 300.0) / 2.0));
        assert!(close(r.rpm_latency_mean.unwrap(), 60_000.0 / ((50.0 + 200.0) / 2.0)));
        // TCP-only (and QUIC): no TLS term, the foreign mean of two.
        let quic = ProbeTimes { tls: vec![], ..probes.clone() };
        let r = responsiveness(&quic, 95.0).unwrap();
        assert!(close(r.foreign_rpm, 60_000.0 / 50.0));
        assert_eq!(r.tm_tls_ms, None);
        assert_eq!(responsiveness(&ProbeTimes { http_self: vec![], ..probes }, 95.0), None);
    }

    #[test]
    fn a_test_ramps_saturates_and_ends() {
        let p = Parameters::default();
        let mut s = Stages::new(p);
        let probes = ProbeTimes { connect: vec![40.0; 10], tls: vec![40.0; 10], http_foreign: vec![40.0; 10], http_self: vec![200.0; 10] };
        // 2.5 MB per 1 s interval = 20 Mbit/s; the first three averages are partial.
        let mut verdicts = Vec::new();
        for _ in 0..10 {
            verdicts.push(s.end_interval(2_500_000, &probes));
            if verdicts.last() == Some(&Verdict::Done) {
                break;
            }
        }
        assert_eq!(&verdicts[..3], &[Verdict::Ramping; 3]);
        // Interval 7 (index 6) is the fourth full average: saturation; RPM needs MAD values.
        assert_eq!(s.saturated_at, Some(6));
        assert_eq!(verdicts.last(), Some(&Verdict::Done));
        assert_eq!(s.intervals(), 10);
        assert!(close(s.capacity_bps().unwrap(), 20e6));
        assert_eq!(s.capacity_confidence(), Confidence::High);
        assert_eq!(s.rpm_confidence(), Confidence::High);
        assert!(close(s.responsiveness.last().unwrap().rpm, (1500.0 + 300.0) / 2.0));
    }

    #[test]
    fn confidence_without_stability() {
        let mut s = Stages::new(Parameters::default());
        let probes = ProbeTimes::default();
        for bytes in [1_000_000, 3_000_000, 1_000_000, 3_000_000, 1_000_000, 3_000_000] {
            s.end_interval(bytes, &probes);
        }
        assert_eq!(s.saturated_at, None);
        assert_eq!(s.capacity_confidence(), Confidence::Medium);
        assert_eq!(s.rpm_confidence(), Confidence::Low);
        let mut short = Stages::new(Parameters::default());
        short.end_interval(1, &probes);
        assert_eq!(short.capacity_confidence(), Confidence::Low);
    }

    #[test]
    fn a_test_that_never_saturates_still_answers_speculatively() {
        let mut s = Stages::new(Parameters::default());
        // Goodput still growing at the time limit: never stable, no responsiveness on the way.
        for bytes in (1..=8).map(|i| i * 1_000_000) {
            assert_eq!(s.end_interval(bytes, &bloated_probes()), Verdict::Ramping);
        }
        assert!(s.responsiveness.is_empty());
        let (r, confidence) = s.final_responsiveness(&bloated_probes());
        assert_eq!(confidence, Confidence::Speculative);
        assert!(close(r.unwrap().rpm, 765.0));
        // No probe completed either: no number, and the confidence of what ran.
        assert_eq!(s.final_responsiveness(&ProbeTimes::default()), (None, Confidence::Low));
    }

    #[test]
    fn a_saturated_test_answers_from_its_stages() {
        let mut s = Stages::new(Parameters::default());
        let probes = ProbeTimes { connect: vec![40.0; 10], tls: vec![40.0; 10], http_foreign: vec![40.0; 10], http_self: vec![200.0; 10] };
        for _ in 0..8 {
            s.end_interval(2_500_000, &probes);
        }
        assert_eq!(s.saturated_at, Some(6));
        // The stages' own last value, not the window handed in at the end.
        let (r, confidence) = s.final_responsiveness(&bloated_probes());
        assert_eq!(confidence, Confidence::Low); // two responsiveness values, fewer than MAD
        assert!(close(r.unwrap().rpm, (1500.0 + 300.0) / 2.0));
    }
}
