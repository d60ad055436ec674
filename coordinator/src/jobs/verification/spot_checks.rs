//! Spot checks: the coordinator rules a sample of each report's games again itself,
//! under a budget of plies a second, and names the game a forged report misstates.

use crate::jobs::verification::reports::{ReportScope, compare};
use crate::jobs::verification::rulings;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use xq_engine::xiangqi::pgn::{PgnFile, PgnGame};
use xq_engine::xiangqi::rules::hard_games::hard_game_pgn;
use xq_engine::xiangqi::rules::verify::{Tally, check_game_with};
use xq_engine::xiangqi::selfplay::{PlaySettings, fresh_game};

/// Games of a unit the coordinator verifies again itself at most, drawn at random when
/// the report comes, so that a worker cannot know which: a report that leaves out a
/// parting game is caught on that unit with the odds of drawing it, and a worker that
/// does so on many units is caught for certain. Fewer are drawn when the spot-check
/// budget ([`SpotChecks`]) runs low.
pub const SPOT_CHECKED_GAMES: usize = 8;
/// Replayed plies a second the spot checks may spend by default, summed over all
/// jobs: about half of one core (a ply ruled under a rule set, or a node searched in
/// playing a fresh game again, costs one; the arbiter rules about a million a second).
pub const SPOT_CHECK_PLIES_PER_SECOND: f64 = 500_000.0;

/// The coordinator's spot checks: a budget of replayed plies a second across all
/// verification jobs, so that a job of many small units (one game each, say) cannot
/// make the coordinator replay the fleet's work (a token bucket holding a second's
/// worth, at least one game's); one check at a time, so they take at most one core;
/// and what each job's checks replayed, since the coordinator started.
///
/// Every reported line is verified again whatever the budget (there are few: the
/// parting and unplayable games, each ruled from the line's own moves); only the games
/// drawn to find left-out partings are under it: a unit gets at most
/// [`SPOT_CHECKED_GAMES`] of them, and as many of those as the budget holds when its
/// report comes, each charged at its expected cost ([`UnitGames::game_cost`]) or what
/// it cost, if more. The checks of lines are charged too, so that they slow the draws.
pub struct SpotChecks {
    per_second: f64,
    bucket: std::sync::Mutex<(f64, std::time::Instant)>,
    /// One check at a time.
    pub running: tokio::sync::Semaphore,
    by_job: std::sync::Mutex<HashMap<u64, SpotCheck>>,
}

impl SpotChecks {
    /// Checks under a budget of `per_second` replayed plies a second.
    pub fn new(per_second: f64) -> Self {
        let per_second = per_second.max(0.0);
        SpotChecks {
            per_second,
            bucket: std::sync::Mutex::new((per_second, std::time::Instant::now())),
            running: tokio::sync::Semaphore::new(1),
            by_job: Default::default(),
        }
    }

    /// Takes from the budget the games of `cost` each, of `wanted`, that it holds now;
    /// returns how many.
    pub fn draw(&self, wanted: usize, cost: f64) -> usize {
        let mut bucket = self.bucket.lock().expect("the bucket's lock is never poisoned");
        let now = std::time::Instant::now();
        let capacity = self.per_second.max(cost);
        bucket.0 = (bucket.0 + now.duration_since(bucket.1).as_secs_f64() * self.per_second).min(capacity);
        bucket.1 = now;
        if self.per_second == 0.0 || bucket.0 <= 0.0 {
            return 0;
        }
        let drawn = ((bucket.0 / cost.max(1.0)).floor() as usize).min(wanted);
        bucket.0 -= drawn as f64 * cost.max(1.0);
        drawn
    }

    /// Charges `plies` more than was drawn: the budget may go below zero, and later
    /// units are then drawn from only once it has filled again.
    pub fn charge(&self, plies: f64) {
        self.bucket.lock().expect("the bucket's lock is never poisoned").0 -= plies.max(0.0);
    }

    /// Counts a check of job `job`'s unit.
    pub fn record(&self, job: u64, check: SpotCheck) {
        let mut by_job = self.by_job.lock().expect("the counts' lock is never poisoned");
        let total = by_job.entry(job).or_default();
        total.games += check.games;
        total.lines += check.lines;
        total.plies += check.plies;
    }

