//! The scheduler: the jobs, leases and workers in memory, rebuilt from the database at
//! start. It decides who plays what; every decision that must survive a crash is
//! written through the [`Writer`] before the caller is answered.
//!
//! - A lease is a list of units. It lives while its worker's heartbeats arrive; when
//!   they stop it expires and its unfinished units go back to the job, to be leased
//!   again first, with the same indices (so the same openings).
//! - A unit counts once (the database's key), so a resent report, or the old and new
//!   holders of a re-issued unit both reporting it, count it once.
//! - A counted unit of a verification job with a reference may be drawn for a
//!   re-check: leased again to a worker that has not reported it, its report compared
//!   with the counted one on the reference's verdicts (the service does that); the job
//!   finishes once its re-checks are settled.
//! - Jobs share the fleet by priority, then by fewest leases in flight per share of
//!   the fleet (their throughput, as fishtest weighs tests), then by age;
//!   a worker only gets a job whose required CPU flags it has.
//! - A lease holds about `lease_seconds` of work at the worker's measured speed, and a
//!   match's time control is scaled by that speed against the reference, as fishtest
//!   does.

pub mod pace;
pub mod registration;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prost::Message;
use tokio::sync::watch;
use xq_proto::{MAX_MESSAGE_BYTES, v1};
use xq_stats::conduct::{Checks, Failures, Leases};

use crate::access::tokens::{Principal, Role, new_token, token_hash, token_id};
use crate::jobs::spsa::SpsaRun;
use crate::jobs::test::course::Course;
use crate::jobs::view::{Listing, job_view};
use crate::jobs::{JobSpec, Unreadable};
use crate::metrics::{KindLabel, Metrics};
use crate::scheduler::pace::{Pace, units_allowed};
use crate::storage::counts::{OverTheBoard, add_points};
use crate::storage::writer::{WriteError, Writer};
use crate::storage::{
    AuditRow, Change, JobRow, LeaseRow, Recheck, Snapshot, Suspicion, TokenRow, UnitRow, WorkerRow, abandoned_games,
    now_ms,
};

/// How the scheduler sizes and times leases.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// A lease expires this long after its last heartbeat.
    pub lease_ttl: Duration,
    /// Workers are asked to beat this often.
    pub heartbeat: Duration,
    /// Work per lease, in seconds at the worker's speed, per concurrent game.
    pub lease_seconds: f64,
    /// The most units in one lease.
    pub max_units_per_lease: usize,
    /// Our engine's bench speed (nodes per second, one core) on the reference machine
    /// the time controls are meant for; 0 turns scaling off.
    pub reference_nps: u64,
    /// How long a closed lease is remembered: late reports on it are taken until
    /// then; after, it is forgotten (memory would otherwise grow with every lease).
    pub closed_lease_memory: Duration,
    /// A worker whose pairs in a test score this many standard errors away from the
    /// other workers' is quarantined (0: never).
    pub quarantine_z: f64,
    /// ... once both it and the others have counted this many pairs in the test.
    pub quarantine_min_pairs: u64,
    /// The other checks of a worker's conduct (`None`: none): its pairs' shape in a
    /// test, its results against an SPSA run's flips, its games ended by an engine's
    /// failure against the other workers', and its expired leases against the fleet's
    /// ([`xq_stats::conduct`]); a worker they flag is quarantined.
    pub conduct: Option<Checks>,
    /// Jobs from submitters' tokens wait for an admin's approval (fishtest's approvers).
    pub require_approval: bool,
    /// Free bytes the data directory's disk keeps for reports of leased work: below
    /// them no new leases and no uploads (0: no reserve).
    pub reserve_bytes: u64,
    /// How long a finished or stopped test's games are kept after its last change
    /// (none: for good); its counts and results stay.
    pub keep_games: Option<Duration>,
    /// The same for a self-play job's training data.
    pub keep_training_data: Option<Duration>,
    /// A submitter whose jobs store this many bytes of games and training data, with
    /// its uploads, creates no more jobs and uploads nothing more (0: no quota). Admins
    /// have none.
    pub submitter_quota_bytes: u64,
    /// How long after its last upload an artifact no job or net names is kept (none:
    /// for good).
    pub keep_unreferenced_artifacts: Option<Duration>,
    /// The most running or pending jobs a submitter may have (0: no limit).
    pub submitter_active_jobs: usize,
    /// The most followers of live streams (the dashboard's, WatchJob), in all and per
    /// client address.
    pub followers: crate::access::streams::FollowerCaps,
    /// Replayed plies a second the coordinator's spot checks of verification reports
    /// may spend, across all jobs (`verification::SpotChecks`).
    pub spot_check_plies_per_second: f64,
    /// One in this many counted units of a verification job with a reference is
    /// reported again by another worker, to check the reference's verdicts (1: every
    /// unit; 0: none; `verification::RECHECK_ONE_IN`).
    pub recheck_one_in: u32,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            lease_ttl: Duration::from_secs(60),
            heartbeat: Duration::from_secs(10),
            lease_seconds: 300.0,
            max_units_per_lease: 256,
            reference_nps: 1_000_000,
            closed_lease_memory: Duration::from_secs(3600),
            quarantine_z: 5.0,
            quarantine_min_pairs: 200,
            conduct: Some(Checks::default()),
            require_approval: false,
            reserve_bytes: 0,
            keep_games: None,
            keep_training_data: None,
            submitter_quota_bytes: 0,
            keep_unreferenced_artifacts: Some(Duration::from_secs(7 * 24 * 3600)),
            submitter_active_jobs: 0,
            followers: Default::default(),
            spot_check_plies_per_second: crate::jobs::verification::SPOT_CHECK_PLIES_PER_SECOND,
            recheck_one_in: crate::jobs::verification::RECHECK_ONE_IN,
        }
    }
}

/// The speed factor of a worker: how much slower than the reference it is.
fn slowness(config: &SchedulerConfig, capabilities: &v1::Capabilities) -> f64 {
    if config.reference_nps == 0 || capabilities.bench_nps == 0 {
        return 1.0;
    }
    (config.reference_nps as f64 / capabilities.bench_nps as f64).clamp(0.25, 4.0)
}

/// Plies a game is assumed to last when sizing leases.
const ASSUMED_PLIES: u32 = 160;

/// The estimated seconds of one of `spec`'s units on a worker `slowness` times slower
/// than the reference, whose bench gives `nps`: what leases are sized by.
fn unit_seconds(spec: &JobSpec, slowness: f64, nps: u64) -> f64 {
    let nps = nps.max(1);
    match spec {
        JobSpec::Match(m) => 2.0 * m.time_control.scaled(slowness).game_seconds(ASSUMED_PLIES, nps),
        JobSpec::SelfPlay(r) => r.spec.as_ref().map_or(0.0, |spec| {
            f64::from(spec.games_per_unit) * f64::from(ASSUMED_PLIES) * spec.nodes as f64 / nps as f64
        }),
        JobSpec::Verify(v) => v.unit_seconds(ASSUMED_PLIES, nps),
        JobSpec::Unreadable(_) => 0.0,
    }
}

/// A request the scheduler refuses.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// No such job, lease or worker, or not the caller's.
    #[error("{0}")]
    NotFound(String),
    /// The request contradicts what is stored.
    #[error("{0}")]
    Invalid(String),
    /// The worker may not take work or report: it was disabled or quarantined.
    #[error("{0}")]
    Denied(String),
    /// The worker asked for work without having said what it can run.
    #[error("worker {0} has not registered: call Register first")]
    Unregistered(u64),
    /// The database did not take the change.
    #[error("storage: {0}")]
    Write(#[from] WriteError),
}

struct JobState {
    row: JobRow,
    spec: Arc<JobSpec>,
    done: HashSet<u64>,
    /// Units of expired leases, not done: leased again first.
    requeue: BTreeSet<u64>,
    active_leases: u32,
    changes: watch::Sender<u64>,
    /// The scheduler's signal that some job changed (the dashboard's live lists).
    any_change: Arc<watch::Sender<u64>>,
    /// A match's course as its pairs counted; None until read from storage (a job
    /// that was not running when the coordinator started).
    course: Option<Course>,
    /// Reports on the job's leases refused since the coordinator started.
    refused: u64,
    /// Each worker's counted pairs by the new engine's points (a match's; the
    /// residuals that quarantine a worker), or units (self-play, in slot 0).
    by_worker: HashMap<u64, [u64; 5]>,
    /// Each worker's counted games of a match and those ended by an engine's failure.
    failures: FailureCounts,
    /// An SPSA job's run: theta and the probes of its leases.
    spsa: Option<SpsaRun>,
    /// An SPSA job's reports go one at a time from their stamp to their count: theta
    /// moves with the order pairs count in, and a restart replays them in the order of
    /// their stamps, so two reports in flight must not count in the other order.
    spsa_order: Option<Arc<tokio::sync::Mutex<()>>>,
    /// Workers whose report of a unit (of a verification job) a spot check found false,
    /// with those units and why: each gets no more of the job's work until another
    /// worker's report of one of its units passes, which quarantines it. Stored, and
    /// read back at start.
    suspects: HashMap<u64, Vec<(u64, String)>>,
    /// Units of a verification job with a reference whose counted report another
    /// worker reports again, to check the reference's verdicts: leased like its other
    /// units, to workers that have not reported them; the job finishes once they are
    /// settled. Stored, and read back at start.
    rechecks: BTreeMap<u64, PendingRecheck>,
    /// What the list's filters look at.
    listing: Listing,
    /// The stamp of the units it counted last ([`JobState::stamp`]).
    stamped_ms: i64,
}

impl JobState {
    /// The stamp of a report's units: the wall clock's milliseconds, but later than the
    /// units the job counted before. Storage gives units back by stamp, then unit, and
    /// an SPSA job's theta and a match's course are replayed in that order at start: a
    /// clock set back between two reports (or two reports in one millisecond) must not
    /// reorder them.
    fn stamp(&mut self) -> i64 {
        self.stamped_ms = now_ms().max(self.stamped_ms + 1);
        self.stamped_ms
    }

    /// What its view is made of.
    fn parts(&self) -> ViewParts {
        ViewParts {
            row: self.row.clone(),
            spec: self.spec.clone(),
            active_leases: self.active_leases,
            refused: self.refused,
            spsa: self.spsa.as_ref().map(SpsaRun::view),
            rechecks_pending: self.rechecks.len() as u64,
        }
    }

    fn view(&self) -> v1::Job {
        self.parts().view()
    }

    /// Whether it has work for `worker`: units not counted, or re-checks of others'.
    fn has_work_for(&self, worker: u64) -> bool {
        self.row.state == "running"
            && (!self.requeue.is_empty()
                || self.row.next_unit < self.row.units_total
                || self.rechecks.values().any(|r| r.open_to(worker)))
    }

