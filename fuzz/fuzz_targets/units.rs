//! Rates and durations as written in topology, spec and control documents.
#![no_main]
use contract::units::{parse_duration, parse_rate, parse_rate_limit, Bare};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = parse_rate(text, Bare::Refuse);
    let _ = parse_rate(text, Bare::BitsPerSecond);
    let _ = parse_rate_limit(text);
    if let Ok(ns) = parse_duration(text) {
        assert!(ns <= 3_600_000_000_000, "{text:?} is {ns} ns, beyond an hour");
    }
});
