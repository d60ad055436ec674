//! What a client may do to jobs of every kind: create a match (a test, an SPSA run's
//! or an event's), stop one, change its priority, read its history.

use crate::access::caller::Caller;
use crate::access::tokens::Role;
use crate::api::grpc::uploads::load_openings;
use crate::api::grpc::{DEFAULT_PRIORITY, Shared, unreadable};
use crate::jobs::test::course::Course;
use crate::jobs::test::{DEFAULT_SPRT_PAIRS, MatchJob, check_test, presets};
use crate::jobs::{DEFAULT_THROUGHPUT, JobSpec, MAX_THROUGHPUT};
use crate::scheduler::{NewJob, RequestKey};
use std::sync::Arc;
use tonic::Status;
use xq_engine::variant::Variant;
use xq_proto::v1;

/// Refuses `caller` a priority of `priority` for a job whose priority is `current` (a
/// new job's: the default). Workers lease by priority first, so a job above the default
/// runs before everyone's at the default: an admin's decision. A submitter may still
/// lower its own job's, or give it back up to the default.
pub(super) fn may_prioritise(caller: &Caller, priority: i32, current: i32) -> Result<(), Status> {
    if caller.role == Role::Admin || priority <= current.max(DEFAULT_PRIORITY) {
        return Ok(());
    }
    Err(Status::permission_denied(format!(
        "priority {priority}: only an admin may raise a job's priority above the default ({DEFAULT_PRIORITY})"
    )))
}

/// Refuses `caller` a share of the fleet of `throughput` percent (0: the default, 100).
/// Among jobs of equal priority the one furthest below its share is leased first, so a
/// share above the default takes leases from everyone's jobs at that priority: an
/// admin's decision, as a priority above the default is (a submitter's test at
/// 4,294,967,295 took 7 of 8 leases: review of 2026-11-28, F5).
pub(super) fn may_claim_throughput(caller: &Caller, throughput: u32) -> Result<(), Status> {
    if throughput > MAX_THROUGHPUT {
        return Err(Status::invalid_argument(format!(
            "throughput {throughput}: at most {MAX_THROUGHPUT} (percent of an equal share of the fleet)"
        )));
    }
    if caller.role == Role::Admin || throughput <= DEFAULT_THROUGHPUT {
        return Ok(());
    }
    Err(Status::permission_denied(format!(
        "throughput {throughput}: only an admin may ask more than the default share ({DEFAULT_THROUGHPUT})"
    )))
}

/// What the gRPC client API and the dashboard's JSON API both serve, written once.
impl Shared {
    /// Refuses new work while the disk is below its reserve (see [`crate::storage::disk`]).
    pub(super) fn check_reserve(&self) -> Result<(), Status> {
        crate::storage::disk::check_reserve(&self.data_dir, self.scheduler.config.reserve_bytes)
            .map_err(Status::resource_exhausted)
    }

