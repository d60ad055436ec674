//! SPSA jobs: fishtest's tuning across the fleet.
//!
//! An SPSA job is a match whose two engines are the one engine tuned, "plus" and
//! "minus". Each lease carries a probe made at the iteration reached when it was
//! handed out (the values each side plays, set as the engines' options); each pair
//! that counts moves theta with its lease's probe and its result, plus's wins minus
//! losses ([`xq_stats::spsa`]).
//!
//! Theta is not stored. A unit counts once (the units table's key), each lease's probe
//! is stored with the lease, and the units are stored in the order they counted: at
//! start theta is replayed from them, and after a quarantine sets a worker's pairs
//! aside it is replayed without them. So a resent or re-leased pair moves theta once,
//! and a coordinator killed at any moment comes back with the theta of the pairs it
//! had counted.

pub mod setup;

use std::collections::{HashMap, HashSet};

use rand::Rng;
use xq_proto::v1;
use xq_stats::conduct::{Checks, FlipCorrelation, Steering};
use xq_stats::spsa::{
    DEFAULT_A_RATIO, DEFAULT_ALPHA, DEFAULT_GAMMA, History, Schedule, Tuner, option_value, parse_parameters,
};

use crate::jobs::checks::{SpecError, bad};
use crate::jobs::spsa::setup::SpsaSetup;
use crate::jobs::test::{MatchJob, check_test};

/// The engines' names in an SPSA job's games.
pub const PLUS: &str = "plus";
pub const MINUS: &str = "minus";

/// The most parameters an SPSA job tunes. Every lease carries each parameter twice
/// (plus's value and minus's) and a worker sets each on its engines before every game:
/// fishtest's runs tune tens to a few hundred, and a thousand of the longest names make
/// a lease of about 180 kB, far below the 8 MiB reply limit that 20,000 passed (every
/// worker that leased that job exited).
pub const MAX_PARAMETERS: usize = 1_000;

/// The longest parameter name, in characters: a parameter is a UCI spin option of the
/// engine (ours are at most 26 long), and its name goes into every lease twice.
pub const MAX_NAME_CHARS: usize = 64;

/// Checks an SPSA request; returns the match it plays (plus against minus).
pub fn check_spsa(request: &v1::CreateSpsaRequest) -> Result<MatchJob, SpecError> {
    let test = request.test.as_ref().ok_or_else(|| bad("test", "missing"))?;
    let spec = request.spsa.as_ref().ok_or_else(|| bad("spsa", "missing"))?;
    if test.base_engine.is_some() {
        return Err(bad("test.base_engine", "an SPSA job plays its one engine against itself: leave it out"));
    }
    if test.sprt.is_some() {
        return Err(bad("test.sprt", "an SPSA job has no SPRT: it plays `pairs` pairs"));
    }
    if test.pairs == 0 {
        return Err(bad("test.pairs", "the run's length in pairs"));
    }
    if !spec.a_ratio.is_finite() || spec.a_ratio < 0.0 {
        return Err(bad("spsa.a_ratio", "a share of the pairs, not below 0"));
    }
    let parameters = parse_parameters(&spec.params).map_err(|e| bad("spsa.params", e.to_string()))?;
    let or = |value: f64, default: f64| if value == 0.0 { default } else { value };
    let schedule = Schedule {
        pairs: test.pairs,
        big_a: (or(spec.a_ratio, DEFAULT_A_RATIO) * test.pairs as f64).floor(),
        alpha: or(spec.alpha, DEFAULT_ALPHA),
        gamma: or(spec.gamma, DEFAULT_GAMMA),
    };
    let start = Tuner::new(parameters, schedule).map_err(|e| bad("spsa", e.to_string()))?;
    let mut played = test.clone();
    let engine = played.new_engine.take();
    let named = |name: &str| engine.clone().map(|e| v1::EngineSpec { name: name.to_owned(), ..e });
    played.new_engine = named(PLUS);
    played.base_engine = named(MINUS);
    if let Some(engine) = &played.new_engine
        && let Some(p) =
            start.parameters().iter().find(|p| engine.options.keys().any(|k| k.eq_ignore_ascii_case(&p.name)))
    {
        return Err(bad("test.new_engine.options", format!("'{}' is tuned: it cannot also be set", p.name)));
    }
    let mut job = check_test(&played)?;
    job.spsa = Some(Box::new(SpsaSetup { request: request.clone(), start }));
    Ok(job)
}

