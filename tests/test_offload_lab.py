"""Segmentation offloads on the lab's TUN devices (docs/emulator.md, "Segmentation offloads"):
a bulk TCP transfer delivers exactly the bytes sent with offloads on and off, the emulator reads
GSO super-packets only when they are on, the model, the capture and the link counters still see
one packet per wire segment, random loss acts per segment, UDP GSO sends arrive as their
datagrams, and a host's own setting in the topology wins over the lab's."""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from awaiting import await_port
from conftest import lab_namespaces

from protolab.lab import Lab, dumbbell, host, link, ms_to_ns, path

pytestmark = pytest.mark.lab

PORT = 5300
MTU = 1500
TRANSFER_BYTES = 8_000_000
LOSS = 0.02

# A TCP sink: accepts one connection, reads to the end, prints the byte count and SHA-256.
TCP_SINK = f"""
import hashlib, socket
s = socket.create_server(("0.0.0.0", {PORT}))
c, _ = s.accept()
h, n = hashlib.sha256(), 0
while data := c.recv(1 << 20):
    h.update(data); n += len(data)
print(n, h.hexdigest())
"""

# Sends N pseudo-random bytes (fixed seed) in 256 KB writes, prints the count and SHA-256.
TCP_SOURCE = """
import hashlib, random, socket, sys
n = int(sys.argv[2]); data = random.Random(7).randbytes(n)
c = socket.create_connection((sys.argv[1], {port}))
c.sendall(data); c.shutdown(socket.SHUT_WR); c.recv(1)
print(n, hashlib.sha256(data).hexdigest())
""".replace("{port}", str(PORT))

# One UDP GSO send (UDP_SEGMENT, 103): 10 datagrams of 1200 bytes in a single sendmsg.
UDP_GSO_SOURCE = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_UDP, 103, 1200)
for i in range(5):
    s.sendto(bytes([i]) * 12000, (sys.argv[1], {port}))
""".replace("{port}", str(PORT))

UDP_SINK = f"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", {PORT})); s.settimeout(5)
sizes = []
try:
    while len(sizes) < 50:
        sizes.append(len(s.recv(65536)))
except TimeoutError:
    pass
print(len(sizes), sum(sizes), max(sizes, default=0))
"""


def _pcap_packet_sizes(pcap: Path) -> list[int]:
    """The captured length of every record of a pcap file (LINKTYPE_RAW: the IP packet)."""
    data = pcap.read_bytes()
    # The magic number, read little-endian, tells the file's byte order (nanosecond or not).
    order = "<" if struct.unpack_from("<I", data)[0] in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    sizes, offset = [], 24
    while offset + 16 <= len(data):
        captured = struct.unpack_from(f"{order}I", data, offset + 8)[0]
        sizes.append(captured)
        offset += 16 + captured
    return sizes


def _transfer(lab: Lab, source: str = "client", size: int = TRANSFER_BYTES) -> tuple[str, str]:
    sink = lab.spawn("server", [sys.executable, "-c", TCP_SINK], stdout=-1, text=True)
    await_port(lab.namespace("server"), PORT, within=10)
    sent = lab.run(source, [sys.executable, "-c", TCP_SOURCE, lab.address("server"), str(size)],
                   timeout=120).stdout.strip()
    received, _ = sink.communicate(timeout=30)
    return sent, received.strip()


@pytest.mark.parametrize("offload", [True, False], ids=["offload-on", "offload-off"])
def test_bulk_transfer_delivers_the_exact_bytes_as_wire_segments(
    emu_binary: Path, lab_name: Callable[[], str], tmp_path: Path, offload: bool
) -> None:
    name = lab_name()
    topology = dumbbell(name, ["client"], ["server"], paths=[path("p0", forward=link(delay_ns=ms_to_ns(1)))])
    with Lab(topology, offload=offload) as lab:
        lab.reset_counters()
        lab.pcap_start("server", tmp_path / "server.pcap")
        sent, received = _transfer(lab)
        lab.await_quiet()
        capture = lab.pcap_stop("server")
        counters = lab.counters()
    assert lab_namespaces(name) == []
    assert received == sent, "the server must receive exactly the bytes the client sent"
    emulator, links = counters["emulator"], counters["links"]
    assert (emulator["rx_super_packets"] > 0) == offload
    assert emulator["rx_malformed"] == 0 and emulator["tx_errors"] == 0
    forward = links["p0.forward"]
    # The model saw wire segments: no packet above the MTU, and at least the bytes sent.
    assert forward["delivered_bytes"] <= MTU * forward["delivered_packets"]
    assert forward["delivered_bytes"] >= TRANSFER_BYTES
    assert links["server.down"]["delivered_bytes"] == links["client.up"]["delivered_bytes"]
    # The capture holds one record per wire packet the server received (both directions).
    sizes = _pcap_packet_sizes(tmp_path / "server.pcap")
    assert capture["dropped"] == 0 and len(sizes) == capture["packets"]
    assert max(sizes) <= MTU
    assert sum(sizes) == links["server.down"]["delivered_bytes"] + links["server.up"]["delivered_bytes"]


