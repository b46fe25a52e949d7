//! The QUIC transport knobs BQUIC turns (000 §6.3.1), each shown changing what it should: two
//! quinn-proto endpoints joined by an in-memory path on a virtual clock (no sockets, no sleeps,
//! the same result under any CPU load). The server sends one stream to the client; the path
//! has a rate, a one-way delay, and a hook that adds delay to chosen datagrams.
//!
//! The third knob, the later slow-start exit, is a controller parameter and is shown on RTT
//! sequences in `cc`'s registry tests (`bquic_leaves_slow_start_later`).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::{ClientConfig, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event, ServerConfig, StreamId};
use web::tls::TlsMaterial;
use web::transport::QuicOptions;

const SERVER: &str = "10.0.0.1:443";
const CLIENT: &str = "10.0.0.2:50000";
/// Beyond this the transfer is stuck: a test failure, not a hang.
const VIRTUAL_LIMIT: Duration = Duration::from_secs(60);

/// What the server writes: `chunks` chunks of `chunk` bytes, one every `interval` (zero: all at
/// once, as fast as flow and congestion control allow).
struct Workload {
    chunks: usize,
    chunk: usize,
    interval: Duration,
}

/// One direction of the path: serialization at `rate_bps` behind a FIFO without a limit, then
/// `delay` plus whatever `extra` adds for a datagram (its size, when it was sent).
struct Direction {
    rate_bps: u64,
    delay: Duration,
    extra: Box<dyn FnMut(usize, Duration) -> Duration>,
    free_at: Duration,
}

impl Direction {
    fn plain(rate_bps: u64, delay: Duration) -> Direction {
        Direction { rate_bps, delay, extra: Box::new(|_, _| Duration::ZERO), free_at: Duration::ZERO }
    }

    fn arrival(&mut self, now: Duration, size: usize) -> Duration {
        let serialization = Duration::from_nanos(size as u64 * 8 * 1_000_000_000 / self.rate_bps);
        self.free_at = self.free_at.max(now) + serialization;
        self.free_at + self.delay + (self.extra)(size, now)
    }
}

struct InFlight {
    arrive: Duration,
    to_server: bool,
    data: Vec<u8>,
}

struct Peer {
    endpoint: Endpoint,
    connection: Option<(ConnectionHandle, quinn_proto::Connection)>,
    addr: SocketAddr,
}

/// What the server's and the client's connections counted by the end of the transfer.
struct Outcome {
    server: quinn_proto::ConnectionStats,
    client: quinn_proto::ConnectionStats,
    received: usize,
}

fn configs(options: &QuicOptions) -> (ServerConfig, ClientConfig) {
    let tls = TlsMaterial::generate("knobs", &[], &["localhost".to_string()]).unwrap();
    let server_crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls.server_config(&[b"knobs"]).unwrap()).unwrap();
    let client_crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls.client_config(&[b"knobs"]).unwrap()).unwrap();
    let transport = Arc::new(options.transport_config().unwrap());
    let mut server = ServerConfig::with_crypto(Arc::new(server_crypto));
    server.transport_config(transport.clone());
    let mut client = ClientConfig::new(Arc::new(client_crypto));
    client.transport_config(transport);
    (server, client)
}

