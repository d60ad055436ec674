//! The engine library of the Xiangqi cluster: board geometry and bitboards, Xiangqi
//! positions with legal move generation, FEN and move notations, and perft.
//!
//! Layout: [`geometry`], [`bitboard`], [`color`], [`line_attacks`] and [`moves`] are
//! shared by every board shape; [`xiangqi`] holds the Xiangqi pieces and rules;
//! [`xiangqi::notation`] reads and writes moves.
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub mod adjudication;
pub mod bench;
pub mod bitboard;
pub mod book;
pub mod color;
mod fen_text;
pub mod geometry;
pub mod line_attacks;
pub mod moves;
mod splitmix;
pub mod time_control;
pub mod uci;
pub mod variant;
pub mod xiangqi;
pub mod xiongqi;
