//! Topology files (TOML or JSON): parsing, validation with field paths, conversion to the model.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use contract::control::{Pin, RoutingMode};
use contract::link::LinkParams;
use netmodel::{HostId, HostSpec, LinkConfig, PathId, PathSelection, PathSpec, Side, TopologySpec};
use serde::{Deserialize, Serialize};

use crate::params::link_config;

/// The topology format version this build reads.
pub const SCHEMA_VERSION: u32 = 1;

/// A refused topology: the file, the field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct TopologyError {
    /// The topology file (or `<request>` for control requests).
    pub file: String,
    /// Field path, e.g. `hosts[1].access.up.rate`.
    pub field: String,
    /// Why.
    pub message: String,
}

/// Left or right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SideName {
    /// Clients.
    Left,
    /// Servers.
    Right,
}

/// The model's path selection for a routing mode.
pub fn path_selection(mode: RoutingMode) -> PathSelection {
    match mode {
        RoutingMode::EcmpXor => PathSelection::EcmpXor,
        RoutingMode::EcmpHash => PathSelection::EcmpHash,
        RoutingMode::RoundRobin => PathSelection::RoundRobin,
    }
}

/// Both directions of a host's access link.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    /// Host towards the core.
    #[serde(default)]
    pub up: LinkParams,
    /// Core towards the host.
    #[serde(default)]
    pub down: LinkParams,
}

/// A sysctl value as written (string or number).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SysctlValue {
    /// Text.
    Text(String),
    /// Number.
    Number(i64),
}

impl std::fmt::Display for SysctlValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SysctlValue::Text(t) => f.write_str(t),
            SysctlValue::Number(n) => write!(f, "{n}"),
        }
    }
}

/// A host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Name (`[a-z0-9]{1,16}`).
    pub name: String,
    /// Side.
    pub side: SideName,
    /// IPv4 addresses; the first is the primary.
    pub addresses: Vec<Ipv4Addr>,
    /// TCP congestion control override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_congestion: Option<String>,
    /// Extra sysctls.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctls: BTreeMap<String, SysctlValue>,
    /// Segmentation offloads on this host's TUN device (docs/emulator.md, "Segmentation
    /// offloads"); absent: the lab's (`emu run --offload`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload: Option<bool>,
    /// Access link.
    #[serde(default)]
    pub access: Access,
}

impl Host {
    /// Whether this host's TUN device gets segmentation offloads: its own setting, else the lab's.
    pub fn offload_or(&self, lab_offload: bool) -> bool {
        self.offload.unwrap_or(lab_offload)
    }
}

/// A bottleneck path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathDef {
    /// Name.
    pub name: String,
    /// Left to right.
    #[serde(default)]
    pub forward: LinkParams,
    /// Right to left.
    #[serde(default)]
    pub reverse: LinkParams,
}

/// Path selection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Routing {
    /// Mode.
    #[serde(default)]
    pub mode: RoutingMode,
    /// Pins.
    #[serde(default)]
    pub pins: Vec<Pin>,
}

fn default_schema() -> u32 {
    SCHEMA_VERSION
}
fn default_seed() -> u64 {
    1
}
fn default_cc() -> String {
    "cubic".into()
}

/// A whole topology file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Format version.
    #[serde(default = "default_schema")]
    pub schema_version: u32,
    /// Lab name (`[a-z0-9]{1,10}`).
    pub lab: String,
    /// Seed.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Default TCP congestion control of every host.
    #[serde(default = "default_cc")]
    pub tcp_congestion: String,
    /// Hosts.
    pub hosts: Vec<Host>,
    /// Paths.
    #[serde(default)]
    pub paths: Vec<PathDef>,
    /// Path selection.
    #[serde(default)]
    pub routing: Routing,
    /// Directory relative trace paths are resolved against (not part of the file).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

