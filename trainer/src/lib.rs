//! NNUE training for `xq-engine`'s net, with tch (libtorch): the trainer reads the
//! cluster's self-play chunks through the engine's chunk reader, computes features
//! with the engine's own feature code, trains the engine's architecture in float and
//! exports it, quantised, in the engine's `XQNN` format.
//!
//! - [`data`]: chunk files to shuffled batches, by loader threads; the validation games.
//! - [`model`]: the float net, its sparse first layer and its factoriser, clipping and
//!   quantisation.
//! - [`transformer`]: the feature transformer's CPU kernel, forward and backward.
//! - [`loss`]: the loss in win-probability space and the fitted score scale.
//! - [`optim`]: AdamW and the learning-rate schedules.
//! - [`checkpoint`]: the run's state on disk, written atomically.
//! - [`train`]: epochs, validation, checkpoints, the log, the exported net.
//! - [`curves`]: the log's losses drawn as SVG.
//! - [`export`]: quantisation to the engine's net file.
//! - [`bench`]: the training-speed benchmark's batches and timing.
//! - [`closed_loop`]: self-play, training, test and promotion, generation after
//!   generation, on a coordinator.

pub mod bench;
pub mod checkpoint;
pub mod closed_loop;
pub mod curves;
pub mod data;
pub mod export;
pub mod loss;
pub mod model;
pub mod optim;
pub mod train;
pub mod transformer;

/// The device a `--device` setting names: `auto` takes CUDA when there is one.
pub fn device(name: &str) -> Result<tch::Device, String> {
    match name {
        "cpu" => Ok(tch::Device::Cpu),
        "auto" => Ok(tch::Device::cuda_if_available()),
        "cuda" if tch::Cuda::is_available() => Ok(tch::Device::Cuda(0)),
        "cuda" => Err("--device cuda: no CUDA device is available to this build of libtorch".to_owned()),
        other => Err(format!("--device {other}: expected auto, cpu or cuda")),
    }
}
