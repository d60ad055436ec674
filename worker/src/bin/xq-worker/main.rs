//! `xq-worker`: the match runner (`match`), usable alone like cutechess-cli,
//! self-play data generation (`selfplay`), SPSA tuning with local games (`spsa`), and
//! a coordinator's worker (`connect`).

// One module a command group; this file lists the commands and hands each to its own.
mod connect;
mod matches;
mod play;
mod selfplay;
mod spsa;
mod tournament;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xq-worker", version, about = "Xiangqi match runner and cluster worker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Plays a match between two engines.
    Match(matches::MatchArgs),
    /// Generates training data: our engine plays itself in-process.
    Selfplay(selfplay::SelfplayArgs),
    /// Works for a coordinator: leases, plays and reports until stopped.
    Connect(connect::ConnectArgs),
    /// Tunes an engine's parameters by SPSA with local game pairs.
    Spsa(spsa::SpsaArgs),
    /// Plays a round robin or a gauntlet of several engines, with a live crosstable.
    Tournament(tournament::TournamentArgs),
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
    let arguments = xq_cli::matches(Cli::command(), &["connect"]);
    let cli = Cli::from_arg_matches(&arguments)?;
    match cli.command {
        Command::Match(args) => matches::run(args, play::engine_words(&arguments, "match")),
        Command::Spsa(args) => spsa::run(args),
        Command::Tournament(args) => tournament::run(args, play::engine_words(&arguments, "tournament")),
        Command::Connect(args) => connect::run(args),
        Command::Selfplay(args) => selfplay::run(args),
    }
}
