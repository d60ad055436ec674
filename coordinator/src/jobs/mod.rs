//! Jobs: what a client may ask for, checked before anything is stored, and how a job
//! reads back (results, SPRT, Elo).

pub mod spsa;
pub mod test;
pub mod tournament;
pub mod verification;

use std::collections::HashMap;
use std::sync::Arc;

use prost::Message;
use xq_engine::book::Book;
use xq_engine::time_control::TimeControl;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::data::MAX_RECORDS;
use xq_engine::xiangqi::fen::FenFlavour;
use xq_engine::xiangqi::notation::Dialect;
use xq_engine::xiangqi::rules::{Reason, RuleSet, ViolationTiming};
use xq_proto::v1;
use xq_proto::{DEFAULT_SELF_PLAY_PLIES, self_play_plies, self_play_unit_records};
use xq_stats::{Model, Sprt, SprtState, elo_estimate};

use crate::storage::artifacts::check_hash;
use crate::jobs::spsa::{SpsaSetup, check_spsa};
use crate::storage::JobRow;
use crate::jobs::verification::{VerificationJob, check_spec as check_verification};

/// The pair cap of an SPRT that names none: fishtest's default of 250,000 games
/// would take a small fleet months, so a test that has not decided by then is stopped.
pub const DEFAULT_SPRT_PAIRS: u64 = 100_000;

/// The most units one job may have.
pub const MAX_UNITS: u64 = 10_000_000;

/// A request refused before anything of it is kept (a job's, a worker's registration).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct SpecError {
    /// The request field at fault.
    pub field: &'static str,
    pub problem: String,
}

pub(crate) fn bad(field: &'static str, problem: impl Into<String>) -> SpecError {
    SpecError { field, problem: problem.into() }
}

/// What a job is, checked.
#[derive(Clone, Debug)]
pub enum JobSpec {
    /// Games between two engines.
    Match(Box<MatchJob>),
    /// Training data from our engine playing itself.
    SelfPlay(v1::CreateSelfPlayRequest),
    /// Games replayed under several rule sets.
    Verify(Box<VerificationJob>),
    /// A stored job this version cannot read back (its request fails today's checks,
    /// or its book no longer reads): shown, never leased.
    Unreadable(Box<Unreadable>),
}

/// A stored job that cannot be read back, and why. It stays in the lists, ended, with
/// the reason; its stored row is left as it was.
#[derive(Clone, Debug)]
pub struct Unreadable {
    /// The stored spec, as stored.
    pub stored: String,
    pub problem: String,
    /// A match's request as far as it decodes: its engines, clock and SPRT for the
    /// views (a tournament finds its pairing by the engines).
    pub request: Option<v1::CreateTestRequest>,
}

impl Unreadable {
    /// The job of `kind` stored as `stored`, which fails to read back with `problem`.
    pub fn new(kind: &str, stored: &str, problem: impl Into<String>) -> Self {
        let bytes = hex::decode(stored).ok();
        let request = bytes.and_then(|bytes| match kind {
            "selfplay" | "verify" => None,
            "spsa" => v1::CreateSpsaRequest::decode(bytes.as_slice()).ok().and_then(|r| r.test),
            _ => v1::CreateTestRequest::decode(bytes.as_slice()).ok(),
        });
        Unreadable { stored: stored.to_owned(), problem: problem.into(), request }
    }

    /// The outcome a job that was running or pending is shown with.
    pub fn outcome(&self) -> String {
        format!("stopped at start-up: this version cannot read it back: {}", self.problem)
    }
}

/// A match test.
#[derive(Clone, Debug)]
pub struct MatchJob {
    pub request: v1::CreateTestRequest,
    pub time_control: TimeControl,
    pub rules: RuleSet,
    /// When a lone repetition violation loses; every game is replayed under it.
    pub timing: ViolationTiming,
    pub variant: Variant,
    pub sprt: Option<Sprt>,
    /// The book's openings (unit `i` plays opening `i` modulo their number).
    pub openings: Option<Arc<Book>>,
    /// An SPSA job's settings: its engine plays itself, as plus and minus.
    pub spsa: Option<Box<SpsaSetup>>,
}

impl MatchJob {
    /// What a worker `slowness` times slower than the reference is told to play; its
    /// reports are checked against the same.
    pub fn lease_spec(&self, slowness: f64) -> v1::MatchSpec {
        v1::MatchSpec {
            new_engine: self.request.new_engine.clone(),
            base_engine: self.request.base_engine.clone(),
            time_control: self.time_control.scaled(slowness).to_string(),
            rules: self.rules.name().to_owned(),
            variant: self.variant.name().to_owned(),
            book: self.request.book.clone(),
            max_plies: self.request.max_plies,
            time_margin_ms: xq_proto::DEFAULT_TIME_MARGIN_MS,
            adjudication: self.request.adjudication,
            violation_timing: self.timing.name().to_owned(),
            book_offset: self.request.book_offset,
        }
    }

    /// The most characters `lease_spec`'s time control takes, whatever the slowness:
    /// a clock scaled for a slower or faster worker is written with other digits.
    pub fn longest_time_control(&self) -> usize {
        // A time or increment scaled into 1 ns..=10^7 s is written as an f64, in full:
        // at most 17 significant digits, a point and, below a second, "0." and up to 8
        // zeros.
        const NUMBER: usize = 27;
        match &self.time_control {
            // "moves/" (a u32), the time, "+" and the increment, and a ":" after each.
            TimeControl::Clock(periods) => periods.len() * (11 + 2 * NUMBER + 2),
            TimeControl::MoveTime(_) => "st=".len() + NUMBER,
            unscaled => unscaled.to_string().len(),
        }
    }
}

