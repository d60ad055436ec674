//! The training run: epochs over the training games, a validation pass after each,
//! a checkpoint after each (and on a stop request), a machine-readable log, and the
//! exported net at the end.
//!
//! A run is repeatable on one device: the model's initialisation comes from the seed,
//! each epoch's data order from the seed and the epoch, and a resumed run skips the
//! batches its checkpoint had already trained on, so it goes on exactly where it was
//! stopped.
//!
//! Files in the run's directory: `checkpoint.safetensors`, `best.safetensors` (the
//! model of the epoch with the lowest validation loss), `log.jsonl` (one JSON object per
//! epoch: epoch, positions, train and validation loss, learning rate, seconds, positions
//! per second, the share of time spent waiting for data), `losses.svg` (the log's
//! losses drawn, see [`crate::curves`]) and, when the run ends, `net.xqnn`: the best
//! epoch's net, not the last's (a run that overfits its data ends past its best).
//!
//! Each run's validation games are its own data's, so two runs on different data have
//! losses that do not compare. A fixed validation set (`fixed_validation`: chunks whose
//! validation games every run scores, such as a training loop's first generation's)
//! gives a second loss, `fixed_validation_loss`, that does.
//!
//! A resumed run must be the run its checkpoint was: the settings and the data (a
//! SHA-256 of the chunks' names and contents) are compared with the checkpoint's, and
//! a difference is refused by name rather than trained on (skipping the batches already
//! trained assumes the same batches in the same order).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tch::{Device, Tensor};

use crate::checkpoint::{self, CheckpointError, Progress};
use crate::data::{Batch, DataError, LoaderSettings, Part, Pass, Refusal};
use crate::export::{ExportError, export};
use crate::loss::{fit_scale, loss};
use crate::model::{BatchTensors, Model};
use crate::optim::{AdamW, RateSettings};

/// Positions the scale is fitted on.
const SCALE_SAMPLE: usize = 200_000;

/// A run's settings.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrainSettings {
    /// Where the data came from (a directory, or a coordinator's job), for the record.
    pub data: String,
    /// How the data is read.
    pub loader: LoaderSettings,
    /// Epochs to train.
    pub epochs: usize,
    /// Positions per epoch at most (none: every training position once).
    pub epoch_positions: Option<usize>,
    /// The learning rate and its schedule.
    pub rate: RateSettings,
    /// AdamW's weight decay.
    pub weight_decay: f64,
    /// The share of the target taken from the search score (the rest from the result).
    pub lambda: f64,
    /// The loss's scale in centipawns; fitted to the data when absent.
    pub scale: Option<f64>,
    /// The seed of the initialisation and the data order.
    pub seed: u64,
    /// A checkpoint whose model this run starts from (a previous generation's).
    pub init: Option<PathBuf>,
    /// Chunks whose validation games are scored after every epoch besides the run's
    /// own: a loss comparable across runs on different data. Not recorded when empty,
    /// so that checkpoints of runs without it resume.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixed_validation: Vec<PathBuf>,
    /// Whether the feature transformer is trained factorised ([`Model::factorised`];
    /// [`Factorising::resolve`] gives the default): a run from an unfactorised model
    /// adds a factor of zeros, and a run without it from a factorised model folds the
    /// factor in. Not recorded when off, so that checkpoints of runs before it resume.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub factorise: bool,
    /// Epochs without a lower validation loss after which the run stops early (none:
    /// it trains every epoch). The net is the best epoch's either way. On a cosine
    /// schedule the loss can rise for epochs and then fall below its first low as the
    /// rate ends (seeded-gen3's did: docs/benchmarks.md), so no default uses it. Not
    /// recorded when none, so that checkpoints of runs before it resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patience: Option<usize>,
}

/// Whether a run that has finished `epochs`, whose best epoch was `best`, has waited
/// `patience` epochs for a lower validation loss in vain.
pub fn patience_spent(epochs: usize, best: Option<usize>, patience: Option<usize>) -> bool {
    match (patience, best) {
        (Some(patience), Some(best)) => epochs >= best + patience,
        _ => false,
    }
}

