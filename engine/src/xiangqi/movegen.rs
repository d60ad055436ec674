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
