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

pub mod artifacts;
pub mod conduct;
pub mod config;
pub mod credit;
pub mod failures;
pub mod jobs;
pub mod leases;
pub mod machines;
pub mod pace;
pub mod rechecks;
pub mod registration;
pub mod releases;
pub mod reports;
pub mod startup;
pub mod tokens;
pub mod users;
pub mod workers;

use crate::access::tokens::Principal;
use crate::jobs::spsa::SpsaRun;
use crate::jobs::test::course::Course;
use crate::jobs::view::{Listing, job_view};
use crate::jobs::{DEFAULT_THROUGHPUT, JobSpec};
use crate::metrics::Metrics;
use crate::scheduler::config::SchedulerConfig;
use crate::scheduler::pace::Pace;
use crate::storage::changes::Change;
use crate::storage::now_ms;
use crate::storage::rows::{AuditRow, JobRow, LeaseRow, Recheck, WorkerRow};
use crate::storage::writer::{WriteError, Writer};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::watch;
use xq_proto::v1;
use xq_stats::conduct::{Failures, Leases};

/// A request the scheduler refuses.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// No such job, lease or worker, or not the caller's.
    #[error("{0}")]
    NotFound(String),
    /// The request contradicts what is stored.
    #[error("{0}")]
    Invalid(String),
    /// The caller may not do this: a disabled or quarantined worker taking work or
    /// reporting, a sign-up where none are taken, a log-in of a user not active.
    #[error("{0}")]
    Denied(String),
    /// The worker asked for work without having said what it can run.
    #[error("worker {0} has not registered: call Register first")]
    Unregistered(u64),
    /// The database did not take the change.
    #[error("storage: {0}")]
    Write(#[from] WriteError),
}

pub(super) struct JobState {
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
    /// The failures workers reported on its leases, oldest first, one per worker: each
    /// of them gets no more of its work. Stored, and read back at start.
    reported: Vec<v1::ReportedFailure>,
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
    pub(super) fn stamp(&mut self) -> i64 {
        self.stamped_ms = now_ms().max(self.stamped_ms + 1);
        self.stamped_ms
    }

    /// What its view is made of.
    pub(super) fn parts(&self) -> ViewParts {
        ViewParts {
            row: self.row.clone(),
            spec: self.spec.clone(),
            active_leases: self.active_leases,
            refused: self.refused,
            spsa: self.spsa.as_ref().map(SpsaRun::view),
            rechecks_pending: self.rechecks.len() as u64,
            failures: self.reported.clone(),
        }
    }

    /// Whether `worker` reported a failure on it: it gets none of its work.
    pub(super) fn failed_for(&self, worker: u64) -> bool {
        self.reported.iter().any(|failure| failure.worker_id == worker)
    }

    pub(super) fn view(&self) -> v1::Job {
        self.parts().view()
    }

    /// Whether it has work for `worker`: units not counted, or re-checks of others'.
    pub(super) fn has_work_for(&self, worker: u64) -> bool {
        self.row.state == "running"
            && (!self.requeue.is_empty()
                || self.row.next_unit < self.row.units_total
                || self.rechecks.values().any(|r| r.open_to(worker)))
    }

    /// Leases in flight per share of the fleet: among jobs of equal priority the one
    /// furthest below its share is served first.
    pub(super) fn load(&self) -> u64 {
        let throughput = match &*self.spec {
            JobSpec::Match(m) => m.request.throughput,
            JobSpec::SelfPlay(r) => r.throughput,
            JobSpec::Verify(_) | JobSpec::Unreadable(_) => 0,
        };
        let throughput = if throughput == 0 { DEFAULT_THROUGHPUT } else { throughput };
        let throughput = u64::from(throughput);
        u64::from(self.active_leases) * 1_000_000 / throughput
    }

    pub(super) fn notify(&self) {
        self.changes.send_modify(|version| *version += 1);
        self.any_change.send_modify(|version| *version += 1);
    }
}

