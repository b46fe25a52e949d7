//! Network behaviour on a virtual clock.

use super::*;
use crate::{MS, US};
use rand_chacha::ChaCha8Rng;

/// A super-packet of three segments, as `carries_whole` asks about.
const SHAPE: SegmentShape = SegmentShape { segments: 3, segment_size: 1500, size: 3100 };

fn host(name: &str, side: Side, addr: [u8; 4], up: LinkConfig, down: LinkConfig) -> HostSpec {
    HostSpec { name: name.into(), side, addresses: vec![Ipv4Addr::from(addr)], up, down }
}

fn two_path_spec(selection: PathSelection) -> TopologySpec {
    let access = LinkConfig::with_rate(1_000_000_000, 0);
    TopologySpec {
        seed: 9,
        hosts: vec![
            host("client", Side::Left, [10, 77, 0, 1], access.clone(), access.clone()),
            host("cross", Side::Left, [10, 77, 0, 2], access.clone(), access.clone()),
            host("server", Side::Right, [10, 77, 1, 1], access.clone(), access.clone()),
        ],
        paths: vec![
            PathSpec { name: "p0".into(), forward: LinkConfig::with_rate(10_000_000, 5 * MS), reverse: LinkConfig::default() },
            PathSpec { name: "p1".into(), forward: LinkConfig::with_rate(10_000_000, 5 * MS), reverse: LinkConfig::default() },
        ],
        selection,
        pins: vec![],
    }
}

fn flow(sport: u16) -> FlowKey {
    FlowKey { src: Ipv4Addr::new(10, 77, 0, 1), dst: Ipv4Addr::new(10, 77, 1, 1), sport, dport: 5201, proto: 6 }
}

fn run_until_idle<P: Segmented>(net: &mut Network<P>) -> Vec<Delivered<P>> {
    let mut out = Vec::new();
    while let Some(t) = net.next_wakeup() {
        net.poll(t, &mut out);
    }
    out
}

#[test]
fn packet_crosses_three_links_with_exact_timing() {
    let mut spec = two_path_spec(PathSelection::EcmpXor);
    spec.hosts[0].up = LinkConfig::with_rate(100_000_000, 2 * MS); // 120 us per 1500 B
    spec.hosts[2].down = LinkConfig::with_rate(100_000_000, 3 * MS);
    let mut net: Network<u32> = Network::new(spec).unwrap();
    assert!(net.send(0, HostId(0), Packet::new(1500, flow(1000), 0, 7)));
    let out = run_until_idle(&mut net);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].host, HostId(2));
    assert_eq!(out[0].packet.payload, 7);
    // 120 us + 2 ms, 1.2 ms + 5 ms, 120 us + 3 ms
    assert_eq!(out[0].time, 120 * US + 2 * MS + 1200 * US + 5 * MS + 120 * US + 3 * MS);
    let c: HashMap<&str, LinkCounters> = net.counters().collect();
    assert_eq!(c["client.up"].delivered_packets, 1);
    assert_eq!(c["p0.forward"].delivered_packets + c["p1.forward"].delivered_packets, 1);
    assert_eq!(c["server.down"].delivered_bytes, 1500);
}

#[test]
fn unroutable_destination_is_refused() {
    let mut net: Network<()> = Network::new(two_path_spec(PathSelection::EcmpXor)).unwrap();
    let mut f = flow(1);
    f.dst = Ipv4Addr::new(192, 0, 2, 1);
    assert!(!net.send(0, HostId(0), Packet::new(100, f, 0, ())));
    assert_eq!(net.next_wakeup(), None);
}

#[test]
fn same_side_hosts_skip_the_paths() {
    let mut net: Network<()> = Network::new(two_path_spec(PathSelection::EcmpXor)).unwrap();
    let mut f = flow(1);
    f.dst = Ipv4Addr::new(10, 77, 0, 2);
    assert!(net.send(0, HostId(0), Packet::new(100, f, 0, ())));
    let out = run_until_idle(&mut net);
    assert_eq!(out[0].host, HostId(1));
    let c: HashMap<&str, LinkCounters> = net.counters().collect();
    assert_eq!(c["p0.forward"].enqueued_packets + c["p1.forward"].enqueued_packets, 0);
}

