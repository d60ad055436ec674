//! Xiangqi (Chinese chess, WXF rules): pieces, positions, legal moves, FEN, perft.

pub mod attacks;
pub mod book;
pub mod data;
pub mod eval;
pub mod fen;
pub mod movegen;
pub mod nnue;
pub mod notation;
pub mod openings;
pub mod perft;
pub mod pgn;
mod piece;
mod position;
pub mod rules;
pub mod search;
pub mod selfplay;
mod zobrist;

use crate::geometry::XiangqiBoard;

pub use piece::{Piece, PieceKind};
pub use position::{IllegalMove, KingSafety, Position, Undo};

/// A point of the Xiangqi board.
pub type Square = crate::geometry::Square<XiangqiBoard>;
/// A set of points of the Xiangqi board.
pub type Bitboard = crate::bitboard::Bitboard<XiangqiBoard>;
/// The occupancy of a Xiangqi board in both bit orders.
pub type Occupancy = crate::line_attacks::Occupancy<XiangqiBoard>;
/// A Xiangqi move.
pub type Move = crate::moves::Move<XiangqiBoard>;
