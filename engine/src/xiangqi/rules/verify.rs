//! Rule verification: a game replayed under several rule sets, each ending it where a
//! referee under that set would (the first ruling of play, [`super::Referee::ended`], which
//! the judge reports too; the rule sets follow the game together, as a [`Panel`]),
//! and the ways the rule sets part. `xq-engine verify` runs it
//! over PGN files; a verification job runs the same function on each of its games.

use std::collections::BTreeMap;

use serde_json::{Value, json};

#[cfg(doc)]
use super::Referee;
use super::hard_games::hard_game;
use super::judge::{JudgeRequest, judge};
use super::metamorphic;
use super::verdicts::{Verdict, verdicts};
use super::{Outcome, RefereeConfig, RuleSet, ViolationTiming, cite_move_rules};
use crate::color::Color;
use crate::variant::Variant;
use crate::xiangqi::notation::{MoveTextError, parse_any};
use crate::xiangqi::pgn::PgnGame;
use crate::xiangqi::{Move, Position, fen};

/// This arbiter's build: the crate's version and a hash, taken at build time
/// (`build.rs`), of the library's sources and the features it was built with. A
/// worker sends it in its capabilities, and the coordinator leases verification work
/// only to workers whose build is its own, since it checks their reports by ruling
/// the same games itself.
///
/// A hash of the sources rather than a fingerprint of rulings on a fixed set of games:
/// a ruling can change only when the code changes (the rule sets, and the position,
/// move generation and repetition hashing they read; for fresh self-play games, which
/// the coordinator plays again, the search and evaluation too), so the sources' hash
/// changes whenever rulings can, where a fixed set of games would miss a change that
/// none of them exercises. It changes on edits that rule nothing (a comment): such a
/// worker only waits for a matching coordinator, it is never quarantined.
pub const ARBITER_BUILD: &str = concat!(env!("CARGO_PKG_VERSION"), "+", env!("XQ_ARBITER_SOURCE_HASH"));

/// How two rule sets' verdicts on one game differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Disagreement {
    /// One ends the game; the other lets it go on to its last move.
    OnlyOneRules,
    /// Both end it, at different plies.
    DifferentPly,
    /// Both end it at the same ply, with different results.
    DifferentOutcome,
    /// Same ply, same result, for a different reason.
    DifferentReason,
}

impl Disagreement {
    /// How reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Disagreement::OnlyOneRules => "only one rules",
            Disagreement::DifferentPly => "different ply",
            Disagreement::DifferentOutcome => "different result",
            Disagreement::DifferentReason => "different reason",
        }
    }
}

/// A kind of parting as report lines give it: "wxf vs cxq: different ply".
fn kind_text(a: &str, b: &str, kind: Disagreement) -> String {
    format!("{a} vs {b}: {}", kind.name())
}

/// The two rule sets (or the rule set and the reference) a kind of parting names
/// ([`kind_text`]'s form); the second is empty when `kind` is not of that form.
pub fn kind_pair(kind: &str) -> (&str, &str) {
    let pair = kind.split(": ").next().unwrap_or_default();
    pair.split_once(" vs ").unwrap_or((pair, ""))
}

/// The name under which the pyffish reference (Fairy-Stockfish's rules) reports its
/// partings ("wxf vs fairy-stockfish: different ply"), where a job's spec calls it
/// `pyffish`, after the module that runs it.
pub const FAIRY_STOCKFISH: &str = "fairy-stockfish";

/// A second opinion on where games end, from outside the arbiter: Fairy-Stockfish's
/// rules through pyffish, on workers that have it.
pub trait Reference {
    /// How reports name it.
    fn name(&self) -> &'static str;

    /// Where it ends the game from `start` with `moves`, looking only at the plies in
    /// `candidates` (1-based, ascending: those where a ruling can fall): the ply and the
    /// outcome of its first ruling, if any.
    fn verdict(
        &mut self,
        start: &Position,
        moves: &[Move],
        candidates: &[usize],
    ) -> Result<Option<(usize, Outcome)>, String>;
}

/// How a rule set's verdict and a reference's differ, if they do: the ply and the
/// result (a reference gives no reason or article).
pub fn reference_disagreement(ours: &Verdict, theirs: Option<(usize, Outcome)>) -> Option<Disagreement> {
    match (ours.ended, theirs) {
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => Some(Disagreement::OnlyOneRules),
        (Some((ply, _)), Some((their_ply, _))) if ply != their_ply => Some(Disagreement::DifferentPly),
        (Some((_, ruling)), Some((_, outcome))) if ruling.outcome != outcome => Some(Disagreement::DifferentOutcome),
        _ => None,
    }
}

