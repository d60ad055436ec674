//! `xq-trainer`: trains the engine's NNUE net on self-play chunks (`train`), runs the
//! closed loop of self-play, training and testing on a coordinator (`loop`), exports
//! a checkpoint as a net file (`export`), and fits the score scale of a data set
//! (`fit-scale`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use xq_proto::client;
use xq_trainer::closed_loop::{self, GenerationReport, LoopSettings, SelfPlayPlan, TestPlan};
use xq_trainer::data::{Filter, LoaderSettings, Part, Pass, find_chunks};
use xq_trainer::model::Model;
use xq_trainer::optim::{RateSettings, Schedule};
use xq_trainer::train::{Factorising, TrainSettings, fit_data_scale, train};
use xq_trainer::{bench, checkpoint, device, export};

#[derive(Parser)]
#[command(name = "xq-trainer", version, about = "NNUE training for xq-engine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Trains a net on a directory of chunks; resumes from the run directory's
    /// checkpoint when it has one. Ctrl-C writes a checkpoint and stops.
    Train(Box<TrainArgs>),
    /// The closed loop on a coordinator: self-play with the best net, training, an
    /// SPRT against the best net, promotion; generation after generation. Run it
    /// again after a stop to go on where it stopped.
    Loop(Box<LoopArgs>),
    /// Writes a checkpoint's model as a net file.
    Export {
        /// The checkpoint (a run directory's checkpoint.safetensors).
        #[arg(long)]
        checkpoint: PathBuf,
        /// The net file to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// The training-speed benchmark: times this trainer's step on batches of real
    /// positions, and saves them with the initial weights for the PyTorch baselines
    /// (`--save`; `scripts/bench-trainer` runs both).
    Bench {
        /// A directory of chunks.
        #[arg(long)]
        data: PathBuf,
        /// Distinct batches to take from the data (whole ones), cycled through by the steps.
        #[arg(long, default_value_t = 20)]
        batches: usize,
        /// Positions per batch.
        #[arg(long, default_value_t = 16_384)]
        batch_size: usize,
        /// Timed steps (after as many untimed ones as batches, at most 5).
        #[arg(long, default_value_t = 100)]
        steps: usize,
        /// libtorch's threads, intra- and inter-op (default: the cores this process
        /// may use, which the feature transformer's kernel always uses).
        #[arg(long)]
        threads: Option<usize>,
        /// Also write the batches and the initial weights here (safetensors) for the
        /// baselines.
        #[arg(long)]
        save: Option<PathBuf>,
        /// auto, cpu or cuda.
        #[arg(long, default_value = "auto")]
        device: String,
    },
    /// Prints the scale (centipawns) under which the data's scores best predict its results.
    FitScale {
        /// A directory of chunks (`xq data N -o DIR`, or `xq-worker selfplay --out DIR`).
        #[arg(long)]
        data: PathBuf,
    },
}

#[derive(clap::Args)]
struct TrainArgs {
    /// A directory of chunks (`xq data N -o DIR`, or `xq-worker selfplay --out DIR`).
    #[arg(long, required_unless_present = "job", conflicts_with = "job")]
    data: Option<PathBuf>,
    /// A self-play job on the coordinator to train on: its chunks are downloaded into
    /// the run directory's data/jobN (a rerun fetches only the new ones).
    #[arg(long)]
    job: Option<u64>,
    #[command(flatten)]
    coordinator: CoordinatorArgs,
    /// The run directory: checkpoint, log.jsonl and net.xqnn.
    #[arg(long)]
    out: PathBuf,
    /// Start from this checkpoint's model (a previous generation), or from a net file
    /// (`XQNN`, such as a net the engine plays) read back into floats.
    #[arg(long)]
    init: Option<PathBuf>,
    /// A directory of chunks whose validation games are scored after every epoch
    /// besides the run's own (logged as fixed_validation_loss): a loss that compares
    /// runs trained on different data.
    #[arg(long)]
    fixed_validation: Option<PathBuf>,
    #[command(flatten)]
    training: TrainingArgs,
    /// No progress bar: the log's lines on standard error instead.
    #[arg(long)]
    quiet: bool,
}

/// Where the coordinator is and how to authenticate.
#[derive(clap::Args)]
struct CoordinatorArgs {
    /// The coordinator's URL.
    #[arg(long, env = "XQ_COORDINATOR", default_value = "http://127.0.0.1:7420")]
    coordinator: String,
    /// A client token.
    #[arg(long, env = "XQ_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding the client token (such as <data>/client-token).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// The CA certificate (PEM) for a TLS coordinator.
    #[arg(long)]
    ca_cert: Option<PathBuf>,
}

