//! The registry of controllers, looked up by name, and the `NAME[:key=value,...]` syntax that
//! `--quic-cc` and a spec's `quic_cc` share (docs/congestion.md).
//!
//! Parsing checks everything (unknown names and keys, values out of range) and yields a
//! [`ControllerSpec`] with every parameter's effective value and the [`Config`] it stands for.
//! The registry knows nothing of quinn: the adapter's `Factory::for_spec` turns a spec into
//! a quinn controller factory.

use std::fmt;
use std::time::Duration;

use contract::units::{format_rate, parse_duration, parse_rate, Bare};

use crate::cubic::CubicConfig;
use crate::fast::FastConfig;
use crate::fixed::FixedConfig;
use crate::hystart::HystartConfig;
use crate::reno::RenoConfig;
use crate::sprout::SproutConfig;
use crate::sprout_feedback::{EstimatorConfig, SproutFeedbackConfig};

/// Why a controller spec was refused. Every message lists what is accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// No controller of that name.
    #[error("unknown congestion controller {name:?} (known: {known})")]
    UnknownController {
        /// The name given.
        name: String,
        /// The registry's names.
        known: String,
    },
    /// The controller has no parameter of that name.
    #[error("{controller}: unknown parameter {key:?} (accepted: {accepted})")]
    UnknownParam {
        /// The controller.
        controller: String,
        /// The key given.
        key: String,
        /// Its parameters, or "none".
        accepted: String,
    },
    /// A value out of range or of the wrong kind.
    #[error("{controller}: {key}={value:?}: {expected}")]
    BadValue {
        /// The controller.
        controller: String,
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// A parameter without default was not given.
    #[error("{controller}: parameter {key} is required ({doc}; e.g. {example})")]
    Missing {
        /// The controller.
        controller: String,
        /// The key.
        key: String,
        /// What it is.
        doc: String,
        /// A complete example.
        example: String,
    },
    /// Not of the form `NAME[:key=value,...]`.
    #[error("{text:?}: {why} (syntax: NAME[:key=value,...], e.g. cubic:c=0.4,beta=0.7)")]
    Syntax {
        /// The text.
        text: String,
        /// What is wrong.
        why: String,
    },
    /// Two settings of the initial window (a controller's `iw` and `--quic-initial-window`).
    #[error("{controller}: the initial window is set twice: iw={iw} and an initial window of {bytes} bytes; give one")]
    InitialWindowTwice {
        /// The controller.
        controller: String,
        /// Its `iw` value.
        iw: u64,
        /// The bytes given separately.
        bytes: u64,
    },
}

/// What kind of value a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// A real number in `min..=max`.
    Float {
        /// Smallest value.
        min: f64,
        /// Largest value.
        max: f64,
    },
    /// An integer in `min..=max`.
    Int {
        /// Smallest value.
        min: u64,
        /// Largest value.
        max: u64,
    },
    /// A duration (`4ms`, `0.5s`, `250us`; a bare number is milliseconds) in `min..=max` ms.
    Millis {
        /// Smallest value, ms.
        min: f64,
        /// Largest value, ms.
        max: f64,
    },
    /// A rate in bit/s (`5mbit`, `500kbit`, `1.5gbit`, `5000000`) in `min..=max`.
    Rate {
        /// Smallest value, bit/s.
        min: u64,
        /// Largest value, bit/s.
        max: u64,
    },
    /// One of these words.
    Choice(&'static [&'static str]),
    /// `on` or `off`.
    Switch,
}

impl Kind {
    /// What the kind accepts, for messages.
    pub fn expected(&self) -> String {
        match *self {
            Kind::Float { min, max } => format!("a number in {min}..{max}"),
            Kind::Int { min, max } => format!("an integer in {min}..{max}"),
            Kind::Millis { min, max } => format!("a duration in {min}..{max} ms (e.g. 4ms, 0.1s; a bare number is ms)"),
            Kind::Rate { min, max } => format!("a rate in {}..{} (e.g. 5mbit, 500kbit, 5000000 bit/s)", format_rate(min), format_rate(max)),
            Kind::Choice(words) => format!("one of {}", words.join(", ")),
            Kind::Switch => "on or off".to_string(),
        }
    }

    fn parse(&self, text: &str) -> Option<Value> {
        let text = text.trim();
        match *self {
            Kind::Float { min, max } => text.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= min && *v <= max).map(Value::Float),
            Kind::Int { min, max } => text.parse::<u64>().ok().filter(|v| (min..=max).contains(v)).map(Value::Int),
            Kind::Millis { min, max } => parse_duration_ms(text).filter(|ms| *ms >= min && *ms <= max).map(|ms| Value::Duration(Duration::from_secs_f64(ms / 1e3))),
            Kind::Rate { min, max } => parse_rate(text, Bare::BitsPerSecond).ok().filter(|r| (min..=max).contains(r)).map(Value::Rate),
            Kind::Choice(words) => words.iter().find(|w| w.eq_ignore_ascii_case(text)).map(|w| Value::Choice(w)),
            Kind::Switch => match text.to_ascii_lowercase().as_str() {
                "on" | "true" | "yes" | "1" => Some(Value::Switch(true)),
                "off" | "false" | "no" | "0" => Some(Value::Switch(false)),
                _ => None,
            },
        }
    }
}

