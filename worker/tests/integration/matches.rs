//! Matches between real engines: ours against itself, against Debian's Fairy-Stockfish
//! over UCI (ranks 1..10) and over UCCI (ranks 0..9), and against Sjaak II; every game
//! ends by the rules or the length limit, and the PGN re-read and replayed through the
//! arbiter gives the same results.

use std::path::PathBuf;

use xq_engine::xiangqi::notation::Dialect;
use xq_engine::xiangqi::pgn::parse_pgn;
use xq_engine::xiangqi::rules::judge::{JudgeRequest, judge};
use xq_worker::engine_process::{EngineConfig, Protocol};
use xq_worker::game::{GameRecord, Termination};
use xq_worker::match_runner::{MatchSettings, run_match};
use xq_worker::pgn_out::game_pgn;

use xq_engine::xiangqi::Position;
use xq_worker::game::{Opening, Start};

use crate::{our_engine, settings};

fn reference(name: &str, path: &str, protocol: Protocol, dialect: Dialect) -> EngineConfig {
    assert!(std::path::Path::new(path).exists(), "{path} is missing: the README's test command installs it");
    EngineConfig { name: name.to_owned(), command: PathBuf::from(path), protocol, dialect, ..EngineConfig::default() }
}

fn play(opponent: EngineConfig, time_control: &str, pairs: usize) -> Vec<GameRecord> {
    play_from(opponent, time_control, pairs, xq_engine::xiangqi::fen::START_FEN)
}

fn play_from(opponent: EngineConfig, time_control: &str, pairs: usize, fen: &str) -> Vec<GameRecord> {
    let mut game_settings = settings(time_control);
    game_settings.max_plies = Some(160);
    let match_settings = MatchSettings {
        engines: [our_engine("xq"), opponent],
        pairs: (0..pairs).collect(),
        concurrency: 2,
        pin_cores: false,
        openings: vec![Start::from(Opening {
            start: Position::from_fen(fen).expect("opening FEN"),
            moves: Vec::new(),
        })]
        .into(),
        game: game_settings,
        sprt: None,
    };
    let mut records = Vec::new();
    let totals = run_match(&match_settings, |finished, _| {
        records.push(finished.record.clone());
        true
    })
    .expect("the match runs");
    assert_eq!(totals.games(), 2 * pairs as u64);
    assert_eq!(totals.pentanomial.iter().sum::<u64>(), pairs as u64);
    for record in &records {
        assert!(
            matches!(record.termination, Termination::Rules | Termination::Adjudication),
            "{:?}: {}",
            record.termination,
            record.reason
        );
    }
    records
}

/// The PGN of each game, re-read and ruled by the judge, gives the recorded result.
fn replays_to_the_same_results(records: &[GameRecord]) {
    let text: String = records.iter().enumerate().map(|(i, r)| game_pgn(r, "test", i + 1)).collect();
    let games = parse_pgn(&text).expect("our PGN parses");
    assert_eq!(games.len(), records.len());
    for (game, record) in games.iter().zip(records) {
        assert_eq!(game.moves.len(), record.moves.len());
        let (verdict, _) =
            judge(&JudgeRequest::from_pgn(game, xq_engine::xiangqi::rules::RuleSet::Wxf, Default::default()))
                .expect("legal game");
        if record.termination == Termination::Rules {
            assert_eq!(verdict["result"], record.outcome.pgn(), "{}", record.reason);
        }
        assert_eq!(game.result.as_deref(), Some(record.outcome.pgn()));
    }
}

#[test]
fn our_engine_against_itself() {
    let records = play(our_engine("xq-copy"), "nodes=2000", 2);
    replays_to_the_same_results(&records);
}

#[test]
fn against_fairy_stockfish_over_uci() {
    let records = play(
        reference("fairy-stockfish", "/usr/games/fairy-stockfish", Protocol::Uci, Dialect::OneBased),
        "st=0.02",
        1,
    );
    replays_to_the_same_results(&records);
}

#[test]
fn against_fairy_stockfish_over_ucci() {
    let records = play(
        reference("fairy-stockfish-ucci", "/usr/games/fairy-stockfish", Protocol::Ucci, Dialect::ZeroBased),
        "st=0.02",
        1,
    );
    replays_to_the_same_results(&records);
}

#[test]
fn against_sjaak_ii() {
    // Sjaak II reads H and E in FEN, and is given a fixed depth: it does not honour
    // `go movetime`. An opening from a FEN exercises the flavour.
    let mut sjaak = reference("sjaakii", "/usr/games/sjaakii", Protocol::Uci, Dialect::OneBased);
    sjaak.fen_flavour = xq_engine::xiangqi::fen::FenFlavour::HorseElephant;
    let records =
        play_from(sjaak, "depth=4", 1, "rnbakabnr/9/1c2c4/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 2 2");
    replays_to_the_same_results(&records);
}

