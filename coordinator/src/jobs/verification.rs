//! Rule verification jobs: the games of a PGN (uploaded, or a test's stored games),
//! fresh self-play games the workers play for the job, or the engine's rule-hard
//! generated games, cut into units of consecutive games, each verified by a worker under
//! the job's rule sets with the engine's `rules::verify::check_game_with` (the judge's
//! code path, as `xq-engine verify` runs it; with the metamorphic properties if the job
//! asks) and reported as JSON lines closed by the unit's tally.
//! The coordinator checks each report's shape and counts before storing it, sums the
//! tallies and serves the lines, and the parting games as PGN. It rules the rule sets'
//! verdicts again itself ([`spot_check`]); a reference's, which it cannot rule, are
//! compared between workers on a sample of units ([`reference_verdicts`]).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::pgn::{Movetext, PgnFile, PgnGame};
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::rules::hard_games::hard_game_pgn;
use xq_engine::xiangqi::rules::metamorphic::Property;
use xq_engine::xiangqi::rules::verify::{
    ARBITER_BUILD, Disagreement, FAIRY_STOCKFISH, Tally, check_game_with, kind_pair, report_tally,
};
use xq_engine::xiangqi::selfplay::{PlaySettings, fresh_game};
use xq_proto::v1;

use crate::jobs::checks::{SpecError, bad, check_artifact};
use crate::jobs::selfplay::check_self_play_games;

/// The rule sets compared when a request names none: the three a tournament may play.
pub const DEFAULT_RULES: [RuleSet; 3] = [RuleSet::Wxf, RuleSet::Asian, RuleSet::Cxq];
/// Games a unit when a request does not say: a second or so of a worker's core.
pub const DEFAULT_GAMES_PER_UNIT: u32 = 1_000;
const MAX_GAMES_PER_UNIT: u32 = 100_000;
/// Generated games a unit when a request does not say, and at most: most generated
/// games part the rule sets, and each parting game's line (its moves, each verdict's
/// cycle) takes several kilobytes of the unit's report, which must fit a message.
pub const DEFAULT_GENERATED_PER_UNIT: u32 = 250;
const MAX_GENERATED_PER_UNIT: u32 = 500;
/// The deepest a verification's fresh self-play games are searched, in nodes a move.
pub const MAX_FRESH_NODES: u64 = 10_000;
/// Fairy-Stockfish's rules through pyffish, the one reference workers offer.
pub const REFERENCE_PYFFISH: &str = "pyffish";
/// One in how many counted units of a job with a reference another worker reports
/// again by default ([`reference_verdicts`]): the coordinator cannot rule the
/// reference's verdicts itself. A worker that forges them on 100 units is caught with
/// odds of 87%, on 230 of 99%, for 2% more of the fleet's work.
pub const RECHECK_ONE_IN: u32 = 50;
/// Rulings of each ply under a rule set with the metamorphic properties, for the
/// scheduler's and the spot checks' estimates: the game, its mirror, its colour swap,
/// and for a game ruled on a repetition (the ones that cost) its suffix and detour.
const METAMORPHIC_RULINGS: usize = 5;

/// The rulings a game's ply costs under `rules`, with or without the properties.
fn rulings(rules: &[RuleSet], metamorphic: bool) -> usize {
    rules.len() * if metamorphic { METAMORPHIC_RULINGS } else { 1 }
}

/// A verification job, checked.
#[derive(Clone, Debug)]
pub struct VerificationJob {
    pub spec: v1::VerificationSpec,
    pub rules: Vec<RuleSet>,
}

impl VerificationJob {
    /// Whether a worker of `capabilities` can verify the job's units: its arbiter is
    /// this coordinator's build (`ARBITER_BUILD`: the spot checks rule the same games
    /// here, and another build may rule them otherwise without anyone lying), and it
    /// has the job's reference, if any.
    pub fn runs_on(&self, capabilities: &v1::Capabilities) -> bool {
        capabilities.arbiter_build == ARBITER_BUILD
            && (self.spec.reference.is_empty() || capabilities.references.contains(&self.spec.reference))
    }

    /// Seconds a unit takes a core of `nps` nodes a second: a million plies a second for
    /// each rule set (several times that with the metamorphic properties, which rule
    /// transformed copies of each game), pyffish's replays from the start (a few
    /// milliseconds a game) for a reference, and the searches of fresh self-play games.
    pub fn unit_seconds(&self, plies_per_game: u32, nps: u64) -> f64 {
        let games = f64::from(self.spec.games_per_unit);
        let plies = f64::from(plies_per_game);
        let reference = if self.spec.reference.is_empty() { 0.0 } else { 0.02 };
        let play = self.spec.selfplay.as_ref().map_or(0.0, |s| plies * s.nodes as f64 / nps.max(1) as f64);
        games * (plies * self.rulings() as f64 / 1e6 + reference + play)
    }

    /// Rulings of a game's plies a verification makes: one under each rule set, and
    /// with the metamorphic properties those of the mirrored and colour-swapped copies
    /// and, for a game ruled on a repetition, of its suffix and its detour.
    pub fn rulings(&self) -> usize {
        rulings(&self.rules, self.spec.metamorphic)
    }

    /// Units to verify: the games cut into units, the last perhaps shorter.
    pub fn units(&self) -> u64 {
        self.spec.games.div_ceil(u64::from(self.spec.games_per_unit))
    }

    /// The index in the job of unit `unit`'s first game.
    pub fn unit_first_game(&self, unit: u64) -> usize {
        unit.saturating_mul(u64::from(self.spec.games_per_unit)).min(self.spec.games) as usize
    }

    /// Games in unit `unit`.
    pub fn unit_games(&self, unit: u64) -> u64 {
        let per_unit = u64::from(self.spec.games_per_unit);
        self.spec.games.saturating_sub(unit * per_unit).min(per_unit)
    }

