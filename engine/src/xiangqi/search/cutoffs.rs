//! The table's entries as a node's search reads and writes them: a cut-off where an
//! entry decides the node, the bound a score makes, mate scores made relative to the
//! root on the way in and to the node on the way out.

use crate::xiangqi::search::MATE_BOUND;
use crate::xiangqi::search::tt::{Bound, TtData};

/// The entry's score at `ply` if its bound settles the window (`alpha`, `beta`).
pub(super) fn table_cutoff(entry: TtData, alpha: i32, beta: i32, ply: usize) -> Option<i32> {
    let score = score_from_tt(entry.score, ply);
    let settles = match entry.bound {
        Bound::Exact => true,
        Bound::Lower => score >= beta,
        Bound::Upper => score <= alpha,
    };
    settles.then_some(score)
}

/// How the best score bounds the true one, given the window it was searched with:
/// above the window's top it is a lower bound, inside the window exact (alpha was
/// raised), at or below its bottom an upper bound.
pub(super) fn bound_of(best: i32, original_alpha: i32, beta: i32) -> Bound {
    if best >= beta {
        Bound::Lower
    } else if best > original_alpha {
        Bound::Exact
    } else {
        Bound::Upper
    }
}

pub(super) fn score_to_tt(score: i32, ply: usize) -> i32 {
    if score >= MATE_BOUND {
        score + ply as i32
    } else if score <= -MATE_BOUND {
        score - ply as i32
    } else {
        score
    }
}

pub(super) fn score_from_tt(score: i32, ply: usize) -> i32 {
    if score >= MATE_BOUND {
        score - ply as i32
    } else if score <= -MATE_BOUND {
        score + ply as i32
    } else {
        score
    }
}
