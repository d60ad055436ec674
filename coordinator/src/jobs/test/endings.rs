//! A game counts only with evidence: after the replay has shown its moves legal, its
//! notes (each move's time and score) are replayed through the lease's clocks and the
//! test's adjudication, and an ending the rules did not make must be borne out by them.
//!
//! - Every ply has its note: book moves exactly the unit's opening, the rest an
//!   engine's, and no engine move overdraws its clock beyond the lease's margin.
//! - A time forfeit needs a time control with a clock (or a time per move), the side to
//!   move as the loser, and `[OverTime]`: a think longer than that side's clock, as
//!   replayed here, plus the margin.
//! - A rules infraction needs `[IllegalMove]`, a move the final position refuses, and
//!   the side to move as the loser.
//! - An adjudication needs the test's own settings to end the game at its last ply
//!   with its result, or the game to have reached the test's ply limit as a draw.
//! - An engine's failure ("abandoned": a crash, a hang under a node or depth budget, a
//!   flood of output) needs `[FailedEngine]`, the side whose engine failed, and the
//!   result against that side. An engine fails getting ready for the game, before any
//!   engine has moved, or thinking on its own move: past the opening, the failed side
//!   must be the side to move.
//! - No game goes on past a ply where adjudication or the ply limit ended it, and no
//!   other ending (a forfeit, an infraction, a failure) comes at a ply where they did.
//!
//! What the evidence cannot show: that an engine really crashed or hung (a worker may
//! say that the side to move failed), and times a worker made up consistently. Those
//! are left to the per-worker statistics.

use std::time::Duration;

use crate::storage::counts::TIME_FORFEIT;
use xq_engine::adjudication::{Adjudication, Adjudicator, Verdict};
use xq_engine::color::{ByColor, Color};
use xq_engine::time_control::{BadTimeControl, Clock, TimeControl};
use xq_engine::xiangqi::pgn::{MoveNote, PgnGame};
use xq_engine::xiangqi::rules::Outcome;
use xq_proto::v1;

/// How a lease's games are played, as the worker was told.
#[derive(Clone, Debug)]
pub struct Conditions {
    /// The lease's time controls of its new engine and its base (the same but with
    /// time odds): the job's, scaled to the worker's speed.
    pub time_controls: [TimeControl; 2],
    /// How far past its clock an engine may go.
    pub time_margin: Duration,
    /// The test's score adjudication.
    pub adjudication: Adjudication,
    /// Draw at this many plies, if set.
    pub max_plies: Option<usize>,
}

impl Conditions {
    /// The time control each side played under, the new engine's side being `new_color`.
    pub fn time_controls(&self, new_color: Color) -> ByColor<&TimeControl> {
        let [new, base] = &self.time_controls;
        match new_color {
            Color::Red => ByColor { red: new, black: base },
            Color::Black => ByColor { red: base, black: new },
        }
    }

    /// Read off a match lease's spec the way the worker reads it.
    pub fn for_lease(spec: &v1::MatchSpec) -> Result<Conditions, String> {
        Ok(Conditions {
            time_controls: xq_proto::speed::engine_time_controls(spec).map_err(|e: BadTimeControl| e.to_string())?,
            time_margin: xq_proto::time_margin(spec),
            adjudication: xq_proto::adjudication(spec.adjudication.as_ref()),
            max_plies: (spec.max_plies > 0).then_some(spec.max_plies as usize),
        })
    }
}

/// What the replay learnt of a game.
#[derive(Clone, Copy, Debug)]
pub struct Replayed {
    /// The side that made the first ply.
    pub first_mover: Color,
    /// Plies of the unit's opening.
    pub book_plies: usize,
    /// Whether the final position refuses the move in `[IllegalMove]`, if there is one.
    pub refuses_illegal_move: Option<bool>,
}

/// Notes carry milliseconds; the worker's clocks count finer. A millisecond of slack
/// per ply keeps rounding from refusing an honest game.
fn rounding_slack(plies: usize) -> Duration {
    Duration::from_millis(plies as u64)
}

