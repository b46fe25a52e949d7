//! The arithmetic of the responsiveness test (draft-ietf-ippm-responsiveness, "Test
//! Parameters", "Aggregating the Measurements", "Final Algorithm", "Confidence of
//! Test-Results"), free of I/O and clocks: the caller feeds it per-interval byte counts and
//! probe times and asks what the draft concludes. Tested on fixed data.

use serde::Serialize;

/// The draft's parameters (names as in its table).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Parameters {
    /// MAD: intervals in a moving average.
    pub mad: usize,
    /// ID: interval duration, seconds. draft-08 (the latest published text) says 1 s; the
    /// repository's newer text (-09, July 2026) says 5 s "pending further investigation".
    pub interval_s: f64,
    /// TMP: the share kept by the single-sided trimmed mean, percent (95: the top 5% dropped).
    pub tmp: f64,
    /// SDT: standard deviation tolerance, percent of the current value.
    pub sdt: f64,
    /// INP: load-generating connections at the start.
    pub inp: usize,
    /// INC: connections added per interval.
    pub inc: usize,
    /// MNP: most load-generating connections.
    pub mnp: usize,
    /// MPS: most probe pairs (one foreign, one self) per second.
    pub mps: f64,
    /// PTC: most of the capacity the probes may use, percent.
    pub ptc: f64,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters { mad: 4, interval_s: 1.0, tmp: 95.0, sdt: 5.0, inp: 1, inc: 1, mnp: 16, mps: 100.0, ptc: 5.0 }
    }
}

/// Bytes the draft estimates for a foreign probe (TCP, TLS and HTTP overheads).
pub const FOREIGN_PROBE_BYTES: f64 = 5000.0;
/// Bytes the draft estimates for a self probe.
pub const SELF_PROBE_BYTES: f64 = 1000.0;

impl Parameters {
    /// Checks every value; the error names the parameter.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let positive = |name: &'static str, v: f64| if v.is_finite() && v > 0.0 { Ok(()) } else { Err((name, format!("must be positive, not {v}"))) };
        if self.mad < 2 {
            return Err(("mad", format!("must be at least 2 (a standard deviation needs two values), not {}", self.mad)));
        }
        positive("interval", self.interval_s)?;
        if !(self.tmp > 0.0 && self.tmp <= 100.0) {
            return Err(("tmp", format!("must be in (0, 100], not {}", self.tmp)));
        }
        positive("sdt", self.sdt)?;
        if self.inp == 0 {
            return Err(("inp", "must be at least 1".into()));
        }
        if self.mnp < self.inp {
            return Err(("mnp", format!("{} is fewer than inp ({})", self.mnp, self.inp)));
        }
        positive("mps", self.mps)?;
        if !(self.ptc > 0.0 && self.ptc <= 100.0) {
            return Err(("ptc", format!("must be in (0, 100], not {}", self.ptc)));
        }
        Ok(())
    }

    /// Probe pairs per second allowed at `capacity_bps`: MPS, lowered so that the probes'
    /// estimated bytes stay within PTC of the capacity. None (no capacity known yet): MPS.
    pub fn probe_rate(&self, capacity_bps: Option<f64>) -> f64 {
        match capacity_bps {
            Some(c) if c > 0.0 => {
                let pair_bits = (FOREIGN_PROBE_BYTES + SELF_PROBE_BYTES) * 8.0;
                (c * self.ptc / 100.0 / pair_bits).min(self.mps)
            }
            _ => self.mps,
        }
    }
}

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

/// The trimmed means and the responsiveness of a window of probes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Responsiveness {
    /// TM(tcp_f) (TCP) or of the QUIC handshake.
    pub tm_connect_ms: f64,
    /// TM(tls_f); None without TLS over TCP (then the draft's TCP-only formula applies).
    pub tm_tls_ms: Option<f64>,
    /// TM(http_f).
    pub tm_http_foreign_ms: f64,
    /// TM(http_l).
    pub tm_http_self_ms: f64,
    /// 60000 / the mean of the foreign terms.
    pub foreign_rpm: f64,
    /// 60000 / TM(http_l).
    pub self_rpm: f64,
    /// (foreign + self) / 2: round trips per minute.
    pub rpm: f64,
}