    /// Leases in flight per share of the fleet: among jobs of equal priority the one
    /// furthest below its share is served first.
    fn load(&self) -> u64 {
        let throughput = match &*self.spec {
            JobSpec::Match(m) => m.request.throughput,
            JobSpec::SelfPlay(r) => r.throughput,
            JobSpec::Verify(_) | JobSpec::Unreadable(_) => 0,
        };
        let throughput = if throughput == 0 { 100 } else { u64::from(throughput) };
        u64::from(self.active_leases) * 1_000_000 / throughput
    }

    fn notify(&self) {
        self.changes.send_modify(|version| *version += 1);
        self.any_change.send_modify(|version| *version += 1);
    }
}

/// Whether a pending re-check of `job` is being reported, is disputed, or could be
/// reported by a worker heard from since `online_since_ms`: a fleet with no other
/// worker offering the reference finishes its job with its re-checks left undone
/// rather than wait for one forever, but a dispute (two reports that differ: one of
/// them is false) waits for a third worker to decide it.
fn recheckable(job: &JobState, workers: &HashMap<u64, WorkerState>, online_since_ms: i64) -> bool {
    let JobSpec::Verify(spec) = &*job.spec else { return false };
    let could_report = |recheck: &PendingRecheck, worker: &WorkerState| {
        let id = worker.row.id as u64;
        worker.row.standing == ACTIVE
            && worker.row.last_seen_ms >= online_since_ms
            && spec.runs_on(&worker.capabilities)
            && !recheck.reported_by(id)
            && !job.suspects.contains_key(&id)
    };
    job.rechecks
        .values()
        .any(|r| r.lease.is_some() || r.row.second_worker != 0 || workers.values().any(|w| could_report(r, w)))
}

/// A re-check of a unit (see [`Recheck`]) and the lease playing it now, if any.
struct PendingRecheck {
    row: Recheck,
    lease: Option<u64>,
}

impl PendingRecheck {
    fn reported_by(&self, worker: u64) -> bool {
        [self.row.first_worker, self.row.second_worker].contains(&(worker as i64))
    }

    /// Whether it can be leased to `worker`: no lease plays it, and `worker` has not
    /// reported the unit (a re-check is another worker's report).
    fn open_to(&self, worker: u64) -> bool {
        self.lease.is_none() && !self.reported_by(worker)
    }
}

struct LeaseState {
    row: LeaseRow,
    units: HashSet<u64>,
    /// How much slower than the reference its worker was when it was leased: its time
    /// control is the job's scaled by this, and its games are checked against that.
    slowness: f64,
    /// The estimated seconds of one of its units on its worker: how much work its
    /// unreported units hold, and how much each report shows ([`crate::scheduler::pace`]).
    unit_seconds: f64,
    deadline: Instant,
    /// Units this lease has reported, and their totals: what the next cumulative
    /// report must extend.
    acked: HashSet<u64>,
    acked_wdl: [u64; 3],
    acked_penta: [u64; 5],
    active: bool,
    /// When it was closed (finished, expired or stopped).
    closed_at: Option<Instant>,
}

/// What a job's view is made of, copied out of the lock: the views of a thousand jobs
/// (each an SPRT and an Elo estimate) are computed without holding up reports.
struct ViewParts {
    row: JobRow,
    spec: Arc<JobSpec>,
    active_leases: u32,
    refused: u64,
    spsa: Option<v1::SpsaView>,
    rechecks_pending: u64,
}

impl ViewParts {
    fn view(&self) -> v1::Job {
        job_view(&self.row, &self.spec, (self.active_leases, self.refused, self.rechecks_pending), self.spsa.clone())
    }
}

/// An SPSA job's run, if `spec` is one.
fn spsa_run(spec: &JobSpec) -> Option<SpsaRun> {
    match spec {
        JobSpec::Match(job) => job.spsa.as_deref().map(SpsaRun::new),
        JobSpec::SelfPlay(_) | JobSpec::Verify(_) | JobSpec::Unreadable(_) => None,
    }
}

struct WorkerState {
    row: WorkerRow,
    capabilities: v1::Capabilities,
    leases: BTreeSet<u64>,
    /// Units it played that counted (from storage at start, then as they count).
    units_done: u64,
    /// Its reports refused since the coordinator started.
    refused: u64,
    /// What it has shown it plays: the work it may hold.
    pace: Pace,
    /// How its leases ended (from storage at start, then as they end).
    lease_endings: Leases,
}

impl WorkerState {
    fn new(row: WorkerRow, capabilities: v1::Capabilities, units_done: u64, lease_endings: Leases) -> Self {
        WorkerState {
            row,
            capabilities,
            leases: BTreeSet::new(),
            units_done,
            refused: 0,
            pace: Pace::default(),
            lease_endings,
        }
    }

    /// Refuses a worker that was disabled or quarantined.
    fn may_play(&self) -> Result<(), ScheduleError> {
        if self.row.standing == ACTIVE {
            return Ok(());
        }
        Err(ScheduleError::Denied(format!(
            "worker {} is {}: {}",
            self.row.id, self.row.standing, self.row.standing_reason
        )))
    }
}

/// Who created a job, and whether it waits for an admin's approval.
#[derive(Clone, Copy, Debug)]
pub struct Origin<'a> {
    /// The creating token's id.
    pub submitter: &'a str,
    pub pending: bool,
    /// The client's name for the request, when it gave one: a retry finds the job.
    pub request: Option<&'a RequestKey>,
}

/// A creation request as a client names it (gRPC metadata `xq-request-id`), with the
/// request's SHA-256: the same id and request again is a retry; the same id with
/// another request is a client's mistake, refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestKey {
    pub id: String,
    pub digest: String,
}

/// A job checked and numbered, not yet stored nor scheduled: [`Scheduler::create_job`]
/// stores one alone; a tournament stores its tests with the event that lists them, in
/// one transaction, so that a crash leaves the event whole or not at all, and then
/// schedules them ([`Scheduler::enter_job`]).
pub struct NewJob {
    row: JobRow,
    spec: JobSpec,
}

impl NewJob {
    /// Its number.
    pub fn id(&self) -> u64 {
        self.row.id as u64
    }

    /// What storing it writes: its row, and the audit log's entry of its creation.
    pub fn changes(&self) -> [Change; 2] {
        let row = &self.row;
        let entry = AuditRow {
            at_ms: row.created_ms,
            actor: row.submitter.clone(),
            action: "job.create".to_owned(),
            detail: format!("{} {} '{}'", row.id, row.kind, row.description),
        };
        [Change::NewJob(Box::new(row.clone())), Change::Audit(entry)]
    }
}

/// The state of a job that waits for approval: it gets no leases.
pub const PENDING: &str = "pending";

/// A worker's standings: it plays; it plays no more; it plays no more and its results
/// in running tests are set aside.
pub const ACTIVE: &str = "active";
pub const DISABLED: &str = "disabled";
pub const QUARANTINED: &str = "quarantined";

/// Checks a name or reason given in a request.
fn check_label(what: &str, text: &str) -> Result<(), ScheduleError> {
    if text.chars().count() > 500 || text.chars().any(char::is_control) {
        return Err(ScheduleError::Invalid(format!("a {what} of at most 500 characters, no control characters")));
    }
    Ok(())
}

/// A pair's slot in a pentanomial (a self-play unit's: 0).
fn pair_slot(points: [i64; 2]) -> usize {
    (points[0] + points[1]).clamp(0, 4) as usize
}

/// How many standard errors a worker's mean pair score lies from the other workers'
/// in one test, with the variance of all its pairs; `None` below `min_pairs` on either
/// side or when every pair scored the same.
pub fn residual(worker: &[u64; 5], all: &[u64; 5], min_pairs: u64) -> Option<f64> {
    let rest: Vec<u64> = all.iter().zip(worker).map(|(a, w)| a.saturating_sub(*w)).collect();
    let (n_worker, n_rest, n_all) = (worker.iter().sum::<u64>(), rest.iter().sum::<u64>(), all.iter().sum::<u64>());
    if n_worker < min_pairs || n_rest < min_pairs {
        return None;
    }
    let mean = |counts: &[u64], n: u64| {
        counts.iter().enumerate().map(|(k, c)| k as f64 / 4.0 * *c as f64).sum::<f64>() / n as f64
    };
    let (m_worker, m_rest, m_all) = (mean(worker, n_worker), mean(&rest, n_rest), mean(all, n_all));
    let variance =
        all.iter().enumerate().map(|(k, c)| *c as f64 * (k as f64 / 4.0 - m_all).powi(2)).sum::<f64>() / n_all as f64;
    (variance > 0.0).then(|| (m_worker - m_rest) / (variance * (1.0 / n_worker as f64 + 1.0 / n_rest as f64)).sqrt())
}

/// Counts a pair's two games, `abandoned` of them ended by an engine's failure.
/// A match's games and those ended by an engine's failure, by worker and in all (kept
/// in step, so that judging a report does not sum every worker's).
#[derive(Default)]
struct FailureCounts {
    by_worker: HashMap<u64, Failures>,
    all: Failures,
}

impl FailureCounts {
    /// Counts a pair of `worker`'s, `abandoned` of its two games by a failure.
    fn add_pair(&mut self, worker: u64, abandoned: u64) {
        for failures in [self.by_worker.entry(worker).or_default(), &mut self.all] {
            failures.games += 2;
            failures.abandoned += abandoned;
        }
    }

    /// Takes `worker`'s games off the counts (its pairs set aside).
    fn remove(&mut self, worker: u64) {
        if let Some(gone) = self.by_worker.remove(&worker) {
            self.all.games -= gone.games;
            self.all.abandoned -= gone.abandoned;
        }
    }

    fn of(&self, worker: u64) -> Failures {
        self.by_worker.get(&worker).copied().unwrap_or_default()
    }
}

