//! The rating computation's time for 100 engines and 1,000,000 games, against a
//! reference in the same process: one pass over the games summing their scores (the
//! least any computation over them costs).
//!
//! cargo bench -p xq-stats --bench ratings

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xq_stats::ratings::{Anchor, RatedGame, rate};

fn main() {
    let (engines, count) = (100, 1_000_000);
    let mut rng = StdRng::seed_from_u64(1);
    let truth: Vec<f64> = (0..engines).map(|i| i as f64 * 8.0).collect();
    let games: Vec<RatedGame> = (0..count)
        .map(|_| {
            let first = rng.random_range(0..engines);
            let second = (first + rng.random_range(1..engines)) % engines;
            let expected = xq_stats::logistic_score(truth[first] - truth[second]);
            let score = if rng.random::<f64>() < expected { 1.0 } else { 0.0 };
            RatedGame { first, second, score }
        })
        .collect();
    let started = Instant::now();
    let total: f64 = games.iter().map(|g| g.score + g.first as f64 * 1e-9).sum();
    let reference = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let ratings = rate(engines, &games, Anchor::Engine(0, 0.0), 0.0).expect("ratings");
    let seconds = started.elapsed().as_secs_f64();
    println!("reference: one pass over {count} games in {:.1} ms (checksum {total:.0})", reference * 1e3);
    println!(
        "ratings of {engines} engines from {count} games: {:.1} ms; ratio {:.1}; engine 99 at {:+.1} ± {:.1} (truth {:+.1})",
        seconds * 1e3,
        seconds / reference,
        ratings.elo[99],
        ratings.error[99],
        truth[99]
    );
}
