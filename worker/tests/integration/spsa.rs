//! SPSA with local games, through real engine processes: a synthetic engine whose
//! strength peaks at a hidden optimum of its two spin options (tests/engines/
//! synthetic_engine.py) is tuned towards it, the run is stopped and resumed from its
//! saved state, and the engine's declared options become the parameters.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use xq_engine::adjudication::Adjudication;
use xq_engine::xiangqi::fen::FenFlavour;
use xq_engine::xiangqi::notation::Dialect;
use xq_stats::spsa::{Parameter, Schedule, Tuner, parse_parameters};
use xq_worker::engine_process::{EngineConfig, EngineProcess};
use xq_worker::spsa::{SpsaSettings, run_spsa};

use crate::{settings, startpos};

const OPTIMUM: [f64; 2] = [60.0, 80.0];

/// The venv's Python, which has pyffish (made by the README's test command).
pub fn python() -> PathBuf {
    let path = std::env::var_os("XQ_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/xq-cluster/venv/bin/python")
    });
    assert!(path.exists(), "{} is missing: scripts/test makes the venv with pyffish", path.display());
    path
}

fn synthetic_engine() -> EngineConfig {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/engines/synthetic_engine.py");
    EngineConfig {
        name: "synthetic".to_owned(),
        command: python(),
        args: vec![script.display().to_string(), "7".to_owned()],
        dialect: Dialect::OneBased,
        fen_flavour: FenFlavour::KnightBishop,
        ..EngineConfig::default()
    }
}

fn distance(theta: &[f64]) -> f64 {
    theta.iter().zip(OPTIMUM).map(|(t, o)| (t - o).powi(2)).sum::<f64>().sqrt()
}

#[test]
fn the_engines_spin_options_become_parameters() {
    let engine = EngineProcess::start(&synthetic_engine()).expect("the synthetic engine starts");
    let parameters: Vec<Parameter> =
        engine.declared_options().iter().filter_map(|line| Parameter::from_uci_option(line)).collect();
    engine.quit();
    let expected = parse_parameters("First, 100, 0, 200, 10, 0.002\nSecond, 50, 0, 200, 10, 0.002").unwrap();
    assert_eq!(parameters, expected);
}

/// From (100, 50), 50 units from the optimum, 400 pairs (stopped after 60 and
/// resumed from the saved state) bring theta within 25 units of it. Games end by
/// resign adjudication once one side is a horse ahead, or drawn at 100 plies.
#[test]
fn spsa_tunes_a_synthetic_engine_towards_its_optimum_and_resumes() {
    let directory = std::env::temp_dir().join(format!("xq-spsa-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let state = directory.join("state.json");
    let parameters = parse_parameters("First, 100, 0, 200, 10, 0.05\nSecond, 50, 0, 200, 10, 0.05").unwrap();
    let tuner = Tuner::new(parameters, Schedule::fishtest(400)).unwrap();
    let mut game = settings("depth=1");
    game.adjudication = Adjudication { draw: None, resign: Some((2, 400)) };
    game.max_plies = Some(100);
    game.hang_timeout = Duration::from_secs(10);
    let spsa = SpsaSettings {
        engine: synthetic_engine(),
        concurrency: 2,
        pin_cores: false,
        openings: startpos(),
        game,
        seed: 11,
        state_file: Some(state.clone()),
    };
    let mut seen = 0;
    let (stopped, _) = run_spsa(&spsa, tuner, |_, report| {
        assert_eq!(report.probe.flips.len(), 2);
        assert!((-2..=2).contains(&report.result), "{report:?}");
        seen += 1;
        seen < 60
    })
    .expect("the first part runs");
    // Pairs already in flight when it was told to stop still count.
    assert!((60..=62).contains(&stopped.iteration()), "{}", stopped.iteration());
    let saved = Tuner::resume(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(saved, stopped);

    let (tuned, history) = run_spsa(&spsa, saved, |_, _| true).expect("the run resumes");
    assert_eq!(tuned.iteration(), 400);
    assert_eq!(history.samples.first().map(|s| s.pairs), Some(stopped.iteration()));
    assert_eq!(history.samples.last().map(|s| s.pairs), Some(400));
    let (start, end) = (distance(&[100.0, 50.0]), distance(tuned.theta()));
    eprintln!("theta {:?}: {end:.1} from the optimum (from {start:.1}, {} pairs)", tuned.theta(), tuned.iteration());
    assert!(end < 25.0, "theta {:?} is {end:.1} from {OPTIMUM:?}", tuned.theta());
    std::fs::remove_dir_all(&directory).unwrap();
}

/// `xq-worker spsa` from the command line: parameters named from the engine's spin
/// options, the history written as CSV and JSON, the final values printed as UCI
/// options and in fishtest's format; a run whose state file exists resumes from it,
/// and a name the engine does not declare is refused with its spin options listed.
#[test]
fn the_spsa_command_tunes_writes_its_history_and_resumes() {
    let directory = std::env::temp_dir().join(format!("xq-spsa-cli-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let engine = synthetic_engine();
    let engine_words = vec![
        format!("cmd={}", engine.command.display()),
        format!("arg={}", engine.args[0]),
        "arg=3".to_owned(),
        "ranks=1-10".to_owned(),
        "fen=nb".to_owned(),
    ];
    let run = |extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_xq-worker"));
        command.arg("spsa").arg("--engine").args(&engine_words);
        command.args(["--tc", "depth=1", "--maxplies", "40", "--concurrency", "2", "--state"]);
        command.arg(directory.join("state.json")).args(extra);
        command.output().expect("xq-worker runs")
    };
    let csv = directory.join("history.csv");
    let json = directory.join("history.json");
    let first = run(&[
        "--tune",
        "first, Second",
        "--pairs",
        "6",
        "--history-csv",
        csv.to_str().unwrap(),
        "--history-json",
        json.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&first.stdout);
    assert!(first.status.success(), "{out}{}", String::from_utf8_lossy(&first.stderr));
    assert!(out.contains("# after 6 pairs, as UCI options:"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("setoption name First value ")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("Second, ") && l.ends_with(", 0, 200, 10, 0.002")), "{out}");
    let history = std::fs::read_to_string(&csv).unwrap();
    assert!(history.starts_with("pairs,\"First\",\"Second\"\n0,100,50\n"), "{history}");
    assert_eq!(history.lines().last().map(|l| l.split(',').next()), Some(Some("6")), "{history}");
    let samples: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(samples["names"], serde_json::json!(["First", "Second"]));

    // The state says the run is over: resuming plays nothing more.
    let again = run(&[]);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{err}");
    assert!(err.contains("at pair 6 of 6"), "{err}");

    std::fs::remove_file(directory.join("state.json")).unwrap();
    let refused = run(&["--tune", "Third"]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(err.contains("declares no spin option 'Third' (its spin options: First, Second)"), "{err}");
    std::fs::remove_dir_all(&directory).unwrap();
}