    /// One line for lists.
    pub fn summary(&self) -> String {
        let names: Vec<&str> = self.rules.iter().map(|r| r.name()).collect();
        let source = match (&self.spec.pgn, &self.spec.selfplay) {
            (Some(pgn), _) => format!("games of {}", pgn.name),
            (None, Some(selfplay)) => {
                let net = selfplay.net.as_ref().map_or(String::new(), |net| format!(", net {}", net.name));
                format!("self-play games ({} nodes, {} random plies{net})", selfplay.nodes, selfplay.random_plies)
            }
            (None, None) if self.spec.generated => {
                format!("generated rule-hard games (from hard game {})", self.spec.first_generated)
            }
            (None, None) => "games".to_owned(),
        };
        let reference =
            if self.spec.reference.is_empty() { String::new() } else { format!(" and {}", self.spec.reference) };
        let metamorphic = if self.spec.metamorphic { " with the metamorphic properties" } else { "" };
        format!("verification of {} {source} under {}{reference}{metamorphic}", self.spec.games, names.join(", "))
    }
}

/// The rule sets `names` ask for (none: [`DEFAULT_RULES`]): two or more, each once.
pub fn rule_sets(names: &[String]) -> Result<Vec<RuleSet>, SpecError> {
    if names.is_empty() {
        return Ok(DEFAULT_RULES.to_vec());
    }
    let mut rules = Vec::with_capacity(names.len());
    for name in names {
        let set: RuleSet =
            name.parse().map_err(|e: xq_engine::xiangqi::rules::UnknownRuleSet| bad("rules", e.to_string()))?;
        if rules.contains(&set) {
            return Err(bad("rules", format!("{} named twice", set.name())));
        }
        rules.push(set);
    }
    if rules.len() < 2 {
        return Err(bad("rules", "two or more rule sets: a verification compares their rulings"));
    }
    Ok(rules)
}

/// Checks a stored or requested spec.
pub fn check_spec(spec: &v1::VerificationSpec) -> Result<VerificationJob, SpecError> {
    if spec.generated && (spec.pgn.is_some() || spec.selfplay.is_some()) {
        return Err(bad("generated", "generated games, or a PGN or self-play games, not both"));
    }
    match (&spec.pgn, &spec.selfplay) {
        (None, None) if spec.generated => {
            if spec.first_generated.checked_add(spec.games).is_none() {
                return Err(bad("first_generated", "the games' numbers pass 2^64"));
            }
        }
        (Some(pgn), None) => check_artifact("pgn", pgn)?,
        (None, Some(selfplay)) => {
            if check_self_play_games(selfplay)? != Variant::Xiangqi {
                return Err(bad("selfplay.variant", "rule sets are Xiangqi's: verify Xiangqi games"));
            }
            if selfplay.nodes > MAX_FRESH_NODES {
                return Err(bad(
                    "selfplay.nodes",
                    format!(
                        "at most {MAX_FRESH_NODES}: the coordinator plays some games of each report again, and \
                         repetitions are frequent at few nodes"
                    ),
                ));
            }
        }
        (Some(_), Some(_)) => return Err(bad("selfplay", "a PGN or self-play games, not both")),
        (None, None) => return Err(bad("pgn", "missing: a PGN, self-play games or generated games")),
    }
    let rules = rule_sets(&spec.rules)?;
    let most = if spec.generated { MAX_GENERATED_PER_UNIT } else { MAX_GAMES_PER_UNIT };
    if !(1..=most).contains(&spec.games_per_unit) {
        let why = if spec.generated { " for generated games, whose reports are long" } else { "" };
        return Err(bad("games_per_unit", format!("between 1 and {most}{why}")));
    }
    if spec.games == 0 {
        let field = if spec.pgn.is_some() { "pgn" } else { "games" };
        return Err(bad(field, "no games to verify"));
    }
    if !matches!(spec.reference.as_str(), "" | REFERENCE_PYFFISH) {
        return Err(bad("reference", format!("'{}': pyffish, or none", spec.reference)));
    }
    let job = VerificationJob { spec: spec.clone(), rules };
    if job.units() > crate::jobs::checks::MAX_UNITS {
        return Err(bad("games_per_unit", "too many units: more games a unit"));
    }
    Ok(job)
}

/// A unit's report that has passed [`check_report`]: its tally and its game lines.
#[derive(Debug)]
pub struct CheckedReport {
    pub tally: Tally,
    pub lines: Vec<Value>,
}

/// What a unit's report may name: its games, numbered from `first_number`, and the
/// job's rule sets and reference.
#[derive(Clone, Copy, Debug)]
pub struct ReportScope<'a> {
    /// The number of the unit's first game ("game N" counts the job's games from 1).
    pub first_number: u64,
    /// Games in the unit.
    pub games: u64,
    /// The job's rule sets.
    pub rules: &'a [RuleSet],
    /// The job's reference ("" for none).
    pub reference: &'a str,
    /// Whether the job checks the metamorphic properties too.
    pub metamorphic: bool,
}

impl VerificationJob {
    /// What unit `unit`'s report may name.
    pub fn scope(&self, unit: u64) -> ReportScope<'_> {
        ReportScope {
            first_number: self.unit_first_game(unit) as u64 + 1,
            games: self.unit_games(unit),
            rules: &self.rules,
            reference: &self.spec.reference,
            metamorphic: self.spec.metamorphic,
        }
    }
}

/// How the kinds of parting name a disagreement ("wxf vs cxq: different ply").
const DISAGREEMENTS: [Disagreement; 4] = [
    Disagreement::OnlyOneRules,
    Disagreement::DifferentPly,
    Disagreement::DifferentOutcome,
    Disagreement::DifferentReason,
];

/// The name under which a job's reference reports its partings: the job's `pyffish`
/// as Fairy-Stockfish's.
fn reported_name(reference: &str) -> &str {
    if reference == REFERENCE_PYFFISH { FAIRY_STOCKFISH } else { reference }
}

