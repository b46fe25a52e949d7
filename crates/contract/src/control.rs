//! The emulator's control requests (one tagged enum) and their typed replies (docs/control.md).
//!
//! A client writes one [`Request`] per line on the control socket (`{"cmd": "set_link", ...}`)
//! and reads one [`Reply`] per line: `{"ok": true, ...the command's fields}` or
//! `{"ok": false, "error": "..."}`. Errors of a refused request name the field
//! (`params.rate: invalid rate "-5mbit": ...`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::de::{self, DeserializeOwned, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::link::{LinkParams, LinkPatch};

/// The largest delay compensation a lab may ask for, ns: a path latency above 10 ms is not the
/// emulator's own.
pub const MAX_DELAY_COMPENSATION_NS: u64 = 10_000_000;

/// One control request. The wire form is flat: `{"cmd": "<name>", ...the command's fields}`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// The lab, its process, its clock and its normalized topology ([`Info`]).
    Info,
    /// Counters of every link direction, path and of the emulator ([`Counters`]).
    Counters,
    /// Zero every counter.
    ResetCounters,
    /// Change link directions live ([`LinksSet`]).
    SetLink(SetLink),
    /// Change path selection.
    SetRouting(SetRouting),
    /// Start capturing a host's interface ([`Started`]).
    PcapStart(PcapStart),
    /// Close a host's capture ([`CaptureStopped`]).
    PcapStop(PcapStop),
    /// Start the ground-truth event log ([`Started`]).
    EventsStart(EventsStart),
    /// Close the event log ([`LogStopped`]).
    EventsStop,
    /// Deduct the lab's own path latency ([`DelayCompensation`]).
    SetDelayCompensation(SetDelayCompensation),
    /// Reply, then clean up and exit.
    Shutdown,
}

/// The command names, as written in `cmd`.
pub const COMMANDS: [&str; 11] = [
    "info",
    "counters",
    "reset_counters",
    "set_link",
    "set_routing",
    "pcap_start",
    "pcap_stop",
    "events_start",
    "events_stop",
    "set_delay_compensation",
    "shutdown",
];

/// `set_link`: apply `params` to every link direction in `link` (all checked before any changes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetLink {
    /// Link direction names (`client.up`, `p0.forward`): one name or a list.
    #[serde(deserialize_with = "one_or_many")]
    #[schemars(with = "OneOrMany")]
    pub link: Vec<String>,
    /// The change.
    #[serde(default)]
    pub params: LinkPatch,
    /// Restart the links' random streams from this seed (reproducible loss and jitter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// `set_routing`: an omitted field keeps the current value; `"pins": []` clears the pins.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRouting {
    /// Path selection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<RoutingMode>,
    /// Host pairs pinned to a path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins: Option<Vec<Pin>>,
}

/// `pcap_start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PcapStart {
    /// Host whose interface is captured.
    pub host: String,
    /// The capture file to create.
    pub path: PathBuf,
}

/// `pcap_stop`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PcapStop {
    /// Host whose capture is closed.
    pub host: String,
}

/// `events_start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsStart {
    /// The event log file to create.
    pub path: PathBuf,
}

/// `set_delay_compensation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetDelayCompensation {
    /// Packets sent from now on cross the network this many ns faster than configured.
    #[schemars(range(max = MAX_DELAY_COMPENSATION_NS))]
    pub ns: u64,
}

/// Path selection between the sides (docs/topology.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RoutingMode {
    /// Per flow: `(SA ^ DA ^ SP ^ DP ^ PT) mod N`, the hash of 001 §IV-C1.
    #[default]
    EcmpXor,
    /// Per flow: a keyed SipHash of the direction-independent 5-tuple.
    EcmpHash,
    /// Per packet.
    RoundRobin,
}

/// A left host and a right host whose packets (both directions) take one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    /// Left host.
    pub left: String,
    /// Right host.
    pub right: String,
    /// Path.
    pub path: String,
}

/// The schema of `set_link`'s `link`: a name or a list of names.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only its schema is used
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a link name or a list of link names")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut names = Vec::new();
            while let Some(name) = seq.next_element::<String>()? {
                names.push(name);
            }
            Ok(names)
        }
    }
    d.deserialize_any(V)
}

