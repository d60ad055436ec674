//! SPSA tuning (simultaneous perturbation stochastic approximation) as fishtest runs it.
//!
//! Every parameter has a value `theta`, bounds, and two end-of-run settings: `c_end`, the
//! perturbation at the last iteration, and `r_end`, the learning rate there. An
//! iteration is one game pair: every parameter is moved by `+c` or `-c` at random (its
//! flip), one engine plays `theta + c * flip` and the other `theta - c * flip` on the
//! same opening with colours swapped, and the first engine's `wins - losses` moves
//! `theta` by `R * c * result * flip` (with `R = a / c^2`), clipped to the bounds.
//!
//! The schedule (Spall's, with fishtest's defaults) shrinks both over the run:
//! `c_k = c / k^gamma` and `a_k = a / (A + k)^alpha` at iteration `k` (from 1), with
//! `c = c_end * N^gamma` and `a = r_end * c_end^2 * (A + N)^alpha` for a run of `N`
//! pairs, so that `c_N = c_end` and `a_N / c_N^2 = r_end`.
//!
//! A probe is the values of one iteration. It is made when the pairs are handed out,
//! at the iteration reached then, and applied when they are reported: pairs in flight
//! at once share an iteration number, as fishtest's do. Its step depends only on its
//! iteration and flips, so a coordinator can rebuild it from those two.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// fishtest's alpha: the learning rate's decay.
pub const DEFAULT_ALPHA: f64 = 0.602;
/// fishtest's gamma: the perturbation's decay.
pub const DEFAULT_GAMMA: f64 = 0.101;
/// fishtest's A as a share of the run's pairs.
pub const DEFAULT_A_RATIO: f64 = 0.1;
/// The learning rate at the end of the run that fishtest's tuning tools print for
/// every parameter (Stockfish's `TUNE` macro).
pub const DEFAULT_R_END: f64 = 0.002;
/// The end perturbation those tools print: the parameter's range divided by this.
pub const DEFAULT_C_END_DIVISOR: f64 = 20.0;

/// A parameter or schedule that cannot be tuned.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SpsaError {
    /// A parameter line is not `name, start, min, max, c_end, r_end`.
    #[error("parameter line {line}: {problem}")]
    Line {
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// A parameter's settings contradict each other.
    #[error("parameter '{name}': {problem}")]
    Parameter {
        /// The parameter.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// No parameters to tune.
    #[error("no parameters to tune")]
    Empty,
    /// Two parameters share a name.
    #[error("parameter '{0}' is declared twice")]
    Duplicate(String),
    /// The schedule cannot run.
    #[error("schedule: {0}")]
    Schedule(String),
    /// A parameter asked for by name is not a spin option of the engine.
    #[error("the engine declares no spin option '{name}' (its spin options: {spins})")]
    NotDeclared {
        /// The name asked for.
        name: String,
        /// The spin options it declares, comma-separated.
        spins: String,
    },
    /// A saved run's state cannot be read back.
    #[error("the run's state: {0}")]
    State(String),
    /// A probe's flips do not match the parameters.
    #[error("a probe has {flips} flips for {parameters} parameters, each +1 or -1")]
    Flips {
        /// Flips given.
        flips: usize,
        /// Parameters tuned.
        parameters: usize,
    },
}

/// A parameter as fishtest declares it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Parameter {
    /// The engine's option name.
    pub name: String,
    /// The value to start from.
    pub start: f64,
    /// The lowest value allowed.
    pub min: f64,
    /// The highest value allowed.
    pub max: f64,
    /// The perturbation at the end of the run.
    pub c_end: f64,
    /// The learning rate at the end of the run.
    pub r_end: f64,
}

impl Parameter {
    /// A spin option as the engine declares it in its `uci` answer
    /// (`option name N type spin default D min L max H`), with the end settings
    /// fishtest's tools give it: `c_end` a twentieth of the range, `r_end` 0.002.
    /// `None` for any other line.
    pub fn from_uci_option(line: &str) -> Option<Parameter> {
        let rest = line.trim().strip_prefix("option name ")?;
        let (name, rest) = rest.split_once(" type ")?;
        let words: Vec<&str> = rest.split_whitespace().collect();
        if words.first() != Some(&"spin") {
            return None;
        }
        let field = |key: &str| words.windows(2).find(|w| w[0] == key).and_then(|w| w[1].parse::<f64>().ok());
        let (start, min, max) = (field("default")?, field("min")?, field("max")?);
        let c_end = ((max - min) / DEFAULT_C_END_DIVISOR).max(f64::EPSILON);
        Some(Parameter { name: name.trim().to_owned(), start, min, max, c_end, r_end: DEFAULT_R_END })
    }