#[test]
fn xor_hash_is_the_seed_formula_and_symmetric() {
    let mut net: Network<()> = Network::new(two_path_spec(PathSelection::EcmpXor)).unwrap();
    for sport in 40000..40016u16 {
        let f = flow(sport);
        let expected = (u32::from(f.src) ^ u32::from(f.dst) ^ u32::from(sport) ^ 5201 ^ 6) % 2;
        assert_eq!(net.select_path(HostId(0), HostId(2), &f).0, expected);
        assert_eq!(net.select_path(HostId(2), HostId(0), &f.reversed()).0, expected);
    }
}

#[test]
fn ecmp_keeps_flows_on_one_path_and_spreads_them() {
    for selection in [PathSelection::EcmpXor, PathSelection::EcmpHash] {
        let mut net: Network<u16> = Network::new(two_path_spec(selection)).unwrap();
        net.record_events(true);
        let flows = 64u16;
        for round in 0..20u64 {
            for s in 0..flows {
                net.send(round * 10 * MS + u64::from(s) * US, HostId(0), Packet::new(1000, flow(40000 + s), 0, s));
            }
            let mut out = Vec::new();
            net.poll(round * 10 * MS + MS, &mut out);
        }
        run_until_idle(&mut net);
        let p0 = net.link_id("p0.forward").unwrap().0;
        let p1 = net.link_id("p1.forward").unwrap().0;
        let mut paths_of: HashMap<u16, std::collections::HashSet<u32>> = HashMap::new();
        for e in net.drain_events() {
            if e.link == p0 || e.link == p1 {
                paths_of.entry(e.flow.sport).or_default().insert(e.link);
            }
        }
        assert_eq!(paths_of.len(), usize::from(flows));
        assert!(paths_of.values().all(|s| s.len() == 1), "{selection:?}: a flow changed path");
        let on_p0 = paths_of.values().filter(|s| s.contains(&p0)).count();
        assert!((16..=48).contains(&on_p0), "{selection:?}: {on_p0} of 64 flows on p0");
    }
}

#[test]
fn round_robin_alternates_per_packet() {
    let mut net: Network<()> = Network::new(two_path_spec(PathSelection::RoundRobin)).unwrap();
    for i in 0..10 {
        net.send(i * MS, HostId(0), Packet::new(100, flow(1), 0, ()));
    }
    run_until_idle(&mut net);
    let c: HashMap<&str, LinkCounters> = net.counters().collect();
    assert_eq!(c["p0.forward"].delivered_packets, 5);
    assert_eq!(c["p1.forward"].delivered_packets, 5);
}

#[test]
fn pins_override_the_hash() {
    let mut spec = two_path_spec(PathSelection::EcmpXor);
    spec.pins = vec![(HostId(1), HostId(2), PathId(1))];
    let mut net: Network<()> = Network::new(spec).unwrap();
    for sport in 0..50 {
        let mut f = flow(sport);
        f.src = Ipv4Addr::new(10, 77, 0, 2);
        assert_eq!(net.select_path(HostId(1), HostId(2), &f), PathId(1));
        assert_eq!(net.select_path(HostId(2), HostId(1), &f.reversed()), PathId(1));
    }
    let bad = net.set_routing(PathSelection::EcmpXor, &[(HostId(2), HostId(0), PathId(0))]);
    assert!(matches!(bad, Err(NetworkError::BadPin(0, _))));
}

#[test]
fn bottleneck_shared_by_two_senders_is_work_conserving() {
    let mut net: Network<()> = Network::new(two_path_spec(PathSelection::RoundRobin)).unwrap();
    let mut f2 = flow(2);
    f2.src = Ipv4Addr::new(10, 77, 0, 2);
    net.set_routing(PathSelection::EcmpXor, &[(HostId(0), HostId(2), PathId(0)), (HostId(1), HostId(2), PathId(0))]).unwrap();
    for i in 0..100 {
        net.send(0, HostId(0), Packet::new(1500, flow(1), i, ()));
        net.send(0, HostId(1), Packet::new(1500, f2, i, ()));
    }
    let out = run_until_idle(&mut net);
    assert_eq!(out.len(), 200);
    // 200 packets of 1.2 ms each on a 10 Mbit/s path, back to back after the 1 Gbit/s access.
    let last = out.iter().map(|d| d.time).max().unwrap();
    assert_eq!(last, 12 * US + 200 * 1200 * US + 5 * MS + 12 * US);
}

