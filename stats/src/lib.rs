//! Match statistics shared by the worker (live summaries) and the coordinator (tests):
//! the Elo estimate with its 95% interval and the likelihood of superiority, and the
//! generalized sequential probability ratio test (GSPRT) on pentanomial or trinomial
//! results, in fishtest's normalized and logistic models.
//!
//! Results are counts in fishtest's order: pentanomial `[N0, N1, N2, N3, N4]` counts
//! game pairs scoring 0, 0.5, 1, 1.5 and 2 points; trinomial `[losses, draws, wins]`.
//! The GSPRT compares the maximum-likelihood distributions of the results under the
//! two hypotheses (Elo `elo0` against `elo1`), each found by solving the secular
//! equation of the constrained maximum.
//!
//! [`spsa`] is the other thing a testing cluster computes from game pairs: fishtest's
//! SPSA tuning of engine parameters; [`ratings`] rates many engines from all their
//! games, as Ordo does for tournaments and rating lists; [`conduct`] checks whether a
//! worker's results look played rather than picked: their shape, the leases it lets
//! expire, and in SPSA, results that follow a parameter's flips.

pub mod conduct;
pub mod ratings;
pub mod spsa;

/// Normalized Elo per unit of t-value: 800 / ln 10.
const NELO_PER_T: f64 = 800.0 / std::f64::consts::LN_10;

/// The widest normalized Elo bound. Beyond about 245 (a pentanomial t-value of 1) the
/// constrained maximum no longer exists for most results and the LLR would be NaN, a
/// test that could never end; useful bounds are a few Elo wide.
pub const MAX_NORMALIZED_BOUND: f64 = 200.0;

/// Counts standing in for zero, so that every outcome keeps some probability.
const REGULARIZATION: f64 = 1e-3;

/// Which Elo the SPRT bounds are given in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Model {
    /// Normalized Elo (fishtest's default): Elo scaled by the spread of the results,
    /// so that the test's cost does not depend on the draw rate.
    #[default]
    Normalized,
    /// Logistic (classical) Elo.
    Logistic,
}

/// The results cannot be tested.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// Results must have 3 (trinomial) or 5 (pentanomial) counts.
    #[error("results must have 3 counts (losses, draws, wins) or 5 (pentanomial), not {0}")]
    Shape(usize),
    /// alpha and beta must lie strictly between 0 and 1.
    #[error("alpha and beta must lie strictly between 0 and 1")]
    ErrorRates,
    /// The bounds must be finite, ordered and, in the normalized model, within
    /// [`MAX_NORMALIZED_BOUND`].
    #[error(
        "the bounds {elo0} and {elo1}: elo0 below elo1, finite, and within ±{MAX_NORMALIZED_BOUND} in the normalized model"
    )]
    Bounds {
        /// The null hypothesis' Elo.
        elo0: f64,
        /// The alternative's.
        elo1: f64,
    },
}

/// An SPRT of `elo0` against `elo1` with error rates `alpha` and `beta`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sprt {
    /// The null hypothesis' Elo.
    pub elo0: f64,
    /// The alternative hypothesis' Elo.
    pub elo1: f64,
    /// The false positive rate.
    pub alpha: f64,
    /// The false negative rate.
    pub beta: f64,
    /// The Elo model of `elo0` and `elo1`.
    pub model: Model,
}

/// Where an SPRT stands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SprtState {
    /// The log-likelihood ratio.
    pub llr: f64,
    /// The lower bound: below it, H0 is accepted.
    pub lower: f64,
    /// The upper bound: above it, H1 is accepted.
    pub upper: f64,
}

impl SprtState {
    /// `Some(true)` when H1 is accepted, `Some(false)` when H0 is, else `None`.
    pub fn decision(&self) -> Option<bool> {
        if self.llr >= self.upper {
            Some(true)
        } else if self.llr <= self.lower {
            Some(false)
        } else {
            None
        }
    }
}

/// A discrete distribution: outcomes (scores in 0..=1) and their probabilities.
type Pdf = Vec<(f64, f64)>;