    fn check(&self) -> Result<(), SpsaError> {
        let bad = |problem: &str| Err(SpsaError::Parameter { name: self.name.clone(), problem: problem.to_owned() });
        let numbers = [self.start, self.min, self.max, self.c_end, self.r_end];
        if self.name.is_empty() || self.name.contains(['\n', '\r', ',']) {
            return Err(SpsaError::Parameter {
                name: self.name.clone(),
                problem: "a name is one line of text without commas".to_owned(),
            });
        }
        if numbers.iter().any(|n| !n.is_finite()) {
            return bad("every setting must be a finite number");
        }
        if self.min > self.max {
            return bad("min is above max");
        }
        if !(self.min..=self.max).contains(&self.start) {
            return bad("start lies outside min..max");
        }
        if self.c_end <= 0.0 {
            return bad("c_end must be above 0");
        }
        if self.r_end < 0.0 {
            return bad("r_end must not be negative");
        }
        Ok(())
    }
}

/// The parameters `names` (comma-separated, ASCII case ignored) among the spin options
/// an engine declared in its `uci` answer (`declared`: its `option ...` lines), each as
/// [`Parameter::from_uci_option`] makes it.
pub fn tuned_options(declared: &[String], names: &str) -> Result<Vec<Parameter>, SpsaError> {
    let spins: Vec<Parameter> = declared.iter().filter_map(|line| Parameter::from_uci_option(line)).collect();
    let parameters = names
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            spins.iter().find(|p| p.name.eq_ignore_ascii_case(name)).cloned().ok_or_else(|| SpsaError::NotDeclared {
                name: name.to_owned(),
                spins: spins.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if parameters.is_empty() {
        return Err(SpsaError::Empty);
    }
    Ok(parameters)
}

/// Reads parameters in fishtest's format, one `name, start, min, max, c_end, r_end`
/// a line; blank lines are skipped.
pub fn parse_parameters(text: &str) -> Result<Vec<Parameter>, SpsaError> {
    let mut parameters: Vec<Parameter> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let line_error = |problem: String| SpsaError::Line { line: index + 1, problem };
        let [name, start, min, max, c_end, r_end] = fields[..] else {
            return Err(line_error(format!(
                "{} fields where 6 are expected (name, start, min, max, c_end, r_end)",
                fields.len()
            )));
        };
        let number = |what: &str, text: &str| {
            text.parse::<f64>().map_err(|_| line_error(format!("{what} '{text}' is not a number")))
        };
        let parameter = Parameter {
            name: name.to_owned(),
            start: number("start", start)?,
            min: number("min", min)?,
            max: number("max", max)?,
            c_end: number("c_end", c_end)?,
            r_end: number("r_end", r_end)?,
        };
        parameter.check()?;
        if parameters.iter().any(|p| p.name == parameter.name) {
            return Err(SpsaError::Duplicate(parameter.name));
        }
        parameters.push(parameter);
    }
    Ok(parameters)
}

/// Writes parameters in fishtest's format, `start` replaced by `values` when given
/// (the form to paste into a new run that goes on from these).
pub fn format_parameters(parameters: &[Parameter], values: Option<&[f64]>) -> String {
    let mut text = String::new();
    for (i, p) in parameters.iter().enumerate() {
        let start = values.map_or(p.start, |v| v[i]);
        let _ = writeln!(text, "{}, {}, {}, {}, {}, {}", p.name, start, p.min, p.max, p.c_end, p.r_end);
    }
    text
}

/// How a run's steps shrink.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// The run's length in game pairs (`N`).
    pub pairs: u64,
    /// The stability constant `A`.
    pub big_a: f64,
    /// The learning rate's decay.
    pub alpha: f64,
    /// The perturbation's decay.
    pub gamma: f64,
}

impl Schedule {
    /// fishtest's defaults for a run of `pairs`: A a tenth of the pairs (rounded down,
    /// as fishtest rounds it), alpha 0.602, gamma 0.101.
    pub fn fishtest(pairs: u64) -> Schedule {
        Schedule { pairs, big_a: (DEFAULT_A_RATIO * pairs as f64).floor(), alpha: DEFAULT_ALPHA, gamma: DEFAULT_GAMMA }
    }

