//! A lease's reported units recorded: counted once, written through the writer, the
//! job's counts and course moved, its end decided.

use crate::jobs::JobSpec;
use crate::scheduler::conduct::{misconduct, pair_slot};
use crate::scheduler::credit;
use crate::scheduler::rechecks::recheckable;
use crate::scheduler::{JobState, LeaseContext, PendingRecheck, QUARANTINED, ScheduleError, Scheduler, State};
use crate::storage::changes::Change;
use crate::storage::counts::add_points;
use crate::storage::now_ms;
use crate::storage::rows::{UnitRow, abandoned_games};
use std::collections::HashSet;

/// The outcome of an SPRT that played its most pairs without accepting either
/// hypothesis (a net so tested is rejected).
pub(super) const SPRT_UNDECIDED: &str = "undecided at its most pairs";

impl Scheduler {
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
        {
            let mut state = self.lock();
            let State { jobs, leases, workers, .. } = &mut *state;
            let job = jobs.get_mut(&context.job_id);
            let games = job.as_ref().map_or(0, |job| job.spec.games_per_unit());
            let now = job.map_or_else(now_ms, JobState::stamp);
            for row in &mut rows {
                row.created_ms = now;
            }
            let pace = workers.get(&worker).map(|w| &w.pace);
            credit::stamp(leases.get_mut(&context.lease_id), pace, &mut rows, now, games);
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
                    // An SPRT at its most pairs ends without a verdict, and says so.
                    let sprt = matches!(&*job.spec, JobSpec::Match(m) if m.sprt.is_some());
                    ending = Some(("finished", if sprt { SPRT_UNDECIDED } else { "" }));
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
