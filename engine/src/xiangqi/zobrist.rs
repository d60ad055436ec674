//! Zobrist keys for hashing Xiangqi positions, generated at compile time.

use super::{Piece, Square};
use crate::splitmix::zobrist_keys;

/// `[piece][square]` keys and the key of Black to move.
static KEYS: ([[u64; 90]; Piece::COUNT], u64) = zobrist_keys(0x5851_F42D_4C95_7F2D);

/// The key of `piece` standing on `sq`.
#[inline]
pub fn piece_key(piece: Piece, sq: Square) -> u64 {
    KEYS.0[piece.index()][sq.index()]
}

/// The key added when Black is to move.
#[inline]
pub fn black_to_move_key() -> u64 {
    KEYS.1
}
