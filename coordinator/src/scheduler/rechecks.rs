//! Re-checks of verification units: drawn, leased to a worker that has not reported
//! them, settled or disputed; the suspects they confirm.

use crate::jobs::JobSpec;
use crate::scheduler::{ACTIVE, JobState, PendingRecheck, ScheduleError, Scheduler, WorkerState};
use crate::storage::changes::Change;
use crate::storage::rows::{Recheck, Suspicion};
use std::collections::HashMap;

/// Whether a pending re-check of `job` is being reported, is disputed, or could be
/// reported by a worker heard from since `online_since_ms`: a fleet with no other
/// worker offering the reference finishes its job with its re-checks left undone
/// rather than wait for one forever, but a dispute (two reports that differ: one of
/// them is false) waits for a third worker to decide it.
pub(super) fn recheckable(job: &JobState, workers: &HashMap<u64, WorkerState>, online_since_ms: i64) -> bool {
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

impl Scheduler {
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

    /// Whether `worker`'s report of `unit`, just counted, is to be reported again by
    /// another worker: one in [`SchedulerConfig::recheck_one_in`] units of a
    /// verification job with a reference, drawn here after the report, from the
    /// thread's cryptographic generator, so that no worker can tell at report time
    /// whether its report will be checked.
    pub(super) fn draw_recheck(&self, spec: &JobSpec, unit: u64, worker: u64) -> Option<Recheck> {
        let JobSpec::Verify(job) = spec else { return None };
        let one_in = self.config.recheck_one_in;
        let drawn = !job.spec.reference.is_empty() && one_in > 0 && rand::random_ratio(1, one_in);
        drawn.then(|| Recheck { unit, first_worker: worker as i64, second_worker: 0, second_file: String::new() })
    }
}
