//! The one parser of rates and durations written with units (`"10mbit"`, `"25ms"`).
//!
//! Documents carry numbers (`rate_bps`, `delay_ns`); people write units. Everything that reads a
//! unit — topology files, `set_link` requests, `--rate` options, controller parameters such as
//! `fixed:rate=5mbit` — goes through [`parse_rate`] and [`parse_duration`], and the `serde`
//! helpers below accept either form where a document is read.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};

/// Why a rate or duration was refused; the message names the text and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(pub String);

/// Rate units and their bit/s.
const RATE_UNITS: [(&str, f64); 4] = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)];
/// Duration units and their nanoseconds.
const DURATION_UNITS: [(&str, f64); 5] = [("ns", 1.0), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)];
/// Longest duration accepted: an hour (nothing in a lab is configured longer).
pub const MAX_DURATION_NS: u64 = 3_600_000_000_000;

/// How a bare number (no unit) is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bare {
    /// Refused: a unit is required (topology files: `"10"` is more likely a slip than 10 bit/s).
    Refuse,
    /// Read as bit/s (command-line `key=value` parameters, documented as such).
    BitsPerSecond,
}

/// Parses `"10mbit"`, `"1.5gbit"`, `"500kbit"`, `"1200bit"` (and a bare integer when `bare` says
/// so) into bit/s, at least 1. `"unlimited"` is not a rate: see [`parse_rate_limit`].
pub fn parse_rate(text: &str, bare: Bare) -> Result<u64, UnitError> {
    let t = text.trim().to_ascii_lowercase();
    let split = RATE_UNITS.iter().find_map(|(unit, scale)| t.strip_suffix(unit).map(|n| (n.trim(), *scale)));
    let (number, scale) = match (split, bare) {
        (Some(split), _) => split,
        (None, Bare::BitsPerSecond) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => (t.as_str(), 1.0),
        (None, _) => {
            return Err(UnitError(format!("invalid rate {text:?}: use a number with a unit (bit, kbit, mbit, gbit)")))
        }
    };
    let value: f64 = number.parse().map_err(|_| UnitError(format!("invalid rate {text:?}: {number:?} is not a number")))?;
    let bps = value * scale;
    if !bps.is_finite() || bps < 1.0 {
        return Err(UnitError(format!("invalid rate {text:?}: must be at least 1 bit/s")));
    }
    if bps > u64::MAX as f64 {
        return Err(UnitError(format!("invalid rate {text:?}: too large")));
    }
    Ok(bps.round() as u64)
}

/// A link's rate: `"unlimited"` is `None`, anything else as [`parse_rate`] with a unit.
pub fn parse_rate_limit(text: &str) -> Result<Option<u64>, UnitError> {
    if text.trim().eq_ignore_ascii_case("unlimited") {
        return Ok(None);
    }
    parse_rate(text, Bare::Refuse)
        .map(Some)
        .map_err(|e| UnitError(format!("{e} or \"unlimited\"")))
}

/// Parses `"25ms"`, `"500us"`, `"1.5ms"`, `"2s"`, `"100ns"`, `"0"` into nanoseconds (at most an hour).
pub fn parse_duration(text: &str) -> Result<u64, UnitError> {
    let t = text.trim().to_ascii_lowercase();
    if t == "0" {
        return Ok(0);
    }
    let (number, scale) = DURATION_UNITS
        .iter()
        .find_map(|(unit, scale)| t.strip_suffix(unit).map(|n| (n.trim(), *scale)))
        .ok_or_else(|| UnitError(format!("invalid duration {text:?}: use a number with a unit (ns, us, ms, s)")))?;
    let value: f64 = number.parse().map_err(|_| UnitError(format!("invalid duration {text:?}: {number:?} is not a number")))?;
    let ns = value * scale;
    if !ns.is_finite() || ns < 0.0 {
        return Err(UnitError(format!("invalid duration {text:?}: must not be negative")));
    }
    if ns > MAX_DURATION_NS as f64 {
        return Err(UnitError(format!("invalid duration {text:?}: longer than an hour")));
    }
    Ok(ns.round() as u64)
}

/// A rate in bit/s as people write it: `7mbit`, `1500kbit`, `1200bit`.
pub fn format_rate(bps: u64) -> String {
    match bps {
        b if b > 0 && b % 1_000_000_000 == 0 => format!("{}gbit", b / 1_000_000_000),
        b if b > 0 && b % 1_000_000 == 0 => format!("{}mbit", b / 1_000_000),
        b if b > 0 && b % 1_000 == 0 => format!("{}kbit", b / 1_000),
        b => format!("{b}bit"),
    }
}

