//! The feature transformer on the CPU, forward and backward, in plain Rust over the
//! batch's feature lists: each sample adds its (at most 32) weight rows per view, and
//! the backward adds each sample's output gradient back onto the same rows.
//!
//! Why not libtorch's `embedding_bag`: its CPU backward took 66 ms of a 70 ms
//! forward-and-backward per view and batch of 16,384 (`examples/profile_step.rs`),
//! and the clipped, rounded activations on the [16,384, 512] output cost as many
//! elementwise passes again. Here the forward computes sums, clipping and rounding in
//! one pass, and the backward is one pass too; the work is split over threads by
//! samples going forward and by output columns going back, so no two threads write
//! the same value. libtorch's path ([`crate::model::sparse_sum`]) stays for other
//! devices and as the reference in the tests.

use xq_engine::xiangqi::nnue::L1;
use xq_engine::xiangqi::nnue::features::FEATURES;

use crate::data::Batch;

/// An activation's 1.0 in the engine: the transformer's outputs, clipped to [0, 1], are
/// quantised to this many steps.
pub const ACTIVATION_ONE: f64 = 127.0;

/// The transformer's output for a batch: both views' activations per sample (the
/// side to move's first), and where the clipping lets the gradient through.
#[derive(Clone, Debug, PartialEq)]
pub struct Transformed {
    /// `samples x 2 L1` activations, clipped to 0..=1 and rounded to the engine's steps.
    pub input: Vec<f32>,
    /// 1 where the sum was within 0..=1 (the gradient passes), else 0; same layout.
    pub passes: Vec<u8>,
}

/// The feature lists of sample `s` in `batch`: its side to move's and the other's.
fn features(batch: &Batch, s: usize) -> [&[i64]; 2] {
    let start = batch.offsets[s] as usize;
    let end = batch.offsets.get(s + 1).map_or(batch.ours.len(), |&o| o as usize);
    [&batch.ours[start..end], &batch.theirs[start..end]]
}

thread_local! {
    /// Large buffers given back by [`recycle`], for the next step to reuse.
    static SPARE: std::cell::RefCell<Vec<Vec<f32>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A zeroed buffer of `len` values, reusing a recycled one when there is one: a
/// fresh allocation of this size is mapped anew by the system and faults in page by
/// page, which cost more than a training step's whole optimiser pass.
pub fn buffer(len: usize) -> Vec<f32> {
    match SPARE.with(|spare| spare.borrow_mut().pop()) {
        Some(mut buffer) => {
            buffer.clear();
            buffer.resize(len, 0.0);
            buffer
        }
        None => vec![0.0; len],
    }
}

/// Gives a buffer back for [`buffer`] to reuse (a few are kept).
pub fn recycle(buffer: Vec<f32>) {
    SPARE.with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < 6 {
            spare.push(buffer);
        }
    });
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The activations of `batch` under `weights` (`FEATURES x L1`, feature-major) and
/// `biases` (`L1`).
pub fn forward(weights: &[f32], biases: &[f32], batch: &Batch) -> Transformed {
    assert_eq!((weights.len(), biases.len()), (FEATURES * L1, L1), "the transformer's shapes");
    let samples = batch.len();
    let mut input = buffer(samples * 2 * L1);
    let mut passes = vec![0u8; samples * 2 * L1];
    let per_thread = samples.div_ceil(threads()).max(1);
    std::thread::scope(|scope| {
        let rows = input.chunks_mut(per_thread * 2 * L1).zip(passes.chunks_mut(per_thread * 2 * L1));
        for (part, (input, passes)) in rows.enumerate() {
            scope.spawn(move || {
                let mut sum = [0f32; L1];
                let outputs = input.chunks_exact_mut(L1).zip(passes.chunks_exact_mut(L1));
                let views = (part * per_thread..samples).flat_map(|s| features(batch, s));
                for ((out, pass), features) in outputs.zip(views) {
                    sum.copy_from_slice(biases);
                    for &feature in features {
                        let row = &weights[feature as usize * L1..][..L1];
                        sum.iter_mut().zip(row).for_each(|(s, w)| *s += w);
                    }
                    activate(&sum, out, pass);
                }
            });
        }
    });
    Transformed { input, passes }
}