/// A parameter's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// [`Kind::Float`].
    Float(f64),
    /// [`Kind::Int`].
    Int(u64),
    /// [`Kind::Millis`].
    Duration(Duration),
    /// [`Kind::Rate`], bit/s.
    Rate(u64),
    /// [`Kind::Choice`].
    Choice(&'static str),
    /// [`Kind::Switch`].
    Switch(bool),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Value::Float(v) => write!(f, "{v}"),
            Value::Int(v) => write!(f, "{v}"),
            Value::Duration(d) => write!(f, "{}ms", d.as_secs_f64() * 1e3),
            Value::Rate(r) => f.write_str(&format_rate(r)),
            Value::Choice(w) => f.write_str(w),
            Value::Switch(on) => f.write_str(if on { "on" } else { "off" }),
        }
    }
}

impl Value {
    /// The value as a number (durations in ms, rates in bit/s, switches 0/1); `None` for words.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Float(v) => Some(v),
            Value::Int(v) => Some(v as f64),
            Value::Duration(d) => Some(d.as_secs_f64() * 1e3),
            Value::Rate(r) => Some(r as f64),
            Value::Switch(on) => Some(if on { 1.0 } else { 0.0 }),
            Value::Choice(_) => None,
        }
    }
}

/// One parameter of a controller.
#[derive(Debug)]
pub struct Param {
    /// Its key.
    pub key: &'static str,
    /// Its kind.
    pub kind: Kind,
    /// Its default as text; `None` = required.
    pub default: Option<&'static str>,
    /// What it is.
    pub doc: &'static str,
}

/// A controller of the registry.
#[derive(Debug)]
pub struct Entry {
    /// Its name.
    pub name: &'static str,
    /// What it is.
    pub doc: &'static str,
    /// Its parameters (for a profile: none of its own; its base's are accepted).
    pub params: &'static [Param],
    /// A profile: the spec it stands for.
    pub profile: Option<&'static str>,
    configure: fn(&Params) -> Config,
}

/// The effective parameters of a spec, in the order of the entry's table.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    values: Vec<(&'static str, Value)>,
    explicit: Vec<&'static str>,
}

impl Params {
    /// The value of a parameter (every parameter of the entry has one).
    pub fn value(&self, key: &str) -> Option<Value> {
        self.values.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// Every parameter and its effective value.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, Value)> + '_ {
        self.values.iter().copied()
    }

    /// Whether the spec (or its profile) set this key.
    pub fn is_explicit(&self, key: &str) -> bool {
        self.explicit.contains(&key)
    }

    fn float(&self, key: &str) -> f64 {
        self.value(key).and_then(|v| v.as_f64()).unwrap_or(0.0)
    }

    fn int(&self, key: &str) -> u64 {
        match self.value(key) {
            Some(Value::Int(v)) => v,
            _ => 0,
        }
    }

    fn int32(&self, key: &str) -> u32 {
        u32::try_from(self.int(key)).unwrap_or(u32::MAX)
    }

    fn duration(&self, key: &str) -> Duration {
        match self.value(key) {
            Some(Value::Duration(d)) => d,
            _ => Duration::ZERO,
        }
    }

    fn switch(&self, key: &str) -> bool {
        matches!(self.value(key), Some(Value::Switch(true)))
    }

    fn choice(&self, key: &str) -> &'static str {
        match self.value(key) {
            Some(Value::Choice(w)) => w,
            _ => "",
        }
    }
}

/// What a spec configures: one of our controllers, or one of quinn's passed through.
#[derive(Debug, Clone, PartialEq)]
pub enum Config {
    /// [`crate::cubic::Cubic`].
    Cubic(CubicConfig),
    /// [`crate::reno::Reno`].
    Reno(RenoConfig),
    /// [`crate::fast::Fast`].
    Fast(FastConfig),
    /// [`crate::sprout::SproutEwma`] (the estimate at the sender).
    Sprout(SproutConfig),
    /// [`crate::sprout_feedback::SproutFeedback`] (the receiver's estimate, fed back).
    SproutFeedback(SproutFeedbackConfig),
    /// [`crate::fixed::Fixed`].
    Fixed(FixedConfig),
    /// quinn's BBR.
    QuinnBbr,
    /// quinn's Cubic (C = 0.4, beta = 0.7, no HyStart).
    QuinnCubic,
    /// quinn's NewReno.
    QuinnNewReno,
}

