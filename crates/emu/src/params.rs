//! The file form of link parameters (`rate = "10mbit"`, `delay = "5ms"`, ...) and its
//! conversion to the model's [`LinkConfig`].

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use netmodel::{
    DeliveryTrace, JitterConfig, JitterDistribution, LinkConfig, LossConfig, Nanos, QueueConfig, QueueKind,
    QueueLimit, Rate,
};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A rate in bit/s; `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateValue(pub Option<u64>);

/// Parses `"10mbit"`, `"1.5gbit"`, `"500kbit"`, `"1200bit"`, `"unlimited"`.
pub fn parse_rate(text: &str) -> Result<RateValue, String> {
    let t = text.trim().to_ascii_lowercase();
    if t == "unlimited" {
        return Ok(RateValue(None));
    }
    let (number, scale) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(unit, scale)| t.strip_suffix(unit).map(|n| (n.trim(), *scale)))
        .ok_or_else(|| format!("invalid rate {text:?}: use a number with a unit (bit, kbit, mbit, gbit) or \"unlimited\""))?;
    let value: f64 = number.parse().map_err(|_| format!("invalid rate {text:?}: {number:?} is not a number"))?;
    let bps = value * scale;
    if !bps.is_finite() || bps < 1.0 {
        return Err(format!("invalid rate {text:?}: must be at least 1 bit/s"));
    }
    Ok(RateValue(Some(bps.round() as u64)))
}

impl fmt::Display for RateValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => write!(f, "unlimited"),
            Some(b) if b % 1_000_000_000 == 0 => write!(f, "{}gbit", b / 1_000_000_000),
            Some(b) if b % 1_000_000 == 0 => write!(f, "{}mbit", b / 1_000_000),
            Some(b) if b % 1_000 == 0 => write!(f, "{}kbit", b / 1_000),
            Some(b) => write!(f, "{b}bit"),
        }
    }
}

impl Serialize for RateValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RateValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = RateValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a rate such as \"10mbit\", \"unlimited\", or an integer in bit/s")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RateValue, E> {
                parse_rate(v).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RateValue, E> {
                if v == 0 {
                    return Err(E::custom("invalid rate 0: must be at least 1 bit/s"));
                }
                Ok(RateValue(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RateValue, E> {
                u64::try_from(v).map_err(|_| E::custom(format!("invalid rate {v}: must be positive"))).and_then(|v| self.visit_u64(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RateValue, E> {
                Err(E::custom(format!("invalid rate {v}: give an integer in bit/s or a string with a unit")))
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration in nanoseconds, written with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurationValue(pub Nanos);

/// Parses `"25ms"`, `"500us"`, `"1.5ms"`, `"2s"`, `"100ns"`, `"0"`.
pub fn parse_duration(text: &str) -> Result<DurationValue, String> {
    let t = text.trim().to_ascii_lowercase();
    if t == "0" {
        return Ok(DurationValue(0));
    }
    let (number, scale) = [("ns", 1.0), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)]
        .iter()
        .find_map(|(unit, scale)| t.strip_suffix(unit).map(|n| (n.trim(), *scale)))
        .ok_or_else(|| format!("invalid duration {text:?}: use a number with a unit (ns, us, ms, s)"))?;
    let value: f64 = number.parse().map_err(|_| format!("invalid duration {text:?}: {number:?} is not a number"))?;
    let ns = value * scale;
    if !ns.is_finite() || ns < 0.0 {
        return Err(format!("invalid duration {text:?}: must not be negative"));
    }
    if ns > 3600e9 {
        return Err(format!("invalid duration {text:?}: longer than an hour"));
    }
    Ok(DurationValue(ns.round() as Nanos))
}

impl fmt::Display for DurationValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => write!(f, "0"),
            n if n % 1_000_000 == 0 => write!(f, "{}ms", n / 1_000_000),
            n if n % 1_000 == 0 => write!(f, "{}us", n / 1_000),
            n => write!(f, "{n}ns"),
        }
    }
}

impl Serialize for DurationValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DurationValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DurationValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration with a unit such as \"25ms\" or \"500us\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurationValue, E> {
                parse_duration(v).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<DurationValue, E> {
                if v == 0 {
                    Ok(DurationValue(0))
                } else {
                    Err(E::custom(format!("invalid duration {v}: durations need a unit, e.g. \"{v}ms\"")))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<DurationValue, E> {
                Err(E::custom(format!("invalid duration {v}: durations need a unit and must not be negative")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<DurationValue, E> {
                Err(E::custom(format!("invalid duration {v}: durations need a unit, e.g. \"{v}ms\"")))
            }
        }
        d.deserialize_any(V)
    }
}

/// Queue parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum QueueParams {
    /// Drop-tail.
    Droptail {
        /// Packet limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        packets: Option<u32>,
        /// Byte limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
    },
    /// Drop-head.
    Drophead {
        /// Packet limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        packets: Option<u32>,
        /// Byte limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
    },
    /// CoDel.
    Codel {
        /// Target (default 5 ms).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<DurationValue>,
        /// Interval (default 100 ms).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interval: Option<DurationValue>,
        /// Packet limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        packets: Option<u32>,
        /// Byte limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
    },
}

/// Jitter parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JitterParams {
    /// Standard deviation.
    pub std: DurationValue,
    /// `uniform`, `normal` or `pareto`.
    #[serde(default = "default_dist")]
    pub dist: String,
    /// Never reorder.
    #[serde(default)]
    pub preserve_order: bool,
}

fn default_dist() -> String {
    "normal".into()
}

/// Loss parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LossParams {
    /// Independent loss.
    Bernoulli {
        /// Probability.
        p: f64,
    },
    /// Gilbert-Elliott.
    GilbertElliott {
        /// P(good -> bad).
        p: f64,
        /// P(bad -> good).
        r: f64,
        /// Loss probability in the good state.
        #[serde(default)]
        loss_good: f64,
        /// Loss probability in the bad state.
        #[serde(default = "one")]
        loss_bad: f64,
    },
}

fn one() -> f64 {
    1.0
}

/// One link direction as written in a topology file or a `set_link` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkParams {
    /// Fixed rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateValue>,
    /// Mahimahi trace file (instead of `rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// Queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueParams>,
    /// Propagation delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<DurationValue>,
    /// Delay variation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<JitterParams>,
    /// Random loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossParams>,
}

