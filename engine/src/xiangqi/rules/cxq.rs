//! The CXQ rules (shared/rules/cxq-rules.txt): consecutive checks and chases are
//! counted instead of repetitions ruled, and three automatic draws replace the natural
//! move count.
//!
//! Reading of the text:
//! - A side's streak is its run of consecutive checking moves, or of consecutive moves
//!   chasing one and the same piece (kings and pawns do not chase, as in the text).
//!   6 such moves are allowed with one piece taking part, 12 with two, 18 with three or
//!   more: the 7th, 13th or 19th is the violation. The pieces taking part are the
//!   checkers, or the pieces that chased the piece the streak follows.
//! - A chase is read as the text defines it: "a piece moves to a position where it can
//!   capture an opponent's piece, which is not the King, in the next move", or "a
//!   piece moves and results in a cannon attacking an opponent's piece". So every move
//!   after which the moved piece attacks is a chase, whether or not it attacked the
//!   same piece from where it stood (the WXF reading, 36.5, wants a new threat): a
//!   chariot shuttling a0-a1 beside an unprotected cannon chases it on every move. A
//!   cannon chases when the move gave it the attack (a screen placed or a line
//!   opened). A chariot or horse uncovered by another piece is no chaser, where WXF
//!   20.1 counts it. The text's exceptions: a king or pawn attacking, an uncrossed pawn
//!   attacked, a same-type trade (the target can capture back) are no chases.
//! - Protection decides only the perpetual chase ("continuously chasing one
//!   unprotected opponent piece"): a chase of a protected piece is still a chase, not
//!   an effective move, but neither counts towards nor keeps a perpetual chase going. A
//!   chariot attacked by a cannon or horse is never protected. The same moves decide
//!   who "responds to checking/chasing" for the effective-move count.
//! - At a violation the opponent's own streak decides: if it has used its whole
//!   allowance it is perpetual too. Both checking or both chasing draw; a check
//!   against a chase loses for the checker; otherwise the violator loses.
//! - Automatic draws, counting "moves by each side" as pairs of plies: 300 moves each
//!   (600 plies, counted from the start position's move number); 120 effective moves
//!   each (240 plies that are neither a check or chase nor the answer to one); 30 moves
//!   each (60 plies) without progress, that is without a capture or the advance of a
//!   pawn that has crossed the river.

use super::identity::{Identities, PieceId};
use super::nature::{Threat, attacks};
use super::{Outcome, Reason, Ruling};
use crate::color::{ByColor, Color};
use crate::xiangqi::attacks::home_half;
use crate::xiangqi::movegen::{MoveList, Selection, generate_into};
use crate::xiangqi::{Move, PieceKind, Position};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StreakKind {
    Check,
    Chase,
}

/// A piece taking part in a streak, and the piece it chased (none for a check).
type Participant = (PieceId, Option<PieceId>);

#[derive(Clone, Debug, Default)]
struct Streak {
    kind: Option<StreakKind>,
    length: u32,
    participants: Vec<Participant>,
    targets: Vec<PieceId>,
}

impl Streak {
    /// The pieces "using" which the streak is made: every checker, and the chasers of
    /// the pieces still chased ("chasing one unprotected opponent piece using one or
    /// more pieces"), not pieces that attacked something else along the way.
    fn pieces(&self) -> usize {
        let mut pieces = Vec::new();
        for (piece, target) in &self.participants {
            let counts = target.is_none_or(|target| self.targets.contains(&target));
            if counts && !pieces.contains(piece) {
                pieces.push(*piece);
            }
        }
        pieces.len()
    }

    fn allowance(&self) -> u32 {
        6 * self.pieces().clamp(1, 3) as u32
    }

    fn is_violation(&self) -> bool {
        self.kind.is_some() && self.length > self.allowance()
    }

    fn is_perpetual(&self) -> bool {
        self.kind.is_some() && self.length >= self.allowance()
    }