impl Config {
    /// Sets the initial window in bytes (`--quic-initial-window`).
    fn set_initial_window_bytes(&mut self, bytes: u64) {
        match self {
            Config::Cubic(c) => c.initial_window_bytes = Some(bytes),
            Config::Reno(c) => c.initial_window_bytes = Some(bytes),
            Config::Fast(c) => c.initial_window_bytes = Some(bytes),
            Config::Sprout(c) => c.initial_window_bytes = Some(bytes),
            Config::SproutFeedback(c) => c.initial_window_bytes = Some(bytes),
            Config::Fixed(c) => c.initial_window_bytes = Some(bytes),
            Config::QuinnBbr | Config::QuinnCubic | Config::QuinnNewReno => {}
        }
    }
}

const IW: Param = Param { key: "iw", kind: Kind::Int { min: 2, max: 10_000 }, default: Some("10"), doc: "initial window, packets" };
const N: Param = Param { key: "n", kind: Kind::Int { min: 1, max: 64 }, default: Some("1"), doc: "connections emulated" };

const CUBIC_PARAMS: &[Param] = &[
    Param { key: "c", kind: Kind::Float { min: 0.0, max: 100.0 }, default: Some("0.4"), doc: "C of W(t) = C (t - K)^3 + W_max, segments/s^3 (0 = flat cubic: Reno-friendly growth only)" },
    Param { key: "cube_factor", kind: Kind::Float { min: 0.0, max: 100.0 }, default: Some("1"), doc: "quic-go's cubeFactor as a multiple of its default (004's CubeFactor): K = cbrt(cube_factor (W_max - cwnd) / C), growth still C; 0 = K = 0 (back to W_max at once)" },
    Param { key: "beta", kind: Kind::Float { min: 0.05, max: 1.0 }, default: Some("0.7"), doc: "multiplicative decrease of one connection (1 = none)" },
    N,
    IW,
    Param { key: "hystart", kind: Kind::Choice(&["off", "plusplus"]), default: Some("plusplus"), doc: "slow-start exit: HyStart++ (RFC 9406) or none (slow start until a loss)" },
    Param { key: "hs_min_thresh", kind: Kind::Millis { min: 0.0, max: 10_000.0 }, default: Some("4ms"), doc: "HyStart++ MIN_RTT_THRESH" },
    Param { key: "hs_max_thresh", kind: Kind::Millis { min: 0.0, max: 10_000.0 }, default: Some("16ms"), doc: "HyStart++ MAX_RTT_THRESH" },
    Param { key: "hs_divisor", kind: Kind::Int { min: 1, max: 1000 }, default: Some("8"), doc: "HyStart++ MIN_RTT_DIVISOR" },
    Param { key: "hs_samples", kind: Kind::Int { min: 1, max: 1000 }, default: Some("8"), doc: "HyStart++ N_RTT_SAMPLE" },
    Param { key: "hs_css_divisor", kind: Kind::Int { min: 1, max: 1000 }, default: Some("4"), doc: "HyStart++ CSS_GROWTH_DIVISOR" },
    Param { key: "hs_css_rounds", kind: Kind::Int { min: 1, max: 1000 }, default: Some("5"), doc: "HyStart++ CSS_ROUNDS" },
    Param { key: "fast_convergence", kind: Kind::Switch, default: Some("on"), doc: "fast convergence (RFC 9438 §4.7)" },
];

const RENO_PARAMS: &[Param] = &[N, IW];

const FAST_PARAMS: &[Param] = &[
    Param { key: "alpha", kind: Kind::Float { min: 0.1, max: 100_000.0 }, default: Some("20"), doc: "packets the flow keeps queued at the bottleneck" },
    Param { key: "gamma", kind: Kind::Float { min: 0.01, max: 1.0 }, default: Some("0.5"), doc: "smoothing of the once-per-RTT update" },
    IW,
];

const SPROUT_PARAMS: &[Param] = &[
    Param { key: "gain", kind: Kind::Float { min: 0.001, max: 1.0 }, default: Some("0.125"), doc: "EWMA gain of the delivered-rate estimate (002: 1/8)" },
    Param { key: "target", kind: Kind::Millis { min: 1.0, max: 10_000.0 }, default: Some("100ms"), doc: "queueing delay the window allows on top of the minimum RTT (002: 100 ms)" },
    Param { key: "tick", kind: Kind::Millis { min: 1.0, max: 1000.0 }, default: Some("20ms"), doc: "length of a rate measurement" },
    IW,
];

