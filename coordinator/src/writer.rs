//! Group commit: every durable change goes through one task that gathers the changes
//! waiting for it into one transaction, so that thousands of reports a second cost a
//! few commits (and fsyncs) a second. A caller's change is durable when its reply
//! arrives. A failing batch is retried change by change, so that one bad change fails
//! alone.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::PathBuf;

use tokio::sync::{mpsc, oneshot};

use crate::storage::{Applied, Change, Storage, StorageError, apply_all};

/// The most changes in one transaction.
const MAX_BATCH: usize = 2048;

type Reply = oneshot::Sender<Result<Applied, String>>;

/// A handle to the writer task.
#[derive(Clone, Debug)]
pub struct Writer {
    sender: mpsc::Sender<(Change, Reply)>,
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
    /// Starts the writer task on `storage`, with games files under `games_dir`.
    pub fn start(storage: Storage, games_dir: PathBuf) -> Self {
        let (sender, receiver) = mpsc::channel(MAX_BATCH * 4);
        tokio::spawn(run(storage, GamesFiles { dir: games_dir, open: HashMap::new() }, receiver));
        Writer { sender }
    }

    /// Stores `change`; returns once it is committed.
    pub async fn write(&self, change: Change) -> Result<Applied, WriteError> {
        let (reply, answer) = oneshot::channel();
        self.sender.send((change, reply)).await.map_err(|_| WriteError::Closed)?;
        answer.await.map_err(|_| WriteError::Closed)?.map_err(WriteError::Storage)
    }
}

/// The games of each job, appended to `<dir>/<job>.pgn`.
struct GamesFiles {
    dir: PathBuf,
    open: HashMap<i64, (File, u64)>,
}

impl GamesFiles {
    /// Appends the games of the batch's units to their jobs' files and syncs them, so
    /// that every unit row committed afterwards points at bytes on disk. A crash before
    /// the commit leaves unreferenced bytes, which nothing reads.
    fn append(&mut self, batch: &mut [(Change, Reply)]) -> std::io::Result<()> {
        let mut touched = Vec::new();
        for (change, _) in batch.iter_mut() {
            let Change::Units { job_id, rows, .. } = change else { continue };
            for row in rows.iter_mut().filter(|r| !r.pgn.is_empty()) {
                let (file, length) = match self.open.entry(*job_id) {
                    std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
                    std::collections::hash_map::Entry::Vacant(entry) => {
                        std::fs::create_dir_all(&self.dir)?;
                        let file = OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(self.dir.join(format!("{job_id}.pgn")))?;
                        let length = file.metadata()?.len();
                        entry.insert((file, length))
                    }
                };
                file.write_all(row.pgn.as_bytes())?;
                row.file = format!("games/{job_id}.pgn");
                row.offset = *length as i64;
                row.length = row.pgn.len() as i64;
                *length += row.pgn.len() as u64;
                row.pgn = String::new();
                touched.push(*job_id);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for job in touched {
            self.open[&job].0.sync_data()?;
        }
        Ok(())
    }
}

async fn run(storage: Storage, games: GamesFiles, mut receiver: mpsc::Receiver<(Change, Reply)>) {
    let mut games = Some(games);
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while receiver.recv_many(&mut batch, MAX_BATCH).await > 0 {
        // Writing and syncing the games blocks; it runs off the request threads.
        let mut files = games.take().expect("the games files are back after each batch");
        let (files, back, appended) = tokio::task::spawn_blocking(move || {
            let appended = files.append(&mut batch);
            (files, batch, appended)
        })
        .await
        .expect("appending games does not panic");
        games = Some(files);
        batch = back;
        if let Err(error) = appended {
            // Unit rows must not point at games that are not on disk.
            games.as_mut().expect("just put back").open.clear();
            for (_, reply) in batch.drain(..) {
                let _ = reply.send(Err(format!("writing games: {error}")));
            }
            continue;
        }
        let changes: Vec<&Change> = batch.iter().map(|(change, _)| change).collect();
        match apply_all(storage.pool(), &changes).await {
            Ok(results) => {
                for ((_, reply), applied) in batch.drain(..).zip(results) {
                    let _ = reply.send(Ok(applied));
                }
            }
            Err(error) if batch.len() == 1 => {
                let (_, reply) = batch.pop().expect("one change");
                let _ = reply.send(Err(error.to_string()));
            }
            Err(_) => {
                for (change, reply) in batch.drain(..) {
                    let result: Result<Vec<Applied>, StorageError> = apply_all(storage.pool(), &[&change]).await;
                    let _ = reply.send(result.map(|mut r| r.remove(0)).map_err(|e| e.to_string()));
                }
            }
        }
    }
}