pub(crate) fn check_name(field: &'static str, text: &str, max: usize) -> Result<(), SpecError> {
    if text.len() > max || text.chars().any(char::is_control) {
        return Err(bad(field, format!("at most {max} bytes of UTF-8 and no control characters")));
    }
    Ok(())
}

/// The longest CPU flag a job may require or a worker declare: Linux's flag names are
/// short words (`avx512_vp2intersect`, 19 characters, is among the longest).
pub const MAX_CPU_FLAG_CHARS: usize = 32;

/// The longest self-play game a job may ask for, in plies (the rules end real games
/// long before).
pub const MAX_SELF_PLAY_PLIES: u32 = 2_000;
/// The most random opening plies a self-play game may start with: openings vary enough
/// within a few, and the coordinator replays each unit's openings to check its chunks.
pub const MAX_RANDOM_PLIES: u32 = 64;

/// The largest move number or count an adjudication setting may name: games end long
/// before.
const MAX_ADJUDICATION_COUNT: u32 = 1_000;

/// The largest adjudication score, centipawns (a mate score's size).
const MAX_ADJUDICATION_SCORE: i32 = 100_000;

/// An artifact named in a request: its hash, and a name fit for logs and file names.
pub(crate) fn check_artifact(field: &'static str, artifact: &v1::ArtifactRef) -> Result<(), SpecError> {
    check_hash(&artifact.sha256).map_err(|e| bad(field, e.to_string()))?;
    check_name(field, &artifact.name, 200)?;
    if artifact.name.contains(['/', '\\']) {
        return Err(bad(field, "an artifact's name is a file name, without a path"));
    }
    Ok(())
}

fn check_engine(field: &'static str, engine: Option<&v1::EngineSpec>) -> Result<(), SpecError> {
    let engine = engine.ok_or_else(|| bad(field, "missing"))?;
    if engine.name.is_empty() {
        return Err(bad(field, "the engine needs a name"));
    }
    check_name(field, &engine.name, 64)?;
    if engine.name.contains('"') {
        return Err(bad(field, "the name may not contain quotes (it goes into PGN tags)"));
    }
    let binary = engine.binary.as_ref().ok_or_else(|| bad(field, "no binary"))?;
    check_artifact(field, binary)?;
    if let Some(net) = &engine.net {
        check_artifact(field, net)?;
    }
    if !matches!(engine.protocol.as_str(), "uci" | "ucci") {
        return Err(bad(field, format!("protocol '{}': use uci or ucci", engine.protocol)));
    }
    // Empty strings keep the defaults: requests from before these fields existed.
    if !engine.ranks.is_empty() {
        engine.ranks.parse::<Dialect>().map_err(|e| bad(field, e.to_string()))?;
    }
    if !engine.fen_letters.is_empty() {
        engine.fen_letters.parse::<FenFlavour>().map_err(|e| bad(field, e.to_string()))?;
    }
    if engine.options.len() > 64 {
        return Err(bad(field, "more than 64 options"));
    }
    for (name, value) in &engine.options {
        check_name(field, name, 128)?;
        check_name(field, value, 1024)?;
    }
    Ok(())
}

/// Checks a test request (artifacts are checked against the store by the caller).
pub fn check_test(request: &v1::CreateTestRequest) -> Result<MatchJob, SpecError> {
    check_engine("new_engine", request.new_engine.as_ref())?;
    check_engine("base_engine", request.base_engine.as_ref())?;
    let names =
        [&request.new_engine.as_ref().expect("checked").name, &request.base_engine.as_ref().expect("checked").name];
    if names[0] == names[1] {
        return Err(bad("base_engine", "the two engines need different names"));
    }
    let time_control: TimeControl = request
        .time_control
        .parse()
        .map_err(|e: xq_engine::time_control::BadTimeControl| bad("time_control", e.to_string()))?;
    let rules: RuleSet = if request.rules.is_empty() {
        RuleSet::Wxf
    } else {
        request.rules.parse().map_err(|e: xq_engine::xiangqi::rules::UnknownRuleSet| bad("rules", e.to_string()))?
    };
    let variant: Variant = if request.variant.is_empty() {
        Variant::Xiangqi
    } else {
        request.variant.parse().map_err(|e: xq_engine::variant::UnknownVariant| bad("variant", e.to_string()))?
    };
    let timing = xq_proto::violation_timing(&request.violation_timing).map_err(|e| bad("violation_timing", e))?;
    if let Some(book) = &request.book {
        check_artifact("book", book)?;
    }
    check_name("description", &request.description, 200)?;
    for flag in &request.required_cpu_flags {
        check_name("required_cpu_flags", flag, MAX_CPU_FLAG_CHARS)?;
    }
    let sprt = match &request.sprt {
        Some(spec) => {
            let model = match spec.model.as_str() {
                "" | "normalized" => Model::Normalized,
                "logistic" => Model::Logistic,
                other => return Err(bad("sprt.model", format!("'{other}': use normalized or logistic"))),
            };
            if !(spec.elo0.is_finite() && spec.elo1.is_finite() && spec.elo0 < spec.elo1) {
                return Err(bad("sprt", "elo0 must be below elo1"));
            }
            Some(
                Sprt::new(spec.elo0, spec.elo1, spec.alpha, spec.beta, model)
                    .map_err(|e| bad("sprt", e.to_string()))?,
            )
        }
        None => None,
    };
    if sprt.is_none() && request.pairs == 0 {
        return Err(bad("pairs", "a test without an SPRT needs a number of pairs"));
    }
    if request.pairs > MAX_UNITS {
        return Err(bad("pairs", format!("at most {MAX_UNITS}")));
    }
    if let Some(a) = &request.adjudication {
        let counts = [a.draw_move_number, a.draw_plies, a.resign_moves];
        if counts.iter().any(|&n| n > MAX_ADJUDICATION_COUNT) {
            return Err(bad("adjudication", format!("move numbers and counts at most {MAX_ADJUDICATION_COUNT}")));
        }
        if !(0..=MAX_ADJUDICATION_SCORE).contains(&a.draw_score)
            || !(0..=MAX_ADJUDICATION_SCORE).contains(&a.resign_score)
        {
            return Err(bad("adjudication", format!("scores between 0 and {MAX_ADJUDICATION_SCORE} centipawns")));
        }
    }
    Ok(MatchJob { request: request.clone(), time_control, rules, timing, variant, sprt, openings: None, spsa: None })
}

