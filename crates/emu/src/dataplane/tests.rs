use std::path::Path;
use std::sync::Arc;

use netmodel::{LinkConfig, Rate, MS};

use super::*;
use crate::frame::GsoShape;
use crate::testkit::{self, udp, Scratch};
use crate::writer;

const CLIENT: [u8; 4] = [10, 77, 0, 1];
const SERVER: [u8; 4] = [10, 77, 1, 1];

fn plane() -> DataPlane {
    DataPlane::new(testkit::network(&testkit::topology(Path::new("."))), 1_000_000_000)
}

/// Delivers what is due at `now`; returns (host, size) of each packet written.
fn forward(plane: &mut DataPlane, now: Nanos) -> Vec<(usize, usize)> {
    let mut sent = Vec::new();
    plane.forward_due(now, |host, packet| {
        sent.push((host, packet.bytes.len()));
        true
    });
    sent
}

fn counters(plane: &mut DataPlane) -> (Vec<LinkCounters>, EmulatorCounters) {
    match plane.apply(0, Command::ReadCounters) {
        Outcome::Counters(links, emulator) => (links, emulator),
        _ => panic!("counters expected"),
    }
}

fn link(plane: &DataPlane, name: &str) -> LinkId {
    plane.network().link_id(name).unwrap()
}

#[test]
fn packets_cross_the_model_on_time_and_are_counted() {
    let mut plane = plane();
    plane.ingest(0, 0, Frame::complete(udp(CLIENT, SERVER, 100)));
    plane.ingest(0, 0, Frame::complete(udp(CLIENT, [10, 99, 0, 1], 100)));
    plane.ingest(0, 0, Frame::complete(vec![0x60, 0, 0, 0]));
    assert!(forward(&mut plane, 5 * MS - 1).is_empty(), "the uplink delays 5 ms");
    assert_eq!(plane.next_wakeup(), Some(5 * MS));
    assert_eq!(forward(&mut plane, 5 * MS + 20_000), [(1, 100)]);
    let (links, emulator) = counters(&mut plane);
    assert_eq!(links[link(&plane, "client.up").0 as usize].delivered_packets, 1);
    assert_eq!((emulator.rx_packets, emulator.tx_packets, emulator.unroutable, emulator.non_ipv4), (3, 1, 1, 1));
    assert_eq!((emulator.delivery_late.packets, emulator.delivery_late.max_ns), (1, 20_000));
    plane.forward_due(6 * MS, |_, _| false);
    plane.ingest(6 * MS, 1, Frame::complete(udp(SERVER, CLIENT, 100)));
    plane.forward_due(6 * MS, |_, _| false);
    assert_eq!(counters(&mut plane).1.tx_errors, 1);
    assert!(matches!(plane.apply(0, Command::ResetCounters), Outcome::Done));
    let (links, emulator) = counters(&mut plane);
    assert_eq!((links[0].enqueued_packets, emulator.rx_packets, emulator.delivery_late.packets), (0, 0, 0));
}

#[test]
fn offload_reads_and_failed_batches_are_counted() {
    let mut plane = plane();
    plane.count_read(1);
    plane.count_read(44);
    plane.count_read(2);
    plane.count_malformed();
    plane.count_tx_errors(3);
    let emulator = counters(&mut plane).1;
    assert_eq!((emulator.rx_super_packets, emulator.rx_malformed, emulator.tx_errors), (2, 1, 3));
    assert!(matches!(plane.apply(0, Command::ResetCounters), Outcome::Done));
    let emulator = counters(&mut plane).1;
    assert_eq!((emulator.rx_super_packets, emulator.rx_malformed, emulator.tx_errors), (0, 0, 0));
}

