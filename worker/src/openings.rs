//! Opening order: a book's openings (read by the engine library's
//! [`xq_engine::xiangqi::book`] and [`xq_engine::xiongqi::book`]) shuffled with a seed,
//! from an offset.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
pub use xq_engine::xiangqi::book::{BookError, read_book};
pub use xq_engine::xiongqi::book::read_book as read_xiongqi_book;

#[cfg(test)]
use crate::game::Opening;

/// The openings in play order: shuffled with `seed` if given, then rotated to start at
/// `offset`.
pub fn arrange<T>(mut openings: Vec<T>, seed: Option<u64>, offset: usize) -> Vec<T> {
    if let Some(seed) = seed {
        openings.shuffle(&mut StdRng::seed_from_u64(seed));
    }
    let len = openings.len();
    openings.rotate_left(offset % len.max(1));
    openings
}

#[cfg(test)]
mod tests {
    use super::*;
    use xq_engine::xiangqi::Position;

    #[test]
    fn arrange_shuffles_and_rotates() {
        let book: Vec<Opening> = [
            "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR b - - 1 1",
            "4k4/9/9/9/9/9/9/9/9/3K5 w - - 0 1",
        ]
        .iter()
        .map(|fen| Opening { start: Position::from_fen(fen).unwrap(), moves: Vec::new() })
        .collect();
        assert_eq!(arrange(book.clone(), None, 1)[0], book[1]);
        let shuffled = arrange(book.clone(), Some(7), 0);
        assert_eq!(shuffled.len(), 2);
        assert!(shuffled.contains(&book[0]) && shuffled.contains(&book[1]));
    }
}
