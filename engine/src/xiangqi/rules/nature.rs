//! The nature of a move (WXF Article 19): a check, a chase of which pieces by which,
//! or neither (idle, for the purposes of the repetition rules).
//!
//! A chase (19.3) is a threat, created by the move, to capture an enemy piece other than
//! the king on the next move. A threat counts when the capture would win material:
//! - the target is unprotected, or protected only by a fake root (19.13-19.15): after
//!   the capture no enemy piece can legally recapture (a pinned defender, one whose
//!   recapture would face the kings, one that cannot leave a check);
//! - or the target is worth more than the attacker, whatever protects it: a horse or
//!   cannon on a chariot (20.6), an advisor or elephant on a chariot, horse or cannon;
//! - a pawn that has not crossed the river is never a target (20.3);
//! - a piece that holds back an attack on its own king (a pinned piece, a horse's leg,
//!   one of two cannon screens) chases nothing, even where it could legally capture the
//!   piece that pins it: the book calls it immobile (Section 14, Diagrams 39-41;
//!   Section 22), also when it slides along the line it is pinned on (Diagram 65). The
//!   exception is a piece that steps into such a place by the move being judged while
//!   attacking: a resolve-check-and-counter-chase (19.12), as in Diagram 37 and when a
//!   chariot blocks a horse's check beside the horse;
//! - a piece threatening one of its own kind is no chase when the target can capture it
//!   back; it is when the target is pinned or, for horses, blocked (20.7).
//!
//! "Created by the move" is judged per attacker and target: the attacker could not
//! capture the target before the move and can, profitably, after it. So a chase can be
//! discovered (a line opened, a horse leg or elephant eye freed, a cannon screen placed,
//! Sections 20-21), and an attack that merely persists is not renewed (36.5). A capture
//! that was possible before and only became profitable because the move cut a
//! defender's cover is not a new threat: in Diagram 61 (rule cases #86 and #87) Black's
//! horse, shuttling in and out of the line of the Red cannon that chases its chariot,
//! cuts that cannon's cover of another Red cannon standing beside the Black chariot on
//! every move, and the book still rules Red alone the chaser; with two chariots taking
//! turns against two cannons (rule cases #106 and #155) the cover each chariot gives the
//! other decides nothing either. 36.1 (Diagram 105) words a pawn cutting a cover as a
//! chase by the chariot behind it; there the chariot is also the leg that holds back
//! the horse's check on its own king and chases nothing by Section 14, so both readings
//! rule that example alike (rule case #152). A move that checks is a check, whatever else it threatens (36.2: the heavier
//! nature counts).
//!
//! A mating threat ("kill", 19.2) is a move after which the mover, were it to move
//! again, mates by a series of checks. The search is checks only and bounded to
//! [`KILL_CHECKS`] checking moves (five plies): enough for the book's diagrams, cheap
//! enough to run on every move of a cycle. A kill is allowed whenever repeated (20.2)
//! and a chase outweighs it (36.4), so it is reported, never ruled on.

use super::identity::{Identities, PieceId};
use crate::xiangqi::movegen::{MoveList, Selection, generate_into, legal_moves};
use crate::xiangqi::{Move, PieceKind, Position, Square};

/// A threat to capture, by one piece on another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threat {
    /// The threatening piece.
    pub attacker: PieceId,
    /// Its kind.
    pub attacker_kind: PieceKind,
    /// Where it stands.
    pub attacker_square: Square,
    /// The threatened piece.
    pub target: PieceId,
    /// Its kind.
    pub target_kind: PieceKind,
    /// Where it stands.
    pub target_square: Square,
}

/// Checking moves the mating-threat search may use.
pub const KILL_CHECKS: u32 = 3;

/// What a move is, for the repetition rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nature {
    /// The move checks the enemy king (19.1).
    pub check: bool,
    /// The threats the move creates (19.3); empty for a check.
    pub chases: Vec<Threat>,
    /// The move threatens mate by checks (19.2); only asked of moves that neither check
    /// nor chase.
    pub kill: bool,
}

impl Nature {
    /// Whether the move chases the piece `target`.
    pub fn chases(&self, target: PieceId) -> bool {
        self.chases.iter().any(|t| t.target == target)
    }
}

