//! The operator's worker releases: `xq release keygen|pack|publish` (#56 part 4).

use anyhow::Context;
use clap::Subcommand;
use std::path::{Path, PathBuf};
use xq_proto::client::Client;
use xq_proto::release;
use xq_proto::v1;

#[derive(Subcommand)]
pub enum ReleaseCommand {
    /// Makes the operator's signing key (kept in OUT, mode 0600) and prints its public
    /// half, which each worker is given with --release-key.
    Keygen { out: PathBuf },
    /// Packs a release: the worker (stamped with --version) and the engine in a bundle
    /// at OUT, signed with --key into OUT.sig.
    Pack {
        #[arg(long)]
        version: String,
        #[arg(long)]
        worker: PathBuf,
        #[arg(long)]
        engine: PathBuf,
        #[arg(long)]
        key: PathBuf,
        out: PathBuf,
    },
    /// Uploads a packed bundle (with BUNDLE.sig beside it) and requires it of every
    /// worker: a worker of another version updates itself before its next lease.
    Publish { bundle: PathBuf },
}

/// Whether `action` needs no coordinator.
pub fn is_local(action: &ReleaseCommand) -> bool {
    !matches!(action, ReleaseCommand::Publish { .. })
}

fn signature_file(bundle: &Path) -> PathBuf {
    let mut name = bundle.as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}

/// `xq release keygen` and `xq release pack`.
pub fn run_local(action: ReleaseCommand) -> anyhow::Result<()> {
    match action {
        ReleaseCommand::Keygen { out } => {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let key = release::new_key();
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&out)
                .with_context(|| format!("creating {} (an existing key is never overwritten)", out.display()))?;
            writeln!(file, "{}", hex::encode(key.to_bytes())).with_context(|| format!("writing {}", out.display()))?;
            eprintln!("operator key kept in {}; its public half, for each worker's --release-key:", out.display());
            out!("{}", hex::encode(key.verifying_key().to_bytes()));
        }
        ReleaseCommand::Pack { version, worker, engine, key, out } => {
            let key = release::read_signing_key(&key)?;
            let sha256 = release::pack(&version, &worker, &engine, &out)?;
            let signature = release::sign(&key, &version, &sha256);
            let sig = signature_file(&out);
            std::fs::write(&sig, format!("{signature}\n")).with_context(|| format!("writing {}", sig.display()))?;
            out!("release {version}: {} (sha256 {sha256}), signed in {}", out.display(), sig.display());
        }
        ReleaseCommand::Publish { .. } => unreachable!("publishing needs the coordinator"),
    }
    Ok(())
}

/// `xq release publish`.
pub async fn publish(client: &mut Client, bundle: &Path) -> anyhow::Result<()> {
    let sig = signature_file(bundle);
    let signature =
        std::fs::read_to_string(&sig).with_context(|| format!("reading the signature {}", sig.display()))?;
    let manifest = release::read_manifest(bundle)?;
    let bytes = std::fs::read(bundle).with_context(|| format!("reading {}", bundle.display()))?;
    let name = bundle.file_name().map_or_else(|| "release".to_owned(), |n| n.to_string_lossy().into_owned());
    let stored = xq_proto::client::upload_artifact(client, &name, "release", &bytes).await?;
    let request = v1::WorkerRelease {
        version: manifest.version,
        sha256: stored.sha256,
        size: stored.size,
        signature: signature.trim().to_owned(),
        published_ms: 0,
    };
    let published = client.publish_worker_release(request).await?.into_inner();
    out!(
        "release {} published (sha256 {}): workers of other versions update to it",
        published.version,
        published.sha256
    );
    Ok(())
}
