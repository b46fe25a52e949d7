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