impl Request {
    /// Reads a request from its JSON value. Errors name the field (`params.rate: ...`,
    /// `cmd: unknown command "x"`); a request is refused whole, never half read.
    pub fn from_value(value: Value) -> Result<Request, String> {
        let Value::Object(mut fields) = value else {
            return Err("a request must be a JSON object".into());
        };
        let cmd = match fields.remove("cmd") {
            Some(Value::String(cmd)) => cmd,
            Some(other) => return Err(format!("cmd: expected a command name, got {other}")),
            None => return Err(format!("cmd: missing; one of {}", COMMANDS.join(", "))),
        };
        let rest = Value::Object(fields);
        Ok(match cmd.as_str() {
            "info" => no_fields(rest, Request::Info)?,
            "counters" => no_fields(rest, Request::Counters)?,
            "reset_counters" => no_fields(rest, Request::ResetCounters)?,
            "set_link" => Request::SetLink(fields_of(rest)?),
            "set_routing" => Request::SetRouting(fields_of(rest)?),
            "pcap_start" => Request::PcapStart(fields_of(rest)?),
            "pcap_stop" => Request::PcapStop(fields_of(rest)?),
            "events_start" => Request::EventsStart(fields_of(rest)?),
            "events_stop" => no_fields(rest, Request::EventsStop)?,
            "set_delay_compensation" => Request::SetDelayCompensation(fields_of(rest)?),
            "shutdown" => no_fields(rest, Request::Shutdown)?,
            other => return Err(format!("cmd: unknown command {other:?}; one of {}", COMMANDS.join(", "))),
        })
    }

    /// The command's name as written in `cmd`.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Info => "info",
            Request::Counters => "counters",
            Request::ResetCounters => "reset_counters",
            Request::SetLink(_) => "set_link",
            Request::SetRouting(_) => "set_routing",
            Request::PcapStart(_) => "pcap_start",
            Request::PcapStop(_) => "pcap_stop",
            Request::EventsStart(_) => "events_start",
            Request::EventsStop => "events_stop",
            Request::SetDelayCompensation(_) => "set_delay_compensation",
            Request::Shutdown => "shutdown",
        }
    }
}

fn fields_of<T: DeserializeOwned>(rest: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(rest).map_err(|e| match e.path().to_string().as_str() {
        "." => e.inner().to_string(),
        path => format!("{path}: {}", e.inner()),
    })
}

fn no_fields(rest: Value, request: Request) -> Result<Request, String> {
    match rest.as_object().and_then(|fields| fields.keys().next()) {
        Some(field) => Err(format!("{field}: {} takes no fields", request.name())),
        None => Ok(request),
    }
}

impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Request::from_value(Value::deserialize(d)?).map_err(de::Error::custom)
    }
}

/// Every reply: `ok`, the reason when refused, the command's fields when done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Reply {
    /// Whether the request was carried out.
    pub ok: bool,
    /// Why it was refused (only when `ok` is false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The command's fields (none when refused).
    #[serde(flatten)]
    pub done: Done,
}

impl Reply {
    /// A request carried out.
    pub fn done(done: Done) -> Reply {
        Reply { ok: true, error: None, done }
    }

    /// A request refused; nothing was changed.
    pub fn refused(error: impl Into<String>) -> Reply {
        Reply { ok: false, error: Some(error.into()), done: Done::Nothing(Nothing {}) }
    }
}

/// The fields of a reply, by command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Done {
    /// `info`.
    Info(Info),
    /// `counters`.
    Counters(Counters),
    /// `set_link`.
    LinksSet(LinksSet),
    /// `pcap_stop`.
    CaptureStopped(CaptureStopped),
    /// `events_stop`.
    LogStopped(LogStopped),
    /// `set_delay_compensation`.
    DelayCompensation(DelayCompensation),
    /// `pcap_start`, `events_start`.
    Started(Started),
    /// `reset_counters`, `set_routing`, `shutdown`, and refusals.
    Nothing(Nothing),
}

/// No fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Nothing {}

/// The reply to `info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Info {
    /// Lab name.
    pub lab: String,
    /// The emulator's process id.
    pub pid: u32,
    /// How long the packet loop busy-polls before a due packet, ns.
    pub spin_ns: u64,
    /// The loop's SCHED_FIFO priority in force (0: normal scheduling).
    pub rt_priority: i32,
    /// The CPU wake-up latency bound the emulator holds while it runs (PM QoS,
    /// `/dev/cpu_dma_latency`), µs; null: none held (`--cpu-latency-us off`, or refused).
    #[serde(default)]
    pub cpu_latency_us: Option<u32>,
    /// The delay compensation in force, ns.
    pub delay_compensation_ns: u64,
    /// How far apart the wire segments of a GSO super-packet may leave a rated link that carries
    /// it whole, ns (`emu run --whole-spread-us`; 0: rated links split every super-packet).
    #[serde(default)]
    pub whole_spread_ns: u64,
    /// Unix ns at the emulator's time zero.
    pub start_unix_ns: u64,
    /// Unix ns now.
    pub now_ns: u64,
    /// The normalized topology (docs/topology.md), link parameters as now in force.
    pub topology: Value,
}