/// The clipped ReLU rounded to the engine's steps, and where the gradient passes.
/// Branch-free so that it vectorises: rounding adds and subtracts 2^23, which rounds
/// a float in 0..2^23 to the nearest integer (ties to even, as libtorch's round).
fn activate(sums: &[f32], out: &mut [f32], pass: &mut [u8]) {
    const SHIFT: f32 = 8_388_608.0;
    let one = ACTIVATION_ONE as f32;
    for ((out, pass), &value) in out.iter_mut().zip(pass.iter_mut()).zip(sums) {
        *pass = u8::from((0.0..=1.0).contains(&value));
        let clipped = value.clamp(0.0, 1.0) * one;
        *out = ((clipped + SHIFT) - SHIFT) / one;
    }
}

/// The output columns each thread takes.
fn column_ranges() -> Vec<std::ops::Range<usize>> {
    let threads = threads().min(L1);
    let width = L1.div_ceil(threads);
    (0..threads).map(|t| t * width..((t + 1) * width).min(L1)).filter(|r| !r.is_empty()).collect()
}

/// The gradients of the weights and biases, given `upstream`, the loss's gradient
/// with respect to the activations (`samples x 2 L1`), through the rounding as if it
/// were not there (straight through) and the clipping's `passes`.
pub fn backward(transformed: &Transformed, batch: &Batch, upstream: &[f32]) -> (Vec<f32>, Vec<f32>) {
    assert_eq!(upstream.len(), transformed.passes.len(), "one gradient per activation");
    let columns = column_ranges();
    let parts: Vec<(Vec<f32>, Vec<f32>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = columns
            .iter()
            .map(|columns| {
                let columns = columns.clone();
                let mut weights = buffer(FEATURES * columns.len());
                scope.spawn(move || {
                    let width = columns.len();
                    let mut biases = vec![0f32; width];
                    let mut gradient = vec![0f32; width];
                    for s in 0..batch.len() {
                        for (view, features) in features(batch, s).into_iter().enumerate() {
                            let at = s * 2 * L1 + view * L1;
                            let upstream = &upstream[at + columns.start..at + columns.end];
                            let passes = &transformed.passes[at + columns.start..at + columns.end];
                            for ((g, &u), &p) in gradient.iter_mut().zip(upstream).zip(passes) {
                                *g = if p == 1 { u } else { 0.0 };
                            }
                            biases.iter_mut().zip(&gradient).for_each(|(b, g)| *b += g);
                            for &feature in features {
                                let row = &mut weights[feature as usize * width..][..width];
                                row.iter_mut().zip(&gradient).for_each(|(w, g)| *w += g);
                            }
                        }
                    }
                    (weights, biases)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a transformer thread")).collect()
    });
    let mut weights = buffer(FEATURES * L1);
    let mut biases = vec![0f32; L1];
    for (columns, (part_weights, part_biases)) in columns.iter().zip(parts) {
        let width = columns.len();
        for feature in 0..FEATURES {
            weights[feature * L1 + columns.start..feature * L1 + columns.end]
                .copy_from_slice(&part_weights[feature * width..(feature + 1) * width]);
        }
        biases[columns.clone()].copy_from_slice(&part_biases);
        recycle(part_weights);
    }
    (weights, biases)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand::Rng;
    use rand::rngs::StdRng;

    /// A batch of `samples` random positions' worth of features (up to 32 per view).
    pub(crate) fn batch(samples: usize, rng: &mut StdRng) -> Batch {
        let mut batch = Batch::default();
        for _ in 0..samples {
            batch.offsets.push(batch.ours.len() as i64);
            let count = rng.random_range(2..=32);
            for _ in 0..count {
                batch.ours.push(rng.random_range(0..FEATURES as i64));
                batch.theirs.push(rng.random_range(0..FEATURES as i64));
            }
            batch.scores.push(0.0);
            batch.results.push(0.5);
        }
        batch
    }
}