impl CoordinatorArgs {
    async fn connect(&self) -> Result<client::Client, client::ClientError> {
        let address = client::Address {
            url: &self.coordinator,
            token: self.token.as_deref(),
            token_file: self.token_file.as_deref(),
            ca_cert: self.ca_cert.as_deref(),
        };
        client::connect_to(&address).await
    }
}

/// How a net is trained: the schedule, the loss, the data's filters, the device.
#[derive(clap::Args)]
struct TrainingArgs {
    /// Epochs to train.
    #[arg(long, default_value_t = 10)]
    epochs: usize,
    /// Positions per epoch at most (default: every training position once).
    #[arg(long)]
    epoch_positions: Option<usize>,
    /// Positions per batch.
    #[arg(long, default_value_t = 16_384)]
    batch_size: usize,
    /// The learning rate (default 1e-3; 5e-4 for a loop from a seed net, the rate of
    /// every generation shipped: docs/benchmarks.md).
    #[arg(long)]
    lr: Option<f64>,
    /// The learning-rate schedule.
    #[arg(long, value_enum, default_value = "cosine")]
    schedule: Schedule,
    /// The step schedule's factor.
    #[arg(long, default_value_t = 0.3)]
    gamma: f64,
    /// The step schedule's period in epochs.
    #[arg(long, default_value_t = 4)]
    step_epochs: usize,
    /// AdamW's weight decay.
    #[arg(long, default_value_t = 1e-4)]
    weight_decay: f64,
    /// The share of the target from the search score; the rest from the game result.
    #[arg(long, default_value_t = 0.75)]
    lambda: f64,
    /// The loss's scale in centipawns (default: fitted to the data).
    #[arg(long)]
    scale: Option<f64>,
    /// Seed of the initialisation and the data order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Loader threads (two kept the wait for data under a tenth of the time on two
    /// cores; one waited 12%).
    #[arg(long, default_value_t = 2)]
    loaders: usize,
    /// libtorch's threads (default: libtorch's choice, the cores).
    #[arg(long)]
    torch_threads: Option<i32>,
    /// Positions in the shuffle buffer.
    #[arg(long, default_value_t = 1 << 20)]
    shuffle_buffer: usize,
    /// Share of the games held out for validation.
    #[arg(long, default_value_t = 0.05)]
    validation_share: f64,
    /// Keep positions whose side to move is in check.
    #[arg(long)]
    keep_in_check: bool,
    /// Keep positions whose best move captures.
    #[arg(long)]
    keep_captures: bool,
    /// Skip positions before this ply.
    #[arg(long, default_value_t = 0)]
    min_ply: u16,
    /// Keep positions scored as mates.
    #[arg(long)]
    keep_mates: bool,
    /// Skip positions scored beyond this many centipawns either way.
    #[arg(long, default_value_t = 3_000)]
    max_score: i32,
    /// Mirror training positions left to right in about half of the epochs each
    /// (validation is never mirrored): on unless `--mirror off`; a net trained so beat
    /// the same net trained without it by +21 Elo (docs/training.md).
    #[arg(long, default_value = "on", num_args = 0..=1, default_missing_value = "on",
          value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::Set)]
    mirror: bool,
    /// Train the feature transformer factorised: each feature's weights are its own
    /// plus a row shared by its piece and point in every king bucket, summed into the
    /// net at export (the engine's net is unchanged). `auto`: for a fresh net, and from
    /// --init (or a loop's parent) as that model was; `--factorise` alone is `on`.
    #[arg(long, value_enum, default_value = "auto", num_args = 0..=1, default_missing_value = "on")]
    factorise: Factorising,
    /// Stop a run once this many epochs pass without a lower validation loss (the net
    /// is the best epoch's either way; default: train every epoch, which a seeded
    /// generation needs: its loss rises after the first epoch and falls below the
    /// seed's as the cosine schedule ends); 0: never.
    #[arg(long)]
    patience: Option<usize>,
    /// auto (CUDA when present), cpu or cuda.
    #[arg(long, default_value = "auto")]
    device: String,
}

impl TrainingArgs {
    /// The device, with libtorch's threads set.
    fn device(&self) -> anyhow::Result<tch::Device> {
        if let Some(threads) = self.torch_threads {
            tch::set_num_threads(threads);
        }
        device(&self.device).map_err(anyhow::Error::msg)
    }

