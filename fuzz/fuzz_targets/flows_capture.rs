//! pcap/pcapng captures -> flow records: one pass over the whole input equals a pass fed in
//! two buffers split where the input's first byte says (the reader streams a file in chunks).
#![no_main]
use flows::{extract, Config, Extractor};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let config = Config::default();
    let whole = extract(data, &config);
    assert_eq!(whole.stats.flows, whole.flows.len() as u64);
    assert!(whole.stats.flow_packets <= whole.stats.packets);

    let split = data.first().map_or(0, |&b| (b as usize * 7) % (data.len() + 1));
    let mut x = Extractor::new(&config);
    let mut pending: Vec<u8> = data[..split].to_vec();
    let streamed = match x.feed(&pending) {
        Err(e) => x.fail(e),
        Ok(consumed) => {
            pending.drain(..consumed);
            pending.extend_from_slice(&data[split..]);
            match x.feed(&pending) {
                Ok(consumed) => x.finish(pending.len() - consumed),
                Err(e) => x.fail(e),
            }
        }
    };
    assert_eq!(whole.stats, streamed.stats, "split at {split}");
    assert_eq!(whole.flows.len(), streamed.flows.len(), "split at {split}");
});