const SPROUT_FEEDBACK_PARAMS: &[Param] = &[
    Param { key: "gain", kind: Kind::Float { min: 0.001, max: 1.0 }, default: Some("0.125"), doc: "EWMA gain of the receiver's rate estimate (002: 1/8)" },
    Param { key: "target", kind: Kind::Millis { min: 1.0, max: 10_000.0 }, default: Some("100ms"), doc: "cap of the target delay: target = min(this, min RTT), allowed on top of the minimum RTT (002: min(100 ms, min RTT))" },
    Param { key: "tick", kind: Kind::Millis { min: 1.0, max: 1000.0 }, default: Some("20ms"), doc: "length of a rate measurement at the receiver, and the interval of its reports" },
    IW,
];

const FIXED_PARAMS: &[Param] = &[
    Param { key: "rate", kind: Kind::Rate { min: 1_000, max: 100_000_000_000 }, default: None, doc: "the constant sending rate (bytes of QUIC packets per second)" },
];

fn hystart_of(p: &Params) -> Option<HystartConfig> {
    (p.choice("hystart") == "plusplus").then(|| HystartConfig {
        min_rtt_thresh: p.duration("hs_min_thresh"),
        max_rtt_thresh: p.duration("hs_max_thresh"),
        min_rtt_divisor: p.int32("hs_divisor"),
        n_rtt_sample: p.int32("hs_samples"),
        css_growth_divisor: p.int32("hs_css_divisor"),
        css_rounds: p.int32("hs_css_rounds"),
    })
}

fn cubic(p: &Params) -> Config {
    Config::Cubic(CubicConfig {
        c: p.float("c"),
        cube_factor: p.float("cube_factor"),
        beta: p.float("beta"),
        connections: p.int32("n"),
        initial_window_packets: p.int32("iw"),
        initial_window_bytes: None,
        hystart: hystart_of(p),
        fast_convergence: p.switch("fast_convergence"),
    })
}

fn reno(p: &Params) -> Config {
    Config::Reno(RenoConfig { connections: p.int32("n"), initial_window_packets: p.int32("iw"), initial_window_bytes: None })
}

fn fast(p: &Params) -> Config {
    Config::Fast(FastConfig { alpha: p.float("alpha"), gamma: p.float("gamma"), initial_window_packets: p.int32("iw"), initial_window_bytes: None })
}

fn sprout(p: &Params) -> Config {
    Config::Sprout(SproutConfig {
        gain: p.float("gain"),
        target: p.duration("target"),
        tick: p.duration("tick"),
        initial_window_packets: p.int32("iw"),
        initial_window_bytes: None,
    })
}

fn sprout_feedback(p: &Params) -> Config {
    Config::SproutFeedback(SproutFeedbackConfig {
        estimator: EstimatorConfig { gain: p.float("gain"), tick: p.duration("tick") },
        target_cap: p.duration("target"),
        initial_window_packets: p.int32("iw"),
        initial_window_bytes: None,
    })
}

fn fixed(p: &Params) -> Config {
    let rate = match p.value("rate") {
        Some(Value::Rate(r)) => r,
        _ => 0,
    };
    Config::Fixed(FixedConfig { rate_bps: rate, initial_window_bytes: None })
}

/// Every controller, looked up by name.
pub static REGISTRY: &[Entry] = &[
    Entry { name: "cubic", doc: "CUBIC (RFC 9438), ours: tunable C and beta, N-connection emulation, initial window, HyStart++", params: CUBIC_PARAMS, profile: None, configure: cubic },
    Entry { name: "reno", doc: "NewReno (RFC 9002), with N-connection emulation", params: RENO_PARAMS, profile: None, configure: reno },
    Entry { name: "fast", doc: "FAST TCP: w <- min(2w, (1-gamma) w + gamma (baseRTT/RTT w + alpha)) once per RTT", params: FAST_PARAMS, profile: None, configure: fast },
    Entry { name: "sprout-ewma", doc: "Sprout-EWMA as 002 §6.2: the receiver's EWMA of its receiving rate per tick, fed back in QUIC datagrams; window = rate x (min RTT + min(target, min RTT))", params: SPROUT_FEEDBACK_PARAMS, profile: None, configure: sprout_feedback },
    Entry { name: "fixed", doc: "a constant sending rate whatever the network does (003's \"limited\" sender)", params: FIXED_PARAMS, profile: None, configure: fixed },
    Entry { name: "sprout-ewma-sender", doc: "Sprout-EWMA estimated at the sender: EWMA of the acknowledged rate per tick, window = rate x (min RTT + target)", params: SPROUT_PARAMS, profile: None, configure: sprout },
    Entry { name: "bbr", doc: "quinn's BBR (v1), passed through", params: &[], profile: None, configure: |_| Config::QuinnBbr },
    Entry { name: "quinn-cubic", doc: "quinn's own Cubic (C = 0.4, beta = 0.7, no HyStart), passed through", params: &[], profile: None, configure: |_| Config::QuinnCubic },
    Entry { name: "quinn-newreno", doc: "quinn's own NewReno, passed through", params: &[], profile: None, configure: |_| Config::QuinnNewReno },
    Entry { name: "gquic39", doc: "profile of 001's QUIC (gQUIC 39): Cubic emulating two connections, 32-packet initial window", params: &[], profile: Some("cubic:n=2,iw=32"), configure: cubic },
    Entry { name: "newreno", doc: "profile: another name of reno", params: &[], profile: Some("reno"), configure: reno },
    Entry {
        name: "bquic",
        doc: "profile of 000's BQUIC (§6.3.1): Cubic whose HyStart++ RTT threshold is twice RFC 9406's at every RTT (8..32 ms, min RTT / 4), with transport defaults: ACK decimation (every 10 packets, 25 ms max ACK delay) and a 1.5 RTT time threshold",
        params: &[],
        profile: Some("cubic:hs_min_thresh=8ms,hs_max_thresh=32ms,hs_divisor=4"),
        configure: cubic,
    },
];

