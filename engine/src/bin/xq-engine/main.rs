//! `xq-engine`: speaks UCI on stdin when run without arguments; `perft` counts moves.

mod judge;
mod openings;
mod verify;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::{Parser, Subcommand};
use xq_engine::uci::OptionSet;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::nnue::embedded::embedded;
use xq_engine::xiangqi::nnue::simd::Simd;
use xq_engine::xiangqi::nnue::{ARCHITECTURE, Network, format};
use xq_engine::xiangqi::openings::OpeningSettings;
use xq_engine::xiangqi::rules::judge::JudgeRequest;
use xq_engine::xiangqi::rules::{RuleSet, ViolationTiming};
use xq_engine::xiangqi::search::SearchOptions;
use xq_engine::xiangqi::{Position, fen, perft};

#[derive(Parser)]
#[command(name = "xq-engine", version, about = "Xiangqi engine: UCI on stdin without a command")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Counts the leaf nodes of the legal move tree (bulk-counted perft).
    Perft {
        /// The position (default: the start position). Unreachable but playable
        /// positions are accepted with a warning.
        #[arg(long)]
        fen: Option<String>,
        /// Plies to count.
        #[arg(long)]
        depth: u32,
        /// Print the count below each root move first, as `move: count`.
        #[arg(long)]
        divide: bool,
        /// The game: xiangqi or xiongqi.
        #[arg(long, default_value = "xiangqi")]
        variant: Variant,
    },
    /// Rules a game under the tournament rules and prints it as one JSON line. Two
    /// verdicts: `ended` is where a match's referee ends the game (ply, result, reason,
    /// article; null while play would go on), the one a match applies; `result`,
    /// `reason` and `article` rule the cycle the last move closed whatever the number
    /// of occurrences (the question a book's diagram asks before its repetition is
    /// complete), or else the game's own ruling, and `*` when neither rules.
    Judge {
        /// Rule set: wxf, asian, cxq or computer.
        #[arg(long, default_value = "wxf")]
        rules: RuleSet,
        /// Start position (default: the start position); unreachable but playable
        /// positions are accepted with a warning.
        #[arg(long)]
        fen: Option<String>,
        /// The moves, in UCI coordinates, separated by spaces.
        #[arg(long, default_value = "")]
        moves: String,
        /// Rule every game of a PGN file (UTF-8, GBK or Big5; moves in UCI, ICCS, WXF or
        /// Chinese notation; `[FEN]` tag for other starts).
        #[arg(long, conflicts_with_all = ["fen", "moves"])]
        pgn: Option<std::path::PathBuf>,
        /// The game: xiangqi or xiongqi.
        #[arg(long, default_value = "xiangqi")]
        variant: Variant,
        /// When a lone perpetual loses, for where the game `ended`: threefold, or
        /// after-warning (as the books rule); for every game that does not say so itself
        /// (a PGN's [ViolationTiming] tag, a batch line's "timing").
        #[arg(long, default_value = "threefold")]
        violation_timing: ViolationTiming,
        /// Read games as JSON lines {"fen": ..., "moves": [...], "rules": ..., "variant":
        /// ..., "timing": ...} on stdin.
        #[arg(long, conflicts_with_all = ["fen", "moves", "pgn"])]
        batch: bool,
    },
    /// Replays every game of PGN files under several rule sets, each ending a game where
    /// its referee would, and prints each game where they part as a JSON line, then a
    /// summary (games, games per second, disagreements by kind and by articles).
    Verify {
        /// The rule sets, comma-separated: wxf, asian, cxq, computer.
        #[arg(long, default_value = "wxf,asian,cxq", value_delimiter = ',')]
        rules: Vec<RuleSet>,
        /// PGN files (UTF-8, GBK or Big5; moves in UCI, ICCS, WXF or Chinese notation;
        /// `[FEN]` tag for other starts).
        #[arg(required_unless_present = "generate")]
        pgn: Vec<std::path::PathBuf>,
        /// Only parse and replay the moves (the benchmark's reference).
        #[arg(long, conflicts_with = "metamorphic")]
        replay_only: bool,
        /// Check the metamorphic properties too (mirror, colour swap, the repetition
        /// alone, an idle detour before it): each game that breaks one is reported with
        /// the transformed game and both verdicts.
        #[arg(long)]
        metamorphic: bool,
        /// Verify this many generated rule-hard games (revisits, shuttles, checks and
        /// chases on thinned boards) after the PGN files' games.
        #[arg(long, value_name = "N")]
        generate: Option<u64>,
        /// The number of the first generated game (game N is the same on every build).
        #[arg(long, default_value_t = 0, requires = "generate")]
        first: u64,
    },
    /// Searches fixed positions to a fixed depth; prints the node count (the engine's
    /// signature) and the speed.
    Bench {
        /// Search depth.
        #[arg(default_value_t = xq_engine::bench::DEFAULT_DEPTH)]
        depth: i32,
        /// Evaluate with this NNUE net instead of the embedded one.
        #[arg(long)]
        eval_file: Option<std::path::PathBuf>,
        /// Evaluate with the handcrafted evaluation instead of a net.
        #[arg(long, conflicts_with_all = ["eval_file", "simd"])]
        handcrafted: bool,
        /// The net's kernels: scalar, sse4.1, avx2 or avx512 (default: the fastest
        /// this processor has).
        #[arg(long)]
        simd: Option<String>,
    },
    /// Draws balanced openings (the default book's): walks of a few plies from the start
    /// position, each move drawn among those a shallow search scores near the best,
    /// kept when a deeper search scores the last position within a margin. Prints each
    /// kept opening's FEN, then a summary on stderr.
    Openings {
        /// Draw openings `first` to `first + count - 1` (opening N is the same on every
        /// run of the same settings and build).
        #[arg(long)]
        count: u64,
        /// The number of the first opening.
        #[arg(long, default_value_t = 0)]
        first: u64,
        /// Plies from the start position.
        #[arg(long, default_value_t = 8)]
        plies: usize,
        /// The depth of the search that scores each ply's moves.
        #[arg(long, default_value_t = 1)]
        pick_depth: i32,
        /// A move may be drawn when it scores within this many centipawns of the best.
        #[arg(long, default_value_t = 60)]
        pick_margin: i32,
        /// The depth of the search that scores the last position.
        #[arg(long, default_value_t = 8)]
        depth: i32,
        /// Keep an opening scored within this many centipawns.
        #[arg(long, default_value_t = 50)]
        balance: i32,
        /// Opening N draws its moves seeded `seed + N`.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// NNUE net files: write a random one, or describe one.
    #[command(subcommand)]
    Net(NetCommand),
    /// Speaks UCI on stdin and stdout (the default).
    Uci,
}

