//! Checks of a worker's conduct in one job: signs that it reports results it did not
//! play as they fell. The coordinator's residual (`scheduler::residual`) already flags a
//! worker whose mean pair score lies too far from the other workers'; these four catch
//! what a mean does not show. Each compares the worker with the rest of the fleet in the
//! same job and gives a p-value: how likely counts this far from the rest's are by chance.
//!
//! - [`shape`]: the worker's pentanomial differs in shape from the rest's (a faker who
//!   mixes in 0- and 2-point pairs keeps the mean and changes the shape). A G-test
//!   (likelihood ratio) of homogeneity of the 2×5 table, worker against rest.
//! - [`expiry`]: the worker lets more of its leases expire than the fleet (a worker
//!   that plays its leases but reports only its good pairs must let each lease holding a
//!   withheld pair expire). A one-sided binomial test of the worker's expired leases at
//!   the rest's expiry rate, or at least [`Checks::expiry_floor`].
//! - [`steering`]: in an SPSA job, the worker's results agree with one parameter's flip
//!   more than the rest's do (a worker steering that parameter reports wins when the
//!   flip points its way). A z-test per parameter, corrected for the number of
//!   parameters.
//! - [`failures`]: the worker's games end by an engine's failure more often than the
//!   rest's (a worker naming crashes of the base engine that never happened). The same
//!   one-sided binomial test as [`expiry`], on games.
//!
//! [`Checks`] holds the p-value below which each check flags a worker and the counts each
//! needs. Its defaults flag at 1e-6. The coordinator runs each check after every report
//! of every worker: a hundred workers reporting every few minutes make some 10^5 checks a
//! day, so 1e-6 keeps false alarms near 0.1 a day even if every check were independent.
//! They are not (a worker's checks share most of their pairs), and in the simulation
//! below 40,000 honest workers, each judged some 40 times by every check that applies to
//! its job, were not flagged once. 1e-6 is also about the residual's limit of 5 standard
//! errors (5.7e-7, two-sided).
//!
//! # Figures
//!
//! `cargo run -p xq-stats --example conduct --release` (seeded: the figures repeat)
//! simulates workers of 400 pairs under the default [`Checks`]: leases of 16 pairs (64 in
//! the rows so marked), a report every 8 pairs with every check after it and after each
//! expiry, 2% of leases lost to a crash at a random pair, and 8,000 honest pairs from the
//! other workers. A test's pairs are drawn from `[0.02, 0.18, 0.55, 0.21, 0.04]`; an SPSA
//! job tunes 8 parameters, 2 with a gradient (a flip moves plus's mean result by 0.05;
//! "steep": 4 by 0.13). Fake wins reports a share q of its pairs as 2 points; fake 0, 2
//! as 0 or 2 points (keeping the mean near); withhold drops each pair under 1 point at
//! chance w and lets its lease expire; steer #i reports 2 × flip i for a share q. Each
//! cell: the share of workers flagged within 400 pairs, and the median pairs played when
//! flagged; "any" counts the checks that apply to the job (shape in a test, steering in
//! SPSA, expiry in both). The second table checks the p-values themselves.
//!
//! ```text
//! flagged, with the median pairs played when flagged, within 400 pairs
//! job                  conduct           workers           shape          expiry        steering             any
//! test                 honest              10000           0.00%           0.00%               -           0.00%
//! test                 fake wins q=0.1      1000    96.30% (200)           0.00%               -    96.30% (200)
//! test                 fake wins q=0.25     1000   100.00% (120)           0.00%               -   100.00% (120)
//! test                 fake 0, 2 q=0.1      1000    85.00% (256)           0.00%               -    85.00% (256)
//! test                 fake 0, 2 q=0.25     1000   100.00% (128)           0.00%               -   100.00% (128)
//! test                 withhold w=0.1       1000           0.00%    59.80% (272)               -    59.80% (272)
//! test                 withhold w=0.25      1000     0.10% (372)   100.00% (128)               -   100.00% (128)
//! test                 withhold w=0.5       1000    14.70% (320)    100.00% (80)               -    100.00% (80)
//! test, 64/lease       honest              10000           0.00%           0.00%               -           0.00%
//! test, 64/lease       withhold w=0.25      1000           0.00%    99.80% (256)               -    99.80% (256)
//! test, 64/lease       withhold w=0.5       1000    21.60% (360)   100.00% (256)               -   100.00% (256)
//! spsa                 honest              10000           0.00%           0.00%           0.00%           0.00%
//! spsa                 steer #0 q=0.1       1000    87.10% (248)           0.00%    28.90% (301)    28.90% (301)
//! spsa                 steer #0 q=0.2       1000   100.00% (160)           0.00%    99.90% (133)    99.90% (133)
//! spsa                 steer #5 q=0.3       1000   100.00% (152)           0.00%   100.00% (104)   100.00% (104)
//! spsa steep, 64/lease honest              10000    12.12% (176)           0.00%           0.00%           0.00%
//! spsa steep, 64/lease steer #5 q=0.2       1000   100.00% (128)           0.00%     9.50% (352)     9.50% (352)
//!
//! honest workers' p-values: the share of checks below each level (right: about the level)
//! job                  check        checks      1e-2      1e-3      1e-4
//! test                 shape        385199   1.02e-2   1.21e-3   1.32e-4
//! test                 expiry       436887   2.76e-3   2.06e-4   2.29e-5
//! test, 64/lease       shape        437643   1.12e-2   1.12e-3   5.94e-5
//! test, 64/lease       expiry       250987   4.17e-3   3.59e-4   1.55e-4
//! spsa                 shape        385324   1.36e-2   1.45e-3   2.00e-4
//! spsa                 expiry       437041   3.94e-3   3.71e-4    0.00e0
//! spsa                 steering     385324   8.47e-3   8.72e-4   9.86e-5
//! spsa steep, 64/lease shape        437723   2.49e-1   1.43e-1   8.62e-2
//! spsa steep, 64/lease expiry       250950   3.97e-3   3.91e-4   1.04e-4
//! spsa steep, 64/lease steering     437723   3.86e-3   2.83e-4   6.85e-6
//! ```
//!
//! Withholding shows best in leases: each costs the withholder a lease, so short leases
//! catch it sooner. Steering is found by the parameter it moves, whether or not that has a
//! gradient; under a steep gradient a worker's few long leases swing with it, and the
//! check, allowing for that, needs more pairs. Shape in SPSA is shown, not applied: the
//! flips make honest shapes differ (12% flagged under the steep gradient).

use std::collections::HashMap;