/// A duration in ns as people write it: `25ms`, `500us`, `0`.
pub fn format_duration(ns: u64) -> String {
    match ns {
        0 => "0".into(),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// serde `deserialize_with` for an optional link rate in bit/s: an integer (bit/s), a string
/// with a unit, `"unlimited"` or null (both `None`).
pub fn de_rate_limit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a rate in bit/s (integer), a string such as \"10mbit\", \"unlimited\" or null")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(V)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            parse_rate_limit(v).map_err(E::custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            if v == 0 {
                return Err(E::custom("invalid rate 0: must be at least 1 bit/s"));
            }
            Ok(Some(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            u64::try_from(v).map_err(|_| E::custom(format!("invalid rate {v}: must be positive"))).and_then(|v| self.visit_u64(v))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Err(E::custom(format!("invalid rate {v}: give an integer in bit/s or a string with a unit")))
        }
    }
    d.deserialize_option(V)
}

/// serde `deserialize_with` for a duration in ns: an integer (ns) or a string with a unit.
pub fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a duration in ns (integer) or a string with a unit such as \"25ms\"")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
            parse_duration(v).map_err(E::custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            if v > MAX_DURATION_NS {
                return Err(E::custom(format!("invalid duration {v} ns: longer than an hour")));
            }
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::custom(format!("invalid duration {v}: must not be negative"))).and_then(|v| self.visit_u64(v))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
            Err(E::custom(format!("invalid duration {v}: give an integer in ns or a string with a unit, e.g. \"{v}ms\"")))
        }
    }
    d.deserialize_any(V)
}

/// [`de_duration`] for an optional field (null is `None`).
pub fn de_duration_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(serde::Deserialize)]
    struct Wrap(#[serde(deserialize_with = "de_duration")] u64);
    Ok(<Option<Wrap> as serde::Deserialize>::deserialize(d)?.map(|Wrap(v)| v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10mbit", Bare::Refuse), Ok(10_000_000));
        assert_eq!(parse_rate("1.5 Gbit", Bare::Refuse), Ok(1_500_000_000));
        assert_eq!(parse_rate("0.2mbit", Bare::Refuse), Ok(200_000));
        assert!(parse_rate("10", Bare::Refuse).is_err());
        assert_eq!(parse_rate("5000000", Bare::BitsPerSecond), Ok(5_000_000));
        assert!(parse_rate("5e6", Bare::BitsPerSecond).is_err());
        assert!(parse_rate("-5mbit", Bare::Refuse).is_err());
        assert!(parse_rate("0kbit", Bare::Refuse).is_err());
        assert_eq!(parse_rate_limit("unlimited"), Ok(None));
        assert_eq!(parse_rate_limit("7mbit"), Ok(Some(7_000_000)));
        assert!(parse_rate_limit("fast").unwrap_err().0.contains("unlimited"));
        assert_eq!(format_rate(7_000_000), "7mbit");
        assert_eq!(format_rate(1_500_000), "1500kbit");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration("250us"), Ok(250_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("2h").is_err());
        assert!(parse_duration("3601s").is_err());
        assert_eq!(format_duration(25_000_000), "25ms");
        assert_eq!(format_duration(1_500), "1500ns");
    }

    #[test]
    fn serde_helpers_take_numbers_and_units() {
        #[derive(serde::Deserialize)]
        struct Link {
            #[serde(default, deserialize_with = "de_rate_limit")]
            rate_bps: Option<u64>,
            #[serde(default, deserialize_with = "de_duration_opt")]
            delay_ns: Option<u64>,
        }
        let parse = |text: &str| serde_json::from_str::<Link>(text).map(|l| (l.rate_bps, l.delay_ns));
        assert_eq!(parse(r#"{"rate_bps": 7000000, "delay_ns": 25000000}"#).unwrap(), (Some(7_000_000), Some(25_000_000)));
        assert_eq!(parse(r#"{"rate_bps": "7mbit", "delay_ns": "25ms"}"#).unwrap(), (Some(7_000_000), Some(25_000_000)));
        assert_eq!(parse(r#"{"rate_bps": "unlimited", "delay_ns": null}"#).unwrap(), (None, None));
        assert_eq!(parse(r#"{}"#).unwrap(), (None, None));
        assert!(parse(r#"{"rate_bps": 0}"#).is_err());
        assert!(parse(r#"{"rate_bps": 1.5}"#).is_err());
        assert!(parse(r#"{"delay_ns": -3}"#).is_err());
        assert!(parse(r#"{"delay_ns": "5"}"#).is_err());
    }
}