/// Plies without a capture that draw under a move count (WXF Article 8; the reference's
/// too, which counts them differently).
const PLAIN_MOVE_COUNT: usize = 100;

/// The plies of a game where a reference ruling repetitions at the third occurrence (as
/// Fairy-Stockfish does) or by a move count can rule: each whose position (board and
/// side to move) occurs for the third time or more, each that makes
/// [`PLAIN_MOVE_COUNT`] plies without a capture, the ply of `ruled`, and the last.
pub fn ruling_candidates(start: &Position, moves: &[Move], ruled: Option<usize>) -> Vec<usize> {
    let mut position = start.clone();
    let mut seen: std::collections::HashMap<u64, u32> = std::collections::HashMap::from([(position.hash(), 1)]);
    let mut quiet = 0;
    let mut candidates = Vec::new();
    for (index, &mv) in moves.iter().enumerate() {
        quiet = if position.piece_at(mv.to()).is_some() { 0 } else { quiet + 1 };
        position.make_move(mv);
        let occurrences = seen.entry(position.hash()).or_default();
        *occurrences += 1;
        let ply = index + 1;
        if *occurrences >= 3 || quiet == PLAIN_MOVE_COUNT || ruled == Some(ply) || ply == moves.len() {
            candidates.push(ply);
        }
    }
    candidates
}

/// Why a rule set's verdict and the reference's part, where the reference's rules are
/// known to differ from the books' (the categories `docs/rules.md`'s verification
/// section documents, each with an example); `None` when no known difference explains it.
///
/// `cycle` is the cycle `ours` ruled on, as [`check_game`] reports it (each ply's
/// `ply`, `nature` and `chases`).
pub fn known_difference(
    start: &Position,
    moves: &[Move],
    ours: &Verdict,
    theirs: Option<(usize, Outcome)>,
    cycle: &[Value],
) -> Option<&'static str> {
    let our_ply = ours.ended.map(|(ply, _)| ply);
    // After `ply` plies: the occurrences of that position, and the plies since the last
    // capture with how many of them gave check.
    let after = |ply: usize| {
        let mut position = start.clone();
        let mut counts: std::collections::HashMap<u64, u32> = std::collections::HashMap::from([(position.hash(), 1)]);
        let (mut quiet, mut checks) = (0, 0);
        for &mv in &moves[..ply] {
            let capture = position.piece_at(mv.to()).is_some();
            let check = position.gives_check(mv);
            (quiet, checks) = if capture { (0, 0) } else { (quiet + 1, checks + usize::from(check)) };
            position.make_move(mv);
            *counts.entry(position.hash()).or_default() += 1;
        }
        (counts[&position.hash()], quiet, checks)
    };
    let their_ply = theirs.map(|(ply, _)| ply);
    // The natures of the moves `side` made in the cycle, and the targets they chased.
    let mover = |ply: u64| if ply % 2 == 1 { start.side_to_move() } else { !start.side_to_move() };
    let natures_of = |side: Color| -> Vec<&str> {
        cycle
            .iter()
            .filter(|p| mover(p["ply"].as_u64().unwrap_or(0)) == side)
            .filter_map(|p| p["nature"].as_str())
            .collect()
    };
    let targets: Vec<&str> = cycle
        .iter()
        .flat_map(|p| p["chases"].as_array().into_iter().flatten())
        .filter_map(|chase| chase["target"].as_str())
        .collect();
    match theirs {
        Some((ply, Outcome::Draw)) if our_ply.is_none_or(|ours| ours > ply) && after(ply).0 == 3 => {
            Some("the reference draws a repetition at its third occurrence (the books: the fourth, WXF 3.2.B)")
        }
        // The same ply: the arbiter's perpetual chase of pawns only, the reference's draw.
        Some((ply, Outcome::Draw))
            if ours.ended.is_some_and(|(at, r)| at == ply && r.reason == super::Reason::PerpetualChase)
                && !targets.is_empty()
                && targets.iter().all(|target| target.starts_with("pawn")) =>
        {
            Some(
                "the reference does not count chasing a pawn that has crossed the river (WXF 20.3 spares only one that has not)",
            )
        }
        // The reference rules first against a side whose moves in the cycle alternate
        // check and chase; the books let that repetition stand (a draw).
        Some((ply, Outcome::Win(winner)))
            if our_ply.is_some_and(|ours| ours > ply)
                && ours.ended.is_some_and(|(_, r)| r.outcome == Outcome::Draw)
                && natures_of(!winner).contains(&"check")
                && natures_of(!winner).contains(&"chase") =>
        {
            Some("the reference forbids alternating check and chase (WXF 20.2 allows it)")
        }
        _ if ours.ended.is_some_and(|(_, ruling)| ruling.reason == super::Reason::NaturalMoveCount)
            && their_ply.is_none_or(|theirs| theirs > our_ply.unwrap_or(0)) =>
        {
            let (_, quiet, checks) = after(our_ply.unwrap_or(0));
            (quiet - checks < PLAIN_MOVE_COUNT).then_some(
                "the reference leaves every check out of its move count (WXF Article 8: only each side's beyond the tenth)",
            )
        }
        _ => None,
    }
}