/// Refuses a new SPSA run whose parameters pass the bounds of [`MAX_PARAMETERS`] and
/// [`MAX_NAME_CHARS`] or whose names an engine's `setoption` would misread. Applied when
/// a run is created, not when a stored one is read back at start: a run an older
/// version accepted keeps running after an upgrade.
pub fn check_spsa_bounds(request: &v1::CreateSpsaRequest) -> Result<(), SpecError> {
    let spec = request.spsa.as_ref().ok_or_else(|| bad("spsa", "missing".to_owned()))?;
    let parameters = parse_parameters(&spec.params).map_err(|e| bad("spsa.params", e.to_string()))?;
    if parameters.len() > MAX_PARAMETERS {
        return Err(bad("spsa.params", format!("{} parameters: at most {MAX_PARAMETERS}", parameters.len())));
    }
    if let Some(p) = parameters.iter().find(|p| !is_option_name(&p.name)) {
        return Err(bad(
            "spsa.params",
            format!(
                "parameter '{}': a name is at most {MAX_NAME_CHARS} characters, letters, digits and '_', \
                 words parted by one space, neither 'name' nor 'value' among them",
                p.name.chars().take(MAX_NAME_CHARS).collect::<String>().escape_default()
            ),
        ));
    }
    Ok(())
}

/// Whether `name` can be a tuned option's name. The worker sends it to the engine as
/// `setoption name <name> value <v>`: UCI names may hold spaces (ours do: "LMR Base"),
/// but a control character, a run of spaces or the word `name` or `value` would change
/// the command the engine reads.
fn is_option_name(name: &str) -> bool {
    name.len() <= MAX_NAME_CHARS
        && name.split(' ').all(|word| {
            !word.is_empty()
                && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !word.eq_ignore_ascii_case("name")
                && !word.eq_ignore_ascii_case("value")
        })
}

/// Sets a probe's values (plus's, minus's: `[name, value]` pairs) on the engines of
/// an SPSA lease.
pub fn set_probe(spec: &mut v1::MatchSpec, [plus, minus]: [Vec<(String, String)>; 2]) {
    for (engine, values) in [(&mut spec.new_engine, plus), (&mut spec.base_engine, minus)] {
        if let Some(engine) = engine {
            engine.probe_options.extend(values.iter().map(|(name, _)| name.clone()));
            engine.options.extend(values);
        }
    }
}

impl SpsaSetup {
    /// A probe whose values are as long as any probe's can be written: what a lease's
    /// size is bounded with.
    pub fn longest_probe(&self) -> [Vec<(String, String)>; 2] {
        let longest = option_value(f64::MIN);
        let values: Vec<_> = self.start.parameters().iter().map(|p| (p.name.clone(), longest.clone())).collect();
        [values.clone(), values]
    }
}

/// A probe as a lease stores it: the iteration, a colon, a `+` or `-` a parameter.
fn probe_text(iteration: u64, flips: &[i8]) -> String {
    let signs: String = flips.iter().map(|&f| if f > 0 { '+' } else { '-' }).collect();
    format!("{iteration}:{signs}")
}

fn parse_probe(text: &str, parameters: usize) -> Option<(u64, Vec<i8>)> {
    let (iteration, signs) = text.split_once(':')?;
    let flips: Vec<i8> = signs
        .chars()
        .map(|c| match c {
            '+' => Some(1),
            '-' => Some(-1),
            _ => None,
        })
        .collect::<Option<_>>()?;
    (flips.len() == parameters).then_some((iteration.parse().ok()?, flips))
}

/// A counted pair: its lease, unit, the worker that played it and plus's wins minus
/// losses.
#[derive(Clone, Copy, Debug)]
struct Counted {
    lease: u64,
    unit: u64,
    worker: u64,
    result: i64,
}

/// An SPSA job's run in the coordinator's memory.
#[derive(Clone, Debug)]
pub struct SpsaRun {
    start: Tuner,
    tuner: Tuner,
    history: History,
    /// Each lease's probe: iteration and flips.
    probes: HashMap<u64, (u64, Vec<i8>)>,
    /// The pairs counted, in the order they counted.
    counted: Vec<Counted>,
    /// How each worker's results go with the flips, and the whole fleet's: a worker
    /// that steers a parameter shows it against the others ([`SpsaRun::steering`]).
    by_worker: HashMap<u64, FlipCorrelation>,
    fleet: FlipCorrelation,
}

impl SpsaRun {
    /// A run at its start.
    pub fn new(setup: &SpsaSetup) -> SpsaRun {
        let start = setup.start.clone();
        SpsaRun {
            history: History::of(&start),
            tuner: start.clone(),
            fleet: FlipCorrelation::new(start.parameters().len()),
            start,
            probes: HashMap::new(),
            counted: Vec::new(),
            by_worker: HashMap::new(),
        }
    }

