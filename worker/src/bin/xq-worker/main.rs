//! `xq-worker`: the match runner (`match`), usable alone like cutechess-cli,
//! self-play data generation (`selfplay`), SPSA tuning with local games (`spsa`), and
//! a coordinator's worker (`connect`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use xq_engine::variant::Variant;
use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::rules::{RuleSet, ViolationTiming};
use xq_engine::xiangqi::selfplay::PlaySettings;
use xq_stats::spsa::{Parameter, Schedule, Tuner, format_parameters, option_value, parse_parameters, tuned_options};
use xq_stats::{Model, Sprt};
use xq_tournament::scoring::Points;
use xq_tournament::standings::System;
use xq_tournament::swiss::{default_rounds, max_rounds};
use xq_worker::engine_process::{EngineConfig, EngineProcess, Protocol};
use xq_worker::fleet::{ConnectSettings, capabilities, connect};
use xq_worker::game::{Adjudication, GameSettings, Opening, Start};
use xq_worker::match_runner::{MatchSettings, MatchTotals, resume_match};
use xq_worker::openings::{arrange, read_book, read_xiongqi_book};
use xq_worker::pgn_out::game_pgn;
use xq_worker::reference::Pyffish;
use xq_worker::resume::{PlayedPairs, ThisMatch, played_games};
use xq_worker::sandbox::Sandbox;
use xq_worker::selfplay::{SelfPlaySettings, load_self_play_net, run_selfplay};
use xq_worker::spsa::{SpsaSettings, run_spsa};
use xq_worker::time_control::TimeControl;
use xq_worker::tournament::{
    Format, Played, TournamentSettings, crosstable, run_knockout, run_swiss, run_tournament, schedule, table,
};

#[derive(Parser)]
#[command(name = "xq-worker", version, about = "Xiangqi match runner and cluster worker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Plays a match between two engines.
    Match(MatchArgs),
    /// Generates training data: our engine plays itself in-process.
    Selfplay(SelfplayArgs),
    /// Works for a coordinator: leases, plays and reports until stopped.
    Connect(ConnectArgs),
    /// Tunes an engine's parameters by SPSA with local game pairs.
    Spsa(SpsaArgs),
    /// Plays a round robin or a gauntlet of several engines, with a live crosstable.
    Tournament(TournamentArgs),
}

#[derive(clap::Args)]
struct ConnectArgs {
    /// The coordinator's URL (http://host:port, or https:// with TLS).
    #[arg(long, env = "XQ_COORDINATOR")]
    coordinator: String,
    /// This worker's token (from `xq worker-token NAME`).
    #[arg(long, env = "XQ_WORKER_TOKEN", hide_env_values = true)]
    token: String,
    /// Games at once (default: the number of cores).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Where downloaded engines, books and nets are kept.
    #[arg(long, default_value = "xq-worker-cache")]
    cache: PathBuf,
    /// The CA certificate (PEM) that signed the coordinator's TLS certificate.
    #[arg(long)]
    ca_cert: Option<PathBuf>,
    /// A name for the dashboard (default: the host name).
    #[arg(long)]
    name: Option<String>,
    /// Run the coordinator's engines as this worker's user, with its environment,
    /// files and network: only for a worker that runs nobody's engines but your own.
    #[arg(long)]
    no_sandbox: bool,
    /// A Python with pyffish: verification jobs that compare the rules with
    /// Fairy-Stockfish's can then come here (default: $XQ_PYTHON when it has pyffish).
    #[arg(long)]
    pyffish: Option<PathBuf>,
}

#[derive(clap::Args)]
struct SelfplayArgs {
    /// Search nodes per move.
    #[arg(long, default_value_t = 5000)]
    nodes: u64,
    /// Games to play.
    #[arg(long, default_value_t = 10)]
    games: usize,
    /// Directory for the chunk files.
    #[arg(long)]
    out: PathBuf,
    /// Random plies at the start of each game (not recorded).
    #[arg(long, default_value_t = 8)]
    random_plies: usize,
    /// Seed of the random plies: game i plays from seed + i, so that runs meant to
    /// play different games need seeds at least --games apart (the same seed replays
    /// the same game at the same --nodes).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Games at once (default: the number of cores).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Records per chunk file.
    #[arg(long, default_value_t = 20_000)]
    chunk_records: usize,
    /// Rule set: wxf, asian, cxq or computer.
    #[arg(long, default_value = "wxf")]
    rules: RuleSet,
    /// Plies after which a game is drawn.
    #[arg(long, default_value_t = 400)]
    maxplies: usize,
    /// The game: xiangqi or xiongqi.
    #[arg(long, default_value = "xiangqi")]
    variant: Variant,
    /// A net (XQNN) to evaluate Xiangqi with; default: the handcrafted evaluation.
    #[arg(long)]
    net: Option<PathBuf>,
    /// Also write every Xiangqi game (random plies included) to this PGN file: games
    /// to verify the rules on (`xq verify --pgn`).
    #[arg(long)]
    pgnout: Option<PathBuf>,
}

