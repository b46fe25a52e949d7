//! Sprout's rate-report datagrams (from the network): a decoded report re-encodes to its bytes.
#![no_main]
use cc::sprout_feedback::RateReport;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(report) = RateReport::decode(data) {
        assert_eq!(&report.encode()[..], data);
    }
});
