//! Bookkeeping several controllers share: the recovery period and round counting.

use std::time::Instant;

/// The recovery period of RFC 9002 §7.3.2: it starts at a congestion event and ends when a
/// packet sent after that moment is acknowledged. A congestion event for a packet sent before
/// the start belongs to the same period and is ignored.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Recovery {
    start: Option<Instant>,
    active: bool,
}

impl Recovery {
    /// Whether a loss of a packet sent at `sent` opens a new period (and if so, opens it).
    pub(crate) fn on_congestion_event(&mut self, now: Instant, sent: Instant) -> bool {
        if self.start.is_some_and(|start| sent <= start) {
            return false;
        }
        self.start = Some(now);
        self.active = true;
        true
    }

    /// Whether an acknowledgement of a packet sent at `sent` falls inside the period (such
    /// acknowledgements do not grow the window); an acknowledgement of a later packet ends it.
    pub(crate) fn on_ack(&mut self, sent: Instant) -> bool {
        match self.start {
            Some(start) if sent <= start => true,
            _ => {
                self.active = false;
                false
            }
        }
    }

    /// Forgets the period (persistent congestion: the next loss starts a new one).
    pub(crate) fn reset(&mut self) {
        self.start = None;
        self.active = false;
    }

    pub(crate) fn active(&self) -> bool {
        self.active
    }
}

/// Rounds of RFC 9406 §4.2: at the start of a round `windowEnd` is the next packet number to be
/// sent (SND.NXT), and the round ends when a packet numbered at least `windowEnd` is
/// acknowledged (packet numbers from `on_sent`, the largest acknowledged from `on_end_acks`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Rounds {
    last_sent: Option<u64>,
    window_end: Option<u64>,
}

impl Rounds {
    pub(crate) fn on_sent(&mut self, last_packet_number: u64) {
        self.last_sent = Some(last_packet_number);
        if self.window_end.is_none() {
            // The first round ends with the first packet's acknowledgement.
            self.window_end = Some(last_packet_number);
        }
    }

    /// Whether this batch of acknowledgements ended a round (a new one starts).
    pub(crate) fn on_end_acks(&mut self, largest_acked: Option<u64>) -> bool {
        match (largest_acked, self.window_end) {
            (Some(acked), Some(end)) if acked >= end => {
                self.window_end = self.last_sent.map(|sent| sent + 1);
                true
            }
            _ => false,
        }
    }
}

/// The initial window: `bytes` if given, else `packets` datagrams; never below the minimum.
pub(crate) fn initial_window(bytes: Option<u64>, packets: u32, mtu: u64) -> u64 {
    bytes.unwrap_or(u64::from(packets) * mtu).max(minimum_window(mtu))
}

/// The smallest window of RFC 9002 §7.2: two datagrams.
pub(crate) fn minimum_window(mtu: u64) -> u64 {
    2 * mtu
}
