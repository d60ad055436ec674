//! Game records in PGN, as the product writes them (shared/reference/CONVENTIONS.md):
//! the usual headers with `[Variant]` (xiangqi or xiongqi), `[FEN]`, `[TimeControl]`
//! (`[WhiteTimeControl]` and `[BlackTimeControl]` with time odds) and `[Termination]`, moves in UCI coordinates, and a note after each move (book, or
//! the engine's score, depth and time: `MoveNote`). An ending the rules did not make
//! carries its evidence for the coordinator: `[OverTime]`, the seconds a side that
//! lost on time thought on its last, unplayed move, `[IllegalMove]`, the move an
//! engine sent that the rules refused, and `[FailedEngine]`, the side (`red` or
//! `black`; South and North in Xiongqi) whose engine crashed, hung or misbehaved in a
//! game ended "abandoned", which it lost. Games played with the books' timing of
//! repetition violations say so, `[ViolationTiming "after-warning"]`, with the
//! arbiter's warnings: `[Warnings "9:f0e0 11:e0f0"]`, before ply 9 the moves banned for
//! its mover.

use std::fmt::Write as _;

use xq_engine::color::Color;
use xq_engine::time_control::TimeControl;
use xq_engine::xiangqi::pgn::{MoveNote, Movetext};
use xq_engine::xiangqi::rules::ViolationTiming;

use crate::game::{GameRecord, Termination, first_mover};

/// Escapes a tag value.
fn quoted(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The PGN text of `game`, played as round `round` of `event`.
pub fn game_pgn(game: &GameRecord, event: &str, round: usize) -> String {
    let mut text = String::new();
    let mut tag = |name: &str, value: &str| {
        writeln!(text, "[{name} \"{}\"]", quoted(value)).expect("writing to a string");
    };
    tag("Event", event);
    tag("Site", "xq-worker");
    tag("Round", &round.to_string());
    tag("White", &game.players.red);
    tag("Black", &game.players.black);
    tag("Result", game.outcome.pgn());
    tag("Variant", game.variant.name());
    if !game.from_startpos {
        tag("SetUp", "1");
        tag("FEN", &game.start_fen);
    }
    for (name, value) in TimeControl::pgn_tags(&game.time_controls.red, &game.time_controls.black) {
        tag(name, &value);
    }
    tag("PlyCount", &game.moves.len().to_string());
    tag("Termination", game.termination.pgn());
    if let Some(overtime) = game.overtime {
        tag("OverTime", &format!("{:.3}", overtime.as_secs_f64()));
    }
    if let Some(illegal) = &game.illegal_move {
        tag("IllegalMove", illegal);
    }
    if game.termination == Termination::EngineFailure
        && let Some((failed, _)) = &game.failure
    {
        tag("FailedEngine", failed.fold("red", "black"));
    }
    if game.violation_timing != ViolationTiming::Threefold {
        tag("ViolationTiming", game.violation_timing.name());
    }
    if !game.warnings.is_empty() {
        tag("Warnings", &game.warnings.join(" "));
    }
    text.push('\n');
    let mut movetext = Movetext::default();
    // Both games' FENs: side to move second, the move number sixth.
    let mut side = first_mover(&game.start_fen);
    let mut number: u32 = game.start_fen.split_whitespace().nth(5).and_then(|n| n.parse().ok()).unwrap_or(1);
    for (index, played) in game.moves.iter().enumerate() {
        let mut token = String::new();
        if side == Color::Red {
            write!(token, "{number}. ").expect("writing to a string");
        } else if index == 0 {
            write!(token, "{number}... ").expect("writing to a string");
        }
        let note = if index < game.book_plies {
            MoveNote::Book
        } else {
            MoveNote::Engine { score: played.score, depth: played.depth, elapsed: played.elapsed }
        };
        write!(token, "{} {{{note}}}", played.mv).expect("writing to a string");
        movetext.push(&token);
        if side == Color::Black {
            number += 1;
        }
        side = !side;
    }
    let reason = game.reason.replace('{', "(").replace('}', ")");
    movetext.push(&format!("{{{reason}}} {}", game.outcome.pgn()));
    text.push_str(&movetext.finish());
    text.push_str("\n\n");
    text
}
