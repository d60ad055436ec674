//! Leases: units handed to a worker, sized by its measured speed and its pace, alive
//! while its heartbeats come, expired and requeued when they stop.

use crate::jobs::{JobSpec, Scaling};
use crate::scheduler::config::SchedulerConfig;
use crate::scheduler::pace::units_allowed;
use crate::scheduler::{ACTIVE, LeaseContext, LeaseState, QUARANTINED, ScheduleError, Scheduler, State};
use crate::storage::changes::Change;
use crate::storage::now_ms;
use crate::storage::rows::LeaseRow;
use prost::Message;
use std::collections::HashSet;
use std::time::Instant;
use xq_proto::builds::{best_build, for_processor};
use xq_proto::game_threads;
use xq_proto::v1;

/// The speed factor of a worker: how much slower than the reference it is.
pub(super) fn slowness(config: &SchedulerConfig, capabilities: &v1::Capabilities) -> f64 {
    if config.reference_nps == 0 || capabilities.bench_nps == 0 {
        return 1.0;
    }
    xq_proto::speed::bounded(config.reference_nps as f64 / capabilities.bench_nps as f64)
}

/// How a lease of `spec` fits its clocks to a worker `slowness` times slower than the
/// reference: a match whose engines carry their submitter's bench speed is scaled by
/// those engines' speed on the worker (when the coordinator scales at all), anything
/// else by our engine's.
pub(super) fn scaling(config: &SchedulerConfig, slowness: f64, spec: &JobSpec) -> Scaling {
    match spec {
        JobSpec::Match(m) if config.reference_nps != 0 && xq_proto::speed::scales_by_engines(m.engines()) => {
            Scaling::ByEngines
        }
        _ => Scaling::By(slowness),
    }
}

/// Plies a game is assumed to last when sizing leases.
const ASSUMED_PLIES: u32 = 160;

/// The estimated seconds of one of `spec`'s units on a worker whose clocks are scaled
/// by `scaling` and whose bench gives `nps`: what leases are sized by, and how long
/// heartbeats may keep one.
pub(super) fn unit_seconds(spec: &JobSpec, scaling: Scaling, nps: u64) -> f64 {
    let nps = nps.max(1);
    // A lease its worker scales may be scaled as far as the slowest worker's.
    let slowness = match scaling {
        Scaling::By(slowness) => slowness,
        Scaling::ByEngines => xq_proto::speed::SLOWEST,
    };
    match spec {
        JobSpec::Match(m) => m.pair_seconds(slowness, ASSUMED_PLIES, nps),
        JobSpec::SelfPlay(r) => r.spec.as_ref().map_or(0.0, |spec| {
            f64::from(spec.games_per_unit) * f64::from(ASSUMED_PLIES) * spec.nodes as f64 / nps as f64
        }),
        JobSpec::Verify(v) => v.unit_seconds(ASSUMED_PLIES, nps),
        JobSpec::Unreadable(_) => 0.0,
    }
}

/// How many times its estimated length heartbeats may keep a lease.
const MAX_LEASE_AGE_FACTOR: f64 = 3.0;

/// The latest moment heartbeats may keep a lease taken at `taken` alive: three times its
/// estimated length (its `units` of `unit_seconds` each, `at_once` at a time, and at
/// least the work a lease is sized for) past its taking, plus the time-to-live. A
/// worker that reports only its good pairs and beats for the rest kept them out of the
/// expiry check for good (F9 of the 2026-11-28 review); past this its lease is not
/// extended, so it expires, and counts as expired.
pub(super) fn held_until(
    config: &SchedulerConfig,
    taken: Instant,
    units: usize,
    unit_seconds: f64,
    at_once: u32,
) -> Instant {
    let estimated = (units as f64 * unit_seconds / f64::from(at_once.max(1))).max(config.lease_seconds);
    let age =
        std::time::Duration::try_from_secs_f64(MAX_LEASE_AGE_FACTOR * estimated).unwrap_or(std::time::Duration::MAX);
    taken.checked_add(age.saturating_add(config.lease_ttl)).unwrap_or(taken + std::time::Duration::from_secs(1 << 40))
}