/// Checks a self-play request.
pub fn check_self_play(request: &v1::CreateSelfPlayRequest) -> Result<(), SpecError> {
    let spec = request.spec.as_ref().ok_or_else(|| bad("spec", "missing"))?;
    if !(1..=10_000).contains(&spec.games_per_unit) {
        return Err(bad("spec.games_per_unit", "between 1 and 10,000"));
    }
    check_self_play_games(spec)?;
    // A unit is uploaded as one chunk: a unit that could not fit one would fail on
    // every worker, for ever.
    if self_play_unit_records(spec) > MAX_RECORDS as u64 {
        return Err(bad(
            "spec.games_per_unit",
            format!(
                "{} games of up to {} plies may not fit a chunk ({MAX_RECORDS} records): fewer games per unit",
                spec.games_per_unit,
                self_play_plies(spec)
            ),
        ));
    }
    if !(1..=MAX_UNITS).contains(&request.units) {
        return Err(bad("units", format!("between 1 and {MAX_UNITS}")));
    }
    check_name("description", &request.description, 200)
}

/// Checks how a self-play spec plays its games (nodes, rules, length, game, net),
/// for self-play jobs and for the fresh games of verification jobs; the game it plays.
pub fn check_self_play_games(spec: &v1::SelfPlaySpec) -> Result<Variant, SpecError> {
    if !(1..=10_000_000).contains(&spec.nodes) {
        return Err(bad("spec.nodes", "between 1 and 10,000,000"));
    }
    if !spec.rules.is_empty() {
        spec.rules.parse::<RuleSet>().map_err(|e| bad("spec.rules", e.to_string()))?;
    }
    if spec.max_plies > MAX_SELF_PLAY_PLIES {
        return Err(bad("spec.max_plies", format!("at most {MAX_SELF_PLAY_PLIES} (0: {DEFAULT_SELF_PLAY_PLIES})")));
    }
    if spec.random_plies > MAX_RANDOM_PLIES {
        return Err(bad("spec.random_plies", format!("at most {MAX_RANDOM_PLIES}")));
    }
    let variant = self_play_variant(spec)?;
    if let Some(net) = &spec.net {
        if variant != Variant::Xiangqi {
            return Err(bad("spec.net", "nets are for Xiangqi only"));
        }
        check_artifact("spec.net", net)?;
    }
    Ok(variant)
}

/// The game a self-play spec plays (default Xiangqi).
pub fn self_play_variant(spec: &v1::SelfPlaySpec) -> Result<Variant, SpecError> {
    if spec.variant.is_empty() {
        return Ok(Variant::Xiangqi);
    }
    spec.variant.parse().map_err(|e: xq_engine::variant::UnknownVariant| bad("spec.variant", e.to_string()))
}

impl JobSpec {
    /// The stored form: the request, protobuf in hex.
    pub fn encode(&self) -> String {
        match self {
            JobSpec::Match(job) => match &job.spsa {
                Some(spsa) => hex::encode(spsa.request.encode_to_vec()),
                None => hex::encode(job.request.encode_to_vec()),
            },
            JobSpec::SelfPlay(request) => hex::encode(request.encode_to_vec()),
            JobSpec::Verify(job) => hex::encode(job.spec.encode_to_vec()),
            JobSpec::Unreadable(job) => job.stored.clone(),
        }
    }

    /// Reads a stored spec back (`openings` are loaded by the caller).
    pub fn decode(kind: &str, text: &str) -> Result<JobSpec, String> {
        let bytes = hex::decode(text).map_err(|e| e.to_string())?;
        match kind {
            "selfplay" => {
                Ok(JobSpec::SelfPlay(v1::CreateSelfPlayRequest::decode(bytes.as_slice()).map_err(|e| e.to_string())?))
            }
            "verify" => {
                let spec = v1::VerificationSpec::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
                Ok(JobSpec::Verify(Box::new(check_verification(&spec).map_err(|e| e.to_string())?)))
            }
            "spsa" => {
                let request = v1::CreateSpsaRequest::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
                Ok(JobSpec::Match(Box::new(check_spsa(&request).map_err(|e| e.to_string())?)))
            }
            _ => {
                let request = v1::CreateTestRequest::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
                Ok(JobSpec::Match(Box::new(check_test(&request).map_err(|e| e.to_string())?)))
            }
        }
    }

