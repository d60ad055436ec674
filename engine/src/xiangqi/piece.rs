//! Xiangqi pieces.

use crate::color::Color;

/// The seven kinds of Xiangqi piece (WXF Article 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PieceKind {
    /// 帅/将: one step orthogonally inside the palace.
    King,
    /// 仕/士: one step diagonally inside the palace.
    Advisor,
    /// 相/象: two steps diagonally, blocked at the eye, never across the river.
    Elephant,
    /// 马: one step orthogonally then one diagonally outward, blocked at the leg.
    Horse,
    /// 车: any distance orthogonally.
    Rook,
    /// 炮: moves as a Chariot, captures over exactly one screen.
    Cannon,
    /// 兵/卒: one step forward; also sideways after crossing the river.
    Pawn,
}

impl PieceKind {
    /// Every kind, in index order.
    pub const ALL: [PieceKind; 7] = [
        PieceKind::King,
        PieceKind::Advisor,
        PieceKind::Elephant,
        PieceKind::Horse,
        PieceKind::Rook,
        PieceKind::Cannon,
        PieceKind::Pawn,
    ];

    /// 0..7, in the order of [`PieceKind::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The most pieces of this kind a side starts with, hence can ever have.
    pub const fn start_count(self) -> u32 {
        match self {
            PieceKind::King => 1,
            PieceKind::Pawn => 5,
            _ => 2,
        }
    }

    /// The FEN letter (upper case), as Pikafish and Fairy-Stockfish write it.
    pub const fn fen_letter(self) -> char {
        match self {
            PieceKind::King => 'K',
            PieceKind::Advisor => 'A',
            PieceKind::Elephant => 'B',
            PieceKind::Horse => 'N',
            PieceKind::Rook => 'R',
            PieceKind::Cannon => 'C',
            PieceKind::Pawn => 'P',
        }
    }

    /// The letter of the rule book's notation (WXF Article 7.4).
    pub const fn wxf_letter(self) -> char {
        match self {
            PieceKind::Elephant => 'E',
            PieceKind::Horse => 'H',
            other => other.fen_letter(),
        }
    }

    /// Reads a piece letter in either case: FEN's letters plus the aliases H (horse)
    /// and E (elephant).
    pub const fn from_letter(letter: char) -> Option<PieceKind> {
        Some(match letter.to_ascii_uppercase() {
            'K' => PieceKind::King,
            'A' => PieceKind::Advisor,
            'B' | 'E' => PieceKind::Elephant,
            'N' | 'H' => PieceKind::Horse,
            'R' => PieceKind::Rook,
            'C' => PieceKind::Cannon,
            'P' => PieceKind::Pawn,
            _ => return None,
        })
    }

    /// The English name, for messages.
    pub const fn name(self) -> &'static str {
        match self {
            PieceKind::King => "king",
            PieceKind::Advisor => "advisor",
            PieceKind::Elephant => "elephant",
            PieceKind::Horse => "horse",
            PieceKind::Rook => "chariot",
            PieceKind::Cannon => "cannon",
            PieceKind::Pawn => "pawn",
        }
    }
}

/// A piece: a kind and a side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Piece {
    /// Whose piece.
    pub color: Color,
    /// What piece.
    pub kind: PieceKind,
}

impl Piece {
    /// Number of distinct pieces, for tables indexed by [`Piece::index`].
    pub const COUNT: usize = 14;

    /// Builds a piece.
    pub const fn new(color: Color, kind: PieceKind) -> Self {
        Piece { color, kind }
    }

    /// 0..14: Red's kinds then Black's.
    pub const fn index(self) -> usize {
        self.color as usize * 7 + self.kind as usize
    }

    /// The FEN letter: upper case for Red, lower case for Black.
    pub const fn fen_char(self) -> char {
        let upper = self.kind.fen_letter();
        match self.color {
            Color::Red => upper,
            Color::Black => upper.to_ascii_lowercase(),
        }
    }

    /// Reads a FEN letter (with the H/E aliases); the case gives the side.
    pub const fn from_fen_char(c: char) -> Option<Piece> {
        let Some(kind) = PieceKind::from_letter(c) else {
            return None;
        };
        let color = if c.is_ascii_uppercase() { Color::Red } else { Color::Black };
        Some(Piece { color, kind })
    }
}
