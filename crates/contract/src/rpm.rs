//! The responsiveness result document (`protolab-net rpm`, schema `protolab.rpm`, docs/rpm.md),
//! with the draft's parameters, the responsiveness figures and the confidence levels it holds.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::modes::Protocol;

/// `schema` of the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum RpmSchema {
    /// The only value.
    #[default]
    #[serde(rename = "protolab.rpm")]
    Rpm,
}

/// Schema name of the result.
pub const SCHEMA: RpmSchema = RpmSchema::Rpm;
/// Its version.
pub const SCHEMA_VERSION: u32 = 1;
/// The draft text the defaults follow.
pub const DRAFT: &str = "draft-ietf-ippm-responsiveness-08";

/// The draft's parameters (names as in its table).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
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

/// The trimmed means and the responsiveness of a window of probes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Responsiveness {
    /// TM(tcp_f) (TCP) or of the QUIC handshake, ms.
    pub tm_connect_ms: f64,
    /// TM(tls_f), ms; null without TLS over TCP (then the draft's TCP-only formula applies).
    pub tm_tls_ms: Option<f64>,
    /// TM(http_f), ms.
    pub tm_http_foreign_ms: f64,
    /// TM(http_l), ms.
    pub tm_http_self_ms: f64,
    /// 60000 / the mean of the foreign terms.
    pub foreign_rpm: f64,
    /// 60000 / TM(http_l).
    pub self_rpm: f64,
    /// The draft's formula (§"Final Algorithm" of -08 and the current text): (foreign_rpm +
    /// self_rpm) / 2, the arithmetic mean of the two responsiveness values. Round trips per
    /// minute.
    pub rpm: f64,
    /// goresponsiveness's and Apple networkQuality's formula: the latencies averaged, then
    /// converted once, 60000 / ((foreign latency + TM(http_l)) / 2), i.e. the harmonic mean of
    /// foreign_rpm and self_rpm. Never above `rpm`; several times below it when self probes wait
    /// much longer than foreign ones. Null in results written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_latency_mean: Option<f64>,
    /// The same terms and both formulas over the 90th percentiles instead of the trimmed means
    /// (goresponsiveness's "P90" beside its trimmed mean). Null in results written before it
    /// existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90: Option<Percentile90>,
}

/// The responsiveness of a window of probes over the 90th percentile of each term.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Percentile90 {
    /// P90 of the TCP (or QUIC) handshakes, ms.
    pub connect_ms: f64,
    /// P90 of the TLS handshakes, ms; null without TLS over TCP.
    pub tls_ms: Option<f64>,
    /// P90 of the foreign GETs, ms.
    pub http_foreign_ms: f64,
    /// P90 of the self probes, ms.
    pub http_self_ms: f64,
    /// The draft's formula over these terms (mean of the two RPMs).
    pub rpm: f64,
    /// goresponsiveness's formula over these terms (mean of the two latencies, converted once).
    pub rpm_latency_mean: f64,
}

/// The two partial responsivenesses and both ways of combining them, from the foreign terms
/// (with TLS over TCP three, else two) and the self term, ms. None when a term is not positive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Combined {
    /// 60000 / the mean of the foreign terms.
    pub foreign_rpm: f64,
    /// 60000 / the self term.
    pub self_rpm: f64,
    /// The draft's formula: (foreign_rpm + self_rpm) / 2.
    pub draft_rpm: f64,
    /// goresponsiveness's: 60000 / ((foreign latency + self latency) / 2).
    pub latency_mean_rpm: f64,
}

impl Combined {
    /// See the type.
    pub fn of(connect: f64, tls: Option<f64>, http_foreign: f64, http_self: f64) -> Option<Combined> {
        let foreign_ms = match tls {
            Some(t) => (connect + t + http_foreign) / 3.0,
            None => (connect + http_foreign) / 2.0,
        };
        if !(foreign_ms > 0.0 && http_self > 0.0) {
            return None;
        }
        let foreign_rpm = 60_000.0 / foreign_ms;
        let self_rpm = 60_000.0 / http_self;
        Some(Combined { foreign_rpm, self_rpm, draft_rpm: (foreign_rpm + self_rpm) / 2.0, latency_mean_rpm: 60_000.0 / ((foreign_ms + http_self) / 2.0) })
    }
}

impl Responsiveness {
    /// The draft's formulas over the trimmed means (ms): the foreign terms' mean (with TLS over
    /// TCP three terms, else two) and the self term each give round trips per minute; `rpm` is
    /// their mean, `rpm_latency_mean` goresponsiveness's. No P90 (the caller adds it from the
    /// probes). None when a mean is not positive.
    pub fn from_means(connect: f64, tls: Option<f64>, http_foreign: f64, http_self: f64) -> Option<Responsiveness> {
        let c = Combined::of(connect, tls, http_foreign, http_self)?;
        Some(Responsiveness {
            tm_connect_ms: connect,
            tm_tls_ms: tls,
            tm_http_foreign_ms: http_foreign,
            tm_http_self_ms: http_self,
            foreign_rpm: c.foreign_rpm,
            self_rpm: c.self_rpm,
            rpm: c.draft_rpm,
            rpm_latency_mean: Some(c.latency_mean_rpm),
            p90: None,
        })
    }
}