/// A re-check of a unit (see [`Recheck`]) and the lease playing it now, if any.
pub(super) struct PendingRecheck {
    row: Recheck,
    lease: Option<u64>,
}

impl PendingRecheck {
    pub(super) fn reported_by(&self, worker: u64) -> bool {
        [self.row.first_worker, self.row.second_worker].contains(&(worker as i64))
    }

    /// Whether it can be leased to `worker`: no lease plays it, and `worker` has not
    /// reported the unit (a re-check is another worker's report).
    pub(super) fn open_to(&self, worker: u64) -> bool {
        self.lease.is_none() && !self.reported_by(worker)
    }
}

pub(super) struct LeaseState {
    row: LeaseRow,
    units: HashSet<u64>,
    /// How much slower than the reference its worker was when it was leased: its time
    /// control is the job's scaled by this, and its games are checked against that.
    slowness: f64,
    /// The estimated seconds of one of its units on its worker: how much work its
    /// unreported units hold, and how much each report shows ([`crate::scheduler::pace`]).
    unit_seconds: f64,
    deadline: Instant,
    /// Heartbeats extend `deadline` up to this and no further ([`leases::held_until`]).
    held_until: Instant,
    /// Units this lease has reported, and their totals: what the next cumulative
    /// report must extend.
    acked: HashSet<u64>,
    acked_wdl: [u64; 3],
    acked_penta: [u64; 5],
    /// Restored at start-up: how many of its units another lease's row counts, which
    /// this lease may have reported too before the restart (a unit is stored once, so
    /// such a report left no row of its own). Its next cumulative totals may hold up to
    /// this many pairs more than its rows show ([`Scheduler::adopt_reported_before`]).
    reported_unstored: u64,
    active: bool,
    /// When it was closed (finished, expired or stopped).
    closed_at: Option<Instant>,
    /// When it last reported new units (or was taken), in milliseconds since the Unix
    /// epoch: the next report's units share its cores' time since then.
    last_report_ms: i64,
}

/// What a job's view is made of, copied out of the lock: the views of a thousand jobs
/// (each an SPRT and an Elo estimate) are computed without holding up reports.
pub(super) struct ViewParts {
    row: JobRow,
    spec: Arc<JobSpec>,
    active_leases: u32,
    refused: u64,
    spsa: Option<v1::SpsaView>,
    rechecks_pending: u64,
    failures: Vec<v1::ReportedFailure>,
}

impl ViewParts {
    pub(super) fn view(&self) -> v1::Job {
        let mut job = job_view(
            &self.row,
            &self.spec,
            (self.active_leases, self.refused, self.rechecks_pending),
            self.spsa.clone(),
        );
        job.failures = self.failures.clone();
        job
    }
}

pub(super) struct WorkerState {
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
    /// The user whose worker key enrolled it ('' for a worker token's).
    user: String,
}

impl WorkerState {
    /// The name it gave at registration, or its token's.
    pub(super) fn name(&self) -> &str {
        if self.capabilities.name.is_empty() { &self.row.name } else { &self.capabilities.name }
    }