/// Whether a run trains the feature transformer factorised, as asked for; a run's
/// [`TrainSettings::factorise`] is this choice resolved against the model it starts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Factorising {
    /// Factorised when the run starts from a fresh net, and as its model was when it
    /// starts from one (a net file has no factor, a factorised run's checkpoint has).
    /// Measured on one generation's data (docs/training.md): from a fresh net the factor
    /// won +95 Elo at 10 epochs (+13 at 30, within the noise: it learns faster); from a
    /// trained unfactorised net it gained nothing, and a factor of zeros added to it
    /// first raised the loss.
    #[default]
    Auto,
    /// Always factorised (a model without a factor starts with a factor of zeros).
    On,
    /// Never (a factorised model's factor is folded in).
    Off,
}

impl Factorising {
    /// This choice for a run into `dir` starting from `init` (a fresh net when `None`).
    /// `Auto` resuming a run goes as the run's checkpoint was trained, so that a resume
    /// neither needs `init` again nor differs from the run it continues.
    pub fn resolve(self, dir: &Path, init: Option<&Path>) -> Result<bool, CheckpointError> {
        let checkpoint = checkpoint_path(dir);
        let start = if checkpoint.exists() { Some(checkpoint.as_path()) } else { init };
        match (self, start) {
            (Factorising::On, _) | (Factorising::Auto, None) => Ok(true),
            (Factorising::Off, _) => Ok(false),
            (Factorising::Auto, Some(start)) => checkpoint::holds_factor(start),
        }
    }
}

