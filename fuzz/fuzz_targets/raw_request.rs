//! The raw bulk protocol's request header and upload report (read by our server and client from
//! the network): a decoded request re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use web::raw::{RawRequest, UploadReport, REPORT_LEN, REQUEST_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(header) = <&[u8; REQUEST_LEN]>::try_from(data.get(..REQUEST_LEN).unwrap_or(&[])) {
        if let Ok(request) = RawRequest::decode(header) {
            assert_eq!(&RawRequest::decode(&request.encode()), &Ok(request));
        }
    }
    if let Ok(report) = <&[u8; REPORT_LEN]>::try_from(data.get(..REPORT_LEN).unwrap_or(&[])) {
        let decoded = UploadReport::decode(report);
        assert_eq!(&decoded.encode(), report);
    }
});