fn valid_name(name: &str, max: usize) -> bool {
    !name.is_empty() && name.len() <= max && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Congestion controls this kernel offers (empty if unknown).
pub fn available_congestion_controls() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

impl Topology {
    /// Reads and validates a topology file.
    pub fn load(path: &Path) -> Result<Topology, TopologyError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| TopologyError { file: file.clone(), field: "(file)".into(), message: format!("cannot read: {e}") })?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&text, &file, &base_dir)
    }

    /// Parses and validates topology text; JSON if it starts with `{`, TOML otherwise.
    pub fn parse(text: &str, file: &str, base_dir: &Path) -> Result<Topology, TopologyError> {
        let err = |field: String, message: String| TopologyError { file: file.to_string(), field, message };
        let mut topology: Topology = if text.trim_start().starts_with('{') {
            let de = &mut serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize(de).map_err(|e| {
                let inner = e.inner().to_string();
                err(e.path().to_string(), inner)
            })?
        } else {
            let de = toml::Deserializer::parse(text).map_err(|e| err("(syntax)".into(), e.message().to_string()))?;
            serde_path_to_error::deserialize(de).map_err(|e| {
                let inner = e.inner().message().to_string();
                err(e.path().to_string(), inner)
            })?
        };
        topology.base_dir = base_dir.to_path_buf();
        topology.validate().map_err(|(field, message)| err(field, message))?;
        Ok(topology)
    }

    /// Checks everything the model does not: names, addresses, sides, pins, sysctls.
    fn validate(&self) -> Result<(), (String, String)> {
        if self.schema_version != SCHEMA_VERSION {
            return Err(("schema_version".into(), format!("version {} is not supported (this build reads {SCHEMA_VERSION})", self.schema_version)));
        }
        if !valid_name(&self.lab, 10) {
            return Err(("lab".into(), format!("{:?} must be 1-10 characters of a-z and 0-9", self.lab)));
        }
        let available = available_congestion_controls();
        let check_cc = |field: String, cc: &str| {
            if !available.is_empty() && !available.iter().any(|a| a == cc) {
                Err((field, format!("congestion control {cc:?} is not available (this kernel has: {})", available.join(", "))))
            } else {
                Ok(())
            }
        };
        check_cc("tcp_congestion".into(), &self.tcp_congestion)?;
        if self.hosts.is_empty() {
            return Err(("hosts".into(), "a topology needs at least one host".into()));
        }
        let mut names = HashSet::new();
        let mut addresses = HashMap::new();
        for (i, h) in self.hosts.iter().enumerate() {
            let at = |f: &str| format!("hosts[{i}].{f}");
            if !valid_name(&h.name, 16) {
                return Err((at("name"), format!("{:?} must be 1-16 characters of a-z and 0-9", h.name)));
            }
            if !names.insert(h.name.as_str()) {
                return Err((at("name"), format!("host {:?} is defined twice", h.name)));
            }
            if h.addresses.is_empty() {
                return Err((at("addresses"), "a host needs at least one address".into()));
            }
            for (j, a) in h.addresses.iter().enumerate() {
                if a.is_unspecified() || a.is_loopback() || a.is_multicast() || a.is_broadcast() {
                    return Err((format!("hosts[{i}].addresses[{j}]"), format!("{a} cannot be a host address")));
                }
                if let Some(other) = addresses.insert(*a, h.name.clone()) {
                    return Err((format!("hosts[{i}].addresses[{j}]"), format!("address {a} is already used by host {other:?}")));
                }
            }
            if let Some(cc) = &h.tcp_congestion {
                check_cc(at("tcp_congestion"), cc)?;
            }
            for (key, value) in &h.sysctls {
                let ok_key = !key.is_empty()
                    && !key.contains("..")
                    && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
                if !ok_key {
                    return Err((format!("hosts[{i}].sysctls.{key}"), "not a sysctl name".into()));
                }
                if value.to_string().contains('\n') {
                    return Err((format!("hosts[{i}].sysctls.{key}"), "a value cannot contain a newline".into()));
                }
            }
            for (dir, params) in [("up", &h.access.up), ("down", &h.access.down)] {
                link_config(params, &self.base_dir).map_err(|(f, m)| (format!("hosts[{i}].access.{dir}.{f}"), m))?;
            }
        }
        let mut path_names = HashSet::new();
        for (i, p) in self.paths.iter().enumerate() {
            if !valid_name(&p.name, 16) {
                return Err((format!("paths[{i}].name"), format!("{:?} must be 1-16 characters of a-z and 0-9", p.name)));
            }
            if names.contains(p.name.as_str()) || !path_names.insert(p.name.as_str()) {
                return Err((format!("paths[{i}].name"), format!("name {:?} is already used", p.name)));
            }
            for (dir, params) in [("forward", &p.forward), ("reverse", &p.reverse)] {
                link_config(params, &self.base_dir).map_err(|(f, m)| (format!("paths[{i}].{dir}.{f}"), m))?;
            }
        }
        let both_sides = [SideName::Left, SideName::Right].iter().all(|s| self.hosts.iter().any(|h| h.side == *s));
        if both_sides && self.paths.is_empty() {
            return Err(("paths".into(), "hosts on both sides need at least one path between them".into()));
        }
        self.pins()?;
        Ok(())
    }

    fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    /// Pins as model ids; errors name the pin.
    pub fn pins(&self) -> Result<Vec<(HostId, HostId, PathId)>, (String, String)> {
        pins_for(self, &self.routing.pins)
    }

    /// The model topology.
    pub fn to_spec(&self) -> Result<TopologySpec, (String, String)> {
        let convert = |field: String, p: &LinkParams| -> Result<LinkConfig, (String, String)> {
            link_config(p, &self.base_dir).map_err(|(f, m)| (format!("{field}.{f}"), m))
        };
        let mut hosts = Vec::new();
        for (i, h) in self.hosts.iter().enumerate() {
            hosts.push(HostSpec {
                name: h.name.clone(),
                side: if h.side == SideName::Left { Side::Left } else { Side::Right },
                addresses: h.addresses.clone(),
                up: convert(format!("hosts[{i}].access.up"), &h.access.up)?,
                down: convert(format!("hosts[{i}].access.down"), &h.access.down)?,
            });
        }
        let mut paths = Vec::new();
        for (i, p) in self.paths.iter().enumerate() {
            paths.push(PathSpec {
                name: p.name.clone(),
                forward: convert(format!("paths[{i}].forward"), &p.forward)?,
                reverse: convert(format!("paths[{i}].reverse"), &p.reverse)?,
            });
        }
        Ok(TopologySpec { seed: self.seed, hosts, paths, selection: path_selection(self.routing.mode), pins: self.pins()? })
    }

    /// Namespace name of a host.
    pub fn namespace(&self, host: &str) -> String {
        namespace_name(&self.lab, host)
    }

    /// Where link direction `link` (`client.up`, `p0.forward`) is defined.
    fn locate(&self, link: &str) -> Option<LinkSlot> {
        let (owner, dir) = link.rsplit_once('.')?;
        if let Some(i) = self.host_index(owner) {
            return match dir {
                "up" => Some(LinkSlot::Up(i)),
                "down" => Some(LinkSlot::Down(i)),
                _ => None,
            };
        }
        let i = self.paths.iter().position(|p| p.name == owner)?;
        match dir {
            "forward" => Some(LinkSlot::Forward(i)),
            "reverse" => Some(LinkSlot::Reverse(i)),
            _ => None,
        }
    }

    /// Current parameters of a link direction by name (`client.up`, `p0.forward`).
    pub fn link_params(&self, link: &str) -> Option<&LinkParams> {
        Some(match self.locate(link)? {
            LinkSlot::Up(i) => &self.hosts[i].access.up,
            LinkSlot::Down(i) => &self.hosts[i].access.down,
            LinkSlot::Forward(i) => &self.paths[i].forward,
            LinkSlot::Reverse(i) => &self.paths[i].reverse,
        })
    }

    /// [`Topology::link_params`], to change them.
    pub fn link_params_mut(&mut self, link: &str) -> Option<&mut LinkParams> {
        Some(match self.locate(link)? {
            LinkSlot::Up(i) => &mut self.hosts[i].access.up,
            LinkSlot::Down(i) => &mut self.hosts[i].access.down,
            LinkSlot::Forward(i) => &mut self.paths[i].forward,
            LinkSlot::Reverse(i) => &mut self.paths[i].reverse,
        })
    }
}

