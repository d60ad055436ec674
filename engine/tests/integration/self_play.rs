//! The engine playing itself under the referee: never an illegal move, and it stays out
//! of repetitions that the rules make it lose.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xq_engine::xiangqi::movegen::legal_moves;
use xq_engine::xiangqi::notation::{Dialect, parse_uci};
use xq_engine::xiangqi::rules::{Referee, RefereeConfig};
use xq_engine::xiangqi::search::limits::Limits;
use xq_engine::xiangqi::search::{SearchOptions, Shared, search};
use xq_engine::xiangqi::{Move, Position, fen};

/// Plays `games` games at `nodes` per move from the start position after four random
/// plies; returns the number of plies played. Any illegal move fails the test.
fn self_play(games: usize, nodes: u64, seed: u64) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let shared = Shared::new(4);
    let limits = Limits { nodes: Some(nodes), ..Limits::default() };
    let mut plies = 0;
    for game in 0..games {
        let start = Position::startpos();
        let mut referee = Referee::new(start.clone(), RefereeConfig::default());
        let mut moves: Vec<Move> = Vec::new();
        while referee.ruling().is_none() && moves.len() < 300 {
            let mv = if moves.len() < 4 {
                let legal = legal_moves(referee.position());
                legal[rng.random_range(0..legal.len())]
            } else {
                let result = search(&shared, &start, &moves, &limits, &SearchOptions::default(), |_| {});
                result.best.unwrap_or_else(|| panic!("game {game}: no move in {}", referee.position()))
            };
            if let Err(error) = referee.play(mv) {
                panic!("game {game}: illegal move {mv} in {}: {error}", referee.position());
            }
            moves.push(mv);
        }
        plies += moves.len();
    }
    plies
}

#[test]
fn a_few_fast_games_without_an_illegal_move() {
    assert!(self_play(4, 200, 1) > 40);
}

#[test]
#[ignore = "a thousand games: run in release"]
fn a_thousand_fast_games_without_an_illegal_move() {
    let plies = self_play(1000, 300, 2);
    println!("{plies} plies");
}

fn best_move_after(fen_text: &str, moves: &[&str], depth: i32) -> Move {
    let (start, _) = fen::parse_composed(fen_text).unwrap();
    let mut position = start.clone();
    let played: Vec<Move> = moves
        .iter()
        .map(|text| {
            let mv = parse_uci(&position, text, Dialect::ZeroBased).unwrap();
            position.make_move(mv);
            mv
        })
        .collect();
    let limits = Limits { depth: Some(depth), ..Limits::default() };
    search(&Shared::new(4), &start, &played, &limits, &SearchOptions::default(), |_| {}).best.expect("a move")
}

#[test]
fn the_engine_does_not_close_a_perpetual_check_it_would_lose() {
    // Rule case #1: Red's next h9h8 would repeat a perpetual check against Black's
    // perpetual chase, which loses (WXF 3.1.H).
    let mv = best_move_after(
        "c2a1k3/2c1a2R1/b6P1/8p/9/9/9/9/4K4/9 w - - 0 1",
        &["h8h9", "f9f8", "h9h8", "f8f9", "h8h9", "f9f8"],
        6,
    );
    assert_ne!(mv.to_string(), "h9h8");
}

#[test]
fn the_engine_does_not_close_a_perpetual_chase_it_would_lose() {
    // Rule case #25: Red's d2e1 would close a forbidden perpetual chase (WXF 20.3).
    let moves = ["e2d4", "c2c1", "h2h1", "g2g1", "e1d2", "g1g0", "d2e1", "g0g1", "e1d2", "g1g0"];
    let mv = best_move_after("2c1kab2/4a4/4b4/9/9/9/P1p5P/2r1N1cC1/4A4/3ACK3 w - - 0 1", &moves, 6);
    assert_ne!(mv.to_string(), "d2e1");
}
