//! Page manifests (JSON): parse and validate; a valid manifest re-serializes and re-parses equal.
#![no_main]
use libfuzzer_sys::fuzz_target;
use web::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(manifest) = Manifest::parse(text, "fuzz.json") else { return };
    let _ = manifest.root();
    let json = serde_json::to_string(&manifest).expect("a parsed manifest serializes");
    let again = Manifest::parse(&json, "fuzz.json").expect("a serialized manifest re-parses");
    assert_eq!(manifest, again, "the manifest changed through JSON");
});
