//! What a job stored, read back: its pairs judged ply by ply, its games, its training
//! data, streamed a unit at a time.

use crate::access::places::Caps;
use crate::api::grpc::reports::{check_stored_chunk, judge_games};
use crate::api::grpc::{Shared, Stream_, unreadable};
use crate::jobs::JobSpec;
use crate::storage::Storage;
use crate::storage::rows::UnitFile;
use std::collections::VecDeque;
use std::path::PathBuf;
use tokio::io::AsyncReadExt;
use tokio_stream::StreamExt;
use tonic::Status;
use xq_proto::MAX_MESSAGE_BYTES;
use xq_proto::v1;

/// What a job's units store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// A match's game pairs, as PGN.
    Games,
    /// A self-play job's training chunks.
    Chunks,
    /// A verification job's reports, JSON lines.
    Reports,
}

impl Stored {
    pub(super) fn noun(self) -> &'static str {
        match self {
            Stored::Games => "games",
            Stored::Chunks => "training data",
            Stored::Reports => "verification reports",
        }
    }

    pub(super) fn job(self) -> &'static str {
        match self {
            Stored::Games => "a match",
            Stored::Chunks => "a self-play job",
            Stored::Reports => "a verification job",
        }
    }
}

/// A job's stored units: (unit, bytes), each read when its reader asks for it.
pub type UnitStream = Stream_<(u64, Vec<u8>)>;

/// Downloads open at once, in all and per token (F2 of the 2026-11-28 review: one
/// token's thousand unread streams). An unread stream holds at most one piece or unit
/// in HTTP/2's send buffer, so one token holds at most 64 of them; a worker fetches a
/// lease's files one after another, a client a job's data in one or two streams.
pub const OPEN_DOWNLOADS: Caps = Caps { total: 16_384, per_holder: 64 };

impl Shared {
    /// `stream`, holding a place of `holder` (a token) until it is dropped; refused,
    /// naming the cap, when the holder or the coordinator has no place left.
    pub(super) fn holding<T: Send + 'static>(&self, holder: String, stream: Stream_<T>) -> Result<Stream_<T>, Status> {
        let place = self.downloads.take(Some(holder)).map_err(|full| Status::resource_exhausted(full.to_string()))?;
        // The place lives in the stream's closure: given back when tonic drops the stream.
        Ok(Box::pin(stream.map(move |item| {
            let _held = &place;
            item
        })))
    }

    /// A page of a match's counted pairs.
    pub async fn pairs(&self, request: &v1::ListPairsRequest) -> Result<v1::ListPairsReply, Status> {
        self.match_job(request.job_id)?;
        let limit = if request.limit == 0 { 100 } else { request.limit.min(1_000) };
        let pairs = self
            .storage
            .pairs(request.job_id as i64, request.after, i64::from(limit))
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let pairs = self.scheduler.with_users(pairs);
        Ok(v1::ListPairsReply { pairs })
    }

    /// One pair's games as stored, each ruled by the judge, as `xq-engine judge` does.
    pub async fn judged_pair(&self, id: u64, unit: u64) -> Result<v1::JudgedPair, Status> {
        let spec = self.match_job(id)?;
        let JobSpec::Match(job) = &*spec else { unreachable!("match_job returns matches") };
        let stored = self
            .counted_unit(id, unit)
            .await?
            .ok_or_else(|| Status::not_found(format!("job {id} has no pair {unit} counted")))?;
        let place = format!("{}@{}+{}", stored.file, stored.offset, stored.length);
        if let Some(judged) = self.judged_pairs.get(&place) {
            return Ok((*judged).clone());
        }
        let bytes = read_slice(self.data_dir.join(&stored.file), stored.offset, stored.length)
            .await
            .map_err(|e| Status::unavailable(format!("{}: {e}", stored.file)))?;
        let pgn = String::from_utf8_lossy(&bytes).into_owned();
        let (rules, variant) = (job.rules, job.variant.name().to_owned());
        // Replaying and classifying every ply is CPU work: kept, and made in turns.
        let judge = move || {
            let games = judge_games(&pgn, rules)?;
            Ok(v1::JudgedPair { unit, variant, rules: rules.name().to_owned(), pgn, games })
        };
        let judged = self.judged_pairs.get_or_read(&place, judge).await.map_err(|e| match e {
            crate::kept::ReadError::Refused(e) => Status::data_loss(format!("pair {unit} of job {id} as stored: {e}")),
            crate::kept::ReadError::Failed(e) => Status::internal(e),
        })?;
        Ok((*judged).clone())
    }

    /// Why job `id`'s stored units cannot be read as `wanted`, if they cannot: no such
    /// job, another kind, or removed under the retention settings.
    pub(super) fn units_readable(&self, id: u64, wanted: Stored) -> Result<(), Status> {
        let spec = self.scheduler.spec(id).ok_or_else(|| Status::not_found(format!("job {id}")))?;
        let stored = match &*spec {
            JobSpec::Match(_) => Stored::Games,
            JobSpec::SelfPlay(_) => Stored::Chunks,
            JobSpec::Verify(_) => Stored::Reports,
            JobSpec::Unreadable(job) => return Err(unreadable(id, job)),
        };
        if stored != wanted {
            return Err(Status::invalid_argument(format!("job {id} is {}, with no {}", stored.job(), wanted.noun())));
        }
        let removed = self.scheduler.data_removed_ms(id).unwrap_or(0);
        if removed > 0 {
            return Err(Status::not_found(format!(
                "job {id}'s {} were removed at {removed} ms since the epoch, under the coordinator's retention \
                 settings; its counts and results remain",
                stored.noun()
            )));
        }
        Ok(())
    }

    /// Streams the stored bytes of a job's units, in unit order, the index a page at a
    /// time. Nothing is read ahead: a stream its reader leaves unread holds no file and
    /// no unit's bytes (a read-ahead of four units a stream let unread streams pin
    /// memory without bound: review of 2026-11-28, F2).
    pub fn unit_bytes(&self, id: u64, wanted: Stored) -> Result<UnitStream, Status> {
        self.unit_bytes_except(id, wanted, Vec::new())
    }

    /// [`Shared::unit_bytes`] but the units in `present`, which are not read. A caller
    /// lists at most the job's units: the list is kept, sorted, while the stream lasts.
    pub fn unit_bytes_except(&self, id: u64, wanted: Stored, mut present: Vec<u64>) -> Result<UnitStream, Status> {
        self.units_readable(id, wanted)?;
        let units = self.scheduler.units_total(id).unwrap_or(0);
        if present.len() as u64 > units {
            return Err(Status::invalid_argument(format!(
                "present_units: {} listed, more than job {id}'s {units} units",
                present.len()
            )));
        }
        present.sort_unstable();
        let cursor = UnitCursor {
            storage: self.storage.clone(),
            data_dir: self.data_dir.clone(),
            job: id,
            wanted,
            present,
            after: None,
            page: VecDeque::new(),
            failed: false,
        };
        Ok(Box::pin(futures_util::stream::unfold(cursor, UnitCursor::next)))
    }
}

