//! Points as Article 9 of the World Xiangqi Rules counts them.

/// A game's result from one player's view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GameResult {
    Win,
    Draw,
    Loss,
}

impl GameResult {
    /// The other player's view.
    pub fn reversed(self) -> GameResult {
        match self {
            GameResult::Win => GameResult::Loss,
            GameResult::Draw => GameResult::Draw,
            GameResult::Loss => GameResult::Win,
        }
    }
}

/// How a game is scored (9.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Points {
    /// Two for a win, one for a draw, none for a loss: the book's first system.
    #[default]
    TwoOneZero,
    /// One, a half and none: the alternative of 9.1.
    OneHalfZero,
}

impl Points {
    /// A game's points in half points (so that both systems are whole numbers).
    pub fn half_points(self, result: GameResult) -> u32 {
        let per_draw = match self {
            Points::TwoOneZero => 2,
            Points::OneHalfZero => 1,
        };
        match result {
            GameResult::Win => 2 * per_draw,
            GameResult::Draw => per_draw,
            GameResult::Loss => 0,
        }
    }

    /// A game's points.
    pub fn of(self, result: GameResult) -> f64 {
        f64::from(self.half_points(result)) / 2.0
    }
}

/// The Round Score of a two-game round (9.2): the individual scores (2, 1, 0 a game)
/// of both games added up; the higher sum wins the round (2), equal sums draw it (1).
pub fn round_score(games: [GameResult; 2]) -> u32 {
    let sum: u32 = games.iter().map(|&g| Points::TwoOneZero.half_points(g) / 2).sum();
    match sum.cmp(&2) {
        std::cmp::Ordering::Greater => 2,
        std::cmp::Ordering::Equal => 1,
        std::cmp::Ordering::Less => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use GameResult::*;

    /// 9.1: "each win would be worth two points. A loss would be zero points, and a
    /// draw would be worth one point"; "one point for a win, zero points for a loss
    /// and 0.5 points for a draw".
    #[test]
    fn article_9_1_points() {
        assert_eq!([Win, Draw, Loss].map(|r| Points::TwoOneZero.of(r)), [2.0, 1.0, 0.0]);
        assert_eq!([Win, Draw, Loss].map(|r| Points::OneHalfZero.of(r)), [1.0, 0.5, 0.0]);
    }

    /// 9.2: a win and a loss sum to 2 against 2: both get a Round Score of 1; a win
    /// and a draw (3 against 1) win the round.
    #[test]
    fn article_9_2_round_scores() {
        assert_eq!(round_score([Win, Loss]), 1);
        assert_eq!(round_score([Draw, Draw]), 1);
        assert_eq!(round_score([Win, Draw]), 2);
        assert_eq!(round_score([Draw, Loss]), 0);
        assert_eq!(round_score([Win, Win]), 2);
        assert_eq!(round_score([Loss, Draw].map(GameResult::reversed)), 2);
    }
}
