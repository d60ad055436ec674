//! A Xiangqi position: the pieces, the side to move, the move counters and an
//! incrementally updated Zobrist hash; make and unmake moves; checks and pins.

use std::fmt;

use super::attacks::{
    advisor_attacks, between, cannon_attacks, elephant_attacks, horse_attackers_from, horse_attacks, horse_leg_towards,
    king_attacks, lines_through, pawn_attackers_from, pawn_attacks, rook_attacks,
};
use super::zobrist::{black_to_move_key, piece_key};
use super::{Bitboard, Move, Occupancy, Piece, PieceKind, Square};
use crate::color::{ByColor, Color};

/// A legal Xiangqi position. Built only from a validated FEN
/// ([`crate::xiangqi::fen`]) or by playing legal moves from one, so that both kings
/// are on the board, no king stands outside its palace and the side not to move is
/// not in check.
#[derive(Clone, PartialEq, Eq)]
pub struct Position {
    board: [Option<Piece>; 90],
    pieces: [Bitboard; Piece::COUNT],
    by_color: ByColor<Bitboard>,
    occupancy: Occupancy,
    kings: ByColor<Square>,
    side_to_move: Color,
    hash: u64,
    halfmove_clock: u32,
    fullmove_number: u32,
}

/// What [`Position::make_move`] returns and [`Position::unmake_move`] needs to take
/// the move back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Undo {
    mv: Move,
    captured: Option<Piece>,
    hash: u64,
    halfmove_clock: u32,
}

impl Undo {
    /// The move that was made.
    pub fn mv(&self) -> Move {
        self.mv
    }

    /// The piece it captured, if any.
    pub fn captured(&self) -> Option<Piece> {
        self.captured
    }
}

/// The article a move that lets the kings face each other breaks, as messages cite it
/// (the rules module cites another rule set's).
pub const KINGS_FACE_ARTICLE: &str = "WXF 2.9";
/// The article a move that leaves the mover's king attacked breaks.
pub const KING_IN_CHECK_ARTICLE: &str = "WXF 2.10";

/// Why a move cannot be played in a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IllegalMove {
    /// No piece stands on the origin.
    #[error("there is no piece on {0}")]
    EmptyOrigin(Square),
    /// The piece on the origin belongs to the side not to move.
    #[error("the {kind} on {square} belongs to the side not to move")]
    NotYourPiece {
        /// The piece's kind.
        kind: &'static str,
        /// The origin.
        square: Square,
    },
    /// The piece does not move that way (WXF Article 2).
    #[error("a {kind} on {from} cannot move to {to}")]
    Unreachable {
        /// The piece's kind.
        kind: &'static str,
        /// The origin.
        from: Square,
        /// The destination.
        to: Square,
    },
    /// After the move the kings would face each other on an open file (WXF 2.9).
    #[error("the kings would face each other on an open file ({KINGS_FACE_ARTICLE})")]
    KingsFace,
    /// After the move the mover's king would be attacked (WXF 2.10).
    #[error("it leaves the king in check ({KING_IN_CHECK_ARTICLE})")]
    LeavesKingInCheck,
}

/// What the side to move must mind about its king before moving: who checks it, which
/// pieces hold back an attack on it, and where a piece would give an enemy cannon its
/// screen. Computed once per node: when the side to move is not in check, a move of a
/// piece that is no blocker is legal unless it lands on one of `cannon_screens`.
#[derive(Clone, Copy, Debug)]
pub struct KingSafety {
    /// Enemy pieces attacking the king now.
    pub checkers: Bitboard,
    /// Pieces (of either side) whose leaving their square may expose the king: the one
    /// piece between the king and an enemy chariot or king, either of two pieces
    /// between the king and an enemy cannon, the leg of a horse aimed at the king.
    pub blockers: Bitboard,
    /// Empty squares between the king and an enemy cannon with nothing else between:
    /// a piece moved there becomes the cannon's screen.
    pub cannon_screens: Bitboard,
}

