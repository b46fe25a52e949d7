//! Topology files (TOML or JSON): parse, validate, convert to the model and build it; a
//! parsed topology re-serializes as JSON and re-parses equal.
#![no_main]
use std::path::Path;

use emu::topology::Topology;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // A base directory without files: relative trace paths fail to open (an error, not a panic).
    let base = Path::new("/nonexistent-fuzz-base");
    let Ok(topology) = Topology::parse(text, "fuzz.toml", base) else { return };
    let json = serde_json::to_string(&topology).expect("a parsed topology serializes");
    let again = Topology::parse(&json, "fuzz.json", base).expect("a serialized topology re-parses");
    assert_eq!(topology, again, "the topology changed through JSON");
    if let Ok(spec) = topology.to_spec() {
        let _ = netmodel::Network::<Vec<u8>>::new(spec);
    }
});
