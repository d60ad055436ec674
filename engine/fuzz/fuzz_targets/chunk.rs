//! Training chunks arrive from workers over the network: any bytes must be refused
//! with an error or read back, never panic; what reads back must write back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::data::{check_chunk, read_chunk, read_xiongqi_chunk, write_chunk, write_xiongqi_chunk};

fuzz_target!(|bytes: &[u8]| {
    if let Ok((variant, count)) = check_chunk(bytes) {
        match variant {
            Variant::Xiangqi => {
                let records = read_chunk(bytes).expect("a checked chunk reads");
                assert_eq!(records.len(), count);
                assert_eq!(read_chunk(&write_chunk(&records)).expect("rewritten"), records);
            }
            Variant::Xiongqi => {
                let records = read_xiongqi_chunk(bytes).expect("a checked chunk reads");
                assert_eq!(records.len(), count);
                assert_eq!(read_xiongqi_chunk(&write_xiongqi_chunk(&records)).expect("rewritten"), records);
            }
        }
    }
});
