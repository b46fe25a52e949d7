"""Profile the emulator (offloads on, unshaped, one iperf3 flow): perf record on its pid for a
few seconds mid-transfer; prints the perf report's top symbols."""
from __future__ import annotations
import subprocess, sys, time
sys.path.insert(0, "/work/wt-emufast/benches")
import emu_throughput as b
from protolab.lab import Lab, dumbbell

binary, out = sys.argv[1], sys.argv[2]
with Lab(dumbbell("plemufast", ["client"], ["server"]), offload=True, binary=binary) as lab:
    ex = [["ip", "netns", "exec", lab.namespace(h)] for h in ("client", "server")]
    with b._iperf3_server(ex[1], lab.address("server")):
        client = subprocess.Popen([*ex[0], *b._iperf3_client_argv(lab.address("server"), 8)], stdout=subprocess.PIPE, text=True)
        time.sleep(3)
        subprocess.run(["perf", "record", "-g", "-o", out, "-p", str(lab.pid), "--", "sleep", "4"], capture_output=True)
        stdout, _ = client.communicate(timeout=60)
        print("Gbit/s", b.parse_iperf3(stdout).goodput_bps / 1e9)
report = subprocess.run(["perf", "report", "-i", out, "--no-children", "--sort", "symbol", "--stdio"], capture_output=True, text=True).stdout
print("\n".join([l for l in report.splitlines() if l.strip() and not l.startswith("#") and "%" in l and not l.strip().startswith("|") and not l.strip().startswith("-")][:25]))