    /// What a lease of this job gives a worker `slowness` times slower than the
    /// reference to play (an SPSA lease's probe is added to its engines' options).
    pub fn lease_work(&self, slowness: f64) -> v1::lease::Work {
        match self {
            JobSpec::Match(m) => v1::lease::Work::MatchSpec(m.lease_spec(slowness)),
            JobSpec::SelfPlay(r) => v1::lease::Work::SelfPlay(r.spec.clone().unwrap_or_default()),
            JobSpec::Verify(v) => v1::lease::Work::Verification(v.spec.clone()),
            // Never leased: the scheduler leases running jobs only, and this one is not.
            JobSpec::Unreadable(_) => v1::lease::Work::Verification(v1::VerificationSpec::default()),
        }
    }

    /// One line for lists.
    pub fn summary(&self) -> String {
        match self {
            JobSpec::Match(job) if job.spsa.is_some() => {
                let spsa = job.spsa.as_ref().expect("matched");
                let test = spsa.request.test.clone().unwrap_or_default();
                let engine = test.new_engine.map_or(String::new(), |e| e.name);
                let names: Vec<&str> = spsa.start.parameters().iter().map(|p| p.name.as_str()).collect();
                format!("SPSA of {engine}: {}, {}, {}", names.join(", "), test.time_control, job.rules.name())
            }
            JobSpec::Match(job) => {
                let r = &job.request;
                let name = |e: &Option<v1::EngineSpec>| e.as_ref().map_or(String::new(), |e| e.name.clone());
                let mut text = format!(
                    "{} vs {}, {}, {}",
                    name(&r.new_engine),
                    name(&r.base_engine),
                    r.time_control,
                    job.rules.name()
                );
                if let Some(s) = &job.sprt {
                    let model = if s.model == Model::Logistic { "logistic" } else { "normalized" };
                    let trinomial = if r.sprt.as_ref().is_some_and(|s| s.trinomial) { " trinomial" } else { "" };
                    text.push_str(&format!(", SPRT [{}, {}] {model}{trinomial}", s.elo0, s.elo1));
                }
                text
            }
            JobSpec::SelfPlay(r) => {
                let s = r.spec.clone().unwrap_or_default();
                let variant = self_play_variant(&s).unwrap_or_default().name();
                let evaluation = s.net.as_ref().map_or_else(|| "handcrafted".to_owned(), |n| format!("net {}", n.name));
                format!("{variant} self-play, {} nodes, {} games a unit, {evaluation}", s.nodes, s.games_per_unit)
            }
            JobSpec::Verify(job) => job.summary(),
            JobSpec::Unreadable(job) => format!("cannot be read back by this version: {}", job.problem),
        }
    }
}

impl MatchJob {
    /// Where the job's SPRT stands on its results, if it has one: on the pairs
    /// (pentanomial), or on the games (losses, draws, wins) when the spec asks for the
    /// trinomial model.
    pub fn sprt_state(&self, row: &JobRow) -> Option<SprtState> {
        self.sprt_state_of(&row.wdl.map(|c| c.max(0) as u64), &row.pentanomial.map(|c| c.max(0) as u64))
    }

    /// Where the SPRT stands on these wins, draws and losses, and pentanomial counts.
    fn sprt_state_of(&self, wdl: &[u64; 3], penta: &[u64; 5]) -> Option<SprtState> {
        let sprt = self.sprt.as_ref()?;
        let trinomial = self.request.sprt.as_ref().is_some_and(|s| s.trinomial);
        if trinomial { sprt.state(&[wdl[2], wdl[1], wdl[0]]) } else { sprt.state(penta) }.ok()
    }

    /// The test's course: its SPRT and Elo at each of the course's marks.
    pub fn history(&self, course: &Course) -> v1::JobHistory {
        let points = course
            .marks()
            .map(|mark| {
                let llr = self.sprt_state_of(&mark.wdl, &mark.penta).map_or(0.0, |s| s.llr);
                let elo = elo_estimate(&mark.penta).ok();
                v1::HistoryPoint {
                    time_ms: mark.time_ms,
                    pairs: mark.pairs,
                    llr,
                    elo: elo.as_ref().map_or(0.0, |e| e.elo),
                    elo_low: elo.as_ref().map_or(0.0, |e| e.low),
                    elo_high: elo.as_ref().map_or(0.0, |e| e.high),
                }
            })
            .collect();
        let bounds = self.sprt.as_ref().and_then(|s| s.state(&[0; 5]).ok());
        v1::JobHistory {
            points,
            lower: bounds.as_ref().map_or(0.0, |b| b.lower),
            upper: bounds.as_ref().map_or(0.0, |b| b.upper),
            spsa: Vec::new(),
        }
    }
}

/// The most points of a test's history: enough for a chart's width.
pub const HISTORY_POINTS: usize = 400;

/// A test's counts as they grew, kept as pairs count: a mark every `step` pairs, and
/// when the marks reach [`HISTORY_POINTS`] every other one goes and the step doubles.
/// Counting a pair costs O(1) and a history at most [`HISTORY_POINTS`] SPRT
/// evaluations, however long the test (reading its pairs back would cost a scan of
/// all of them on every look at a live page).
#[derive(Clone, Debug)]
pub struct Course {
    step: u64,
    now: Mark,
    marks: Vec<Mark>,
}

/// A test's counts after some of its pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Mark {
    /// When the last of them counted, in milliseconds since the Unix epoch.
    pub time_ms: i64,
    pub pairs: u64,
    pub wdl: [u64; 3],
    pub penta: [u64; 5],
}