/// The p-values below which the checks flag a worker, and the counts they need.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Checks {
    /// [`shape`] flags below this.
    pub shape_p: f64,
    /// [`expiry`] flags below this.
    pub expiry_p: f64,
    /// [`steering`] flags below this (after its correction for the parameters).
    pub steering_p: f64,
    /// [`shape`] and [`steering`] judge a worker once it and the rest have this many
    /// pairs: fewer pairs make a pentanomial of mostly empty cells.
    pub min_pairs: u64,
    /// [`expiry`] judges a worker once this many of its leases have ended.
    pub min_leases: u64,
    /// The lowest expiry rate [`expiry`] expects of an honest worker, whatever the rest's.
    pub expiry_floor: f64,
    /// [`failures`] flags below this.
    pub failures_p: f64,
    /// [`failures`] judges a worker once it has this many games in the test.
    pub min_games: u64,
    /// The lowest rate of engine failures [`failures`] expects, whatever the rest's.
    pub failures_floor: f64,
}

impl Default for Checks {
    fn default() -> Self {
        Checks {
            shape_p: 1e-6,
            expiry_p: 1e-6,
            steering_p: 1e-6,
            // The residual waits for 200; the shape pools sparse columns, so half that
            // is enough and catches a faker sooner.
            min_pairs: 100,
            // At the floor of 2%, four of four leases expired is the least that can flag
            // (0.02^4 = 1.6e-7); fewer leases say nothing.
            min_leases: 4,
            // A home machine that sleeps or restarts now and then loses about one lease in
            // fifty; a fleet that happens to have lost none must not flag its first crash.
            expiry_floor: 0.02,
            failures_p: 1e-6,
            // At the floor of 1%, 4 failures in 20 games is 4e-6, 5 is 1.6e-7.
            min_games: 20,
            // Engines under test crash or hang now and then on every machine; the rest's
            // rate stands in when higher. 1% keeps a fleet that has seen no failure yet
            // from flagging a worker's first two or three.
            failures_floor: 0.01,
        }
    }
}

impl Checks {
    /// The p-value of [`shape`] when it flags the worker.
    pub fn shape_flag(&self, worker: &[u64; 5], all: &[u64; 5]) -> Option<f64> {
        shape(worker, all, self.min_pairs).filter(|p| *p < self.shape_p)
    }

    /// The p-value of [`expiry`] when it flags the worker.
    pub fn expiry_flag(&self, worker: Leases, all: Leases) -> Option<f64> {
        expiry(worker, all, self.min_leases, self.expiry_floor).filter(|p| *p < self.expiry_p)
    }

    /// The p-value of [`failures`] when it flags the worker.
    pub fn failures_flag(&self, worker: Failures, all: Failures) -> Option<f64> {
        failures(worker, all, self.min_games, self.failures_floor).filter(|p| *p < self.failures_p)
    }

    /// What [`steering`] found when it flags the worker.
    pub fn steering_flag(&self, worker: &FlipCorrelation, all: &FlipCorrelation) -> Option<Steering> {
        steering(worker, all, self.min_pairs).filter(|s| s.p_value < self.steering_p)
    }
}

/// Pooled columns must expect at least this many pairs of the smaller side: the textbook
/// condition for the chi-square tail. Measured on honest workers of 100 to 400 pairs of
/// the simulated test against 8,000 (2 to 8 million tables each), the G-test's p-values
/// fell below 1e-4, 1e-5 and 1e-6 at 0.8 to 1.2 times those rates, pooled or not (1e-6:
/// 3 to 12 tables where 2 to 8 were due), while Pearson's X² unpooled did so at up to 5,
/// 14 and 43 times: the likelihood ratio follows a sparse cell's upper tail, the squared
/// difference does not. Pooling keeps that for pentanomials with emptier columns than
/// these; it costs a report or two before a strong faker is flagged.
const MIN_EXPECTED_PAIRS: f64 = 5.0;

/// The p-value that the worker's pairs have the pentanomial distribution of the other
/// workers' (`all` minus `worker`): a G-test (likelihood ratio) of homogeneity of the
/// 2×5 table, with chi-square degrees of freedom one fewer than its columns.
///
/// Empty columns are dropped, and the sparsest column is merged with its sparser
/// neighbour (0 with 0.5 points, 2 with 1.5, ...) until every column expects at least
/// five pairs of the smaller side (see `MIN_EXPECTED_PAIRS` for why that and a G-test
/// rather than Pearson's X²). `None` below `min_pairs` on either side, when `worker` is
/// not part of `all`, or when every pair falls in one pooled column.
///
/// The test takes pairs to be independent given the engines, as in a test. In an SPSA
/// job each lease's flips tilt all its pairs, so workers' shapes differ by the leases
/// they drew; in the simulated job with a steep gradient and 64-pair leases it flagged
/// 12% of honest workers. [`steering`] is the check for SPSA.
pub fn shape(worker: &[u64; 5], all: &[u64; 5], min_pairs: u64) -> Option<f64> {
    let mut columns = Vec::with_capacity(5);
    for (w, a) in worker.iter().zip(all) {
        let rest = a.checked_sub(*w)?;
        if w + rest > 0 {
            columns.push([*w as f64, rest as f64]);
        }
    }
    let count = |counts: &[u64; 5]| counts.iter().try_fold(0u64, |sum, c| sum.checked_add(*c));
    let n_worker = count(worker)?;
    let n_rest = count(all)? - n_worker;
    if n_worker < min_pairs.max(1) || n_rest < min_pairs.max(1) {
        return None;
    }
    let total = (n_worker + n_rest) as f64;
    let smaller = n_worker.min(n_rest) as f64;
    let column_total = |c: &[f64; 2]| c[0] + c[1];
    while columns.len() > 1 {
        let (sparsest, fewest) = columns
            .iter()
            .map(column_total)
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("more than one column");
        if smaller * fewest / total >= MIN_EXPECTED_PAIRS {
            break;
        }
        let neighbour = if sparsest == 0 {
            1
        } else if sparsest == columns.len() - 1
            || column_total(&columns[sparsest - 1]) <= column_total(&columns[sparsest + 1])
        {
            sparsest - 1
        } else {
            sparsest + 1
        };
        let merged = columns.remove(sparsest);
        let into = if neighbour > sparsest { neighbour - 1 } else { neighbour };
        columns[into][0] += merged[0];
        columns[into][1] += merged[1];
    }
    if columns.len() < 2 {
        return None;
    }
    let sides = [n_worker as f64, n_rest as f64];
    let g: f64 = columns
        .iter()
        .flat_map(|c| {
            let share = column_total(c) / total;
            c.iter().zip(sides).map(
                move |(observed, side)| {
                    if *observed > 0.0 { observed * (observed / (side * share)).ln() } else { 0.0 }
                },
            )
        })
        .sum::<f64>()
        * 2.0;
    Some(chi_square_survival(g.max(0.0), (columns.len() - 1) as f64))
}

/// How a worker's (or the fleet's) leases in a job ended. A lease that was stopped (the
/// job ended, the worker was set aside) counts in neither.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Leases {
    /// Leases that expired with units unreported.
    pub expired: u64,
    /// Leases whose every unit was reported.
    pub finished: u64,
}

impl Leases {
    /// Leases that ended either way.
    pub fn ended(&self) -> u64 {
        self.expired.saturating_add(self.finished)
    }
}