    fn check(&self) -> Result<(), SpsaError> {
        if self.pairs == 0 {
            return Err(SpsaError::Schedule("a run needs at least one pair".to_owned()));
        }
        for (name, value) in [("A", self.big_a), ("alpha", self.alpha), ("gamma", self.gamma)] {
            if !value.is_finite() || value < 0.0 {
                return Err(SpsaError::Schedule(format!("{name} must be a finite number, not below 0")));
            }
        }
        Ok(())
    }
}

/// The values of one iteration and what its result moves.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    /// The iteration it was made at (completed pairs then).
    pub iteration: u64,
    /// Each parameter's direction, +1 or -1.
    pub flips: Vec<i8>,
    /// Each parameter's perturbation `c_k`.
    pub c: Vec<f64>,
    /// Each parameter's `R_k = a_k / c_k^2`.
    pub r: Vec<f64>,
    /// What the first engine plays: `theta + c_k * flip`, clipped.
    pub plus: Vec<f64>,
    /// What the second plays: `theta - c_k * flip`, clipped.
    pub minus: Vec<f64>,
}

/// A tuning run: the parameters, the schedule, and where theta stands. Its JSON form
/// is a run's state: stopped, it resumes from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tuner {
    parameters: Vec<Parameter>,
    schedule: Schedule,
    /// `c` and `a` of each parameter (the schedule's constants).
    c: Vec<f64>,
    a: Vec<f64>,
    theta: Vec<f64>,
    iteration: u64,
}

impl Tuner {
    /// A run from the parameters' start values.
    pub fn new(parameters: Vec<Parameter>, schedule: Schedule) -> Result<Tuner, SpsaError> {
        schedule.check()?;
        if parameters.is_empty() {
            return Err(SpsaError::Empty);
        }
        for (i, p) in parameters.iter().enumerate() {
            p.check()?;
            if parameters[..i].iter().any(|q| q.name == p.name) {
                return Err(SpsaError::Duplicate(p.name.clone()));
            }
        }
        let n = schedule.pairs as f64;
        let c = parameters.iter().map(|p| p.c_end * n.powf(schedule.gamma)).collect();
        let a = parameters
            .iter()
            .map(|p| p.r_end * p.c_end * p.c_end * (schedule.big_a + n).powf(schedule.alpha))
            .collect();
        let theta = parameters.iter().map(|p| p.start).collect();
        Ok(Tuner { parameters, schedule, c, a, theta, iteration: 0 })
    }

    /// The run saved as JSON (see [`Tuner::resume`]).
    pub fn state(&self) -> String {
        serde_json::to_string_pretty(self).expect("a run is plain data")
    }

    /// A run saved by [`Tuner::state`], checked as a new run is (the file may have
    /// been edited).
    pub fn resume(state: &str) -> Result<Tuner, SpsaError> {
        let saved: Tuner = serde_json::from_str(state).map_err(|e| SpsaError::State(e.to_string()))?;
        let mut fresh = Tuner::new(saved.parameters, saved.schedule)?;
        if saved.theta.len() != fresh.theta.len() {
            return Err(SpsaError::State(format!("{} values for {} parameters", saved.theta.len(), fresh.theta.len())));
        }
        for (i, value) in saved.theta.iter().enumerate() {
            let p = &fresh.parameters[i];
            if !(p.min..=p.max).contains(value) {
                return Err(SpsaError::State(format!("'{}' = {value} lies outside {}..{}", p.name, p.min, p.max)));
            }
        }
        fresh.theta = saved.theta;
        fresh.iteration = saved.iteration;
        Ok(fresh)
    }

    /// The parameters tuned.
    pub fn parameters(&self) -> &[Parameter] {
        &self.parameters
    }

    /// The schedule.
    pub fn schedule(&self) -> Schedule {
        self.schedule
    }

    /// The current values.
    pub fn theta(&self) -> &[f64] {
        &self.theta
    }

    /// Pairs applied so far.
    pub fn iteration(&self) -> u64 {
        self.iteration
    }

    /// Whether the run has had all its pairs.
    pub fn finished(&self) -> bool {
        self.iteration >= self.schedule.pairs
    }