impl Position {
    /// An empty board (no pieces), used only while building a position from a setup.
    pub(crate) fn empty(side_to_move: Color, halfmove_clock: u32, fullmove_number: u32) -> Self {
        let placeholder = Square::from_index_unchecked(0);
        Position {
            board: [None; 90],
            pieces: [Bitboard::EMPTY; Piece::COUNT],
            by_color: ByColor::default(),
            occupancy: Occupancy::default(),
            kings: ByColor { red: placeholder, black: placeholder },
            side_to_move,
            hash: if side_to_move == Color::Black { black_to_move_key() } else { 0 },
            halfmove_clock,
            fullmove_number,
        }
    }

    /// The standard start position.
    pub fn startpos() -> Self {
        // Parsed once: the coordinator's replay asks for it twice per reported game.
        static START: std::sync::LazyLock<Position> =
            std::sync::LazyLock::new(|| super::fen::parse(super::fen::START_FEN).expect("the start position is valid"));
        START.clone()
    }

    /// The position of a FEN, refusing positions that cannot arise in a game (see
    /// [`super::fen::parse`]).
    pub fn from_fen(fen: &str) -> Result<Self, super::fen::FenError> {
        super::fen::parse(fen)
    }

    /// Puts `piece` on the empty square `sq`.
    pub(crate) fn put(&mut self, piece: Piece, sq: Square) {
        debug_assert!(self.board[sq.index()].is_none());
        self.board[sq.index()] = Some(piece);
        self.pieces[piece.index()].insert(sq);
        self.by_color[piece.color].insert(sq);
        self.occupancy.toggle(sq);
        self.hash ^= piece_key(piece, sq);
        if piece.kind == PieceKind::King {
            self.kings[piece.color] = sq;
        }
    }

    /// Lifts the piece off `sq` (which must hold one), leaving the side to move as is.
    pub(crate) fn take(&mut self, sq: Square) -> Piece {
        let piece = self.board[sq.index()].take().expect("a piece to take");
        self.pieces[piece.index()].remove(sq);
        self.by_color[piece.color].remove(sq);
        self.occupancy.toggle(sq);
        self.hash ^= piece_key(piece, sq);
        piece
    }

    /// The side to move.
    pub fn side_to_move(&self) -> Color {
        self.side_to_move
    }

    /// The piece on `sq`, if any.
    #[inline]
    pub fn piece_at(&self, sq: Square) -> Option<Piece> {
        self.board[sq.index()]
    }

    /// The squares of `color`'s pieces of kind `kind`.
    #[inline]
    pub fn pieces(&self, color: Color, kind: PieceKind) -> Bitboard {
        self.pieces[Piece::new(color, kind).index()]
    }

    /// The squares of all of `color`'s pieces.
    #[inline]
    pub fn pieces_of(&self, color: Color) -> Bitboard {
        self.by_color[color]
    }

    /// The occupied squares.
    #[inline]
    pub fn occupied(&self) -> Bitboard {
        self.occupancy.squares()
    }

    /// The occupancy in the form the line attacks read.
    #[inline]
    pub fn occupancy(&self) -> &Occupancy {
        &self.occupancy
    }

    /// Where `color`'s king stands.
    #[inline]
    pub fn king(&self, color: Color) -> Square {
        self.kings[color]
    }

    /// How many pieces of kind `kind` `color` has.
    pub fn count(&self, color: Color, kind: PieceKind) -> u32 {
        self.pieces(color, kind).count()
    }

    /// The Zobrist hash of the pieces and the side to move.
    #[inline]
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The hash computed from scratch; equal to [`Position::hash`] at all times.
    pub fn hash_from_scratch(&self) -> u64 {
        let mut hash = if self.side_to_move == Color::Black { black_to_move_key() } else { 0 };
        for sq in Square::all() {
            if let Some(piece) = self.piece_at(sq) {
                hash ^= piece_key(piece, sq);
            }
        }
        hash
    }

    /// Plies since the last capture (FEN's halfmove clock).
    pub fn halfmove_clock(&self) -> u32 {
        self.halfmove_clock
    }