#[test]
fn xiongqi_games_are_refereed_by_its_rules_and_replay_to_the_same_results() {
    use xq_engine::variant::Variant;
    use xq_engine::xiongqi;
    // Depth 2: the test engines are debug builds, and at depth 3 a Xiongqi search took
    // up to 0.8 s alone, past the 2 s hang timeout when other tests share the cores.
    let mut game_settings = settings("depth=2");
    game_settings.max_plies = Some(200);
    let told_the_variant = |mut engine: EngineConfig| {
        engine.options.push(("UCI_Variant".to_owned(), "xiongqi".to_owned()));
        engine
    };
    // The start position, and one with an empress and a dragon on the board.
    let middle_game = xiongqi::fen::parse("4g3/8/2e5/8/8/3E4/8/R2G4 b").expect("a Xiongqi FEN");
    let match_settings = MatchSettings {
        engines: [told_the_variant(our_engine("xq")), told_the_variant(our_engine("xq-copy"))],
        pairs: (0..2).collect(),
        concurrency: 2,
        pin_cores: false,
        openings: vec![Start::Xiongqi(xiongqi::Position::startpos()), Start::Xiongqi(middle_game)].into(),
        game: game_settings,
        sprt: None,
    };
    let mut records = Vec::new();
    let totals = run_match(&match_settings, |finished, _| {
        records.push(finished.record.clone());
        true
    })
    .expect("the match runs");
    assert_eq!(totals.games(), 4);
    for record in &records {
        assert_eq!(record.variant, Variant::Xiongqi);
        assert!(
            matches!(record.termination, Termination::Rules | Termination::Adjudication),
            "{:?}: {}",
            record.termination,
            record.reason
        );
        if record.termination == Termination::Rules {
            assert!(record.reason.contains("(Xiongqi 6."), "{}", record.reason);
        }
    }
    let pgn = game_pgn(&records[0], "test", 1);
    assert!(pgn.contains("[Variant \"xiongqi\"]"), "{pgn}");
    replays_to_the_same_results(&records);
}

/// `xq-worker match --resume`: a match stopped part-way (its PGN cut after five games,
/// one of them the first leg of an unfinished pair) goes on from the file: the complete
/// pairs count, the lone leg is dropped and its pair played again, and the file ends
/// with each of the match's games once. A file of another match is refused, naming what
/// differs, and left as it was.
#[test]
fn a_stopped_match_resumes_from_its_pgn() {
    let directory = std::env::temp_dir().join(format!("xq-match-resume-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let pgn = directory.join("games.pgn");
    let engine = our_engine("xq").command;
    let book = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-2ply.epd");
    let run = |tc: &str, resume: bool| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_xq-worker"));
        command.arg("match");
        for name in ["a", "b"] {
            command.args(["--engine", &format!("name={name}"), &format!("cmd={}", engine.display())]);
        }
        command.args(["--tc", tc, "--games", "8", "--concurrency", "2", "--maxplies", "60", "--book"]);
        command.arg(&book).args(["--shuffle", "3", "--pgnout"]).arg(&pgn);
        if resume {
            command.arg("--resume");
        }
        command.output().expect("xq-worker runs")
    };
    let rounds = |text: &str| -> Vec<usize> {
        parse_pgn(text).unwrap().iter().map(|game| game.tag("Round").unwrap().parse().unwrap()).collect()
    };
    let full = run("depth=2", false);
    assert!(full.status.success(), "{}", String::from_utf8_lossy(&full.stderr));
    let text = std::fs::read_to_string(&pgn).unwrap();
    let mut played = rounds(&text);
    played.sort_unstable();
    assert_eq!(played, (1..=8).collect::<Vec<_>>());

    // Cut the file after five games, as a kill would leave it.
    let games: Vec<&str> = text.split("\n[Event ").collect();
    let cut = games[..5].join("\n[Event ") + "\n";
    std::fs::write(&pgn, &cut).unwrap();
    let kept = rounds(&cut);
    let complete =
        kept.iter().filter(|&&round| kept.contains(&if round % 2 == 1 { round + 1 } else { round - 1 })).count();
    assert!(complete < 5, "five games hold at least one lone leg");

    let refused = run("depth=3", true);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(err.contains("[TimeControl] is \"depth=2\" where this match's is \"depth=3\""), "{err}");
    assert_eq!(std::fs::read_to_string(&pgn).unwrap(), cut, "a refused resume leaves the file as it was");

    let resumed = run("depth=2", true);
    let err = String::from_utf8_lossy(&resumed.stderr);
    let out = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "{complete} games of complete pairs count, {} of unfinished pairs dropped",
            5 - complete
        )),
        "{err}"
    );
    assert!(out.starts_with("a vs b: games 8,"), "{out}");
    let mut played = rounds(&std::fs::read_to_string(&pgn).unwrap());
    played.sort_unstable();
    assert_eq!(played, (1..=8).collect::<Vec<_>>(), "each game once, the dropped leg played again");
    std::fs::remove_dir_all(&directory).unwrap();
}