    /// The settings of a run into `out`, the factoriser's choice resolved against the
    /// run's checkpoint when it resumes, else against `init`.
    fn settings(
        &self,
        data: String,
        out: &Path,
        init: Option<PathBuf>,
        recipe: Recipe,
    ) -> anyhow::Result<TrainSettings> {
        let factorise = self.factorise.resolve(out, init.as_deref())?;
        let (rate, patience) = match recipe {
            Recipe::Fresh => (1e-3, None),
            Recipe::Seeded => (5e-4, None),
        };
        Ok(TrainSettings {
            data,
            loader: LoaderSettings {
                threads: self.loaders,
                batch_size: self.batch_size.max(1),
                shuffle_buffer: self.shuffle_buffer,
                validation_share: self.validation_share,
                filter: Filter {
                    skip_in_check: !self.keep_in_check,
                    skip_captures: !self.keep_captures,
                    min_ply: self.min_ply,
                    skip_mates: !self.keep_mates,
                    max_score: self.max_score,
                },
                mirror: self.mirror,
            },
            epochs: self.epochs,
            epoch_positions: self.epoch_positions,
            rate: RateSettings {
                rate: self.lr.unwrap_or(rate),
                schedule: self.schedule,
                gamma: self.gamma,
                step_epochs: self.step_epochs,
            },
            weight_decay: self.weight_decay,
            lambda: self.lambda,
            scale: self.scale,
            seed: self.seed,
            init,
            fixed_validation: Vec::new(),
            factorise,
            patience: match self.patience {
                Some(0) => None,
                Some(epochs) => Some(epochs),
                None => patience,
            },
        })
    }
}

/// Which defaults a run's rate and patience take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recipe {
    /// A net trained from scratch, or by hand from another (`xq-trainer train`).
    Fresh,
    /// A loop's generations from a seed net: a trained net refined on its own games.
    Seeded,
}

#[derive(clap::Args)]
struct LoopArgs {
    #[command(flatten)]
    coordinator: CoordinatorArgs,
    /// The loop's directory: its state, the data, each generation's training run.
    #[arg(long)]
    out: PathBuf,
    /// The lineage's name in the coordinator's net registry (default: the directory's
    /// name).
    #[arg(long)]
    lineage: Option<String>,
    /// The generation to stop after.
    #[arg(long, default_value_t = 1)]
    generations: u32,
    /// Generations of self-play data each net trains on (the newest).
    #[arg(long, default_value_t = 3)]
    window: usize,
    /// Our engine's binary, tested with each new net (default: xq-engine beside this
    /// program).
    #[arg(long)]
    engine: Option<PathBuf>,
    /// The lineage's seed (generation 0): a net file, or `embedded` for the engine's
    /// embedded net. The first generation plays it, trains from it and must beat it;
    /// without a seed the lineage starts from the handcrafted evaluation.
    #[arg(long)]
    seed_net: Option<PathBuf>,
    /// Self-play: search nodes per move.
    #[arg(long, default_value_t = 4000)]
    nodes: u64,
    /// Self-play: units per generation.
    #[arg(long, default_value_t = 1000)]
    units: u64,
    /// Self-play: games per unit.
    #[arg(long, default_value_t = 16)]
    games_per_unit: u32,
    /// Self-play: random opening plies.
    #[arg(long, default_value_t = 8)]
    random_plies: u32,
    /// Self-play: the seed of the first generation's openings.
    #[arg(long, default_value_t = 1)]
    selfplay_seed: u64,
    /// The test's time control, at the coordinator's reference speed.
    #[arg(long, default_value = "10+0.1")]
    tc: String,
    /// The test's SPRT bounds, normalized Elo.
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    elo0: f64,
    #[arg(long, default_value_t = 10.0, allow_hyphen_values = true)]
    elo1: f64,
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    #[arg(long, default_value_t = 0.05)]
    beta: f64,
    /// The most pairs before a test stops undecided (the net is then rejected).
    #[arg(long, default_value_t = 10_000)]
    max_pairs: u64,
    /// Pairs of a fixed-length match a promoted net then plays against its parent from
    /// the openings after the SPRT's, whose Elo is the one to quote (an SPRT's own is
    /// biased by its stopping); 0: none.
    #[arg(long, default_value_t = 0)]
    confirm_pairs: u64,
    /// The test's opening book (such as books/xiangqi-2ply.epd).
    #[arg(long)]
    book: Option<PathBuf>,
    /// Seconds between looks at a running job.
    #[arg(long, default_value_t = 10.0)]
    poll_seconds: f64,
    #[command(flatten)]
    training: TrainingArgs,
}