    /// `c_k` and `R_k` of each parameter at `iteration` (completed pairs; the
    /// schedule counts from the next one).
    fn gains(&self, iteration: u64) -> impl Iterator<Item = (f64, f64)> + '_ {
        let k = (iteration + 1) as f64;
        self.c.iter().zip(&self.a).map(move |(c, a)| {
            let c_k = c / k.powf(self.schedule.gamma);
            let a_k = a / (self.schedule.big_a + k).powf(self.schedule.alpha);
            (c_k, a_k / (c_k * c_k))
        })
    }

    fn clip(&self, index: usize, value: f64) -> f64 {
        value.clamp(self.parameters[index].min, self.parameters[index].max)
    }

    /// The probe of the current iteration in the directions `flips`.
    pub fn probe(&self, flips: &[i8]) -> Result<Probe, SpsaError> {
        self.probe_at(self.iteration, flips)
    }

    /// The probe of `iteration` in the directions `flips`, around the current theta.
    pub fn probe_at(&self, iteration: u64, flips: &[i8]) -> Result<Probe, SpsaError> {
        if flips.len() != self.parameters.len() || flips.iter().any(|f| f.abs() != 1) {
            return Err(SpsaError::Flips { flips: flips.len(), parameters: self.parameters.len() });
        }
        let (c, r): (Vec<f64>, Vec<f64>) = self.gains(iteration).unzip();
        let shifted = |sign: f64| {
            (0..flips.len()).map(|i| self.clip(i, self.theta[i] + sign * c[i] * f64::from(flips[i]))).collect()
        };
        Ok(Probe { iteration, flips: flips.to_vec(), plus: shifted(1.0), minus: shifted(-1.0), c, r })
    }

    /// Applies the first engine's `wins - losses` over `pairs` pairs played with
    /// `probe`: each theta moves by `R * c * result * flip` and is clipped.
    pub fn apply(&mut self, probe: &Probe, result: i64, pairs: u64) {
        for i in 0..self.theta.len() {
            let step = probe.r[i] * probe.c[i] * result as f64 * f64::from(probe.flips[i]);
            self.theta[i] = self.clip(i, self.theta[i] + step);
        }
        self.iteration += pairs;
    }
}

/// Where theta stood over a run: the samples a chart plots.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// The parameters' names, in the order of each sample's values.
    pub names: Vec<String>,
    /// Theta after so many pairs, in order.
    pub samples: Vec<Sample>,
}

/// Theta after some pairs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Pairs applied.
    pub pairs: u64,
    /// The values then.
    pub theta: Vec<f64>,
}

/// Samples a run keeps, as fishtest keeps them: about this many, evenly spread.
pub const HISTORY_SAMPLES: u64 = 100;

impl History {
    /// An empty history of `tuner`'s parameters, with its start as the first sample.
    pub fn of(tuner: &Tuner) -> History {
        let names = tuner.parameters.iter().map(|p| p.name.clone()).collect();
        History { names, samples: vec![Sample { pairs: tuner.iteration, theta: tuner.theta.clone() }] }
    }

    /// Adds `tuner`'s theta when a sample is due (every `pairs / 100` pairs, and at
    /// the end of the run).
    pub fn observe(&mut self, tuner: &Tuner) {
        let period = (tuner.schedule.pairs / HISTORY_SAMPLES).max(1);
        let last = self.samples.last().map_or(0, |s| s.pairs);
        if tuner.iteration >= last + period || (tuner.finished() && tuner.iteration > last) {
            self.samples.push(Sample { pairs: tuner.iteration, theta: tuner.theta.clone() });
        }
    }

    /// As CSV: a header of `pairs` and the names, then a row per sample.
    pub fn to_csv(&self) -> String {
        let quote = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
        let mut text = String::from("pairs");
        for name in &self.names {
            text.push(',');
            text.push_str(&quote(name));
        }
        text.push('\n');
        for sample in &self.samples {
            let _ = write!(text, "{}", sample.pairs);
            for value in &sample.theta {
                let _ = write!(text, ",{value}");
            }
            text.push('\n');
        }
        text
    }

    /// As JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a history is plain data")
    }
}

