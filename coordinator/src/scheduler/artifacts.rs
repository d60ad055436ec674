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
        state.jobs.values().flat_map(|job| hashes_in_spec(&job.row.spec)).collect()
    }

    /// The jobs whose stored requests name each artifact, in the order of their ids.
    pub fn jobs_naming_artifacts(&self) -> std::collections::HashMap<String, Vec<u64>> {
        let state = self.lock();
        let mut naming: std::collections::HashMap<String, Vec<u64>> = std::collections::HashMap::new();
        for (&id, job) in &state.jobs {
            for sha256 in hashes_in_spec(&job.row.spec) {
                let jobs = naming.entry(sha256).or_default();
                if jobs.last() != Some(&id) {
                    jobs.push(id);
                }
            }
        }
        naming
    }
}

/// The artifact hashes in a job's stored request (hex-encoded protobuf bytes).
fn hashes_in_spec(spec: &str) -> Vec<String> {
    let bytes = hex::decode(spec).unwrap_or_default();
    bytes
        .split(|b| !(b.is_ascii_digit() || (b'a'..=b'f').contains(b)))
        .filter(|run| run.len() >= 64)
        // A hash in the protobuf is a string field of 64 digits after its length byte
        // (64, '@', not a digit); the next field's tag byte may read as a digit and
        // lengthen the run, never its start.
        .map(|run| String::from_utf8_lossy(&run[..64]).into_owned())
        .collect()
}