/// The moves of a game in any notation game collections write (UCI with ranks 0..9 as
/// the product writes, ICCS, WXF, Chinese: [`parse_any`]), checked against the rules of
/// movement from `start`; the ply (1-based) and the error of the first that is not
/// legal.
pub fn parse_moves(start: &Position, texts: &[String]) -> Result<Vec<Move>, (usize, MoveTextError)> {
    let mut position = start.clone();
    let mut moves = Vec::with_capacity(texts.len());
    for (index, text) in texts.iter().enumerate() {
        let mv = parse_any(&position, text).map_err(|error| (index + 1, error))?;
        position.make_move(mv);
        moves.push(mv);
    }
    Ok(moves)
}

/// How verdicts `a` and `b` differ, if they do.
pub fn disagreement(a: &Verdict, b: &Verdict) -> Option<Disagreement> {
    match (a.ended, b.ended) {
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => Some(Disagreement::OnlyOneRules),
        (Some((ply_a, _)), Some((ply_b, _))) if ply_a != ply_b => Some(Disagreement::DifferentPly),
        (Some((_, x)), Some((_, y))) if x.outcome != y.outcome => Some(Disagreement::DifferentOutcome),
        (Some((_, x)), Some((_, y))) if x.reason != y.reason => Some(Disagreement::DifferentReason),
        _ => None,
    }
}

/// The counts of a verification: games seen, games that could not be replayed, games
/// where the rule sets part, and those partings by kind ("wxf vs cxq: different ply")
/// and by the pair of articles applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Games seen.
    pub games: u64,
    /// Games whose start or moves could not be replayed.
    pub refused: u64,
    /// Games where two of the rule sets part.
    pub parting: u64,
    /// Partings by the two rule sets and how they part.
    pub by_kind: BTreeMap<String, u64>,
    /// Partings by the two articles applied ("none" where a set did not rule).
    pub by_articles: BTreeMap<String, u64>,
    /// Games where a rule set broke a metamorphic property ([`metamorphic`]), counted
    /// in `by_kind` by rule set and property ("wxf metamorphic: detour").
    pub metamorphic: u64,
}

impl Tally {
    /// Adds `other`'s counts (a verification's units, reported apart).
    pub fn merge(&mut self, other: &Tally) {
        self.games += other.games;
        self.refused += other.refused;
        self.parting += other.parting;
        self.metamorphic += other.metamorphic;
        for (mine, theirs) in [(&mut self.by_kind, &other.by_kind), (&mut self.by_articles, &other.by_articles)] {
            for (key, count) in theirs {
                *mine.entry(key.clone()).or_default() += count;
            }
        }
    }

    /// Counts a game by its report line ([`check_game`]'s; none: the rule sets agree).
    /// The counts come from the line alone, so that whoever holds a report's lines can
    /// count them again: a game that could not be replayed is refused; one with a line
    /// parts, counted under each of its kinds and each pair of articles applied (the
    /// reference's name standing for its article), a parting from the reference also
    /// under its kind with the difference that explains it ("why").
    pub fn count(&mut self, line: Option<&Value>) {
        self.games += 1;
        let Some(line) = line else { return };
        if line.get("error").is_some() {
            self.refused += 1;
            return;
        }
        // A line without verdicts reports only broken metamorphic properties.
        self.parting += u64::from(line.get("verdicts").is_some());
        self.metamorphic += u64::from(line.get("metamorphic").is_some());
        let verdicts = line.get("verdicts").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let article = |rules: &str| {
            let verdict = verdicts.iter().find(|v| v.get("rules").and_then(Value::as_str) == Some(rules));
            verdict.and_then(|v| v.get("article")).and_then(Value::as_str).unwrap_or("none")
        };
        let reference = line.get("reference");
        let reference_name = reference.and_then(|r| r.get("name")).and_then(Value::as_str);
        let kinds = line.get("kinds").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        for kind in kinds.iter().filter_map(Value::as_str) {
            *self.by_kind.entry(kind.to_owned()).or_default() += 1;
            let (a, b) = kind_pair(kind);
            if b.is_empty() {
                // A metamorphic property, broken by one rule set: no pair of articles.
                continue;
            }
            if Some(b) == reference_name {
                let why = reference.and_then(|r| r.get("why")).and_then(Value::as_str).unwrap_or_default();
                *self.by_kind.entry(format!("{a} vs {b}, why: {why}")).or_default() += 1;
                *self.by_articles.entry(format!("{} / {b}", article(a))).or_default() += 1;
            } else {
                *self.by_articles.entry(format!("{} / {}", article(a), article(b))).or_default() += 1;
            }
        }
    }

