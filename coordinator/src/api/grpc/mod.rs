//! The gRPC services: requests checked, authorised and turned into scheduler calls.
//! Every refusal is a status that says what was wrong. The state both services share
//! is here; the services' calls are in [`worker`] and [`client`], what they do by
//! kind of work beside them ([`reports`], [`jobs`], [`tournaments`],
//! [`verification`], [`downloads`], [`uploads`]), and who is calling in [`auth`].

pub mod accounts;
pub mod auth;
pub mod client;
pub mod default_book;
pub mod downloads;
pub mod job_changes;
pub mod jobs;
pub mod quotas;
pub mod reports;
pub mod tournaments;
pub mod uploads;
pub mod users;
pub mod verification;
pub mod worker;

use crate::access::places::Places;
use crate::access::streams::Followers;
use crate::jobs::tournament::Tournaments;
use crate::kept::Kept;
use crate::metrics::Metrics;
use crate::nets::Nets;
use crate::scheduler::{ScheduleError, Scheduler};
use crate::storage::Storage;
use crate::storage::artifacts::ArtifactStore;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use tokio_stream::Stream;
use tonic::Status;
use xq_engine::xiangqi::nnue::Network;
use xq_engine::xiangqi::pgn::PgnFile;
use xq_proto::v1;

/// The most pairs one report may carry.
pub const MAX_PAIRS_PER_REPORT: usize = 512;

pub(super) type Stream_<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

impl From<ScheduleError> for Status {
    fn from(error: ScheduleError) -> Self {
        match error {
            ScheduleError::NotFound(m) => Status::not_found(m),
            ScheduleError::Invalid(m) => Status::invalid_argument(m),
            ScheduleError::Denied(m) => Status::permission_denied(m),
            ScheduleError::Unregistered(_) => Status::failed_precondition(error.to_string()),
            ScheduleError::Write(e) => Status::unavailable(e.to_string()),
        }
    }
}

/// What the services share.
#[derive(Clone)]
pub struct Shared {
    pub scheduler: Arc<Scheduler>,
    pub nets: Arc<Nets>,
    pub tournaments: Arc<Tournaments>,
    pub storage: Storage,
    pub artifacts: ArtifactStore,
    pub data_dir: PathBuf,
    pub metrics: Arc<Metrics>,
    /// Verification jobs' PGN files, read for the spot checks of their reports.
    pub pgn_files: Arc<Kept<PgnFile>>,
    /// The nets of verification jobs' fresh self-play games, for the same.
    pub verification_nets: Arc<Kept<Network>>,
    /// Matches' stored pairs judged ply by ply, as the dashboard last showed them.
    pub judged_pairs: Arc<Kept<v1::JudgedPair>>,
    /// The followers of live streams, under their caps.
    pub followers: Arc<Followers>,
    /// Open downloads (artifacts, games, training data, verification reports), under
    /// their caps by token.
    pub downloads: Arc<Places<String>>,
    /// The spot checks of verification reports, under their budget.
    pub spot_checks: Arc<crate::jobs::verification::spot_checks::SpotChecks>,
    /// Verification jobs' counts, kept as their reports are counted.
    pub tallies: Arc<crate::jobs::verification::tallies::Tallies>,
    /// Tournament tests' pair points as last read, with the counts they were read at.
    pub pair_points: Arc<PairPoints>,
    /// Opening books as parsed, while jobs hold them.
    pub books: Arc<crate::storage::books::Books>,
    /// The built-in book as stored, once a job has wanted it.
    pub default_book: Arc<default_book::DefaultBook>,
    /// Places for replaying reported pairs off the async runtime, one a core: reports
    /// wait for a place rather than take every thread.
    pub replays: Arc<tokio::sync::Semaphore>,
    /// Log-in attempts by name, bounded.
    pub login_attempts: Arc<crate::access::accounts::LoginAttempts>,
    /// Places for hashing passwords (memory-hard: one a core, like replays).
    pub password_work: Arc<tokio::sync::Semaphore>,
    /// The contributors' list as last summed.
    pub contributors: Arc<crate::scheduler::credit::Contributors>,
}

