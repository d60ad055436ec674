//! Any text given as a FEN is either refused with an error or yields a position that
//! prints back to a FEN parsing to the same position.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xq_engine::xiangqi::{fen, movegen};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok((position, _)) = fen::parse_composed(text) {
        let printed = fen::to_fen(&position);
        let (again, _) = fen::parse_composed(&printed).expect("a printed FEN parses");
        assert_eq!(again, position);
        let _ = movegen::count_legal(&position);
    }
});
