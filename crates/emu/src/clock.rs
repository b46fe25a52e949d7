//! The emulator's clock: model time (ns since the lab started) paired with Unix time. A leaf:
//! the packet loop and the control plane both read it.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use netmodel::Nanos;

/// Monotonic model clock paired with the Unix time at its zero.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    /// Unix ns at model time 0.
    pub start_unix_ns: u64,
}

impl Clock {
    /// A clock starting now.
    pub fn start() -> Self {
        let start_unix_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        Clock { start: Instant::now(), start_unix_ns }
    }
    /// Model time now.
    pub fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }
}