#[derive(clap::Args)]
struct MatchArgs {
    /// An engine, as key=value words: name=, cmd=, proto=uci|ucci, ranks=0-9|1-10,
    /// fen=nb|he (FEN letters for horse and elephant), dir=, arg= (repeatable),
    /// option.NAME=VALUE. Give it twice. (Read per occurrence
    /// in `run`; this flat list only declares the argument.)
    #[arg(long = "engine", num_args = 1.., action = ArgAction::Append, required = true)]
    engines: Vec<String>,
    /// Games to play (even: each opening is played twice, colours swapped).
    #[arg(long, default_value_t = 2)]
    games: usize,
    /// SPRT as key=value words: elo0=, elo1=, alpha=, beta=, model=normalized|logistic.
    #[arg(long, num_args = 1..)]
    sprt: Option<Vec<String>>,
    /// Write the games here as PGN.
    #[arg(long)]
    pgnout: Option<PathBuf>,
    /// Go on from the games already in --pgnout (a match stopped by a time limit or a
    /// lost machine, run again with the same arguments): its complete pairs count, the
    /// SPRT included, and only the pairs it lacks are played.
    #[arg(long, requires = "pgnout")]
    resume: bool,
    #[command(flatten)]
    play: PlayArgs,
}

#[derive(clap::Args)]
struct TournamentArgs {
    /// An engine, as key=value words (as `match --engine`); give each engine once, in
    /// the order of their numbers (a gauntlet's challengers first).
    #[arg(long = "engine", num_args = 1.., action = ArgAction::Append, required = true)]
    engines: Vec<String>,
    /// round-robin, double-round-robin, gauntlet, swiss or knockout.
    #[arg(long, default_value = "double-round-robin")]
    system: String,
    /// A Swiss event's rounds (default: log2 of the players, rounded up, plus 2).
    #[arg(long)]
    rounds: Option<usize>,
    /// A knockout match's games.
    #[arg(long, default_value_t = 2)]
    games_per_match: usize,
    /// A knockout's tie-break games' time control (default: --tc).
    #[arg(long)]
    tie_break_tc: Option<TimeControl>,
    /// Pairs of tie-break games before the higher seed goes on.
    #[arg(long, default_value_t = 2)]
    tie_break_pairs: usize,
    /// A gauntlet's challengers: the first engines given.
    #[arg(long, default_value_t = 1)]
    challengers: usize,
    /// A gauntlet's games between each challenger and each member of the field.
    #[arg(long, default_value_t = 2)]
    games_per_opponent: usize,
    /// Points a game (Article 9.1): 2-1-0 or 1-0.5-0.
    #[arg(long, default_value = "2-1-0")]
    points: String,
    /// Write the event's games here as PGN.
    #[arg(long)]
    pgnout: Option<PathBuf>,
    #[command(flatten)]
    play: PlayArgs,
}

