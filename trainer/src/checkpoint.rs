//! Checkpoints: the model (a factorised model's factor included), the optimiser's
//! state and the run's progress in one safetensors file, written to a temporary name,
//! flushed to disk and then renamed, so that a kill or a full disk leaves the previous
//! checkpoint whole, never half of a new one.

use std::path::{Path, PathBuf};

use tch::{Device, Kind, Tensor};

use crate::model::{FACTOR, Model, NAMES, is_parameter};
use crate::optim::AdamW;

/// Where a run stands, stored beside the tensors.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    /// Epochs finished.
    pub epoch: usize,
    /// Batches of the current epoch already trained on.
    pub batch: usize,
    /// The loss's scale in centipawns.
    pub scale: f64,
    /// The run's settings, as JSON.
    pub settings: serde_json::Value,
    /// The log so far, one entry per finished epoch.
    pub log: Vec<serde_json::Value>,
    /// The SHA-256 of the run's chunks, in order (their names and contents): a resumed
    /// run must train on the same data. Absent in checkpoints written before it was kept.
    #[serde(default)]
    pub data_sha256: Option<String>,
    /// The epoch with the lowest validation loss so far, and that loss: the net
    /// exported is that epoch's (`best.safetensors` holds its model).
    #[serde(default)]
    pub best: Option<(usize, f64)>,
}

/// A checkpoint that could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Writing failed (the previous checkpoint, if any, is intact).
    #[error("cannot write the checkpoint {path}: {reason}; the previous checkpoint is intact")]
    Write {
        /// The checkpoint's path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Reading failed.
    #[error("cannot read the checkpoint {path}: {reason}")]
    Read {
        /// The checkpoint's path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// What a checkpoint holds.
#[derive(Debug)]
pub struct Checkpoint {
    /// The model.
    pub model: Model,
    /// The optimiser.
    pub optimiser: AdamW,
    /// The run's progress.
    pub progress: Progress,
}

/// Writes `model`, `optimiser` and `progress` to `path`.
pub fn save(path: &Path, model: &Model, optimiser: &AdamW, progress: &Progress) -> Result<(), CheckpointError> {
    let fail = |reason: String| CheckpointError::Write { path: path.to_path_buf(), reason };
    let meta = serde_json::to_vec(progress).map_err(|e| fail(e.to_string()))?;
    let cpu = |t: &Tensor| t.detach().to_device(Device::Cpu).contiguous();
    let mut tensors: Vec<(String, Tensor)> = Vec::new();
    for (i, (name, tensor)) in model.named().enumerate() {
        tensors.push((name.to_owned(), cpu(tensor)));
        tensors.push((format!("adam.first.{name}"), cpu(&optimiser.first[i])));
        tensors.push((format!("adam.second.{name}"), cpu(&optimiser.second[i])));
    }
    tensors.push(("adam.steps".to_owned(), Tensor::from_slice(&[optimiser.steps])));
    tensors.push(("adam.weight_decay".to_owned(), Tensor::from_slice(&[optimiser.weight_decay])));
    tensors.push(("meta".to_owned(), Tensor::from_slice(&meta)));
    let temporary = path.with_extension("tmp");
    let written = Tensor::write_safetensors(&tensors, &temporary)
        .map_err(|e| e.to_string())
        .and_then(|()| std::fs::File::open(&temporary).and_then(|f| f.sync_all()).map_err(|e| e.to_string()))
        .and_then(|()| std::fs::rename(&temporary, path).map_err(|e| e.to_string()));
    if let Err(reason) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(fail(reason));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| fail(e.to_string()))?;
    }
    Ok(())
}

/// Reads the checkpoint at `path` onto `device`.
pub fn load(path: &Path, device: Device) -> Result<Checkpoint, CheckpointError> {
    let fail = |reason: String| CheckpointError::Read { path: path.to_path_buf(), reason };
    let mut named = Tensor::read_safetensors(path).map_err(|e| e.to_string()).map_err(fail)?;
    let factorised = named.iter().any(|(name, _)| name == FACTOR);
    let mut take = |name: &str| -> Result<Tensor, CheckpointError> {
        let at = named.iter().position(|(n, _)| n == name).ok_or_else(|| fail(format!("no tensor {name}")))?;
        Ok(named.swap_remove(at).1)
    };
    let meta = Vec::<u8>::try_from(take("meta")?).map_err(|e| fail(e.to_string()))?;
    let progress: Progress = serde_json::from_slice(&meta).map_err(|e| fail(format!("its progress record: {e}")))?;
    let steps = i64::try_from(take("adam.steps")?).map_err(|e| fail(e.to_string()))?;
    let weight_decay = f64::try_from(take("adam.weight_decay")?).map_err(|e| fail(e.to_string()))?;
    let mut parameters = Vec::new();
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for name in NAMES.into_iter().chain(factorised.then_some(FACTOR)) {
        parameters.push((name.to_owned(), take(name)?));
        first.push(take(&format!("adam.first.{name}"))?.to_kind(Kind::Float).to_device(device));
        second.push(take(&format!("adam.second.{name}"))?.to_kind(Kind::Float).to_device(device));
    }
    let model = Model::from_named(parameters, device).map_err(fail)?;
    if first.iter().zip(&model.tensors).any(|(m, p)| m.size() != p.size()) {
        return Err(fail("the optimiser's moments do not match the model's shapes".to_owned()));
    }
    Ok(Checkpoint { model, optimiser: AdamW { first, second, steps, weight_decay }, progress })
}

