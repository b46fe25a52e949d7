"""Writes fuzz/corpus/<target>/ from the project's own fixtures (the seeds are committed; run
this again after a fixture changes): python3 fuzz/seed_corpus.py [REPO]."""
import hashlib
import json
import os
import re
import struct
import sys
from typing import Iterator

root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
C = os.path.join(root, "fuzz/corpus")
def put(target: str, data: bytes | str) -> None:
    if isinstance(data, str): data = data.encode()
    d = os.path.join(C, target); os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)
def rd(path: str, mode: str = "r"):  # str or bytes, by mode
    with open(os.path.join(root, path), mode) as f:
        return f.read()

# topology: the documented examples and the emulator tests' topologies
for f in ["docs/topology.md", "README.md"]:
    for lang, b in re.findall(r"```(\w*)\n(.*?)```", rd(f), re.S):
        if lang == "toml" and "[[hosts]]" in b: put("topology", b)
for f in os.popen(f"grep -rl '^\\[\\[hosts\\]\\]' {root}/crates --include=*.rs").read().split():
    for b in re.findall(r'r#"\n(.*?)"#', open(f).read(), re.S):
        if "[[hosts]]" in b and "{" not in b: put("topology", b)
# manifest
put("manifest", rd("tests/fixtures/seeds/page.manifest.json"))
bad = json.loads(rd("tests/fixtures/bad_manifests.json"))
put("manifest", json.dumps(bad["valid"]))
for case in bad["cases"]:
    put("manifest", case["text"] if "text" in case else json.dumps(case["manifest"]))
# control requests: the documented ones
for line in re.findall(r"`(\{\"cmd\".*?\})`", rd("docs/control.md")):
    if "..." not in line: put("control_request", line)
put("control_request", '{"cmd": "set_link", "link": ["client.up", "client.down"], "params": {"rate": "7mbit", "loss": {"kind": "bernoulli", "p": 0.1}}, "seed": 3}')
put("control_request", '{"cmd": "set_routing", "mode": "ecmp-xor", "pins": []}')
# traces: the first 300 lines of each cellular trace
for f in sorted(os.listdir(os.path.join(root, "data/traces/cellular"))):
    if f.endswith((".up", ".down")):
        put("trace", "".join(rd(f"data/traces/cellular/{f}").splitlines(True)[:300]))
# captures
pcapng = rd("crates/flows/tests/data/loopback-h1c-h1-h2-h3.pcapng", "rb")
put("flows_capture", pcapng)
# handshakes out of that capture: TCP client payloads (TLS ClientHello, HTTP request) and QUIC datagrams
def packets(b: bytes) -> Iterator[tuple[int, bytes]]:
    """(link type, frame) of each enhanced packet block of a little-endian pcapng."""
    i, lts = 0, []
    while i + 12 <= len(b):
        btype, blen = struct.unpack_from("<II", b, i)
        if btype == 1: lts.append(struct.unpack_from("<H", b, i + 8)[0])
        if btype == 6:
            iface, _, _, cap = struct.unpack_from("<IIII", b, i + 8)
            yield lts[iface], b[i + 28:i + 28 + cap]
        i += blen
def ip_of(lt: int, d: bytes) -> bytes:
    if lt == 0: return d[4:]
    if lt == 1: return d[14:]
    if lt == 113: return d[16:]
    if lt == 276: return d[20:]
    return d
streams, quic = {}, []
for lt, d in packets(pcapng):
    ip = ip_of(lt, d)
    if ip[0] >> 4 == 4: proto, hl, src, dst = ip[9], (ip[0] & 15) * 4, ip[12:16], ip[16:20]
    elif ip[0] >> 4 == 6: proto, hl, src, dst = ip[6], 40, ip[8:24], ip[24:40]
    else: continue
    t = ip[hl:]
    sport, dport = struct.unpack_from(">HH", t)
    if proto == 6:
        payload = t[(t[12] >> 4) * 4:]
        if payload and sport > dport: streams.setdefault((src, sport, dport), b"")
        if payload and sport > dport and len(streams[(src, sport, dport)]) < 4096:
            streams[(src, sport, dport)] += payload
    elif proto == 17 and sport > dport and len(quic) < 4:
        quic.append(t[8:])