fn main() -> anyhow::Result<()> {
    match xq_cli::parse::<Cli>(&[]).command {
        Command::Train(args) => run_training(*args),
        Command::Loop(args) => run_loop(*args),
        Command::Export { checkpoint: path, out } => {
            let loaded = checkpoint::load(&path, tch::Device::Cpu)?;
            let network = export::export(&loaded.model, &loaded.progress, &out)?;
            println!("{}: {}", out.display(), network.description());
            Ok(())
        }
        Command::Bench { data, batches, batch_size, steps, threads, save, device: name } => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let threads = i32::try_from(threads.unwrap_or(cores)).context("--threads")?;
            tch::set_num_threads(threads);
            tch::set_num_interop_threads(threads);
            let device = device(&name).map_err(anyhow::Error::msg)?;
            let settings = LoaderSettings { batch_size, ..LoaderSettings::default() };
            let pass = Pass::start(&find_chunks(&data)?, Part::Training, &settings, 1);
            let taken: Vec<_> = pass.batches.iter().filter(|b| b.len() == batch_size).take(batches).collect();
            if taken.len() < batches {
                bail!(
                    "{} holds {} whole batches of {batch_size} training positions, fewer than the {batches} asked for",
                    data.display(),
                    taken.len()
                );
            }
            let model = Model::new(device, 1);
            if let Some(path) = save {
                bench::save(&taken, &model, &path).with_context(|| format!("writing {}", path.display()))?;
            }
            let warmup = taken.len().min(5);
            let measured = bench::measure(model, &taken, warmup, steps, device);
            println!(
                "xq-trainer: {:.0} positions/s over {steps} timed steps of {batch_size} cycling {} distinct batches \
                 ({warmup} warm-up steps); threads: libtorch {} intra-op, {} inter-op, transformer kernel {cores}; \
                 loss: first step {:.6}, step {warmup} {:.6}",
                measured.positions_per_second,
                taken.len(),
                tch::get_num_threads(),
                tch::get_num_interop_threads(),
                measured.first_loss,
                measured.warmed_loss,
            );
            Ok(())
        }
        Command::FitScale { data } => {
            let chunks = find_chunks(&data)?;
            let Some(fitted) = fit_data_scale(&chunks, &LoaderSettings::default(), 1, usize::MAX) else {
                bail!("no positions in {}", data.display());
            };
            for refusal in &fitted.refusals {
                eprintln!("{refusal}");
            }
            println!("scale {:.1} centipawns over {} positions", fitted.scale, fitted.positions);
            Ok(())
        }
    }
}

fn run_training(args: TrainArgs) -> anyhow::Result<()> {
    let device = args.training.device()?;
    let (data, source) = match (args.data.clone(), args.job) {
        (Some(dir), _) => (dir.clone(), dir.display().to_string()),
        (None, Some(job)) => (fetch_job(&args, job)?, format!("job {job} of {}", args.coordinator.coordinator)),
        (None, None) => bail!("give --data DIR or --job N"),
    };
    let chunks = find_chunks(&data)?;
    let mut settings = args.training.settings(source, &args.out, args.init.clone(), Recipe::Fresh)?;
    if let Some(dir) = &args.fixed_validation {
        settings.fixed_validation = find_chunks(dir)?;
    }
    let stop = stop_on_ctrl_c()?;
    eprintln!("{} chunks in {}, training on {device:?}", chunks.len(), data.display());
    let summary = train(&chunks, &settings, &args.out, device, &stop, !args.quiet)?;
    for refusal in &summary.refusals {
        eprintln!("{refusal}");
    }
    if let Some(entry) = summary.log.last() {
        eprintln!("{entry}");
    }
    match summary.net {
        Some(net) => println!("{}", net.display()),
        None => eprintln!(
            "stopped after {} epochs; the checkpoint is in {}: run the same command to resume",
            summary.epochs,
            args.out.display()
        ),
    }
    Ok(())
}

/// A flag Ctrl-C raises.
fn stop_on_ctrl_c() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed)).context("installing the Ctrl-C handler")?;
    Ok(stop)
}

