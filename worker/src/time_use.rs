//! How each engine of a match spent its clock, beside the result. An engine that ends
//! its games with a quarter of its clock unused plays a shorter time control than its
//! opponent: the time manager's share of an Elo figure (docs/search-scaling.md, S2),
//! which only the games' move times show.

use std::collections::BTreeMap;
use std::time::Duration;

use xq_engine::color::{ByColor, Color};
use xq_engine::time_control::{Clock, TimeControl};

/// One engine's use of its clock over a match's games.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeUse {
    /// Moves it chose (a book's moves are not its own).
    pub moves: u64,
    /// Their thinking time in all.
    pub thinking: Duration,
    /// Games it played under a clock (not a time or a node budget per move).
    pub clocked_games: u64,
    /// The clock it had left at the end of those games, summed.
    pub left_at_end: Duration,
    /// The least it had left at the end of one of them.
    pub least_left: Option<Duration>,
}

impl TimeUse {
    /// The mean thinking time of a move.
    pub fn per_move(&self) -> Option<Duration> {
        mean(self.thinking, self.moves)
    }

    /// The mean clock left at the end of a game.
    pub fn left_on_average(&self) -> Option<Duration> {
        mean(self.left_at_end, self.clocked_games)
    }
}

impl TimeUse {
    /// One line of a match's summary: `0.199 s a move (7380 moves), 3.90 s left at the
    /// end of a game on average, 2.13 s at the least`.
    pub fn describe(&self, name: &str) -> String {
        let seconds = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64());
        let mut line = format!("time of {name}: {:.3} s a move ({} moves)", seconds(self.per_move()), self.moves);
        if self.clocked_games > 0 {
            line += &format!(
                ", {:.2} s left at the end of a game on average, {:.2} s at the least",
                seconds(self.left_on_average()),
                seconds(self.least_left)
            );
        }
        line
    }
}

fn mean(total: Duration, count: u64) -> Option<Duration> {
    (count > 0).then(|| Duration::from_secs_f64(total.as_secs_f64() / count as f64))
}

/// Adds one game to `uses`, by engine name: `players` by colour, `first` the colour of
/// the game's first ply, `plies` each ply's thinking time from the start (`None` for a
/// book move, which no clock is charged for), under `time_control` with the match's
/// `margin` (a move that overran its clock by less went on, as in the game).
pub fn add_game(
    uses: &mut BTreeMap<String, TimeUse>,
    players: &ByColor<String>,
    first: Color,
    plies: impl IntoIterator<Item = Option<Duration>>,
    time_control: &TimeControl,
    margin: Duration,
) {
    let mut clocks = match time_control {
        TimeControl::Clock(periods) => Some(ByColor::new_with(|_| Clock::new(periods))),
        _ => None,
    };
    let mut mover = first;
    for elapsed in plies {
        if let Some(elapsed) = elapsed {
            let used = uses.entry(players[mover].clone()).or_default();
            used.moves += 1;
            used.thinking += elapsed;
            if let Some(clocks) = &mut clocks {
                // A move past the clock and the margin ended the game with nothing left: the
                // clock says so; one within the margin went on, as here.
                let _ = clocks[mover].charge(elapsed, margin);
            }
        }
        mover = !mover;
    }
    if let Some(clocks) = &clocks {
        for color in [Color::Red, Color::Black] {
            let used = uses.entry(players[color].clone()).or_default();
            let left = clocks[color].remaining();
            used.clocked_games += 1;
            used.left_at_end += left;
            used.least_left = Some(used.least_left.map_or(left, |least| least.min(left)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Option<Duration> {
        Some(Duration::from_millis(n))
    }

    fn players() -> ByColor<String> {
        ByColor { red: "a".to_owned(), black: "b".to_owned() }
    }

    #[test]
    fn a_clocked_game_charges_each_engine_move_and_not_the_book() {
        let mut uses = BTreeMap::new();
        let tc: TimeControl = "10+0.1".parse().unwrap();
        // Two book plies, then a: 300 + 500 ms, b: 200 ms.
        add_game(&mut uses, &players(), Color::Red, [None, None, ms(300), ms(200), ms(500)], &tc, Duration::ZERO);
        let a = uses["a"];
        assert_eq!((a.moves, a.thinking, a.clocked_games), (2, Duration::from_millis(800), 1));
        // 10 s - 0.8 s + 2 increments of 0.1 s.
        assert_eq!(a.left_at_end, Duration::from_millis(9_400));
        assert_eq!(uses["b"].left_at_end, Duration::from_millis(9_900));
        assert_eq!(a.per_move(), Some(Duration::from_millis(400)));
        // A second game, Black first (a FEN with Black to move): b moves first.
        add_game(&mut uses, &players(), Color::Black, [ms(1_000), ms(100)], &tc, Duration::ZERO);
        let b = uses["b"];
        assert_eq!((b.moves, b.clocked_games), (2, 2));
        assert_eq!(b.left_at_end, Duration::from_millis(9_900 + 9_100));
        assert_eq!(b.least_left, Some(Duration::from_millis(9_100)));
        assert_eq!(b.left_on_average(), Some(Duration::from_millis(9_500)));
        assert_eq!(
            b.describe("b"),
            "time of b: 0.600 s a move (2 moves), 9.50 s left at the end of a game on average, 9.10 s at the least"
        );
    }

    #[test]
    fn a_flag_leaves_nothing_and_budgets_per_move_have_no_clock() {
        let mut uses = BTreeMap::new();
        let tc: TimeControl = "1+0".parse().unwrap();
        add_game(&mut uses, &players(), Color::Red, [ms(1_200)], &tc, Duration::ZERO);
        assert_eq!(uses["a"].least_left, Some(Duration::ZERO));
        let mut uses = BTreeMap::new();
        add_game(&mut uses, &players(), Color::Red, [ms(50), ms(60)], &"nodes=1000".parse().unwrap(), Duration::ZERO);
        assert_eq!((uses["a"].moves, uses["a"].clocked_games, uses["a"].left_on_average()), (1, 0, None));
        assert_eq!(uses["b"].describe("b"), "time of b: 0.060 s a move (1 moves)");
    }

    #[test]
    fn an_overrun_within_the_margin_goes_on_as_in_the_game() {
        // 1+0.1: Red's first move takes 1.2 s, past its clock by 0.2 s; its second 50 ms.
        let tc: TimeControl = "1+0.1".parse().unwrap();
        let plies = [ms(1_200), ms(10), ms(50), ms(10)];
        let mut uses = BTreeMap::new();
        add_game(&mut uses, &players(), Color::Red, plies, &tc, Duration::from_millis(300));
        // The game went on with the increment: 0.1 s, then 0.1 - 0.05 + 0.1.
        assert_eq!(uses["a"].least_left, Some(Duration::from_millis(150)));
        // Without the margin the same move flags and the clock stays empty.
        let mut uses = BTreeMap::new();
        add_game(&mut uses, &players(), Color::Red, plies, &tc, Duration::ZERO);
        assert_eq!(uses["a"].least_left, Some(Duration::ZERO));
    }
}