#[test]
fn bad_specs_are_refused() {
    let mut spec = two_path_spec(PathSelection::EcmpXor);
    spec.hosts[1].addresses = spec.hosts[0].addresses.clone();
    assert!(matches!(Network::<()>::new(spec), Err(NetworkError::DuplicateAddress(_))));
    let mut spec = two_path_spec(PathSelection::EcmpXor);
    spec.paths.clear();
    assert!(matches!(Network::<()>::new(spec), Err(NetworkError::NoPath)));
    let mut spec = two_path_spec(PathSelection::EcmpXor);
    spec.paths[1].reverse.rate = crate::Rate::BitsPerSecond(0);
    let err = Network::<()>::new(spec).err().unwrap();
    assert_eq!(err.to_string(), "p1.reverse.rate: must be greater than zero");
}

#[test]
fn delay_compensation_comes_out_of_the_propagation_delays_in_route_order() {
    let mut spec = two_path_spec(PathSelection::EcmpXor);
    spec.hosts[0].up = LinkConfig::with_rate(100_000_000, 100 * US); // 120 us per 1500 B
    spec.hosts[2].down = LinkConfig::with_rate(100_000_000, 3 * MS);
    let full = 120 * US + 100 * US + 1200 * US + 5 * MS + 120 * US + 3 * MS;
    for (compensation, expected) in [
        (0, full),
        (60 * US, full - 60 * US),            // all from client.up's 100 us
        (300 * US, full - 300 * US),          // 100 us from client.up, 200 us from the path
        (9 * MS, full - 8 * MS - 100 * US),   // every delay used up: never below zero, rates kept
    ] {
        let mut net: Network<u32> = Network::new(spec.clone()).unwrap();
        net.set_delay_compensation(compensation);
        assert_eq!(net.delay_compensation(), compensation);
        assert!(net.send(0, HostId(0), Packet::new(1500, flow(1000), 0, 7)));
        let out = run_until_idle(&mut net);
        assert_eq!(out[0].time, expected, "compensation {compensation}");
    }
}

#[test]
fn delay_compensation_keeps_a_rate_limited_stream_in_order_and_at_rate() {
    let mut net: Network<u32> = Network::new(two_path_spec(PathSelection::EcmpXor)).unwrap();
    net.set_delay_compensation(200 * US);
    for i in 0..50 {
        assert!(net.send(0, HostId(0), Packet::new(1500, flow(1000), i as u16, i)));
    }
    let out = run_until_idle(&mut net);
    let order: Vec<u32> = out.iter().map(|d| d.packet.payload).collect();
    assert_eq!(order, (0..50).collect::<Vec<_>>());
    // 1.2 ms per packet on the 10 Mbit/s path: the spacing is the rate's, the shift the credit's.
    for w in out.windows(2) {
        assert_eq!(w[1].time - w[0].time, 1200 * US);
    }
}

/// One client and one server over one path, every link direction configured alike.
fn uniform_spec(link: &LinkConfig, pins: bool) -> TopologySpec {
    TopologySpec {
        seed: 21,
        hosts: vec![
            host("client", Side::Left, [10, 77, 0, 1], link.clone(), link.clone()),
            host("server", Side::Right, [10, 77, 1, 1], link.clone(), link.clone()),
        ],
        paths: vec![
            PathSpec { name: "p0".into(), forward: link.clone(), reverse: link.clone() },
            PathSpec { name: "p1".into(), forward: link.clone(), reverse: link.clone() },
        ],
        selection: if pins { PathSelection::EcmpHash } else { PathSelection::RoundRobin },
        pins: vec![],
    }
}