impl Default for Course {
    fn default() -> Self {
        Course { step: 1, now: Mark::default(), marks: Vec::new() }
    }
}

impl Course {
    /// The course of pairs (time counted, the new engine's half points per game) in
    /// the order they counted.
    pub fn of(pairs: &[(i64, [i64; 2])]) -> Course {
        let mut course = Course::default();
        for &(time_ms, points) in pairs {
            course.add(time_ms, points);
        }
        course
    }

    /// Counts a pair.
    pub fn add(&mut self, time_ms: i64, points: [i64; 2]) {
        let now = &mut self.now;
        add_points(&mut now.wdl, &mut now.penta, points);
        now.pairs += 1;
        now.time_ms = time_ms;
        if now.pairs.is_multiple_of(self.step) {
            self.marks.push(*now);
            if self.marks.len() >= HISTORY_POINTS {
                self.step *= 2;
                let step = self.step;
                self.marks.retain(|mark| mark.pairs.is_multiple_of(step));
            }
        }
    }

    /// Pairs counted.
    pub fn pairs(&self) -> u64 {
        self.now.pairs
    }

    /// The marks, evenly spaced, and the counts now: at most [`HISTORY_POINTS`].
    pub fn marks(&self) -> impl Iterator<Item = Mark> + '_ {
        let now = (self.now.pairs > 0 && self.marks.last() != Some(&self.now)).then_some(self.now);
        self.marks.iter().copied().chain(now)
    }
}

/// Adds a pair's half points (new engine, per game) to W/D/L and pentanomial counts.
pub fn add_points(wdl: &mut [u64; 3], penta: &mut [u64; 5], points: [i64; 2]) {
    let (games, pair) = slots(points);
    for game in games {
        wdl[game] += 1;
    }
    penta[pair] += 1;
}

/// Where a pair's half points (new engine, per game) are counted: each game's W/D/L
/// slot (win, draw, loss) and the pair's pentanomial slot (its points, 0 to 4).
pub fn slots(points: [i64; 2]) -> ([usize; 2], usize) {
    let game = |p: i64| (2 - p.clamp(0, 2)) as usize;
    (points.map(game), (points[0].clamp(0, 2) + points[1].clamp(0, 2)) as usize)
}

/// A match's counts as the board alone decided its games: each game won by a
/// repetition ruling (a lone perpetual check or chase, Xiongqi's repetitive move)
/// counted as a draw. Engines that do not know the chase rules lose such games to the
/// arbiter, so a test against one reads its strength here and its score under the
/// rules in the pentanomial.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OverTheBoard {
    /// Pairs by the new engine's points with those games as draws.
    pub pentanomial: [i64; 5],
    /// Games won by a repetition ruling: by the new engine, by the base engine.
    pub ruled_wins: [i64; 2],
}

impl OverTheBoard {
    /// Counts a pair (`sign` 1) or takes it off (`sign` -1): the new engine's half
    /// points in its two games and the games' endings as units store them.
    pub fn count(&mut self, points: [i64; 2], reasons: &[String], sign: i64) {
        let mut board = 0;
        for (game, points) in points.into_iter().enumerate() {
            let points = points.clamp(0, 2);
            let ruled = reasons.get(game).is_some_and(|reason| Reason::names_a_repetition_violation(reason));
            if ruled && points != 1 {
                self.ruled_wins[usize::from(points == 0)] += sign;
                board += 1;
            } else {
                board += points;
            }
        }
        self.pentanomial[board as usize] += sign;
    }
}

/// What a job list's filters look at that never changes once a job is made (its text
/// already in lower case), kept with each job so that a searched list is a pass of
/// comparisons, not a view built for every job ever made (finding N4 of the security
/// review). Whether a job is running, and its kind, are read off its row.
pub struct Listing {
    /// The description and the summary, in lower case.
    text: [String; 2],
    id: String,
    time_control: String,
    engines: [String; 2],
    bounds: Option<(f64, f64)>,
}

impl Listing {
    /// The listing of a job, from its first view.
    pub fn of(job: &v1::Job) -> Listing {
        Listing {
            text: [job.description.to_lowercase(), job.summary.to_lowercase()],
            id: job.job_id.to_string(),
            time_control: job.time_control.clone(),
            engines: [job.new_engine.clone(), job.base_engine.clone()],
            bounds: job.sprt_spec.as_ref().map(|s| (s.elo0, s.elo1)),
        }
    }

    /// Whether the job passes `request`'s filters on what never changes; `search` is
    /// the request's search text in lower case.
    pub fn matches(&self, request: &v1::ListJobsRequest, search: &str) -> bool {
        (search.is_empty() || self.text.iter().any(|text| text.contains(search)) || self.id == search)
            && (request.time_control.is_empty() || self.time_control == request.time_control)
            && (request.engine.is_empty() || self.engines.contains(&request.engine))
            && request.elo0.is_none_or(|elo0| self.bounds.is_some_and(|b| b.0 == elo0))
            && request.elo1.is_none_or(|elo1| self.bounds.is_some_and(|b| b.1 == elo1))
    }
}

/// The Elo estimate of results (pentanomial, or losses, draws, wins), if there are any.
pub fn elo_state(results: &[u64], draw_ratio: f64) -> Option<v1::EloState> {
    if results.iter().sum::<u64>() == 0 {
        return None;
    }
    elo_estimate(results).ok().map(|e| v1::EloState {
        elo: e.elo,
        low: e.low,
        high: e.high,
        los: e.los,
        nelo: e.nelo,
        draw_ratio,
    })
}