    /// A probe for a new lease at the current iteration: the engines' options (plus's,
    /// minus's) and the text the lease stores.
    pub fn probe_for(&mut self, lease: u64, rng: &mut impl Rng) -> ([Vec<(String, String)>; 2], String) {
        let flips: Vec<i8> =
            (0..self.tuner.parameters().len()).map(|_| if rng.random::<bool>() { 1 } else { -1 }).collect();
        let probe = self.tuner.probe(&flips).expect("a flip per parameter");
        let options = |values: &[f64]| {
            self.tuner.parameters().iter().zip(values).map(|(p, v)| (p.name.clone(), option_value(*v))).collect()
        };
        let given = [options(&probe.plus), options(&probe.minus)];
        self.probes.insert(lease, (probe.iteration, flips.clone()));
        (given, probe_text(probe.iteration, &flips))
    }

    /// A stored lease's probe, read back at start; false when it cannot be read.
    pub fn restore_probe(&mut self, lease: u64, text: &str) -> bool {
        match parse_probe(text, self.tuner.parameters().len()) {
            Some(probe) => {
                self.probes.insert(lease, probe);
                true
            }
            None => false,
        }
    }

    /// Counts a pair of `lease`, played by `worker`, in which plus scored `points` half
    /// points a game; a lease without a probe (its text unreadable) moves nothing.
    pub fn count(&mut self, lease: u64, unit: u64, worker: u64, points: [i64; 2]) {
        let counted = Counted { lease, unit, worker, result: points.iter().map(|p| p - 1).sum() };
        if self.apply(counted) {
            self.counted.push(counted);
        }
    }

    fn apply(&mut self, counted: Counted) -> bool {
        let Some((iteration, flips)) = self.probes.get(&counted.lease) else { return false };
        let probe = self.tuner.probe_at(*iteration, flips).expect("stored with a flip per parameter");
        self.tuner.apply(&probe, counted.result, 1);
        self.history.observe(&self.tuner);
        let parameters = flips.len();
        let worker = self.by_worker.entry(counted.worker).or_insert_with(|| FlipCorrelation::new(parameters));
        // Neither can refuse the pair: the probe has a flip of +1 or -1 per parameter,
        // and two games' points (0 to 2 each, checked before they count) make a result
        // within ±2.
        let _ = worker.add(counted.lease, flips, counted.result);
        let _ = self.fleet.add(counted.lease, flips, counted.result);
        true
    }

    /// The parameter whose flips `worker`'s results follow unlike the other workers',
    /// by name, when `checks` flag it.
    pub fn steering(&self, worker: u64, checks: &Checks) -> Option<(&str, Steering)> {
        let steering = checks.steering_flag(self.by_worker.get(&worker)?, &self.fleet)?;
        Some((self.tuner.parameters().get(steering.parameter)?.name.as_str(), steering))
    }

    /// Takes pairs off the run (a quarantined worker's) and replays the rest.
    pub fn set_aside(&mut self, units: &HashSet<u64>) {
        self.counted.retain(|c| !units.contains(&c.unit));
        self.tuner = self.start.clone();
        self.history = History::of(&self.start);
        self.by_worker.clear();
        self.fleet = FlipCorrelation::new(self.start.parameters().len());
        for counted in std::mem::take(&mut self.counted) {
            if self.apply(counted) {
                self.counted.push(counted);
            }
        }
    }

    /// Where the run stands.
    pub fn view(&self) -> v1::SpsaView {
        let schedule = self.tuner.schedule();
        v1::SpsaView {
            parameters: self
                .tuner
                .parameters()
                .iter()
                .zip(self.tuner.theta())
                .map(|(p, value)| v1::SpsaParameter {
                    name: p.name.clone(),
                    value: *value,
                    start: p.start,
                    min: p.min,
                    max: p.max,
                    c_end: p.c_end,
                    r_end: p.r_end,
                })
                .collect(),
            iterations: self.tuner.iteration(),
            big_a: schedule.big_a,
            alpha: schedule.alpha,
            gamma: schedule.gamma,
        }
    }

