//! The protocol modes of the page-load engine, as a registry looked up by name (`name` or
//! `name:N`).

use std::fmt;

/// HTTP version spoken on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// What carries the HTTP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// TCP.
    Tcp,
    /// MPTCP (`IPPROTO_MPTCP`).
    Mptcp,
    /// QUIC over UDP.
    Quic,
}

impl Transport {
    /// Name used in results (`connections[].transport`).
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Mptcp => "mptcp",
            Transport::Quic => "quic",
        }
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

/// One registry entry.
struct Entry {
    name: &'static str,
    protocol: Protocol,
    transport: Transport,
    /// `None`: HTTP/1.1 pool; `Some(None)`: takes `:N`; `Some(Some(n))`: fixed count.
    connections: Option<Option<u32>>,
}

const REGISTRY: &[Entry] = &[
    Entry { name: "h1c", protocol: Protocol::H1c, transport: Transport::Tcp, connections: None },
    Entry { name: "h1", protocol: Protocol::H1, transport: Transport::Tcp, connections: None },
    Entry { name: "h2", protocol: Protocol::H2, transport: Transport::Tcp, connections: Some(Some(1)) },
    Entry { name: "h2-parallel", protocol: Protocol::H2, transport: Transport::Tcp, connections: Some(None) },
    Entry { name: "h2-mptcp", protocol: Protocol::H2, transport: Transport::Mptcp, connections: Some(Some(1)) },
    Entry { name: "h3", protocol: Protocol::H3, transport: Transport::Quic, connections: Some(Some(1)) },
    Entry { name: "h3-parallel", protocol: Protocol::H3, transport: Transport::Quic, connections: Some(None) },
];

/// Largest `N` of the `-parallel:N` modes.
pub const MAX_PARALLEL: u32 = 64;

/// The mode names as the user writes them (`h2-parallel:N`).
pub fn known() -> String {
    REGISTRY
        .iter()
        .map(|e| if e.connections == Some(None) { format!("{}:N", e.name) } else { e.name.to_string() })
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
            (None, None) => Pool::OnDemand,
            (Some(Some(n)), None) => Pool::Fixed(n),
            (Some(None), Some(c)) => match c.parse::<u32>() {
                Ok(n) if (1..=MAX_PARALLEL).contains(&n) => Pool::Fixed(n),
                _ => return Err(format!("{text:?}: N must be an integer from 1 to {MAX_PARALLEL}, not {c:?}")),
            },
            (Some(None), None) => return Err(format!("mode {name:?} needs a connection count: {name}:N")),
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheduler {
    /// The origin's i-th queued request goes to connection i mod N (as in 001).
    #[default]
    RoundRobin,
    /// To the connection with the fewest outstanding response bytes (expected minus received).
    LeastOutstanding,
}

impl Scheduler {
    const REGISTRY: &'static [(&'static str, Scheduler)] =
        &[("round-robin", Scheduler::RoundRobin), ("least-outstanding", Scheduler::LeastOutstanding)];

    /// Parses a scheduler name.
    pub fn parse(text: &str) -> Result<Scheduler, String> {
        Self::REGISTRY.iter().find(|(n, _)| *n == text).map(|(_, s)| *s).ok_or_else(|| {
            format!("unknown scheduler {text:?} (known: {})", Self::REGISTRY.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "))
        })
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        Self::REGISTRY.iter().find(|(_, s)| *s == self).map_or("round-robin", |(n, _)| n)
    }
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
    }
}