#[derive(clap::Args)]
struct SpsaArgs {
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

/// How games are played, for `match` and `spsa`.
#[derive(clap::Args)]
struct PlayArgs {
    /// Time control: 10+0.1, 40/60, 25/3600:10/300, st=0.1, nodes=N, depth=N.
    #[arg(long, default_value = "10+0.1")]
    tc: TimeControl,
    /// Games at once (default: the number of cores).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Pin each concurrent game (its engines) to its own core.
    #[arg(long)]
    pin: bool,
    /// Opening book: FEN/EPD lines, or PGN (see --book-plies).
    #[arg(long)]
    book: Option<PathBuf>,
    /// Plies of each PGN game to play as the opening (default: all).
    #[arg(long)]
    book_plies: Option<usize>,
    /// Shuffle the openings with this seed.
    #[arg(long)]
    shuffle: Option<u64>,
    /// Start at this opening.
    #[arg(long, default_value_t = 0)]
    book_offset: usize,
    /// Rule set: wxf, asian, cxq or computer.
    #[arg(long, default_value = "wxf")]
    rules: RuleSet,
    /// The game: xiangqi, or xiongqi (engines get `UCI_Variant xiongqi`; a book is
    /// one Xiongqi FEN a line).
    #[arg(long, default_value = "xiangqi")]
    variant: Variant,
    /// Draw adjudication: movenumber=N movecount=M score=S.
    #[arg(long, num_args = 1..)]
    draw: Option<Vec<String>>,
    /// Resign adjudication: movecount=M score=S.
    #[arg(long, num_args = 1..)]
    resign: Option<Vec<String>>,
    /// Draw after this many plies.
    #[arg(long)]
    maxplies: Option<usize>,
    /// When a lone perpetual check or chase loses: threefold (at the threefold
    /// repetition, as engines rule), or after-warning (as the books rule: the
    /// violator's repeating moves are banned for its engine at the threefold
    /// repetition, UCCI banmoves or UCI searchmoves, and it loses only if it repeats
    /// the cycle anyway; WXF 17.3.G.III, Asian Section 4 rule 3).
    #[arg(long, default_value = "threefold")]
    violation_timing: ViolationTiming,
    /// Milliseconds an engine may exceed its clock before it loses on time.
    #[arg(long, default_value_t = 50)]
    margin_ms: u64,
    /// Seconds a node- or depth-limited search may take before the engine counts as hung.
    #[arg(long, default_value_t = 60)]
    hang_seconds: u64,
}

impl PlayArgs {
    /// The openings in play order.
    fn openings(&self) -> anyhow::Result<Vec<Start>> {
        Ok(match (self.variant, &self.book) {
            (Variant::Xiangqi, Some(path)) => {
                arrange(read_book(path, self.book_plies)?, self.shuffle, self.book_offset)
                    .into_iter()
                    .map(Start::from)
                    .collect()
            }
            (Variant::Xiangqi, None) => vec![Start::from(Opening { start: Position::startpos(), moves: Vec::new() })],
            (Variant::Xiongqi, Some(path)) => arrange(read_xiongqi_book(path)?, self.shuffle, self.book_offset)
                .into_iter()
                .map(Start::Xiongqi)
                .collect(),
            (Variant::Xiongqi, None) => vec![Start::Xiongqi(xq_engine::xiongqi::Position::startpos())],
        })
    }

    /// How each game is played.
    fn game(&self) -> anyhow::Result<GameSettings> {
        Ok(GameSettings {
            time_control: self.tc.clone(),
            rules: self.rules,
            time_margin: Duration::from_millis(self.margin_ms),
            hang_timeout: Duration::from_secs(self.hang_seconds),
            adjudication: Adjudication::from_words(self.draw.as_deref(), self.resign.as_deref())?,
            max_plies: self.maxplies,
            violation_timing: self.violation_timing,
        })
    }

