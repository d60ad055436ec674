//! Integration tests of the worker: matches between real engines and a scripted fake
//! engine that fails in every way the runner must survive.

mod config_file;
mod failures;
mod fleet;
mod matches;
mod parent_death;
mod reference;
mod sandbox;
mod selfplay;
mod spsa;
mod tournament;
mod warnings;

use std::path::PathBuf;
use std::time::Duration;

use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::rules::RuleSet;
use xq_worker::engine_process::EngineConfig;
use xq_worker::game::{Adjudication, GameSettings, Opening, Start};
use xq_worker::time_control::TimeControl;

/// Our engine, built by cargo next to the worker (the workspace builds both).
pub fn our_engine(name: &str) -> EngineConfig {
    let target = PathBuf::from(env!("CARGO_BIN_EXE_xq-worker"));
    let command = target.parent().expect("target dir").join("xq-engine");
    assert!(command.exists(), "{} is missing: build the workspace (cargo build) first", command.display());
    EngineConfig { name: name.to_owned(), command, ..EngineConfig::default() }
}

/// The fake engine in `mode`.
pub fn fake_engine(mode: &str) -> EngineConfig {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/engines/fake_engine.py");
    EngineConfig {
        name: format!("fake-{mode}"),
        command: PathBuf::from("python3"),
        args: vec![script.display().to_string(), mode.to_owned()],
        ..EngineConfig::default()
    }
}

pub fn settings(time_control: &str) -> GameSettings {
    GameSettings {
        time_control: time_control.parse::<TimeControl>().expect("time control"),
        rules: RuleSet::Wxf,
        time_margin: Duration::from_millis(100),
        hang_timeout: Duration::from_secs(2),
        adjudication: Adjudication::default(),
        max_plies: Some(300),
        violation_timing: Default::default(),
    }
}

pub fn startpos() -> Vec<Start> {
    vec![Start::from(Opening { start: Position::startpos(), moves: Vec::new() })]
}
