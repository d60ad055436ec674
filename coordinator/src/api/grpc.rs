//! The gRPC services: requests checked, authorised and turned into scheduler calls.
//! Every refusal is a status that says what was wrong.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;
use tokio_stream::{Stream, StreamExt, wrappers::ReceiverStream};
use tonic::{Request, Response, Status, Streaming};
use xq_engine::book::Book;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::data::{ChunkError, read_any_chunk};
use xq_engine::xiangqi::nnue::Network;
use xq_engine::xiangqi::pgn::{PgnFile, parse_pgn};
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::rules::judge::{JudgeRequest, judge};
use xq_proto::v1;
use xq_proto::{ARTIFACT_PIECE_BYTES, MAX_MESSAGE_BYTES, self_play_plies, self_play_unit_records};

use crate::access::streams::{Followers, UntilOutOfForce};
use crate::access::tokens::{Principal, Role, TokenHash, bearer, token_hash};
use crate::jobs::JobSpec;
use crate::jobs::selfplay::{check_self_play, self_play_variant};
use crate::jobs::spsa::{check_spsa, check_spsa_bounds};
use crate::jobs::test::course::Course;
use crate::jobs::test::endings::Conditions;
use crate::jobs::test::replay::{PairContext, check_pair};
use crate::jobs::test::{DEFAULT_SPRT_PAIRS, MatchJob, check_test};
use crate::jobs::tournament::{EventState, ExtendError, PairingResults, Tournaments};
use crate::kept::{Kept, ReadError};
use crate::metrics::Metrics;
use crate::nets::Nets;
use crate::scheduler::{LeaseContext, NewJob, RequestKey, ScheduleError, Scheduler, TokenRefused};
use crate::storage::artifacts::{ArtifactStore, check_hash};
use crate::storage::counts::add_points;
use crate::storage::{Storage, UnitRow};
use xq_engine::xiangqi::rules::verify::Tally;

/// The most pairs one report may carry.
pub const MAX_PAIRS_PER_REPORT: usize = 512;

type Stream_<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

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
    /// The spot checks of verification reports, under their budget.
    pub spot_checks: Arc<crate::jobs::verification::SpotChecks>,
    /// Verification jobs' counts, kept as their reports are counted.
    pub tallies: Arc<crate::jobs::verification::Tallies>,
    /// Tournament tests' pair points as last read, with the counts they were read at.
    pub pair_points: Arc<PairPoints>,
    /// Opening books as parsed, while jobs hold them.
    pub books: Arc<crate::storage::books::Books>,
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
    fn get(&self, job: &v1::Job) -> Option<Arc<Vec<[i64; 2]>>> {
        let kept = self.0.lock().expect("the pair points' lock is never poisoned");
        kept.get(&job.job_id).filter(|(key, _)| *key == (job.units_done, job.totals.clone())).map(|(_, p)| p.clone())
    }

    fn keep(&self, job: &v1::Job, points: Arc<Vec<[i64; 2]>>) {
        let key = (job.units_done, job.totals.clone());
        self.0.lock().expect("the pair points' lock is never poisoned").insert(job.job_id, (key, points));
    }
}

/// Checks the bearer token and records who sent the request: its principal, and for a
/// user the [`Caller`].
pub fn authenticate(scheduler: Arc<Scheduler>) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |mut request: Request<()>| {
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(bearer)
            .ok_or_else(|| Status::unauthenticated("no bearer token in the authorization metadata"))?;
        let hash = token_hash(token);
        let (principal, token_id) = scheduler.authenticate_hash(&hash).map_err(|refused| match refused {
            TokenRefused::NotInForce => Status::unauthenticated(refused.to_string()),
            TokenRefused::NoRights(_) => Status::permission_denied(refused.to_string()),
        })?;
        if let Principal::Client(role) = principal {
            request.extensions_mut().insert(Caller { role, token_id });
        }
        request.extensions_mut().insert(principal);
        request.extensions_mut().insert(TokenHash(hash));
        Ok(request)
    }
}

/// The client's name for a creation request, from its metadata (1 to 128 letters,
/// digits, '-', '_' or '.'), with the request message's SHA-256.
fn request_key<T: prost::Message>(request: &Request<T>) -> Result<Option<RequestKey>, Status> {
    let Some(value) = request.metadata().get(xq_proto::REQUEST_ID_METADATA) else { return Ok(None) };
    let id = value
        .to_str()
        .ok()
        .filter(|id| {
            (1..=128).contains(&id.len()) && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "{}: 1 to 128 letters, digits, '-', '_' or '.'",
                xq_proto::REQUEST_ID_METADATA
            ))
        })?;
    let digest = hex::encode(Sha256::digest(request.get_ref().encode_to_vec()));
    Ok(Some(RequestKey { id: id.to_owned(), digest }))
}

/// A user who made a request: the role and id of their token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub role: Role,
    pub token_id: String,
}

fn worker_of<T>(request: &Request<T>) -> Result<u64, Status> {
    match request.extensions().get::<Principal>() {
        Some(Principal::Worker(id)) => Ok(*id),
        _ => Err(Status::permission_denied("this call needs a worker token")),
    }
}

/// A user's call (an admin's or a submitter's).
fn client_of<T>(request: &Request<T>) -> Result<Caller, Status> {
    request
        .extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Status::permission_denied("this call needs a client token"))
}

/// An admin's call.
fn admin_of<T>(request: &Request<T>) -> Result<Caller, Status> {
    let caller = client_of(request)?;
    if caller.role != Role::Admin {
        return Err(Status::permission_denied("this call needs an admin token"));
    }
    Ok(caller)
}

/// The priority of a job whose request names none (protobuf's 0).
pub const DEFAULT_PRIORITY: i32 = 0;

/// Refuses `caller` a priority of `priority` for a job whose priority is `current` (a
/// new job's: the default). Workers lease by priority first, so a job above the default
/// runs before everyone's at the default: an admin's decision. A submitter may still
/// lower its own job's, or give it back up to the default.
fn may_prioritise(caller: &Caller, priority: i32, current: i32) -> Result<(), Status> {
    if caller.role == Role::Admin || priority <= current.max(DEFAULT_PRIORITY) {
        return Ok(());
    }
    Err(Status::permission_denied(format!(
        "priority {priority}: only an admin may raise a job's priority above the default ({DEFAULT_PRIORITY})"
    )))
}

/// The refusal of what needs job `id`'s spec when this version cannot read it back.
fn unreadable(id: u64, job: &crate::jobs::Unreadable) -> Status {
    Status::failed_precondition(format!("job {id} cannot be read back by this version: {}", job.problem))
}

/// A book artifact's openings as a `variant` book: the one its jobs already hold, or
/// read and parsed off the request runtime.
pub async fn load_openings(shared: &Shared, sha256: &str, variant: Variant) -> Result<Arc<Book>, String> {
    let (name, _, _) =
        shared.storage.artifact(sha256).await.map_err(|e| e.to_string())?.ok_or(format!("no artifact {sha256}"))?;
    let path = shared.artifacts.path(sha256).map_err(|e| e.to_string())?;
    let parse = move || read_book(&path, &name, variant);
    shared.books.get_or_parse(sha256, variant, parse).await.map_err(|e| e.to_string())
}

/// What an upload's check read, for the caches.
enum Checked {
    Net(Network),
    Pgn(PgnFile),
    Other,
}

/// Reads the upload at `path` as what its `kind` says it is (blocking: run it off the
/// request runtime); the refusal names `name` and what was wrong.
fn check_upload(path: &Path, kind: &str, name: &str) -> Result<Checked, String> {
    let bytes = || std::fs::read(path).map_err(|e| format!("the upload {name}: {e}"));
    match kind {
        "net" => Network::from_bytes(&bytes()?)
            .map(Checked::Net)
            .map_err(|problem| format!("the net {name} cannot be read: {problem}")),
        "pgn" => match PgnFile::read(&bytes()?) {
            Ok(file) if file.is_empty() => Err(format!("the PGN {name} holds no games")),
            Ok(file) => Ok(Checked::Pgn(file)),
            Err(problem) => Err(format!("the PGN {name} cannot be read: {problem}")),
        },
        // A book is for one variant, which the upload does not say: it must read as a
        // book of either.
        "book" => {
            let text = String::from_utf8(bytes()?).map_err(|_| format!("the book {name} is not UTF-8 text"))?;
            match Book::parse(Variant::Xiangqi, &text, name) {
                Ok(_) => Ok(Checked::Other),
                Err(_) if Book::parse(Variant::Xiongqi, &text, name).is_ok() => Ok(Checked::Other),
                Err(problem) => {
                    Err(format!("the book cannot be read: {problem} (nor is it a Xiongqi book of FEN lines)"))
                }
            }
        }
        _ => Ok(Checked::Other),
    }
}

/// Reads a stored book file called `name` as a `variant` book (blocking: run it off
/// the request runtime).
fn read_book(path: &Path, name: &str, variant: Variant) -> Result<Book, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("book {name}: {e}"))?;
    Book::parse(variant, &text, name).map_err(|e| e.to_string())
}

/// The Worker service.
pub struct WorkerApi(pub Shared);

/// The Client service.
pub struct ClientApi(pub Shared);

impl WorkerApi {
    /// Counts a refused report against its worker and job (the dashboard shows both),
    /// unless the fault was the coordinator's.
    fn counting_refusals(
        &self,
        worker: u64,
        lease_id: u64,
        reply: Result<v1::ReportReply, Status>,
    ) -> Result<Response<v1::ReportReply>, Status> {
        if let Err(status) = &reply
            && !matches!(status.code(), tonic::Code::Unavailable | tonic::Code::Internal | tonic::Code::DataLoss)
        {
            self.0.scheduler.note_refusal(worker, lease_id);
        }
        reply.map(Response::new)
    }