/// The reply to `counters`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Counters {
    /// Unix ns when they were read.
    pub now_ns: u64,
    /// Every link direction (access and path) by name.
    pub links: BTreeMap<String, LinkCounters>,
    /// The same counters again, grouped by path.
    pub paths: BTreeMap<String, PathCounters>,
    /// The emulator's own counters.
    pub emulator: EmulatorCounters,
}

/// Counters of one link direction (docs/control.md): `arrived = enqueued + dropped.random_loss
/// + dropped.queue_full(at arrival)`; bytes are IP bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LinkCounters {
    /// Packets that entered the queue.
    pub enqueued_packets: u64,
    /// Bytes that entered the queue.
    pub enqueued_bytes: u64,
    /// Packets that left the link.
    pub delivered_packets: u64,
    /// Bytes that left the link.
    pub delivered_bytes: u64,
    /// Dropped packets per cause.
    pub dropped_packets: DropCounts,
    /// Dropped bytes per cause.
    pub dropped_bytes: DropCounts,
    /// Packets waiting now.
    pub queue_packets: u64,
    /// Bytes waiting now.
    pub queue_bytes: u64,
    /// Packets that left the queue and are still propagating now (with `queue_packets`: every
    /// packet inside the link). Absent in the replies of emulators before it was added.
    #[serde(default)]
    pub in_flight_packets: u64,
    /// Most packets waiting since the last reset.
    pub max_queue_packets: u64,
    /// Most bytes waiting since the last reset.
    pub max_queue_bytes: u64,
}

/// Drops per cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DropCounts {
    /// The queue was full (at arrival, or drop-head making room).
    pub queue_full: u64,
    /// Random loss at arrival.
    pub random_loss: u64,
    /// The AQM (CoDel) dropped at dequeue.
    pub aqm: u64,
}

impl DropCounts {
    /// Sum over causes.
    pub fn total(&self) -> u64 {
        self.queue_full + self.random_loss + self.aqm
    }
}

/// Both directions of a path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PathCounters {
    /// Left to right.
    pub forward: LinkCounters,
    /// Right to left.
    pub reverse: LinkCounters,
}

/// The emulator's own counters (docs/control.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EmulatorCounters {
    /// Packets read from the hosts' TUN devices (wire segments: a GSO super-packet counts as
    /// the segments it is split into).
    pub rx_packets: u64,
    /// TUN reads that carried a GSO super-packet (offloads on; docs/emulator.md).
    #[serde(default)]
    pub rx_super_packets: u64,
    /// Of those, the super-packets that crossed the model whole, not split into wire segments
    /// at the read (their route took them whole; docs/emulator.md).
    #[serde(default)]
    pub rx_whole_super_packets: u64,
    /// The pieces the other super-packets were cut into at the read where their route carried
    /// only that many of their segments whole (a rate's spread, a queue's room; docs/emulator.md,
    /// "Rated links"); a piece of one segment counts too.
    #[serde(default)]
    pub rx_super_packet_pieces: u64,
    /// TUN reads that could not be split into wire segments (a malformed virtio-net header or
    /// super-packet), dropped.
    #[serde(default)]
    pub rx_malformed: u64,
    /// Packets written to them.
    pub tx_packets: u64,
    /// Packets to an address no host has.
    pub unroutable: u64,
    /// IPv6 and other packets, dropped.
    pub non_ipv4: u64,
    /// Packets whose TUN write failed (with offloads: every segment of a failed super-packet write).
    pub tx_errors: u64,
    /// Latest the loop woke after a packet was due, ns.
    pub timer_late_ns_max: u64,
    /// Mean of how late the loop woke after a packet was due, ns.
    pub timer_late_ns_mean: u64,
    /// Capture records dropped because a writer was behind.
    pub pcap_dropped: u64,
    /// Event-log records dropped because the writer was behind.
    pub events_dropped: u64,
    /// Changes between real-time and normal scheduling of the loop.
    pub rt_switches: u64,
    /// How late packets left the emulator compared with the model's delivery time.
    pub delivery_late: DeliveryLateness,
    /// The loop's passes that delivered a packet more than 1 ms late, the first
    /// [`LATE_PASSES_KEPT`] since the counters were reset (the validation matches them with the
    /// host's stalls: docs/validation.md).
    #[serde(default)]
    pub late_passes: Vec<LatePass>,
    /// The delay compensation in force, ns.
    pub delay_compensation_ns: u64,
}

