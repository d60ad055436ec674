//! Group commit: every durable change goes through one pipeline that gathers the
//! changes waiting for it into one transaction, so that thousands of reports a second
//! cost a few commits (and fsyncs) a second. A caller's change is durable when its
//! reply arrives. A failing batch is retried change by change, so that one bad change
//! fails alone, unless the database itself failed (unreachable, or silent past the
//! write timeout): then the whole batch fails at once, since each retry would wait as
//! long again (2,048 changes at 5 s each held reports for hours), and the next batch
//! tries the database afresh, so that writes resume as soon as it answers. Only the
//! changes that no caller would send again are kept through such a failure instead,
//! their callers waiting, and tried again until the database answers (see
//! [`kept_through_outages`]).
//!
//! The pipeline has two stages, so that the two fsyncs a batch needs overlap instead
//! of adding up: a thread appends a batch's games to their files and syncs them while
//! the database commits the batch before it. It hands each synced batch on in order,
//! so that every unit row committed points at games already on disk. The commits run
//! on a thread and runtime of their own, with their own connection: a transaction
//! makes several round trips to the database, and on the request runtime each would
//! wait behind every request task ready to run, which under load made the batches,
//! and so every report, wait.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;
use crate::storage::apply::apply_all;
use crate::storage::changes::{Applied, Change};
use crate::storage::{Storage, StorageError};

/// The fail point of a committed batch of results whose acknowledgements are not yet
/// sent (the drills' most dangerous crash).
const AFTER_UNITS_COMMIT: &str = "after-units-commit";

/// The fail point of a committed batch holding a self-play chunk whose upload is not
/// yet acknowledged (the worker's resend must count it once).
const AFTER_CHUNK_COMMIT: &str = "after-chunk-commit";

/// The fail point of a committed batch holding a verification report not yet
/// acknowledged (the worker's resend must count it once).
const AFTER_VERIFICATION_COMMIT: &str = "after-verification-commit";

/// The fail point of a committed new lease not yet sent to its worker (its units must
/// not stay held by a lease no worker knows of).
const AFTER_LEASE_COMMIT: &str = "after-lease-commit";

/// The fail point of a committed new tournament whose creation is not yet answered
/// (the client's retry must find it).
const AFTER_TOURNAMENT_COMMIT: &str = "after-tournament-commit";

/// How long changes kept through an outage wait for a batch to go with before they are
/// tried again alone.
const KEPT_RETRY: Duration = Duration::from_millis(500);

/// The most changes in one transaction.
const MAX_BATCH: usize = 2048;

/// The shortest time between the starts of two batches. Under load a batch that
/// starts sooner gathers only the few changes that came while the last one was
/// syncing, and every batch costs the same round trips, fsyncs and database work
/// whatever its size: at 10,000 reports a second the fleet benchmark made about 1,000
/// batches a second of about 10 reports each; waiting out this interval cut a run's
/// PostgreSQL transactions from about 22,600 to 7,600 and the machine's CPU load from
/// 88-90% to 71-74%, for about the same median latency. A change that comes when the
/// writer is idle does not wait.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(3);

type Reply = oneshot::Sender<Result<Applied, String>>;

/// Changes with the callers waiting for them.
type Batch = Vec<(Change, Reply)>;

/// A handle to the writer.
#[derive(Clone, Debug)]
pub struct Writer {
    sender: mpsc::Sender<(Change, Reply)>,
    batches: Arc<AtomicU64>,
}

/// The change was not stored.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The database refused it.
    #[error("{0}")]
    Storage(String),
    /// The writer has stopped (the coordinator is shutting down).
    #[error("the coordinator is shutting down")]
    Closed,
}

