//! Congestion-controller specs (`cubic:c=0.4`): a parsed spec's canonical form re-parses to the
//! same canonical form.
#![no_main]
use cc::registry::ControllerSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(spec) = ControllerSpec::parse(text) else { return };
    let canonical = spec.canonical();
    let again = ControllerSpec::parse(&canonical).expect("a canonical spec re-parses");
    assert_eq!(again.canonical(), canonical);
});