/// Transport knobs a profile sets besides its controller (000's BQUIC changes the ACK mode and
/// loss detection too). The endpoint applies them where its own options leave the knob unset;
/// an explicit option (`--quic-time-threshold`, ...) wins. `None` leaves quinn's default.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TransportDefaults {
    /// Ask the peer (ACK frequency extension) to acknowledge every `n + 1` ack-eliciting packets.
    pub ack_eliciting_threshold: Option<u32>,
    /// With that request: the peer's maximum ACK delay.
    pub max_ack_delay: Option<Duration>,
    /// Loss detection's time threshold, a multiple of the RTT (RFC 9002 kTimeThreshold, 9/8).
    pub time_threshold: Option<f32>,
}

/// BQUIC's transport knobs (000 §6.3.1). ACK decimation as Chromium's `ACK_DECIMATION` (000
/// §6.2: "delayed up to a maximum of 10 packets ... 25 ms"), asked of the peer with quinn's ACK
/// frequency extension. 000 gives no number for the loss threshold, only that RFC 9002's 1/8 RTT
/// of reordering is too little under WiFi delay variation (Fig. 6.9b); 1.5 allows half an RTT,
/// twice the 25% delay swing of Fig. 6.9a (24-30 ms).
pub const BQUIC_TRANSPORT: TransportDefaults =
    TransportDefaults { ack_eliciting_threshold: Some(9), max_ack_delay: Some(Duration::from_millis(25)), time_threshold: Some(1.5) };

/// The profiles that carry transport knobs, by name (a separate table so the registry's
/// entries stay controller-only; every other entry has none).
pub static TRANSPORT_PROFILES: &[(&str, TransportDefaults)] = &[("bquic", BQUIC_TRANSPORT)];

/// The registry's names, comma-separated (for messages).
pub fn known_names() -> String {
    REGISTRY.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
}

fn entry(name: &str) -> Option<&'static Entry> {
    REGISTRY.iter().find(|e| e.name.eq_ignore_ascii_case(name))
}

/// A checked controller spec: a registry entry with every parameter's effective value.
#[derive(Debug, Clone)]
pub struct ControllerSpec {
    /// The text as given.
    pub given: String,
    /// The name given (a profile's own name, e.g. `gquic39`).
    pub name: &'static str,
    /// The entry that implements it (the profile's base, e.g. `cubic`).
    pub base: &'static Entry,
    /// Effective parameters.
    pub params: Params,
    config: Config,
}