    /// Theta over the run.
    pub fn samples(&self) -> Vec<v1::SpsaSample> {
        self.history.samples.iter().map(|s| v1::SpsaSample { pairs: s.pairs, theta: s.theta.clone() }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(pairs: u64) -> SpsaSetup {
        let test = v1::CreateTestRequest {
            new_engine: Some(v1::EngineSpec {
                name: "tuned".to_owned(),
                binary: Some(v1::ArtifactRef { sha256: "ab".repeat(32), name: "e".to_owned(), size: 1 }),
                protocol: "uci".to_owned(),
                ..Default::default()
            }),
            time_control: "10+0.1".to_owned(),
            pairs,
            ..Default::default()
        };
        let spsa = v1::SpsaSpec {
            params: "A, 100, 0, 200, 10, 0.002\nB, 50, 0, 100, 5, 0.002".to_owned(),
            ..Default::default()
        };
        let request = v1::CreateSpsaRequest { test: Some(test), spsa: Some(spsa) };
        let job = check_spsa(&request).unwrap();
        *job.spsa.unwrap()
    }

    /// A probe's values are set as options, and named as the probe's, so that a worker
    /// takes the bench of the engine as submitted (its fixed options alone).
    #[test]
    fn a_probe_s_options_are_named_apart_from_the_engine_s_own() {
        let engine = |name: &str| v1::EngineSpec {
            name: name.to_owned(),
            options: [("Hash".to_owned(), "16".to_owned())].into(),
            ..Default::default()
        };
        let mut spec = v1::MatchSpec {
            new_engine: Some(engine("plus")),
            base_engine: Some(engine("minus")),
            ..Default::default()
        };
        let value = |v: &str| vec![("A".to_owned(), v.to_owned())];
        set_probe(&mut spec, [value("110"), value("90")]);
        for (engine, a) in [(spec.new_engine.unwrap(), "110"), (spec.base_engine.unwrap(), "90")] {
            assert_eq!(engine.options["A"], a);
            assert_eq!(engine.options["Hash"], "16");
            assert_eq!(engine.probe_options, ["A"]);
        }
    }

    /// A tuned option's name reaches the engine in `setoption name <name> value <v>`:
    /// only names that command reads back whole are taken.
    #[test]
    fn option_names_are_what_a_setoption_command_reads_back() {
        for good in ["A", "LMR Base", "Search_Param_9", "Null Move Eval Divisor", &"x".repeat(MAX_NAME_CHARS)] {
            assert!(is_option_name(good), "{good}");
        }
        let too_long = "x".repeat(MAX_NAME_CHARS + 1);
        for bad in ["", "A  B", " A", "A ", "A\tB", "A\rB", "Élan", "A-B", "A value B", "Name", "VALUE", &too_long] {
            assert!(!is_option_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn probes_round_trip_through_their_text() {
        assert_eq!(parse_probe(&probe_text(37, &[1, -1, 1]), 3), Some((37, vec![1, -1, 1])));
        assert_eq!(parse_probe("37:+-", 3), None);
        assert_eq!(parse_probe("x:+-+", 3), None);
        assert_eq!(parse_probe("1:+*+", 3), None);
    }

    /// Replaying the pairs that are left after a set-aside gives the theta of a run
    /// that never had the others.
    #[test]
    fn setting_pairs_aside_replays_the_rest() {
        let setup = setup(100);
        let mut rng = rand::rng();
        let mut run = SpsaRun::new(&setup);
        let mut clean = SpsaRun::new(&setup);
        for lease in 1..=20u64 {
            let (_, text) = run.probe_for(lease, &mut rng);
            assert!(clean.restore_probe(lease, &text));
            let points = [(lease % 3) as i64, ((lease / 3) % 3) as i64];
            run.count(lease, lease, lease % 4, points);
            if lease % 4 != 0 {
                clean.count(lease, lease, lease % 4, points);
            }
        }
        run.set_aside(&(1..=20).filter(|u| u % 4 == 0).collect());
        assert_eq!(run.tuner, clean.tuner);
        assert_eq!(run.history, clean.history);
    }

    #[test]
    fn a_request_is_checked() {
        let good = setup(10).request;
        let mut with_base = good.clone();
        with_base.test.as_mut().unwrap().base_engine = with_base.test.as_ref().unwrap().new_engine.clone();
        assert!(check_spsa(&with_base).unwrap_err().to_string().contains("leave it out"));
        let mut no_pairs = good.clone();
        no_pairs.test.as_mut().unwrap().pairs = 0;
        assert_eq!(check_spsa(&no_pairs).unwrap_err().field, "test.pairs");
        let mut bad_params = good.clone();
        bad_params.spsa.as_mut().unwrap().params = "A, 300, 0, 200, 10, 0.002".to_owned();
        assert!(check_spsa(&bad_params).unwrap_err().to_string().contains("start lies outside"));
        let mut set_twice = good.clone();
        let engine = set_twice.test.as_mut().unwrap().new_engine.as_mut().unwrap();
        engine.options.insert("a".to_owned(), "5".to_owned());
        assert!(check_spsa(&set_twice).unwrap_err().to_string().contains("'A' is tuned"));
        let job = check_spsa(&good).unwrap();
        assert_eq!(job.request.new_engine.as_ref().unwrap().name, PLUS);
        assert_eq!(job.request.base_engine.as_ref().unwrap().name, MINUS);
        assert_eq!(job.spsa.unwrap().start.schedule().big_a, 1.0);
    }
}