    fn extend(&mut self, kind: StreakKind, participants: Vec<Participant>) {
        let targets: Vec<PieceId> = participants.iter().filter_map(|(_, target)| *target).collect();
        let continues =
            self.kind == Some(kind) && (kind == StreakKind::Check || targets.iter().any(|t| self.targets.contains(t)));
        if continues {
            self.length += 1;
            if kind == StreakKind::Chase {
                self.targets.retain(|t| targets.contains(t));
            }
        } else {
            *self = Streak { kind: Some(kind), length: 1, participants: Vec::new(), targets };
        }
        for participant in participants {
            if !self.participants.contains(&participant) {
                self.participants.push(participant);
            }
        }
    }
}

/// The chases of the move `mv` from `before` to `after` as CXQ reads them (see the
/// module documentation), each with whether its target is unprotected.
fn chases(before: &Position, after: &Position, mv: Move, ids_after: &Identities) -> Vec<(Threat, bool)> {
    let mut attacks = attacks(&after.with_other_side_to_move(), ids_after, Some(mv.to()));
    attacks.retain(|(threat, _)| !matches!(threat.attacker_kind, PieceKind::King | PieceKind::Pawn));
    if attacks.iter().all(|(threat, _)| threat.attacker_square == mv.to()) {
        return attacks;
    }
    // A cannon other than the moved piece chases what the move gave it to attack.
    let mut before_captures = MoveList::new();
    generate_into(before, Selection::Captures, &mut before_captures);
    attacks.retain(|(threat, _)| {
        threat.attacker_square == mv.to()
            || (threat.attacker_kind == PieceKind::Cannon
                && !before_captures
                    .iter()
                    .any(|c| c.from() == threat.attacker_square && c.to() == threat.target_square))
    });
    attacks
}

/// The CXQ counters of one game.
#[derive(Clone, Debug)]
pub struct CxqCounters {
    streaks: ByColor<Streak>,
    moves_played: u32,
    effective_plies: u32,
    plies_without_progress: u32,
    last_was_forcing: bool,
}

const MOVE_LIMIT_PLIES: u32 = 600;
const EFFECTIVE_LIMIT_PLIES: u32 = 240;
const PROGRESS_LIMIT_PLIES: u32 = 60;

impl CxqCounters {
    /// Counters for a game starting at `start` (its move number counts towards the
    /// 300-move limit).
    pub fn new(start: &Position) -> Self {
        let before = 2 * start.fullmove_number().saturating_sub(1) + u32::from(start.side_to_move() == Color::Black);
        CxqCounters {
            streaks: ByColor::default(),
            moves_played: before,
            effective_plies: 0,
            plies_without_progress: 0,
            last_was_forcing: false,
        }
    }

    /// Counts the move `mv`, played from `before` into `after`, with the identities
    /// after it; returns the ruling if the game has ended.
    pub fn record(&mut self, before: &Position, after: &Position, mv: Move, ids_after: &Identities) -> Option<Ruling> {
        let mover = before.side_to_move();
        let moving = before.piece_at(mv.from()).expect("a moving piece");
        let capture = before.piece_at(mv.to()).is_some();
        let crossed_pawn_advance =
            moving.kind == PieceKind::Pawn && home_half(!mover).has(mv.from()) && mv.to().rank() != mv.from().rank();
        let check = after.in_check();
        let chases = if check { Vec::new() } else { chases(before, after, mv, ids_after) };
        let forcing = check || !chases.is_empty();
        let unprotected: Vec<Participant> =
            chases.iter().filter(|(_, unprotected)| *unprotected).map(|(t, _)| (t.attacker, Some(t.target))).collect();
        if check {
            let checkers = after.checkers().filter_map(|sq| ids_after.at(sq)).map(|id| (id, None)).collect();
            self.streaks[mover].extend(StreakKind::Check, checkers);
        } else if !unprotected.is_empty() {
            self.streaks[mover].extend(StreakKind::Chase, unprotected);
        } else {
            self.streaks[mover] = Streak::default();
        }
        self.moves_played += 1;
        if !forcing && !self.last_was_forcing {
            self.effective_plies += 1;
        }
        self.last_was_forcing = forcing;
        self.plies_without_progress = if capture || crossed_pawn_advance { 0 } else { self.plies_without_progress + 1 };

        self.violation_ruling(mover).or_else(|| self.draw_ruling())
    }

