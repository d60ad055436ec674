//! Failures workers report on leases they cannot work (`xq_proto::failure`): an engine
//! that does not start, a bench signature other than the test's, an artifact that
//! cannot be fetched. The lease ends at once and its units go back to the job without
//! counting against the worker's conduct (an honest worker that cannot run a broken
//! upload is not the fault); the worker gets no more of the job; and when enough
//! workers report the same failure, the job stops as failed, saying why, instead of
//! passing its leases from worker to worker without end.

use std::collections::{BTreeSet, HashMap};

use xq_proto::failure::{FailureKind, clean_detail};
use xq_proto::v1;

use crate::storage::changes::Change;
use crate::storage::now_ms;
use crate::storage::rows::ReportedFailure;

use super::{ScheduleError, Scheduler, State, WorkerState};

/// The longest engine name a report may give (a job's engines are named by their
/// submitter, within this).
const MAX_ENGINE_NAME_BYTES: usize = 256;

/// A failure's view, with its worker's name.
pub(super) fn failure_view(failure: &ReportedFailure, workers: &HashMap<u64, WorkerState>) -> v1::ReportedFailure {
    v1::ReportedFailure {
        worker_id: failure.worker_id as u64,
        worker_name: workers.get(&(failure.worker_id as u64)).map(|w| w.name().to_owned()).unwrap_or_default(),
        kind: failure.kind.clone(),
        engine: failure.engine.clone(),
        detail: failure.detail.clone(),
        time_ms: failure.time_ms,
    }
}

/// The most characters of a report an outcome quotes.
const MAX_QUOTED_CHARS: usize = 160;

/// Why a job stops when the failures reported on it say so: `needed` distinct workers
/// (0: never) reported the same kind of failure of the same engine. The first such
/// report's detail is quoted.
pub(super) fn failed_because(reported: &[v1::ReportedFailure], needed: usize) -> Option<String> {
    if needed == 0 {
        return None;
    }
    let mut workers: HashMap<(&str, &str), BTreeSet<u64>> = HashMap::new();
    for failure in reported {
        let same = workers.entry((&failure.kind, &failure.engine)).or_default();
        same.insert(failure.worker_id);
        if same.len() >= needed {
            let first =
                reported.iter().find(|f| (f.kind.as_str(), f.engine.as_str()) == (&failure.kind, &failure.engine));
            let line = first.map_or("", |f| f.detail.lines().next().unwrap_or(""));
            // The outcome goes into every list: the first line, shortened.
            let detail: String = match line.char_indices().nth(MAX_QUOTED_CHARS) {
                Some((end, _)) => format!("{}…", &line[..end]),
                None => line.to_owned(),
            };
            let of = if failure.engine.is_empty() { String::new() } else { format!(" of engine {}", failure.engine) };
            return Some(format!(
                "failed: {} workers reported a {} failure{of} (the first: {detail})",
                same.len(),
                failure.kind
            ));
        }
    }
    None
}

impl Scheduler {
    /// Takes `worker`'s report that it cannot work lease `lease`: the lease ends and
    /// its units go back to the job, the worker gets no more of the job, and the job
    /// stops as failed when enough workers reported the same failure. Returns whether
    /// it stopped the job.
    pub async fn report_failure(
        &self,
        worker: u64,
        lease: u64,
        report: &v1::FailureReport,
    ) -> Result<bool, ScheduleError> {
        let kind: FailureKind = report.kind.parse().map_err(|e| ScheduleError::Invalid(format!("{e}")))?;
        if report.engine.len() > MAX_ENGINE_NAME_BYTES {
            return Err(ScheduleError::Invalid(format!("an engine's name is at most {MAX_ENGINE_NAME_BYTES} bytes")));
        }
        let (job_id, row, stop) = {
            let mut state = self.lock();
            let State { leases, jobs, workers, .. } = &mut *state;
            if let Some(player) = workers.get(&worker) {
                player.may_play()?;
            }
            let entry = leases
                .get(&lease)
                .filter(|l| l.row.worker_id as u64 == worker)
                .ok_or_else(|| ScheduleError::NotFound(format!("lease {lease} is not this worker's")))?;
            let job_id = entry.row.job_id as u64;
            let job = jobs.get_mut(&job_id).ok_or_else(|| ScheduleError::NotFound(format!("job {job_id}")))?;
            if !report.engine.is_empty() && !job.listing.has_engine(&report.engine) {
                return Err(ScheduleError::Invalid(format!("job {job_id} has no engine named '{}'", report.engine)));
            }
            // One report per worker and job: it gets none of the job's work after it.
            let row = (!job.failed_for(worker)).then(|| ReportedFailure {
                worker_id: worker as i64,
                kind: kind.name().to_owned(),
                engine: report.engine.clone(),
                detail: clean_detail(&report.detail),
                time_ms: now_ms(),
            });
            if let Some(row) = &row {
                job.reported.push(failure_view(row, workers));
                job.notify();
            }
            let stop =
                failed_because(&job.reported, self.config.failures_to_stop).filter(|_| job.row.state == "running");
            (job_id, row, stop)
        };
        if let Some(failure) = row {
            self.writer.write(Change::Failure { job_id: job_id as i64, failure }).await?;
        }
        // Ended as neither expired nor finished: a reported failure is no mark against
        // the worker's conduct.
        if self.close_lease(lease, true) {
            self.writer.write(Change::LeaseState { id: lease as i64, state: "failed".to_owned() }).await?;
        }
        match stop {
            Some(reason) => {
                self.end_job(job_id, "stopped", &reason).await?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::failed_because;
    use xq_proto::v1;

    fn reported(worker: u64, kind: &str, engine: &str) -> v1::ReportedFailure {
        v1::ReportedFailure {
            worker_id: worker,
            kind: kind.to_owned(),
            engine: engine.to_owned(),
            detail: format!("seen by worker {worker}\nits last lines"),
            ..Default::default()
        }
    }

    #[test]
    fn a_job_fails_when_enough_workers_report_the_same_failure() {
        let mut list = vec![reported(1, "bench", "new"), reported(2, "start", "new"), reported(3, "bench", "base")];
        // Three workers, three different failures: none is confirmed.
        assert_eq!(failed_because(&list, 3), None);
        list.push(reported(4, "bench", "new"));
        assert_eq!(failed_because(&list, 3), None);
        list.push(reported(5, "bench", "new"));
        assert_eq!(
            failed_because(&list, 3).as_deref(),
            Some("failed: 3 workers reported a bench failure of engine new (the first: seen by worker 1)")
        );
        // A long first line is shortened in the outcome, which every list shows.
        let long = v1::ReportedFailure { detail: "x".repeat(500), ..reported(9, "start", "base") };
        let outcome = failed_because(&[long], 1).unwrap();
        assert!(outcome.ends_with(&format!("(the first: {}…)", "x".repeat(160))), "{outcome}");
        // A setting of 0 never stops a job; of 1, the first report does.
        assert_eq!(failed_because(&list, 0), None);
        assert!(failed_because(&list[..1], 1).is_some());
    }
}
