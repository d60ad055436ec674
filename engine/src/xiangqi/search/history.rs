//! What a search learns of quiet moves, for ordering and reductions: butterfly history
//! (a score per side, from and to) and counter-moves (the reply that refuted each
//! move). A search starts from what the game's previous one learned, its scores kept
//! at a share (the "History Keep Percent" tunable); at 0 every search starts empty, as
//! the engine always did. Stockfish keeps its tables for the whole game: a move good a
//! ply ago is likely good now, and an empty table orders the first iterations blind.

use std::sync::{Mutex, PoisonError};

use crate::xiangqi::Move;

/// Butterfly history and counter-moves.
#[derive(Clone)]
pub struct QuietHistory {
    /// Scores by side to move, from and to point.
    pub scores: [[[i32; 90]; 90]; 2],
    /// The best reply to each move, by its from and to point.
    pub counter_moves: [[Option<Move>; 90]; 90],
}

impl QuietHistory {
    /// Nothing learned.
    pub fn empty() -> Box<Self> {
        Box::new(QuietHistory { scores: [[[0; 90]; 90]; 2], counter_moves: [[None; 90]; 90] })
    }

    /// What a new search starts from: these scores kept at `keep_percent` (0: nothing
    /// kept, counter-moves included).
    pub fn kept(&self, keep_percent: i32) -> Box<Self> {
        if keep_percent <= 0 {
            return QuietHistory::empty();
        }
        let mut kept = Box::new(self.clone());
        for score in kept.scores.iter_mut().flatten().flatten() {
            *score = *score * keep_percent.min(100) / 100;
        }
        kept
    }
}

/// The main thread's tables after the game's last search, kept between searches.
#[derive(Default)]
pub struct Learned(Mutex<Option<Box<QuietHistory>>>);

impl Learned {
    /// What a search under `keep_percent` starts from.
    pub fn start(&self, keep_percent: i32) -> Box<QuietHistory> {
        let learned = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        learned.as_ref().map_or_else(QuietHistory::empty, |history| history.kept(keep_percent))
    }

    /// Keeps what a search learned for the next one.
    pub fn keep(&self, history: Box<QuietHistory>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(history);
    }

    /// Forgets everything (a new game).
    pub fn forget(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_kept_at_their_share_and_nothing_at_zero() {
        let learned = Learned::default();
        let mut history = QuietHistory::empty();
        history.scores[1][10][19] = 400;
        history.scores[0][3][4] = -301;
        let square = |index| crate::xiangqi::Square::from_index(index).unwrap();
        let mv = Move::new(square(10), square(19));
        history.counter_moves[3][4] = Some(mv);
        assert_eq!(learned.start(50).scores[1][10][19], 0, "nothing learned before the first search");
        learned.keep(history);
        let half = learned.start(50);
        assert_eq!((half.scores[1][10][19], half.scores[0][3][4]), (200, -150));
        assert_eq!(half.counter_moves[3][4], Some(mv));
        let none = learned.start(0);
        assert_eq!((none.scores[1][10][19], none.counter_moves[3][4]), (0, None));
        learned.forget();
        assert_eq!(learned.start(100).scores[1][10][19], 0);
    }

    /// Only the kept history tells two searches apart once the table is emptied: at 0
    /// (the default) the second search is the first node for node, kept at half it
    /// orders differently, and a new game forgets.
    #[test]
    fn a_search_starts_from_the_last_ones_history_only_when_kept() {
        use crate::xiangqi::Position;
        use crate::xiangqi::search::limits::Limits;
        use crate::xiangqi::search::{SearchOptions, Shared, search};

        let start =
            Position::from_fen("r1bakab1r/9/1cn3nc1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C1N2/9/RNBAKAB1R w - - 4 3").unwrap();
        let limits = Limits { depth: Some(7), ..Limits::default() };
        let searches = |keep: i32| {
            let mut options = SearchOptions::default();
            options.params.history_keep_percent = keep;
            let shared = Shared::new(1);
            let nodes = || search(&shared, &start, &[], &limits, &options, |_| {}).nodes;
            let first = nodes();
            shared.tt.clear();
            let second = nodes();
            shared.new_game();
            (first, second, nodes())
        };
        let (first, second, _) = searches(0);
        assert_eq!(second, first);
        let (first_kept, second_kept, after_new_game) = searches(50);
        assert_eq!(first_kept, first);
        assert_ne!(second_kept, first, "the kept history changed nothing");
        assert_eq!(after_new_game, first);
    }
}