    /// The counts as JSON, as reports carry them.
    pub fn to_json(&self) -> Value {
        json!({
            "games": self.games,
            "refused": self.refused,
            "parting": self.parting,
            "by_kind": self.by_kind,
            "by_articles": self.by_articles,
            "metamorphic": self.metamorphic,
        })
    }

    /// Reads [`Self::to_json`]'s form back; `None` when `value` is not of that shape.
    pub fn from_json(value: &Value) -> Option<Tally> {
        let counts = |name: &str| -> Option<BTreeMap<String, u64>> {
            let map = value.get(name)?.as_object()?;
            map.iter().map(|(key, count)| Some((key.clone(), count.as_u64()?))).collect()
        };
        Some(Tally {
            games: value.get("games")?.as_u64()?,
            refused: value.get("refused")?.as_u64()?,
            parting: value.get("parting")?.as_u64()?,
            by_kind: counts("by_kind")?,
            by_articles: counts("by_articles")?,
            // Absent from reports made before metamorphic verification existed.
            metamorphic: value.get("metamorphic").map_or(Some(0), Value::as_u64)?,
        })
    }
}

/// Verifies one game under `rule_sets`, counting it in `tally`: `None` when they agree,
/// else the report's JSON line, named `label`: why the game could not be replayed, or
/// where the rule sets part (its start, its moves, the position before the first
/// ruling, each set's verdict with the article applied and the natures of the plies of
/// the cycle it ruled on, and the kinds of parting). `xq-engine verify` and the
/// coordinator's verification jobs report games through this one function.
///
/// With a `reference`, the first rule set's verdict is compared with the reference's
/// too; only the reference failing (not the game) is an error.
pub fn check_game(
    game: &PgnGame,
    rule_sets: &[RuleSet],
    label: &str,
    tally: &mut Tally,
    reference: Option<&mut dyn Reference>,
) -> Result<Option<Value>, String> {
    check_game_with(game, rule_sets, label, tally, reference, false)
}

/// [`check_game`], with the metamorphic properties checked too if `metamorphic`
/// ([`check_game_metamorphic`]): what a verification job's workers and its
/// coordinator's spot checks both run.
pub fn check_game_with(
    game: &PgnGame,
    rule_sets: &[RuleSet],
    label: &str,
    tally: &mut Tally,
    reference: Option<&mut dyn Reference>,
    metamorphic: bool,
) -> Result<Option<Value>, String> {
    let line = game_line(game, rule_sets, label, reference, metamorphic)?;
    tally.count(line.as_ref());
    Ok(line)
}

/// [`check_game`]'s line for a game, if it has one.
fn game_line(
    game: &PgnGame,
    rule_sets: &[RuleSet],
    label: &str,
    reference: Option<&mut dyn Reference>,
    metamorphic: bool,
) -> Result<Option<Value>, String> {
    match replayable(game, rule_sets) {
        Ok((start, moves)) => moves_line(&start, &moves, rule_sets, label, reference, metamorphic),
        Err(error) => Ok(Some(json!({"game": label, "error": error}))),
    }
}

