//! The scheduler rebuilt from the database at start: jobs, leases, workers and tokens as
//! the last run left them.

use crate::access::tokens::{Principal, Role, token_id};
use crate::jobs::test::course::Course;
use crate::jobs::view::{Listing, job_view};
use crate::jobs::{JobSpec, Unreadable};
use crate::metrics::Metrics;
use crate::scheduler::conduct::pair_slot;
use crate::scheduler::config::SchedulerConfig;
use crate::scheduler::failures::failure_view;
use crate::scheduler::jobs::spsa_run;
use crate::scheduler::leases::{held_until, scaling, slowness, unit_seconds};
use crate::scheduler::pace::Pace;
use crate::scheduler::{
    FailureCounts, JobState, LeaseState, PendingRecheck, Scheduler, State, TokenState, WorkerState,
};
use crate::storage::counts::add_points;
use crate::storage::rows::{DoneUnit, Snapshot, WorkerRow};
use crate::storage::writer::Writer;
use prost::Message;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::watch;
use xq_proto::v1;
use xq_stats::conduct::Leases;

impl WorkerState {
    pub(super) fn new(row: WorkerRow, capabilities: v1::Capabilities, units_done: u64, lease_endings: Leases) -> Self {
        WorkerState {
            row,
            capabilities,
            leases: BTreeSet::new(),
            units_done,
            refused: 0,
            pace: Pace::default(),
            lease_endings,
            user: String::new(),
        }
    }
}

/// Who a stored token's row names. Anything this coordinator does not know grants
/// nothing (a row from a newer version, or one edited by hand), rather than the most.
fn stored_principal(role: &str, worker_id: Option<i64>) -> Result<Principal, String> {
    match (role, worker_id) {
        ("worker", Some(id)) if id > 0 => Ok(Principal::Worker(id as u64)),
        ("worker", _) => Err("it is a worker token stored without its worker".to_owned()),
        ("worker-key", _) => Ok(Principal::WorkerKey),
        (role, _) => Role::named(role)
            .map(Principal::Client)
            .ok_or_else(|| format!("its stored role '{}' is not one this coordinator knows", role.escape_debug())),
    }
}

fn decode_capabilities(text: &str) -> v1::Capabilities {
    hex::decode(text).ok().and_then(|b| v1::Capabilities::decode(b.as_slice()).ok()).unwrap_or_default()
}

