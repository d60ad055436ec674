//! The worker's cache of a lease's artifacts (engines, nets, books, releases), each
//! fetched by hash and checked before every use, bounded in size (the least recently
//! used go first), and the last book read.

use super::*;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use xq_engine::book::Book;
use xq_engine::variant::Variant;
use xq_proto::failure::FailureKind;
use xq_proto::v1;

/// The artifact's path in the cache, downloaded and checked if missing.
pub(super) async fn fetch(
    client: &Client,
    settings: &ConnectSettings,
    artifact: &v1::ArtifactRef,
    executable: bool,
) -> Result<PathBuf, FleetError> {
    let cache = settings.cache.as_path();
    let sha = &artifact.sha256;
    let damaged = |reason: String| FleetError::Artifact { name: artifact.name.clone(), reason };
    if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(damaged(format!("hash '{sha}' is not a sha256")));
    }
    let path = cache.join("artifacts").join(sha);
    // Hashed again before each use: a cached file changed since (by an unconfined
    // engine, say) is fetched anew rather than run.
    if path.exists() {
        let cached = path.clone();
        let actual = tokio::task::spawn_blocking(move || file_sha256(&cached))
            .await
            .map_err(play_error)?
            .map_err(FleetError::file("hashing the cached artifact", &path))?;
        if &actual == sha {
            // Used now: the last to go when the cache is full. Best effort: a file
            // whose time cannot be set only goes sooner.
            let _ = std::fs::File::open(&path).and_then(|file| file.set_modified(std::time::SystemTime::now()));
            return Ok(path);
        }
        eprintln!("xq-worker: cached artifact {} has changed (hash {actual}): fetching it again", artifact.name);
        std::fs::remove_file(&path).map_err(FleetError::file("removing the changed artifact", &path))?;
    }
    let mut stream = retry("download", || {
        let mut client = client.clone();
        let sha256 = sha.clone();
        async move { client.download(v1::DownloadRequest { sha256 }).await }
    })
    .await
    .map_err(|status| FleetError::refused("download", status))?
    .into_inner();
    let mut bytes = Vec::new();
    while let Some(piece) = stream.message().await.map_err(|status| FleetError::refused("download", status))? {
        bytes.extend_from_slice(&piece.data);
        // No more than announced: what comes past it is not the artifact.
        if artifact.size > 0 && bytes.len() as u64 > artifact.size {
            return Err(damaged(format!("arrived longer than its {} bytes", artifact.size)));
        }
    }
    let actual = hex::encode(Sha256::digest(&bytes));
    if &actual != sha {
        return Err(damaged(format!("arrived with hash {actual}, not {sha}")));
    }
    let temp = path.with_extension("part");
    std::fs::write(&temp, &bytes).map_err(FleetError::file("writing", &temp))?;
    if executable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o755))
            .map_err(FleetError::file("making executable", &temp))?;
    }
    std::fs::rename(&temp, &path).map_err(FleetError::file("storing", &path))?;
    let dir = cache.join("artifacts");
    match evict(&dir, settings.cache_bytes, &path) {
        Ok(removed) if !removed.is_empty() => {
            eprintln!("xq-worker: the cache holds at most {} bytes: removed {removed:?}", settings.cache_bytes)
        }
        Ok(_) => {}
        Err(error) => eprintln!("xq-worker: bounding the cache {}: {error}", dir.display()),
    }
    Ok(path)
}

/// Files used this recently are never removed: a lease fetches its engines, net and
/// book one after the other and starts them after, so each of them was used within
/// this of the lease's last fetch.
const IN_USE: std::time::Duration = std::time::Duration::from_secs(600);

/// Removes the least recently used files of `dir` (by modification time, which each
/// use renews) until it holds at most `limit` bytes, never `keep` (the file just
/// fetched) nor one used within [`IN_USE`] (the rest of the lease's); returns their
/// names.
fn evict(dir: &Path, limit: u64, keep: &Path) -> std::io::Result<Vec<String>> {
    let recent = std::time::SystemTime::now() - IN_USE;
    let mut files = Vec::new();
    let mut total = 0u64;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_file() {
            total += meta.len();
            files.push((meta.modified()?, meta.len(), entry.path()));
        }
    }
    files.sort();
    let mut removed = Vec::new();
    for (used, length, path) in files {
        if total <= limit {
            break;
        }
        if path != keep && used < recent {
            std::fs::remove_file(&path)?;
            total -= length;
            removed.push(path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()));
        }
    }
    Ok(removed)
}

fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// The book `book` as a `variant` book, fetched and read once for the leases that
/// follow: the default book's 100,000 openings took a second to read in a debug build.
pub(super) async fn lease_book(
    client: &Client,
    settings: &ConnectSettings,
    book: &v1::ArtifactRef,
    variant: Variant,
) -> Result<Arc<Book>, FleetError> {
    type LastBook = std::sync::Mutex<Option<(String, Variant, Arc<Book>)>>;
    static LAST: LastBook = std::sync::Mutex::new(None);
    if let Some((sha256, kept_variant, kept)) = LAST.lock().expect("the book's lock is never poisoned").as_ref()
        && *sha256 == book.sha256
        && *kept_variant == variant
    {
        return Ok(kept.clone());
    }
    let path = fetch(client, settings, book, false).await.map_err(failed(FailureKind::Download, ""))?;
    let text = std::fs::read_to_string(&path).map_err(FleetError::file("reading the book", &path))?;
    let parsed = Arc::new(Book::parse(variant, &text, &book.name).map_err(lease_error)?);
    *LAST.lock().expect("the book's lock is never poisoned") = Some((book.sha256.clone(), variant, parsed.clone()));
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn the_cache_keeps_its_bound_by_removing_the_least_recently_used_but_never_the_new_file() {
        let dir = std::env::temp_dir().join(format!("xq-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let start = SystemTime::now() - Duration::from_secs(1000);
        // Four files of 100 bytes, used in the order b, d, a, c (c last).
        for (name, used) in [("a", 3), ("b", 1), ("c", 4), ("d", 2)] {
            let path = dir.join(name);
            std::fs::write(&path, [0u8; 100]).unwrap();
            std::fs::File::open(&path).unwrap().set_modified(start + Duration::from_secs(used)).unwrap();
        }
        let mut removed = evict(&dir, 250, &dir.join("b")).unwrap();
        removed.sort();
        assert_eq!(removed, ["a", "d"], "b is the new file: kept though oldest; d and a go");
        assert!(evict(&dir, 250, &dir.join("b")).unwrap().is_empty(), "within the bound");
        assert_eq!(evict(&dir, 0, &dir.join("c")).unwrap(), ["b"]);
        // One used a moment ago (by the lease that fetches now) stays past the bound.
        std::fs::write(dir.join("e"), [0u8; 100]).unwrap();
        assert!(evict(&dir, 0, &dir.join("c")).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