    /// Refuses a worker that was disabled or quarantined.
    pub(super) fn may_play(&self) -> Result<(), ScheduleError> {
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

/// Counts a pair's two games, `abandoned` of them ended by an engine's failure.
/// A match's games and those ended by an engine's failure, by worker and in all (kept
/// in step, so that judging a report does not sum every worker's).
#[derive(Default)]
pub(super) struct FailureCounts {
    by_worker: HashMap<u64, Failures>,
    all: Failures,
}

impl FailureCounts {
    /// Counts a pair of `worker`'s, `abandoned` of its two games by a failure.
    pub(super) fn add_pair(&mut self, worker: u64, abandoned: u64) {
        for failures in [self.by_worker.entry(worker).or_default(), &mut self.all] {
            failures.games += 2;
            failures.abandoned += abandoned;
        }
    }

    /// Takes `worker`'s games off the counts (its pairs set aside).
    pub(super) fn remove(&mut self, worker: u64) {
        if let Some(gone) = self.by_worker.remove(&worker) {
            self.all.games -= gone.games;
            self.all.abandoned -= gone.abandoned;
        }
    }

    pub(super) fn of(&self, worker: u64) -> Failures {
        self.by_worker.get(&worker).copied().unwrap_or_default()
    }
}

/// A token in force.
pub(super) struct TokenState {
    /// Who holds it; `Err`: a stored token that grants nothing, and why (its row names
    /// a role this coordinator does not know, or a worker token no worker).
    principal: Result<Principal, String>,
    /// 0: never.
    expires_ms: i64,
    /// The user it belongs to ('' for a worker's).
    user: String,
}

#[derive(Default)]
pub(super) struct State {
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
    /// The user of every token ever made, revoked ones too, by id: whose a job is after
    /// the token that made it is gone (a dashboard session logged out).
    token_users: HashMap<String, String>,
    /// The users, by name.
    users: HashMap<String, users::UserState>,
    /// Machines enrolled with worker keys: by key hash and machine id, their workers.
    machines: HashMap<(String, String), u64>,
    /// The worker release last published: workers of another version are leased none.
    release: Option<v1::WorkerRelease>,
    next_job: u64,
    next_lease: u64,
    next_worker: u64,
}

impl State {
    /// The token in force whose id (its hash's first 12 hex digits) is `id`.
    pub(super) fn token_with_id(&self, id: &str) -> Option<&TokenState> {
        self.tokens.iter().find(|(hash, _)| crate::access::tokens::token_id(hash) == id).map(|(_, token)| token)
    }

    pub(super) fn insert_job(&mut self, job: JobState) {
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
    pub(super) fn live_jobs(&self) -> impl Iterator<Item = &JobState> {
        self.live.iter().filter_map(|id| self.jobs.get(id))
    }

    /// Job `id`'s units handed out before (below its next unit) that are neither done
    /// nor in one of its active leases: the queue it runs on from when it starts again,
    /// at a coordinator's start or resumed. A unit still in flight comes back when its
    /// lease closes, if it was not played.
    pub(super) fn units_to_requeue(&self, id: u64) -> BTreeSet<u64> {
        let Some(job) = self.jobs.get(&id) else { return BTreeSet::new() };
        let in_flight: HashSet<u64> = self
            .leases
            .values()
            .filter(|lease| lease.active && lease.row.job_id as u64 == id)
            .flat_map(|lease| lease.units.iter().copied())
            .collect();
        (0..job.row.next_unit.max(0) as u64).filter(|u| !job.done.contains(u) && !in_flight.contains(u)).collect()
    }
}

/// Whether a job in `state` has not ended: it runs or waits for approval.
pub(crate) fn is_live(state: &str) -> bool {
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
    /// How its clocks were fitted to the worker.
    pub scaling: crate::jobs::Scaling,
    /// Pairs it may have reported before a restart that left no row of its own.
    pub reported_unstored: u64,
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
    /// Serialises the changes of a job's state (approval, resumption, ending) from the
    /// change in memory to its write, so that the writes land in the order the changes
    /// were made: a resumption written after the stop that followed it would store the
    /// job as running again.
    state_changes: tokio::sync::Mutex<()>,
    /// Each job's view as it ends (stopped or finished): its webhook's news.
    endings: tokio::sync::broadcast::Sender<v1::Job>,
}

impl Scheduler {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The views of the jobs that end from now on.
    pub fn endings(&self) -> tokio::sync::broadcast::Receiver<v1::Job> {
        self.endings.subscribe()
    }

    /// The address a test's end is POSTed to, if its submitter gave one.
    pub fn notify_url(&self, id: u64) -> Option<String> {
        match &*self.spec(id)? {
            JobSpec::Match(job) if !job.request.notify_url.is_empty() => Some(job.request.notify_url.clone()),
            _ => None,
        }
    }
}