    /// Checks a match report's games and totals, then counts its new pairs.
    async fn pairs_report(&self, worker: u64, report: v1::ReportPairsRequest) -> Result<v1::ReportReply, Status> {
        if report.pairs.len() > MAX_PAIRS_PER_REPORT {
            return Err(Status::invalid_argument(format!("more than {MAX_PAIRS_PER_REPORT} pairs in one report")));
        }
        let units: Vec<u64> = report.pairs.iter().map(|p| p.unit).collect();
        let context = self.0.scheduler.lease_context(worker, report.lease_id, &units)?;
        let JobSpec::Match(job) = &*context.spec else {
            return Err(Status::invalid_argument(format!("lease {} is not a match", report.lease_id)));
        };
        let cumulative = report.cumulative.ok_or_else(|| Status::invalid_argument("cumulative totals missing"))?;
        let reported_penta: [u64; 5] = cumulative
            .pentanomial
            .as_slice()
            .try_into()
            .map_err(|_| Status::invalid_argument("the pentanomial needs 5 counts"))?;
        let engines = [job.request.new_engine.as_ref(), job.request.base_engine.as_ref()];
        for (engine, verified) in engines.iter().zip(report.verified_signatures.iter().chain(std::iter::repeat(&0))) {
            let expected = engine.map_or(0, |e| e.bench_signature);
            if expected != 0 && *verified != expected {
                return Err(Status::failed_precondition(format!(
                    "engine {}: bench signature {verified} verified, {expected} required",
                    engine.map_or("", |e| e.name.as_str())
                )));
            }
        }
        let names = [engines[0].map_or("", |e| e.name.as_str()), engines[1].map_or("", |e| e.name.as_str())];
        let conditions = Conditions::for_lease(&job.lease_spec(context.slowness)).map_err(Status::internal)?;
        let (mut wdl, mut penta) = (context.acked_wdl, context.acked_penta);
        let mut rows = Vec::new();
        for pair in &report.pairs {
            let opening = job.openings.as_ref().map(|o| o.for_unit(pair.unit.wrapping_add(job.request.book_offset)));
            let pair_context = PairContext {
                opening,
                variant: job.variant,
                rules: job.rules,
                timing: job.timing,
                names,
                conditions: &conditions,
            };
            let checked = check_pair([&pair.first_game_pgn, &pair.second_game_pgn], &pair_context)
                .map_err(|e| Status::invalid_argument(format!("unit {}: {e}", pair.unit)))?;
            if context.acked.contains(&pair.unit) {
                continue;
            }
            let points = [checked[0].points, checked[1].points];
            add_points(&mut wdl, &mut penta, points);
            let [first, second] = checked;
            rows.push(UnitRow {
                unit: pair.unit,
                points,
                reasons: [first.reason, second.reason],
                records: 0,
                pgn: format!("{}\n\n{}\n\n", pair.first_game_pgn.trim_end(), pair.second_game_pgn.trim_end()),
                file: String::new(),
                offset: 0,
                length: 0,
                created_ms: 0,
            });
        }
        let reported_wdl = [cumulative.wins, cumulative.draws, cumulative.losses];
        if reported_penta.iter().sum::<u64>() < context.acked_count {
            return Err(Status::invalid_argument(format!(
                "cumulative totals went down: {} pairs reported, {} acknowledged before",
                reported_penta.iter().sum::<u64>(),
                context.acked_count
            )));
        }
        if reported_wdl != wdl || reported_penta != penta {
            return Err(Status::invalid_argument(format!(
                "cumulative totals W/D/L {reported_wdl:?} pentanomial {reported_penta:?} disagree with the games: \
                 W/D/L {wdl:?} pentanomial {penta:?}"
            )));
        }
        let stop = self.0.scheduler.record_units(worker, &context, rows, false).await?;
        Ok(v1::ReportReply { stop })
    }

    /// Checks a self-play chunk, stores it, then counts its unit.
    async fn chunk_report(&self, worker: u64, upload: v1::UploadChunkRequest) -> Result<v1::ReportReply, Status> {
        let context = self.0.scheduler.lease_context(worker, upload.lease_id, &[upload.unit])?;
        let JobSpec::SelfPlay(request) = &*context.spec else {
            return Err(Status::invalid_argument(format!("lease {} is not a self-play job", upload.lease_id)));
        };
        let spec = request.spec.clone().unwrap_or_default();
        let expected = self_play_variant(&spec).unwrap_or_default();
        // The unit's games as its worker plays them.
        let mut settings = xq_proto::self_play_games(&spec, None).map_err(|e| Status::internal(e.to_string()))?;
        settings.seed = xq_proto::self_play_unit_seed(&spec, upload.unit);
        // Decoding a chunk checks every record, and its games are played again from
        // their openings (a small compressed chunk may hold a million records): off the
        // request runtime. A chunk refused is neither stored nor counted.
        let chunk = Arc::new(upload.chunk);
        let checked = chunk.clone();
        let records = tokio::task::spawn_blocking(move || -> Result<usize, Status> {
            let refused = |e: ChunkError| Status::invalid_argument(format!("chunk: {e}"));
            let records = read_any_chunk(&checked).map_err(refused)?;
            if records.variant() != expected {
                return Err(Status::invalid_argument(format!(
                    "chunk: {} records in a {} job",
                    records.variant().name(),
                    expected.name()
                )));
            }
            if records.len() as u64 > self_play_unit_records(&spec) {
                return Err(Status::invalid_argument(format!(
                    "chunk: {} records, more than {} games of at most {} plies can make",
                    records.len(),
                    spec.games_per_unit,
                    self_play_plies(&spec)
                )));
            }
            records.check_games(&settings, spec.games_per_unit as usize).map_err(refused)?;
            Ok(records.len())
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))??;
        let file = UnitFile { dir: crate::storage::layout::CHUNKS_DIR, extension: "xqd", what: "chunk" };
        self.store_unit(worker, &context, upload.unit, file, Arc::unwrap_or_clone(chunk), records as i64).await
    }

    /// Stores a checked unit counted by its `records` (a self-play chunk, a
    /// verification report) in a file of its own, then counts the unit. Each distinct
    /// upload gets its own file, named by its content: a second upload of a unit never
    /// overwrites the file the index points to, and a unit already stored is not
    /// written again.
    async fn store_unit(
        &self,
        worker: u64,
        context: &LeaseContext,
        unit: u64,
        file: UnitFile,
        bytes: Vec<u8>,
        records: i64,
    ) -> Result<v1::ReportReply, Status> {
        let relative = file.path(context, unit, &bytes);
        let length = bytes.len() as i64;
        if !self.0.scheduler.unit_done(context.job_id, unit) {
            self.write_unit_file(&relative, bytes, file.what).await?;
        }
        let row = UnitRow {
            unit,
            points: [0, 0],
            reasons: [String::new(), String::new()],
            records,
            pgn: String::new(),
            file: relative,
            offset: 0,
            length,
            created_ms: 0,
        };
        let stop = self.0.scheduler.record_units(worker, context, vec![row], true).await?;
        Ok(v1::ReportReply { stop })
    }

    /// Writes an upload durably to `relative`, under the data directory.
    async fn write_unit_file(&self, relative: &str, bytes: Vec<u8>, what: &str) -> Result<(), Status> {
        let path = self.0.data_dir.join(relative);
        tokio::task::spawn_blocking(move || crate::storage::durable::write_file(&path, &bytes))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(|e| Status::unavailable(format!("storing the {what}: {e}")))
    }

