//! Tournaments played by the tournament runner with real engine processes: a double
//! round robin of six engines (ours at several depths and strengths, Fairy-Stockfish,
//! Sjaak II) where every pairing meets twice with colours swapped on one opening and the
//! standings' points equal a recount of the games' PGN; Swiss and knockout events; and
//! the `xq-worker tournament` command writing the whole event as PGN with its crosstable.

use std::collections::HashMap;
use std::process::Command;

use xq_engine::xiangqi::fen::FenFlavour;
use xq_engine::xiangqi::notation::Dialect;
use xq_engine::xiangqi::pgn::parse_pgn;
use xq_tournament::scoring::Points;
use xq_tournament::standings::System;
use xq_worker::engine_process::EngineConfig;
use xq_worker::game::Start;
use xq_worker::openings::read_book;
use xq_worker::pgn_out::game_pgn;
use xq_worker::tournament::{Format, TournamentSettings, run_knockout, run_swiss, run_tournament, schedule, table};

use crate::{our_engine, settings};

/// Our engine capped at depths 1 to `count`, named `depth-N`.
fn depth_engines(count: u32) -> Vec<EngineConfig> {
    (1..=count)
        .map(|depth| {
            let mut engine = our_engine(&format!("depth-{depth}"));
            engine.options.push(("Depth Limit".to_owned(), depth.to_string()));
            engine
        })
        .collect()
}

fn book() -> Vec<Start> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../books/xiangqi-2ply.epd");
    read_book(std::path::Path::new(path), None).unwrap().into_iter().map(Start::from).collect()
}

/// The six engines: our engine capped at depths 1 to 3 and on its handcrafted
/// evaluation, Fairy-Stockfish and Sjaak II (over UCI, ranks 1-10; Sjaak II reads H
/// and E in FEN).
fn six_engines() -> Vec<EngineConfig> {
    let mut engines = depth_engines(3);
    let mut handcrafted = our_engine("handcrafted");
    handcrafted.options.push(("UseNNUE".to_owned(), "false".to_owned()));
    engines.push(handcrafted);
    let reference = |name: &str, fen_flavour| EngineConfig {
        name: name.to_owned(),
        command: format!("/usr/games/{name}").into(),
        dialect: Dialect::OneBased,
        fen_flavour,
        ..EngineConfig::default()
    };
    engines.push(reference("fairy-stockfish", FenFlavour::KnightBishop));
    engines.push(reference("sjaakii", FenFlavour::HorseElephant));
    engines
}

#[test]
fn a_double_round_robin_of_six_engines_meets_every_pairing_twice_and_counts_its_points() {
    let engines = six_engines();
    let names: Vec<String> = engines.iter().map(|e| e.name.clone()).collect();
    // A depth, not a clock: Sjaak II does not honour `go movetime`.
    let mut game = settings("depth=4");
    game.max_plies = Some(160);
    let openings = book();
    let format = Format::RoundRobin { double: true };
    let games = schedule(6, format, openings.len());
    let tournament = TournamentSettings { engines, format, openings, game, concurrency: 2, points: Points::TwoOneZero };
    let played = run_tournament(&tournament, &games, |_, _| true).unwrap();
    assert_eq!(played.len(), 30);
    for game in &played {
        let twin = played
            .iter()
            .find(|p| {
                p.scheduled.pairing.red == game.scheduled.pairing.black
                    && p.scheduled.pairing.black == game.scheduled.pairing.red
            })
            .expect("the return game");
        assert_eq!(twin.scheduled.opening, game.scheduled.opening);
        assert_eq!(game.record.players.red, names[game.scheduled.pairing.red]);
        assert!(game.record.outcome.pgn() != "*", "every game reaches a result: {:?}", game.record.outcome);
    }
    // Points recounted from the games as PGN, engine by name.
    let text: String =
        played.iter().enumerate().map(|(round, game)| game_pgn(&game.record, "six", round + 1)).collect();
    let mut recount: HashMap<String, f64> = HashMap::new();
    for game in parse_pgn(&text).unwrap() {
        let (red, black) = (game.tag("White").unwrap().to_owned(), game.tag("Black").unwrap().to_owned());
        let red_points = match game.tag("Result").unwrap() {
            "1-0" => 2.0,
            "0-1" => 0.0,
            _ => 1.0,
        };
        *recount.entry(red).or_default() += red_points;
        *recount.entry(black).or_default() += 2.0 - red_points;
    }
    let table = table(6, &played, &[], System::RoundRobin, Points::TwoOneZero);
    for line in &table.standings {
        assert_eq!(line.games, 10);
        assert_eq!(line.points, recount[&names[line.player]], "{}", names[line.player]);
    }
    assert_eq!(table.standings.iter().map(|l| l.points).sum::<f64>(), 60.0);
    // Every engine is rated; an engine that won or lost every game needs the prior.
    let ratings = table.ratings.as_ref().expect("every engine met every other");
    assert!(ratings.elo.iter().all(|elo| elo.is_finite()));
    let swept = table.standings.iter().any(|l| l.points == 0.0 || l.points == 2.0 * l.games as f64);
    assert_eq!(table.rating_prior > 0.0, swept);
}