    fn concurrency(&self) -> usize {
        self.concurrency.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Tells an engine the game, unless its options already say it.
    fn announce_variant(&self, engine: &mut EngineConfig) {
        if self.variant != Variant::Xiangqi
            && !engine.options.iter().any(|(name, _)| name.eq_ignore_ascii_case("UCI_Variant"))
        {
            engine.options.insert(0, ("UCI_Variant".to_owned(), self.variant.name().to_owned()));
        }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xq-worker: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let matches = xq_cli::matches(Cli::command(), &["connect"]);
    let cli = Cli::from_arg_matches(&matches)?;
    match cli.command {
        Command::Match(args) => {
            // Each --engine occurrence is one engine's key=value words.
            let sub = matches.subcommand_matches("match").expect("the match subcommand");
            let engines: Vec<Vec<String>> = sub
                .get_occurrences::<String>("engines")
                .map(|occurrences| occurrences.map(|words| words.cloned().collect()).collect())
                .unwrap_or_default();
            run_match_command(args, engines)
        }
        Command::Spsa(args) => run_spsa_command(args),
        Command::Tournament(args) => {
            let sub = matches.subcommand_matches("tournament").expect("the tournament subcommand");
            let engines: Vec<Vec<String>> = sub
                .get_occurrences::<String>("engines")
                .map(|occurrences| occurrences.map(|words| words.cloned().collect()).collect())
                .unwrap_or_default();
            run_tournament_command(args, engines)
        }
        Command::Connect(args) => {
            let settings = ConnectSettings {
                coordinator: args.coordinator,
                token: args.token,
                concurrency: args
                    .concurrency
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
                    .max(1),
                cache: args.cache,
                ca_cert: args.ca_cert,
                name: args.name.unwrap_or_else(|| {
                    std::fs::read_to_string("/etc/hostname").map_or("worker".to_owned(), |h| h.trim().to_owned())
                }),
                sandbox: if args.no_sandbox { None } else { Some(Sandbox::default()) },
                pyffish: match args.pyffish {
                    Some(python) if Pyffish::available(&python) => Some(python),
                    Some(python) => anyhow::bail!("--pyffish {}: that Python cannot import pyffish", python.display()),
                    None => std::env::var_os("XQ_PYTHON").map(PathBuf::from).filter(|p| Pyffish::available(p)),
                },
            };
            if let Some(python) = &settings.pyffish {
                eprintln!("xq-worker: verification references: pyffish under {}", python.display());
            }
            match &settings.sandbox {
                Some(sandbox) => {
                    sandbox.probe()?;
                    eprintln!("xq-worker: engines run in a bubblewrap sandbox");
                }
                None => eprintln!("xq-worker: engines run unconfined (--no-sandbox)"),
            }
            let runtime = tokio::runtime::Runtime::new()?;
            let capabilities = runtime.block_on(capabilities(&settings));
            Ok(runtime.block_on(connect(settings, capabilities))?)
        }
        Command::Selfplay(args) => {
            let network = match &args.net {
                Some(path) => Some(load_self_play_net(path, &path.display().to_string(), args.variant)?),
                None => None,
            };
            let play = PlaySettings {
                nodes: args.nodes,
                random_plies: args.random_plies,
                seed: args.seed,
                rules: args.rules,
                max_plies: args.maxplies,
                network,
            };
            let settings = SelfPlaySettings {
                play,
                games: args.games,
                threads: args
                    .concurrency
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
                chunk_records: args.chunk_records.max(1),
                out: args.out,
                variant: args.variant,
                pgn_out: args.pgnout,
            };
            let report = run_selfplay(&settings)?;
            let seconds = report.elapsed.as_secs_f64().max(1e-9);
            println!(
                "{} games, {} positions in {} chunks, {:.1} s, {:.0} positions/s",
                report.games,
                report.positions,
                report.chunks.len(),
                seconds,
                report.positions as f64 / seconds
            );
            Ok(())
        }
    }
}

fn key_values<'a>(words: &'a [String], what: &str) -> anyhow::Result<Vec<(&'a str, &'a str)>> {
    words.iter().map(|w| w.split_once('=').with_context(|| format!("{what}: '{w}' is not key=value"))).collect()
}

fn engine_config(words: &[String]) -> anyhow::Result<EngineConfig> {
    let mut config = EngineConfig::default();
    for (key, value) in key_values(words, "--engine")? {
        match key {
            "name" => config.name = value.to_owned(),
            "cmd" => config.command = PathBuf::from(value),
            "dir" => config.dir = Some(PathBuf::from(value)),
            "arg" => config.args.push(value.to_owned()),
            "proto" => {
                config.protocol = match value {
                    "uci" => Protocol::Uci,
                    "ucci" => Protocol::Ucci,
                    other => bail!("--engine proto={other}: use uci or ucci"),
                }
            }
            "ranks" => config.dialect = value.parse().context("--engine")?,
            "fen" => config.fen_flavour = value.parse().context("--engine")?,
            key if key.starts_with("option.") => {
                config.options.push((key["option.".len()..].to_owned(), value.to_owned()))
            }
            other => bail!("--engine: unknown key '{other}'"),
        }
    }
    if config.command.as_os_str().is_empty() {
        bail!("--engine needs cmd=");
    }
    if config.name.is_empty() {
        config.name = config.command.file_name().map_or("engine".to_owned(), |n| n.to_string_lossy().into_owned());
    }
    Ok(config)
}

fn number<T: std::str::FromStr>(key: &str, value: &str) -> anyhow::Result<T> {
    value.parse().ok().with_context(|| format!("{key}={value} is not a number"))
}

fn sprt(words: &[String]) -> anyhow::Result<Sprt> {
    let (mut elo0, mut elo1, mut alpha, mut beta, mut model) = (0.0, 2.0, 0.05, 0.05, Model::Normalized);
    for (key, value) in key_values(words, "--sprt")? {
        match key {
            "elo0" => elo0 = number(key, value)?,
            "elo1" => elo1 = number(key, value)?,
            "alpha" => alpha = number(key, value)?,
            "beta" => beta = number(key, value)?,
            "model" => {
                model = match value {
                    "normalized" => Model::Normalized,
                    "logistic" => Model::Logistic,
                    other => bail!("--sprt model={other}: use normalized or logistic"),
                }
            }
            other => bail!("--sprt: unknown key '{other}'"),
        }
    }
    Ok(Sprt::new(elo0, elo1, alpha, beta, model)?)
}

fn summary(totals: &MatchTotals, names: &[String; 2], sprt: Option<&Sprt>) -> String {
    let mut text = format!(
        "{} vs {}: games {}, W/D/L {}/{}/{}, pentanomial {:?}",
        names[0],
        names[1],
        totals.games(),
        totals.wins,
        totals.draws,
        totals.losses,
        totals.pentanomial
    );
    if let Some(elo) = totals.elo() {
        let draw_ratio = totals.draws as f64 / totals.games().max(1) as f64;
        text.push_str(&format!(
            ", Elo {:+.1} [{:+.1}, {:+.1}], nElo {:+.1}, LOS {:.1}%, draws {:.1}%",
            elo.elo,
            elo.low,
            elo.high,
            elo.nelo,
            elo.los * 100.0,
            draw_ratio * 100.0
        ));
    }
    if let Some(state) = sprt.and_then(|s| totals.sprt(s)) {
        text.push_str(&format!(", LLR {:.2} ({:.2}, {:.2})", state.llr, state.lower, state.upper));
        match state.decision() {
            Some(true) => text.push_str(" H1 accepted"),
            Some(false) => text.push_str(" H0 accepted"),
            None => {}
        }
    }
    text
}

fn run_match_command(args: MatchArgs, engines: Vec<Vec<String>>) -> anyhow::Result<()> {
    let [first, second] = engines.as_slice() else {
        bail!("give exactly two --engine");
    };
    let engines = [engine_config(first)?, engine_config(second)?];
    if args.games == 0 || !args.games.is_multiple_of(2) {
        bail!("--games {} must be even and positive: each opening is played twice", args.games);
    }
    let mut engines = engines;
    for engine in &mut engines {
        args.play.announce_variant(engine);
    }
    let sprt = args.sprt.as_deref().map(sprt).transpose()?;
    let mut settings = MatchSettings {
        engines: engines.clone(),
        pairs: Vec::new(),
        concurrency: args.play.concurrency(),
        pin_cores: args.play.pin,
        openings: args.play.openings()?,
        game: args.play.game()?,
        sprt,
    };
    let names = [engines[0].name.clone(), engines[1].name.clone()];
    let event = format!("{} vs {}", names[0], names[1]);
    let tc_text = args.play.tc.to_string();
    let played = match &args.pgnout {
        Some(path) if args.resume && path.exists() => {
            let this = ThisMatch {
                event: &event,
                names: [&names[0], &names[1]],
                time_control: &settings.game.time_control,
                time_margin: settings.game.time_margin,
                openings: &settings.openings,
                games: args.games,
            };
            let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let played =
                played_games(&bytes, &this).with_context(|| format!("cannot resume from {}", path.display()))?;
            // The file keeps only what counts: a lone leg is played again with its pair.
            let resuming = path.with_extension("resuming");
            std::fs::write(&resuming, &played.kept)
                .and_then(|()| std::fs::rename(&resuming, path))
                .with_context(|| format!("cannot rewrite {}", path.display()))?;
            eprintln!(
                "resuming from {}: {} games of complete pairs count, {} of unfinished pairs dropped",
                path.display(),
                played.totals.games(),
                played.dropped
            );
            played
        }
        _ => PlayedPairs::default(),
    };
    settings.pairs = (0..args.games / 2).filter(|pair| !played.pairs.contains(pair)).collect();
    let decided = settings.sprt.as_ref().and_then(|s| played.totals.sprt(s)).and_then(|s| s.decision()).is_some();
    if decided || settings.pairs.is_empty() {
        print_totals(&played.totals, &names, sprt.as_ref());
        return Ok(());
    }
    let mut pgn = match &args.pgnout {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(args.resume)
                .truncate(!args.resume)
                .open(path)
                .with_context(|| format!("cannot write {}", path.display()))?,
        ),
        None => None,
    };
    let mut write_error = None;
    // On a terminal: a progress bar carrying the summary, game results above it. In a
    // log: one line per game and one summary line.
    let progress = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(args.games as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} games {elapsed_precise} eta {eta} {msg}")
                .expect("a valid template"),
        );
        bar.set_position(played.totals.games());
        bar
    });
    let totals = resume_match(&settings, played.totals.clone(), |finished, totals| {
        if let Some(file) = pgn.as_mut() {
            let text = game_pgn(&finished.record, &event, finished.pair * 2 + finished.leg + 1, &tc_text);
            if let Err(error) = file.write_all(text.as_bytes()) {
                write_error = Some(error);
                return false;
            }
        }
        let line = format!(
            "game {} ({} - {}): {} {}",
            totals.games(),
            finished.record.players.red,
            finished.record.players.black,
            finished.record.outcome.pgn(),
            finished.record.reason
        );
        match &progress {
            Some(bar) => {
                bar.println(line);
                bar.set_position(totals.games());
                bar.set_message(summary(totals, &names, sprt.as_ref()));
            }
            None => {
                eprintln!("{line}");
                eprintln!("{}", summary(totals, &names, sprt.as_ref()));
            }
        }
        true
    })?;
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    if let Some(error) = write_error {
        return Err(error).context("writing the PGN");
    }
    print_totals(&totals, &names, sprt.as_ref());
    Ok(())
}

