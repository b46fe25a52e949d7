"""emufast's own A/B measurement: unshaped single-flow iperf3 through the emulator (offloads on)
for two binaries, alternated round by round, plus a veth reference each round; emulator CPU
seconds per Gbit. Unique lab/namespace names so that it cannot collide with the shared bench."""
from __future__ import annotations
import json, os, statistics, subprocess, sys, time
from contextlib import contextmanager
sys.path.insert(0, "/work/wt-emufast/benches")
import emu_throughput as b
from protolab.lab import Lab, dumbbell

VETH = ("pl-emufast-a", "pl-emufast-b")
VADDR = ("10.77.251.1", "10.77.251.2")

def run(argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)

@contextmanager
def veth():
    def delete():
        existing = run(["ip", "netns", "list"]).stdout.split()
        for n in VETH:
            if n in existing:
                run(["ip", "netns", "del", n], check=False)
    delete()
    try:
        for n in VETH:
            run(["ip", "netns", "add", n]); run(["ip", "-n", n, "link", "set", "lo", "up"])
        run(["ip", "link", "add", "plef0", "netns", VETH[0], "type", "veth", "peer", "name", "plef0", "netns", VETH[1]])
        for n, a in zip(VETH, VADDR):
            run(["ip", "-n", n, "addr", "add", f"{a}/30", "dev", "plef0"]); run(["ip", "-n", n, "link", "set", "plef0", "up"])
        yield
    finally:
        delete()

def cpu(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def main() -> None:
    rounds, seconds = int(sys.argv[1]), int(sys.argv[2])
    binaries = dict(arg.split("=", 1) for arg in sys.argv[3:])
    offload = os.environ.get("OFFLOAD", "on") == "on"
    out = {name: [] for name in binaries}; out["veth"] = []
    vexec = [["ip", "netns", "exec", n] for n in VETH]
    with veth(), b._iperf3_server(vexec[1], VADDR[1]):
        for r in range(rounds):
            for name, binary in binaries.items():
                with Lab(dumbbell("plemufast", ["client"], ["server"]), offload=offload, binary=binary) as lab:
                    ex = [["ip", "netns", "exec", lab.namespace(h)] for h in ("client", "server")]
                    with b._iperf3_server(ex[1], lab.address("server")):
                        c0, t0 = cpu(lab.pid), time.monotonic()
                        res = b._transfer(ex[0], lab.address("server"), seconds)
                        c1, t1 = cpu(lab.pid), time.monotonic()
                        counters = lab.counters()["emulator"]
                gbps = res.goodput_bps / 1e9
                cpu_per_gbit = (c1 - c0) / (gbps * (t1 - t0)) if gbps else float("nan")
                out[name].append({"gbps": gbps, "cpu_s": c1 - c0, "wall_s": t1 - t0, "cpu_per_gbit": cpu_per_gbit,
                                  "retransmits": res.retransmits, "tx_errors": counters["tx_errors"], "rx_malformed": counters["rx_malformed"]})
                print(name, r, json.dumps(out[name][-1]), flush=True)
            v = b._transfer(vexec[0], VADDR[1], seconds)
            out["veth"].append({"gbps": v.goodput_bps / 1e9}); print("veth", r, out["veth"][-1], flush=True)
    vmed = statistics.median(x["gbps"] for x in out["veth"])
    for name in binaries:
        g = statistics.median(x["gbps"] for x in out[name]); c = statistics.median(x["cpu_per_gbit"] for x in out[name])
        print(f"{name}: median {g:.2f} Gbit/s, ratio to veth {g / vmed:.3f}, CPU-s per Gbit {c:.3f}  (veth median {vmed:.1f})")
    print(json.dumps(out))

if __name__ == "__main__":
    main()
