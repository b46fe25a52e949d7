//! Link parameters as numbers (`rate_bps`, `delay_ns`, ...); strings with units accepted as input.
//!
//! [`LinkParams`] is one link direction as a topology file, the emulator's replies and the
//! results store carry it. What the emulator writes is always the complete numeric form: every
//! field present, `null` where a feature is off. What it reads may also be written the way
//! people write it (docs/topology.md): `rate = "10mbit"` or `"unlimited"`, `delay = "25ms"`,
//! `jitter.std = "1ms"`, CoDel `target`/`interval` as durations, fields left out for defaults.
//!
//! [`LinkPatch`] is the change a `set_link` request asks for (docs/control.md).
//!
//! Conversion to the model's configuration (and reading a trace file) is the emulator's job:
//! this crate neither reads files nor knows the model.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::units;

/// The queue limit when a queue names none, packets.
pub const DEFAULT_QUEUE_PACKETS: u32 = 1000;
/// CoDel's target when none is given (RFC 8289), ns.
pub const DEFAULT_CODEL_TARGET_NS: u64 = 5_000_000;
/// CoDel's interval when none is given (RFC 8289), ns.
pub const DEFAULT_CODEL_INTERVAL_NS: u64 = 100_000_000;

/// One link direction (docs/topology.md). The default is the ideal link: unlimited, no delay,
/// no loss, a drop-tail queue of 1000 packets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkParams {
    /// Serialization rate in bit/s; `null`: unlimited, or paced by `trace`. Input also takes
    /// `rate` and strings such as `"10mbit"` or `"unlimited"`.
    #[serde(default, alias = "rate", deserialize_with = "units::de_rate_limit")]
    #[schemars(with = "Option<u64>", range(min = 1))]
    pub rate_bps: Option<u64>,
    /// A Mahimahi trace file of delivery opportunities, instead of `rate_bps` (relative paths are
    /// relative to the topology file).
    #[serde(default)]
    pub trace: Option<String>,
    /// Where the link's replay of `trace` starts, ns into the trace (wrapped by its period; 0:
    /// its beginning). The replay restarts there whenever the trace or this start changes.
    /// Input also takes `trace_start` and durations such as `"37s"`.
    #[serde(default, alias = "trace_start", deserialize_with = "units::de_duration")]
    #[schemars(with = "u64", range(max = units::MAX_DURATION_NS))]
    pub trace_start_ns: u64,
    /// The queue in front of the link.
    #[serde(default)]
    pub queue: QueueParams,
    /// Propagation delay, ns. Input also takes `delay` and strings such as `"25ms"`.
    #[serde(default, alias = "delay", deserialize_with = "units::de_duration")]
    #[schemars(with = "u64", range(max = units::MAX_DURATION_NS))]
    pub delay_ns: u64,
    /// Random delay variation; `null`: none.
    #[serde(default)]
    pub jitter: Option<JitterParams>,
    /// Random loss at arrival; `null`: none.
    #[serde(default)]
    pub loss: Option<LossParams>,
    /// A WiFi link (docs/emulator.md, "WiFi links"): the transmitter is an 802.11 station that
    /// sends aggregated frames, instead of `rate_bps` or `trace`; `null`: not WiFi. Fields left
    /// out take the 802.11n defaults (`{}` is a default 802.11n link).
    #[serde(default)]
    pub wifi: Option<WifiParams>,
}