impl ControllerSpec {
    /// Parses and checks `NAME[:key=value,...]`.
    pub fn parse(text: &str) -> Result<ControllerSpec, SpecError> {
        let trimmed = text.trim();
        let (name, rest) = match trimmed.split_once(':') {
            Some((n, r)) => (n.trim(), Some(r)),
            None => (trimmed, None),
        };
        if name.is_empty() {
            return Err(SpecError::Syntax { text: text.to_string(), why: "no controller name".into() });
        }
        let named = entry(name).ok_or_else(|| SpecError::UnknownController { name: name.to_string(), known: known_names() })?;
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut base = named;
        if let Some(profile) = named.profile {
            // A profile's own settings first; the given ones override them.
            let (base_name, base_rest) = profile.split_once(':').unwrap_or((profile, ""));
            base = entry(base_name).ok_or_else(|| SpecError::UnknownController { name: base_name.to_string(), known: known_names() })?;
            pairs.extend(split_pairs(profile, base_rest)?);
        }
        if let Some(rest) = rest {
            pairs.extend(split_pairs(text, rest)?);
        }
        let mut explicit: Vec<&'static str> = Vec::new();
        let mut given: Vec<(&'static str, Value)> = Vec::new();
        for (key, value) in pairs {
            let param = base.params.iter().find(|p| p.key.eq_ignore_ascii_case(&key)).ok_or_else(|| SpecError::UnknownParam {
                controller: named.name.to_string(),
                key: key.clone(),
                accepted: accepted_keys(base),
            })?;
            let parsed = param.kind.parse(&value).ok_or_else(|| SpecError::BadValue {
                controller: named.name.to_string(),
                key: param.key.to_string(),
                value: value.clone(),
                expected: param.kind.expected(),
            })?;
            given.retain(|(k, _)| *k != param.key);
            given.push((param.key, parsed));
            if !explicit.contains(&param.key) {
                explicit.push(param.key);
            }
        }
        let mut values = Vec::with_capacity(base.params.len());
        for param in base.params {
            let value = match given.iter().find(|(k, _)| *k == param.key) {
                Some((_, v)) => *v,
                None => match param.default {
                    // The registry's defaults are parsed by a test; a bad one would be a bug here.
                    Some(default) => param.kind.parse(default).unwrap_or(Value::Choice("?")),
                    None => {
                        return Err(SpecError::Missing {
                            controller: named.name.to_string(),
                            key: param.key.to_string(),
                            doc: param.doc.to_string(),
                            example: format!("{}:{}={}", named.name, param.key, example_value(&param.kind)),
                        })
                    }
                },
            };
            values.push((param.key, value));
        }
        let params = Params { values, explicit };
        let config = (base.configure)(&params);
        Ok(ControllerSpec { given: trimmed.to_string(), name: named.name, base, params, config })
    }

    /// The full form with every parameter (`cubic:c=0.4,beta=0.7,...`); equal controllers
    /// have equal canonical forms.
    pub fn canonical(&self) -> String {
        let mut text = self.base.name.to_string();
        for (i, (key, value)) in self.params.iter().enumerate() {
            text.push(if i == 0 { ':' } else { ',' });
            text.push_str(&format!("{key}={value}"));
        }
        text
    }

    /// The transport knobs of the named profile (`bquic`'s ACK decimation and time threshold);
    /// all `None` for any other entry.
    pub fn transport_defaults(&self) -> TransportDefaults {
        TRANSPORT_PROFILES.iter().find(|(name, _)| *name == self.name).map(|(_, t)| *t).unwrap_or_default()
    }

    /// What the spec configures.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What the spec configures with `initial_window_bytes` (`--quic-initial-window`) as the
    /// initial window: an error when the spec sets `iw` too.
    pub fn config_with_initial_window(&self, initial_window_bytes: Option<u64>) -> Result<Config, SpecError> {
        let mut config = self.config.clone();
        if let Some(bytes) = initial_window_bytes {
            if self.params.is_explicit("iw") {
                return Err(SpecError::InitialWindowTwice { controller: self.name.to_string(), iw: self.params.int("iw"), bytes });
            }
            config.set_initial_window_bytes(bytes);
        }
        Ok(config)
    }
}

impl fmt::Display for ControllerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.given)
    }
}

fn accepted_keys(entry: &Entry) -> String {
    if entry.params.is_empty() {
        "none: it takes no parameters".to_string()
    } else {
        entry.params.iter().map(|p| p.key).collect::<Vec<_>>().join(", ")
    }
}

fn example_value(kind: &Kind) -> &'static str {
    match kind {
        Kind::Rate { .. } => "5mbit",
        Kind::Millis { .. } => "10ms",
        Kind::Switch => "on",
        Kind::Choice(words) => words.first().copied().unwrap_or("?"),
        Kind::Float { .. } | Kind::Int { .. } => "1",
    }
}

fn split_pairs(text: &str, rest: &str) -> Result<Vec<(String, String)>, SpecError> {
    let mut pairs = Vec::new();
    for item in rest.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| SpecError::Syntax { text: text.to_string(), why: format!("{item:?} is not key=value") })?;
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() || value.is_empty() {
            return Err(SpecError::Syntax { text: text.to_string(), why: format!("{item:?} needs a key and a value") });
        }
        pairs.push((key.to_string(), value.to_string()));
    }
    Ok(pairs)
}