/// A link direction's place in a topology (indices into `hosts` or `paths`).
enum LinkSlot {
    Up(usize),
    Down(usize),
    Forward(usize),
    Reverse(usize),
}

/// Resolves pins against a topology.
pub fn pins_for(topology: &Topology, pins: &[Pin]) -> Result<Vec<(HostId, HostId, PathId)>, (String, String)> {
    let mut out = Vec::new();
    for (i, pin) in pins.iter().enumerate() {
        let field = |f: &str| format!("routing.pins[{i}].{f}");
        let side_of = |name: &str| topology.host_index(name).map(|j| (j, topology.hosts[j].side));
        let left = match side_of(&pin.left) {
            Some((j, SideName::Left)) => HostId(j as u32),
            Some(_) => return Err((field("left"), format!("host {:?} is not on the left side", pin.left))),
            None => return Err((field("left"), format!("no host named {:?}", pin.left))),
        };
        let right = match side_of(&pin.right) {
            Some((j, SideName::Right)) => HostId(j as u32),
            Some(_) => return Err((field("right"), format!("host {:?} is not on the right side", pin.right))),
            None => return Err((field("right"), format!("no host named {:?}", pin.right))),
        };
        let path = topology
            .paths
            .iter()
            .position(|p| p.name == pin.path)
            .ok_or_else(|| (field("path"), format!("no path named {:?}", pin.path)))?;
        out.push((left, right, PathId(path as u32)));
    }
    Ok(out)
}