    /// The same position with its halfmove clock at `clock`.
    pub(crate) fn with_halfmove_clock(mut self, clock: u32) -> Position {
        self.halfmove_clock = clock;
        self
    }

    /// The move number, starting at 1 and incremented after Black's move.
    pub fn fullmove_number(&self) -> u32 {
        self.fullmove_number
    }

    /// The squares a piece on `sq` attacks: where it could capture, whoever stands
    /// there (for a cannon, over a screen; for a king, not the facing rule).
    pub fn attacks_from(&self, piece: Piece, sq: Square) -> Bitboard {
        self.attacks_with(piece, sq, &self.occupancy)
    }

    fn attacks_with(&self, piece: Piece, sq: Square, occ: &Occupancy) -> Bitboard {
        match piece.kind {
            PieceKind::King => king_attacks(sq),
            PieceKind::Advisor => advisor_attacks(sq),
            PieceKind::Elephant => elephant_attacks(sq, occ.squares()),
            PieceKind::Horse => horse_attacks(sq, occ.squares()),
            PieceKind::Rook => rook_attacks(sq, occ),
            PieceKind::Cannon => cannon_attacks(sq, occ) & occ.squares(),
            PieceKind::Pawn => pawn_attacks(piece.color, sq),
        }
    }

    /// The squares the piece on `sq` can move to by its movement rules, before asking
    /// whether its king stays safe: empty squares it reaches and enemy pieces it attacks.
    pub fn pseudo_targets(&self, piece: Piece, sq: Square) -> Bitboard {
        let own = self.by_color[piece.color];
        let enemy = self.by_color[!piece.color];
        match piece.kind {
            PieceKind::Cannon => {
                (rook_attacks(sq, &self.occupancy) - self.occupied()) | (cannon_attacks(sq, &self.occupancy) & enemy)
            }
            _ => self.attacks_from(piece, sq) - own,
        }
    }

    /// `by`'s pieces attacking `sq` (by the capture rules of each piece; a king
    /// attacks the points next to it in its palace, and the enemy king when they face).
    pub fn attackers_to(&self, sq: Square, by: Color) -> Bitboard {
        let occ = &self.occupancy;
        let pieces = |kind| self.pieces(by, kind);
        let mut along_lines = pieces(PieceKind::Rook);
        if self.piece_at(sq) == Some(Piece::new(!by, PieceKind::King)) {
            along_lines |= pieces(PieceKind::King);
        }
        (rook_attacks(sq, occ) & along_lines)
            | (cannon_attacks(sq, occ) & pieces(PieceKind::Cannon))
            | (horse_attackers_from(sq, occ.squares()) & pieces(PieceKind::Horse))
            | (pawn_attackers_from(by, sq) & pieces(PieceKind::Pawn))
            | (king_attacks(sq) & pieces(PieceKind::King))
            | (advisor_attacks(sq) & pieces(PieceKind::Advisor))
            | (elephant_attacks(sq, occ.squares()) & pieces(PieceKind::Elephant))
    }

    /// The pieces `pieces(kind)` of `by` attacking a king on `ksq` under occupancy
    /// `occ`. Advisors and elephants never reach the enemy palace, and the enemy king
    /// attacks only by facing along the open file, as a chariot would.
    #[inline]
    fn king_attackers(
        &self,
        ksq: Square,
        by: Color,
        occ: &Occupancy,
        pieces: impl Fn(PieceKind) -> Bitboard,
    ) -> Bitboard {
        (rook_attacks(ksq, occ) & (pieces(PieceKind::Rook) | pieces(PieceKind::King)))
            | (cannon_attacks(ksq, occ) & pieces(PieceKind::Cannon))
            | (horse_attackers_from(ksq, occ.squares()) & pieces(PieceKind::Horse))
            | (pawn_attackers_from(by, ksq) & pieces(PieceKind::Pawn))
    }