impl Shared {
    /// `release` as it may be published: a valid version and signature's shape, and a
    /// bundle stored as a release whose manifest names that version. The signature is
    /// the workers' to check: they hold the operator's key, the coordinator need not.
    pub async fn checked_release(&self, release: v1::WorkerRelease) -> Result<v1::WorkerRelease, Status> {
        xq_proto::release::check_version(&release.version).map_err(|e| Status::invalid_argument(e.to_string()))?;
        if release.signature.len() != 128 || !release.signature.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Status::invalid_argument("a release's signature is 64 bytes in hex"));
        }
        let unknown = || Status::not_found(format!("no release bundle {} is stored: upload it first", release.sha256));
        let (_, kind, size) = self
            .storage
            .artifact(&release.sha256)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?
            .ok_or_else(unknown)?;
        if kind != "release" {
            return Err(Status::invalid_argument(format!("artifact {} is a {kind}, not a release", release.sha256)));
        }
        let path = self.artifacts.path(&release.sha256).map_err(|_| unknown())?;
        let manifest = tokio::task::spawn_blocking(move || xq_proto::release::read_manifest(&path))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        if manifest.version != release.version {
            return Err(Status::invalid_argument(format!(
                "the bundle is version {}, not {}",
                manifest.version, release.version
            )));
        }
        Ok(v1::WorkerRelease { size, published_ms: 0, ..release })
    }

    /// The contributors' list: what the gRPC method and the dashboard's API answer.
    pub async fn contributors(&self) -> Result<v1::ContributorsReply, Status> {
        self.contributors.list(&self.storage, &self.scheduler).await.map_err(|e| Status::unavailable(e.to_string()))
    }
}

/// The places of [`Shared::replays`]: this machine's cores.
pub fn replay_places() -> usize {
    std::thread::available_parallelism().map_or(2, usize::from)
}

/// Tournament tests' pair points, read from storage only when a test's counts have
/// changed since they were last read: an event's standings (which the dashboard
/// refetches every few seconds, for anyone when it is public) otherwise read every
/// pair of every test of every listed event per request (finding N4 of the security
/// review). A finished event's tests are read once.
#[derive(Default)]
pub struct PairPoints(std::sync::Mutex<std::collections::HashMap<u64, KeptPoints>>);

/// A test's pair points with what they depend on: its counted units and its totals
/// (which change when pairs are counted or set aside).
type KeptPoints = ((u64, Option<v1::Totals>), Arc<Vec<[i64; 2]>>);

impl PairPoints {
    pub(super) fn get(&self, job: &v1::Job) -> Option<Arc<Vec<[i64; 2]>>> {
        let kept = self.0.lock().expect("the pair points' lock is never poisoned");
        kept.get(&job.job_id).filter(|(key, _)| *key == (job.units_done, job.totals.clone())).map(|(_, p)| p.clone())
    }

    pub(super) fn keep(&self, job: &v1::Job, points: Arc<Vec<[i64; 2]>>) {
        let key = (job.units_done, job.totals.clone());
        self.0.lock().expect("the pair points' lock is never poisoned").insert(job.job_id, (key, points));
    }
}

/// The priority of a job whose request names none (protobuf's 0).
pub const DEFAULT_PRIORITY: i32 = 0;

/// The refusal of what needs job `id`'s spec when this version cannot read it back.
pub(super) fn unreadable(id: u64, job: &crate::jobs::Unreadable) -> Status {
    Status::failed_precondition(format!("job {id} cannot be read back by this version: {}", job.problem))
}

/// The Worker service.
pub struct WorkerApi(pub Shared);

/// The Client service.
pub struct ClientApi(pub Shared);

/// The Accounts service: sign-up and log-in, without a token.
pub struct AccountsApi(pub Shared);
