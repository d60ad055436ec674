//! `xq-worker tournament`: a round robin, gauntlet, Swiss event or knockout of several
//! engines, with a live crosstable.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::ArgAction;
use xq_tournament::scoring::Points;
use xq_tournament::standings::System;
use xq_tournament::swiss::{default_rounds, max_rounds};
use xq_worker::pgn_out::game_pgn;
use xq_worker::time_control::TimeControl;
use xq_worker::tournament::{
    Format, Played, TournamentSettings, crosstable, run_knockout, run_swiss, run_tournament, schedule, table,
};

use crate::play::{PlayArgs, engine_config};

#[derive(clap::Args)]
pub struct TournamentArgs {
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

/// Plays the event of the engines' words and prints its crosstable.
pub fn run(args: TournamentArgs, engine_words: Vec<Vec<String>>) -> anyhow::Result<()> {
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
    let terminal = std::io::stderr().is_terminal();
    let mut write_error = None;
    match format {
        Format::Swiss { rounds } => eprintln!("{event}: {rounds} rounds"),
        _ => eprintln!("{event}: {} games", games.len()),
    }
    let started = std::time::Instant::now();
    let mut report = |game: &Played, so_far: &[Played], byes: &[usize]| {
        if let Some(file) = pgn.as_mut() {
            let text = game_pgn(&game.record, &event, game.scheduled.round);
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