impl Responsiveness {
    /// The draft's formulas over `probes`, with the trimmed mean keeping `tmp` percent. None
    /// when a term has no probe. QUIC's handshake stands in for TCP's, and has no separate TLS
    /// term (TLS is inside it), so it takes the TCP-only formula.
    pub fn compute(probes: &ProbeTimes, tmp: f64) -> Option<Responsiveness> {
        let connect = trimmed_mean(&probes.connect, tmp)?;
        let http_foreign = trimmed_mean(&probes.http_foreign, tmp)?;
        let http_self = trimmed_mean(&probes.http_self, tmp)?;
        let tls = trimmed_mean(&probes.tls, tmp);
        let foreign_ms = match tls {
            Some(t) => (connect + t + http_foreign) / 3.0,
            None => (connect + http_foreign) / 2.0,
        };
        if foreign_ms <= 0.0 || http_self <= 0.0 {
            return None;
        }
        let foreign_rpm = 60_000.0 / foreign_ms;
        let self_rpm = 60_000.0 / http_self;
        Some(Responsiveness {
            tm_connect_ms: connect,
            tm_tls_ms: tls,
            tm_http_foreign_ms: http_foreign,
            tm_http_self_ms: http_self,
            foreign_rpm,
            self_rpm,
            rpm: (foreign_rpm + self_rpm) / 2.0,
        })
    }
}

/// The draft's confidence in a stage's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Fewer than MAD iterations of the stage ran.
    Low,
    /// At least MAD iterations, no stability.
    Medium,
    /// Stable within SDT.
    High,
}

impl Confidence {
    /// From the number of values a stage produced and whether it reached stability.
    pub fn of(values: usize, mad: usize, stable: bool) -> Confidence {
        if stable {
            Confidence::High
        } else if values >= mad {
            Confidence::Medium
        } else {
            Confidence::Low
        }
    }
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
        if let Some(r) = Responsiveness::compute(window, p.tmp) {
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
        let r = Responsiveness::compute(&probes, 95.0).unwrap();
        assert!(close(r.foreign_rpm, 60_000.0 / 50.0));
        assert!(close(r.self_rpm, 300.0));
        assert!(close(r.rpm, (1200.0 + 300.0) / 2.0));
        // TCP-only (and QUIC): no TLS term, the foreign mean of two.
        let quic = ProbeTimes { tls: vec![], ..probes.clone() };
        let r = Responsiveness::compute(&quic, 95.0).unwrap();
        assert!(close(r.foreign_rpm, 60_000.0 / 50.0));
        assert_eq!(r.tm_tls_ms, None);
        assert_eq!(Responsiveness::compute(&ProbeTimes { http_self: vec![], ..probes }, 95.0), None);
    }

    #[test]
    fn probe_rate_is_capped_by_ptc() {
        let p = Parameters::default();
        assert!(close(p.probe_rate(None), 100.0));
        assert!(close(p.probe_rate(Some(1e9)), 100.0));
        // 20 Mbit/s: 5% = 1 Mbit/s = 125 kB/s; 6000 B per pair: 20.83 pairs/s.
        assert!(close(p.probe_rate(Some(20e6)), 1e6 / 48_000.0));
    }

    #[test]
    fn parameters_are_checked_by_name() {
        assert!(Parameters::default().check().is_ok());
        assert_eq!(Parameters { mad: 1, ..Default::default() }.check().unwrap_err().0, "mad");
        assert_eq!(Parameters { tmp: 0.0, ..Default::default() }.check().unwrap_err().0, "tmp");
        assert_eq!(Parameters { mnp: 0, ..Default::default() }.check().unwrap_err().0, "mnp");
        assert_eq!(Parameters { interval_s: f64::NAN, ..Default::default() }.check().unwrap_err().0, "interval");
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
}
