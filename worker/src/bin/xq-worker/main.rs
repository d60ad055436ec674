//! `xq-worker`: the match runner (`match`), usable alone like cutechess-cli,
//! self-play data generation (`selfplay`), and a coordinator's worker (`connect`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use xq_engine::variant::Variant;
use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::notation::Dialect;
use xq_engine::xiangqi::rules::RuleSet;
use xq_stats::{Model, Sprt};
use xq_worker::engine_process::{EngineConfig, FenFlavour, Protocol};
use xq_worker::fleet::{ConnectSettings, capabilities, connect};
use xq_worker::game::{Adjudication, GameSettings, Opening, Start};
use xq_worker::match_runner::{MatchSettings, MatchTotals, run_match};
use xq_worker::openings::{arrange, read_book, read_xiongqi_book};
use xq_worker::pgn_out::game_pgn;
use xq_worker::sandbox::Sandbox;
use xq_worker::selfplay::{SelfPlaySettings, load_self_play_net, run_selfplay};
use xq_worker::time_control::TimeControl;

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
}

#[derive(clap::Args)]
struct MatchArgs {
    /// An engine, as key=value words: name=, cmd=, proto=uci|ucci, ranks=0-9|1-10,
    /// fen=nb|he (FEN letters for horse and elephant), dir=, arg= (repeatable),
    /// option.NAME=VALUE. Give it twice. (Read per occurrence
    /// in `run`; this flat list only declares the argument.)
    #[arg(long = "engine", num_args = 1.., action = ArgAction::Append, required = true)]
    engines: Vec<String>,
    /// Time control: 10+0.1, 40/60, 25/3600:10/300, st=0.1, nodes=N, depth=N.
    #[arg(long, default_value = "10+0.1")]
    tc: TimeControl,
    /// Games to play (even: each opening is played twice, colours swapped).
    #[arg(long, default_value_t = 2)]
    games: usize,
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
    /// SPRT as key=value words: elo0=, elo1=, alpha=, beta=, model=normalized|logistic.
    #[arg(long, num_args = 1..)]
    sprt: Option<Vec<String>>,
    /// Write the games here as PGN.
    #[arg(long)]
    pgnout: Option<PathBuf>,
    /// Draw adjudication: movenumber=N movecount=M score=S.
    #[arg(long, num_args = 1..)]
    draw: Option<Vec<String>>,
    /// Resign adjudication: movecount=M score=S.
    #[arg(long, num_args = 1..)]
    resign: Option<Vec<String>>,
    /// Draw after this many plies.
    #[arg(long)]
    maxplies: Option<usize>,
    /// Milliseconds an engine may exceed its clock before it loses on time.
    #[arg(long, default_value_t = 50)]
    margin_ms: u64,
    /// Seconds a node- or depth-limited search may take before the engine counts as hung.
    #[arg(long, default_value_t = 60)]
    hang_seconds: u64,
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
    let matches = Cli::command().get_matches();
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
            };
            match &settings.sandbox {
                Some(sandbox) => {
                    sandbox.probe()?;
                    eprintln!("xq-worker: engines run in a bubblewrap sandbox");
                }
                None => eprintln!("xq-worker: engines run unconfined (--no-sandbox)"),
            }
            let runtime = tokio::runtime::Runtime::new()?;
            let capabilities = runtime.block_on(capabilities(&settings.name, settings.concurrency));
            Ok(runtime.block_on(connect(settings, capabilities))?)
        }
        Command::Selfplay(args) => {
            let network = match &args.net {
                Some(path) => Some(load_self_play_net(path, &path.display().to_string(), args.variant)?),
                None => None,
            };
            let settings = SelfPlaySettings {
                nodes: args.nodes,
                games: args.games,
                random_plies: args.random_plies,
                seed: args.seed,
                threads: args
                    .concurrency
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
                chunk_records: args.chunk_records.max(1),
                out: args.out,
                rules: args.rules,
                max_plies: args.maxplies,
                variant: args.variant,
                network,
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
            "ranks" => {
                config.dialect = match value {
                    "0-9" => Dialect::ZeroBased,
                    "1-10" => Dialect::OneBased,
                    other => bail!("--engine ranks={other}: use 0-9 or 1-10"),
                }
            }
            "fen" => {
                config.fen_flavour = match value {
                    "nb" => FenFlavour::KnightBishop,
                    "he" => FenFlavour::HorseElephant,
                    other => bail!("--engine fen={other}: use nb (N, B) or he (H, E)"),
                }
            }
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
    let openings: Vec<Start> = match (args.variant, &args.book) {
        (Variant::Xiangqi, Some(path)) => arrange(read_book(path, args.book_plies)?, args.shuffle, args.book_offset)
            .into_iter()
            .map(Start::from)
            .collect(),
        (Variant::Xiangqi, None) => vec![Start::from(Opening { start: Position::startpos(), moves: Vec::new() })],
        (Variant::Xiongqi, Some(path)) => {
            arrange(read_xiongqi_book(path)?, args.shuffle, args.book_offset).into_iter().map(Start::Xiongqi).collect()
        }
        (Variant::Xiongqi, None) => vec![Start::Xiongqi(xq_engine::xiongqi::Position::startpos())],
    };
    // Both engines are told the game, unless their options already say it.
    let mut engines = engines;
    if args.variant != Variant::Xiangqi {
        for engine in &mut engines {
            if !engine.options.iter().any(|(name, _)| name.eq_ignore_ascii_case("UCI_Variant")) {
                engine.options.insert(0, ("UCI_Variant".to_owned(), args.variant.name().to_owned()));
            }
        }
    }
    let sprt = args.sprt.as_deref().map(sprt).transpose()?;
    let settings = MatchSettings {
        engines: engines.clone(),
        pairs: (0..args.games / 2).collect(),
        concurrency: args.concurrency.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        pin_cores: args.pin,
        openings,
        game: GameSettings {
            time_control: args.tc.clone(),
            rules: args.rules,
            time_margin: Duration::from_millis(args.margin_ms),
            hang_timeout: Duration::from_secs(args.hang_seconds),
            adjudication: Adjudication::from_words(args.draw.as_deref(), args.resign.as_deref())?,
            max_plies: args.maxplies,
        },
        sprt,
    };
    let mut pgn = match &args.pgnout {
        Some(path) => Some(std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?),
        None => None,
    };
    let names = [engines[0].name.clone(), engines[1].name.clone()];
    let event = format!("{} vs {}", names[0], names[1]);
    let tc_text = args.tc.to_string();
    let mut write_error = None;
    // On a terminal: a progress bar carrying the summary, game results above it. In a
    // log: one line per game and one summary line.
    let progress = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(args.games as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} games {elapsed_precise} eta {eta} {msg}")
                .expect("a valid template"),
        );
        bar
    });
    let totals = run_match(&settings, |finished, totals| {
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
    println!("{}", summary(&totals, &names, sprt.as_ref()));
    for (reason, count) in &totals.reasons {
        println!("  {reason}: {count}");
    }
    for (name, count) in &totals.failures {
        println!("  failures of {name}: {count}");
    }
    Ok(())
}
