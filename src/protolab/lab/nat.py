"""Several client hosts behind one public address (000 §4.2.3's NAT; docs/topology.md, "Clients
behind a NAT").

A NAT site hangs off one left host of a running lab, its *gateway*: each client behind it is a
namespace `pl-<lab>-<client>` (so `protolab-net emu cleanup --lab` removes it too) joined to the
gateway by a veth pair on a bridge `natbr` (subnet 192.168.77.0/24 by default, the gateway
.254). The gateway forwards and masquerades (nftables: `oifname "pl0" masquerade`, source
NAT to its own address, which keeps a client's source port unless two clients collide), so
the emulator, the server and every capture beyond the gateway see one client address: the
gateway's. The packets cross one more router, so their TTL is one lower than the client sent.

Clients differ as real devices behind one home router do, by the sysctls of their stacks
(`NatClient.sysctls`, `OS_PROFILES`): initial TTL, TCP timestamps, window scaling, receive
buffer (the SYN's window scale), SACK and the ephemeral port range. They cannot differ by
clock: they share one kernel, which draws a random timestamp offset per connection.

The truth of who is who: `conntrack_mappings` reads the gateway's connection tracking table
(private address and port -> public port).
"""

from __future__ import annotations

import ipaddress
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType

from protolab.errors import LabError
from protolab.lab.lab import Lab
from protolab.lab.watchdog import NamespaceWatchdog

DEFAULT_SUBNET = "192.168.77.0/24"
BRIDGE = "natbr"
NFT_TABLE = "protolab_nat"
COMMAND_TIMEOUT_S = 20.0

# Stacks of common client systems, as far as a Linux namespace can imitate them through its
# sysctls (what a passive observer sees of them: p0f's signatures). The SYN's option order stays
# Linux's in every profile: the kernel has no sysctl for it.
OS_PROFILES: dict[str, dict[str, str]] = {
    # Linux / Android defaults: TTL 64, timestamps (a random offset per connection).
    "linux": {},
    # Windows 10/11: TTL 128, no TCP timestamps, ports 49152-65535, window scale 8.
    "windows": {"net.ipv4.ip_default_ttl": "128", "net.ipv4.tcp_timestamps": "0",
                "net.ipv4.ip_local_port_range": "49152 65535", "net.ipv4.tcp_rmem": "4096 131072 16777216"},
    # macOS / iOS: TTL 64, timestamps, ports 49152-65535, window scale 6.
    "macos": {"net.ipv4.ip_local_port_range": "49152 65535", "net.ipv4.tcp_rmem": "4096 131072 2097152"},
    # An older embedded stack: TTL 255, no window scaling, no SACK.
    "embedded": {"net.ipv4.ip_default_ttl": "255", "net.ipv4.tcp_window_scaling": "0", "net.ipv4.tcp_sack": "0"},
}
_NAME = re.compile(r"[a-z0-9]{1,16}")


@dataclass(frozen=True)
class NatClient:
    """A client host behind the NAT; `sysctls` shape its stack (e.g. `OS_PROFILES["windows"]`)."""

    name: str
    sysctls: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Mapping4:
    """One tracked connection through the NAT: the client's own (private) endpoint and the public
    endpoint the server sees."""

    transport: str
    private_ip: str
    private_port: int
    server_ip: str
    server_port: int
    public_ip: str
    public_port: int


def _run(argv: Sequence[str], what: str, input: str | None = None) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, input=input, check=False,
                              timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError(f"NAT site: {what}: {exc}") from None
    if done.returncode != 0:
        raise LabError(f"NAT site: {what}: `{' '.join(argv)}` exited with status {done.returncode}: "
                       f"{(done.stderr or done.stdout).strip()[-800:]}")
    return done.stdout


def masquerade_ruleset(subnet: str, public_interface: str = "pl0") -> str:
    """The gateway's nftables ruleset: source NAT of the subnet to the public interface's address."""
    return (f"table ip {NFT_TABLE} {{\n"
            f"  chain postrouting {{\n"
            f"    type nat hook postrouting priority srcnat; policy accept;\n"
            f"    oifname \"{public_interface}\" ip saddr {subnet} masquerade\n"
            f"  }}\n"
            f"}}\n")