/// A WiFi link direction: one 802.11n/ac station sending A-MPDUs to one receiver. Every field
/// has a default (an 802.11n link at 5 GHz, 2 spatial streams, 20 MHz; sources in
/// docs/emulator.md). Durations are ns; input also takes strings such as `"9us"`, and the rate
/// strings such as `"130mbit"`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WifiParams {
    /// PHY rate of the data, bit/s (default 130 Mbit/s: HT MCS 15, 800 ns guard interval).
    /// Input also takes `phy_rate` and strings such as `"130mbit"`.
    #[serde(alias = "phy_rate", deserialize_with = "de_rate")]
    #[schemars(range(min = 1))]
    pub phy_rate_bps: u64,
    /// Most MPDUs in one A-MPDU (default 64, the block-ACK window; 1: no aggregation).
    #[schemars(range(min = 1, max = 1024))]
    pub max_ampdu_frames: u32,
    /// Most bytes in one A-MPDU (default 65 535, 802.11n's maximum A-MPDU length).
    #[schemars(range(min = 1))]
    pub max_ampdu_bytes: u32,
    /// Most airtime of one A-MPDU's data, ns (default 4 ms). Input also takes
    /// `max_ampdu_duration` and strings.
    #[serde(alias = "max_ampdu_duration", deserialize_with = "units::de_duration")]
    #[schemars(with = "u64", range(min = 1))]
    pub max_ampdu_duration_ns: u64,
    /// Backoff slot, ns (default 9 us). Input also takes `slot`.
    #[serde(alias = "slot", deserialize_with = "units::de_duration")]
    #[schemars(with = "u64")]
    pub slot_ns: u64,
    /// Short interframe space, ns (default 16 us). Input also takes `sifs`.
    #[serde(alias = "sifs", deserialize_with = "units::de_duration")]
    #[schemars(with = "u64")]
    pub sifs_ns: u64,
    /// DCF interframe space, ns (default 34 us = SIFS + 2 slots). Input also takes `difs`.
    #[serde(alias = "difs", deserialize_with = "units::de_duration")]
    #[schemars(with = "u64", range(min = 1))]
    pub difs_ns: u64,
    /// Smallest contention window, slots (default 15): the backoff is uniform over 0..=cw.
    pub cw_min: u32,
    /// Largest contention window, slots (default 1023).
    #[schemars(range(max = 65535))]
    pub cw_max: u32,
    /// PHY preamble and headers, ns (default 40 us: HT-mixed with 2 HT-LTFs). Input also takes
    /// `preamble`.
    #[serde(alias = "preamble", deserialize_with = "units::de_duration")]
    #[schemars(with = "u64")]
    pub preamble_ns: u64,
    /// The block ACK, preamble included, ns (default 32 us: 32 bytes at 24 Mbit/s). Input also
    /// takes `block_ack`.
    #[serde(alias = "block_ack", deserialize_with = "units::de_duration")]
    #[schemars(with = "u64")]
    pub block_ack_ns: u64,
    /// Probability that one MPDU attempt is received in error (default 0.05, an assumption).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub frame_error_rate: f64,
    /// Retransmissions after a frame's first attempt (default 7); residual loss
    /// `frame_error_rate ^ (retry_limit + 1)`.
    #[schemars(range(max = 255))]
    pub retry_limit: u32,
    /// Probability that another station takes the channel before each TXOP, again after each of
    /// its TXOPs (default 0: the station is alone).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub contention_probability: f64,
    /// How long another station's TXOP holds the channel, ns (default 2 ms). Input also takes
    /// `contention_txop`.
    #[serde(alias = "contention_txop", deserialize_with = "units::de_duration")]
    #[schemars(with = "u64")]
    pub contention_txop_ns: u64,
}

impl Default for WifiParams {
    fn default() -> Self {
        WifiParams {
            phy_rate_bps: 130_000_000,
            max_ampdu_frames: 64,
            max_ampdu_bytes: 65_535,
            max_ampdu_duration_ns: 4_000_000,
            slot_ns: 9_000,
            sifs_ns: 16_000,
            difs_ns: 34_000,
            cw_min: 15,
            cw_max: 1023,
            preamble_ns: 40_000,
            block_ack_ns: 32_000,
            frame_error_rate: 0.05,
            retry_limit: 7,
            contention_probability: 0.0,
            contention_txop_ns: 2_000_000,
        }
    }
}

/// A required rate: [`units::de_rate_limit`] without `"unlimited"` or null.
fn de_rate<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    units::de_rate_limit(d)?.ok_or_else(|| serde::de::Error::custom("a WiFi PHY rate cannot be unlimited"))
}

/// The queue in front of a link direction: its discipline and its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "QueueForm", into = "QueueForm")]
pub struct QueueParams {
    /// Discipline.
    pub kind: QueueKind,
    /// Limit.
    pub limit: QueueLimit,
}

impl Default for QueueParams {
    fn default() -> Self {
        QueueParams { kind: QueueKind::Droptail, limit: QueueLimit::Packets(DEFAULT_QUEUE_PACKETS) }
    }
}

/// Queue discipline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// Drop the arriving packet when full.
    Droptail,
    /// Drop the oldest packets until the arriving one fits.
    Drophead,
    /// CoDel (RFC 8289) at dequeue, plus the limit at enqueue.
    Codel {
        /// Acceptable standing queue delay, ns.
        target_ns: u64,
        /// Window over which the minimum sojourn time is tracked, ns.
        interval_ns: u64,
    },
}

/// What limits a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many packets wait.
    Packets(u32),
    /// At most this many bytes wait.
    Bytes(u64),
}

