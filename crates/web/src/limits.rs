//! What the server accepts and serves at most, shared by the HTTP server (`crate::server`), the
//! raw bulk protocol (`crate::raw`) and the bulk client (`crate::bulk`), so none of them
//! depends on another for it.

use std::time::Duration;

/// Largest `n` of `GET /bytes?n=N` (10 GB).
pub const MAX_BYTES_N: u64 = 10_000_000_000;

/// Seed of the block `/bytes` streams from.
pub const BYTES_SEED: u64 = 0x0062_7974_6573; // "bytes"

/// Limits a public server needs.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request head (HTTP/1.1 read buffer, HTTP/2 header list), bytes (>= 8192).
    pub max_header_bytes: usize,
    /// Most header fields in an HTTP/1.1 request.
    pub max_headers: usize,
    /// Concurrent streams per HTTP/2 connection, and concurrent bidirectional (request) streams
    /// per QUIC connection.
    pub max_concurrent_streams: u32,
    /// A connection with no bytes read or written (QUIC: no packet received) for this long is
    /// closed.
    pub idle_timeout: Duration,
    /// While a response waits to be written (a write is blocked: the socket is full) and the
    /// client acknowledges nothing, the connection is closed after this long instead of the
    /// idle timeout. nginx's `send_timeout`, 60 s: on a lossy link TCP's retransmission backoff
    /// alone (1, 2, 4, 8, 16 s) leaves a connection without an acknowledgement for 31 s (002's
    /// 1 Mbit/s, 30 ms cell: a response's first byte arrived 33 s after it was sent). A client
    /// that stops reading is closed after it too.
    pub send_timeout: Duration,
    /// Apply `send_timeout` even while the kernel retransmits the connection's data after a
    /// timeout. Off (the lab): a response held up by the network, not by the client, is not
    /// idle, however long TCP's backoff takes (002's slowest link: a connection without an
    /// acknowledgement for 85 s, whose retransmissions at 40, 50 and 75 s were lost, then
    /// delivered the rest); the kernel's own retry limit (`tcp_retries2`) ends a dead path. On
    /// (the live service): a client that never acknowledges holds a connection slot for
    /// `send_timeout` at most.
    pub strict_send_timeout: bool,
    /// Time for a TLS handshake, and for an HTTP/1.1 request head to arrive. nginx's 60 s
    /// (`ssl_handshake_timeout`, `client_header_timeout`): on a slow lossy link a handshake
    /// whose last flight is lost a few times takes more than 10 s (002's slowest corner,
    /// 0.364 Mbit/s with a seven-packet queue: 14 s).
    pub handshake_timeout: Duration,
    /// Open connections per server; more are closed at once.
    pub max_connections: usize,
    /// HTTP/2 streams a client may reset before the server answers them (rapid-reset guard).
    pub max_pending_accept_reset_streams: usize,
    /// Requests per second one connection may make, sustained (token bucket; beyond it: 429
    /// with `retry-after`).
    pub max_requests_per_second: u32,
    /// Requests one connection may make at once before the sustained rate applies.
    pub max_request_burst: u32,
    /// QUIC handshakes in progress beyond which a new connection from an address not yet
    /// validated gets a stateless Retry first (RFC 9000 §8.1.2): a flood of Initials that never
    /// come back (spoofed or abandoned) then holds no connection state and no connection slot,
    /// while a real client answers the Retry and gets in one round trip later. 0: always Retry.
    pub quic_handshakes_before_retry: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 32 * 1024,
            max_headers: 100,
            max_concurrent_streams: 100,
            idle_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(60),
            strict_send_timeout: false,
            max_connections: 4096,
            max_pending_accept_reset_streams: 20,
            // Far above what a page load or a benchmark makes on one connection (a page has at
            // most a few hundred objects); it caps floods of cheap requests.
            max_requests_per_second: 10_000,
            max_request_burst: 10_000,
            // Far above the handshakes a page load (h3-parallel:N) or a speed test opens at
            // once, so that the lab's handshakes keep their one round trip.
            quic_handshakes_before_retry: 64,
        }
    }
}