/// Why `kind` is not a parting a job of `scope` can report, if it is not: two of its
/// rule sets (the first of them and its reference) and a disagreement's name.
fn foreign_kind(kind: &str, scope: &ReportScope) -> Option<String> {
    let (a, b) = kind_pair(kind);
    let how = kind.split_once(": ").map_or("", |(_, how)| how);
    let names: Vec<&str> = scope.rules.iter().map(|r| r.name()).collect();
    // A property broken under one rule set: "wxf metamorphic: detour".
    if scope.metamorphic
        && let Some(rules) = a.strip_suffix(" metamorphic")
        && b.is_empty()
        && names.contains(&rules)
        && Property::ALL.iter().any(|p| p.name() == how)
    {
        return None;
    }
    let reference = reported_name(scope.reference);
    let known = names.contains(&a)
        && a != b
        && (names.contains(&b) || (!reference.is_empty() && b == reference))
        && DISAGREEMENTS.iter().any(|d| d.name() == how);
    if known {
        return None;
    }
    let shown: String = kind.chars().filter(|c| !c.is_control()).take(80).collect();
    let reference = if scope.reference.is_empty() { String::new() } else { format!(" and {}", scope.reference) };
    let metamorphic = if scope.metamorphic { " or metamorphic property" } else { "" };
    Some(format!(
        "a kind '{shown}' that is no parting{metamorphic} of the job's rule sets ({}){reference}",
        names.join(", ")
    ))
}

/// Checks a unit's report against the games it should cover (`scope`): a JSON object
/// naming one of the unit's games on each line but the last ("game N", no game twice),
/// its kinds of parting only between the job's rule sets and its reference, and the
/// last line `{"tally": ...}` with the unit's games and exactly the counts its lines
/// give (`Tally::count`: refused, parting, by kind, by articles), so that no count can
/// be made up or counted twice. A refusal names the line at fault.
pub fn check_report(report: &str, scope: &ReportScope) -> Result<CheckedReport, String> {
    let games = scope.games;
    let mut lines: Vec<&str> = report.lines().collect();
    let last = lines.pop().ok_or("an empty report: it needs the unit's tally")?;
    let tally = report_tally(last).ok_or("the last line is not the unit's {\"tally\": ...}")?;
    if tally.games != games {
        return Err(format!("a tally of {} games for a unit of {games}", tally.games));
    }
    if lines.len() as u64 > games {
        return Err(format!("{} lines for a unit of {games} games", lines.len()));
    }
    let range = scope.first_number..scope.first_number + games;
    let mut named = HashSet::with_capacity(lines.len());
    let mut recount = Tally::default();
    let mut values = Vec::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        let at = index + 1;
        let value: Value = serde_json::from_str(line).map_err(|e| format!("line {at}: not JSON ({e})"))?;
        let Some(name) = value.get("game").and_then(Value::as_str) else {
            return Err(format!("line {at}: no game named"));
        };
        let number = name.strip_prefix("game ").and_then(|n| n.parse::<u64>().ok());
        let Some(number) = number.filter(|n| range.contains(n) && format!("game {n}") == name) else {
            let shown: String = name.chars().filter(|c| !c.is_control()).take(40).collect();
            return Err(format!(
                "line {at}: '{shown}' is not a game of this unit (game {} to game {})",
                range.start,
                range.end - 1
            ));
        };
        if !named.insert(number) {
            return Err(format!("line {at}: game {number} named twice"));
        }
        let broken = scope.metamorphic && value.get("metamorphic").is_some_and(Value::is_array);
        if value.get("error").is_none() && !value.get("verdicts").is_some_and(Value::is_array) && !broken {
            let metamorphic = if scope.metamorphic { ", nor broken properties" } else { "" };
            return Err(format!("line {at}: neither an error nor verdicts{metamorphic}"));
        }
        if let Some(kinds) = value.get("kinds") {
            let kinds = kinds.as_array().ok_or_else(|| format!("line {at}: kinds that are not a list"))?;
            for kind in kinds {
                let kind = kind.as_str().ok_or_else(|| format!("line {at}: a kind that is not text"))?;
                if let Some(problem) = foreign_kind(kind, scope) {
                    return Err(format!("line {at}: {problem}"));
                }
            }
        }
        recount.count(Some(&value));
        values.push(value);
    }
    recount.games = games;
    if recount != tally {
        return Err(format!(
            "a tally other than its lines give: {} refused and {} parting games over {} lines, {} refused and {} parting \
             counted, by kind and by articles {}",
            tally.refused,
            tally.parting,
            lines.len(),
            recount.refused,
            recount.parting,
            if (&recount.by_kind, &recount.by_articles) == (&tally.by_kind, &tally.by_articles) {
                "the same"
            } else {
                "not the same"
            }
        ));
    }
    Ok(CheckedReport { tally, lines: values })
}

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

/// Each verification job's counts, summed as its reports are counted, so that reading
/// them (the dashboard refetches a job's every few seconds, and for anyone when it is
/// public) is a lookup, not a read and parse of every stored report (finding N4 of the
/// security review). A job's counts are read from its stored reports once, at their
/// first read after the coordinator starts; reports counted during that read wait in
/// the job's entry and join after it. Each unit counts once, whoever reports it.
#[derive(Default)]
pub struct Tallies {
    jobs: std::sync::Mutex<HashMap<u64, JobTally>>,
}

#[derive(Default)]
struct JobTally {
    /// Whether the stored reports have been read into `tally`.
    loaded: bool,
    tally: Tally,
    units: HashSet<u64>,
    /// Units counted while the stored reports were being read.
    pending: Vec<(u64, Tally)>,
    /// Forgotten while they were being read: what that read found is not kept.
    forgotten: bool,
}

impl JobTally {
    fn count(&mut self, unit: u64, tally: &Tally) {
        if self.units.insert(unit) {
            self.tally.merge(tally);
        }
    }
}

/// Whether a job's counts are kept already, or who reads them from the stored reports.
pub enum TallyRead {
    /// The job's counts.
    Kept(Tally),
    /// The caller reads the stored reports and gives them to [`Tallies::loaded`].
    Load,
    /// Another caller is reading them: read the stored reports without keeping them.
    Busy,
}