/// Each delivered wire segment as (time, host, size, ip id).
fn per_segment(delivered: &[Delivered<u32>]) -> Vec<(Nanos, HostId, u32, u16)> {
    delivered.iter().flat_map(|d| d.packet.segment_sizes().map(move |(size, id)| (d.time, d.host, size, id))).collect()
}

#[test]
fn a_packet_carried_whole_meets_the_fates_its_segments_meet_alone() {
    use crate::config::{JitterConfig, JitterDistribution, LossConfig};
    let rated = LinkConfig::with_rate(100_000_000, 2 * MS);
    let cases: Vec<(&str, LinkConfig, bool, bool)> = vec![
        // (name, every link, hashed paths (else round robin), carried whole all the way)
        ("ideal", LinkConfig::default(), true, true),
        ("delay", LinkConfig { delay: 5 * MS, ..LinkConfig::default() }, true, true),
        ("round robin", LinkConfig { delay: 5 * MS, ..LinkConfig::default() }, false, false),
        ("rate", rated, true, false),
        ("loss", LinkConfig { loss: Some(LossConfig::Bernoulli { p: 0.3 }), ..LinkConfig::default() }, true, false),
        (
            "jitter",
            LinkConfig {
                delay: 5 * MS,
                jitter: Some(JitterConfig { std: MS, dist: JitterDistribution::Normal, preserve_order: false }),
                ..LinkConfig::default()
            },
            true,
            false,
        ),
    ];
    // Super-packets of 1, 2, 7 and 45 segments (1500 bytes each, a short last one) and a lone ACK.
    let sends: [(Nanos, u32, u32); 5] = [(0, 45, 700), (10 * US, 7, 100), (MS, 1, 1500), (MS + 5, 2, 1), (3 * MS, 1, 52)];
    for (name, link, hashed, whole) in cases {
        for events in [false, true] {
            let mut carried = Network::new(uniform_spec(&link, hashed)).unwrap();
            let mut alone = Network::new(uniform_spec(&link, hashed)).unwrap();
            carried.record_events(events);
            alone.record_events(events);
            assert_eq!(carried.carries_whole(HostId(0), &flow(1000), SHAPE), whole && !events, "{name}");
            for (i, &(t, segments, last)) in sends.iter().enumerate() {
                let size = (segments - 1) * 1500 + last;
                let ip_id = 100 * i as u16;
                let segment_size = if segments > 1 { 1500 } else { size };
                carried.send(t, HostId(0), Packet::segmented(size, segment_size, segments, flow(1000), ip_id, i as u32));
                for s in 0..segments {
                    let size = if s + 1 < segments { 1500 } else { last };
                    alone.send(t, HostId(0), Packet::new(size, flow(1000), ip_id.wrapping_add(s as u16), i as u32));
                }
            }
            let (got, want) = (run_until_idle(&mut carried), run_until_idle(&mut alone));
            assert_eq!(per_segment(&got), per_segment(&want), "{name}, events {events}");
            let tags = |d: &[Delivered<u32>]| d.iter().flat_map(|d| vec![d.packet.payload; d.packet.segments as usize]).collect::<Vec<_>>();
            assert_eq!(tags(&got), tags(&want), "{name}");
            assert_eq!(got.iter().any(|d| d.packet.segments > 1), whole && !events, "{name}: carried whole");
            let counters = |n: &Network<u32>| n.counters().map(|(name, c)| (name.to_string(), c)).collect::<Vec<_>>();
            assert_eq!(counters(&carried), counters(&alone), "{name}, events {events}");
            let log = |n: &mut Network<u32>| n.drain_events().collect::<Vec<_>>();
            assert_eq!(log(&mut carried), log(&mut alone), "{name}");
        }
    }
}

