//! The loss, in win-probability space: the model's evaluation and the search score
//! both become an expected result through the logistic `1 / (1 + exp(-cp / scale))`,
//! and the prediction is compared with a blend of the two targets,
//! `lambda x score's probability + (1 - lambda) x game result`, by squared error.
//!
//! The scale is the centipawn score at which a side's expected result is
//! `1 / (1 + e^-1)`, about 0.73. It is a property of the data (of the engine that
//! scored it and the games it played), so [`fit_scale`] fits it: the scale under
//! which the scores' probabilities best predict the games' results, by the results'
//! cross-entropy.

use tch::Tensor;

/// The loss of `predicted` centipawns against `scores` and `results` (all from the
/// side to move's view), as a mean over the batch.
pub fn loss(predicted: &Tensor, scores: &Tensor, results: &Tensor, scale: f64, lambda: f64) -> Tensor {
    let target = (scores / scale).sigmoid() * lambda + results * (1.0 - lambda);
    ((predicted / scale).sigmoid() - target).square().mean(tch::Kind::Float)
}

/// The scale in centipawns under which `sigmoid(score / scale)` best predicts the
/// results (cross-entropy), searched between 50 and 5,000.
pub fn fit_scale(scores: &[f32], results: &[f32]) -> f64 {
    let cost = |scale: f64| -> f64 {
        scores
            .iter()
            .zip(results)
            .map(|(&score, &result)| {
                let p = (1.0 / (1.0 + (-f64::from(score) / scale).exp())).clamp(1e-9, 1.0 - 1e-9);
                -(f64::from(result) * p.ln() + (1.0 - f64::from(result)) * (1.0 - p).ln())
            })
            .sum()
    };
    // Golden-section search on the scale's logarithm.
    let (mut low, mut high) = (50f64.ln(), 5_000f64.ln());
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..60 {
        let a = high - ratio * (high - low);
        let b = low + ratio * (high - low);
        if cost(a.exp()) < cost(b.exp()) { high = b } else { low = a }
    }
    ((low + high) / 2.0).exp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn the_fitted_scale_recovers_the_one_that_drew_the_results() {
        // Results drawn as wins with probability sigmoid(score / 300), losses otherwise.
        let mut rng = StdRng::seed_from_u64(5);
        let scores: Vec<f32> = (0..40_000).map(|_| rng.random_range(-900.0..900.0)).collect();
        let results: Vec<f32> = scores
            .iter()
            .map(|&s| f32::from(u8::from(rng.random::<f64>() < 1.0 / (1.0 + (-f64::from(s) / 300.0).exp()))))
            .collect();
        let scale = fit_scale(&scores, &results);
        assert!((270.0..330.0).contains(&scale), "fitted {scale}, drawn with 300");
    }

    #[test]
    fn lambda_blends_the_score_and_the_result() {
        let predicted = Tensor::from_slice(&[0f32]);
        let scores = Tensor::from_slice(&[1e6f32]);
        let results = Tensor::from_slice(&[0f32]);
        let at = |lambda| f64::try_from(loss(&predicted, &scores, &results, 300.0, lambda)).unwrap();
        // The prediction is 0.5; the score says 1.0 and the result 0.0.
        assert!((at(1.0) - 0.25).abs() < 1e-6);
        assert!((at(0.0) - 0.25).abs() < 1e-6);
        assert!(at(0.5).abs() < 1e-6);
    }
}
