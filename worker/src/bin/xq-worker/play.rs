//! How games are played, shared by `match`, `spsa` and `tournament`: the play settings,
//! an engine given as key=value words, and the cores a run uses by default.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::ArgMatches;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::rules::{RuleSet, ViolationTiming};
use xq_worker::engine_process::{EngineConfig, Protocol};
use xq_worker::game::{Adjudication, GameSettings, Opening, Start};
use xq_worker::openings::{arrange, read_book, read_xiongqi_book};
use xq_worker::time_control::TimeControl;

/// How games are played, for `match` and `spsa`.
#[derive(clap::Args)]
pub struct PlayArgs {
    /// Time control: 10+0.1, 40/60, 25/3600:10/300, st=0.1, nodes=N, depth=N.
    #[arg(long, default_value = "10+0.1")]
    pub tc: TimeControl,
    /// Games at once (default: the number of cores).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Pin each concurrent game (its engines) to its own core.
    #[arg(long)]
    pub pin: bool,
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
    pub fn openings(&self) -> anyhow::Result<Vec<Start>> {
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
    pub fn game(&self) -> anyhow::Result<GameSettings> {
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

    pub fn concurrency(&self) -> usize {
        self.concurrency.unwrap_or_else(all_cores)
    }

    /// Tells an engine the game, unless its options already say it.
    pub fn announce_variant(&self, engine: &mut EngineConfig) {
        engine.announce_variant(self.variant);
    }
}

/// Games at once when not told: one a core.
pub fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Each `--engine` occurrence of `subcommand`: one engine's key=value words.
pub fn engine_words(matches: &ArgMatches, subcommand: &str) -> Vec<Vec<String>> {
    matches
        .subcommand_matches(subcommand)
        .and_then(|sub| sub.get_occurrences::<String>("engines"))
        .map(|occurrences| occurrences.map(|words| words.cloned().collect()).collect())
        .unwrap_or_default()
}

pub fn key_values<'a>(words: &'a [String], what: &str) -> anyhow::Result<Vec<(&'a str, &'a str)>> {
    words.iter().map(|w| w.split_once('=').with_context(|| format!("{what}: '{w}' is not key=value"))).collect()
}

/// An engine from its `--engine` words: name=, cmd=, proto=, ranks=, fen=, dir=, arg=,
/// option.NAME=.
pub fn engine_config(words: &[String]) -> anyhow::Result<EngineConfig> {
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

pub fn number<T: std::str::FromStr>(key: &str, value: &str) -> anyhow::Result<T> {
    value.parse().ok().with_context(|| format!("{key}={value} is not a number"))
}
