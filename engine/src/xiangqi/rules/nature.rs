//! The nature of a move (WXF Article 19): a check, a chase of which pieces by which,
//! or neither (idle, for the purposes of the repetition rules).
//!
//! A chase (19.3) is a threat, created by the move, to capture an enemy piece other than
//! the king on the next move. A threat counts when the capture would win material:
//! - the target is unprotected, or protected only by a fake root (19.13-19.15): after
//!   the capture no enemy piece can legally recapture (a pinned defender, one whose
//!   recapture would face the kings, one that cannot leave a check);
//! - or a horse or cannon attacks a chariot, whatever protects it (WXF 20.6; Asian
//!   Section 3 rule 6; CXQ: "a car is never considered protected when it is threatened
//!   by an opponent's cannon or knight"). The books make that exception for no other
//!   pair: an advisor, elephant or pawn attacking a protected horse, cannon or chariot
//!   chases nothing (a real root makes a perpetual chase a draw, 20.6), though engines
//!   such as Fairy-Stockfish count any attack on a more valuable piece;
//! - a pawn that has not crossed the river is never a target (20.3);
//! - a piece that holds back an attack on its own king (a pinned piece, a horse's leg,
//!   one of two cannon screens) chases nothing but the piece that attacks through it:
//!   the book calls it immobile (Section 14, Diagrams 39-41; Section 22), also when it
//!   slides along the line it is pinned on (Diagram 65). Taking that attacker frees it,
//!   and 36.1 (Diagram 105) has a chariot that is a horse's leg chase that horse. The
//!   other exception is a piece that steps into such a place by the move being judged
//!   while attacking: a resolve-check-and-counter-chase (19.12), as in Diagram 37 and
//!   when a chariot blocks a horse's check beside the horse;
//! - a piece threatening one of its own kind is no chase when the target can capture it
//!   back; it is when the target is pinned or, for horses, blocked (20.7).
//!
//! "Created by the move" is judged per attacker and target: the attacker could not
//! capture the target with profit before the move (for a side in check, could not
//! capture it at all, were it not in check) and can after it. So a chase can be
//! discovered (a line opened, a horse leg or elephant eye freed, a cannon screen placed,
//! Sections 20-21), and an attack that merely persists is not renewed (36.5). A capture
//! that was there before and becomes profitable because the move cut the target's
//! cover is a new threat: in 36.1 (Diagram 105, rule case #152) each pawn move leaves
//! the cannon that protects a horse without a mount, or with two, and the book has the
//! chariot behind the pawn chase the horse. Not so when the cover cut and a threat
//! answered are one event, the defender that stops covering being the piece whose
//! threat against the mover the move ended: in Diagram 61 (rule cases #86 and #87)
//! Black's horse, shuttling in and out of the line of the Red cannon that chases its
//! chariot, cuts that same cannon's cover of another Red cannon standing beside the
//! Black chariot on every move, and the book rules Red alone the chaser. A move that
//! answers one threat and cuts the cover of another piece's target is a chase like any
//! other (36.1; 19.12 calls resolving a chase and counter-chasing a chase). A move that checks is a check,
//! whatever else it threatens (36.2: the heavier nature counts).
//!
//! The rulings weigh only checks and chases. The other natures of Article 19 are
//! allowed whenever repeated (20.2, 20.10) and are described by [`allowed_natures`] for
//! the judge's report, each as this arbiter reads it:
//! - mating threat ("kill", 19.2): were the mover to move again, it mates by a series of
//!   checks. The search is checks only and bounded to [`KILL_CHECKS`] checking moves
//!   (five plies): enough for the book's diagrams, cheap enough for every move of a
//!   cycle;
//! - threat to capture after check (20.10; Diagrams 97-99): were the mover to move
//!   again, it has a series of checks, as many as the kill search allows, after which,
//!   whatever the replies, it can capture with profit a piece it could not before (by
//!   the chase test above);
//! - exchange (19.4): the moved piece meets an enemy piece of its own value, one of the
//!   two able to capture the other, so that a capture trades like for like; trades of
//!   several pieces at once are not looked for;
//! - offer (19.6): the opponent can capture the moved piece with profit (by the chase
//!   test above, from the opponent's side);
//! - block (19.5): the moved piece stands where it takes squares from an enemy piece's
//!   moves (a line, a horse's leg, an elephant's eye) without threatening to capture
//!   that piece ("the piece doing the blocking cannot threaten to capture the
//!   opponent's piece"); whether the blocked piece can capture the blocker does not
//!   matter: a block with a protected piece is the usual one.
//!
//! One move may have several natures; the heaviest names it (36.2, 36.4): check, chase,
//! kill, threat to capture after check, exchange, offer, block, and idle (19.7) when
//! none applies.

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
}

