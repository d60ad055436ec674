//! Time controls and the clocks that enforce them.
//!
//! Written on the command line as cutechess-cli does: `10+0.1` (seconds plus
//! increment), `40/60` or `40/60+0.5` (moves in seconds), periods joined by `:` as
//! WXF Article 6.2 plays them (`25/3600:10/300`, the last period repeating),
//! `st=0.1` (fixed time per move), `nodes=5000`, `depth=8`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// One period of a clock time control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Period {
    /// Moves to make in the period; `None` for the rest of the game.
    pub moves: Option<u32>,
    /// Time for the period.
    pub time: Duration,
    /// Added after each move.
    pub increment: Duration,
}

/// How long engines may think.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimeControl {
    /// Clock periods; the last one repeats.
    Clock(Vec<Period>),
    /// A fixed time per move.
    MoveTime(Duration),
    /// A node budget per move.
    Nodes(u64),
    /// A depth per move.
    Depth(u32),
}

/// The text is not a time control.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a time control: use 10+0.1, 40/60, 25/3600:10/300, st=0.1, nodes=N or depth=N")]
pub struct BadTimeControl(String);

fn seconds(text: &str) -> Option<Duration> {
    let value: f64 = text.parse().ok()?;
    (0.0..1e7).contains(&value).then(|| Duration::from_secs_f64(value))
}

impl FromStr for TimeControl {
    type Err = BadTimeControl;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadTimeControl(text.to_owned());
        if let Some(value) = text.strip_prefix("st=") {
            return seconds(value).filter(|d| !d.is_zero()).map(TimeControl::MoveTime).ok_or_else(bad);
        }
        if let Some(value) = text.strip_prefix("nodes=") {
            return value.parse().ok().filter(|&n| n > 0).map(TimeControl::Nodes).ok_or_else(bad);
        }
        if let Some(value) = text.strip_prefix("depth=") {
            return value.parse().ok().filter(|&n| n > 0).map(TimeControl::Depth).ok_or_else(bad);
        }
        let periods = text
            .split(':')
            .map(|part| {
                let (moves, rest) = match part.split_once('/') {
                    Some((moves, rest)) => (Some(moves.parse::<u32>().ok().filter(|&m| m > 0)?), rest),
                    None => (None, part),
                };
                let (time, increment) = match rest.split_once('+') {
                    Some((time, inc)) => (seconds(time)?, seconds(inc)?),
                    None => (seconds(rest)?, Duration::ZERO),
                };
                (!time.is_zero() || !increment.is_zero()).then_some(Period { moves, time, increment })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(bad)?;
        Ok(TimeControl::Clock(periods))
    }
}

impl fmt::Display for TimeControl {
    /// The PGN `TimeControl` tag's value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeControl::Clock(periods) => {
                let parts: Vec<String> = periods
                    .iter()
                    .map(|p| {
                        let moves = p.moves.map(|m| format!("{m}/")).unwrap_or_default();
                        let inc = if p.increment.is_zero() {
                            String::new()
                        } else {
                            format!("+{}", p.increment.as_secs_f64())
                        };
                        format!("{moves}{}{inc}", p.time.as_secs_f64())
                    })
                    .collect();
                f.write_str(&parts.join(":"))
            }
            TimeControl::MoveTime(t) => write!(f, "st={}", t.as_secs_f64()),
            TimeControl::Nodes(n) => write!(f, "nodes={n}"),
            TimeControl::Depth(d) => write!(f, "depth={d}"),
        }
    }
}

impl TimeControl {
    /// Whether `other` limits a move the same way (a clock, a time, nodes or a depth):
    /// the two sides of a game with time odds must be limited alike, since a UCI `go`
    /// tells each engine both clocks.
    pub fn same_kind(&self, other: &TimeControl) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }

    /// The PGN tags of a game whose sides played `red` and `black`: `TimeControl` when
    /// they are the same, else `WhiteTimeControl` and `BlackTimeControl` (time odds,
    /// as cutechess-cli writes them; White is Red).
    pub fn pgn_tags(red: &TimeControl, black: &TimeControl) -> Vec<(&'static str, String)> {
        if red == black {
            vec![("TimeControl", red.to_string())]
        } else {
            vec![("WhiteTimeControl", red.to_string()), ("BlackTimeControl", black.to_string())]
        }
    }

    /// The time control for a machine `factor` times slower than the reference: clock
    /// times and increments multiplied (fishtest's scaling by bench speed); node and
    /// depth budgets, which cost the same on any machine, unchanged.
    pub fn scaled(&self, factor: f64) -> TimeControl {
        let scale = |d: Duration| Duration::from_secs_f64((d.as_secs_f64() * factor).clamp(0.0, 1e7));
        match self {
            TimeControl::Clock(periods) => TimeControl::Clock(
                periods
                    .iter()
                    .map(|p| Period { moves: p.moves, time: scale(p.time), increment: scale(p.increment) })
                    .collect(),
            ),
            TimeControl::MoveTime(t) => TimeControl::MoveTime(scale(*t)),
            other => other.clone(),
        }
    }

    /// An upper estimate of one game's wall time for both sides together, assuming
    /// `plies` plies and, for node budgets, `nodes_per_second` on one core: what
    /// leases are sized by.
    pub fn game_seconds(&self, plies: u32, nodes_per_second: u64) -> f64 {
        let per_side = f64::from(plies) / 2.0;
        match self {
            TimeControl::Clock(periods) => {
                // Clocks of the first period plus increments over the game, for each
                // side; later periods add time only in long games.
                let first = periods[0];
                2.0 * (first.time.as_secs_f64() + per_side * first.increment.as_secs_f64())
            }
            TimeControl::MoveTime(t) => f64::from(plies) * t.as_secs_f64(),
            TimeControl::Nodes(n) => f64::from(plies) * *n as f64 / nodes_per_second.max(1) as f64,
            // A depth costs what the engine makes of it; 10 ms a ply is a guess.
            TimeControl::Depth(d) => f64::from(plies) * 0.01 * f64::from(*d),
        }
    }
}