    /// Checks a verification unit's report (its lines and tally against the unit's
    /// games: `check_report`, then `spot_check` under the coordinator's budget), stores
    /// it, then counts its unit; the job's `positions` count the games. A report the
    /// spot check finds false is refused and its unit goes to another worker; the
    /// worker is quarantined once that other worker's report of the unit passes
    /// (`Scheduler::suspect`), so that one disagreement alone (the coordinator's own
    /// fault, say) quarantines no one. A report of a unit drawn for a re-check of the
    /// reference's verdicts, by a worker that has not reported it before, is checked
    /// the same way, then goes to [`Self::recheck_report`].
    async fn verification_report(
        &self,
        worker: u64,
        report: v1::VerificationReport,
    ) -> Result<v1::ReportReply, Status> {
        let context = self.0.scheduler.lease_context(worker, report.lease_id, &[report.unit])?;
        let JobSpec::Verify(job) = &*context.spec else {
            return Err(Status::invalid_argument(format!("lease {} is not a verification job", report.lease_id)));
        };
        let text = Arc::new(report.report);
        let (checked, unit_job) = (text.clone(), job.clone());
        let checked = tokio::task::spawn_blocking(move || {
            crate::jobs::verification::check_report(&checked, &unit_job.scope(report.unit))
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(|problem| Status::invalid_argument(format!("report of unit {}: {problem}", report.unit)))?;
        let records = checked.tally.games as i64;
        let recheck = self.0.scheduler.recheck(context.job_id, report.unit, worker);
        // A unit already counted (a resend) is not checked again: nothing of it is kept.
        if recheck.is_none() && self.0.scheduler.unit_done(context.job_id, report.unit) {
            let bytes = Arc::unwrap_or_clone(text).into_bytes();
            return self.store_unit(worker, &context, report.unit, REPORT_FILE, bytes, records).await;
        }
        let lines = if recheck.is_some() { checked.lines.clone() } else { Vec::new() };
        let spot = self.spot_check(context.job_id, job, report.unit, checked.lines).await?;
        if let Err(problem) = spot {
            let problem: String = problem.chars().filter(|c| !c.is_control()).take(300).collect();
            let reason = format!("its report of unit {} of job {} misstates {problem}", report.unit, context.job_id);
            let lease = Some(context.lease_id);
            self.0.scheduler.suspect(worker, context.job_id, report.unit, lease, &reason).await?;
            return Err(Status::invalid_argument(format!(
                "report of unit {}: a spot check finds {problem}; the unit goes to another worker, and this worker is \
                 quarantined if that one's report passes",
                report.unit
            )));
        }
        let bytes = Arc::unwrap_or_clone(text).into_bytes();
        // A re-check settles before the report is stored: a counted report it outvotes
        // is set aside first, so that this one counts the unit in its place.
        if let Some(recheck) = recheck {
            self.recheck_report(worker, &context, job, recheck, &bytes, lines).await?;
        }
        let reply = self.store_unit(worker, &context, report.unit, REPORT_FILE, bytes, records).await?;
        self.0.tallies.count(context.job_id, report.unit, &checked.tally);
        self.confirm_suspects(context.job_id, report.unit, worker).await?;
        Ok(reply)
    }

    /// Quarantines in job `job_id` the workers held suspect of `unit` whom `reporter`'s
    /// report of it, found true, confirms; the job's kept counts are read again from
    /// the reports still counted.
    async fn confirm_suspects(&self, job_id: u64, unit: u64, reporter: u64) -> Result<(), Status> {
        for (suspect, reason) in self.0.scheduler.confirm_suspects(job_id, unit, reporter).await? {
            let reason = format!("{reason} (worker {reporter} verified the unit)");
            self.0.scheduler.quarantine_in_job(suspect, job_id, &reason).await?;
            self.0.tallies.forget(job_id);
        }
        Ok(())
    }

    /// Takes `worker`'s report of a unit drawn for a re-check (`report`, whose game
    /// lines `lines` the spot checks passed) a step towards settling it, comparing it
    /// with the unit's counted report on the reference's verdicts
    /// (`verification::reference_verdicts`):
    ///
    /// - as the second report, agreeing, it settles the re-check; disagreeing, it is
    ///   stored, and a third worker (neither of the two) reports the unit;
    /// - as the third, it sides with one of the two: the other's worker, whom two
    ///   workers contradict, is suspected and at once confirmed (`Scheduler::suspect`,
    ///   as a spot check's suspect is), which quarantines it in the job and sets its
    ///   units aside; when that was the counted report, the caller counts the unit from
    ///   this one in its place. Siding with neither, it settles the re-check and no
    ///   one is suspected.
    ///
    /// The caller then stores the report as a resend (the unit counts once) or, its
    /// counted report set aside, as the unit's.
    async fn recheck_report(
        &self,
        worker: u64,
        context: &LeaseContext,
        job: &crate::jobs::verification::VerificationJob,
        recheck: crate::storage::Recheck,
        report: &[u8],
        lines: Vec<serde_json::Value>,
    ) -> Result<(), Status> {
        use crate::jobs::verification::{check_report, reference_difference, reference_verdicts};
        let (job_id, unit) = (context.job_id, recheck.unit);
        let counted = self.0.counted_report(job_id, unit).await?;
        let second = match recheck.second_worker {
            0 => None,
            _ => Some(
                tokio::fs::read(self.0.data_dir.join(&recheck.second_file))
                    .await
                    .map_err(|e| Status::unavailable(format!("{}: {e}", recheck.second_file)))?,
            ),
        };
        let job_copy = job.clone();
        let compared = tokio::task::spawn_blocking(move || {
            let (scope, reference) = (job_copy.scope(unit), job_copy.spec.reference.as_str());
            let stored = |report: &[u8]| -> Result<_, String> {
                let checked = check_report(&String::from_utf8_lossy(report), &scope)?;
                Ok(reference_verdicts(&checked.lines, reference))
            };
            let ours = reference_verdicts(&lines, reference);
            let from_counted = reference_difference(&stored(counted.as_bytes())?, &ours);
            let from_second = second.map(|second| stored(&second).map(|theirs| reference_difference(&theirs, &ours)));
            let from_second = from_second.transpose()?;
            Ok::<_, String>((from_counted, from_second))
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(|e| Status::data_loss(format!("job {job_id}'s stored reports of unit {unit}: {e}")))?;
        let (first, second) = (recheck.first_worker as u64, recheck.second_worker as u64);
        let odd = match compared {
            (None, None | Some(None)) => None,
            (Some(game), None) => {
                let relative = REPORT_FILE.path(context, unit, report);
                self.write_unit_file(&relative, report.to_vec(), REPORT_FILE.what).await?;
                self.0.scheduler.recheck_disputed(job_id, unit, worker, &relative).await?;
                tracing::warn!(
                    job_id,
                    unit,
                    first,
                    worker,
                    game,
                    "the reference's verdicts disputed: a third worker decides"
                );
                return Ok(());
            }
            (None, Some(Some(game))) => Some((second, first, game)),
            (Some(game), Some(None)) => Some((first, second, game)),
            (Some(game), Some(Some(_))) => {
                tracing::warn!(
                    job_id,
                    unit,
                    first,
                    second,
                    worker,
                    game,
                    "three reports of the reference's verdicts, none alike"
                );
                None
            }
        };
        if let Some((odd, other, game)) = odd {
            let reason = format!(
                "its report of unit {unit} of job {job_id} gives the reference's verdicts on game {game} otherwise \
                 than workers {other} and {worker}"
            );
            self.0.scheduler.suspect(odd, job_id, unit, None, &reason).await?;
        }
        self.confirm_suspects(job_id, unit, worker).await?;
        self.0.scheduler.recheck_settled(job_id, unit).await?;
        Ok(())
    }

    /// Verifies a unit's report lines again, and games of the unit drawn under the
    /// spot-check budget (`SpotChecks`), one check at a time; counts what it replayed.
    async fn spot_check(
        &self,
        job_id: u64,
        job: &crate::jobs::verification::VerificationJob,
        unit: u64,
        lines: Vec<serde_json::Value>,
    ) -> Result<Result<(), String>, Status> {
        use crate::jobs::verification::{SPOT_CHECKED_GAMES, UnitGames, spot_check};
        let (first, count) = (job.unit_first_game(unit), job.unit_games(unit) as usize);
        let file = match &job.spec.pgn {
            Some(pgn) => Some(self.0.pgn_file(pgn).await?),
            None => None,
        };
        let network = match job.spec.selfplay.as_ref().and_then(|s| s.net.as_ref()) {
            Some(net) => Some(self.0.verification_net(net).await?),
            None => None,
        };
        let _permit = self.0.spot_checks.running.acquire().await.map_err(|e| Status::internal(e.to_string()))?;
        let (job, checks) = (job.clone(), self.0.spot_checks.clone());
        let check = tokio::task::spawn_blocking(move || -> Result<Result<_, String>, Status> {
            let mut rng = rand::rng();
            let settings;
            let games = match &file {
                Some(file) => UnitGames::pgn(file, first, count),
                None if job.spec.generated => {
                    UnitGames::Generated { first: job.spec.first_generated + first as u64, count }
                }
                None => {
                    let spec =
                        job.spec.selfplay.as_ref().ok_or_else(|| Status::internal("a verification without games"))?;
                    settings = xq_proto::self_play_games(spec, network).map_err(|e| Status::internal(e.to_string()))?;
                    UnitGames::SelfPlay { settings: &settings, count }
                }
            };
            let cost = games.game_cost(job.rulings());
            let draws = checks.draw(SPOT_CHECKED_GAMES.min(count), cost);
            let check = spot_check(&lines, &job.scope(unit), games, draws, &mut rng);
            if let Ok(done) = &check {
                checks.charge(done.plies as f64 - draws as f64 * cost);
                checks.record(job_id, *done);
            }
            Ok(check)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))??;
        Ok(check.map(drop))
    }
}

#[tonic::async_trait]
impl v1::worker_server::Worker for WorkerApi {
    async fn register(&self, request: Request<v1::RegisterRequest>) -> Result<Response<v1::RegisterReply>, Status> {
        let worker = worker_of(&request)?;
        let capabilities = crate::scheduler::registration::check_registration(request.into_inner())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.0.scheduler.register(worker, capabilities).await?;
        let config = &self.0.scheduler.config;
        Ok(Response::new(v1::RegisterReply {
            worker_id: worker,
            heartbeat_seconds: config.heartbeat.as_secs().max(1) as u32,
            lease_seconds: config.lease_ttl.as_secs() as u32,
        }))
    }

    async fn heartbeat(&self, request: Request<v1::HeartbeatRequest>) -> Result<Response<v1::HeartbeatReply>, Status> {
        let worker = worker_of(&request)?;
        let leases = request.into_inner().lease_ids;
        if leases.len() > 1024 {
            return Err(Status::invalid_argument("more than 1024 leases"));
        }
        let cancelled_lease_ids = self.0.scheduler.heartbeat(worker, &leases);
        Ok(Response::new(v1::HeartbeatReply { cancelled_lease_ids }))
    }

    async fn lease(&self, request: Request<v1::LeaseRequest>) -> Result<Response<v1::LeaseReply>, Status> {
        let worker = worker_of(&request)?;
        self.0.check_reserve()?;
        let concurrency = request.into_inner().concurrency;
        let lease = self.0.scheduler.lease(worker, concurrency).await?;
        Ok(Response::new(v1::LeaseReply { lease }))
    }

    async fn report_pairs(
        &self,
        request: Request<v1::ReportPairsRequest>,
    ) -> Result<Response<v1::ReportReply>, Status> {
        let worker = worker_of(&request)?;
        let report = request.into_inner();
        let lease_id = report.lease_id;
        let reply = self.pairs_report(worker, report).await;
        self.counting_refusals(worker, lease_id, reply)
    }

    async fn upload_chunk(
        &self,
        request: Request<v1::UploadChunkRequest>,
    ) -> Result<Response<v1::ReportReply>, Status> {
        let worker = worker_of(&request)?;
        let upload = request.into_inner();
        let lease_id = upload.lease_id;
        let reply = self.chunk_report(worker, upload).await;
        self.counting_refusals(worker, lease_id, reply)
    }

    async fn report_verification(
        &self,
        request: Request<v1::VerificationReport>,
    ) -> Result<Response<v1::ReportReply>, Status> {
        let worker = worker_of(&request)?;
        let report = request.into_inner();
        let lease_id = report.lease_id;
        let reply = self.verification_report(worker, report).await;
        self.counting_refusals(worker, lease_id, reply)
    }

    type DownloadStream = Stream_<v1::ArtifactPiece>;

    async fn download(&self, request: Request<v1::DownloadRequest>) -> Result<Response<Self::DownloadStream>, Status> {
        worker_of(&request)?;
        let sha256 = request.into_inner().sha256;
        check_hash(&sha256).map_err(|e| Status::invalid_argument(e.to_string()))?;
        if self.0.storage.artifact(&sha256).await.map_err(|e| Status::unavailable(e.to_string()))?.is_none() {
            return Err(Status::not_found(format!("no artifact {sha256}")));
        }
        let path = self.0.artifacts.path(&sha256).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let mut file = tokio::fs::File::open(&path).await.map_err(|e| Status::unavailable(e.to_string()))?;
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            loop {
                let mut data = vec![0u8; ARTIFACT_PIECE_BYTES];
                match file.read(&mut data).await {
                    Ok(0) => return,
                    Ok(n) => {
                        data.truncate(n);
                        let piece = v1::ArtifactPiece { data, ..Default::default() };
                        if sender.send(Ok(piece)).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = sender.send(Err(Status::unavailable(e.to_string()))).await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }
}

#[tonic::async_trait]
impl v1::client_server::Client for ClientApi {
    async fn upload_artifact(
        &self,
        request: Request<Streaming<v1::ArtifactPiece>>,
    ) -> Result<Response<v1::ArtifactRef>, Status> {
        let caller = client_of(&request)?;
        self.0.check_reserve()?;
        crate::retention::check_stored_bytes(&self.0, &caller).await?;
        let mut pieces = request.into_inner();
        let first =
            pieces.message().await?.ok_or_else(|| Status::invalid_argument("an upload needs at least one piece"))?;
        if !matches!(first.kind.as_str(), "engine" | "book" | "net" | "pgn") {
            return Err(Status::invalid_argument(format!("kind '{}': use engine, book, net or pgn", first.kind)));
        }
        if first.name.is_empty() || first.name.len() > 200 || first.name.contains(['/', '\\', '\0']) {
            return Err(Status::invalid_argument("the first piece needs a file name (no path, at most 200 bytes)"));
        }
        let mut upload = self.0.artifacts.begin().await.map_err(|e| Status::unavailable(e.to_string()))?;
        let mut next = Some(first.clone());
        while let Some(piece) = next {
            if let Err(error) = upload.write(&piece.data).await {
                return Err(Status::invalid_argument(error.to_string()));
            }
            next = pieces.message().await?;
        }
        let sealed = self.0.artifacts.seal(upload).await.map_err(|e| Status::unavailable(e.to_string()))?;
        // The index keeps an artifact's first kind: the same bytes cannot become a
        // net or a book that was never checked as one.
        if let Some((name, kind, _)) =
            self.0.storage.artifact(&sealed.sha256).await.map_err(|e| Status::unavailable(e.to_string()))?
            && kind != first.kind
        {
            return Err(Status::invalid_argument(format!(
                "these bytes were uploaded before as the {kind} {name}, not as a {}",
                first.kind
            )));
        }
        // Checked while still under the temporary name, off the request runtime (a net,
        // a PGN or a book may be hundreds of megabytes), and kept only once they read:
        // a refused upload leaves nothing behind, and nothing unreadable is offered.
        let (path, kind, name) = (sealed.path().to_owned(), first.kind.clone(), first.name.clone());
        let checked = tokio::task::spawn_blocking(move || check_upload(&path, &kind, &name))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(Status::invalid_argument)?;
        let (sha256, size) = self.0.artifacts.keep(sealed).await.map_err(|e| Status::unavailable(e.to_string()))?;
        // Kept for what is likely to follow: a verification job with the net, or over the PGN.
        match checked {
            Checked::Net(net) => self.0.verification_nets.keep(&sha256, Arc::new(net)),
            Checked::Pgn(file) => self.0.pgn_files.keep(&sha256, Arc::new(file)),
            Checked::Other => {}
        }
        self.0.scheduler.index_artifact(&sha256, (&first.name, &first.kind, size), &caller.token_id).await?;
        Ok(Response::new(v1::ArtifactRef { sha256, name: first.name, size }))
    }

    async fn create_test(&self, request: Request<v1::CreateTestRequest>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        let key = request_key(&request)?;
        if let Some(job) = self.0.created_before(&caller, key.as_ref())? {
            return Ok(Response::new(job));
        }
        let request = request.into_inner();
        let job = check_test(&request).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let (kind, units) = match &job.sprt {
            Some(_) => ("sprt", if request.pairs == 0 { DEFAULT_SPRT_PAIRS } else { request.pairs }),
            None => ("games", request.pairs),
        };
        let origin = self.0.origin(&caller, key.as_ref());
        Ok(Response::new(self.0.create_match(&caller, origin, kind, job, units).await?))
    }

    async fn create_tournament(
        &self,
        request: Request<v1::CreateTournamentRequest>,
    ) -> Result<Response<v1::Tournament>, Status> {
        let caller = client_of(&request)?;
        let key = request_key(&request)?;
        Ok(Response::new(self.0.create_tournament(&caller, key.as_ref(), request.into_inner()).await?))
    }

    async fn get_tournament(&self, request: Request<v1::TournamentId>) -> Result<Response<v1::Tournament>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.tournament(request.get_ref().tournament_id).await?))
    }

    async fn list_tournaments(
        &self,
        request: Request<v1::ListTournamentsRequest>,
    ) -> Result<Response<v1::ListTournamentsReply>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.tournaments(request.get_ref().limit).await?))
    }

    type DownloadTournamentGamesStream = Stream_<v1::PgnBatch>;

    async fn stop_tournament(&self, request: Request<v1::TournamentId>) -> Result<Response<v1::Tournament>, Status> {
        let caller = client_of(&request)?;
        Ok(Response::new(self.0.stop_tournament(&caller, request.get_ref().tournament_id).await?))
    }

    async fn download_tournament_games(
        &self,
        request: Request<v1::TournamentId>,
    ) -> Result<Response<Self::DownloadTournamentGamesStream>, Status> {
        client_of(&request)?;
        let games = self.0.tournament_games(request.get_ref().tournament_id).await?;
        Ok(Response::new(Box::pin(games.map(|text| text.map(|pgn| v1::PgnBatch { pgn })))))
    }

    async fn create_verification(
        &self,
        request: Request<v1::CreateVerificationRequest>,
    ) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        let key = request_key(&request)?;
        if let Some(job) = self.0.created_before(&caller, key.as_ref())? {
            return Ok(Response::new(job));
        }
        Ok(Response::new(self.0.create_verification(&caller, key.as_ref(), request.into_inner()).await?))
    }

