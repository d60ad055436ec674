//! Fairy-Stockfish's rules through pyffish as a verification's reference, asked the way
//! a verification unit asks it.

use std::path::Path;

use xq_engine::color::Color;
use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::rules::Outcome;
use xq_engine::xiangqi::rules::verify::{Reference, parse_moves, ruling_candidates};
use xq_worker::reference::Pyffish;

use crate::spsa::python;

fn game(fen: &str, moves: &str) -> (Position, Vec<xq_engine::xiangqi::Move>) {
    let start = Position::from_fen(fen).unwrap();
    let texts: Vec<String> = moves.split_whitespace().map(str::to_owned).collect();
    let moves = parse_moves(&start, &texts).unwrap();
    (start, moves)
}

#[test]
fn pyffish_rules_a_perpetual_chase_and_a_mate_and_lets_a_quiet_game_go_on() {
    assert!(Pyffish::available(&python()));
    assert!(!Pyffish::available(Path::new("/bin/false")));
    let mut pyffish = Pyffish::start(&python()).unwrap();
    // A chariot chasing a lone cannon: the chaser (Red) loses at the third occurrence,
    // ply 8, as the books rule it.
    let (start, moves) = game("4k4/9/9/9/9/9/9/9/1R7/c2K5 w", &"b1a1 a0b0 a1b1 b0a0 ".repeat(3));
    let candidates = ruling_candidates(&start, &moves, None);
    assert_eq!(pyffish.verdict(&start, &moves, &candidates).unwrap(), Some((8, Outcome::Win(Color::Black))));
    // Black to move first: the side to move at the ruling is counted from the start.
    let (start, moves) = game("4k4/9/9/9/9/9/9/9/1r7/C2K5 b", &"b1a1 a0b0 a1b1 b0a0 ".repeat(3));
    let candidates = ruling_candidates(&start, &moves, None);
    assert_eq!(pyffish.verdict(&start, &moves, &candidates).unwrap(), Some((8, Outcome::Win(Color::Red))));
    // Mate in one: asked at the last ply.
    let (start, moves) = game("3k5/2R6/9/9/9/9/9/9/9/R3K4 w", "a0a9");
    assert_eq!(pyffish.verdict(&start, &moves, &[1]).unwrap(), Some((1, Outcome::Win(Color::Red))));
    let (start, moves) = game("rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w", "h2e2 h9g7");
    assert_eq!(pyffish.verdict(&start, &moves, &[2]).unwrap(), None);
}