for (_, _, dport), s in streams.items():
    put("flows_tcp_payload", bytes([(0 if s[:1] == b"\x16" else 0x80) | 0x7f, 0, 0, 0, 1]) + s[:4096])
    put("flows_tcp_payload", bytes([(0 if s[:1] == b"\x16" else 0x80) | 3, 0xff, 0xff, 0xff, 0xf0]) + s[:4096])
for h in ["rfc9001_a2_client_initial.hex", "rfc9369_a2_client_initial.hex"]:
    quic.append(bytes.fromhex(re.sub(r"[^0-9a-fA-F]", "", rd(f"crates/flows/tests/data/{h}"))))
for q in quic: put("flows_quic_initial", struct.pack(">H", len(q)) + q)
if len(quic) > 1: put("flows_quic_initial", b"".join(struct.pack(">H", len(q)) + q for q in quic[:2]))
# RPM configuration documents
put("rpm_config", '{"version":1,"urls":{"small_https_download_url":"https://a/s","large_https_download_url":"https://a/l","https_upload_url":"https://a/u"},"test_endpoint":"b"}')
put("rpm_config", '{"version":1,"urls":{"small_download_url":"https://a/s","large_download_url":"https://a/l","upload_url":"https://a/u"}}')
# raw protocol: MAGIC is read from the source
m = re.search(r"const MAGIC: \[u8; 4\] = \*?b?\"?(.*?)\"?;", rd("crates/web/src/raw.rs"))
put("raw_request", b"PLRB\x01\x00\x00\x00" + struct.pack(">QQ", 1 << 20, 0) + bytes(8))
put("raw_request", b"PLRB\x01\x01\x00\x00" + struct.pack(">QQ", 2**64 - 1, 10**9) + bytes(8))
put("sprout_feedback", b"SF\x01" + struct.pack(">IQ", 1, 125000))
put("ipv4_packet", bytes.fromhex("450000280001400040110000") + bytes([10, 77, 0, 1, 10, 77, 1, 1]) + bytes.fromhex("0fa01f90001400000000000000000000"))
# units, controller specs
for u in ["10mbit", "1.5gbit", "100kbit", "unlimited", "25ms", "1.5ms", "500us", "2s", "0", "100ns", "12Mbps"]: put("units", u)
for s in ["cubic", "reno", "cubic:c=0.4,beta=0.7", "bbr", "fixed:window=10", "sprout"]: put("cc_spec", s)
# TUN reads with segmentation offloads (no fixture holds one): what the kernel hands the emulator,
# a virtio-net header (host byte order: little-endian on x86) then the packet. TCP and UDP GSO
# super-packets as Linux sends them (MSS 1448, 1436 with timestamps, QUIC-sized UDP), a pure ACK
# left to checksum (CHECKSUM_PARTIAL) and a plain datagram.
def fold(b: bytes, seed: int = 0) -> int:
    s = seed + sum(struct.unpack(f">{len(b) // 2}H", b[:len(b) // 2 * 2])) + (b[-1] << 8 if len(b) % 2 else 0)
    while s > 0xffff: s = (s >> 16) + (s & 0xffff)
    return s
def ip_packet(v6: bool, proto: int, transport: bytes, ident: int = 0x1234, full: bool = False) -> bytes:
    """The kernel leaves the pseudo-header's sum (not inverted) in the transport checksum field
    of what it hands a device with checksum offload; `full`: the whole checksum, as on a wire."""
    a, b = (bytes(15) + b"\1", bytes(15) + b"\2") if v6 else (bytes([10, 77, 0, 1]), bytes([10, 77, 1, 1]))
    at = 16 if proto == 6 else 6
    pseudo = fold(a + b + struct.pack(">HH", proto, len(transport)))
    check = 0xffff ^ fold(transport, pseudo) if full else pseudo
    transport = transport[:at] + struct.pack(">H", check or 0xffff) + transport[at + 2:]
    if v6: return struct.pack(">IHBB", 0x60000000, len(transport), proto, 64) + a + b + transport
    h = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(transport), ident, 0x4000, 64, proto, 0, a, b)
    return h[:10] + struct.pack(">H", 0xffff ^ fold(h)) + h[12:] + transport
def tcp(payload: bytes, flags: int = 0x18, timestamps: bool = False, seq: int = 1000) -> bytes:
    opts = bytes([1, 1, 8, 10]) + struct.pack(">II", 7, 9) if timestamps else b""
    return struct.pack(">HHIIBBHHH", 40000, 5201, seq, 7, (5 + len(opts) // 4) << 4, flags, 65535, 0, 0) + opts + payload
def udp(payload: bytes) -> bytes:
    return struct.pack(">HHHH", 50000, 4433, 8 + len(payload), 0) + payload
def vnet(gso_type: int, gso_size: int, csum_start: int, csum_offset: int, packet: bytes, flags: int = 1) -> bytes:
    return struct.pack("<BBHHHH", flags, gso_type, 0, gso_size, csum_start, csum_offset) + packet
data = bytes(i * 7 % 251 for i in range(65000))
put("vnet_super_packet", vnet(1, 1448, 20, 16, ip_packet(False, 6, tcp(data[:3000]))))
put("vnet_super_packet", vnet(1, 1436, 20, 16, ip_packet(False, 6, tcp(data[:14360], 0x19, True))))
put("vnet_super_packet", vnet(1, 1448, 20, 16, ip_packet(False, 6, tcp(data[:65535 - 40]))))
put("vnet_super_packet", vnet(0x81, 1448, 20, 16, ip_packet(False, 6, tcp(data[:2896], 0x98))))  # ECN, CWR
put("vnet_super_packet", vnet(5, 1200, 20, 6, ip_packet(False, 17, udp(data[:3600]))))
put("vnet_super_packet", vnet(4, 1428, 40, 16, ip_packet(True, 6, tcp(data[:4000]))))  # IPv6: refused, not split
put("vnet_super_packet", vnet(0, 0, 20, 16, ip_packet(False, 6, tcp(b"", 0x10))))
put("vnet_super_packet", vnet(0, 0, 0, 0, ip_packet(False, 17, udp(data[:100])), flags=0))
# The write side (vnet_gro): a flags byte (1: the device takes UDP super-packets; 2: checksums
# left partial), then the packets the model delivers in one pass, each behind its length: a TCP
# flow's wire segments (the last with PSH) among an ACK of the other direction, out of order once;
# QUIC-sized UDP datagrams of one flow.
def batch(flags: int, packets: list[bytes]) -> bytes:
    return bytes([flags]) + b"".join(struct.pack(">H", len(p)) + p for p in packets)
def tcp_segments(n: int, mss: int, v6: bool = False, timestamps: bool = False) -> list[bytes]:
    return [ip_packet(v6, 6, tcp(data[i * mss:(i + 1) * mss], 0x18 if i == n - 1 else 0x10, timestamps, 1000 + i * mss), 0x100 + i, True) for i in range(n)]
ack = ip_packet(False, 6, struct.pack(">HHIIBBHHH", 5201, 40000, 7, 5000, 0x50, 0x10, 65535, 0, 0), 9, True)
put("vnet_gro", batch(0, tcp_segments(4, 1448)[:2] + [ack] + tcp_segments(4, 1448)[2:]))
put("vnet_gro", batch(0, tcp_segments(6, 1436, timestamps=True)))
put("vnet_gro", batch(2, tcp_segments(6, 1436, timestamps=True)))
put("vnet_gro", batch(0, [tcp_segments(3, 1448)[i] for i in (1, 0, 2)]))
put("vnet_gro", batch(1, [ip_packet(False, 17, udp(data[i * 1200:(i + 1) * 1200]), 0x200 + i, True) for i in range(3)] + [ip_packet(False, 17, udp(data[:300]), 0x203, True)]))