#[test]
fn a_packet_carried_whole_counts_its_segments_in_flight_and_in_the_log() {
    let link = LinkConfig { delay: 5 * MS, ..LinkConfig::default() };
    let mut net = Network::new(uniform_spec(&link, true)).unwrap();
    net.send(0, HostId(0), Packet::segmented(3 * 1500 + 60, 1500, 4, flow(1000), 7, 0u32));
    let up = net.link(LinkId(0)).unwrap().counters();
    assert_eq!((up.enqueued_packets, up.enqueued_bytes, up.in_flight_packets), (4, 4560, 4));
    assert_eq!((up.max_queue_packets, up.max_queue_bytes), (1, 1500), "each segment alone in the queue");
    // The log starts while it is in flight: its delivery is logged per segment, and from the
    // next link on it travels split.
    net.record_events(true);
    let delivered = run_until_idle(&mut net);
    assert_eq!(delivered.len(), 4);
    let events: Vec<Event> = net.drain_events().collect();
    assert_eq!(events.len(), 4 + 2 * (4 + 4), "per segment: a delivery from the first link, then an enqueue and a delivery on two");
    let first_link: Vec<(u32, u16)> = events.iter().filter(|e| e.link == 0).map(|e| (e.size, e.ip_id)).collect();
    assert_eq!(first_link, vec![(1500, 7), (1500, 8), (1500, 9), (60, 10)]);
}

#[test]
fn hosts_on_one_side_carry_a_packet_whole_over_their_two_access_links() {
    let delayed = LinkConfig { delay: 2 * MS, ..LinkConfig::default() };
    let mut spec = uniform_spec(&delayed, true);
    spec.hosts.push(host("peer", Side::Left, [10, 77, 0, 9], delayed.clone(), delayed.clone()));
    let mut net = Network::new(spec).unwrap();
    let to_peer = FlowKey { dst: Ipv4Addr::new(10, 77, 0, 9), ..flow(1000) };
    assert!(net.carries_whole(HostId(0), &to_peer, SHAPE));
    net.send(0, HostId(0), Packet::segmented(2 * 1500 + 100, 1500, 3, to_peer, 1, 5u32));
    let delivered = run_until_idle(&mut net);
    assert_eq!(per_segment(&delivered), vec![(4 * MS, HostId(2), 1500, 1), (4 * MS, HostId(2), 1500, 2), (4 * MS, HostId(2), 100, 3)]);
    assert_eq!(delivered.len(), 1, "whole over both access links");
    let peer_down = net.link_id("peer.down").unwrap();
    assert_eq!(net.link(peer_down).unwrap().counters().delivered_packets, 3);
    assert!(!net.carries_whole(HostId(0), &FlowKey { dst: Ipv4Addr::new(10, 99, 0, 1), ..flow(1000) }, SHAPE), "no such host");
    assert!(!net.carries_whole(HostId(7), &to_peer, SHAPE), "no such sender");
}

/// Each delivered wire segment as (time, host, size, ip id, whether it was carried whole).
fn per_segment_marked(delivered: &[Delivered<u32>]) -> Vec<(Nanos, HostId, u32, u16, bool)> {
    let segments = |d: &Delivered<u32>| d.packet.segment_sizes().map(move |(size, id)| (d.time, d.host, size, id, d.packet.segments > 1)).collect::<Vec<_>>();
    delivered.iter().flat_map(segments).collect()
}

