//! Seeded source ports (`--source-port-seed`), for TCP and QUIC alike.

use rand::{Rng, SeedableRng};

/// Tries before giving up on finding a free source port.
pub(crate) const SOURCE_PORT_TRIES: usize = 32;

/// Source ports drawn from the ephemeral range by a seeded generator instead of the kernel's
/// choice, so that a flow hash over the 5-tuple spreads connections as it did before Linux chose
/// even ports for connect().
pub(crate) struct SourcePorts {
    rng: std::sync::Mutex<rand_chacha::ChaCha8Rng>,
    range: (u16, u16),
}

impl SourcePorts {
    /// Ports from the kernel's ephemeral range (`net.ipv4.ip_local_port_range`).
    pub fn new(seed: u64) -> SourcePorts {
        SourcePorts::in_range(seed, crate::transport::ephemeral_port_range())
    }

    fn in_range(seed: u64, range: (u16, u16)) -> SourcePorts {
        SourcePorts { rng: std::sync::Mutex::new(rand_chacha::ChaCha8Rng::seed_from_u64(seed)), range }
    }

    /// The next port to try.
    pub fn next(&self) -> u16 {
        // A poisoned lock only means another draw panicked, which random_range does not.
        match self.rng.lock() {
            Ok(mut rng) => rng.random_range(self.range.0..=self.range.1),
            Err(poisoned) => poisoned.into_inner().random_range(self.range.0..=self.range.1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_ports_within_the_range() {
        let (a, b) = (SourcePorts::in_range(7, (40000, 40100)), SourcePorts::in_range(7, (40000, 40100)));
        let drawn: Vec<u16> = (0..200).map(|_| a.next()).collect();
        assert_eq!(drawn, (0..200).map(|_| b.next()).collect::<Vec<u16>>());
        assert!(drawn.iter().all(|p| (40000..=40100).contains(p)));
        // Odd ports too: the point of choosing them.
        assert!(drawn.iter().any(|p| p % 2 == 1));
        let other = SourcePorts::in_range(8, (40000, 40100));
        assert_ne!(drawn, (0..200).map(|_| other.next()).collect::<Vec<u16>>());
    }
}
