//! The protocol modes of the page-load engine, as a registry looked up by name (`h2`,
//! `h2-parallel:N`, ...), and the schedulers of the modes with several connections per origin.
//!
//! `protolab-net modes --json` prints the [`ModeRegistry`] listing, so that Python asks the
//! binary instead of copying the table (as it does for the controllers with `cc list --json`).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// HTTP version spoken on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// HTTP/1.1 over cleartext TCP.
    H1c,
    /// HTTP/1.1 over TLS (ALPN `http/1.1`).
    H1,
    /// HTTP/2 over TLS (ALPN `h2`).
    H2,
    /// HTTP/3 over QUIC (ALPN `h3`).
    H3,
}

impl Protocol {
    /// Name used in results (`connections[].protocol`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::H1c => "h1c",
            Protocol::H1 => "h1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }

    /// The ALPN protocol id offered and required (none for cleartext).
    pub fn alpn(self) -> Option<&'static [u8]> {
        match self {
            Protocol::H1c => None,
            Protocol::H1 => Some(b"http/1.1"),
            Protocol::H2 => Some(b"h2"),
            Protocol::H3 => Some(b"h3"),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What carries the HTTP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// TCP.
    Tcp,
    /// MPTCP (`IPPROTO_MPTCP`).
    Mptcp,
    /// QUIC over UDP.
    Quic,
}

impl Transport {
    /// Name used in results (`connections[].transport`) and in connection ids.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Mptcp => "mptcp",
            Transport::Quic => "quic",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many connections an origin gets and how requests use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// HTTP/1.1 like a browser: one request at a time per connection, up to a limit of
    /// persistent connections per origin, opened on demand.
    OnDemand,
    /// Exactly `n` multiplexed connections per origin, all opened when the origin's first
    /// request is queued; requests are assigned by the scheduler.
    Fixed(u32),
}

/// A parsed `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// Registry name (`h2-parallel`).
    pub base: &'static str,
    /// HTTP version.
    pub protocol: Protocol,
    /// Carrier.
    pub transport: Transport,
    /// Connection policy.
    pub pool: Pool,
}

/// How many connections an origin gets, as a registry entry says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Connections {
    /// The HTTP/1.1 pool (`--h1-connections`).
    OnDemand,
    /// The user gives the count: `name:N`.
    Count,
    /// Always this many.
    Fixed(u32),
}

/// One registry entry.
struct Entry {
    name: &'static str,
    protocol: Protocol,
    transport: Transport,
    connections: Connections,
    description: &'static str,
}

const REGISTRY: &[Entry] = &[
    Entry {
        name: "h1c",
        protocol: Protocol::H1c,
        transport: Transport::Tcp,
        connections: Connections::OnDemand,
        description: "HTTP/1.1 cleartext, up to h1_connections per origin",
    },
    Entry {
        name: "h1",
        protocol: Protocol::H1,
        transport: Transport::Tcp,
        connections: Connections::OnDemand,
        description: "HTTP/1.1 over TLS, up to h1_connections per origin",
    },
    Entry {
        name: "h2",
        protocol: Protocol::H2,
        transport: Transport::Tcp,
        connections: Connections::Fixed(1),
        description: "HTTP/2 over TLS, one connection per origin",
    },
    Entry {
        name: "h2-parallel",
        protocol: Protocol::H2,
        transport: Transport::Tcp,
        connections: Connections::Count,
        description: "HTTP/2 over TLS, N connections per origin",
    },
    Entry {
        name: "h2-mptcp",
        protocol: Protocol::H2,
        transport: Transport::Mptcp,
        connections: Connections::Fixed(1),
        description: "HTTP/2 over MPTCP + TLS, one connection per origin, two subflows",
    },
    Entry {
        name: "h3",
        protocol: Protocol::H3,
        transport: Transport::Quic,
        connections: Connections::Fixed(1),
        description: "HTTP/3 over QUIC, one connection per origin",
    },
    Entry {
        name: "h3-parallel",
        protocol: Protocol::H3,
        transport: Transport::Quic,
        connections: Connections::Count,
        description: "HTTP/3 over QUIC, N connections per origin",
    },
];

/// Largest `N` of the `-parallel:N` modes.
pub const MAX_PARALLEL: u32 = 64;

