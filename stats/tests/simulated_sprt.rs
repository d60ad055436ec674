//! The GSPRT's error rates over many simulated tests: data drawn at the null
//! hypothesis' Elo must accept H1 about `alpha` of the time, data at the alternative's
//! Elo accept H0 about `beta` of the time. (The bounds are Wald's; overshoot and
//! looking every few pairs make the real rates somewhat lower than nominal.)

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xq_stats::{Model, Sprt, logistic_score};

/// Games are independent with this draw rate; a pair sums two games.
const DRAW_RATE: f64 = 0.4;

/// The pentanomial distribution of pairs when a game scores `s` on average.
fn pentanomial(s: f64) -> [f64; 5] {
    let (w, d) = (s - DRAW_RATE / 2.0, DRAW_RATE);
    let l = 1.0 - w - d;
    let game = [l, d, w];
    let mut pair = [0.0; 5];
    for (a, pa) in game.iter().enumerate() {
        for (b, pb) in game.iter().enumerate() {
            pair[a + b] += pa * pb;
        }
    }
    pair
}

/// Normalized Elo of a pentanomial distribution (fishtest's definition).
fn normalized_elo(p: &[f64; 5]) -> f64 {
    let scores = [0.0, 0.25, 0.5, 0.75, 1.0];
    let mean: f64 = p.iter().zip(scores).map(|(p, a)| p * a).sum();
    let var: f64 = p.iter().zip(scores).map(|(p, a)| p * (a - mean).powi(2)).sum();
    (mean - 0.5) / (var.sqrt() * std::f64::consts::SQRT_2) * 800.0 / std::f64::consts::LN_10
}

/// Runs one SPRT on pairs drawn from `p`; `Some(true)` when it accepts H1.
fn run(sprt: &Sprt, p: &[f64; 5], rng: &mut StdRng) -> Option<bool> {
    let mut counts = [0u64; 5];
    for pairs in 1..=200_000 {
        let mut x: f64 = rng.random();
        let outcome = p.iter().position(|&q| {
            x -= q;
            x < 0.0
        });
        counts[outcome.unwrap_or(4)] += 1;
        if pairs % 8 == 0
            && let Some(decision) = sprt.state(&counts).unwrap().decision()
        {
            return Some(decision);
        }
    }
    None
}

fn error_rates(model: Model, (elo0, p0): (f64, [f64; 5]), (elo1, p1): (f64, [f64; 5])) -> (f64, f64) {
    let sprt = Sprt::new(elo0, elo1, 0.05, 0.05, model).unwrap();
    let mut rng = StdRng::seed_from_u64(20261122);
    let runs = 300;
    let false_positives = (0..runs).filter(|_| run(&sprt, &p0, &mut rng) == Some(true)).count();
    let false_negatives = (0..runs).filter(|_| run(&sprt, &p1, &mut rng) == Some(false)).count();
    (false_positives as f64 / runs as f64, false_negatives as f64 / runs as f64)
}

fn near_nominal(rate: f64, what: &str) {
    eprintln!("{what}: {rate:.3}");
    // 0.05 nominal; 300 runs give a standard error of 0.0126.
    assert!((0.01..=0.085).contains(&rate), "{what}: {rate}");
}

#[test]
fn logistic_sprt_errs_about_as_often_as_alpha_and_beta() {
    let (elo0, elo1) = (0.0, 30.0);
    let (fp, fn_) = error_rates(
        Model::Logistic,
        (elo0, pentanomial(logistic_score(elo0))),
        (elo1, pentanomial(logistic_score(elo1))),
    );
    near_nominal(fp, "false positives");
    near_nominal(fn_, "false negatives");
}

#[test]
fn normalized_sprt_errs_about_as_often_as_alpha_and_beta() {
    let (p0, p1) = (pentanomial(logistic_score(0.0)), pentanomial(logistic_score(25.0)));
    let (fp, fn_) = error_rates(Model::Normalized, (normalized_elo(&p0), p0), (normalized_elo(&p1), p1));
    near_nominal(fp, "false positives");
    near_nominal(fn_, "false negatives");
}
