//! Pieces followed by identity through a sequence of moves, so that "the same piece
//! chased on every move" (WXF 19.10) can be asked of pieces that move.

use crate::xiangqi::{Move, Position, Square};

/// A piece's identity: the index of the square it stood on when following began.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PieceId(u8);

impl PieceId {
    /// The identity of the piece that stood on the square of `index` when following
    /// began.
    pub(crate) const fn new(index: u8) -> Self {
        PieceId(index)
    }
}

/// Which identity stands on each square.
#[derive(Clone, Debug)]
pub struct Identities {
    by_square: [Option<PieceId>; 90],
}

impl Identities {
    /// Starts following the pieces of `position`.
    pub fn new(position: &Position) -> Self {
        let mut by_square = [None; 90];
        for sq in position.occupied() {
            by_square[sq.index()] = Some(PieceId::new(sq.index() as u8));
        }
        Identities { by_square }
    }

    /// The identity of the piece on `sq`.
    pub fn at(&self, sq: Square) -> Option<PieceId> {
        self.by_square[sq.index()]
    }

    /// Follows the pieces through `mv` (a capture ends the captured piece's identity).
    pub fn apply(&mut self, mv: Move) {
        self.by_square[mv.to().index()] = self.by_square[mv.from().index()].take();
    }
}