/// `4ms`, `0.5s`, `250us`, `1500000ns` (contract's units), or a bare number of milliseconds ->
/// milliseconds.
fn parse_duration_ms(text: &str) -> Option<f64> {
    match text.trim().parse::<f64>() {
        Ok(ms) => Some(ms).filter(|v| v.is_finite() && *v >= 0.0),
        Err(_) => parse_duration(text).ok().map(|ns| ns as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_parses() {
        for entry in REGISTRY {
            for param in entry.params {
                if let Some(default) = param.default {
                    assert!(param.kind.parse(default).is_some(), "{}.{} default {default:?}", entry.name, param.key);
                }
            }
            if let Some(profile) = entry.profile {
                ControllerSpec::parse(profile).unwrap();
            }
        }
    }

    #[test]
    fn defaults_and_overrides() {
        let spec = ControllerSpec::parse("cubic").unwrap();
        assert_eq!(spec.canonical(), "cubic:c=0.4,cube_factor=1,beta=0.7,n=1,iw=10,hystart=plusplus,hs_min_thresh=4ms,hs_max_thresh=16ms,hs_divisor=8,hs_samples=8,hs_css_divisor=4,hs_css_rounds=5,fast_convergence=on");
        let spec = ControllerSpec::parse(" cubic : c=0.8, beta = 0.5 ,hystart=off").unwrap();
        match spec.config() {
            Config::Cubic(c) => {
                assert_eq!((c.c, c.beta, c.hystart), (0.8, 0.5, None));
            }
            other => panic!("{other:?}"),
        }
        let tuned = ControllerSpec::parse("cubic:hs_min_thresh=16ms,hs_max_thresh=0.064s").unwrap();
        match tuned.config() {
            Config::Cubic(c) => {
                let h = c.hystart.unwrap();
                assert_eq!((h.min_rtt_thresh, h.max_rtt_thresh), (Duration::from_millis(16), Duration::from_millis(64)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn profiles_expand_and_take_overrides() {
        let g = ControllerSpec::parse("gquic39").unwrap();
        assert_eq!(g.name, "gquic39");
        assert_eq!(g.base.name, "cubic");
        assert_eq!(g.params.value("n"), Some(Value::Int(2)));
        assert_eq!(g.params.value("iw"), Some(Value::Int(32)));
        assert_eq!(g.canonical(), ControllerSpec::parse("cubic:n=2,iw=32").unwrap().canonical());
        let g = ControllerSpec::parse("gquic39:hystart=off,n=3").unwrap();
        assert_eq!(g.params.value("n"), Some(Value::Int(3)));
        assert_eq!(ControllerSpec::parse("newreno").unwrap().base.name, "reno");
    }

    #[test]
    fn bquic_raises_the_slow_start_threshold_and_carries_transport_knobs() {
        let b = ControllerSpec::parse("bquic").unwrap();
        assert_eq!(b.base.name, "cubic");
        let Config::Cubic(cubic) = b.config() else { panic!("bquic configures Cubic") };
        let h = cubic.hystart.unwrap();
        let standard = HystartConfig::default();
        assert_eq!((h.min_rtt_thresh, h.max_rtt_thresh), (2 * standard.min_rtt_thresh, 2 * standard.max_rtt_thresh));
        assert_eq!(h.min_rtt_divisor * 2, standard.min_rtt_divisor);
        assert_eq!(b.transport_defaults(), BQUIC_TRANSPORT);
        assert_eq!(BQUIC_TRANSPORT.ack_eliciting_threshold, Some(9), "000: an ACK every 10 packets");
        assert_eq!(BQUIC_TRANSPORT.max_ack_delay, Some(Duration::from_millis(25)), "000: at most 25 ms");
        // Overrides keep the profile's transport knobs; other entries have none.
        assert_eq!(ControllerSpec::parse("bquic:hystart=off").unwrap().transport_defaults(), BQUIC_TRANSPORT);
        assert_eq!(ControllerSpec::parse("cubic:hs_divisor=4").unwrap().transport_defaults(), TransportDefaults::default());
        assert!(TRANSPORT_PROFILES.iter().all(|(name, _)| entry(name).is_some_and(|e| e.profile.is_some())));
    }

    /// The round (index into `round_rtts_ms`) in which HyStart++ of `spec` leaves slow start,
    /// every round giving `hs_samples` samples of its RTT.
    fn slow_start_exit_round(spec: &str, round_rtts_ms: &[u64]) -> Option<usize> {
        let Config::Cubic(CubicConfig { hystart: Some(config), .. }) = ControllerSpec::parse(spec).unwrap().config().clone() else {
            panic!("{spec} is Cubic with HyStart++")
        };
        let mut hystart = crate::hystart::HyStart::new(config);
        for (round, rtt) in round_rtts_ms.iter().enumerate() {
            hystart.on_round_start();
            for _ in 0..config.n_rtt_sample {
                if hystart.on_rtt_sample(Duration::from_millis(*rtt)) == Some(crate::hystart::Change::EnterCss) {
                    return Some(round);
                }
            }
        }
        None
    }

    #[test]
    fn bquic_leaves_slow_start_later() {
        // 000 Fig. 6.9a: a 24 ms path whose delay swings to 30 ms at the start of a transfer,
        // with no queue: RFC 9406's 4 ms threshold ends slow start, BQUIC's 8 ms does not.
        let wifi_swing = [24, 24, 30, 24, 30, 24, 30, 24];
        assert_eq!(slow_start_exit_round("cubic", &wifi_swing), Some(2));
        assert_eq!(slow_start_exit_round("bquic", &wifi_swing), None);
        // A real queue: once the window passes the BDP the queueing delay doubles every round
        // (0, 1, 2, 4, 8, 16 ms). Both leave, BQUIC one round (a doubled window) later.
        let queue_builds = [24, 24, 24, 25, 26, 28, 32, 40, 56];
        assert_eq!(slow_start_exit_round("cubic", &queue_builds), Some(6));
        assert_eq!(slow_start_exit_round("bquic", &queue_builds), Some(7));
    }

    #[test]
    fn errors_name_what_is_accepted() {
        let e = ControllerSpec::parse("cubci").unwrap_err().to_string();
        assert!(e.contains("unknown congestion controller \"cubci\"") && e.contains("cubic, reno, fast"), "{e}");
        let e = ControllerSpec::parse("cubic:gamma=1").unwrap_err().to_string();
        assert!(e.contains("unknown parameter \"gamma\"") && e.contains("c, cube_factor, beta, n, iw, hystart"), "{e}");
        let e = ControllerSpec::parse("cubic:beta=1.5").unwrap_err().to_string();
        assert!(e.contains("beta=\"1.5\"") && e.contains("a number in 0.05..1"), "{e}");
        let e = ControllerSpec::parse("cubic:hystart=classic").unwrap_err().to_string();
        assert!(e.contains("one of off, plusplus"), "{e}");
        let e = ControllerSpec::parse("bbr:iw=10").unwrap_err().to_string();
        assert!(e.contains("takes no parameters"), "{e}");
        let e = ControllerSpec::parse("fixed").unwrap_err().to_string();
        assert!(e.contains("rate is required") && e.contains("fixed:rate=5mbit"), "{e}");
        let e = ControllerSpec::parse("fixed:rate=fast").unwrap_err().to_string();
        assert!(e.contains("a rate in 1kbit..100gbit"), "{e}");
        let e = ControllerSpec::parse("cubic:c").unwrap_err().to_string();
        assert!(e.contains("not key=value") && e.contains("syntax"), "{e}");
        assert!(matches!(ControllerSpec::parse(":c=1"), Err(SpecError::Syntax { .. })));
        let e = ControllerSpec::parse("gquic39").unwrap().config_with_initial_window(Some(20_000)).unwrap_err().to_string();
        assert!(e.contains("initial window is set twice"), "{e}");
        let Config::Cubic(cubic) = ControllerSpec::parse("cubic").unwrap().config_with_initial_window(Some(20_000)).unwrap() else {
            panic!("cubic configures Cubic")
        };
        assert_eq!(cubic.initial_window_bytes, Some(20_000));
    }

    #[test]
    fn sprout_ewma_is_the_receiver_feedback_version() {
        let Config::SproutFeedback(feedback) = ControllerSpec::parse("sprout-ewma").unwrap().config().clone() else {
            panic!("sprout-ewma configures the receiver-feedback controller")
        };
        assert_eq!(feedback, SproutFeedbackConfig::default());
        let tuned = ControllerSpec::parse("sprout-ewma:gain=0.25,tick=10ms,target=50ms,iw=4").unwrap();
        let Config::SproutFeedback(tuned) = tuned.config() else { panic!("{tuned:?}") };
        assert_eq!(
            (tuned.estimator.gain, tuned.estimator.tick, tuned.target_cap, tuned.initial_window_packets),
            (0.25, Duration::from_millis(10), Duration::from_millis(50), 4)
        );
        let Config::Sprout(sender) = ControllerSpec::parse("sprout-ewma-sender").unwrap().config().clone() else {
            panic!("sprout-ewma-sender configures the sender-side estimate")
        };
        assert_eq!(sender, SproutConfig::default());
    }

    #[test]
    fn values_parse_with_units() {
        let rate = |text: &str| Kind::Rate { min: 1_000, max: 100_000_000_000 }.parse(text);
        assert_eq!(rate("5mbit"), Some(Value::Rate(5_000_000)));
        assert_eq!(rate("1.5gbit"), Some(Value::Rate(1_500_000_000)));
        assert_eq!(rate("500kbit"), Some(Value::Rate(500_000)));
        assert_eq!(rate("1200"), Some(Value::Rate(1200)), "a bare number is bit/s");
        assert_eq!(rate("-1"), None);
        assert_eq!(rate("999"), None, "below the kind's minimum");
        assert_eq!(Value::Rate(1_500_000).to_string(), "1500kbit");
        assert_eq!(parse_duration_ms("0.1s"), Some(100.0));
        assert_eq!(parse_duration_ms("250us"), Some(0.25));
        assert_eq!(parse_duration_ms("7"), Some(7.0));
        assert_eq!(parse_duration_ms("ms"), None);
        let f = ControllerSpec::parse("fixed:rate=5mbit").unwrap();
        assert_eq!(f.canonical(), "fixed:rate=5mbit");
    }
}
