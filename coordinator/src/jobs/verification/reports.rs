//! A worker's verification report checked before it is stored: its shape, each game of
//! its unit named once, only the job's kinds of parting, and its tally.

use crate::jobs::verification::{REFERENCE_PYFFISH, VerificationJob};
use serde_json::Value;
use std::collections::HashSet;
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::rules::metamorphic::Property;
use xq_engine::xiangqi::rules::verify::{Disagreement, FAIRY_STOCKFISH, Tally, kind_pair, report_tally};

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
pub(super) fn reported_name(reference: &str) -> &str {
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

/// Whether a worker's line for game `name` says what the coordinator's check found.
pub(super) fn compare(
    name: &str,
    ours: Option<&Value>,
    theirs: Option<&Value>,
    rules: &[RuleSet],
) -> Result<(), String> {
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

/// The kinds of parting between two of `rules` a line gives ("wxf vs cxq: ..."), not
/// those with a reference.
pub(super) fn rule_kinds<'a>(line: &'a Value, rules: &[RuleSet]) -> Vec<&'a str> {
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