    /// Enemy pieces checking the side to move's king, including the enemy king when
    /// the two face each other (which no legal position has).
    pub fn checkers(&self) -> Bitboard {
        let us = self.side_to_move;
        self.king_attackers(self.king(us), !us, &self.occupancy, |kind| self.pieces(!us, kind))
    }

    /// Whether the side to move is in check.
    pub fn in_check(&self) -> bool {
        self.checkers().any()
    }

    /// Whether `color`'s king is attacked (or faces the other king).
    pub fn is_king_attacked(&self, color: Color) -> bool {
        self.king_attackers(self.king(color), !color, &self.occupancy, |kind| self.pieces(!color, kind)).any()
    }

    /// Whether the legal move `mv` checks the opponent's king.
    pub fn gives_check(&self, mv: Move) -> bool {
        let us = self.side_to_move;
        let Some(moving) = self.piece_at(mv.from()) else {
            return false;
        };
        let occ = self.occupancy.after_move(mv.from(), mv.to());
        let ksq = self.king(!us);
        self.king_attackers(ksq, us, &occ, |kind| {
            let own = self.pieces(us, kind);
            if kind == moving.kind { own ^ mv.from() ^ mv.to() } else { own }
        })
        .any()
    }

    /// The king-safety facts of the side to move, see [`KingSafety`].
    pub fn king_safety(&self) -> KingSafety {
        let us = self.side_to_move;
        let them = !us;
        let ksq = self.king(us);
        let occupied = self.occupied();
        let mut safety =
            KingSafety { checkers: Bitboard::EMPTY, blockers: Bitboard::EMPTY, cannon_screens: Bitboard::EMPTY };
        let line = lines_through(ksq);
        let straight = line & (self.pieces(them, PieceKind::Rook) | self.pieces(them, PieceKind::King));
        for sniper in straight {
            let inside = between(ksq, sniper) & occupied;
            match inside.count() {
                0 => safety.checkers.insert(sniper),
                1 => safety.blockers |= inside,
                _ => {}
            }
        }
        for cannon in line & self.pieces(them, PieceKind::Cannon) {
            let path = between(ksq, cannon);
            let inside = path & occupied;
            match inside.count() {
                0 => safety.cannon_screens |= path,
                1 => safety.checkers.insert(cannon),
                2 => safety.blockers |= inside,
                _ => {}
            }
        }
        for horse in horse_attackers_from(ksq, Bitboard::EMPTY) & self.pieces(them, PieceKind::Horse) {
            let leg = horse_leg_towards(ksq, horse);
            if occupied.has(leg) {
                safety.blockers.insert(leg);
            } else {
                safety.checkers.insert(horse);
            }
        }
        safety.checkers |= pawn_attackers_from(them, ksq) & self.pieces(them, PieceKind::Pawn);
        safety
    }

    /// Whether the pseudo-legal move from `from` to `to` leaves the mover's king safe,
    /// by computing the attacks on it after the move.
    #[inline]
    pub fn is_safe_after(&self, from: Square, to: Square) -> bool {
        let us = self.side_to_move;
        let them = !us;
        let ksq = if from == self.king(us) { to } else { self.king(us) };
        let occ = self.occupancy.after_move(from, to);
        self.king_attackers(ksq, them, &occ, |kind| self.pieces(them, kind) - Bitboard::from_square(to)).is_empty()
    }

    /// Whether `mv` is legal here, and if not, why.
    pub fn check_move(&self, mv: Move) -> Result<(), IllegalMove> {
        let (from, to) = (mv.from(), mv.to());
        let piece = self.piece_at(from).ok_or(IllegalMove::EmptyOrigin(from))?;
        if piece.color != self.side_to_move {
            return Err(IllegalMove::NotYourPiece { kind: piece.kind.name(), square: from });
        }
        if !self.pseudo_targets(piece, from).has(to) {
            return Err(IllegalMove::Unreachable { kind: piece.kind.name(), from, to });
        }
        if self.is_safe_after(from, to) {
            return Ok(());
        }
        let us = self.side_to_move;
        let (own_king, their_king) =
            if piece.kind == PieceKind::King { (to, self.king(!us)) } else { (self.king(us), self.king(!us)) };
        let occ = self.occupancy.after_move(from, to);
        if (rook_attacks(own_king, &occ) & Bitboard::from_square(their_king)).any() {
            Err(IllegalMove::KingsFace)
        } else {
            Err(IllegalMove::LeavesKingInCheck)
        }
    }