fn results_to_pdf(results: &[u64]) -> Result<(f64, Pdf), StatsError> {
    let n = results.len();
    if n != 3 && n != 5 {
        return Err(StatsError::Shape(n));
    }
    let counts: Vec<f64> = results.iter().map(|&c| if c == 0 { REGULARIZATION } else { c as f64 }).collect();
    let total: f64 = counts.iter().sum();
    let pdf = counts.iter().enumerate().map(|(i, c)| (i as f64 / (n - 1) as f64, c / total)).collect();
    Ok((total, pdf))
}

fn mean_and_variance(pdf: &[(f64, f64)]) -> (f64, f64) {
    let mean: f64 = pdf.iter().map(|(a, p)| a * p).sum();
    let variance = pdf.iter().map(|(a, p)| p * (a - mean).powi(2)).sum();
    (mean, variance)
}

/// Solves sum p_i a_i / (1 + x a_i) = 0 for x between the poles -1/max(a) and
/// -1/min(a), where the sum decreases; the `a_i` must take both signs.
fn secular(pdf: &[(f64, f64)]) -> f64 {
    let max = pdf.iter().map(|(a, _)| *a).fold(f64::MIN, f64::max);
    let min = pdf.iter().map(|(a, _)| *a).fold(f64::MAX, f64::min);
    let f = |x: f64| pdf.iter().map(|(a, p)| p * a / (1.0 + x * a)).sum::<f64>();
    let margin = 1e-12;
    let (mut low, mut high) = (-1.0 / max + margin, -1.0 / min - margin);
    for _ in 0..200 {
        let mid = 0.5 * (low + high);
        if f(mid) > 0.0 {
            low = mid;
        } else {
            high = mid;
        }
    }
    0.5 * (low + high)
}

/// The distribution closest to `pdf` (maximum likelihood) with mean `s`.
fn mle_expected(pdf: &[(f64, f64)], s: f64) -> Pdf {
    let shifted: Pdf = pdf.iter().map(|&(a, p)| (a - s, p)).collect();
    let x = secular(&shifted);
    pdf.iter().zip(&shifted).map(|(&(a, p), &(d, _))| (a, p / (1.0 + x * d))).collect()
}

/// The distribution closest to `pdf` with t-value `(mean - reference) / sd = t`, by
/// fixed-point iteration on the secular equation.
fn mle_t_value(pdf: &[(f64, f64)], reference: f64, t: f64) -> Pdf {
    let mut mle: Pdf = pdf.iter().map(|&(a, _)| (a, 1.0 / pdf.len() as f64)).collect();
    for _ in 0..100 {
        let (mean, variance) = mean_and_variance(&mle);
        let sd = variance.sqrt();
        let shifted: Pdf =
            pdf.iter().map(|&(a, p)| (a - reference - t * sd * (1.0 + ((mean - a) / sd).powi(2)) / 2.0, p)).collect();
        let x = secular(&shifted);
        let next: Pdf = pdf.iter().zip(&shifted).map(|(&(a, p), &(d, _))| (a, p / (1.0 + x * d))).collect();
        let change = next.iter().zip(&mle).map(|(n, o)| (n.1 - o.1).abs()).fold(0.0, f64::max);
        mle = next;
        if change < 1e-12 {
            break;
        }
    }
    mle
}

/// The expected score of a player `elo` stronger, in the logistic model.
pub fn logistic_score(elo: f64) -> f64 {
    1.0 / (1.0 + 10f64.powf(-elo / 400.0))
}

/// The logistic Elo of an expected score.
pub fn logistic_elo(score: f64) -> f64 {
    let score = score.clamp(1e-9, 1.0 - 1e-9);
    -400.0 * (1.0 / score - 1.0).log10()
}