impl Writer {
    /// Starts the writer on the database of `storage`, with games files under
    /// `games_dir`. It runs until every handle is dropped and the changes sent have
    /// been stored. Each transaction's time and size go to `metrics`.
    pub async fn start(storage: &Storage, games_dir: PathBuf, metrics: Arc<Metrics>) -> Result<Self, StorageError> {
        let (sender, receiver) = mpsc::channel(MAX_BATCH * 4);
        // One batch synced and waiting while the one before it commits.
        let (synced, to_commit) = mpsc::channel(1);
        let (connected, connecting) = oneshot::channel();
        let storage = storage.clone();
        std::thread::Builder::new()
            .name("xq-writer".to_owned())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
                let runtime = match runtime {
                    Ok(runtime) => runtime,
                    Err(error) => return drop(connected.send(Err(StorageError::WriterThread(error)))),
                };
                runtime.block_on(async move {
                    match storage.for_writes().await {
                        Ok(own) => {
                            let _ = connected.send(Ok(()));
                            commit(own, to_commit, &metrics).await;
                        }
                        Err(error) => drop(connected.send(Err(error))),
                    }
                });
            })
            .map_err(StorageError::WriterThread)?;
        let stopped = || StorageError::WriterThread(std::io::Error::other("the writer's thread stopped"));
        connecting.await.map_err(|_| stopped())??;
        let games = GamesFiles { dir: games_dir, open: HashMap::new() };
        let batches = Arc::new(AtomicU64::new(0));
        let counted = batches.clone();
        std::thread::Builder::new()
            .name("xq-games-writer".to_owned())
            .spawn(move || append_games(games, receiver, synced, &counted))
            .map_err(StorageError::WriterThread)?;
        Ok(Writer { sender, batches })
    }

    /// How many batches the writer has gathered so far.
    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    /// Stores `change`; returns once it is committed.
    pub async fn write(&self, change: Change) -> Result<Applied, WriteError> {
        let (reply, answer) = oneshot::channel();
        self.sender.send((change, reply)).await.map_err(|_| WriteError::Closed)?;
        answer.await.map_err(|_| WriteError::Closed)?.map_err(WriteError::Storage)
    }
}

/// A games file not written for this long is closed: finished jobs' files would
/// otherwise stay open for good, one descriptor each, and a file removed under the
/// retention settings would keep its space while open.
const GAMES_FILE_IDLE: Duration = Duration::from_secs(60);

/// The games of each job, appended to `<dir>/<job>.pgn`.
struct GamesFiles {
    dir: PathBuf,
    /// Each open file, its length, and when it was last written.
    open: HashMap<i64, (File, u64, Instant)>,
}