fn limit(field: &str, packets: Option<u32>, bytes: Option<u64>) -> Result<QueueLimit, (String, String)> {
    match (packets, bytes) {
        (Some(_), Some(_)) => Err((field.to_string(), "give either packets or bytes, not both".into())),
        (_, Some(b)) => Ok(QueueLimit::Bytes(b)),
        (Some(p), None) => Ok(QueueLimit::Packets(p)),
        (None, None) => Ok(QueueLimit::Packets(1000)),
    }
}

impl LinkParams {
    /// Converts to the model's configuration. `base_dir` resolves relative trace paths. Errors
    /// are (field relative to the link direction, message).
    pub fn to_config(&self, base_dir: &Path) -> Result<LinkConfig, (String, String)> {
        let rate = match (&self.rate, &self.trace) {
            (Some(_), Some(_)) => return Err(("trace".into(), "give either rate or trace, not both".into())),
            (_, Some(path)) => {
                let full = base_dir.join(path);
                let text = std::fs::read_to_string(&full)
                    .map_err(|e| ("trace".to_string(), format!("cannot read {}: {e}", full.display())))?;
                let trace = DeliveryTrace::parse(&text).map_err(|e| ("trace".to_string(), format!("{}: {e}", full.display())))?;
                Rate::Trace(Arc::new(trace))
            }
            (Some(RateValue(Some(bps))), None) => Rate::BitsPerSecond(*bps),
            (Some(RateValue(None)) | None, None) => Rate::Unlimited,
        };
        let queue = match &self.queue {
            None => QueueConfig::default(),
            Some(QueueParams::Droptail { packets, bytes }) => {
                QueueConfig { kind: QueueKind::DropTail, limit: limit("queue", *packets, *bytes)? }
            }
            Some(QueueParams::Drophead { packets, bytes }) => {
                QueueConfig { kind: QueueKind::DropHead, limit: limit("queue", *packets, *bytes)? }
            }
            Some(QueueParams::Codel { target, interval, packets, bytes }) => QueueConfig {
                kind: QueueKind::CoDel {
                    target: target.map_or(5_000_000, |d| d.0),
                    interval: interval.map_or(100_000_000, |d| d.0),
                },
                limit: limit("queue", *packets, *bytes)?,
            },
        };
        let jitter = match &self.jitter {
            None => None,
            Some(j) => {
                let dist = match j.dist.as_str() {
                    "normal" => JitterDistribution::Normal,
                    "uniform" => JitterDistribution::Uniform,
                    "pareto" => JitterDistribution::Pareto,
                    other => {
                        return Err((
                            "jitter.dist".into(),
                            format!("unknown distribution {other:?}: use uniform, normal or pareto"),
                        ))
                    }
                };
                Some(JitterConfig { std: j.std.0, dist, preserve_order: j.preserve_order })
            }
        };
        let loss = self.loss.as_ref().map(|l| match *l {
            LossParams::Bernoulli { p } => LossConfig::Bernoulli { p },
            LossParams::GilbertElliott { p, r, loss_good, loss_bad } => LossConfig::GilbertElliott { p, r, loss_good, loss_bad },
        });
        let config = LinkConfig { rate, queue, delay: self.delay.map_or(0, |d| d.0), jitter, loss };
        config.validate().map_err(|e| (e.field, e.message))?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_durations() {
        assert_eq!(parse_rate("10mbit").unwrap(), RateValue(Some(10_000_000)));
        assert_eq!(parse_rate("1.5 Gbit").unwrap(), RateValue(Some(1_500_000_000)));
        assert_eq!(parse_rate("unlimited").unwrap(), RateValue(None));
        assert!(parse_rate("-5mbit").is_err());
        assert!(parse_rate("10").is_err());
        assert!(parse_rate("0kbit").is_err());
        assert_eq!(parse_duration("1.5ms").unwrap(), DurationValue(1_500_000));
        assert_eq!(parse_duration("250us").unwrap(), DurationValue(250_000));
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("5").is_err());
        assert_eq!(RateValue(Some(7_000_000)).to_string(), "7mbit");
        assert_eq!(DurationValue(25_000_000).to_string(), "25ms");
    }