/// Runs the workload from server to client, both ends with `options` (as a lab run gives both
/// ends the same flags), over `down` (server to client) and `up`.
fn transfer(options: &QuicOptions, workload: &Workload, mut down: Direction, mut up: Direction) -> Outcome {
    let (server_config, client_config) = configs(options);
    let start = Instant::now();
    let seed = Some([7u8; 32]);
    let mut server = Peer { endpoint: Endpoint::new(Arc::new(EndpointConfig::default()), Some(Arc::new(server_config)), false, seed), connection: None, addr: SERVER.parse().unwrap() };
    let mut client = Peer { endpoint: Endpoint::new(Arc::new(EndpointConfig::default()), None, false, seed), connection: None, addr: CLIENT.parse().unwrap() };
    client.connection = Some(client.endpoint.connect(start, client_config, server.addr, "localhost").unwrap());
    let mut path: VecDeque<InFlight> = VecDeque::new();
    let mut now = Duration::ZERO;
    let (mut stream, mut client_stream) = (None::<StreamId>, None::<StreamId>);
    let (mut written, mut next_write, mut received, mut finished) = (0usize, Duration::ZERO, 0usize, false);
    let payload = vec![0x5a; workload.chunk];
    let mut buf = Vec::new();
    while !finished {
        assert!(now < VIRTUAL_LIMIT, "transfer stuck at {received} bytes after {now:?}");
        // Datagrams that have arrived.
        let (arrived, still): (Vec<InFlight>, Vec<InFlight>) = path.drain(..).partition(|d| d.arrive <= now);
        path.extend(still);
        for datagram in arrived {
            let (to, from) = if datagram.to_server { (&mut server, client.addr) } else { (&mut client, server.addr) };
            receive(to, from, start + now, datagram.data, &mut buf);
        }
        for peer in [&mut server, &mut client] {
            if let Some((_, conn)) = peer.connection.as_mut() {
                if conn.poll_timeout().is_some_and(|t| t <= start + now) {
                    conn.handle_timeout(start + now);
                }
            }
        }
        // The applications.
        if let Some((_, conn)) = server.connection.as_mut() {
            while let Some(event) = conn.poll() {
                if matches!(event, Event::Connected) {
                    stream = conn.streams().open(Dir::Uni);
                }
            }
            if let Some(id) = stream {
                while written < workload.chunks * workload.chunk && next_write <= now {
                    let offset = written % workload.chunk;
                    let Ok(n) = conn.send_stream(id).write(&payload[offset..]) else { break };
                    written += n;
                    if written % workload.chunk == 0 {
                        next_write = now + workload.interval;
                    }
                }
                if written == workload.chunks * workload.chunk {
                    let _ = conn.send_stream(id).finish();
                }
            }
        }
        if let Some((_, conn)) = client.connection.as_mut() {
            while conn.poll().is_some() {}
            if client_stream.is_none() {
                client_stream = conn.streams().accept(Dir::Uni);
            }
            if let Some(id) = client_stream {
                if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
                    loop {
                        match chunks.next(usize::MAX) {
                            Ok(Some(chunk)) => received += chunk.bytes.len(),
                            Ok(None) => {
                                finished = true;
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    let _ = chunks.finalize();
                }
            }
        }
        // What the connections send now.
        for (peer, to_server) in [(&mut server, false), (&mut client, true)] {
            let Some((handle, conn)) = peer.connection.as_mut() else { continue };
            while let Some(event) = conn.poll_endpoint_events() {
                if let Some(back) = peer.endpoint.handle_event(*handle, event) {
                    conn.handle_event(back);
                }
            }
            buf.clear();
            while let Some(transmit) = conn.poll_transmit(start + now, 1, &mut buf) {
                let direction = if to_server { &mut up } else { &mut down };
                let arrive = direction.arrival(now, transmit.size);
                path.push_back(InFlight { arrive, to_server, data: buf[..transmit.size].to_vec() });
                buf.clear();
            }
        }
        // The next thing that happens.
        let mut next = path.iter().map(|d| d.arrive).min();
        for peer in [&mut server, &mut client] {
            if let Some(t) = peer.connection.as_mut().and_then(|(_, c)| c.poll_timeout()) {
                let t = t.saturating_duration_since(start);
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        if stream.is_some() && written < workload.chunks * workload.chunk && next_write > now {
            next = Some(next.map_or(next_write, |n| n.min(next_write)));
        }
        if !finished {
            now = next.unwrap_or(VIRTUAL_LIMIT).max(now);
        }
    }
    let stats = |p: &Peer| p.connection.as_ref().map(|(_, c)| c.stats()).unwrap();
    Outcome { server: stats(&server), client: stats(&client), received }
}

fn receive(peer: &mut Peer, from: SocketAddr, now: Instant, data: Vec<u8>, buf: &mut Vec<u8>) {
    buf.clear();
    match peer.endpoint.handle(now, from, None, None, BytesMut::from(&data[..]), buf) {
        Some(DatagramEvent::NewConnection(incoming)) => {
            let mut response = Vec::new();
            peer.connection = Some(peer.endpoint.accept(incoming, now, &mut response, None).unwrap());
        }
        Some(DatagramEvent::ConnectionEvent(_, event)) => {
            if let Some((_, conn)) = peer.connection.as_mut() {
                conn.handle_event(event);
            }
        }
        Some(DatagramEvent::Response(_)) | None => {}
    }
}

fn with_controller(spec: &str) -> QuicOptions {
    QuicOptions { controller: cc::ControllerSpec::parse(spec).unwrap(), ..QuicOptions::default() }
}

const MBIT: u64 = 1_000_000;

#[test]
fn ack_decimation_cuts_the_receivers_acks_by_about_its_factor() {
    // 2 MB down a 50 Mbit/s, 2 x 20 ms path: no loss, no reordering.
    let bulk = Workload { chunks: 2000, chunk: 1000, interval: Duration::ZERO };
    let run = |spec: &str| {
        let outcome = transfer(&with_controller(spec), &bulk, Direction::plain(50 * MBIT, Duration::from_millis(20)), Direction::plain(50 * MBIT, Duration::from_millis(20)));
        assert_eq!(outcome.received, 2_000_000, "{spec}");
        (outcome.client.frame_tx.acks, outcome.client.udp_rx.datagrams, outcome.server.frame_rx.acks)
    };
    let (default_acks, default_datagrams, default_seen) = run("cubic");
    let (bquic_acks, bquic_datagrams, bquic_seen) = run("bquic");
    eprintln!("cubic: {default_acks} ACKs for {default_datagrams} datagrams; bquic: {bquic_acks} for {bquic_datagrams}");
    assert!(default_seen <= default_acks && bquic_seen <= bquic_acks, "the server sees the ACKs sent, but the last ones in flight");
    let default_ratio = default_acks as f64 / default_datagrams as f64;
    let bquic_ratio = bquic_acks as f64 / bquic_datagrams as f64;
    // quinn's default acknowledges every second ack-eliciting packet; BQUIC asks for every 10th.
    assert!((0.4..=0.6).contains(&default_ratio), "default: {default_ratio:.3} ACKs per datagram");
    assert!((0.08..=0.15).contains(&bquic_ratio), "bquic: {bquic_ratio:.3} ACKs per datagram");
    assert!(default_ratio / bquic_ratio >= 4.0, "decimation factor {:.1}", default_ratio / bquic_ratio);
}

#[test]
fn the_time_threshold_tolerates_a_delay_swing_the_default_declares_lost() {
    // An app-limited sender (one 1000-byte chunk every 6 ms over 2 x 20 ms) whose 30th large
    // datagram is held 15 ms longer than the rest: the two sent after it overtake it (too few
    // for the packet threshold of 3), so only the time threshold can call it lost. 9/8 of the
    // RTT (45 ms) expires before it is acknowledged (55 ms); BQUIC's 1.5 (60 ms) does not.
    let paced = Workload { chunks: 60, chunk: 1000, interval: Duration::from_millis(6) };
    let run = |options: QuicOptions| {
        let mut large = 0;
        let swing = move |size: usize, _sent: Duration| {
            if size > 900 {
                large += 1;
            }
            if size > 900 && large == 30 {
                Duration::from_millis(15)
            } else {
                Duration::ZERO
            }
        };
        let down = Direction { extra: Box::new(swing), ..Direction::plain(50 * MBIT, Duration::from_millis(20)) };
        let outcome = transfer(&options, &paced, down, Direction::plain(50 * MBIT, Duration::from_millis(20)));
        assert_eq!(outcome.received, 60_000);
        (outcome.server.path.lost_packets, outcome.server.path.congestion_events)
    };
    let default = run(with_controller("cubic"));
    let bquic_threshold = cc::registry::BQUIC_TRANSPORT.time_threshold;
    let raised = run(QuicOptions { time_threshold: bquic_threshold, ..with_controller("cubic") });
    eprintln!("lost packets, congestion events: default {default:?}, time threshold {bquic_threshold:?}: {raised:?}");
    assert_eq!(default, (1, 1), "the default declares the held datagram lost and reduces its window");
    assert_eq!(raised, (0, 0), "the raised threshold waits for it");
    // The whole profile too: with ACK decimation the late packet is still acknowledged at
    // once (reordering threshold 1), not up to 25 ms later, past the 1.5 RTT.
    assert_eq!(run(with_controller("bquic")), (0, 0));
}