impl Tallies {
    fn jobs(&self) -> std::sync::MutexGuard<'_, HashMap<u64, JobTally>> {
        self.jobs.lock().expect("the tallies' lock is never poisoned")
    }

    /// Counts unit `unit`'s report (its `tally`) in job `job`'s counts, if they are kept
    /// or being read; a unit counted before is not counted again.
    pub fn count(&self, job: u64, unit: u64, tally: &Tally) {
        if let Some(entry) = self.jobs().get_mut(&job) {
            if entry.loaded {
                entry.count(unit, tally);
            } else {
                entry.pending.push((unit, tally.clone()));
            }
        }
    }

    /// Job `job`'s counts if they are kept; else whether the caller should read them.
    pub fn read(&self, job: u64) -> TallyRead {
        let mut jobs = self.jobs();
        match jobs.get(&job) {
            Some(entry) if entry.loaded => TallyRead::Kept(entry.tally.clone()),
            Some(_) => TallyRead::Busy,
            None => {
                jobs.insert(job, JobTally::default());
                TallyRead::Load
            }
        }
    }

    /// Keeps job `job`'s counts as its stored reports give them (`stored`, a tally a
    /// unit), with the units counted while they were read; gives the counts.
    pub fn loaded(&self, job: u64, stored: impl IntoIterator<Item = (u64, Tally)>) -> Tally {
        let mut jobs = self.jobs();
        let entry = jobs.entry(job).or_default();
        for (unit, tally) in stored.into_iter().chain(std::mem::take(&mut entry.pending)) {
            entry.count(unit, &tally);
        }
        entry.loaded = true;
        let tally = entry.tally.clone();
        if entry.forgotten {
            jobs.remove(&job);
        }
        tally
    }

    /// Forgets job `job`'s counts (units of it were set aside): the next read reads the
    /// stored reports again, and a read under way now is not kept.
    pub fn forget(&self, job: u64) {
        let mut jobs = self.jobs();
        match jobs.get_mut(&job) {
            Some(entry) if !entry.loaded => entry.forgotten = true,
            Some(_) => drop(jobs.remove(&job)),
            None => {}
        }
    }

    /// Forgets a read of job `job`'s stored reports that failed: the next read tries again.
    pub fn failed(&self, job: u64) {
        let mut jobs = self.jobs();
        if jobs.get(&job).is_some_and(|entry| !entry.loaded) {
            jobs.remove(&job);
        }
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

    fn len(&self) -> usize {
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
    fn cost_of(&self, game: &PgnGame, rules: usize) -> u64 {
        let plies = game.moves.len() as u64;
        match self {
            UnitGames::Pgn { .. } | UnitGames::Generated { .. } => plies * rules as u64,
            UnitGames::SelfPlay { settings, .. } => plies * (rules as u64 + settings.nodes),
        }
    }

    /// The unit's game `index`, the job's game `first_index + index`.
    fn game(&self, index: usize, first_index: usize) -> PgnGame {
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

/// The kinds of parting between two of `rules` a line gives ("wxf vs cxq: ..."), not
/// those with a reference.
fn rule_kinds<'a>(line: &'a Value, rules: &[RuleSet]) -> Vec<&'a str> {
    let names: Vec<&str> = rules.iter().map(|r| r.name()).collect();
    let kinds = line.get("kinds").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    kinds
        .iter()
        .filter_map(Value::as_str)
        .filter(|kind| {
            let (a, b) = kind_pair(kind);
            names.contains(&a) && (b.is_empty() || names.contains(&b))
        })
        .collect()
}

/// Whether a worker's line for game `name` says what the coordinator's check found.
fn compare(name: &str, ours: Option<&Value>, theirs: Option<&Value>, rules: &[RuleSet]) -> Result<(), String> {
    match (ours, theirs) {
        (None, None) => Ok(()),
        (None, Some(theirs))
            if theirs.get("error").is_none()
                && rule_kinds(theirs, rules).is_empty()
                && theirs.get("metamorphic").is_none() =>
        {
            Ok(())
        }
        (None, Some(_)) => Err(format!("{name}: reported as parting or unplayable, where the rule sets agree")),
        (Some(ours), None) => match ours.get("error") {
            Some(error) => Err(format!("{name}: left out, where it cannot be replayed ({error})")),
            None => Err(format!("{name}: left out, where the rule sets part ({})", rule_kinds(ours, rules).join("; "))),
        },
        (Some(ours), Some(theirs)) => {
            if ours.get("error") != theirs.get("error") {
                return Err(format!("{name}: its error is not the arbiter's"));
            }
            if ours.get("moves") != theirs.get("moves") || ours.get("start") != theirs.get("start") {
                return Err(format!("{name}: not the game's start and moves"));
            }
            if ours.get("verdicts") != theirs.get("verdicts") || rule_kinds(ours, rules) != rule_kinds(theirs, rules) {
                return Err(format!("{name}: verdicts other than the arbiter's"));
            }
            if ours.get("metamorphic") != theirs.get("metamorphic") {
                return Err(format!("{name}: broken metamorphic properties other than the arbiter's"));
            }
            Ok(())
        }
    }
}

/// What a unit's report lines (as [`check_report`] passed them) say of the job's
/// `reference`'s verdicts, which the spot checks cannot check: for each game where the
/// reference parts from the first rule set, by its number, its kinds of parting with
/// the reference and the reference's verdict (its ply and result, and the known
/// difference that explains the parting). The games where it agrees are left out,
/// whether a line names them or not (one does when the rule sets part among
/// themselves), and so is the rest of each line, the rule sets' verdicts, which the
/// spot checks verify. Lines carry no timing: two honest workers of the coordinator's
/// arbiter build with the same reference give the same.
pub fn reference_verdicts(lines: &[Value], reference: &str) -> BTreeMap<u64, Value> {
    let name = reported_name(reference);
    let verdicts = lines.iter().filter_map(|line| {
        let number = line.get("game")?.as_str()?.strip_prefix("game ")?.parse().ok()?;
        let kinds = line.get("kinds")?.as_array()?.iter().filter_map(Value::as_str);
        let kinds: Vec<&str> = kinds.filter(|kind| kind_pair(kind).1 == name).collect();
        let verdict = serde_json::json!({ "kinds": kinds, "reference": line.get("reference") });
        (!kinds.is_empty()).then_some((number, verdict))
    });
    verdicts.collect()
}

/// The first game on which two reports' [`reference_verdicts`] differ, if any.
pub fn reference_difference(a: &BTreeMap<u64, Value>, b: &BTreeMap<u64, Value>) -> Option<u64> {
    a.keys().chain(b.keys()).copied().filter(|game| a.get(game) != b.get(game)).min()
}

/// A stored report's game lines, without its tally.
pub fn report_games(report: &str) -> String {
    let mut lines: Vec<&str> = report.lines().collect();
    lines.pop();
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// Report lines' parting games as PGN, one after the other ([`parting_pgn`]).
pub fn parting_pgns(lines: &str, job: u64) -> String {
    lines.lines().filter_map(|line| parting_pgn(line, job)).collect()
}

/// A parting game's report line as PGN: its start and moves, the verdicts in a comment
/// before the moves; `None` for a line without moves (a game that could not be
/// replayed).
pub fn parting_pgn(line: &str, job: u64) -> Option<String> {
    let value: Value = serde_json::from_str(line).ok()?;
    let moves: Vec<&str> = value.get("moves")?.as_array()?.iter().filter_map(Value::as_str).collect();
    let start = value.get("start")?.as_str()?;
    let quoted = |text: &str| text.replace('\\', "\\\\").replace('"', "\\\"");
    let mut text = format!(
        "[Event \"verification {job}\"]\n[Site \"{}\"]\n[Result \"*\"]\n[SetUp \"1\"]\n[FEN \"{}\"]\n\n",
        quoted(value.get("game")?.as_str()?),
        quoted(start)
    );
    let verdicts: Vec<String> = value
        .get("verdicts")?
        .as_array()?
        .iter()
        .map(|v| match v["ply"].as_u64() {
            Some(ply) => format!(
                "{}: {} at ply {ply}, {} ({})",
                v["rules"].as_str().unwrap_or("?"),
                v["result"].as_str().unwrap_or("?"),
                v["reason"].as_str().unwrap_or("?"),
                v["article"].as_str().unwrap_or("?")
            ),
            None => format!("{}: no ruling", v["rules"].as_str().unwrap_or("?")),
        })
        .collect();
    let mut movetext = Movetext::default();
    movetext.push(&format!("{{{}}}", verdicts.join("; ").replace(['{', '}'], "")));
    let black_first = start.split_whitespace().nth(1) == Some("b");
    for (index, mv) in moves.iter().enumerate() {
        let ply = index + usize::from(black_first);
        match (ply % 2, index) {
            (0, _) => movetext.push(&format!("{}. {mv}", ply / 2 + 1)),
            (_, 0) => movetext.push(&format!("{}... {mv}", ply / 2 + 1)),
            _ => movetext.push(mv),
        }
    }
    movetext.push("*");
    text.push_str(&movetext.finish());
    text.push_str("\n\n");
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xq_engine::xiangqi::pgn::parse_pgn;
    use xq_engine::xiangqi::rules::verify::unit_report;

    /// What a unit of `games` games from game `first_number` may name, under the
    /// default rule sets.
    fn scope(first_number: u64, games: u64) -> ReportScope<'static> {
        ReportScope { first_number, games, rules: &DEFAULT_RULES, reference: "", metamorphic: false }
    }

    /// A chariot chasing a lone cannon (WXF and Asian: the chaser's loss at ply 8; CXQ
    /// allows six chasing moves), a quiet game and one with an illegal second move.
    fn pgn_text() -> String {
        let cycles = ["b1a1 a0b0 a1b1 b0a0"; 4].join(" ");
        format!(
            "[FEN \"4k4/9/9/9/9/9/9/9/1R7/c2K5 w - - 0 1\"]\n\n{cycles} *\n\n\
             [Event \"quiet\"]\n\n1. h2e2 h9g7 *\n\n[Event \"bad\"]\n\n1. h2e2 e2e9 *\n"
        )
    }

    /// [`pgn_text`]'s games.
    fn games() -> Vec<xq_engine::xiangqi::pgn::PgnGame> {
        parse_pgn(&pgn_text()).unwrap()
    }

    #[test]
    fn a_worker_s_report_passes_and_forged_ones_are_refused_naming_the_fault() {
        let report = unit_report(&games(), 1, &DEFAULT_RULES, None).unwrap();
        let tally = check_report(&report, &scope(1, 3)).unwrap().tally;
        assert_eq!((tally.games, tally.parting, tally.refused), (3, 1, 1));
        assert!(check_report(&report, &scope(1, 4)).unwrap_err().contains("a tally of 3 games for a unit of 4"));
        // A parting game left out, the tally kept.
        let lines: Vec<&str> = report.lines().collect();
        let dropped = format!("{}\n{}\n", lines[1], lines[2]);
        assert!(check_report(&dropped, &scope(1, 3)).unwrap_err().contains("1 parting"), "{dropped}");
        // Counts by kind or article that its lines do not give.
        let mut inflated = report_tally(&report).unwrap();
        *inflated.by_kind.entry("wxf vs cxq: different ply".to_owned()).or_default() += 5;
        let forged = format!("{}\n{}\n{}\n", lines[0], lines[1], serde_json::json!({ "tally": inflated.to_json() }));
        let found = check_report(&forged, &scope(1, 3)).unwrap_err();
        assert!(found.ends_with("by kind and by articles not the same"), "{found}");
        assert!(check_report("", &scope(1, 3)).unwrap_err().contains("empty"));
        assert!(check_report("not json\n", &scope(1, 3)).unwrap_err().contains("tally"));
        let garbage = format!("{{\"game\": 1}}\n{}\n", lines[2]);
        assert!(check_report(&garbage, &scope(1, 3)).is_err());
        assert_eq!(report_games(&report).lines().count(), 2);
    }

    #[test]
    fn a_report_names_each_game_of_its_unit_once_and_only_the_job_s_kinds_of_parting() {
        let report = unit_report(&games(), 1, &DEFAULT_RULES, None).unwrap();
        let lines: Vec<&str> = report.lines().collect();
        let recounted = |lines: &[String]| {
            let mut tally = Tally::default();
            for line in lines {
                tally.count(Some(&serde_json::from_str(line).unwrap()));
            }
            tally.games = 3;
            let mut text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            text.push_str(&format!("{}\n", serde_json::json!({ "tally": tally.to_json() })));
            text
        };
        // A true parting line twice, renamed or not: refused, naming the line.
        let twice = recounted(&[lines[0].to_owned(), lines[0].to_owned()]);
        assert_eq!(check_report(&twice, &scope(1, 3)).unwrap_err(), "line 2: game 1 named twice");
        let padded = recounted(&[lines[0].to_owned(), lines[0].replace("game 1", "game 01")]);
        let found = check_report(&padded, &scope(1, 3)).unwrap_err();
        assert_eq!(found, "line 2: 'game 01' is not a game of this unit (game 1 to game 3)");
        // The unit of games 4 to 6 holds no game 1.
        let found = check_report(&report, &scope(4, 3)).unwrap_err();
        assert_eq!(found, "line 1: 'game 1' is not a game of this unit (game 4 to game 6)");
        // Kinds made up, of another rule set, or of a reference the job has not.
        for (kind, with) in [
            ("wxf vs cxq: made up", ""),
            ("wxf vs computer: different ply", ""),
            ("wxf vs fairy-stockfish: different ply", ""),
            ("wxf vs pyffish: different ply", "pyffish"),
            ("wxf vs wxf: different ply", "pyffish"),
        ] {
            let mut line: Value = serde_json::from_str(lines[0]).unwrap();
            line["kinds"] = serde_json::json!([kind]);
            let forged = recounted(&[line.to_string()]);
            let scope = ReportScope { reference: with, ..scope(1, 3) };
            let found = check_report(&forged, &scope).unwrap_err();
            assert!(found.starts_with(&format!("line 1: a kind '{kind}' that is no parting")), "{found}");
        }
        let mut line: Value = serde_json::from_str(lines[0]).unwrap();
        line["kinds"] = serde_json::json!(["wxf vs fairy-stockfish: different ply"]);
        let with_reference = ReportScope { reference: "pyffish", ..scope(1, 3) };
        assert!(check_report(&recounted(&[line.to_string()]), &with_reference).is_ok());
    }

    /// A report's game lines, as `check_report` passes them.
    fn lines_of(report: &str) -> Vec<Value> {
        let games = report_tally(report).unwrap().games;
        let first = report.lines().next().and_then(|l| serde_json::from_str::<Value>(l).ok());
        let first = first.and_then(|l| l["game"].as_str()?.strip_prefix("game ")?.parse().ok()).unwrap_or(1);
        check_report(report, &ReportScope { first_number: first, ..scope(1, games) }).unwrap().lines
    }

    /// A report whose tally is made to agree with its lines, as a forger would.
    fn with_tally(lines: &[String], games: u64) -> String {
        let mut tally = Tally::default();
        for line in lines {
            tally.count(Some(&serde_json::from_str(line).unwrap()));
        }
        tally.games = games;
        let mut report: String = lines.iter().map(|l| format!("{l}\n")).collect();
        report.push_str(&serde_json::json!({ "tally": tally.to_json() }).to_string());
        report.push('\n');
        report
    }

    #[test]
    fn spot_checks_pass_honest_reports_and_name_the_game_a_forged_one_misstates() {
        use rand::SeedableRng;
        let games = games();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let report = unit_report(&games, 5, &DEFAULT_RULES, None).unwrap();
        // The unit of games 5 to 7, the file's last three (asked for one more: clipped).
        let before = "[Event \"before\"]\n\n1. h2e2 h9g7 *\n\n".repeat(4);
        let file = PgnFile::read(format!("{before}{}", pgn_text()).as_bytes()).unwrap();
        let pgn = |games: &Vec<PgnGame>| UnitGames::pgn(&file, 4, games.len() + 1);
        // The expected cost of a game, its plies by its rulings: the mean of the three.
        let plies: usize = games.iter().map(|g| g.moves.len()).sum();
        assert_eq!(pgn(&games).game_cost(3), (plies * 3) as f64 / 3.0);
        assert_eq!(
            spot_check(&lines_of(&report), &scope(5, games.len() as u64), pgn(&games), SPOT_CHECKED_GAMES, &mut rng)
                .map(drop),
            Ok(())
        );
        let lines: Vec<String> = report.lines().take(2).map(str::to_owned).collect();
        // Units of fewer games than are drawn: every game and line is checked.
        let left_out = with_tally(&lines[1..], 3);
        let found =
            spot_check(&lines_of(&left_out), &scope(5, games.len() as u64), pgn(&games), SPOT_CHECKED_GAMES, &mut rng)
                .unwrap_err();
        assert!(found.starts_with("game 5: left out, where the rule sets part (wxf vs cxq"), "{found}");
        let mut moved: Value = serde_json::from_str(&lines[0]).unwrap();
        moved["verdicts"][0]["ply"] = serde_json::json!(12);
        let misstated = with_tally(&[moved.to_string(), lines[1].clone()], 3);
        let found =
            spot_check(&lines_of(&misstated), &scope(5, games.len() as u64), pgn(&games), SPOT_CHECKED_GAMES, &mut rng)
                .unwrap_err();
        assert_eq!(found, "game 5: verdicts other than the arbiter's");
        // Every line is verified again, with no game drawn.
        let found =
            spot_check(&lines_of(&misstated), &scope(5, games.len() as u64), pgn(&games), 0, &mut rng).unwrap_err();
        assert_eq!(found, "game 5: verdicts other than the arbiter's");
        // The quiet game reported as parting, with the chase's line renamed.
        let mut renamed: Value = serde_json::from_str(&lines[0]).unwrap();
        renamed["game"] = serde_json::json!("game 6");
        let made_up = with_tally(&[lines[0].clone(), renamed.to_string(), lines[1].clone()], 3);
        let found =
            spot_check(&lines_of(&made_up), &scope(5, games.len() as u64), pgn(&games), SPOT_CHECKED_GAMES, &mut rng)
                .unwrap_err();
        assert!(found.starts_with("game 6: "), "{found}");
        let foreign = with_tally(&[renamed.to_string().replace("game 6", "game 9")], 3);
        let found =
            spot_check(&lines_of(&foreign), &scope(5, games.len() as u64), pgn(&games), SPOT_CHECKED_GAMES, &mut rng)
                .unwrap_err();
        assert_eq!(found, "game 9: not a game of this unit");
    }

    #[test]
    fn spot_checks_of_fresh_self_play_games_play_them_again() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let settings =
            PlaySettings { nodes: 20, random_plies: 8, seed: 1, rules: RuleSet::Wxf, max_plies: 400, network: None };
        // A unit of the job's games 31 to 70 (as a worker plays them), which holds
        // games the rule sets part on (the seed is fixed: so does every run).
        let games: Vec<PgnGame> = (30..70).map(|g| fresh_game(&settings, g)).collect();
        let report = unit_report(&games, 31, &DEFAULT_RULES, None).unwrap();
        let lines: Vec<String> = report.lines().filter(|l| !l.starts_with("{\"tally")).map(str::to_owned).collect();
        assert!((1..=SPOT_CHECKED_GAMES).contains(&lines.len()), "{report}");
        let fresh = || UnitGames::SelfPlay { settings: &settings, count: 40 };
        assert_eq!(
            spot_check(&lines_of(&report), &scope(31, 40), fresh(), SPOT_CHECKED_GAMES, &mut rng).map(drop),
            Ok(())
        );
        // A verdict misstated: every line is drawn when a unit has 8 or fewer.
        let mut moved: Value = serde_json::from_str(&lines[0]).unwrap();
        let name = moved["game"].as_str().unwrap().to_owned();
        moved["verdicts"][0]["ply"] = serde_json::json!(3);
        let misstated = with_tally(&[[moved.to_string()].as_slice(), &lines[1..]].concat(), 40);
        let found =
            spot_check(&lines_of(&misstated), &scope(31, 40), fresh(), SPOT_CHECKED_GAMES, &mut rng).unwrap_err();
        assert_eq!(found, format!("{name}: verdicts other than the arbiter's"));
        // Ruled again from the line's own moves: no game played again.
        let found = spot_check(&lines_of(&misstated), &scope(31, 40), fresh(), 0, &mut rng).unwrap_err();
        assert_eq!(found, format!("{name}: verdicts other than the arbiter's"));
        let honest = spot_check(&lines_of(&report), &scope(31, 40), fresh(), 0, &mut rng).unwrap();
        assert_eq!((honest.games, honest.lines), (0, lines.len() as u64));
        // A game marked unplayable in place of its parting line, to hide it.
        let hidden = format!(r#"{{"game":"{name}","error":"ply 3: made up"}}"#);
        let hiding = with_tally(&[[hidden].as_slice(), &lines[1..]].concat(), 40);
        let found = spot_check(&lines_of(&hiding), &scope(31, 40), fresh(), SPOT_CHECKED_GAMES, &mut rng).unwrap_err();
        assert_eq!(found, format!("{name}: its error is not the arbiter's"));
    }

    #[test]
    fn the_spot_check_budget_draws_no_more_than_it_holds() {
        let checks = SpotChecks::new(1000.0);
        assert_eq!(checks.draw(8, 300.0), 3, "a second's worth to start with");
        assert_eq!(checks.draw(8, 300.0), 0);
        checks.charge(5000.0);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(checks.draw(8, 1.0), 0, "in debt");
        // A game dearer than a second's budget waits for the bucket to fill to its cost.
        let dear = SpotChecks::new(10.0);
        assert_eq!(dear.draw(8, 1e6), 0);
        assert_eq!(SpotChecks::new(0.0).draw(8, 1.0), 0, "no budget, no draws");
    }

    /// Generated games with the metamorphic properties, as a worker verifies them: the
    /// honest report passes the shape check and the spot checks; a forged broken
    /// property is refused by the spot check (the arbiter keeps the property), and a
    /// metamorphic kind in a job that did not ask for the properties by the shape check.
    #[test]
    fn generated_games_with_metamorphic_properties_are_checked_like_any_others() {
        use xq_engine::xiangqi::rules::verify::unit_report_with;
        let (first, count) = (5_000_u64, 30_usize);
        let games: Vec<PgnGame> = (0..count as u64).map(|g| hard_game_pgn(first + g)).collect();
        let report = unit_report_with(&games, 1, &DEFAULT_RULES, true, None).unwrap();
        let metamorphic = ReportScope { metamorphic: true, ..scope(1, count as u64) };
        let lines = check_report(&report, &metamorphic).unwrap().lines;
        assert!(!lines.is_empty(), "generated games part the rule sets");
        let unit = || UnitGames::Generated { first, count };
        let mut rng = rand::rng();
        let honest = spot_check(&lines, &metamorphic, unit(), SPOT_CHECKED_GAMES, &mut rng).unwrap();
        assert_eq!(honest.lines, lines.len() as u64);

        // A quiet game (one the report leaves out) reported as breaking the detour.
        let numbered: HashSet<&str> = lines.iter().filter_map(|l| l["game"].as_str()).collect();
        let quiet = (1..=count).map(|n| format!("game {n}")).find(|n| !numbered.contains(n.as_str())).unwrap();
        let forged = serde_json::json!({
            "game": quiet,
            "metamorphic": [{"rules": "wxf", "property": "detour"}],
            "kinds": ["wxf metamorphic: detour"],
        });
        let mut forged_lines: Vec<String> = report.lines().map(str::to_owned).collect();
        forged_lines.pop();
        forged_lines.push(forged.to_string());
        let forged_report = with_tally(&forged_lines, count as u64);
        let checked = check_report(&forged_report, &metamorphic).unwrap().lines;
        let found = spot_check(&checked, &metamorphic, unit(), 0, &mut rng).unwrap_err();
        assert!(found.contains(&format!("{quiet}: reported as parting or unplayable")), "{found}");
        let refused = check_report(&forged_report, &scope(1, count as u64)).unwrap_err();
        assert!(refused.ends_with("neither an error nor verdicts"), "{refused}");
        let other = forged_report.replace("wxf metamorphic: detour", "computer metamorphic: detour");
        let refused = check_report(&other, &metamorphic).unwrap_err();
        assert!(refused.contains("no parting or metamorphic property of the job's rule sets"), "{refused}");
    }

    #[test]
    fn kept_tallies_count_each_unit_once_whether_it_lands_before_during_or_after_the_read() {
        let unit = |games: u64, parting: u64| Tally { games, parting, ..Tally::default() };
        let tallies = Tallies::default();
        tallies.count(1, 0, &unit(10, 1));
        assert!(matches!(tallies.read(1), TallyRead::Load), "not kept before a first read");
        assert!(matches!(tallies.read(1), TallyRead::Busy), "one reader loads");
        // Units 1 and 2 land during the read; the read finds units 0 and 1 stored.
        tallies.count(1, 1, &unit(10, 2));
        tallies.count(1, 2, &unit(5, 0));
        let loaded = tallies.loaded(1, [(0, unit(10, 1)), (1, unit(10, 2))]);
        assert_eq!((loaded.games, loaded.parting), (25, 3));
        tallies.count(1, 2, &unit(5, 0));
        tallies.count(1, 3, &unit(5, 4));
        let TallyRead::Kept(kept) = tallies.read(1) else { panic!("kept after the read") };
        assert_eq!((kept.games, kept.parting), (30, 7));
        // A failed read is forgotten: the next reader loads.
        assert!(matches!(tallies.read(2), TallyRead::Load));
        tallies.failed(2);
        assert!(matches!(tallies.read(2), TallyRead::Load));
    }

    #[test]
    fn forgotten_tallies_are_read_again_and_a_read_under_way_is_not_kept() {
        let unit = |games: u64| Tally { games, ..Tally::default() };
        let tallies = Tallies::default();
        assert!(matches!(tallies.read(1), TallyRead::Load));
        tallies.loaded(1, [(0, unit(10)), (1, unit(10))]);
        tallies.forget(1);
        assert!(matches!(tallies.read(1), TallyRead::Load), "read again from the stored reports");
        // Forgotten during that read: what it found is given, not kept.
        tallies.forget(1);
        assert_eq!(tallies.loaded(1, [(0, unit(10))]).games, 10);
        assert!(matches!(tallies.read(1), TallyRead::Load));
        assert_eq!(tallies.loaded(1, [(1, unit(10))]).games, 10);
        let TallyRead::Kept(kept) = tallies.read(1) else { panic!("kept after a read not forgotten") };
        assert_eq!(kept.games, 10);
    }

    /// A reference that never rules, under Fairy-Stockfish's name.
    struct Silent;

    impl xq_engine::xiangqi::rules::verify::Reference for Silent {
        fn name(&self) -> &'static str {
            FAIRY_STOCKFISH
        }
        fn verdict(
            &mut self,
            _: &xq_engine::xiangqi::Position,
            _: &[xq_engine::xiangqi::Move],
            _: &[usize],
        ) -> Result<Option<(usize, xq_engine::xiangqi::rules::Outcome)>, String> {
            Ok(None)
        }
    }

    #[test]
    fn two_reports_are_compared_on_the_reference_s_verdicts_alone() {
        let games = games();
        let with_reference = ReportScope { reference: REFERENCE_PYFFISH, ..scope(1, 3) };
        let honest = unit_report(&games, 1, &DEFAULT_RULES, Some(&mut Silent)).unwrap();
        let honest = reference_verdicts(&check_report(&honest, &with_reference).unwrap().lines, REFERENCE_PYFFISH);
        // The chase, which WXF rules and the reference does not: its kind and verdict.
        assert_eq!(honest.keys().copied().collect::<Vec<_>>(), [1]);
        assert_eq!(honest[&1]["kinds"], serde_json::json!(["wxf vs fairy-stockfish: only one rules"]));
        assert_eq!(honest[&1]["reference"]["result"], "*");
        // The rule sets' own verdicts are not compared (the spot checks verify them).
        let again = unit_report(&games, 1, &DEFAULT_RULES, Some(&mut Silent)).unwrap();
        let mut lines = check_report(&again, &with_reference).unwrap().lines;
        lines[0]["verdicts"] = serde_json::json!([]);
        assert_eq!(reference_difference(&honest, &reference_verdicts(&lines, REFERENCE_PYFFISH)), None);
        // A report that has the reference agree everywhere hides the chase's parting.
        let forged = unit_report(&games, 1, &DEFAULT_RULES, None).unwrap();
        let forged = reference_verdicts(&check_report(&forged, &with_reference).unwrap().lines, REFERENCE_PYFFISH);
        assert_eq!(reference_difference(&honest, &forged), Some(1));
        assert_eq!(reference_difference(&forged, &honest), Some(1));
    }

    #[test]
    fn a_parting_game_reads_back_as_pgn_with_its_moves_and_verdicts() {
        let report = unit_report(&games(), 7, &DEFAULT_RULES, None).unwrap();
        let line = report.lines().next().unwrap();
        let pgn = parting_pgn(line, 12).unwrap();
        let parsed = parse_pgn(&pgn).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].moves, games()[0].moves);
        assert_eq!(parsed[0].tag("Site"), Some("game 7"));
        assert_eq!(parsed[0].tag("Event"), Some("verification 12"));
        assert!(pgn.contains("wxf: 0-1 at ply 8"), "{pgn}");
        // The unplayable game's line has no moves to write.
        assert_eq!(parting_pgn(report.lines().nth(1).unwrap(), 12), None);
    }

    #[test]
    fn rule_sets_are_two_or_more_each_once() {
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert_eq!(rule_sets(&[]).unwrap(), DEFAULT_RULES);
        assert!(rule_sets(&names(&["wxf"])).unwrap_err().problem.contains("two or more"));
        assert!(rule_sets(&names(&["wxf", "wxf"])).unwrap_err().problem.contains("named twice"));
        assert!(rule_sets(&names(&["wxf", "fide"])).is_err());
        assert_eq!(rule_sets(&names(&["cxq", "computer"])).unwrap(), [RuleSet::Cxq, RuleSet::Computer]);
    }
}
