//! A set of squares of one board, as the bits of a `u128`.
//!
//! Bit `i` stands for the square with index `i` (rank-major, see [`crate::geometry`]);
//! bits at or above `G::SQUARES` are always zero, which the operations below keep.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, BitXor, BitXorAssign, Not, Sub};

use crate::geometry::{Geometry, Square};

/// A set of squares of the board `G`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Bitboard<G> {
    bits: u128,
    board: PhantomData<G>,
}

impl<G: Geometry> Bitboard<G> {
    /// No square.
    pub const EMPTY: Self = Self::from_bits(0);
    /// Every square of the board.
    pub const FULL: Self = Self::from_bits(u128::MAX >> (128 - G::SQUARES as u32));

    /// The set whose bits are `bits`; bits beyond the board are dropped.
    pub const fn from_bits(bits: u128) -> Self {
        Self { bits: bits & (u128::MAX >> (128 - G::SQUARES as u32)), board: PhantomData }
    }

    /// The raw bits.
    pub const fn bits(self) -> u128 {
        self.bits
    }

    /// The set holding just `sq`.
    pub const fn from_square(sq: Square<G>) -> Self {
        Self::from_bits(1 << sq.index())
    }

    /// Whether `sq` is in the set.
    pub const fn has(self, sq: Square<G>) -> bool {
        self.bits >> sq.index() & 1 != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.bits == 0
    }

    /// Whether the set holds at least one square.
    pub const fn any(self) -> bool {
        self.bits != 0
    }

    /// Whether the set holds two squares or more.
    pub const fn more_than_one(self) -> bool {
        self.bits & self.bits.wrapping_sub(1) != 0
    }

    /// The number of squares in the set.
    pub const fn count(self) -> u32 {
        self.bits.count_ones()
    }

    /// The square of lowest index, if any.
    pub const fn first(self) -> Option<Square<G>> {
        if self.bits == 0 { None } else { Some(Square::from_index_unchecked(self.bits.trailing_zeros() as u8)) }
    }

    /// The only square of a set known to hold exactly one.
    pub fn single(self) -> Option<Square<G>> {
        if self.any() && !self.more_than_one() { self.first() } else { None }
    }

    /// Adds `sq`.
    pub fn insert(&mut self, sq: Square<G>) {
        self.bits |= 1 << sq.index();
    }

    /// Removes `sq`.
    pub fn remove(&mut self, sq: Square<G>) {
        self.bits &= !(1 << sq.index());
    }

    /// Adds `sq` if absent, removes it if present.
    pub fn toggle(&mut self, sq: Square<G>) {
        self.bits ^= 1 << sq.index();
    }
}

impl<G: Geometry> Iterator for Bitboard<G> {
    type Item = Square<G>;

    fn next(&mut self) -> Option<Square<G>> {
        let sq = self.first()?;
        self.bits &= self.bits - 1;
        Some(sq)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.count() as usize;
        (n, Some(n))
    }
}

impl<G: Geometry> ExactSizeIterator for Bitboard<G> {}

impl<G: Geometry> From<Square<G>> for Bitboard<G> {
    fn from(sq: Square<G>) -> Self {
        Self::from_square(sq)
    }
}

impl<G: Geometry> FromIterator<Square<G>> for Bitboard<G> {
    fn from_iter<I: IntoIterator<Item = Square<G>>>(iter: I) -> Self {
        let mut bb = Self::EMPTY;
        for sq in iter {
            bb.insert(sq);
        }
        bb
    }
}

macro_rules! set_operator {
    ($trait:ident, $method:ident, $assign_trait:ident, $assign_method:ident, $op:tt) => {
        impl<G: Geometry> $trait for Bitboard<G> {
            type Output = Self;
            fn $method(self, rhs: Self) -> Self {
                Self { bits: self.bits $op rhs.bits, board: PhantomData }
            }
        }
        impl<G: Geometry> $trait<Square<G>> for Bitboard<G> {
            type Output = Self;
            fn $method(self, rhs: Square<G>) -> Self {
                self $op Self::from_square(rhs)
            }
        }
        impl<G: Geometry> $assign_trait for Bitboard<G> {
            fn $assign_method(&mut self, rhs: Self) {
                self.bits = self.bits $op rhs.bits;
            }
        }
        impl<G: Geometry> $assign_trait<Square<G>> for Bitboard<G> {
            fn $assign_method(&mut self, rhs: Square<G>) {
                *self = *self $op rhs;
            }
        }
    };
}

set_operator!(BitAnd, bitand, BitAndAssign, bitand_assign, &);
set_operator!(BitOr, bitor, BitOrAssign, bitor_assign, |);
set_operator!(BitXor, bitxor, BitXorAssign, bitxor_assign, ^);

impl<G: Geometry> Sub for Bitboard<G> {
    type Output = Self;
    /// Set difference.
    fn sub(self, rhs: Self) -> Self {
        Self::from_bits(self.bits & !rhs.bits)
    }
}

impl<G: Geometry> Not for Bitboard<G> {
    type Output = Self;
    /// The complement within the board.
    fn not(self) -> Self {
        Self::from_bits(!self.bits)
    }
}

impl<G: Geometry> fmt::Debug for Bitboard<G> {
    /// Draws the board from the second player's side down, `x` for members.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        for rank in (0..G::RANKS).rev() {
            for file in 0..G::FILES {
                let sq = Square::<G>::new(file, rank).expect("on the board");
                f.write_str(if self.has(sq) { "x" } else { "." })?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::{XiangqiBoard, XiongqiBoard};

    type Bb = Bitboard<XiangqiBoard>;

    #[test]
    fn full_board_has_exactly_the_board_squares() {
        assert_eq!(Bb::FULL.count(), 90);
        assert_eq!(Bitboard::<XiongqiBoard>::FULL.count(), 64);
        assert_eq!((!Bb::EMPTY), Bb::FULL);
    }

    #[test]
    fn iteration_yields_members_in_index_order() {
        let squares: Vec<_> =
            [3u8, 70, 89, 0].iter().map(|&i| Square::<XiangqiBoard>::from_index(i).unwrap()).collect();
        let bb: Bb = squares.iter().copied().collect();
        let back: Vec<usize> = bb.map(|s| s.index()).collect();
        assert_eq!(back, vec![0, 3, 70, 89]);
        assert!(bb.more_than_one());
        assert_eq!(Bb::from_square(squares[1]).single(), Some(squares[1]));
    }
}