    /// What job `job`'s checks replayed since the coordinator started.
    pub fn of_job(&self, job: u64) -> SpotCheck {
        self.by_job.lock().expect("the counts' lock is never poisoned").get(&job).copied().unwrap_or_default()
    }
}

/// What a spot check replayed: the unit's games drawn and verified again, the reported
/// lines verified again, and the plies it cost (as [`SpotChecks`] counts them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpotCheck {
    pub games: u64,
    pub lines: u64,
    pub plies: u64,
}

/// A unit's games, as a spot check verifies them again.
pub enum UnitGames<'a> {
    /// As the job's PGN holds them: its games `first` to `first + count - 1` (made by
    /// [`UnitGames::pgn`]), each parsed when it is checked: parsing the whole unit for
    /// each report took 12% of the coordinator's CPU (`scripts/bench-verify-fleet`).
    Pgn {
        /// The job's PGN.
        file: &'a PgnFile,
        /// The index in the file of the unit's first game.
        first: usize,
        /// Games in the unit.
        count: usize,
    },
    /// Fresh self-play games, played again here as every worker plays them (the unit's
    /// `count` games, from its first).
    SelfPlay {
        /// How the job's games are played.
        settings: &'a PlaySettings,
        /// Games in the unit.
        count: usize,
    },
    /// Rule-hard generated games: hard games `first` to `first + count - 1`.
    Generated {
        /// The number of the unit's first hard game.
        first: u64,
        /// Games in the unit.
        count: usize,
    },
}

/// Games of a PGN unit parsed to estimate what verifying one of them costs: spaced
/// through the unit, so that the estimate follows its games as its mean would.
const COST_SAMPLE: usize = 16;
/// Plies a fresh self-play game is expected to last, for the budget.
const EXPECTED_FRESH_PLIES: u64 = 150;
/// Plies a generated game lasts at most, for the budget (`rules::hard_games`: 60 to
/// 160 plies).
const GENERATED_PLIES: u64 = 160;

impl<'a> UnitGames<'a> {
    /// The unit of `count` games from game `first` (0-based) of `file`, clipped to the
    /// file.
    pub fn pgn(file: &'a PgnFile, first: usize, count: usize) -> Self {
        let first = first.min(file.len());
        UnitGames::Pgn { file, first, count: count.min(file.len() - first) }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            UnitGames::Pgn { count, .. } | UnitGames::SelfPlay { count, .. } | UnitGames::Generated { count, .. } => {
                *count
            }
        }
    }

    /// What verifying one of the unit's games again is expected to cost, in replayed
    /// plies ([`SpotChecks`]) for `rules` rulings a ply ([`VerificationJob::rulings`]),
    /// and for a fresh game the nodes searched to play it again.
    pub fn game_cost(&self, rules: usize) -> f64 {
        let rules = rules as u64;
        match self {
            UnitGames::Pgn { count, .. } => {
                let sample = (*count).min(COST_SAMPLE);
                let plies: usize = (0..sample).map(|i| self.game(i * count / sample, 0).moves.len()).sum();
                (plies as f64 / sample.max(1) as f64 * rules as f64).max(1.0)
            }
            UnitGames::SelfPlay { settings, .. } => {
                let plies = (settings.max_plies as u64).clamp(1, EXPECTED_FRESH_PLIES);
                plies.saturating_mul(rules + settings.nodes) as f64
            }
            UnitGames::Generated { .. } => (GENERATED_PLIES * rules) as f64,
        }
    }

    /// What the unit's game `game` cost to verify again under `rules` rule sets, as
    /// [`Self::game_cost`] expects it.
    pub(super) fn cost_of(&self, game: &PgnGame, rules: usize) -> u64 {
        let plies = game.moves.len() as u64;
        match self {
            UnitGames::Pgn { .. } | UnitGames::Generated { .. } => plies * rules as u64,
            UnitGames::SelfPlay { settings, .. } => plies * (rules as u64 + settings.nodes),
        }
    }

    /// The unit's game `index`, the job's game `first_index + index`.
    pub(super) fn game(&self, index: usize, first_index: usize) -> PgnGame {
        match self {
            UnitGames::Pgn { file, first, .. } => {
                let index = first + index;
                file.games(index..index + 1).pop().expect("the unit's games are the file's: `pgn` clips them")
            }
            UnitGames::SelfPlay { settings, .. } => fresh_game(settings, first_index + index),
            UnitGames::Generated { first, .. } => hard_game_pgn(first + index as u64),
        }
    }
}