/// The queue as written: `{"kind": "droptail", "packets": 1000}`, `{"kind": "codel", "target_ns":
/// 5000000, "interval_ns": 100000000, "bytes": 45000}`. At most one of `packets` and `bytes`
/// (neither: 1000 packets); the emulator writes exactly one.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum QueueForm {
    /// Drop-tail.
    Droptail {
        /// Packet limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 1))]
        packets: Option<u32>,
        /// Byte limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
    },
    /// Drop-head.
    Drophead {
        /// Packet limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 1))]
        packets: Option<u32>,
        /// Byte limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
    },
    /// CoDel.
    Codel {
        /// Target, ns (default 5 ms). Input also takes `target` and strings such as `"5ms"`.
        #[serde(default = "codel_target", alias = "target", deserialize_with = "units::de_duration")]
        #[schemars(with = "u64")]
        target_ns: u64,
        /// Interval, ns (default 100 ms). Input also takes `interval` and strings.
        #[serde(default = "codel_interval", alias = "interval", deserialize_with = "units::de_duration")]
        #[schemars(with = "u64")]
        interval_ns: u64,
        /// Packet limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 1))]
        packets: Option<u32>,
        /// Byte limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
    },
}

fn codel_target() -> u64 {
    DEFAULT_CODEL_TARGET_NS
}

fn codel_interval() -> u64 {
    DEFAULT_CODEL_INTERVAL_NS
}

impl TryFrom<QueueForm> for QueueParams {
    type Error = String;

    fn try_from(form: QueueForm) -> Result<Self, String> {
        let (kind, packets, bytes) = match form {
            QueueForm::Droptail { packets, bytes } => (QueueKind::Droptail, packets, bytes),
            QueueForm::Drophead { packets, bytes } => (QueueKind::Drophead, packets, bytes),
            QueueForm::Codel { target_ns, interval_ns, packets, bytes } => {
                (QueueKind::Codel { target_ns, interval_ns }, packets, bytes)
            }
        };
        let limit = match (packets, bytes) {
            (Some(_), Some(_)) => return Err("give either packets or bytes, not both".into()),
            (_, Some(bytes)) => QueueLimit::Bytes(bytes),
            (Some(packets), None) => QueueLimit::Packets(packets),
            (None, None) => QueueLimit::Packets(DEFAULT_QUEUE_PACKETS),
        };
        Ok(QueueParams { kind, limit })
    }
}

impl From<QueueParams> for QueueForm {
    fn from(queue: QueueParams) -> Self {
        let (packets, bytes) = match queue.limit {
            QueueLimit::Packets(p) => (Some(p), None),
            QueueLimit::Bytes(b) => (None, Some(b)),
        };
        match queue.kind {
            QueueKind::Droptail => QueueForm::Droptail { packets, bytes },
            QueueKind::Drophead => QueueForm::Drophead { packets, bytes },
            QueueKind::Codel { target_ns, interval_ns } => QueueForm::Codel { target_ns, interval_ns, packets, bytes },
        }
    }
}

/// Shape of the delay variation (every one zero-mean with the given standard deviation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum JitterDistribution {
    /// Uniform over `±std·√3`.
    Uniform,
    /// Normal.
    #[default]
    Normal,
    /// Pareto with shape 3 shifted to zero mean: a heavy tail of late packets.
    Pareto,
}

/// Random delay variation added to the propagation delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JitterParams {
    /// Standard deviation, ns. Input also takes `std` and strings such as `"1ms"`.
    #[serde(alias = "std", deserialize_with = "units::de_duration")]
    #[schemars(with = "u64")]
    pub std_ns: u64,
    /// Distribution (default normal).
    #[serde(default)]
    pub dist: JitterDistribution,
    /// Never deliver a packet before one that entered the link earlier.
    #[serde(default)]
    pub preserve_order: bool,
}

/// Random loss, decided when a packet arrives at the link.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LossParams {
    /// Each packet lost independently.
    Bernoulli {
        /// Loss probability (0..=1).
        #[schemars(range(min = 0.0, max = 1.0))]
        p: f64,
    },
    /// A two-state Markov chain evaluated per packet.
    GilbertElliott {
        /// P(good -> bad) per packet.
        #[schemars(range(min = 0.0, max = 1.0))]
        p: f64,
        /// P(bad -> good) per packet.
        #[schemars(range(min = 0.0, max = 1.0))]
        r: f64,
        /// Loss probability in the good state (default 0).
        #[serde(default)]
        #[schemars(range(min = 0.0, max = 1.0))]
        loss_good: f64,
        /// Loss probability in the bad state (default 1).
        #[serde(default = "certain")]
        #[schemars(range(min = 0.0, max = 1.0))]
        loss_bad: f64,
    },
}