impl Sprt {
    /// Checks the error rates.
    pub fn new(elo0: f64, elo1: f64, alpha: f64, beta: f64, model: Model) -> Result<Self, StatsError> {
        if !(alpha > 0.0 && alpha < 1.0 && beta > 0.0 && beta < 1.0) {
            return Err(StatsError::ErrorRates);
        }
        let within = |elo: f64| model == Model::Logistic || elo.abs() <= MAX_NORMALIZED_BOUND;
        if !(elo0.is_finite() && elo1.is_finite() && elo0 < elo1 && within(elo0) && within(elo1)) {
            return Err(StatsError::Bounds { elo0, elo1 });
        }
        Ok(Sprt { elo0, elo1, alpha, beta, model })
    }

    /// The log-likelihood ratio of `results` and the bounds.
    pub fn state(&self, results: &[u64]) -> Result<SprtState, StatsError> {
        let (count, pdf) = results_to_pdf(results)?;
        let (pdf0, pdf1) = match self.model {
            Model::Logistic => {
                (mle_expected(&pdf, logistic_score(self.elo0)), mle_expected(&pdf, logistic_score(self.elo1)))
            }
            Model::Normalized => {
                let scale = if results.len() == 5 { std::f64::consts::SQRT_2 } else { 1.0 };
                let t = |nelo: f64| nelo / NELO_PER_T * scale;
                (mle_t_value(&pdf, 0.5, t(self.elo0)), mle_t_value(&pdf, 0.5, t(self.elo1)))
            }
        };
        let llr = count
            * pdf
                .iter()
                .zip(pdf0.iter().zip(&pdf1))
                .map(|(&(_, p), (&(_, p0), &(_, p1)))| p * (p1.ln() - p0.ln()))
                .sum::<f64>();
        Ok(SprtState {
            llr,
            lower: (self.beta / (1.0 - self.alpha)).ln(),
            upper: ((1.0 - self.beta) / self.alpha).ln(),
        })
    }
}

/// The Elo estimate of a result set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EloEstimate {
    /// Logistic Elo.
    pub elo: f64,
    /// Lower end of the 95% interval.
    pub low: f64,
    /// Upper end of the 95% interval.
    pub high: f64,
    /// Likelihood of superiority: the probability that the true Elo is positive.
    pub los: f64,
    /// Normalized Elo.
    pub nelo: f64,
}

/// The standard normal distribution function.
fn phi(x: f64) -> f64 {
    0.5 * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

/// The error function (Abramowitz and Stegun 7.1.26, error below 1.5e-7).
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let value = 1.0 - poly * (-x * x).exp();
    if x >= 0.0 { value } else { -value }
}

