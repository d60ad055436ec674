//! Net files come from users and from the coordinator's artifacts: any bytes must be
//! refused with an error or read, never panic; what reads must write back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xq_engine::xiangqi::nnue::Network;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(network) = Network::from_bytes(bytes) {
        assert_eq!(network.to_bytes(), bytes);
    }
});
