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

pub mod parting;
pub mod reference;
pub mod reports;
pub mod spot_checks;
pub mod tallies;

#[cfg(test)]
mod tests;

use crate::jobs::checks::{SpecError, bad, check_artifact};
use crate::jobs::selfplay::check_self_play_games;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::rules::verify::ARBITER_BUILD;
use xq_proto::v1;

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
pub(super) fn rulings(rules: &[RuleSet], metamorphic: bool) -> usize {
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
