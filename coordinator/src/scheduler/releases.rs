//! The worker release the fleet must run (#56 part 4): published by an admin, kept
//! across restarts, and required of every worker that asks for a lease. A worker of
//! another version is leased nothing and told the release instead; it updates itself
//! (the worker's `fleet::update`) and registers again with the new version.

use crate::scheduler::{ScheduleError, Scheduler};
use crate::storage::changes::Change;
use crate::storage::now_ms;
use xq_proto::v1;

impl Scheduler {
    /// The release `worker` must update to before it gets work: the published one, when
    /// the version the worker registered with is another. A worker whose registration
    /// the coordinator does not hold is asked to register first (by the lease itself),
    /// not to update: its version is unknown.
    pub fn required_release(&self, worker: u64) -> Option<v1::WorkerRelease> {
        let state = self.lock();
        let release = state.release.as_ref()?;
        let registered = state.workers.get(&worker).filter(|w| w.capabilities.cores > 0)?;
        (registered.capabilities.version != release.version).then(|| release.clone())
    }

    /// The release published last, if any.
    pub fn release(&self) -> Option<v1::WorkerRelease> {
        self.lock().release.clone()
    }

    /// Publishes `release` (already checked: its bundle stored, its version the
    /// bundle's): stored, then required of every worker.
    pub async fn publish_release(&self, mut release: v1::WorkerRelease) -> Result<v1::WorkerRelease, ScheduleError> {
        release.published_ms = now_ms().max(self.release().map_or(0, |last| last.published_ms + 1));
        self.writer.write(Change::WorkerRelease(release.clone())).await?;
        self.lock().release = Some(release.clone());
        Ok(release)
    }
}
