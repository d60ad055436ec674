//! The arbiter's warning at a repetition, played as computer leagues play it
//! (`--violation-timing after-warning`): at the threefold repetition of a perpetual,
//! the violator's repeating moves are banned for its engine (UCCI `banmoves`, UCI `go
//! searchmoves`), it loses only if it repeats the cycle anyway (WXF 17.3.G.III), and
//! the PGN records the timing and the warnings.

use xq_engine::color::ByColor;
use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::pgn::parse_pgn;
use xq_engine::xiangqi::rules::judge::{JudgeRequest, judge};
use xq_engine::xiangqi::rules::{Outcome, RuleSet, ViolationTiming};
use xq_worker::engine_process::{EngineConfig, EngineProcess, Protocol};
use xq_worker::game::{GameRecord, Opening, Start, Termination, play_game};
use xq_worker::pgn_out::game_pgn;

use crate::{fake_engine, our_engine, settings};

/// Red's rook and king against the bare king: Red's rook checks from e0 and f0 in
/// turn, and each of Black's replies is forced.
const CHECKS: &str = "4k4/9/9/9/9/9/9/9/9/3K1R3 w - - 0 1";

/// One game from [`CHECKS`]: the fake engine in `mode` (speaking `protocol`) as Red,
/// ours as Black.
fn game(mode: &str, protocol: Protocol, timing: ViolationTiming) -> GameRecord {
    let mut red = EngineProcess::start(&EngineConfig { protocol, ..fake_engine(mode) }).expect("fake engine");
    let mut black = EngineProcess::start(&our_engine("xq")).expect("our engine");
    let start = Start::from(Opening { start: Position::from_fen(CHECKS).unwrap(), moves: Vec::new() });
    let mut settings = settings("depth=2");
    settings.max_plies = Some(40);
    settings.violation_timing = timing;
    let record = play_game(ByColor { red: &mut red, black: &mut black }, &start, &settings);
    red.quit();
    black.quit();
    record
}

#[test]
fn at_the_threefold_repetition_a_perpetual_loses_at_once_by_default() {
    let record = game("perpetual", Protocol::Uci, ViolationTiming::Threefold);
    assert_eq!((record.moves.len(), record.outcome), (8, Outcome::Win(xq_engine::color::Color::Black)));
    assert!(record.reason.contains("perpetual check (WXF 20.1)"), "{}", record.reason);
    assert!(record.warnings.is_empty());
}

#[test]
fn a_warned_engine_that_repeats_anyway_loses_a_cycle_later() {
    for protocol in [Protocol::Uci, Protocol::Ucci] {
        let record = game("stubborn", protocol, ViolationTiming::AfterWarning);
        assert_eq!(record.moves.len(), 12, "{protocol:?}: {}", record.reason);
        assert_eq!(record.outcome, Outcome::Win(xq_engine::color::Color::Black));
        assert!(record.reason.contains("perpetual check (WXF 20.1)"), "{}", record.reason);
        // Warned before its moves 9 and 11 (plies 9 and 11), off the moves it repeated.
        assert_eq!(record.warnings, ["9:f0e0", "11:e0f0"], "{protocol:?}");
        // The judge reads the timing from the PGN and ends the game where the match did.
        let parsed = parse_pgn(&game_pgn(&record, "warnings", 1)).expect("our PGN parses");
        let (verdict, _) =
            judge(&JudgeRequest::from_pgn(&parsed[0], RuleSet::Wxf, Default::default())).expect("a legal game");
        assert_eq!(
            (verdict["ended"]["ply"].as_u64(), verdict["ended"]["article"].as_str()),
            (Some(12), Some("WXF 20.1"))
        );
    }
}

#[test]
fn a_warned_engine_that_obeys_the_ban_is_not_ruled_against() {
    for protocol in [Protocol::Uci, Protocol::Ucci] {
        let record = game("perpetual", protocol, ViolationTiming::AfterWarning);
        let played: Vec<&str> = record.moves.iter().map(|m| m.mv.as_str()).collect();
        assert_eq!(record.warnings.first().map(String::as_str), Some("9:f0e0"), "{protocol:?}: {played:?}");
        assert_ne!(played[8], "f0e0", "{protocol:?}: the banned move was played: {played:?}");
        // Red changed its moves (17.3.G.III): at ply 12 the position recurs by a cycle
        // that repeats neither of its window's, so the count starts again and play goes
        // on, where the same moves repeated would have lost at this ply; the changed
        // cycle repeated is the repetition's fourth occurrence, a draw (17.3.G.II, 3.2.B).
        assert_eq!(record.moves.len(), 16, "{protocol:?}: {played:?}");
        assert_eq!(played[12..16], played[8..12], "{protocol:?}: the changed cycle repeated");
        assert_eq!((record.outcome, record.termination), (Outcome::Draw, Termination::Rules), "{}", record.reason);
        assert!(record.reason.contains("repetition draw (WXF 3.2.B)"), "{protocol:?}: {}", record.reason);
        // The PGN says how the game was refereed and where the warnings fell.
        let pgn = game_pgn(&record, "warnings", 1);
        let parsed = parse_pgn(&pgn).expect("our PGN parses");
        assert_eq!(parsed[0].tag("ViolationTiming"), Some("after-warning"));
        assert_eq!(parsed[0].tag("Warnings"), Some(record.warnings.join(" ").as_str()));
    }
}

/// A match counts the wins by a repetition ruling apart from the wins on the board
/// (Fairy-Stockfish 11.1 loses games to the chase rules it does not know, and its
/// Elo against us should be quotable both ways), and a resumed match reads the same
/// counts back from its PGN. The pair from [`CHECKS`]: the perpetual checker as Red
/// loses by WXF 20.1 (a ruling); as Black, its shuttle's first move is illegal (a
/// loss on the board's terms, not a ruling).
#[test]
fn a_match_counts_the_wins_by_a_repetition_ruling_apart_and_resumes_them() {
    let directory = std::env::temp_dir().join(format!("xq-match-ruled-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let (book, pgn) = (directory.join("checks.epd"), directory.join("games.pgn"));
    std::fs::write(&book, format!("{CHECKS}\n")).unwrap();
    let fake = fake_engine("perpetual");
    let run = |resume: bool| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_xq-worker"));
        command.args(["match", "--engine", "name=fake", &format!("cmd={}", fake.command.display())]);
        command.args(fake.args.iter().map(|arg| format!("arg={arg}")));
        command.args(["--engine", "name=xq", &format!("cmd={}", our_engine("xq").command.display())]);
        command.args(["--tc", "depth=2", "--games", "2", "--concurrency", "1", "--maxplies", "40", "--book"]);
        command.arg(&book).arg("--pgnout").arg(&pgn);
        if resume {
            command.arg("--resume");
        }
        let output = command.output().expect("xq-worker runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let ruled =
        "won by a repetition ruling: fake 0, xq 1; over the board (those as draws): pentanomial [0, 1, 0, 0, 0]";
    let played = run(false);
    assert!(played.contains("W/D/L 0/0/2, pentanomial [1, 0, 0, 0, 0]"), "{played}");
    assert!(played.contains(ruled), "{played}");
    let resumed = run(true);
    assert!(resumed.contains(ruled), "the resumed match reads the ruling back from the PGN:\n{resumed}");
    std::fs::remove_dir_all(&directory).unwrap();
}