/// The report line of the game of `moves` from `start`, if it has one: where the rule
/// sets part (and from the reference, if given), and with `metamorphic` the
/// properties the game breaks.
fn moves_line(
    start: &Position,
    moves: &[Move],
    rule_sets: &[RuleSet],
    label: &str,
    reference: Option<&mut dyn Reference>,
    metamorphic: bool,
) -> Result<Option<Value>, String> {
    let found = verdicts(start, moves, rule_sets);
    let mut kinds = Vec::new();
    for (i, a) in found.iter().enumerate() {
        for b in &found[i + 1..] {
            if let Some(kind) = disagreement(a, b) {
                kinds.push(kind_text(a.rules.name(), b.rules.name(), kind));
            }
        }
    }
    let mut reference_json = None;
    let mut cycles = Cycles::default();
    // The first verdict's description, when comparing it with the reference needed it.
    let mut first_json = None;
    if let (Some(reference), Some(ours)) = (reference, found.first()) {
        let candidates = ruling_candidates(start, moves, ours.ended.map(|(ply, _)| ply));
        let theirs = reference.verdict(start, moves, &candidates)?;
        let mut known = None;
        if let Some(kind) = reference_disagreement(ours, theirs) {
            kinds.push(kind_text(ours.rules.name(), reference.name(), kind));
            let ours_json = verdict_json(ours, start, moves, &mut cycles);
            let cycle = ours_json["cycle"].as_array().map_or(&[][..], Vec::as_slice);
            known = Some(known_difference(start, moves, ours, theirs, cycle).unwrap_or("unexplained"));
            first_json = Some(ours_json);
        }
        reference_json = Some(match theirs {
            Some((ply, outcome)) => {
                json!({"name": reference.name(), "ply": ply, "result": outcome.pgn(), "why": known})
            }
            None => json!({"name": reference.name(), "ply": null, "result": "*", "why": known}),
        });
    }
    let broken = if metamorphic { metamorphic::check_ruled(start, moves, &found) } else { Vec::new() };
    if kinds.is_empty() && broken.is_empty() {
        return Ok(None);
    }
    let texts: Vec<String> = moves.iter().map(ToString::to_string).collect();
    if kinds.is_empty() {
        return Ok(Some(json!({
            "game": label,
            "start": fen::to_fen(start),
            "moves": texts,
            "metamorphic": broken.iter().map(metamorphic::Counterexample::to_json).collect::<Vec<_>>(),
            "kinds": broken.iter().map(metamorphic::Counterexample::kind).collect::<Vec<_>>(),
        })));
    }
    kinds.extend(broken.iter().map(metamorphic::Counterexample::kind));
    let first_end = found.iter().filter_map(|v| v.ended.map(|(ply, _)| ply)).min().unwrap_or(0);
    let mut position = start.clone();
    for &mv in &moves[..first_end.saturating_sub(1)] {
        position.make_move(mv);
    }
    let mut verdicts = Vec::with_capacity(found.len());
    verdicts.extend(first_json);
    verdicts.extend(found[verdicts.len()..].iter().map(|verdict| verdict_json(verdict, start, moves, &mut cycles)));
    // A parting game's moves are reported in UCI coordinates whatever the file wrote.
    let mut line = json!({
        "game": label,
        "start": fen::to_fen(start),
        "moves": texts,
        "before_first_ruling": fen::to_fen(&position),
        "verdicts": verdicts,
        "kinds": kinds,
    });
    if let Some(reference) = reference_json {
        line["reference"] = reference;
    }
    if !broken.is_empty() {
        line["metamorphic"] = broken.iter().map(metamorphic::Counterexample::to_json).collect();
    }
    Ok(Some(line))
}

/// The start and moves of a Xiangqi game, or why it cannot be replayed under
/// `rule_sets` (the articles of each cited).
fn replayable(game: &PgnGame, rule_sets: &[RuleSet]) -> Result<(Position, Vec<Move>), String> {
    if game.tag("Variant").is_some_and(|v| v.parse::<Variant>().is_ok_and(|v| v == Variant::Xiongqi)) {
        return Err("a Xiongqi game: its rules are its own, not a rule set's".to_owned());
    }
    let start = match game.tag("FEN").map(fen::parse_composed) {
        None => Position::startpos(),
        Some(Ok((position, _))) => position,
        Some(Err(error)) => return Err(format!("FEN: {error}")),
    };
    let moves = parse_moves(&start, &game.moves)
        .map_err(|(ply, error)| format!("ply {ply}: {}", cite_move_rules(rule_sets, &error.to_string())))?;
    Ok((start, moves))
}

/// [`check_game`] with the metamorphic properties ([`metamorphic`]) checked too: a game
/// that breaks one is reported with each property broken, the game and the
/// transformed game (both cut to the shortest counterexample found) and their verdicts.
pub fn check_game_metamorphic(game: &PgnGame, rule_sets: &[RuleSet], label: &str, tally: &mut Tally) -> Option<Value> {
    // Only a reference can fail a line, and there is none.
    check_game_with(game, rule_sets, label, tally, None, true).expect("no reference to fail")
}

/// Verifies the rule-hard game `number` ([`hard_game`]) as [`check_game`] does, with
/// the metamorphic properties if `metamorphic`; its label is "hard game N".
pub fn check_hard_game(number: u64, rule_sets: &[RuleSet], metamorphic: bool, tally: &mut Tally) -> Option<Value> {
    let (start, moves) = hard_game(number);
    let line = moves_line(&start, &moves, rule_sets, &format!("hard game {number}"), None, metamorphic).ok().flatten();
    tally.count(line.as_ref());
    line
}

