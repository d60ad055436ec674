//! Board geometry: the shape of a board and the squares on it.
//!
//! Xiangqi (9 files x 10 ranks) and Xiongqi (8 x 8) share everything that depends only
//! on the board's shape: squares, bitboards, line-attack tables and coordinate text.
//! Each board is a zero-sized marker type implementing [`Geometry`]; `Square<G>` and
//! `Bitboard<G>` carry it so that a Xiangqi square can never index a Xiongqi table.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

/// The shape of a board. Squares are numbered rank by rank from the first player's
/// back rank: index = rank * FILES + file.
pub trait Geometry: Copy + Eq + Ord + Hash + Default + fmt::Debug + Send + Sync + 'static {
    /// Number of files (columns), lettered from `a`.
    const FILES: u8;
    /// Number of ranks (rows).
    const RANKS: u8;
    /// The number printed for the first player's back rank in coordinate text
    /// (0 for Xiangqi, as Pikafish writes it; 1 for Xiongqi).
    const FIRST_RANK_LABEL: u8;
    /// Number of squares.
    const SQUARES: u8 = Self::FILES * Self::RANKS;
}

/// The Xiangqi board: 9 files, 10 ranks, ranks written 0..9.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct XiangqiBoard;

impl Geometry for XiangqiBoard {
    const FILES: u8 = 9;
    const RANKS: u8 = 10;
    const FIRST_RANK_LABEL: u8 = 0;
}

/// The Xiongqi board: 8 files, 8 rows, rows written 1..8.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct XiongqiBoard;

impl Geometry for XiongqiBoard {
    const FILES: u8 = 8;
    const RANKS: u8 = 8;
    const FIRST_RANK_LABEL: u8 = 1;
}

/// A point of the board `G`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Square<G> {
    index: u8,
    board: PhantomData<G>,
}

impl<G: Geometry> Square<G> {
    /// The square at `file` (0-based from `a`) and `rank` (0-based from the first
    /// player's side), if it is on the board.
    pub const fn new(file: u8, rank: u8) -> Option<Self> {
        if file < G::FILES && rank < G::RANKS { Some(Self::from_index_unchecked(rank * G::FILES + file)) } else { None }
    }

    /// The square with this index, if it is on the board.
    pub const fn from_index(index: u8) -> Option<Self> {
        if index < G::SQUARES { Some(Self::from_index_unchecked(index)) } else { None }
    }

    /// Crate-internal constructor for indices already known to be on the board.
    pub(crate) const fn from_index_unchecked(index: u8) -> Self {
        debug_assert!(index < G::SQUARES);
        Self { index, board: PhantomData }
    }

    /// The index, `rank * FILES + file`.
    pub const fn index(self) -> usize {
        self.index as usize
    }

    /// The file, 0-based from `a`.
    pub const fn file(self) -> u8 {
        self.index % G::FILES
    }

    /// The rank, 0-based from the first player's back rank.
    pub const fn rank(self) -> u8 {
        self.index / G::FILES
    }

    /// The square `df` files and `dr` ranks away, if it is on the board.
    pub const fn offset(self, df: i8, dr: i8) -> Option<Self> {
        let file = self.file() as i8 + df;
        let rank = self.rank() as i8 + dr;
        if file < 0 || rank < 0 {
            return None;
        }
        Self::new(file as u8, rank as u8)
    }

    /// The same square seen from the other side: the board turned half a turn.
    pub const fn rotated(self) -> Self {
        Self::from_index_unchecked(G::SQUARES - 1 - self.index)
    }

    /// The square mirrored left-right (file a <-> last file).
    pub const fn mirrored(self) -> Self {
        Self::from_index_unchecked(self.rank() * G::FILES + (G::FILES - 1 - self.file()))
    }

    /// Every square of the board, by increasing index.
    pub fn all() -> impl Iterator<Item = Self> {
        (0..G::SQUARES).map(Self::from_index_unchecked)
    }

    /// Parses a square written as file letter and rank number, where the first rank
    /// is numbered `first_rank_label` (0 or 1 depending on the dialect).
    pub fn parse_with_label(text: &str, first_rank_label: u8) -> Option<Self> {
        let mut chars = text.chars();
        let file_char = chars.next()?.to_ascii_lowercase();
        if !file_char.is_ascii_lowercase() {
            return None;
        }
        let rest = chars.as_str();
        if rest.is_empty() || rest.len() > 2 || !rest.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let label: u8 = rest.parse().ok()?;
        let rank = label.checked_sub(first_rank_label)?;
        Self::new(file_char as u8 - b'a', rank)
    }

    /// Writes the square with the first rank numbered `first_rank_label`.
    pub fn display_with_label(self, first_rank_label: u8) -> impl fmt::Display {
        SquareText { file: self.file(), label: self.rank() + first_rank_label }
    }
}

struct SquareText {
    file: u8,
    label: u8,
}

impl fmt::Display for SquareText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", (b'a' + self.file) as char, self.label)
    }
}

impl<G: Geometry> fmt::Display for Square<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.display_with_label(G::FIRST_RANK_LABEL).fmt(f)
    }
}

impl<G: Geometry> fmt::Debug for Square<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Sq = Square<XiangqiBoard>;

    #[test]
    fn coordinates_round_trip_in_both_dialects() {
        for sq in Sq::all() {
            assert_eq!(Sq::parse_with_label(&sq.to_string(), 0), Some(sq));
            let one_based = sq.display_with_label(1).to_string();
            assert_eq!(Sq::parse_with_label(&one_based, 1), Some(sq));
        }
        assert_eq!(Sq::parse_with_label("i10", 1).map(|s| s.index()), Some(89));
        assert_eq!(Sq::parse_with_label("j0", 0), None);
        assert_eq!(Sq::parse_with_label("a10", 0), None);
        assert_eq!(Sq::parse_with_label("a0", 1), None);
    }

    #[test]
    fn rotation_and_mirror_are_involutions() {
        for sq in Sq::all() {
            assert_eq!(sq.rotated().rotated(), sq);
            assert_eq!(sq.mirrored().mirrored(), sq);
            assert_eq!(sq.rotated().file(), 8 - sq.file());
            assert_eq!(sq.rotated().rank(), 9 - sq.rank());
        }
    }

    #[test]
    fn xiongqi_squares_are_labelled_from_one() {
        let sq = Square::<XiongqiBoard>::new(3, 7).unwrap();
        assert_eq!(sq.to_string(), "d8");
    }
}