/// A match's last words: the summary, then how its games ended and how each engine
/// spent its clock.
fn print_totals(totals: &MatchTotals, names: &[String; 2], sprt: Option<&Sprt>) {
    println!("{}", summary(totals, names, sprt));
    if totals.overrun > 0 {
        println!("  {} games in flight when the SPRT decided: played, not counted", totals.overrun);
    }
    for (reason, count) in &totals.reasons {
        println!("  {reason}: {count}");
    }
    if totals.ruled_wins != [0, 0] {
        let mut line = format!(
            "  won by a repetition ruling: {} {}, {} {}; over the board (those as draws): pentanomial {:?}",
            names[0], totals.ruled_wins[0], names[1], totals.ruled_wins[1], totals.over_the_board
        );
        if let Some(elo) = totals.over_the_board_elo() {
            line.push_str(&format!(", Elo {:+.1} [{:+.1}, {:+.1}]", elo.elo, elo.low, elo.high));
        }
        println!("{line}");
    }
    for (name, count) in &totals.failures {
        println!("  failures of {name}: {count}");
    }
    for (name, used) in &totals.time_use {
        println!("  {}", used.describe(name));
    }
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

fn run_spsa_command(args: SpsaArgs) -> anyhow::Result<()> {
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

fn run_tournament_command(args: TournamentArgs, engine_words: Vec<Vec<String>>) -> anyhow::Result<()> {
    if engine_words.len() < 2 {
        bail!("a tournament needs at least two --engine");
    }
    let mut engines = engine_words.iter().map(|words| engine_config(words)).collect::<anyhow::Result<Vec<_>>>()?;
    for (i, engine) in engines.iter().enumerate() {
        if engines[..i].iter().any(|e| e.name == engine.name) {
            bail!("two engines are named '{}': give each a name= of its own", engine.name);
        }
    }
    for engine in &mut engines {
        args.play.announce_variant(engine);
    }
    let (format, system) = match args.system.as_str() {
        "round-robin" => (Format::RoundRobin { double: false }, System::RoundRobin),
        "double-round-robin" => (Format::RoundRobin { double: true }, System::RoundRobin),
        "gauntlet" => {
            if args.challengers == 0 || args.challengers >= engines.len() {
                bail!("--challengers {} must leave a field: 1 to {}", args.challengers, engines.len() - 1);
            }
            let format =
                Format::Gauntlet { challengers: args.challengers, games_per_opponent: args.games_per_opponent };
            (format, System::RoundRobin)
        }
        "swiss" => {
            let players = engines.len();
            let rounds = args.rounds.unwrap_or(default_rounds(players)).min(max_rounds(players));
            (Format::Swiss { rounds }, System::Swiss)
        }
        "knockout" => {
            if args.games_per_match == 0 {
                bail!("--games-per-match must be at least 1");
            }
            (Format::Knockout { games_per_match: args.games_per_match }, System::RoundRobin)
        }
        other => bail!("--system {other}: round-robin, double-round-robin, gauntlet, swiss or knockout"),
    };
    let points = match args.points.as_str() {
        "2-1-0" => Points::TwoOneZero,
        "1-0.5-0" => Points::OneHalfZero,
        other => bail!("--points {other}: 2-1-0 or 1-0.5-0"),
    };
    let openings = args.play.openings()?;
    let games = schedule(engines.len(), format, openings.len());
    let settings = TournamentSettings {
        engines: engines.clone(),
        format,
        openings,
        game: args.play.game()?,
        concurrency: args.play.concurrency(),
        points,
    };
    let names: Vec<String> = engines.iter().map(|e| e.name.clone()).collect();
    let mut pgn = match &args.pgnout {
        Some(path) => Some(std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?),
        None => None,
    };
    let event = format!("{} of {} engines", args.system, engines.len());
    let tc_text = args.play.tc.to_string();
    let terminal = std::io::stderr().is_terminal();
    let mut write_error = None;
    match format {
        Format::Swiss { rounds } => eprintln!("{event}: {rounds} rounds"),
        _ => eprintln!("{event}: {} games", games.len()),
    }
    let started = std::time::Instant::now();
    let mut report = |game: &Played, so_far: &[Played], byes: &[usize]| {
        if let Some(file) = pgn.as_mut() {
            let text = game_pgn(&game.record, &event, game.scheduled.round, &tc_text);
            if let Err(error) = file.write_all(text.as_bytes()) {
                write_error = Some(error);
                return false;
            }
        }
        let line = format!(
            "game {} (round {}): {} - {} {} {}",
            so_far.len(),
            game.scheduled.round,
            game.record.players.red,
            game.record.players.black,
            game.record.outcome.pgn(),
            game.record.reason
        );
        if terminal {
            // The live crosstable: redrawn after every game.
            let table = table(names.len(), so_far, byes, system, points);
            eprint!("\x1b[2J\x1b[H{line}\n\n{}", crosstable(&names, so_far, &table, points));
        } else {
            eprintln!("{line}");
        }
        true
    };
    let mut knockout = Vec::new();
    let (played, byes) = match format {
        Format::Swiss { rounds } => run_swiss(&settings, rounds, &mut report)?,
        Format::Knockout { games_per_match } => {
            let mut rapid = settings.game.clone();
            if let Some(tc) = &args.tie_break_tc {
                rapid.time_control = tc.clone();
            }
            let (played, matches) =
                run_knockout(&settings, games_per_match, (&rapid, args.tie_break_pairs), |game, so_far| {
                    report(game, so_far, &[])
                })?;
            knockout = matches;
            (played, Vec::new())
        }
        _ => (run_tournament(&settings, &games, |game, so_far| report(game, so_far, &[]))?, Vec::new()),
    };
    if let Some(error) = write_error {
        return Err(error).context("writing the PGN");
    }
    let hours = started.elapsed().as_secs_f64() / 3600.0;
    if let Format::Swiss { rounds } = format {
        let last = played.iter().map(|p| p.scheduled.round).max().unwrap_or(0);
        if last < rounds {
            println!(
                "no pairing of round {} keeps the Swiss rules (no repeats, colours): the event ends there",
                last + 1
            );
        }
    }
    for m in &knockout {
        let line = match m.players {
            (a, None) => format!("round {}: {} has a bye", m.round, names[a]),
            (a, Some(b)) => {
                let extra = if m.tie_break_games > 0 {
                    format!(
                        ", tie-break {}-{} in {} games",
                        m.tie_break_points.0, m.tie_break_points.1, m.tie_break_games
                    )
                } else {
                    String::new()
                };
                let seed = if m.by_seed { ", level: the higher seed goes on" } else { "" };
                format!(
                    "round {}: {} - {} {}-{}{extra}{seed}: {} goes on",
                    m.round, names[a], names[b], m.points.0, m.points.1, names[m.winner]
                )
            }
        };
        println!("{line}");
    }
    if let Some(last) = knockout.last() {
        println!("winner: {}", names[last.winner]);
    }
    let table = table(names.len(), &played, &byes, system, points);
    println!(
        "{event}: {} games in {:.1} s ({:.0} games/hour)",
        played.len(),
        hours * 3600.0,
        played.len() as f64 / hours.max(1e-9)
    );
    print!("{}", crosstable(&names, &played, &table, points));
    Ok(())
}