/// A verification unit's report, as workers send it and the coordinator stores it: a
/// JSON line for each of `games` that [`check_game`] reports (labelled "game N", numbered
/// from `first_number`), then `{"tally": ...}` with the unit's counts.
///
/// Fails only when the `reference` does.
pub fn unit_report(
    games: &[PgnGame],
    first_number: usize,
    rule_sets: &[RuleSet],
    reference: Option<&mut dyn Reference>,
) -> Result<String, String> {
    unit_report_with(games, first_number, rule_sets, false, reference)
}

/// [`unit_report`], with the metamorphic properties checked too if `metamorphic`
/// ([`check_game_with`]).
pub fn unit_report_with(
    games: &[PgnGame],
    first_number: usize,
    rule_sets: &[RuleSet],
    metamorphic: bool,
    mut reference: Option<&mut dyn Reference>,
) -> Result<String, String> {
    let mut tally = Tally::default();
    let mut report = String::new();
    for (index, game) in games.iter().enumerate() {
        let label = format!("game {}", first_number + index);
        let again: Option<&mut dyn Reference> = match reference {
            Some(ref mut reference) => Some(&mut **reference),
            None => None,
        };
        if let Some(line) = check_game_with(game, rule_sets, &label, &mut tally, again, metamorphic)? {
            report.push_str(&line.to_string());
            report.push('\n');
        }
    }
    report.push_str(&json!({ "tally": tally.to_json() }).to_string());
    report.push('\n');
    Ok(report)
}

/// The tally a unit report ends with, if its last line is one.
pub fn report_tally(report: &str) -> Option<Tally> {
    let value: Value = serde_json::from_str(report.lines().last()?).ok()?;
    Tally::from_json(value.get("tally")?)
}

/// A verdict as reports give it: where and how its rule set ended the game, and the
/// plies of the cycle that ruling closed (from the judge: each ply's nature and chases),
/// empty when the ruling was not on a repetition.
fn verdict_json(verdict: &Verdict, start: &Position, moves: &[Move], cycles: &mut Cycles) -> Value {
    let Some((ply, ruling)) = verdict.ended else {
        return json!({"rules": verdict.rules.name(), "ply": null, "result": "*"});
    };
    json!({
        "rules": verdict.rules.name(),
        "ply": ply,
        "result": ruling.outcome.pgn(),
        "reason": ruling.reason.to_string(),
        "article": ruling.article,
        "cycle": cycles.at(start, moves, ply),
    })
}

/// The cycles a game's verdicts closed, by the ply that closed them: rule sets that
/// rule at the same ply report the same cycle (a ply's nature does not depend on the
/// rule set), and judging it once for all halved what reporting cost.
#[derive(Default)]
struct Cycles(Vec<(usize, Vec<Value>)>);

impl Cycles {
    /// The cycle the game's ply `ply` closed ([`cycle_plies`]).
    fn at(&mut self, start: &Position, moves: &[Move], ply: usize) -> Vec<Value> {
        if let Some((_, cycle)) = self.0.iter().find(|(closed, _)| *closed == ply) {
            return cycle.clone();
        }
        let cycle = cycle_plies(start, &moves[..ply]);
        self.0.push((ply, cycle.clone()));
        cycle
    }
}

