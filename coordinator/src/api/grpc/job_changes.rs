//! A test after its creation, as fishtest's authors work with theirs: its share of
//! the fleet, its pairs and its info changed while it runs (`xq modify`), a stopped
//! test run again from where it stopped (`xq resume`), and a new test made of a
//! stored one's engines, nets and book with what the author overrides (`xq clone`:
//! the same change at a longer time control, say), so that nothing need be on the
//! author's disk. Each is audited.

use crate::access::caller::Caller;
use crate::api::grpc::Shared;
use crate::api::grpc::jobs::may_claim_throughput;
use crate::jobs::JobSpec;
use crate::jobs::checks::MAX_UNITS;
use crate::jobs::test::MatchJob;
use crate::jobs::test::presets;
use crate::jobs::test::source::check_source;
use crate::scheduler::RequestKey;
use tonic::Status;
use xq_proto::v1;

impl Shared {
    /// The test `id` (an SPRT or a fixed-length match, not an SPSA run), as stored.
    fn stored_test(&self, id: u64) -> Result<MatchJob, Status> {
        match &*self.match_job(id)? {
            JobSpec::Match(job) if job.spsa.is_none() => Ok((**job).clone()),
            _ => Err(Status::invalid_argument(format!("job {id} is an SPSA run, not a test"))),
        }
    }

    /// Changes a test's share of the fleet, pairs or info for `caller` (its submitter
    /// or an admin; a share above the default is an admin's, as at creation).
    pub async fn modify_job(&self, caller: &Caller, request: v1::ModifyJobRequest) -> Result<v1::Job, Status> {
        let id = request.job_id;
        self.may_change(caller, id)?;
        let mut job = self.stored_test(id)?;
        let mut units = self.scheduler.job(id).ok_or_else(|| Status::not_found(format!("job {id}")))?.units_total;
        let mut changed = Vec::new();
        if let Some(throughput) = request.throughput {
            may_claim_throughput(caller, throughput)?;
            job.request.throughput = throughput;
            changed.push(format!("throughput {throughput}"));
        }
        if let Some(pairs) = request.pairs {
            if pairs == 0 || pairs > MAX_UNITS {
                return Err(Status::invalid_argument(format!("pairs {pairs}: from 1 to {MAX_UNITS}")));
            }
            job.request.pairs = pairs;
            units = pairs;
            changed.push(format!("pairs {pairs}"));
        }
        if let Some(info) = request.info {
            let mut source = job.request.source.take().unwrap_or_default();
            source.info = info;
            check_source(&source).map_err(|e| Status::invalid_argument(e.to_string()))?;
            job.request.source = Some(source);
            changed.push("info".to_owned());
        }
        if changed.is_empty() {
            return Err(Status::invalid_argument("nothing to change: give a throughput, pairs or an info text"));
        }
        let view = self.scheduler.respecify(id, JobSpec::Match(Box::new(job)), units).await?;
        self.scheduler.audit(&caller.token_id, "job.modify", &format!("{id} {}", changed.join(", "))).await?;
        Ok(view)
    }

    /// Runs a stopped test again for `caller` (its submitter or an admin), within the
    /// caller's limit of running jobs.
    pub async fn resume_job(&self, caller: &Caller, id: u64) -> Result<v1::Job, Status> {
        self.may_change(caller, id)?;
        self.stored_test(id)?;
        crate::api::grpc::quotas::check_quota(self, caller, 1).await?;
        // Its counted units from storage, for a test that ended before the coordinator
        // last started (not in memory, but resumed it must not play them again).
        let stored = if self.scheduler.counted_units_unread(id) {
            self.storage.done_units(id as i64).await.map_err(|e| Status::internal(e.to_string()))?
        } else {
            Vec::new()
        };
        let view = self.scheduler.resume(id, &stored).await?;
        self.scheduler.audit(&caller.token_id, "job.resume", &id.to_string()).await?;
        Ok(view)
    }

    /// A new test for `caller` of the stored test's engines, nets and book, with the
    /// request's overrides; its priority and share are the defaults, its checks and
    /// quotas a new test's.
    pub async fn clone_test(
        &self,
        caller: &Caller,
        key: Option<&RequestKey>,
        request: v1::CloneTestRequest,
    ) -> Result<v1::Job, Status> {
        let id = request.job_id;
        let mut test = self.stored_test(id)?.request;
        test.priority = 0;
        test.throughput = 0;
        // A clone of a loop's test is its lineage's only when its maker may mark jobs
        // so (a clone by anyone else is a test of the same engines, not a generation).
        if self.nets.may_mark_job(&test.lineage, caller).is_err() {
            test.lineage.clear();
        }
        if xq_proto::speed::has_time_odds(&test.new_engine, &test.base_engine)
            && !(request.preset.is_empty() && request.time_control.is_empty())
        {
            // Its engines' own clocks were chosen against its clock: at another, which
            // side the odds favour could turn.
            return Err(Status::invalid_argument(format!(
                "job {id} plays with time odds: a clone keeps its clocks (make a new test for others)"
            )));
        }
        if !request.preset.is_empty() {
            // The preset's test of the same engines: its clock, its SPRT (a
            // fixed-length test becomes one) and its adjudication.
            presets::lay(&request.preset, &mut test).map_err(|e| Status::invalid_argument(e.to_string()))?;
        }
        if !request.time_control.is_empty() {
            test.time_control = request.time_control;
        }
        match (request.elo0, request.elo1, test.sprt.as_mut()) {
            (None, None, _) => {}
            (Some(elo0), Some(elo1), Some(sprt)) => (sprt.elo0, sprt.elo1) = (elo0, elo1),
            (Some(_), Some(_), None) => {
                return Err(Status::invalid_argument(format!("job {id} has no SPRT: it has no bounds to change")));
            }
            _ => return Err(Status::invalid_argument("give both bounds, elo0 and elo1")),
        }
        if let Some(pairs) = request.pairs {
            test.pairs = pairs;
        }
        test.description = if request.description.is_empty() {
            format!("clone of {id}: {}", test.description)
        } else {
            request.description
        };
        if let Some(info) = request.info {
            test.source.get_or_insert_with(Default::default).info = info;
        }
        let view = self.create_test(caller, key, test).await?;
        self.scheduler.audit(&caller.token_id, "job.clone", &format!("{} of {id}", view.job_id)).await?;
        Ok(view)
    }
}