/// What stopped a run.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The data.
    #[error(transparent)]
    Data(#[from] DataError),
    /// A checkpoint.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The export.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// The log could not be written.
    #[error("cannot write the log {path}: {source}")]
    Log {
        /// The log.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The settings cannot work.
    #[error("{0}")]
    Settings(String),
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Epochs finished.
    pub epochs: usize,
    /// Whether a stop request ended it early (its checkpoint is written).
    pub stopped: bool,
    /// The log, one entry per epoch.
    pub log: Vec<serde_json::Value>,
    /// The net, when the run finished.
    pub net: Option<PathBuf>,
    /// Chunks refused, with their reasons.
    pub refusals: Vec<Refusal>,
}

impl Summary {
    /// The log's entry of the epoch whose net was exported: the lowest validation loss
    /// after training (the first of equals), as the run keeps its best epoch.
    pub fn exported_entry(&self) -> Option<&serde_json::Value> {
        let loss = |entry: &serde_json::Value| entry["validation_loss"].as_f64().unwrap_or(f64::INFINITY);
        self.log
            .iter()
            .filter(|entry| entry["epoch"].as_u64().is_some_and(|epoch| epoch >= 1))
            .reduce(|best, entry| if loss(entry) < loss(best) { entry } else { best })
    }
}

/// The checkpoint's path in a run directory.
pub fn checkpoint_path(dir: &Path) -> PathBuf {
    dir.join("checkpoint.safetensors")
}

/// Trains on `chunks` into `dir`, resuming from its checkpoint when there is one,
/// until the settings' epochs are done or `stop` is raised (a checkpoint is written
/// either way).
pub fn train(
    chunks: &[PathBuf],
    settings: &TrainSettings,
    dir: &Path,
    device: Device,
    stop: &AtomicBool,
    progress_bar: bool,
) -> Result<Summary, TrainError> {
    if !(0.0..1.0).contains(&settings.loader.validation_share) || settings.loader.validation_share == 0.0 {
        return Err(TrainError::Settings("the validation share must be above 0 and below 1".to_owned()));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| CheckpointError::Write { path: dir.to_path_buf(), reason: e.to_string() })?;
    let checkpoint_file = checkpoint_path(dir);
    let log_path = dir.join("log.jsonl");
    let mut refusals = Vec::new();

    let validation = Pass::start(chunks, Part::Validation, &settings.loader, settings.seed);
    let validation_batches: Vec<Batch> = validation.batches.iter().collect();
    refusals.extend(validation.refusals());
    let validation_positions: usize = validation_batches.iter().map(Batch::len).sum();
    if validation_positions == 0 {
        return Err(DataError::NothingLeft(settings.data.clone()).into());
    }
    let validation_tensors: Vec<BatchTensors> =
        validation_batches.iter().map(|b| BatchTensors::of(b, device)).collect();
    let fixed_tensors: Vec<BatchTensors> = if settings.fixed_validation.is_empty() {
        Vec::new()
    } else {
        let fixed = Pass::start(&settings.fixed_validation, Part::Validation, &settings.loader, settings.seed);
        let tensors: Vec<BatchTensors> = fixed.batches.iter().map(|b| BatchTensors::of(&b, device)).collect();
        refusals.extend(fixed.refusals());
        if tensors.is_empty() {
            return Err(DataError::NothingLeft("the fixed validation set".to_owned()).into());
        }
        tensors
    };
    // The fixed set's loss, for the log's entry (absent without a fixed set).
    let fixed_loss = |model: &Model, scale: f64, entry: &mut serde_json::Value| {
        if !fixed_tensors.is_empty() {
            entry["fixed_validation_loss"] = validation_loss(model, &fixed_tensors, scale, settings.lambda).into();
        }
    };

    let data_sha256 = data_hash(chunks)?;
    let (mut model, mut optimiser, mut progress) = if checkpoint_file.exists() {
        let loaded = checkpoint::load(&checkpoint_file, device)?;
        check_resume(&loaded.progress, settings, &data_sha256)?;
        (loaded.model, loaded.optimiser, loaded.progress)
    } else {
        let model = match &settings.init {
            Some(init) => checkpoint::load_model(init, device)?,
            None => Model::new(device, settings.seed),
        };
        let model = if settings.factorise { model.factorised() } else { model.composed() };
        let scale = match settings.scale {
            Some(scale) => scale,
            None => {
                fit_data_scale(chunks, &settings.loader, settings.seed, SCALE_SAMPLE)
                    .ok_or_else(|| DataError::NothingLeft(settings.data.clone()))?
                    .scale
            }
        };
        let optimiser = AdamW::new(&model.tensors, settings.weight_decay);
        let recorded = serde_json::to_value(settings).expect("settings serialise");
        let progress = Progress {
            epoch: 0,
            batch: 0,
            scale,
            settings: recorded,
            log: Vec::new(),
            data_sha256: Some(data_sha256.clone()),
            best: None,
        };
        (model, optimiser, progress)
    };
    if progress.log.is_empty() {
        // Epoch 0: the starting model, the point the loss curves start from.
        let mut entry = serde_json::json!({
            "epoch": 0,
            "validation_loss": validation_loss(&model, &validation_tensors, progress.scale, settings.lambda),
            "validation_positions": validation_positions,
            "scale": progress.scale,
        });
        fixed_loss(&model, progress.scale, &mut entry);
        append_log(&log_path, &entry)?;
        progress.log.push(entry);
    }
    // Epoch length for the schedule, before the first epoch has counted it: the
    // training games are (1 - share) / share times the validation games.
    let share = settings.loader.validation_share;
    let estimated = (validation_positions as f64 * (1.0 - share) / share) as usize;
    let epoch_positions = settings.epoch_positions.unwrap_or(estimated).max(1);
    let epoch_batches = epoch_positions.div_ceil(settings.loader.batch_size).max(1);

    let mut stopped = false;
    while progress.epoch < settings.epochs {
        let best_epoch = progress.best.map(|(epoch, _)| epoch);
        if patience_spent(progress.epoch, best_epoch, settings.patience) {
            eprintln!(
                "stopping after epoch {}: no lower validation loss since epoch {} ({} epochs of patience)",
                progress.epoch,
                best_epoch.unwrap_or(0),
                settings.patience.unwrap_or(0)
            );
            break;
        }
        let epoch = progress.epoch;
        let started = Instant::now();
        let mut waited = Duration::ZERO;
        let pass = Pass::start(chunks, Part::Training, &settings.loader, settings.seed ^ (epoch as u64 + 1) << 32);
        let bar = bar(progress_bar, epoch, settings.epochs, epoch_batches as u64);
        let (mut loss_sum, mut positions, mut batches) = (0.0, 0usize, 0usize);
        let mut rate = settings.rate.at(epoch as f64, settings.epochs);
        loop {
            if settings.epoch_positions.is_some_and(|cap| batches * settings.loader.batch_size >= cap) {
                break;
            }
            let waiting = Instant::now();
            let Ok(batch) = pass.batches.recv() else { break };
            waited += waiting.elapsed();
            if batches < progress.batch {
                // Already trained on before the checkpoint this run resumed from.
                batches += 1;
                continue;
            }
            rate = settings.rate.at(epoch as f64 + batches as f64 / epoch_batches as f64, settings.epochs);
            let tensors = BatchTensors::of(&batch, device);
            let value = step(&mut model, &mut optimiser, &tensors, progress.scale, settings.lambda, rate);
            loss_sum += value * batch.len() as f64;
            positions += batch.len();
            batches += 1;
            bar.set_position(batches as u64);
            let seconds = started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!(
                "{:.0} pos/s  loss {:.5}",
                positions as f64 / seconds,
                loss_sum / positions as f64
            ));
            if stop.load(Ordering::Relaxed) {
                progress.batch = batches;
                checkpoint::save(&checkpoint_file, &model, &optimiser, &progress)?;
                stopped = true;
                break;
            }
        }
        bar.finish_and_clear();
        refusals.extend(pass.refusals());
        if stopped {
            break;
        }
        if positions == 0 && progress.batch == 0 {
            return Err(DataError::NothingLeft(settings.data.clone()).into());
        }
        let seconds = started.elapsed().as_secs_f64();
        let validation = validation_loss(&model, &validation_tensors, progress.scale, settings.lambda);
        if progress.best.is_none_or(|(_, best)| validation < best) {
            progress.best = Some((epoch + 1, validation));
            checkpoint::save(&best_path(dir), &model, &optimiser, &progress)?;
        }
        let mut entry = serde_json::json!({
            "epoch": epoch + 1,
            "positions": positions,
            "train_loss": loss_sum / positions.max(1) as f64,
            "validation_loss": validation,
            "validation_positions": validation_positions,
            "learning_rate": rate,
            "scale": progress.scale,
            "seconds": seconds,
            "positions_per_second": positions as f64 / seconds.max(1e-9),
            "data_wait_share": waited.as_secs_f64() / seconds.max(1e-9),
        });
        fixed_loss(&model, progress.scale, &mut entry);
        append_log(&log_path, &entry)?;
        if !progress_bar {
            eprintln!("{entry}");
        }
        progress.log.push(entry);
        progress.epoch += 1;
        progress.batch = 0;
        checkpoint::save(&checkpoint_file, &model, &optimiser, &progress)?;
        write_curves(dir, &progress.log)?;
    }
    dedup(&mut refusals);
    let net = if stopped {
        None
    } else {
        let path = dir.join("net.xqnn");
        let best = match progress.best {
            Some(_) if best_path(dir).exists() => checkpoint::load_model(&best_path(dir), device)?,
            _ => model,
        };
        export(&best, &progress, &path)?;
        Some(path)
    };
    Ok(Summary { epochs: progress.epoch, stopped, log: progress.log, net, refusals })
}

