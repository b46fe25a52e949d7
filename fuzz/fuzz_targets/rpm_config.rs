//! RPM configuration documents (the `/config` JSON of a responsiveness server).
#![no_main]
use libfuzzer_sys::fuzz_target;
use web::rpm::endpoints::ConfigUrls;

fuzz_target!(|data: &[u8]| {
    let _ = ConfigUrls::parse(data);
});
