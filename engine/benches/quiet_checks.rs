//! The cost of quiescence's quiet checks (`cargo bench --bench quiet_checks`): the
//! generator that tests only the moves that can check, against generating every quiet
//! move and testing each, and against generating the captures a quiescence node
//! generates anyway, on the positions of random legal games, in the same run.

use std::hint::black_box;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::movegen::{MoveList, Selection, generate_into, legal_moves, quiet_checks_into};

const GAMES: usize = 300;
const PLIES: usize = 150;
const ROUNDS: usize = 20;

fn positions() -> Vec<Position> {
    let mut rng = StdRng::seed_from_u64(11);
    let mut positions = Vec::new();
    for _ in 0..GAMES {
        let mut position = Position::startpos();
        for _ in 0..PLIES {
            let legal = legal_moves(&position);
            if legal.is_empty() {
                break;
            }
            positions.push(position.clone());
            position.make_move(legal[rng.random_range(0..legal.len())]);
        }
    }
    positions
}

/// Nanoseconds per position of `generate`, over every position `ROUNDS` times.
fn time(positions: &[Position], generate: impl Fn(&Position, &mut MoveList)) -> f64 {
    let mut list = MoveList::new();
    let start = Instant::now();
    for _ in 0..ROUNDS {
        for position in positions {
            list.clear();
            generate(position, &mut list);
            black_box(list.len());
        }
    }
    start.elapsed().as_nanos() as f64 / (ROUNDS * positions.len()) as f64
}

fn main() {
    let positions = positions();
    let captures = time(&positions, |p, list| generate_into(p, Selection::Captures, list));
    let every_quiet = time(&positions, |p, list| {
        let mut quiets = MoveList::new();
        generate_into(p, Selection::Quiets, &mut quiets);
        for &mv in quiets.iter().filter(|&&mv| p.gives_check(mv)) {
            list.push(mv);
        }
    });
    let checks = time(&positions, quiet_checks_into);
    println!("{} positions of random games", positions.len());
    println!("captures (a quiescence node's moves): {captures:.0} ns a position");
    println!(
        "quiet checks, every quiet move tested: {every_quiet:.0} ns ({:.2}x the captures)",
        every_quiet / captures
    );
    println!(
        "quiet checks, the generator:          {checks:.0} ns ({:.2}x the captures, {:.2}x every quiet move tested)",
        checks / captures,
        checks / every_quiet
    );
}