/// Material value for the "worth more than the attacker" test; only the order matters.
fn value(kind: PieceKind) -> u32 {
    match kind {
        PieceKind::Rook => 9,
        PieceKind::Cannon | PieceKind::Horse => 4,
        PieceKind::Advisor | PieceKind::Elephant => 2,
        PieceKind::Pawn => 1,
        PieceKind::King => 100,
    }
}

fn has_crossed_river(position: &Position, sq: Square) -> bool {
    let color = position.piece_at(sq).expect("a piece").color;
    crate::xiangqi::attacks::home_half(!color).has(sq)
}

/// Whether the side not to move in `position` could legally capture on `square`
/// after `capture` is played.
fn recapture_exists(position: &Position, capture: Move) -> bool {
    let mut after = position.clone();
    after.make_move(capture);
    let mut replies = MoveList::new();
    generate_into(&after, Selection::Captures, &mut replies);
    replies.iter().any(|reply| reply.to() == capture.to())
}

/// The threats of the side to move of `position` that would win material (see the
/// module documentation); `moved` is the square of the piece that just moved, if any.
pub fn threats(position: &Position, ids: &Identities, moved: Option<Square>) -> Vec<Threat> {
    let mut captures = MoveList::new();
    generate_into(position, Selection::Captures, &mut captures);
    let pinned = position.king_safety().blockers;
    let mut threats = Vec::new();
    for &capture in captures.iter() {
        if pinned.has(capture.from()) && Some(capture.from()) != moved {
            continue;
        }
        let attacker = position.piece_at(capture.from()).expect("a capturing piece");
        let target = position.piece_at(capture.to()).expect("a captured piece");
        if target.kind == PieceKind::King {
            continue;
        }
        if target.kind == PieceKind::Pawn && !has_crossed_river(position, capture.to()) {
            continue;
        }
        if attacker.kind == target.kind {
            let back = Move::new(capture.to(), capture.from());
            if position.with_other_side_to_move().check_move(back).is_ok() {
                continue;
            }
        }
        let wins_material = value(target.kind) > value(attacker.kind) || !recapture_exists(position, capture);
        if wins_material {
            threats.push(Threat {
                attacker: ids.at(capture.from()).expect("followed piece"),
                attacker_kind: attacker.kind,
                attacker_square: capture.from(),
                target: ids.at(capture.to()).expect("followed piece"),
                target_kind: target.kind,
                target_square: capture.to(),
            });
        }
    }
    threats
}

/// The nature of the legal move `mv` in `before`, whose pieces are followed by `ids`.
pub fn classify(before: &Position, ids: &Identities, mv: Move) -> Nature {
    let mut after = before.clone();
    after.make_move(mv);
    if after.in_check() {
        return Nature { check: true, chases: Vec::new(), kill: false };
    }
    let mut ids_after = ids.clone();
    ids_after.apply(mv);
    let stepped_into_a_pin = !before.king_safety().blockers.has(mv.from());
    let mut captures_before = MoveList::new();
    generate_into(before, Selection::Captures, &mut captures_before);
    let could_capture_before = |threat: &Threat| {
        let from = if threat.attacker_square == mv.to() { mv.from() } else { threat.attacker_square };
        captures_before.iter().any(|c| c.from() == from && c.to() == threat.target_square)
    };
    let exempt = stepped_into_a_pin.then_some(mv.to());
    let chases: Vec<Threat> = threats(&after.with_other_side_to_move(), &ids_after, exempt)
        .into_iter()
        .filter(|threat| !could_capture_before(threat))
        .collect();
    let kill = chases.is_empty() && mates_by_checks(&mut after.with_other_side_to_move(), KILL_CHECKS);
    Nature { check: false, chases, kill }
}

/// Whether the side to move mates by a series of at most `checks` checking moves,
/// whatever the defence.
fn mates_by_checks(position: &mut Position, checks: u32) -> bool {
    if checks == 0 {
        return false;
    }
    for &mv in legal_moves(position).iter() {
        if !position.gives_check(mv) {
            continue;
        }
        let undo = position.make_move(mv);
        let mates = legal_moves(position).iter().all(|&reply| {
            let reply_undo = position.make_move(reply);
            let mated = mates_by_checks(position, checks - 1);
            position.unmake_move(reply_undo);
            mated
        });
        position.unmake_move(undo);
        if mates {
            return true;
        }
    }
    false
}