/// Why `worker`'s pairs in `job` show that it does not report its games as they fell,
/// if they do: in a test, its mean pair score against the other workers' (the
/// residual) or its pentanomial's shape against theirs; in an SPSA job, its results
/// following a parameter's flips unlike theirs; in either, its games ending by an
/// engine's failure more often than theirs.
///
/// Neither the residual nor the shape judges an SPSA job: each lease's flips tilt all
/// its pairs one way, so honest workers' means and shapes differ by more than either
/// check allows (simulated: 12% of honest workers flagged by the shape under a steep
/// gradient with leases of 64 pairs); the steering check allows for it.
fn misconduct(config: &SchedulerConfig, job: &JobState, job_id: u64, worker: u64) -> Option<String> {
    let all = job.row.pentanomial.map(|c| c.max(0) as u64);
    let tally = job.by_worker.get(&worker).copied().unwrap_or_default();
    let spsa = job.spsa.as_ref();
    if spsa.is_none()
        && config.quarantine_z > 0.0
        && let Some(z) = residual(&tally, &all, config.quarantine_min_pairs).filter(|z| z.abs() > config.quarantine_z)
    {
        return Some(format!(
            "its pairs in job {job_id} lie {z:+.1} standard errors from the other workers' (limit {})",
            config.quarantine_z
        ));
    }
    let checks = config.conduct.as_ref()?;
    if spsa.is_none()
        && let Some(p) = checks.shape_flag(&tally, &all)
    {
        return Some(format!(
            "its pairs in job {job_id} are shaped unlike the other workers': pentanomial {tally:?} of {all:?} \
             in all, p = {p:.1e} (limit {:.0e})",
            checks.shape_p
        ));
    }
    let (mine, fleet) = (job.failures.of(worker), job.failures.all);
    if let Some(p) = checks.failures_flag(mine, fleet) {
        return Some(format!(
            "{} of its {} games in job {job_id} ended by an engine's failure, against {} of all {}: p = {p:.1e} \
             (limit {:.0e})",
            mine.abandoned, mine.games, fleet.abandoned, fleet.games, checks.failures_p
        ));
    }
    let (parameter, steering) = spsa?.steering(worker, checks)?;
    Some(format!(
        "its results in SPSA job {job_id} follow the flips of {parameter} unlike the other workers' \
         ({:+.1} standard errors, p = {:.1e} over all parameters, limit {:.0e})",
        steering.z, steering.p_value, checks.steering_p
    ))
}

/// A token in force.
struct TokenState {
    /// Who holds it; `Err`: a stored token that grants nothing, and why (its row names
    /// a role this coordinator does not know, or a worker token no worker).
    principal: Result<Principal, String>,
    /// 0: never.
    expires_ms: i64,
}

#[derive(Default)]
struct State {
    jobs: BTreeMap<u64, JobState>,
    /// The jobs not ended (running or waiting for approval): what leasing, the gauges
    /// and the quotas look at, so that they cost what the live jobs are, not every job
    /// ever made (finding N4 of the security review).
    live: BTreeSet<u64>,
    /// The jobs made with a client's request id, by submitter and id: a retry's answer
    /// without a pass over every job.
    requests: HashMap<(String, String), u64>,
    leases: HashMap<u64, LeaseState>,
    workers: HashMap<u64, WorkerState>,
    /// How the fleet's leases ended: the yardstick of a worker's.
    lease_endings: Leases,
    /// The tokens in force (not revoked), by hash.
    tokens: HashMap<String, TokenState>,
    next_job: u64,
    next_lease: u64,
    next_worker: u64,
}

impl State {
    fn insert_job(&mut self, job: JobState) {
        let id = job.row.id as u64;
        if is_live(&job.row.state) {
            self.live.insert(id);
        }
        if !job.row.request_id.is_empty() {
            self.requests.insert((job.row.submitter.clone(), job.row.request_id.clone()), id);
        }
        self.jobs.insert(id, job);
    }

    /// The jobs not ended.
    fn live_jobs(&self) -> impl Iterator<Item = &JobState> {
        self.live.iter().filter_map(|id| self.jobs.get(id))
    }
}

/// Whether a job in `state` has not ended: it runs or waits for approval.
fn is_live(state: &str) -> bool {
    state == "running" || state == PENDING
}

/// What checking a report on a lease needs.
#[derive(Clone, Debug)]
pub struct LeaseContext {
    pub lease_id: u64,
    pub job_id: u64,
    pub spec: Arc<JobSpec>,
    /// Of the reported units, those this lease has reported before.
    pub acked: HashSet<u64>,
    /// How many units the lease has reported, and their totals.
    pub acked_count: u64,
    pub acked_wdl: [u64; 3],
    pub acked_penta: [u64; 5],
    /// How much slower than the reference the worker was when it took the lease.
    pub slowness: f64,
}

/// The scheduler.
pub struct Scheduler {
    state: Mutex<State>,
    writer: Writer,
    pub config: SchedulerConfig,
    any_change: Arc<watch::Sender<u64>>,
    /// Bumped at each revocation: open streams look again at their token.
    revocations: watch::Sender<u64>,
    metrics: Arc<Metrics>,
    /// Serialises creations that carry a request id, from the look for an earlier
    /// one to the new job's entry, so that two retries racing make one job.
    named_creations: tokio::sync::Mutex<()>,
}

/// How often an open stream looks at its token's expiry.
pub const TOKEN_RECHECK: Duration = Duration::from_secs(1);

/// Why a token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefused {
    #[error("unknown, revoked or expired token")]
    NotInForce,
    /// A stored token that grants nothing: roles fail closed.
    #[error("this token grants nothing: {0}; an admin may revoke it and make another")]
    NoRights(String),
}

/// Who a stored token's row names. Anything this coordinator does not know grants
/// nothing (a row from a newer version, or one edited by hand), rather than the most.
fn stored_principal(role: &str, worker_id: Option<i64>) -> Result<Principal, String> {
    match (role, worker_id) {
        ("worker", Some(id)) if id > 0 => Ok(Principal::Worker(id as u64)),
        ("worker", _) => Err("it is a worker token stored without its worker".to_owned()),
        ("submitter", _) => Ok(Principal::Client(Role::Submitter)),
        ("admin", _) => Ok(Principal::Client(Role::Admin)),
        (other, _) => Err(format!("its stored role '{}' is not one this coordinator knows", other.escape_debug())),
    }
}

fn decode_capabilities(text: &str) -> v1::Capabilities {
    hex::decode(text).ok().and_then(|b| v1::Capabilities::decode(b.as_slice()).ok()).unwrap_or_default()
}

