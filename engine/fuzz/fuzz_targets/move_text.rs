//! Any text given as a move, in any notation, in a position chosen by the first byte,
//! is refused with an error or is a legal move that prints back to the same text's move.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xq_engine::xiangqi::notation::{Dialect, format_wxf, parse_iccs, parse_uci, parse_wxf};
use xq_engine::xiangqi::{Position, movegen};

const POSITIONS: [&str; 4] = [
    "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 0 1",
    "3akab2/9/9/4P4/4P4/4P4/9/9/R8/R3K4 w - - 0 1",
    "1C2ka3/9/C1Nab1n2/p3p3p/6p2/9/P3P3P/3AB4/3p2c2/c1BAK4 w - - 0 1",
    "r2akab1r/3n5/4b3n/p1p1pRp1p/9/2P3P2/P3P3c/N2C3C1/4A4/1RBAK1B2 b - - 0 1",
];

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let position = Position::from_fen(POSITIONS[choice as usize % POSITIONS.len()]).expect("valid");
    let legal = movegen::legal_moves(&position);
    for parsed in [
        parse_uci(&position, text, Dialect::ZeroBased),
        parse_uci(&position, text, Dialect::OneBased),
        parse_iccs(&position, text),
        parse_wxf(&position, text),
    ] {
        if let Ok(mv) = parsed {
            assert!(legal.contains(&mv));
            let wxf = format_wxf(&position, mv).expect("a legal move has WXF text");
            assert_eq!(parse_wxf(&position, &wxf), Ok(mv));
        }
    }
});