    async fn get_verification(&self, request: Request<v1::JobId>) -> Result<Response<v1::VerificationSummary>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.verification(request.get_ref().job_id).await?))
    }

    type DownloadVerificationStream = Stream_<v1::VerificationLines>;

    async fn download_verification(
        &self,
        request: Request<v1::JobId>,
    ) -> Result<Response<Self::DownloadVerificationStream>, Status> {
        client_of(&request)?;
        let lines = self.0.verification_lines(request.get_ref().job_id)?;
        Ok(Response::new(Box::pin(lines.map(|r| r.map(|jsonl| v1::VerificationLines { jsonl })))))
    }

    async fn create_spsa(&self, request: Request<v1::CreateSpsaRequest>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        let key = request_key(&request)?;
        if let Some(job) = self.0.created_before(&caller, key.as_ref())? {
            return Ok(Response::new(job));
        }
        let invalid = |e: crate::jobs::checks::SpecError| Status::invalid_argument(e.to_string());
        let job = check_spsa(request.get_ref()).map_err(invalid)?;
        check_spsa_bounds(request.get_ref()).map_err(invalid)?;
        let pairs = job.request.pairs;
        let origin = self.0.origin(&caller, key.as_ref());
        Ok(Response::new(self.0.create_match(&caller, origin, "spsa", job, pairs).await?))
    }

    async fn create_self_play(&self, request: Request<v1::CreateSelfPlayRequest>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        let key = request_key(&request)?;
        if let Some(job) = self.0.created_before(&caller, key.as_ref())? {
            return Ok(Response::new(job));
        }
        let request = request.into_inner();
        check_self_play(&request).map_err(|e| Status::invalid_argument(e.to_string()))?;
        may_prioritise(&caller, request.priority, DEFAULT_PRIORITY)?;
        crate::retention::check_quota(&self.0, &caller, 1).await?;
        if let Some(net) = request.spec.as_ref().and_then(|s| s.net.as_ref()) {
            self.0.uploaded(("spec.net", "net", "a net"), &net.sha256).await?;
        }
        let (units, priority, description) = (request.units, request.priority, request.description.clone());
        let spec = JobSpec::SelfPlay(request);
        let origin = self.0.origin(&caller, key.as_ref());
        let view = self.0.scheduler.create_job("selfplay", spec, units, (priority, &description), origin).await?;
        Ok(Response::new(view))
    }

    async fn list_jobs(&self, request: Request<v1::ListJobsRequest>) -> Result<Response<v1::ListJobsReply>, Status> {
        client_of(&request)?;
        Ok(Response::new(v1::ListJobsReply { jobs: self.0.scheduler.jobs(request.get_ref()) }))
    }

    async fn get_job(&self, request: Request<v1::JobId>) -> Result<Response<v1::Job>, Status> {
        client_of(&request)?;
        let id = request.into_inner().job_id;
        self.0.scheduler.job(id).map(Response::new).ok_or_else(|| Status::not_found(format!("job {id}")))
    }

    async fn stop_job(&self, request: Request<v1::JobId>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        Ok(Response::new(self.0.stop_job(&caller, request.into_inner().job_id).await?))
    }

    async fn set_priority(&self, request: Request<v1::SetPriorityRequest>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        let request = request.into_inner();
        Ok(Response::new(self.0.set_priority(&caller, request.job_id, request.priority).await?))
    }

    type WatchJobStream = Stream_<v1::Job>;

    async fn watch_job(&self, request: Request<v1::JobId>) -> Result<Response<Self::WatchJobStream>, Status> {
        client_of(&request)?;
        let hash = request.extensions().get::<TokenHash>().map(|hash| hash.0.clone()).unwrap_or_default();
        let place = self
            .0
            .followers
            .join(request.remote_addr().map(|address| address.ip()))
            .map_err(|full| Status::resource_exhausted(full.to_string()))?;
        let id = request.into_inner().job_id;
        let mut changes = self.0.scheduler.watch(id).ok_or_else(|| Status::not_found(format!("job {id}")))?;
        let scheduler = self.0.scheduler.clone();
        let (sender, receiver) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let _place = place;
            loop {
                let Some(job) = scheduler.job(id) else { return };
                let running = job.state == "running" || job.state == "pending";
                if sender.send(Ok(job)).await.is_err() || !running {
                    return;
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    // The follower left (or its token was revoked): the place goes back.
                    () = sender.closed() => return,
                }
                // Coalesce bursts: at most a few updates a second.
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        });
        let revoked = Status::unauthenticated("the token this stream was opened with was revoked or has expired");
        let end = self.0.scheduler.out_of_force(hash);
        Ok(Response::new(Box::pin(UntilOutOfForce::new(ReceiverStream::new(receiver), end, Err(revoked)))))
    }

    async fn get_job_history(&self, request: Request<v1::JobId>) -> Result<Response<v1::JobHistory>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.job_history(request.into_inner().job_id).await?))
    }

    async fn list_pairs(&self, request: Request<v1::ListPairsRequest>) -> Result<Response<v1::ListPairsReply>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.pairs(request.get_ref()).await?))
    }

    async fn get_pair(&self, request: Request<v1::PairId>) -> Result<Response<v1::JudgedPair>, Status> {
        client_of(&request)?;
        let pair = request.into_inner();
        Ok(Response::new(self.0.judged_pair(pair.job_id, pair.unit).await?))
    }

    async fn list_workers(
        &self,
        request: Request<v1::ListWorkersRequest>,
    ) -> Result<Response<v1::ListWorkersReply>, Status> {
        client_of(&request)?;
        Ok(Response::new(v1::ListWorkersReply { workers: self.0.scheduler.workers() }))
    }

    async fn create_worker_token(
        &self,
        request: Request<v1::CreateWorkerTokenRequest>,
    ) -> Result<Response<v1::CreateWorkerTokenReply>, Status> {
        let caller = admin_of(&request)?;
        let name = request.into_inner().name;
        if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
            return Err(Status::invalid_argument("a worker name of 1 to 128 printable characters"));
        }
        let (id, token) = self.0.scheduler.create_worker(&name).await?;
        self.0.scheduler.audit(&caller.token_id, "worker.create", &format!("{id} '{name}'")).await?;
        Ok(Response::new(v1::CreateWorkerTokenReply { token }))
    }

    async fn set_worker_standing(
        &self,
        request: Request<v1::SetWorkerStandingRequest>,
    ) -> Result<Response<v1::WorkerInfo>, Status> {
        let caller = admin_of(&request)?;
        let request = request.into_inner();
        let info = self.0.scheduler.set_standing(request.worker_id, &request.standing, &request.reason).await?;
        let detail = format!("{} {} '{}'", request.worker_id, request.standing, request.reason);
        self.0.scheduler.audit(&caller.token_id, "worker.standing", &detail).await?;
        Ok(Response::new(info))
    }

    async fn create_token(
        &self,
        request: Request<v1::CreateTokenRequest>,
    ) -> Result<Response<v1::CreateTokenReply>, Status> {
        let caller = admin_of(&request)?;
        let request = request.into_inner();
        let role = match request.role.as_str() {
            "admin" => Role::Admin,
            "submitter" => Role::Submitter,
            other => return Err(Status::invalid_argument(format!("role '{other}': use admin or submitter"))),
        };
        if request.name.is_empty() {
            return Err(Status::invalid_argument("name: say who the token is for"));
        }
        let expires_ms = match request.expires_seconds {
            0 => 0,
            seconds => crate::storage::now_ms()
                .saturating_add(i64::try_from(seconds.min(100 * 365 * 86_400)).unwrap_or(0) * 1000),
        };
        let token = self.0.scheduler.create_token(role, &request.name, expires_ms, &caller.token_id).await?;
        let id = crate::access::tokens::token_id(&crate::access::tokens::token_hash(&token)).to_owned();
        Ok(Response::new(v1::CreateTokenReply { token, id }))
    }

    async fn list_tokens(
        &self,
        request: Request<v1::ListTokensRequest>,
    ) -> Result<Response<v1::ListTokensReply>, Status> {
        admin_of(&request)?;
        let rows = self.0.storage.tokens().await.map_err(|e| Status::unavailable(e.to_string()))?;
        let tokens = rows
            .into_iter()
            .map(|row| v1::TokenInfo {
                id: crate::access::tokens::token_id(&row.hash).to_owned(),
                role: row.role,
                name: row.name,
                worker_id: row.worker_id.map_or(0, |id| id as u64),
                created_ms: row.created_ms,
                expires_ms: row.expires_ms,
                revoked_ms: row.revoked_ms,
            })
            .collect();
        Ok(Response::new(v1::ListTokensReply { tokens }))
    }

    async fn revoke_token(
        &self,
        request: Request<v1::RevokeTokenRequest>,
    ) -> Result<Response<v1::RevokeTokenReply>, Status> {
        let caller = admin_of(&request)?;
        self.0.scheduler.revoke_token(&request.into_inner().id, &caller.token_id).await?;
        Ok(Response::new(v1::RevokeTokenReply {}))
    }

    async fn approve_job(&self, request: Request<v1::JobId>) -> Result<Response<v1::Job>, Status> {
        let caller = admin_of(&request)?;
        let id = request.into_inner().job_id;
        let job = self.0.scheduler.approve(id).await?;
        self.0.scheduler.audit(&caller.token_id, "job.approve", &id.to_string()).await?;
        Ok(Response::new(job))
    }

    async fn list_audit(&self, request: Request<v1::ListAuditRequest>) -> Result<Response<v1::ListAuditReply>, Status> {
        admin_of(&request)?;
        let limit = match request.into_inner().limit {
            0 => 100,
            n => i64::from(n.min(10_000)),
        };
        let rows = self.0.storage.audit_log(limit).await.map_err(|e| Status::unavailable(e.to_string()))?;
        let entries = rows
            .into_iter()
            .map(|row| v1::AuditEntry { at_ms: row.at_ms, actor: row.actor, action: row.action, detail: row.detail })
            .collect();
        Ok(Response::new(v1::ListAuditReply { entries }))
    }

    type DownloadGamesStream = Stream_<v1::PgnBatch>;

    async fn download_games(&self, request: Request<v1::JobId>) -> Result<Response<Self::DownloadGamesStream>, Status> {
        client_of(&request)?;
        let id = request.into_inner().job_id;
        let stream = self
            .0
            .unit_bytes(id, Stored::Games)?
            .map(|r| r.map(|(_, bytes)| v1::PgnBatch { pgn: String::from_utf8_lossy(&bytes).into_owned() }));
        Ok(Response::new(Box::pin(stream)))
    }

    type StreamTrainingDataStream = Stream_<v1::TrainingChunk>;

    async fn stream_training_data(
        &self,
        request: Request<v1::JobId>,
    ) -> Result<Response<Self::StreamTrainingDataStream>, Status> {
        client_of(&request)?;
        let id = request.into_inner().job_id;
        let stream =
            self.0.unit_bytes(id, Stored::Chunks)?.map(|r| r.map(|(unit, chunk)| v1::TrainingChunk { unit, chunk }));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn add_net(&self, request: Request<v1::AddNetRequest>) -> Result<Response<v1::Net>, Status> {
        let caller = client_of(&request)?;
        let request = request.into_inner();
        let sha256 = request.artifact.as_ref().map(|a| a.sha256.as_str()).unwrap_or_default();
        check_hash(sha256).map_err(|e| Status::invalid_argument(format!("artifact: {e}")))?;
        let indexed = self.0.storage.artifact(sha256).await.map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(self.0.nets.add(&request, indexed, &self.0.scheduler, &caller).await?))
    }

    async fn set_net_test(&self, request: Request<v1::SetNetTestRequest>) -> Result<Response<v1::Net>, Status> {
        let caller = client_of(&request)?;
        let request = request.into_inner();
        Ok(Response::new(self.0.nets.set_test(request.net_id, request.test_job_id, &self.0.scheduler, &caller).await?))
    }

    async fn list_nets(&self, request: Request<v1::ListNetsRequest>) -> Result<Response<v1::ListNetsReply>, Status> {
        client_of(&request)?;
        let lineage = request.into_inner().lineage;
        Ok(Response::new(v1::ListNetsReply { nets: self.0.nets.list(&lineage, &self.0.scheduler) }))
    }
}