/// Late passes the emulator keeps between counter resets.
pub const LATE_PASSES_KEPT: usize = 64;
/// How late a pass must deliver to be kept as a late pass, ns.
pub const LATE_PASS_NS: u64 = 1_000_000;

/// A pass of the emulator's loop that delivered packets more than [`LATE_PASS_NS`] late.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LatePass {
    /// When the loop delivered them, Unix time, ns.
    pub at_unix_ns: u64,
    /// How late the latest of them was, ns.
    pub late_ns: u64,
    /// The wire segments it delivered more than [`LATE_PASS_NS`] late (0 from emulators
    /// before this field).
    #[serde(default)]
    pub packets: u64,
    /// The CPU the loop ran on.
    pub cpu: Option<u32>,
}

/// How late delivered packets left the emulator: a 1-2-5 histogram from 1 µs to 100 ms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeliveryLateness {
    /// Packets counted.
    pub packets: u64,
    /// Mean lateness, ns.
    pub mean_ns: u64,
    /// Largest lateness, ns.
    pub max_ns: u64,
    /// Upper edge of the bucket holding the 99th percentile, ns (null: no packets).
    pub p99_ns_at_most: Option<u64>,
    /// Upper edge of the bucket holding the 99.9th percentile, ns (null: no packets).
    pub p999_ns_at_most: Option<u64>,
    /// `[upper edge ns (null: above the last edge), packets]` of every non-empty bucket.
    pub buckets: Vec<(Option<u64>, u64)>,
}

/// The reply to `set_link`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LinksSet {
    /// The link directions changed.
    pub link: Vec<String>,
    /// Each one's parameters now in force (complete numeric form).
    pub params: BTreeMap<String, LinkParams>,
}

/// What a capture or event-log writer did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WriterSummary {
    /// Records written.
    pub written: u64,
    /// Records dropped because the writer was behind.
    pub dropped: u64,
    /// A write error that ended the writer early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The reply to `pcap_stop` (sent once every queued packet is written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CaptureStopped {
    /// The capture writer's summary.
    pub capture: WriterSummary,
}

/// The reply to `events_stop` (sent once every queued event is written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogStopped {
    /// The event writer's summary.
    pub log: WriterSummary,
}

/// The reply to `set_delay_compensation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DelayCompensation {
    /// The compensation now in force, ns.
    pub delay_compensation_ns: u64,
}

