//! What bounds a search (`go` arguments) and the time it may take.

use std::time::Duration;

/// The limits of one search, as `go` gives them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Stop after this depth.
    pub depth: Option<i32>,
    /// Stop after about this many nodes.
    pub nodes: Option<u64>,
    /// Think exactly this long.
    pub movetime: Option<Duration>,
    /// The side to move's clock.
    pub time: Option<Duration>,
    /// Its increment per move.
    pub increment: Duration,
    /// Moves until the next time control.
    pub moves_to_go: Option<u32>,
    /// Stop when a mate in this many moves is found.
    pub mate: Option<u32>,
    /// Search until told to stop.
    pub infinite: bool,
    /// Root moves not to consider (UCCI `banmoves`).
    pub banned: Vec<crate::xiangqi::Move>,
}

/// When to stop: after an iteration past `soft`, at once past `hard`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deadlines {
    /// Do not start another iteration after half of this.
    pub soft: Option<Duration>,
    /// Stop the search at this time.
    pub hard: Option<Duration>,
}

/// Moves assumed left in the game when the time control does not say.
const DEFAULT_MOVES_TO_GO: u32 = 30;

impl Limits {
    /// The deadlines, keeping `overhead` per move for the communication delay. The
    /// hard deadline never exceeds nine tenths of the clock minus the overhead, so the
    /// engine does not lose on time however short the clock.
    pub fn deadlines(&self, overhead: Duration) -> Deadlines {
        let at_least = |d: Duration| d.max(Duration::from_millis(1));
        if self.infinite {
            return Deadlines::default();
        }
        if let Some(movetime) = self.movetime {
            let t = at_least(movetime.saturating_sub(overhead));
            return Deadlines { soft: Some(t), hard: Some(t) };
        }
        let Some(time) = self.time else {
            return Deadlines::default();
        };
        let usable = time.saturating_sub(overhead);
        let moves_to_go = self.moves_to_go.unwrap_or(DEFAULT_MOVES_TO_GO).clamp(1, 50);
        let base = usable / moves_to_go + self.increment * 3 / 4;
        let hard = at_least((base * 4).min(usable * 9 / 10));
        Deadlines { soft: Some(at_least(base.min(hard))), hard: Some(hard) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_short_clock_leaves_a_margin() {
        let limits = Limits { time: Some(ms(1000)), increment: ms(10), ..Limits::default() };
        let d = limits.deadlines(ms(10));
        assert!(d.hard.unwrap() <= ms(200));
        assert!(d.soft.unwrap() >= ms(30));
        let nearly_out = Limits { time: Some(ms(15)), increment: ms(10), ..Limits::default() };
        assert!(nearly_out.deadlines(ms(10)).hard.unwrap() <= ms(5));
        let last_move = Limits { time: Some(ms(1000)), moves_to_go: Some(1), ..Limits::default() };
        assert!(last_move.deadlines(ms(10)).hard.unwrap() <= ms(900));
    }

    #[test]
    fn movetime_and_infinite() {
        let fixed = Limits { movetime: Some(ms(100)), ..Limits::default() };
        assert_eq!(fixed.deadlines(ms(10)).hard, Some(ms(90)));
        assert_eq!(Limits { infinite: true, ..Limits::default() }.deadlines(ms(10)), Deadlines::default());
    }
}