#[test]
fn the_tournament_command_writes_the_event_and_its_crosstable() {
    let dir = std::env::temp_dir().join(format!("xq-tournament-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pgn = dir.join("event.pgn");
    let engine = our_engine("x").command;
    let book = concat!(env!("CARGO_MANIFEST_DIR"), "/../books/xiangqi-2ply.epd");
    let engine_words = |name: &str, depth: u32| {
        vec![format!("name={name}"), format!("cmd={}", engine.display()), format!("option.Depth Limit={depth}")]
    };
    let mut command = Command::new(env!("CARGO_BIN_EXE_xq-worker"));
    command.args(["tournament", "--system", "gauntlet", "--challengers", "1", "--games-per-opponent", "2"]);
    for (name, depth) in [("deep", 3), ("shallow", 1), ("middle", 2)] {
        command.arg("--engine").args(engine_words(name, depth));
    }
    command.args(["--tc", "depth=4", "--maxplies", "120", "--book", book, "--pgnout"]).arg(&pgn);
    let output = command.output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.contains("gauntlet of 3 engines: 4 games"), "{text}");
    let games = parse_pgn(&std::fs::read_to_string(&pgn).unwrap()).unwrap();
    assert_eq!(games.len(), 4);
    assert!(games.iter().all(|g| g.tag("White") == Some("deep") || g.tag("Black") == Some("deep")));
    // The field never meets itself in a gauntlet.
    assert!(!games.iter().any(|g| [g.tag("White"), g.tag("Black")] == [Some("shallow"), Some("middle")]));
    for name in ["deep", "shallow", "middle"] {
        assert!(text.lines().any(|l| l.contains(&format!(" {name} "))), "{name} in the crosstable: {text}");
    }
    let duplicate = Command::new(env!("CARGO_BIN_EXE_xq-worker"))
        .args(["tournament", "--engine"])
        .args(engine_words("same", 1))
        .arg("--engine")
        .args(engine_words("same", 2))
        .output()
        .unwrap();
    assert!(!duplicate.status.success());
    assert!(String::from_utf8_lossy(&duplicate.stderr).contains("two engines are named 'same'"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_swiss_event_pairs_each_round_from_the_results_before_it() {
    let engines = depth_engines(5);
    let mut game = settings("depth=4");
    game.max_plies = Some(120);
    let tournament = TournamentSettings {
        engines,
        format: Format::Swiss { rounds: 3 },
        openings: book(),
        game,
        concurrency: 2,
        points: Points::TwoOneZero,
    };
    let mut seen_byes = Vec::new();
    let (played, byes) = run_swiss(&tournament, 3, |_, so_far, byes| {
        assert!(so_far.windows(2).all(|w| w[0].scheduled.round <= w[1].scheduled.round + 1));
        seen_byes = byes.to_vec();
        true
    })
    .unwrap();
    // Five players: two games and a bye a round, a different player sitting out each.
    assert_eq!(played.len(), 6);
    assert_eq!(byes.len(), 3);
    assert_eq!(seen_byes, byes);
    let mut distinct = byes.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3);
    let mut pairs: Vec<(usize, usize)> = played
        .iter()
        .map(|p| {
            (
                p.scheduled.pairing.red.min(p.scheduled.pairing.black),
                p.scheduled.pairing.red.max(p.scheduled.pairing.black),
            )
        })
        .collect();
    pairs.sort();
    pairs.dedup();
    assert_eq!(pairs.len(), 6, "no pairing twice");
    let table = table(5, &played, &byes, System::Swiss, Points::TwoOneZero);
    assert_eq!(table.standings.iter().map(|l| l.points).sum::<f64>(), 6.0 * 2.0 + 3.0 * 2.0, "games and byes");
}

#[test]
fn a_knockout_halves_the_field_each_round_until_one_is_left() {
    let engines = depth_engines(4);
    let mut game = settings("depth=4");
    game.max_plies = Some(120);
    let tournament = TournamentSettings {
        engines,
        format: Format::Knockout { games_per_match: 2 },
        openings: book(),
        game: game.clone(),
        concurrency: 2,
        points: Points::TwoOneZero,
    };
    let mut rapid = game;
    rapid.time_control = "depth=2".parse().unwrap();
    let (played, matches) = run_knockout(&tournament, 2, (&rapid, 1), |_, _| true).unwrap();
    // Seeds 1-4 and 2-3, then the final.
    assert_eq!(matches.len(), 3);
    assert_eq!([matches[0].players, matches[1].players], [(0, Some(3)), (1, Some(2))]);
    let finalists = (matches[0].winner, matches[1].winner);
    assert_eq!(matches[2].players, (finalists.0.min(finalists.1), Some(finalists.0.max(finalists.1))));
    assert_eq!(matches[2].round, 2);
    for m in &matches {
        let (a, b) = (m.players.0, m.players.1.unwrap());
        assert_eq!(m.points.0 + m.points.1, 4.0, "two games of 2-1-0 points");
        assert!(m.tie_break_games == 0 || m.points.0 == m.points.1, "tie-breaks only after a level match");
        let total = (m.points.0 + m.tie_break_points.0, m.points.1 + m.tie_break_points.1);
        // Level after the tie-breaks: the higher seed, a.
        let expected = if total.0 >= total.1 { a } else { b };
        assert_eq!(m.winner, expected, "{m:?}");
        let games = played
            .iter()
            .filter(|p| p.scheduled.round == m.round)
            .filter(|p| [p.scheduled.pairing.red, p.scheduled.pairing.black].contains(&a))
            .count();
        assert_eq!(games, 2 + m.tie_break_games);
    }
}
