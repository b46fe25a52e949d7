//! What the unit tests of the data and control planes share: a small lab, packets, scratch
//! directories. No namespaces, no devices.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use netmodel::Network;

use crate::topology::Topology;

/// A client and a server over two paths; the client's uplink has 5 ms of delay.
pub const TOPOLOGY: &str = r#"
lab = "t1"
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

/// [`TOPOLOGY`], relative trace paths resolved in `base_dir`.
pub fn topology(base_dir: &Path) -> Topology {
    Topology::parse(TOPOLOGY, "t.toml", base_dir).expect("the test topology is valid")
}

/// The model of a topology.
pub fn network(topology: &Topology) -> Network<crate::frame::Frame> {
    Network::new(topology.to_spec().expect("the test topology converts")).expect("the test topology builds")
}

/// An IPv4/UDP packet of `size` bytes (at least 28).
pub fn udp(src: [u8; 4], dst: [u8; 4], size: u16) -> Vec<u8> {
    let mut p = vec![0u8; usize::from(size.max(28))];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&size.max(28).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&Ipv4Addr::from(src).octets());
    p[16..20].copy_from_slice(&Ipv4Addr::from(dst).octets());
    p[20..22].copy_from_slice(&4000u16.to_be_bytes());
    p[22..24].copy_from_slice(&5000u16.to_be_bytes());
    p[24..26].copy_from_slice(&(size.max(28) - 20).to_be_bytes());
    p
}

/// A fresh scratch directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// `<tmp>/protolab-emu-test-<name>-<pid>`, empty.
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("protolab-emu-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the temporary directory is writable");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