/// The game a report line gives (its start and its moves), if it gives one.
fn line_game(line: &Value) -> Option<PgnGame> {
    let start = line.get("start")?.as_str()?;
    let moves: Vec<String> =
        line.get("moves")?.as_array()?.iter().map(|m| m.as_str().map(str::to_owned)).collect::<Option<_>>()?;
    Some(PgnGame {
        tags: vec![("FEN".to_owned(), start.to_owned())],
        notes: vec![None; moves.len()],
        moves,
        result: None,
        comment: None,
    })
}

/// Checks a report's game lines (those [`check_report`] passed) by verifying games of
/// its unit (`scope`: numbered from its first number, under its rule sets, with the
/// metamorphic properties if the job asks) again with the engine's `check_game_with`:
///
/// - every line: the job's game (from its PGN), or for fresh self-play games the game
///   of the line's own start and moves, ruled again to the same verdicts (a fresh game
///   reported unplayable is played again);
/// - `draws` games drawn from the unit at random, played again where fresh, whose
///   lines (or their absence) must be what the arbiter gives.
///
/// Names the first game the report misstates; else says what it replayed. A
/// reference's own partings are not checked (the coordinator has no reference): only
/// the rule sets' verdicts.
pub fn spot_check(
    report: &[Value],
    scope: &ReportScope,
    games: UnitGames,
    draws: usize,
    rng: &mut impl rand::Rng,
) -> Result<SpotCheck, String> {
    let (rules, first_number) = (scope.rules, scope.first_number as usize);
    let rulings = rulings(rules, scope.metamorphic);
    let verify =
        |game: &PgnGame, name: &str| check_game_with(game, rules, name, &mut Tally::default(), None, scope.metamorphic);
    let mut check = SpotCheck::default();
    let first_index = first_number.saturating_sub(1);
    let mut lines: BTreeMap<usize, &Value> = BTreeMap::new();
    for line in report {
        let name = line.get("game").and_then(Value::as_str).unwrap_or_default();
        let number: usize = name.strip_prefix("game ").and_then(|n| n.parse().ok()).unwrap_or(0);
        let index = number.checked_sub(first_number).filter(|&i| i < games.len());
        lines.insert(index.ok_or_else(|| format!("{name}: not a game of this unit"))?, line);
    }
    let mut verified = HashSet::new();
    for (&index, &theirs) in &lines {
        let name = format!("game {}", first_number + index);
        let game = match (&games, line_game(theirs)) {
            (UnitGames::SelfPlay { .. }, Some(game)) => game,
            _ => {
                verified.insert(index);
                check.games += u64::from(matches!(games, UnitGames::SelfPlay { .. }));
                games.game(index, first_index)
            }
        };
        check.lines += 1;
        check.plies += games.cost_of(&game, rulings);
        let ours = verify(&game, &name)?;
        compare(&name, ours.as_ref(), Some(theirs), rules)?;
    }
    let drawn = rand::seq::index::sample(rng, games.len(), draws.min(games.len()));
    let mut drawn: Vec<usize> = drawn.into_iter().filter(|index| !verified.contains(index)).collect();
    drawn.sort_unstable();
    for index in drawn {
        let name = format!("game {}", first_number + index);
        let game = games.game(index, first_index);
        check.games += 1;
        check.plies += games.cost_of(&game, rulings);
        let ours = verify(&game, &name)?;
        compare(&name, ours.as_ref(), lines.get(&index).copied(), rules)?;
    }
    Ok(check)
}
