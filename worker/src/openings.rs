//! Opening order: a book's openings (read by the engine library's
//! [`xq_engine::xiangqi::book`] and [`xq_engine::xiongqi::book`]) shuffled with a seed,
//! from an offset; and which opening each pair of a match plays.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
pub use xq_engine::xiangqi::book::{BookError, read_book};
pub use xq_engine::xiongqi::book::read_book as read_xiongqi_book;

use crate::game::Start;

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

/// Where each pair of a match starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Openings {
    /// Pair `i` plays opening `i` modulo their number: a book in play order.
    Cycle(Vec<Start>),
    /// Each pair its own: a lease's units, read off a book too large to hold whole (a
    /// position is some 900 bytes: the default book's 100,000 would take 90 MB a lease).
    Pairs(BTreeMap<usize, Start>),
}

impl Openings {
    /// Pair `pair`'s opening; `None` when there is none for it.
    pub fn of_pair(&self, pair: usize) -> Option<&Start> {
        match self {
            Openings::Cycle(starts) if starts.is_empty() => None,
            Openings::Cycle(starts) => Some(&starts[pair % starts.len()]),
            Openings::Pairs(starts) => starts.get(&pair),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        match self {
            Openings::Cycle(starts) => starts.is_empty(),
            Openings::Pairs(starts) => starts.is_empty(),
        }
    }
}

impl From<Vec<Start>> for Openings {
    fn from(starts: Vec<Start>) -> Self {
        Openings::Cycle(starts)
    }
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
