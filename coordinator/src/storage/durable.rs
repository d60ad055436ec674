//! New files and folders that survive a crash. Syncing a file keeps its bytes, not its
//! name: the entry a create, a rename or a `mkdir` makes lives in the parent directory,
//! which must be synced too before the file or folder may be relied on (fsync(2),
//! "Notes"). Every place that makes a name in the data directory goes through here.

use std::io::Write as _;
use std::path::Path;

/// Syncs the directory `dir`: the names made in it so far survive a crash.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// The directory holding `path` (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Creates `dir` and its missing parents, each synced into its own parent before
/// anything is made in it.
pub fn create_dir_all(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    create_dir_all(parent(dir))?;
    match std::fs::create_dir(dir) {
        // Made by another caller at the same moment: synced here too, since that
        // caller may not have synced it yet.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
        result => result?,
    }
    sync_dir(parent(dir))
}

/// Renames `from` to `to` and syncs `to`'s directory. `from` must be synced already.
pub fn rename(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::rename(from, to)?;
    sync_dir(parent(to))
}

/// Writes `bytes` to `path` (its folders made if missing) through a temporary file,
/// synced, then renamed: the file is whole or absent after a crash.
pub fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    create_dir_all(parent(path))?;
    let temp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    rename(&temp, path)
}
