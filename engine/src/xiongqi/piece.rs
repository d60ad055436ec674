//! Xiongqi pieces (rules 2.2, 2.4, 3.2).

use crate::color::Color;

/// The nine kinds of Xiongqi piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PieceKind {
    /// One step orthogonally, anywhere; the terminal piece until it becomes a dragon.
    General,
    /// One step diagonally, anywhere.
    Advisor,
    /// Any distance orthogonally.
    Chariot,
    /// Any distance diagonally.
    Bear,
    /// One step orthogonally then one diagonally outward, blocked at the leg.
    Horse,
    /// Moves as a chariot, captures over exactly one screen.
    Cannon,
    /// One step forward; sideways too after the river; promotes on the last row.
    Soldier,
    /// The transformed general: one step orthogonally, captures along its lines.
    Dragon,
    /// Chariot moves or an unblockable knight's leap; comes from promotion.
    Empress,
}

impl PieceKind {
    /// Every kind, in index order.
    pub const ALL: [PieceKind; 9] = [
        PieceKind::General,
        PieceKind::Advisor,
        PieceKind::Chariot,
        PieceKind::Bear,
        PieceKind::Horse,
        PieceKind::Cannon,
        PieceKind::Soldier,
        PieceKind::Dragon,
        PieceKind::Empress,
    ];

    /// What a soldier may promote to (rule 5), in the order moves are generated.
    pub const PROMOTIONS: [PieceKind; 6] = [
        PieceKind::Empress,
        PieceKind::Advisor,
        PieceKind::Cannon,
        PieceKind::Chariot,
        PieceKind::Bear,
        PieceKind::Horse,
    ];

    /// 0..9, in the order of [`PieceKind::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The letter of the rule book's table (2.4), upper case.
    pub const fn letter(self) -> char {
        match self {
            PieceKind::General => 'G',
            PieceKind::Advisor => 'A',
            PieceKind::Chariot => 'R',
            PieceKind::Bear => 'B',
            PieceKind::Horse => 'H',
            PieceKind::Cannon => 'C',
            PieceKind::Soldier => 'S',
            PieceKind::Dragon => 'D',
            PieceKind::Empress => 'E',
        }
    }

    /// Reads a letter in either case.
    pub fn from_letter(letter: char) -> Option<PieceKind> {
        PieceKind::ALL.into_iter().find(|k| k.letter() == letter.to_ascii_uppercase())
    }

    /// Whether this is a side's terminal piece (6.1).
    pub const fn is_terminal(self) -> bool {
        matches!(self, PieceKind::General | PieceKind::Dragon)
    }
}

/// A piece: a kind and a side (Red is South, Black is North).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Piece {
    /// Whose piece.
    pub color: Color,
    /// What piece.
    pub kind: PieceKind,
}

impl Piece {
    /// Number of distinct pieces.
    pub const COUNT: usize = 18;

    /// Builds a piece.
    pub const fn new(color: Color, kind: PieceKind) -> Self {
        Piece { color, kind }
    }

    /// 0..18.
    pub const fn index(self) -> usize {
        self.color as usize * 9 + self.kind as usize
    }

    /// The FEN letter: upper case for South, lower case for North.
    pub fn fen_char(self) -> char {
        match self.color {
            Color::Red => self.kind.letter(),
            Color::Black => self.kind.letter().to_ascii_lowercase(),
        }
    }

    /// Reads a FEN letter; the case gives the side.
    pub fn from_fen_char(c: char) -> Option<Piece> {
        let kind = PieceKind::from_letter(c)?;
        Some(Piece::new(if c.is_ascii_uppercase() { Color::Red } else { Color::Black }, kind))
    }
}