#[test]
fn commands_change_the_model_at_the_moment_given() {
    let mut plane = plane();
    let p0 = link(&plane, "p0.forward");
    let config = LinkConfig::with_rate(7_000_000, 3 * MS);
    let outcome = plane.apply(2 * MS, Command::Reconfigure { links: vec![(p0, config.clone())], seed: Some(4) });
    assert!(matches!(outcome, Outcome::Done));
    assert_eq!(plane.network().link(p0).unwrap().config(), &config);
    assert!(matches!(plane.apply(0, Command::CompensateDelay(90_000)), Outcome::Done));
    assert_eq!(plane.network().delay_compensation(), 90_000);
    assert_eq!(counters(&mut plane).1.delay_compensation_ns, 90_000);
    let bad = LinkConfig { rate: Rate::BitsPerSecond(0), ..LinkConfig::default() };
    assert!(matches!(plane.apply(0, Command::Reconfigure { links: vec![(p0, bad)], seed: None }), Outcome::Refused(_)));
    assert!(!plane.stopping());
    assert!(matches!(plane.apply(0, Command::Shutdown), Outcome::Done));
    assert!(plane.stopping());
}

#[test]
fn captures_see_both_directions_of_a_host_and_finish_off_the_loop() {
    let scratch = Scratch::new("dataplane-pcap");
    let mut plane = plane();
    for (host, name) in [(0u32, "client.pcap"), (1, "server.pcap")] {
        let writer = writer::pcap(&scratch.0.join(name)).unwrap();
        assert!(matches!(plane.apply(0, Command::StartCapture { host: HostId(host), writer }), Outcome::Done));
    }
    let again = writer::pcap(&scratch.0.join("again.pcap")).unwrap();
    assert!(matches!(plane.apply(0, Command::StartCapture { host: HostId(0), writer: again }), Outcome::Refused(_)));
    plane.ingest(0, 0, Frame::complete(udp(CLIENT, SERVER, 200)));
    forward(&mut plane, 5 * MS);
    plane.ingest(5 * MS, 1, Frame::complete(udp(SERVER, CLIENT, 300)));
    forward(&mut plane, 5 * MS);
    for (host, written) in [(0u32, 2), (1, 2)] {
        let Outcome::Finishing(pending) = plane.apply(0, Command::StopCapture { host: HostId(host) }) else { panic!() };
        assert_eq!(pending.wait().written, written);
    }
    assert!(matches!(plane.apply(0, Command::StopCapture { host: HostId(0) }), Outcome::Refused(_)));
    assert_eq!(std::fs::metadata(scratch.0.join("client.pcap")).unwrap().len(), 24 + 2 * 16 + 200 + 300);
}

#[test]
fn events_are_recorded_only_while_the_log_runs() {
    let scratch = Scratch::new("dataplane-events");
    let mut plane = plane();
    plane.ingest(0, 0, Frame::complete(udp(CLIENT, SERVER, 100)));
    forward(&mut plane, 10 * MS);
    let names = Arc::new(vec!["client.up".to_string()]);
    let writer = writer::event_log(&scratch.0.join("ev.ndjson"), "t1", 0, names).unwrap();
    assert!(matches!(plane.apply(10 * MS, Command::StartEvents(writer)), Outcome::Done));
    plane.ingest(10 * MS, 0, Frame::complete(udp(CLIENT, SERVER, 100)));
    forward(&mut plane, 20 * MS);
    let Outcome::Finishing(pending) = plane.apply(20 * MS, Command::StopEvents) else { panic!() };
    assert_eq!(pending.wait().written, 6, "enqueue and deliver on three link directions, the first packet not");
    let lines = std::fs::read_to_string(scratch.0.join("ev.ndjson")).unwrap();
    assert_eq!(lines.lines().count(), 7, "a header and six events");
}

