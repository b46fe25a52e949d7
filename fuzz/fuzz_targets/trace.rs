//! Mahimahi delivery traces: parse, then ask the parsed trace what the link asks of it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netmodel::DeliveryTrace;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(trace) = DeliveryTrace::parse(text) else { return };
    let period = trace.period();
    let _ = trace.mean_rate_bps();
    let per_period = trace.opportunities_per_period() as u64;
    for index in [0, 1, per_period, per_period.saturating_mul(3).saturating_add(1)] {
        let t = trace.opportunity_time(index);
        assert!(trace.first_index_at_or_after(t) <= index, "opportunity {index} at {t} ns is found later");
    }
    let moved = trace.starting_at(period / 2);
    assert!(moved.start() < period.max(1), "the replay starts outside the period");
    let _ = moved.opportunity_time(0);
});
