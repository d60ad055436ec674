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

/// When to stop: no new iteration once `soft` has passed, at once past `hard`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deadlines {
    /// Do not start another iteration after this.
    pub soft: Option<Duration>,
    /// Stop the search at this time.
    pub hard: Option<Duration>,
}

/// How a clock is shared out over the moves: the time manager's numbers. They are the
/// search's tunables ([`super::params::SearchParams::time_plan`]) so that an SPSA job
/// or an A/B match can move them; the defaults are the constants they replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimePlan {
    /// Moves assumed left in the game when the time control does not say.
    pub moves_to_go: u32,
    /// The share of the increment spent on top of the clock's share, in percent.
    pub increment_percent: u32,
    /// No new iteration starts after this share of a move's budget has passed, in
    /// percent: the next iteration would most likely not end before the hard deadline.
    pub soft_stop_percent: u32,
}

impl Default for TimePlan {
    fn default() -> Self {
        TimePlan { moves_to_go: 30, increment_percent: 75, soft_stop_percent: 50 }
    }
}

impl Limits {
    /// The deadlines under `plan`, keeping `overhead` per move for the communication
    /// delay. The hard deadline never exceeds nine tenths of the clock minus the
    /// overhead, so the engine does not lose on time however short the clock.
    pub fn deadlines(&self, overhead: Duration, plan: &TimePlan) -> Deadlines {
        let at_least = |d: Duration| d.max(Duration::from_millis(1));
        let soft_stop = |budget: Duration| budget * plan.soft_stop_percent / 100;
        if self.infinite {
            return Deadlines::default();
        }
        if let Some(movetime) = self.movetime {
            let t = at_least(movetime.saturating_sub(overhead));
            return Deadlines { soft: Some(soft_stop(t)), hard: Some(t) };
        }
        let Some(time) = self.time else {
            return Deadlines::default();
        };
        let usable = time.saturating_sub(overhead);
        let moves_to_go = self.moves_to_go.unwrap_or(plan.moves_to_go).clamp(1, 50);
        let budget = usable / moves_to_go + self.increment * plan.increment_percent / 100;
        let hard = at_least((budget * 4).min(usable * 9 / 10));
        Deadlines { soft: Some(soft_stop(at_least(budget.min(hard)))), hard: Some(hard) }
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
        let d = limits.deadlines(ms(10), &TimePlan::default());
        assert!(d.hard.unwrap() <= ms(200));
        // A new iteration may start for the first 15 ms at least (half of 30 ms).
        assert!(d.soft.unwrap() >= ms(15));
        let nearly_out = Limits { time: Some(ms(15)), increment: ms(10), ..Limits::default() };
        assert!(nearly_out.deadlines(ms(10), &TimePlan::default()).hard.unwrap() <= ms(5));
        let last_move = Limits { time: Some(ms(1000)), moves_to_go: Some(1), ..Limits::default() };
        assert!(last_move.deadlines(ms(10), &TimePlan::default()).hard.unwrap() <= ms(900));
    }

    /// The default plan is the time manager the engine had before its numbers were
    /// tunables: 30 moves to go, three quarters of the increment, no new iteration
    /// after half of the budget (the bench and every match figure so far used it).
    #[test]
    fn the_default_plan_is_the_former_time_manager() {
        for time in [1, 15, 400, 1_000, 2_000, 9_999, 10_000, 60_000, 600_000] {
            for increment in [0, 10, 50, 100, 1_000] {
                for moves_to_go in [None, Some(1), Some(7), Some(40), Some(80)] {
                    let limits =
                        Limits { time: Some(ms(time)), increment: ms(increment), moves_to_go, ..Limits::default() };
                    let usable = ms(time).saturating_sub(ms(10));
                    let base = usable / moves_to_go.unwrap_or(30).clamp(1, 50) + ms(increment) * 3 / 4;
                    let hard = (base * 4).min(usable * 9 / 10).max(ms(1));
                    let soft = base.min(hard).max(ms(1)) / 2;
                    let d = limits.deadlines(ms(10), &TimePlan::default());
                    assert_eq!(d.hard, Some(hard), "{time}+{increment} {moves_to_go:?}");
                    let former = soft.as_micros();
                    assert_eq!(d.soft.unwrap().as_micros(), former, "{time}+{increment} {moves_to_go:?}");
                }
            }
        }
        let fixed = Limits { movetime: Some(ms(100)), ..Limits::default() };
        assert_eq!(fixed.deadlines(ms(10), &TimePlan::default()).soft, Some(ms(45)));
    }

    #[test]
    fn a_plan_of_fewer_moves_and_a_later_stop_spends_more_of_the_clock() {
        let limits = Limits { time: Some(ms(10_000)), increment: ms(100), ..Limits::default() };
        let default = limits.deadlines(ms(10), &TimePlan::default());
        let eager = TimePlan { moves_to_go: 20, increment_percent: 100, soft_stop_percent: 70 };
        let d = limits.deadlines(ms(10), &eager);
        // 9.99 s / 20 + 100 ms = 599.5 ms; 70% of it.
        assert_eq!(d.soft, Some(Duration::from_micros(599_500) * 70 / 100));
        assert_eq!(d.hard, Some(Duration::from_micros(599_500) * 4));
        assert!(d.soft > default.soft && d.hard > default.hard);
        // The hard deadline's cap holds whatever the plan.
        let last = Limits { time: Some(ms(1_000)), moves_to_go: Some(1), ..Limits::default() };
        assert_eq!(last.deadlines(ms(10), &eager).hard, Some(ms(891)));
    }

    #[test]
    fn movetime_and_infinite() {
        let fixed = Limits { movetime: Some(ms(100)), ..Limits::default() };
        assert_eq!(fixed.deadlines(ms(10), &TimePlan::default()).hard, Some(ms(90)));
        assert_eq!(
            Limits { infinite: true, ..Limits::default() }.deadlines(ms(10), &TimePlan::default()),
            Deadlines::default()
        );
    }
}
