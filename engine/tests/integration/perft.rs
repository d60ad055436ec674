//! Perft counts of shared/reference/perft.md: shallow depths in every build, all of
//! them in release (`cargo test --release -- --ignored`).

use xq_engine::xiangqi::{fen, movegen, perft};

use crate::common::perft_cases;

/// Node budget of one count in a debug build.
const DEBUG_BUDGET: u64 = 400_000;

fn check_counts(max_nodes: u64) {
    for (text, counts) in perft_cases() {
        let (mut position, _) = fen::parse_composed(&text).expect("perft FEN");
        for (depth, expected) in counts.into_iter().filter(|&(_, nodes)| nodes <= max_nodes) {
            assert_eq!(perft::perft(&mut position, depth), expected, "{text} depth {depth}");
        }
    }
}

#[test]
fn perft_counts_within_debug_budget() {
    check_counts(DEBUG_BUDGET);
}

#[test]
#[ignore = "minutes in a debug build: run in release"]
fn perft_counts_all_depths() {
    check_counts(u64::MAX);
}

#[test]
fn divide_sums_to_perft_and_lists_each_legal_move_once() {
    for (text, _) in perft_cases() {
        let (mut position, _) = fen::parse_composed(&text).expect("perft FEN");
        let split = perft::divide(&mut position, 2);
        let legal = movegen::legal_moves(&position);
        assert_eq!(split.len(), legal.len(), "{text}");
        let sum: u64 = split.iter().map(|(_, n)| n).sum();
        assert_eq!(sum, perft::perft(&mut position, 2), "{text}");
    }
}