/// Ended jobs held for a slow webhook deliverer before the oldest are missed.
const ENDINGS_HELD: usize = 1024;

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
        let mut state = State { release: snapshot.release, ..State::default() };
        for token in &snapshot.tokens {
            state.token_users.insert(token_id(&token.hash).to_owned(), token.user.clone());
        }
        for token in snapshot.tokens.into_iter().filter(|t| t.revoked_ms == 0) {
            let principal = stored_principal(&token.role, token.worker_id);
            if let Err(problem) = &principal {
                tracing::error!("token {}: {problem}; it grants nothing until revoked", token_id(&token.hash));
            }
            state.tokens.insert(token.hash, TokenState { principal, expires_ms: token.expires_ms, user: token.user });
        }
        for machine in snapshot.machines {
            let worker = machine.worker_id as u64;
            if let Some(kept) = state.workers.get_mut(&worker) {
                kept.user = machine.user;
            }
            state.machines.insert((machine.key_hash, machine.machine_id), worker);
        }
        for user in snapshot.users {
            match super::users::UserState::from_row(&user) {
                Ok(kept) => {
                    state.users.insert(user.name, kept);
                }
                Err(problem) => tracing::error!("user '{}': {problem}; it cannot log in", user.name.escape_debug()),
            }
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
            let reported = snapshot.failures.get(&row.id).into_iter().flatten();
            let reported = reported.map(|failure| failure_view(failure, &state.workers)).collect();
            let rechecks = snapshot.rechecks.get(&row.id).into_iter().flatten();
            let rechecks = rechecks.map(|r| (r.unit, PendingRecheck { row: r.clone(), lease: None })).collect();
            let (changes, _) = watch::channel(0);
            let listing = Listing::of(&job_view(&row, &spec, (0, 0, 0), None));
            let running = row.state == "running";
            let mut job = JobState {
                row,
                spec: Arc::new(spec),
                done: HashSet::new(),
                requeue: BTreeSet::new(),
                active_leases: 0,
                changes,
                any_change: any_change.clone(),
                course: None,
                refused: 0,
                by_worker: HashMap::new(),
                failures: FailureCounts::default(),
                spsa_order: spsa.as_ref().map(|_| Arc::default()),
                spsa,
                suspects,
                reported,
                rechecks,
                listing,
                stamped_ms: 0,
            };
            if let Some(stored) = stored {
                job.count_stored(stored, running);
            }
            state.insert_job(job);
        }
        state.next_lease = snapshot.max_lease_id as u64;
        let restarted = Instant::now();
        let deadline = restarted + config.lease_ttl;
        for row in snapshot.active_leases {
            let (id, job_id, worker_id) = (row.id as u64, row.job_id as u64, row.worker_id as u64);
            let slowness = state.workers.get(&worker_id).map_or(1.0, |w| slowness(&config, &w.capabilities));
            let nps = state.workers.get(&worker_id).map_or(0, |w| w.capabilities.bench_nps);
            let unit_seconds = state
                .jobs
                .get(&job_id)
                .map_or(0.0, |j| unit_seconds(&j.spec, scaling(&config, slowness, &j.spec), nps));
            // Restored, its concurrency unknown: estimated as played one at a time.
            let held_until = held_until(&config, restarted, row.units.len(), unit_seconds, 1);
            let mut lease = LeaseState {
                last_report_ms: row.created_ms,
                slowness,
                unit_seconds,
                held_until,
                units: row.units.iter().copied().collect(),
                row,
                deadline,
                acked: HashSet::new(),
                acked_wdl: [0; 3],
                acked_penta: [0; 5],
                reported_unstored: 0,
                active: true,
                closed_at: None,
            };
            for done in snapshot.done_units.get(&(job_id as i64)).into_iter().flatten() {
                if done.lease_id == id as i64 {
                    lease.acked.insert(done.unit);
                    lease.last_report_ms = lease.last_report_ms.max(done.created_ms);
                    add_points(&mut lease.acked_wdl, &mut lease.acked_penta, done.points);
                } else if lease.units.contains(&done.unit) {
                    lease.reported_unstored += 1;
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
        let running: Vec<u64> =
            state.jobs.iter().filter(|(_, j)| j.row.state == "running").map(|(&id, _)| id).collect();
        for id in running {
            let requeue = state.units_to_requeue(id);
            state.jobs.get_mut(&id).expect("listed above").requeue = requeue;
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
            state_changes: tokio::sync::Mutex::new(()),
            endings: tokio::sync::broadcast::channel(ENDINGS_HELD).0,
        }
    }
}

impl JobState {
    /// Counts the job's units read back from storage, in the order they counted: its
    /// done set, each worker's pairs and failures, its stamp and, for a match that
    /// runs (`running`), its course. At start, and when a test that ended before the
    /// start is resumed.
    pub(super) fn count_stored(&mut self, stored: &[DoneUnit], running: bool) {
        let mut course = (matches!(*self.spec, JobSpec::Match(_)) && running).then(Course::default);
        for unit in stored {
            if !self.done.insert(unit.unit) {
                continue;
            }
            self.by_worker.entry(unit.worker_id as u64).or_default()[pair_slot(unit.points)] += 1;
            self.failures.add_pair(unit.worker_id as u64, unit.abandoned);
            if let Some(course) = &mut course {
                course.add(unit.created_ms, unit.points);
            }
            self.stamped_ms = self.stamped_ms.max(unit.created_ms);
        }
        if course.is_some() {
            self.course = course;
        }
    }
}