/// The draft's confidence in a stage's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Fewer than MAD iterations of the stage ran.
    Low,
    /// At least MAD iterations, no stability.
    Medium,
    /// Stable within SDT.
    High,
    /// RPM only: goodput never saturated within the time limit, so the draft computes no
    /// responsiveness; this one is from the probes of the last MAD intervals at the load
    /// reached (goresponsiveness reports such a result with "low confidence"). A number for a
    /// user on an unstable link, not the draft's.
    Speculative,
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

/// What a probe measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ProbeKind {
    /// On a new connection: connect, TLS and HTTP times.
    #[serde(rename = "foreign")]
    Foreign,
    /// On a load-generating connection: the HTTP time (HTTP/1.1: the TCP stack's smoothed RTT
    /// of that connection).
    #[serde(rename = "self")]
    SelfProbe,
}

/// One probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Probe {
    /// Completion, seconds since the stage began.
    pub t_s: f64,
    /// `foreign` (a new connection) or `self` (on a load-generating connection; HTTP/1.1: the
    /// TCP stack's smoothed RTT of that connection, `http_ms` then is that RTT).
    pub kind: ProbeKind,
    /// Foreign: TCP handshake, or the QUIC handshake, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<f64>,
    /// Foreign over TCP: TLS handshake, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ms: Option<f64>,
    /// The GET of the small object, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_ms: Option<f64>,
    /// Why the probe failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where a direction's test was at the end of an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IntervalState {
    /// Adding load: goodput is not stable yet.
    Ramping,
    /// Goodput is stable; probing until responsiveness is.
    Saturated,
    /// Both stable: the test is over.
    Done,
}

impl IntervalState {
    /// As the result writes it.
    pub fn name(self) -> &'static str {
        match self {
            IntervalState::Ramping => "ramping",
            IntervalState::Saturated => "saturated",
            IntervalState::Done => "done",
        }
    }
}

impl fmt::Display for IntervalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One interval of a direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Interval {
    /// Index from 0.
    pub index: usize,
    /// End, seconds since the direction began.
    pub t_s: f64,
    /// Bytes moved in it by the load-generating connections.
    pub bytes: u64,
    /// bytes / ID, bit/s.
    pub goodput_bps: f64,
    /// The draft's moving-average aggregate goodput, bit/s.
    pub moving_goodput_bps: f64,
    /// Load-generating connections open at its end.
    pub connections: usize,
    /// Probes completed in it.
    pub probes: usize,
    /// The probe pairs per second allowed (MPS, lowered by PTC).
    pub probe_rate: f64,
    /// `ramping`, `saturated` or `done`.
    pub state: IntervalState,
    /// Responsiveness over the last MAD intervals (from saturation on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responsiveness: Option<Responsiveness>,
}

/// Confidence in the two results of a direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Confidences {
    /// Of the capacity.
    pub capacity: Confidence,
    /// Of the RPM (`speculative`: goodput never saturated, see [`Confidence::Speculative`]).
    pub rpm: Confidence,
}

/// One direction's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DirectionResult {
    /// Capacity: the last moving-average goodput, bit/s (HTTP payload).
    pub capacity_bps: Option<f64>,
    /// Responsiveness, round trips per minute, by the draft's formula (the mean of the foreign
    /// and self RPMs). From the last interval's window once goodput saturated; if it never did,
    /// from the last MAD intervals' probes, with RPM confidence `speculative`.
    pub rpm: Option<f64>,
    /// 60000 / RPM: the round-trip time the RPM stands for, ms.
    pub loaded_latency_ms: Option<f64>,
    /// The same probes by goresponsiveness's and Apple's formula (the foreign and self latencies
    /// averaged, converted once): what those clients would report. Null in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_latency_mean: Option<f64>,
    /// The trimmed means and partial RPMs behind `rpm`.
    pub responsiveness: Option<Responsiveness>,
    /// Draft §"Confidence of Test-Results".
    pub confidence: Confidences,
    /// Load-generating connections at the end.
    pub load_connections: usize,
    /// Most load-generating connections open at an interval's end (the cap is the parameter
    /// MNP, 16 as in goresponsiveness). Null in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_connections_max: Option<usize>,
    /// Payload bytes the load-generating connections moved.
    pub bytes: u64,
    /// The direction's duration, s.
    pub duration_s: f64,
    /// Interval at which goodput saturated.
    pub saturated_at: Option<usize>,
    /// Every interval.
    pub intervals: Vec<Interval>,
    /// Every probe.
    pub probes: Vec<Probe>,
    /// Errors of load-generating connections (the draft aborts; this client records them and
    /// lets the next interval add a connection).
    pub errors: Vec<String>,
}