/// Checks `game`'s notes, clocks and ending, which ended with `termination` and
/// `outcome` (its result), its sides having played under `time_controls`.
pub fn check(
    game: &PgnGame,
    replayed: &Replayed,
    termination: &str,
    outcome: Outcome,
    conditions: &Conditions,
    time_controls: ByColor<&TimeControl>,
) -> Result<(), String> {
    let plies = game.moves.len();
    let notes = notes(game, replayed.book_plies)?;
    let mover = |ply: usize| if ply.is_multiple_of(2) { replayed.first_mover } else { !replayed.first_mover };
    let to_move = mover(plies);
    let clocks = replay_clocks(&notes, mover, conditions, time_controls)?;
    if let Some(max) = conditions.max_plies
        && plies > max
    {
        return Err(format!("{plies} plies, past the test's limit of {max}"));
    }
    let verdict = first_verdict(&notes, mover, conditions.adjudication);
    if let Some((ply, _)) = verdict
        && ply < plies
    {
        return Err(format!("adjudication ended it at ply {ply}, yet it goes on to ply {plies}"));
    }
    // The worker looks at the settings after each engine move, before the next move is
    // asked for: an ending of its own there would have come too late.
    let settled = if verdict.is_some_and(|(ply, _)| ply == plies) {
        Some("adjudication")
    } else {
        (conditions.max_plies == Some(plies)).then_some("the ply limit")
    };
    if let Some(settled) = settled
        && matches!(termination, TIME_FORFEIT | "rules infraction" | "abandoned")
        && plies > replayed.book_plies
    {
        return Err(format!("{termination} at ply {plies}, where {settled} had ended it"));
    }
    let loser_to_move = || {
        if outcome == Outcome::Win(!to_move) {
            Ok(())
        } else {
            Err(format!("{termination} by {to_move:?}, the side to move, but the result says otherwise"))
        }
    };
    match termination {
        "normal" => Ok(()),
        // An engine that fails loses (the worker cannot tell a crash from a forfeit).
        "abandoned" => {
            let failed = match game.tag("FailedEngine") {
                Some("red") => Color::Red,
                Some("black") => Color::Black,
                Some(other) => return Err(format!("a bad [FailedEngine] {other:?}: red or black")),
                None => return Err("abandoned without [FailedEngine]".to_owned()),
            };
            if outcome != Outcome::Win(!failed) {
                return Err(format!("{failed:?}'s engine failed, but the result says otherwise"));
            }
            if failed != to_move && plies > replayed.book_plies {
                return Err(format!("{failed:?}'s engine failed after ply {plies}, where {to_move:?} was to move"));
            }
            Ok(())
        }
        TIME_FORFEIT => {
            loser_to_move()?;
            let over = game.tag("OverTime").ok_or("a time forfeit without [OverTime]")?;
            let over: f64 = over.parse().ok().filter(|s: &f64| s.is_finite() && *s >= 0.0).ok_or("a bad [OverTime]")?;
            let allowed = match &clocks[to_move] {
                Limit::Clock(clock) => clock.remaining(),
                Limit::PerMove(time) => *time,
                Limit::None => return Err("a time forfeit under a time control without a clock".to_owned()),
            } + conditions.time_margin;
            if Duration::from_secs_f64(over.min(1e9)) + rounding_slack(plies) <= allowed {
                return Err(format!(
                    "lost on time after {over:.3} s, within the {:.3} s it had",
                    allowed.as_secs_f64()
                ));
            }
            Ok(())
        }
        "rules infraction" => {
            loser_to_move()?;
            match replayed.refuses_illegal_move {
                Some(true) => Ok(()),
                Some(false) => Err("the move in [IllegalMove] is legal".to_owned()),
                None => Err("a rules infraction without [IllegalMove]".to_owned()),
            }
        }
        "adjudication" => {
            let at_limit = conditions.max_plies == Some(plies) && outcome == Outcome::Draw;
            let by_score = match verdict {
                Some((_, Verdict::Draw)) => outcome == Outcome::Draw,
                Some((_, Verdict::Resigns(side))) => outcome == Outcome::Win(!side),
                None => false,
            };
            if at_limit || by_score {
                Ok(())
            } else {
                Err("adjudicated, but neither the test's adjudication nor its ply limit ends it so".to_owned())
            }
        }
        other => Err(format!("unknown termination '{other}'")),
    }
}

/// Every ply's note: the opening's plies `{book}`, the others an engine's.
fn notes(game: &PgnGame, book_plies: usize) -> Result<Vec<MoveNote>, String> {
    let mut notes = Vec::with_capacity(game.moves.len());
    for (ply, note) in game.notes.iter().enumerate() {
        let text = note.as_deref().ok_or_else(|| format!("ply {} has no note of its time", ply + 1))?;
        let note = MoveNote::parse(text).ok_or_else(|| format!("ply {}: unreadable note '{text}'", ply + 1))?;
        if (note == MoveNote::Book) != (ply < book_plies) {
            return Err(format!("ply {}: the note '{text}' does not fit the opening's {book_plies} plies", ply + 1));
        }
        notes.push(note);
    }
    Ok(notes)
}

/// A side's clock after the game.
enum Limit {
    Clock(Clock),
    PerMove(Duration),
    None,
}

impl Limit {
    fn of(time_control: &TimeControl) -> Limit {
        match time_control {
            TimeControl::Clock(periods) => Limit::Clock(Clock::new(periods)),
            TimeControl::MoveTime(time) => Limit::PerMove(*time),
            _ => Limit::None,
        }
    }
}

/// Charges each engine move to its side's clock: an overdrawn clock would have ended
/// the game there.
fn replay_clocks(
    notes: &[MoveNote],
    mover: impl Fn(usize) -> Color,
    conditions: &Conditions,
    time_controls: ByColor<&TimeControl>,
) -> Result<ByColor<Limit>, String> {
    let mut clocks = ByColor::new_with(|color| Limit::of(time_controls[color]));
    for (ply, note) in notes.iter().enumerate() {
        let MoveNote::Engine { elapsed, .. } = *note else { continue };
        let margin = conditions.time_margin + rounding_slack(ply + 1);
        let within = match &mut clocks[mover(ply)] {
            Limit::Clock(clock) => clock.charge(elapsed, margin).is_ok(),
            Limit::PerMove(time) => elapsed <= *time + margin,
            Limit::None => true,
        };
        if !within {
            return Err(format!(
                "ply {}: {:.3} s is past the clock, yet the game goes on",
                ply + 1,
                elapsed.as_secs_f64()
            ));
        }
    }
    Ok(clocks)
}

/// The first ply (1-based) where the test's adjudication ends the game, and how.
fn first_verdict(
    notes: &[MoveNote],
    mover: impl Fn(usize) -> Color,
    adjudication: Adjudication,
) -> Option<(usize, Verdict)> {
    let mut adjudicator = Adjudicator::new(adjudication);
    notes.iter().enumerate().find_map(|(ply, note)| {
        let verdict = match *note {
            MoveNote::Book => {
                adjudicator.book_ply();
                None
            }
            MoveNote::Engine { score, .. } => adjudicator.after_ply(mover(ply), score),
        };
        verdict.map(|v| (ply + 1, v))
    })
}