impl GamesFiles {
    /// Appends the games of the batch's units to their jobs' files and syncs them, so
    /// that every unit row committed afterwards points at bytes on disk. A crash before
    /// the commit leaves unreferenced bytes, which nothing reads.
    fn append(&mut self, batch: &mut Batch) -> std::io::Result<()> {
        let mut touched = Vec::new();
        for (change, _) in batch.iter_mut() {
            let Change::Units { job_id, rows, .. } = change else { continue };
            for row in rows.iter_mut().filter(|r| !r.pgn.is_empty()) {
                let (file, length, used) = match self.open.entry(*job_id) {
                    std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
                    std::collections::hash_map::Entry::Vacant(entry) => {
                        crate::storage::durable::create_dir_all(&self.dir)?;
                        let file = OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(self.dir.join(format!("{job_id}.pgn")))?;
                        let length = file.metadata()?.len();
                        if length == 0 {
                            // Made now (or left empty by a crash): the unit rows about to
                            // point into it need its name to survive a crash too.
                            crate::storage::durable::sync_dir(&self.dir)?;
                        }
                        entry.insert((file, length, Instant::now()))
                    }
                };
                file.write_all(row.pgn.as_bytes())?;
                row.file = format!("{}/{job_id}.pgn", crate::storage::layout::GAMES_DIR);
                row.offset = *length as i64;
                row.length = row.pgn.len() as i64;
                *length += row.pgn.len() as u64;
                *used = Instant::now();
                row.pgn = String::new();
                touched.push(*job_id);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for job in touched {
            self.open[&job].0.sync_data()?;
        }
        self.open.retain(|_, (_, _, used)| used.elapsed() < GAMES_FILE_IDLE);
        Ok(())
    }
}

/// The first stage, on its own thread: gathers the waiting changes into a batch, at
/// most one batch every [`BATCH_INTERVAL`], puts their games on disk, and passes the
/// batch on.
fn append_games(
    mut games: GamesFiles,
    mut receiver: mpsc::Receiver<(Change, Reply)>,
    synced: mpsc::Sender<Batch>,
    batches: &AtomicU64,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut last_start: Option<Instant> = None;
    while receiver.blocking_recv_many(&mut batch, MAX_BATCH) > 0 {
        let wait = last_start.map_or(Duration::ZERO, |start| BATCH_INTERVAL.saturating_sub(start.elapsed()));
        if !wait.is_zero() {
            std::thread::sleep(wait);
            while batch.len() < MAX_BATCH {
                let Ok(change) = receiver.try_recv() else { break };
                batch.push(change);
            }
        }
        last_start = Some(Instant::now());
        batches.fetch_add(1, Ordering::Relaxed);
        if let Err(error) = games.append(&mut batch) {
            // Unit rows must not point at games that are not on disk.
            games.open.clear();
            for (_, reply) in batch.drain(..) {
                let _ = reply.send(Err(format!("writing games: {error}")));
            }
            continue;
        }
        let next = Vec::with_capacity(MAX_BATCH);
        if synced.blocking_send(std::mem::replace(&mut batch, next)).is_err() {
            return;
        }
    }
}

/// The second stage: commits each batch in the order the first stage synced them.
async fn commit(storage: Storage, mut to_commit: mpsc::Receiver<Batch>, metrics: &Metrics) {
    // Changes kept through an outage, first in the next batch.
    let mut kept: Batch = Vec::new();
    loop {
        let next = if kept.is_empty() {
            to_commit.recv().await
        } else {
            tokio::time::timeout(KEPT_RETRY, to_commit.recv()).await.unwrap_or_else(|_| Some(Vec::new()))
        };
        let Some(next) = next else { break };
        let mut batch: Batch = kept.drain(..).chain(next).collect();
        let changes: Vec<&Change> = batch.iter().map(|(change, _)| change).collect();
        let start = Instant::now();
        let applied = apply_all(&storage, &changes).await;
        metrics.commit_seconds.observe(start.elapsed().as_secs_f64());
        metrics.batch_changes.observe(changes.len() as f64);
        match applied {
            Ok(results) => {
                if let Some(point) = crate::fail_point::armed_name()
                    && reaches(point, &changes)
                {
                    crate::fail_point::reached(point);
                }
                for ((_, reply), applied) in batch.drain(..).zip(results) {
                    let _ = reply.send(Ok(applied));
                }
            }
            Err(error) if error.is_unreachable() => {
                let message = error.to_string();
                for (change, reply) in batch.drain(..) {
                    if kept_through_outages(&change) {
                        kept.push((change, reply));
                    } else {
                        let _ = reply.send(Err(message.clone()));
                    }
                }
            }
            Err(error) if batch.len() == 1 => {
                for (_, reply) in batch.drain(..) {
                    let _ = reply.send(Err(error.to_string()));
                }
            }
            Err(_) => {
                for (change, reply) in batch.drain(..) {
                    match apply_all(&storage, &[&change]).await {
                        Ok(mut applied) => drop(reply.send(Ok(applied.remove(0)))),
                        Err(error) if error.is_unreachable() && kept_through_outages(&change) => {
                            kept.push((change, reply));
                        }
                        Err(error) => drop(reply.send(Err(error.to_string()))),
                    }
                }
            }
        }
    }
}

/// Whether `change` is kept through an outage rather than failed: the changes the
/// scheduler has acted on in memory before writing them, which no client sends again
/// (each sets a state, so writing it late is writing it once): a worker's standing and
/// a lease's end (a quarantine writes both; failed, a quarantine caught by a PostgreSQL
/// outage stayed in memory only, its forged results counted, and was gone after a
/// restart), a job's state (an admin's stop, answered "stopped" on a retry without a
/// write, ran again after a restart) and its priority, a verification job's suspicions
/// and re-checks, a worker's reported failure (the lease it ended is not reported
/// again), and a job's request changed or its failures forgotten (a modify or a resume
/// answered before its write ran again after a restart). Kept, the caller waits for
/// the database, then finishes what it does after the write; requests run to their
/// end even when their client leaves (`detached`).
fn kept_through_outages(change: &Change) -> bool {
    matches!(
        change,
        Change::WorkerStanding { .. }
            | Change::LeaseState { .. }
            | Change::JobState { .. }
            | Change::JobPriority { .. }
            | Change::Suspicion { .. }
            | Change::SuspicionsSettled { .. }
            | Change::Failure { .. }
            | Change::FailuresCleared { .. }
            | Change::JobSpec { .. }
            | Change::Recheck { .. }
            | Change::RecheckSettled { .. }
    )
}

/// Whether committed `changes` reach the fail point `point`: it is one of those after a
/// commit, and they hold a change of its kind.
fn reaches(point: &str, changes: &[&Change]) -> bool {
    let of_its_kind: fn(&Change) -> bool = match point {
        AFTER_UNITS_COMMIT => |change| matches!(change, Change::Units { .. }),
        AFTER_CHUNK_COMMIT => |change| stores_files_under(change, crate::storage::layout::CHUNKS_DIR),
        AFTER_VERIFICATION_COMMIT => |change| stores_files_under(change, crate::storage::layout::VERIFICATION_DIR),
        AFTER_LEASE_COMMIT => |change| matches!(change, Change::NewLease { .. }),
        AFTER_TOURNAMENT_COMMIT => makes_tournament,
        _ => return false,
    };
    changes.iter().any(|change| of_its_kind(change))
}

/// Whether `change` stores units kept in files of their own under `dir` (a folder of
/// [`crate::storage::layout`]): self-play chunks and verification reports are both units counted
/// by their records, alike to the writer but for their folder.
fn stores_files_under(change: &Change, dir: &str) -> bool {
    let under = |file: &str| file.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'));
    matches!(change, Change::Units { rows, .. } if rows.iter().any(|row| under(&row.file)))
}

/// Whether `change` makes a tournament (its row with its first tests).
fn makes_tournament(change: &Change) -> bool {
    matches!(change, Change::Together(changes) if changes.iter().any(|c| matches!(c, Change::Tournament(_))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::rows::{LeaseRow, UnitRow};

    /// A change storing one unit kept in `file`.
    fn unit_in(file: &str) -> Change {
        let row = UnitRow {
            unit: 0,
            points: [0, 0],
            reasons: Default::default(),
            records: 5,
            pgn: String::new(),
            file: file.to_owned(),
            offset: 0,
            length: 0,
            created_ms: 0,
            cpu_ms: 0,
            games: 0,
        };
        Change::Units { job_id: 1, lease_id: 1, worker_id: 1, by_records: true, rows: vec![row] }
    }

    #[test]
    fn a_fail_point_after_a_commit_is_reached_only_by_a_batch_holding_its_kind() {
        let pairs = unit_in("games/1.pgn");
        let chunk = unit_in("chunks/1/0-1-ab.xqd");
        let report = unit_in("verification/1/0-1-ab.jsonl");
        let row = LeaseRow {
            id: 1,
            job_id: 1,
            worker_id: 1,
            units: vec![0],
            state: "active".to_owned(),
            probe: String::new(),
            cores: 1,
            created_ms: 0,
        };
        let lease = Change::NewLease { lease: row, next_unit: 1 };
        let ended = Change::LeaseState { id: 1, state: "done".to_owned() };
        assert!(reaches(AFTER_CHUNK_COMMIT, &[&ended, &chunk]));
        assert!(!reaches(AFTER_CHUNK_COMMIT, &[&pairs, &report, &lease, &ended]));
        assert!(reaches(AFTER_VERIFICATION_COMMIT, &[&report]));
        assert!(!reaches(AFTER_VERIFICATION_COMMIT, &[&pairs, &chunk, &lease, &ended]));
        assert!(reaches(AFTER_LEASE_COMMIT, &[&pairs, &lease]));
        assert!(!reaches(AFTER_LEASE_COMMIT, &[&pairs, &chunk, &report, &ended]));
        // Results of every kind reach the first point, and nothing else does.
        for results in [&pairs, &chunk, &report] {
            assert!(reaches(AFTER_UNITS_COMMIT, &[results]));
        }
        assert!(!reaches(AFTER_UNITS_COMMIT, &[&lease, &ended]));
        // A point that is not one after a commit is never reached here.
        assert!(!reaches("tournament-written", &[&pairs, &chunk, &report, &lease, &ended]));
    }
}