#[cfg(test)]
mod tests {
    use super::patience_spent;

    #[test]
    fn patience_is_spent_once_that_many_epochs_pass_the_best_without_a_better_one() {
        assert!(!patience_spent(3, Some(1), None), "no patience: every epoch");
        assert!(!patience_spent(0, None, Some(2)), "nothing trained yet");
        assert!(!patience_spent(2, Some(1), Some(2)));
        assert!(patience_spent(3, Some(1), Some(2)));
        assert!(!patience_spent(3, Some(3), Some(2)), "the last epoch was the best");
    }
}

/// The best epoch's model in a run directory.
pub fn best_path(dir: &Path) -> PathBuf {
    dir.join("best.safetensors")
}

/// The SHA-256 of `chunks` in order: each one's file name, length and contents.
pub fn data_hash(chunks: &[PathBuf]) -> Result<String, DataError> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for chunk in chunks {
        let name = chunk.file_name().unwrap_or(chunk.as_os_str()).as_encoded_bytes();
        let bytes =
            std::fs::read(chunk).map_err(|source| DataError::List { path: chunk.display().to_string(), source })?;
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Refuses to resume `progress` with other settings or other data, naming what differs.
fn check_resume(progress: &Progress, settings: &TrainSettings, data_sha256: &str) -> Result<(), TrainError> {
    let now = serde_json::to_value(settings).expect("settings serialise");
    let mut differences = Vec::new();
    differ("", &progress.settings, &now, &mut differences);
    if let Some(then) = progress.data_sha256.as_deref().filter(|&then| then != data_sha256) {
        differences.push(format!("the data (chunks' SHA-256 {then}, now {data_sha256})"));
    }
    if differences.is_empty() {
        return Ok(());
    }
    Err(TrainError::Settings(format!(
        "cannot resume: the checkpoint was trained with other settings or data: {}; train into a new directory, \
         or run again with the checkpoint's",
        differences.join("; ")
    )))
}

/// The fields where `then` and `now` differ, as `path: then -> now` (`absent` for a
/// field one side does not record, such as a setting that is off).
fn differ(path: &str, then: &serde_json::Value, now: &serde_json::Value, out: &mut Vec<String>) {
    match (then, now) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let name = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                match (a.get(key), b.get(key)) {
                    (Some(then), Some(now)) => differ(&name, then, now, out),
                    (then, now) => {
                        let shown =
                            |value: Option<&serde_json::Value>| value.map_or("absent".to_owned(), |v| v.to_string());
                        out.push(format!("{name}: {} -> {}", shown(then), shown(now)));
                    }
                }
            }
        }
        _ if then != now => out.push(format!("{path}: {then} -> {now}")),
        _ => {}
    }
}