    /// Where a job `caller` creates comes from: a submitter's waits for an admin's
    /// approval when the server asks for it; `request` is the client's name for it.
    pub(super) fn origin<'a>(
        &self,
        caller: &'a Caller,
        request: Option<&'a RequestKey>,
    ) -> crate::scheduler::Origin<'a> {
        let pending = caller.role != Role::Admin && self.scheduler.config.require_approval;
        crate::scheduler::Origin { submitter: &caller.token_id, pending, request }
    }

    /// The job an earlier call named by `key` made for `caller`: a retry's answer,
    /// looked for before the quota and the checks that the first call changed. A name
    /// that made a tournament is refused, naming it.
    pub(super) fn created_before(&self, caller: &Caller, key: Option<&RequestKey>) -> Result<Option<v1::Job>, Status> {
        let Some(key) = key else { return Ok(None) };
        if let Some(event) = self.own_event_named(caller, key) {
            return Err(Status::invalid_argument(format!(
                "request id '{}' made tournament {}: a new request needs a new id",
                key.id, event.id
            )));
        }
        Ok(self.scheduler.created_before(&caller.token_id, key)?)
    }

    /// Refuses `caller` a change to job `id` unless an admin or its submitter: the token
    /// that made it, or another of the same user (a dashboard session, a new log-in).
    pub(super) fn may_change(&self, caller: &Caller, id: u64) -> Result<(), Status> {
        match self.scheduler.submitter(id) {
            None => Err(Status::not_found(format!("job {id}"))),
            Some(_) if caller.role == Role::Admin => Ok(()),
            Some(submitter) if submitter == caller.token_id => Ok(()),
            Some(submitter) if self.scheduler.same_person(&submitter, &caller.token_id) => Ok(()),
            Some(_) => Err(Status::permission_denied(format!(
                "job {id} is another submitter's: they or an admin may change it"
            ))),
        }
    }

    /// Creates a test for `caller` (an SPRT, or a fixed number of pairs), once: a
    /// request `key` names was made before is answered with its job. A preset fills
    /// what the request leaves unset.
    pub async fn create_test(
        &self,
        caller: &Caller,
        key: Option<&RequestKey>,
        request: v1::CreateTestRequest,
    ) -> Result<v1::Job, Status> {
        if let Some(job) = self.created_before(caller, key)? {
            return Ok(job);
        }
        let mut request = request;
        if !request.preset.is_empty() {
            let name = request.preset.clone();
            presets::apply(&name, &mut request).map_err(|e| Status::invalid_argument(e.to_string()))?;
        }
        let job = check_test(&request).map_err(|e| Status::invalid_argument(e.to_string()))?;
        if !request.lineage.is_empty() {
            self.nets.may_mark_job(&request.lineage, caller)?;
        }
        let (kind, units) = match &job.sprt {
            Some(_) => ("sprt", if request.pairs == 0 { DEFAULT_SPRT_PAIRS } else { request.pairs }),
            None => ("games", request.pairs),
        };
        let origin = self.origin(caller, key);
        self.create_match(caller, origin, kind, job, units).await
    }

    /// Creates a match job (a test or an SPSA run) once its artifacts are known and
    /// its book reads, within the caller's quota.
    pub(super) async fn create_match(
        &self,
        caller: &Caller,
        origin: crate::scheduler::Origin<'_>,
        kind: &str,
        job: MatchJob,
        units: u64,
    ) -> Result<v1::Job, Status> {
        crate::api::grpc::quotas::check_quota(self, caller, 1).await?;
        let (priority, description) = (job.request.priority, job.request.description.clone());
        let job = self.checked_match(caller, job).await?;
        Ok(self.scheduler.create_job(kind, job, units, (priority, &description), origin).await?)
    }

    /// Checks a match job (a test, an SPSA run, a tournament's test) for `caller`: its
    /// priority, its artifacts uploaded, its book (the default one when it names none)
    /// read.
    pub(super) async fn checked_match(&self, caller: &Caller, mut job: MatchJob) -> Result<JobSpec, Status> {
        may_prioritise(caller, job.request.priority, DEFAULT_PRIORITY)?;
        may_claim_throughput(caller, job.request.throughput)?;
        if job.request.book.is_none() && !job.request.start_position && job.variant == Variant::Xiangqi {
            job.request.book = Some(self.default_book().await?);
        }
        let request = job.request.clone();
        let mut hashes = Vec::new();
        for engine in [&request.new_engine, &request.base_engine].into_iter().flatten() {
            hashes.extend(engine.binary.iter().map(|b| b.sha256.clone()));
            hashes.extend(engine.builds.iter().filter_map(|b| b.binary.as_ref()).map(|b| b.sha256.clone()));
            if let Some(net) = &engine.net {
                self.uploaded(("net", "net", "a net"), &net.sha256).await?;
            }
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

    /// Checks a tournament's `tests` (each with whether it waits for an admin's
    /// approval) for `caller`, within its quotas all at once, and numbers them; they are
    /// stored with their event or not at all ([`Tournaments::add`],
    /// [`Tournaments::extend`]), so that no half-made event or round is left running.
    pub(super) async fn new_tests(&self, caller: &Caller, tests: Vec<(MatchJob, bool)>) -> Result<Vec<NewJob>, Status> {
        crate::api::grpc::quotas::check_quota(self, caller, tests.len()).await?;
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
    pub(super) fn match_job(&self, id: u64) -> Result<Arc<JobSpec>, Status> {
        let spec = self.scheduler.spec(id).ok_or_else(|| Status::not_found(format!("job {id}")))?;
        match &*spec {
            JobSpec::Match(_) => Ok(spec),
            JobSpec::SelfPlay(_) | JobSpec::Verify(_) => {
                Err(Status::invalid_argument(format!("job {id} is not a match: it has no pairs")))
            }
            JobSpec::Unreadable(job) => Err(unreadable(id, job)),
        }
    }
}
