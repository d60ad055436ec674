//! Legal move generation (WXF Article 2), with no allocation per node.
//!
//! Every generator yields legal moves only. Pseudo-legal targets are computed per piece
//! as a bitboard; when the side to move is not in check and the piece holds back no
//! attack on its own king ([`Position::king_safety`]), the whole target set is legal except the
//! points where the piece would become an enemy cannon's screen, so it is passed on
//! as one bitboard. Otherwise each target is tested by computing the attacks on the
//! king after the move. Counting then costs a popcount for most pieces, which is what
//! makes bulk-counted perft fast.

use std::ops::Deref;

use super::attacks::{
    between, horse_attackers_from, horse_leg_towards, lines_through, pawn_attackers_from, rook_attacks,
};
use super::{Bitboard, Move, Piece, PieceKind, Position, Square};

/// More than the legal moves of any Xiangqi position (the known maximum is far lower).
pub const MAX_MOVES: usize = 192;

/// A fixed-capacity list of moves, filled by the generators.
#[derive(Clone)]
pub struct MoveList {
    moves: [Move; MAX_MOVES],
    len: usize,
}

impl Default for MoveList {
    fn default() -> Self {
        let placeholder = Square::from_index_unchecked(0);
        MoveList { moves: [Move::new(placeholder, placeholder); MAX_MOVES], len: 0 }
    }
}

impl MoveList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a move.
    #[inline]
    pub fn push(&mut self, mv: Move) {
        self.moves[self.len] = mv;
        self.len += 1;
    }

    /// Empties the list.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl Deref for MoveList {
    type Target = [Move];
    fn deref(&self) -> &[Move] {
        &self.moves[..self.len]
    }
}

impl std::ops::DerefMut for MoveList {
    fn deref_mut(&mut self) -> &mut [Move] {
        &mut self.moves[..self.len]
    }
}

impl std::fmt::Debug for MoveList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Receives legal moves grouped by origin.
trait TargetSink {
    fn add(&mut self, from: Square, targets: Bitboard);

    /// Whether the sink has what it wants: generation stops there.
    #[inline]
    fn satisfied(&self) -> bool {
        false
    }
}

impl TargetSink for MoveList {
    #[inline]
    fn add(&mut self, from: Square, targets: Bitboard) {
        for to in targets {
            self.push(Move::new(from, to));
        }
    }
}

struct Counter(u64);

impl TargetSink for Counter {
    #[inline]
    fn add(&mut self, _from: Square, targets: Bitboard) {
        self.0 += u64::from(targets.count());
    }
}

/// Whether any move was generated: the referee asks it after every move, and most
/// positions answer with their first piece.
struct AnyMove(bool);

impl TargetSink for AnyMove {
    #[inline]
    fn add(&mut self, _from: Square, targets: Bitboard) {
        self.0 |= targets.any();
    }

    #[inline]
    fn satisfied(&self) -> bool {
        self.0
    }
}

/// Which moves a generator yields.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Selection {
    /// Moves onto an enemy piece.
    Captures,
    /// Moves onto an empty point.
    Quiets,
    /// Every legal move.
    All,
}

/// The non-king kinds, in the order moves are generated.
const NON_KING: [PieceKind; 6] =
    [PieceKind::Pawn, PieceKind::Advisor, PieceKind::Elephant, PieceKind::Horse, PieceKind::Cannon, PieceKind::Rook];

#[inline]
fn generate(position: &Position, selection: Selection, sink: &mut impl TargetSink) {
    let us = position.side_to_move();
    let mask = match selection {
        Selection::Captures => position.pieces_of(!us),
        Selection::Quiets => !position.occupied(),
        Selection::All => !position.pieces_of(us),
    };
    let safety = position.king_safety();
    let in_check = safety.checkers.any();
    for kind in NON_KING {
        let piece = Piece::new(us, kind);
        for from in position.pieces(us, kind) {
            let targets = position.pseudo_targets(piece, from) & mask;
            if !in_check && !safety.blockers.has(from) {
                sink.add(from, targets - safety.cannon_screens);
            } else {
                sink.add(from, safe_targets(position, from, targets));
            }
            if sink.satisfied() {
                return;
            }
        }
    }
    let king = position.king(us);
    let targets = position.pseudo_targets(Piece::new(us, PieceKind::King), king) & mask;
    sink.add(king, safe_targets(position, king, targets));
}

#[inline]
fn safe_targets(position: &Position, from: Square, targets: Bitboard) -> Bitboard {
    targets.filter(|&to| position.is_safe_after(from, to)).collect()
}

/// Appends the legal moves of `selection` to `list`.
pub fn generate_into(position: &Position, selection: Selection, list: &mut MoveList) {
    generate(position, selection, list);
}