/// The value an engine's integer (spin) option is given: the nearest integer.
pub fn option_value(value: f64) -> String {
    format!("{}", value.round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_parameter() -> Tuner {
        let parameters = parse_parameters("Margin, 100, 0, 200, 10, 0.002\n").unwrap();
        Tuner::new(parameters, Schedule::fishtest(1000)).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    /// fishtest's formulas worked by hand for N = 1000 pairs, A = 100, c_end = 10,
    /// r_end = 0.002: c = 10 * 1000^0.101 = 20.0909281261, a = 0.002 * 10^2 *
    /// 1100^0.602 = 13.5502838271. Iteration 1: c_1 = c, a_1 = a / 101^0.602 =
    /// 0.8420675373, R_1 = a_1 / c_1^2 = 0.0020861567; a win (result +1) with flip +1
    /// moves theta by a_1 / c_1 = 0.0419128241. Iteration 2: c_2 = c / 2^0.101 =
    /// 18.7325098847, a_2 = a / 102^0.602 = 0.8370879471; result -2 with flip -1 moves
    /// it by 2 * a_2 / c_2 = 0.0893727485.
    #[test]
    fn steps_follow_fishtests_formulas() {
        let mut tuner = one_parameter();
        assert_eq!(tuner.schedule().big_a, 100.0);
        let probe = tuner.probe(&[1]).unwrap();
        assert!(close(probe.c[0], 20.09092812608728), "{probe:?}");
        assert!(close(probe.r[0], 0.0020861566909309405), "{probe:?}");
        assert!(close(probe.plus[0], 100.0 + 20.09092812608728));
        assert!(close(probe.minus[0], 100.0 - 20.09092812608728));
        tuner.apply(&probe, 1, 1);
        assert!(close(tuner.theta()[0], 100.04191282413726), "{:?}", tuner.theta());
        let probe = tuner.probe(&[-1]).unwrap();
        assert_eq!(probe.iteration, 1);
        assert!(close(probe.c[0], 18.732509884737453));
        tuner.apply(&probe, -2, 1);
        assert!(close(tuner.theta()[0], 100.1312855726084), "{:?}", tuner.theta());
        assert_eq!(tuner.iteration(), 2);
    }

    /// The schedule ends where its settings say: c_N = c_end and R_N = r_end.
    #[test]
    fn the_last_iteration_has_the_end_settings() {
        let tuner = one_parameter();
        let probe = tuner.probe_at(999, &[1]).unwrap();
        assert!(close(probe.c[0], 10.0), "{probe:?}");
        assert!(close(probe.r[0], 0.002), "{probe:?}");
    }

    /// Pairs in flight share an iteration: a probe keeps the gains it was made with,
    /// and applying it later uses them, not the current iteration's.
    #[test]
    fn a_probe_applies_with_its_own_iteration() {
        let mut tuner = one_parameter();
        let early = tuner.probe(&[1]).unwrap();
        let other = tuner.probe(&[-1]).unwrap();
        tuner.apply(&other, 0, 1);
        let before = tuner.theta()[0];
        tuner.apply(&early, 1, 1);
        assert!(close(tuner.theta()[0] - before, early.r[0] * early.c[0]));
    }

    #[test]
    fn values_and_steps_are_clipped_to_the_bounds() {
        let parameters = parse_parameters("Edge, 199, 0, 200, 10, 0.002").unwrap();
        let mut tuner = Tuner::new(parameters, Schedule::fishtest(10)).unwrap();
        let probe = tuner.probe(&[1]).unwrap();
        assert_eq!(probe.plus[0], 200.0);
        tuner.apply(&probe, 1_000_000, 1);
        assert_eq!(tuner.theta()[0], 200.0);
        tuner.apply(&probe, -1_000_000, 1);
        assert_eq!(tuner.theta()[0], 0.0);
    }

    #[test]
    fn parameter_lines_are_checked() {
        let cases = [
            ("A, 1, 0, 2, 1", "line 1: 5 fields"),
            ("\nA, x, 0, 2, 1, 0.002", "line 2: start 'x' is not a number"),
            ("A, 3, 0, 2, 1, 0.002", "start lies outside"),
            ("A, 1, 2, 0, 1, 0.002", "min is above max"),
            ("A, 1, 0, 2, 0, 0.002", "c_end must be above 0"),
            ("A, 1, 0, 2, 1, -1", "r_end must not be negative"),
            ("A, 1, 0, 2, 1, NaN", "finite"),
            ("A, 1, 0, 2, 1, 0.002\nA, 1, 0, 2, 1, 0.002", "declared twice"),
            (", 1, 0, 2, 1, 0.002", "one line of text"),
        ];
        for (text, expected) in cases {
            let error = parse_parameters(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
        assert_eq!(Tuner::new(Vec::new(), Schedule::fishtest(10)), Err(SpsaError::Empty));
        let one = parse_parameters("A, 1, 0, 2, 1, 0.002").unwrap();
        assert!(matches!(Tuner::new(one.clone(), Schedule::fishtest(0)), Err(SpsaError::Schedule(_))));
        let tuner = Tuner::new(one, Schedule::fishtest(10)).unwrap();
        assert!(matches!(tuner.probe(&[1, 1]), Err(SpsaError::Flips { .. })));
        assert!(matches!(tuner.probe(&[0]), Err(SpsaError::Flips { .. })));
    }

    #[test]
    fn parameters_round_trip_through_fishtests_format() {
        let text = "Futility Margin, 100, 40, 200, 8, 0.002\nNull Move Divisor, 200, 100, 400, 15, 0.0025\n";
        let parameters = parse_parameters(text).unwrap();
        assert_eq!(format_parameters(&parameters, None), text);
        let moved = format_parameters(&parameters, Some(&[104.5, 190.0]));
        assert!(moved.starts_with("Futility Margin, 104.5, 40, 200, 8, 0.002\n"), "{moved}");
    }

    #[test]
    fn spin_options_become_parameters_as_fishtests_tools_declare_them() {
        let p = Parameter::from_uci_option("option name Futility Margin type spin default 100 min 40 max 200").unwrap();
        assert_eq!(p.name, "Futility Margin");
        assert_eq!((p.start, p.min, p.max, p.c_end, p.r_end), (100.0, 40.0, 200.0, 8.0, 0.002));
        assert_eq!(Parameter::from_uci_option("option name UseNNUE type check default true"), None);
        assert_eq!(Parameter::from_uci_option("option name Hash type spin default 16 min 1"), None);
        assert_eq!(Parameter::from_uci_option("id name xq"), None);
    }

    #[test]
    fn the_history_samples_about_a_hundred_points_and_the_end() {
        let parameters = parse_parameters("A \"x\", 100, 0, 200, 10, 0.002").unwrap();
        let mut tuner = Tuner::new(parameters, Schedule::fishtest(1005)).unwrap();
        let mut history = History::of(&tuner);
        while !tuner.finished() {
            let probe = tuner.probe(&[1]).unwrap();
            tuner.apply(&probe, 1, 1);
            history.observe(&tuner);
        }
        let pairs: Vec<u64> = history.samples.iter().map(|s| s.pairs).collect();
        assert_eq!(pairs.len(), 102, "{pairs:?}");
        assert_eq!(&pairs[..3], &[0, 10, 20]);
        assert_eq!(pairs.last(), Some(&1005));
        let csv = history.to_csv();
        assert!(csv.starts_with("pairs,\"A \"\"x\"\"\"\n0,100\n10,"), "{csv}");
        let back: History = serde_json::from_str(&history.to_json()).unwrap();
        assert_eq!(back, history);
        assert_eq!(Tuner::resume(&tuner.state()), Ok(tuner.clone()));
        let edited = tuner.state().replace(&format!("{}", tuner.theta()[0]), "900.5");
        let error = Tuner::resume(&edited).unwrap_err().to_string();
        assert!(error.contains("900.5 lies outside 0..200"), "{error}");
        assert!(matches!(Tuner::resume("{"), Err(SpsaError::State(_))));
    }

    #[test]
    fn tuned_options_are_picked_by_name_from_the_declared_spins() {
        let declared = [
            "option name Hash type spin default 16 min 1 max 1024".to_owned(),
            "option name UseNNUE type check default true".to_owned(),
            "option name Futility Base type spin default 100 min 0 max 300".to_owned(),
        ];
        let picked = tuned_options(&declared, "futility base").unwrap();
        assert_eq!(picked[0].name, "Futility Base");
        assert_eq!(picked[0].c_end, 15.0);
        let error = tuned_options(&declared, "Futility Base, UseNNUE").unwrap_err().to_string();
        assert_eq!(error, "the engine declares no spin option 'UseNNUE' (its spin options: Hash, Futility Base)");
        assert_eq!(tuned_options(&declared, " , "), Err(SpsaError::Empty));
    }

    #[test]
    fn option_values_are_the_nearest_integers() {
        assert_eq!(option_value(100.49), "100");
        assert_eq!(option_value(100.5), "101");
        assert_eq!(option_value(-3.6), "-4");
    }
}
