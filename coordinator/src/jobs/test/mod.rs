//! Tests (SPRT and fixed-games matches between two engines): the request's checks, its
//! leases' spec, its SPRT read off the counts; the arbiter's replay of reported games
//! ([`replay`]), the evidence of endings the rules did not make ([`endings`]) and the
//! course of its counts over time ([`course`]).

pub mod course;
pub mod endings;
pub mod presets;
pub mod replay;
pub mod source;

use crate::jobs::Scaling;
use crate::jobs::checks::{MAX_CPU_FLAG_CHARS, MAX_UNITS, SpecError, bad, check_artifact, check_lineage, check_name};
use crate::jobs::spsa::setup::SpsaSetup;
use crate::jobs::test::course::Course;
use crate::storage::rows::JobRow;
use std::sync::Arc;
use xq_engine::book::Book;
use xq_engine::time_control::TimeControl;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::fen::FenFlavour;
use xq_engine::xiangqi::notation::Dialect;
use xq_engine::xiangqi::rules::{RuleSet, ViolationTiming};
use xq_proto::v1;
use xq_stats::{Model, Sprt, SprtState, elo_estimate};

/// The pair cap of an SPRT that names none: fishtest's default of 250,000 games
/// would take a small fleet months, so a test that has not decided by then is stopped.
pub const DEFAULT_SPRT_PAIRS: u64 = 100_000;

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
    /// Its engines: the new one, then the base.
    pub fn engines(&self) -> impl Iterator<Item = &v1::EngineSpec> {
        [&self.request.new_engine, &self.request.base_engine].into_iter().flatten()
    }

    /// What a worker is told to play, its clocks scaled by `scaling`; its reports are
    /// checked against the same, scaled by the factor they name for
    /// [`Scaling::ByEngines`].
    pub fn lease_spec(&self, scaling: Scaling) -> v1::MatchSpec {
        let unscaled = v1::MatchSpec {
            new_engine: self.request.new_engine.clone(),
            base_engine: self.request.base_engine.clone(),
            time_control: self.time_control.to_string(),
            rules: self.rules.name().to_owned(),
            variant: self.variant.name().to_owned(),
            book: self.request.book.clone(),
            max_plies: self.request.max_plies,
            time_margin_ms: xq_proto::DEFAULT_TIME_MARGIN_MS,
            adjudication: self.request.adjudication,
            violation_timing: self.timing.name().to_owned(),
            book_offset: self.request.book_offset,
            scale_by_engine_speed: true,
        };
        match scaling {
            Scaling::By(slowness) => xq_proto::speed::scaled(&unscaled, slowness),
            // Written as time controls write themselves (an engine's own is the
            // submitter's text until then), so that no lease's is longer than
            // `lengthen_time_controls` allows.
            Scaling::ByEngines => {
                v1::MatchSpec { scale_by_engine_speed: true, ..xq_proto::speed::scaled(&unscaled, 1.0) }
            }
        }
    }

    /// An upper estimate of a pair's wall time, `plies` a game, on a worker `slowness`
    /// times slower than the reference whose bench gives `nodes_per_second`: each
    /// engine thinks on its own clock (time odds) in both games.
    pub fn pair_seconds(&self, slowness: f64, plies: u32, nodes_per_second: u64) -> f64 {
        let clocks =
            xq_proto::speed::clocks_of(&self.time_control, &self.request.new_engine, &self.request.base_engine)
                // Checked at submission.
                .unwrap_or_else(|_| [self.time_control.clone(), self.time_control.clone()]);
        // A game's estimate is of both sides on one clock: half of it is each side's.
        clocks.iter().map(|clock| clock.scaled(slowness).game_seconds(plies, nodes_per_second)).sum()
    }

    /// Every time control of `spec`, a lease of this job, as long as a lease's can be
    /// written, whatever the slowness: what a lease reply's bound is measured with.
    pub fn lengthen_time_controls(&self, spec: &mut v1::MatchSpec) {
        spec.time_control = "9".repeat(longest_time_control(&self.time_control));
        for engine in [&mut spec.new_engine, &mut spec.base_engine].into_iter().flatten() {
            if let Ok(own) = engine.time_control.parse::<TimeControl>() {
                engine.time_control = "9".repeat(longest_time_control(&own));
            }
        }
    }
}

