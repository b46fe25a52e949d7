"""Clients behind a NAT (protolab.lab.nat, docs/topology.md "Clients behind a NAT"): two client
namespaces behind one gateway reach the server, whose capture shows one source address (the
gateway's), the clients' TTLs one lower than they sent, and the gateway's conntrack table maps
every public port back to its client."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from awaiting import await_port
from conftest import lab_namespaces

from protolab.lab import Lab, dumbbell
from protolab.lab.nat import OS_PROFILES, NatClient, NatSite, parse_conntrack

pytestmark = pytest.mark.lab

PORT = 8080
# One request, one answer: a TCP connection the capture sees whole.
SERVER = ("import socket,sys\n"
          "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          f"s.bind((sys.argv[1], {PORT})); s.listen(16)\n"
          "while True:\n"
          "    c,_=s.accept(); c.recv(100); c.sendall(b'ok'); c.close()\n")
CLIENT = ("import socket,sys\n"
          f"c=socket.create_connection((sys.argv[1], {PORT}), timeout=10); c.sendall(b'hi')\n"
          "assert c.recv(10)==b'ok'\n")


def test_two_clients_behind_the_nat_share_one_address(emu_binary: Path, lab_name: Callable[[], str],
                                                       tmp_path: Path) -> None:
    name = lab_name()
    topology = dumbbell(name, ["gw", "direct"], ["server"])
    with Lab(topology, binary=emu_binary) as lab:
        server_ip, gateway_ip = lab.address("server"), lab.address("gw")
        lab.spawn("server", [sys.executable, "-c", SERVER, server_ip])
        await_port(lab.namespace("server"), PORT, address=server_ip)
        clients = [NatClient("a"), NatClient("b", OS_PROFILES["windows"])]
        with NatSite(lab, "gw", clients) as site:
            assert set(lab_namespaces(name)) >= {f"pl-{name}-a", f"pl-{name}-b"}
            lab.pcap_start("server", tmp_path / "server.pcap")
            for client in ("a", "b", "direct", "a"):
                lab.run(client, [sys.executable, "-c", CLIENT, server_ip], timeout=30)
            lab.await_quiet()
            lab.pcap_stop("server")
            mappings = site.mappings()
            private = {site.address("a"): "a", site.address("b"): "b"}
        assert set(lab_namespaces(name)) == {f"pl-{name}-{h}" for h in ("gw", "direct", "server")}
        subprocess.run([str(emu_binary), "flows", str(tmp_path / "server.pcap"), "--format", "ndjson",
                        "--out", str(tmp_path / "flows.ndjson")], capture_output=True, check=True)
    records = [json.loads(line) for line in (tmp_path / "flows.ndjson").read_text().splitlines()[1:]]
    assert len(records) == 4
    behind = [r for r in records if r["client_ip"] == gateway_ip]
    assert len(behind) == 3, "the server sees both NAT clients as the gateway"
    assert [r["client_ip"] for r in records if r not in behind] == [lab.address("direct")]
    # The truth: each public port of the gateway belongs to one client.
    owner = {m.public_port: private[m.private_ip] for m in mappings if m.server_port == PORT}
    assert sorted(owner[r["client_port"]] for r in behind) == ["a", "a", "b"]
    # Linux sends TTL 64, the Windows-like client 128; the NAT is one more hop.
    ttl = {owner[r["client_port"]]: r["c2s_ttl"] for r in behind}
    assert ttl == {"a": 63, "b": 127}
    windows = next(r for r in behind if owner[r["client_port"]] == "b")
    assert "T" not in windows["syn_options"] and windows["client_port"] >= 49152


def test_conntrack_lines_become_mappings() -> None:
    text = ("ipv4     2 tcp      6 117 TIME_WAIT src=192.168.77.1 dst=10.77.1.1 sport=40000 dport=443 "
            "src=10.77.1.1 dst=10.77.0.1 sport=443 dport=40001 [ASSURED] mark=0 use=1\n"
            "ipv4     2 udp      17 28 src=192.168.77.2 dst=10.77.1.1 sport=5000 dport=443 "
            "src=10.77.1.1 dst=10.77.0.1 sport=443 dport=5000 mark=0 use=1\n"
            "ipv4     2 icmp     1 29 src=192.168.77.2 dst=10.77.1.1 type=8 code=0 id=7 "
            "src=10.77.1.1 dst=10.77.0.1 type=0 code=0 id=7 mark=0 use=1\n"
            "garbage tcp src=1.2.3.4\n")
    got = parse_conntrack(text)
    assert [(m.transport, m.private_ip, m.private_port, m.public_ip, m.public_port) for m in got] == [
        ("tcp", "192.168.77.1", 40000, "10.77.0.1", 40001), ("udp", "192.168.77.2", 5000, "10.77.0.1", 5000)]