/// The mode names as the user writes them (`h2-parallel:N`).
pub fn known() -> String {
    REGISTRY
        .iter()
        .map(|e| if e.connections == Connections::Count { format!("{}:N", e.name) } else { e.name.to_string() })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Mode {
    /// Parses `name` or `name:N` against the registry.
    pub fn parse(text: &str) -> Result<Mode, String> {
        let (name, count) = match text.split_once(':') {
            Some((n, c)) => (n, Some(c)),
            None => (text, None),
        };
        let Some(entry) = REGISTRY.iter().find(|e| e.name == name) else {
            return Err(format!("unknown mode {text:?} (known: {})", known()));
        };
        let pool = match (entry.connections, count) {
            (Connections::OnDemand, None) => Pool::OnDemand,
            (Connections::Fixed(n), None) => Pool::Fixed(n),
            (Connections::Count, Some(c)) => match c.parse::<u32>() {
                Ok(n) if (1..=MAX_PARALLEL).contains(&n) => Pool::Fixed(n),
                _ => return Err(format!("{text:?}: N must be an integer from 1 to {MAX_PARALLEL}, not {c:?}")),
            },
            (Connections::Count, None) => return Err(format!("mode {name:?} needs a connection count: {name}:N")),
            (_, Some(_)) => return Err(format!("mode {name:?} takes no connection count (known: {})", known())),
        };
        Ok(Mode { base: entry.name, protocol: entry.protocol, transport: entry.transport, pool })
    }

    /// Whether a scheduler chooses between several connections.
    pub fn is_parallel(&self) -> bool {
        matches!(self.pool, Pool::Fixed(n) if n > 1) || self.base.ends_with("-parallel")
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pool {
            Pool::Fixed(n) if self.base.ends_with("-parallel") => write!(f, "{}:{n}", self.base),
            _ => f.write_str(self.base),
        }
    }
}

/// How a multiplexed mode with several connections per origin assigns requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    /// The origin's i-th queued request goes to connection i mod N (as in 001).
    #[default]
    RoundRobin,
    /// To the connection with the fewest outstanding response bytes (expected minus received).
    LeastOutstanding,
}

impl Scheduler {
    /// Every scheduler with its name and description, in the order they are listed.
    const REGISTRY: &'static [(&'static str, Scheduler, &'static str)] = &[
        ("round-robin", Scheduler::RoundRobin, "requests assigned to the N connections in turn (001)"),
        (
            "least-outstanding",
            Scheduler::LeastOutstanding,
            "request goes to the connection with the fewest outstanding response bytes",
        ),
    ];

    /// Parses a scheduler name.
    pub fn parse(text: &str) -> Result<Scheduler, String> {
        Self::REGISTRY.iter().find(|(n, _, _)| *n == text).map(|(_, s, _)| *s).ok_or_else(|| {
            let known: Vec<&str> = Self::REGISTRY.iter().map(|(n, _, _)| *n).collect();
            format!("unknown scheduler {text:?} (known: {})", known.join(", "))
        })
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        Self::REGISTRY.iter().find(|(_, s, _)| *s == self).map_or("round-robin", |(n, _, _)| n)
    }
}

impl fmt::Display for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `schema` of the mode registry listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum ModeRegistrySchema {
    /// The only value.
    #[default]
    #[serde(rename = "protolab.mode-registry")]
    ModeRegistry,
}

/// `protolab-net modes --json`: every page-load mode and scheduler, and the largest `N`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModeRegistry {
    /// `protolab.mode-registry`.
    pub schema: ModeRegistrySchema,
    /// Version of this listing.
    pub schema_version: u32,
    /// Largest `N` of the modes that take a connection count (`h2-parallel:N`).
    pub max_parallel: u32,
    /// Every mode, in the registry's order (the order reports list them in).
    pub modes: Vec<ModeEntry>,
    /// Every scheduler of the modes with several connections per origin.
    pub schedulers: Vec<SchedulerEntry>,
}

/// One mode of the listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModeEntry {
    /// Registry name (`h2-parallel`); written `name:N` when `takes_count`.
    pub name: String,
    /// HTTP version.
    pub protocol: Protocol,
    /// Carrier.
    pub transport: Transport,
    /// Whether the mode is written `name:N` (N connections per origin, 1 to `max_parallel`).
    pub takes_count: bool,
    /// Connections per origin when fixed by the mode (1); null for the HTTP/1.1 pool (up to
    /// `h1_connections`, on demand) and for the modes that take a count.
    pub connections: Option<u32>,
    /// Whether it runs over MPTCP (needs MPTCP listeners and the lab's `ip mptcp` set-up).
    pub mptcp: bool,
    /// What it does, in a line.
    pub description: String,
}

/// One scheduler of the listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SchedulerEntry {
    /// Its name (`--scheduler`, `config.scheduler` of a load result).
    pub name: Scheduler,
    /// What it does, in a line.
    pub description: String,
}

/// Version of [`ModeRegistry`].
pub const REGISTRY_SCHEMA_VERSION: u32 = 1;

