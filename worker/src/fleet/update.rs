//! The worker updating itself (#56 part 4). The coordinator answers a lease request
//! with the release it requires when this worker registered with another version; the
//! worker has no lease then (it works one at a time, so whatever it held is finished
//! or returned). It downloads the bundle by hash, checks the hash and the operator's
//! signature with the public key it was given (`--release-key`), unpacks it beside its
//! own program, checks that the worker in it is stamped with the release's version,
//! moves the engine and then itself into place (each a rename, so each file is whole,
//! old or new; a crash between the two leaves the new engine beside the old worker,
//! which the next start updates again) and starts again as the new program,
//! with the same arguments, in the same process. A release that fails any check
//! changes nothing: the old worker goes on running and says why.

use super::*;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use xq_proto::release;

/// Why a release was not installed.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error(
        "the coordinator requires worker release {0}, and this worker has no --release-key to check a release \
         with: start it with the operator's public key, or update it by hand"
    )]
    NoKey(String),
    #[error("release {version}: {source}")]
    Release {
        version: String,
        #[source]
        source: release::ReleaseError,
    },
    #[error("release {version}: {reason}")]
    Other { version: String, reason: String },
}

/// Where this program is, and the directory its new copy is unpacked into first (on
/// the same file system, so that moving it into place is a rename).
fn places() -> std::io::Result<(PathBuf, PathBuf)> {
    let program = std::env::current_exe()?;
    let dir = program.parent().map(Path::to_owned).unwrap_or_else(|| PathBuf::from("."));
    Ok((program, dir.join(format!(".xq-worker-update-{}", std::process::id()))))
}

/// Installs `wanted` in place of this program and starts it; returns only when the
/// release was refused or could not be installed (nothing changed then) or the new
/// program could not be started.
pub(super) async fn update(client: &Client, settings: &ConnectSettings, wanted: &v1::WorkerRelease) -> UpdateError {
    let version = wanted.version.clone();
    let other = |reason: String| UpdateError::Other { version: version.clone(), reason };
    let Some(key) = &settings.release_key else { return UpdateError::NoKey(version.clone()) };
    // Checked before anything is downloaded: a coordinator cannot make a worker fetch
    // a bundle on the strength of an unsigned claim (and the download stops at the
    // announced size, whose bytes must hash to the signed SHA-256).
    if let Err(source) = release::verify(key, &wanted.version, &wanted.sha256, &wanted.signature) {
        return UpdateError::Release { version, source };
    }
    let bundle = v1::ArtifactRef {
        sha256: wanted.sha256.clone(),
        name: format!("worker release {}", wanted.version),
        size: wanted.size,
    };
    eprintln!("xq-worker: the coordinator requires worker release {version}: downloading it");
    let path = match artifacts::fetch(client, settings, &bundle, false).await {
        Ok(path) => path,
        Err(error) => return other(error.to_string()),
    };
    let (program, staging) = match places() {
        Ok(places) => places,
        Err(error) => return other(format!("finding this program: {error}")),
    };
    let installed = tokio::task::spawn_blocking({
        let (program, staging, version) = (program.clone(), staging.clone(), version.clone());
        move || install(&path, &program, &staging, &version)
    })
    .await;
    let _ = std::fs::remove_dir_all(&staging);
    match installed {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return error,
        Err(error) => return other(error.to_string()),
    }
    eprintln!("xq-worker: release {version} installed at {}: starting it", program.display());
    let arguments: Vec<OsString> = std::env::args_os().skip(1).collect();
    // Only returns if the new program could not be started.
    let error = std::process::Command::new(&program).args(arguments).exec();
    other(format!("starting {}: {error}", program.display()))
}

/// Unpacks the bundle at `bundle` into `staging`, checks it is release `version`, and
/// moves its engine beside `program` and its worker over `program`.
fn install(bundle: &Path, program: &Path, staging: &Path, version: &str) -> Result<(), UpdateError> {
    let failed = |source| UpdateError::Release { version: version.to_owned(), source };
    let other = |reason: String| UpdateError::Other { version: version.to_owned(), reason };
    std::fs::create_dir_all(staging).map_err(|e| other(format!("creating {}: {e}", staging.display())))?;
    let manifest = release::unpack(bundle, staging).map_err(failed)?;
    if manifest.version != version {
        return Err(other(format!("the bundle is version {}, not the one announced", manifest.version)));
    }
    let dir = program.parent().unwrap_or(Path::new("."));
    for (name, target) in [(release::ENGINE, dir.join(release::ENGINE)), (release::WORKER, program.to_owned())] {
        let unpacked = staging.join(name);
        std::fs::rename(&unpacked, &target)
            .map_err(|e| other(format!("moving {} to {}: {e}", unpacked.display(), target.display())))?;
    }
    Ok(())
}
