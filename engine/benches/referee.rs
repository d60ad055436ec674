//! The referee's cost per ply, next to the cost of the moves themselves and of a
//! 1,000-node search stand-in, measured in the same run (`cargo bench --bench referee`).
//!
//! Games are random legal games with shuffling moves, so repetitions (which make the
//! referee classify a whole cycle) occur as in real play. The stand-in for a search of
//! 1,000 nodes per move is a perft-style walk of 1,000 nodes (make, generate, unmake):
//! cheaper per node than a real search with evaluation, so the share printed is an
//! upper bound until the search exists.

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xq_engine::xiangqi::movegen::{count_legal, legal_moves};
use xq_engine::xiangqi::rules::{Referee, RefereeConfig};
use xq_engine::xiangqi::{Move, Position};

const GAMES: usize = 400;
const MAX_PLIES: usize = 300;
const SEARCH_NODES: u64 = 1_000;

fn random_games() -> Vec<Vec<Move>> {
    let mut rng = StdRng::seed_from_u64(7);
    (0..GAMES)
        .map(|_| {
            let mut position = Position::startpos();
            let mut referee = Referee::new(position.clone(), RefereeConfig::default());
            let mut moves = Vec::new();
            while moves.len() < MAX_PLIES && referee.ruling().is_none() {
                let legal = legal_moves(&position);
                // Prefer moving back and forth to make repetitions common.
                let mv = if moves.len() >= 4 && rng.random_bool(0.5) {
                    let back: Move = moves[moves.len() - 4];
                    if legal.contains(&back) { back } else { legal[rng.random_range(0..legal.len())] }
                } else {
                    legal[rng.random_range(0..legal.len())]
                };
                referee.play(mv).expect("legal");
                position.make_move(mv);
                moves.push(mv);
            }
            moves
        })
        .collect()
}

/// Visits `budget` nodes below `position`, breadth-limited, as a search would.
fn walk(position: &mut Position, budget: &mut u64) {
    let moves = legal_moves(position);
    for &mv in moves.iter() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let undo = position.make_move(mv);
        std::hint::black_box(count_legal(position));
        if *budget > moves.len() as u64 {
            walk(position, budget);
        }
        position.unmake_move(undo);
    }
}

fn main() {
    let games = random_games();
    let plies: usize = games.iter().map(Vec::len).sum();

    let start = Instant::now();
    for game in &games {
        let mut position = Position::startpos();
        for &mv in game {
            position.make_move(mv);
        }
        std::hint::black_box(&position);
    }
    let bare = start.elapsed().as_secs_f64();

    let start = Instant::now();
    for game in &games {
        let mut referee = Referee::new(Position::startpos(), RefereeConfig::default());
        for &mv in game {
            std::hint::black_box(referee.play(mv).expect("legal"));
        }
    }
    let refereed = start.elapsed().as_secs_f64();

    let start = Instant::now();
    for game in games.iter().take(GAMES / 10) {
        let mut position = Position::startpos();
        for &mv in game {
            let mut budget = SEARCH_NODES;
            walk(&mut position, &mut budget);
            position.make_move(mv);
        }
    }
    let search_plies: usize = games.iter().take(GAMES / 10).map(Vec::len).sum();
    let search_per_ply = start.elapsed().as_secs_f64() / search_plies as f64;

    let referee_per_ply = (refereed - bare) / plies as f64;
    println!("plies: {plies} in {GAMES} games");
    println!("make_move alone:        {:8.1} ns/ply", bare / plies as f64 * 1e9);
    println!("referee (incl. make):   {:8.1} ns/ply", refereed / plies as f64 * 1e9);
    println!("referee's own cost:     {:8.1} ns/ply", referee_per_ply * 1e9);
    println!("1,000-node stand-in:    {:8.1} ns/ply", search_per_ply * 1e9);
    println!(
        "referee share of a game at 1,000 nodes/move: {:.2}% (target < 3%)",
        100.0 * referee_per_ply / (search_per_ply + referee_per_ply)
    );
}