/// The public view of a job, with the counts the scheduler keeps beside its row (its
/// active leases, reports refused, re-checks pending); an SPSA job's run is kept by the
/// scheduler (`spsa`).
pub fn job_view(
    row: &JobRow,
    spec: &JobSpec,
    (active_leases, refused_reports, rechecks_pending): (u32, u64, u64),
    spsa: Option<v1::SpsaView>,
) -> v1::Job {
    let request = match spec {
        JobSpec::Match(job) => Some(&job.request),
        JobSpec::Unreadable(job) => job.request.as_ref(),
        JobSpec::SelfPlay(_) | JobSpec::Verify(_) => None,
    };
    let penta: Vec<u64> = row.pentanomial.iter().map(|&c| c.max(0) as u64).collect();
    let wdl = row.wdl.map(|c| c.max(0) as u64);
    let games = wdl.iter().sum::<u64>();
    let sprt = match spec {
        JobSpec::Match(job) => {
            job.sprt_state(row).map(|s| v1::SprtState { llr: s.llr, lower: s.lower, upper: s.upper })
        }
        JobSpec::SelfPlay(_) | JobSpec::Verify(_) | JobSpec::Unreadable(_) => None,
    };
    let elo = elo_state(&penta, wdl[1] as f64 / games.max(1) as f64);
    let over_the_board = request.is_some().then(|| {
        let board = &row.over_the_board;
        let pentanomial: Vec<u64> = board.pentanomial.iter().map(|&c| c.max(0) as u64).collect();
        let [new_ruled_wins, base_ruled_wins] = board.ruled_wins.map(|c| c.max(0) as u64);
        // The draws as the board decided them: the games drawn and those won by a ruling.
        let draws = wdl[1] + new_ruled_wins + base_ruled_wins;
        v1::OverTheBoard {
            new_ruled_wins,
            base_ruled_wins,
            elo: elo_state(&pentanomial, draws as f64 / games.max(1) as f64),
            pentanomial,
        }
    });
    v1::Job {
        job_id: row.id as u64,
        kind: row.kind.clone(),
        state: row.state.clone(),
        outcome: row.outcome.clone(),
        description: row.description.clone(),
        priority: row.priority as i32,
        units_total: row.units_total as u64,
        units_done: row.units_done as u64,
        totals: Some(v1::Totals { wins: wdl[0], draws: wdl[1], losses: wdl[2], pentanomial: penta }),
        sprt,
        elo,
        reasons: row.reasons.iter().map(|(k, v)| (k.clone(), *v)).collect::<HashMap<_, _>>(),
        active_leases,
        positions: row.positions.max(0) as u64,
        summary: spec.summary(),
        time_control: request.map_or(String::new(), |r| r.time_control.clone()),
        rules: match spec {
            JobSpec::Match(job) => job.rules.name().to_owned(),
            JobSpec::SelfPlay(_) => String::new(),
            JobSpec::Unreadable(job) => job.request.as_ref().map_or(String::new(), |r| r.rules.clone()),
            JobSpec::Verify(job) => job.rules.iter().map(|r| r.name()).collect::<Vec<_>>().join(","),
        },
        variant: match spec {
            JobSpec::Match(job) => job.variant.name().to_owned(),
            JobSpec::SelfPlay(r) => {
                self_play_variant(&r.spec.clone().unwrap_or_default()).unwrap_or_default().name().to_owned()
            }
            JobSpec::Verify(_) => Variant::Xiangqi.name().to_owned(),
            JobSpec::Unreadable(job) => job.request.as_ref().map_or(String::new(), |r| r.variant.clone()),
        },
        new_engine: engine_name(request.and_then(|r| r.new_engine.as_ref())),
        base_engine: engine_name(request.and_then(|r| r.base_engine.as_ref())),
        sprt_spec: request.and_then(|r| r.sprt.clone()),
        created_ms: row.created_ms,
        refused_reports,
        submitter: row.submitter.clone(),
        data_removed_ms: row.data_removed_ms,
        spsa,
        // Kept by the scheduler, which sets it.
        rechecks_pending,
        over_the_board,
    }
}

