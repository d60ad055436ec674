//! The data directory's free space. Below a reserve the coordinator takes no new work
//! (leases) and no uploads, with a status saying so, while reports of work already
//! leased are still stored from the reserve: a full disk stops the fleet before a
//! write can fail halfway.

use std::path::Path;

/// Bytes free to unprivileged writers on the filesystem holding `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let stats = rustix::fs::statvfs(dir)?;
    Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
}

/// Whether new work may start: `Err` names the free space and the reserve.
pub fn check_reserve(dir: &Path, reserve_bytes: u64) -> Result<(), String> {
    if reserve_bytes == 0 {
        return Ok(());
    }
    let free = free_bytes(dir).map_err(|e| format!("the data directory's free space: {e}"))?;
    if free < reserve_bytes {
        return Err(format!(
            "the coordinator's disk has {} MB free, below its reserve of {} MB: no new work or uploads until space \
             is freed",
            free >> 20,
            reserve_bytes >> 20
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_measured_against_the_filesystem() {
        let dir = std::env::temp_dir();
        let free = free_bytes(&dir).unwrap();
        assert!(free > 0);
        assert_eq!(check_reserve(&dir, 0), Ok(()));
        assert_eq!(check_reserve(&dir, 1), Ok(()));
        let refused = check_reserve(&dir, u64::MAX).unwrap_err();
        assert!(refused.contains(&format!("{} MB free", free >> 20)), "{refused}");
        assert!(check_reserve(Path::new("/no/such/dir"), 1).unwrap_err().starts_with("the data directory"));
    }
}