/// `pl-<lab>-<host>`.
pub fn namespace_name(lab: &str, host: &str) -> String {
    format!("pl-{lab}-{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
lab = "t1"
[[hosts]]
name = "client"
side = "left"
addresses = ["10.77.0.1"]
[hosts.access.up]
rate = "10mbit"
delay = "5ms"
[[hosts]]
name = "server"
side = "right"
addresses = ["10.77.1.1", "10.77.1.2"]
[[paths]]
name = "p0"
forward = { rate = "7mbit", queue = { kind = "droptail", bytes = 45000 } }
"#;

    fn parse(text: &str) -> Result<Topology, TopologyError> {
        Topology::parse(text, "t.toml", Path::new("."))
    }

    #[test]
    fn good_topology_converts() {
        let t = parse(GOOD).unwrap();
        assert_eq!(t.tcp_congestion, "cubic");
        let spec = t.to_spec().unwrap();
        assert_eq!(spec.hosts.len(), 2);
        assert_eq!(spec.hosts[0].up.delay, 5_000_000);
        // JSON round trip of the normalized form.
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(Topology::parse(&json, "t.json", Path::new(".")).unwrap(), t);
    }

    fn field_of(text: &str) -> String {
        parse(text).unwrap_err().field
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(field_of(&GOOD.replace("\"10mbit\"", "\"-5mbit\"")), "hosts[0].access.up.rate");
        assert_eq!(field_of(&GOOD.replace("10.77.1.2", "10.77.0.1")), "hosts[1].addresses[1]");
        assert_eq!(field_of(&GOOD.replace("\"droptail\"", "\"fifo\"")), "paths[0].forward.queue.kind");
        assert_eq!(field_of(&GOOD.replace("lab = \"t1\"", "lab = \"Bad-Name\"")), "lab");
        assert_eq!(field_of(&GOOD.replace("side = \"right\"", "side = \"middle\"")), "hosts[1].side");
        assert_eq!(field_of(&GOOD.replace("delay = \"5ms\"", "delay = 5.5")), "hosts[0].access.up.delay");
        assert_eq!(field_of(&GOOD.replace("delay = \"5ms\"", "delay = \"5\"")), "hosts[0].access.up.delay");
        assert_eq!(field_of(&GOOD.replace("delay = \"5ms\"", "dealy = \"5ms\"")), "hosts[0].access.up.dealy");
        assert_eq!(field_of(&GOOD.replace("name = \"server\"", "name = \"client\"")), "hosts[1].name");
        assert_eq!(field_of(&GOOD.replace("rate = \"10mbit\"", "trace = \"/nonexistent/trace\"")), "hosts[0].access.up.trace");
        let pinned = format!("{GOOD}\n[routing]\npins = [{{ left = \"server\", right = \"client\", path = \"p0\" }}]\n");
        assert_eq!(field_of(&pinned), "routing.pins[0].left");
        let no_path = GOOD.split("[[paths]]").next().unwrap().to_string();
        assert_eq!(field_of(&no_path), "paths");
        let err = parse(&GOOD.replace("\"10mbit\"", "\"-5mbit\"")).unwrap_err().to_string();
        assert!(err.starts_with("t.toml: hosts[0].access.up.rate: invalid rate \"-5mbit\""), "{err}");
        assert_eq!(field_of(&GOOD.replace("side = \"left\"", "side = \"left\"\noffload = \"on\"")), "hosts[0].offload");
    }

    #[test]
    fn a_host_offload_overrides_the_labs() {
        let t = parse(&GOOD.replace("side = \"right\"", "side = \"right\"\noffload = true")).unwrap();
        let (client, server) = (&t.hosts[0], &t.hosts[1]);
        assert_eq!((client.offload, server.offload), (None, Some(true)));
        assert_eq!((client.offload_or(false), server.offload_or(false)), (false, true));
        assert!(client.offload_or(true));
        let off = parse(&GOOD.replace("side = \"right\"", "side = \"right\"\noffload = false")).unwrap();
        assert!(!off.hosts[1].offload_or(true), "a host's own false wins over the lab's offloads");
        // Kept in the normalized form (the state directory's topology.json), left out when absent.
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json.matches("\"offload\"").count(), 1, "{json}");
        assert_eq!(Topology::parse(&json, "t.json", Path::new(".")).unwrap(), t);
    }
}