#[derive(Subcommand)]
enum NetCommand {
    /// Writes a net of pseudo-random weights (for testing the NNUE path and
    /// measuring its speed before a trained net exists).
    Random {
        /// The seed of the weights.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The file to write.
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Checks a net file and prints its description and the kernels that would run it.
    Info {
        /// The net file.
        file: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xq-engine: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    match xq_cli::parse::<Cli>(&[]).command {
        None | Some(Command::Uci) => {
            // A build for SPSA tuning declares the search's numbers as options.
            let option_set = if cfg!(feature = "tune") { OptionSet::Tuning } else { OptionSet::Standard };
            xq_engine::uci::run(std::io::stdin().lock(), std::io::stdout(), option_set);
            Ok(())
        }
        Some(Command::Bench { depth, eval_file, handcrafted, simd }) => {
            let mut options = SearchOptions::default();
            if !handcrafted {
                let (name, mut network) = match eval_file {
                    Some(path) => (path.display().to_string(), Network::load(&path)?),
                    None => ("embedded".to_owned(), Network::clone(&embedded())),
                };
                if let Some(kernels) = simd {
                    let simd = Simd::by_name(&kernels).with_context(|| {
                        let available: Vec<_> = Simd::available().iter().map(|s| s.name()).collect();
                        format!("kernels '{kernels}' are not available here; choose from {}", available.join(", "))
                    })?;
                    network = network.with_simd(simd);
                }
                eprintln!("NNUE net {name} ({}), kernels {}", network.description(), network.simd().name());
                options.network = Some(Arc::new(network));
            }
            println!("{}", xq_engine::bench::run_with(depth, &options).report());
            Ok(())
        }
        Some(Command::Openings { count, first, plies, pick_depth, pick_margin, depth, balance, seed }) => {
            let settings =
                OpeningSettings { plies, pick_depth, pick_margin, depth, balance, seed, network: Some(embedded()) };
            openings::write(&settings, first..first.saturating_add(count), &mut std::io::stdout().lock())
        }
        Some(Command::Net(NetCommand::Random { seed, out })) => {
            Network::random(seed).save(&out)?;
            println!("wrote {} (random weights, seed {seed})", out.display());
            Ok(())
        }
        Some(Command::Net(NetCommand::Info { file })) => {
            let network = Network::load(&file)?;
            println!("file: {}", file.display());
            println!("format: version {}, architecture {:#010x}", format::VERSION, format::architecture_hash());
            println!("architecture: {ARCHITECTURE}");
            println!("description: {}", network.description());
            println!("kernels: {}", network.simd().name());
            Ok(())
        }
        Some(Command::Perft { fen, depth, divide, variant: Variant::Xiangqi }) => {
            run_perft(fen.as_deref(), depth, divide)
        }
        Some(Command::Perft { fen, depth, divide, variant: Variant::Xiongqi }) => {
            run_xiongqi_perft(fen.as_deref(), depth, divide)
        }
        Some(Command::Judge { rules, fen, moves, pgn, variant, violation_timing: timing, batch }) => {
            let mut out = std::io::stdout().lock();
            if batch {
                return judge::judge_batch(std::io::stdin().lock(), &mut out, rules, timing);
            }
            if let Some(path) = pgn {
                return judge::judge_pgn(&path, rules, timing, &mut out);
            }
            let moves = moves.split_whitespace().map(str::to_owned).collect();
            judge::judge_one(&JudgeRequest { fen, moves, rules, variant, timing }, &mut out)
        }
        Some(Command::Verify { rules, pgn, replay_only, metamorphic, generate, first }) => {
            let sources = verify::Sources { pgn, generated: first..first + generate.unwrap_or(0), metamorphic };
            verify::verify(&sources, if replay_only { &[] } else { &rules }, &mut std::io::stdout().lock())
        }
    }
}

/// Reads a position for a study tool: playable positions are accepted, with a warning
/// on stderr for what makes them unreachable.
pub(crate) fn composed_position(text: &str) -> Result<Position, fen::FenError> {
    let (position, warnings) = fen::parse_composed(text)?;
    for warning in warnings {
        eprintln!("warning: unreachable position: {warning}");
    }
    Ok(position)
}

fn run_perft(fen_text: Option<&str>, depth: u32, divide: bool) -> anyhow::Result<()> {
    let mut position = match fen_text {
        Some(text) => composed_position(text).with_context(|| format!("invalid FEN '{text}'"))?,
        None => Position::startpos(),
    };
    let mut out = std::io::stdout().lock();
    let start = Instant::now();
    let nodes = if divide {
        let split = perft::divide(&mut position, depth);
        for (mv, count) in &split {
            writeln!(out, "{mv}: {count}")?;
        }
        writeln!(out)?;
        split.iter().map(|(_, count)| count).sum()
    } else {
        perft::perft(&mut position, depth)
    };
    let elapsed = start.elapsed();
    eprintln!("time {} ms, {:.0} nodes/s", elapsed.as_millis(), nodes as f64 / elapsed.as_secs_f64().max(1e-9));
    writeln!(out, "Nodes searched: {nodes}")?;
    Ok(())
}

fn run_xiongqi_perft(fen_text: Option<&str>, depth: u32, divide: bool) -> anyhow::Result<()> {
    use xq_engine::xiongqi;
    let position = match fen_text {
        Some(text) => xiongqi::fen::parse(text).with_context(|| format!("invalid FEN '{text}'"))?,
        None => xiongqi::Position::startpos(),
    };
    let mut game = xiongqi::Game::new(position);
    let mut out = std::io::stdout().lock();
    let start = Instant::now();
    let nodes = if divide && depth > 0 {
        let mut total = 0;
        for mv in game.legal_moves() {
            game.play(mv).expect("a legal move");
            let count = game.perft(depth - 1);
            game.undo();
            writeln!(out, "{mv}: {count}")?;
            total += count;
        }
        writeln!(out)?;
        total
    } else {
        game.perft(depth)
    };
    let elapsed = start.elapsed();
    eprintln!("time {} ms, {:.0} nodes/s", elapsed.as_millis(), nodes as f64 / elapsed.as_secs_f64().max(1e-9));
    writeln!(out, "Nodes searched: {nodes}")?;
    Ok(())
}
