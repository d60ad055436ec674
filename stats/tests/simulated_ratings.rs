//! Ratings of a field over simulated games: the maximum-likelihood Elo recovers the
//! differences the games were drawn from within their 95% intervals about as often as
//! 95% says, and equals an independent computation (Hunter's MM algorithm for the
//! Bradley-Terry model, in Python: tests/oracles/bradley_terry_mm.py) on the same games.

use std::io::Write;
use std::process::{Command, Stdio};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xq_stats::logistic_score;
use xq_stats::ratings::{Anchor, RatedGame, rate};

const DRAW_RATE: f64 = 0.3;

/// `games` games between random pairs of engines of Elo `truth`.
fn simulate(seed: u64, truth: &[f64], games: usize) -> Vec<RatedGame> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..games)
        .map(|_| {
            let first = rng.random_range(0..truth.len());
            let second = (first + rng.random_range(1..truth.len())) % truth.len();
            let expected = logistic_score(truth[first] - truth[second]);
            let win = (expected - DRAW_RATE / 2.0).clamp(0.0, 1.0);
            let draw = DRAW_RATE.min(1.0 - win);
            let x: f64 = rng.random();
            let score = if x < win {
                1.0
            } else if x < win + draw {
                0.5
            } else {
                0.0
            };
            RatedGame { first, second, score }
        })
        .collect()
}

/// 200 fields of 6 engines (0 to 250 Elo), 600 games each, anchored at engine 0: the
/// others' estimates fall inside their 95% intervals in 90% to 99% of the cases.
#[test]
fn known_differences_are_recovered_within_their_intervals() {
    let truth = [0.0, 50.0, 100.0, 150.0, 200.0, 250.0];
    let (mut inside, mut total) = (0, 0);
    for seed in 0..200 {
        let games = simulate(seed, &truth, 600);
        let ratings = rate(truth.len(), &games, Anchor::Engine(0, 0.0), 0.0).unwrap();
        for ((elo, error), truth) in ratings.elo.iter().zip(&ratings.error).zip(truth).skip(1) {
            total += 1;
            if (elo - truth).abs() <= *error {
                inside += 1;
            }
        }
    }
    let coverage = inside as f64 / total as f64;
    eprintln!("coverage of the 95% intervals: {coverage:.3} of {total}");
    assert!((0.90..=0.99).contains(&coverage), "coverage {coverage}");
}

#[test]
fn ratings_equal_an_independent_computation() {
    let truth = [0.0, -80.0, 30.0, 120.0, 200.0, 45.0, 10.0, -150.0];
    let games = simulate(99, &truth, 5_000);
    let ratings = rate(truth.len(), &games, Anchor::Engine(0, 0.0), 0.0).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracles/bradley_terry_mm.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the oracle");
    let mut input = format!("{}\n", truth.len());
    for g in &games {
        input.push_str(&format!("{} {} {}\n", g.first, g.second, g.score));
    }
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let oracle: Vec<f64> = String::from_utf8(output.stdout).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    for (i, (ours, theirs)) in ratings.elo.iter().zip(&oracle).enumerate() {
        assert!((ours - theirs).abs() < 1e-6, "engine {i}: {ours} against {theirs}");
    }
    // And the likelihood of superiority follows the estimates.
    assert!(ratings.los(4, 3) > 0.5 && ratings.los(7, 1) < 0.5);
}
