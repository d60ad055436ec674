//! Xiongqi, the 8x8 variant (shared/rules/xiongqi-rules.txt): pieces, positions with
//! the face-to-face transformation and promotions, games that remember which move led
//! to each position (a repetitive move is illegal, 6.3), FEN, moves and perft.
//!
//! It stands on the same core as Xiangqi: [`crate::geometry::XiongqiBoard`] squares and
//! bitboards, and the shared line-attack tables for chariots, cannons and dragons.

pub mod book;
pub mod fen;
pub mod game;
pub mod movegen;
mod piece;
mod position;
pub mod search;

pub use game::{Game, Refereed};
pub use piece::{Piece, PieceKind};
pub use position::{Position, XiongqiMove};

use crate::geometry::XiongqiBoard;

/// A square of the Xiongqi board.
pub type Square = crate::geometry::Square<XiongqiBoard>;
/// A set of squares of the Xiongqi board.
pub type Bitboard = crate::bitboard::Bitboard<XiongqiBoard>;
/// The occupancy of a Xiongqi board in both bit orders.
pub type Occupancy = crate::line_attacks::Occupancy<XiongqiBoard>;
