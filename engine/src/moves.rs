//! The compact move type shared by both games.

use std::fmt;

use crate::geometry::{Geometry, Square};

/// A move from one square to another, two bytes. Whether it captures follows from the
/// position it is played in. (Xiongqi's promotions extend it in that variant's module.)
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Move<G> {
    from: Square<G>,
    to: Square<G>,
}

impl<G: Geometry> Move<G> {
    /// The move from `from` to `to`.
    pub const fn new(from: Square<G>, to: Square<G>) -> Self {
        Move { from, to }
    }

    /// The square the piece leaves.
    pub const fn from(self) -> Square<G> {
        self.from
    }

    /// The square the piece goes to.
    pub const fn to(self) -> Square<G> {
        self.to
    }

    /// Packs the move into 16 bits (origin index, then destination index times 128),
    /// for hash tables.
    pub const fn to_u16(self) -> u16 {
        self.from.index() as u16 | (self.to.index() as u16) << 7
    }

    /// Unpacks [`Move::to_u16`]; `None` when a square is off the board.
    pub const fn from_u16(bits: u16) -> Option<Self> {
        let (Some(from), Some(to)) =
            (Square::from_index((bits & 0x7F) as u8), Square::from_index((bits >> 7 & 0x7F) as u8))
        else {
            return None;
        };
        Some(Move { from, to })
    }
}

impl<G: Geometry> fmt::Display for Move<G> {
    /// Canonical coordinate text: `h2e2` for Xiangqi (ranks 0..9).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.from, self.to)
    }
}

impl<G: Geometry> fmt::Debug for Move<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