/// The registry as `protolab-net modes --json` prints it.
pub fn registry() -> ModeRegistry {
    ModeRegistry {
        schema: ModeRegistrySchema::ModeRegistry,
        schema_version: REGISTRY_SCHEMA_VERSION,
        max_parallel: MAX_PARALLEL,
        modes: REGISTRY
            .iter()
            .map(|e| ModeEntry {
                name: e.name.to_string(),
                protocol: e.protocol,
                transport: e.transport,
                takes_count: e.connections == Connections::Count,
                connections: match e.connections {
                    Connections::Fixed(n) => Some(n),
                    Connections::OnDemand | Connections::Count => None,
                },
                mptcp: e.transport == Transport::Mptcp,
                description: e.description.to_string(),
            })
            .collect(),
        schedulers: Scheduler::REGISTRY
            .iter()
            .map(|(_, s, description)| SchedulerEntry { name: *s, description: description.to_string() })
            .collect(),
    }
}

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    vec![crate::document::<ModeRegistry>("mode-registry")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_mode() {
        for (text, protocol, transport, pool) in [
            ("h1c", Protocol::H1c, Transport::Tcp, Pool::OnDemand),
            ("h1", Protocol::H1, Transport::Tcp, Pool::OnDemand),
            ("h2", Protocol::H2, Transport::Tcp, Pool::Fixed(1)),
            ("h2-parallel:3", Protocol::H2, Transport::Tcp, Pool::Fixed(3)),
            ("h2-mptcp", Protocol::H2, Transport::Mptcp, Pool::Fixed(1)),
            ("h3", Protocol::H3, Transport::Quic, Pool::Fixed(1)),
            ("h3-parallel:1", Protocol::H3, Transport::Quic, Pool::Fixed(1)),
            ("h3-parallel:64", Protocol::H3, Transport::Quic, Pool::Fixed(64)),
        ] {
            let m = Mode::parse(text).unwrap();
            assert_eq!((m.protocol, m.transport, m.pool), (protocol, transport, pool), "{text}");
            assert_eq!(m.to_string(), text);
        }
    }

    #[test]
    fn refuses_bad_modes() {
        for bad in ["h4", "h2-parallel:0", "h2-parallel:x", "h2-parallel", "h2:2", "h1c:6", "h3-parallel:65", "", "H2"] {
            let e = Mode::parse(bad).unwrap_err();
            assert!(e.contains(&format!("{:?}", bad.split(':').next().unwrap())) || e.contains(bad), "{bad}: {e}");
        }
        assert!(Mode::parse("h4").unwrap_err().contains("h2-parallel:N"));
    }

    #[test]
    fn schedulers() {
        assert_eq!(Scheduler::parse("least-outstanding").unwrap(), Scheduler::LeastOutstanding);
        assert_eq!(Scheduler::parse("round-robin").unwrap().name(), "round-robin");
        assert!(Scheduler::parse("random").is_err());
        // The serialized name is the registry's name.
        for s in [Scheduler::RoundRobin, Scheduler::LeastOutstanding] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.name());
        }
    }

    #[test]
    fn names_serialize_as_results_write_them() {
        for p in [Protocol::H1c, Protocol::H1, Protocol::H2, Protocol::H3] {
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        }
        for t in [Transport::Tcp, Transport::Mptcp, Transport::Quic] {
            assert_eq!(serde_json::to_value(t).unwrap(), t.name());
        }
    }

    /// The listing says what `Mode::parse` does: every mode parses as listed, with its count
    /// when it takes one, and nothing else is a mode.
    #[test]
    fn listing_matches_the_parser() {
        let listing = registry();
        assert_eq!(listing.modes.len(), REGISTRY.len());
        for m in &listing.modes {
            let text = if m.takes_count { format!("{}:{}", m.name, listing.max_parallel) } else { m.name.clone() };
            let parsed = Mode::parse(&text).unwrap();
            assert_eq!((parsed.protocol, parsed.transport), (m.protocol, m.transport), "{text}");
            assert_eq!(parsed.transport == Transport::Mptcp, m.mptcp);
            match (parsed.pool, m.connections) {
                (Pool::OnDemand, None) => assert!(!m.takes_count),
                (Pool::Fixed(n), Some(c)) => assert_eq!(n, c),
                (Pool::Fixed(n), None) => assert!(m.takes_count && n == listing.max_parallel),
                other => panic!("{text}: {other:?}"),
            }
            assert!(Mode::parse(&format!("{}:{}", m.name, listing.max_parallel + 1)).is_err());
        }
        let names: Vec<Scheduler> = listing.schedulers.iter().map(|s| s.name).collect();
        assert_eq!(names, [Scheduler::RoundRobin, Scheduler::LeastOutstanding]);
        let json = serde_json::to_string(&listing).unwrap();
        assert_eq!(serde_json::from_str::<ModeRegistry>(&json).unwrap(), listing);
        assert!(json.starts_with(r#"{"schema":"protolab.mode-registry","schema_version":1,"max_parallel":64,"#), "{json}");
    }
}