    fn violation_ruling(&self, mover: Color) -> Option<Ruling> {
        let own = &self.streaks[mover];
        if !own.is_violation() {
            return None;
        }
        let other = &self.streaks[!mover];
        let other_kind = if other.is_perpetual() { other.kind } else { None };
        let (outcome, reason) = match (own.kind, other_kind) {
            (Some(StreakKind::Check), Some(StreakKind::Check)) => (Outcome::Draw, Reason::MutualPerpetualCheck),
            (Some(StreakKind::Chase), Some(StreakKind::Chase)) => (Outcome::Draw, Reason::MutualPerpetualChase),
            (Some(StreakKind::Chase), Some(StreakKind::Check)) => (Outcome::Win(mover), Reason::PerpetualCheck),
            (Some(StreakKind::Check), _) => (Outcome::Win(!mover), Reason::PerpetualCheck),
            _ => (Outcome::Win(!mover), Reason::PerpetualChase),
        };
        Some(Ruling { outcome, reason, article: "CXQ Advanced Rules" })
    }

    fn draw_ruling(&self) -> Option<Ruling> {
        let reason = if self.moves_played >= MOVE_LIMIT_PLIES {
            Reason::CxqMoveLimit
        } else if self.effective_plies >= EFFECTIVE_LIMIT_PLIES {
            Reason::CxqEffectiveMoves
        } else if self.plies_without_progress >= PROGRESS_LIMIT_PLIES {
            Reason::CxqNoProgress
        } else {
            return None;
        };
        Some(Ruling { outcome: Outcome::Draw, reason, article: "CXQ Automatic Drawing Rules" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checks_allowed_with(pieces: u8) -> u32 {
        let mut streak = Streak::default();
        let mut allowed = 0;
        loop {
            let piece = PieceId::new((allowed % u32::from(pieces)) as u8);
            streak.extend(StreakKind::Check, vec![(piece, None)]);
            if streak.is_violation() {
                return allowed;
            }
            allowed += 1;
        }
    }

    #[test]
    fn six_checks_per_piece_are_allowed_up_to_three_pieces() {
        assert_eq!(checks_allowed_with(1), 6, "the 7th check with one piece is the violation");
        assert_eq!(checks_allowed_with(2), 12, "the 13th with two");
        assert_eq!(checks_allowed_with(3), 18, "the 19th with three");
        assert_eq!(checks_allowed_with(4), 18, "three or more pieces: 18");
    }

    #[test]
    fn a_chase_streak_follows_one_target_and_breaks_on_another() {
        let (a, b) = (PieceId::new(1), PieceId::new(2));
        let mut streak = Streak::default();
        for _ in 0..6 {
            streak.extend(StreakKind::Chase, vec![(PieceId::new(9), Some(a)), (PieceId::new(9), Some(b))]);
        }
        streak.extend(StreakKind::Chase, vec![(PieceId::new(9), Some(a))]);
        assert!(streak.is_violation(), "seven chases of the same piece by one piece");
        let mut alternating = Streak::default();
        for i in 0..20 {
            alternating.extend(StreakKind::Chase, vec![(PieceId::new(9), Some(if i % 2 == 0 { a } else { b }))]);
        }
        assert!(!alternating.is_violation(), "chasing two pieces in turn is allowed");
    }

    /// Counters where Black has chased one piece `chases` times running with one piece,
    /// and Red has checked `checks` times running with `checkers` pieces in turn.
    fn chaser_against_checker(chases: u32, checks: u32, checkers: u8) -> CxqCounters {
        let mut counters = CxqCounters::new(&Position::startpos());
        for _ in 0..chases {
            counters.streaks[Color::Black].extend(StreakKind::Chase, vec![(PieceId::new(20), Some(PieceId::new(3)))]);
        }
        for check in 0..checks {
            let checker = PieceId::new((check % u32::from(checkers)) as u8);
            counters.streaks[Color::Red].extend(StreakKind::Check, vec![(checker, None)]);
        }
        counters
    }

    #[test]
    fn a_chaser_breaking_its_allowance_against_a_perpetual_checker_wins() {
        // "If one side perpetual checks and the other side perpetual chases, the one who
        // perpetual checks loses" (CXQ Advanced Rules), also when the chase is the
        // streak that runs over first: Black's 7th chase of one piece with one piece,
        // against Red's 6 checks with one piece, the whole of its allowance. (No game
        // is asserted for this order: each of the chaser's last six moves would have to
        // answer a check and chase the same piece, and no position found does both.)
        let ruling = chaser_against_checker(7, 6, 1).violation_ruling(Color::Black).unwrap();
        assert_eq!((ruling.outcome, ruling.reason), (Outcome::Win(Color::Black), Reason::PerpetualCheck));
        // Red's checks short of their allowance (5 of 6, or 6 of 12 with two pieces):
        // the chase alone is the violation, and the chaser loses.
        for (checks, checkers) in [(5, 1), (6, 2)] {
            let ruling = chaser_against_checker(7, checks, checkers).violation_ruling(Color::Black).unwrap();
            assert_eq!((ruling.outcome, ruling.reason), (Outcome::Win(Color::Red), Reason::PerpetualChase));
        }
        // Within the allowance, nothing to rule.
        assert_eq!(chaser_against_checker(6, 6, 1).violation_ruling(Color::Black), None);
    }

    #[test]
    fn a_piece_chasing_another_target_does_not_raise_the_allowance() {
        let (target, other) = (PieceId::new(1), PieceId::new(2));
        let (chaser, bystander) = (PieceId::new(8), PieceId::new(9));
        let mut streak = Streak::default();
        for i in 0..7 {
            let mut participants = vec![(chaser, Some(target))];
            if i % 2 == 0 {
                participants.push((bystander, Some(other)));
            }
            streak.extend(StreakKind::Chase, participants);
        }
        assert_eq!(streak.pieces(), 1, "only the chaser of the followed piece takes part");
        assert!(streak.is_violation(), "the 7th chase of one piece by one piece");
    }

    /// Plays `moves` from `fen` through counters alone; the effective plies counted.
    fn effective_plies_after(fen: &str, moves: &str) -> u32 {
        use crate::xiangqi::notation::{Dialect, parse_uci};
        let mut position = Position::from_fen(fen).unwrap();
        let mut ids = Identities::new(&position);
        let mut counters = CxqCounters::new(&position);
        for text in moves.split_whitespace() {
            let mv = parse_uci(&position, text, Dialect::ZeroBased).unwrap();
            let before = position.clone();
            position.make_move(mv);
            ids.apply(mv);
            assert_eq!(counters.record(&before, &position, mv, &ids), None);
        }
        counters.effective_plies
    }

    #[test]
    fn attacks_on_protected_pieces_are_chases_and_not_effective_moves() {
        // "Effective Rule: ... moves made by each side excluding checking/chasing moves
        // or moves to respond to checking/chasing": the chariot's attacks on the
        // cannon the pawn protects are chases, the king's moves answer them; none of
        // the eight plies is effective. With the chariot shuttling where it attacks
        // nothing, every ply is.
        let cycle = "a0a1 e9e8 a1a0 e8e9 a0a1 e9e8 a1a0 e8e9";
        assert_eq!(effective_plies_after("4k4/9/9/9/p8/c8/9/9/9/R2K5 w", cycle), 0);
        assert_eq!(effective_plies_after("4k4/9/9/9/p8/1c7/9/9/9/R2K5 w", cycle), 8);
    }
}