impl Scheduler {
    /// Rebuilds the state from a snapshot. Leases active at the last stop get a fresh
    /// deadline: their workers may still be playing them.
    pub fn new(
        snapshot: Snapshot,
        specs: HashMap<i64, JobSpec>,
        writer: Writer,
        config: SchedulerConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        let mut state = State::default();
        for token in snapshot.tokens.into_iter().filter(|t| t.revoked_ms == 0) {
            let principal = stored_principal(&token.role, token.worker_id);
            if let Err(problem) = &principal {
                tracing::error!("token {}: {problem}; it grants nothing until revoked", token_id(&token.hash));
            }
            state.tokens.insert(token.hash, TokenState { principal, expires_ms: token.expires_ms });
        }
        for row in snapshot.workers {
            state.next_worker = state.next_worker.max(row.id as u64);
            let capabilities = decode_capabilities(&row.capabilities);
            let units_done = snapshot.worker_units.get(&row.id).copied().unwrap_or(0);
            let endings = snapshot.worker_leases.get(&row.id).copied().unwrap_or_default();
            state.lease_endings.expired += endings.expired;
            state.lease_endings.finished += endings.finished;
            state.workers.insert(row.id as u64, WorkerState::new(row, capabilities, units_done, endings));
        }
        let mut specs = specs;
        let any_change = Arc::new(watch::channel(0).0);
        for mut row in snapshot.jobs {
            state.next_job = state.next_job.max(row.id as u64);
            let spec = specs
                .remove(&row.id)
                .unwrap_or_else(|| JobSpec::Unreadable(Box::new(Unreadable::new(&row.kind, &row.spec, "not decoded"))));
            if let JobSpec::Unreadable(unreadable) = &spec {
                tracing::error!("job {} cannot be read back: {}", row.id, unreadable.problem);
                // Shown ended with the reason; the stored row keeps its state, for a
                // version that reads it.
                if matches!(row.state.as_str(), "running" | "pending") {
                    row.state = "stopped".to_owned();
                    row.outcome = unreadable.outcome();
                }
            }
            let stored = snapshot.done_units.get(&row.id);
            let done: HashSet<u64> = stored.into_iter().flatten().map(|d| d.unit).collect();
            let mut by_worker: HashMap<u64, [u64; 5]> = HashMap::new();
            let mut failures = FailureCounts::default();
            for unit in stored.into_iter().flatten() {
                by_worker.entry(unit.worker_id as u64).or_default()[pair_slot(unit.points)] += 1;
                failures.add_pair(unit.worker_id as u64, unit.abandoned);
            }
            // Stored in the order they counted: the running matches' courses.
            let course = (matches!(spec, JobSpec::Match(_)) && row.state == "running").then(|| {
                let mut course = Course::default();
                for unit in stored.into_iter().flatten() {
                    course.add(unit.created_ms, unit.points);
                }
                course
            });
            // Theta, replayed from the counted pairs in the order they counted.
            let spsa = spsa_run(&spec).map(|mut run| {
                for (lease, probe) in snapshot.probes.get(&row.id).into_iter().flatten() {
                    run.restore_probe(*lease as u64, probe);
                }
                for unit in stored.into_iter().flatten() {
                    run.count(unit.lease_id as u64, unit.unit, unit.worker_id as u64, unit.points);
                }
                run
            });
            let mut suspects: HashMap<u64, Vec<(u64, String)>> = HashMap::new();
            for suspicion in snapshot.suspicions.get(&row.id).into_iter().flatten() {
                suspects
                    .entry(suspicion.worker_id as u64)
                    .or_default()
                    .push((suspicion.unit, suspicion.reason.clone()));
            }
            let rechecks = snapshot.rechecks.get(&row.id).into_iter().flatten();
            let rechecks = rechecks.map(|r| (r.unit, PendingRecheck { row: r.clone(), lease: None })).collect();
            let (changes, _) = watch::channel(0);
            let listing = Listing::of(&job_view(&row, &spec, (0, 0, 0), None));
            state.insert_job(JobState {
                row,
                spec: Arc::new(spec),
                done,
                requeue: BTreeSet::new(),
                active_leases: 0,
                changes,
                any_change: any_change.clone(),
                course,
                refused: 0,
                by_worker,
                failures,
                spsa_order: spsa.as_ref().map(|_| Arc::default()),
                spsa,
                suspects,
                rechecks,
                listing,
                stamped_ms: stored.into_iter().flatten().map(|unit| unit.created_ms).max().unwrap_or(0),
            });
        }
        state.next_lease = snapshot.max_lease_id as u64;
        let restarted = Instant::now();
        let deadline = restarted + config.lease_ttl;
        for row in snapshot.active_leases {
            let (id, job_id, worker_id) = (row.id as u64, row.job_id as u64, row.worker_id as u64);
            let slowness = state.workers.get(&worker_id).map_or(1.0, |w| slowness(&config, &w.capabilities));
            let nps = state.workers.get(&worker_id).map_or(0, |w| w.capabilities.bench_nps);
            let unit_seconds = state.jobs.get(&job_id).map_or(0.0, |j| unit_seconds(&j.spec, slowness, nps));
            let mut lease = LeaseState {
                slowness,
                unit_seconds,
                units: row.units.iter().copied().collect(),
                row,
                deadline,
                acked: HashSet::new(),
                acked_wdl: [0; 3],
                acked_penta: [0; 5],
                active: true,
                closed_at: None,
            };
            for done in snapshot.done_units.get(&(job_id as i64)).into_iter().flatten() {
                if done.lease_id == id as i64 {
                    lease.acked.insert(done.unit);
                    add_points(&mut lease.acked_wdl, &mut lease.acked_penta, done.points);
                }
            }
            if let Some(job) = state.jobs.get_mut(&job_id) {
                job.active_leases += 1;
                // A re-check it was playing stays its own.
                for unit in &lease.units {
                    if let Some(recheck) = job.rechecks.get_mut(unit).filter(|r| !r.reported_by(worker_id)) {
                        recheck.lease = Some(id);
                    }
                }
            }
            if let Some(worker) = state.workers.get_mut(&worker_id) {
                worker.leases.insert(id);
                worker.pace.lease_taken(restarted);
            }
            state.leases.insert(id, lease);
        }
        // Units leased before the stop, neither done nor in an active lease, go back.
        let leased: HashMap<u64, HashSet<u64>> = state.leases.values().fold(HashMap::new(), |mut map, lease| {
            map.entry(lease.row.job_id as u64).or_default().extend(lease.units.iter().copied());
            map
        });
        for (id, job) in state.jobs.iter_mut().filter(|(_, j)| j.row.state == "running") {
            let in_flight = leased.get(id);
            job.requeue = (0..job.row.next_unit as u64)
                .filter(|u| !job.done.contains(u) && !in_flight.is_some_and(|set| set.contains(u)))
                .collect();
        }
        let (revocations, _) = watch::channel(0);
        Scheduler {
            state: Mutex::new(state),
            writer,
            config,
            any_change,
            revocations,
            metrics,
            named_creations: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Who holds `token`, and the token's id.
    pub fn authenticate(&self, token: &str) -> Result<(Principal, String), TokenRefused> {
        self.authenticate_hash(&token_hash(token))
    }

    /// Who holds the token whose hash is `hash`, and the token's id.
    pub fn authenticate_hash(&self, hash: &str) -> Result<(Principal, String), TokenRefused> {
        let state = self.lock();
        let entry = state.tokens.get(hash).ok_or(TokenRefused::NotInForce)?;
        if entry.expires_ms != 0 && now_ms() >= entry.expires_ms {
            return Err(TokenRefused::NotInForce);
        }
        let principal = entry.principal.clone().map_err(TokenRefused::NoRights)?;
        Ok((principal, token_id(hash).to_owned()))
    }

    /// The role of the user token with id `id` while it is in force; `None` when it is
    /// revoked, expired, unknown or not a user's.
    pub fn role_of(&self, id: &str) -> Option<Role> {
        let state = self.lock();
        let (_, token) = state.tokens.iter().find(|(hash, _)| token_id(hash) == id)?;
        match token.principal {
            Ok(Principal::Client(role)) if token.expires_ms == 0 || now_ms() < token.expires_ms => Some(role),
            _ => None,
        }
    }

    /// Resolves once the token whose hash is `hash` is no longer in force: at once when
    /// it is revoked, within [`TOKEN_RECHECK`] when it expires. Streams opened with it
    /// end then, so that a revocation reaches every call, not only the next ones.
    pub fn out_of_force(self: &Arc<Self>, hash: String) -> impl std::future::Future<Output = ()> + Send + 'static {
        let weak = Arc::downgrade(self);
        let mut revocations = self.revocations.subscribe();
        async move {
            loop {
                match weak.upgrade() {
                    Some(scheduler) if scheduler.authenticate_hash(&hash).is_ok() => {}
                    _ => return,
                }
                tokio::select! {
                    _ = revocations.changed() => {}
                    _ = tokio::time::sleep(TOKEN_RECHECK) => {}
                }
            }
        }
    }

    /// Creates a user's token of `role` for `name`, expiring at `expires_ms` (0:
    /// never); `actor` is the id of the token that asked, for the audit log.
    pub async fn create_token(
        &self,
        role: Role,
        name: &str,
        expires_ms: i64,
        actor: &str,
    ) -> Result<String, ScheduleError> {
        check_label("name", name)?;
        let token = new_token();
        self.store_token(&token, role, name, expires_ms, actor).await?;
        Ok(token)
    }

    /// Puts `token` in force.
    async fn store_token(
        &self,
        token: &str,
        role: Role,
        name: &str,
        expires_ms: i64,
        actor: &str,
    ) -> Result<(), ScheduleError> {
        let hash = token_hash(token);
        let row = TokenRow {
            hash: hash.clone(),
            role: role.name().to_owned(),
            worker_id: None,
            name: name.to_owned(),
            created_ms: now_ms(),
            expires_ms,
            revoked_ms: 0,
        };
        self.writer.write(Change::Token(row)).await?;
        self.audit(actor, "token.create", &format!("{} {} '{name}'", token_id(&hash), role.name())).await?;
        self.lock().tokens.insert(hash, TokenState { principal: Ok(Principal::Client(role)), expires_ms });
        Ok(())
    }

    /// Puts the admin's token in force (at first start, when none exists): made and
    /// written where the admin reads it by the caller first, so that a crash between
    /// the two never leaves a token in force that nobody holds (the next start makes
    /// another and writes it over).
    pub async fn create_client_token(&self, token: &str) -> Result<(), ScheduleError> {
        self.store_token(token, Role::Admin, "admin", 0, "coordinator").await
    }

    /// Whether any admin token is in force.
    pub fn has_client_token(&self) -> bool {
        self.lock().tokens.values().any(|t| t.principal == Ok(Principal::Client(Role::Admin)))
    }

    /// Revokes the token whose id is `id` (a worker's too): refused from the next call.
    pub async fn revoke_token(&self, id: &str, actor: &str) -> Result<(), ScheduleError> {
        let hash = {
            let mut state = self.lock();
            let matching: Vec<String> =
                state.tokens.keys().filter(|hash| !id.is_empty() && token_id(hash) == id).cloned().collect();
            let [hash] = matching.as_slice() else {
                return Err(ScheduleError::NotFound(format!("no token in force with id '{id}'")));
            };
            state.tokens.remove(hash);
            hash.clone()
        };
        self.revocations.send_modify(|count| *count += 1);
        self.writer.write(Change::RevokeToken { hash, at_ms: now_ms() }).await?;
        self.audit(actor, "token.revoke", id).await
    }

    /// Records an action in the audit log.
    pub async fn audit(&self, actor: &str, action: &str, detail: &str) -> Result<(), ScheduleError> {
        let entry =
            AuditRow { at_ms: now_ms(), actor: actor.to_owned(), action: action.to_owned(), detail: detail.to_owned() };
        self.writer.write(Change::Audit(entry)).await?;
        Ok(())
    }

    /// Creates a worker and its token.
    pub async fn create_worker(&self, name: &str) -> Result<(u64, String), ScheduleError> {
        let token = new_token();
        let hash = token_hash(&token);
        let id = {
            let mut state = self.lock();
            state.next_worker += 1;
            state.next_worker
        };
        let row = WorkerRow {
            id: id as i64,
            name: name.to_owned(),
            capabilities: String::new(),
            last_seen_ms: 0,
            standing: ACTIVE.to_owned(),
            standing_reason: String::new(),
        };
        self.writer.write(Change::Worker(row.clone())).await?;
        self.writer
            .write(Change::Token(TokenRow {
                hash: hash.clone(),
                role: "worker".to_owned(),
                worker_id: Some(id as i64),
                name: name.to_owned(),
                created_ms: now_ms(),
                expires_ms: 0,
                revoked_ms: 0,
            }))
            .await?;
        let mut state = self.lock();
        state.workers.insert(id, WorkerState::new(row, v1::Capabilities::default(), 0, Leases::default()));
        state.tokens.insert(hash, TokenState { principal: Ok(Principal::Worker(id)), expires_ms: 0 });
        Ok((id, token))
    }

    /// Records a worker's capabilities.
    pub async fn register(&self, worker: u64, capabilities: v1::Capabilities) -> Result<(), ScheduleError> {
        let row = {
            let mut state = self.lock();
            let entry =
                state.workers.get_mut(&worker).ok_or_else(|| ScheduleError::NotFound(format!("worker {worker}")))?;
            entry.row.capabilities = hex::encode(capabilities.encode_to_vec());
            entry.row.last_seen_ms = now_ms();
            entry.capabilities = capabilities;
            entry.row.clone()
        };
        self.writer.write(Change::Worker(row)).await?;
        Ok(())
    }

    /// Extends the worker's leases; returns those it must drop.
    pub fn heartbeat(&self, worker: u64, leases: &[u64]) -> Vec<u64> {
        let mut state = self.lock();
        let deadline = Instant::now() + self.config.lease_ttl;
        if let Some(entry) = state.workers.get_mut(&worker) {
            entry.row.last_seen_ms = now_ms();
        }
        let State { leases: all, jobs, .. } = &mut *state;
        leases
            .iter()
            .copied()
            .filter(|id| {
                let alive =
                    all.get_mut(id).filter(|l| l.row.worker_id as u64 == worker && l.active).is_some_and(|lease| {
                        let running = jobs.get(&(lease.row.job_id as u64)).is_some_and(|j| j.row.state == "running");
                        if running {
                            lease.deadline = deadline;
                        }
                        running
                    });
                !alive
            })
            .collect()
    }

    /// The most bytes a reply carrying a lease of `spec`'s job (of `units_total` units)
    /// can take: as many units as a lease holds, each numbered as high as the job goes,
    /// the other numbers as long as they can be written, the time control at its longest
    /// and an SPSA probe's values too.
    fn largest_lease_reply(&self, spec: &JobSpec, units_total: u64) -> usize {
        let mut work = spec.lease_work(1.0);
        if let (JobSpec::Match(job), v1::lease::Work::MatchSpec(played)) = (spec, &mut work) {
            played.time_control = "9".repeat(job.longest_time_control());
            if let Some(spsa) = &job.spsa {
                crate::jobs::spsa::set_probe(played, spsa.longest_probe());
            }
        }
        let units = units_total.min(self.config.max_units_per_lease as u64);
        let lease = v1::Lease {
            lease_id: u64::MAX,
            job_id: u64::MAX,
            units: vec![units_total.saturating_sub(1); units as usize],
            lease_seconds: u32::MAX,
            work: Some(work),
        };
        v1::LeaseReply { lease: Some(lease) }.encoded_len()
    }

    /// The job `submitter` created before under `key`'s id: a retry's answer. The id
    /// used for another request is refused, naming the job it made.
    pub fn created_before(&self, submitter: &str, key: &RequestKey) -> Result<Option<v1::Job>, ScheduleError> {
        let state = self.lock();
        let earlier = state.requests.get(&(submitter.to_owned(), key.id.clone())).and_then(|id| state.jobs.get(id));
        match earlier {
            None => Ok(None),
            Some(job) if job.row.request_digest == key.digest => Ok(Some(job.parts().view())),
            Some(job) => Err(ScheduleError::Invalid(format!(
                "request id '{}' made job {} from another request: a new request needs a new id",
                key.id, job.row.id
            ))),
        }
    }

    /// Creates a job; one whose origin names its request is made once per request id
    /// (a retry gets the job the first call made).
    pub async fn create_job(
        &self,
        kind: &str,
        spec: JobSpec,
        units_total: u64,
        labels: (i32, &str),
        origin: Origin<'_>,
    ) -> Result<v1::Job, ScheduleError> {
        let _named = match origin.request {
            Some(key) => {
                let guard = self.named_creations.lock().await;
                if let Some(job) = self.created_before(origin.submitter, key)? {
                    return Ok(job);
                }
                Some(guard)
            }
            None => None,
        };
        let job = self.new_job(kind, spec, units_total, labels, origin)?;
        self.writer.write(Change::Together(job.changes().into())).await?;
        Ok(self.enter_job(job))
    }

    /// Checks that a job's leases fit a reply and numbers it; nothing is stored yet
    /// (see [`NewJob`]).
    pub fn new_job(
        &self,
        kind: &str,
        spec: JobSpec,
        units_total: u64,
        (priority, description): (i32, &str),
        origin: Origin<'_>,
    ) -> Result<NewJob, ScheduleError> {
        // A lease over the limit would never reach a worker: refused now, not by each
        // worker that leases the job.
        let largest = self.largest_lease_reply(&spec, units_total);
        if largest > MAX_MESSAGE_BYTES {
            return Err(ScheduleError::Invalid(format!(
                "a lease of this job could take {largest} bytes, over the {MAX_MESSAGE_BYTES}-byte limit of a reply: \
                 fewer or shorter options, parameters or time control periods"
            )));
        }
        let id = {
            let mut state = self.lock();
            state.next_job += 1;
            state.next_job
        };
        let row = JobRow {
            id: id as i64,
            kind: kind.to_owned(),
            state: if origin.pending { PENDING } else { "running" }.to_owned(),
            outcome: String::new(),
            description: description.to_owned(),
            priority: i64::from(priority),
            spec: spec.encode(),
            units_total: units_total as i64,
            next_unit: 0,
            units_done: 0,
            wdl: [0; 3],
            pentanomial: [0; 5],
            over_the_board: OverTheBoard::default(),
            positions: 0,
            reasons: HashMap::new(),
            created_ms: now_ms(),
            submitter: origin.submitter.to_owned(),
            data_removed_ms: 0,
            request_id: origin.request.map(|k| k.id.clone()).unwrap_or_default(),
            request_digest: origin.request.map(|k| k.digest.clone()).unwrap_or_default(),
        };
        Ok(NewJob { row, spec })
    }

    /// Schedules a job once it is stored ([`NewJob::changes`]); returns its view.
    pub fn enter_job(&self, job: NewJob) -> v1::Job {
        let NewJob { row, spec } = job;
        let spsa = spsa_run(&spec);
        let view = job_view(&row, &spec, (0, 0, 0), spsa.as_ref().map(SpsaRun::view));
        let course = matches!(spec, JobSpec::Match(_)).then(Course::default);
        let (changes, _) = watch::channel(0);
        let listing = Listing::of(&view);
        self.lock().insert_job(JobState {
            row,
            spec: Arc::new(spec),
            done: HashSet::new(),
            requeue: BTreeSet::new(),
            active_leases: 0,
            changes,
            any_change: self.any_change.clone(),
            course,
            refused: 0,
            by_worker: HashMap::new(),
            failures: FailureCounts::default(),
            spsa_order: spsa.as_ref().map(|_| Arc::default()),
            spsa,
            suspects: HashMap::new(),
            rechecks: BTreeMap::new(),
            listing,
            stamped_ms: 0,
        });
        self.any_change.send_modify(|version| *version += 1);
        view
    }

    /// An SPSA job's theta over its pairs; `None` for other jobs.
    pub fn spsa_samples(&self, id: u64) -> Option<Vec<v1::SpsaSample>> {
        self.lock().jobs.get(&id).and_then(|j| j.spsa.as_ref()).map(SpsaRun::samples)
    }

    /// A job's public view.
    pub fn job(&self, id: u64) -> Option<v1::Job> {
        let parts = self.lock().jobs.get(&id).map(JobState::parts);
        parts.map(|p| p.view())
    }

    /// The jobs that pass `request`'s filters, newest first, at most its limit (0:
    /// 100, at most 10,000). Every filter is decided on what each job keeps (its row
    /// and its [`Listing`]) before any view is made, so that a list costs its length
    /// in views, and a search a comparison per job, not a view per job ever made
    /// (finding N4 of the security review).
    pub fn jobs(&self, request: &v1::ListJobsRequest) -> Vec<v1::Job> {
        let limit = if request.limit == 0 { 100 } else { request.limit.min(10_000) } as usize;
        let search = request.search.to_lowercase();
        let parts: Vec<ViewParts> = {
            let state = self.lock();
            let wanted = |j: &&JobState| {
                (!request.active_only || is_live(&j.row.state))
                    && (request.state.is_empty() || j.row.state == request.state)
                    && (request.kind.is_empty() || j.row.kind == request.kind)
                    && j.listing.matches(request, &search)
            };
            state.jobs.values().rev().filter(wanted).take(limit).map(JobState::parts).collect()
        };
        parts.iter().map(ViewParts::view).collect()
    }

    /// A match's course, if it is known in memory.
    pub fn course(&self, id: u64) -> Option<Course> {
        self.lock().jobs.get(&id).and_then(|j| j.course.clone())
    }

    /// Keeps a match's course read from storage, if it holds every counted pair (no
    /// pair counted while it was read) and none is kept yet.
    pub fn keep_course(&self, id: u64, course: Course) {
        let mut state = self.lock();
        if let Some(job) = state.jobs.get_mut(&id)
            && job.course.is_none()
            && course.pairs() == job.row.units_done as u64
        {
            job.course = Some(course);
        }
    }

    /// Counts a refused report against its worker and, when the lease is known, its job.
    pub fn note_refusal(&self, worker: u64, lease_id: u64) {
        let mut state = self.lock();
        let State { workers, jobs, leases, .. } = &mut *state;
        if let Some(reporter) = workers.get_mut(&worker) {
            reporter.refused += 1;
        }
        if let Some(job) = leases.get(&lease_id).and_then(|l| jobs.get_mut(&(l.row.job_id as u64))) {
            job.refused += 1;
            job.notify();
        }
    }

    /// A job's spec.
    pub fn spec(&self, id: u64) -> Option<Arc<JobSpec>> {
        self.lock().jobs.get(&id).map(|j| j.spec.clone())
    }

    /// Holds `worker` suspect in job `job`: a spot check found its report of `unit`
    /// false, or two other workers' reports contradict it (`reason`). Its lease `lease`
    /// (if any) is cancelled, so that the unit goes to another worker, and it gets none
    /// of the job's work until that worker's report settles it
    /// ([`Self::confirm_suspects`]).
    pub async fn suspect(
        &self,
        worker: u64,
        job: u64,
        unit: u64,
        lease: Option<u64>,
        reason: &str,
    ) -> Result<(), ScheduleError> {
        {
            let mut state = self.lock();
            let job = state.jobs.get_mut(&job).ok_or_else(|| ScheduleError::NotFound(format!("job {job}")))?;
            job.suspects.entry(worker).or_default().push((unit, reason.to_owned()));
        }
        let suspicion = Suspicion { worker_id: worker as i64, unit, reason: reason.to_owned() };
        self.writer.write(Change::Suspicion { job_id: job as i64, suspicion }).await?;
        if let Some(lease) = lease
            && self.close_lease(lease, true)
        {
            self.writer.write(Change::LeaseState { id: lease as i64, state: "cancelled".to_owned() }).await?;
        }
        tracing::warn!(worker, job, unit, reason, "worker suspected: its unit goes to another worker");
        Ok(())
    }

    /// The workers held suspect of job `job`'s `unit` whom `reporter`'s report of it,
    /// found true, confirms: each with why it was suspected. They are no longer held
    /// suspect (the caller quarantines them).
    pub async fn confirm_suspects(
        &self,
        job_id: u64,
        unit: u64,
        reporter: u64,
    ) -> Result<Vec<(u64, String)>, ScheduleError> {
        let confirmed: Vec<(u64, String)> = {
            let mut state = self.lock();
            let Some(job) = state.jobs.get_mut(&job_id) else { return Ok(Vec::new()) };
            let confirmed: Vec<(u64, String)> = job
                .suspects
                .iter()
                .filter(|(worker, _)| **worker != reporter)
                .filter_map(|(worker, units)| {
                    units.iter().find(|(u, _)| *u == unit).map(|(_, why)| (*worker, why.clone()))
                })
                .collect();
            for (worker, _) in &confirmed {
                job.suspects.remove(worker);
            }
            confirmed
        };
        for (worker, _) in &confirmed {
            self.writer.write(Change::SuspicionsSettled { job_id: job_id as i64, worker_id: *worker as i64 }).await?;
        }
        Ok(confirmed)
    }

    /// The re-check of job `job_id`'s `unit` that `worker`'s report of it plays, if
    /// one is pending and the worker has not reported the unit before.
    pub fn recheck(&self, job_id: u64, unit: u64, worker: u64) -> Option<Recheck> {
        let state = self.lock();
        let recheck = state.jobs.get(&job_id)?.rechecks.get(&unit)?;
        (!recheck.reported_by(worker)).then(|| recheck.row.clone())
    }

    /// Keeps `worker`'s report of job `job_id`'s `unit` (stored in `file`), which gives
    /// the reference's verdicts otherwise than the counted report: a third worker's
    /// report (of neither) decides between them.
    pub async fn recheck_disputed(&self, job_id: u64, unit: u64, worker: u64, file: &str) -> Result<(), ScheduleError> {
        let recheck = {
            let mut state = self.lock();
            let job = state.jobs.get_mut(&job_id).ok_or_else(|| ScheduleError::NotFound(format!("job {job_id}")))?;
            let Some(recheck) = job.rechecks.get_mut(&unit) else { return Ok(()) };
            recheck.row.second_worker = worker as i64;
            recheck.row.second_file = file.to_owned();
            recheck.lease = None;
            let row = recheck.row.clone();
            job.notify();
            row
        };
        self.writer.write(Change::Recheck { job_id: job_id as i64, recheck }).await?;
        Ok(())
    }

    /// Ends the re-check of job `job_id`'s `unit`.
    pub async fn recheck_settled(&self, job_id: u64, unit: u64) -> Result<(), ScheduleError> {
        if let Some(job) = self.lock().jobs.get_mut(&job_id) {
            job.rechecks.remove(&unit);
            job.notify();
        }
        self.writer.write(Change::RecheckSettled { job_id: job_id as i64, unit }).await?;
        Ok(())
    }

    /// Whether a job's unit is stored and counted.
    pub fn unit_done(&self, id: u64, unit: u64) -> bool {
        self.lock().jobs.get(&id).is_some_and(|j| j.done.contains(&unit))
    }

    /// Sets the metrics read off the state: jobs running by kind, workers online (heard
    /// from within a lease's lifetime) and known, leases in flight.
    pub fn refresh_gauges(&self) {
        let state = self.lock();
        const KINDS: [&str; 5] = ["sprt", "games", "selfplay", "spsa", "verify"];
        let mut running = [0_i64; KINDS.len()];
        for job in state.live_jobs().filter(|j| j.row.state == "running") {
            if let Some(index) = KINDS.iter().position(|kind| job.row.kind == *kind) {
                running[index] += 1;
            }
        }
        for (kind, running) in KINDS.iter().zip(running) {
            self.metrics.jobs_running.get_or_create(&KindLabel { kind: (*kind).to_owned() }).set(running);
        }
        let recent = now_ms() - self.config.lease_ttl.as_millis() as i64;
        let online = state.workers.values().filter(|w| w.row.last_seen_ms >= recent).count();
        self.metrics.workers_online.set(online as i64);
        self.metrics.workers_known.set(state.workers.len() as i64);
        self.metrics.leases_active.set(state.leases.values().filter(|l| l.active).count() as i64);
    }

    /// A receiver that changes whenever any job does.
    pub fn watch_all(&self) -> watch::Receiver<u64> {
        self.any_change.subscribe()
    }

    /// The jobs that changed since `seen` (each job's version when last looked at),
    /// which is brought up to date; a job `seen` does not hold counts as changed.
    pub fn changed_jobs(&self, seen: &mut HashMap<u64, u64>) -> Vec<v1::Job> {
        let mut changed = Vec::new();
        {
            let state = self.lock();
            for (id, job) in &state.jobs {
                let version = *job.changes.borrow();
                if seen.insert(*id, version) != Some(version) {
                    changed.push(job.parts());
                }
            }
        }
        changed.iter().map(ViewParts::view).collect()
    }

    /// A receiver that changes whenever the job does.
    pub fn watch(&self, id: u64) -> Option<watch::Receiver<u64>> {
        self.lock().jobs.get(&id).map(|j| j.changes.subscribe())
    }

    /// Workers and their leases.
    pub fn workers(&self) -> Vec<v1::WorkerInfo> {
        let state = self.lock();
        let mut list: Vec<v1::WorkerInfo> = state
            .workers
            .values()
            .map(|w| v1::WorkerInfo {
                worker_id: w.row.id as u64,
                capabilities: Some(v1::Capabilities {
                    name: if w.capabilities.name.is_empty() { w.row.name.clone() } else { w.capabilities.name.clone() },
                    ..w.capabilities.clone()
                }),
                last_seen_ms: w.row.last_seen_ms,
                active_leases: w.leases.iter().filter(|l| state.leases.get(l).is_some_and(|l| l.active)).count() as u32,
                job_ids: {
                    let active = w.leases.iter().filter_map(|l| state.leases.get(l)).filter(|l| l.active);
                    let jobs: BTreeSet<u64> = active.map(|l| l.row.job_id as u64).collect();
                    jobs.into_iter().collect()
                },
                units_done: w.units_done,
                refused_reports: w.refused,
                standing: w.row.standing.clone(),
                standing_reason: w.row.standing_reason.clone(),
            })
            .collect();
        list.sort_by_key(|w| w.worker_id);
        list
    }

    /// Sets a worker's standing. Disabling or quarantining it closes its leases (their
    /// units go to other workers) and refuses its leases and reports from then on;
    /// quarantining also sets its counted units of running jobs aside and recounts
    /// those jobs without them (the units are played again). Restoring it leaves what
    /// was set aside where it is.
    pub async fn set_standing(
        &self,
        worker: u64,
        standing: &str,
        reason: &str,
    ) -> Result<v1::WorkerInfo, ScheduleError> {
        self.set_standing_in(worker, standing, reason, None).await
    }

    /// Quarantines a worker whose report of a unit of job `job` was found false, as
    /// [`Self::set_standing`] does, but sets aside only its units of that job: its
    /// results in other jobs stay counted.
    pub async fn quarantine_in_job(&self, worker: u64, job: u64, reason: &str) -> Result<(), ScheduleError> {
        self.set_standing_in(worker, QUARANTINED, reason, Some(job)).await.map(drop)
    }

    /// [`Self::set_standing`], setting aside a quarantined worker's units of job `only`
    /// (if given), else of every running job.
    async fn set_standing_in(
        &self,
        worker: u64,
        standing: &str,
        reason: &str,
        only: Option<u64>,
    ) -> Result<v1::WorkerInfo, ScheduleError> {
        if ![ACTIVE, DISABLED, QUARANTINED].contains(&standing) {
            return Err(ScheduleError::Invalid(format!("standing '{standing}': use active, disabled or quarantined")));
        }
        check_label("reason", reason)?;
        let (leases, jobs) = {
            let mut state = self.lock();
            let State { workers, jobs, .. } = &mut *state;
            let player = workers.get_mut(&worker).ok_or_else(|| ScheduleError::NotFound(format!("worker {worker}")))?;
            player.row.standing = standing.to_owned();
            player.row.standing_reason = reason.to_owned();
            let leases: Vec<u64> = player.leases.iter().copied().collect();
            let running = jobs.iter().filter(|(id, j)| {
                j.row.state == "running" && j.by_worker.contains_key(&worker) && only.is_none_or(|only| **id == only)
            });
            let set_aside =
                if standing == QUARANTINED { running.map(|(id, _)| *id as i64).collect() } else { Vec::new() };
            (leases, set_aside)
        };
        if standing != ACTIVE {
            for id in leases {
                if self.close_lease(id, true) {
                    self.writer.write(Change::LeaseState { id: id as i64, state: "cancelled".to_owned() }).await?;
                }
            }
        }
        self.write_standing(worker, jobs).await?;
        tracing::warn!(worker, standing, reason, "worker standing changed");
        Ok(self.workers().into_iter().find(|w| w.worker_id == worker).expect("the worker was found above"))
    }

    /// Stores a worker's standing as it is in memory and sets its units of `jobs`
    /// aside, taking off the counts those it had counted.
    async fn write_standing(&self, worker: u64, jobs: Vec<i64>) -> Result<(), ScheduleError> {
        let (standing, reason) = {
            let state = self.lock();
            let row =
                &state.workers.get(&worker).ok_or_else(|| ScheduleError::NotFound(format!("worker {worker}")))?.row;
            (row.standing.clone(), row.standing_reason.clone())
        };
        let change = Change::WorkerStanding { worker_id: worker as i64, standing, reason, set_aside_jobs: jobs };
        let applied = self.writer.write(change).await?;
        let mut state = self.lock();
        let State { jobs, workers, .. } = &mut *state;
        let mut touched: BTreeMap<u64, HashSet<u64>> = BTreeMap::new();
        for unit in &applied.set_aside {
            let Some(job) = jobs.get_mut(&(unit.job_id as u64)) else { continue };
            // A unit stored but not yet counted here is never counted (record_units).
            if !job.done.remove(&unit.unit) {
                continue;
            }
            touched.entry(unit.job_id as u64).or_default().insert(unit.unit);
            job.rechecks.remove(&unit.unit);
            if job.row.state == "running" {
                job.requeue.insert(unit.unit);
            }
            job.row.units_done -= 1;
            if let Some(player) = workers.get_mut(&worker) {
                player.units_done = player.units_done.saturating_sub(1);
            }
            let by_records = matches!(&*job.spec, JobSpec::SelfPlay(_) | JobSpec::Verify(_));
            let slot = if by_records { 0 } else { pair_slot(unit.points) };
            if let Some(tally) = job.by_worker.get_mut(&worker) {
                tally[slot] = tally[slot].saturating_sub(1);
            }
            if by_records {
                job.row.positions -= unit.records;
                continue;
            }
            let (mut wdl, mut penta) = ([0u64; 3], [0u64; 5]);
            add_points(&mut wdl, &mut penta, unit.points);
            for (total, take) in job.row.wdl.iter_mut().zip(wdl) {
                *total -= take as i64;
            }
            for (total, take) in job.row.pentanomial.iter_mut().zip(penta) {
                *total -= take as i64;
            }
            job.row.over_the_board.count(unit.points, &unit.reasons, -1);
            for reason in &unit.reasons {
                if let Some(count) = job.row.reasons.get_mut(reason) {
                    *count = count.saturating_sub(1);
                    if *count == 0 {
                        job.row.reasons.remove(reason);
                    }
                }
            }
        }
        for (id, units) in touched {
            let job = jobs.get_mut(&id).expect("touched jobs exist");
            job.by_worker.remove(&worker);
            job.failures.remove(worker);
            if let Some(run) = job.spsa.as_mut() {
                run.set_aside(&units);
            }
            // Its course is read again from what is stored, when next asked for.
            job.course = None;
            job.notify();
        }
        Ok(())
    }

    /// Ends a job: `state` is "stopped" or "finished".
    pub async fn end_job(&self, id: u64, state_name: &str, outcome: &str) -> Result<v1::Job, ScheduleError> {
        let (change, view) = {
            let mut state = self.lock();
            let job = state.jobs.get_mut(&id).ok_or_else(|| ScheduleError::NotFound(format!("job {id}")))?;
            if !is_live(&job.row.state) {
                return Ok(job.view());
            }
            job.row.state = state_name.to_owned();
            job.row.outcome = outcome.to_owned();
            job.requeue.clear();
            job.notify();
            let ended = (
                Change::JobState {
                    id: id as i64,
                    state: job.row.state.clone(),
                    outcome: job.row.outcome.clone(),
                    priority: job.row.priority,
                },
                job.view(),
            );
            state.live.remove(&id);
            ended
        };
        self.writer.write(change).await?;
        Ok(view)
    }

    /// Lets a job that waits for approval run.
    pub async fn approve(&self, id: u64) -> Result<v1::Job, ScheduleError> {
        let (change, view) = {
            let mut state = self.lock();
            let job = state.jobs.get_mut(&id).ok_or_else(|| ScheduleError::NotFound(format!("job {id}")))?;
            if job.row.state != PENDING {
                return Err(ScheduleError::Invalid(format!("job {id} is {}, not pending", job.row.state)));
            }
            job.row.state = "running".to_owned();
            job.notify();
            let change = Change::JobState {
                id: id as i64,
                state: job.row.state.clone(),
                outcome: job.row.outcome.clone(),
                priority: job.row.priority,
            };
            (change, job.view())
        };
        self.writer.write(change).await?;
        Ok(view)
    }

    /// The id of the token that created job `id`.
    pub fn submitter(&self, id: u64) -> Option<String> {
        self.lock().jobs.get(&id).map(|j| j.row.submitter.clone())
    }

    /// How many running or pending jobs `submitter` has.
    pub fn active_jobs_of(&self, submitter: &str) -> usize {
        self.lock().live_jobs().filter(|j| j.row.submitter == submitter).count()
    }

    /// When job `id`'s stored data was removed (0: it was not); `None`: no such job.
    pub fn data_removed_ms(&self, id: u64) -> Option<i64> {
        self.lock().jobs.get(&id).map(|j| j.row.data_removed_ms)
    }

    /// Records that job `id`'s games or training data are removed, before they are.
    pub async fn mark_data_removed(&self, id: u64, at_ms: i64) -> Result<(), ScheduleError> {
        self.writer.write(Change::DataRemoved { job_id: id as i64, at_ms }).await?;
        if let Some(job) = self.lock().jobs.get_mut(&id) {
            job.row.data_removed_ms = at_ms;
            job.notify();
        }
        self.audit("coordinator", "job.data_removed", &id.to_string()).await?;
        Ok(())
    }

    /// Changes a job's priority.
    pub async fn set_priority(&self, id: u64, priority: i32) -> Result<v1::Job, ScheduleError> {
        let (change, view) = {
            let mut state = self.lock();
            let job = state.jobs.get_mut(&id).ok_or_else(|| ScheduleError::NotFound(format!("job {id}")))?;
            job.row.priority = i64::from(priority);
            job.notify();
            (
                Change::JobState {
                    id: id as i64,
                    state: job.row.state.clone(),
                    outcome: job.row.outcome.clone(),
                    priority: job.row.priority,
                },
                job.view(),
            )
        };
        self.writer.write(change).await?;
        Ok(view)
    }

    /// Leases work to `worker`, or `None` when there is none it can run.
    pub async fn lease(&self, worker: u64, concurrency: u32) -> Result<Option<v1::Lease>, ScheduleError> {
        let (lease, change) = {
            let mut state = self.lock();
            let player =
                state.workers.get(&worker).ok_or_else(|| ScheduleError::NotFound(format!("worker {worker}")))?;
            player.may_play()?;
            // Its cores bound its leases: a worker whose registration the coordinator
            // lost (a database restored from before it) registers again first.
            if player.capabilities.cores == 0 {
                return Err(ScheduleError::Unregistered(worker));
            }
            let capabilities = player.capabilities.clone();
            // A worker plays at most one game per core: no more active leases than
            // cores, none asking for more games at once, so that one worker (or one
            // that lies about its concurrency) cannot hold a test's units.
            let cores = capabilities.cores.max(1);
            let open: Vec<&LeaseState> =
                player.leases.iter().filter_map(|id| state.leases.get(id)).filter(|l| l.active).collect();
            if open.len() >= cores as usize {
                return Ok(None);
            }
            // Nor more work than its reports have shown it plays (its cores are only
            // its word): the estimated seconds of its unreported units.
            let now = Instant::now();
            let held: f64 =
                open.iter().map(|l| l.units.len().saturating_sub(l.acked.len()) as f64 * l.unit_seconds).sum();
            let allowance = player.pace.allowance(now, self.config.lease_seconds);
            if held > 0.0 && held >= allowance {
                return Ok(None);
            }
            let flags: HashSet<&str> = capabilities.cpu_flags.iter().map(String::as_str).collect();
            let chosen = state
                .live_jobs()
                .filter(|j| j.has_work_for(worker) && !j.suspects.contains_key(&worker))
                .filter(|j| match &*j.spec {
                    JobSpec::Match(m) => m.request.required_cpu_flags.iter().all(|f| flags.contains(f.as_str())),
                    JobSpec::SelfPlay(_) => true,
                    JobSpec::Verify(v) => v.runs_on(&capabilities),
                    JobSpec::Unreadable(_) => false,
                })
                .min_by_key(|j| (std::cmp::Reverse(j.row.priority), j.load(), j.row.id))
                .map(|j| j.row.id as u64);
            let Some(job_id) = chosen else { return Ok(None) };
            let slowness = slowness(&self.config, &capabilities);
            let concurrency = concurrency.clamp(1, cores);
            let job = state.jobs.get_mut(&job_id).expect("chosen from the map");
            let mut work = job.spec.lease_work(slowness);
            let unit_seconds = unit_seconds(&job.spec, slowness, capabilities.bench_nps);
            let wanted = (self.config.lease_seconds * f64::from(concurrency) / unit_seconds.max(1e-3)).ceil() as usize;
            let wanted =
                wanted.clamp(1, self.config.max_units_per_lease).min(units_allowed(allowance, held, unit_seconds));
            let rechecks: Vec<u64> =
                job.rechecks.iter().filter(|(_, r)| r.open_to(worker)).map(|(unit, _)| *unit).take(wanted).collect();
            let mut units: Vec<u64> = rechecks.clone();
            while units.len() < wanted {
                if let Some(unit) = job.requeue.pop_first() {
                    units.push(unit);
                } else if job.row.next_unit < job.row.units_total {
                    units.push(job.row.next_unit as u64);
                    job.row.next_unit += 1;
                } else {
                    break;
                }
            }
            job.active_leases += 1;
            job.notify();
            let next_unit = job.row.next_unit;
            state.next_lease += 1;
            let id = state.next_lease;
            if let Some(job) = state.jobs.get_mut(&job_id) {
                for unit in &rechecks {
                    job.rechecks.get_mut(unit).expect("drawn from the map").lease = Some(id);
                }
            }
            // An SPSA lease plays the probe of the iteration reached now.
            let mut probe = String::new();
            if let (Some(run), v1::lease::Work::MatchSpec(spec)) =
                (state.jobs.get_mut(&job_id).and_then(|j| j.spsa.as_mut()), &mut work)
            {
                let (options, text) = run.probe_for(id, &mut rand::rng());
                crate::jobs::spsa::set_probe(spec, options);
                probe = text;
            }
            let row = LeaseRow {
                id: id as i64,
                job_id: job_id as i64,
                worker_id: worker as i64,
                units: units.clone(),
                state: "active".to_owned(),
                probe,
            };
            state.leases.insert(
                id,
                LeaseState {
                    row: row.clone(),
                    units: units.iter().copied().collect(),
                    slowness,
                    unit_seconds,
                    deadline: Instant::now() + self.config.lease_ttl,
                    acked: HashSet::new(),
                    acked_wdl: [0; 3],
                    acked_penta: [0; 5],
                    active: true,
                    closed_at: None,
                },
            );
            if let Some(w) = state.workers.get_mut(&worker) {
                w.leases.insert(id);
                w.pace.lease_taken(now);
            }
            let lease = v1::Lease {
                lease_id: id,
                job_id,
                units,
                lease_seconds: self.config.lease_ttl.as_secs() as u32,
                work: Some(work),
            };
            (lease, Change::NewLease { lease: row, next_unit })
        };
        if let Err(error) = self.writer.write(change).await {
            // Not stored, not given: its units go back.
            self.close_lease(lease.lease_id, false);
            return Err(error.into());
        }
        self.metrics.leases_issued.inc();
        Ok(Some(lease))
    }

    /// Marks a lease inactive in memory; its unfinished units go back to the job if
    /// `requeue`. Returns whether it was active.
    fn close_lease(&self, id: u64, requeue: bool) -> bool {
        let mut state = self.lock();
        let State { leases, jobs, workers, .. } = &mut *state;
        let Some(lease) = leases.get_mut(&id).filter(|l| l.active) else { return false };
        let now = Instant::now();
        lease.active = false;
        lease.closed_at = Some(now);
        let lease = &leases[&id];
        if let Some(worker) = workers.get_mut(&(lease.row.worker_id as u64))
            && !worker.leases.iter().any(|other| leases.get(other).is_some_and(|l| l.active))
        {
            worker.pace.idle(now);
        }
        if let Some(job) = jobs.get_mut(&(lease.row.job_id as u64)) {
            job.active_leases = job.active_leases.saturating_sub(1);
            for recheck in job.rechecks.values_mut().filter(|r| r.lease == Some(id)) {
                recheck.lease = None;
            }
            if job.row.state == "running" {
                for unit in &lease.units {
                    if !job.done.contains(unit) && (requeue || !lease.acked.contains(unit)) {
                        job.requeue.insert(*unit);
                    }
                }
            }
            job.notify();
        }
        true
    }

    /// Expires the leases whose heartbeats stopped; returns how many.
    pub async fn expire(&self) -> Result<usize, ScheduleError> {
        let now = Instant::now();
        let expired: Vec<u64> = {
            let state = self.lock();
            state.leases.values().filter(|l| l.active && l.deadline < now).map(|l| l.row.id as u64).collect()
        };
        let mut count = 0;
        for id in expired {
            if self.close_lease(id, true) {
                count += 1;
                self.metrics.leases_expired.inc();
                self.writer.write(Change::LeaseState { id: id as i64, state: "expired".to_owned() }).await?;
                if let Some((worker, reason)) = self.lease_ended(id, true) {
                    self.set_standing(worker, QUARANTINED, &reason).await?;
                }
            }
        }
        self.forget_closed_leases(now);
        Ok(count)
    }

    /// Counts how lease `id` ended: expired with units unreported, or every unit
    /// reported. When it expired and its worker now lets its leases expire far more
    /// often than the fleet does (a worker that reports only its good pairs must let
    /// every lease holding a withheld one expire), the worker and why.
    fn lease_ended(&self, id: u64, expired: bool) -> Option<(u64, String)> {
        let mut state = self.lock();
        let State { leases, workers, lease_endings, .. } = &mut *state;
        let worker_id = leases.get(&id)?.row.worker_id as u64;
        let worker = workers.get_mut(&worker_id)?;
        for endings in [&mut worker.lease_endings, lease_endings] {
            *if expired { &mut endings.expired } else { &mut endings.finished } += 1;
        }
        if !expired || worker.row.standing != ACTIVE {
            return None;
        }
        let checks = self.config.conduct.as_ref()?;
        let p = checks.expiry_flag(worker.lease_endings, *lease_endings)?;
        let (mine, fleet) = (worker.lease_endings, *lease_endings);
        Some((
            worker_id,
            format!(
                "{} of its {} leases expired with units unreported, against {} of the fleet's {}: p = {p:.1e} \
                 (limit {:.0e})",
                mine.expired,
                mine.ended(),
                fleet.expired,
                fleet.ended(),
                checks.expiry_p
            ),
        ))
    }

    /// Forgets the leases closed longer than `closed_lease_memory` ago.
    fn forget_closed_leases(&self, now: Instant) {
        let memory = self.config.closed_lease_memory;
        let mut state = self.lock();
        let State { leases, workers, .. } = &mut *state;
        leases.retain(|id, lease| {
            let keep = lease.closed_at.is_none_or(|closed| now.saturating_duration_since(closed) < memory);
            if !keep && let Some(worker) = workers.get_mut(&(lease.row.worker_id as u64)) {
                worker.leases.remove(id);
            }
            keep
        });
    }

    /// Leases held in memory, open or closed and remembered.
    pub fn leases_in_memory(&self) -> usize {
        self.lock().leases.len()
    }

    /// What checking a report of `units` on `lease` needs; the lease must be
    /// `worker`'s and hold every unit, each named once. Reports on an expired lease are
    /// still taken: its games are real, and a unit counts once.
    pub fn lease_context(&self, worker: u64, lease: u64, units: &[u64]) -> Result<LeaseContext, ScheduleError> {
        let state = self.lock();
        if let Some(player) = state.workers.get(&worker) {
            player.may_play()?;
        }
        let entry = state
            .leases
            .get(&lease)
            .filter(|l| l.row.worker_id as u64 == worker)
            .ok_or_else(|| ScheduleError::NotFound(format!("lease {lease} is not this worker's")))?;
        let job = state
            .jobs
            .get(&(entry.row.job_id as u64))
            .ok_or_else(|| ScheduleError::NotFound(format!("job {}", entry.row.job_id)))?;
        let mut seen = HashSet::with_capacity(units.len());
        for unit in units {
            if !entry.units.contains(unit) {
                return Err(ScheduleError::Invalid(format!("unit {unit} is not in lease {lease}")));
            }
            if !seen.insert(*unit) {
                return Err(ScheduleError::Invalid(format!("unit {unit} reported twice")));
            }
        }
        Ok(LeaseContext {
            lease_id: lease,
            job_id: job.row.id as u64,
            spec: job.spec.clone(),
            acked: units.iter().copied().filter(|u| entry.acked.contains(u)).collect(),
            acked_count: entry.acked.len() as u64,
            acked_wdl: entry.acked_wdl,
            acked_penta: entry.acked_penta,
            slowness: entry.slowness,
        })
    }

    /// Stores finished units of a lease (already checked), updates the job and decides
    /// an SPRT; units counted `by_records` (self-play, verification) add their records
    /// to the job's positions. Returns whether the worker should stop the lease.
    pub async fn record_units(
        &self,
        worker: u64,
        context: &LeaseContext,
        mut rows: Vec<UnitRow>,
        by_records: bool,
    ) -> Result<bool, ScheduleError> {
        let in_order = self.lock().jobs.get(&context.job_id).and_then(|job| job.spsa_order.clone());
        let _in_order = match &in_order {
            Some(order) => Some(order.lock().await),
            None => None,
        };
        let now = self.lock().jobs.get_mut(&context.job_id).map_or_else(now_ms, JobState::stamp);
        for row in &mut rows {
            row.created_ms = now;
        }
        // In the order storage gives them back at start, where an SPSA job's theta
        // is replayed from them.
        rows.sort_by_key(|row| row.unit);
        let change = Change::Units {
            job_id: context.job_id as i64,
            lease_id: context.lease_id as i64,
            worker_id: worker as i64,
            by_records,
            rows: rows.clone(),
        };
        let applied = if rows.is_empty() { Default::default() } else { self.writer.write(change).await? };
        let new: HashSet<u64> = applied.new_units.iter().copied().collect();
        let (mut drawn, mut unchecked) = (Vec::new(), Vec::new());
        let (stop, ending, finished_lease, flagged, set_aside) = {
            let mut state = self.lock();
            let State { leases, jobs, workers, .. } = &mut *state;
            // Forgotten since the report was checked (closed long ago): the units
            // still count once; there is no lease left to keep the tally of.
            let mut lease = leases.get_mut(&context.lease_id);
            let job = jobs.get_mut(&context.job_id).expect("a job is never removed");
            // Quarantined while this report was on its way: what it stored is set
            // aside below, never counted.
            let set_aside = workers.get(&worker).is_some_and(|w| w.row.standing == QUARANTINED);
            for row in &rows {
                if let Some(lease) = lease.as_deref_mut()
                    && lease.acked.insert(row.unit)
                {
                    if let Some(player) = workers.get_mut(&worker) {
                        player.pace.reported(lease.unit_seconds);
                    }
                    if !by_records {
                        add_points(&mut lease.acked_wdl, &mut lease.acked_penta, row.points);
                    }
                }
                if !new.contains(&row.unit) || set_aside {
                    continue;
                }
                job.by_worker.entry(worker).or_default()[if by_records { 0 } else { pair_slot(row.points) }] += 1;
                job.done.insert(row.unit);
                job.requeue.remove(&row.unit);
                job.row.units_done += 1;
                if let Some(player) = workers.get_mut(&worker) {
                    player.units_done += 1;
                }
                if let Some(course) = job.course.as_mut() {
                    course.add(row.created_ms, row.points);
                }
                if let Some(run) = job.spsa.as_mut() {
                    run.count(context.lease_id, row.unit, worker, row.points);
                }
                if job.row.state == "running"
                    && let Some(recheck) = self.draw_recheck(&job.spec, row.unit, worker)
                {
                    job.rechecks.insert(row.unit, PendingRecheck { row: recheck.clone(), lease: None });
                    drawn.push(recheck);
                }
                if by_records {
                    job.row.positions += row.records;
                    if matches!(&*job.spec, JobSpec::SelfPlay(_)) {
                        self.metrics.positions.inc_by(row.records.max(0) as u64);
                    }
                } else {
                    self.metrics.games.inc_by(2);
                    let (mut wdl, mut penta) = ([0u64; 3], [0u64; 5]);
                    add_points(&mut wdl, &mut penta, row.points);
                    for (total, add) in job.row.wdl.iter_mut().zip(wdl) {
                        *total += add as i64;
                    }
                    for (total, add) in job.row.pentanomial.iter_mut().zip(penta) {
                        *total += add as i64;
                    }
                    job.row.over_the_board.count(row.points, &row.reasons, 1);
                    for reason in &row.reasons {
                        *job.row.reasons.entry(reason.clone()).or_default() += 1;
                    }
                    let abandoned = abandoned_games(row.reasons.iter().map(String::as_str));
                    job.failures.add_pair(worker, abandoned);
                }
            }
            job.notify();
            let flagged =
                if by_records || set_aside { None } else { misconduct(&self.config, job, context.job_id, worker) };
            let mut ending = None;
            if job.row.state == "running" && flagged.is_none() && !set_aside {
                if let JobSpec::Match(m) = &*job.spec
                    && let Some(decision) = m.sprt_state(&job.row).and_then(|s| s.decision())
                {
                    ending = Some(("finished", if decision { "H1 accepted" } else { "H0 accepted" }));
                }
                let online_since = now_ms() - self.config.lease_ttl.as_millis() as i64;
                if ending.is_none()
                    && job.row.units_done >= job.row.units_total
                    && (job.rechecks.is_empty() || !recheckable(job, workers, online_since))
                {
                    ending = Some(("finished", ""));
                    unchecked = std::mem::take(&mut job.rechecks).into_keys().collect();
                }
            }
            let finished_lease = lease.is_some_and(|l| l.active && l.units.iter().all(|u| l.acked.contains(u)));
            (job.row.state != "running" || ending.is_some(), ending, finished_lease, flagged, set_aside)
        };
        // A crash before this write loses only the draw: the unit stays counted.
        for recheck in drawn {
            self.writer.write(Change::Recheck { job_id: context.job_id as i64, recheck }).await?;
        }
        if let Some(reason) = flagged {
            self.set_standing(worker, QUARANTINED, &reason).await?;
            return Ok(true);
        }
        if set_aside {
            if !new.is_empty() {
                self.write_standing(worker, vec![context.job_id as i64]).await?;
            }
            return Ok(true);
        }
        if !unchecked.is_empty() {
            tracing::warn!(job = context.job_id, ?unchecked, "re-checks left: no other worker can report them");
        }
        for unit in unchecked {
            self.writer.write(Change::RecheckSettled { job_id: context.job_id as i64, unit }).await?;
        }
        if let Some((state_name, outcome)) = ending {
            self.end_job(context.job_id, state_name, outcome).await?;
        }
        if finished_lease && self.close_lease(context.lease_id, false) {
            self.writer.write(Change::LeaseState { id: context.lease_id as i64, state: "done".to_owned() }).await?;
            self.lease_ended(context.lease_id, false);
        }
        Ok(stop)
    }
}

impl Scheduler {
    /// Whether `worker`'s report of `unit`, just counted, is to be reported again by
    /// another worker: one in [`SchedulerConfig::recheck_one_in`] units of a
    /// verification job with a reference, drawn here after the report, from the
    /// thread's cryptographic generator, so that no worker can tell at report time
    /// whether its report will be checked.
    fn draw_recheck(&self, spec: &JobSpec, unit: u64, worker: u64) -> Option<Recheck> {
        let JobSpec::Verify(job) = spec else { return None };
        let one_in = self.config.recheck_one_in;
        let drawn = !job.spec.reference.is_empty() && one_in > 0 && rand::random_ratio(1, one_in);
        drawn.then(|| Recheck { unit, first_worker: worker as i64, second_worker: 0, second_file: String::new() })
    }

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

#[cfg(test)]
mod tests {
    use super::residual;

    #[test]
    fn a_residual_is_the_score_gap_in_standard_errors() {
        // 120 honest pairs scoring half (slots 1, 2, 3: 30, 60, 30) and a worker's 40
        // pairs won outright: means 0.5 and 1.0; all 160 pairs' mean 0.625 and
        // variance 11.25 / 160; z = 0.5 / sqrt(0.0703125 * (1/40 + 1/120)) = 10.328.
        let z = residual(&[0, 0, 0, 0, 40], &[0, 30, 60, 30, 40], 40).unwrap();
        assert!((z - 10.328).abs() < 1e-3, "{z}");
        // The same score as the others: no residual at all; too few pairs: no judgement.
        assert_eq!(residual(&[0, 10, 20, 10, 0], &[0, 40, 80, 40, 0], 40), Some(0.0));
        assert_eq!(residual(&[0, 0, 0, 0, 39], &[0, 30, 60, 30, 39], 40), None);
        // Every pair alike: nothing to measure against.
        assert_eq!(residual(&[0, 0, 50, 0, 0], &[0, 0, 100, 0, 0], 40), None);
    }
}
