//! Sprout-EWMA's receiver feedback over QUIC datagrams (`--quic-cc sprout-ewma`,
//! docs/congestion.md): on each end of a connection whose controller is `sprout-ewma`, one loop
//!
//! - measures what arrives: every tick (20 ms) it reads the connection's received UDP bytes
//!   (`quinn::Connection::stats().udp_rx.bytes`), feeds the difference to the receiver's
//!   estimate ([`cc::sprout_feedback::ReceiverEstimator`]) and sends each report as a QUIC
//!   datagram to the peer;
//! - hands the peer's datagrams to the local controller's feedback slot, from which the
//!   controller sets its window.
//!
//! quinn gives the application no per-packet arrival times. The received-bytes counter is the
//! finest signal it has: quinn counts a datagram when its endpoint driver reads it from the
//! socket, before streams, flow control or the application see the data, so — unlike the
//! chunks an application reads from its streams — it does not wait for reassembly or for the
//! reader. Arrivals are thus timed to the tick at which the loop reads the counter (the tick
//! length itself is measured, so a late tick under CPU load is a longer span, not a wrong
//! rate), and the counter includes every packet of the connection (acknowledgements and the
//! peer's reports too, about 50 bytes each; the estimator ignores spans that carry less than a
//! data packet).

use std::future::Future;
use std::time::Instant;

use bytes::Bytes;
use cc::registry::Config;
use cc::sprout_feedback::ReceiverEstimator;
use tokio::time::MissedTickBehavior;

/// Bytes quinn buffers of the peer's datagrams (reports are 15 bytes; the loop reads them as
/// they come, so this only bounds a burst).
pub const RECEIVE_BUFFER: usize = 64 * 1024;

/// Enables QUIC datagrams on a transport whose controller takes feedback (`sprout-ewma`).
pub fn enable_datagrams(transport: &mut quinn::TransportConfig, controller: &cc::ControllerSpec) {
    if matches!(controller.config(), Config::SproutFeedback(_)) {
        transport.datagram_receive_buffer_size(Some(RECEIVE_BUFFER));
    }
}

/// The feedback loop of `conn`, when its controller takes feedback: it runs until the
/// connection closes. Run it alongside the connection (it holds a handle of the connection, so
/// stop it before relying on the last handle's drop to close the connection).
pub fn feedback_loop(conn: &quinn::Connection, controller: &cc::ControllerSpec) -> Option<impl Future<Output = ()> + Send + 'static> {
    let Config::SproutFeedback(config) = controller.config() else { return None };
    let estimator_config = config.estimator;
    // The controller quinn runs shares its slot with this copy of it.
    let slot = cc::Adapter::downcast(conn.congestion_state()).and_then(|adapter| adapter.feedback_slot());
    let conn = conn.clone();
    Some(async move {
        let mut estimator = ReceiverEstimator::new(estimator_config, Instant::now());
        let mut received = conn.stats().udp_rx.bytes;
        let mut ticks = tokio::time::interval(estimator_config.tick);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {
                    let now_received = conn.stats().udp_rx.bytes;
                    estimator.record(now_received.saturating_sub(received));
                    received = now_received;
                    if let Some(report) = estimator.on_tick(Instant::now()) {
                        // A report the peer cannot take (no datagram support) or that is lost
                        // only leaves the sender on its last report; the next tick sends anew.
                        let _ = conn.send_datagram(Bytes::copy_from_slice(&report.encode()));
                    }
                }
                datagram = conn.read_datagram() => match datagram {
                    Ok(bytes) => {
                        // Malformed and stale reports are counted by the slot and ignored.
                        if let Some(slot) = &slot {
                            let _ = slot.offer(&bytes);
                        }
                    }
                    // The connection is closed.
                    Err(_) => return,
                },
            }
        }
    })
}

/// A sender that sent this much without a single report from its peer ran on its initial
/// window: worth a line in the server's log.
const UNFED_BYTES: u64 = 100_000;

/// Says on stderr when a `sprout-ewma` connection's peer sent no feedback report although the
/// connection sent more than [`UNFED_BYTES`] (a client that is not protolab's, e.g. Chromium:
/// the window stayed the initial window).
pub fn warn_without_reports(conn: &quinn::Connection, conn_id: &str) {
    let status = cc::Adapter::downcast(conn.congestion_state()).and_then(|adapter| adapter.snapshot().feedback);
    let sent = conn.stats().udp_tx.bytes;
    if status.is_some_and(|s| s.reports == 0) && sent > UNFED_BYTES {
        eprintln!(
            "protolab-net serve: {conn_id}: sprout-ewma received no feedback report from the peer in {sent} bytes sent; \
             its window stayed the initial window (only protolab's clients send reports: use sprout-ewma-sender with others)"
        );
    }
}
