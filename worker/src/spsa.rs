//! SPSA tuning on one machine: the engine plays itself, one copy at `theta + c * flip`
//! and the other at `theta - c * flip`, a game pair per iteration on the same opening
//! with colours swapped, and each pair's result moves theta ([`xq_stats::spsa`]).
//!
//! Pairs are played several at once by the match runner, each with the probe of the
//! iteration reached when it started (as fishtest's workers play theirs); the run's
//! state is saved after every pair, so a stopped run resumes where it was.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xq_engine::color::Color;
use xq_engine::xiangqi::rules::Outcome;
use xq_stats::spsa::{History, Probe, Tuner, option_value};

use crate::engine_process::EngineConfig;
use crate::game::{GameSettings, Start};
use crate::match_runner::{FinishedGame, MatchError, MatchSettings, run_match_with_options};

/// A local tuning run.
#[derive(Clone, Debug)]
pub struct SpsaSettings {
    /// The engine tuned; both sides are copies of it.
    pub engine: EngineConfig,
    /// Game pairs at once.
    pub concurrency: usize,
    /// Pin each game slot to its own core.
    pub pin_cores: bool,
    /// Where the pairs start; pair `i` plays opening `i` modulo their number.
    pub openings: Vec<Start>,
    /// How each game is played.
    pub game: GameSettings,
    /// The flips' seed: the same seed and results give the same run.
    pub seed: u64,
    /// Where the run's state is saved after every pair, if anywhere.
    pub state_file: Option<PathBuf>,
}

/// A pair as the run saw it.
#[derive(Clone, Debug)]
pub struct PairReport {
    /// The probe it was played with.
    pub probe: Probe,
    /// The first (plus) engine's wins minus losses.
    pub result: i64,
}

/// The run cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum SpsaRunError {
    /// The games could not be played.
    #[error(transparent)]
    Match(#[from] MatchError),
    /// The state could not be saved.
    #[error("cannot save the run's state to {path}: {error}")]
    Save {
        /// The state file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// What the pairs in flight share with the reports.
struct Run {
    tuner: Tuner,
    /// Probes of the pairs in flight, by pair.
    probes: HashMap<usize, Probe>,
    flips: StdRng,
}

/// The engine's options for a probe's values.
fn options(tuner: &Tuner, values: &[f64]) -> Vec<(String, String)> {
    tuner.parameters().iter().zip(values).map(|(p, v)| (p.name.clone(), option_value(*v))).collect()
}

/// Points of the first engine in a game of the pair: +1 win, 0 draw, -1 loss.
fn first_engine_result(game: &FinishedGame) -> i64 {
    let first = if game.leg == 0 { Color::Red } else { Color::Black };
    match game.record.outcome {
        Outcome::Win(winner) if winner == first => 1,
        Outcome::Win(_) => -1,
        Outcome::Draw => 0,
    }
}

/// Tunes from `tuner` until its schedule's pairs are played (or `on_pair` returns
/// false); returns the tuner as it ended and the history of theta.
pub fn run_spsa(
    settings: &SpsaSettings,
    tuner: Tuner,
    mut on_pair: impl FnMut(&Tuner, &PairReport) -> bool,
) -> Result<(Tuner, History), SpsaRunError> {
    let remaining = tuner.schedule().pairs.saturating_sub(tuner.iteration()) as usize;
    let first_pair = tuner.iteration() as usize;
    let mut history = History::of(&tuner);
    // Seeded by where the run stands, so that a resumed run does not replay the
    // flips it started with.
    let flips = StdRng::seed_from_u64(settings.seed ^ tuner.iteration().wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let run = Mutex::new(Run { tuner, probes: HashMap::new(), flips });
    let match_settings = MatchSettings {
        engines: [settings.engine.clone(), settings.engine.clone()],
        pairs: (first_pair..first_pair + remaining).collect(),
        concurrency: settings.concurrency,
        pin_cores: settings.pin_cores,
        openings: settings.openings.clone().into(),
        game: settings.game.clone(),
        sprt: None,
    };
    let pair_options = |pair: usize| {
        let mut run = run.lock().expect("the run's lock");
        let count = run.tuner.parameters().len();
        let flips: Vec<i8> = (0..count).map(|_| if run.flips.random::<bool>() { 1 } else { -1 }).collect();
        let probe = run.tuner.probe(&flips).expect("one flip per parameter");
        let given = [options(&run.tuner, &probe.plus), options(&run.tuner, &probe.minus)];
        run.probes.insert(pair, probe);
        Some(given)
    };
    let mut first_legs: HashMap<usize, i64> = HashMap::new();
    let mut failure = None;
    run_match_with_options(&match_settings, &pair_options, |game, _| {
        let Some(first_leg) = first_legs.remove(&game.pair) else {
            first_legs.insert(game.pair, first_engine_result(game));
            return true;
        };
        let result = first_leg + first_engine_result(game);
        let mut run = run.lock().expect("the run's lock");
        let probe = run.probes.remove(&game.pair).expect("a probe for every pair started");
        run.tuner.apply(&probe, result, 1);
        history.observe(&run.tuner);
        if let Some(path) = &settings.state_file
            && let Err(error) = save(path, &run.tuner.state())
        {
            failure = Some(SpsaRunError::Save { path: path.clone(), error });
            return false;
        }
        on_pair(&run.tuner, &PairReport { probe, result })
    })?;
    if let Some(error) = failure {
        return Err(error);
    }
    let tuner = run.into_inner().expect("the run's lock").tuner;
    Ok((tuner, history))
}

/// Writes the state to a temporary file and renames it over the old one, so that a
/// run killed while saving keeps its previous state.
fn save(path: &PathBuf, state: &str) -> std::io::Result<()> {
    let mut temporary = path.clone().into_os_string();
    temporary.push(".tmp");
    std::fs::write(&temporary, state)?;
    std::fs::rename(&temporary, path)
}
