//! `xq-worker spsa`: an SPSA tuning run with local game pairs, saved after every pair
//! and resumed from its state file.

use std::path::PathBuf;

use anyhow::{Context, bail};
use xq_stats::spsa::{Parameter, Schedule, Tuner, format_parameters, option_value, parse_parameters, tuned_options};
use xq_worker::engine_process::{EngineConfig, EngineProcess};
use xq_worker::spsa::{SpsaSettings, run_spsa};

use crate::play::{PlayArgs, engine_config};

#[derive(clap::Args)]
pub struct SpsaArgs {
    /// The engine to tune, as key=value words (as `match --engine`); both sides of
    /// every pair are copies of it.
    #[arg(long = "engine", num_args = 1.., required = true)]
    engine: Vec<String>,
    /// Parameters in fishtest's format, a line each: name, start, min, max, c_end, r_end.
    #[arg(long, conflicts_with = "tune")]
    params: Option<PathBuf>,
    /// Parameters by name, comma-separated, taken from the spin options the engine
    /// declares (start at its default, c_end a twentieth of the range, r_end 0.002).
    #[arg(long)]
    tune: Option<String>,
    /// Game pairs (iterations) of the run.
    #[arg(long, default_value_t = 1000)]
    pairs: u64,
    /// The schedule's A as a share of the pairs (fishtest's default 0.1).
    #[arg(long, default_value_t = xq_stats::spsa::DEFAULT_A_RATIO)]
    a_ratio: f64,
    /// The learning rate's decay.
    #[arg(long, default_value_t = xq_stats::spsa::DEFAULT_ALPHA)]
    alpha: f64,
    /// The perturbation's decay.
    #[arg(long, default_value_t = xq_stats::spsa::DEFAULT_GAMMA)]
    gamma: f64,
    /// Seed of the perturbations' directions.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The run's state, saved after every pair; when the file exists the run resumes
    /// from it (and --params, --tune and the schedule's settings are its own).
    #[arg(long)]
    state: Option<PathBuf>,
    /// Write theta's history here as CSV.
    #[arg(long)]
    history_csv: Option<PathBuf>,
    /// Write theta's history here as JSON.
    #[arg(long)]
    history_json: Option<PathBuf>,
    #[command(flatten)]
    play: PlayArgs,
}

/// The parameters to tune: from a file in fishtest's format, or the engine's own spin
/// options named by --tune.
fn spsa_parameters(args: &SpsaArgs, engine: &EngineConfig) -> anyhow::Result<Vec<Parameter>> {
    if let Some(path) = &args.params {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        return parse_parameters(&text).with_context(|| format!("{}", path.display()));
    }
    let Some(names) = &args.tune else {
        bail!("name the parameters: --params FILE (fishtest's format) or --tune NAME,NAME");
    };
    let process = EngineProcess::start(engine).with_context(|| format!("cannot start {}", engine.name))?;
    let declared = process.declared_options().to_vec();
    process.quit();
    tuned_options(&declared, names).with_context(|| engine.name.clone())
}

/// Runs (or resumes) the tuning and prints theta.
pub fn run(args: SpsaArgs) -> anyhow::Result<()> {
    let mut engine = engine_config(&args.engine)?;
    args.play.announce_variant(&mut engine);
    let saved = match &args.state {
        Some(path) if path.exists() => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            let tuner = Tuner::resume(&text).with_context(|| format!("{}", path.display()))?;
            eprintln!("resuming {} at pair {} of {}", path.display(), tuner.iteration(), tuner.schedule().pairs);
            Some(tuner)
        }
        _ => None,
    };
    let tuner = match saved {
        Some(tuner) => tuner,
        None => {
            let schedule = Schedule {
                pairs: args.pairs,
                big_a: (args.a_ratio * args.pairs as f64).floor(),
                alpha: args.alpha,
                gamma: args.gamma,
            };
            Tuner::new(spsa_parameters(&args, &engine)?, schedule)?
        }
    };
    let settings = SpsaSettings {
        engine,
        concurrency: args.play.concurrency(),
        pin_cores: args.play.pin,
        openings: args.play.openings()?,
        game: args.play.game()?,
        seed: args.seed,
        state_file: args.state.clone(),
    };
    let names: Vec<String> = tuner.parameters().iter().map(|p| p.name.clone()).collect();
    let values =
        |theta: &[f64]| names.iter().zip(theta).map(|(n, v)| format!("{n}={v:.2}")).collect::<Vec<_>>().join(" ");
    let total = tuner.schedule().pairs;
    let report_every = (total / 100).max(1);
    let (tuner, history) = run_spsa(&settings, tuner, |tuner, _| {
        if tuner.iteration().is_multiple_of(report_every) || tuner.finished() {
            eprintln!("pairs {}/{total}: {}", tuner.iteration(), values(tuner.theta()));
        }
        true
    })?;
    for (path, text) in [(&args.history_csv, history.to_csv()), (&args.history_json, history.to_json())] {
        if let Some(path) = path {
            std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    println!("# after {} pairs, as UCI options:", tuner.iteration());
    for (name, value) in names.iter().zip(tuner.theta()) {
        println!("setoption name {name} value {}", option_value(*value));
    }
    println!("# in fishtest's format, to go on from here:");
    print!("{}", format_parameters(tuner.parameters(), Some(tuner.theta())));
    Ok(())
}