    /// Plays `mv`, which must be legal in this position (from the move generator or
    /// checked by [`Position::check_move`]); returns what undoes it.
    pub fn make_move(&mut self, mv: Move) -> Undo {
        let undo_hash = self.hash;
        let undo_clock = self.halfmove_clock;
        let captured = self.board[mv.to().index()].map(|_| self.take(mv.to()));
        let piece = self.take(mv.from());
        self.put(piece, mv.to());
        self.halfmove_clock = if captured.is_some() { 0 } else { self.halfmove_clock + 1 };
        if self.side_to_move == Color::Black {
            self.fullmove_number += 1;
        }
        self.side_to_move = !self.side_to_move;
        self.hash ^= black_to_move_key();
        Undo { mv, captured, hash: undo_hash, halfmove_clock: undo_clock }
    }

    /// Takes back the move that returned `undo`, which must be the last one made.
    pub fn unmake_move(&mut self, undo: Undo) {
        self.side_to_move = !self.side_to_move;
        if self.side_to_move == Color::Black {
            self.fullmove_number -= 1;
        }
        let piece = self.take(undo.mv.to());
        self.put(piece, undo.mv.from());
        if let Some(captured) = undo.captured {
            self.put(captured, undo.mv.to());
        }
        self.hash = undo.hash;
        self.halfmove_clock = undo.halfmove_clock;
    }

    /// Checks `mv` and plays it.
    pub fn play(&mut self, mv: Move) -> Result<Undo, IllegalMove> {
        self.check_move(mv)?;
        Ok(self.make_move(mv))
    }

    /// Passes the move to the other side (a null move, for the search's null-move
    /// pruning). The side to move must not be in check; undo with
    /// [`Position::unmake_null_move`].
    pub fn make_null_move(&mut self) {
        debug_assert!(!self.in_check());
        self.side_to_move = !self.side_to_move;
        self.hash ^= black_to_move_key();
    }

    /// Takes back [`Position::make_null_move`].
    pub fn unmake_null_move(&mut self) {
        self.side_to_move = !self.side_to_move;
        self.hash ^= black_to_move_key();
    }

    /// The same pieces with the other side to move. The arbiter asks with it what the
    /// side that just moved threatens; the result may have the side not to move in
    /// check, so it is for such questions only.
    pub(crate) fn with_other_side_to_move(&self) -> Position {
        let mut flipped = self.clone();
        flipped.side_to_move = !flipped.side_to_move;
        flipped.hash ^= black_to_move_key();
        flipped
    }

    /// The position with colours swapped and the board turned half a turn: the same
    /// game seen from the other side. Move counters are kept.
    pub fn color_flipped(&self) -> Position {
        let mut flipped = Position::empty(!self.side_to_move, self.halfmove_clock, self.fullmove_number);
        for sq in Square::all() {
            if let Some(piece) = self.piece_at(sq) {
                flipped.put(Piece::new(!piece.color, piece.kind), sq.rotated());
            }
        }
        flipped
    }

    /// The position mirrored left-right.
    pub fn mirrored(&self) -> Position {
        let mut mirrored = Position::empty(self.side_to_move, self.halfmove_clock, self.fullmove_number);
        for sq in Square::all() {
            if let Some(piece) = self.piece_at(sq) {
                mirrored.put(piece, sq.mirrored());
            }
        }
        mirrored
    }
}

impl fmt::Debug for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Position({})", super::fen::to_fen(self))
    }
}

impl fmt::Display for Position {
    /// The FEN.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&super::fen::to_fen(self))
    }
}
