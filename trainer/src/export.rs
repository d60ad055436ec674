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

/// The description stored in the net: the trainer and the commit of its code, its
/// settings, a hash of its data, libtorch's threads, the epoch exported (the best on
/// validation) and that epoch's losses. A fixed validation set is described by its
/// count of chunks and a hash of their names, not listed: a loop's lists every chunk of
/// its first generation, which made each net carry kilobytes of this machine's paths.
pub fn description(progress: &Progress) -> String {
    let exported = progress.best.map_or(progress.epoch, |(epoch, _)| epoch);
    let entry = progress.log.iter().find(|entry| entry.get("epoch").and_then(|e| e.as_u64()) == Some(exported as u64));
    let field = |name: &str| entry.and_then(|entry| entry.get(name)).cloned().unwrap_or(serde_json::Value::Null);
    serde_json::json!({
        "trainer": concat!("xq-trainer ", env!("CARGO_PKG_VERSION")),
        "commit": env!("XQ_TRAINER_COMMIT"),
        "settings": described_settings(&progress.settings),
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

/// `settings` with a fixed validation set's paths replaced by their count and the
/// SHA-256 of their file names, in order.
fn described_settings(settings: &serde_json::Value) -> serde_json::Value {
    use sha2::{Digest, Sha256};
    let mut settings = settings.clone();
    if let Some(paths) = settings.get("fixed_validation").and_then(|v| v.as_array()).cloned() {
        let mut hasher = Sha256::new();
        for path in &paths {
            let path = path.as_str().unwrap_or_default();
            let name = path.rsplit('/').next().unwrap_or(path);
            hasher.update((name.len() as u64).to_le_bytes());
            hasher.update(name.as_bytes());
        }
        let names: String = hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect();
        settings["fixed_validation"] = serde_json::json!({"chunks": paths.len(), "names_sha256": names});
    }
    settings
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::factorised_and_summed;

    #[test]
    fn a_fixed_validation_set_is_described_by_its_count_and_names_not_its_paths() {
        let settings = |dir: &str| serde_json::json!({"seed": 1, "fixed_validation": [format!("{dir}/job1-unit0.xqc"), format!("{dir}/job1-unit1.xqc")]});
        let here = described_settings(&settings("/work/exp/gen2/data/job1"));
        assert_eq!(here["seed"], 1);
        assert_eq!(here["fixed_validation"]["chunks"], 2);
        assert!(!here.to_string().contains("/work/"), "{here}");
        assert_eq!(here, described_settings(&settings("/elsewhere")), "the same chunks on another machine");
        let other = serde_json::json!({"seed": 1, "fixed_validation": ["a/job1-unit1.xqc", "a/job1-unit0.xqc"]});
        assert_ne!(described_settings(&other), here, "another order, another set");
        let none = serde_json::json!({"seed": 1});
        assert_eq!(described_settings(&none), none);
    }

    #[test]
    fn a_factorised_model_exports_the_net_of_its_summed_weights() {
        let (factorised, summed) = factorised_and_summed(8);
        let net = |model: &Model| network(model, "test".to_owned()).unwrap().to_bytes();
        assert_eq!(net(&factorised), net(&summed), "bit for bit");
        assert!(factorised.quantise().unwrap() == factorised.composed().quantise().unwrap());
    }
}