impl Scheduler {
    /// The most bytes a reply carrying a lease of `spec`'s job (of `units_total` units)
    /// can take: as many units as a lease holds, each numbered as high as the job goes,
    /// the other numbers as long as they can be written, the time control at its longest
    /// and an SPSA probe's values too.
    pub(super) fn largest_lease_reply(&self, spec: &JobSpec, units_total: u64) -> usize {
        let mut work = spec.lease_work(Scaling::By(1.0));
        if let (JobSpec::Match(job), v1::lease::Work::MatchSpec(played)) = (spec, &mut work) {
            job.lengthen_time_controls(played);
            // A lease left to its worker to scale says so in one more field.
            played.scale_by_engine_speed = true;
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
        v1::LeaseReply { lease: Some(lease), required_release: None }.encoded_len()
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
                .filter(|j| j.has_work_for(worker) && !j.suspects.contains_key(&worker) && !j.failed_for(worker))
                .filter(|j| match &*j.spec {
                    JobSpec::Match(m) => {
                        m.request.required_cpu_flags.iter().all(|f| flags.contains(f.as_str()))
                            && m.engines().all(|engine| best_build(engine, &flags).is_some())
                            && game_threads(m.engines()) <= cores
                    }
                    JobSpec::SelfPlay(_) => true,
                    JobSpec::Verify(v) => v.runs_on(&capabilities),
                    JobSpec::Unreadable(_) => false,
                })
                .min_by_key(|j| (std::cmp::Reverse(j.row.priority), j.load(), j.row.id))
                .map(|j| j.row.id as u64);
            let Some(job_id) = chosen else { return Ok(None) };
            let slowness = slowness(&self.config, &capabilities);
            // A game of engines with N threads each holds N of its cores.
            let threads = match &*state.jobs[&job_id].spec {
                JobSpec::Match(m) => game_threads(m.engines()),
                _ => 1,
            };
            let concurrency = (concurrency.clamp(1, cores) / threads).max(1);
            let job = state.jobs.get_mut(&job_id).expect("chosen from the map");
            let scaling = scaling(&self.config, slowness, &job.spec);
            let mut work = job.spec.lease_work(scaling);
            // Each engine as the build this worker's processor runs (chosen above).
            if let v1::lease::Work::MatchSpec(spec) = &mut work {
                for engine in [&mut spec.new_engine, &mut spec.base_engine] {
                    *engine = engine.as_ref().and_then(|e| for_processor(e, &flags));
                }
            }
            let unit_seconds = unit_seconds(&job.spec, scaling, capabilities.bench_nps);
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
            // The cores it holds, which its time is credited at: a slot a game at
            // once, as many as its units fill (a self-play batch's games are played
            // side by side, a pair's one after the other).
            let side_by_side = match &*state.jobs[&job_id].spec {
                spec @ JobSpec::SelfPlay(_) => spec.games_per_unit().max(1) as usize,
                _ => 1,
            };
            let cores_held = (concurrency as usize).min(units.len() * side_by_side) as u32 * threads;
            let taken_ms = now_ms();
            let row = LeaseRow {
                id: id as i64,
                job_id: job_id as i64,
                worker_id: worker as i64,
                units: units.clone(),
                state: "active".to_owned(),
                probe,
                cores: i64::from(cores_held.max(1)),
                created_ms: taken_ms,
            };
            state.leases.insert(
                id,
                LeaseState {
                    row: row.clone(),
                    units: units.iter().copied().collect(),
                    slowness,
                    unit_seconds,
                    deadline: now + self.config.lease_ttl,
                    held_until: held_until(&self.config, now, units.len(), unit_seconds, concurrency),
                    acked: HashSet::new(),
                    acked_wdl: [0; 3],
                    acked_penta: [0; 5],
                    reported_unstored: 0,
                    active: true,
                    closed_at: None,
                    last_report_ms: taken_ms,
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
    pub(super) fn close_lease(&self, id: u64, requeue: bool) -> bool {
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
    pub(super) fn lease_ended(&self, id: u64, expired: bool) -> Option<(u64, String)> {
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
    pub(super) fn forget_closed_leases(&self, now: Instant) {
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

    /// Takes `lease`'s cumulative totals as reported when they hold up to
    /// `reported_unstored` pairs more than its rows show (`wdl` and `penta` those extra
    /// pairs): pairs of its units another lease's row counts, which it reported before
    /// a restart (item 17 of the 2026-11-28 review: an honest worker's next report was
    /// refused as totals that disagree). Their points are the worker's word, but they
    /// count nowhere: only the units' stored rows count. Returns whether they fit.
    pub fn adopt_reported_before(&self, lease: u64, wdl: [u64; 3], penta: [u64; 5]) -> bool {
        let mut state = self.lock();
        let Some(entry) = state.leases.get_mut(&lease) else { return false };
        let pairs: u64 = penta.iter().sum();
        // Each pair is two games; a pair's score in half points is its bucket.
        let half_points = |wdl: [u64; 3]| 2 * wdl[0] + wdl[1];
        let bucket_points: u64 = penta.iter().enumerate().map(|(bucket, n)| bucket as u64 * n).sum();
        if pairs == 0
            || pairs > entry.reported_unstored
            || wdl.iter().sum::<u64>() != 2 * pairs
            || half_points(wdl) != bucket_points
        {
            return false;
        }
        entry.reported_unstored -= pairs;
        for (total, add) in entry.acked_wdl.iter_mut().zip(wdl) {
            *total += add;
        }
        for (total, add) in entry.acked_penta.iter_mut().zip(penta) {
            *total += add;
        }
        true
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
            scaling: scaling(&self.config, entry.slowness, &job.spec),
            reported_unstored: entry.reported_unstored,
        })
    }
}