#[test]
fn partial_checksums_are_forwarded_as_they_are_and_captured_complete() {
    let scratch = Scratch::new("dataplane-partial");
    let mut plane = plane();
    let writer = writer::pcap(&scratch.0.join("server.pcap")).unwrap();
    assert!(matches!(plane.apply(0, Command::StartCapture { host: HostId(1), writer }), Outcome::Done));
    let mut partial = udp(CLIENT, SERVER, 300);
    partial[28..].fill(0x5a);
    let mut addresses = [0u8; 8];
    addresses.copy_from_slice(&partial[12..20]);
    let pseudo = crate::frame::pseudo_header_sum(&addresses, 17, 280);
    partial[26..28].copy_from_slice(&pseudo.to_be_bytes());
    crate::frame::set_ipv4_header_checksum(&mut partial[..20]);
    plane.ingest(0, 0, Frame::partial(partial.clone()));
    let mut sent = Vec::new();
    plane.forward_due(5 * MS, |host, frame| {
        sent.push((host, frame));
        true
    });
    assert_eq!(sent, [(1, Frame::partial(partial.clone()))], "left to the receiving device");
    let Outcome::Finishing(pending) = plane.apply(0, Command::StopCapture { host: HostId(1) }) else { panic!() };
    assert_eq!(pending.wait().written, 1);
    let file = std::fs::read(scratch.0.join("server.pcap")).unwrap();
    let captured = &file[24 + 16..];
    assert_eq!(captured.len(), 300);
    assert!(!crate::frame::tests::checksums_verify(&partial));
    assert!(crate::frame::tests::checksums_verify(captured), "the capture shows what a wire would carry");
    assert_eq!(captured[..26], partial[..26]);
    assert_eq!(captured[28..], partial[28..]);
}

/// A TCP super-packet from the client to the server (3 segments: 1448 + 1448 + 1104 payload bytes).
fn super_packet() -> (Vec<u8>, GsoShape) {
    let mut bytes = crate::vnet::tests::tcp_super_packet(&crate::vnet::tests::payload(4000), 1448, 0x10);
    let ip = crate::vnet::VNET_HEADER_LEN;
    bytes[ip + 12..ip + 16].copy_from_slice(&CLIENT);
    bytes[ip + 16..ip + 20].copy_from_slice(&SERVER);
    let shape = crate::vnet::super_packet_shape(&bytes).unwrap().unwrap();
    (bytes, shape)
}

#[test]
fn a_super_packet_crosses_whole_only_where_nothing_could_tell_its_segments_apart() {
    let scratch = Scratch::new("dataplane-whole");
    let mut plane = plane();
    let (bytes, shape) = super_packet();
    let ip = &bytes[crate::vnet::VNET_HEADER_LEN..];
    assert_eq!(plane.whole_segments(0, ip, &shape), 1, "no device is known to take super-packets yet");
    plane.set_takes_whole(1, true, false);
    plane.set_takes_whole(0, true, false);
    assert_eq!(plane.whole_segments(0, ip, &shape), 3, "ideal links but a delay, to a device that takes it");
    let mut udp_shape = shape;
    udp_shape.proto = 17;
    assert_eq!(plane.whole_segments(0, ip, &udp_shape), 1, "the server's device takes no UDP super-packets");
    // Carried whole: counted and timed per segment, written as one.
    plane.ingest(0, 0, Frame::whole(bytes.clone(), shape));
    let mut sent = Vec::new();
    plane.forward_due(5 * MS + 3_000, |host, frame| {
        sent.push((host, frame));
        true
    });
    assert_eq!(sent, [(1, Frame::whole(bytes.clone(), shape))]);
    let (links, emulator) = counters(&mut plane);
    let up = links[link(&plane, "client.up").0 as usize];
    assert_eq!((up.delivered_packets, up.delivered_bytes), (3, shape.wire_bytes() as u64));
    assert_eq!((emulator.rx_packets, emulator.tx_packets, emulator.delivery_late.packets), (3, 3, 3));
    // A capture on either end, a shaped link or a random loss on the route: split at the read.
    let writer = writer::pcap(&scratch.0.join("server.pcap")).unwrap();
    assert!(matches!(plane.apply(0, Command::StartCapture { host: HostId(1), writer }), Outcome::Done));
    assert_eq!(plane.whole_segments(0, ip, &shape), 1);
    let Outcome::Finishing(pending) = plane.apply(0, Command::StopCapture { host: HostId(1) }) else { panic!() };
    pending.wait();
    assert_eq!(plane.whole_segments(0, ip, &shape), 3);
    let shaped = LinkConfig { rate: Rate::BitsPerSecond(1_000_000_000), ..LinkConfig::default() };
    let down = link(&plane, "server.down");
    assert!(matches!(plane.apply(0, Command::Reconfigure { links: vec![(down, shaped)], seed: None }), Outcome::Done));
    assert_eq!(plane.whole_segments(0, ip, &shape), 1);
}