# (bottleneck rate in bit/s or None, `emu run --whole-spread-us` or None for the default (0),
# whether super-packets cross whole, whether some are cut into pieces): delay-only links always
# carry them whole; a 10 Gbit/s link does within a 100 us spread (a 64 KB super-packet's segments
# leave it within 52 us of each other); at 1 Gbit/s (12 us per segment) the large ones go in
# pieces of 9 segments; with no spread (the default), or at 50 Mbit/s (240 us per segment), a
# rated link splits them into their segments.
ROUTES = {
    "ideal-route": (None, None, True, False),
    "10g-within-spread": (10_000_000_000, 100, True, None),
    "1g-in-pieces": (1_000_000_000, 100, None, True),
    "10g-no-spread": (10_000_000_000, None, False, False),
    "50m-beyond-spread": (50_000_000, 100, False, False),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_super_packets_cross_whole_only_where_their_route_takes_them_whole(
    emu_binary: Path, lab_name: Callable[[], str], route: str
) -> None:
    """Without a capture, a route carries super-packets whole where every link takes them whole,
    in pieces where it takes fewer of their segments whole (counted and delivered per segment, the
    bytes exact); elsewhere they are split at the read."""
    rate, spread_us, whole, pieces = ROUTES[route]
    name = lab_name()
    bottleneck = link(delay_ns=ms_to_ns(1), rate_bps=rate) if rate else link(delay_ns=ms_to_ns(1))
    topology = dumbbell(name, ["client"], ["server"], paths=[path("p0", forward=bottleneck)])
    emu_args = ["--whole-spread-us", str(spread_us)] if spread_us is not None else []
    with Lab(topology, offload=True, emu_args=emu_args) as lab:
        info = lab.info()
        lab.reset_counters()
        sent, received = _transfer(lab)
        lab.await_quiet()
        counters = lab.counters()
    assert info["whole_spread_ns"] == (0 if spread_us is None else spread_us * 1000), "default: none"

    assert received == sent, "the server must receive exactly the bytes the client sent"
    emulator, links = counters["emulator"], counters["links"]
    assert emulator["rx_super_packets"] > 0
    if whole is not None:
        assert (emulator["rx_whole_super_packets"] > 0) == whole
    if pieces is not None:
        assert (emulator["rx_super_packet_pieces"] > 0) == pieces
    assert emulator["rx_whole_super_packets"] <= emulator["rx_super_packets"]
    assert emulator["rx_malformed"] == 0 and emulator["tx_errors"] == 0
    # Every wire segment read is written or counted as dropped. A rated link's queue may overflow
    # when the loop is held up and a backlog arrives at once (under two CPU hogs: 108 of 5,733 at
    # 10 Gbit/s); TCP then resends, and the counts must still add up.
    dropped = {name: sum(counted["dropped_packets"].values()) for name, counted in links.items()}
    assert emulator["rx_packets"] == emulator["tx_packets"] + sum(dropped.values()), (emulator, dropped)
    assert emulator["delivery_late"]["packets"] == emulator["tx_packets"], "lateness counts wire segments"
    for direction in ("client.up", "p0.forward", "server.down"):
        counted = links[direction]
        assert counted["delivered_bytes"] <= MTU * counted["delivered_packets"], direction
        assert counted["max_queue_bytes"] <= MTU or rate, direction
        assert counted["queue_packets"] == counted["queue_bytes"] == counted["in_flight_packets"] == 0, direction
        assert dropped[direction] == 0 or (rate and direction == "p0.forward"), (direction, dropped)
    forward_dropped_bytes = sum(links["p0.forward"]["dropped_bytes"].values())
    assert links["server.down"]["delivered_bytes"] == links["client.up"]["delivered_bytes"] - forward_dropped_bytes
    assert links["server.down"]["delivered_bytes"] >= TRANSFER_BYTES
    assert links["server.down"]["delivered_packets"] == links["client.up"]["delivered_packets"] - dropped["p0.forward"]


def test_random_loss_acts_per_segment_with_offloads(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    name = lab_name()
    topology = dumbbell(name, ["client"], ["server"], paths=[path("p0", forward=link(delay_ns=ms_to_ns(1), loss=LOSS))])
    with Lab(topology, offload=True) as lab:
        lab.set_link("p0.forward", seed=11)
        lab.reset_counters()
        sent, received = _transfer(lab)
        lab.await_quiet()
        counters = lab.counters()
    assert received == sent
    assert counters["emulator"]["rx_super_packets"] > 0
    forward = counters["links"]["p0.forward"]
    lost = forward["dropped_packets"]["random_loss"]
    arrived = lost + forward["dropped_packets"]["queue_full"] + forward["delivered_packets"]
    # Bernoulli per wire segment: the loss ratio within 4 standard errors of LOSS.
    tolerance = 4 * math.sqrt(LOSS * (1 - LOSS) / arrived)
    assert abs(lost / arrived - LOSS) < tolerance, (lost, arrived)
    assert forward["delivered_bytes"] <= MTU * forward["delivered_packets"]


def test_udp_gso_sends_arrive_as_their_datagrams(emu_binary: Path, lab_name: Callable[[], str]) -> None:
    name = lab_name()
    with Lab(dumbbell(name, ["client"], ["server"]), offload=True) as lab:
        lab.reset_counters()
        sink = lab.spawn("server", [sys.executable, "-c", UDP_SINK], stdout=-1, text=True)
        await_port(lab.namespace("server"), PORT, udp=True, within=10)
        lab.run("client", [sys.executable, "-c", UDP_GSO_SOURCE, lab.address("server")])
        received, _ = sink.communicate(timeout=30)
        counters = lab.counters()
    count, total, largest = map(int, received.split())
    assert (count, total, largest) == (50, 60_000, 1200)
    assert counters["links"]["server.down"]["delivered_packets"] == 50


PER_HOST_BYTES = 4_000_000


@pytest.mark.parametrize("lab_offload", [False, True], ids=["lab-off", "lab-on"])
def test_a_hosts_own_offload_setting_wins_over_the_labs(
    emu_binary: Path, lab_name: Callable[[], str], lab_offload: bool
) -> None:
    """One sender with offloads and one without, whatever the lab's setting: only the first's
    transfer reaches the emulator as super-packets, and both arrive byte for byte."""
    name = lab_name()
    senders = [host("client", "left", ["10.77.0.1"], offload=True),
               host("client2", "left", ["10.77.0.2"], offload=False)]
    topology = dumbbell(name, senders, ["server"], paths=[path("p0", forward=link(delay_ns=ms_to_ns(1)))])
    counted = {}
    with Lab(topology, offload=lab_offload) as lab:
        in_force = {entry["name"]: entry.get("offload") for entry in lab.topology["hosts"]}
        for sender in ("client", "client2"):
            lab.reset_counters()
            sent, received = _transfer(lab, sender, PER_HOST_BYTES)
            lab.await_quiet()
            assert received == sent, f"{sender}: the server must receive exactly the bytes sent"
            counted[sender] = lab.counters()
    assert lab_namespaces(name) == []
    assert in_force == {"client": True, "client2": False, "server": lab_offload}
    assert counted["client"]["emulator"]["rx_super_packets"] > 0
    assert counted["client2"]["emulator"]["rx_super_packets"] == 0
    for sender, counters in counted.items():
        links = counters["links"]
        assert counters["emulator"]["rx_malformed"] == 0 and counters["emulator"]["tx_errors"] == 0
        up, forward = links[f"{sender}.up"], links["p0.forward"]
        # Wire segments on every link, every byte sent delivered across the bottleneck.
        assert forward["delivered_bytes"] <= MTU * forward["delivered_packets"]
        assert forward["delivered_bytes"] >= PER_HOST_BYTES
        assert links["server.down"]["delivered_bytes"] == up["delivered_bytes"] == forward["delivered_bytes"]