/// The natures the rulings allow whenever repeated (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllowedNatures {
    /// A mating threat by checks (19.2).
    pub kill: bool,
    /// A threat to capture after a check (20.10).
    pub capture_after_check: bool,
    /// An exchange (19.4).
    pub exchange: bool,
    /// An offer (19.6).
    pub offer: bool,
    /// A block (19.5).
    pub block: bool,
}

/// The names of the natures of a move, heaviest first (36.2, 36.4); `["idle"]` when it
/// has none (19.7).
pub fn nature_names(nature: &Nature, allowed: &AllowedNatures) -> Vec<&'static str> {
    let names: Vec<&'static str> = [
        (nature.check, "check"),
        (!nature.chases.is_empty(), "chase"),
        (allowed.kill, "kill"),
        (allowed.capture_after_check, "capture-after-check"),
        (allowed.exchange, "exchange"),
        (allowed.offer, "offer"),
        (allowed.block, "block"),
    ]
    .into_iter()
    .filter_map(|(applies, name)| applies.then_some(name))
    .collect();
    if names.is_empty() { vec!["idle"] } else { names }
}

impl Nature {
    /// Whether the move chases the piece `target`.
    pub fn chases(&self, target: PieceId) -> bool {
        self.chases.iter().any(|t| t.target == target)
    }
}

/// Material value, for exchanges of like for like (19.4); only equality matters.
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

/// The pieces of the side not to move that could legally take back on the square of
/// `capture`, played by the side to move.
fn recapturers(position: &Position, ids: &Identities, capture: Move) -> Vec<PieceId> {
    let mut after = position.clone();
    after.make_move(capture);
    let mut replies = MoveList::new();
    generate_into(&after, Selection::Captures, &mut replies);
    // The recapturing pieces have not moved: they are where `ids` has them.
    replies.iter().filter(|reply| reply.to() == capture.to()).filter_map(|reply| ids.at(reply.from())).collect()
}

/// Whether `capture` by the side to move would win material: a horse or cannon takes a
/// chariot, or nothing can take back.
fn wins_material(position: &Position, capture: Move) -> bool {
    let kind = |sq: Square| position.piece_at(sq).expect("a piece on each end of a capture").kind;
    let chariot_by_horse_or_cannon =
        kind(capture.to()) == PieceKind::Rook && matches!(kind(capture.from()), PieceKind::Horse | PieceKind::Cannon);
    chariot_by_horse_or_cannon || !recapture_exists(position, capture)
}

/// Whether `capture`, by a piece that holds back an attack on its own king, takes the
/// very piece that attacks through it, so that it holds nothing back afterwards (a
/// chariot that is a horse's leg taking that horse).
fn frees_itself(position: &Position, capture: Move) -> bool {
    let mut without = position.clone();
    without.take(capture.to());
    !without.king_safety().blockers.has(capture.from())
}

/// The threats of the side to move of `position` that would win material (see the
/// module documentation); `moved` is the square of the piece that just moved, if any.
pub fn threats(position: &Position, ids: &Identities, moved: Option<Square>) -> Vec<Threat> {
    attacks(position, ids, moved).into_iter().filter_map(|(threat, profitable)| profitable.then_some(threat)).collect()
}