/// One training step on `batch`: forward, loss, backward, AdamW at `rate` (weight
/// decay on the weights, not the biases), clipping. Returns the batch's loss.
pub fn step(model: &mut Model, optimiser: &mut AdamW, batch: &BatchTensors, scale: f64, lambda: f64, rate: f64) -> f64 {
    let forward = model.forward(batch);
    let batch_loss = loss(&forward.output, &batch.scores, &batch.results, scale, lambda);
    batch_loss.backward();
    let gradients = model.gradients(&forward, batch);
    let decayed = model.decayed();
    optimiser.step(&mut model.tensors, &gradients, &decayed, rate);
    model.zero_grad();
    model.clip();
    f64::try_from(&batch_loss).expect("a scalar loss")
}

/// The loss scale fitted to a data set's training positions.
#[derive(Clone, Debug, PartialEq)]
pub struct FittedScale {
    /// The scale in centipawns.
    pub scale: f64,
    /// The positions it was fitted on.
    pub positions: usize,
    /// Chunks refused on the way.
    pub refusals: Vec<Refusal>,
}

/// The scale fitted on the first `limit` training positions of `chunks` (about:
/// whole batches are taken); `None` when they hold no position.
pub fn fit_data_scale(chunks: &[PathBuf], loader: &LoaderSettings, seed: u64, limit: usize) -> Option<FittedScale> {
    let pass = Pass::start(chunks, Part::Training, loader, seed);
    let (mut scores, mut results) = (Vec::new(), Vec::new());
    for batch in pass.batches.iter() {
        scores.extend(batch.scores);
        results.extend(batch.results);
        if scores.len() >= limit {
            break;
        }
    }
    let refusals = pass.refusals();
    (!scores.is_empty()).then(|| FittedScale { scale: fit_scale(&scores, &results), positions: scores.len(), refusals })
}

/// The mean loss over the validation batches.
pub fn validation_loss(model: &Model, batches: &[BatchTensors], scale: f64, lambda: f64) -> f64 {
    tch::no_grad(|| {
        let (mut sum, mut count) = (0.0, 0usize);
        for batch in batches {
            let n = batch.scores.size()[0] as usize;
            let value = f64::try_from(loss(&model.forward(batch).output, &batch.scores, &batch.results, scale, lambda))
                .expect("a scalar loss");
            sum += value * n as f64;
            count += n;
        }
        sum / count.max(1) as f64
    })
}

/// `losses.svg` in `dir`, drawn from `log`.
fn write_curves(dir: &Path, log: &[serde_json::Value]) -> Result<(), TrainError> {
    let path = dir.join("losses.svg");
    std::fs::write(&path, crate::curves::losses_svg(log)).map_err(|source| TrainError::Log { path, source })
}

fn append_log(path: &Path, entry: &serde_json::Value) -> Result<(), TrainError> {
    let fail = |source| TrainError::Log { path: path.to_path_buf(), source };
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(fail)?;
    writeln!(file, "{entry}").map_err(fail)
}

fn bar(shown: bool, epoch: usize, epochs: usize, length: u64) -> ProgressBar {
    if !shown {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(length);
    let style = ProgressStyle::with_template("epoch {prefix} [{bar:30}] {pos}/{len} batches  {msg}  {elapsed}")
        .expect("a valid template")
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_prefix(format!("{}/{epochs}", epoch + 1));
    bar
}

fn dedup(refusals: &mut Vec<Refusal>) {
    let mut seen = std::collections::BTreeSet::new();
    refusals.retain(|r| seen.insert(r.chunk.clone()));
}

/// The model's evaluation of each position of `batch`, in centipawns.
pub fn predict(model: &Model, batch: &Batch, device: Device) -> Vec<f32> {
    tch::no_grad(|| {
        let output: Tensor = model.forward(&BatchTensors::of(batch, device)).output.to_device(Device::Cpu);
        Vec::<f32>::try_from(output).expect("a float tensor converts")
    })
}