/// The model alone from the checkpoint at `path`, to start a new run from it; `path`
/// may also be an engine net (`XQNN`), read back into floats, when its checkpoint is
/// not at hand (the embedded net, a net made on another machine).
pub fn load_model(path: &Path, device: Device) -> Result<Model, CheckpointError> {
    use std::io::Read;
    let fail = |reason: String| CheckpointError::Read { path: path.to_path_buf(), reason };
    // A file that cannot be read here is not taken for an engine net: the safetensors
    // reader below then names the file and why it failed.
    let mut start = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut file| file.read_exact(&mut start));
    if read.is_ok() && is_engine_net(&start) {
        let net = xq_engine::xiangqi::nnue::Network::load(path).map_err(|e| fail(e.to_string()))?;
        return Ok(Model::from_parameters(&net.parameters(), device));
    }
    let named = Tensor::read_safetensors(path).map_err(|e| fail(e.to_string()))?;
    let parameters = named.into_iter().filter(|(name, _)| is_parameter(name)).collect();
    Model::from_named(parameters, device).map_err(fail)
}

/// Whether a file's first bytes are the engine net's magic (`XQNN`) rather than the
/// start of a safetensors header; each caller passes the bytes it has already read.
fn is_engine_net(start: &[u8]) -> bool {
    start.starts_with(&xq_engine::xiangqi::nnue::format::MAGIC)
}

/// The most a safetensors header may take: far above a checkpoint's (a few kilobytes),
/// far below what a corrupt length would make [`holds_factor`] allocate.
const MAX_HEADER: u64 = 1 << 24;

/// Whether the model at `path` (a checkpoint, or an engine net, which never has one)
/// holds a factor, read from the safetensors header alone: deciding how a run goes
/// should not read its tensors, which the run then reads again.
pub fn holds_factor(path: &Path) -> Result<bool, CheckpointError> {
    use std::io::Read;
    let fail = |reason: String| CheckpointError::Read { path: path.to_path_buf(), reason };
    let mut file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let mut start = [0u8; 8];
    file.read_exact(&mut start).map_err(|e| fail(format!("its header: {e}")))?;
    if is_engine_net(&start) {
        return Ok(false);
    }
    let length = u64::from_le_bytes(start);
    if length > MAX_HEADER {
        return Err(fail(format!("its header claims {length} bytes: not a safetensors file")));
    }
    let mut header = Vec::new();
    file.take(length).read_to_end(&mut header).map_err(|e| fail(format!("its header: {e}")))?;
    if header.len() as u64 != length {
        return Err(fail(format!("its header is cut short ({} of {length} bytes)", header.len())));
    }
    let names: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| fail(format!("its header: {e}")))?;
    Ok(names.contains_key(FACTOR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_factorised_models_checkpoint_keeps_its_factor_and_its_moments() {
        let model = Model::new(Device::Cpu, 3).factorised();
        tch::no_grad(|| {
            let _ = model.tensors[NAMES.len()].shallow_clone().fill_(0.25);
        });
        let mut optimiser = AdamW::new(&model.tensors, 1e-4);
        optimiser.steps = 5;
        let _ = optimiser.first[NAMES.len()].fill_(0.5);
        let progress = Progress {
            epoch: 1,
            batch: 2,
            scale: 300.0,
            settings: serde_json::json!({"factorise": true}),
            log: Vec::new(),
            data_sha256: None,
            best: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint.safetensors");
        save(&path, &model, &optimiser, &progress).unwrap();

        let loaded = load(&path, Device::Cpu).unwrap();
        assert!(loaded.model.is_factorised());
        let same = |a: &Tensor, b: &Tensor| a.size() == b.size() && bool::try_from(a.eq_tensor(b).all()).unwrap();
        for ((name, saved), (_, read)) in model.named().zip(loaded.model.named()) {
            assert!(same(saved, read), "{name}");
        }
        assert!(same(&loaded.optimiser.first[NAMES.len()], &optimiser.first[NAMES.len()]), "the factor's moment");
        assert_eq!((loaded.optimiser.steps, &loaded.progress), (5, &progress));
        let alone = load_model(&path, Device::Cpu).unwrap();
        assert!(same(&alone.tensors[NAMES.len()], &model.tensors[NAMES.len()]), "a run started from it has it too");
        assert!(holds_factor(&path).unwrap(), "its header names the factor");
        save(&path, &model.composed(), &AdamW::new(&model.composed().tensors, 1e-4), &progress).unwrap();
        assert!(!holds_factor(&path).unwrap(), "a composed model's header does not");
    }

    #[test]
    fn a_file_that_is_not_a_checkpoint_is_refused_by_name_not_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.safetensors");
        let cases: [(&[u8], &str); 4] = [
            (b"abc", "its header"),
            (&u64::MAX.to_le_bytes(), "not a safetensors file"),
            (&[20, 0, 0, 0, 0, 0, 0, 0, b'{'], "cut short (1 of 20 bytes)"),
            (&[2, 0, 0, 0, 0, 0, 0, 0, b'[', b']'], "its header"),
        ];
        for (bytes, expected) in cases {
            std::fs::write(&path, bytes).unwrap();
            let error = holds_factor(&path).unwrap_err().to_string();
            assert!(error.contains("bad.safetensors") && error.contains(expected), "{error}");
        }
    }
}
