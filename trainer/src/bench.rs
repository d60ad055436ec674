//! The training-speed benchmark's Rust side: batches from real chunks and the
//! model's initial weights saved for the PyTorch baselines to read (`safetensors`),
//! and the trainer's own step timed on the same batches from the same weights.
//!
//! `scripts/bench-trainer` runs this and the baselines (`scripts/bench_trainer_reference.py`)
//! in turn; the losses of the first steps tell that the three compute the same thing.

use std::path::Path;
use std::time::Instant;

use tch::{Device, Tensor};

use crate::data::Batch;
use crate::model::{BatchTensors, Model};
use crate::optim::AdamW;
use crate::train::step;

/// The settings every side of the benchmark trains with: the loss's scale and lambda,
/// the learning rate and AdamW's weight decay (the baselines restate them).
pub const SCALE: f64 = 400.0;
/// See [`SCALE`].
pub const LAMBDA: f64 = 0.75;
/// See [`SCALE`].
pub const RATE: f64 = 1e-3;
/// See [`SCALE`].
pub const WEIGHT_DECAY: f64 = 1e-4;

/// The prefix of the initial weights' names in a saved file: `init.ft.weight`, ...
const INIT: &str = "init.";

/// Writes `batches` and `model`'s parameters to `path`: for batch `i`, tensors
/// `ours.i`, `theirs.i`, `offsets.i` (i64) and `scores.i`, `results.i` (f32); the
/// parameters as `init.NAME` (names of [`crate::model::NAMES`], in its shapes).
pub fn save(batches: &[Batch], model: &Model, path: &Path) -> Result<(), tch::TchError> {
    let mut tensors = Vec::new();
    for (i, batch) in batches.iter().enumerate() {
        tensors.push((format!("ours.{i}"), Tensor::from_slice(&batch.ours)));
        tensors.push((format!("theirs.{i}"), Tensor::from_slice(&batch.theirs)));
        tensors.push((format!("offsets.{i}"), Tensor::from_slice(&batch.offsets)));
        tensors.push((format!("scores.{i}"), Tensor::from_slice(&batch.scores)));
        tensors.push((format!("results.{i}"), Tensor::from_slice(&batch.results)));
    }
    for (name, tensor) in model.named() {
        tensors.push((format!("{INIT}{name}"), tensor.detach().to_device(Device::Cpu)));
    }
    Tensor::write_safetensors(&tensors, path)
}

/// Reads the batches and the model written by [`save`].
pub fn load(path: &Path, device: Device) -> Result<(Vec<Batch>, Model), tch::TchError> {
    let named: std::collections::HashMap<String, Tensor> = Tensor::read_safetensors(path)?.into_iter().collect();
    let mut batches = Vec::new();
    while let Some(ours) = named.get(&format!("ours.{}", batches.len())) {
        let i = batches.len();
        let get = |name: &str| {
            named.get(&format!("{name}.{i}")).ok_or_else(|| tch::TchError::FileFormat(format!("no {name}.{i}")))
        };
        batches.push(Batch {
            ours: Vec::try_from(ours)?,
            theirs: Vec::try_from(get("theirs")?)?,
            offsets: Vec::try_from(get("offsets")?)?,
            scores: Vec::try_from(get("scores")?)?,
            results: Vec::try_from(get("results")?)?,
        });
    }
    let parameters = named
        .iter()
        .filter_map(|(name, tensor)| Some((name.strip_prefix(INIT)?.to_owned(), tensor.shallow_clone())))
        .collect();
    let model = Model::from_named(parameters, device).map_err(tch::TchError::FileFormat)?;
    Ok((batches, model))
}

/// What a timed run measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// Positions per second of the timed steps.
    pub positions_per_second: f64,
    /// The loss of the first warm-up step: the initial weights on the first batch.
    pub first_loss: f64,
    /// The loss of the last warm-up step, after the optimiser's steps before it: the
    /// same in a baseline only if its optimiser and clipping are the same too.
    pub warmed_loss: f64,
}

/// Trains `model` for `warmup` untimed steps and then `steps` timed ones, cycling
/// through `batches` from the first each time, at the benchmark's settings ([`SCALE`],
/// ...). The batches are moved to the device before timing, as a baseline holding
/// its tensors does.
pub fn measure(mut model: Model, batches: &[Batch], warmup: usize, steps: usize, device: Device) -> Measured {
    assert!(warmup > 0 && !batches.is_empty(), "a warm-up step and a batch at least");
    let mut optimiser = AdamW::new(&model.tensors, WEIGHT_DECAY);
    let tensors: Vec<BatchTensors> = batches.iter().map(|b| BatchTensors::of(b, device)).collect();
    let mut run = |count: usize| {
        let mut losses = Vec::with_capacity(count);
        let mut positions = 0;
        for i in 0..count {
            losses.push(step(&mut model, &mut optimiser, &tensors[i % tensors.len()], SCALE, LAMBDA, RATE));
            positions += batches[i % batches.len()].len();
        }
        (positions, losses)
    };
    let (_, losses) = run(warmup);
    let started = Instant::now();
    let (positions, _) = run(steps);
    Measured {
        positions_per_second: positions as f64 / started.elapsed().as_secs_f64(),
        first_loss: losses[0],
        warmed_loss: losses[warmup - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_batches_and_weights_read_back_the_same() {
        let batch = Batch {
            ours: vec![3, 70, 7_000],
            theirs: vec![5, 90, 7_100],
            offsets: vec![0, 1],
            scores: vec![12.0, -40.0],
            results: vec![1.0, 0.5],
        };
        let model = Model::new(Device::Cpu, 3);
        let path = std::env::temp_dir().join(format!("xq-bench-{}.safetensors", std::process::id()));
        save(std::slice::from_ref(&batch), &model, &path).unwrap();
        let (batches, loaded) = load(&path, Device::Cpu).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(batches, [batch]);
        for ((name, a), (_, b)) in model.named().zip(loaded.named()) {
            assert!(a.equal(b), "{name}");
        }
    }
}