#[test]
fn a_rated_link_carries_a_packet_whole_within_the_spread_and_counts_as_its_segments() {
    use crate::config::{QueueConfig, QueueLimit};
    const SPREAD: Nanos = MS;
    // 100 Mbit/s: a 1500-byte segment takes 120 us, so up to 9 of them leave within 1 ms.
    // (queue limit, segments it drops: 32 of the 45 and 2 of the 8 by packets, more by bytes)
    for (limit, drops) in [(QueueLimit::Packets(12), 34), (QueueLimit::Bytes(15_000), 38)] {
        let mut spec = uniform_spec(&LinkConfig { delay: MS, ..LinkConfig::default() }, true);
        for path in &mut spec.paths {
            path.forward = LinkConfig { queue: QueueConfig { limit, ..QueueConfig::default() }, ..LinkConfig::with_rate(100_000_000, 2 * MS) };
        }
        let mut carried: Network<u32> = Network::new(spec.clone()).unwrap();
        let mut alone: Network<u32> = Network::new(spec).unwrap();
        carried.set_whole_spread(SPREAD);
        alone.set_whole_spread(SPREAD);
        let ten = SegmentShape { segments: 10, segment_size: 1500, size: 15_000 };
        assert!(!carried.carries_whole(HostId(0), &flow(1000), ten), "{limit:?}: 9 x 120 us is beyond the spread");
        assert!(carried.carries_whole(HostId(0), &flow(1000), SHAPE), "{limit:?}");
        assert_eq!(carried.whole_segments(HostId(0), &flow(1000), ten), 9, "{limit:?}: 8 x 120 us is within it");
        assert_eq!(carried.whole_segments(HostId(0), &flow(1000), SHAPE), 3, "{limit:?}");
        // (time, segments, size of the last): too spread to go whole; one while the link is idle;
        // a single packet and a super-packet that no longer fits while it drains; more arriving
        // exactly when a waiting segment starts.
        let sends: [(Nanos, u32, u32); 9] = [
            (0, 45, 700),
            (6 * MS, 7, 100),
            (6 * MS + 100 * US, 1, 1500),
            (6 * MS + 200 * US, 8, 1500),
            (8 * MS, 9, 60),
            (8 * MS + 5, 2, 1),
            (8 * MS + 300 * US, 1, 52),
            (8 * MS + 310 * US, 3, 500),
            (8 * MS + 360 * US, 1, 1500),
        ];
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for (i, &(t, segments, last)) in sends.iter().enumerate() {
            let size = (segments - 1) * 1500 + last;
            let ip_id = 100 * i as u16;
            let segment_size = if segments > 1 { 1500 } else { size };
            carried.poll(t, &mut got);
            alone.poll(t, &mut want);
            carried.send(t, HostId(0), Packet::segmented(size, segment_size, segments, flow(1000), ip_id, i as u32));
            for s in 0..segments {
                let size = if s + 1 < segments { 1500 } else { last };
                alone.send(t, HostId(0), Packet::new(size, flow(1000), ip_id.wrapping_add(s as u16), i as u32));
            }
        }
        got.extend(run_until_idle(&mut carried));
        want.extend(run_until_idle(&mut alone));
        assert!(got.iter().filter(|d| d.packet.segments > 1).count() >= 3, "{limit:?}: some crossed whole");
        let (got, want) = (per_segment_marked(&got), per_segment_marked(&want));
        assert_eq!(got.len(), want.len(), "{limit:?}: the same segments arrive");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!((g.1, g.2, g.3), (w.1, w.2, w.3), "{limit:?}: segment {i} in order");
            if g.4 {
                assert!(g.0 >= w.0 && g.0 - w.0 <= SPREAD, "{limit:?}: segment {i} at {} vs {} alone", g.0, w.0);
            } else {
                assert_eq!(g.0, w.0, "{limit:?}: segment {i}, not carried whole, keeps its time");
            }
            let last_of_whole = g.4 && got.get(i + 1).is_none_or(|n| n.0 != g.0 || n.3 != g.3.wrapping_add(1));
            if last_of_whole {
                assert_eq!(g.0, w.0, "{limit:?}: a packet carried whole leaves with its last segment");
            }
        }
        let counters = |n: &Network<u32>| n.counters().map(|(name, c)| (name.to_string(), c)).collect::<Vec<_>>();
        assert_eq!(counters(&carried), counters(&alone), "{limit:?}: every counter as per segment");
        let dropped: u64 = carried.counters().map(|(_, c)| c.dropped_packets.queue_full).sum();
        assert_eq!(dropped, drops, "{limit:?}: the queue overflows");
    }
}