/// Idle latency: probes on an unloaded path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IdleResult {
    /// 60000 / idle RPM, ms.
    pub latency_ms: Option<f64>,
    /// The draft's formula over the idle probes.
    pub rpm: Option<f64>,
    /// Median of the self probes' HTTP times (LibreSpeed's "ping"), ms.
    pub http_median_ms: Option<f64>,
    /// The trimmed means.
    pub responsiveness: Option<Responsiveness>,
    /// Every probe.
    pub probes: Vec<Probe>,
}

/// Where the client ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClientInfo {
    /// `/etc/os-release` PRETTY_NAME.
    pub os: Option<String>,
    /// Kernel release.
    pub kernel: Option<String>,
    /// Network interfaces other than loopback, with their kind.
    pub interfaces: Vec<InterfaceInfo>,
}

/// One network interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InterfaceInfo {
    /// Name.
    pub name: String,
    /// `wifi`, `ethernet`, `tun`, `veth`, `bridge`, `other`.
    pub kind: String,
}

/// The effective configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RpmConfig {
    /// Server address and port.
    pub server: String,
    /// Hostname (SNI, Host).
    pub host: String,
    /// h1, h2, h3.
    pub protocol: Protocol,
    /// download, upload, both (sequential).
    #[schemars(extend("enum" = ["download", "upload", "both"]))]
    pub direction: String,
    /// The directions in the order they ran, one after the other: `both` is download, then
    /// upload (Apple's networkQuality loads both at once unless told `-s`; goresponsiveness has
    /// a serial and a parallel policy). Empty in older results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub direction_order: Vec<String>,
    /// The draft's parameters.
    pub parameters: Parameters,
    /// Time limit per direction, s.
    pub max_duration_s: f64,
    /// Idle probe pairs.
    pub idle_probes: usize,
    /// Where the URLs came from: `/.well-known/nq` (its URL) or `default paths`.
    pub discovery: String,
    /// The three URLs' paths used.
    pub paths: [String; 3],
    /// TCP congestion control (h1, h2); null: the system's default.
    pub tcp_cc: Option<String>,
    /// QUIC controller (h3).
    pub quic_cc: String,
    /// The draft version the defaults follow.
    pub draft: String,
}

/// Outcome of a responsiveness test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RpmStatus {
    /// Every direction ran (its confidence says how far).
    Ok,
    /// Discovery, the idle probes or every load-generating connection failed.
    Error,
}

/// The result of `protolab-net rpm` (docs/rpm.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RpmResult {
    /// `protolab.rpm`.
    pub schema: RpmSchema,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `protolab-net` version.
    pub tool: String,
    /// Start, Unix ns.
    pub started_unix_ns: u64,
    /// h1, h2, h3.
    pub protocol: Protocol,
    /// The configuration.
    pub config: RpmConfig,
    /// The client machine.
    pub client: ClientInfo,
    /// Idle latency.
    pub idle: Option<IdleResult>,
    /// Per direction that ran: `download`, `upload`.
    #[schemars(extend("propertyNames" = {"enum": ["download", "upload"]}))]
    pub directions: BTreeMap<String, DirectionResult>,
    /// `ok`, `error`.
    pub status: RpmStatus,
    /// What failed (discovery, every connection...).
    pub error: Option<String>,
}

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    vec![crate::document::<RpmResult>("rpm-result")]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
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
    fn responsiveness_follows_the_drafts_formulas() {
        let r = Responsiveness::from_means(40.0, Some(50.0), 60.0, 200.0).unwrap();
        assert!(close(r.foreign_rpm, 60_000.0 / 50.0));
        assert!(close(r.self_rpm, 300.0));
        assert!(close(r.rpm, (1200.0 + 300.0) / 2.0));
        // goresponsiveness: 60000 / the mean of 50 ms and 200 ms.
        assert!(close(r.rpm_latency_mean.unwrap(), 480.0));
        assert_eq!(r.p90, None);
        // TCP-only (and QUIC): no TLS term, the foreign mean of two.
        let r = Responsiveness::from_means(40.0, None, 60.0, 200.0).unwrap();
        assert!(close(r.foreign_rpm, 60_000.0 / 50.0));
        assert_eq!(Responsiveness::from_means(40.0, None, 60.0, 0.0), None);
        assert_eq!(Confidence::of(3, 4, false), Confidence::Low);
        assert_eq!(Confidence::of(4, 4, false), Confidence::Medium);
        assert_eq!(Confidence::of(1, 4, true), Confidence::High);
    }
}
