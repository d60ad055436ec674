//! Perft: the number of leaf nodes of the legal move tree, the standard test and
//! benchmark of a move generator.

use super::movegen::{count_legal, legal_moves};
use super::{Move, Position};

/// The number of move sequences of length `depth` from `position`. The last ply is
/// counted without playing its moves (bulk counting).
pub fn perft(position: &mut Position, depth: u32) -> u64 {
    match depth {
        0 => 1,
        1 => count_legal(position),
        _ => {
            let mut nodes = 0;
            for &mv in legal_moves(position).iter() {
                let undo = position.make_move(mv);
                nodes += perft(position, depth - 1);
                position.unmake_move(undo);
            }
            nodes
        }
    }
}

/// Perft split by root move, in generation order; zero moves at depth 0.
pub fn divide(position: &mut Position, depth: u32) -> Vec<(Move, u64)> {
    if depth == 0 {
        return Vec::new();
    }
    legal_moves(position)
        .iter()
        .map(|&mv| {
            let undo = position.make_move(mv);
            let nodes = perft(position, depth - 1);
            position.unmake_move(undo);
            (mv, nodes)
        })
        .collect()
}