fn engine_name(engine: Option<&v1::EngineSpec>) -> String {
    engine.map_or(String::new(), |e| e.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pairs_pentanomial_slot_is_the_sum_of_its_games_wdl_points() {
        assert_eq!(slots([2, 0]), ([0, 2], 2), "a win and a loss");
        assert_eq!(slots([1, 2]), ([1, 0], 3));
        // Out of range, each game counts as its nearest result, and the pair as their sum.
        for points in [[-5, 1], [3, -1], [7, 7], [-1, -1]] {
            let (games, pair) = slots(points);
            assert_eq!(pair, games.iter().map(|&g| 2 - g).sum::<usize>(), "{points:?}");
        }
    }

    #[test]
    fn a_course_keeps_evenly_spaced_marks_and_ends_where_the_counts_stand() {
        let pairs: Vec<(i64, [i64; 2])> =
            (0..1_000).map(|i| (i as i64, [(i % 3) as i64, ((i / 3) % 3) as i64])).collect();
        for n in [0, 1, 7, 399, 400, 401, 1_000] {
            let course = Course::of(&pairs[..n]);
            let marks: Vec<Mark> = course.marks().collect();
            assert!(marks.len() <= HISTORY_POINTS, "{n} pairs: {} marks", marks.len());
            assert_eq!(course.pairs(), n as u64);
            let Some(last) = marks.last() else {
                assert_eq!(n, 0);
                continue;
            };
            // The last mark is where the counts stand: recounted from the pairs here.
            let (mut wdl, mut penta) = ([0; 3], [0; 5]);
            for &(_, points) in &pairs[..n] {
                add_points(&mut wdl, &mut penta, points);
            }
            assert_eq!((last.pairs, last.wdl, last.penta, last.time_ms), (n as u64, wdl, penta, n as i64 - 1));
            // Every mark but the last is a multiple of one step, with no gaps.
            let step = marks[0].pairs;
            for (index, mark) in marks.iter().enumerate().take(marks.len() - 1) {
                assert_eq!(mark.pairs, step * (index as u64 + 1), "{n} pairs");
            }
            assert!(n < HISTORY_POINTS || marks.len() >= HISTORY_POINTS / 2, "{n} pairs: {} marks", marks.len());
        }
    }

    fn engine(name: &str) -> v1::EngineSpec {
        v1::EngineSpec {
            name: name.to_owned(),
            binary: Some(v1::ArtifactRef { sha256: "a".repeat(64), name: "engine".to_owned(), size: 1 }),
            protocol: "uci".to_owned(),
            ..Default::default()
        }
    }

    fn request() -> v1::CreateTestRequest {
        v1::CreateTestRequest {
            new_engine: Some(engine("new")),
            base_engine: Some(engine("base")),
            time_control: "10+0.1".to_owned(),
            sprt: Some(v1::SprtSpec { elo0: 0.0, elo1: 5.0, alpha: 0.05, beta: 0.05, ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn good_requests_pass_and_round_trip() {
        let job = check_test(&request()).unwrap();
        assert_eq!(job.rules, RuleSet::Wxf);
        let spec = JobSpec::Match(Box::new(job));
        let JobSpec::Match(back) = JobSpec::decode("sprt", &spec.encode()).unwrap() else { panic!() };
        assert_eq!(back.request, request());
        assert!(spec.summary().contains("new vs base, 10+0.1, wxf, SPRT [0, 5]"), "{}", spec.summary());
    }

    #[test]
    fn each_bad_field_is_named() {
        type Change = Box<dyn Fn(&mut v1::CreateTestRequest)>;
        let cases: Vec<(&str, Change)> = vec![
            ("time_control", Box::new(|r| r.time_control = "fast".to_owned())),
            ("rules", Box::new(|r| r.rules = "fide".to_owned())),
            ("variant", Box::new(|r| r.variant = "chess".to_owned())),
            ("new_engine", Box::new(|r| r.new_engine = None)),
            ("new_engine", Box::new(|r| r.new_engine.as_mut().unwrap().protocol = "xboard".to_owned())),
            ("new_engine", Box::new(|r| r.new_engine.as_mut().unwrap().ranks = "1-9".to_owned())),
            ("base_engine", Box::new(|r| r.base_engine.as_mut().unwrap().fen_letters = "hb".to_owned())),
            (
                "base_engine",
                Box::new(|r| r.base_engine.as_mut().unwrap().binary.as_mut().unwrap().sha256 = "../etc".to_owned()),
            ),
            ("base_engine", Box::new(|r| r.base_engine.as_mut().unwrap().name = "new".to_owned())),
            ("sprt", Box::new(|r| r.sprt.as_mut().unwrap().alpha = 0.0)),
            ("sprt", Box::new(|r| r.sprt.as_mut().unwrap().elo1 = -1.0)),
            ("sprt.model", Box::new(|r| r.sprt.as_mut().unwrap().model = "bayes".to_owned())),
            ("violation_timing", Box::new(|r| r.violation_timing = "fourfold".to_owned())),
            ("pairs", Box::new(|r| r.sprt = None)),
            ("pairs", Box::new(|r| r.pairs = MAX_UNITS + 1)),
            ("book", Box::new(|r| r.book = Some(v1::ArtifactRef { sha256: "XYZ".to_owned(), ..Default::default() }))),
            (
                "adjudication",
                Box::new(|r| r.adjudication = Some(v1::Adjudication { draw_plies: 1_001, ..Default::default() })),
            ),
            (
                "adjudication",
                Box::new(|r| r.adjudication = Some(v1::Adjudication { resign_score: -1, ..Default::default() })),
            ),
        ];
        for (field, change) in cases {
            let mut r = request();
            change(&mut r);
            assert_eq!(check_test(&r).unwrap_err().field, field);
        }
    }

    #[test]
    fn a_test_s_violation_timing_reaches_its_leases() {
        assert_eq!(check_test(&request()).unwrap().lease_spec(1.0).violation_timing, "threefold", "the default");
        let warned = v1::CreateTestRequest { violation_timing: "after-warning".to_owned(), ..request() };
        let job = check_test(&warned).unwrap();
        assert_eq!(
            (job.timing, job.lease_spec(1.0).violation_timing.as_str()),
            (ViolationTiming::AfterWarning, "after-warning")
        );
    }

    #[test]
    fn the_trinomial_model_tests_the_games() {
        let mut request = request();
        let row = JobRow {
            id: 1,
            kind: "sprt".to_owned(),
            state: "running".to_owned(),
            outcome: String::new(),
            description: String::new(),
            priority: 0,
            spec: String::new(),
            units_total: 10,
            next_unit: 0,
            units_done: 0,
            wdl: [30, 50, 20],
            pentanomial: [5, 10, 20, 10, 5],
            over_the_board: OverTheBoard::default(),
            positions: 0,
            reasons: HashMap::new(),
            created_ms: 0,
            submitter: String::new(),
            data_removed_ms: 0,
            request_id: String::new(),
            request_digest: String::new(),
        };
        let pairs = check_test(&request).unwrap().sprt_state(&row).unwrap();
        request.sprt.as_mut().unwrap().trinomial = true;
        let games = check_test(&request).unwrap().sprt_state(&row).unwrap();
        let sprt = Sprt::new(0.0, 5.0, 0.05, 0.05, Model::Normalized).unwrap();
        assert_eq!(pairs, sprt.state(&[5, 10, 20, 10, 5]).unwrap());
        assert_eq!(games, sprt.state(&[20, 50, 30]).unwrap(), "losses, draws, wins");
        assert!(games.llr > 0.0, "30 wins to 20 losses lean to H1");
        assert!(pairs.llr < 0.0, "even pairs lean to H0");
    }

    #[test]
    fn self_play_requests_are_checked() {
        let spec = v1::SelfPlaySpec { nodes: 1000, games_per_unit: 4, ..Default::default() };
        let good = v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 10, ..Default::default() };
        assert!(check_self_play(&good).is_ok());
        let zero = v1::CreateSelfPlayRequest { units: 0, ..good.clone() };
        assert_eq!(check_self_play(&zero).unwrap_err().field, "units");
        let no_nodes =
            v1::CreateSelfPlayRequest { spec: Some(v1::SelfPlaySpec { nodes: 0, ..spec.clone() }), ..good.clone() };
        assert_eq!(check_self_play(&no_nodes).unwrap_err().field, "spec.nodes");
        let chess = v1::CreateSelfPlayRequest {
            spec: Some(v1::SelfPlaySpec { variant: "chess".to_owned(), ..spec.clone() }),
            ..good.clone()
        };
        assert_eq!(check_self_play(&chess).unwrap_err().field, "spec.variant");
        let xiongqi = v1::CreateSelfPlayRequest {
            spec: Some(v1::SelfPlaySpec { variant: "xiongqi".to_owned(), ..spec.clone() }),
            ..good.clone()
        };
        assert!(check_self_play(&xiongqi).is_ok());
        let net = v1::ArtifactRef { sha256: "ab".repeat(32), name: "gen1.xqnn".to_owned(), size: 1 };
        let with_net = |variant: &str, net: v1::ArtifactRef| v1::CreateSelfPlayRequest {
            spec: Some(v1::SelfPlaySpec { variant: variant.to_owned(), net: Some(net), ..spec.clone() }),
            ..good.clone()
        };
        assert!(check_self_play(&with_net("xiangqi", net.clone())).is_ok());
        assert_eq!(check_self_play(&with_net("xiongqi", net.clone())).unwrap_err().field, "spec.net");
        let bad_hash = v1::ArtifactRef { sha256: "not a hash".to_owned(), ..net.clone() };
        assert_eq!(check_self_play(&with_net("xiangqi", bad_hash)).unwrap_err().field, "spec.net");
        let a_path = v1::ArtifactRef { name: "../../etc/passwd".to_owned(), ..net };
        assert_eq!(check_self_play(&with_net("xiangqi", a_path)).unwrap_err().field, "spec.net");
        // A unit must fit one chunk: games times plies at most MAX_RECORDS.
        let sized = |games_per_unit: u32, max_plies: u32| v1::CreateSelfPlayRequest {
            spec: Some(v1::SelfPlaySpec { games_per_unit, max_plies, ..spec.clone() }),
            ..good.clone()
        };
        assert!(check_self_play(&sized(2_621, 0)).is_ok(), "2,621 games of 400 plies fit");
        assert_eq!(check_self_play(&sized(2_622, 0)).unwrap_err().field, "spec.games_per_unit");
        assert!(check_self_play(&sized(524, 2_000)).is_ok());
        assert_eq!(check_self_play(&sized(525, 2_000)).unwrap_err().field, "spec.games_per_unit");
        assert_eq!(check_self_play(&sized(1, 2_001)).unwrap_err().field, "spec.max_plies");
        let random = |random_plies| v1::CreateSelfPlayRequest {
            spec: Some(v1::SelfPlaySpec { random_plies, ..spec.clone() }),
            ..good.clone()
        };
        assert!(check_self_play(&random(MAX_RANDOM_PLIES)).is_ok());
        assert_eq!(check_self_play(&random(MAX_RANDOM_PLIES + 1)).unwrap_err().field, "spec.random_plies");
    }

    /// The bound a lease's size is checked with holds at every slowness a worker can
    /// have, for awkward numbers too.
    #[test]
    fn a_lease_s_time_control_is_never_longer_than_its_bound() {
        for text in
            ["10+0.1", "40/60+0.5:0.3+0.07", "0.123456789+0.000000001", "9999999+9999999", "st=0.7", "nodes=5000"]
        {
            let job = MatchJob {
                request: v1::CreateTestRequest::default(),
                time_control: text.parse().unwrap(),
                rules: RuleSet::Wxf,
                timing: ViolationTiming::Threefold,
                variant: Variant::Xiangqi,
                sprt: None,
                openings: None,
                spsa: None,
            };
            let bound = job.longest_time_control();
            for step in 0..=20_000 {
                let slowness = 0.25 + 3.75 * f64::from(step) / 20_000.0;
                for slowness in [slowness, slowness / 3.0, slowness * 1.1, 1.0 / slowness] {
                    let written = job.lease_spec(slowness).time_control;
                    assert!(written.len() <= bound, "{text} at {slowness}: '{written}' over {bound}");
                }
            }
        }
    }
}