#[test]
fn a_packet_waiting_whole_is_split_when_the_log_starts_or_its_link_changes() {
    let mut spec = uniform_spec(&LinkConfig::default(), true);
    for path in &mut spec.paths {
        path.forward = LinkConfig::with_rate(100_000_000, 0);
    }
    let rated = |net: &Network<u32>| {
        let forward = net.counters().filter(|(name, _)| name.ends_with(".forward")).map(|(_, c)| c);
        forward.fold(0, |sum, c| sum + c.enqueued_packets)
    };
    let mut net: Network<u32> = Network::new(spec).unwrap();
    net.set_whole_spread(MS);
    // Two super-packets: the first starts at once, the second waits whole behind it.
    net.send(0, HostId(0), Packet::segmented(3000, 1500, 2, flow(1000), 10, 1));
    net.send(0, HostId(0), Packet::segmented(3000, 1500, 2, flow(1000), 20, 2));
    let mut delivered = Vec::new();
    net.poll(0, &mut delivered);
    assert_eq!(rated(&net), 4);
    net.record_events(true);
    delivered.extend(run_until_idle(&mut net));
    assert!(delivered.iter().all(|d| d.packet.segments == 1), "split at the next link, as the log runs");
    let forward_deliveries: Vec<(Nanos, u16)> =
        net.drain_events().filter(|e| e.kind == crate::EventKind::Deliver && e.link >= 4).map(|e| (e.time, e.ip_id)).collect();
    // The one in transmission stays whole (its segments logged as it leaves), the waiting one
    // was split.
    assert_eq!(forward_deliveries, vec![(240 * US, 10), (240 * US, 11), (360 * US, 20), (480 * US, 21)]);
}

/// One random scenario for the differential test below: a client and a cross host on the left,
/// a server on the right, one rated link somewhere, delay-only links elsewhere (or, in some
/// scenarios, random loss on a second link, which forbids any spread on the routes through it).
fn random_scenario(rng: &mut ChaCha8Rng) -> (TopologySpec, Nanos, bool) {
    use crate::config::{LossConfig, QueueConfig, QueueLimit};
    use rand::Rng;
    let delay_only = |rng: &mut ChaCha8Rng| LinkConfig { delay: rng.random_range(0..3 * MS), ..LinkConfig::default() };
    let mut spec = uniform_spec(&LinkConfig::default(), true);
    spec.hosts.push(host("cross", Side::Left, [10, 77, 0, 2], LinkConfig::default(), LinkConfig::default()));
    let mut configs: Vec<&mut LinkConfig> = Vec::new();
    for h in &mut spec.hosts {
        configs.extend([&mut h.up, &mut h.down]);
    }
    for p in &mut spec.paths {
        configs.extend([&mut p.forward, &mut p.reverse]);
    }
    for config in configs.iter_mut() {
        **config = delay_only(rng);
    }
    // Data flows client/cross -> server over client.up or cross.up, p0 or p1 forward, server.down.
    let data_links = [0usize, 3, 6, 8, 4];
    let rated = data_links[rng.random_range(0..data_links.len())];
    let rate = [10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000][rng.random_range(0..4)];
    let limit = if rng.random_bool(0.5) {
        QueueLimit::Packets(rng.random_range(2..80))
    } else {
        QueueLimit::Bytes(rng.random_range(3_000..120_000))
    };
    let delay = configs[rated].delay;
    *configs[rated] = LinkConfig { queue: QueueConfig { limit, ..QueueConfig::default() }, ..LinkConfig::with_rate(rate, delay) };
    let lossy = rng.random_bool(0.25);
    if lossy {
        let other = data_links.iter().copied().find(|&l| l != rated).unwrap_or(0);
        configs[other].loss = Some(LossConfig::Bernoulli { p: 0.2 });
    }
    let spread = [0, 20 * US, 100 * US, MS, 20 * MS][rng.random_range(0..5)];
    (spec, spread, lossy)
}

