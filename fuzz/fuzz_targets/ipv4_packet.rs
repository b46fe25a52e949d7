//! Packets read from the TUN devices: the model's IPv4 header parse.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netmodel::Packet;

fuzz_target!(|data: &[u8]| {
    if let Ok(packet) = Packet::from_ipv4(data.to_vec()) {
        assert_eq!(packet.size as usize, data.len());
    }
});