fn run_loop(args: LoopArgs) -> anyhow::Result<()> {
    let device = args.training.device()?;
    let lineage = match &args.lineage {
        Some(name) => name.clone(),
        None => args
            .out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .context("--out names no directory to take the lineage's name from: give --lineage")?,
    };
    let engine = match &args.engine {
        Some(path) => path.clone(),
        None => std::env::current_exe().context("finding this program")?.with_file_name("xq-engine"),
    };
    if !engine.exists() {
        bail!(
            "the engine {} is missing: build it (cargo build --release -p xq-engine) or give --engine",
            engine.display()
        );
    }
    let seed = match &args.seed_net {
        None => None,
        Some(path) if path.as_os_str() == "embedded" => Some(xq_engine::xiangqi::nnue::embedded::embedded().to_bytes()),
        Some(path) => Some(std::fs::read(path).with_context(|| format!("reading the seed net {}", path.display()))?),
    };
    let settings = LoopSettings {
        lineage,
        seed,
        dir: args.out.clone(),
        generations: args.generations,
        window: args.window,
        engine,
        self_play: SelfPlayPlan {
            nodes: args.nodes,
            units: args.units,
            games_per_unit: args.games_per_unit,
            random_plies: args.random_plies,
            seed: args.selfplay_seed,
        },
        test: TestPlan {
            time_control: args.tc.clone(),
            elo0: args.elo0,
            elo1: args.elo1,
            alpha: args.alpha,
            beta: args.beta,
            max_pairs: args.max_pairs,
            confirm_pairs: args.confirm_pairs,
            book: args.book.clone(),
        },
        train: args.training.settings(
            String::new(),
            &args.out,
            None,
            if args.seed_net.is_some() { Recipe::Seeded } else { Recipe::Fresh },
        )?,
        factorising: args.training.factorise,
        device,
        poll: Duration::from_secs_f64(args.poll_seconds.max(0.05)),
    };
    let stop = stop_on_ctrl_c()?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let mut client = args.coordinator.connect().await?;
        let report = |generation: &GenerationReport| {
            let net = &generation.net;
            println!(
                "generation {}: net {} {} by test {} ({}), validation loss {:.5}",
                net.generation,
                net.net_id,
                net.state,
                generation.test.job_id,
                generation.test.outcome,
                net.validation_loss
            );
            println!("generation {}: {}", net.generation, generation.stages.summary());
            if let Some(confirmation) = &generation.confirmation {
                let totals = confirmation.totals.clone().unwrap_or_default();
                let elo = confirmation.elo.unwrap_or_default();
                println!(
                    "generation {}: confirmation {} over {} pairs: W/D/L {}/{}/{}, Elo {:+.1} [{:+.1}, {:+.1}]",
                    net.generation,
                    confirmation.job_id,
                    confirmation.units_done,
                    totals.wins,
                    totals.draws,
                    totals.losses,
                    elo.elo,
                    elo.low,
                    elo.high
                );
            }
        };
        closed_loop::run(&mut client, &settings, stop, report, |line| eprintln!("{line}")).await?;
        anyhow::Ok(())
    })
}

/// Downloads `job`'s chunks from the coordinator into the run directory; returns
/// where they are.
fn fetch_job(args: &TrainArgs, job: u64) -> anyhow::Result<PathBuf> {
    let dir = args.out.join("data").join(format!("job{job}"));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let downloaded = runtime.block_on(async {
        let mut client = args.coordinator.connect().await?;
        client::download_training_data(&mut client, job, &dir).await
    })?;
    eprintln!(
        "job {job}: {} chunks downloaded, {} already in {}",
        downloaded.written,
        downloaded.present,
        dir.display()
    );
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn training(words: &[&str]) -> TrainingArgs {
        let line = ["xq-trainer", "train", "--data", "d", "--out", "o"].iter().chain(words);
        match Cli::try_parse_from(line).unwrap().command {
            Command::Train(args) => args.training,
            _ => unreachable!("a train command"),
        }
    }

    fn factorising(words: &[&str]) -> Factorising {
        training(words).factorise
    }

    /// `--factorise` alone still means on, as before it took a value.
    #[test]
    fn the_factoriser_is_auto_unless_asked_for() {
        assert_eq!(factorising(&[]), Factorising::Auto);
        assert_eq!(factorising(&["--factorise"]), Factorising::On);
        assert_eq!(factorising(&["--factorise", "--epochs", "3"]), Factorising::On);
        assert_eq!(factorising(&["--factorise", "off"]), Factorising::Off);
        assert!(Cli::try_parse_from(["xq-trainer", "train", "--out", "o", "--factorise", "maybe"]).is_err());
    }

    /// Mirroring is on unless turned off; `--mirror` alone, as the recipes before the
    /// default wrote it, is still on.
    #[test]
    fn mirroring_is_on_unless_turned_off() {
        assert!(training(&[]).mirror);
        assert!(training(&["--mirror"]).mirror);
        assert!(training(&["--mirror", "--epochs", "3"]).mirror);
        assert!(!training(&["--mirror", "off"]).mirror);
        assert!(Cli::try_parse_from(["xq-trainer", "train", "--out", "o", "--mirror", "sideways"]).is_err());
    }
}
