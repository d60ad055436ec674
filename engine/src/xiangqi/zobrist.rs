//! Zobrist keys for hashing Xiangqi positions, generated at compile time.

use super::{Piece, Square};
use crate::splitmix::splitmix64;

struct Keys {
    pieces: [[u64; 90]; Piece::COUNT],
    black_to_move: u64,
}

static KEYS: Keys = {
    let mut pieces = [[0; 90]; Piece::COUNT];
    let mut state = 0x5851_F42D_4C95_7F2D;
    let mut p = 0;
    while p < Piece::COUNT {
        let mut sq = 0;
        while sq < 90 {
            let (next, key) = splitmix64(state);
            state = next;
            pieces[p][sq] = key;
            sq += 1;
        }
        p += 1;
    }
    let (_, black_to_move) = splitmix64(state);
    Keys { pieces, black_to_move }
};

/// The key of `piece` standing on `sq`.
#[inline]
pub fn piece_key(piece: Piece, sq: Square) -> u64 {
    KEYS.pieces[piece.index()][sq.index()]
}

/// The key added when Black is to move.
#[inline]
pub fn black_to_move_key() -> u64 {
    KEYS.black_to_move
}