fn certain() -> f64 {
    1.0
}

/// A `set_link` change (docs/control.md): each field absent keeps the current value, `null`
/// removes it (back to the ideal link's: unlimited, no trace, the default queue, no delay, no
/// jitter, no loss, not WiFi), a value replaces it. The transmitter is one of a rate, a trace
/// and WiFi: setting one drops the others the patch does not name. Takes the same input forms as
/// [`LinkParams`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkPatch {
    /// New rate, bit/s (`null` or `"unlimited"`: unlimited).
    #[serde(default, alias = "rate", deserialize_with = "present_rate", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<u64>", range(min = 1))]
    pub rate_bps: Option<Option<u64>>,
    /// New trace file.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub trace: Option<Option<String>>,
    /// New start of the trace's replay, ns into the trace (`null`: its beginning). A patch that
    /// sets a trace without naming this starts the trace at its beginning.
    #[serde(default, alias = "trace_start", deserialize_with = "present_duration", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<u64>")]
    pub trace_start_ns: Option<Option<u64>>,
    /// New queue.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<QueueParams>")]
    pub queue: Option<Option<QueueParams>>,
    /// New propagation delay, ns.
    #[serde(default, alias = "delay", deserialize_with = "present_duration", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<u64>")]
    pub delay_ns: Option<Option<u64>>,
    /// New delay variation.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<JitterParams>")]
    pub jitter: Option<Option<JitterParams>>,
    /// New loss model.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<LossParams>")]
    pub loss: Option<Option<LossParams>>,
    /// New WiFi parameters (`null`: not WiFi).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<WifiParams>")]
    pub wifi: Option<Option<WifiParams>>,
}

/// A field that is present: `null` is `Some(None)` (remove), a value `Some(Some(v))` (set).
/// serde only calls it for present fields; absent ones take the default `None` (keep).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

fn present_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<u64>>, D::Error> {
    units::de_rate_limit(d).map(Some)
}

fn present_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<u64>>, D::Error> {
    units::de_duration_opt(d).map(Some)
}