/// The most characters `time_control` takes once scaled, whatever the slowness: a
/// clock scaled for a slower or faster worker is written with other digits.
fn longest_time_control(time_control: &TimeControl) -> usize {
    // A time or increment scaled into 1 ns..=10^7 s is written as an f64, in full:
    // at most 17 significant digits, a point and, below a second, "0." and up to 8
    // zeros.
    const NUMBER: usize = 27;
    match time_control {
        // "moves/" (a u32), the time, "+" and the increment, and a ":" after each.
        TimeControl::Clock(periods) => periods.len() * (11 + 2 * NUMBER + 2),
        TimeControl::MoveTime(_) => "st=".len() + NUMBER,
        unscaled => unscaled.to_string().len(),
    }
}

/// The longest time control an engine may have of its own (time odds).
const MAX_ENGINE_TIME_CONTROL_CHARS: usize = 200;

/// Checks an engine's own time control (time odds) against the test's: a time control
/// of the same kind, since a UCI `go` gives each engine both sides' clocks.
fn check_time_odds(field: &'static str, engine: &v1::EngineSpec, test: &TimeControl) -> Result<(), SpecError> {
    if engine.time_control.is_empty() {
        return Ok(());
    }
    check_name(field, &engine.time_control, MAX_ENGINE_TIME_CONTROL_CHARS)?;
    let own: TimeControl =
        engine.time_control.parse().map_err(|e: xq_engine::time_control::BadTimeControl| bad(field, e.to_string()))?;
    if !own.same_kind(test) {
        return Err(bad(field, format!("time odds {own} against {test}: both clocks, both nodes, ... alike")));
    }
    Ok(())
}

/// The largest move number or count an adjudication setting may name: games end long
/// before.
const MAX_ADJUDICATION_COUNT: u32 = 1_000;

/// The longest webhook address.
const MAX_NOTIFY_URL_BYTES: usize = 2_000;

/// The largest adjudication score, centipawns (a mate score's size).
const MAX_ADJUDICATION_SCORE: i32 = 100_000;