/// Where a stream of a job's units stands.
struct UnitCursor {
    storage: Storage,
    data_dir: PathBuf,
    job: u64,
    wanted: Stored,
    /// Units the caller has, sorted: passed over.
    present: Vec<u64>,
    /// The last unit given.
    after: Option<u64>,
    /// The units of the index's page read last, not given yet.
    page: VecDeque<UnitFile>,
    /// The index could not be read: the stream ends after saying so.
    failed: bool,
}

impl UnitCursor {
    /// The next unit's bytes, reading the index's next page when this one is given.
    async fn next(mut self) -> Option<(Result<(u64, Vec<u8>), Status>, UnitCursor)> {
        if self.failed {
            return None;
        }
        let unit = loop {
            if self.page.is_empty() {
                match self.storage.unit_files(self.job as i64, self.after, 64).await {
                    Ok(page) => self.page = page.into(),
                    Err(e) => {
                        self.failed = true;
                        return Some((Err(Status::unavailable(e.to_string())), self));
                    }
                }
            }
            let unit = self.page.pop_front()?;
            self.after = Some(unit.unit);
            if self.present.binary_search(&unit.unit).is_err() {
                break unit;
            }
        };
        let item = match read_slice(self.data_dir.join(&unit.file), unit.offset, unit.length).await {
            Ok(bytes) if self.wanted == Stored::Chunks => {
                check_stored_chunk(&unit.file, &bytes).map(|()| (unit.unit, bytes))
            }
            Ok(bytes) => Ok((unit.unit, bytes)),
            // Shorter than the index says: damaged, not merely unreachable.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Err(Status::data_loss(format!("{}: shorter than the {} bytes stored", unit.file, unit.length)))
            }
            Err(e) => Err(Status::unavailable(format!("{}: {e}", unit.file))),
        };
        Some((item, self))
    }
}

pub(super) async fn read_slice(path: PathBuf, offset: u64, length: u64) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncSeekExt;
    if length > MAX_MESSAGE_BYTES as u64 {
        return Err(std::io::Error::other("stored item larger than a message"));
    }
    let mut file = tokio::fs::File::open(path).await?;
    file.seek(std::io::SeekFrom::Start(offset)).await?;
    let mut bytes = vec![0; length as usize];
    file.read_exact(&mut bytes).await?;
    Ok(bytes)
}
