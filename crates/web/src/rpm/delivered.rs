//! Upload bytes known to have arrived (no I/O): what the upload's goodput counts.
//!
//! An upload's stack accepts bytes long before they reach the server: TCP's send buffer
//! (autotuned to megabytes), HTTP/2's and QUIC's stream buffers. Counting accepted bytes put
//! seconds of a slow link's traffic into the first intervals (issue 23: 5.24 MB "uploaded" in
//! 4 s where the link carried 1.70 MB). The client therefore counts what the transport knows
//! was delivered, read from its own stack (this works against any server, as the draft's
//! upload endpoint only discards):
//!
//! - TCP: `tcpi_bytes_acked`, the bytes the peer acknowledged (TLS records and HTTP/2 frames
//!   included: about 0.2% above the payload);
//! - QUIC: quinn exposes no acknowledged byte count, so the bytes sent minus those declared
//!   lost minus the congestion window (what may still be in flight; an upload that saturates
//!   the path keeps about a window in flight). Packet headers and tags included: about 3%
//!   above the payload.
//!
//! Each connection's count starts at zero when it begins to upload and never decreases (the
//! QUIC estimate can dip when the window grows faster than acknowledgements arrive).

/// One reading of a load-generating connection's transport counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportCounters {
    /// TCP: `tcpi_bytes_acked`.
    Tcp {
        /// Bytes the peer acknowledged over the connection's life.
        bytes_acked: u64,
    },
    /// QUIC: quinn's `ConnectionStats`.
    Quic {
        /// `udp_tx.bytes`: UDP payload bytes sent.
        sent_bytes: u64,
        /// `path.lost_bytes`: bytes in packets declared lost.
        lost_bytes: u64,
        /// `path.cwnd`: the congestion window, bytes.
        cwnd: u64,
    },
}

impl TransportCounters {
    /// Bytes known (TCP) or estimated (QUIC) to have arrived over the connection's life.
    fn delivered_since_open(self) -> i128 {
        match self {
            TransportCounters::Tcp { bytes_acked } => i128::from(bytes_acked),
            TransportCounters::Quic { sent_bytes, lost_bytes, cwnd } => i128::from(sent_bytes) - i128::from(lost_bytes) - i128::from(cwnd),
        }
    }
}

/// The delivered bytes of one connection since its upload began.
#[derive(Debug, Clone)]
pub struct DeliveredAccount {
    /// The reading when the upload began: everything before (handshakes) is not upload.
    baseline: i128,
    /// The largest count so far (the count never decreases).
    delivered: u64,
}

impl DeliveredAccount {
    /// Starts the account at the connection's reading before its upload. QUIC: nothing of the
    /// upload is in flight yet, so the window is not subtracted from the baseline.
    pub fn new(at_start: TransportCounters) -> DeliveredAccount {
        let baseline = match at_start {
            TransportCounters::Quic { sent_bytes, lost_bytes, .. } => i128::from(sent_bytes) - i128::from(lost_bytes),
            tcp @ TransportCounters::Tcp { .. } => tcp.delivered_since_open(),
        };
        DeliveredAccount { baseline, delivered: 0 }
    }

    /// Takes a new reading; returns the upload's delivered bytes so far.
    pub fn update(&mut self, now: TransportCounters) -> u64 {
        let since = now.delivered_since_open() - self.baseline;
        let since = u64::try_from(since.max(0)).unwrap_or(u64::MAX);
        self.delivered = self.delivered.max(since);
        self.delivered
    }

    /// The upload's delivered bytes at the last reading.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_counts_acknowledged_bytes_since_the_upload_began() {
        // The TLS handshake's 1 200 acknowledged bytes are not upload.
        let mut a = DeliveredAccount::new(TransportCounters::Tcp { bytes_acked: 1_200 });
        assert_eq!(a.delivered(), 0);
        assert_eq!(a.update(TransportCounters::Tcp { bytes_acked: 1_200 }), 0);
        assert_eq!(a.update(TransportCounters::Tcp { bytes_acked: 1_251_200 }), 1_250_000);
        assert_eq!(a.update(TransportCounters::Tcp { bytes_acked: 2_501_200 }), 2_500_000);
    }

    #[test]
    fn quic_subtracts_losses_and_the_window_in_flight() {
        let mut a = DeliveredAccount::new(TransportCounters::Quic { sent_bytes: 5_000, lost_bytes: 0, cwnd: 12_000 });
        // 12 000 sent, all of it possibly in flight: nothing known to have arrived.
        assert_eq!(a.update(TransportCounters::Quic { sent_bytes: 17_000, lost_bytes: 0, cwnd: 12_000 }), 0);
        // 1 005 000 sent, 40 000 lost, a window of 100 000 still in flight.
        assert_eq!(a.update(TransportCounters::Quic { sent_bytes: 1_010_000, lost_bytes: 40_000, cwnd: 100_000 }), 865_000);
        // The window grew faster than bytes were sent: the count holds, it never goes back.
        assert_eq!(a.update(TransportCounters::Quic { sent_bytes: 1_020_000, lost_bytes: 40_000, cwnd: 200_000 }), 865_000);
        assert_eq!(a.update(TransportCounters::Quic { sent_bytes: 2_020_000, lost_bytes: 60_000, cwnd: 150_000 }), 1_805_000);
    }

    #[test]
    fn a_buffered_upload_is_not_counted_until_acknowledged() {
        // Issue 23's case in numbers: 4 s at 3.4 Mbit/s carry 1.70 MB while the stack accepted
        // 5.24 MB; the account follows the acknowledgements, not the accepted bytes.
        let mut a = DeliveredAccount::new(TransportCounters::Tcp { bytes_acked: 0 });
        let link_bytes_per_s = 3_400_000 / 8;
        for s in 1..=4u64 {
            assert_eq!(a.update(TransportCounters::Tcp { bytes_acked: s * link_bytes_per_s }), s * link_bytes_per_s);
        }
        assert_eq!(a.delivered(), 1_700_000);
    }
}