/// The judge's plies of the repetition the last position (board and side to move)
/// closed, each numbered in the game: the window of the repetition being made, which a
/// referee rules on ([`super::Referee::last_cycle`]); empty when it had not
/// occurred before. Only the window is judged, from the position that opened it: a ply's
/// nature depends on its position and move, not on the plies before, and classifying
/// every ply of the game cost more than all the rest of a verification.
fn cycle_plies(start: &Position, moves: &[Move]) -> Vec<Value> {
    let mut referee = super::Referee::new(start.clone(), RefereeConfig::default());
    if moves.iter().any(|&mv| referee.play(mv).is_err()) {
        return Vec::new();
    }
    let Some((opening, cycle)) = referee.last_cycle() else { return Vec::new() };
    let first = moves.len() - cycle.len();
    let request = JudgeRequest {
        fen: Some(fen::to_fen(&opening)),
        moves: moves[first..].iter().map(ToString::to_string).collect(),
        // The plies' natures are the same under every rule set.
        rules: RuleSet::Wxf,
        variant: Variant::Xiangqi,
        timing: ViolationTiming::default(),
    };
    let Ok((judged, _)) = judge(&request) else { return Vec::new() };
    let plies = judged["plies"].as_array().cloned().unwrap_or_default();
    plies
        .into_iter()
        .enumerate()
        .map(|(i, mut ply)| {
            ply["ply"] = json!(first + i + 1);
            ply
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::rules::{Outcome, Reason};

    fn moves(start: &Position, text: &str) -> Vec<Move> {
        let texts: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        parse_moves(start, &texts).unwrap()
    }

    #[test]
    fn rule_sets_end_a_game_where_their_referees_would() {
        // A chariot chasing a lone cannon: a loss at the third occurrence under WXF and
        // the Asian rules, allowed by the computer rules until the fourth (a draw).
        let start = Position::from_fen("4k4/9/9/9/9/9/9/9/1R7/c2K5 w").unwrap();
        let game = moves(&start, &"b1a1 a0b0 a1b1 b0a0 ".repeat(4));
        let found = verdicts(&start, &game, &[RuleSet::Wxf, RuleSet::Asian, RuleSet::Computer]);
        let ended: Vec<_> = found.iter().map(|v| v.ended.map(|(ply, r)| (ply, r.outcome, r.reason))).collect();
        let chase = Some((8, Outcome::Win(crate::color::Color::Black), Reason::PerpetualChase));
        assert_eq!(ended, [chase, chase, Some((12, Outcome::Draw, Reason::Repetition))]);
        assert_eq!(disagreement(&found[0], &found[1]), None);
        assert_eq!(disagreement(&found[0], &found[2]), Some(Disagreement::DifferentPly));
        // Cut before the computer rules' draw: only one rules.
        let short = &game[..10];
        let found = verdicts(&start, short, &[RuleSet::Wxf, RuleSet::Computer]);
        assert_eq!(disagreement(&found[0], &found[1]), Some(Disagreement::OnlyOneRules));
    }

    /// A reference that answers what it is told, recording what it was asked.
    struct Told(Option<(usize, Outcome)>, Vec<usize>);

    impl Reference for Told {
        fn name(&self) -> &'static str {
            "told"
        }
        fn verdict(
            &mut self,
            _: &Position,
            _: &[Move],
            candidates: &[usize],
        ) -> Result<Option<(usize, Outcome)>, String> {
            self.1 = candidates.to_vec();
            Ok(self.0)
        }
    }

    fn pgn_game(fen: &str, moves: &str) -> PgnGame {
        let text = format!("[FEN \"{fen}\"]\n\n{moves} *\n");
        crate::xiangqi::pgn::parse_pgn(&text).unwrap().remove(0)
    }

    #[test]
    fn a_reference_is_asked_where_rulings_fall_and_its_known_differences_are_named() {
        // Kings stepping to and fro: the start recurs at plies 4 and 8 (its third
        // occurrence), where the reference draws; the books draw at the fourth.
        let shuffle = pgn_game("3k5/9/9/9/9/9/9/9/9/4K4 w - - 0 1", &"e0e1 d9d8 e1e0 d8d9 ".repeat(2));
        let mut told = Told(Some((8, Outcome::Draw)), Vec::new());
        let mut tally = Tally::default();
        let line = check_game(&shuffle, &[RuleSet::Wxf], "g", &mut tally, Some(&mut told)).unwrap().unwrap();
        assert_eq!(told.1, [8], "the plies whose position occurs a third time (and the last)");
        assert_eq!(line["kinds"][0], "wxf vs told: only one rules");
        assert!(line["reference"]["why"].as_str().unwrap().contains("third occurrence"), "{line}");
        // A reference that rules the chariot's chase a draw at the same ply: no known
        // difference explains it.
        let start = "4k4/9/9/9/9/9/9/9/1R7/c2K5 w - - 0 1";
        let chase = pgn_game(start, &"b1a1 a0b0 a1b1 b0a0 ".repeat(2));
        let mut told = Told(Some((8, Outcome::Draw)), Vec::new());
        let line = check_game(&chase, &[RuleSet::Wxf], "g", &mut tally, Some(&mut told)).unwrap().unwrap();
        assert_eq!(line["kinds"][0], "wxf vs told: different result");
        assert_eq!(line["reference"]["why"], "unexplained");
        // Agreeing, it is no parting at all.
        let mut told = Told(Some((8, Outcome::Win(crate::color::Color::Black))), Vec::new());
        assert_eq!(check_game(&chase, &[RuleSet::Wxf], "g", &mut tally, Some(&mut told)).unwrap(), None);
        assert_eq!(tally.by_kind["wxf vs told, why: unexplained"], 1);
    }

    /// Self-play games (from `scripts/mutation-verify`'s 100,000) where Fairy-Stockfish
    /// parts from the books for its two simplifications of the chase rules.
    const PAWN_CHASE: &str = "h2e2 e9e8 b2d2 e8f8 e2g2 h7i7 c3c4 c9a7 g2g6 b7b3 g3g4 h9g7 g6c6 b3c3 c6c3 a6a5 d0e1 \
        a5a4 a3a4 i7h7 b0c2 h7h5 h0g2 h5h4 g2h4 i9h9 h4i6 h9h3 c3h3 g7i6 a4a5 b9c7 c0e2 c7b9 a5b5 b9c7 c4c5 i6g7 c5c6 \
        c7e8 g4g5 e8c7 c6c7 f8e8 c7c8 e8e9 c8d8 a7c9 a0a9 e6e5 a9c9 f9e8 d8e8 g7e8 c9d9 e9d9 g5f5 d9d8 f5e5 d8d9 e5e6 \
        e8g7 e6d6 d9e9 d6d7 g7f5 d7d8 f5e3 i3i4 e3c2 i4i5 c2d4 b5c5 g9e7 c5d5 d4f3 d5e5 f3g1 e0d0 g1i0 e5e6 i0g1 e6e7 \
        g1h3 d8e8 e9f9 i5h5 h3f4 h5i5 f4h3 i5h5 h3f4 h5i5 f4h3";
    const CHECK_AND_CHASE: &str = "h2i2 h7h8 c0a2 b7a7 e0e1 a7e7 i2c2 i9i7 g0e2 e7e3 e2g0 g6g5 c2c0 c6c5 b2h2 e3a3 \
        c0c1 a3a0 h2h1 a0d0 h1h2 d0g0 a2c4 g0i0 h2b2 i0f0 g3g4 c5c4 h0f1 g5g4 b2c2 e9e8 c2e2 e8f8 e2c2 c4d4 c2g2 f8e8 \
        g2a2 e8e9 a2c2 e9e8 c2e2 e8f8 e2c2 f8e8 c2e2 e8f8 e2c2 f8e8 c2e2 e8f8 e2c2 f8e8";

    #[test]
    fn the_reference_s_chase_simplifications_are_named_on_real_games() {
        let start = crate::xiangqi::fen::START_FEN;
        let mut tally = Tally::default();
        // Black's horse chases Red's crossed pawn as it steps to and fro: the books'
        // perpetual chase (Black loses at ply 94), the reference's draw.
        let game = pgn_game(start, PAWN_CHASE);
        let mut told = Told(Some((94, Outcome::Draw)), Vec::new());
        let line = check_game(&game, &[RuleSet::Wxf], "g", &mut tally, Some(&mut told)).unwrap().unwrap();
        assert_eq!(
            (line["verdicts"][0]["ply"].as_u64(), line["verdicts"][0]["reason"].as_str()),
            (Some(94), Some("perpetual chase"))
        );
        assert!(line["reference"]["why"].as_str().unwrap().contains("chasing a pawn that has crossed"), "{line}");
        // Red checks and chases in turn: the books draw the repetition at its fourth
        // occurrence (ply 54); the reference has Red lose at the third (ply 50).
        let game = pgn_game(start, CHECK_AND_CHASE);
        let mut told = Told(Some((50, Outcome::Win(Color::Black))), Vec::new());
        let line = check_game(&game, &[RuleSet::Wxf], "g", &mut tally, Some(&mut told)).unwrap().unwrap();
        assert_eq!(line["verdicts"][0]["ply"].as_u64(), Some(54));
        assert!(line["reference"]["why"].as_str().unwrap().contains("alternating check and chase"), "{line}");
    }

    #[test]
    fn an_illegal_move_is_named_by_its_ply() {
        let start = Position::startpos();
        let texts: Vec<String> = ["h2e2", "h9g7", "e2e9"].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(parse_moves(&start, &texts).unwrap_err().0, 3);
    }

    #[test]
    fn a_game_s_record_is_verified_as_the_game_itself() {
        let rules = [RuleSet::Wxf, RuleSet::Cxq];
        let (mut by_record, mut by_number) = (Tally::default(), Tally::default());
        for number in 0..40 {
            let line = check_game_with(
                &crate::xiangqi::rules::hard_games::hard_game_pgn(number),
                &rules,
                "g",
                &mut by_record,
                None,
                true,
            )
            .unwrap();
            let direct = check_hard_game(number, &rules, true, &mut by_number);
            let unlabelled = |line: Option<serde_json::Value>| {
                line.map(|mut line| {
                    line["game"] = serde_json::Value::Null;
                    line
                })
            };
            assert_eq!(unlabelled(line), unlabelled(direct), "hard game {number}");
        }
        assert_eq!(by_record, by_number);
        assert!(by_record.parting > 0, "forty games hold partings of WXF and CXQ");
    }
}
