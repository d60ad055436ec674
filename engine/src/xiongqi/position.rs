//! A Xiongqi position: pieces, side to move, move counters and a Zobrist hash;
//! moves with optional promotion; make and unmake with the face-to-face
//! transformation (rule 4).

use std::fmt;

use super::{Occupancy, Piece, PieceKind, Square};
use crate::color::{ByColor, Color};
use crate::splitmix::zobrist_keys;

/// A Xiongqi move: origin, destination and, for a soldier on the last row, the piece it
/// becomes. Written `d7d8`, `d7d8e` (the promotion letter lower case for both sides).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct XiongqiMove {
    /// The square left.
    pub from: Square,
    /// The square reached.
    pub to: Square,
    /// The promotion chosen, if any.
    pub promotion: Option<PieceKind>,
}

impl fmt::Display for XiongqiMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.from, self.to)?;
        if let Some(kind) = self.promotion {
            write!(f, "{}", kind.letter().to_ascii_lowercase())?;
        }
        Ok(())
    }
}

impl fmt::Debug for XiongqiMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `[piece][square]` keys and the key of North to move.
static KEYS: ([[u64; 64]; Piece::COUNT], u64) = zobrist_keys(0x000D_D5EE_D50F_u64);

/// A Xiongqi position.
#[derive(Clone, PartialEq, Eq)]
pub struct Position {
    board: [Option<Piece>; 64],
    occupancy: Occupancy,
    side_to_move: Color,
    halfmove_clock: u32,
    fullmove_number: u32,
    hash: u64,
}

/// What undoes a move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Undo {
    mv: XiongqiMove,
    moved: Piece,
    captured: Option<Piece>,
    transformed: bool,
    halfmove_clock: u32,
}

impl Undo {
    /// The piece the move captured, if any.
    pub fn captured(&self) -> Option<Piece> {
        self.captured
    }
}

impl Position {
    /// An empty board.
    pub(crate) fn empty(side_to_move: Color, halfmove_clock: u32, fullmove_number: u32) -> Self {
        Position {
            board: [None; 64],
            occupancy: Occupancy::default(),
            side_to_move,
            halfmove_clock,
            fullmove_number,
            hash: if side_to_move == Color::Black { KEYS.1 } else { 0 },
        }
    }

    /// The start position (rule 2.3).
    pub fn startpos() -> Self {
        // Parsed once: the coordinator's replay asks for it twice per reported game.
        static START: std::sync::LazyLock<Position> =
            std::sync::LazyLock::new(|| super::fen::parse(super::fen::START_FEN).expect("the start position is valid"));
        START.clone()
    }

    pub(crate) fn put(&mut self, piece: Piece, sq: Square) {
        debug_assert!(self.board[sq.index()].is_none());
        self.board[sq.index()] = Some(piece);
        self.occupancy.toggle(sq);
        self.hash ^= KEYS.0[piece.index()][sq.index()];
    }

    fn take(&mut self, sq: Square) -> Piece {
        let piece = self.board[sq.index()].take().expect("a piece to take");
        self.occupancy.toggle(sq);
        self.hash ^= KEYS.0[piece.index()][sq.index()];
        piece
    }

    /// The piece on `sq`.
    pub fn piece_at(&self, sq: Square) -> Option<Piece> {
        self.board[sq.index()]
    }

    /// The side to move.
    pub fn side_to_move(&self) -> Color {
        self.side_to_move
    }

    /// Plies without a capture or a soldier move (rule 6.5).
    pub fn halfmove_clock(&self) -> u32 {
        self.halfmove_clock
    }

    /// The move number.
    pub fn fullmove_number(&self) -> u32 {
        self.fullmove_number
    }

    /// The Zobrist hash of the pieces and the side to move.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The occupancy.
    pub fn occupancy(&self) -> &Occupancy {
        &self.occupancy
    }

    /// Where `color`'s terminal piece (general or dragon) stands, if it is on the board.
    pub fn terminal(&self, color: Color) -> Option<Square> {
        Square::all().find(|&sq| self.piece_at(sq).is_some_and(|p| p.color == color && p.kind.is_terminal()))
    }

    /// The squares of `color`'s pieces.
    pub fn pieces_of(&self, color: Color) -> impl Iterator<Item = (Square, Piece)> + '_ {
        Square::all().filter_map(move |sq| self.piece_at(sq).filter(|p| p.color == color).map(|p| (sq, p)))
    }

    /// Whether the two generals face each other: same file, nothing between, South's
    /// below North's (rule 4).
    pub fn generals_face(&self) -> bool {
        let generals = ByColor::new_with(|color| {
            Square::all().find(|&sq| self.piece_at(sq) == Some(Piece::new(color, PieceKind::General)))
        });
        let (Some(south), Some(north)) = (generals.red, generals.black) else {
            return false;
        };
        south.file() == north.file()
            && south.rank() < north.rank()
            && (south.rank() + 1..north.rank())
                .all(|rank| self.piece_at(Square::new(south.file(), rank).expect("on the board")).is_none())
    }

    /// Plays `mv`, which must follow the movement rules; both generals turn into
    /// dragons if they now face each other.
    pub fn make_move(&mut self, mv: XiongqiMove) -> Undo {
        let halfmove_clock = self.halfmove_clock;
        let captured = self.board[mv.to.index()].map(|_| self.take(mv.to));
        let moved = self.take(mv.from);
        let placed = mv.promotion.map_or(moved, |kind| Piece::new(moved.color, kind));
        self.put(placed, mv.to);
        let transformed = self.generals_face();
        if transformed {
            for color in Color::ALL {
                let sq = Square::all()
                    .find(|&sq| self.piece_at(sq) == Some(Piece::new(color, PieceKind::General)))
                    .expect("a general");
                self.take(sq);
                self.put(Piece::new(color, PieceKind::Dragon), sq);
            }
        }
        self.halfmove_clock =
            if captured.is_some() || moved.kind == PieceKind::Soldier { 0 } else { self.halfmove_clock + 1 };
        if self.side_to_move == Color::Black {
            self.fullmove_number += 1;
        }
        self.side_to_move = !self.side_to_move;
        self.hash ^= KEYS.1;
        Undo { mv, moved, captured, transformed, halfmove_clock }
    }

    /// Takes back the move that returned `undo`.
    pub fn unmake_move(&mut self, undo: Undo) {
        self.side_to_move = !self.side_to_move;
        self.hash ^= KEYS.1;
        if self.side_to_move == Color::Black {
            self.fullmove_number -= 1;
        }
        if undo.transformed {
            for color in Color::ALL {
                let sq = Square::all()
                    .find(|&sq| self.piece_at(sq) == Some(Piece::new(color, PieceKind::Dragon)))
                    .expect("a dragon");
                self.take(sq);
                self.put(Piece::new(color, PieceKind::General), sq);
            }
        }
        self.take(undo.mv.to);
        self.put(undo.moved, undo.mv.from);
        if let Some(captured) = undo.captured {
            self.put(captured, undo.mv.to);
        }
        self.halfmove_clock = undo.halfmove_clock;
    }

    /// The hash computed from scratch.
    pub fn hash_from_scratch(&self) -> u64 {
        let mut hash = if self.side_to_move == Color::Black { KEYS.1 } else { 0 };
        for sq in Square::all() {
            if let Some(piece) = self.piece_at(sq) {
                hash ^= KEYS.0[piece.index()][sq.index()];
            }
        }
        hash
    }
}

impl fmt::Display for Position {
    /// The FEN.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&super::fen::to_fen(self))
    }
}

impl fmt::Debug for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Position({self})")
    }
}