/// The p-value that the worker would lose this many of its leases by chance: the
/// binomial chance of at least `worker.expired` expired leases out of those that ended,
/// at the other workers' (`all` minus `worker`) expiry rate or `floor_rate`, whichever
/// is higher.
///
/// It counts leases, not units: a crash loses every unit left in its lease at once, so
/// units expire in clusters of up to a lease, and a binomial on units would take one
/// crash of a 100-unit lease for a hundred independent losses. A worker that withholds
/// pairs must let each lease holding one expire, and loses most of its leases.
///
/// The floor keeps a fleet that has lost no lease yet from flagging a worker's first
/// crash. `None` when fewer than `min_leases` of the worker's leases have ended or when
/// `worker` is not part of `all`.
pub fn expiry(worker: Leases, all: Leases, min_leases: u64, floor_rate: f64) -> Option<f64> {
    if worker.expired > all.expired || worker.finished > all.finished {
        return None;
    }
    excess([worker.expired, worker.ended()], [all.expired, all.ended()], min_leases, floor_rate)
}

/// Of a worker's (or the fleet's) games in a test, how many ended by an engine's failure
/// (termination "abandoned": a crash, or a hang under a node or depth budget).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Failures {
    /// Games ended by an engine's failure.
    pub abandoned: u64,
    /// Games counted.
    pub games: u64,
}

/// The p-value that the worker's games would end by an engine's failure this often by
/// chance: the binomial chance of at least `worker.abandoned` of its games at the other
/// workers' rate or `floor_rate`, whichever is higher.
///
/// An abandoned game is lost by the engine that failed, and a worker can name a failure
/// that never happened (the coordinator checks that the side it names was to move and
/// lost, not that its engine crashed). The same engines play on every worker, so a
/// worker whose base engine "fails" far more often than on the others is making it up.
/// `None` below `min_games` games of the worker, or when `worker` is not part of `all`.
pub fn failures(worker: Failures, all: Failures, min_games: u64, floor_rate: f64) -> Option<f64> {
    excess([worker.abandoned, worker.games], [all.abandoned, all.games], min_games, floor_rate)
}

/// The binomial chance of at least the worker's events in its trials (`[events,
/// trials]`) at the rest's rate (`all` minus the worker's) or `floor_rate`, whichever is
/// higher. `None` below `min_trials`, or when the counts do not nest (more events than
/// trials, the worker's beyond all's).
fn excess(worker: [u64; 2], all: [u64; 2], min_trials: u64, floor_rate: f64) -> Option<f64> {
    let rest = [all[0].checked_sub(worker[0])?, all[1].checked_sub(worker[1])?];
    if worker[1] < min_trials.max(1) || worker[0] > worker[1] || rest[0] > rest[1] {
        return None;
    }
    let rest_rate = if rest[1] > 0 { rest[0] as f64 / rest[1] as f64 } else { 0.0 };
    let rate = if floor_rate.is_nan() { rest_rate } else { rest_rate.max(floor_rate) };
    Some(binomial_upper_tail(worker[0], worker[1], rate.clamp(0.0, 1.0)))
}

/// A pair's result that cannot be counted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PairError {
    /// The flips do not match the parameters.
    #[error("{flips} flips for {parameters} parameters, each +1 or -1")]
    Flips {
        /// How many flips came.
        flips: usize,
        /// How many parameters the job tunes.
        parameters: usize,
    },
    /// A result is plus's wins minus losses over the pair's two games.
    #[error("a pair's result is wins minus losses over two games, -2 to 2, not {0}")]
    Result(i64),
}

/// How one worker's (or the fleet's) SPSA results go with each parameter's flip, in one
/// job: the sums [`steering`] compares.
///
/// Every pair of a lease shares the lease's flips, so pairs of a lease are not
/// independent: the true gradient moves a whole lease's results together. The sums per
/// lease measure that, so that long leases and a steep gradient do not pass for
/// steering; they cost a running sum per lease (the job's leases, for the fleet's).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlipCorrelation {
    pairs: u64,
    /// The sum of result².
    result_squares: u64,
    /// Per parameter, the sum of result × flip.
    agreement: Vec<i64>,
    /// Per lease, the sum of its results and its pairs.
    leases: HashMap<u64, (i64, u64)>,
    /// The sum over leases of (the lease's results' sum)².
    lease_result_squares: i128,
    /// The sum over leases of (the lease's pairs)².
    lease_pair_squares: u128,
}

impl FlipCorrelation {
    /// No pairs yet, in a job tuning `parameters` parameters.
    pub fn new(parameters: usize) -> Self {
        FlipCorrelation { agreement: vec![0; parameters], ..Default::default() }
    }

    /// Counts a pair of `lease`, played with the lease's `flips`, whose `result` is plus's
    /// wins minus losses.
    pub fn add(&mut self, lease: u64, flips: &[i8], result: i64) -> Result<(), PairError> {
        if flips.len() != self.agreement.len() || flips.iter().any(|f| f.abs() != 1) {
            return Err(PairError::Flips { flips: flips.len(), parameters: self.agreement.len() });
        }
        if !(-2..=2).contains(&result) {
            return Err(PairError::Result(result));
        }
        self.pairs += 1;
        self.result_squares += (result * result) as u64;
        for (sum, flip) in self.agreement.iter_mut().zip(flips) {
            *sum += result * i64::from(*flip);
        }
        let (lease_sum, lease_pairs) = self.leases.entry(lease).or_default();
        self.lease_result_squares += i128::from(2 * *lease_sum * result + result * result);
        self.lease_pair_squares += u128::from(2 * *lease_pairs + 1);
        *lease_sum += result;
        *lease_pairs += 1;
        Ok(())
    }

    /// The pairs counted.
    pub fn pairs(&self) -> u64 {
        self.pairs
    }
}

/// The parameter whose flips a worker's results follow most unlike the rest's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Steering {
    /// The parameter's index.
    pub parameter: usize,
    /// How many standard errors the worker's mean of result × flip lies from the rest's.
    pub z: f64,
    /// The chance of a |z| this large in any of the parameters (Šidák's correction).
    pub p_value: f64,
}