#[test]
fn packets_carried_whole_over_random_routes_differ_from_their_segments_only_within_the_spread() {
    use rand::Rng;
    use rand::SeedableRng;
    let (mut whole_deliveries, mut pieces) = (0, 0);
    for seed in 0..300u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (spec, spread, lossy) = random_scenario(&mut rng);
        let mut carried: Network<u32> = Network::new(spec.clone()).unwrap();
        let mut alone: Network<u32> = Network::new(spec).unwrap();
        carried.set_whole_spread(spread);
        alone.set_whole_spread(spread);
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let mut t = 0;
        for i in 0..40u32 {
            let gap = [10 * US, 200 * US, 2 * MS][rng.random_range(0..3)];
            t += rng.random_range(0..gap);
            let from = if rng.random_bool(0.7) { 0 } else { 2 };
            let src = Ipv4Addr::new(10, 77, 0, if from == 0 { 1 } else { 2 });
            let flow = FlowKey { src, ..flow(1000 + from as u16) };
            let segments = if rng.random_bool(0.3) { 1 } else { rng.random_range(2..=45) };
            let last = rng.random_range(1..=1500);
            let size = (segments - 1) * 1500 + last;
            let ip_id = (i * 64) as u16;
            carried.poll(t, &mut got);
            alone.poll(t, &mut want);
            // As the emulator does: whole if the route takes it whole now, else in pieces of as
            // many segments as it takes whole (segments alone where that is 1).
            let shape = SegmentShape { segments, segment_size: 1500, size };
            let piece = if segments > 1 && carried.carries_whole(HostId(from), &flow, shape) {
                segments
            } else {
                carried.whole_segments(HostId(from), &flow, shape).min(segments)
            };
            pieces += u32::from(piece > 1 && piece < segments);
            for first in (0..segments).step_by(piece as usize) {
                let count = piece.min(segments - first);
                let size = if first + count < segments { count * 1500 } else { (count - 1) * 1500 + last };
                let id = ip_id.wrapping_add(first as u16);
                carried.send(t, HostId(from), Packet::segmented(size, if count > 1 { 1500 } else { size }, count, flow, id, i));
            }
            for s in 0..segments {
                let size = if s + 1 < segments { 1500 } else { last };
                alone.send(t, HostId(from), Packet::new(size, flow, ip_id.wrapping_add(s as u16), i));
            }
        }
        got.extend(run_until_idle(&mut carried));
        want.extend(run_until_idle(&mut alone));
        let counters = |n: &Network<u32>| n.counters().map(|(name, c)| (name.to_string(), c)).collect::<Vec<_>>();
        assert_eq!(counters(&carried), counters(&alone), "seed {seed}: every counter as per segment");
        whole_deliveries += got.iter().filter(|d| d.packet.segments > 1).count();
        // Per sender, the same segments in the same order; each no earlier than alone and at
        // most the spread later (exactly alone where the route also has loss: no spread there).
        for sender in [1u8, 2] {
            let of = |list: &[Delivered<u32>]| {
                let from: Vec<Delivered<u32>> = list.iter().filter(|d| d.packet.flow.src.octets()[3] == sender).map(|d| Delivered { time: d.time, host: d.host, packet: d.packet.clone() }).collect();
                per_segment_marked(&from)
            };
            let (g, w) = (of(&got), of(&want));
            let from = HostId(if sender == 1 { 0 } else { 2 });
            let path = carried.known_path(from, HostId(1), &flow(1000)).unwrap_or(None);
            let (hops, len) = carried.hops(from, HostId(1), path);
            let allowed = carried.whole_spread_on(&hops[..usize::from(len)]);
            let route = &hops[..usize::from(len)];
            let has = |f: &dyn Fn(&LinkConfig) -> bool| route.iter().any(|&l| f(carried.links[l as usize].config()));
            if lossy && has(&|c| c.loss.is_some()) && has(&|c| c.rate != crate::config::Rate::Unlimited) {
                assert_eq!(allowed, 0, "seed {seed}: a route with loss behind a rate gets no spread");
            }
            assert_eq!(g.len(), w.len(), "seed {seed}, sender {sender}");
            for (a, b) in g.iter().zip(&w) {
                assert_eq!((a.1, a.2, a.3), (b.1, b.2, b.3), "seed {seed}, sender {sender}: in order");
                assert!(a.0 >= b.0 && a.0 - b.0 <= allowed, "seed {seed}: {} vs {} alone, spread {allowed}", a.0, b.0);
            }
        }
    }
    assert!(whole_deliveries > 300, "the scenarios carried packets whole ({whole_deliveries})");
    assert!(pieces > 100, "the scenarios sent packets in pieces ({pieces})");
}