    #[test]
    fn params_parse_and_convert() {
        let p: LinkParams = serde_json::from_str(
            r#"{"rate":"7mbit","delay":"25ms","queue":{"kind":"droptail","bytes":45000},
                "loss":{"kind":"gilbert-elliott","p":0.01,"r":0.3},"jitter":{"std":"1ms"}}"#,
        )
        .unwrap();
        let c = p.to_config(Path::new(".")).unwrap();
        assert_eq!(c.rate, Rate::BitsPerSecond(7_000_000));
        assert_eq!(c.queue.limit, QueueLimit::Bytes(45000));
        assert_eq!(c.loss, Some(LossConfig::GilbertElliott { p: 0.01, r: 0.3, loss_good: 0.0, loss_bad: 1.0 }));
        let round_trip: LinkParams = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(round_trip, p);
        assert!(serde_json::from_str::<LinkParams>(r#"{"queue":{"kind":"red"}}"#).is_err());
        assert!(serde_json::from_str::<LinkParams>(r#"{"rat":"1mbit"}"#).is_err());
        let both: LinkParams = serde_json::from_str(r#"{"queue":{"kind":"droptail","bytes":3000,"packets":3}}"#).unwrap();
        assert_eq!(both.to_config(Path::new(".")).unwrap_err().0, "queue");
        let bad_p: LinkParams = serde_json::from_str(r#"{"loss":{"kind":"bernoulli","p":1.5}}"#).unwrap();
        assert_eq!(bad_p.to_config(Path::new(".")).unwrap_err().0, "loss.p");
    }
}