/// Which parameter's flips the worker's results follow most unlike the other workers'
/// (`all` minus `worker`), and the chance of that.
///
/// Per parameter, the worker's mean of result × flip is compared with the rest's. Both
/// estimate the same true gradient, so it cancels; what is left is noise unless the
/// worker picks its results by the flip. The variance is estimated from the rest alone,
/// so that a steerer cannot widen its own yardstick: per pair, the mean of result²
/// (flip² = 1); and because a lease's pairs share its flips, the true gradient moves a
/// whole lease's results together, which adds |g|² (the mean product of two results of
/// one lease, measured on the rest's leases) for every couple of pairs in one lease.
/// Without that term, 64-pair leases under a steep gradient gave honest workers |z| up to
/// 12 (the test `a_shared_gradient_in_long_leases_is_not_steering`). The largest |z| is
/// then corrected for the number of parameters `P`: `p = 1 - (1 - p_two_sided)^P`.
///
/// `None` below `min_pairs` on either side, when `worker` is not part of `all` (or they
/// tune different parameters), or when every result of the rest was 0.
pub fn steering(worker: &FlipCorrelation, all: &FlipCorrelation, min_pairs: u64) -> Option<Steering> {
    if worker.agreement.len() != all.agreement.len() || worker.agreement.is_empty() {
        return None;
    }
    let rest_pairs = all.pairs.checked_sub(worker.pairs)?;
    let rest_squares = all.result_squares.checked_sub(worker.result_squares)?;
    let rest_lease_results = all.lease_result_squares - worker.lease_result_squares;
    let rest_lease_pairs = all.lease_pair_squares.checked_sub(worker.lease_pair_squares)?;
    if worker.pairs < min_pairs.max(1) || rest_pairs < min_pairs.max(1) || rest_lease_results < 0 {
        return None;
    }
    let mean_square = rest_squares as f64 / rest_pairs as f64;
    if mean_square <= 0.0 {
        return None;
    }
    // Two pairs of one lease share its flips, so their results' product has mean |g|²;
    // the rest's lease sums hold those products for every such couple.
    let couples = rest_lease_pairs as f64 - rest_pairs as f64;
    let shared = if couples > 0.0 {
        ((rest_lease_results as f64 - rest_squares as f64) / couples).clamp(0.0, mean_square)
    } else {
        0.0
    };
    // The variance of a side's sum of result × flip: each pair's mean result², and |g|² for
    // every (ordered) couple of its pairs that share a lease.
    let sum_variance =
        |pairs: u64, lease_pairs: u128| pairs as f64 * mean_square + (lease_pairs as f64 - pairs as f64) * shared;
    let (n_worker, n_rest) = (worker.pairs as f64, rest_pairs as f64);
    let variance = sum_variance(worker.pairs, worker.lease_pair_squares) / (n_worker * n_worker)
        + sum_variance(rest_pairs, rest_lease_pairs) / (n_rest * n_rest);
    if variance <= 0.0 {
        return None;
    }
    let (parameter, z) = worker
        .agreement
        .iter()
        .zip(&all.agreement)
        .map(|(w, a)| (*w as f64 / n_worker - (a - w) as f64 / n_rest) / variance.sqrt())
        .enumerate()
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))?;
    let two_sided = normal_two_sided(z);
    // 1 - (1 - p)^P without losing a small p to rounding.
    let p_value = -((worker.agreement.len() as f64) * (-two_sided).ln_1p()).exp_m1();
    Some(Steering { parameter, z, p_value: p_value.clamp(0.0, 1.0) })
}

/// The chance that a chi-square variable with `degrees` of freedom exceeds `x`.
fn chi_square_survival(x: f64, degrees: f64) -> f64 {
    upper_regularized_gamma(degrees / 2.0, x / 2.0)
}

/// The chance that a standard normal variable lies further than |z| from 0.
fn normal_two_sided(z: f64) -> f64 {
    chi_square_survival(z * z, 1.0)
}

/// Q(a, x) = Γ(a, x) / Γ(a), for a >= 0.5: by its series below a + 1, else by its
/// continued fraction (modified Lentz), each to full precision, so that tails near 1e-7
/// keep their digits.
fn upper_regularized_gamma(a: f64, x: f64) -> f64 {
    const EPSILON: f64 = 1e-15;
    const TINY: f64 = 1e-300;
    const MAX_TERMS: usize = 1_000;
    if x.is_nan() || x <= 0.0 {
        return 1.0;
    }
    if x.is_infinite() {
        return 0.0;
    }
    let front = (a * x.ln() - x - ln_gamma(a)).exp();
    if x < a + 1.0 {
        let (mut term, mut sum, mut denominator) = (1.0 / a, 1.0 / a, a);
        for _ in 0..MAX_TERMS {
            denominator += 1.0;
            term *= x / denominator;
            sum += term;
            if term.abs() < sum.abs() * EPSILON {
                break;
            }
        }
        (1.0 - sum * front).clamp(0.0, 1.0)
    } else {
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / TINY;
        let mut d = 1.0 / b;
        let mut fraction = d;
        for i in 1..=MAX_TERMS {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < TINY {
                d = TINY;
            }
            c = b + an / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            let step = d * c;
            fraction *= step;
            if (step - 1.0).abs() < EPSILON {
                break;
            }
        }
        (front * fraction).clamp(0.0, 1.0)
    }
}

/// ln Γ(x) for x >= 0.5 (Lanczos, g = 7, relative error near 1e-15).
fn ln_gamma(x: f64) -> f64 {
    const COEFFICIENTS: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let series =
        COEFFICIENTS[1..].iter().enumerate().fold(COEFFICIENTS[0], |sum, (i, c)| sum + c / (x + i as f64 + 1.0));
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + series.ln()
}

/// The chance of at least `k` successes in `n` trials of chance `p`. Each tail is summed
/// from its end nearest the mean outwards, where the terms only shrink (each from the
/// last), until they no longer count: above the mean the upper tail itself, so that small
/// chances keep their digits, and at or below it one minus the lower tail, whose first
/// term would otherwise underflow when `n` is large.
fn binomial_upper_tail(k: u64, n: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let (nf, odds) = (n as f64, p / (1.0 - p));
    let chance = |j: u64| {
        let j = j as f64;
        (ln_gamma(nf + 1.0) - ln_gamma(j + 1.0) - ln_gamma(nf - j + 1.0) + j * p.ln() + (nf - j) * (-p).ln_1p()).exp()
    };
    let mut sum = 0.0;
    if k as f64 > nf * p {
        let mut term = chance(k);
        for j in k..=n {
            sum += term;
            if term <= sum * 1e-17 {
                break;
            }
            term *= (nf - j as f64) / (j as f64 + 1.0) * odds;
        }
        sum.min(1.0)
    } else {
        let mut term = chance(k - 1);
        for j in (0..k).rev() {
            sum += term;
            if term <= sum * 1e-17 {
                break;
            }
            term *= j as f64 / (nf - j as f64 + 1.0) / odds;
        }
        (1.0 - sum).max(0.0)
    }
}

pub mod simulation {
    //! How the figures in the module's documentation are made: one simulated worker,
    //! honest or not, at a time, among honest other workers, with every check run after
    //! every report as the coordinator runs them. The caller brings the randomness (a
    //! seeded generator's uniform numbers), so that runs repeat.

    use super::{Checks, FlipCorrelation, Leases, expiry, shape, steering};

    /// Simulated workers that join the same other workers' counts: drawing them afresh for
    /// each would cost ten times the simulated workers' own pairs.
    pub const WORKERS_PER_FLEET: u64 = 100;

    /// The p-values whose shares [`CheckFigures::below`] counts.
    pub const CALIBRATION_LEVELS: [f64; 3] = [1e-2, 1e-3, 1e-4];

