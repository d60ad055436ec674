//! The counts a match's row keeps (W/D/L, pentanomial, over the board) and how a
//! pair's points add to them: the storage applies them, the views read them.

use xq_engine::xiangqi::rules::Reason;

/// Adds a pair's half points (new engine, per game) to W/D/L and pentanomial counts.
pub fn add_points(wdl: &mut [u64; 3], penta: &mut [u64; 5], points: [i64; 2]) {
    let (games, pair) = slots(points);
    for game in games {
        wdl[game] += 1;
    }
    penta[pair] += 1;
}

/// Where a pair's half points (new engine, per game) are counted: each game's W/D/L
/// slot (win, draw, loss) and the pair's pentanomial slot (its points, 0 to 4).
pub fn slots(points: [i64; 2]) -> ([usize; 2], usize) {
    let game = |p: i64| (2 - p.clamp(0, 2)) as usize;
    (points.map(game), (points[0].clamp(0, 2) + points[1].clamp(0, 2)) as usize)
}

/// A match's counts as the board alone decided its games: each game won by a
/// repetition ruling (a lone perpetual check or chase, Xiongqi's repetitive move) or
/// on time counted as a draw, as `xq-worker match` counts them. Engines that do not
/// know the chase rules lose such games to the arbiter, and an engine whose time
/// manager overdraws its clock loses to the clock, so a test against one reads its
/// strength here and its score under the rules in the pentanomial.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OverTheBoard {
    /// Pairs by the new engine's points with those games as draws.
    pub pentanomial: [i64; 5],
    /// Games won by a repetition ruling: by the new engine, by the base engine.
    pub ruled_wins: [i64; 2],
    /// Games won on time (the loser's clock ran out): by the new engine, by the base.
    pub forfeit_wins: [i64; 2],
}

/// A game lost on time: its PGN's `[Termination]`, which the replay checks and the
/// unit stores as the game's reason.
pub const TIME_FORFEIT: &str = "time forfeit";

impl OverTheBoard {
    /// Counts a pair (`sign` 1) or takes it off (`sign` -1): the new engine's half
    /// points in its two games and the games' endings as units store them.
    pub fn count(&mut self, points: [i64; 2], reasons: &[String], sign: i64) {
        let mut board = 0;
        for (game, points) in points.into_iter().enumerate() {
            let points = points.clamp(0, 2);
            let reason = reasons.get(game).map_or("", String::as_str);
            let ruled = Reason::names_a_repetition_violation(reason);
            if ruled && points != 1 {
                self.ruled_wins[usize::from(points == 0)] += sign;
                board += 1;
            } else if reason == TIME_FORFEIT && points != 1 {
                self.forfeit_wins[usize::from(points == 0)] += sign;
                board += 1;
            } else {
                board += points;
            }
        }
        self.pentanomial[board as usize] += sign;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pairs_pentanomial_slot_is_the_sum_of_its_games_wdl_points() {
        assert_eq!(slots([2, 0]), ([0, 2], 2), "a win and a loss");
        assert_eq!(slots([1, 2]), ([1, 0], 3));
        // Out of range, each game counts as its nearest result, and the pair as their sum.
        for points in [[-5, 1], [3, -1], [7, 7], [-1, -1]] {
            let (games, pair) = slots(points);
            assert_eq!(pair, games.iter().map(|&g| 2 - g).sum::<usize>(), "{points:?}");
        }
    }
}