/// Where a unit counted by records is stored: `dir/JOB/UNIT-LEASE-DIGEST.extension`;
/// `what` names it in errors.
struct UnitFile {
    dir: &'static str,
    extension: &'static str,
    what: &'static str,
}

impl UnitFile {
    /// The file, under the data directory, of `bytes` uploaded for `unit` on a lease:
    /// each distinct upload its own.
    fn path(&self, context: &LeaseContext, unit: u64, bytes: &[u8]) -> String {
        let UnitFile { dir, extension, .. } = self;
        format!("{dir}/{}/{unit}-{}-{}.{extension}", context.job_id, context.lease_id, chunk_digest(bytes))
    }
}

/// Where a verification unit's report is stored.
const REPORT_FILE: UnitFile =
    UnitFile { dir: crate::storage::layout::VERIFICATION_DIR, extension: "jsonl", what: "report" };

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
    fn noun(self) -> &'static str {
        match self {
            Stored::Games => "games",
            Stored::Chunks => "training data",
            Stored::Reports => "verification reports",
        }
    }

    fn job(self) -> &'static str {
        match self {
            Stored::Games => "a match",
            Stored::Chunks => "a self-play job",
            Stored::Reports => "a verification job",
        }
    }
}

/// A job's stored units: (unit, bytes).
pub type UnitStream = ReceiverStream<Result<(u64, Vec<u8>), Status>>;

/// What the gRPC client API and the dashboard's JSON API both serve, written once.
impl Shared {
    /// Refuses new work while the disk is below its reserve (see [`crate::storage::disk`]).
    fn check_reserve(&self) -> Result<(), Status> {
        crate::storage::disk::check_reserve(&self.data_dir, self.scheduler.config.reserve_bytes)
            .map_err(Status::resource_exhausted)
    }

    /// Where a job `caller` creates comes from: a submitter's waits for an admin's
    /// approval when the server asks for it; `request` is the client's name for it.
    fn origin<'a>(&self, caller: &'a Caller, request: Option<&'a RequestKey>) -> crate::scheduler::Origin<'a> {
        let pending = caller.role == Role::Submitter && self.scheduler.config.require_approval;
        crate::scheduler::Origin { submitter: &caller.token_id, pending, request }
    }