fn check_engine(field: &'static str, engine: Option<&v1::EngineSpec>) -> Result<(), SpecError> {
    let engine = engine.ok_or_else(|| bad(field, "missing"))?;
    if engine.name.is_empty() {
        return Err(bad(field, "the engine needs a name"));
    }
    check_name(field, &engine.name, 64)?;
    if engine.name.contains('"') {
        return Err(bad(field, "the name may not contain quotes (it goes into PGN tags)"));
    }
    if engine.binary.is_none() && engine.builds.is_empty() {
        return Err(bad(field, "no binary"));
    }
    if let Some(binary) = &engine.binary {
        check_artifact(field, binary)?;
    }
    check_builds(field, &engine.builds)?;
    if let Some(net) = &engine.net {
        check_artifact(field, net)?;
    }
    if !engine.net_option.is_empty() {
        if engine.net.is_none() {
            return Err(bad(field, "a net option without a net"));
        }
        check_name(field, &engine.net_option, 128)?;
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
    // Each game holds its engines' threads in cores (leasing counts them).
    xq_proto::engine_threads(engine).map_err(|e| bad(field, e))?;
    Ok(())
}

/// The most builds an engine of a test has (CPU variants: a handful in practice).
pub const MAX_BUILDS: usize = 8;

/// The most CPU flags a build needs.
const MAX_BUILD_FLAGS: usize = 16;

/// Checks an engine's CPU builds: each names its flags and its binary.
fn check_builds(field: &'static str, builds: &[v1::EngineBuild]) -> Result<(), SpecError> {
    if builds.len() > MAX_BUILDS {
        return Err(bad(field, format!("{} builds: at most {MAX_BUILDS}", builds.len())));
    }
    for build in builds {
        if build.cpu_flags.is_empty() || build.cpu_flags.len() > MAX_BUILD_FLAGS {
            return Err(bad(
                field,
                format!("a build names 1 to {MAX_BUILD_FLAGS} CPU flags (the generic one is `binary`)"),
            ));
        }
        for flag in &build.cpu_flags {
            check_name(field, flag, MAX_CPU_FLAG_CHARS)?;
        }
        check_artifact(field, build.binary.as_ref().ok_or_else(|| bad(field, "a build without a binary"))?)?;
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
    check_time_odds("new_engine", request.new_engine.as_ref().expect("checked"), &time_control)?;
    check_time_odds("base_engine", request.base_engine.as_ref().expect("checked"), &time_control)?;
    let rules: RuleSet = if request.rules.is_empty() {
        RuleSet::Wxf
    } else {
        request.rules.parse().map_err(|e: xq_engine::xiangqi::rules::UnknownRuleSet| bad("rules", e.to_string()))?
    };
    let variant = Variant::named_or_xiangqi(&request.variant).map_err(|e| bad("variant", e.to_string()))?;
    let timing = xq_proto::violation_timing(&request.violation_timing).map_err(|e| bad("violation_timing", e))?;
    if let Some(book) = &request.book {
        check_artifact("book", book)?;
    }
    check_name("description", &request.description, 200)?;
    if !request.lineage.is_empty() {
        check_lineage("lineage", &request.lineage)?;
    }
    if let Some(source) = &request.source {
        source::check_source(source)?;
    }
    check_name("notify_url", &request.notify_url, MAX_NOTIFY_URL_BYTES)?;
    if !request.notify_url.is_empty() && !source::is_web_address(&request.notify_url) {
        return Err(bad("notify_url", "an http or https address, such as https://ci.example.org/hooks/xq"));
    }
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::storage::counts::OverTheBoard;
    use std::collections::HashMap;

    fn engine(name: &str) -> v1::EngineSpec {
        v1::EngineSpec {
            name: name.to_owned(),
            binary: Some(v1::ArtifactRef { sha256: "a".repeat(64), name: "engine".to_owned(), size: 1 }),
            protocol: "uci".to_owned(),
            ..Default::default()
        }
    }

    /// A good test request, which the kinds built on tests start from.
    pub(crate) fn request() -> v1::CreateTestRequest {
        v1::CreateTestRequest {
            new_engine: Some(engine("new")),
            base_engine: Some(engine("base")),
            time_control: "10+0.1".to_owned(),
            sprt: Some(v1::SprtSpec { elo0: 0.0, elo1: 5.0, alpha: 0.05, beta: 0.05, ..Default::default() }),
            ..Default::default()
        }
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
            ("lineage", Box::new(|r| r.lineage = "gen/2".to_owned())),
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
        assert_eq!(
            check_test(&request()).unwrap().lease_spec(Scaling::By(1.0)).violation_timing,
            "threefold",
            "the default"
        );
        let warned = v1::CreateTestRequest { violation_timing: "after-warning".to_owned(), ..request() };
        let job = check_test(&warned).unwrap();
        assert_eq!(
            (job.timing, job.lease_spec(Scaling::By(1.0)).violation_timing.as_str()),
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
            ended_ms: 0,
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

    /// The bound a lease's size is checked with holds at every slowness a worker can
    /// have, for awkward numbers too.
    #[test]
    fn a_lease_s_time_control_is_never_longer_than_its_bound() {
        for text in
            ["10+0.1", "40/60+0.5:0.3+0.07", "0.123456789+0.000000001", "9999999+9999999", "st=0.7", "nodes=5000"]
        {
            // The base engine's own clock as a submitter might write it: its lease
            // writes it as time controls write themselves, within the same bound.
            let padded = match text.split_once('=') {
                Some((kind, number)) => format!("{kind}=0000000000{number}"),
                None => format!("00000000000000000000{text}"),
            };
            padded.parse::<TimeControl>().expect("padded with zeros, still a time control");
            let base = v1::EngineSpec { time_control: padded.clone(), ..Default::default() };
            let job = MatchJob {
                request: v1::CreateTestRequest { base_engine: Some(base), ..Default::default() },
                time_control: text.parse().unwrap(),
                rules: RuleSet::Wxf,
                timing: ViolationTiming::Threefold,
                variant: Variant::Xiangqi,
                sprt: None,
                openings: None,
                spsa: None,
            };
            let bound = longest_time_control(&job.time_control);
            for step in 0..=20_000 {
                let slowness = 0.25 + 3.75 * f64::from(step) / 20_000.0;
                for slowness in [slowness, slowness / 3.0, slowness * 1.1, 1.0 / slowness] {
                    let spec = job.lease_spec(Scaling::By(slowness));
                    for written in [&spec.time_control, &spec.base_engine.as_ref().unwrap().time_control] {
                        assert!(written.len() <= bound, "{text} at {slowness}: '{written}' over {bound}");
                    }
                }
            }
            let left_to_the_worker = job.lease_spec(Scaling::ByEngines).base_engine.unwrap().time_control;
            assert!(left_to_the_worker.len() <= bound, "{padded}: '{left_to_the_worker}' over {bound}");
        }
    }
}
