//! Content-addressed files: engines, books and nets under `<data>/artifacts/<sha256>`.
//! An upload is hashed while it is written to a temporary file, sealed (synced, its
//! hash known) and checked there, and only then renamed into place: a file under its
//! hash always holds exactly those bytes, and an upload refused by its checks (a net
//! that does not read, a book that does not parse) leaves nothing on disk.

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
        crate::storage::durable::create_dir_all(&dir.join("tmp"))?;
        Ok(ArtifactStore { dir: dir.to_owned() })
    }

    /// Where the artifact with this hash lives.
    pub fn path(&self, sha256: &str) -> Result<PathBuf, ArtifactError> {
        check_hash(sha256)?;
        Ok(self.dir.join(sha256))
    }

    /// Starts an upload.
    pub async fn begin(&self) -> Result<Upload, ArtifactError> {
        let temp = self.dir.join("tmp").join(crate::access::tokens::new_token());
        let file = tokio::fs::File::create(&temp).await?;
        Ok(Upload { file, temp, hasher: Sha256::new(), size: 0 })
    }

    /// Seals an upload: its bytes synced and its hash known, still under its temporary
    /// name, where it can be checked before it is kept.
    pub async fn seal(&self, mut upload: Upload) -> Result<Sealed, ArtifactError> {
        upload.file.flush().await?;
        upload.file.sync_all().await?;
        let sha256 = hex::encode(upload.hasher.clone().finalize());
        Ok(Sealed { sha256, size: upload.size, upload })
    }

    /// Keeps a sealed upload under its hash; returns its hash and size.
    pub async fn keep(&self, sealed: Sealed) -> Result<(String, u64), ArtifactError> {
        let (temp, kept) = (sealed.upload.temp.clone(), self.dir.join(&sealed.sha256));
        tokio::task::spawn_blocking(move || crate::storage::durable::rename(&temp, &kept))
            .await
            .map_err(std::io::Error::other)??;
        Ok((sealed.sha256.clone(), sealed.size))
    }

    /// Removes the artifact with this hash (collected: no job or net names it); an
    /// artifact already gone is no error.
    pub async fn remove(&self, sha256: &str) -> Result<(), ArtifactError> {
        match tokio::fs::remove_file(self.path(sha256)?).await {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error.into()),
            _ => Ok(()),
        }
    }
}

/// An upload whose bytes are all written and synced, not yet kept: dropped (refused by
/// a check), it leaves nothing behind.
pub struct Sealed {
    pub sha256: String,
    pub size: u64,
    upload: Upload,
}

impl Sealed {
    /// Where its bytes are while they are checked.
    pub fn path(&self) -> &Path {
        &self.upload.temp
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

/// An upload that was not kept (refused, failed, or its client gone, which drops the
/// request's future with it) leaves no temporary file behind; a kept one's was renamed
/// away.
impl Drop for Upload {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.temp);
    }
}