    /// The job an earlier call named by `key` made for `caller`: a retry's answer,
    /// looked for before the quota and the checks that the first call changed. A name
    /// that made a tournament is refused, naming it.
    fn created_before(&self, caller: &Caller, key: Option<&RequestKey>) -> Result<Option<v1::Job>, Status> {
        let Some(key) = key else { return Ok(None) };
        if let Some(event) = self.own_event_named(caller, key) {
            return Err(Status::invalid_argument(format!(
                "request id '{}' made tournament {}: a new request needs a new id",
                key.id, event.id
            )));
        }
        Ok(self.scheduler.created_before(&caller.token_id, key)?)
    }

    /// The event `caller` made under `key`'s request id, if any.
    fn own_event_named(&self, caller: &Caller, key: &RequestKey) -> Option<crate::storage::TournamentRow> {
        self.tournaments.named(&key.id).into_iter().find(|row| self.event_owner(row) == caller.token_id)
    }

    /// The tournament an earlier call named by `key` made for `caller`: a retry's
    /// answer, looked for before the quota that the first call used. The name used for
    /// another request, or for a job, is refused, naming what it made.
    fn tournament_created_before(&self, caller: &Caller, key: &RequestKey) -> Result<Option<u64>, Status> {
        if let Some(job) = self.scheduler.created_before(&caller.token_id, key)? {
            return Err(Status::invalid_argument(format!(
                "request id '{}' made job {}: a new request needs a new id",
                key.id, job.job_id
            )));
        }
        match self.own_event_named(caller, key) {
            None => Ok(None),
            Some(event) if event.request_digest == key.digest => Ok(Some(event.id as u64)),
            Some(event) => Err(Status::invalid_argument(format!(
                "request id '{}' made tournament {} from another request: a new request needs a new id",
                key.id, event.id
            ))),
        }
    }

    /// Creates a tournament for `caller` with its first tests, all stored together or
    /// none (see [`Tournaments::add`]); one named by `key` is made once per request id
    /// (a retry gets the event the first call made).
    pub async fn create_tournament(
        &self,
        caller: &Caller,
        key: Option<&RequestKey>,
        request: v1::CreateTournamentRequest,
    ) -> Result<v1::Tournament, Status> {
        let _named = match key {
            Some(key) => {
                let guard = self.tournaments.named_creation().await;
                if let Some(id) = self.tournament_created_before(caller, key)? {
                    return self.tournament(id).await;
                }
                Some(guard)
            }
            None => None,
        };
        let tests = crate::jobs::tournament::plan(&request).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let waits = self.origin(caller, None).pending;
        let tests = self.new_tests(caller, tests.into_iter().map(|test| (test, waits)).collect()).await?;
        let id = self
            .tournaments
            .add(&request, key, tests, &self.scheduler)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        self.tournament(id).await
    }

    /// Creates a verification job over an uploaded PGN, a test's stored games (copied
    /// into a PGN artifact, so that workers fetch them as any artifact), its games
    /// counted here as workers will cut them, or fresh self-play games the workers play.
    pub async fn create_verification(
        &self,
        caller: &Caller,
        key: Option<&RequestKey>,
        request: v1::CreateVerificationRequest,
    ) -> Result<v1::Job, Status> {
        let invalid = |e: crate::jobs::checks::SpecError| Status::invalid_argument(e.to_string());
        crate::jobs::checks::check_name("description", &request.description, 200).map_err(invalid)?;
        let rules = crate::jobs::verification::rule_sets(&request.rules).map_err(invalid)?;
        may_prioritise(caller, request.priority, DEFAULT_PRIORITY)?;
        crate::retention::check_quota(self, caller, 1).await?;
        self.check_reserve()?;
        let sources =
            [request.pgn.is_some() || request.test_job_id != 0, request.selfplay.is_some(), request.generated];
        if sources.iter().filter(|&&named| named).count() > 1 {
            return Err(Status::invalid_argument(
                "selfplay: games from a PGN or a test, self-play games, or generated games: one of them",
            ));
        }
        let pgn = match (request.pgn, request.test_job_id, &request.selfplay) {
            (Some(pgn), _, _) => Some(self.uploaded(("pgn", "pgn", "a PGN"), &pgn.sha256).await?),
            (None, test, _) if test != 0 => Some(self.store_test_games(test).await?),
            (None, _, Some(_)) => None,
            (None, _, None) if request.generated => None,
            (None, _, None) => {
                return Err(Status::invalid_argument(
                    "pgn: name an uploaded PGN, test_job_id a test whose games to verify, selfplay games to play, or \
                     generated games",
                ));
            }
        };
        let (games, selfplay) = match &pgn {
            Some(pgn) => (self.pgn_file(pgn).await?.len() as u64, None),
            None => (request.games, request.selfplay),
        };
        let games_per_unit = match request.games_per_unit {
            0 if request.generated => crate::jobs::verification::DEFAULT_GENERATED_PER_UNIT,
            0 => crate::jobs::verification::DEFAULT_GAMES_PER_UNIT,
            n => n,
        };
        let rules = rules.iter().map(|r| r.name().to_owned()).collect();
        let spec = v1::VerificationSpec {
            pgn,
            rules,
            games_per_unit,
            games,
            reference: request.reference,
            selfplay,
            generated: request.generated,
            first_generated: request.first_generated,
            metamorphic: request.metamorphic,
        };
        let job = crate::jobs::verification::check_spec(&spec).map_err(invalid)?;
        let units = job.units();
        let job = JobSpec::Verify(Box::new(job));
        let identity = (request.priority, request.description.as_str());
        Ok(self.scheduler.create_job("verify", job, units, identity, self.origin(caller, key)).await?)
    }

    /// The uploaded artifact `sha256`, which request field `field` names and which must
    /// be of `kind` (`described` so in the error otherwise).
    async fn uploaded(
        &self,
        (field, kind, described): (&str, &str, &str),
        sha256: &str,
    ) -> Result<v1::ArtifactRef, Status> {
        match self.storage.artifact(sha256).await.map_err(|e| Status::unavailable(e.to_string()))? {
            Some((name, stored, size)) if stored == kind => {
                Ok(v1::ArtifactRef { sha256: sha256.to_owned(), name, size })
            }
            Some((name, stored, _)) => {
                Err(Status::invalid_argument(format!("{field}: artifact {name} is a {stored}, not {described}")))
            }
            None => Err(Status::failed_precondition(format!("artifact {sha256} has not been uploaded"))),
        }
    }

    /// Copies test `id`'s stored games into a PGN artifact.
    async fn store_test_games(&self, id: u64) -> Result<v1::ArtifactRef, Status> {
        let mut units = self.unit_bytes(id, Stored::Games)?;
        let mut upload = self.artifacts.begin().await.map_err(|e| Status::unavailable(e.to_string()))?;
        while let Some(unit) = units.next().await {
            let (_, bytes) = unit?;
            upload.write(&bytes).await.map_err(|e| Status::unavailable(e.to_string()))?;
        }
        let sealed = self.artifacts.seal(upload).await.map_err(|e| Status::unavailable(e.to_string()))?;
        let (sha256, size) = self.artifacts.keep(sealed).await.map_err(|e| Status::unavailable(e.to_string()))?;
        let name = format!("job-{id}.pgn");
        // The coordinator's own copy: no submitter's upload.
        self.scheduler.index_artifact(&sha256, (&name, "pgn", size), "").await?;
        Ok(v1::ArtifactRef { sha256, name, size })
    }

    /// A verification job's report lines (each parting or unplayable game), a unit's at
    /// a time, without the units' tallies.
    pub fn verification_lines(&self, id: u64) -> Result<impl Stream<Item = Result<String, Status>> + use<>, Status> {
        let reports = self.unit_bytes(id, Stored::Reports)?;
        Ok(reports
            .map(|r| r.map(|(_, bytes)| crate::jobs::verification::report_games(&String::from_utf8_lossy(&bytes)))))
    }

    /// A verification PGN, decoded and cut into games (kept for the spot checks of the
    /// job's reports).
    pub async fn pgn_file(&self, pgn: &v1::ArtifactRef) -> Result<Arc<PgnFile>, Status> {
        let path = self.artifacts.path(&pgn.sha256).map_err(|e| Status::internal(e.to_string()))?;
        let read = move || {
            let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
            PgnFile::read(&bytes).map_err(|e| e.to_string())
        };
        self.pgn_files.get_or_read(&pgn.sha256, read).await.map_err(|error| match error {
            ReadError::Refused(problem) => Status::invalid_argument(format!("pgn {}: {problem}", pgn.name)),
            ReadError::Failed(problem) => Status::internal(format!("pgn {}: {problem}", pgn.name)),
        })
    }

    /// A verification job's net for its fresh self-play games, loaded (and kept for
    /// the spot checks of the job's reports).
    pub async fn verification_net(&self, net: &v1::ArtifactRef) -> Result<Arc<Network>, Status> {
        let path = self.artifacts.path(&net.sha256).map_err(|e| Status::internal(e.to_string()))?;
        let read = move || Network::load(&path).map_err(|e| e.to_string());
        let loaded = self.verification_nets.get_or_read(&net.sha256, read).await;
        loaded.map_err(|problem| Status::internal(format!("net {}: {problem}", net.name)))
    }

    /// A verification job's counts: the tallies of its stored reports, summed.
    pub async fn verification(&self, id: u64) -> Result<v1::VerificationSummary, Status> {
        let spec = self.scheduler.spec(id).ok_or_else(|| Status::not_found(format!("job {id}")))?;
        let JobSpec::Verify(job) = &*spec else {
            return Err(Status::invalid_argument(format!("job {id} is not a verification job")));
        };
        use crate::jobs::verification::TallyRead;
        let tally = match self.tallies.read(id) {
            TallyRead::Kept(tally) => tally,
            TallyRead::Load => match self.stored_tallies(id).await {
                Ok(stored) => self.tallies.loaded(id, stored),
                Err(status) => {
                    self.tallies.failed(id);
                    return Err(status);
                }
            },
            TallyRead::Busy => {
                let mut tally = Tally::default();
                for (_, unit) in self.stored_tallies(id).await? {
                    tally.merge(&unit);
                }
                tally
            }
        };
        Ok(v1::VerificationSummary {
            job_id: id,
            rules: job.rules.iter().map(|r| r.name().to_owned()).collect(),
            games_total: job.spec.games,
            games: tally.games,
            refused: tally.refused,
            parting: tally.parting,
            by_kind: tally.by_kind.into_iter().collect(),
            by_articles: tally.by_articles.into_iter().collect(),
            spot_checked_games: self.spot_checks.of_job(id).games,
            rechecked_lines: self.spot_checks.of_job(id).lines,
            metamorphic: tally.metamorphic,
        })
    }