#[test]
fn a_rated_route_takes_a_super_packet_whole_or_in_pieces_within_the_spread() {
    let (bytes, shape) = super_packet();
    let ip = &bytes[crate::vnet::VNET_HEADER_LEN..];
    // 1448-byte payloads in 1500-byte segments: 12 us each at 1 Gbit/s, 1.2 us at 10 Gbit/s.
    for (rate, spread, most) in [(1_000_000_000, 0, 1), (1_000_000_000, 13_000, 2), (1_000_000_000, 100_000, 3), (10_000_000_000, 3_000, 3)] {
        let mut net = testkit::network(&testkit::topology(Path::new(".")));
        net.set_whole_spread(spread);
        let down = net.link_id("server.down").unwrap();
        net.reconfigure(0, down, LinkConfig { rate: Rate::BitsPerSecond(rate), ..LinkConfig::default() }).unwrap();
        let mut plane = DataPlane::new(net, 0);
        plane.set_takes_whole(1, true, false);
        assert_eq!(plane.whole_segments(0, ip, &shape), most, "{rate} bit/s, spread {spread} ns");
    }
}

#[test]
fn a_capture_started_while_a_super_packet_is_in_flight_records_its_segments() {
    let scratch = Scratch::new("dataplane-whole-pcap");
    let mut plane = plane();
    plane.set_takes_whole(1, true, true);
    let (bytes, shape) = super_packet();
    plane.ingest(0, 0, Frame::whole(bytes, shape));
    let writer = writer::pcap(&scratch.0.join("server.pcap")).unwrap();
    assert!(matches!(plane.apply(MS, Command::StartCapture { host: HostId(1), writer }), Outcome::Done));
    assert_eq!(forward(&mut plane, 5 * MS).len(), 1, "still written whole");
    let Outcome::Finishing(pending) = plane.apply(0, Command::StopCapture { host: HostId(1) }) else { panic!() };
    assert_eq!(pending.wait().written, 3, "one record per wire segment");
    let file_len = std::fs::metadata(scratch.0.join("server.pcap")).unwrap().len();
    assert_eq!(file_len, 24 + 3 * 16 + shape.wire_bytes() as u64);
}

#[test]
fn passes_that_deliver_more_than_a_millisecond_late_are_kept_with_their_time_and_cpu() {
    let mut plane = plane();
    plane.ingest(0, 0, Frame::complete(udp(CLIENT, SERVER, 100)));
    plane.ingest(0, 0, Frame::complete(udp(CLIENT, SERVER, 100)));
    plane.ingest(MS, 0, Frame::complete(udp(CLIENT, SERVER, 100)));
    let pass = plane.forward_due(5 * MS + 1_500_000, |_, _| true);
    assert_eq!(pass.latest_ns, 1_500_000, "the latest packet of the pass");
    assert_eq!(pass.late_segments, 2, "the third was due 0.5 ms before: not late");
    plane.record_late_pass(5 * MS + 1_500_000, pass, Some(1));
    plane.record_late_pass(7 * MS, PassLateness { latest_ns: 1_000_000, late_segments: 0 }, Some(0));
    let passes = counters(&mut plane).1.late_passes;
    let kept = LatePass { at_unix_ns: 1_000_000_000 + 6_500_000, late_ns: 1_500_000, packets: 2, cpu: Some(1) };
    assert_eq!(passes, [kept], "1 ms is not late");
    for i in 0..100 {
        plane.record_late_pass(10 * MS + i, PassLateness { latest_ns: 2_000_000, late_segments: 1 }, None);
    }
    assert_eq!(counters(&mut plane).1.late_passes.len(), LATE_PASSES_KEPT);
    assert!(matches!(plane.apply(0, Command::ResetCounters), Outcome::Done));
    assert!(counters(&mut plane).1.late_passes.is_empty());
}
