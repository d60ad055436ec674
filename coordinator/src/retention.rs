//! Retention: how long finished jobs' games and training data are kept. A job past its
//! retention keeps its row, counts, results and unit rows (the dashboard still shows
//! it, its SPRT still stands); only its games file or its training chunks go, and
//! reading them says when and why. Uploaded artifacts that no job or net names are
//! collected a grace period after their last upload. The quotas that bound what a
//! submitter stores are checked on its requests ([`crate::api::grpc::quotas`]).
//!
//! Ages are read on the wall clock, the one clock that spans restarts: a clock set
//! forward ages finished jobs' data and unnamed uploads early, one set back keeps them
//! longer. What a rule keeps is kept whatever the clock: every job's row, counts and
//! results, running jobs' data, and the artifacts a job or net names.

use crate::api::grpc::Shared;
use crate::scheduler::ScheduleError;
use crate::storage::{StorageError, now_ms};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a retention pass stopped.
#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("collecting an artifact: {0}")]
    Artifact(String),
    #[error("removing {}: {source}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Removes the stored games and training data of finished jobs past their retention
/// (as of `now_ms`); returns the jobs whose data it removed. A job is marked first and
/// its files deleted after, and files of jobs marked before are deleted again if still
/// there, so a crash between the two leaves nothing behind for good.
pub async fn remove_expired_data(shared: &Shared, now_ms: i64) -> Result<Vec<u64>, RetentionError> {
    let config = &shared.scheduler.config;
    let before = |keep: Option<Duration>| keep.map_or(0, |keep| now_ms - keep.as_millis() as i64);
    let (games_before, data_before) = (before(config.keep_games), before(config.keep_training_data));
    let mut removed = Vec::new();
    if games_before > 0 || data_before > 0 {
        for id in shared.storage.jobs_past_retention(games_before, data_before).await? {
            shared.scheduler.mark_data_removed(id as u64, now_ms).await?;
            removed.push(id as u64);
        }
    }
    for id in shared.storage.jobs_with_data_removed().await? {
        delete_job_files(&shared.data_dir, id)?;
    }
    Ok(removed)
}

/// Removes the artifacts last uploaded before the grace period (as of `now_ms`) that no
/// job's request, no net of the registry and not the default book name; returns their hashes. The index row
/// goes first, then the file: a crash between leaves a file no one can name, which an
/// upload of the same bytes replaces.
pub async fn collect_artifacts(shared: &Shared, now_ms: i64) -> Result<Vec<String>, RetentionError> {
    let Some(grace) = shared.scheduler.config.keep_unreferenced_artifacts else { return Ok(Vec::new()) };
    let candidates = shared.storage.artifacts_uploaded_before(now_ms - grace.as_millis() as i64).await?;
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let mut named = shared.scheduler.artifacts_named_by_jobs();
    named.extend(shared.nets.list("", &shared.scheduler).into_iter().filter_map(|n| n.artifact).map(|a| a.sha256));
    named.extend(shared.default_book.lock().await.as_ref().map(|book| book.sha256.clone()));
    named.extend(shared.scheduler.release().map(|release| release.sha256));
    let mut collected = Vec::new();
    for sha256 in candidates.into_iter().filter(|sha256| !named.contains(sha256)) {
        shared.scheduler.remove_artifact(&sha256).await?;
        shared.artifacts.remove(&sha256).await.map_err(|e| RetentionError::Artifact(e.to_string()))?;
        collected.push(sha256);
    }
    Ok(collected)
}

/// Deletes job `id`'s games file and chunk directory, if present.
fn delete_job_files(data_dir: &Path, id: i64) -> Result<(), RetentionError> {
    use crate::storage::layout::{CHUNKS_DIR, GAMES_DIR, VERIFICATION_DIR};
    let games = data_dir.join(GAMES_DIR).join(format!("{id}.pgn"));
    let chunks = data_dir.join(CHUNKS_DIR).join(id.to_string());
    let reports = data_dir.join(VERIFICATION_DIR).join(id.to_string());
    let removed = [
        (&games, std::fs::remove_file(&games)),
        (&chunks, std::fs::remove_dir_all(&chunks)),
        (&reports, std::fs::remove_dir_all(&reports)),
    ];
    for (path, removed) in removed {
        match removed {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                return Err(RetentionError::Remove { path: path.clone(), source });
            }
            _ => {}
        }
    }
    Ok(())
}

/// Runs [`remove_expired_data`] now and then every `period`, while the coordinator serves.
pub async fn keep_removing(shared: Shared, period: Duration) {
    loop {
        match remove_expired_data(&shared, now_ms()).await {
            Ok(removed) if !removed.is_empty() => {
                tracing::info!("retention: removed the stored data of jobs {removed:?}")
            }
            Ok(_) => {}
            Err(error) => tracing::warn!("retention: {error}"),
        }
        match collect_artifacts(&shared, now_ms()).await {
            Ok(collected) if !collected.is_empty() => {
                tracing::info!("retention: collected {} artifacts no job or net names", collected.len())
            }
            Ok(_) => {}
            Err(error) => tracing::warn!("retention: {error}"),
        }
        tokio::time::sleep(period).await;
    }
}