    /// Where job `id`'s `unit` is stored, if it is counted.
    async fn counted_unit(&self, id: u64, unit: u64) -> Result<Option<crate::storage::UnitFile>, Status> {
        let page = self.storage.unit_files(id as i64, unit.checked_sub(1), 1).await;
        Ok(page.map_err(|e| Status::unavailable(e.to_string()))?.into_iter().find(|u| u.unit == unit))
    }

    /// Verification job `id`'s counted report of `unit`, as stored.
    async fn counted_report(&self, id: u64, unit: u64) -> Result<String, Status> {
        // Set aside since the report came (its worker quarantined): sent again, the
        // report counts the unit.
        let stored = self.counted_unit(id, unit).await?.ok_or_else(|| {
            Status::unavailable(format!("job {id}'s unit {unit} is no longer counted: send the report again"))
        })?;
        let bytes = read_slice(self.data_dir.join(&stored.file), stored.offset, stored.length)
            .await
            .map_err(|e| Status::unavailable(format!("{}: {e}", stored.file)))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The tallies of verification job `id`'s stored reports, a unit each.
    async fn stored_tallies(&self, id: u64) -> Result<Vec<(u64, Tally)>, Status> {
        let mut tallies = Vec::new();
        let mut reports = self.unit_bytes(id, Stored::Reports)?;
        while let Some(report) = reports.next().await {
            let (unit, bytes) = report?;
            let tally = xq_engine::xiangqi::rules::verify::report_tally(&String::from_utf8_lossy(&bytes))
                .ok_or_else(|| Status::data_loss(format!("job {id}'s report of unit {unit} has no tally")))?;
            tallies.push((unit, tally));
        }
        Ok(tallies)
    }

    /// Refuses `caller` a change to job `id` unless an admin or its submitter.
    fn may_change(&self, caller: &Caller, id: u64) -> Result<(), Status> {
        match self.scheduler.submitter(id) {
            None => Err(Status::not_found(format!("job {id}"))),
            Some(_) if caller.role == Role::Admin => Ok(()),
            Some(submitter) if submitter == caller.token_id => Ok(()),
            Some(_) => Err(Status::permission_denied(format!(
                "job {id} is another submitter's: they or an admin may change it"
            ))),
        }
    }

    /// Creates a match job (a test or an SPSA run) once its artifacts are known and
    /// its book reads, within the caller's quota.
    async fn create_match(
        &self,
        caller: &Caller,
        origin: crate::scheduler::Origin<'_>,
        kind: &str,
        job: MatchJob,
        units: u64,
    ) -> Result<v1::Job, Status> {
        crate::retention::check_quota(self, caller, 1).await?;
        let (priority, description) = (job.request.priority, job.request.description.clone());
        let job = self.checked_match(caller, job).await?;
        Ok(self.scheduler.create_job(kind, job, units, (priority, &description), origin).await?)
    }

    /// Checks a match job (a test, an SPSA run, a tournament's test) for `caller`: its
    /// priority, its artifacts uploaded, its book read.
    async fn checked_match(&self, caller: &Caller, mut job: MatchJob) -> Result<JobSpec, Status> {
        may_prioritise(caller, job.request.priority, DEFAULT_PRIORITY)?;
        let request = job.request.clone();
        let mut hashes = Vec::new();
        for engine in [&request.new_engine, &request.base_engine].into_iter().flatten() {
            hashes.extend(engine.binary.iter().map(|b| b.sha256.clone()));
            hashes.extend(engine.net.iter().map(|b| b.sha256.clone()));
        }
        hashes.extend(request.book.iter().map(|b| b.sha256.clone()));
        for sha256 in &hashes {
            if self.storage.artifact(sha256).await.map_err(|e| Status::unavailable(e.to_string()))?.is_none() {
                return Err(Status::failed_precondition(format!("artifact {sha256} has not been uploaded")));
            }
        }
        if let Some(book) = &request.book {
            job.openings =
                Some(load_openings(self, &book.sha256, job.variant).await.map_err(Status::invalid_argument)?);
        }
        Ok(JobSpec::Match(Box::new(job)))
    }

    /// The newest `limit` tournaments (0: 100, at most 1,000), each as [`Self::tournament`].
    pub async fn tournaments(&self, limit: u32) -> Result<v1::ListTournamentsReply, Status> {
        let limit = if limit == 0 { 100 } else { limit.min(1_000) } as usize;
        let mut tournaments = Vec::new();
        for id in self.tournaments.newest(limit) {
            // One event that cannot be shown does not hide the others: it is listed,
            // saying why.
            match self.tournament(id).await {
                Ok(tournament) => tournaments.push(tournament),
                Err(status) if status.code() == tonic::Code::FailedPrecondition => {
                    let created_ms = self.tournaments.get(id).map_or(0, |row| row.created_ms);
                    tournaments.push(v1::Tournament {
                        tournament_id: id,
                        state: "unreadable".to_owned(),
                        created_ms,
                        problem: status.message().to_owned(),
                        ..Default::default()
                    });
                }
                Err(status) => return Err(status),
            }
        }
        Ok(v1::ListTournamentsReply { tournaments })
    }

    /// A tournament's pairings and standings, from its tests' counted pairs.
    pub async fn tournament(&self, id: u64) -> Result<v1::Tournament, Status> {
        let row = self.tournaments.get(id).ok_or_else(|| Status::not_found(format!("tournament {id}")))?;
        let results = self.pairing_results(&row).await?;
        crate::jobs::tournament::view(&row, &results).map_err(Status::internal)
    }

    async fn pairing_results(&self, row: &crate::storage::TournamentRow) -> Result<Vec<PairingResults>, Status> {
        let mut results = Vec::with_capacity(row.job_ids.len());
        for &job_id in &row.job_ids {
            let event = row.id;
            let job = self.scheduler.job(job_id).ok_or_else(|| {
                Status::failed_precondition(format!("tournament {event}: its test {job_id} is not stored"))
            })?;
            // A test this version cannot read back is shown stopped, with the reason,
            // when its engines are known; without them its pairing cannot be placed.
            if let Some(JobSpec::Unreadable(unreadable)) = self.scheduler.spec(job_id).as_deref()
                && unreadable.request.is_none()
            {
                return Err(Status::failed_precondition(format!(
                    "tournament {event}: its test {job_id} cannot be read back by this version: {}",
                    unreadable.problem
                )));
            }
            let pairs = match self.pair_points.get(&job) {
                Some(pairs) => pairs,
                None => {
                    let read = self.storage.pair_points(job_id as i64).await;
                    let pairs = Arc::new(
                        read.map_err(|e| Status::unavailable(e.to_string()))?.into_iter().map(|(_, p)| p).collect(),
                    );
                    self.pair_points.keep(&job, Arc::clone(&pairs));
                    pairs
                }
            };
            results.push(PairingResults { job, pairs: Arc::unwrap_or_clone(pairs) });
        }
        Ok(results)
    }

    /// Looks after every event not yet over, each on its own (one event's trouble does
    /// not hold up the others): an event stopped, or one of whose tests ended without
    /// finishing, stops its other tests and makes no more; a Swiss event or knockout
    /// whose tests all finished makes its next round or tie-breaks. Returns the events
    /// that made new tests, and those that could not be looked after, with the reason.
    pub async fn advance_staged_events(&self) -> (Vec<u64>, Vec<(u64, Status)>) {
        let (mut advanced, mut failed) = (Vec::new(), Vec::new());
        for id in self.tournaments.open_ids() {
            match self.tend_event(id).await {
                Ok(true) => advanced.push(id),
                Ok(false) => {}
                Err(status) => failed.push((id, status)),
            }
        }
        (advanced, failed)
    }

    /// Looks after event `id` (see [`Self::advance_staged_events`]); whether it made tests.
    async fn tend_event(&self, id: u64) -> Result<bool, Status> {
        let Some(row) = self.tournaments.get(id) else { return Ok(false) };
        // A test that is gone (a database edited by hand) stops its event.
        let states: Vec<String> =
            row.job_ids.iter().map(|&job| self.scheduler.job(job).map_or_else(String::new, |j| j.state)).collect();
        match crate::jobs::tournament::event_state(&row, states.iter().map(String::as_str)) {
            EventState::Playing => Ok(false),
            EventState::Stopped => {
                self.stop_event_tests(&row).await?;
                self.tournaments.conclude(id);
                Ok(false)
            }
            EventState::Settled => self.make_next_tests(&row).await,
        }
    }

    /// Makes the tests that follow in a settled event: a Swiss round, or a knockout's
    /// tie-breaks or next round (see [`crate::jobs::tournament::FollowUp`]), for the token
    /// that made its first tests as that token would make them: under its quotas and,
    /// for a submitter on a coordinator that asks for approval, waiting for it when no
    /// approved test covers them. An event with nothing to follow is over.
    async fn make_next_tests(&self, row: &crate::storage::TournamentRow) -> Result<bool, Status> {
        let id = row.id as u64;
        let results = self.pairing_results(row).await?;
        let Some(tests) = crate::jobs::tournament::next_round_tests(row, &results).map_err(Status::internal)? else {
            self.tournaments.conclude(id);
            return Ok(false);
        };
        let owner = self.event_owner(row);
        // A token no longer in force is taken for a submitter: it gains nothing by going.
        let role = self.scheduler.role_of(&owner).unwrap_or(Role::Submitter);
        let caller = Caller { role, token_id: owner };
        // The whole round within the maker's limit of active jobs, or none of it: a
        // round refused halfway would make and stop tests at every look.
        let limit = self.scheduler.config.submitter_active_jobs;
        let active = self.scheduler.active_jobs_of(&caller.token_id);
        if role == Role::Submitter && limit > 0 && active + tests.len() > limit {
            return Err(Status::resource_exhausted(format!(
                "the next {} tests wait: submitter {} has {active} running or pending jobs of at most {limit}",
                tests.len(),
                caller.token_id
            )));
        }
        let approval_asked = self.origin(&caller, None).pending;
        let tests = tests.into_iter().map(|f| (f.test, approval_asked && f.unplayed_engine)).collect();
        let tests = self.new_tests(&caller, tests).await?;
        match self.tournaments.extend(id, tests, &self.scheduler).await {
            Ok(()) => Ok(true),
            // None of the round was made: a stop ends the event at the next look, a
            // write error makes the round again then.
            Err(ExtendError::Stopped(_)) => Ok(false),
            Err(ExtendError::Write(error)) => Err(Status::unavailable(error.to_string())),
        }
    }

    /// The token that made the event's first tests, whose event it is.
    fn event_owner(&self, row: &crate::storage::TournamentRow) -> String {
        row.job_ids.first().and_then(|&job| self.scheduler.submitter(job)).unwrap_or_default()
    }

    /// Stops tournament `id` for `caller` (an admin, or the token that made it): it
    /// makes no more tests, and its tests that wait or play stop.
    pub async fn stop_tournament(&self, caller: &Caller, id: u64) -> Result<v1::Tournament, Status> {
        let not_found = || Status::not_found(format!("tournament {id}"));
        let row = self.tournaments.get(id).ok_or_else(not_found)?;
        if caller.role != Role::Admin && self.event_owner(&row) != caller.token_id {
            return Err(Status::permission_denied(format!(
                "tournament {id} is another submitter's: they or an admin may stop it"
            )));
        }
        let row =
            self.tournaments.stop(id).await.map_err(|e| Status::unavailable(e.to_string()))?.ok_or_else(not_found)?;
        self.stop_event_tests(&row).await?;
        self.tournaments.conclude(id);
        self.scheduler.audit(&caller.token_id, "tournament.stop", &id.to_string()).await?;
        self.tournament(id).await
    }

    /// Stops the tests of a stopped event that still wait or play, saying why.
    async fn stop_event_tests(&self, row: &crate::storage::TournamentRow) -> Result<(), Status> {
        let outcome = format!("tournament {} stopped", row.id);
        for &job in &row.job_ids {
            match self.scheduler.end_job(job, "stopped", &outcome).await {
                Ok(_) | Err(ScheduleError::NotFound(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// Checks a tournament's `tests` (each with whether it waits for an admin's
    /// approval) for `caller`, within its quotas all at once, and numbers them; they are
    /// stored with their event or not at all ([`Tournaments::add`],
    /// [`Tournaments::extend`]), so that no half-made event or round is left running.
    async fn new_tests(&self, caller: &Caller, tests: Vec<(MatchJob, bool)>) -> Result<Vec<NewJob>, Status> {
        crate::retention::check_quota(self, caller, tests.len()).await?;
        let mut checked = Vec::with_capacity(tests.len());
        for (test, pending) in tests {
            let (pairs, priority, description) =
                (test.request.pairs, test.request.priority, test.request.description.clone());
            let spec = self.checked_match(caller, test).await?;
            let origin = crate::scheduler::Origin { submitter: &caller.token_id, pending, request: None };
            checked.push(self.scheduler.new_job("games", spec, pairs, (priority, &description), origin)?);
        }
        Ok(checked)
    }

    /// Stops job `id` for `caller`.
    pub async fn stop_job(&self, caller: &Caller, id: u64) -> Result<v1::Job, Status> {
        self.may_change(caller, id)?;
        let job = self.scheduler.end_job(id, "stopped", "").await?;
        self.scheduler.audit(&caller.token_id, "job.stop", &id.to_string()).await?;
        Ok(job)
    }

    /// Changes job `id`'s priority for `caller`.
    pub async fn set_priority(&self, caller: &Caller, id: u64, priority: i32) -> Result<v1::Job, Status> {
        self.may_change(caller, id)?;
        let current = self.scheduler.job(id).ok_or_else(|| Status::not_found(format!("job {id}")))?.priority;
        may_prioritise(caller, priority, current)?;
        let job = self.scheduler.set_priority(id, priority).await?;
        self.scheduler.audit(&caller.token_id, "job.priority", &format!("{id} {priority}")).await?;
        Ok(job)
    }

    /// A test's course (see [`crate::jobs::test::course::Course`]).
    pub async fn job_history(&self, id: u64) -> Result<v1::JobHistory, Status> {
        let spec = self.scheduler.spec(id).ok_or_else(|| Status::not_found(format!("job {id}")))?;
        let JobSpec::Match(job) = &*spec else {
            return Err(Status::invalid_argument(format!("job {id} is a self-play job: it has no results")));
        };
        let course = match self.scheduler.course(id) {
            Some(course) => course,
            None => {
                // A test that ended before the coordinator started: read once, then kept.
                let pairs =
                    self.storage.pair_points(id as i64).await.map_err(|e| Status::unavailable(e.to_string()))?;
                let course = Course::of(&pairs);
                self.scheduler.keep_course(id, course.clone());
                course
            }
        };
        let mut history = job.history(&course);
        history.spsa = self.scheduler.spsa_samples(id).unwrap_or_default();
        Ok(history)
    }

    /// The match `id`, or why it is not one.
    fn match_job(&self, id: u64) -> Result<Arc<JobSpec>, Status> {
        let spec = self.scheduler.spec(id).ok_or_else(|| Status::not_found(format!("job {id}")))?;
        match &*spec {
            JobSpec::Match(_) => Ok(spec),
            JobSpec::SelfPlay(_) | JobSpec::Verify(_) => {
                Err(Status::invalid_argument(format!("job {id} is not a match: it has no pairs")))
            }
            JobSpec::Unreadable(job) => Err(unreadable(id, job)),
        }
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
    fn units_readable(&self, id: u64, wanted: Stored) -> Result<(), Status> {
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

    /// Every game of tournament `id` as PGN, pairing after pairing in the event's order,
    /// each game's `[Event]` the event's name and `[Round]` its round and number in its
    /// match. Refused at once when a pairing's games cannot be read (removed under the
    /// retention settings), rather than cut short midway.
    pub async fn tournament_games(&self, id: u64) -> Result<Stream_<String>, Status> {
        let tournament = self.tournament(id).await?;
        for pairing in &tournament.pairings {
            self.units_readable(pairing.job_id, Stored::Games)?;
        }
        let event =
            if tournament.description.is_empty() { format!("tournament {id}") } else { tournament.description.clone() };
        let shared = self.clone();
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            let mut numbering = crate::jobs::tournament::GameNumbering::default();
            for pairing in tournament.pairings {
                let mut units = match shared.unit_bytes(pairing.job_id, Stored::Games) {
                    Ok(units) => units,
                    Err(status) => {
                        let _ = sender.send(Err(status)).await;
                        return;
                    }
                };
                while let Some(unit) = units.next().await {
                    let item = unit.map(|(_, bytes)| numbering.tag(&String::from_utf8_lossy(&bytes), &event, &pairing));
                    let failed = item.is_err();
                    if sender.send(item).await.is_err() || failed {
                        return;
                    }
                }
            }
        });
        Ok(Box::pin(ReceiverStream::new(receiver)))
    }

    /// Streams the stored bytes of a job's units, in unit order, a page at a time.
    pub fn unit_bytes(&self, id: u64, wanted: Stored) -> Result<UnitStream, Status> {
        self.units_readable(id, wanted)?;
        let (storage, data_dir) = (self.storage.clone(), self.data_dir.clone());
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            let mut after = None;
            loop {
                let page = match storage.unit_files(id as i64, after, 64).await {
                    Ok(page) if page.is_empty() => return,
                    Ok(page) => page,
                    Err(e) => {
                        let _ = sender.send(Err(Status::unavailable(e.to_string()))).await;
                        return;
                    }
                };
                for unit in page {
                    after = Some(unit.unit);
                    let read = read_slice(data_dir.join(&unit.file), unit.offset, unit.length).await;
                    let item = match read {
                        Ok(bytes) if wanted == Stored::Chunks => {
                            check_stored_chunk(&unit.file, &bytes).map(|()| (unit.unit, bytes))
                        }
                        Ok(bytes) => Ok((unit.unit, bytes)),
                        // Shorter than the index says: damaged, not merely unreachable.
                        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(Status::data_loss(format!(
                            "{}: shorter than the {} bytes stored",
                            unit.file, unit.length
                        ))),
                        Err(e) => Err(Status::unavailable(format!("{}: {e}", unit.file))),
                    };
                    if sender.send(item).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(ReceiverStream::new(receiver))
    }
}

/// Each game of `pgn`, ruled by the judge under `rules`.
fn judge_games(pgn: &str, rules: RuleSet) -> Result<Vec<v1::JudgedGame>, String> {
    let games = parse_pgn(pgn).map_err(|e| e.to_string())?;
    games
        .iter()
        .map(|game| {
            let request = JudgeRequest::from_pgn(game, rules);
            let (judgement, _) = judge(&request).map_err(|e| e.to_string())?;
            Ok(v1::JudgedGame {
                tags: game.tags.iter().cloned().collect(),
                start_fen: request.fen.clone().unwrap_or_else(|| start_fen(request.variant)),
                moves: request.moves,
                judgement_json: judgement.to_string(),
            })
        })
        .collect()
}

/// The standard start position of `variant`.
fn start_fen(variant: Variant) -> String {
    match variant {
        Variant::Xiangqi => xq_engine::xiangqi::fen::to_fen(&xq_engine::xiangqi::Position::startpos()),
        Variant::Xiongqi => xq_engine::xiongqi::fen::to_fen(&xq_engine::xiongqi::Position::startpos()),
    }
}

/// The first 16 hex digits of a chunk's SHA-256: the end of its file's name, so that
/// two uploads of a unit never share a file and a stored chunk can be checked on read.
fn chunk_digest(chunk: &[u8]) -> String {
    hex::encode(&Sha256::digest(chunk)[..8])
}

/// Refuses a stored chunk whose bytes no longer hash to the digest in its file's name.
fn check_stored_chunk(file: &str, bytes: &[u8]) -> Result<(), Status> {
    let named = file.strip_suffix(".xqd").and_then(|stem| stem.rsplit('-').next()).unwrap_or_default();
    if named == chunk_digest(bytes) {
        return Ok(());
    }
    Err(Status::data_loss(format!("{file}: its bytes do not hash to the digest in its name: damaged on disk")))
}

async fn read_slice(path: PathBuf, offset: u64, length: u64) -> std::io::Result<Vec<u8>> {
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