/// One side's clock under a clock time control.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clock {
    periods: Vec<Period>,
    period: usize,
    moves_in_period: u32,
    remaining: Duration,
}

/// The clock ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flagged;

impl Clock {
    /// A full clock for `periods` (at least one).
    pub fn new(periods: &[Period]) -> Self {
        Clock { periods: periods.to_vec(), period: 0, moves_in_period: 0, remaining: periods[0].time }
    }

    fn current(&self) -> Period {
        self.periods[self.period]
    }

    /// Time left.
    pub fn remaining(&self) -> Duration {
        self.remaining
    }

    /// The increment of the current period.
    pub fn increment(&self) -> Duration {
        self.current().increment
    }

    /// Moves left in the current period, if it has a count.
    pub fn moves_to_go(&self) -> Option<u32> {
        self.current().moves.map(|m| m - self.moves_in_period)
    }

    /// Charges a move that took `elapsed`; beyond the time left plus `margin` the
    /// player has lost on time (WXF 3.1.B).
    pub fn charge(&mut self, elapsed: Duration, margin: Duration) -> Result<(), Flagged> {
        if elapsed > self.remaining + margin {
            self.remaining = Duration::ZERO;
            return Err(Flagged);
        }
        self.remaining = self.remaining.saturating_sub(elapsed) + self.increment();
        self.moves_in_period += 1;
        if self.current().moves == Some(self.moves_in_period) {
            self.period = (self.period + 1).min(self.periods.len() - 1);
            self.moves_in_period = 0;
            self.remaining += self.current().time;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn every_form_parses_and_prints() {
        for text in ["10+0.1", "40/60", "40/60+0.5", "25/3600:10/300", "st=0.1", "nodes=5000", "depth=8"] {
            let tc: TimeControl = text.parse().unwrap();
            assert_eq!(tc.to_string().parse::<TimeControl>().unwrap(), tc, "{text}");
        }
        for bad in ["", "x", "10+", "0/60", "st=0", "nodes=-1", "10+0.1:abc", "-5"] {
            assert!(bad.parse::<TimeControl>().is_err(), "{bad}");
        }
    }

    #[test]
    fn time_odds_are_of_one_kind_and_tagged_as_cutechess_tags_them() {
        let tc = |text: &str| text.parse::<TimeControl>().unwrap();
        assert!(tc("10+0.1").same_kind(&tc("40/60")));
        assert!(tc("nodes=100").same_kind(&tc("nodes=5")));
        assert!(!tc("10+0.1").same_kind(&tc("st=1")) && !tc("depth=3").same_kind(&tc("nodes=3")));
        assert_eq!(TimeControl::pgn_tags(&tc("10+0.1"), &tc("10+0.1")), vec![("TimeControl", "10+0.1".to_owned())]);
        assert_eq!(
            TimeControl::pgn_tags(&tc("10+0.1"), &tc("20+0.2")),
            vec![("WhiteTimeControl", "10+0.1".to_owned()), ("BlackTimeControl", "20+0.2".to_owned())]
        );
    }

    #[test]
    fn scaling_multiplies_clock_times_and_keeps_budgets() {
        let tc: TimeControl = "40/60+0.5:10/30".parse().unwrap();
        assert_eq!(tc.scaled(2.0).to_string(), "40/120+1:10/60");
        assert_eq!("st=0.5".parse::<TimeControl>().unwrap().scaled(0.5).to_string(), "st=0.25");
        assert_eq!("nodes=100".parse::<TimeControl>().unwrap().scaled(3.0).to_string(), "nodes=100");
        let seconds = "10+0.1".parse::<TimeControl>().unwrap().game_seconds(100, 1);
        assert!((seconds - 30.0).abs() < 1e-9, "{seconds}");
    }

    #[test]
    fn wxf_6_2_periods_add_time_after_their_moves() {
        let TimeControl::Clock(periods) = "2/10:1/5".parse().unwrap() else { panic!() };
        let mut clock = Clock::new(&periods);
        assert_eq!(clock.moves_to_go(), Some(2));
        clock.charge(ms(4000), ms(0)).unwrap();
        clock.charge(ms(4000), ms(0)).unwrap();
        assert_eq!(clock.remaining(), ms(2000 + 5000));
        assert_eq!(clock.moves_to_go(), Some(1));
        clock.charge(ms(1000), ms(0)).unwrap();
        assert_eq!(clock.remaining(), ms(11_000), "the last period repeats");
    }

    #[test]
    fn increments_and_time_forfeit_with_margin() {
        let TimeControl::Clock(periods) = "1+0.1".parse().unwrap() else { panic!() };
        let mut clock = Clock::new(&periods);
        clock.charge(ms(500), ms(0)).unwrap();
        assert_eq!(clock.remaining(), ms(600));
        assert!(clock.charge(ms(620), ms(50)).is_ok(), "within the margin");
        assert_eq!(clock.charge(ms(500), ms(50)), Err(Flagged));
    }
}
