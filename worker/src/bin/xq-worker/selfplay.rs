//! `xq-worker selfplay`: training data from our engine playing itself in-process.

use std::path::PathBuf;

use xq_engine::variant::Variant;
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::selfplay::PlaySettings;
use xq_worker::selfplay::{SelfPlaySettings, load_self_play_net, run_selfplay};

use crate::play::all_cores;

#[derive(clap::Args)]
pub struct SelfplayArgs {
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

/// Plays the games, writes the chunks and prints the rate.
pub fn run(args: SelfplayArgs) -> anyhow::Result<()> {
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
        threads: args.concurrency.unwrap_or_else(all_cores),
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