impl LinkParams {
    /// These parameters with `patch` applied (see [`LinkPatch`]). Nothing is checked here: the
    /// emulator checks the result before it applies any of it.
    pub fn patched(&self, patch: &LinkPatch) -> LinkParams {
        let mut next = self.clone();
        if let Some(rate) = patch.rate_bps {
            next.rate_bps = rate;
            if rate.is_some() && patch.trace.is_none() {
                next.trace = None;
            }
            if rate.is_some() && patch.wifi.is_none() {
                next.wifi = None;
            }
        }
        if let Some(trace) = &patch.trace {
            next.trace.clone_from(trace);
            if trace.is_some() && patch.rate_bps.is_none() {
                next.rate_bps = None;
            }
            if trace.is_some() && patch.wifi.is_none() {
                next.wifi = None;
            }
            next.trace_start_ns = 0;
        }
        if let Some(wifi) = patch.wifi {
            next.wifi = wifi;
            if wifi.is_some() && patch.rate_bps.is_none() {
                next.rate_bps = None;
            }
            if wifi.is_some() && patch.trace.is_none() {
                next.trace = None;
            }
        }
        if let Some(start) = patch.trace_start_ns {
            next.trace_start_ns = start.unwrap_or(0);
        }
        if let Some(queue) = patch.queue {
            next.queue = queue.unwrap_or_default();
        }
        if let Some(delay) = patch.delay_ns {
            next.delay_ns = delay.unwrap_or(0);
        }
        if let Some(jitter) = patch.jitter {
            next.jitter = jitter;
        }
        if let Some(loss) = patch.loss {
            next.loss = loss;
        }
        next
    }
}

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    vec![crate::document::<LinkParams>("link-params"), crate::document::<LinkPatch>("link-patch")]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wifi_takes_defaults_units_and_names_its_fields() {
        let wifi = parse(json!({"wifi": {}})).unwrap().wifi;
        assert_eq!(wifi, Some(WifiParams::default()));
        let written = parse(json!({"wifi": {"phy_rate": "65mbit", "max_ampdu_frames": 1, "slot": "20us",
                                            "max_ampdu_duration": "2ms", "frame_error_rate": 0.1}}))
        .unwrap()
        .wifi
        .unwrap();
        assert_eq!((written.phy_rate_bps, written.max_ampdu_frames, written.slot_ns), (65_000_000, 1, 20_000));
        assert_eq!((written.max_ampdu_duration_ns, written.frame_error_rate, written.cw_min), (2_000_000, 0.1, 15));
        let out = serde_json::to_value(parse(json!({"wifi": {"sifs": "10us"}})).unwrap()).unwrap();
        assert_eq!(out["wifi"]["sifs_ns"], 10_000);
        assert_eq!(out["wifi"]["difs_ns"], 34_000, "the output is complete");
        let field = |v: serde_json::Value| parse(v).unwrap_err();
        assert!(field(json!({"wifi": {"phy_rate": "unlimited"}})).starts_with("wifi.phy_rate: a WiFi PHY rate"));
        assert!(field(json!({"wifi": {"difs": 5.5}})).starts_with("wifi.difs: invalid duration"));
        assert!(field(json!({"wifi": {"ampdu": 3}})).contains("unknown field `ampdu`"));
    }

    #[test]
    fn a_patch_switches_between_rate_trace_and_wifi() {
        let patch = |v: serde_json::Value| serde_json::from_value::<LinkPatch>(v).unwrap();
        let wired = parse(json!({"rate": "10mbit", "delay": "5ms"})).unwrap();
        let wifi = wired.patched(&patch(json!({"wifi": {"frame_error_rate": 0.2}})));
        assert_eq!((wifi.rate_bps, wifi.delay_ns), (None, 5_000_000), "wifi drops the rate");
        assert_eq!(wifi.wifi.map(|w| w.frame_error_rate), Some(0.2));
        let back = wifi.patched(&patch(json!({"rate": "20mbit"})));
        assert_eq!((back.rate_bps, back.wifi), (Some(20_000_000), None), "a rate drops wifi");
        let traced = wifi.patched(&patch(json!({"trace": "cell.trace"})));
        assert_eq!((traced.trace.as_deref(), traced.wifi), (Some("cell.trace"), None), "a trace drops wifi");
        assert_eq!(wifi.patched(&patch(json!({"wifi": null}))).wifi, None);
        let both = wired.patched(&patch(json!({"rate_bps": 5, "wifi": {}})));
        assert!(both.rate_bps.is_some() && both.wifi.is_some(), "both named: both kept, for the emulator to refuse");
    }

    fn parse(value: serde_json::Value) -> Result<LinkParams, String> {
        serde_path_to_error::deserialize(value).map_err(|e| format!("{}: {}", e.path(), e.inner()))
    }

    #[test]
    fn the_written_forms_of_topology_files_still_load() {
        let written = parse(json!({
            "rate": "7mbit", "delay": "25ms",
            "queue": {"kind": "codel", "target": "2ms", "bytes": 45000},
            "jitter": {"std": "1ms", "dist": "pareto"},
            "loss": {"kind": "gilbert-elliott", "p": 0.01, "r": 0.3}
        }))
        .unwrap();
        let numeric = parse(json!({
            "rate_bps": 7_000_000, "delay_ns": 25_000_000,
            "queue": {"kind": "codel", "target_ns": 2_000_000, "interval_ns": 100_000_000, "bytes": 45000},
            "jitter": {"std_ns": 1_000_000, "dist": "pareto", "preserve_order": false},
            "loss": {"kind": "gilbert-elliott", "p": 0.01, "r": 0.3, "loss_good": 0.0, "loss_bad": 1.0}
        }))
        .unwrap();
        assert_eq!(written, numeric);
        assert_eq!(written.queue.kind, QueueKind::Codel { target_ns: 2_000_000, interval_ns: DEFAULT_CODEL_INTERVAL_NS });
        assert_eq!(parse(json!({"rate": "unlimited"})).unwrap(), LinkParams::default());
        assert_eq!(parse(json!({"rate_bps": null, "delay": "0"})).unwrap(), LinkParams::default());
    }

    #[test]
    fn output_is_the_complete_numeric_form() {
        let ideal = serde_json::to_value(LinkParams::default()).unwrap();
        assert_eq!(
            ideal,
            json!({"rate_bps": null, "trace": null, "trace_start_ns": 0, "queue": {"kind": "droptail", "packets": 1000},
                   "delay_ns": 0, "jitter": null, "loss": null, "wifi": null})
        );
        let params = parse(json!({"rate": "1.5mbit", "queue": {"kind": "drophead", "bytes": 3000},
                                  "jitter": {"std": "500us"}, "loss": {"kind": "bernoulli", "p": 0.02}}))
        .unwrap();
        let out = serde_json::to_value(&params).unwrap();
        assert_eq!(out["rate_bps"], 1_500_000);
        assert_eq!(out["queue"], json!({"kind": "drophead", "bytes": 3000}));
        assert_eq!(out["jitter"], json!({"std_ns": 500_000, "dist": "normal", "preserve_order": false}));
        assert_eq!(parse(out).unwrap(), params, "the output reads back as the same parameters");
    }

    #[test]
    fn refusals_name_the_field() {
        let field = |v: serde_json::Value| parse(v).unwrap_err();
        assert!(field(json!({"rate": "-5mbit"})).starts_with("rate: invalid rate"));
        assert!(field(json!({"rate_bps": 0})).starts_with("rate_bps: invalid rate 0"));
        assert_eq!(parse(json!({"delay": 5})).unwrap().delay_ns, 5, "a bare number is ns");
        assert!(field(json!({"delay": 5.5})).starts_with("delay: invalid duration 5.5"));
        assert!(field(json!({"delay": "5"})).starts_with("delay: invalid duration"));
        assert!(field(json!({"rat": "1mbit"})).contains("unknown field `rat`"));
        assert!(field(json!({"queue": {"kind": "red"}})).starts_with("queue"));
        assert!(field(json!({"queue": {"kind": "droptail", "bytes": 3000, "packets": 3}}))
            .contains("queue: give either packets or bytes, not both"));
        assert!(field(json!({"jitter": {"std": "1ms", "dist": "cauchy"}})).starts_with("jitter"));
        assert!(field(json!({"loss": {"kind": "bernoulli"}})).contains("missing field `p`"));
    }

    #[test]
    fn a_patch_keeps_removes_and_replaces() {
        let patch = |v: serde_json::Value| serde_json::from_value::<LinkPatch>(v).unwrap();
        let base = parse(json!({"rate": "10mbit", "delay": "5ms", "loss": {"kind": "bernoulli", "p": 0.1}})).unwrap();
        assert_eq!(base.patched(&LinkPatch::default()), base, "an empty patch changes nothing");
        let next = base.patched(&patch(json!({"delay_ns": 7_000_000, "loss": null})));
        assert_eq!((next.rate_bps, next.delay_ns, next.loss), (Some(10_000_000), 7_000_000, None));
        let unlimited = base.patched(&patch(json!({"rate": "unlimited", "delay": null})));
        assert_eq!((unlimited.rate_bps, unlimited.delay_ns), (None, 0));
        let traced = base.patched(&patch(json!({"trace": "cell.trace"})));
        assert_eq!((traced.rate_bps, traced.trace.as_deref()), (None, Some("cell.trace")), "a trace drops the rate");
        let rated = traced.patched(&patch(json!({"rate_bps": 5_000_000})));
        assert_eq!((rated.rate_bps, rated.trace), (Some(5_000_000), None), "a rate drops the trace");
        let both = base.patched(&patch(json!({"rate_bps": 5_000_000, "trace": "t"})));
        assert_eq!((both.rate_bps, both.trace.as_deref()), (Some(5_000_000), Some("t")), "both named: both kept, for the emulator to refuse");
        let started = traced.patched(&patch(json!({"trace_start": "37s"})));
        assert_eq!((started.trace.as_deref(), started.trace_start_ns), (Some("cell.trace"), 37_000_000_000));
        let retraced = started.patched(&patch(json!({"trace": "other.trace"})));
        assert_eq!(retraced.trace_start_ns, 0, "a new trace starts at its beginning unless the patch says where");
        let both_named = started.patched(&patch(json!({"trace": "other.trace", "trace_start_ns": 5})));
        assert_eq!(both_named.trace_start_ns, 5);
        assert_eq!(started.patched(&patch(json!({"trace_start_ns": null}))).trace_start_ns, 0);
        let queue = base.patched(&patch(json!({"queue": {"kind": "droptail", "bytes": 45000}})));
        assert_eq!(queue.queue.limit, QueueLimit::Bytes(45000));
        assert_eq!(queue.patched(&patch(json!({"queue": null}))).queue, QueueParams::default());
        assert!(serde_json::from_value::<LinkPatch>(json!({"dealy": "5ms"})).is_err());
        let written = serde_json::to_value(patch(json!({"rate": "7mbit", "loss": null}))).unwrap();
        assert_eq!(written, json!({"rate_bps": 7_000_000, "loss": null}), "absent stays absent, null stays null");
    }
}