/// Every attack of the side to move of `position` that the books could call a threat
/// (the module documentation's exceptions applied: kings, uncrossed pawns, pieces that
/// hold back an attack on their king, captures that the target can return in kind),
/// each with whether the capture would win material (the target unprotected, or a
/// chariot attacked by a horse or cannon). WXF's chases are the profitable ones; CXQ
/// reads a chase of a protected piece as a chase too, only not a perpetual one.
pub fn attacks(position: &Position, ids: &Identities, moved: Option<Square>) -> Vec<(Threat, bool)> {
    let mut captures = MoveList::new();
    generate_into(position, Selection::Captures, &mut captures);
    let pinned = position.king_safety().blockers;
    let mut attacks = Vec::new();
    for &capture in captures.iter() {
        if pinned.has(capture.from()) && Some(capture.from()) != moved && !frees_itself(position, capture) {
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
        let threat = Threat {
            attacker: ids.at(capture.from()).expect("followed piece"),
            attacker_kind: attacker.kind,
            attacker_square: capture.from(),
            target: ids.at(capture.to()).expect("followed piece"),
            target_kind: target.kind,
            target_square: capture.to(),
        };
        // The mutation test's broken rule (feature mutant-protected-chase): any attack
        // chases, protected target or not.
        attacks.push((threat, cfg!(feature = "mutant-protected-chase") || wins_material(position, capture)));
    }
    attacks
}

/// The nature of the legal move `mv` in `before`, whose pieces are followed by `ids`.
pub fn classify(before: &Position, ids: &Identities, mv: Move) -> Nature {
    let mut after = before.clone();
    after.make_move(mv);
    if after.in_check() {
        return Nature { check: true, chases: Vec::new() };
    }
    let mut ids_after = ids.clone();
    ids_after.apply(mv);
    let safety = before.king_safety();
    let stepped_into_a_pin = !safety.blockers.has(mv.from());
    // Generated only for a move that threatens something (most threaten nothing).
    let captures_before = std::cell::OnceCell::new();
    let captures_before = || {
        captures_before.get_or_init(|| {
            let mut captures = MoveList::new();
            generate_into(before, Selection::Captures, &mut captures);
            captures
        })
    };
    // A side in check can capture only what resolves the check; its other attacks stand
    // all the same, and resolving the check does not renew them (Diagram 5: the pawn
    // that blocks a check and steps back is idle).
    let in_check = safety.checkers.any();
    // A capture the mover had before, unprofitable then and profitable now because the
    // move cut the target's cover, is a new threat (36.1, Diagram 105: the pawn that
    // takes away a cannon's mount makes the chariot behind it chase the horse the
    // cannon protected), unless the cover cut and a threat answered are one event: a
    // defender of the target was attacking the mover, and the move ended both (Diagram
    // 61: the horse that blocks the cannon's attack on its chariot also blocks that
    // cannon's cover of the other cannon). A move answering some other threat cuts a
    // cover like any other move.
    let answered_attackers = std::cell::OnceCell::new();
    let answered_attackers = || {
        answered_attackers.get_or_init(|| {
            let pairs = |threats: Vec<Threat>| -> Vec<(PieceId, PieceId)> {
                threats.iter().map(|t| (t.attacker, t.target)).collect()
            };
            let remaining = pairs(threats(&after, &ids_after, None));
            pairs(threats(&before.with_other_side_to_move(), ids, None))
                .into_iter()
                .filter(|pair| !remaining.contains(pair))
                .map(|(attacker, _)| attacker)
                .collect::<Vec<PieceId>>()
        })
    };
    let cover_cut_by_an_answer = |before_capture: Move, threat: &Threat| {
        let answered = answered_attackers();
        if answered.is_empty() {
            return false;
        }
        let now = recapturers(
            &after.with_other_side_to_move(),
            &ids_after,
            Move::new(threat.attacker_square, threat.target_square),
        );
        recapturers(before, ids, before_capture)
            .iter()
            .any(|defender| !now.contains(defender) && answered.contains(defender))
    };
    let could_capture_before = |threat: &Threat| {
        let from = if threat.attacker_square == mv.to() { mv.from() } else { threat.attacker_square };
        let to = threat.target_square;
        captures_before().iter().any(|&c| {
            c.from() == from && c.to() == to && (wins_material(before, c) || cover_cut_by_an_answer(c, threat))
        }) || (in_check
            && !safety.blockers.has(from)
            && before.piece_at(from).is_some_and(|piece| before.pseudo_targets(piece, from).has(to)))
    };
    let exempt = stepped_into_a_pin.then_some(mv.to());
    let chases: Vec<Threat> = threats(&after.with_other_side_to_move(), &ids_after, exempt)
        .into_iter()
        .filter(|threat| !could_capture_before(threat))
        .collect();
    Nature { check: false, chases }
}

/// The allowed natures of the legal move `mv` in `before`, whose pieces are followed by
/// `ids`.
pub fn allowed_natures(before: &Position, ids: &Identities, mv: Move) -> AllowedNatures {
    let mut after = before.clone();
    after.make_move(mv);
    let mut ids_after = ids.clone();
    ids_after.apply(mv);
    // "Were the mover to move again" has no meaning after a check: it would take the
    // king. A check is the heaviest nature anyway.
    let checks = after.in_check();
    let mut again = after.with_other_side_to_move();
    AllowedNatures {
        kill: !checks && forces_by_checks(&mut again, &ids_after, KILL_CHECKS, Goal::Mate),
        capture_after_check: !checks && {
            let now: Vec<PieceId> = threats(&again, &ids_after, None).iter().map(|t| t.target).collect();
            forces_by_checks(&mut again, &ids_after, KILL_CHECKS, Goal::CaptureBeyond(&now))
        },
        exchange: meets_its_equal(&after, mv.to()),
        offer: threats(&after, &ids_after, None).iter().any(|t| t.target_square == mv.to()),
        block: blocks(&after, mv.to()),
    }
}

/// What a series of checks must force.
#[derive(Clone, Copy)]
enum Goal<'a> {
    /// Checkmate.
    Mate,
    /// A profitable capture of a piece other than those listed, which the side could
    /// capture with profit before the checks.
    CaptureBeyond(&'a [PieceId]),
}

/// Whether the side to move has a series of at most `checks` checking moves that forces
/// `goal` whatever the replies: for a mate, a check with no reply; for a capture, a
/// reply after which the capture is there.
fn forces_by_checks(position: &mut Position, ids: &Identities, checks: u32, goal: Goal<'_>) -> bool {
    if checks == 0 {
        return false;
    }
    for &check in legal_moves(position).iter() {
        if !position.gives_check(check) {
            continue;
        }
        let mut ids_check = ids.clone();
        ids_check.apply(check);
        let undo = position.make_move(check);
        let replies = legal_moves(position);
        let forced = if replies.is_empty() {
            matches!(goal, Goal::Mate)
        } else {
            replies.iter().all(|&reply| {
                let mut ids_reply = ids_check.clone();
                ids_reply.apply(reply);
                let reply_undo = position.make_move(reply);
                let reached = match goal {
                    Goal::Mate => false,
                    Goal::CaptureBeyond(now) => {
                        threats(position, &ids_reply, None).iter().any(|t| !now.contains(&t.target))
                    }
                };
                let forced = reached || forces_by_checks(position, &ids_reply, checks - 1, goal);
                position.unmake_move(reply_undo);
                forced
            })
        };
        position.unmake_move(undo);
        if forced {
            return true;
        }
    }
    false
}

/// Whether the piece on `square`, of the side not to move, and an enemy piece of the
/// same value stand so that one can capture the other.
fn meets_its_equal(position: &Position, square: Square) -> bool {
    let moved = position.piece_at(square).expect("the moved piece");
    let mover_view = position.with_other_side_to_move();
    let captures = |from: &Position| {
        let mut list = MoveList::new();
        generate_into(from, Selection::Captures, &mut list);
        list
    };
    let equal = |sq: Square| position.piece_at(sq).is_some_and(|p| value(p.kind) == value(moved.kind));
    captures(position).iter().any(|c| c.to() == square && equal(c.from()))
        || captures(&mover_view).iter().any(|c| c.from() == square && equal(c.to()))
}

/// Whether the piece on `square`, of the side not to move, takes empty squares from the
/// moves of an enemy piece that it does not threaten to capture.
fn blocks(position: &Position, square: Square) -> bool {
    let blocker = position.piece_at(square).expect("the moved piece");
    let threatened = position.pseudo_targets(blocker, square);
    let mut without = position.clone();
    without.take(square);
    Iterator::any(&mut position.pieces_of(position.side_to_move()), |sq| {
        let piece = position.piece_at(sq).expect("an enemy piece");
        let free_without = without.pseudo_targets(piece, sq) - without.occupied();
        let lost = free_without - position.occupied() - position.pseudo_targets(piece, sq);
        lost.any() && !threatened.has(sq)
    })
}
