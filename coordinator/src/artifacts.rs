//! Content-addressed files: engines, books and nets under `<data>/artifacts/<sha256>`.
//! An upload is hashed while it is written to a temporary file, then renamed into
//! place, so that a file under its hash always holds exactly those bytes.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

/// The most bytes one artifact may have.
pub const MAX_ARTIFACT_BYTES: u64 = 512 * 1024 * 1024;

/// An artifact cannot be stored or read.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// Reading or writing the file failed.
    #[error("artifact store: {0}")]
    Io(#[from] std::io::Error),
    /// The upload is larger than [`MAX_ARTIFACT_BYTES`].
    #[error("artifact larger than {MAX_ARTIFACT_BYTES} bytes")]
    TooLarge,
    /// Not a SHA-256 in lower-case hex.
    #[error("'{0}' is not a sha256 (64 lower-case hex digits)")]
    BadHash(String),
}

/// Checks that `text` is a SHA-256 in lower-case hex.
pub fn check_hash(text: &str) -> Result<(), ArtifactError> {
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(())
    } else {
        Err(ArtifactError::BadHash(text.chars().take(80).collect()))
    }
}

/// The artifacts directory.
#[derive(Clone, Debug)]
pub struct ArtifactStore {
    dir: PathBuf,
}

/// An upload in progress.
pub struct Upload {
    file: tokio::fs::File,
    temp: PathBuf,
    hasher: Sha256,
    size: u64,
}

impl ArtifactStore {
    /// The store under `dir` (created if missing).
    pub fn open(dir: &Path) -> Result<Self, ArtifactError> {
        std::fs::create_dir_all(dir.join("tmp"))?;
        Ok(ArtifactStore { dir: dir.to_owned() })
    }

    /// Where the artifact with this hash lives.
    pub fn path(&self, sha256: &str) -> Result<PathBuf, ArtifactError> {
        check_hash(sha256)?;
        Ok(self.dir.join(sha256))
    }

    /// Starts an upload.
    pub async fn begin(&self) -> Result<Upload, ArtifactError> {
        let temp = self.dir.join("tmp").join(crate::tokens::new_token());
        let file = tokio::fs::File::create(&temp).await?;
        Ok(Upload { file, temp, hasher: Sha256::new(), size: 0 })
    }

    /// Finishes an upload: returns its hash and size once it is under its hash on disk.
    pub async fn finish(&self, mut upload: Upload) -> Result<(String, u64), ArtifactError> {
        upload.file.flush().await?;
        upload.file.sync_all().await?;
        let sha256 = hex::encode(upload.hasher.clone().finalize());
        tokio::fs::rename(&upload.temp, self.dir.join(&sha256)).await?;
        // The rename itself survives a crash only once the directory is synced.
        tokio::fs::File::open(&self.dir).await?.sync_all().await?;
        Ok((sha256, upload.size))
    }
}

impl Upload {
    /// Adds bytes.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), ArtifactError> {
        self.size += bytes.len() as u64;
        if self.size > MAX_ARTIFACT_BYTES {
            return Err(ArtifactError::TooLarge);
        }
        self.hasher.update(bytes);
        self.file.write_all(bytes).await?;
        Ok(())
    }
}

/// An upload that did not finish (refused, failed, or its client gone, which drops the
/// request's future with it) leaves no temporary file behind; a finished one's was
/// renamed away.
impl Drop for Upload {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.temp);
    }
}
