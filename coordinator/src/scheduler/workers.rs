//! The fleet's workers: made, registered, heard from, listed, and set aside (disabled,
//! quarantined, in one job or all) with their counted work.

use crate::access::tokens::{Principal, new_token, token_hash};
use crate::jobs::JobSpec;
use crate::scheduler::conduct::pair_slot;
use crate::scheduler::tokens::check_label;
use crate::scheduler::{ACTIVE, DISABLED, QUARANTINED, ScheduleError, Scheduler, State, WorkerState};
use crate::storage::changes::Change;
use crate::storage::counts::add_points;
use crate::storage::now_ms;
use crate::storage::rows::WorkerRow;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Instant;
use xq_proto::v1;
use xq_stats::conduct::Leases;

impl Scheduler {
    /// Creates a worker of `user` ('' for none) and its token.
    pub async fn create_worker(&self, name: &str, user: &str) -> Result<(u64, String), ScheduleError> {
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
        let mut worker = WorkerState::new(row, v1::Capabilities::default(), 0, Leases::default());
        worker.user = user.to_owned();
        self.lock().workers.insert(id, worker);
        // In force only once its worker is there to be found.
        self.put_in_force(hash, Principal::Worker(id), name, 0, user).await?;
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

    /// Extends the worker's leases; returns those it must drop: of jobs no longer
    /// running, or held past their age ([`super::leases::held_until`]), which expire.
    pub fn heartbeat(&self, worker: u64, leases: &[u64]) -> Vec<u64> {
        let mut state = self.lock();
        let now = Instant::now();
        let deadline = now + self.config.lease_ttl;
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
                        let running = jobs.get(&(lease.row.job_id as u64)).is_some_and(|j| j.row.state == "running")
                            && now < lease.held_until;
                        if running {
                            lease.deadline = deadline;
                        }
                        running
                    });
                !alive
            })
            .collect()
    }

    /// `pairs` with the user of each one's worker.
    pub fn with_users(&self, mut pairs: Vec<v1::PairSummary>) -> Vec<v1::PairSummary> {
        let state = self.lock();
        for pair in &mut pairs {
            pair.user = state.workers.get(&pair.worker_id).map(|w| w.user.clone()).unwrap_or_default();
        }
        pairs
    }

    /// Workers and their leases.
    pub fn workers(&self) -> Vec<v1::WorkerInfo> {
        let state = self.lock();
        let mut list: Vec<v1::WorkerInfo> = state
            .workers
            .values()
            .map(|w| v1::WorkerInfo {
                worker_id: w.row.id as u64,
                user: w.user.clone(),
                capabilities: Some(v1::Capabilities { name: w.name().to_owned(), ..w.capabilities.clone() }),
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
    pub(super) async fn set_standing_in(
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
            self.withdraw_leases(leases).await?;
        }
        self.write_standing(worker, jobs).await?;
        tracing::warn!(worker, standing, reason, "worker standing changed");
        Ok(self.workers().into_iter().find(|w| w.worker_id == worker).expect("the worker was found above"))
    }

    /// Cancels `leases` (those still active), their units back to their jobs.
    pub(super) async fn withdraw_leases(&self, leases: impl IntoIterator<Item = u64>) -> Result<(), ScheduleError> {
        for id in leases {
            if self.close_lease(id, true) {
                self.writer.write(Change::LeaseState { id: id as i64, state: "cancelled".to_owned() }).await?;
            }
        }
        Ok(())
    }

    /// Stores a worker's standing as it is in memory and sets its units of `jobs`
    /// aside, taking off the counts those it had counted.
    pub(super) async fn write_standing(&self, worker: u64, jobs: Vec<i64>) -> Result<(), ScheduleError> {
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
}
