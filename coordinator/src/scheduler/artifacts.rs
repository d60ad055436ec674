//! The artifacts jobs name: indexed when uploaded, removed when collected.

use crate::scheduler::{ScheduleError, Scheduler};
use crate::storage::changes::Change;

impl Scheduler {
    /// Indexes a stored artifact.
    pub async fn index_artifact(
        &self,
        sha256: &str,
        (name, kind, size): (&str, &str, u64),
        uploader: &str,
    ) -> Result<(), ScheduleError> {
        let change = Change::Artifact {
            sha256: sha256.to_owned(),
            name: name.to_owned(),
            kind: kind.to_owned(),
            size: size as i64,
            uploader: uploader.to_owned(),
        };
        self.writer.write(change).await?;
        Ok(())
    }

    /// Forgets an artifact (collected: no job or net names it).
    pub async fn remove_artifact(&self, sha256: &str) -> Result<(), ScheduleError> {
        self.writer.write(Change::ArtifactRemoved { sha256: sha256.to_owned() }).await?;
        Ok(())
    }

    /// Every artifact hash a job's stored request names (engines, nets, books, PGNs),
    /// read off the stored bytes themselves, so that a job of any kind (one this
    /// version cannot read back too) keeps what it names.
    pub fn artifacts_named_by_jobs(&self) -> std::collections::HashSet<String> {
        let state = self.lock();
        let mut named = std::collections::HashSet::new();
        for job in state.jobs.values() {
            let bytes = hex::decode(&job.row.spec).unwrap_or_default();
            for run in bytes.split(|b| !(b.is_ascii_digit() || (b'a'..=b'f').contains(b))) {
                if run.len() >= 64 {
                    // A hash in the protobuf is a string field of 64 digits after its
                    // length byte (64, '@', not a digit); the next field's tag byte may
                    // read as a digit and lengthen the run, never its start.
                    named.insert(String::from_utf8_lossy(&run[..64]).into_owned());
                }
            }
        }
        named
    }
}