class NatSite:
    """Client namespaces behind `gateway` (a left host of `lab`), for as long as the context lasts:

    ```
    with Lab(topology) as lab, NatSite(lab, "gw", [NatClient("a"), NatClient("b", OS_PROFILES["windows"])]):
        lab.run("a", ["curl", ...])   # the clients are hosts of the lab while the site stands
    ```
    """

    def __init__(self, lab: Lab, gateway: str, clients: Sequence[NatClient], subnet: str = DEFAULT_SUBNET) -> None:
        self.lab = lab
        self.gateway = gateway
        self.clients = list(clients)
        self.network = ipaddress.IPv4Network(subnet)
        if len(self.clients) > self.network.num_addresses - 3:
            raise LabError(f"NAT site: {len(self.clients)} clients do not fit subnet {subnet}")
        for client in self.clients:
            if not _NAME.fullmatch(client.name):
                raise LabError(f"NAT site: client name {client.name!r} must match [a-z0-9]{{1,16}}")
        self._created: list[str] = []
        self._watchdog: NamespaceWatchdog | None = None

    def __enter__(self) -> NatSite:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    @property
    def gateway_address(self) -> str:
        return str(self.network.network_address + self.network.num_addresses - 2)

    def address(self, client: str) -> str:
        """A client's private address."""
        for index, entry in enumerate(self.clients):
            if entry.name == client:
                return str(self.network.network_address + index + 1)
        raise LabError(f"NAT site: no client {client!r}")

    def start(self) -> None:
        # Before the first namespace exists: a kill at any later point leaves none behind.
        self._watchdog = NamespaceWatchdog([f"pl-{self.lab.name}-{client.name}" for client in self.clients])
        gw = self.lab.namespace(self.gateway)
        prefix = self.network.prefixlen
        _run(["ip", "netns", "exec", gw, "sysctl", "-qw", "net.ipv4.ip_forward=1"], "forwarding in the gateway")
        _run(["ip", "-n", gw, "link", "add", BRIDGE, "type", "bridge"], "bridge")
        _run(["ip", "-n", gw, "addr", "add", f"{self.gateway_address}/{prefix}", "dev", BRIDGE], "bridge address")
        _run(["ip", "-n", gw, "link", "set", BRIDGE, "up"], "bridge up")
        for index, client in enumerate(self.clients):
            self._add_client(gw, index, client, prefix)
        _run(["ip", "netns", "exec", gw, "nft", "-f", "-"], "nftables masquerade",
             input=masquerade_ruleset(str(self.network)))

    def _add_client(self, gw: str, index: int, client: NatClient, prefix: int) -> None:
        ns = f"pl-{self.lab.name}-{client.name}"
        _run(["ip", "netns", "add", ns], f"namespace {ns}")
        self._created.append(ns)
        self.lab.attach_namespace(client.name, ns)
        port = f"nat{index}"
        _run(["ip", "-n", gw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns], f"veth of {ns}")
        _run(["ip", "-n", gw, "link", "set", port, "master", BRIDGE, "up"], f"veth of {ns} on the bridge")
        address = self.address(client.name)
        for argv in (["addr", "add", f"{address}/{prefix}", "dev", "eth0"], ["link", "set", "lo", "up"],
                     ["link", "set", "eth0", "up"], ["route", "add", "default", "via", self.gateway_address]):
            _run(["ip", "-n", ns, *argv], f"{ns}: ip {' '.join(argv)}")
        settings = {"net.ipv6.conf.all.disable_ipv6": "1", **client.sysctls}
        _run(["ip", "netns", "exec", ns, "sysctl", "-qw", *(f"{k}={v}" for k, v in settings.items())],
             f"{ns}: sysctls")

    def close(self) -> None:
        """Removes the clients' namespaces (their veths go with them); the gateway's bridge and
        rules go with the lab."""
        errors = []
        for ns in reversed(self._created):
            self.lab.detach_namespace(ns.removeprefix(f"pl-{self.lab.name}-"))
            try:
                _run(["ip", "netns", "del", ns], f"remove {ns}")
            except LabError as exc:
                errors.append(str(exc))
        self._created.clear()
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None
        if errors:
            raise LabError("; ".join(errors))

    def mappings(self) -> list[Mapping4]:
        """The gateway's tracked connections of the clients (conntrack), flushed afterwards so
        the next call sees only later connections."""
        gw = self.lab.namespace(self.gateway)
        text = _run(["ip", "netns", "exec", gw, "conntrack", "-L", "-o", "extended"], "conntrack -L")
        _run(["ip", "netns", "exec", gw, "conntrack", "-F"], "conntrack -F")
        return [m for m in parse_conntrack(text) if ipaddress.IPv4Address(m.private_ip) in self.network]


_FIELD = re.compile(r"(\w+)=(\S+)")


def parse_conntrack(text: str) -> list[Mapping4]:
    """`conntrack -L -o extended` lines (TCP and UDP) as mappings: the first src/sport of a line
    is the original sender, the second dst/dport (the reply's) the public endpoint it was
    translated to. Other protocols and malformed lines are skipped."""
    found = []
    for line in text.splitlines():
        words = line.split()
        transport = next((w for w in words if w in ("tcp", "udp")), None)
        if transport is None:
            continue
        values: dict[str, list[str]] = {}
        for key, value in _FIELD.findall(line):
            values.setdefault(key, []).append(value)
        try:
            src, dst = values["src"], values["dst"]
            sport, dport = values["sport"], values["dport"]
            found.append(Mapping4(transport, src[0], int(sport[0]), dst[0], int(dport[0]), dst[1], int(dport[1])))
        except (KeyError, IndexError, ValueError):
            continue
    return found