/// The reply to `pcap_start` and `events_start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Started {
    /// The file being written.
    pub path: PathBuf,
}

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    vec![crate::document::<Request>("control-request"), crate::document::<Reply>("control-reply")]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> Result<Request, String> {
        Request::from_value(value)
    }

    #[test]
    fn the_wire_forms_of_docs_control_md_parse() {
        assert_eq!(parse(json!({"cmd": "info"})).unwrap(), Request::Info);
        let set = parse(json!({"cmd": "set_link", "link": "p0.forward", "params": {"rate": "7mbit", "loss": null}, "seed": 7}))
            .unwrap();
        let Request::SetLink(set) = set else { panic!("{set:?}") };
        assert_eq!(set.link, ["p0.forward"]);
        assert_eq!((set.params.rate_bps, set.params.loss, set.seed), (Some(Some(7_000_000)), Some(None), Some(7)));
        let Request::SetLink(many) = parse(json!({"cmd": "set_link", "link": ["a.up", "a.down"], "params": {}})).unwrap() else {
            panic!()
        };
        assert_eq!(many.link, ["a.up", "a.down"]);
        let routing = parse(json!({"cmd": "set_routing", "mode": "round-robin"})).unwrap();
        assert_eq!(routing, Request::SetRouting(SetRouting { mode: Some(RoutingMode::RoundRobin), pins: None }));
        let pcap = parse(json!({"cmd": "pcap_start", "host": "client", "path": "/tmp/c.pcap"})).unwrap();
        assert_eq!(pcap, Request::PcapStart(PcapStart { host: "client".into(), path: "/tmp/c.pcap".into() }));
        assert_eq!(
            parse(json!({"cmd": "set_delay_compensation", "ns": 90000})).unwrap(),
            Request::SetDelayCompensation(SetDelayCompensation { ns: 90_000 })
        );
    }

    #[test]
    fn every_request_writes_and_reads_back() {
        let all = [
            Request::Info,
            Request::Counters,
            Request::ResetCounters,
            Request::SetLink(SetLink { link: vec!["c.up".into()], params: LinkPatch::default(), seed: Some(3) }),
            Request::SetRouting(SetRouting::default()),
            Request::PcapStart(PcapStart { host: "c".into(), path: "/x".into() }),
            Request::PcapStop(PcapStop { host: "c".into() }),
            Request::EventsStart(EventsStart { path: "/e".into() }),
            Request::EventsStop,
            Request::SetDelayCompensation(SetDelayCompensation { ns: 5 }),
            Request::Shutdown,
        ];
        for (request, name) in all.iter().zip(COMMANDS) {
            let value = serde_json::to_value(request).unwrap();
            assert_eq!(value["cmd"], name);
            assert_eq!(request.name(), name);
            assert_eq!(&parse(value).unwrap(), request);
        }
    }

    #[test]
    fn refusals_name_the_field() {
        let error = |v: Value| parse(v).unwrap_err();
        assert_eq!(error(json!([1, 2])), "a request must be a JSON object");
        assert!(error(json!({})).starts_with("cmd: missing; one of info, counters"));
        assert!(error(json!({"cmd": 5})).starts_with("cmd: expected a command name"));
        assert!(error(json!({"cmd": "nosuch"})).starts_with("cmd: unknown command \"nosuch\""));
        assert_eq!(error(json!({"cmd": "info", "x": 1})), "x: info takes no fields");
        let e = error(json!({"cmd": "set_link", "link": 7, "params": {}}));
        assert!(e.starts_with("link: invalid type: integer `7`, expected a link name"), "{e}");
        let e = error(json!({"cmd": "set_link", "link": "p0.forward", "params": {"rate": -1}}));
        assert!(e.starts_with("params.rate: invalid rate -1"), "{e}");
        let e = error(json!({"cmd": "set_link", "link": "p0.forward", "params": {"queue": {"kind": "droptail", "packets": 1, "bytes": 2000}}}));
        assert!(e.starts_with("params.queue: give either packets or bytes"), "{e}");
        assert!(error(json!({"cmd": "set_link", "link": "x", "seed": "x"})).starts_with("seed: invalid type"));
        assert!(error(json!({"cmd": "set_link", "link": "x", "parms": {}})).contains("unknown field `parms`"));
        assert!(error(json!({"cmd": "pcap_start", "host": "client"})).contains("missing field `path`"));
        assert!(error(json!({"cmd": "set_routing", "mode": "ecmp"})).starts_with("mode: unknown variant `ecmp`"));
        assert!(error(json!({"cmd": "set_delay_compensation", "ns": -1})).starts_with("ns: invalid value"));
    }

    #[test]
    fn replies_are_flat_objects() {
        let refused = serde_json::to_value(Reply::refused("link: no link named \"x\"")).unwrap();
        assert_eq!(refused, json!({"ok": false, "error": "link: no link named \"x\""}));
        assert_eq!(serde_json::to_value(Reply::done(Done::Nothing(Nothing {}))).unwrap(), json!({"ok": true}));
        let stopped = Reply::done(Done::CaptureStopped(CaptureStopped { capture: WriterSummary { written: 3, dropped: 1, error: None } }));
        let value = serde_json::to_value(&stopped).unwrap();
        assert_eq!(value, json!({"ok": true, "capture": {"written": 3, "dropped": 1}}));
        assert_eq!(serde_json::from_value::<Reply>(value).unwrap(), stopped);
        let set = Reply::done(Done::LinksSet(LinksSet {
            link: vec!["c.up".into()],
            params: BTreeMap::from([("c.up".to_string(), LinkParams::default())]),
        }));
        let value = serde_json::to_value(&set).unwrap();
        assert_eq!(value["params"]["c.up"]["queue"], json!({"kind": "droptail", "packets": 1000}));
        assert_eq!(serde_json::from_value::<Reply>(value).unwrap(), set);
        let counters = Reply::done(Done::Counters(Counters {
            now_ns: 1,
            links: BTreeMap::from([("c.up".to_string(), LinkCounters::default())]),
            paths: BTreeMap::new(),
            emulator: EmulatorCounters::default(),
        }));
        let value = serde_json::to_value(&counters).unwrap();
        assert_eq!(value["links"]["c.up"]["dropped_packets"], json!({"queue_full": 0, "random_loss": 0, "aqm": 0}));
        assert_eq!(value["emulator"]["delivery_late"]["p99_ns_at_most"], Value::Null);
        assert_eq!(serde_json::from_value::<Reply>(value).unwrap(), counters);
    }
}
