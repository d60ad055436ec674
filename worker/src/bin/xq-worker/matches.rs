//! `xq-worker match`: a match between two engines, as cutechess-cli plays one, with an
//! SPRT, a PGN, and resuming from that PGN.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::ArgAction;
use indicatif::{ProgressBar, ProgressStyle};
use xq_stats::{Model, Sprt};
use xq_worker::match_runner::{MatchSettings, MatchTotals, resume_match};
use xq_worker::pgn_out::game_pgn;
use xq_worker::resume::{PlayedPairs, ThisMatch, played_games};

use crate::play::{PlayArgs, engine_config, key_values, number};

#[derive(clap::Args)]
pub struct MatchArgs {
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

/// The SPRT of `--sprt`'s key=value words.
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

/// The match so far in one line: results, Elo and the SPRT.
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

/// Plays the match of two engines' words.
pub fn run(args: MatchArgs, engines: Vec<Vec<String>>) -> anyhow::Result<()> {
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
        openings: args.play.openings()?.into(),
        game: args.play.game()?,
        sprt,
    };
    let names = [engines[0].name.clone(), engines[1].name.clone()];
    let event = format!("{} vs {}", names[0], names[1]);
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
            let text = game_pgn(&finished.record, &event, finished.pair * 2 + finished.leg + 1);
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
    if totals.ruled_wins != [0, 0] || totals.forfeit_wins != [0, 0] {
        let mut line = String::from("  ");
        for (how, wins) in [("by a repetition ruling", totals.ruled_wins), ("on time", totals.forfeit_wins)] {
            if wins != [0, 0] {
                line.push_str(&format!("won {how}: {} {}, {} {}; ", names[0], wins[0], names[1], wins[1]));
            }
        }
        line.push_str(&format!("over the board (those as draws): pentanomial {:?}", totals.over_the_board));
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
