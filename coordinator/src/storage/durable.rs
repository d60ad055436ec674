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
/// synced, then renamed: the file is whole or absent after a crash. Each write has a
/// temporary name of its own, so that two writes of one path at once (a request and its
/// retry) never write into one file; a write that fails removes its temporary file
/// (review N18: one fixed `.tmp` name was shared, and a full disk left it behind).
pub fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    create_dir_all(parent(path))?;
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = path.with_extension(format!("{}-{write}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_of_one_path_at_once_each_land_whole_and_leave_nothing_behind() {
        let dir = std::env::temp_dir().join(format!("xq-durable-{}", std::process::id()));
        let path = dir.join("unit.bin");
        let payloads: Vec<Vec<u8>> = (0..8u8).map(|n| vec![n; 64 << 10]).collect();
        std::thread::scope(|scope| {
            for payload in &payloads {
                let path = &path;
                scope.spawn(move || {
                    for _ in 0..20 {
                        write_file(path, payload).expect("each write lands");
                    }
                });
            }
        });
        let kept = std::fs::read(&path).unwrap();
        assert!(payloads.contains(&kept), "a whole payload, not a mix of two");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["unit.bin"], "no temporary file left");
        // A write that cannot land (its path is a folder) leaves no temporary file.
        let folder = dir.join("folder");
        std::fs::create_dir(&folder).unwrap();
        assert!(write_file(&folder, b"x").is_err());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "unit.bin and the folder");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
