//! The jobs the scheduler holds: created (once per request key), read, watched,
//! approved, reprioritised and ended.

use crate::jobs::JobSpec;
use crate::jobs::spsa::SpsaRun;
use crate::jobs::test::course::Course;
use crate::jobs::view::{Listing, job_view};
use crate::metrics::KindLabel;
use crate::scheduler::reports::SPRT_UNDECIDED;
use crate::scheduler::{
    FailureCounts, JobState, NewJob, Origin, PENDING, RequestKey, ScheduleError, Scheduler, ViewParts, is_live,
};
use crate::storage::changes::Change;
use crate::storage::counts::OverTheBoard;
use crate::storage::now_ms;
use crate::storage::rows::{DoneUnit, JobRow};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::watch;
use xq_proto::{MAX_MESSAGE_BYTES, v1};

/// An SPSA job's run, if `spec` is one.
pub(super) fn spsa_run(spec: &JobSpec) -> Option<SpsaRun> {
    match spec {
        JobSpec::Match(job) => job.spsa.as_deref().map(SpsaRun::new),
        JobSpec::SelfPlay(_) | JobSpec::Verify(_) | JobSpec::Unreadable(_) => None,
    }
}

impl Scheduler {
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
            ended_ms: 0,
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
            reported: Vec::new(),
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
        self.listed(limit, |j| {
            (!request.active_only || is_live(&j.row.state))
                && (request.state.is_empty() || j.row.state == request.state)
                && (request.kind.is_empty() || j.row.kind == request.kind)
                && (request.submitter.is_empty() || j.row.submitter == request.submitter)
                && j.listing.matches(request, &search)
        })
    }

    /// The newest `limit` jobs made with any of the tokens `submitters` (by id).
    pub fn jobs_of(&self, submitters: &HashSet<String>, limit: usize) -> Vec<v1::Job> {
        self.listed(limit, |j| submitters.contains(&j.row.submitter))
    }

    /// The newest `limit` jobs that are `wanted`, viewed outside the lock.
    fn listed(&self, limit: usize, wanted: impl Fn(&JobState) -> bool) -> Vec<v1::Job> {
        let parts: Vec<ViewParts> = {
            let state = self.lock();
            state.jobs.values().rev().filter(|j| wanted(j)).take(limit).map(JobState::parts).collect()
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

    /// A job's spec.
    pub fn spec(&self, id: u64) -> Option<Arc<JobSpec>> {
        self.lock().jobs.get(&id).map(|j| j.spec.clone())
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

    /// Ends a job: `state` is "stopped" or "finished".
    pub async fn end_job(&self, id: u64, state_name: &str, outcome: &str) -> Result<v1::Job, ScheduleError> {
        let _in_order = self.state_changes.lock().await;
        let (change, view) = {
            let mut state = self.lock();
            let job = state.jobs.get_mut(&id).ok_or_else(|| ScheduleError::NotFound(format!("job {id}")))?;
            if !is_live(&job.row.state) {
                return Ok(job.view());
            }
            job.row.state = state_name.to_owned();
            job.row.outcome = outcome.to_owned();
            job.row.ended_ms = now_ms();
            job.requeue.clear();
            job.notify();
            let ended = (
                Change::JobState {
                    id: id as i64,
                    state: job.row.state.clone(),
                    outcome: job.row.outcome.clone(),
                    ended_ms: job.row.ended_ms,
                },
                job.view(),
            );
            state.live.remove(&id);
            ended
        };
        self.writer.write(change).await?;
        // None listening (no webhook deliverer) is no error.
        let _ = self.endings.send(view.clone());
        Ok(view)
    }

    /// Replaces a match job's spec (its request changed after creation: `xq modify`)
    /// and its number of units, which may not fall below the units already handed out.
    pub async fn respecify(&self, id: u64, spec: JobSpec, units_total: u64) -> Result<v1::Job, ScheduleError> {
        let (change, view) = {
            let mut state = self.lock();
            let job = state.jobs.get_mut(&id).ok_or_else(|| ScheduleError::NotFound(format!("job {id}")))?;
            if (units_total as i64) < job.row.next_unit {
                return Err(ScheduleError::Invalid(format!(
                    "job {id} has handed out {} pairs already: at least that many",
                    job.row.next_unit
                )));
            }
            job.row.units_total = units_total as i64;
            job.spec = Arc::new(spec);
            job.notify();
            let change = Change::JobSpec { id: id as i64, spec: job.spec.encode(), units_total: job.row.units_total };
            (change, job.view())
        };
        self.writer.write(change).await?;
        Ok(view)
    }

    /// Whether job `id`'s counted units are not all in memory: it ended before this
    /// coordinator started, and [`Scheduler::resume`] needs them from storage.
    pub fn counted_units_unread(&self, id: u64) -> bool {
        self.lock().jobs.get(&id).is_some_and(|job| (job.done.len() as i64) < job.row.units_done)
    }

    /// Runs a stopped job again from where it stopped: its counted units kept, the
    /// units handed out and not counted played again first, the failures reported on
    /// it forgotten (their workers may play it again). A finished job runs again only
    /// when it has units left: a fixed-length test, or an SPRT undecided at its most
    /// pairs, whose pairs were raised.
    pub async fn resume(&self, id: u64, stored: &[DoneUnit]) -> Result<v1::Job, ScheduleError> {
        let _in_order = self.state_changes.lock().await;
        let (changes, view) = {
            let mut state = self.lock();
            let job = state.jobs.get_mut(&id).ok_or_else(|| ScheduleError::NotFound(format!("job {id}")))?;
            let left = job.row.units_done < job.row.units_total;
            match job.row.state.as_str() {
                "stopped" => {}
                "finished" if left && ["", SPRT_UNDECIDED].contains(&job.row.outcome.as_str()) => {}
                "finished" => {
                    return Err(ScheduleError::Invalid(format!(
                        "job {id} finished{}: raise its pairs first (xq modify), or clone it",
                        if job.row.outcome.is_empty() { String::new() } else { format!(" ({})", job.row.outcome) }
                    )));
                }
                other => return Err(ScheduleError::Invalid(format!("job {id} is {other}, not stopped"))),
            }
            if matches!(&*job.spec, JobSpec::Unreadable(_)) {
                return Err(ScheduleError::Invalid(format!("job {id} cannot be read back by this version")));
            }
            // A job that ended before this coordinator started has its counted units
            // (`stored`, read from storage by the caller) counted now: its done set and
            // its workers' pairs; its course is read from storage when next asked for.
            // A job stopped since keeps its own (nothing is stored that it lacks).
            if !stored.is_empty() {
                job.count_stored(stored, false);
                job.course = None;
            }
            if (job.done.len() as i64) < job.row.units_done {
                return Err(ScheduleError::Invalid(format!(
                    "job {id}: {} counted units stored of {}",
                    job.done.len(),
                    job.row.units_done
                )));
            }
            job.row.state = "running".to_owned();
            job.row.outcome = String::new();
            job.row.ended_ms = 0;
            job.reported.clear();
            // A lease of it still in flight (its worker not yet told of the stop) keeps
            // its units: handed out again now, they would be played twice.
            let requeue = state.units_to_requeue(id);
            let job = state.jobs.get_mut(&id).expect("found above");
            job.requeue = requeue;
            job.notify();
            let changes = [
                Change::JobState {
                    id: id as i64,
                    state: job.row.state.clone(),
                    outcome: String::new(),
                    ended_ms: job.row.ended_ms,
                },
                Change::FailuresCleared { job_id: id as i64 },
            ];
            let view = job.view();
            state.live.insert(id);
            (changes, view)
        };
        for change in changes {
            self.writer.write(change).await?;
        }
        Ok(view)
    }

    /// Lets a job that waits for approval run.
    pub async fn approve(&self, id: u64) -> Result<v1::Job, ScheduleError> {
        let _in_order = self.state_changes.lock().await;
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
                ended_ms: job.row.ended_ms,
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

    /// The jobs of `submitter` that run or wait for approval.
    pub fn live_jobs_of(&self, submitter: &str) -> Vec<u64> {
        self.lock().live_jobs().filter(|j| j.row.submitter == submitter).map(|j| j.row.id as u64).collect()
    }

    /// How many units job `id` has; `None`: no such job.
    pub fn units_total(&self, id: u64) -> Option<u64> {
        self.lock().jobs.get(&id).map(|j| j.row.units_total as u64)
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
            // The priority alone: a whole state written after the lock is let go could
            // land after an ending's and undo it.
            (Change::JobPriority { id: id as i64, priority: job.row.priority }, job.view())
        };
        self.writer.write(change).await?;
        Ok(view)
    }
}