/// The Elo estimate, its 95% interval, LOS and normalized Elo of `results`.
pub fn elo_estimate(results: &[u64]) -> Result<EloEstimate, StatsError> {
    let n = results.len();
    if n != 3 && n != 5 {
        return Err(StatsError::Shape(n));
    }
    let count: u64 = results.iter().sum();
    let total = count.max(1) as f64;
    let pdf: Pdf = results.iter().enumerate().map(|(i, &c)| (i as f64 / (n - 1) as f64, c as f64 / total)).collect();
    let (mean, variance) = mean_and_variance(&pdf);
    let stderr = (variance / total).sqrt();
    let z = 1.959_963_985;
    // Without spread the sign of the mean's distance from 0.5 is certain.
    let los = if stderr > 0.0 {
        phi((mean - 0.5) / stderr)
    } else if mean > 0.5 {
        1.0
    } else if mean < 0.5 {
        0.0
    } else {
        0.5
    };
    let scale = if n == 5 { std::f64::consts::SQRT_2 } else { 1.0 };
    let nelo = if variance > 0.0 { (mean - 0.5) / (variance.sqrt() * scale) * NELO_PER_T } else { 0.0 };
    Ok(EloEstimate {
        elo: logistic_elo(mean),
        low: logistic_elo(mean - z * stderr),
        high: logistic_elo(mean + z * stderr),
        los,
        nelo,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every result set, from none of a kind to thousands, has a finite LLR at the
    /// widest bounds allowed; wider or reversed bounds are refused.
    #[test]
    fn the_llr_is_finite_wherever_the_bounds_are_allowed() {
        let counts = [0, 1, 7, 1000];
        for (elo0, elo1) in
            [(-MAX_NORMALIZED_BOUND, -MAX_NORMALIZED_BOUND + 1.0), (MAX_NORMALIZED_BOUND - 1.0, MAX_NORMALIZED_BOUND)]
        {
            let sprt = Sprt::new(elo0, elo1, 0.05, 0.05, Model::Normalized).unwrap();
            for index in 0..counts.len().pow(5) {
                let penta: Vec<u64> = (0..5).map(|i| counts[index / counts.len().pow(i) % counts.len()]).collect();
                let llr = sprt.state(&penta).unwrap().llr;
                assert!(llr.is_finite(), "{penta:?} at bounds {elo0}, {elo1}: LLR {llr}");
            }
            for tri in [[0, 0, 5], [5, 0, 0], [0, 5, 0], [3, 4, 1000]] {
                assert!(sprt.state(&tri).unwrap().llr.is_finite(), "{tri:?}");
            }
        }
        // Just beyond, the constrained maximum is lost for the most ordinary results.
        let wide = Sprt { elo0: -250.0, elo1: -240.0, alpha: 0.05, beta: 0.05, model: Model::Normalized };
        assert!(wide.state(&[10, 20, 40, 20, 10]).unwrap().llr.is_nan(), "the limit is needed");
        for (elo0, elo1) in [(-250.0, -240.0), (0.0, 201.0), (5.0, 0.0), (1.0, 1.0), (f64::NAN, 1.0)] {
            assert!(matches!(Sprt::new(elo0, elo1, 0.05, 0.05, Model::Normalized), Err(StatsError::Bounds { .. })));
        }
        assert!(Sprt::new(-600.0, 300.0, 0.05, 0.05, Model::Logistic).is_ok(), "logistic bounds are not limited");
    }

    #[test]
    fn llr_matches_fishtest_reference_values() {
        let logistic = Sprt::new(-3.0, 1.0, 0.05, 0.05, Model::Logistic).unwrap();
        let llr = logistic.state(&[10789, 19328, 33806, 19402, 10543]).unwrap().llr;
        assert!((llr - 2.131068).abs() < 1e-3, "{llr}");
        let normalized = Sprt::new(0.5, 2.5, 0.05, 0.05, Model::Normalized).unwrap();
        let llr = normalized.state(&[39, 8843, 26675, 9240, 44]).unwrap().llr;
        assert!((llr - 2.941675).abs() < 1e-3, "{llr}");
    }

    #[test]
    fn bounds_follow_the_error_rates() {
        let sprt = Sprt::new(0.0, 5.0, 0.05, 0.05, Model::Normalized).unwrap();
        let state = sprt.state(&[1, 2, 3, 2, 1]).unwrap();
        assert!((state.lower + 2.944_439).abs() < 1e-5);
        assert!((state.upper - 2.944_439).abs() < 1e-5);
        assert!(Sprt::new(0.0, 5.0, 0.0, 0.05, Model::Normalized).is_err());
        assert_eq!(sprt.state(&[1, 2]), Err(StatsError::Shape(2)));
    }

    #[test]
    fn elo_of_an_even_match_is_zero_and_of_a_better_player_positive() {
        let even = elo_estimate(&[10, 20, 40, 20, 10]).unwrap();
        assert!(even.elo.abs() < 1e-9 && (even.los - 0.5).abs() < 1e-9);
        let better = elo_estimate(&[30, 60, 100]).unwrap();
        assert!(better.elo > 0.0 && better.low < better.elo && better.elo < better.high && better.los > 0.99);
        assert_eq!(elo_estimate(&[0, 0, 0, 0, 7]).unwrap().los, 1.0, "all pairs won");
        assert_eq!(elo_estimate(&[7, 0, 0]).unwrap().los, 0.0, "all games lost");
        // 60% score is 70.4 Elo.
        assert!((logistic_elo(0.6) - 70.437).abs() < 1e-2);
    }
}