    /// The job and fleet a simulated worker plays in.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Setup {
        /// The chances of an honest pair's 0, 0.5, 1, 1.5 and 2 points (for SPSA: plus's,
        /// before the flips tilt them).
        pub pentanomial: [f64; 5],
        /// Per SPSA parameter, how much a flip of +1 raises the log-odds of each point of
        /// plus's result (the true gradient); empty: a test, without flips.
        pub gradient: Vec<f64>,
        /// Pairs per lease.
        pub lease_pairs: u64,
        /// Pairs per report (0: one report, at the lease's end); the checks run after every
        /// report, and when a lease expires.
        pub report_pairs: u64,
        /// The share of leases a worker loses to a crash, at a random pair.
        pub crash_rate: f64,
        /// The honest pairs the other workers have played.
        pub rest_pairs: u64,
        /// The pairs the simulated worker plays.
        pub pairs: u64,
        /// The thresholds.
        pub checks: Checks,
    }

    impl Setup {
        /// A test whose new engine scores a little above even: leases of 16 pairs,
        /// reports of 8, 2% of leases lost to crashes, 8,000 pairs by the other
        /// workers, 400 by the simulated one.
        pub fn test() -> Setup {
            Setup {
                pentanomial: [0.02, 0.18, 0.55, 0.21, 0.04],
                gradient: Vec::new(),
                lease_pairs: 16,
                report_pairs: 8,
                crash_rate: 0.02,
                rest_pairs: 8_000,
                pairs: 400,
                checks: Checks::default(),
            }
        }

        /// The same in an SPSA job of 8 parameters, the first two with a gradient of
        /// 0.08 (a flip moves plus's mean result by about 0.05).
        pub fn spsa() -> Setup {
            Setup {
                pentanomial: [0.03, 0.195, 0.55, 0.195, 0.03],
                gradient: vec![0.08, 0.08, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                ..Setup::test()
            }
        }
    }

    /// How the simulated worker reports the pairs it plays.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum Conduct {
        /// As they fell.
        Honest,
        /// A `share` of its pairs as 2-point wins, whatever they scored.
        FakeWins {
            /// The share of pairs faked.
            share: f64,
        },
        /// A `share` of its pairs as 0 or 2 points, at even chances: near the mean of the
        /// honest pairs, with another shape.
        FakeExtremes {
            /// The share of pairs faked.
            share: f64,
        },
        /// Each pair scoring under 1 point withheld at `chance`; its lease then expires.
        Withhold {
            /// The chance of withholding a losing pair.
            chance: f64,
        },
        /// A `share` of its pairs as a result of 2 × the `parameter`'s flip.
        Steer {
            /// The share of pairs faked.
            share: f64,
            /// The parameter steered.
            parameter: usize,
        },
    }

    /// How often a check flagged the simulated workers, and how soon.
    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    pub struct Detection {
        /// Workers flagged.
        pub flagged: u64,
        /// The median pairs played when flagged, among those flagged.
        pub median_pairs: Option<u64>,
    }

    /// One check's figures.
    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    pub struct CheckFigures {
        /// How many times the check judged (with enough counts).
        pub checks: u64,
        /// How many of those p-values were below each of [`CALIBRATION_LEVELS`]: for
        /// honest workers, near those shares of `checks` when the p-values are right.
        pub below: [u64; 3],
        /// The workers it flagged.
        pub detection: Detection,
    }

    /// Every check's figures over the simulated workers.
    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    pub struct Figures {
        /// Workers simulated.
        pub workers: u64,
        /// [`shape`]'s; in an SPSA job for comparison only (see [`shape`]).
        pub shape: CheckFigures,
        /// [`expiry`]'s.
        pub expiry: CheckFigures,
        /// [`steering`]'s (no checks in a test).
        pub steering: CheckFigures,
        /// Workers flagged by any check that applies to the job: in a test, shape and
        /// expiry; in SPSA, expiry and steering.
        pub any: Detection,
    }

    /// Simulates `workers` workers of `conduct`, drawing from `uniform` (numbers in
    /// [0, 1)). Each joins the other workers' counts alone; every
    /// [`WORKERS_PER_FLEET`] workers the other workers are drawn afresh.
    pub fn figures(setup: &Setup, conduct: Conduct, workers: u64, uniform: &mut impl FnMut() -> f64) -> Figures {
        if setup.lease_pairs == 0 {
            return Figures { workers, ..Figures::default() };
        }
        let mut trials = Vec::with_capacity(workers as usize);
        let mut others = fleet(setup, uniform);
        for index in 0..workers {
            if index > 0 && index % WORKERS_PER_FLEET == 0 {
                others = fleet(setup, uniform);
            }
            trials.push(trial(setup, conduct, &others, uniform));
        }
        let applies = [setup.gradient.is_empty(), true, !setup.gradient.is_empty()];
        let check = |index: usize| CheckFigures {
            checks: trials.iter().map(|t| t.checks[index]).sum(),
            below: std::array::from_fn(|level| trials.iter().map(|t| t.below[index][level]).sum()),
            detection: detection(trials.iter().map(|t| t.first_flag[index])),
        };
        Figures {
            workers,
            shape: check(0),
            expiry: check(1),
            steering: check(2),
            any: detection(trials.iter().map(|t| {
                t.first_flag.iter().zip(applies).filter_map(|(flag, applies)| flag.filter(|_| applies)).min()
            })),
        }
    }

    fn detection(first_flags: impl Iterator<Item = Option<u64>>) -> Detection {
        let mut pairs: Vec<u64> = first_flags.flatten().collect();
        pairs.sort_unstable();
        Detection { flagged: pairs.len() as u64, median_pairs: pairs.get(pairs.len() / 2).copied() }
    }

    /// One simulated worker's checks: per check (shape, expiry, steering), how many
    /// judged, how many p-values fell below each calibration level, and the pairs played
    /// when it first flagged.
    #[derive(Default)]
    struct Trial {
        checks: [u64; 3],
        below: [[u64; 3]; 3],
        first_flag: [Option<u64>; 3],
    }

    impl Trial {
        fn check(&mut self, checks: &Checks, worker: &Counts, all: &Counts, played: u64) {
            let p_values = [
                shape(&worker.pentanomial, &all.pentanomial, checks.min_pairs),
                expiry(worker.leases, all.leases, checks.min_leases, checks.expiry_floor),
                steering(&worker.flips, &all.flips, checks.min_pairs).map(|s| s.p_value),
            ];
            let flagged = [
                checks.shape_flag(&worker.pentanomial, &all.pentanomial).is_some(),
                checks.expiry_flag(worker.leases, all.leases).is_some(),
                checks.steering_flag(&worker.flips, &all.flips).is_some(),
            ];
            for (index, p_value) in p_values.into_iter().enumerate() {
                let Some(p_value) = p_value else { continue };
                self.checks[index] += 1;
                for (below, level) in self.below[index].iter_mut().zip(CALIBRATION_LEVELS) {
                    *below += u64::from(p_value < level);
                }
                if flagged[index] && self.first_flag[index].is_none() {
                    self.first_flag[index] = Some(played);
                }
            }
        }
    }

    /// What the coordinator counts of a worker, or of the fleet.
    #[derive(Clone)]
    struct Counts {
        pentanomial: [u64; 5],
        leases: Leases,
        flips: FlipCorrelation,
    }

    impl Counts {
        fn new(parameters: usize) -> Self {
            Counts { pentanomial: [0; 5], leases: Leases::default(), flips: FlipCorrelation::new(parameters) }
        }

        fn report(&mut self, lease: u64, flips: &[i8], slots: &[usize]) {
            for &slot in slots {
                self.pentanomial[slot] += 1;
                self.flips.add(lease, flips, slot as i64 - 2).expect("a flip of ±1 per parameter, a slot of 0 to 4");
            }
        }

        fn end(&mut self, expired: bool) {
            if expired {
                self.leases.expired += 1;
            } else {
                self.leases.finished += 1;
            }
        }
    }

    /// One lease as the coordinator sees it.
    struct LeasePlay {
        flips: Vec<i8>,
        /// The pairs played in the lease by each report, and the slots reported.
        reports: Vec<(u64, Vec<usize>)>,
        played: u64,
        expired: bool,
    }

    /// The other workers' counts, and the next lease's number.
    fn fleet(setup: &Setup, uniform: &mut impl FnMut() -> f64) -> (Counts, u64) {
        let mut rest = Counts::new(setup.gradient.len());
        let (mut lease, mut played) = (0, 0);
        while played < setup.rest_pairs {
            let play = play_lease(setup, Conduct::Honest, uniform);
            for (_, slots) in &play.reports {
                rest.report(lease, &play.flips, slots);
            }
            rest.end(play.expired);
            played += play.played;
            lease += 1;
        }
        (rest, lease)
    }

    fn trial(setup: &Setup, conduct: Conduct, fleet: &(Counts, u64), uniform: &mut impl FnMut() -> f64) -> Trial {
        let (mut all, mut lease) = fleet.clone();
        let mut worker = Counts::new(setup.gradient.len());
        let (mut trial, mut played) = (Trial::default(), 0);
        while played < setup.pairs {
            let play = play_lease(setup, conduct, uniform);
            for (index, (in_lease, slots)) in play.reports.iter().enumerate() {
                worker.report(lease, &play.flips, slots);
                all.report(lease, &play.flips, slots);
                // A lease's last report finishes it; an expired one ends later, unreported.
                if index + 1 == play.reports.len() && !play.expired {
                    worker.end(false);
                    all.end(false);
                }
                trial.check(&setup.checks, &worker, &all, played + in_lease);
            }
            played += play.played;
            if play.expired {
                worker.end(true);
                all.end(true);
                trial.check(&setup.checks, &worker, &all, played);
            }
            lease += 1;
        }
        trial
    }

    fn play_lease(setup: &Setup, conduct: Conduct, uniform: &mut impl FnMut() -> f64) -> LeasePlay {
        let flips: Vec<i8> = setup.gradient.iter().map(|_| if uniform() < 0.5 { 1 } else { -1 }).collect();
        let tilt: f64 = setup.gradient.iter().zip(&flips).map(|(g, f)| g * f64::from(*f)).sum();
        let weights = tilted(&setup.pentanomial, tilt);
        let crash_at = (uniform() < setup.crash_rate).then(|| (uniform() * setup.lease_pairs as f64) as u64);
        let mut play = LeasePlay { flips, reports: Vec::new(), played: 0, expired: crash_at.is_some() };
        let mut unreported = Vec::new();
        for index in 0..setup.lease_pairs {
            // The pairs not yet reported are lost with the crash.
            if crash_at == Some(index) {
                break;
            }
            let slot = draw(&weights, uniform());
            play.played += 1;
            match reported_slot(conduct, slot, &play.flips, uniform) {
                Some(reported) => unreported.push(reported),
                None => play.expired = true,
            }
            if play.played.is_multiple_of(setup.report_pairs) || index + 1 == setup.lease_pairs {
                play.reports.push((play.played, std::mem::take(&mut unreported)));
            }
        }
        play
    }

    /// The slot `conduct` reports for a pair that fell in `slot`; `None`: withheld.
    fn reported_slot(conduct: Conduct, slot: usize, flips: &[i8], uniform: &mut impl FnMut() -> f64) -> Option<usize> {
        match conduct {
            Conduct::Honest => Some(slot),
            Conduct::FakeWins { share } => Some(if uniform() < share { 4 } else { slot }),
            Conduct::FakeExtremes { share } => {
                Some(if uniform() < share { if uniform() < 0.5 { 0 } else { 4 } } else { slot })
            }
            Conduct::Withhold { chance } => (slot >= 2 || uniform() >= chance).then_some(slot),
            Conduct::Steer { share, parameter } => Some(match flips.get(parameter) {
                Some(flip) if uniform() < share => {
                    if *flip > 0 {
                        4
                    } else {
                        0
                    }
                }
                _ => slot,
            }),
        }
    }

    /// The pentanomial with each slot's chance times e^(tilt × (slot - 2)), normalized.
    fn tilted(pentanomial: &[f64; 5], tilt: f64) -> [f64; 5] {
        let weights: [f64; 5] = std::array::from_fn(|slot| pentanomial[slot] * (tilt * (slot as f64 - 2.0)).exp());
        let total: f64 = weights.iter().sum();
        weights.map(|w| w / total)
    }

    fn draw(weights: &[f64; 5], uniform: f64) -> usize {
        let mut left = uniform;
        for (slot, weight) in weights.iter().enumerate() {
            if left < *weight {
                return slot;
            }
            left -= weight;
        }
        weights.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::{SmallRng, StdRng};
    use rand::{Rng, SeedableRng};

    use super::simulation::{Conduct, Figures, Setup, figures};
    use super::*;

    fn close(actual: f64, expected: f64, relative: f64) -> bool {
        (actual - expected).abs() <= relative * expected.abs()
    }

    /// Reference values from mpmath at 30 digits, in the tails the checks flag in.
    #[test]
    fn chi_square_tails_match_reference_values() {
        for (x, degrees, expected) in [
            (3.84, 1.0, 0.050_043_521_248_705_1),
            (9.49, 4.0, 0.049_953_131_223_294_9),
            (13.28, 4.0, 0.009_985_688_142_91),
            (23.928, 1.0, 1.000_065_958_103_686_2e-6),
            (0.5, 3.0, 0.918_891_411_654_675_9),
            (30.0, 3.0, 1.380_057_031_293_254_7e-6),
            (50.0, 4.0, 3.610_865_404_890_645e-10),
            (2.0, 1.0, 0.157_299_207_050_285_13),
            (100.0, 1.0, 1.523_970_604_832_105e-23),
            (7.0, 5.0, 0.220_640_307_936_710_8),
        ] {
            let p = chi_square_survival(x, degrees);
            assert!(close(p, expected, 1e-9), "chi-square sf({x}, {degrees}) = {p}, not {expected}");
        }
        // Even degrees have a closed form.
        for x in [0.1, 1.0, 5.0, 20.0, 60.0] {
            let half = x / 2.0;
            assert!(close(chi_square_survival(x, 2.0), (-half).exp(), 1e-12));
            assert!(close(chi_square_survival(x, 4.0), (-half).exp() * (1.0 + half), 1e-12));
        }
        assert!(close(normal_two_sided(5.0), 5.733_031_437_583_878e-7, 1e-9));
        assert_eq!(chi_square_survival(0.0, 3.0), 1.0);
        assert_eq!(chi_square_survival(f64::INFINITY, 3.0), 0.0);
    }

    #[test]
    fn binomial_tails_match_reference_values() {
        assert!(close(binomial_upper_tail(5, 10, 0.02), 7.414_640_371_097_6e-7, 1e-9));
        assert!(close(binomial_upper_tail(20, 200, 0.03), 3.164_017_679_329_255e-6, 1e-9));
        assert_eq!(binomial_upper_tail(0, 10, 0.5), 1.0);
        assert!(close(binomial_upper_tail(1, 10, 0.5), 1.0 - 0.5f64.powi(10), 1e-12));
        assert!(close(binomial_upper_tail(4, 4, 0.02), 0.02f64.powi(4), 1e-9));
        assert_eq!(binomial_upper_tail(11, 10, 0.5), 0.0);
        // Around and below the mean of many trials, where the first term underflows.
        assert!(close(binomial_upper_tail(1000, 2000, 0.5), 0.508_919_505_572_927_2, 1e-9));
        assert_eq!(binomial_upper_tail(1, 2000, 0.5), 1.0);
        assert!(close(binomial_upper_tail(10, 1000, 0.02), 0.995_319_249_568_585_6, 1e-9));
        assert!(close(binomial_upper_tail(30, 1000, 0.02), 0.020_696_518_673_239_505, 1e-9));
        assert!(close(binomial_upper_tail(45, 1000, 0.02), 7.717_809_720_628_07e-7, 1e-9));
    }

    #[test]
    fn the_shape_check_sees_extremes_behind_an_even_mean() {
        let all = [200, 1800, 5500, 2100, 400];
        // In proportion to the rest: nothing to see.
        let like = [4, 36, 110, 42, 8];
        let p = shape(&like, &all, 100).unwrap();
        assert!(p > 0.99, "{p}");
        // A mean of 1 point, near the rest's 1.035, from 0s and 2s in place of draws.
        let extremes = [40, 30, 60, 30, 40];
        let p = shape(&extremes, &[236, 1830, 5560, 2130, 440], 100).unwrap();
        assert!(p < 1e-20, "{p}");
    }

    #[test]
    fn the_shape_check_needs_enough_pairs_on_both_sides_and_a_worker_within_all() {
        assert_eq!(shape(&[2, 18, 55, 21, 3], &[22, 198, 605, 231, 43], 100), None, "99 pairs");
        assert_eq!(shape(&[4, 36, 110, 42, 8], &[4, 36, 110, 42, 8], 100), None, "no other worker");
        assert_eq!(shape(&[4, 36, 110, 42, 8], &[3, 136, 510, 142, 18], 100), None, "more zeros than all");
        assert_eq!(shape(&[0, 0, 200, 0, 0], &[0, 0, 900, 0, 0], 100), None, "one column");
    }

    /// The G statistic of a 2-row table given by columns.
    fn g_statistic(columns: &[[f64; 2]]) -> f64 {
        let sides = [columns.iter().map(|c| c[0]).sum::<f64>(), columns.iter().map(|c| c[1]).sum::<f64>()];
        let total = sides[0] + sides[1];
        let mut g = 0.0;
        for column in columns {
            for (observed, side) in column.iter().zip(sides) {
                let expected = side * (column[0] + column[1]) / total;
                if *observed > 0.0 {
                    g += 2.0 * observed * (observed / expected).ln();
                }
            }
        }
        g
    }

    /// Against 9,900 other pairs, 100 of the worker's expect 2 in the 0-point column and
    /// 4.4 in the 2-point one: the 0s join the 0.5s, then the 2s (the sparsest left)
    /// join the 1.5s, leaving three columns and two degrees of freedom.
    #[test]
    fn columns_expecting_under_five_pairs_are_pooled_with_a_neighbour() {
        let (worker, rest) = ([3, 17, 55, 19, 6], [197, 1783, 5445, 2039, 436]);
        let all: [u64; 5] = std::array::from_fn(|k| worker[k] + rest[k]);
        let pooled = [[20.0, 1980.0], [55.0, 5445.0], [25.0, 2475.0]];
        let expected = chi_square_survival(g_statistic(&pooled), 2.0);
        let p = shape(&worker, &all, 100).unwrap();
        assert!(close(p, expected, 1e-12), "{p} against {expected}");
        // With 1,000 pairs every column expects 20 or more: no pooling, four degrees.
        let (worker, rest) = ([25, 175, 560, 200, 40], [175, 1625, 4940, 1900, 360]);
        let all: [u64; 5] = std::array::from_fn(|k| worker[k] + rest[k]);
        let columns: Vec<[f64; 2]> = (0..5).map(|k| [worker[k] as f64, rest[k] as f64]).collect();
        let expected = chi_square_survival(g_statistic(&columns), 4.0);
        assert!(close(shape(&worker, &all, 100).unwrap(), expected, 1e-12));
    }

    #[test]
    fn an_expiry_rate_is_judged_against_the_fleet_with_a_floor() {
        let worker = Leases { expired: 1, finished: 9 };
        // A fleet that has lost nothing yet: the first crash is the floor's 2% at work.
        let p = expiry(worker, Leases { expired: 1, finished: 990 }, 4, 0.02).unwrap();
        assert!(p > 0.1, "{p}");
        // Half its leases lost where the fleet loses 2%.
        let p = expiry(Leases { expired: 5, finished: 5 }, Leases { expired: 25, finished: 990 }, 4, 0.02).unwrap();
        assert!(close(p, binomial_upper_tail(5, 10, 0.02), 1e-12) && p < 1e-6, "{p}");
        // A fleet losing a fifth of its leases makes that ordinary.
        let p = expiry(Leases { expired: 5, finished: 5 }, Leases { expired: 205, finished: 805 }, 4, 0.02).unwrap();
        assert!(p > 0.01, "{p}");
        assert_eq!(expiry(Leases { expired: 3, finished: 0 }, Leases { expired: 3, finished: 90 }, 4, 0.02), None);
        assert_eq!(expiry(Leases { expired: 5, finished: 5 }, Leases { expired: 4, finished: 90 }, 4, 0.02), None);
    }

    #[test]
    fn a_rate_of_engine_failures_is_judged_against_the_fleet_with_a_floor() {
        let checks = Checks::default();
        let worker = |abandoned, games| Failures { abandoned, games };
        // Two failures in 100 games where the fleet has none: the floor's 1% at work.
        let p = failures(worker(2, 100), worker(2, 2100), 20, 0.01).unwrap();
        assert!(close(p, binomial_upper_tail(2, 100, 0.01), 1e-12) && p > 0.1, "{p}");
        // Twelve: a base engine that crashes only on this worker.
        let flagged = checks.failures_flag(worker(12, 100), worker(12, 2100));
        assert!(flagged.is_some_and(|p| p < 1e-6), "{flagged:?}");
        // The same where the engine fails one game in ten everywhere: ordinary.
        assert_eq!(checks.failures_flag(worker(12, 100), worker(212, 2100)), None);
        // Too few games; counts that do not nest.
        assert_eq!(failures(worker(5, 19), worker(5, 1000), 20, 0.01), None);
        assert_eq!(failures(worker(5, 40), worker(4, 1000), 20, 0.01), None);
        assert_eq!(failures(worker(50, 40), worker(50, 1000), 20, 0.01), None);
    }

    #[test]
    fn pairs_with_bad_flips_or_results_are_refused() {
        let mut counts = FlipCorrelation::new(2);
        assert_eq!(counts.add(1, &[1], 0), Err(PairError::Flips { flips: 1, parameters: 2 }));
        assert_eq!(counts.add(1, &[1, 0], 0), Err(PairError::Flips { flips: 2, parameters: 2 }));
        assert_eq!(counts.add(1, &[1, -1], 3), Err(PairError::Result(3)));
        assert_eq!(counts.pairs(), 0);
        assert_eq!(counts.add(1, &[1, -1], -2), Ok(()));
        assert_eq!(counts.pairs(), 1);
    }

    /// Pairs in leases of `lease_pairs`, each pair's result drawn by `result` from the
    /// lease's flips.
    fn spsa_pairs(
        counts: &mut [&mut FlipCorrelation],
        leases: std::ops::Range<u64>,
        lease_pairs: u64,
        rng: &mut StdRng,
        mut result: impl FnMut(&[i8], &mut StdRng) -> i64,
    ) {
        for lease in leases {
            let flips: Vec<i8> = (0..4).map(|_| if rng.random::<bool>() { 1 } else { -1 }).collect();
            for _ in 0..lease_pairs {
                let r = result(&flips, rng);
                for c in counts.iter_mut() {
                    c.add(lease, &flips, r).unwrap();
                }
            }
        }
    }

    /// A result of -1, 0 or +1 with mean `mean` (at most 0.6 away from 0).
    fn noisy(mean: f64, rng: &mut StdRng) -> i64 {
        let x: f64 = rng.random();
        if x < 0.3 + mean / 2.0 {
            1
        } else if x < 0.7 + mean / 2.0 {
            0
        } else {
            -1
        }
    }

    #[test]
    fn steering_finds_the_parameter_steered() {
        let mut rng = StdRng::seed_from_u64(3);
        let (mut worker, mut all) = (FlipCorrelation::new(4), FlipCorrelation::new(4));
        spsa_pairs(&mut [&mut all], 0..500, 8, &mut rng, |_, rng| noisy(0.0, rng));
        spsa_pairs(&mut [&mut worker, &mut all], 500..550, 8, &mut rng, |flips, rng| {
            if rng.random::<f64>() < 0.3 { 2 * i64::from(flips[2]) } else { noisy(0.0, rng) }
        });
        let found = steering(&worker, &all, 100).unwrap();
        assert_eq!(found.parameter, 2);
        assert!(found.z > 5.0 && found.p_value < 1e-6, "{found:?}");
        assert_eq!(steering(&worker, &all, 401), None, "400 pairs");
        assert_eq!(steering(&all, &worker, 100), None, "all within the worker");
    }

    /// A steep gradient on the first parameter moves every pair of a lease with the
    /// lease's flips of the others: in leases of 64 pairs the worker's means swing far
    /// more than pair-by-pair noise, and only the lease term keeps z ordinary.
    #[test]
    fn a_shared_gradient_in_long_leases_is_not_steering() {
        let mut rng = StdRng::seed_from_u64(11);
        let gradient = [0.3, 0.3, 0.0, 0.0];
        let result = |flips: &[i8], rng: &mut StdRng| {
            noisy(gradient.iter().zip(flips).map(|(g, f)| g * f64::from(*f)).sum(), rng)
        };
        let mut largest: f64 = 0.0;
        for trial in 0..40 {
            let first = trial * 1_000;
            let (mut worker, mut all) = (FlipCorrelation::new(4), FlipCorrelation::new(4));
            spsa_pairs(&mut [&mut all], first..first + 150, 64, &mut rng, result);
            spsa_pairs(&mut [&mut worker, &mut all], first + 150..first + 158, 64, &mut rng, result);
            largest = largest.max(steering(&worker, &all, 100).unwrap().z.abs());
        }
        // The largest of 40 × 4 honest |z| stays where normal noise puts it.
        assert!(largest < 4.0, "{largest}");
    }

    /// The simulation's figures from a fast generator (debug builds spend most of their
    /// time drawing numbers).
    fn simulate(setup: &Setup, conduct: Conduct, workers: u64, seed: u64) -> Figures {
        let mut rng = SmallRng::seed_from_u64(seed);
        figures(setup, conduct, workers, &mut || rng.random::<f64>())
    }

    /// 2,000 honest workers of 400 pairs, 1,000 in a test and 1,000 in an SPSA job,
    /// checked after every report: at most one flagged in each (the defaults expect
    /// about 0.05), and every check that applies to the job has p-values below 1e-2 in
    /// at most 1.5 times that share of its checks. (Deeper levels need more workers than
    /// a debug build simulates in seconds, since one worker's checks share most of their
    /// pairs; the example prints them for 10,000.)
    #[test]
    fn honest_workers_are_not_flagged() {
        let test = simulate(&Setup::test(), Conduct::Honest, 1_000, 1);
        let spsa = simulate(&Setup::spsa(), Conduct::Honest, 1_000, 1);
        assert!(test.any.flagged <= 1 && spsa.any.flagged <= 1, "{test:?}\n{spsa:?}");
        for check in [test.shape, test.expiry, spsa.expiry, spsa.steering] {
            assert!(check.checks > 30_000 && check.below[0] as f64 / (check.checks as f64) < 0.015, "{check:?}");
        }
    }

    #[test]
    fn clear_cheats_are_flagged_within_400_pairs() {
        let (test, spsa) = (Setup::test(), Setup::spsa());
        for (setup, conduct) in [
            (&test, Conduct::FakeWins { share: 0.25 }),
            (&test, Conduct::FakeExtremes { share: 0.25 }),
            (&test, Conduct::Withhold { chance: 0.5 }),
            (&spsa, Conduct::Steer { share: 0.3, parameter: 5 }),
        ] {
            let figures = simulate(setup, conduct, 200, 2);
            assert!(figures.any.flagged >= 190, "{conduct:?}: {figures:?}");
        }
    }
}
