//! Control-socket request lines: parsed into a request, then answered by a control plane over a
//! small lab's model (no namespaces, no devices). Requests that write files (pcap_start,
//! events_start) are only parsed: a fuzzer must not write where its inputs say.
#![no_main]
use std::path::Path;
use std::sync::atomic::AtomicI32;
use std::sync::Arc;

use contract::control::Request;
use emu::clock::Clock;
use emu::control_plane::{ControlPlane, PacketLoop};
use emu::dataplane::{Command, DataPlane, Outcome};
use emu::topology::Topology;
use libfuzzer_sys::fuzz_target;
use netmodel::Network;

const TOPOLOGY: &str = r#"
lab = "fz"
[[hosts]]
name = "client"
side = "left"
addresses = ["10.77.0.1"]
[hosts.access.up]
delay = "5ms"
[[hosts]]
name = "server"
side = "right"
addresses = ["10.77.1.1"]
[[paths]]
name = "p0"
[[paths]]
name = "p1"
"#;

/// The packet loop in the fuzzer's thread, at a fixed time.
struct Direct(DataPlane);

impl PacketLoop for Direct {
    fn call(&mut self, command: Command) -> Result<Outcome, String> {
        Ok(self.0.apply(1_000_000, command))
    }
}

fn control() -> ControlPlane<Direct> {
    let topology = Topology::parse(TOPOLOGY, "fuzz.toml", Path::new(".")).expect("the fixed topology is valid");
    let spec = topology.to_spec().expect("the fixed topology converts");
    let names = Network::<Vec<u8>>::new(spec.clone()).expect("the fixed topology builds");
    let plane = DataPlane::new(Network::new(spec).expect("the fixed topology builds"), 0);
    ControlPlane::new(topology, &names, Clock::start(), 0, Arc::new(AtomicI32::new(0)), Direct(plane))
}

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else { return };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else { return };
    let Ok(request) = Request::from_value(value) else { return };
    if matches!(request, Request::PcapStart(_) | Request::EventsStart(_)) {
        return;
    }
    let reply = control().handle_line(line).finish();
    serde_json::to_string(&reply).expect("a reply serializes");
});
