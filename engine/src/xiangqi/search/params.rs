//! The search's tunable numbers: pruning margins, reductions, the aspiration window
//! and the time manager's shares, each with the range a tuner may move it in.
//!
//! They are values in [`super::SearchOptions`] rather than constants so that an SPSA
//! run can set them per game; built with the `tune` feature, the UCI front-end
//! declares each as a spin option (fishtest's and OpenBench's way of tuning). Without
//! it the options stay hidden, so that a GUI's list is not cluttered; the defaults are
//! the values the search had as constants, and the bench signature is theirs.

use super::limits::TimePlan;

/// One tunable number as a UCI spin option.
#[derive(Clone, Copy, Debug)]
pub struct Tunable {
    /// The option's name.
    pub name: &'static str,
    /// Its default.
    pub default: i32,
    /// The lowest value a tuner may give it.
    pub min: i32,
    /// The highest.
    pub max: i32,
    get: fn(&SearchParams) -> i32,
    set: fn(&mut SearchParams, i32),
}

impl Tunable {
    /// Its value in `params`.
    pub fn get(&self, params: &SearchParams) -> i32 {
        (self.get)(params)
    }

    /// The UCI declaration (`option name ... type spin default ... min ... max ...`).
    pub fn uci_option(&self) -> String {
        format!("option name {} type spin default {} min {} max {}", self.name, self.default, self.min, self.max)
    }
}

