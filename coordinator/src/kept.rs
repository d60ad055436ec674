//! Artifacts the coordinator reads once and keeps decoded while they are in use: the
//! PGN files of verification jobs and the nets their fresh self-play games are played
//! with, both needed by the spot check of every report (read again for each report,
//! a net cost more than the check itself), and the stored pairs the dashboard shows
//! judged ply by ply (judged again for each view, a viewer could keep the cores busy:
//! finding N4 of the security review). Reads run off the async runtime, at most one a
//! core at once, the rest waiting their turn.

use std::sync::{Arc, Mutex};

use prost::Message;
use tokio::sync::Semaphore;
use xq_engine::xiangqi::nnue::Network;
use xq_engine::xiangqi::pgn::PgnFile;
use xq_proto::v1;

/// Decoded artifacts by content hash, at most `most` of them and `most_bytes` bytes by
/// `weigh`, the least recently used going first (one is kept whatever its size).
pub struct Kept<T> {
    entries: Mutex<Vec<(String, Arc<T>)>>,
    most: usize,
    most_bytes: usize,
    weigh: fn(&T) -> usize,
    /// Turns to read: one a core.
    turns: Semaphore,
}

/// Verification jobs' PGN files: more files than verification jobs run at once, in
/// practice, and up to 1 GiB of decoded text.
pub fn pgn_files() -> Kept<PgnFile> {
    Kept::new(16, 1 << 30, PgnFile::text_len)
}

/// Nets of verification jobs' fresh self-play games (a few MB each).
pub fn nets() -> Kept<Network> {
    Kept::new(4, usize::MAX, |_| 0)
}

/// Stored pairs judged ply by ply, by where their bytes are stored (a counted pair's
/// bytes never change): the last 256 viewed, up to 64 MiB.
pub fn judged_pairs() -> Kept<v1::JudgedPair> {
    Kept::new(256, 64 << 20, |pair| pair.encoded_len())
}

/// Why [`Kept::get_or_read`] has no value.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The reader refused the artifact (its reason).
    #[error("{0}")]
    Refused(String),
    /// The reading task itself failed (it panicked or was cancelled).
    #[error("reading it failed: {0}")]
    Failed(String),
}

impl<T: Send + Sync + 'static> Kept<T> {
    /// Keeps at most `most` values and `most_bytes` bytes as `weigh` counts them.
    pub fn new(most: usize, most_bytes: usize, weigh: fn(&T) -> usize) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Kept { entries: Mutex::new(Vec::new()), most, most_bytes, weigh, turns: Semaphore::new(cores) }
    }

    /// The value of hash `sha256`, if kept (it becomes the most recently used).
    pub fn get(&self, sha256: &str) -> Option<Arc<T>> {
        let mut entries = self.entries.lock().expect("kept artifacts");
        let index = entries.iter().position(|(kept, _)| kept == sha256)?;
        let entry = entries.remove(index);
        let value = entry.1.clone();
        entries.push(entry);
        Some(value)
    }

    /// Keeps `value` as the most recently used, the least recently used going first
    /// when more are kept than the limits allow.
    pub fn keep(&self, sha256: &str, value: Arc<T>) {
        let mut entries = self.entries.lock().expect("kept artifacts");
        entries.retain(|(kept, _)| kept != sha256);
        entries.push((sha256.to_owned(), value));
        let weight = |entries: &[(String, Arc<T>)]| entries.iter().map(|(_, v)| (self.weigh)(v)).sum::<usize>();
        while entries.len() > 1 && (entries.len() > self.most || weight(&entries) > self.most_bytes) {
            entries.remove(0);
        }
    }

    /// The value of hash `sha256`: kept, or made by `read` off the async runtime (when
    /// a turn is free) and kept.
    pub async fn get_or_read(
        &self,
        sha256: &str,
        read: impl FnOnce() -> Result<T, String> + Send + 'static,
    ) -> Result<Arc<T>, ReadError> {
        if let Some(value) = self.get(sha256) {
            return Ok(value);
        }
        let _turn = self.turns.acquire().await.map_err(|e| ReadError::Failed(e.to_string()))?;
        let read = tokio::task::spawn_blocking(read).await.map_err(|e| ReadError::Failed(e.to_string()))?;
        let value = read.map_err(ReadError::Refused)?;
        let value = Arc::new(value);
        self.keep(sha256, value.clone());
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_recently_used_stay() {
        let kept = Kept::new(3, usize::MAX, |_: &u32| 0);
        for i in 0..3 {
            kept.keep(&i.to_string(), Arc::new(i));
        }
        assert!(kept.get("0").is_some(), "used again: now the most recent");
        kept.keep("new", Arc::new(9));
        assert!(kept.get("1").is_none(), "the least recently used went");
        assert!(kept.get("0").is_some() && kept.get("2").is_some() && kept.get("new").is_some());
    }

    #[test]
    fn bytes_are_bounded_but_one_value_is_always_kept() {
        let kept = Kept::new(10, 100, |v: &usize| *v);
        kept.keep("a", Arc::new(60));
        kept.keep("b", Arc::new(30));
        kept.keep("c", Arc::new(30));
        assert!(kept.get("a").is_none(), "120 bytes: the oldest went");
        assert!(kept.get("b").is_some() && kept.get("c").is_some());
        kept.keep("huge", Arc::new(1_000));
        assert!(kept.get("huge").is_some(), "alone, it stays");
        assert!(kept.get("b").is_none() && kept.get("c").is_none());
    }

    #[tokio::test]
    async fn a_value_is_read_once_and_a_failed_read_keeps_nothing() {
        let kept = Kept::new(2, usize::MAX, |_: &String| 0);
        let read = kept.get_or_read("x", || Ok("read".to_owned())).await.unwrap();
        let again = kept.get_or_read("x", || Err("not read again".to_owned())).await.unwrap();
        assert!(Arc::ptr_eq(&read, &again));
        let refused = kept.get_or_read("y", || Err("damaged".to_owned())).await.unwrap_err();
        assert_eq!(refused, ReadError::Refused("damaged".to_owned()));
        assert!(kept.get("y").is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_more_reads_run_at_once_than_there_are_cores() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let kept = Arc::new(Kept::new(100, usize::MAX, |_: &usize| 0));
        let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let reads: Vec<_> = (0..4 * cores + 4)
            .map(|i| {
                let (kept, running, most) = (kept.clone(), running.clone(), most.clone());
                tokio::spawn(async move {
                    let read = move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        running.fetch_sub(1, Ordering::SeqCst);
                        Ok(i)
                    };
                    *kept.get_or_read(&i.to_string(), read).await.unwrap()
                })
            })
            .collect();
        for (i, read) in reads.into_iter().enumerate() {
            assert_eq!(read.await.unwrap(), i);
        }
        let most = most.load(Ordering::SeqCst);
        assert!((1..=cores).contains(&most), "{most} reads at once on {cores} cores");
    }
}