/// Appends the legal quiet moves (onto an empty point) that check the opponent's king:
/// quiescence's quiet checks. Only the moves that can check are tested: a piece that
/// lands where its kind attacks the king, or between one of our cannons and the king
/// with nothing else between them, and every move of a piece whose leaving uncovers a
/// chariot, a cannon or a horse; each of those is then confirmed by
/// [`Position::gives_check`]. Generating every quiet move to test each costs about as
/// much as a quiescence node gains (docs/search-scaling.md, S3).
pub fn quiet_checks_into(position: &Position, list: &mut MoveList) {
    let us = position.side_to_move();
    let king = position.king(!us);
    let occupied = position.occupied();
    let occupancy = position.occupancy();
    let ours = |kind| position.pieces(us, kind);
    // Points on the king's lines with exactly one piece between them and the king.
    let cannon_points: Bitboard =
        lines_through(king).filter(|&point| (between(point, king) & occupied).count() == 1).collect();
    let mut screen_points = Bitboard::EMPTY;
    let mut uncovering = Bitboard::EMPTY;
    for sniper in lines_through(king) & (ours(PieceKind::Rook) | ours(PieceKind::Cannon)) {
        let path = between(king, sniper);
        let inside = path & occupied;
        match (position.piece_at(sniper).map(|p| p.kind), inside.count()) {
            (Some(PieceKind::Rook), 1) => uncovering |= inside,
            (Some(PieceKind::Cannon), 0) => screen_points |= path,
            (Some(PieceKind::Cannon), 2) => uncovering |= inside,
            _ => {}
        }
    }
    for horse in horse_attackers_from(king, Bitboard::EMPTY) & ours(PieceKind::Horse) {
        uncovering.insert(horse_leg_towards(king, horse));
    }
    let direct = |kind| match kind {
        PieceKind::Rook => rook_attacks(king, occupancy),
        PieceKind::Cannon => cannon_points,
        PieceKind::Horse => horse_attackers_from(king, occupied),
        PieceKind::Pawn => pawn_attackers_from(us, king),
        PieceKind::King | PieceKind::Advisor | PieceKind::Elephant => Bitboard::EMPTY,
    };
    for kind in NON_KING.into_iter().chain([PieceKind::King]) {
        let piece = Piece::new(us, kind);
        for from in ours(kind) {
            let quiet = position.pseudo_targets(piece, from) - occupied;
            let candidates = if uncovering.has(from) { quiet } else { quiet & (direct(kind) | screen_points) };
            for to in candidates {
                let mv = Move::new(from, to);
                if position.is_safe_after(from, to) && position.gives_check(mv) {
                    list.push(mv);
                }
            }
        }
    }
}

/// Every legal move.
pub fn legal_moves(position: &Position) -> MoveList {
    let mut list = MoveList::new();
    generate(position, Selection::All, &mut list);
    list
}

/// The number of legal moves, without listing them.
pub fn count_legal(position: &Position) -> u64 {
    let mut counter = Counter(0);
    generate(position, Selection::All, &mut counter);
    counter.0
}

/// Whether the side to move has a legal move (no: it is checkmated or stalemated,
/// and loses either way, WXF 2.11 and 3.1).
pub fn has_legal_move(position: &Position) -> bool {
    let mut any = AnyMove(false);
    generate(position, Selection::All, &mut any);
    any.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::splitmix::splitmix64;

    /// Every legal quiet move that gives check, found the slow way.
    fn checking_quiets(position: &Position) -> Vec<Move> {
        let mut all = MoveList::new();
        generate_into(position, Selection::Quiets, &mut all);
        let mut checks: Vec<Move> = all.iter().copied().filter(|&mv| position.gives_check(mv)).collect();
        checks.sort_by_key(|mv| (mv.from().index(), mv.to().index()));
        checks
    }

    fn quiet_checks(position: &Position) -> Vec<Move> {
        let mut list = MoveList::new();
        quiet_checks_into(position, &mut list);
        let mut checks = list.to_vec();
        checks.sort_by_key(|mv| (mv.from().index(), mv.to().index()));
        checks
    }

    #[test]
    fn quiet_checks_are_every_checking_quiet_move_of_random_games() {
        let (mut state, mut positions, mut checks, mut uncovered) = (7, 0, 0, 0);
        for _ in 0..400 {
            let mut position = Position::startpos();
            for _ in 0..160 {
                let expected = checking_quiets(&position);
                assert_eq!(quiet_checks(&position), expected, "{position}");
                positions += 1;
                checks += expected.len();
                // Checks the moving piece does not give from where it lands.
                uncovered += expected
                    .iter()
                    .filter(|&&mv| {
                        let mut after = position.clone();
                        after.make_move(mv);
                        !after.checkers().has(mv.to())
                    })
                    .count();
                let moves = legal_moves(&position);
                if moves.is_empty() {
                    break;
                }
                let draw;
                (state, draw) = splitmix64(state);
                position.make_move(moves[(draw % moves.len() as u64) as usize]);
            }
        }
        assert!(positions > 30_000 && checks > 10_000 && uncovered > 100, "{positions} {checks} {uncovered}");
    }

    #[test]
    fn uncovered_and_screened_checks_are_found() {
        // Each way a quiet move checks without landing on a point its kind attacks the
        // king from (WXF 2.8's cannon over one screen, 2.4's hobbled horse).
        for (fen, check) in [
            // A screen placed: the horse on c3 steps between the cannon on e2 and the king,
            // onto a point from which it attacks nothing near the king.
            ("4k4/9/9/9/9/9/2N6/4C4/9/3K5 w - - 0 1", "c3e4"),
            // One of two screens leaves: the pawn on e5 steps aside, the horse on e7 stays.
            ("4k4/9/4n4/9/4P4/9/9/4C4/9/3K5 w - - 0 1", "e5d5"),
            // The king is one of two screens and steps aside.
            ("4k4/9/9/9/4p4/9/9/9/4K4/4C4 w - - 0 1", "e1d1"),
            // A chariot's lone blocker leaves.
            ("4k4/9/9/9/4N4/9/9/4R4/9/3K5 w - - 0 1", "e5c6"),
            // A horse's leg leaves: the pawn on c8 hobbles the horse on c7.
            ("3k5/2P6/2N6/9/9/9/9/9/9/4K4 w - - 0 1", "c8b8"),
        ] {
            let position = Position::from_fen(fen).unwrap();
            let expected = checking_quiets(&position);
            let names: Vec<String> = expected.iter().map(|mv| mv.to_string()).collect();
            assert!(names.contains(&check.to_owned()), "{fen}: {names:?}");
            assert_eq!(quiet_checks(&position), expected, "{fen}");
        }
    }
}