/// Declares the numbers once: the struct, its defaults and the table of tunables.
macro_rules! search_params {
    ($($(#[doc = $doc:expr])* $field:ident: $name:literal = $default:literal in $min:literal ..= $max:literal;)*) => {
        /// The search's tunable numbers (see the module's documentation).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct SearchParams {
            $($(#[doc = $doc])* pub $field: i32,)*
        }

        impl Default for SearchParams {
            fn default() -> Self {
                SearchParams { $($field: $default,)* }
            }
        }

        /// Every tunable number, in declaration order.
        pub const TUNABLES: &[Tunable] = &[$(Tunable {
            name: $name,
            default: $default,
            min: $min,
            max: $max,
            get: |p| p.$field,
            set: |p, v| p.$field = v,
        },)*];
    };
}

search_params! {
    /// The first aspiration window's half-width, centipawns.
    aspiration_delta: "Aspiration Delta" = 25 in 5..=100;
    /// Reverse futility pruning's margin per ply of depth.
    reverse_futility_margin: "Reverse Futility Margin" = 90 in 30..=200;
    /// How much less margin an improving side needs.
    reverse_futility_improving: "Reverse Futility Improving" = 40 in 0..=120;
    /// The null move's base reduction in plies.
    null_move_base: "Null Move Base" = 3 in 1..=6;
    /// Centipawns above beta per extra ply of null-move reduction.
    null_move_eval_divisor: "Null Move Eval Divisor" = 200 in 50..=600;
    /// Quiet moves searched before late-move pruning, before the depth terms.
    late_move_base: "Late Move Base" = 4 in 1..=12;
    /// Futility pruning's margin at depth 0, centipawns.
    futility_base: "Futility Base" = 100 in 0..=300;
    /// Futility pruning's margin per ply of depth.
    futility_per_depth: "Futility Per Depth" = 80 in 20..=200;
    /// Captures losing more than this per ply of depth by exchange are pruned.
    see_prune_per_depth: "SEE Prune Per Depth" = 100 in 20..=300;
    /// Late move reductions' base, in hundredths of a ply.
    lmr_base: "LMR Base" = 80 in 0..=200;
    /// Late move reductions' divisor of ln(depth) * ln(move number), in hundredths.
    lmr_divisor: "LMR Divisor" = 230 in 100..=500;
    /// History score per ply of reduction removed (or added).
    lmr_history_divisor: "LMR History Divisor" = 8192 in 1024..=32768;
    /// The share of the last search's quiet-move history a search starts from, percent
    /// (0: every search starts empty).
    history_keep_percent: "History Keep Percent" = 0 in 0..=100;
    /// The least depth at which the table's move is tested for being singular, and
    /// extended by a ply when it is (0: never; below 4 counts as 4, so that the test's
    /// search at half the depth is not a quiescence search, which excludes nothing).
    singular_depth: "Singular Depth" = 0 in 0..=16;
    /// How far below the table's score, per ply of depth, every other move must fail
    /// for the table's move to count as singular.
    singular_margin: "Singular Margin" = 2 in 1..=8;
    /// Whether quiescence's first ply searches quiet checks that lose nothing by
    /// exchange as well as captures (1) or captures alone (0).
    qs_quiet_checks: "QS Quiet Checks" = 0 in 0..=1;
    /// Moves assumed left in the game when the time control does not say.
    moves_to_go: "Moves To Go" = 30 in 10..=50;
    /// The share of the increment spent on top of the clock's share, percent.
    increment_percent: "Increment Percent" = 75 in 0..=100;
    /// The share of a move's budget after which no new iteration starts, percent.
    soft_stop_percent: "Soft Stop Percent" = 50 in 20..=100;
}

impl SearchParams {
    /// Sets the tunable named `name` (ASCII case ignored); `None` when there is no such
    /// tunable, an error naming the range when `value` is outside it.
    pub fn set(&mut self, name: &str, value: &str) -> Option<Result<(), String>> {
        let tunable = TUNABLES.iter().find(|t| t.name.eq_ignore_ascii_case(name))?;
        Some(
            value
                .parse::<i32>()
                .ok()
                .filter(|v| (tunable.min..=tunable.max).contains(v))
                .map(|v| (tunable.set)(self, v))
                .ok_or_else(|| {
                    format!("option {}: '{value}' is not a number in {}..={}", tunable.name, tunable.min, tunable.max)
                }),
        )
    }

    /// The time manager's numbers.
    pub fn time_plan(&self) -> TimePlan {
        let share = |value: i32| value.max(0).unsigned_abs();
        TimePlan {
            moves_to_go: share(self.moves_to_go),
            increment_percent: share(self.increment_percent),
            soft_stop_percent: share(self.soft_stop_percent),
        }
    }

    /// Late move reduction in plies, by depth and move number.
    pub fn reduction(&self, depth: i32, move_number: usize) -> i32 {
        let base = f64::from(self.lmr_base) / 100.0;
        let divisor = f64::from(self.lmr_divisor) / 100.0;
        (base + (depth as f64).ln() * (move_number as f64).ln() / divisor) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_lie_in_their_ranges_and_names_are_unique() {
        let params = SearchParams::default();
        for (i, t) in TUNABLES.iter().enumerate() {
            assert!((t.min..=t.max).contains(&t.default), "{}", t.name);
            assert_eq!(t.get(&params), t.default, "{}", t.name);
            assert!(TUNABLES[..i].iter().all(|u| !u.name.eq_ignore_ascii_case(t.name)), "{}", t.name);
        }
    }

    #[test]
    fn set_checks_the_name_and_the_range() {
        let mut params = SearchParams::default();
        assert_eq!(params.set("futility base", "150"), Some(Ok(())));
        assert_eq!(params.futility_base, 150);
        let error = params.set("Futility Base", "301").unwrap().unwrap_err();
        assert!(error.contains("0..=300"), "{error}");
        assert!(params.set("Futility Base", "x").unwrap().is_err());
        assert_eq!(params.futility_base, 150);
        assert_eq!(params.set("Hash", "16"), None);
    }

    /// The reduction from hundredths equals the constants it replaced, bit for bit.
    #[test]
    fn default_reductions_equal_the_former_constants() {
        let params = SearchParams::default();
        for depth in 1..64 {
            for move_number in 1..128usize {
                let former = (0.8 + (depth as f64).ln() * (move_number as f64).ln() / 2.3) as i32;
                assert_eq!(params.reduction(depth, move_number), former, "{depth} {move_number}");
            }
        }
    }
}
