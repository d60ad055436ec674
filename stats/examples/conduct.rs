//! Prints the false alarms and detections of the conduct checks (`xq_stats::conduct`)
//! on simulated workers: `cargo run -p xq-stats --example conduct --release`.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xq_stats::conduct::simulation::{CALIBRATION_LEVELS, CheckFigures, Conduct, Detection, Setup, figures};

/// Honest workers: enough for the shares of small p-values to mean something.
const HONEST_WORKERS: u64 = 10_000;
/// Workers of each other conduct.
const CHEATING_WORKERS: u64 = 1_000;

fn main() {
    let mut rng = StdRng::seed_from_u64(2024);
    let mut uniform = || rng.random::<f64>();
    let test = Setup::test();
    let spsa = Setup::spsa();
    let long_leases = Setup { lease_pairs: 64, ..Setup::test() };
    // Four parameters far from their optimum: a flip moves plus's mean result by 0.13 each.
    let steep_spsa = Setup { lease_pairs: 64, gradient: vec![0.2, 0.2, 0.2, 0.2, 0.0, 0.0, 0.0, 0.0], ..Setup::spsa() };
    let runs = [
        ("test", &test, Conduct::Honest),
        ("test", &test, Conduct::FakeWins { share: 0.1 }),
        ("test", &test, Conduct::FakeWins { share: 0.25 }),
        ("test", &test, Conduct::FakeExtremes { share: 0.1 }),
        ("test", &test, Conduct::FakeExtremes { share: 0.25 }),
        ("test", &test, Conduct::Withhold { chance: 0.1 }),
        ("test", &test, Conduct::Withhold { chance: 0.25 }),
        ("test", &test, Conduct::Withhold { chance: 0.5 }),
        ("test, 64/lease", &long_leases, Conduct::Honest),
        ("test, 64/lease", &long_leases, Conduct::Withhold { chance: 0.25 }),
        ("test, 64/lease", &long_leases, Conduct::Withhold { chance: 0.5 }),
        ("spsa", &spsa, Conduct::Honest),
        ("spsa", &spsa, Conduct::Steer { share: 0.1, parameter: 0 }),
        ("spsa", &spsa, Conduct::Steer { share: 0.2, parameter: 0 }),
        ("spsa", &spsa, Conduct::Steer { share: 0.3, parameter: 5 }),
        ("spsa steep, 64/lease", &steep_spsa, Conduct::Honest),
        ("spsa steep, 64/lease", &steep_spsa, Conduct::Steer { share: 0.2, parameter: 5 }),
    ];
    println!("flagged, with the median pairs played when flagged, within {} pairs", test.pairs);
    println!(
        "{:<20} {:<17} {:>7} {:>15} {:>15} {:>15} {:>15}",
        "job", "conduct", "workers", "shape", "expiry", "steering", "any"
    );
    let mut calibration = Vec::new();
    for (job, setup, conduct) in runs {
        let workers = if conduct == Conduct::Honest { HONEST_WORKERS } else { CHEATING_WORKERS };
        let figures = figures(setup, conduct, workers, &mut uniform);
        println!(
            "{job:<20} {:<17} {workers:>7} {:>15} {:>15} {:>15} {:>15}",
            conduct_name(conduct),
            detection(figures.shape.detection, workers, figures.shape.checks),
            detection(figures.expiry.detection, workers, figures.expiry.checks),
            detection(figures.steering.detection, workers, figures.steering.checks),
            detection(figures.any, workers, 1),
        );
        if conduct == Conduct::Honest {
            calibration.push((job, figures));
        }
    }
    println!();
    println!("honest workers' p-values: the share of checks below each level (right: about the level)");
    let levels: Vec<String> = CALIBRATION_LEVELS.iter().map(|l| format!("{l:e}")).collect();
    println!("{:<20} {:<9} {:>9} {:>9} {:>9} {:>9}", "job", "check", "checks", levels[0], levels[1], levels[2]);
    for (job, figures) in calibration {
        for (name, check) in [("shape", figures.shape), ("expiry", figures.expiry), ("steering", figures.steering)] {
            if check.checks > 0 {
                println!("{job:<20} {name:<9} {:>9} {}", check.checks, shares(&check));
            }
        }
    }
}

fn conduct_name(conduct: Conduct) -> String {
    match conduct {
        Conduct::Honest => "honest".to_owned(),
        Conduct::FakeWins { share } => format!("fake wins q={share}"),
        Conduct::FakeExtremes { share } => format!("fake 0, 2 q={share}"),
        Conduct::Withhold { chance } => format!("withhold w={chance}"),
        Conduct::Steer { share, parameter } => format!("steer #{parameter} q={share}"),
    }
}

/// "12.34% (160)", or "-" for a check that never judged.
fn detection(detection: Detection, workers: u64, checks: u64) -> String {
    if checks == 0 {
        return "-".to_owned();
    }
    let share = 100.0 * detection.flagged as f64 / workers as f64;
    match detection.median_pairs {
        Some(pairs) => format!("{share:.2}% ({pairs})"),
        None => format!("{share:.2}%"),
    }
}

fn shares(check: &CheckFigures) -> String {
    check.below.iter().map(|b| format!("{:>9.2e}", *b as f64 / check.checks as f64)).collect::<Vec<_>>().join(" ")
}
