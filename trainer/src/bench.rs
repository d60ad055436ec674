//! The training-speed benchmark's Rust side: batches from real chunks saved for a
//! reference trainer to read (`safetensors`, one group of tensors per batch), and the
//! trainer's own step timed on the same batches.

use std::path::Path;
use std::time::Instant;

use tch::{Device, Tensor};

use crate::data::Batch;
use crate::model::{BatchTensors, Model};
use crate::optim::AdamW;
use crate::train::step;

/// Writes `batches` to `path`: for batch `i`, tensors `ours.i`, `theirs.i`,
/// `offsets.i` (i64) and `scores.i`, `results.i` (f32).
pub fn save_batches(batches: &[Batch], path: &Path) -> Result<(), tch::TchError> {
    let mut tensors = Vec::new();
    for (i, batch) in batches.iter().enumerate() {
        tensors.push((format!("ours.{i}"), Tensor::from_slice(&batch.ours)));
        tensors.push((format!("theirs.{i}"), Tensor::from_slice(&batch.theirs)));
        tensors.push((format!("offsets.{i}"), Tensor::from_slice(&batch.offsets)));
        tensors.push((format!("scores.{i}"), Tensor::from_slice(&batch.scores)));
        tensors.push((format!("results.{i}"), Tensor::from_slice(&batch.results)));
    }
    Tensor::write_safetensors(&tensors, path)
}

/// Reads batches written by [`save_batches`].
pub fn load_batches(path: &Path) -> Result<Vec<Batch>, tch::TchError> {
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
    Ok(batches)
}

/// Positions per second of the trainer's step over `steps` steps cycling through
/// `batches`, after `warmup` untimed steps; batches are moved to the device before
/// timing, as a reference loop holding its tensors does.
pub fn positions_per_second(batches: &[Batch], warmup: usize, steps: usize, device: Device, seed: u64) -> f64 {
    let mut model = Model::new(device, seed);
    let mut optimiser = AdamW::new(&model.tensors, 1e-4);
    let tensors: Vec<BatchTensors> = batches.iter().map(|b| BatchTensors::of(b, device)).collect();
    let mut run = |count: usize| {
        let mut positions = 0;
        for i in 0..count {
            let batch = &tensors[i % tensors.len()];
            step(&mut model, &mut optimiser, batch, 400.0, 0.75, 1e-3);
            positions += batches[i % batches.len()].len();
        }
        positions
    };
    run(warmup);
    let started = Instant::now();
    let positions = run(steps);
    positions as f64 / started.elapsed().as_secs_f64()
}
