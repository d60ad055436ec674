//! Export: the model quantised to the engine's integers and written as an `XQNN` net
//! file that records how it was trained in its description. The file is written to a
//! temporary name and renamed only once the engine's own reader has accepted it.

use std::path::{Path, PathBuf};

use xq_engine::xiangqi::nnue::Network;

use crate::checkpoint::Progress;
use crate::model::{Model, OverflowError};

/// Why a net was not written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A layer's weights do not fit the engine's integers.
    #[error("no net written: {0}")]
    Overflow(#[from] OverflowError),
    /// The file could not be written, or the engine's reader refused it.
    #[error("cannot write the net {path}: {reason}")]
    Write {
        /// The net's path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// The description stored in the net: the trainer, its settings and its losses.
/// The description stored in the net: the trainer and the commit of its code, its
/// settings, a hash of its data, libtorch's threads, the epoch exported (the best on
/// validation) and that epoch's losses.
pub fn description(progress: &Progress) -> String {
    let exported = progress.best.map_or(progress.epoch, |(epoch, _)| epoch);
    let entry = progress.log.iter().find(|entry| entry.get("epoch").and_then(|e| e.as_u64()) == Some(exported as u64));
    let field = |name: &str| entry.and_then(|entry| entry.get(name)).cloned().unwrap_or(serde_json::Value::Null);
    serde_json::json!({
        "trainer": concat!("xq-trainer ", env!("CARGO_PKG_VERSION")),
        "commit": env!("XQ_TRAINER_COMMIT"),
        "settings": progress.settings,
        "data_sha256": progress.data_sha256,
        "torch_threads": tch::get_num_threads(),
        "epochs": progress.epoch,
        "exported_epoch": exported,
        "scale": progress.scale,
        "train_loss": field("train_loss"),
        "validation_loss": field("validation_loss"),
    })
    .to_string()
}

/// The engine's net for `model`.
pub fn network(model: &Model, description: String) -> Result<Network, OverflowError> {
    let parameters = model.quantise()?;
    Ok(Network::from_parameters(description, parameters).expect("the model has the architecture's shapes"))
}

/// Quantises `model` and writes it to `path`.
pub fn export(model: &Model, progress: &Progress, path: &Path) -> Result<Network, ExportError> {
    let network = network(model, description(progress))?;
    let fail = |reason: String| ExportError::Write { path: path.to_path_buf(), reason };
    let temporary = path.with_extension("tmp");
    let written = network
        .save(&temporary)
        .map_err(|e| e.to_string())
        .and_then(|()| std::fs::File::open(&temporary).and_then(|f| f.sync_all()).map_err(|e| e.to_string()))
        .and_then(|()| Network::load(&temporary).map(drop).map_err(|e| format!("the engine refuses it: {e}")))
        .and_then(|()| std::fs::rename(&temporary, path).map_err(|e| e.to_string()));
    if let Err(reason) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(fail(reason));
    }
    Ok(network)
}
