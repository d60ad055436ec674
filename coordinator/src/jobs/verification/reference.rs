//! A reference's verdicts, which the coordinator cannot rule itself: two workers'
//! reports of a unit compared on them.

use crate::jobs::verification::reports::reported_name;
use serde_json::Value;
use std::collections::BTreeMap;
use xq_engine::xiangqi::rules::verify::kind_pair;

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
